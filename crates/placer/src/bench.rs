//! `placer bench`: the performance suite of `placer-bench` (the engine driven in-process,
//! no store): throughput, decision latency, placements evaluated per decision, peak
//! memory, the scaling curve and the speed-up of the optimized placement search over the
//! plain KEP-5732 baseline. See docs/performance.md.
//!
//! Exit code 0 after a run, 2 when `--filter` selects nothing. Figures are printed, never
//! judged: wall-clock thresholds on shared machines are noise.

use std::io::{IsTerminal, Write};

use placer_bench::{report::render_text, run_suite, BenchOptions};

use crate::Status;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only run workloads whose id contains this text (e.g. `b-mixed`, `scaling`).
    #[arg(long, value_name = "S")]
    filter: Option<String>,
    /// Print the report as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Scale every workload down (a smoke run for CI; figures are not comparable).
    #[arg(long)]
    quick: bool,
    /// Also run every selected workload with the baseline placement search (a-upstream and
    /// b-mixed-gangs always are).
    #[arg(long, conflicts_with = "no_baseline")]
    baseline: bool,
    /// Run the optimized search only, no baseline runs and no speed-up table (e.g. to
    /// profile the optimized path alone).
    #[arg(long)]
    no_baseline: bool,
    /// Run the failure benchmark instead (issue 15): 5,000 nodes in 250 racks running
    /// rack-constrained gang Jobs, 1 % of the nodes failing at random times in virtual
    /// time; prints time to recovery p50/p99, gangs repaired in place vs re-placed and
    /// GPU-hours lost. With `--quick`: 10 racks, 2 failures.
    #[arg(long, conflicts_with_all = ["filter", "json", "baseline", "no_baseline"])]
    failures: bool,
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    if args.failures {
        return run_failures(args.quick);
    }
    let options = BenchOptions {
        filter: args.filter,
        quick: args.quick,
        baseline_all: args.baseline,
        no_baseline: args.no_baseline,
        progress: std::io::stderr().is_terminal(),
    };
    if cfg!(debug_assertions) && !args.quick {
        tracing::warn!("placer bench in a debug build: figures are not representative (use --release)");
    }
    let report = run_suite(&options)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        // Rendered first, so a closed pipe surfaces as an io::Error (main treats it as done).
        let json = serde_json::to_string_pretty(&report)?;
        writeln!(out, "{json}")?;
    } else {
        out.write_all(render_text(&report).as_bytes())?;
    }
    out.flush()?;
    Ok(Status::Pass)
}

/// `placer bench --failures`.
fn run_failures(quick: bool) -> anyhow::Result<Status> {
    use placer_sim::failure_bench::{run_failure_bench, FailureBench};
    let b = if quick { FailureBench::scaled(10, 20, 2) } else { FailureBench::standard() };
    if cfg!(debug_assertions) && !quick {
        tracing::warn!("placer bench --failures in a debug build: wall-clock figures are not representative");
    }
    let report = run_failure_bench(&b).map_err(|e| anyhow::anyhow!("failure benchmark: {e}"))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{report}")?;
    out.flush()?;
    Ok(Status::Pass)
}
