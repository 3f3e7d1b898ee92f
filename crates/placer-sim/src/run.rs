//! Running a scenario on the embedded cluster.
//!
//! 1. An [`EmbeddedCluster`] with the `JobValidation` admission check gets the cluster:
//!    listed nodes (a node without a `Ready` condition gets `Ready=True`: the format reads
//!    absent as Ready), generated nodes, then the bound pods of `cluster.pods` (phase
//!    `Running` unless the file gives one).
//! 2. The `submit` objects are created in order, 1 ms of virtual time apart so their
//!    arrival order is preserved.
//! 3. The control loop runs to quiescence ("settles"): the controllers (Job controller,
//!    scheduler, simulated kubelet, CronJob controller) reconcile in turn until a round changes nothing. Then,
//!    if the scheduler has timed work (backoff), the clock jumps to it and the loop runs
//!    again; this stops once the next wake-up is further than an idle window (twice the
//!    maximum backoff plus one second) past the last change, so periodic retries that
//!    change nothing do not keep the clock running. Other timed work (pod run times, Job
//!    replacement backoff) waits for an `advance` step. A loop that keeps changing the
//!    cluster is cut off with [`RunError::DidNotSettle`].
//! 4. Steps run one by one, each followed by a settle. Errors of steps (a rejected patch,
//!    a missing pod) are kept for the next `expect.error`; an error no expectation
//!    claims is a failure.
//! 5. The top-level `expect` is checked after the last step.

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use placer_api::gates::FeatureGates;
use placer_api::k8s::api::core::v1::{NodeCondition, Taint};
use placer_cluster::embedded::EmbeddedCluster;
use placer_cluster::{ClusterStore, EventRecord, Kind, Object, ObjectRef, StoreError};
use placer_controllers::cronjob::{CronJobController, CronJobValidation};
use placer_controllers::ephemeral::EphemeralVolumeController;
use placer_controllers::job::{JobController, JobValidation, TopologyAnnotationValidation};
use placer_controllers::persistentvolume::PersistentVolumeController;
use placer_controllers::resourceclaim::ResourceClaimController;
use placer_controllers::scheduler::SchedulerController;
use placer_controllers::Controller;
use placer_engine::SchedulerConfig;
use placer_engine::{ExtensionPoint, ScoringStrategy};

use crate::expect::{check, unexpected_errors, CheckReport, Failure};
use crate::generate::generated_nodes_iter;
use crate::kubelet::SimKubelet;
use crate::lifecycle::{DefaultTolerationSeconds, NodeLifecycle};
use crate::report::{all_objects, cluster_summary, group_rows, ClusterSummary, GroupRow};
use crate::scenario::{parse_duration_ms, Manifest, Scenario, StepAction, TaintStep};
use placer_metrics::{Clock, Metrics};

pub use crate::lifecycle::NOT_READY_TAINT;

/// A callback told about each phase of a run (see [`RunOptions::progress`]).
pub type ProgressFn = Arc<dyn Fn(&str) + Send + Sync>;

/// Limits and switches of a run.
#[derive(Clone)]
pub struct RunOptions {
    /// Reconcile rounds one settle may take at one instant before it is cut off.
    pub max_rounds: usize,
    /// Virtual time one settle may span before it is cut off (ms).
    pub max_settle_ms: u64,
    /// Wake-ups further than this past the last change end a settle (ms); `None`: twice
    /// the scheduler's maximum backoff plus one second.
    pub idle_window_ms: Option<u64>,
    /// Measure wall-clock durations in the metrics (otherwise every duration is 0 and the
    /// metrics text is deterministic).
    pub wall_clock_metrics: bool,
    /// Record into these metrics (e.g. one exposition for several scenarios) instead of
    /// metrics of the run's own.
    pub metrics: Option<Metrics>,
    /// Called with a short description of each phase (`submit`, `steps[3]`, ...), e.g. to
    /// drive a progress indicator.
    pub progress: Option<ProgressFn>,
    /// Record a [`TimelineSample`] after the submissions and after every step (for a
    /// report's timeline; each sample reads every object once).
    pub timeline: bool,
    /// The process exits once the report is written: the simulator's store, watch log and
    /// controllers are not freed (on 50,000 nodes, freeing them took about a tenth of
    /// `placer simulate`'s time). Only for a program's last run: each run so ended keeps
    /// its memory until the process exits.
    pub skip_teardown: bool,
}

/// The cluster at one point of virtual time.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineSample {
    /// Virtual time (ms).
    pub time_ms: u64,
    /// What was just done (`submit`, `steps[3]`).
    pub phase: String,
    /// Use per resource in percent of allocatable (`pods` included).
    pub resources: Vec<(String, f64)>,
    pub pods_bound: usize,
    pub pods_total: usize,
    /// PodGroups not fully bound.
    pub groups_pending: usize,
}

fn sample(store: &EmbeddedCluster, phase: &str, levels: &[String]) -> TimelineSample {
    let objects = all_objects(store);
    let summary = cluster_summary(&objects);
    let groups = group_rows(&objects, levels);
    TimelineSample {
        time_ms: store.now_ms(),
        phase: phase.to_string(),
        resources: summary.resources.iter().map(|r| (r.name.clone(), r.percent())).collect(),
        pods_bound: summary.pods_bound,
        pods_total: summary.pods_total,
        groups_pending: groups
            .iter()
            .filter(|g| g.state != crate::report::GroupState::Scheduled || g.total == 0)
            .count(),
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            max_rounds: 10_000,
            max_settle_ms: 24 * 3_600_000,
            idle_window_ms: None,
            wall_clock_metrics: false,
            metrics: None,
            progress: None,
            timeline: false,
            skip_teardown: false,
        }
    }
}

impl fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunOptions")
            .field("max_rounds", &self.max_rounds)
            .field("max_settle_ms", &self.max_settle_ms)
            .field("idle_window_ms", &self.idle_window_ms)
            .field("wall_clock_metrics", &self.wall_clock_metrics)
            .field("progress", &self.progress.is_some())
            .field("timeline", &self.timeline)
            .field("skip_teardown", &self.skip_teardown)
            .finish()
    }
}

/// A run that could not complete.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The initial cluster could not be created.
    #[error("{}: setting up the cluster: {message}", file.display())]
    Setup { file: PathBuf, message: String },
    /// The control loop kept changing the cluster.
    #[error("{}: the cluster did not settle {phase}: {reason}", file.display())]
    DidNotSettle { file: PathBuf, phase: String, reason: String },
}

/// Everything a run produced.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The scenario's name.
    pub name: String,
    /// The scenario's file.
    pub file: PathBuf,
    /// Every object at the end, by kind, namespace and name.
    pub objects: Vec<Object>,
    /// One row per PodGroup.
    pub groups: Vec<GroupRow>,
    /// Cluster-wide numbers at the end.
    pub cluster: ClusterSummary,
    /// Every expect block checked, in order.
    pub checks: Vec<CheckReport>,
    /// The scheduler's metrics (OpenMetrics text) after the run.
    pub metrics: Option<String>,
    /// Events recorded by the controllers, in order.
    pub events: Vec<EventRecord>,
    /// Distinct errors controllers reported (they retried; not failures by themselves).
    pub controller_errors: Vec<String>,
    /// Virtual time at the end (ms).
    pub virtual_time_ms: u64,
    /// The configured topology levels (for display).
    pub topology_levels: Vec<String>,
    /// Samples over virtual time, when [`RunOptions::timeline`] asked for them.
    pub timeline: Vec<TimelineSample>,
}

impl RunReport {
    /// True when every expectation held.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(CheckReport::passed)
    }

    /// Every failure with the block it belongs to.
    pub fn failures(&self) -> impl Iterator<Item = (&str, &Failure)> {
        self.checks.iter().flat_map(|c| c.failures.iter().map(move |f| (c.at.as_str(), f)))
    }

    /// Number of individual checks made.
    pub fn checked(&self) -> usize {
        self.checks.iter().map(|c| c.checked).sum()
    }
}

/// The scheduler configuration a scenario asks for, over Placer's defaults.
pub fn scheduler_config(s: &Scenario) -> Result<SchedulerConfig, String> {
    let mut c = SchedulerConfig { gates: gates(s)?, ..SchedulerConfig::default() };
    let Some(p) = &s.scheduler.profile else { return Ok(c) };
    c.topology_levels = p.topology_levels.clone();
    c.plugin_weights = p.plugin_weights.clone();
    c.percentage_of_placements_to_score = p.percentage_of_placements_to_score;
    c.evict_gang_on_failed_node = p.evict_gang_on_failed_node;
    if let Some(a) = &p.topology_algorithms {
        c.topology_algorithms = a.to_config()?;
    }
    if let Some(t) = &p.topology_preemption {
        c.within_cluster_queue = t.to_config()?;
    }
    let strategy = |name: &str| match name {
        "MostAllocated" => Ok(ScoringStrategy::most_allocated()),
        "LeastAllocated" => Ok(ScoringStrategy::least_allocated()),
        other => Err(format!("unknown scoring strategy {other:?}")),
    };
    if let Some(name) = &p.scoring_strategy {
        c.node_resources_fit_strategy = strategy(name)?;
    }
    if let Some(name) = &p.placement_scoring_strategy {
        c.placement_scoring_strategy = strategy(name)?;
    }
    if let Some(d) = &p.pod_initial_backoff {
        c.pod_initial_backoff_ms = parse_duration_ms(d)?;
    }
    if let Some(d) = &p.pod_max_backoff {
        c.pod_max_backoff_ms = parse_duration_ms(d)?;
    }
    if let Some(names) = &p.scheduler_names {
        c.scheduler_names = names.clone();
    }
    for (key, set) in &p.plugins {
        let point = ExtensionPoint::from_key(key)
            .ok_or_else(|| format!("plugins: unknown extension point {key:?}"))?;
        for e in &set.enabled {
            c.plugins.enable(point, &e.name, e.weight);
        }
        for d in &set.disabled {
            c.plugins.disable(point, &d.name);
        }
    }
    placer_engine::check_profile(&c).map_err(|e| e.to_string())?;
    placer_engine::apply_plugin_config(&mut c, &p.plugin_config, "scheduler.profile.pluginConfig").map_err(
        |errs| errs.iter().map(|e| format!("plugin {}: {e}", e.plugin)).collect::<Vec<_>>().join("; "),
    )?;
    Ok(c)
}

fn gates(s: &Scenario) -> Result<FeatureGates, String> {
    FeatureGates::with_overrides(s.scheduler.feature_gates.iter().map(|(k, v)| (k.as_str(), *v)))
        .map_err(|e| e.to_string())
}

/// Runs a loaded scenario to the end and checks its expectations.
pub fn run(s: &Scenario, opts: &RunOptions) -> Result<RunReport, RunError> {
    let setup_err = |message: String| RunError::Setup { file: s.file.clone(), message };
    let config = scheduler_config(s).map_err(setup_err)?;
    let gates = config.gates.clone();
    let idle_window_ms = opts.idle_window_ms.unwrap_or(config.pod_max_backoff_ms.saturating_mul(2) + 1_000);
    let levels = config.topology_levels.clone();
    let explain_config = config.clone();

    let mut store = EmbeddedCluster::validating();
    add_admission_plugins_for(&mut store, &gates, &levels);
    let (frozen, terminating) = setup_cluster(s, &mut store).map_err(setup_err)?;

    let metrics = opts.metrics.clone().unwrap_or_else(|| {
        let profile = config.scheduler_names.first().map_or("default-scheduler", String::as_str);
        Metrics::new(profile, if opts.wall_clock_metrics { Clock::Wall } else { Clock::Frozen })
    });
    let mut controllers: Vec<Box<dyn Controller>> = vec![
        Box::new(JobController::new(gates.clone())),
        // Claims are created and bound before the scheduler looks at them, as the
        // controllers of a real cluster would have done by then.
        Box::new(EphemeralVolumeController::new()),
        Box::new(PersistentVolumeController::new()),
    ];
    // The scheduler's wake-ups drive settling: its index is taken where it is pushed, so
    // reordering the list cannot point settling at another controller.
    let scheduler = controllers.len();
    controllers.push(Box::new(SchedulerController::new(config, Box::new(metrics.observer()))));
    controllers.extend::<[Box<dyn Controller>; 4]>([
        Box::new(SimKubelet::new(frozen)),
        Box::new(CronJobController::new()),
        Box::new(NodeLifecycle::new(terminating)),
        Box::new(ResourceClaimController::new(&gates)),
    ]);
    let mut sim = Sim {
        store,
        controllers,
        scheduler,
        opts,
        file: s.file.clone(),
        idle_window_ms,
        errors: Vec::new(),
        controller_errors: BTreeSet::new(),
        checks: Vec::new(),
    };

    sim.progress("submit");
    sim.submit("submit", &s.submit);
    sim.settle("after submit")?;
    let mut timeline = Vec::new();
    if opts.timeline {
        timeline.push(sample(&sim.store, "submit", &levels));
    }
    for step in &s.steps {
        sim.progress(&step.path);
        let settle = sim.step(&step.path, &step.action)?;
        if settle {
            sim.settle(&format!("after {}", step.path))?;
        }
        if opts.timeline {
            timeline.push(sample(&sim.store, &step.path, &levels));
        }
    }
    if let Some(e) = &s.expect {
        let errors = std::mem::take(&mut sim.errors);
        sim.checks.push(check(e, &sim.store, &errors, "expect"));
    }
    if let Some(r) = unexpected_errors(&std::mem::take(&mut sim.errors)) {
        sim.checks.push(r);
    }

    let objects = all_objects(&sim.store);
    let events = sim.store.events();
    let mut groups = group_rows(&objects, &levels);
    crate::explain::fill_reasons(&mut groups, &explain_config, &objects, sim.store.now_ms(), &events);
    let virtual_time_ms = sim.store.now_ms();
    let checks = std::mem::take(&mut sim.checks);
    let controller_errors = std::mem::take(&mut sim.controller_errors).into_iter().collect();
    if opts.skip_teardown {
        std::mem::forget(sim);
    }
    Ok(RunReport {
        name: s.name.clone(),
        file: s.file.clone(),
        groups,
        cluster: cluster_summary(&objects),
        objects,
        checks,
        metrics: Some(metrics.render()),
        events,
        controller_errors,
        virtual_time_ms,
        topology_levels: levels,
        timeline,
    })
}

/// The API server's admission plugins the embedded cluster runs, in order (after its own
/// validation): DefaultTolerationSeconds, JobValidation, Kueue's topology annotations of
/// Jobs (`TopologyAnnotationValidation`, its webhook rules), CronJobValidation. Also used by
/// `placer cluster`, so its API answers as the simulator's store does.
pub fn add_admission_plugins(store: &mut EmbeddedCluster, gates: &FeatureGates) {
    add_admission_plugins_for(store, gates, &[]);
}

/// [`add_admission_plugins`] for a scheduler with these `topologyLevels`: Kueue's topology
/// annotations of Jobs' pod templates are also checked against them.
pub fn add_admission_plugins_for(store: &mut EmbeddedCluster, gates: &FeatureGates, levels: &[String]) {
    store.add_admission(Box::new(DefaultTolerationSeconds));
    store.add_admission(Box::new(JobValidation::new(gates.clone())));
    store.add_admission(Box::new(TopologyAnnotationValidation::with_levels(gates.clone(), levels.to_vec())));
    store.add_admission(Box::new(CronJobValidation));
}

/// Creates the initial nodes and bound pods. Returns the uids of pods whose phase the
/// scenario fixed (the simulated kubelet leaves them alone) and of pods listed as
/// terminating (`deletionTimestamp` set: they stay so). Also used by `placer cluster`.
pub fn setup_cluster(
    s: &Scenario,
    store: &mut EmbeddedCluster,
) -> Result<(HashSet<String>, HashSet<String>), String> {
    // A node without a `Ready` condition is Ready.
    let ready = |mut node: Object| {
        if let Some(n) = node.as_node_mut() {
            let conditions =
                n.status.get_or_insert_with(Default::default).conditions.get_or_insert_with(Vec::new);
            if !conditions.iter().any(|c| c.type_ == "Ready") {
                conditions.push(NodeCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    reason: Some("KubeletReady".into()),
                    ..Default::default()
                });
            }
        }
        node
    };
    let generated = s.generate.as_ref().map(generated_nodes_iter);
    store.reserve(s.nodes.len() + generated.as_ref().map_or(0, ExactSizeIterator::len));
    for m in &s.nodes {
        store.create(ready(m.object.clone())).map_err(|e| format!("{}: {e}", m.path))?;
    }
    // Generated nodes are made and stored one at a time.
    for node in generated.into_iter().flatten() {
        store.create(ready(Object::Node(node.into()))).map_err(|e| format!("cluster.generate: {e}"))?;
    }
    let mut frozen = HashSet::new();
    let mut terminating = HashSet::new();
    let now = store.now();
    for m in &s.pods {
        let mut pod = m.object.clone();
        let mut fixed = false;
        if let Some(p) = pod.as_pod_mut() {
            let status = p.status.get_or_insert_with(Default::default);
            match status.phase.as_deref() {
                None | Some("") => status.phase = Some("Running".into()),
                Some("Running") => {}
                Some(_) => fixed = true,
            }
            if status.phase.as_deref() == Some("Running") && status.start_time.is_none() {
                status.start_time = Some(now.clone());
            }
        }
        let created = store.create_terminating(pod).map_err(|e| format!("{}: {e}", m.path))?;
        if created.metadata().deletion_timestamp.is_some() {
            terminating.extend(created.metadata().uid.clone());
        }
        if fixed {
            frozen.extend(created.metadata().uid.clone());
        }
    }
    Ok((frozen, terminating))
}

struct Sim<'a> {
    store: EmbeddedCluster,
    controllers: Vec<Box<dyn Controller>>,
    /// Index of the scheduler in `controllers`.
    scheduler: usize,
    opts: &'a RunOptions,
    file: PathBuf,
    idle_window_ms: u64,
    /// Errors of steps since the last expect block.
    errors: Vec<String>,
    controller_errors: BTreeSet<String>,
    checks: Vec<CheckReport>,
}

impl Sim<'_> {
    fn progress(&self, phase: &str) {
        if let Some(p) = &self.opts.progress {
            p(phase);
        }
    }

    fn not_settled(&self, phase: &str, reason: String) -> RunError {
        RunError::DidNotSettle { file: self.file.clone(), phase: phase.to_string(), reason }
    }

    /// Creates the objects of one step, in order and 1 ms of virtual time apart, or none of
    /// them: each is checked first (name free, validation, admission) and a step with a
    /// rejected object creates nothing and reports every rejection.
    fn submit(&mut self, path: &str, manifests: &[Manifest]) {
        let rejected: Vec<String> = manifests
            .iter()
            .filter_map(|m| self.store.check_create(&m.object).err().map(|e| format!("{}: {e}", m.path)))
            .collect();
        if !rejected.is_empty() {
            let n = manifests.len();
            for e in rejected {
                self.errors.push(format!("{e} (nothing of {path} was created: it has {n} objects)"));
            }
            return;
        }
        for m in manifests {
            if let Err(e) = self.store.create(m.object.clone()) {
                self.errors.push(format!("{}: {e}", m.path));
            }
            self.store.advance_ms(1);
        }
    }

    /// Reconciles until a round changes nothing. Returns whether the store changed.
    fn fixed_point(&mut self, phase: &str) -> Result<bool, RunError> {
        let mut changed_any = false;
        for _ in 0..self.opts.max_rounds {
            let before = self.store.resource_version();
            let mut wrote = false;
            for c in &mut self.controllers {
                match c.reconcile(&mut self.store) {
                    Ok(w) => wrote |= w,
                    Err(e) => {
                        if self.controller_errors.len() < 100 {
                            self.controller_errors.insert(e.to_string());
                        }
                    }
                }
            }
            // Every controller reads the watch log at the start of its reconcile, so all of
            // them have read it up to where this round began: older events are no longer
            // needed (memory stays bounded by what exists, not by what happened).
            self.store.compact_log(before);
            let changed = self.store.resource_version() != before;
            changed_any |= changed;
            if !wrote && !changed {
                return Ok(changed_any);
            }
        }
        Err(self.not_settled(
            phase,
            format!(
                "still changing after {} reconcile rounds at virtual time {} ms",
                self.opts.max_rounds,
                self.store.now_ms()
            ),
        ))
    }

    /// Settles: fixed point now, then through the scheduler's wake-ups while they follow
    /// a change within the idle window.
    fn settle(&mut self, phase: &str) -> Result<(), RunError> {
        let start = self.store.now_ms();
        let mut last_change = start;
        self.fixed_point(phase)?;
        loop {
            let now = self.store.now_ms();
            let Some(t) = self.controllers[self.scheduler].next_retry_ms() else { break };
            if t <= now || t > last_change.saturating_add(self.idle_window_ms) {
                break;
            }
            if t - start > self.opts.max_settle_ms {
                return Err(self.not_settled(
                    phase,
                    format!("still changing after {} ms of virtual time", self.opts.max_settle_ms),
                ));
            }
            self.store.set_now_ms(t);
            if self.fixed_point(phase)? {
                last_change = t;
            }
        }
        Ok(())
    }

    /// Moves the clock by `ms`, stopping at every controller wake-up on the way.
    fn advance(&mut self, phase: &str, ms: u64) -> Result<(), RunError> {
        let target = self.store.now_ms().saturating_add(ms);
        let mut stops = 0usize;
        loop {
            let now = self.store.now_ms();
            let next = self
                .controllers
                .iter()
                .filter_map(|c| c.next_wakeup_ms())
                .filter(|t| *t > now && *t <= target)
                .min();
            let Some(t) = next else { break };
            stops += 1;
            if stops > self.opts.max_rounds.saturating_mul(100) {
                return Err(
                    self.not_settled(phase, format!("more than {stops} timed wake-ups while advancing"))
                );
            }
            self.store.set_now_ms(t);
            self.fixed_point(phase)?;
        }
        self.store.set_now_ms(target);
        Ok(())
    }

    /// A `patch` step: a JSON merge patch of the object; its `status` part, if any, goes
    /// through the status subresource (as `kubectl patch --subresource=status`), e.g. a
    /// DRA driver reporting a device's conditions in a ResourceClaim's `status.devices`.
    fn patch(&mut self, target: &ObjectRef, patch: &serde_json::Value) -> Result<(), String> {
        let status = patch.get("status").filter(|s| !s.is_null()).cloned();
        let spec_only = patch
            .as_object()
            .is_some_and(|o| o.keys().all(|k| k == "status" || k == "apiVersion" || k == "kind"));
        if status.is_none() || !spec_only {
            self.store.merge_patch(target, patch).map_err(|e| e.to_string())?;
        }
        let Some(status) = status else { return Ok(()) };
        let current = self.store.get(target).ok_or_else(|| format!("{target} not found"))?;
        let mut doc = current.to_json();
        placer_cluster::embedded::merge_json(&mut doc, &serde_json::json!({ "status": status }));
        let updated = Object::from_json(target.kind, doc).map_err(|e| e.to_string())?;
        self.store.update_status(updated).map(|_| ()).map_err(|e| e.to_string())
    }

    /// Applies one step. Returns whether the cluster should settle afterwards.
    fn step(&mut self, path: &str, action: &StepAction) -> Result<bool, RunError> {
        let result: Result<(), String> = match action {
            StepAction::Submit(list) => {
                self.submit(path, list);
                Ok(())
            }
            StepAction::DeletePod { namespace, name } => self
                .store
                .delete(&ObjectRef::new(Kind::Pod, namespace.clone(), name.clone()))
                .map_err(|e| e.to_string()),
            StepAction::DeleteNode(name) => {
                self.store.delete(&ObjectRef::new(Kind::Node, "", name.clone())).map_err(|e| e.to_string())
            }
            StepAction::Patch { target, patch } => self.patch(target, patch),
            StepAction::MarkNotReady(node) => self.set_ready(node, "False"),
            StepAction::MarkReady(node) => self.set_ready(node, "True"),
            StepAction::MarkUnreachable(node) => self.set_ready(node, "Unknown"),
            StepAction::Taint(t) => self.taint(t),
            StepAction::Advance { ms } => {
                self.advance(path, *ms)?;
                Ok(())
            }
            StepAction::Expect(e) => {
                let errors = std::mem::take(&mut self.errors);
                self.checks.push(check(e, &self.store, &errors, &format!("{path}.expect")));
                return Ok(false);
            }
        };
        if let Err(e) = result {
            self.errors.push(format!("{path}: {e}"));
        }
        Ok(true)
    }

    fn node(&self, name: &str) -> Result<Object, String> {
        let r = ObjectRef::new(Kind::Node, "", name);
        self.store.get(&r).ok_or_else(|| StoreError::NotFound(r).to_string())
    }

    /// Sets the node's `Ready` condition (the node lifecycle controller does the rest).
    fn set_ready(&mut self, name: &str, status: &str) -> Result<(), String> {
        let mut node = self.node(name)?;
        let now = self.store.now();
        if let Some(n) = node.as_node_mut() {
            let conditions =
                n.status.get_or_insert_with(Default::default).conditions.get_or_insert_with(Vec::new);
            let (reason, message) = match status {
                "True" => ("KubeletReady", "kubelet is posting ready status"),
                "False" => ("KubeletNotReady", "container runtime is down"),
                _ => ("NodeStatusUnknown", "Kubelet stopped posting node status."),
            };
            let transition = conditions
                .iter()
                .find(|c| c.type_ == "Ready" && c.status == status)
                .and_then(|c| c.last_transition_time.clone())
                .unwrap_or(now);
            conditions.retain(|c| c.type_ != "Ready");
            conditions.push(NodeCondition {
                type_: "Ready".into(),
                status: status.into(),
                reason: Some(reason.into()),
                message: Some(message.into()),
                last_transition_time: Some(transition),
                ..Default::default()
            });
        }
        node.metadata_mut().resource_version = None;
        self.store.update_status(node).map(|_| ()).map_err(|e| e.to_string())
    }

    /// Adds (or replaces) a taint; the taint manager of the node lifecycle controller
    /// evicts what a `NoExecute` taint does not tolerate.
    fn taint(&mut self, t: &TaintStep) -> Result<(), String> {
        let mut node = self.node(&t.node)?;
        let taint = Taint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: t.effect.clone(),
            time_added: (t.effect == "NoExecute").then(|| self.store.now()),
        };
        if let Some(n) = node.as_node_mut() {
            let taints = n.spec.get_or_insert_with(Default::default).taints.get_or_insert_with(Vec::new);
            taints.retain(|x| !(x.key == taint.key && x.effect == taint.effect));
            taints.push(taint);
        }
        node.metadata_mut().resource_version = None;
        self.store.update(node).map(|_| ()).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::load_str;

    fn scenario(text: &str) -> Scenario {
        match load_str(text, "t.yaml") {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    fn run_ok(text: &str) -> RunReport {
        run(&scenario(text), &RunOptions::default()).unwrap()
    }

    const NODES: &str = "cluster:\n  nodes:\n    - metadata: {name: n1, labels: {rack: r1}}\n      status: {allocatable: {cpu: '4', pods: '10'}}\n    \
                         - metadata: {name: n2, labels: {rack: r2}}\n      status: {allocatable: {cpu: '4', pods: '10'}}\n";

    #[test]
    fn config_takes_gates_levels_and_extensions() {
        let s = scenario(
            "name: t\nscheduler:\n  featureGates: {TASBalancedPlacement: true}\n  profile:\n    topologyLevels: [rack]\n    \
             pluginWeights: {PodGroupPodsCount: 2}\n    percentageOfPlacementsToScore: 50\n    podMaxBackoff: 0s\n    \
             podInitialBackoff: 0s\n    placementScoringStrategy: LeastAllocated\n",
        );
        let c = scheduler_config(&s).unwrap();
        assert!(c.gates.enabled(placer_api::gates::Gate::TASBalancedPlacement));
        assert_eq!(c.topology_levels, ["rack"]);
        assert_eq!(c.weight("PodGroupPodsCount", 1), 2);
        assert_eq!(c.percentage_of_placements_to_score, Some(50));
        assert_eq!((c.pod_initial_backoff_ms, c.pod_max_backoff_ms), (0, 0));
        assert_eq!(c.placement_scoring_strategy, ScoringStrategy::least_allocated());
    }

    #[test]
    fn setup_creates_nodes_ready_and_bound_pods_running() {
        let r = run_ok(&format!(
            "name: t\n{NODES}  pods:\n    - {{metadata: {{name: e}}, spec: {{nodeName: n1, containers: [{{name: c, image: i, resources: {{requests: {{cpu: '2'}}}}}}]}}}}\n    \
             - {{metadata: {{name: f}}, spec: {{nodeName: n2, containers: [{{name: c, image: i}}]}}, status: {{phase: Pending}}}}\n\
             expect:\n  pods: {{default/e: n1, default/f: n2}}\n  objects:\n    \
             - {{apiVersion: v1, kind: Node, metadata: {{name: n1}}, status: {{conditions: [{{type: Ready, status: 'True'}}]}}}}\n    \
             - {{apiVersion: v1, kind: Pod, metadata: {{name: e}}, status: {{phase: Running}}}}\n    \
             - {{apiVersion: v1, kind: Pod, metadata: {{name: f}}, status: {{phase: Pending}}}}\n"
        ));
        assert!(r.passed(), "{:?}", r.failures().collect::<Vec<_>>());
        assert_eq!(r.cluster.to_string(), "2 nodes, 2/2 pods bound, cpu 25.0%, pods 10.0%");
    }

    #[test]
    fn submit_is_spaced_one_millisecond_apart() {
        let r = run_ok(
            "name: t\nsubmit:\n  - {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: a}, value: 1}\n  \
             - {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: b}, value: 2}\n",
        );
        let times: Vec<String> = r
            .objects
            .iter()
            .filter_map(|o| o.metadata().creation_timestamp.as_ref().map(|t| t.0.to_string()))
            .collect();
        assert_eq!(times, ["2026-01-01T00:00:00Z", "2026-01-01T00:00:00.001Z"]);
    }

    #[test]
    fn steps_delete_taint_and_mark_not_ready() {
        let r = run_ok(&format!(
            "name: t\n{NODES}  pods:\n    - {{metadata: {{name: a}}, spec: {{nodeName: n1, containers: [{{name: c, image: i}}]}}}}\n    \
             - {{metadata: {{name: b}}, spec: {{nodeName: n2, containers: [{{name: c, image: i}}], tolerations: [{{key: k, operator: Exists}}]}}}}\n\
             steps:\n  - taint: {{node: n1, key: k, effect: NoExecute}}\n  - taint: {{node: n2, key: k, effect: NoExecute}}\n  \
             - markNotReady: n2\n  - expect:\n      absent: [{{apiVersion: v1, kind: Pod, name: a}}]\n      \
             objects:\n        - {{apiVersion: v1, kind: Pod, name: b}}\n        \
             - {{apiVersion: v1, kind: Node, name: n2, spec: {{taints: [{{key: k}}, {{key: node.kubernetes.io/not-ready, effect: NoSchedule}}]}}, status: {{conditions: [{{type: Ready, status: 'False'}}]}}}}\n  \
             - deleteNode: n2\n  - expect:\n      absent: [{{apiVersion: v1, kind: Pod, name: b}}, {{apiVersion: v1, kind: Node, name: n2}}]\n"
        ));
        assert!(r.passed(), "{:?}", r.failures().collect::<Vec<_>>());
    }

    #[test]
    fn step_errors_are_checked_by_the_next_expect_and_otherwise_fail() {
        let r = run_ok("name: t\nsteps:\n  - deletePod: default/ghost\n  - expect: {error: not found}\n");
        assert!(r.passed(), "{:?}", r.failures().collect::<Vec<_>>());
        let r = run_ok("name: t\nsteps:\n  - deletePod: default/ghost\n");
        let failures: Vec<String> = r.failures().map(|(at, f)| format!("{at}: {f}")).collect();
        assert_eq!(
            failures,
            ["end: error: expected no error, got [\"steps[0]: Pod default/ghost not found\"]"]
        );
        let r = run_ok("name: t\nsteps:\n  - expect: {error: boom}\n");
        assert!(!r.passed());
    }

    #[test]
    fn rejected_patch_is_reported_and_leaves_the_object() {
        let r = run_ok(
            "name: t\nsubmit:\n  - {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: a}, value: 1}\n\
             steps:\n  - patch: {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: a}, value: nope}\n  \
             - expect:\n      error: is invalid\n      objects: [{apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, name: a, value: 1}]\n",
        );
        assert!(r.passed(), "{:?}", r.failures().collect::<Vec<_>>());
    }

    #[test]
    fn advance_runs_timed_work_in_order() {
        let r = run_ok(&format!(
            "name: t\n{NODES}  pods:\n    - metadata: {{name: a, annotations: {{placer.dev/run-time: 30s}}}}\n      \
             spec: {{nodeName: n1, containers: [{{name: c, image: i}}]}}\n\
             steps:\n  - advance: 10s\n  - expect:\n      objects: [{{apiVersion: v1, kind: Pod, name: a, status: {{phase: Running}}}}]\n  \
             - advance: 20s\n  - expect:\n      objects: [{{apiVersion: v1, kind: Pod, name: a, status: {{phase: Succeeded}}}}]\n"
        ));
        assert!(r.passed(), "{:?}", r.failures().collect::<Vec<_>>());
        assert_eq!(r.virtual_time_ms, 30_000);
    }

    #[test]
    fn skipping_the_teardown_reports_the_same() {
        let s = scenario(&format!(
            "name: t\n{NODES}  pods:\n    - metadata: {{name: a, annotations: {{placer.dev/run-time: 30s}}}}\n      \
             spec: {{nodeName: n1, containers: [{{name: c, image: i}}]}}\n\
             submit:\n  - {{apiVersion: v1, kind: Pod, metadata: {{name: b}}, spec: {{containers: [{{name: c, image: i}}]}}}}\n\
             steps:\n  - advance: 40s\n"
        ));
        let plain = run(&s, &RunOptions::default()).expect("the run");
        let kept = run(&s, &RunOptions { skip_teardown: true, ..RunOptions::default() }).expect("the run");
        assert_eq!(format!("{plain:?}"), format!("{kept:?}"));
        assert_eq!(plain.objects.len(), 4, "{:?}", plain.objects);
    }

    #[test]
    fn a_loop_that_keeps_changing_is_cut_off() {
        // The kubelet writes the bound pod's conditions in the first round, so settling
        // needs a second, quiet round; one round is not enough.
        let s = scenario(&format!(
            "name: t\n{NODES}  pods:\n    - {{metadata: {{name: a}}, spec: {{nodeName: n1, containers: [{{name: c, image: i}}]}}}}\n"
        ));
        let opts = RunOptions { max_rounds: 1, ..RunOptions::default() };
        let err = run(&s, &opts).unwrap_err();
        assert_eq!(
            err.to_string(),
            "t.yaml: the cluster did not settle after submit: still changing after 1 reconcile rounds at virtual time 0 ms"
        );
    }

    #[test]
    fn top_level_expect_is_checked_after_the_steps() {
        let r = run_ok(&format!("name: t\n{NODES}steps:\n  - deleteNode: n2\nexpect:\n  absent: [{{apiVersion: v1, kind: Node, name: n2}}]\n"));
        assert!(r.passed());
        assert_eq!(r.checks.len(), 1);
        assert_eq!(r.checks[0].at, "expect");
    }
}
