//! The failure benchmark (issue 15): 5,000 nodes in 250 racks running rack-constrained gang
//! Jobs, 1 % of the nodes failing at random times over two hours of virtual time.
//!
//! `cargo run --release -p placer-sim --example failure_bench [-- racks hosts failures]`

use placer_sim::failure_bench::{run_failure_bench, FailureBench};

fn main() {
    let args: Vec<u32> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let b = match args[..] {
        [racks, hosts, failures, ..] => FailureBench::scaled(racks, hosts, failures),
        _ => FailureBench::standard(),
    };
    match run_failure_bench(&b) {
        Ok(r) => println!("{r}"),
        Err(e) => {
            eprintln!("failure benchmark: {e}");
            std::process::exit(1);
        }
    }
}
