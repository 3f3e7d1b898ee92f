//! Metrics: a small registry rendered in the Prometheus text exposition format (0.0.4).
//!
//! The engine reports through the [`Observer`] trait with metric names chosen at run time
//! (`scheduler_placement_total`, ...), so families are created on first use instead of
//! being registered up front. The exposition is written by hand: counters keep the name
//! the engine gives them (no `_total` suffix is added), histograms get buckets that fit
//! their unit (seconds or counts).
//!
//! Besides the engine's metrics, `placer serve` exports its own (see the `PLACER_*`
//! constants): binding latency, API requests and retries, watch events, leadership and
//! the number of pods waiting for this scheduler.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use placer_engine::Observer;

/// Histogram: seconds from the pod binding request to the API server's answer, by result.
pub const BINDING_DURATION: &str = "placer_binding_duration_seconds";
/// Counter: Kubernetes API write requests, by verb, kind and HTTP code (0 = no answer).
pub const API_REQUESTS: &str = "placer_api_requests_total";
/// Counter: retries of API requests after a transient error, by verb.
pub const API_RETRIES: &str = "placer_api_retries_total";
/// Counter: changes the watch cache recorded, by kind and type.
pub const WATCH_EVENTS: &str = "placer_watch_events_total";
/// Counter: watch restarts that relisted a kind (watch expiry, reconnects).
pub const RELISTS: &str = "placer_relists_total";
/// Gauge: 1 while this replica holds the leader lease (or runs without leader election).
pub const LEADER: &str = "placer_leader";
/// Gauge: pods whose `schedulerName` is this scheduler's and which are not bound yet.
pub const PENDING_PODS: &str = "placer_pending_pods";
/// Gauge: 1 once every watched kind has been listed.
pub const CACHE_SYNCED: &str = "placer_cache_synced";
/// Counter: controller reconcile errors, by controller.
pub const RECONCILE_ERRORS: &str = "placer_reconcile_errors_total";
/// Counter: events that could not be handed to the API (queue full or API error).
pub const EVENTS_DROPPED: &str = "placer_events_dropped_total";

const SECONDS_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    30.0,
];
const COUNT_BUCKETS: &[f64] =
    &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0];

/// Help texts of metrics Placer knows by name; others get a generic line.
const HELP: &[(&str, &str)] = &[
    (BINDING_DURATION, "Latency of pod binding requests to the API server, by result."),
    (API_REQUESTS, "Kubernetes API write requests, by verb, kind and HTTP code (0: no answer)."),
    (API_RETRIES, "Retries of Kubernetes API requests after transient errors, by verb."),
    (WATCH_EVENTS, "Changes recorded by the watch cache, by kind and type."),
    (RELISTS, "Completed lists of a kind (initial sync, watch expiry, reconnect)."),
    (LEADER, "1 while this replica holds the leader lease or runs without leader election."),
    (PENDING_PODS, "Pods addressed to this scheduler that are not bound yet (queue depth)."),
    (CACHE_SYNCED, "1 once every watched kind has been listed."),
    (RECONCILE_ERRORS, "Controller reconcile errors, by controller."),
    (EVENTS_DROPPED, "Kubernetes events that could not be published."),
];

type Labels = Vec<(String, String)>;

#[derive(Debug)]
enum Family {
    Counter(BTreeMap<Labels, u64>),
    Gauge(BTreeMap<Labels, f64>),
    Histogram { buckets: &'static [f64], series: BTreeMap<Labels, Hist> },
}

impl Family {
    fn type_name(&self) -> &'static str {
        match self {
            Family::Counter(_) => "counter",
            Family::Gauge(_) => "gauge",
            Family::Histogram { .. } => "histogram",
        }
    }
}

#[derive(Debug, Clone)]
struct Hist {
    /// Cumulative counts per bucket upper bound (same order as the bucket list).
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

/// A thread-safe registry of counters, gauges and histograms.
#[derive(Debug, Default)]
pub struct Metrics {
    families: Mutex<BTreeMap<String, Family>>,
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect()
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`: names that are not valid are dropped, never rendered.
fn valid_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn valid_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Metrics {
    pub fn new() -> Arc<Metrics> {
        Arc::new(Metrics::default())
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Family>> {
        // A panic while holding the lock cannot leave a family half-updated in a way that
        // matters for exposition, so a poisoned lock is simply taken over.
        self.families.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn accept(name: &str, pairs: &[(&str, &str)]) -> bool {
        if !valid_metric_name(name) || !pairs.iter().all(|(k, _)| valid_label_name(k)) {
            tracing::debug!(metric = name, "dropping a sample with an invalid metric or label name");
            return false;
        }
        true
    }

    /// Adds `value` to counter `name`.
    pub fn inc_counter(&self, name: &str, pairs: &[(&str, &str)], value: u64) {
        if !Self::accept(name, pairs) {
            return;
        }
        let mut families = self.lock();
        let family = families.entry(name.to_string()).or_insert_with(|| Family::Counter(BTreeMap::new()));
        match family {
            Family::Counter(series) => *series.entry(labels(pairs)).or_default() += value,
            other => tracing::debug!(metric = name, registered = other.type_name(), "metric type mismatch"),
        }
    }

    /// Sets gauge `name`.
    pub fn set_gauge(&self, name: &str, pairs: &[(&str, &str)], value: f64) {
        if !Self::accept(name, pairs) {
            return;
        }
        let mut families = self.lock();
        let family = families.entry(name.to_string()).or_insert_with(|| Family::Gauge(BTreeMap::new()));
        match family {
            Family::Gauge(series) => {
                series.insert(labels(pairs), value);
            }
            other => tracing::debug!(metric = name, registered = other.type_name(), "metric type mismatch"),
        }
    }

    /// Records one observation of histogram `name`. Names ending in `_seconds` get
    /// latency buckets (100µs to 30s), others count buckets (1 to 10000).
    pub fn observe(&self, name: &str, pairs: &[(&str, &str)], value: f64) {
        if !Self::accept(name, pairs) || !value.is_finite() {
            return;
        }
        let mut families = self.lock();
        let family = families.entry(name.to_string()).or_insert_with(|| Family::Histogram {
            buckets: if name.ends_with("_seconds") { SECONDS_BUCKETS } else { COUNT_BUCKETS },
            series: BTreeMap::new(),
        });
        match family {
            Family::Histogram { buckets, series } => {
                let hist = series.entry(labels(pairs)).or_insert_with(|| Hist {
                    counts: vec![0; buckets.len()],
                    sum: 0.0,
                    count: 0,
                });
                for (bound, count) in buckets.iter().zip(hist.counts.iter_mut()) {
                    if value <= *bound {
                        *count += 1;
                    }
                }
                hist.sum += value;
                hist.count += 1;
            }
            other => tracing::debug!(metric = name, registered = other.type_name(), "metric type mismatch"),
        }
    }

    /// The value of a counter series (tests, diagnostics).
    pub fn counter_value(&self, name: &str, pairs: &[(&str, &str)]) -> u64 {
        match self.lock().get(name) {
            Some(Family::Counter(series)) => series.get(&labels(pairs)).copied().unwrap_or(0),
            _ => 0,
        }
    }

    /// The number of observations of a histogram series (tests, diagnostics).
    pub fn histogram_count(&self, name: &str, pairs: &[(&str, &str)]) -> u64 {
        match self.lock().get(name) {
            Some(Family::Histogram { series, .. }) => series.get(&labels(pairs)).map_or(0, |h| h.count),
            _ => 0,
        }
    }

    /// Everything in the Prometheus text format, families sorted by name.
    pub fn render(&self) -> String {
        let families = self.lock();
        let mut out = String::new();
        for (name, family) in families.iter() {
            let help = HELP
                .iter()
                .find(|(n, _)| n == name)
                .map_or_else(|| format!("Placer metric {name}."), |(_, h)| (*h).to_string());
            let _ = writeln!(out, "# HELP {name} {}", escape_help(&help));
            let _ = writeln!(out, "# TYPE {name} {}", family.type_name());
            match family {
                Family::Counter(series) => {
                    for (labels, value) in series {
                        let _ = writeln!(out, "{name}{} {value}", render_labels(labels, None));
                    }
                }
                Family::Gauge(series) => {
                    for (labels, value) in series {
                        let _ = writeln!(out, "{name}{} {}", render_labels(labels, None), fmt_f64(*value));
                    }
                }
                Family::Histogram { buckets, series } => {
                    for (labels, hist) in series {
                        for (bound, count) in buckets.iter().zip(&hist.counts) {
                            let le = fmt_f64(*bound);
                            let _ =
                                writeln!(out, "{name}_bucket{} {count}", render_labels(labels, Some(&le)));
                        }
                        let _ = writeln!(
                            out,
                            "{name}_bucket{} {}",
                            render_labels(labels, Some("+Inf")),
                            hist.count
                        );
                        let _ =
                            writeln!(out, "{name}_sum{} {}", render_labels(labels, None), fmt_f64(hist.sum));
                        let _ = writeln!(out, "{name}_count{} {}", render_labels(labels, None), hist.count);
                    }
                }
            }
        }
        out
    }
}

/// The content type of [`Metrics::render`].
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

fn fmt_f64(v: f64) -> String {
    if v == f64::INFINITY {
        "+Inf".to_string()
    } else if v == f64::NEG_INFINITY {
        "-Inf".to_string()
    } else if v.is_nan() {
        "NaN".to_string()
    } else {
        format!("{v}")
    }
}

fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

fn escape_value(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn render_labels(labels: &Labels, le: Option<&str>) -> String {
    if labels.is_empty() && le.is_none() {
        return String::new();
    }
    let mut parts: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape_value(v))).collect();
    if let Some(le) = le {
        parts.push(format!("le=\"{le}\""));
    }
    format!("{{{}}}", parts.join(","))
}

/// The engine's [`Observer`], writing into a shared [`Metrics`] registry and measuring
/// durations with the monotonic clock.
#[derive(Debug)]
pub struct MetricsObserver {
    metrics: Arc<Metrics>,
    timers: HashMap<u64, Instant>,
    next_token: u64,
}

impl MetricsObserver {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        MetricsObserver { metrics, timers: HashMap::new(), next_token: 1 }
    }
}

impl Observer for MetricsObserver {
    fn count(&mut self, name: &'static str, labels: &[(&'static str, &str)], value: u64) {
        self.metrics.inc_counter(name, labels, value);
    }

    fn observe(&mut self, name: &'static str, labels: &[(&'static str, &str)], value: f64) {
        self.metrics.observe(name, labels, value);
    }

    fn start_timer(&mut self) -> u64 {
        let token = self.next_token;
        self.next_token = self.next_token.wrapping_add(1).max(1);
        // Bounded: a timer that is never read (engine bug) must not leak forever.
        if self.timers.len() >= 10_000 {
            self.timers.clear();
        }
        self.timers.insert(token, Instant::now());
        token
    }

    fn elapsed_seconds(&mut self, token: u64) -> f64 {
        self.timers.remove(&token).map_or(0.0, |start| start.elapsed().as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_keep_the_engine_name_and_render_with_labels() {
        let m = Metrics::default();
        m.inc_counter("scheduler_placement_total", &[("result", "scheduled")], 2);
        m.inc_counter("scheduler_placement_total", &[("result", "scheduled")], 1);
        let text = m.render();
        assert!(text.contains("# TYPE scheduler_placement_total counter\n"), "{text}");
        assert!(text.contains("scheduler_placement_total{result=\"scheduled\"} 3\n"), "{text}");
        assert!(!text.contains("_total_total"));
    }

    #[test]
    fn histograms_render_cumulative_buckets_sum_and_count() {
        let m = Metrics::default();
        m.observe(BINDING_DURATION, &[("result", "ok")], 0.003);
        m.observe(BINDING_DURATION, &[("result", "ok")], 0.2);
        let text = m.render();
        assert!(text.contains("placer_binding_duration_seconds_bucket{result=\"ok\",le=\"0.0025\"} 0\n"));
        assert!(text.contains("placer_binding_duration_seconds_bucket{result=\"ok\",le=\"0.005\"} 1\n"));
        assert!(text.contains("placer_binding_duration_seconds_bucket{result=\"ok\",le=\"0.25\"} 2\n"));
        assert!(text.contains("placer_binding_duration_seconds_bucket{result=\"ok\",le=\"+Inf\"} 2\n"));
        assert!(text.contains("placer_binding_duration_seconds_count{result=\"ok\"} 2\n"));
        assert!(text.contains("# HELP placer_binding_duration_seconds Latency"));
    }

    #[test]
    fn count_histograms_use_count_buckets() {
        let m = Metrics::default();
        m.observe("scheduler_placements_evaluated", &[], 7.0);
        let text = m.render();
        assert!(text.contains("scheduler_placements_evaluated_bucket{le=\"10\"} 1\n"), "{text}");
    }

    #[test]
    fn label_values_are_escaped_and_invalid_names_dropped() {
        let m = Metrics::default();
        m.set_gauge("g", &[("msg", "a\"b\\c\nd")], 1.5);
        m.set_gauge("bad-name", &[], 1.0);
        m.set_gauge("g2", &[("bad-label", "x")], 1.0);
        let text = m.render();
        assert!(text.contains("g{msg=\"a\\\"b\\\\c\\nd\"} 1.5\n"), "{text}");
        assert!(!text.contains("bad"));
    }

    #[test]
    fn a_name_keeps_its_first_type() {
        let m = Metrics::default();
        m.inc_counter("x", &[], 1);
        m.observe("x", &[], 1.0);
        assert!(m.render().contains("# TYPE x counter"));
        assert_eq!(m.counter_value("x", &[]), 1);
    }

    #[test]
    fn observer_timers_measure_and_forget() {
        let mut o = MetricsObserver::new(Metrics::new());
        let t = o.start_timer();
        assert!(o.elapsed_seconds(t) >= 0.0);
        assert_eq!(o.elapsed_seconds(t), 0.0, "a token is read once");
    }
}
