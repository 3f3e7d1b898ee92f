//! `/metrics` of `placer serve`: the scheduler's families (`placer_metrics`, the same
//! implementation `placer simulate --metrics FILE` writes) plus serve's own: binding
//! latency, API requests and retries, watch events, leadership and the number of pods
//! waiting for this scheduler. One registry, one OpenMetrics exposition.

use std::sync::Arc;

use placer_metrics::{Clock, FamilySpec, MetricsBuilder, LATENCY_BUCKETS};

pub use placer_metrics::{MetricsObserver, CONTENT_TYPE};

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
/// Counter: watch errors, by kind (each followed by a backoff).
pub const WATCH_ERRORS: &str = "placer_watch_errors_total";
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
/// Gauge: requests waiting for the client rate limiter (`clientConnection.qps`).
pub const RATE_LIMITED: &str = "placer_client_rate_limited_requests";

/// Serve's own families.
pub const SERVE_FAMILIES: &[FamilySpec] = &[
    FamilySpec::histogram(
        BINDING_DURATION,
        "Latency of pod binding requests to the API server, by result.",
        LATENCY_BUCKETS,
    ),
    FamilySpec::counter(
        API_REQUESTS,
        "Kubernetes API write requests, by verb, kind and HTTP code (0: no answer).",
    ),
    FamilySpec::counter(API_RETRIES, "Retries of Kubernetes API requests after transient errors, by verb."),
    FamilySpec::counter(WATCH_EVENTS, "Changes recorded by the watch cache, by kind and type."),
    FamilySpec::counter(RELISTS, "Completed lists of a kind (initial sync, watch expiry, reconnect)."),
    FamilySpec::counter(WATCH_ERRORS, "Watch errors, by kind; each is followed by a backoff."),
    FamilySpec::gauge(LEADER, "1 while this replica holds the leader lease or runs without leader election.")
        .plain(),
    FamilySpec::gauge(PENDING_PODS, "Pods addressed to this scheduler that are not bound yet (queue depth).")
        .plain(),
    FamilySpec::gauge(CACHE_SYNCED, "1 once every watched kind has been listed.").plain(),
    FamilySpec::counter(RECONCILE_ERRORS, "Controller reconcile errors, by controller."),
    FamilySpec::counter(EVENTS_DROPPED, "Kubernetes events that could not be published, by cause."),
    FamilySpec::gauge(
        RATE_LIMITED,
        "API requests waiting for the client rate limiter (clientConnection.qps, burst).",
    )
    .plain(),
];

/// The registry of `placer serve`: scheduler and serve families.
#[derive(Debug, Clone)]
pub struct Metrics {
    inner: placer_metrics::Metrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::build("placer")
    }
}

impl Metrics {
    /// Metrics whose scheduler families carry `profile="placer"`.
    pub fn new() -> Arc<Metrics> {
        Arc::new(Metrics::default())
    }

    /// Metrics for the scheduler profile (`schedulerName`) `profile`.
    pub fn for_profile(profile: &str) -> Arc<Metrics> {
        Arc::new(Metrics::build(profile))
    }

    fn build(profile: &str) -> Metrics {
        let mut b = MetricsBuilder::new();
        b.add(SERVE_FAMILIES);
        Metrics { inner: b.build(profile, Clock::Wall) }
    }

    /// The shared scheduler metrics (for the engine's and the driver's observer).
    pub fn scheduler(&self) -> &placer_metrics::Metrics {
        &self.inner
    }

    pub fn inc_counter(&self, name: &str, pairs: &[(&'static str, &str)], value: u64) {
        self.inner.count(name, pairs, value);
    }

    pub fn set_gauge(&self, name: &str, pairs: &[(&'static str, &str)], value: f64) {
        self.inner.set(name, pairs, value);
    }

    pub fn observe(&self, name: &str, pairs: &[(&'static str, &str)], value: f64) {
        self.inner.observe(name, pairs, value);
    }

    /// The value of a counter series (tests, diagnostics).
    pub fn counter_value(&self, name: &str, pairs: &[(&str, &str)]) -> u64 {
        self.inner.counter_value(name, pairs)
    }

    /// The number of observations of a histogram series (tests, diagnostics).
    pub fn histogram_count(&self, name: &str, pairs: &[(&str, &str)]) -> u64 {
        self.inner.histogram_count(name, pairs)
    }

    /// Everything in the OpenMetrics text format ([`CONTENT_TYPE`]).
    pub fn render(&self) -> String {
        self.inner.render()
    }

    /// The engine's and the driver's observer.
    pub fn observer(&self) -> MetricsObserver {
        self.inner.observer()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_and_scheduler_families_share_one_exposition_with_help() {
        let m = Metrics::for_profile("placer");
        m.observe(BINDING_DURATION, &[("result", "ok")], 0.003);
        m.inc_counter(API_REQUESTS, &[("verb", "bind"), ("kind", "Pod"), ("code", "2xx")], 2);
        m.set_gauge(LEADER, &[], 1.0);
        let mut o = m.observer();
        placer_engine::Observer::count(
            &mut o,
            placer_metrics::PODGROUP_SCHEDULE_ATTEMPTS,
            &[("result", "scheduled")],
            1,
        );
        let text = m.render();
        assert!(text.contains("# HELP placer_binding_duration_seconds Latency"), "{text}");
        assert!(
            text.contains("placer_binding_duration_seconds_bucket{le=\"0.004\",result=\"ok\"} 1"),
            "{text}"
        );
        assert!(text.contains("placer_leader 1.0"), "{text}");
        assert!(!text.contains(".."), "help texts end with one period: {text}");
        assert!(text.contains(
            "scheduler_podgroup_schedule_attempts_total{result=\"scheduled\",profile=\"placer\"} 1"
        ));
        assert_eq!(m.counter_value(API_REQUESTS, &[("verb", "bind"), ("kind", "Pod"), ("code", "2xx")]), 2);
        assert_eq!(m.histogram_count(BINDING_DURATION, &[("result", "ok")]), 1);
    }
}
