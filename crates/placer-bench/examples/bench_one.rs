//! Profiling aid: runs one `placer bench` workload (optimized search) a few times in one
//! process and prints ingest, scheduling and end-to-end figures per run, without
//! building the `placer` binary.
//!
//! `cargo run --release -p placer-bench --example bench_one -- b-mixed-gangs 5`; `simulate`
//! runs the `simulate-50k` scenario through the full simulator instead.

use indicatif::ProgressBar;
use placer_bench::{run_simulate, run_workload, Recipe, SimulateShape};
use placer_engine::PlacementSearch;

/// The allocator of the `placer` binary, so that figures match `placer bench`'s.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let id = args.first().map_or("b-mixed-gangs", String::as_str);
    let runs: u32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    if id.starts_with("simulate") {
        for _ in 0..runs {
            match run_simulate(SimulateShape::new(false)) {
                Ok(r) => println!(
                    "{}: load {:.3} s, run {:.3} s, wall {:.3} s, peak {} MiB, bound {}, passed {}",
                    r.id,
                    r.load_seconds,
                    r.run_seconds,
                    r.wall_seconds,
                    r.peak_memory_bytes.unwrap_or(0) >> 20,
                    r.bound_pods,
                    r.passed
                ),
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(1);
                }
            }
        }
        return;
    }
    let Some(recipe) = Recipe::all(false).into_iter().find(|r| r.id().starts_with(id)) else {
        eprintln!("error: no workload whose id starts with {id:?}");
        std::process::exit(2);
    };
    let workload = recipe.build(false);
    for _ in 0..runs {
        let r = run_workload(&workload, PlacementSearch::Optimized, &ProgressBar::hidden());
        println!(
            "{}: apply {:.3} s, schedule {:.3} s, {:.0} pods/s, end to end {:.0} pods/s, digest {}",
            r.id,
            r.apply_seconds,
            r.schedule_seconds,
            r.pods_per_second,
            r.end_to_end_pods_per_second,
            r.decisions_digest
        );
    }
}
