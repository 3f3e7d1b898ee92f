//! Profiling aid: replays one built-in trace under one configuration on one thread and
//! prints the wall time and the run's shape (no table).
//!
//! `cargo run --release -p placer-lab --example replay_one -- mixed 0.1 kep5732 [seed]`

use placer_lab::{configs, generators, replay, ReplayOptions};

/// The allocator of the `placer` binary, so that profiles match `placer replay`'s.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = args.first().map_or("mixed", String::as_str);
    let scale: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(0.1);
    let config = args.get(2).map_or("kep5732", String::as_str);
    let seed: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1);
    let trace = match generators::builtin(name, seed, scale) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let config = match configs::select(&[config.to_string()]) {
        Ok(mut c) => c.remove(0),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    match replay(&trace, &config, &ReplayOptions::default()) {
        Ok(r) => println!(
            "{name} x{scale} {}: {:.2} s wall, {} samples, end {} ms, {:?}; scheduler {:.2} s, job controller {:.2}, \
             kubelet {:.2}, lab {:.2}, samples {:.2}; {} instants, {} rounds",
            r.config,
            r.wall_seconds,
            r.samples.len(),
            r.end_ms,
            r.stop,
            r.time.scheduler,
            r.time.job_controller,
            r.time.kubelet,
            r.time.lab,
            r.time.samples,
            r.time.instants,
            r.time.rounds
        ),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
