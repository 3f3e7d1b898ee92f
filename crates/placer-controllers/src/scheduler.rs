//! The scheduler driver: feeds store changes to the [`Engine`] and carries out its
//! decisions through the store (bindings, conditions, nominations, evictions, events).
//!
//! Each [`Controller::reconcile`]:
//! 1. reads `watch_since(seen_rv)` and turns Node, Pod, PodGroup, PriorityClass,
//!    PodDisruptionBudget, DeviceClass, ResourceSlice and ResourceClaim changes into
//!    [`ClusterEvent`]s for the engine;
//! 2. runs [`Engine::schedule`] at the store's time;
//! 3. carries out the decisions in order: claim status writes (allocation and
//!    `reservedFor`, before the pod's binding), `bind` (a failure goes back to the engine with
//!    [`Engine::binding_failed`]), pod status (`PodScheduled=False` condition,
//!    `status.nominatedNodeName`), PodGroup status conditions (with `lastTransitionTime` =
//!    the store's time when the status flips), annotation merge patches, evictions
//!    (`DisruptionTarget` condition on the victim, then `delete`; a group evicted for a
//!    failed node the same way, reason `EvictedDueToNodeFailures`), and events
//!    (`Scheduled`, `FailedScheduling`, `Preempted`, `EvictedDueToNodeFailures`) reported by
//!    `placer-scheduler`.
//!
//! It returns true when it wrote an object (events alone do not count: they change no
//! object and no controller watches them).
//!
//! With a [`Dispatcher`] (`placer serve`) bindings and status writes leave the scheduling
//! thread ([`dispatch`]): a binding's outcome arrives on a later reconcile. A binding that
//! fails for good is handled as kube-scheduler's binding cycle does (the engine forgets
//! the assumption and requeues the pod, the pod gets a `FailedScheduling` event); when
//! the pod belongs to a gang, the gang's bindings not sent yet are cancelled and those
//! members requeued too, so the group is decided again as a whole instead of being bound
//! piecemeal (members already bound stay bound and count towards `minCount` next time).
//! As in kube-scheduler's binding cycle, a pod bound at once gets no `nominatedNodeName`
//! write first (see [`without_prebinding_nominations`]).
//!
//! PodGroups get events derived from the engine's decisions: `Scheduled` when the group's
//! `PodGroupScheduled` condition turns true, `FailedScheduling` (Warning, with the reason
//! and message of the condition) when it is false, `Preempted` when the group is a
//! preemption victim.
//!
//! The driver also reports the per-pod metrics kube-scheduler reports at the end of a
//! binding cycle or a failed attempt (`scheduler_schedule_attempts_total`,
//! `..._scheduling_attempt_duration_seconds`, the end-to-end SLI duration, attempts per
//! pod) and the queue gauges (`scheduler_pending_pods`, `scheduler_pending_entities`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use placer_api::k8s::api::core::v1::{Pod, PodCondition};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::Condition;
use placer_cluster::{
    ClusterStore, EventRecord, Kind, Object, ObjectRef, StoreError, WatchEvent, WatchEventKind,
};
use placer_engine::{ClusterEvent, Decision, Engine, Observer, SchedulerConfig, StorageEvent, VolumeWrite};
use placer_engine::{GroupKey, GroupPolicy, PodKey, QueueState};
use placer_metrics::names as metric;

use crate::{Controller, ControllerError};

const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

pub mod dispatch;
pub mod kueue_eviction;

pub use dispatch::{BindCall, BindOutcome, BindResult, Dispatcher, StatusCall};

/// Who the scheduler's events are reported by.
pub const REPORTER: &str = "placer-scheduler";
/// Condition type written on PodGroups (v1.36).
pub const POD_GROUP_SCHEDULED: &str = "PodGroupScheduled";
/// Condition type written on preemption victims (pods and PodGroups).
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";
/// Reason of the `DisruptionTarget` condition of preemption victims.
pub const REASON_PREEMPTION_BY_SCHEDULER: &str = placer_engine::REASON_PREEMPTION_BY_SCHEDULER;
/// Reason of the `DisruptionTarget` condition and the events of a group evicted because no
/// replacement for a failed node fits.
pub const REASON_NODE_FAILURES: &str = placer_engine::REASON_NODE_FAILURES;

/// Runs the engine against a cluster store.
pub struct SchedulerController {
    engine: Engine,
    observer: Box<dyn Observer + Send>,
    /// Last store resourceVersion fed to the engine.
    seen_rv: u64,
    /// Where bindings and status writes go; `None`: synchronously through the store.
    dispatcher: Option<Box<dyn Dispatcher>>,
    /// Bindings handed to the dispatcher, until their outcome arrives.
    binding: FxHashMap<PodKey, InFlight>,
    /// Pods waiting in the engine's queue: timer of their first entry, failed attempts.
    pending: FxHashMap<PodKey, Pending>,
    /// Seconds the current pass's `Engine::schedule` took (part of every attempt decided
    /// in it).
    decided_in: f64,
    /// Members of each PodGroup the current pass binds (for the group's event).
    assigned: BTreeMap<GroupKey, usize>,
    /// A claim status write (DynamicResources PreBind) failed since the last binding: the
    /// next `Bind`, the pod's, is not carried out (the engine retries the pod).
    pre_bind_failed: Option<String>,
    /// In hierarchical mode, a preempted pod whose controller is a Job with this
    /// `spec.managedBy` (the embedded Job controller's) is evicted as Kueue evicts a
    /// workload: the Job is suspended and requeued ([`kueue_eviction`]). `None`: pods are
    /// deleted one by one.
    evict_jobs_managed_by: Option<String>,
    /// `PodScheduled` conditions this controller wrote since the last sync, through a store
    /// whose status writes change only the status: the pod's resourceVersion before and
    /// after. The watch event at the version after is the version before with that
    /// condition, and the engine takes it without comparing the two.
    condition_writes: FxHashMap<PodKey, (String, String)>,
    /// The `PodScheduled=False` reason and message of pending pods whose latest version
    /// this controller wrote or found with that condition, through a store whose status
    /// writes change only the status; a pod is forgotten at any other change of it the
    /// watch brings. A failure that repeats them writes nothing (as
    /// upstream's `updatePod`, which compares with the scheduler's own copy of the pod)
    /// and is decided without reading the pod: a failed gang's members are retried at
    /// every completion in the cluster, millions of times on the lab's traces.
    unschedulable_as_written: FxHashMap<PodKey, (String, String)>,
}

/// A binding under way.
#[derive(Debug)]
struct InFlight {
    /// The `Scheduled` event's message, recorded once the binding succeeds.
    message: String,
    /// The scheduler profile (`schedulerName`) of the pod.
    profile: String,
    /// Seconds of the scheduling pass that decided it.
    decided_in: f64,
    /// Timer started when the binding was handed off.
    timer: u64,
}

/// A pod in the engine's queue.
#[derive(Debug, Clone, Copy)]
struct Pending {
    /// Timer started when the pod entered the queue (end-to-end SLI duration).
    since: u64,
    /// Failed scheduling attempts so far.
    attempts: u32,
}

impl std::fmt::Debug for SchedulerController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulerController")
            .field("engine", &self.engine)
            .field("seen_rv", &self.seen_rv)
            .finish()
    }
}

/// A decision that could not be carried out (logged; the engine retries on later events).
#[derive(Debug, thiserror::Error)]
enum DriverError {
    #[error("{action} {target}: {source}")]
    Store { action: &'static str, target: String, source: Box<StoreError> },
    #[error("binding {pod} skipped: {message}")]
    PreBind { pod: String, message: String },
}

impl SchedulerController {
    pub fn new(config: SchedulerConfig, observer: Box<dyn Observer + Send>) -> Self {
        SchedulerController {
            engine: Engine::new(config),
            observer,
            seen_rv: 0,
            dispatcher: None,
            pre_bind_failed: None,
            binding: FxHashMap::default(),
            pending: FxHashMap::default(),
            decided_in: 0.0,
            assigned: BTreeMap::new(),
            evict_jobs_managed_by: Some(crate::job::DEFAULT_MANAGED_BY.to_string()),
            condition_writes: FxHashMap::default(),
            unschedulable_as_written: FxHashMap::default(),
        }
    }

    /// Which Jobs Kueue-mode preemption evicts whole (suspend and requeue): those whose
    /// `spec.managedBy` is `managed_by`, i.e. the Jobs an embedded Job controller manages
    /// (it requeues them); `None`: none, victims' pods are deleted.
    pub fn set_job_eviction(&mut self, managed_by: Option<String>) {
        self.evict_jobs_managed_by = managed_by;
    }

    /// A driver whose bindings and status writes go through `dispatcher` (see the module
    /// documentation).
    pub fn with_dispatcher(
        config: SchedulerConfig,
        observer: Box<dyn Observer + Send>,
        dispatcher: Box<dyn Dispatcher>,
    ) -> Self {
        SchedulerController { dispatcher: Some(dispatcher), ..Self::new(config, observer) }
    }

    /// Bindings handed to the dispatcher whose outcome has not been processed yet.
    pub fn bindings_in_flight(&self) -> usize {
        self.binding.len()
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn observer_mut(&mut self) -> &mut (dyn Observer + Send) {
        &mut *self.observer
    }

    /// The last store resourceVersion the engine has seen.
    pub fn seen_resource_version(&self) -> u64 {
        self.seen_rv
    }

    /// Feeds every store change since the last call to the engine.
    fn sync(&mut self, store: &dyn ClusterStore) {
        let now = store.now_ms();
        // Writes made before this sync are in the watch now, or (a lagging watch) are read
        // the plain way.
        let mut condition_writes = std::mem::take(&mut self.condition_writes);
        // The events are visited in the store, not copied out of it; each is cloned on its
        // own (an `Arc` for nodes and pods) as the engine takes it.
        store.visit_events_since(self.seen_rv, &mut |event| {
            self.seen_rv = self.seen_rv.max(event.resource_version);
            if let (Object::Pod(pod), WatchEventKind::Modified, false) =
                (&event.object, &event.kind, condition_writes.is_empty())
            {
                let key = self.engine.canonical_pod_key(PodKey::new(
                    pod.metadata.namespace.as_deref().unwrap_or_default(),
                    pod.metadata.name.as_deref().unwrap_or_default(),
                ));
                if let Some((before, after)) = condition_writes.remove(&key) {
                    if pod.metadata.resource_version.as_deref() == Some(after.as_str()) {
                        self.engine.apply_condition_write(pod.clone(), &before, now);
                        self.track_pending(&key);
                        return;
                    }
                }
            }
            if let Some(e) = cluster_event(event.clone()) {
                let key = match &e {
                    ClusterEvent::PodUpserted(p) => Some(PodKey::new(
                        p.metadata.namespace.clone().unwrap_or_default(),
                        p.metadata.name.clone().unwrap_or_default(),
                    )),
                    ClusterEvent::PodDeleted(k) => Some(k.clone()),
                    _ => None,
                };
                self.engine.apply(e, now);
                if let Some(key) = key {
                    // After the engine read the pod: its key, shared, is the one the
                    // decisions about it will carry.
                    let key = self.engine.canonical_pod_key(key);
                    self.unschedulable_as_written.remove(&key);
                    self.track_pending(&key);
                }
            }
        });
        for message in self.engine.take_ingest_errors() {
            tracing::warn!(controller = "scheduler", %message, "object not readable by the scheduler");
        }
    }

    fn group_of(&self, pod: &PodKey) -> Option<GroupKey> {
        let info = self.engine.pod(pod)?;
        info.group_key()
    }

    /// The pod's scheduler profile (its `schedulerName`), for the `profile` label.
    fn profile_of(&self, pod: &PodKey) -> String {
        self.engine.pod(pod).map(|p| p.scheduler_name.to_string()).unwrap_or_default()
    }

    /// Starts the SLI timer of a pod that entered the queue; forgets pods that left it
    /// without being bound by us (deleted, bound elsewhere).
    fn track_pending(&mut self, key: &PodKey) {
        let queued = self.engine.queue().contains(key);
        if queued && !self.pending.contains_key(key) {
            let since = self.observer.start_timer();
            self.pending.insert(key.clone(), Pending { since, attempts: 0 });
        } else if !queued && !self.binding.contains_key(key) && !self.engine.is_assumed(key) {
            if let Some(p) = self.pending.remove(key) {
                self.observer.elapsed_seconds(p.since);
            }
        }
    }

    /// One pod attempt ended with `result` (kube's `scheduler_schedule_attempts_total`
    /// and `scheduler_scheduling_attempt_duration_seconds`).
    fn attempt(&mut self, profile: &str, result: &'static str, seconds: f64) {
        count_attempt(&mut *self.observer, profile, result, seconds);
    }

    /// [`Self::attempt`] for a pod the engine knows, labelled with its profile (no copy
    /// of the name: this runs for every member of every failed PodGroup attempt).
    fn attempt_of(&mut self, pod: &PodKey, result: &'static str, seconds: f64) {
        let profile = self.engine.pod(pod).map_or("", |p| &*p.scheduler_name);
        count_attempt(&mut *self.observer, profile, result, seconds);
    }

    /// A pod is bound: the attempt, its end-to-end duration and its number of attempts.
    fn pod_scheduled(&mut self, pod: &PodKey, profile: &str, attempt_seconds: f64) {
        self.attempt(profile, "scheduled", attempt_seconds);
        if let Some(p) = self.pending.remove(pod) {
            let secs = self.observer.elapsed_seconds(p.since);
            let attempts = p.attempts + 1;
            let label = if attempts >= 15 { "15+".to_string() } else { attempts.to_string() };
            let labels = [("attempts", label.as_str())];
            self.observer.observe(metric::POD_SCHEDULING_SLI_DURATION, &labels, secs);
            self.observer.observe(metric::POD_SCHEDULING_DURATION, &labels, secs);
            self.observer.observe(metric::POD_SCHEDULING_ATTEMPTS, &[], f64::from(attempts));
        }
    }

    /// Handles the bindings the dispatcher finished. Returns whether anything changed for
    /// the engine (a requeue).
    fn process_completions(&mut self, store: &mut dyn ClusterStore) -> bool {
        let now_ms = store.now_ms();
        let mut changed = false;
        // Cancelling a gang's bindings reports them at once: loop until nothing is left.
        loop {
            let Some(d) = self.dispatcher.as_mut() else { return false };
            let outcomes = d.completed();
            if outcomes.is_empty() {
                break;
            }
            changed |= self.handle_outcomes(store, outcomes, now_ms);
        }
        changed
    }

    fn handle_outcomes(
        &mut self,
        store: &mut dyn ClusterStore,
        outcomes: Vec<BindOutcome>,
        now_ms: u64,
    ) -> bool {
        let mut changed = false;
        for BindOutcome { call, result } in outcomes {
            let Some(inflight) = self.binding.remove(&call.pod) else { continue };
            let bind_secs = self.observer.elapsed_seconds(inflight.timer);
            let attempt_secs = inflight.decided_in + bind_secs;
            match result {
                BindResult::Bound => {
                    self.pod_scheduled(&call.pod, &inflight.profile, attempt_secs);
                    let message = if inflight.message.is_empty() {
                        format!("Successfully assigned {} to {}", call.pod, call.node)
                    } else {
                        inflight.message
                    };
                    record(store, pod_ref(&call.pod), "Normal", "Scheduled", message);
                }
                BindResult::Failed(source) => {
                    changed = true;
                    self.attempt(&inflight.profile, "error", attempt_secs);
                    self.engine.binding_failed(&call.pod, now_ms);
                    tracing::warn!(
                        controller = "scheduler",
                        pod = %call.pod,
                        node = %call.node,
                        error = %source,
                        "binding failed; the pod goes back to the queue",
                    );
                    record(
                        store,
                        pod_ref(&call.pod),
                        "Warning",
                        "FailedScheduling",
                        format!("Binding rejected: {source}"),
                    );
                    if let Some(group) = call.group.as_ref().filter(|g| self.is_gang(g)) {
                        // Not bound piecemeal: the members not sent yet come back as
                        // cancelled and the gang is decided again as a whole.
                        if let Some(d) = self.dispatcher.as_mut() {
                            d.cancel_group(group);
                        }
                        record(
                            store,
                            group_ref(group),
                            "Warning",
                            "FailedScheduling",
                            format!(
                                "Binding rejected for member {}: {source}; the gang's pending bindings are released and the group requeued",
                                call.pod
                            ),
                        );
                    }
                }
                BindResult::Cancelled => {
                    changed = true;
                    self.engine.binding_failed(&call.pod, now_ms);
                }
            }
        }
        changed
    }

    fn is_gang(&self, group: &GroupKey) -> bool {
        self.engine.groups().info(group).is_some_and(|i| matches!(i.policy, GroupPolicy::Gang { .. }))
    }

    /// Queue depths: `scheduler_pending_pods{queue}` and the pending entities (pods
    /// outside any PodGroup, and PodGroups counted once, in the queue of their first
    /// member).
    fn report_queue(&mut self) {
        if !self.observer.records_gauges() {
            return;
        }
        let queue = self.engine.queue();
        let mut pods: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut single: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut groups: BTreeMap<GroupKey, &'static str> = BTreeMap::new();
        for key in queue.keys() {
            let Some(state) = queue.state(&key) else { continue };
            let name = match state {
                QueueState::Active => "active",
                QueueState::Backoff { .. } => "backoff",
                QueueState::Unschedulable => "unschedulable",
                QueueState::Gated { .. } => "gated",
            };
            *pods.entry(name).or_default() += 1;
            match self.group_of(&key) {
                Some(g) => {
                    groups.entry(g).or_insert(name);
                }
                None => *single.entry(name).or_default() += 1,
            }
        }
        let mut group_counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        for name in groups.values() {
            *group_counts.entry(name).or_default() += 1;
        }
        for q in ["active", "backoff", "unschedulable", "gated"] {
            let n = pods.get(q).copied().unwrap_or(0) as f64;
            self.observer.gauge(metric::PENDING_PODS, &[("queue", q)], n);
            for (type_, counts) in [("pod", &single), ("podgroup", &group_counts)] {
                let n = counts.get(q).copied().unwrap_or(0) as f64;
                let labels = [("queue", q), ("type", type_)];
                self.observer.gauge(metric::PENDING_ENTITIES, &labels, n);
                self.observer.gauge(metric::QUEUED_ENTITIES, &labels, n);
            }
        }
        let in_flight = self.dispatcher.as_ref().map_or(0, |d| d.in_flight());
        self.observer.gauge(metric::GOROUTINES, &[("operation", "binding")], in_flight as f64);
    }

    /// Hands the status writes staged during a pass to the dispatcher, one per object.
    fn flush(&mut self, staged: BTreeMap<ObjectRef, (Object, Option<serde_json::Value>)>) {
        let Some(d) = self.dispatcher.as_mut() else { return };
        for (_, (object, base)) in staged {
            d.update_status(StatusCall { object, base });
        }
    }

    /// Carries out one decision. Returns whether an object was written.
    fn execute(
        &mut self,
        store: &mut dyn ClusterStore,
        decision: Decision,
        failed_binds: &mut BTreeSet<PodKey>,
    ) -> Result<bool, DriverError> {
        let now_ms = store.now_ms();
        if let Decision::Bind { pod, .. } = &decision {
            if let Some(message) = self.pre_bind_failed.take() {
                // As upstream: a PreBind failure unreserves the pod and it is tried again.
                self.attempt_of(pod, "error", self.decided_in);
                self.engine.binding_failed(pod, now_ms);
                let message = format!("running PreBind plugin \"DynamicResources\": {message}");
                record(store, pod_ref(pod), "Warning", "FailedScheduling", message.clone());
                failed_binds.insert(pod.clone());
                return Err(DriverError::PreBind { pod: pod.to_string(), message });
            }
        }
        match decision {
            Decision::Bind { pod, uid, node } if self.dispatcher.is_some() => {
                let group = self.group_of(&pod);
                let profile = self.profile_of(&pod);
                let timer = self.observer.start_timer();
                self.binding.insert(
                    pod.clone(),
                    InFlight { message: String::new(), profile, decided_in: self.decided_in, timer },
                );
                if let Some(d) = self.dispatcher.as_mut() {
                    d.bind(BindCall { pod, uid, node, group });
                }
                Ok(false)
            }
            Decision::ScheduledEvent { pod, message } if self.binding.contains_key(&pod) => {
                if let Some(b) = self.binding.get_mut(&pod) {
                    b.message = message;
                }
                Ok(false)
            }
            Decision::Bind { pod, uid, node } => match store.bind(&pod.namespace, &pod.name, &uid, &node) {
                Ok(()) => {
                    let profile = self.profile_of(&pod);
                    let decided_in = self.decided_in;
                    self.pod_scheduled(&pod, &profile, decided_in);
                    Ok(true)
                }
                Err(source) => {
                    self.attempt_of(&pod, "error", self.decided_in);
                    self.engine.binding_failed(&pod, now_ms);
                    record(
                        store,
                        pod_ref(&pod),
                        "Warning",
                        "FailedScheduling",
                        format!("Binding rejected: {source}"),
                    );
                    failed_binds.insert(pod.clone());
                    Err(DriverError::Store {
                        action: "bind",
                        target: format!("{pod} to {node}"),
                        source: Box::new(source),
                    })
                }
            },
            Decision::ScheduledEvent { pod, message } => {
                if !failed_binds.contains(&pod) {
                    record(store, pod_ref(&pod), "Normal", "Scheduled", message);
                }
                Ok(false)
            }
            Decision::PodEvent { pod, warning, reason, message } => {
                let r = pod_ref(&pod);
                if store.contains(&r) {
                    record(store, r, if warning { "Warning" } else { "Normal" }, reason, message);
                }
                Ok(false)
            }
            Decision::Nominate { pod, node } => with_retry(store, "nominate", &pod_ref(&pod), |store| {
                set_nominated(store, &pod, node.clone())
            }),
            Decision::PodUnschedulable { pod, reason, message } => {
                let result =
                    if reason == placer_engine::REASON_SCHEDULER_ERROR { "error" } else { "unschedulable" };
                self.attempt_of(&pod, result, self.decided_in);
                if let Some(p) = self.pending.get_mut(&pod) {
                    p.attempts += 1;
                }
                let mut written = None;
                let engine = &mut self.engine;
                let mut exists = true;
                // Writes applied when made, that come back through the watch as this
                // controller's own (`condition_writes`); a staged or remote write may still
                // fail, and is not remembered.
                let vouched = store.status_write_changes_only_status();
                let known = self.unschedulable_as_written.get(&pod);
                let wrote = if known.is_some_and(|(r, m)| *r == reason && *m == message) {
                    false
                } else {
                    let wrote = with_retry(store, "update status of", &pod_ref(&pod), |store| {
                        let result =
                            set_pod_unschedulable(store, engine, &pod, &reason, &message, &mut written);
                        exists = !matches!(result, Err(StoreError::NotFound(_)));
                        result
                    })?;
                    if exists && vouched {
                        self.unschedulable_as_written.insert(pod.clone(), (reason.clone(), message.clone()));
                    }
                    wrote
                };
                if let Some(versions) = written.filter(|_| vouched) {
                    self.condition_writes.insert(pod.clone(), versions);
                }
                // The write found the pod (or saw it gone): no second lookup. The pod's
                // reference is made only for a store that keeps the event (unlike `record`,
                // this runs for every member of every failed attempt).
                if exists {
                    let regarding = || pod_ref(&pod);
                    placer_cluster::record_event(
                        store,
                        regarding,
                        "Warning",
                        "FailedScheduling",
                        message,
                        REPORTER,
                    );
                }
                Ok(wrote)
            }
            Decision::PodGroupCondition { group, status, reason, message } => {
                let wrote = with_retry(store, "update status of", &group_ref(&group), |store| {
                    set_group_condition(store, &group, POD_GROUP_SCHEDULED, status, &reason, &message)
                })?;
                if store.contains(&group_ref(&group)) {
                    let assigned = self.assigned.get(&group).copied().unwrap_or(0);
                    let (type_, event_reason, note) =
                        group_event(&group, status, &reason, &message, assigned);
                    record(store, group_ref(&group), type_, event_reason, note);
                }
                Ok(wrote)
            }
            Decision::PodGroupDisruptionTarget { group, message } => {
                if store.contains(&group_ref(&group)) {
                    record(store, group_ref(&group), "Normal", "Preempted", message.clone());
                }
                with_retry(store, "update status of", &group_ref(&group), |store| {
                    set_group_condition(
                        store,
                        &group,
                        DISRUPTION_TARGET,
                        true,
                        REASON_PREEMPTION_BY_SCHEDULER,
                        &message,
                    )
                })
            }
            Decision::ClaimStatus { claim, allocation, consumer } => {
                let r =
                    ObjectRef::new(Kind::ResourceClaim, claim.namespace.to_string(), claim.name.to_string());
                // Unlike other status writes, a claim that is gone fails the binding too.
                let mut result = write_claim_status(store, &r, allocation.as_deref(), &consumer);
                if matches!(result, Err(StoreError::Conflict(_))) {
                    result = write_claim_status(store, &r, allocation.as_deref(), &consumer);
                }
                result.map_err(|source| {
                    self.pre_bind_failed = Some(format!("{r}: {source}"));
                    DriverError::Store {
                        action: "write claim status",
                        target: r.to_string(),
                        source: Box::new(source),
                    }
                })
            }
            Decision::ClaimUnreserve { claim, consumer_uid, deallocate } => {
                let r =
                    ObjectRef::new(Kind::ResourceClaim, claim.namespace.to_string(), claim.name.to_string());
                with_retry(store, "unreserve", &r, |store| {
                    unreserve_claim(store, &r, &consumer_uid, deallocate)
                })
            }
            Decision::Volume(write) => write_volume_binding(store, &write),
            Decision::PodGroupAnnotation { group, key, value } => {
                // A merge patch: `null` removes the annotation.
                let patch = serde_json::json!({"metadata": {"annotations": {key: value}}});
                let r = group_ref(&group);
                let before = store.get(&r).and_then(|o| o.metadata().resource_version.clone());
                match store.merge_patch(&r, &patch) {
                    Ok(obj) => Ok(obj.metadata().resource_version != before),
                    Err(StoreError::NotFound(_)) => Ok(false),
                    Err(source) => Err(DriverError::Store {
                        action: "annotate",
                        target: r.to_string(),
                        source: Box::new(source),
                    }),
                }
            }
            Decision::EvictForNodeFailure { group, pods, failed_nodes, message } => {
                if store.contains(&group_ref(&group)) {
                    record(store, group_ref(&group), "Normal", REASON_NODE_FAILURES, message.clone());
                }
                let condition_message = format!(
                    "{REPORTER}: PodGroup {group} evicted: no replacement for failed node(s) {} fits",
                    failed_nodes.join(", ")
                );
                let mut wrote = false;
                for (pod, uid) in pods {
                    let r = pod_ref(&pod);
                    let Some(current) = store.get(&r) else { continue };
                    if !uid.is_empty() && current.metadata().uid.as_deref() != Some(uid.as_str()) {
                        continue;
                    }
                    if current.metadata().deletion_timestamp.is_some() {
                        continue;
                    }
                    with_retry(store, "mark disruption target", &r, |store| {
                        set_pod_disruption_target(store, &pod, REASON_NODE_FAILURES, &condition_message)
                    })?;
                    record(store, r.clone(), "Normal", REASON_NODE_FAILURES, message.clone());
                    match store.delete(&r) {
                        Ok(()) => wrote = true,
                        Err(StoreError::NotFound(_)) => {}
                        Err(source) => {
                            return Err(DriverError::Store {
                                action: "evict",
                                target: r.to_string(),
                                source: Box::new(source),
                            })
                        }
                    }
                }
                Ok(wrote)
            }
            Decision::Evict { pod, uid, message } => {
                let r = pod_ref(&pod);
                let Some(current) = store.get(&r) else { return Ok(false) };
                if !uid.is_empty() && current.metadata().uid.as_deref() != Some(uid.as_str()) {
                    return Ok(false);
                }
                if current.metadata().deletion_timestamp.is_some() {
                    // Graceful deletion already started: nothing more to ask for.
                    return Ok(false);
                }
                // Kueue mode: a Job's workload is evicted whole (suspended, then requeued).
                let job = match (&current, &self.evict_jobs_managed_by) {
                    (Object::Pod(p), Some(managed_by))
                        if !self.engine.config().topology_levels.is_empty() =>
                    {
                        kueue_eviction::controlling_job(store, p, managed_by).map(|j| (p.clone(), j))
                    }
                    _ => None,
                };
                // As upstream: DisruptionTarget on the victim first, then the deletion. The
                // condition says what kind of preemptor it was (kube-scheduler's executor:
                // "<scheduler>: preempting to accommodate a higher priority pod" / "pod
                // group"); the event names it.
                let what = if message.starts_with("Preempted by podgroup") { "pod group" } else { "pod" };
                let condition_message =
                    format!("{REPORTER}: preempting to accommodate a higher priority {what}");
                with_retry(store, "mark disruption target", &r, |store| {
                    set_pod_disruption_target(store, &pod, REASON_PREEMPTION_BY_SCHEDULER, &condition_message)
                })?;
                if let Some((victim, job)) = job {
                    return self.evict_job(store, &victim, &job, &message);
                }
                record(store, r.clone(), "Normal", "Preempted", message);
                match store.delete(&r) {
                    Ok(()) => Ok(true),
                    Err(StoreError::NotFound(_)) => Ok(false),
                    Err(source) => Err(DriverError::Store {
                        action: "evict",
                        target: r.to_string(),
                        source: Box::new(source),
                    }),
                }
            }
        }
    }
}

impl Controller for SchedulerController {
    fn name(&self) -> &'static str {
        "scheduler"
    }

    fn reconcile(&mut self, store: &mut dyn ClusterStore) -> Result<bool, ControllerError> {
        let mut wrote = self.process_completions(store);
        self.sync(store);
        let now = store.now_ms();
        self.engine.set_wall_clock(now, store.now().0.as_millisecond());
        let timer = self.observer.start_timer();
        let decisions = self.engine.schedule(now, &mut *self.observer);
        self.decided_in = self.observer.elapsed_seconds(timer);
        self.assigned.clear();
        for d in &decisions {
            if let Decision::Bind { pod, .. } = d {
                if let Some(g) = self.group_of(pod) {
                    *self.assigned.entry(g).or_default() += 1;
                }
            }
        }
        let mut failed_binds = BTreeSet::new();
        if self.dispatcher.is_some() {
            let decisions = without_prebinding_nominations(decisions);
            let mut staged = BTreeMap::new();
            let mut view = Staged { inner: &mut *store, staged: &mut staged };
            for decision in decisions {
                if let Err(e) = self.execute(&mut view, decision, &mut failed_binds) {
                    wrote = true;
                    tracing::warn!(controller = "scheduler", error = %e, "decision not carried out");
                }
            }
            self.flush(staged);
        } else {
            for decision in decisions {
                match self.execute(store, decision, &mut failed_binds) {
                    Ok(w) => wrote |= w,
                    Err(e) => {
                        wrote = true;
                        tracing::warn!(controller = "scheduler", error = %e, "decision not carried out");
                    }
                }
            }
        }
        if !self.engine.config().topology_levels.is_empty() {
            // Kueue mode: a workload evicted by preemption is admitted again.
            for group in self.assigned.keys() {
                match with_retry(store, "update status of", &group_ref(group), |store| {
                    kueue_eviction::readmitted(store, group)
                }) {
                    Ok(w) => wrote |= w,
                    Err(e) => {
                        tracing::warn!(controller = "scheduler", error = %e, "decision not carried out")
                    }
                }
            }
        }
        self.report_queue();
        Ok(wrote)
    }

    fn next_wakeup_ms(&self) -> Option<u64> {
        self.engine.next_wakeup_ms()
    }
    fn next_retry_ms(&self) -> Option<u64> {
        self.engine.next_backoff_ms()
    }
}

/// The decisions to carry out in a binding cycle of kube-scheduler's shape: a
/// `nominatedNodeName` written for a pod whose binding to that node follows at once is
/// dropped.
///
/// kube-scheduler (v1.36, `NominatedNodeNameForExpectation`, KEP-5278) writes the nominated
/// node at the start of a binding cycle only when the binding will wait, because a Permit
/// plugin waits or a PreBind plugin has work ("otherwise the pod will be soon bound
/// anyway"), and a PodGroup cycle that succeeds sends its pods straight to binding without
/// a nomination. The engine nominates the members of a chosen placement; a nomination
/// that is directly followed by the same pod's `Bind` to the same node had neither: PreBind's
/// claim and volume writes come between the two, and a binding held for device binding
/// conditions is not emitted in the pass. With a dispatcher the write would only race the
/// binding (a 409 and a second write after it), one more API request per pod for nothing.
/// Nominations of pods that wait (preemption, binding conditions, PreBind writes) stay.
fn without_prebinding_nominations(decisions: Vec<Decision>) -> Vec<Decision> {
    let mut out = Vec::with_capacity(decisions.len());
    let mut it = decisions.into_iter().peekable();
    while let Some(d) = it.next() {
        if let Decision::Nominate { pod, node: Some(node) } = &d {
            let bound_at_once = matches!(
                it.peek(),
                Some(Decision::Bind { pod: p, node: n, .. }) if p == pod && n == node
            );
            if bound_at_once {
                continue;
            }
        }
        out.push(d);
    }
    out
}

/// The engine's view of a watch event (kinds the scheduler does not read give `None`).
pub fn cluster_event(event: WatchEvent) -> Option<ClusterEvent> {
    let deleted = event.kind == WatchEventKind::Deleted;
    let r = event.object.object_ref();
    Some(match event.object {
        Object::Node(_) if deleted => ClusterEvent::NodeDeleted(r.name),
        Object::Node(n) => ClusterEvent::NodeUpserted(n),
        Object::Pod(_) if deleted => ClusterEvent::PodDeleted(PodKey::new(r.namespace, r.name)),
        Object::Pod(p) => ClusterEvent::PodUpserted(p),
        Object::PodGroup(_) if deleted => ClusterEvent::PodGroupDeleted(GroupKey::new(r.namespace, r.name)),
        Object::PodGroup(g) => ClusterEvent::PodGroupUpserted(Arc::new(g)),
        Object::PriorityClass(_) if deleted => ClusterEvent::PriorityClassDeleted(r.name),
        Object::PriorityClass(pc) => ClusterEvent::PriorityClassUpserted(Arc::new(pc)),
        Object::PodDisruptionBudget(_) if deleted => {
            ClusterEvent::PodDisruptionBudgetDeleted(PodKey::new(r.namespace, r.name))
        }
        Object::PodDisruptionBudget(pdb) => ClusterEvent::PodDisruptionBudgetUpserted(Arc::new(pdb)),
        Object::Workload(_) | Object::Job(_) | Object::CronJob(_) | Object::Event(_) | Object::Lease(_) => {
            return None
        }
        Object::Namespace(_) if deleted => ClusterEvent::NamespaceDeleted(r.name),
        Object::Namespace(ns) => ClusterEvent::NamespaceUpserted(Arc::new(ns)),
        Object::DeviceClass(_) if deleted => ClusterEvent::DeviceClassDeleted(r.name),
        Object::DeviceClass(c) => ClusterEvent::DeviceClassUpserted(Arc::new(c)),
        Object::ResourceSlice(_) if deleted => ClusterEvent::ResourceSliceDeleted(r.name),
        Object::ResourceSlice(s) => ClusterEvent::ResourceSliceUpserted(Arc::new(s)),
        Object::ResourceClaim(_) if deleted => {
            ClusterEvent::ResourceClaimDeleted(PodKey::new(r.namespace, r.name))
        }
        Object::ResourceClaim(c) => ClusterEvent::ResourceClaimUpserted(Arc::new(c)),
        Object::ResourceClaimTemplate(_) => return None,
        Object::PersistentVolumeClaim(_) if deleted => {
            ClusterEvent::Storage(StorageEvent::ClaimDeleted(PodKey::new(r.namespace, r.name)))
        }
        Object::PersistentVolumeClaim(c) => ClusterEvent::Storage(StorageEvent::ClaimUpserted(Arc::new(c))),
        Object::PersistentVolume(_) if deleted => ClusterEvent::Storage(StorageEvent::VolumeDeleted(r.name)),
        Object::PersistentVolume(v) => ClusterEvent::Storage(StorageEvent::VolumeUpserted(Arc::new(*v))),
        Object::StorageClass(_) if deleted => ClusterEvent::Storage(StorageEvent::ClassDeleted(r.name)),
        Object::StorageClass(c) => ClusterEvent::Storage(StorageEvent::ClassUpserted(Arc::new(c))),
        Object::CSINode(_) if deleted => ClusterEvent::Storage(StorageEvent::CsiNodeDeleted(r.name)),
        Object::CSINode(n) => ClusterEvent::Storage(StorageEvent::CsiNodeUpserted(Arc::new(n))),
        Object::CSIDriver(_) if deleted => ClusterEvent::Storage(StorageEvent::CsiDriverDeleted(r.name)),
        Object::CSIDriver(d) => ClusterEvent::Storage(StorageEvent::CsiDriverUpserted(Arc::new(d))),
        Object::CSIStorageCapacity(_) if deleted => {
            ClusterEvent::Storage(StorageEvent::CapacityDeleted(PodKey::new(r.namespace, r.name)))
        }
        Object::CSIStorageCapacity(c) => ClusterEvent::Storage(StorageEvent::CapacityUpserted(Arc::new(c))),
        Object::VolumeAttachment(_) if deleted => {
            ClusterEvent::Storage(StorageEvent::AttachmentDeleted(r.name))
        }
        Object::VolumeAttachment(a) => ClusterEvent::Storage(StorageEvent::AttachmentUpserted(Arc::new(*a))),
    })
}

/// The event a PodGroup gets when its `PodGroupScheduled` condition is set: `Scheduled`
/// (Normal) when true, `FailedScheduling` (Warning, with the condition's reason and
/// message) when false, as its pods get.
fn group_event(
    group: &GroupKey,
    status: bool,
    reason: &str,
    message: &str,
    assigned: usize,
) -> (&'static str, &'static str, String) {
    if status {
        let note = match (assigned, message.is_empty()) {
            (0, true) => format!("Successfully scheduled pod group {group}"),
            (n, true) => format!("Successfully scheduled pod group {group}: {n} pods assigned"),
            (_, false) => format!("Successfully scheduled pod group {group}: {message}"),
        };
        ("Normal", "Scheduled", note)
    } else {
        ("Warning", "FailedScheduling", format!("{reason}: {message}"))
    }
}

/// The store as the decisions of one pass see it when status writes are dispatched:
/// status updates are staged (a later decision reads the staged object, so several
/// changes to one object become one write), everything else goes through. A deletion
/// first writes the object's staged status (a victim's `DisruptionTarget` condition
/// precedes its deletion).
struct Staged<'a> {
    inner: &'a mut dyn ClusterStore,
    staged: &'a mut BTreeMap<ObjectRef, (Object, Option<serde_json::Value>)>,
}

impl ClusterStore for Staged<'_> {
    fn now_ms(&self) -> u64 {
        self.inner.now_ms()
    }
    fn now(&self) -> placer_api::k8s::apimachinery::pkg::apis::meta::v1::Time {
        self.inner.now()
    }
    fn resource_version(&self) -> u64 {
        self.inner.resource_version()
    }
    fn get(&self, r: &ObjectRef) -> Option<Object> {
        match self.staged.get(r) {
            Some((obj, _)) => Some(obj.clone()),
            None => self.inner.get(r),
        }
    }
    fn list(&self, kind: Kind) -> Vec<Object> {
        self.inner.list(kind)
    }
    fn create(&mut self, obj: Object) -> Result<Object, StoreError> {
        self.inner.create(obj)
    }
    fn update(&mut self, obj: Object) -> Result<Object, StoreError> {
        self.inner.update(obj)
    }
    fn update_status(&mut self, obj: Object) -> Result<Object, StoreError> {
        if let Object::ResourceClaim(_) = obj {
            // DynamicResources PreBind: the claim's allocation and reservation are written
            // before the pod's binding is handed off (the kubelet starts a pod only with
            // its claims reserved for it), so this write is never deferred.
            return self.inner.update_status(obj);
        }
        let r = obj.object_ref();
        let base = match self.staged.remove(&r) {
            Some((_, base)) => base,
            None => self.inner.get(&r).and_then(|o| o.to_json().get("status").cloned()),
        };
        self.staged.insert(r, (obj.clone(), base));
        Ok(obj)
    }
    fn merge_patch(&mut self, r: &ObjectRef, patch: &serde_json::Value) -> Result<Object, StoreError> {
        self.inner.merge_patch(r, patch)
    }
    fn delete(&mut self, r: &ObjectRef) -> Result<(), StoreError> {
        if let Some((obj, _)) = self.staged.remove(r) {
            match self.inner.update_status(obj) {
                Ok(_) | Err(StoreError::NotFound(_)) => {}
                Err(e) => tracing::warn!(object = %r, error = %e, "status before deletion not written"),
            }
        }
        self.inner.delete(r)
    }
    fn bind(&mut self, namespace: &str, name: &str, uid: &str, node: &str) -> Result<(), StoreError> {
        self.inner.bind(namespace, name, uid, node)
    }
    fn record_event(&mut self, event: EventRecord) {
        self.inner.record_event(event)
    }
    fn keeps_events(&self) -> bool {
        self.inner.keeps_events()
    }
    fn events(&self) -> Vec<EventRecord> {
        self.inner.events()
    }
    fn watch_since(&self, after: u64) -> Vec<WatchEvent> {
        self.inner.watch_since(after)
    }
    fn changed_since(&self, after: u64, kinds: &[placer_cluster::Kind]) -> bool {
        self.inner.changed_since(after, kinds)
    }
    fn visit_events_since(&self, after: u64, f: &mut dyn FnMut(&WatchEvent)) {
        self.inner.visit_events_since(after, f)
    }
}

/// kube's `scheduler_schedule_attempts_total` and `scheduler_scheduling_attempt_duration_seconds`.
fn count_attempt(observer: &mut dyn Observer, profile: &str, result: &'static str, seconds: f64) {
    let labels = [("result", result), ("profile", profile)];
    observer.count(metric::SCHEDULE_ATTEMPTS, &labels, 1);
    observer.observe(metric::SCHEDULING_ATTEMPT_DURATION, &labels, seconds);
}

fn pod_ref(key: &PodKey) -> ObjectRef {
    ObjectRef::new(Kind::Pod, &*key.namespace, &*key.name)
}

fn group_ref(key: &GroupKey) -> ObjectRef {
    ObjectRef::new(Kind::PodGroup, &*key.namespace, &*key.name)
}

fn record(store: &mut dyn ClusterStore, regarding: ObjectRef, type_: &str, reason: &str, note: String) {
    placer_cluster::record_event(store, || regarding, type_, reason, note, REPORTER);
}

/// Runs a read-modify-write once more on a conflict (someone wrote in between). A missing
/// object is not an error: it was deleted and the engine hears of it through the watch.
fn with_retry(
    store: &mut dyn ClusterStore,
    action: &'static str,
    target: &ObjectRef,
    mut write: impl FnMut(&mut dyn ClusterStore) -> Result<bool, StoreError>,
) -> Result<bool, DriverError> {
    let mut result = write(store);
    if matches!(result, Err(StoreError::Conflict(_))) {
        result = write(store);
    }
    match result {
        Ok(w) => Ok(w),
        Err(StoreError::NotFound(_)) => Ok(false),
        Err(source) => {
            Err(DriverError::Store { action, target: target.to_string(), source: Box::new(source) })
        }
    }
}

/// DynamicResources PreBind: sets the claim's allocation (when it has none) and adds the
/// consumer to `status.reservedFor` (when missing).
fn write_claim_status(
    store: &mut dyn ClusterStore,
    r: &ObjectRef,
    allocation: Option<&placer_api::k8s::api::resource::v1::AllocationResult>,
    consumer: &placer_api::k8s::api::resource::v1::ResourceClaimConsumerReference,
) -> Result<bool, StoreError> {
    let Some(Object::ResourceClaim(mut claim)) = store.get(r) else {
        return Err(StoreError::NotFound(r.clone()));
    };
    let status = claim.status.get_or_insert_with(Default::default);
    let mut changed = false;
    if let (None, Some(a)) = (&status.allocation, allocation) {
        status.allocation = Some(a.clone());
        changed = true;
    }
    let reserved = status.reserved_for.get_or_insert_with(Vec::new);
    if !reserved
        .iter()
        .any(|c| c.uid == consumer.uid && c.name == consumer.name && c.resource == consumer.resource)
    {
        reserved.push(consumer.clone());
        changed = true;
    }
    if !changed {
        return Ok(false);
    }
    write_status(store, Object::ResourceClaim(claim))
}

/// DynamicResources Unreserve after a failed PreBind (device binding conditions): the
/// consumer leaves `reservedFor`; with `deallocate`, a claim no one else holds loses its
/// allocation and device status (upstream's PostFilter deallocation).
fn unreserve_claim(
    store: &mut dyn ClusterStore,
    r: &ObjectRef,
    consumer_uid: &str,
    deallocate: bool,
) -> Result<bool, StoreError> {
    let Some(Object::ResourceClaim(mut claim)) = store.get(r) else { return Ok(false) };
    let Some(status) = claim.status.as_mut() else { return Ok(false) };
    let reserved = status.reserved_for.get_or_insert_with(Vec::new);
    let before = reserved.len();
    reserved.retain(|c| c.uid != consumer_uid);
    let mut changed = reserved.len() != before;
    if reserved.is_empty() {
        status.reserved_for = None;
        if deallocate && status.allocation.is_some() {
            status.allocation = None;
            status.devices = None;
            changed = true;
        }
    }
    if !changed {
        return Ok(false);
    }
    write_status(store, Object::ResourceClaim(claim))
}

/// VolumeBinding PreBind: a PV's `claimRef` (with `pv.kubernetes.io/bound-by-controller`
/// when the user did not pre-bind it) or a claim's `volume.kubernetes.io/selected-node`,
/// as merge patches (the PV controller completes the binding or provisions).
fn write_volume_binding(store: &mut dyn ClusterStore, write: &VolumeWrite) -> Result<bool, DriverError> {
    let (r, patch) = match write {
        VolumeWrite::BindPv { pv, claim, uid, by_controller } => {
            let mut patch = serde_json::json!({"spec": {"claimRef": {
                "kind": "PersistentVolumeClaim",
                "apiVersion": "v1",
                "namespace": &*claim.namespace,
                "name": &*claim.name,
                "uid": uid,
            }}});
            if *by_controller {
                patch["metadata"] = serde_json::json!({"annotations": {ANN_BOUND_BY_CONTROLLER: "yes"}});
            }
            (ObjectRef::new(Kind::PersistentVolume, "", pv.clone()), patch)
        }
        VolumeWrite::SelectNode { claim, node } => (
            ObjectRef::new(Kind::PersistentVolumeClaim, claim.namespace.to_string(), claim.name.to_string()),
            serde_json::json!({"metadata": {"annotations": {ANN_SELECTED_NODE: node}}}),
        ),
    };
    let before = store.get(&r).and_then(|o| o.metadata().resource_version.clone());
    match store.merge_patch(&r, &patch) {
        Ok(obj) => Ok(obj.metadata().resource_version != before),
        Err(source) => {
            Err(DriverError::Store { action: "bind volume", target: r.to_string(), source: Box::new(source) })
        }
    }
}

/// Writes a status change; true when the store took a new resourceVersion.
fn write_status(store: &mut dyn ClusterStore, obj: Object) -> Result<bool, StoreError> {
    let before = obj.metadata().resource_version.clone();
    let after = store.update_status(obj)?;
    Ok(after.metadata().resource_version != before)
}

fn set_nominated(
    store: &mut dyn ClusterStore,
    key: &PodKey,
    node: Option<String>,
) -> Result<bool, StoreError> {
    let r = pod_ref(key);
    let Some(Object::Pod(pod)) = store.get(&r) else { return Err(StoreError::NotFound(r)) };
    // Compared on the shared object: the store holds it too, so a copy is made only for a
    // write.
    if pod.status.as_ref().and_then(|s| s.nominated_node_name.as_ref()) == node.as_ref() {
        return Ok(false);
    }
    let mut pod = Arc::unwrap_or_clone(pod);
    pod.status.get_or_insert_with(Default::default).nominated_node_name = node;
    write_status(store, Object::Pod(pod.into()))
}

/// Whether `pod` has `PodScheduled=False` with `reason` and `message` (what
/// [`set_pod_unschedulable`] would write).
fn has_unschedulable_condition(pod: &Pod, reason: &str, message: &str) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled")).is_some_and(|c| {
        c.status == "False" && c.reason.as_deref() == Some(reason) && c.message.as_deref() == Some(message)
    })
}

/// `written`: the pod's resourceVersion before and after, when this wrote.
fn set_pod_unschedulable(
    store: &mut dyn ClusterStore,
    engine: &mut Engine,
    key: &PodKey,
    reason: &str,
    message: &str,
    written: &mut Option<(String, String)>,
) -> Result<bool, StoreError> {
    let r = pod_ref(key);
    let Some(Object::Pod(pod)) = store.get(&r) else { return Err(StoreError::NotFound(r)) };
    if pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty()) {
        return Ok(false);
    }
    // As upstream's UpdatePodCondition: no write when the condition is already there. Checked
    // on the shared object, so the pod is copied only for a write.
    if has_unschedulable_condition(&pod, reason, message) {
        return Ok(false);
    }
    let before = pod.metadata.resource_version.clone();
    drop(pod);
    // A store that writes status only can write in place when nobody else holds the stored
    // version: the engine lets go of its copy and takes the written one back.
    let released =
        if store.status_write_changes_only_status() { engine.release_pod_object(key) } else { None };
    let now = store.now();
    let new = store.update_pod_status_with(&r, &mut |pod: &mut Pod| {
        let conditions =
            pod.status.get_or_insert_with(Default::default).conditions.get_or_insert_with(Vec::new);
        match conditions.iter_mut().find(|c| c.type_ == "PodScheduled") {
            Some(c) => {
                if c.status != "False" {
                    c.last_transition_time = Some(now.clone());
                }
                c.status = "False".to_string();
                c.reason = Some(reason.to_string());
                c.message = Some(message.to_string());
            }
            None => conditions.push(PodCondition {
                type_: "PodScheduled".to_string(),
                status: "False".to_string(),
                reason: Some(reason.to_string()),
                message: Some(message.to_string()),
                last_transition_time: Some(now.clone()),
                ..Default::default()
            }),
        }
        true
    })?;
    let Some(Object::Pod(new)) = new else { return Ok(false) };
    let after = new.metadata.resource_version.clone();
    if after == before {
        return Ok(false);
    }
    // Taken back: the watch's version is the engine's object already (`after` over `after`).
    let reattached = match (released, before.as_deref()) {
        (Some(released), Some(before)) => engine.reattach_condition_write(released, before, &new),
        _ => false,
    };
    *written = if reattached { after.clone().zip(after) } else { before.zip(after) };
    Ok(true)
}

/// Adds (or refreshes) the victim's `DisruptionTarget=True` condition with `reason`
/// (`PreemptionByScheduler`, or `EvictedDueToNodeFailures`).
fn set_pod_disruption_target(
    store: &mut dyn ClusterStore,
    key: &PodKey,
    reason: &str,
    message: &str,
) -> Result<bool, StoreError> {
    let r = pod_ref(key);
    let Some(Object::Pod(pod)) = store.get(&r) else { return Err(StoreError::NotFound(r)) };
    let mut pod = Arc::unwrap_or_clone(pod);
    let now = store.now();
    let conditions = pod.status.get_or_insert_with(Default::default).conditions.get_or_insert_with(Vec::new);
    let wanted = PodCondition {
        type_: DISRUPTION_TARGET.to_string(),
        status: "True".to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_transition_time: Some(now),
        ..Default::default()
    };
    match conditions.iter_mut().find(|c| c.type_ == DISRUPTION_TARGET) {
        Some(c) if c.status == "True" && c.reason == wanted.reason && c.message == wanted.message => {
            return Ok(false)
        }
        Some(c) => {
            let transition = if c.status == "True" {
                c.last_transition_time.clone()
            } else {
                wanted.last_transition_time.clone()
            };
            *c = PodCondition { last_transition_time: transition, ..wanted };
        }
        None => conditions.push(wanted),
    }
    write_status(store, Object::Pod(pod.into()))
}

fn set_group_condition(
    store: &mut dyn ClusterStore,
    key: &GroupKey,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
) -> Result<bool, StoreError> {
    let r = group_ref(key);
    let Some(Object::PodGroup(mut pg)) = store.get(&r) else { return Err(StoreError::NotFound(r)) };
    let now = store.now();
    let generation = pg.metadata.generation;
    let status_text = if status { "True" } else { "False" };
    let conditions = pg.status.get_or_insert_with(Default::default).conditions.get_or_insert_with(Vec::new);
    let new = Condition {
        type_: type_.to_string(),
        status: status_text.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        observed_generation: generation,
        last_transition_time: now,
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status == new.status
                && c.reason == new.reason
                && c.message == new.message
                && c.observed_generation == new.observed_generation
            {
                return Ok(false);
            }
            let transition = if c.status == new.status {
                c.last_transition_time.clone()
            } else {
                new.last_transition_time.clone()
            };
            *c = Condition { last_transition_time: transition, ..new };
        }
        None => conditions.push(new),
    }
    write_status(store, Object::PodGroup(pg))
}

#[cfg(test)]
mod tests;
