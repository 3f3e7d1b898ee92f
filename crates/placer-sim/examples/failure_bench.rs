//! The failure benchmark (issue 15): 5,000 nodes in 250 racks running rack-constrained gang
//! Jobs, 1 % of the nodes failing at random times over two hours of virtual time.
//!
//! `cargo run --release -p placer-sim --example failure_bench [-- racks hosts failures]`

use placer_sim::failure_bench::{run_failure_bench, FailureBench};

fn main() {
    let mut b = FailureBench::standard();
    let args: Vec<u32> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    if let [racks, hosts, failures, ..] = args[..] {
        let scale = f64::from(racks) / f64::from(b.racks);
        b.racks = racks;
        b.hosts_per_rack = hosts;
        b.failures = failures;
        b.full_rack_gangs = ((f64::from(b.full_rack_gangs) * scale).round() as u32).max(1);
        b.partial_gangs = ((f64::from(b.partial_gangs) * scale).round() as u32).max(1);
        b.partial_gang_size = b.partial_gang_size.min(hosts.saturating_sub(2).max(1));
    }
    match run_failure_bench(&b) {
        Ok(r) => println!("{r}"),
        Err(e) => {
            eprintln!("failure benchmark: {e}");
            std::process::exit(1);
        }
    }
}
