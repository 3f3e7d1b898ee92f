//! The benchmark's [`Observer`]: counts the engine's decisions and placement evaluations
//! and measures its timers with [`std::time::Instant`].

use std::time::Instant;

use placer_engine::metrics::{METRIC_PLACEMENT_EVALUATIONS, METRIC_PLACEMENT_TOTAL};
use placer_engine::metrics::{METRIC_PODGROUP_ATTEMPTS, METRIC_PODGROUP_DURATION, METRIC_SCHEDULE_ATTEMPTS};
use placer_engine::Observer;

/// Counts what the benchmark reports and keeps the engine's per-cycle durations.
#[derive(Debug)]
pub struct BenchObserver {
    epoch: Instant,
    /// `scheduler_placement_evaluations_total` (every result).
    pub placement_evaluations: u64,
    /// `scheduler_placement_total`: candidate placements generated.
    pub placements_generated: u64,
    /// `scheduler_podgroup_schedule_attempts_total` (every result): PodGroup cycles.
    pub group_cycles: u64,
    /// `scheduler_schedule_attempts_total` (every result): single-pod cycles.
    pub pod_cycles: u64,
    /// `scheduler_podgroup_scheduling_duration_seconds` observations, one per PodGroup
    /// cycle, in seconds.
    pub cycle_seconds: Vec<f64>,
}

impl Default for BenchObserver {
    fn default() -> Self {
        BenchObserver::new()
    }
}

impl BenchObserver {
    pub fn new() -> BenchObserver {
        BenchObserver {
            epoch: Instant::now(),
            placement_evaluations: 0,
            placements_generated: 0,
            group_cycles: 0,
            pod_cycles: 0,
            cycle_seconds: Vec::new(),
        }
    }

    /// Nanoseconds since the observer was created (timer tokens are start times, so
    /// nothing is stored per timer and unread timers cost nothing).
    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

impl Observer for BenchObserver {
    fn count(&mut self, name: &'static str, _labels: &[(&'static str, &str)], value: u64) {
        if name == METRIC_PLACEMENT_EVALUATIONS {
            self.placement_evaluations += value;
        } else if name == METRIC_PLACEMENT_TOTAL {
            self.placements_generated += value;
        } else if name == METRIC_PODGROUP_ATTEMPTS {
            self.group_cycles += value;
        } else if name == METRIC_SCHEDULE_ATTEMPTS {
            self.pod_cycles += value;
        }
    }

    fn observe(&mut self, name: &'static str, _labels: &[(&'static str, &str)], value: f64) {
        if name == METRIC_PODGROUP_DURATION {
            self.cycle_seconds.push(value);
        }
    }

    fn start_timer(&mut self) -> u64 {
        self.now_ns()
    }

    fn elapsed_seconds(&mut self, token: u64) -> f64 {
        self.now_ns().saturating_sub(token) as f64 / 1e9
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_metric_name_and_times_with_a_clock() {
        let mut o = BenchObserver::new();
        o.count(METRIC_PLACEMENT_EVALUATIONS, &[("result", "feasible")], 2);
        o.count(METRIC_PLACEMENT_EVALUATIONS, &[("result", "infeasible")], 3);
        o.count(METRIC_PODGROUP_ATTEMPTS, &[("result", "scheduled")], 1);
        o.count(METRIC_SCHEDULE_ATTEMPTS, &[("result", "scheduled")], 4);
        o.count("something_else_total", &[], 9);
        o.observe(METRIC_PODGROUP_DURATION, &[], 0.25);
        assert_eq!((o.placement_evaluations, o.group_cycles, o.pod_cycles), (5, 1, 4));
        assert_eq!(o.cycle_seconds, vec![0.25]);
        let t = o.start_timer();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(o.elapsed_seconds(t) >= 0.001);
    }
}
