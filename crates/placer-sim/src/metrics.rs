//! An in-memory [`Observer`] that keeps the engine's counters and histograms and renders
//! them in the Prometheus text exposition format.
//!
//! [`MetricsRecorder`] is a cheap handle: clones share the same data, so the simulator
//! hands one clone to the scheduler and keeps another to read the metrics afterwards.
//! Timers measure wall-clock time only when asked to ([`MetricsRecorder::with_wall_clock`]);
//! by default every duration is 0, which keeps the output deterministic.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use placer_engine::Observer;

/// Histogram bucket upper bounds (seconds): kube-scheduler's `ExponentialBuckets(0.001, 2, 15)`.
pub const BUCKETS: [f64; 15] = [
    0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192, 16.384,
];

type Labels = Vec<(&'static str, String)>;

#[derive(Debug, Clone, Default)]
struct Histogram {
    /// Cumulative counts per bucket of [`BUCKETS`].
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

#[derive(Debug, Default)]
struct Registry {
    counters: BTreeMap<&'static str, BTreeMap<Labels, u64>>,
    histograms: BTreeMap<&'static str, BTreeMap<Labels, Histogram>>,
    timers: BTreeMap<u64, Instant>,
    next_timer: u64,
}

/// Collects metrics; see the module documentation.
#[derive(Debug, Clone, Default)]
pub struct MetricsRecorder {
    inner: Arc<Mutex<Registry>>,
    wall_clock: bool,
}

impl MetricsRecorder {
    /// A recorder whose timers report 0 seconds (deterministic output).
    pub fn new() -> Self {
        Self::default()
    }

    /// A recorder whose timers measure wall-clock time.
    pub fn with_wall_clock() -> Self {
        MetricsRecorder { inner: Arc::default(), wall_clock: true }
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        // A panic while holding the lock cannot leave the maps inconsistent (every update
        // is a single insertion), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Current value of a counter (0 when never counted).
    pub fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        let reg = self.lock();
        reg.counters
            .get(name)
            .and_then(|series| series.iter().find(|(l, _)| same_labels(l, labels)).map(|(_, v)| *v))
            .unwrap_or(0)
    }

    /// Number of observations of a histogram series.
    pub fn histogram_count(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        let reg = self.lock();
        reg.histograms
            .get(name)
            .and_then(|series| series.iter().find(|(l, _)| same_labels(l, labels)).map(|(_, h)| h.count))
            .unwrap_or(0)
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        let reg = self.lock();
        reg.counters.is_empty() && reg.histograms.is_empty()
    }

    /// The Prometheus text format of everything recorded, sorted by name and labels.
    pub fn render(&self) -> String {
        let reg = self.lock();
        let mut out = String::new();
        for (name, series) in &reg.counters {
            let _ = writeln!(out, "# TYPE {name} counter");
            for (labels, value) in series {
                let _ = writeln!(out, "{name}{} {value}", render_labels(labels, None));
            }
        }
        for (name, series) in &reg.histograms {
            let _ = writeln!(out, "# TYPE {name} histogram");
            for (labels, h) in series {
                for (bound, count) in BUCKETS.iter().zip(h.buckets) {
                    let _ = writeln!(
                        out,
                        "{name}_bucket{} {count}",
                        render_labels(labels, Some(&bound.to_string()))
                    );
                }
                let _ = writeln!(out, "{name}_bucket{} {}", render_labels(labels, Some("+Inf")), h.count);
                let _ = writeln!(out, "{name}_sum{} {}", render_labels(labels, None), h.sum);
                let _ = writeln!(out, "{name}_count{} {}", render_labels(labels, None), h.count);
            }
        }
        out
    }
}

fn same_labels(stored: &Labels, wanted: &[(&str, &str)]) -> bool {
    let mut wanted: Vec<_> = wanted.to_vec();
    wanted.sort();
    stored.len() == wanted.len() && stored.iter().zip(&wanted).all(|((k, v), (wk, wv))| k == wk && v == wv)
}

fn owned_labels(labels: &[(&'static str, &str)]) -> Labels {
    let mut l: Labels = labels.iter().map(|(k, v)| (*k, v.to_string())).collect();
    l.sort();
    l
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn render_labels(labels: &Labels, le: Option<&str>) -> String {
    let mut parts: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
    if let Some(le) = le {
        parts.push(format!("le=\"{le}\""));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

impl Observer for MetricsRecorder {
    fn count(&mut self, name: &'static str, labels: &[(&'static str, &str)], value: u64) {
        let mut reg = self.lock();
        let slot = reg.counters.entry(name).or_default().entry(owned_labels(labels)).or_insert(0);
        *slot = slot.saturating_add(value);
    }

    fn observe(&mut self, name: &'static str, labels: &[(&'static str, &str)], value: f64) {
        let mut reg = self.lock();
        let h = reg.histograms.entry(name).or_default().entry(owned_labels(labels)).or_default();
        for (bound, slot) in BUCKETS.iter().zip(h.buckets.iter_mut()) {
            if value <= *bound {
                *slot += 1;
            }
        }
        h.count += 1;
        h.sum += value;
    }

    fn start_timer(&mut self) -> u64 {
        if !self.wall_clock {
            return 0;
        }
        let mut reg = self.lock();
        reg.next_timer += 1;
        let token = reg.next_timer;
        reg.timers.insert(token, Instant::now());
        token
    }

    fn elapsed_seconds(&mut self, token: u64) -> f64 {
        if !self.wall_clock {
            return 0.0;
        }
        let mut reg = self.lock();
        reg.timers.remove(&token).map_or(0.0, |t| t.elapsed().as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_add_up_per_label_set_and_clones_share_data() {
        let m = MetricsRecorder::new();
        let mut handle = m.clone();
        handle.count("scheduler_placement_total", &[], 2);
        handle.count("scheduler_placement_total", &[], 3);
        handle.count("scheduler_placement_evaluations_total", &[("result", "feasible")], 1);
        assert_eq!(m.counter("scheduler_placement_total", &[]), 5);
        assert_eq!(m.counter("scheduler_placement_evaluations_total", &[("result", "feasible")]), 1);
        assert_eq!(m.counter("scheduler_placement_evaluations_total", &[("result", "infeasible")]), 0);
    }

    #[test]
    fn renders_prometheus_text_sorted() {
        let mut m = MetricsRecorder::new();
        m.count("b_total", &[("result", "x\"y")], 1);
        m.count("a_total", &[], 4);
        m.observe("d_seconds", &[("result", "feasible")], 0.003);
        let text = m.render();
        let expected =
            "# TYPE a_total counter\na_total 4\n# TYPE b_total counter\nb_total{result=\"x\\\"y\"} 1\n\
                        # TYPE d_seconds histogram\n";
        assert!(text.starts_with(expected), "{text}");
        assert!(text.contains("d_seconds_bucket{result=\"feasible\",le=\"0.002\"} 0\n"), "{text}");
        assert!(text.contains("d_seconds_bucket{result=\"feasible\",le=\"0.004\"} 1\n"), "{text}");
        assert!(text.contains("d_seconds_bucket{result=\"feasible\",le=\"+Inf\"} 1\n"), "{text}");
        assert!(text.contains("d_seconds_count{result=\"feasible\"} 1\n"), "{text}");
        assert_eq!(m.histogram_count("d_seconds", &[("result", "feasible")]), 1);
    }

    #[test]
    fn timers_are_zero_without_a_wall_clock() {
        let mut m = MetricsRecorder::new();
        let t = m.start_timer();
        assert_eq!(m.elapsed_seconds(t), 0.0);
        let mut w = MetricsRecorder::with_wall_clock();
        let t = w.start_timer();
        assert!(w.elapsed_seconds(t) >= 0.0);
        assert!(m.is_empty());
    }
}
