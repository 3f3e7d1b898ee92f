//! Serves the test fake of the Kubernetes API (tests/support/fake_apiserver.rs) on
//! 127.0.0.1 with a gang waiting to be scheduled, and reports how long its bindings took.
//! Used to measure `placer serve`'s binding latency with a fixed latency per API call
//! until the end-to-end bed (`placer cluster`) is available:
//!
//! ```sh
//! cargo run --release -p placer-kube --example fake_apiserver -- \
//!     --port 18080 --latency-ms 5 --pods 1024 --nodes 64 --kubeconfig /tmp/fake.kubeconfig
//! placer serve --kubeconfig /tmp/fake.kubeconfig --config serve.yaml   # in another shell
//! ```
//!
//! It exits once every pod is bound (or after `--timeout-s`), printing the time from the
//! first binding request to the last binding answer.

#[path = "../tests/support/fake_apiserver.rs"]
mod fake;

use std::time::{Duration, Instant};

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

#[tokio::main]
async fn main() {
    let port: u16 = arg("--port", "18080").parse().expect("--port");
    let latency = Duration::from_millis(arg("--latency-ms", "5").parse().expect("--latency-ms"));
    let pods: usize = arg("--pods", "1024").parse().expect("--pods");
    let nodes: usize = arg("--nodes", "64").parse().expect("--nodes");
    let timeout = Duration::from_secs(arg("--timeout-s", "120").parse().expect("--timeout-s"));
    let kubeconfig = arg("--kubeconfig", "/tmp/fake-apiserver.kubeconfig");

    let api = fake::FakeApi::new(latency);
    fake::add_nodes(&api, nodes, 8);
    fake::add_gang(&api, "demo", "gang", pods, "placer", None);
    let (addr, _server) = api.serve(port).await;
    std::fs::write(&kubeconfig, fake::kubeconfig(addr)).expect("writing the kubeconfig");
    println!("serving on http://{addr} ({} ms per call), kubeconfig {kubeconfig}", latency.as_millis());

    let start = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let b = api.bindings();
        if b.len() >= pods || start.elapsed() > timeout {
            let first = b.iter().map(|x| x.0).min();
            let last = b.iter().map(|x| x.1).max();
            match (first, last) {
                (Some(f), Some(l)) => println!(
                    "bound {}/{pods} pods: first binding request to last binding answer {:.3} s",
                    b.len(),
                    l.duration_since(f).as_secs_f64()
                ),
                _ => println!("bound 0/{pods} pods"),
            }
            let requests = api.requests();
            println!("requests: {}", requests.len());
            return;
        }
    }
}
