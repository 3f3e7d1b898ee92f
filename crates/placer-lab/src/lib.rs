//! Placer's trace lab: placement quality, measured.
//!
//! A trace ([`trace`]) lists workloads arriving over virtual time (PodGroups, Jobs or
//! single pods, with sizes, requests, topology requests, priority and run time) on a
//! generated cluster. [`generators`] builds the three built-in ones. [`driver::replay`]
//! runs a trace through the full simulator (embedded cluster, Job controller, scheduler
//! with its queue, backoff and preemption, simulated kubelet) under one of the
//! [`configs`] and records what happened; [`summary`] turns that into the measures of
//! [`metrics`] (utilisation, wait percentiles, completions, domains per gang,
//! fragmentation), [`report`] prints the side-by-side table and [`plot`] draws the
//! timelines. `placer replay` is the command line over [`run_lab`].

pub mod configs;
pub mod driver;
pub mod generators;
pub mod metrics;
pub mod objects;
pub mod plot;
pub mod report;
pub mod summary;
pub mod trace;

use serde::Serialize;

pub use configs::LabConfig;
pub use driver::{replay, ReplayError, ReplayOptions, RunResult};
pub use summary::Summary;
pub use trace::{Trace, TraceError};

/// One trace replayed under several configurations.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceReport {
    pub trace: String,
    pub description: Option<String>,
    pub source: String,
    pub nodes: usize,
    pub arrivals: usize,
    pub gangs: usize,
    pub pods: u64,
    /// Short names of the levels domains are counted at (coarsest first).
    pub levels: Vec<String>,
    pub summaries: Vec<Summary>,
    #[serde(skip)]
    pub runs: Vec<RunResult>,
}

/// Replays `trace` under every configuration, `threads` at a time (results in the
/// configurations' order whatever the threads do: each replay is deterministic and
/// independent).
pub fn run_lab(
    trace: &Trace,
    configs: &[LabConfig],
    opts: &ReplayOptions,
    threads: usize,
) -> Result<TraceReport, ReplayError> {
    let threads = threads.clamp(1, configs.len().max(1));
    let mut results: Vec<Option<Result<RunResult, ReplayError>>> = (0..configs.len()).map(|_| None).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots = std::sync::Mutex::new(&mut results);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if i >= configs.len() {
                    break;
                }
                let r = replay(trace, &configs[i], opts);
                if let Ok(mut slots) = slots.lock() {
                    slots[i] = Some(r);
                }
            });
        }
    });
    let mut runs = Vec::with_capacity(configs.len());
    for r in results.into_iter().flatten() {
        runs.push(r?);
    }
    let summaries = runs.iter().zip(configs).map(|(r, c)| Summary::of(trace, c, r)).collect();
    Ok(TraceReport {
        trace: trace.name.clone(),
        description: trace.description.clone(),
        source: trace.source.clone(),
        nodes: trace.cluster.node_count(),
        arrivals: trace.arrivals.len(),
        gangs: trace.gang_count(),
        pods: trace.pod_count(),
        levels: summary::domain_levels(trace).into_iter().map(|l| trace.cluster.short_name(l)).collect(),
        summaries,
        runs,
    })
}
