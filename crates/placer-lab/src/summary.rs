//! One row of the side-by-side table: the measures of [`crate::metrics`] over one replay.

use serde::Serialize;

use crate::configs::LabConfig;
use crate::driver::{RunResult, Stop};
use crate::metrics::{mean, percentile};
use crate::trace::Trace;

/// The levels domains per gang are reported at: every level but the per-node one
/// (`kubernetes.io/hostname`), coarsest first.
pub fn domain_levels(trace: &Trace) -> Vec<usize> {
    let levels = trace.cluster.levels();
    (0..levels.len()).filter(|&l| levels[l] != "kubernetes.io/hostname").collect()
}

/// The measures of one configuration on one trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub config: String,
    pub title: String,
    /// Average utilisation of the trace's device (GPU, or CPU) and of CPU over the loaded
    /// period (from 0 to the last arrival), 0..=1.
    pub device_util: f64,
    pub cpu_util: f64,
    /// Device utilisation over the whole run (to the last completion).
    pub device_util_run: f64,
    /// Gang wait percentiles (seconds) over gangs that started.
    pub wait_p50_s: Option<f64>,
    pub wait_p90_s: Option<f64>,
    pub wait_p99_s: Option<f64>,
    /// Wait p99 of single pods (seconds), when the trace has any.
    pub single_wait_p99_s: Option<f64>,
    pub gangs: usize,
    pub gangs_completed: usize,
    /// Gangs that arrived and never started.
    pub gangs_never_placed: usize,
    /// Single pods that arrived and never started.
    pub singles_never_placed: usize,
    /// Mean distinct domains per started gang, per level of [`domain_levels`].
    pub domains_per_gang: Vec<f64>,
    /// Mean share of free devices on partly used hosts / racks, over samples with free devices.
    pub stranded_hosts: f64,
    pub stranded_racks: f64,
    /// Mean number of median gangs the free capacity could still hold, over the samples.
    pub median_gangs_placeable: f64,
    /// Mean share of free devices median gangs cannot use.
    pub unusable_free: f64,
    /// Times started workloads were preempted.
    pub restarts: u32,
    /// Virtual seconds from the start to the end of the run.
    pub makespan_s: f64,
    pub stopped_at_horizon: bool,
    /// Wall-clock seconds of the replay.
    pub wall_s: f64,
    /// Where they went.
    pub time: crate::driver::PhaseTimes,
}

impl Summary {
    pub fn of(trace: &Trace, config: &LabConfig, run: &RunResult) -> Summary {
        let mut gang_waits = Vec::new();
        let mut single_waits = Vec::new();
        let levels = domain_levels(trace);
        let mut domains: Vec<Vec<f64>> = vec![Vec::new(); levels.len()];
        let (mut gangs, mut completed, mut never, mut singles_never, mut restarts) = (0, 0, 0, 0, 0);
        for (a, rec) in trace.arrivals.iter().zip(&run.records) {
            restarts += rec.restarts;
            if a.at_ms > run.end_ms {
                continue; // never arrived (horizon)
            }
            let wait = rec.start_ms.map(|s| (s.saturating_sub(a.at_ms)) as f64 / 1000.0);
            if a.is_gang() {
                gangs += 1;
                completed += usize::from(rec.end_ms.is_some());
                match wait {
                    Some(w) => {
                        gang_waits.push(w);
                        for (i, &l) in levels.iter().enumerate() {
                            if let Some(&d) = rec.domains.get(l) {
                                domains[i].push(f64::from(d));
                            }
                        }
                    }
                    None => never += 1,
                }
            } else {
                match wait {
                    Some(w) => single_waits.push(w),
                    None => singles_never += 1,
                }
            }
        }
        let with_free: Vec<_> = run.samples.iter().filter(|s| s.frag.free > 0).collect();
        let frag_mean = |f: &dyn Fn(&crate::metrics::Fragmentation) -> f64| {
            mean(&with_free.iter().map(|s| f(&s.frag)).collect::<Vec<_>>()).unwrap_or(0.0)
        };
        let device_index = match run.device {
            crate::metrics::Device::Gpu => 2,
            crate::metrics::Device::Cpu => 0,
        };
        let has_singles = trace.arrivals.iter().any(|a| !a.is_gang());
        Summary {
            config: config.id.to_string(),
            title: config.title.to_string(),
            device_util: run.loaded_average[device_index],
            cpu_util: run.loaded_average[0],
            device_util_run: run.average[device_index],
            wait_p50_s: percentile(&gang_waits, 50.0),
            wait_p90_s: percentile(&gang_waits, 90.0),
            wait_p99_s: percentile(&gang_waits, 99.0),
            single_wait_p99_s: if has_singles { percentile(&single_waits, 99.0) } else { None },
            gangs,
            gangs_completed: completed,
            gangs_never_placed: never,
            singles_never_placed: singles_never,
            domains_per_gang: domains.iter().map(|d| mean(d).unwrap_or(0.0)).collect(),
            stranded_hosts: frag_mean(&|f| f.stranded_hosts_share()),
            stranded_racks: frag_mean(&|f| f.stranded_racks_share()),
            median_gangs_placeable: mean(
                &run.samples.iter().map(|s| s.frag.median_gangs as f64).collect::<Vec<_>>(),
            )
            .unwrap_or(0.0),
            unusable_free: frag_mean(&|f| f.unusable_share()),
            restarts,
            makespan_s: run.end_ms as f64 / 1000.0,
            stopped_at_horizon: run.stop == Stop::Horizon,
            wall_s: run.wall_seconds,
            time: run.time,
        }
    }
}
