//! Binding throughput of `placer serve` over the real API path: `placer cluster` with 5 ms
//! added to every API request (`--latency 5ms`), a 1,024-pod rack gang created with
//! kubectl (kube-rs without it), bound by `placer serve` replicas of several
//! configurations, and by the serial binary of before when one is at hand.
//!
//! ```sh
//! cargo bench -p placer --bench serve_binding
//! PLACER_BENCH_BASE=/work/bin/placer-base-679ac5e cargo bench -p placer --bench serve_binding
//! ```
//!
//! `PLACER_BENCH_PODS` changes the gang's size (default 1024), `PLACER_BENCH_LATENCY` the
//! latency (default `5ms`). For each run it prints, from the API server's own log:
//! `bind span` (first to last binding handled: the wall time the bindings took after the
//! decision), `created->bound` (the last pod's creation to the last binding: watch,
//! decision and bindings) and bindings per second, then the API requests the server handled
//! during the bind span by kind (what competes with the bindings for the server), and the
//! CPU time `placer cluster` and `placer serve` each used during the span (from
//! `/proc/PID/stat`, sampled every 10 ms: on a loaded machine a span much longer than the
//! CPU time is time spent waiting for a core). It checks what it measures: every pod bound
//! exactly once, all in one rack.

#[path = "../tests/bed/mod.rs"]
mod bed;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bed::{domains, rack_gang, scenario, Bed, BedOptions, Driver};

struct Variant {
    name: &'static str,
    binary: PathBuf,
    config: String,
}

struct Figures {
    span: f64,
    created_to_bound: f64,
    per_second: f64,
    /// API requests the server handled during the bind span, by kind (`POST
    /// pods/binding`, `PUT pods/status`, ...), most frequent first.
    during: Vec<(String, usize)>,
    /// CPU seconds of `placer cluster` and of `placer serve` during the bind span.
    cpu: Option<(f64, f64)>,
}

/// User plus system CPU seconds of process `pid` so far (Linux `/proc`).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name (which may hold spaces) in parentheses.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // USER_HZ is 100 on every Linux platform the bench runs on.
    Some(ticks / 100.0)
}

/// A sample: seconds since midnight UTC, then the CPU seconds of each process.
type Sample = (f64, Vec<f64>);

/// Samples the CPU time of some processes every 10 ms, stamped like the logs (seconds
/// since midnight UTC), until dropped.
struct CpuSampler {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<Sample>>>,
}

impl Drop for CpuSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl CpuSampler {
    fn start(pids: Vec<u32>) -> CpuSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !flag.load(Ordering::SeqCst) {
                let now =
                    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64()) % 86_400.0;
                match pids.iter().map(|p| cpu_seconds(*p)).collect::<Option<Vec<f64>>>() {
                    Some(cpu) => samples.push((now, cpu)),
                    None => break,
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            samples
        });
        CpuSampler { stop, thread: Some(thread) }
    }

    /// CPU seconds each process used from the last sample at or before `from` to the
    /// first at or after `to`.
    fn used(mut self, from: f64, to: f64) -> Option<Vec<f64>> {
        self.stop.store(true, Ordering::SeqCst);
        let samples = self.thread.take()?.join().ok()?;
        let start = samples.iter().rev().find(|(t, _)| *t <= from)?;
        let end = samples.iter().find(|(t, _)| *t >= to)?;
        Some(end.1.iter().zip(&start.1).map(|(e, s)| e - s).collect())
    }
}

/// `VERB resource[/subresource]` of a logged request (`GET pods` for a read, `LIST`,
/// `WATCH` for collections).
fn request_kind(r: &bed::Logged) -> String {
    match r.rbac() {
        Some((_, resource, verb)) => format!("{} {resource}", verb.to_uppercase()),
        None => format!("{} {}", r.method, r.path),
    }
}

fn env_or(key: &str, default: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| default.to_string())
}

fn wait_log(replica: &bed::Replica, needle: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while !replica.log_text().contains(needle) {
        assert!(
            Instant::now() < deadline,
            "{} never logged {needle:?}:\n{}",
            replica.name,
            replica.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn run(variant: &Variant, pods: usize, latency: &str) -> Figures {
    let mut bed = Bed::start(BedOptions {
        scenario: Some(scenario("big-racks.yaml")),
        cluster_args: vec!["--latency".into(), latency.into()],
        ..BedOptions::default()
    });
    let replica = bed.serve_with(&variant.binary, "bench", &variant.config);
    wait_log(&replica, "caches synced", Duration::from_secs(120));
    let sampler = bed.cluster_pid().map(|cluster| CpuSampler::start(vec![cluster, replica.child.id()]));
    bed.create_manifests("gang", &rack_gang("bench", "gang", pods, "1"));
    bed.wait_for(Duration::from_secs(600), "the whole gang bound", |b| {
        b.binding_times("bench").len() >= pods
    });
    // Let stragglers (a second binding of a pod would be a bug) reach the log.
    std::thread::sleep(Duration::from_secs(1));

    let bound = bed.pods("bench");
    assert_eq!(bound.bound(), pods, "every pod bound");
    let racks = domains(&bound, &bed.node_labels(), "topology.example.com/rack");
    assert_eq!(racks.len(), 1, "the gang spans racks {racks:?}");
    let bindings = bed.bindings();
    assert!(
        bindings.iter().filter(|(p, _)| p.starts_with("bench/")).all(|(_, n)| *n == 1),
        "a pod was bound twice"
    );
    if let Driver::Kubectl(_) = bed.driver {
        let out = bed.kubectl_ok(&[
            "-n",
            "bench",
            "get",
            "pods",
            "--no-headers",
            "-o",
            "custom-columns=NODE:.spec.nodeName",
        ]);
        let on_nodes = out.lines().filter(|l| l.trim() != "<none>").count();
        let pg = bed.kubectl_ok(&[
            "-n",
            "bench",
            "get",
            "podgroup",
            "gang",
            "-o",
            "jsonpath={.status.conditions[0].type}={.status.conditions[0].status}",
        ]);
        eprintln!("  kubectl: {} pods, {on_nodes} on a node; podgroup/gang {pg}", out.lines().count());
    }

    let times = bed.binding_times("bench");
    let (first, last) = (times[0], times[times.len() - 1]);
    let last_created = bed
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path == "/api/v1/namespaces/bench/pods")
        .map(|r| r.at)
        .fold(f64::NAN, f64::max);
    let span = last - first;
    let cpu = sampler.and_then(|s| s.used(first, last)).map(|c| (c[0], c[1]));
    let mut during: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for r in bed.requests().iter().filter(|r| r.at >= first && r.at <= last) {
        *during.entry(request_kind(r)).or_default() += 1;
    }
    let mut during: Vec<(String, usize)> = during.into_iter().collect();
    during.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Figures {
        span,
        created_to_bound: last - last_created,
        per_second: (pods - 1) as f64 / span.max(1e-9),
        during,
        cpu,
    }
}

fn main() {
    let pods: usize = env_or("PLACER_BENCH_PODS", "1024").parse().expect("PLACER_BENCH_PODS: a number");
    let latency = env_or("PLACER_BENCH_LATENCY", "5ms");
    let this = PathBuf::from(env!("CARGO_BIN_EXE_placer"));
    let base_config = "schedulerName: placer\nleaderElection: {enabled: false}\nmetricsAddr: 127.0.0.1:0\n";
    let mut variants = vec![
        Variant {
            name: "binding.concurrency 64, qps unlimited",
            binary: this.clone(),
            config: format!("{base_config}clientConnection: {{qps: -1}}\nbinding: {{concurrency: 64}}\n"),
        },
        Variant {
            name: "binding.concurrency 16, qps unlimited",
            binary: this.clone(),
            config: format!("{base_config}clientConnection: {{qps: -1}}\nbinding: {{concurrency: 16}}\n"),
        },
        Variant {
            name: "binding.concurrency 1, qps unlimited",
            binary: this.clone(),
            config: format!("{base_config}clientConnection: {{qps: -1}}\nbinding: {{concurrency: 1}}\n"),
        },
    ];
    if let Ok(base) = std::env::var("PLACER_BENCH_BASE") {
        if Path::new(&base).is_file() {
            variants.push(Variant {
                name: "before: serial on the scheduling thread",
                binary: PathBuf::from(base),
                config: base_config.to_string(),
            });
        } else {
            eprintln!("PLACER_BENCH_BASE={base} is not a file; skipping the serial binary");
        }
    }
    println!(
        "placer serve on placer cluster --latency {latency}: one {pods}-pod rack gang, two racks of 16 hosts"
    );
    println!("{:<44} {:>13} {:>15} {:>11}", "serve", "bind span s", "created->bound s", "bindings/s");
    for v in &variants {
        let f = run(v, pods, &latency);
        println!("{:<44} {:>13.3} {:>15.3} {:>11.0}", v.name, f.span, f.created_to_bound, f.per_second);
        let during: Vec<String> = f.during.iter().map(|(k, n)| format!("{k} {n}")).collect();
        println!("  requests during the span: {}", during.join(", "));
        if let Some((cluster, serve)) = f.cpu {
            println!("  CPU s during the span: placer cluster {cluster:.2}, placer serve {serve:.2}");
        }
    }
}
