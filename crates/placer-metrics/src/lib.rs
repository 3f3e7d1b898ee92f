//! The scheduler's metrics, with the names, labels and buckets kube-scheduler v1.36 uses,
//! on `prometheus-client`: one implementation for `placer serve` (`/metrics`) and
//! `placer simulate --metrics FILE`.
//!
//! * [`MetricsBuilder`] registers every scheduler family up front (with `# HELP` text);
//!   a home adds its own families through [`MetricsBuilder::registry_mut`] (serve: API
//!   requests, watch cache, leadership) and then builds a shared [`Metrics`].
//! * [`Metrics::observer`] is the engine's and the driver's [`Observer`]: it maps the names
//!   they report (`scheduler_podgroup_schedule_attempts_total`, ...) onto the typed
//!   families, adds the `profile` label where upstream has it, and measures durations with
//!   the wall clock ([`Clock::Wall`]) or reports 0 for deterministic output
//!   ([`Clock::Frozen`]).
//! * [`Metrics::render`] writes the OpenMetrics text exposition (`# HELP`, `# TYPE`,
//!   counters with `_total`, `# EOF`).
//!
//! Names reported through the observer that no family knows are dropped with a debug log;
//! a test keeps the engine's and the driver's names and the families in step.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use placer_engine::Observer;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub mod names;

pub use names::*;

/// The content type of [`Metrics::render`].
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A label set: (name, value) pairs in upstream's order.
pub type Labels = Vec<(&'static str, String)>;

/// Histogram buckets as upstream declares them: `ExponentialBuckets(start, factor, count)`,
/// computed the way Go does (each bound the previous one times the factor).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Buckets {
    pub start: f64,
    pub factor: f64,
    pub count: u16,
}

impl Buckets {
    pub const fn exponential(start: f64, factor: f64, count: u16) -> Buckets {
        Buckets { start, factor, count }
    }

    /// The upper bounds.
    pub fn bounds(&self) -> Vec<f64> {
        let mut out = Vec::with_capacity(usize::from(self.count));
        let mut b = self.start;
        for _ in 0..self.count {
            out.push(b);
            b *= self.factor;
        }
        out
    }
}

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(self.bounds())
    }
}

/// `ExponentialBuckets(0.001, 2, 15)`: scheduling and PodGroup attempt / algorithm latency.
pub const LATENCY_BUCKETS: Buckets = Buckets::exponential(0.001, 2.0, 15);
/// `ExponentialBuckets(0.01, 2, 20)`: end-to-end pod scheduling (SLI) duration.
pub const E2E_BUCKETS: Buckets = Buckets::exponential(0.01, 2.0, 20);
/// `ExponentialBuckets(1, 2, 5)`: attempts to schedule a pod.
pub const ATTEMPT_BUCKETS: Buckets = Buckets::exponential(1.0, 2.0, 5);
/// `ExponentialBuckets(0.00001, 1.5, 20)`: one plugin at one extension point.
pub const PLUGIN_BUCKETS: Buckets = Buckets::exponential(0.00001, 1.5, 20);
/// `ExponentialBuckets(1, 2, 7)`: victims of a pod's preemption.
pub const VICTIM_BUCKETS: Buckets = Buckets::exponential(1.0, 2.0, 7);
/// `ExponentialBuckets(1, 2, 11)`: victims of a workload's preemption.
pub const WORKLOAD_VICTIM_BUCKETS: Buckets = Buckets::exponential(1.0, 2.0, 11);

pub type CounterFamily = Family<Labels, Counter>;
pub type GaugeFamily = Family<Labels, Gauge<f64, AtomicU64>>;
pub type HistogramFamily = Family<Labels, Histogram, Buckets>;

/// A registered family, addressed by its exposition name.
#[derive(Debug, Clone)]
enum Slot {
    Counter(CounterFamily),
    Gauge(GaugeFamily),
    Histogram(HistogramFamily),
    PlainCounter(Counter),
    PlainGauge(Gauge<f64, AtomicU64>),
    PlainHistogram(Histogram),
}

/// A family: exposition name, help, kind, and whether it is labelled by profile or has no
/// labels at all (a plain metric, exposed at zero from the start as upstream's are).
#[derive(Debug, Clone, Copy)]
pub struct FamilySpec {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: FamilyKind,
    /// Upstream labels it with `profile` (added by the observer when missing).
    pub profile: bool,
    /// No labels.
    pub plain: bool,
}

/// What a family holds.
#[derive(Debug, Clone, Copy)]
pub enum FamilyKind {
    Counter,
    Gauge,
    Histogram(Buckets),
}

impl FamilySpec {
    pub const fn counter(name: &'static str, help: &'static str) -> FamilySpec {
        FamilySpec { name, help, kind: FamilyKind::Counter, profile: false, plain: false }
    }
    pub const fn gauge(name: &'static str, help: &'static str) -> FamilySpec {
        FamilySpec { name, help, kind: FamilyKind::Gauge, profile: false, plain: false }
    }
    pub const fn histogram(name: &'static str, help: &'static str, buckets: Buckets) -> FamilySpec {
        FamilySpec { name, help, kind: FamilyKind::Histogram(buckets), profile: false, plain: false }
    }
    pub const fn by_profile(self) -> FamilySpec {
        FamilySpec { profile: true, ..self }
    }
    pub const fn plain(self) -> FamilySpec {
        FamilySpec { plain: true, ..self }
    }
}

/// Every scheduler family, with upstream's help text.
pub const SCHEDULER_FAMILIES: &[FamilySpec] = &[
    FamilySpec::counter(SCHEDULE_ATTEMPTS, "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.").by_profile(),
    FamilySpec::histogram(SCHEDULING_ATTEMPT_DURATION, "Scheduling attempt latency in seconds (scheduling algorithm + binding)", LATENCY_BUCKETS).by_profile(),
    FamilySpec::histogram(SCHEDULING_ALGORITHM_DURATION, "Scheduling algorithm latency in seconds", LATENCY_BUCKETS).plain(),
    FamilySpec::gauge(PENDING_PODS, "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulableEntities that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never attempted to schedule because they are gated."),
    FamilySpec::gauge(PENDING_ENTITIES, "Number of pending scheduling entities ('pod' or 'podgroup'; 'pod' stands for individual pods that are not members of any podgroup) by the queue type: 'active', 'backoff', 'unschedulable' or 'gated' (a podgroup waiting for minCount pods is gated)."),
    FamilySpec::gauge(QUEUED_ENTITIES, "Number of queued scheduling entities ('pod' or 'podgroup'; 'pod' stands for individual pods that are not members of any podgroup) by the queue type. 'active' means number of entities in activeQ; 'backoff' means number of entities in backoffQ; 'unschedulable' means number of entities in unschedulableEntities that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable entities that the scheduler never attempted to schedule because they are gated."),
    FamilySpec::histogram(POD_SCHEDULING_SLI_DURATION, "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve multiple scheduling attempts.", E2E_BUCKETS),
    FamilySpec::histogram(POD_SCHEDULING_DURATION, "(Deprecated since 1.29.0) E2e latency for a pod being scheduled which may include multiple scheduling attempts.", E2E_BUCKETS),
    FamilySpec::histogram(POD_SCHEDULING_ATTEMPTS, "Number of attempts to successfully schedule a pod.", ATTEMPT_BUCKETS).plain(),
    FamilySpec::histogram(PLUGIN_EXECUTION_DURATION, "Duration for running a plugin at a specific extension point.", PLUGIN_BUCKETS),
    FamilySpec::counter(PREEMPTION_ATTEMPTS, "Total preemption attempts in the cluster till now").plain(),
    FamilySpec::histogram(PREEMPTION_VICTIMS, "Number of selected preemption victims for preemption initiated by a single pod", VICTIM_BUCKETS).plain(),
    FamilySpec::histogram(WORKLOAD_PREEMPTION_VICTIMS, "Number of pod preemption victims caused by workload preemption.", WORKLOAD_VICTIM_BUCKETS).plain(),
    FamilySpec::counter(PODGROUP_SCHEDULE_ATTEMPTS, "Number of attempts to schedule pod group, by the result. 'unschedulable' means a pod group could not be scheduled, while 'error' means an internal scheduler problem.").by_profile(),
    FamilySpec::histogram(PODGROUP_SCHEDULING_ATTEMPT_DURATION, "Pod group scheduling attempt latency in seconds", LATENCY_BUCKETS).by_profile(),
    FamilySpec::histogram(PODGROUP_SCHEDULING_ALGORITHM_DURATION, "Pod group scheduling algorithm latency in seconds", LATENCY_BUCKETS).plain(),
    FamilySpec::histogram(PODGROUP_SCHEDULING_DURATION, "Pod group scheduling cycle latency in seconds (KEP-5732's rollback signal; same observations as scheduler_podgroup_scheduling_attempt_duration_seconds without labels).", LATENCY_BUCKETS).plain(),
    FamilySpec::counter(PLACEMENT_TOTAL, "Number of candidate placements generated during pod group scheduling.").by_profile(),
    FamilySpec::counter(PLACEMENT_EVALUATIONS, "Number of evaluated candidate placements, by the result ('feasible' or 'infeasible').").by_profile(),
    FamilySpec::histogram(PLACEMENT_EVALUATION_DURATION, "Latency in seconds of evaluating one candidate placement, by the result ('feasible' or 'infeasible').", LATENCY_BUCKETS).by_profile(),
    FamilySpec::gauge(GOROUTINES, "Number of running goroutines split by the work they do such as binding."),
];

/// The exposition name under which prometheus-client registers a family (counters lose
/// their `_total`, which the encoder adds back).
fn registered_name(name: &str, kind: &FamilyKind) -> String {
    match kind {
        FamilyKind::Counter => name.strip_suffix("_total").unwrap_or(name).to_string(),
        _ => name.to_string(),
    }
}

/// Registers the scheduler's families; add a home's own families, then [`build`](Self::build).
pub struct MetricsBuilder {
    registry: Registry,
    slots: HashMap<&'static str, (Slot, bool)>,
}

impl std::fmt::Debug for MetricsBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsBuilder").field("families", &self.slots.len()).finish()
    }
}

impl Default for MetricsBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl MetricsBuilder {
    pub fn new() -> MetricsBuilder {
        let mut b = MetricsBuilder { registry: Registry::default(), slots: HashMap::new() };
        b.add(SCHEDULER_FAMILIES);
        b
    }

    /// Registers a home's own families (the observer and [`Metrics::count`] and friends
    /// then know them by name too).
    pub fn add(&mut self, specs: &[FamilySpec]) {
        for spec in specs {
            let reg_name = registered_name(spec.name, &spec.kind);
            // The encoder ends every help text with a period.
            let help = spec.help.strip_suffix('.').unwrap_or(spec.help);
            let registry = &mut self.registry;
            let slot = match spec.kind {
                FamilyKind::Counter if spec.plain => {
                    let c = Counter::default();
                    registry.register(reg_name, help, c.clone());
                    Slot::PlainCounter(c)
                }
                FamilyKind::Gauge if spec.plain => {
                    let g = Gauge::<f64, AtomicU64>::default();
                    registry.register(reg_name, help, g.clone());
                    Slot::PlainGauge(g)
                }
                FamilyKind::Histogram(b) if spec.plain => {
                    let h = b.new_metric();
                    registry.register(reg_name, help, h.clone());
                    Slot::PlainHistogram(h)
                }
                FamilyKind::Counter => {
                    let f = CounterFamily::default();
                    registry.register(reg_name, help, f.clone());
                    Slot::Counter(f)
                }
                FamilyKind::Gauge => {
                    let f = GaugeFamily::default();
                    registry.register(reg_name, help, f.clone());
                    Slot::Gauge(f)
                }
                FamilyKind::Histogram(b) => {
                    let f = HistogramFamily::new_with_constructor(b);
                    registry.register(reg_name, help, f.clone());
                    Slot::Histogram(f)
                }
            };
            self.slots.insert(spec.name, (slot, spec.profile));
        }
    }

    /// The registry, to register a home's own families.
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// Freezes the registry. `profile`: the scheduler profile (kube-scheduler's
    /// `schedulerName`) put on families that upstream labels by profile.
    pub fn build(self, profile: &str, clock: Clock) -> Metrics {
        Metrics {
            inner: Arc::new(Inner {
                registry: self.registry,
                slots: self.slots,
                profile: profile.to_string(),
                clock,
                timers: Mutex::new(Timers::default()),
            }),
        }
    }
}

/// How durations are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// The monotonic wall clock.
    Wall,
    /// Every duration is 0 (deterministic output, e.g. simulations on a virtual clock).
    Frozen,
}

#[derive(Debug, Default)]
struct Timers {
    started: HashMap<u64, Instant>,
    next: u64,
}

/// Timers kept at most (one per pending pod and per cycle); beyond, the oldest tokens
/// measure 0 instead of leaking memory.
const MAX_TIMERS: usize = 1_000_000;

struct Inner {
    registry: Registry,
    slots: HashMap<&'static str, (Slot, bool)>,
    profile: String,
    clock: Clock,
    timers: Mutex<Timers>,
}

/// The shared metrics: cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").field("profile", &self.inner.profile).finish_non_exhaustive()
    }
}

impl Metrics {
    /// The scheduler families only.
    pub fn new(profile: &str, clock: Clock) -> Metrics {
        MetricsBuilder::new().build(profile, clock)
    }

    /// The engine's and the driver's [`Observer`].
    pub fn observer(&self) -> MetricsObserver {
        MetricsObserver { metrics: self.clone() }
    }

    pub fn profile(&self) -> &str {
        &self.inner.profile
    }

    /// The OpenMetrics text exposition of every family; series sorted by their labels, so
    /// identical runs give identical text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.inner.registry).is_err() {
            tracing::warn!("metrics could not be encoded");
        }
        sort_series(&out)
    }

    /// The value of one sample line of [`render`](Self::render), e.g.
    /// `scheduler_schedule_attempts_total{result="scheduled",profile="placer"}` (tests,
    /// diagnostics).
    pub fn sample(&self, series: &str) -> Option<f64> {
        self.render().lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
    }

    fn labels(&self, pairs: &[(&'static str, &str)], profile: bool) -> Labels {
        let mut labels: Labels = pairs.iter().map(|(k, v)| (*k, (*v).to_string())).collect();
        if profile && !labels.iter().any(|(k, _)| *k == "profile") {
            labels.push(("profile", self.inner.profile.clone()));
        }
        labels
    }

    fn slot(&self, name: &str) -> Option<&(Slot, bool)> {
        let slot = self.inner.slots.get(name);
        if slot.is_none() {
            tracing::debug!(metric = name, "no such metric family; sample dropped");
        }
        slot
    }

    /// Adds `value` to counter `name`.
    pub fn count(&self, name: &str, pairs: &[(&'static str, &str)], value: u64) {
        match self.slot(name) {
            Some((Slot::Counter(f), profile)) => {
                f.get_or_create(&self.labels(pairs, *profile)).inc_by(value);
            }
            Some((Slot::PlainCounter(c), _)) => {
                c.inc_by(value);
            }
            Some(_) => tracing::debug!(metric = name, "not a counter"),
            None => {}
        }
    }

    /// Records an observation of histogram `name`.
    pub fn observe(&self, name: &str, pairs: &[(&'static str, &str)], value: f64) {
        if !value.is_finite() {
            return;
        }
        match self.slot(name) {
            Some((Slot::Histogram(f), profile)) => {
                f.get_or_create(&self.labels(pairs, *profile)).observe(value);
            }
            Some((Slot::PlainHistogram(h), _)) => h.observe(value),
            Some(_) => tracing::debug!(metric = name, "not a histogram"),
            None => {}
        }
    }

    /// Sets gauge `name`.
    pub fn set(&self, name: &str, pairs: &[(&'static str, &str)], value: f64) {
        match self.slot(name) {
            Some((Slot::Gauge(f), profile)) => {
                f.get_or_create(&self.labels(pairs, *profile)).set(value);
            }
            Some((Slot::PlainGauge(g), _)) => {
                g.set(value);
            }
            Some(_) => tracing::debug!(metric = name, "not a gauge"),
            None => {}
        }
    }

    /// The value of a counter series (0 when absent): `name` as exposed (`..._total`).
    pub fn counter_value(&self, name: &str, pairs: &[(&str, &str)]) -> u64 {
        self.sample(&series(name, pairs)).map_or(0, |v| v as u64)
    }

    /// The number of observations of a histogram series (0 when absent).
    pub fn histogram_count(&self, name: &str, pairs: &[(&str, &str)]) -> u64 {
        self.sample(&series(&format!("{name}_count"), pairs)).map_or(0, |v| v as u64)
    }

    /// Whether a family of this exposition name is registered.
    pub fn knows(&self, name: &str) -> bool {
        self.inner.slots.contains_key(name)
    }

    fn start_timer(&self) -> u64 {
        if self.inner.clock == Clock::Frozen {
            return 0;
        }
        let mut t = self.inner.timers.lock().unwrap_or_else(|p| p.into_inner());
        t.next = t.next.wrapping_add(1).max(1);
        let token = t.next;
        if t.started.len() >= MAX_TIMERS {
            t.started.clear();
        }
        t.started.insert(token, Instant::now());
        token
    }

    fn elapsed(&self, token: u64) -> f64 {
        if self.inner.clock == Clock::Frozen || token == 0 {
            return 0.0;
        }
        let mut t = self.inner.timers.lock().unwrap_or_else(|p| p.into_inner());
        t.started.remove(&token).map_or(0.0, |s| s.elapsed().as_secs_f64())
    }
}

/// Sorts the series of every family by name and labels (prometheus-client keeps them in a
/// hash map). The lines of one histogram series (`_sum`, `_count`, `_bucket`s) stay
/// together and in their order.
fn sort_series(text: &str) -> String {
    fn key(line: &str) -> String {
        let series = line.rsplit_once(' ').map_or(line, |(s, _)| s);
        let (name, labels) = series.split_once('{').unwrap_or((series, ""));
        let base = ["_bucket", "_sum", "_count", "_total"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .unwrap_or(name);
        let labels: Vec<&str> = labels
            .trim_end_matches('}')
            .split(',')
            .filter(|l| !l.is_empty() && !l.starts_with("le="))
            .collect();
        format!("{base}{{{}}}", labels.join(","))
    }
    fn flush(out: &mut String, groups: &mut Vec<(String, Vec<&str>)>) {
        groups.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, lines) in groups.drain(..) {
            for l in lines {
                out.push_str(l);
                out.push('\n');
            }
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') {
            flush(&mut out, &mut groups);
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let k = key(line);
        match groups.last_mut() {
            Some((last, lines)) if *last == k => lines.push(line),
            _ => groups.push((k, vec![line])),
        }
    }
    flush(&mut out, &mut groups);
    out
}

/// `name{k="v",...}` as the exposition writes a series.
fn series(name: &str, pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return name.to_string();
    }
    let labels: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{name}{{{}}}", labels.join(","))
}

/// The [`Observer`] over [`Metrics`]. Clones share the metrics.
#[derive(Debug, Clone)]
pub struct MetricsObserver {
    metrics: Metrics,
}

impl MetricsObserver {
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }
}

impl Observer for MetricsObserver {
    fn count(&mut self, name: &'static str, labels: &[(&'static str, &str)], value: u64) {
        let (name, labels) = translate(name, labels);
        self.metrics.count(name, &labels, value);
    }

    fn observe(&mut self, name: &'static str, labels: &[(&'static str, &str)], value: f64) {
        let (name, labels) = translate(name, labels);
        self.metrics.observe(name, &labels, value);
    }

    fn gauge(&mut self, name: &'static str, labels: &[(&'static str, &str)], value: f64) {
        self.metrics.set(name, labels, value);
    }

    fn start_timer(&mut self) -> u64 {
        self.metrics.start_timer()
    }

    fn elapsed_seconds(&mut self, token: u64) -> f64 {
        self.metrics.elapsed(token)
    }
}

/// Maps the engine's labels onto upstream's families where they differ: preemption is
/// reported with a `kind` label (`pod` or `podgroup`); upstream has
/// `scheduler_preemption_attempts_total` without labels and separate victim histograms
/// for pod and workload preemption.
fn translate<'a>(
    name: &'static str,
    labels: &'a [(&'static str, &'a str)],
) -> (&'static str, Vec<(&'static str, &'a str)>) {
    let kind = labels.iter().find(|(k, _)| *k == "kind").map(|(_, v)| *v);
    match name {
        PREEMPTION_ATTEMPTS => (name, Vec::new()),
        PREEMPTION_VICTIMS if kind == Some("podgroup") => (WORKLOAD_PREEMPTION_VICTIMS, Vec::new()),
        PREEMPTION_VICTIMS => (name, Vec::new()),
        _ => (name, labels.to_vec()),
    }
}

#[cfg(test)]
mod tests;
