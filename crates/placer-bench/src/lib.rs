//! Placer's benchmarks: workload generators and the runner behind `placer bench`.
//!
//! The engine is driven in-process, alone: no store, no I/O, no YAML. Workloads build
//! k8s-openapi `Node` / `Pod` / `PodGroup` objects directly ([`objects`]), feed them as
//! [`placer_engine::ClusterEvent`]s and call [`placer_engine::Engine::schedule`], feeding
//! every binding back as the store would ([`runner`]).
//!
//! * [`workloads`]: the workloads (a)-(e) and the scaling points, deterministic.
//! * [`runner`]: one workload run: pods/s, decision latency percentiles, placements
//!   evaluated per decision, peak memory, share of groups placed.
//! * [`simulate`]: the `simulate` workload, a generated 50,000-node scenario file run
//!   through the full simulator (store, controllers, engine), wall time and peak memory.
//! * [`report`]: the scaling curve, the optimized-vs-baseline comparison, text and JSON.
//! * [`observer`], [`stats`], [`memory`], [`rng`]: the measuring instruments.
//!
//! Entry point: [`run_suite`]. Figures and how to read them: `docs/performance.md`.

pub mod memory;
pub mod objects;
pub mod observer;
pub mod report;
pub mod rng;
pub mod runner;
pub mod simulate;
pub mod stats;
pub mod workloads;

use indicatif::{ProgressBar, ProgressStyle};
use placer_engine::PlacementSearch;

pub use report::{BaselineComparison, BenchReport, ScalingPoint};
pub use runner::{run_workload, WorkloadResult};
pub use simulate::{run_simulate, SimulateResult, SimulateShape};
pub use workloads::{Recipe, Workload};

/// What to run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BenchOptions {
    /// Only workloads whose id contains this substring.
    pub filter: Option<String>,
    /// Scaled-down workloads (CI smoke runs).
    pub quick: bool,
    /// Also run every selected workload with the baseline placement search (by default
    /// only `a-upstream` and `b-mixed-gangs` are).
    pub baseline_all: bool,
    /// Never run the baseline search (overrides the defaults and `baseline_all`).
    pub no_baseline: bool,
    /// Show progress bars (they hide themselves anyway when stderr is not a terminal).
    pub progress: bool,
}

/// Why the suite could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BenchError {
    #[error("no workload matches filter {filter:?} (workloads: {known})")]
    NoMatch { filter: String, known: String },
    #[error("workload {id}: {message}")]
    Simulate { id: String, message: String },
}

/// The `simulate` workload when `options` selects it (no filter, or one its id contains).
pub fn select_simulate(options: &BenchOptions) -> Option<SimulateShape> {
    let shape = SimulateShape::new(options.quick);
    match &options.filter {
        None => Some(shape),
        Some(f) => shape.id().contains(f.as_str()).then_some(shape),
    }
}

/// The workloads `options` selects, in run order.
pub fn select(options: &BenchOptions) -> Result<Vec<Recipe>, BenchError> {
    let all = Recipe::all(options.quick);
    let selected: Vec<Recipe> = match &options.filter {
        None => all.clone(),
        Some(f) => all.iter().copied().filter(|r| r.id().contains(f.as_str())).collect(),
    };
    if selected.is_empty() && select_simulate(options).is_none() {
        let mut known: Vec<String> = all.iter().map(Recipe::id).collect();
        known.push(SimulateShape::new(options.quick).id());
        let known = known.join(", ");
        return Err(BenchError::NoMatch { filter: options.filter.clone().unwrap_or_default(), known });
    }
    Ok(selected)
}

fn progress_bar(options: &BenchOptions, id: &str, search: PlacementSearch) -> ProgressBar {
    if !options.progress {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    if let Ok(style) = ProgressStyle::with_template("{msg:32} [{bar:30}] {pos}/{len} {elapsed}") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(format!("{id} ({})", runner::search_name(search)));
    bar
}

/// Runs the selected workloads (optimized, and baseline where asked), then derives the
/// scaling curve and the baseline comparison.
pub fn run_suite(options: &BenchOptions) -> Result<BenchReport, BenchError> {
    let recipes = select(options)?;
    let mut workloads: Vec<WorkloadResult> = Vec::new();
    let mut baseline: Vec<BaselineComparison> = Vec::new();
    let mut scaling_ids: Vec<String> = Vec::new();
    for recipe in recipes {
        let workload = recipe.build(options.quick);
        let bar = progress_bar(options, &workload.id, PlacementSearch::Optimized);
        let optimized = run_workload(&workload, PlacementSearch::Optimized, &bar);
        bar.finish_and_clear();
        if matches!(recipe, Recipe::Scaling { .. }) {
            scaling_ids.push(optimized.id.clone());
        }
        if !options.no_baseline && (options.baseline_all || recipe.baseline_by_default()) {
            let bar = progress_bar(options, &workload.id, PlacementSearch::Baseline);
            let base = run_workload(&workload, PlacementSearch::Baseline, &bar);
            bar.finish_and_clear();
            baseline.push(BaselineComparison::new(&optimized, &base));
            workloads.push(optimized);
            workloads.push(base);
        } else {
            workloads.push(optimized);
        }
    }
    let points: Vec<&WorkloadResult> = workloads
        .iter()
        .filter(|r| {
            r.search == runner::search_name(PlacementSearch::Optimized) && scaling_ids.contains(&r.id)
        })
        .collect();
    let scaling = if points.is_empty() { Vec::new() } else { report::scaling_curve(&points) };
    let mut simulate = Vec::new();
    if let Some(shape) = select_simulate(options) {
        let bar = if options.progress { ProgressBar::new_spinner() } else { ProgressBar::hidden() };
        bar.set_message(format!("{} (full simulator)", shape.id()));
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        let result =
            run_simulate(shape).map_err(|e| BenchError::Simulate { id: shape.id(), message: e.to_string() });
        bar.finish_and_clear();
        simulate.push(result?);
    }
    Ok(BenchReport {
        quick: options.quick,
        machine: report::Machine::current(),
        workloads,
        scaling,
        baseline,
        simulate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_selects_by_substring() {
        let opts =
            BenchOptions { filter: Some("scaling".to_string()), quick: true, ..BenchOptions::default() };
        let ids: Vec<String> = select(&opts).expect("matches").iter().map(Recipe::id).collect();
        assert_eq!(ids, ["scaling-200", "scaling-400", "scaling-800", "scaling-1600"]);
        let opts = BenchOptions { filter: Some("nope".to_string()), ..BenchOptions::default() };
        let err = select(&opts).expect_err("no match");
        assert!(err.to_string().contains("a-upstream"));
        assert!(err.to_string().contains("simulate-50k"));
        let opts =
            BenchOptions { filter: Some("simulate".to_string()), quick: true, ..BenchOptions::default() };
        assert!(select(&opts).expect("the simulate workload matches").is_empty());
        assert_eq!(select_simulate(&opts).map(|s| s.id()), Some("simulate-1k".to_string()));
    }

    #[test]
    fn quick_suite_for_upstream_compares_with_baseline() {
        let opts =
            BenchOptions { filter: Some("a-upstream".to_string()), quick: true, ..BenchOptions::default() };
        let report = run_suite(&opts).expect("runs");
        assert_eq!(report.workloads.len(), 2);
        assert!(report.simulate.is_empty(), "the filter leaves the simulate workload out");
        assert_eq!(report.workloads[1].search, "baseline");
        assert_eq!(report.baseline.len(), 1);
        assert!(report.scaling.is_empty());
        // Both searches implement the same semantics.
        assert!(report.baseline[0].same_decisions);
        let opts = BenchOptions { no_baseline: true, ..opts };
        let report = run_suite(&opts).expect("runs");
        assert_eq!(report.workloads.len(), 1, "optimized only");
        assert!(report.baseline.is_empty());
    }
}
