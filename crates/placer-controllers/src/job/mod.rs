//! The Job controller with the Workload / PodGroup integration of KEP-5547 (seed 001, in its
//! v1.36 shape: SEMANTICS §14).
//!
//! [`JobController`] owns Jobs the way kube-controller-manager's Job controller does, for
//! the parts Placer simulates:
//!
//! * **Pods.** Indexed and NonIndexed completion modes, `parallelism`, `completions` (nil
//!   completions is a work queue: `parallelism` pods until one succeeds, then no new pods,
//!   complete once one succeeded and none is active), pods made from the template by
//!   [`pods::build_pod`], excess pods deleted when parallelism drops.
//! * **Results.** Pods in phase `Succeeded` / `Failed` are counted once each; a pod deleted
//!   before it finished (preemption, node loss, a user) counts as failed, unless the
//!   controller deleted it itself (suspension, excess, completion). Failures above
//!   `backoffLimit` (default 6) fail the Job (`BackoffLimitExceeded`); replacement pods wait
//!   an exponential backoff (10 s doubling up to 6 min after the last failure).
//!   `activeDeadlineSeconds` fails it with `DeadlineExceeded`; `ttlSecondsAfterFinished`
//!   deletes a finished Job.
//! * **Suspension.** `spec.suspend` deletes active pods and sets `Suspended=True`; resuming
//!   sets it `False`, resets `startTime` and recreates pods, which join the same PodGroup.
//!   Workload and PodGroup stay while suspended. A Job the scheduler evicted for a
//!   Kueue-mode preemption (annotation `placer.dev/evicted-by-preemption`) is requeued once
//!   it has no active pod: `Requeued=True` on its PodGroup, the annotation removed, the
//!   Job unsuspended ([`crate::scheduler::kueue_eviction`]).
//! * **Status** through the status subresource: `active`, `ready`, `succeeded`, `failed`,
//!   `startTime`, `completionTime`, `completedIndexes` (Indexed) and the conditions
//!   `SuccessCriteriaMet` + `Complete`, `FailureTarget` + `Failed`, `Suspended`.
//! * **Gangs** ([`gang`]): for an eligible Job the controller discovers or creates the
//!   Workload, then the PodGroup, then the pods with `spec.schedulingGroup.podGroupName`, in
//!   that order, so no gang pod exists before its PodGroup. Events `WorkloadCreated`
//!   (`Created Workload <wl> for Job <job>`) and `PodGroupCreated`; a `Warning`
//!   `GangSchedulingFallback` explains every fall back to pod-by-pod scheduling. The Kueue
//!   topology annotations of the pod template reach the PodGroup. Jobs made by a CronJob are
//!   handled the same way.
//! * **Simulated kubelet** ([`kubelet`], on by default, see [`PodLifecycle`]): bound pods
//!   become `Running`; pods with `placer.dev/run-time` succeed when it has elapsed, and the
//!   controller's [`Controller::next_wakeup_ms`] is the earliest such moment.
//!
//! Not simulated: `podFailurePolicy`, `backoffLimitPerIndex`, `successPolicy`,
//! `podReplacementPolicy` (a `Warning` event says so when a Job sets them), pod tracking
//! finalizers, the `uncountedTerminatedPods` hand-off. Counting therefore relies on this
//! controller's memory of pods it already counted; a restarted controller re-reads the
//! counts from Job status and trusts them for the terminal pods that still exist.

mod cache;
pub mod gang;
pub mod indexes;
pub mod kubelet;
pub mod naming;
pub mod pods;
pub mod tas_validation;
mod validation;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use placer_api::gates::FeatureGates;
use placer_api::k8s::api::batch::v1::{Job, JobCondition, JobStatus};
use placer_api::k8s::api::core::v1::Pod;
use placer_api::k8s::api::scheduling::v1alpha2::PodGroup;
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::Time;
use placer_cluster::{ClusterStore, Kind, Object, ObjectRef, StoreError, WatchEventKind};
use rustc_hash::FxHashMap;

use crate::{Controller, ControllerError};
use cache::{pod_job_owner, Cache};
use gang::{
    decide_pod_group, decide_workload, gang_min_count, is_new_job, job_key, should_manage_workload,
    BuildError, PodGroupDecision, TemplateTopology, WorkloadDecision,
};
use indexes::IndexSet;
use kubelet::Clock;

pub use tas_validation::TopologyAnnotationValidation;
pub use validation::{parallelism_forbidden_message, JobValidation};

/// Reporter of the controller's events.
pub const REPORTER: &str = "job-controller";
/// `spec.managedBy` of Jobs the upstream Job controller owns (also the value when unset).
pub const DEFAULT_MANAGED_BY: &str = "kubernetes.io/job-controller";
/// `spec.backoffLimit` when unset.
pub const DEFAULT_BACKOFF_LIMIT: i32 = 6;
/// First delay before a pod replaces a failed one; doubles per failure.
pub const BACKOFF_BASE_MS: u64 = 10_000;
/// Longest replacement delay.
pub const BACKOFF_MAX_MS: u64 = 360_000;
/// Delay before a Job whose sync failed is tried again.
pub const RETRY_MS: u64 = 1_000;

/// Who moves Job pods through their phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PodLifecycle {
    /// The controller acts as the kubelet for its own pods (embedded cluster): bound pods
    /// run, and pods with `placer.dev/run-time` succeed after it.
    #[default]
    Simulated,
    /// Real kubelets do (real-cluster mode): the controller only reads pod phases.
    External,
}

/// Settings of a [`JobController`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobControllerConfig {
    pub pod_lifecycle: PodLifecycle,
    /// Only Jobs whose `spec.managedBy` (default [`DEFAULT_MANAGED_BY`]) equals this are
    /// handled. Next to a real kube-controller-manager, set a Placer-specific value (for
    /// example `placer.dev/job-controller`) so the two controllers never fight over a Job.
    pub managed_by: String,
}

impl Default for JobControllerConfig {
    fn default() -> Self {
        JobControllerConfig {
            pod_lifecycle: PodLifecycle::Simulated,
            managed_by: DEFAULT_MANAGED_BY.to_string(),
        }
    }
}

/// Why syncing one Job failed (the Job is retried after [`RETRY_MS`]).
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("{action}: {source}")]
    Store {
        action: String,
        #[source]
        source: StoreError,
    },
    #[error(transparent)]
    Build(#[from] BuildError),
}

fn store_err(action: impl Into<String>) -> impl FnOnce(StoreError) -> SyncError {
    let action = action.into();
    move |source| SyncError::Store { action, source }
}

/// What became of a pod that disappeared before the controller counted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Succeeded(Option<i32>),
    Failed,
}

/// What the controller remembers about one Job (by UID) between reconciles.
#[derive(Debug, Default)]
struct JobMemory {
    /// Seeded from the store on the first sync.
    seeded: bool,
    /// Terminal (or deleted) pods already reflected in status counts.
    counted: HashSet<String>,
    /// Pods the controller deleted on purpose (not failures).
    expected_deletions: HashSet<String>,
    /// Results of pods deleted before they were counted.
    pending: Vec<Outcome>,
    /// When the last failure was counted (for the replacement backoff).
    last_failure_ms: Option<u64>,
    /// Keys of Warning events already recorded (each is recorded once).
    warned: BTreeSet<String>,
}

/// Per-object timers (one, the earliest, per object), ordered by time.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    by_time: BTreeSet<(u64, ObjectRef)>,
    by_job: FxHashMap<ObjectRef, u64>,
}

impl Timers {
    pub(crate) fn set(&mut self, job: &ObjectRef, at: Option<u64>) {
        if let Some(old) = self.by_job.remove(job) {
            self.by_time.remove(&(old, job.clone()));
        }
        if let Some(at) = at {
            self.by_job.insert(job.clone(), at);
            self.by_time.insert((at, job.clone()));
        }
    }

    pub(crate) fn take_due(&mut self, now_ms: u64) -> Vec<ObjectRef> {
        let mut due = Vec::new();
        while let Some((at, _)) = self.by_time.first() {
            if *at > now_ms {
                break;
            }
            if let Some((_, job)) = self.by_time.pop_first() {
                self.by_job.remove(&job);
                due.push(job);
            }
        }
        due
    }

    pub(crate) fn earliest(&self) -> Option<u64> {
        self.by_time.first().map(|(at, _)| *at)
    }
}

/// Owns Jobs: creates their pods (and, for gang-shaped Jobs, Workload + PodGroup first),
/// counts results, keeps Job status. See the module documentation.
pub struct JobController {
    gates: FeatureGates,
    config: JobControllerConfig,
    seen_rv: u64,
    initialized: bool,
    cache: Cache,
    memory: FxHashMap<String, JobMemory>,
    dirty: BTreeSet<ObjectRef>,
    timers: Timers,
}

impl JobController {
    /// A controller for the embedded cluster (simulated kubelet, upstream `managedBy`).
    pub fn new(gates: FeatureGates) -> Self {
        Self::with_config(gates, JobControllerConfig::default())
    }

    /// A controller with explicit settings (real-cluster mode: [`PodLifecycle::External`]
    /// and a Placer-specific `managed_by`).
    pub fn with_config(gates: FeatureGates, config: JobControllerConfig) -> Self {
        JobController {
            gates,
            config,
            seen_rv: 0,
            initialized: false,
            cache: Cache::default(),
            memory: FxHashMap::default(),
            dirty: BTreeSet::new(),
            timers: Timers::default(),
        }
    }

    /// The settings the controller runs with.
    pub fn config(&self) -> &JobControllerConfig {
        &self.config
    }

    /// Fills the cache from full listings (first reconcile).
    fn initialize(&mut self, store: &dyn ClusterStore) {
        self.seen_rv = store.resource_version();
        for kind in [Kind::Job, Kind::Pod, Kind::Workload, Kind::PodGroup] {
            for obj in store.list(kind) {
                self.cache.upsert(obj);
            }
        }
        self.dirty.extend(self.cache.jobs.keys().cloned());
        self.initialized = true;
    }

    /// Applies the watch events since the last reconcile to the cache and marks the Jobs
    /// they concern.
    fn apply_watch(&mut self, store: &dyn ClusterStore) {
        for event in store.watch_since(self.seen_rv) {
            self.seen_rv = self.seen_rv.max(event.resource_version);
            let obj = event.object;
            if !matches!(obj.kind(), Kind::Job | Kind::Pod | Kind::Workload | Kind::PodGroup) {
                continue;
            }
            self.dirty.extend(self.cache.affected_jobs(&obj));
            match event.kind {
                WatchEventKind::Deleted => self.on_deleted(obj),
                WatchEventKind::Added | WatchEventKind::Modified => {
                    if !self.cache.is_stale(&obj) {
                        self.cache.upsert(obj);
                    }
                }
            }
        }
    }

    fn on_deleted(&mut self, obj: Object) {
        let r = obj.object_ref();
        match &obj {
            Object::Job(job) => {
                if let Some(uid) = job.metadata.uid.as_deref() {
                    self.memory.remove(uid);
                }
                self.timers.set(&r, None);
                self.dirty.remove(&r);
            }
            Object::Pod(pod) => self.on_pod_deleted(pod),
            _ => {}
        }
        self.cache.remove(&r);
    }

    /// A pod vanished: remember its result if it was never counted.
    fn on_pod_deleted(&mut self, pod: &Pod) {
        let Some((job_uid, job_name)) = pod_job_owner(pod) else { return };
        let namespace = pod.metadata.namespace.clone().unwrap_or_else(|| "default".to_string());
        let job_ref = ObjectRef::new(Kind::Job, namespace, job_name);
        let job_alive =
            self.cache.jobs.get(&job_ref).is_some_and(|j| j.metadata.uid.as_deref() == Some(job_uid));
        if !job_alive {
            return;
        }
        let memory = self.memory.entry(job_uid.to_string()).or_default();
        let pod_uid = pods::uid(pod);
        if memory.counted.remove(pod_uid) || memory.expected_deletions.remove(pod_uid) {
            return;
        }
        let completions =
            self.cache.jobs.get(&job_ref).and_then(|j| j.spec.as_ref()).and_then(|s| s.completions);
        memory.pending.push(if pods::is_succeeded(pod) {
            Outcome::Succeeded(completions.and_then(|c| indexes::pod_index(pod, c)))
        } else {
            Outcome::Failed
        });
    }

    fn manages(&self, job: &Job) -> bool {
        let managed_by =
            job.spec.as_ref().and_then(|s| s.managed_by.as_deref()).unwrap_or(DEFAULT_MANAGED_BY);
        managed_by == self.config.managed_by
    }

    /// Records a Warning event on the Job once per `key`.
    fn warn_once(&mut self, store: &mut dyn ClusterStore, job: &Job, key: &str, reason: &str, note: String) {
        let Some(uid) = job.metadata.uid.as_deref() else { return };
        if self.memory.entry(uid.to_string()).or_default().warned.insert(key.to_string()) {
            record(store, job, "Warning", reason, note);
        }
    }

    /// Creates a Workload or PodGroup for `job`, records the `<Kind>Created` event on the Job
    /// (`Created <Kind> <name> for Job <job>`) and caches the created object.
    fn create_for_job(
        &mut self,
        store: &mut dyn ClusterStore,
        job: &Job,
        obj: Object,
    ) -> Result<Object, SyncError> {
        let (namespace, job_name) = job_key(job);
        let kind = obj.kind();
        let name = obj.metadata().name.clone().unwrap_or_default();
        let created = store.create(obj).map_err(store_err(format!("creating {kind} {namespace}/{name}")))?;
        record(
            store,
            job,
            "Normal",
            &format!("{kind}Created"),
            format!("Created {kind} {name} for Job {job_name}"),
        );
        self.cache.upsert(created.clone());
        Ok(created)
    }

    /// Discovers or creates the Workload and PodGroup of an eligible Job (SEMANTICS §14).
    /// `None` means pod-by-pod scheduling.
    fn ensure_gang(
        &mut self,
        store: &mut dyn ClusterStore,
        job: &Job,
        has_pods: bool,
    ) -> Result<Option<PodGroup>, SyncError> {
        let (namespace, name) = job_key(job);
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let decision = {
            let matches = self.cache.workloads_for_job(&namespace, &name);
            match decide_workload(&matches, &uid, is_new_job(job, has_pods)) {
                WorkloadDecision::Use(w) => Ok(w.clone()),
                WorkloadDecision::Create => Err(None),
                WorkloadDecision::Fallback(f) => Err(Some(f)),
            }
        };
        let workload = match decision {
            Ok(w) => w,
            Err(Some(fallback)) => {
                self.warn_once(store, job, &fallback.key(), "GangSchedulingFallback", fallback.to_string());
                return Ok(None);
            }
            Err(None) => {
                let created =
                    self.create_for_job(store, job, Object::Workload(gang::build_workload(job)?))?;
                match created {
                    Object::Workload(w) => w,
                    _ => return Ok(None),
                }
            }
        };
        let wl_name = workload.metadata.name.clone().unwrap_or_default();
        let decision = {
            let matches = self.cache.pod_groups_for_workload(&namespace, &wl_name);
            match decide_pod_group(&matches, &wl_name, &uid) {
                PodGroupDecision::Use(pg) => Ok(pg.clone()),
                PodGroupDecision::Create => Err(None),
                PodGroupDecision::Fallback(f) => Err(Some(f)),
            }
        };
        match decision {
            Ok(pg) => Ok(Some(pg)),
            Err(Some(fallback)) => {
                self.warn_once(store, job, &fallback.key(), "GangSchedulingFallback", fallback.to_string());
                Ok(None)
            }
            Err(None) => {
                let pg = gang::build_pod_group(job, &workload)?;
                let created = self.create_for_job(store, job, Object::PodGroup(pg))?;
                Ok(match created {
                    Object::PodGroup(pg) => Some(pg),
                    _ => None,
                })
            }
        }
    }

    /// The gang PodGroup a Job that is not (or no longer) gang-shaped still runs in: exactly
    /// one Workload and one PodGroup, both controlled by the Job, the PodGroup with a gang
    /// policy. Never creates anything.
    fn discover_gang(&self, job: &Job) -> Option<PodGroup> {
        if !gang::integration_enabled(&self.gates)
            || job
                .spec
                .as_ref()
                .and_then(|s| s.template.spec.as_ref())
                .is_some_and(|s| s.scheduling_group.is_some())
        {
            return None;
        }
        let (namespace, name) = job_key(job);
        let uid = job.metadata.uid.as_deref()?;
        let WorkloadDecision::Use(wl) =
            decide_workload(&self.cache.workloads_for_job(&namespace, &name), uid, false)
        else {
            return None;
        };
        let wl_name = wl.metadata.name.as_deref()?;
        match decide_pod_group(&self.cache.pod_groups_for_workload(&namespace, wl_name), wl_name, uid) {
            PodGroupDecision::Use(pg) if gang_min_count(pg).is_some() => Some(pg.clone()),
            _ => None,
        }
    }

    /// Syncs one Job. Returns whether it wrote anything.
    fn sync_job(
        &mut self,
        store: &mut dyn ClusterStore,
        job_ref: &ObjectRef,
        clock: &Clock,
    ) -> Result<bool, SyncError> {
        let Some(job) = self.cache.jobs.get(job_ref).cloned() else {
            self.timers.set(job_ref, None);
            return Ok(false);
        };
        let uid = job.metadata.uid.clone().unwrap_or_default();
        if uid.is_empty() || job.metadata.deletion_timestamp.is_some() || !self.manages(&job) {
            return Ok(false);
        }
        let mut sync = JobSync::new(job, clock);
        let mut pods = self.cache.job_pods(&uid);

        if self.config.pod_lifecycle == PodLifecycle::Simulated {
            self.run_kubelet(store, &mut sync, &mut pods)?;
        }
        self.seed_memory(&sync, &pods);
        self.warn_unsupported(store, &sync.job);

        let finished = sync.has_true_condition("Complete") || sync.has_true_condition("Failed");
        if finished {
            self.finish_ttl(store, &mut sync)?;
        } else {
            self.count(&mut sync, &pods);
            self.manage(store, &mut sync, &mut pods)?;
        }
        self.write_status(store, &mut sync, &pods)?;
        self.timers.set(job_ref, sync.wake_at);
        Ok(sync.wrote)
    }

    /// The simulated kubelet for the Job's pods.
    fn run_kubelet(
        &mut self,
        store: &mut dyn ClusterStore,
        sync: &mut JobSync,
        pods: &mut [Arc<Pod>],
    ) -> Result<(), SyncError> {
        for pod in pods.iter_mut() {
            let run_time = match kubelet::run_time_ms(pod) {
                None => None,
                Some(Ok(ms)) => Some(ms),
                Some(Err(e)) => {
                    let job = sync.job.clone();
                    self.warn_once(
                        store,
                        &job,
                        "invalid-run-time",
                        "InvalidRunTime",
                        format!(
                            "pod {}: {e}; the pod runs until stopped",
                            pod.metadata.name.as_deref().unwrap_or("")
                        ),
                    );
                    None
                }
            };
            let step = kubelet::kubelet_step(pod, &sync.clock, run_time);
            sync.wake(step.wake_at_ms);
            let Some(status) = step.status else { continue };
            let mut updated = Pod::clone(pod);
            updated.status = Some(status);
            let name = pod.metadata.name.clone().unwrap_or_default();
            match store.update_status(Object::Pod(updated.into())) {
                Ok(Object::Pod(p)) => {
                    *pod = p.clone();
                    self.cache.upsert_shared_pod(p);
                    sync.wrote = true;
                }
                Ok(_) | Err(StoreError::NotFound(_)) => {}
                Err(e) => return Err(store_err(format!("updating status of pod {name}"))(e)),
            }
        }
        Ok(())
    }

    /// On the first sync of a Job, takes the terminal pods that exist as counted, adding to
    /// the status counts only what they do not already include.
    fn seed_memory(&mut self, sync: &JobSync, pods: &[Arc<Pod>]) {
        let memory = self.memory.entry(sync.uid.clone()).or_default();
        if memory.seeded {
            return;
        }
        memory.seeded = true;
        let status = sync.job.status.clone().unwrap_or_default();
        let (mut succeeded, mut failed) = (0, 0);
        for pod in pods.iter().filter(|p| pods::is_terminal(p)) {
            memory.counted.insert(pods::uid(pod).to_string());
            if pods::is_succeeded(pod) {
                succeeded += 1;
            } else {
                failed += 1;
            }
        }
        if !sync.indexed {
            for _ in status.succeeded.unwrap_or(0)..succeeded {
                memory.pending.push(Outcome::Succeeded(None));
            }
        }
        for _ in status.failed.unwrap_or(0)..failed {
            memory.pending.push(Outcome::Failed);
        }
    }

    /// Warns once about Job fields Placer does not simulate, and about Kueue topology
    /// annotations that have no PodGroup to go to.
    fn warn_unsupported(&mut self, store: &mut dyn ClusterStore, job: &Job) {
        let Some(spec) = job.spec.as_ref() else { return };
        let ignored: Vec<&str> = [
            ("podFailurePolicy", spec.pod_failure_policy.is_some()),
            ("backoffLimitPerIndex", spec.backoff_limit_per_index.is_some()),
            ("maxFailedIndexes", spec.max_failed_indexes.is_some()),
            ("successPolicy", spec.success_policy.is_some()),
            ("podReplacementPolicy", spec.pod_replacement_policy.is_some()),
        ]
        .into_iter()
        .filter_map(|(f, set)| set.then_some(f))
        .collect();
        if !ignored.is_empty() {
            let note = format!("Placer's Job controller ignores spec.{}", ignored.join(", spec."));
            self.warn_once(store, job, "unsupported-fields", "UnsupportedJobField", note);
        }
        let opted_out = spec.template.spec.as_ref().is_some_and(|s| s.scheduling_group.is_some());
        if gang::integration_enabled(&self.gates)
            && !gang::is_gang_candidate(job)
            && !opted_out
            && !TemplateTopology::of(job).is_empty()
        {
            self.warn_once(
                store,
                job,
                "topology-ignored",
                "TopologyIgnored",
                "the pod template has Kueue topology annotations, but only gang-shaped Jobs (Indexed, parallelism == \
                 completions > 1) get a PodGroup to carry them; pods are scheduled one by one"
                    .to_string(),
            );
        }
    }

    /// Counts terminal pods and pods deleted before they were counted.
    fn count(&mut self, sync: &mut JobSync, pods: &[Arc<Pod>]) {
        let memory = self.memory.entry(sync.uid.clone()).or_default();
        sync.pending_taken = memory.pending.len();
        for outcome in &memory.pending {
            match *outcome {
                Outcome::Succeeded(index) => {
                    if sync.indexed {
                        if let Some(i) = index {
                            sync.completed.insert(i);
                        }
                    } else {
                        sync.succeeded += 1;
                    }
                }
                Outcome::Failed => {
                    sync.failed += 1;
                    sync.last_failure_ms = Some(sync.clock.now_ms);
                }
            }
        }
        for pod in pods {
            if sync.indexed && pods::is_succeeded(pod) {
                if let Some(i) = indexes::pod_index(pod, sync.completions.unwrap_or(0)) {
                    sync.completed.insert(i);
                }
            }
            if !pods::is_terminal(pod) || memory.counted.contains(pods::uid(pod)) {
                continue;
            }
            sync.newly_counted.push(pods::uid(pod).to_string());
            if pods::is_succeeded(pod) {
                if !sync.indexed {
                    sync.succeeded += 1;
                }
            } else {
                sync.failed += 1;
                sync.last_failure_ms = Some(sync.clock.now_ms);
            }
        }
        if sync.indexed {
            sync.succeeded = i32::try_from(sync.completed.len()).unwrap_or(i32::MAX);
        }
        if sync.last_failure_ms.is_none() {
            sync.last_failure_ms = memory.last_failure_ms;
        }
    }

    /// Decides the Job's state and creates or deletes pods.
    fn manage(
        &mut self,
        store: &mut dyn ClusterStore,
        sync: &mut JobSync,
        pods: &mut Vec<Arc<Pod>>,
    ) -> Result<(), SyncError> {
        let spec = sync.job.spec.clone().unwrap_or_default();
        let now = sync.clock.now_ms;
        let suspended = spec.suspend == Some(true);
        // Shared, not copied: a sync of a Job of N pods allocates N pointers, not N pods.
        let active: Vec<Arc<Pod>> = pods.iter().filter(|p| pods::is_active(p)).cloned().collect();

        if sync.indexed && sync.completions.is_none() {
            let job = sync.job.clone();
            self.warn_once(
                store,
                &job,
                "invalid-indexed",
                "InvalidJob",
                "spec.completions is required when completionMode is Indexed; the Job is not run".to_string(),
            );
            return Ok(());
        }

        let deadline_ms =
            spec.active_deadline_seconds.filter(|_| !suspended).zip(sync.start_time.as_ref()).map(
                |(secs, start)| {
                    sync.clock.ms(start).saturating_add(u64::try_from(secs).unwrap_or(0).saturating_mul(1000))
                },
            );
        let backoff_limit = spec.backoff_limit.unwrap_or(DEFAULT_BACKOFF_LIMIT);
        let failure = if sync.failed > backoff_limit {
            Some(("BackoffLimitExceeded", "Job has reached the specified backoff limit"))
        } else if deadline_ms.is_some_and(|d| now >= d) {
            Some(("DeadlineExceeded", "Job was active longer than specified deadline"))
        } else {
            None
        };
        let complete = match sync.completions {
            Some(c) if sync.indexed => sync.completed.len() >= usize::try_from(c).unwrap_or(0),
            Some(c) => sync.succeeded >= c,
            None => sync.succeeded > 0 && active.is_empty(),
        };

        if let Some((reason, message)) = failure {
            for pod in &active {
                if self.delete_pod(store, sync, pod)? {
                    // Pods stopped because the Job failed count as failed, as upstream.
                    sync.failed += 1;
                    sync.newly_counted.push(pods::uid(pod).to_string());
                }
            }
            pods.retain(|p| !pods::is_active(p));
            sync.set_condition("FailureTarget", "True", reason, message);
            sync.set_condition("Failed", "True", reason, message);
            record(store, &sync.job, "Warning", reason, message.to_string());
            return Ok(());
        }
        if complete {
            for pod in &active {
                self.delete_pod(store, sync, pod)?;
            }
            pods.retain(|p| !pods::is_active(p));
            let message = "Reached expected number of succeeded pods";
            sync.set_condition("SuccessCriteriaMet", "True", "CompletionsReached", message);
            sync.set_condition("Complete", "True", "CompletionsReached", message);
            sync.completion_time = Some(sync.clock.now());
            record(store, &sync.job, "Normal", "Completed", "Job completed".to_string());
            return Ok(());
        }
        if suspended {
            for pod in &active {
                self.delete_pod(store, sync, pod)?;
            }
            pods.retain(|p| !pods::is_active(p));
            if sync.set_condition("Suspended", "True", "JobSuspended", "Job suspended") {
                record(store, &sync.job, "Normal", "Suspended", "Job suspended".to_string());
            }
            if active.is_empty() {
                // Evicted by Kueue-mode preemption and stopped: requeue (unsuspend).
                let group = self.discover_gang(&sync.job).and_then(|pg| {
                    let ns = pg.metadata.namespace.clone().unwrap_or_default();
                    pg.metadata.name.clone().map(|name| placer_engine::GroupKey::new(ns, name))
                });
                match crate::scheduler::kueue_eviction::requeue(store, &sync.job, group.as_ref()) {
                    Ok(wrote) => sync.wrote |= wrote,
                    Err(e) => {
                        tracing::warn!(controller = "job", job = %job_key(&sync.job).1, error = %e, "requeue after eviction");
                        sync.wake(Some(now.saturating_add(1_000)));
                    }
                }
            }
            return Ok(());
        }

        if sync.has_true_condition("Suspended") {
            sync.set_condition("Suspended", "False", "JobResumed", "Job resumed");
            sync.start_time = Some(sync.clock.now());
            record(store, &sync.job, "Normal", "Resumed", "Job resumed".to_string());
        }
        if sync.start_time.is_none() {
            sync.start_time = Some(sync.clock.now());
        }
        if let (Some(secs), Some(start)) = (spec.active_deadline_seconds, sync.start_time.as_ref()) {
            sync.wake(Some(
                sync.clock.ms(start).saturating_add(u64::try_from(secs).unwrap_or(0).saturating_mul(1000)),
            ));
        }

        let mut parallelism = spec.parallelism.unwrap_or(1).max(0);
        let pod_group = if should_manage_workload(&self.gates, &sync.job) {
            let job = sync.job.clone();
            let pg = self.ensure_gang(store, &job, !pods.is_empty())?;
            if let Some(min_count) = pg.as_ref().and_then(gang_min_count) {
                if min_count != parallelism {
                    let pg_name = pg.as_ref().and_then(|p| p.metadata.name.clone()).unwrap_or_default();
                    self.warn_once(
                        store,
                        &job,
                        &format!("parallelism-ignored:{parallelism}"),
                        "ParallelismChangeIgnored",
                        format!(
                            "spec.parallelism is {parallelism} but the Job is gang-scheduled through PodGroup \
                             {pg_name:?} with minCount {min_count}; the gang is not resized, the Job keeps running \
                             {min_count} pods"
                        ),
                    );
                    parallelism = min_count;
                }
            }
            pg.and_then(|p| p.metadata.name)
        } else if let Some(pg) = self.discover_gang(&sync.job) {
            // No longer gang-shaped (its parallelism changed without admission, as against a
            // real API server) but running as a gang: keep the gang as it is.
            let min_count = gang_min_count(&pg).unwrap_or(parallelism);
            let pg_name = pg.metadata.name.clone().unwrap_or_default();
            if min_count != parallelism {
                let job = sync.job.clone();
                self.warn_once(
                    store,
                    &job,
                    &format!("parallelism-ignored:{parallelism}"),
                    "ParallelismChangeIgnored",
                    format!(
                        "spec.parallelism is {parallelism} but the Job is gang-scheduled through PodGroup {pg_name:?} \
                         with minCount {min_count}; the gang is not resized, the Job keeps running {min_count} pods"
                    ),
                );
                parallelism = min_count;
            }
            Some(pg_name)
        } else {
            None
        };

        let creation_allowed_at = sync.last_failure_ms.filter(|_| sync.failed > 0).map(|at| {
            let shift = u32::try_from(sync.failed.saturating_sub(1)).unwrap_or(u32::MAX).min(16);
            at.saturating_add(BACKOFF_BASE_MS.saturating_mul(1u64 << shift).min(BACKOFF_MAX_MS))
        });
        let may_create = creation_allowed_at.is_none_or(|at| now >= at);
        if !may_create {
            sync.wake(creation_allowed_at);
        }

        if sync.indexed {
            self.manage_indexed(store, sync, pods, &active, parallelism, may_create, pod_group.as_deref())
        } else {
            self.manage_non_indexed(store, sync, pods, &active, parallelism, may_create)
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn manage_indexed(
        &mut self,
        store: &mut dyn ClusterStore,
        sync: &mut JobSync,
        pods: &mut Vec<Arc<Pod>>,
        active: &[Arc<Pod>],
        parallelism: i32,
        may_create: bool,
        pod_group: Option<&str>,
    ) -> Result<(), SyncError> {
        let completions = sync.completions.unwrap_or(0);
        let remaining = usize::try_from(completions).unwrap_or(0).saturating_sub(sync.completed.len());
        let want = remaining.min(usize::try_from(parallelism).unwrap_or(0));

        // One pod per pending index: the best candidate stays, duplicates and pods of
        // completed or invalid indexes go.
        let mut by_index: BTreeMap<i32, Vec<&Pod>> = BTreeMap::new();
        let mut doomed: Vec<&Pod> = Vec::new();
        for pod in active {
            match indexes::pod_index(pod, completions) {
                Some(i) if !sync.completed.contains(i) => by_index.entry(i).or_default().push(pod),
                _ => doomed.push(pod),
            }
        }
        let mut kept: Vec<(i32, &Pod)> = Vec::with_capacity(by_index.len());
        for (index, mut candidates) in by_index {
            candidates.sort_by_key(|p| removal_rank(p));
            let mut candidates = candidates.into_iter();
            if let Some(best) = candidates.next() {
                kept.push((index, best));
            }
            doomed.extend(candidates);
        }
        // Too many (parallelism went down): the worst-placed go first, highest index first
        // among equals.
        if kept.len() > want {
            kept.sort_by_key(|(i, p)| {
                let (unbound, not_ready, created, _) = removal_rank(p);
                (unbound, not_ready, created, *i)
            });
            doomed.extend(kept.drain(want..).map(|(_, p)| p));
        }
        for pod in &doomed {
            self.delete_pod(store, sync, pod)?;
        }
        let doomed_uids: HashSet<&str> = doomed.iter().map(|p| pods::uid(p)).collect();
        pods.retain(|p| !doomed_uids.contains(pods::uid(p)));

        if !may_create || kept.len() >= want {
            return Ok(());
        }
        let kept: HashSet<i32> = kept.into_iter().map(|(i, _)| i).collect();
        let missing: Vec<i32> = (0..completions)
            .filter(|i| !sync.completed.contains(*i) && !kept.contains(i))
            .take(want - kept.len())
            .collect();
        for index in missing {
            let pod = pods::build_pod(&sync.job, Some(index), pod_group)?;
            pods.push(self.create_pod(store, sync, pod)?);
        }
        Ok(())
    }

    fn manage_non_indexed(
        &mut self,
        store: &mut dyn ClusterStore,
        sync: &mut JobSync,
        pods: &mut Vec<Arc<Pod>>,
        active: &[Arc<Pod>],
        parallelism: i32,
        may_create: bool,
    ) -> Result<(), SyncError> {
        let active_count = i32::try_from(active.len()).unwrap_or(i32::MAX);
        let want = match sync.completions {
            Some(c) => (c - sync.succeeded).clamp(0, parallelism),
            None if sync.succeeded > 0 => active_count,
            None => parallelism,
        };
        if active_count > want {
            let mut order: Vec<&Pod> = active.iter().map(|p| &**p).collect();
            order.sort_by_key(|p| removal_rank(p));
            let excess = usize::try_from(active_count - want).unwrap_or(0);
            let doomed: Vec<&Pod> = order.into_iter().rev().take(excess).collect();
            for pod in &doomed {
                self.delete_pod(store, sync, pod)?;
            }
            let doomed_uids: HashSet<&str> = doomed.iter().map(|p| pods::uid(p)).collect();
            pods.retain(|p| !doomed_uids.contains(pods::uid(p)));
            return Ok(());
        }
        if may_create {
            for _ in active_count..want {
                let pod = pods::build_pod(&sync.job, None, None)?;
                pods.push(self.create_pod(store, sync, pod)?);
            }
        }
        Ok(())
    }

    fn create_pod(
        &mut self,
        store: &mut dyn ClusterStore,
        sync: &mut JobSync,
        pod: Pod,
    ) -> Result<Arc<Pod>, SyncError> {
        let job_name = sync.job.metadata.name.clone().unwrap_or_default();
        match store.create(Object::Pod(pod.into())) {
            Ok(Object::Pod(created)) => {
                sync.wrote = true;
                let name = created.metadata.name.clone().unwrap_or_default();
                record(store, &sync.job, "Normal", "SuccessfulCreate", format!("Created pod: {name}"));
                self.cache.upsert_shared_pod(created.clone());
                Ok(created)
            }
            Ok(other) => Err(SyncError::Store {
                action: format!("creating a pod for Job {job_name}"),
                source: StoreError::Other(format!("store returned a {} for a Pod", other.kind())),
            }),
            Err(e) => {
                record(store, &sync.job, "Warning", "FailedCreate", format!("Error creating: {e}"));
                Err(store_err(format!("creating a pod for Job {job_name}"))(e))
            }
        }
    }

    /// Deletes a pod on purpose. Returns whether it was deleted (false when already gone).
    fn delete_pod(
        &mut self,
        store: &mut dyn ClusterStore,
        sync: &mut JobSync,
        pod: &Pod,
    ) -> Result<bool, SyncError> {
        let r =
            ObjectRef::new(Kind::Pod, sync.namespace.clone(), pod.metadata.name.clone().unwrap_or_default());
        let pod_uid = pods::uid(pod).to_string();
        self.memory.entry(sync.uid.clone()).or_default().expected_deletions.insert(pod_uid);
        match store.delete(&r) {
            Ok(()) => {
                sync.wrote = true;
                record(store, &sync.job, "Normal", "SuccessfulDelete", format!("Deleted pod: {}", r.name));
                self.cache.remove(&r);
                Ok(true)
            }
            Err(StoreError::NotFound(_)) => Ok(false),
            Err(e) => Err(store_err(format!("deleting pod {}", r.name))(e)),
        }
    }

    /// Deletes a finished Job once `ttlSecondsAfterFinished` has passed.
    fn finish_ttl(&mut self, store: &mut dyn ClusterStore, sync: &mut JobSync) -> Result<(), SyncError> {
        let Some(ttl) = sync.job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished) else {
            return Ok(());
        };
        let finished_at = sync
            .completion_time
            .clone()
            .or_else(|| sync.condition("Failed").and_then(|c| c.last_transition_time.clone()))
            .map(|t| sync.clock.ms(&t))
            .unwrap_or(sync.clock.now_ms);
        let expires = finished_at.saturating_add(u64::try_from(ttl).unwrap_or(0).saturating_mul(1000));
        if sync.clock.now_ms < expires {
            sync.wake(Some(expires));
            return Ok(());
        }
        let r = ObjectRef::new(
            Kind::Job,
            sync.namespace.clone(),
            sync.job.metadata.name.clone().unwrap_or_default(),
        );
        match store.delete(&r) {
            Ok(()) | Err(StoreError::NotFound(_)) => {
                sync.wrote = true;
                sync.deleted = true;
                Ok(())
            }
            Err(e) => Err(store_err(format!("deleting finished Job {}", r.name))(e)),
        }
    }

    /// Writes the Job status when it changed, then commits what was counted.
    fn write_status(
        &mut self,
        store: &mut dyn ClusterStore,
        sync: &mut JobSync,
        pods: &[Arc<Pod>],
    ) -> Result<(), SyncError> {
        if sync.deleted {
            return Ok(());
        }
        let old = sync.job.status.clone().unwrap_or_default();
        let active: Vec<&Pod> = pods.iter().filter(|p| pods::is_active(p)).map(|p| &**p).collect();
        let ready = active.iter().filter(|p| pods::is_ready(p)).count();
        let count = |n: i32| (n > 0).then_some(n);
        let new = JobStatus {
            active: count(i32::try_from(active.len()).unwrap_or(i32::MAX)),
            ready: Some(i32::try_from(ready).unwrap_or(i32::MAX)),
            succeeded: count(sync.succeeded),
            failed: count(sync.failed),
            start_time: sync.start_time.clone(),
            completion_time: sync.completion_time.clone(),
            conditions: (!sync.conditions.is_empty()).then(|| sync.conditions.clone()),
            completed_indexes: if sync.indexed {
                Some(sync.completed.to_text()).filter(|t| !t.is_empty())
            } else {
                old.completed_indexes.clone()
            },
            ..old.clone()
        };
        if new != old {
            let mut job = sync.job.clone();
            job.status = Some(new);
            job.metadata.resource_version = None;
            let name = job.metadata.name.clone().unwrap_or_default();
            match store.update_status(Object::Job(Box::new(job))) {
                Ok(updated) => {
                    sync.wrote = true;
                    self.cache.upsert(updated);
                }
                Err(StoreError::NotFound(_)) => return Ok(()),
                Err(e) => return Err(store_err(format!("updating status of Job {name}"))(e)),
            }
        }
        let memory = self.memory.entry(sync.uid.clone()).or_default();
        memory.counted.extend(sync.newly_counted.drain(..));
        memory.pending.drain(..sync.pending_taken.min(memory.pending.len()));
        sync.pending_taken = 0;
        if sync.last_failure_ms.is_some() {
            memory.last_failure_ms = sync.last_failure_ms;
        }
        Ok(())
    }
}

/// Removal preference among active pods, best-to-keep first: bound before unbound, ready
/// before not ready, older before newer, then by name (deterministic).
fn removal_rank(pod: &Pod) -> (bool, bool, Option<i64>, String) {
    (
        !pods::is_bound(pod),
        !pods::is_ready(pod),
        pod.metadata.creation_timestamp.as_ref().map(|t| t.0.as_millisecond()),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

fn record(store: &mut dyn ClusterStore, job: &Job, type_: &str, reason: &str, note: String) {
    let regarding = || {
        let (namespace, name) = job_key(job);
        ObjectRef::new(Kind::Job, namespace, name)
    };
    placer_cluster::record_event(store, regarding, type_, reason, note, REPORTER);
}

/// The state of one Job sync, built from the cached Job and updated as the sync decides.
struct JobSync {
    job: Job,
    uid: String,
    namespace: String,
    clock: Clock,
    indexed: bool,
    completions: Option<i32>,
    succeeded: i32,
    failed: i32,
    completed: IndexSet,
    start_time: Option<Time>,
    completion_time: Option<Time>,
    conditions: Vec<JobCondition>,
    newly_counted: Vec<String>,
    pending_taken: usize,
    last_failure_ms: Option<u64>,
    wake_at: Option<u64>,
    wrote: bool,
    deleted: bool,
}

impl JobSync {
    fn new(job: Job, clock: &Clock) -> JobSync {
        let status = job.status.clone().unwrap_or_default();
        let spec = job.spec.clone().unwrap_or_default();
        let indexed = spec.completion_mode.as_deref() == Some(gang::INDEXED);
        let (namespace, _) = job_key(&job);
        JobSync {
            uid: job.metadata.uid.clone().unwrap_or_default(),
            namespace,
            clock: *clock,
            indexed,
            completions: spec.completions,
            succeeded: status.succeeded.unwrap_or(0),
            failed: status.failed.unwrap_or(0),
            completed: if indexed {
                IndexSet::parse(
                    status.completed_indexes.as_deref().unwrap_or(""),
                    spec.completions.unwrap_or(0),
                )
            } else {
                IndexSet::new()
            },
            start_time: status.start_time.clone(),
            completion_time: status.completion_time.clone(),
            conditions: status.conditions.clone().unwrap_or_default(),
            newly_counted: Vec::new(),
            pending_taken: 0,
            last_failure_ms: None,
            wake_at: None,
            wrote: false,
            deleted: false,
            job,
        }
    }

    fn wake(&mut self, at: Option<u64>) {
        if let Some(at) = at {
            self.wake_at = Some(self.wake_at.map_or(at, |w| w.min(at)));
        }
    }

    fn condition(&self, type_: &str) -> Option<&JobCondition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    fn has_true_condition(&self, type_: &str) -> bool {
        self.condition(type_).is_some_and(|c| c.status == "True")
    }

    /// Sets a condition as upstream's `ensureJobConditionStatus`: a missing condition is
    /// added only with status True; an existing one is updated when status, reason or
    /// message differ. Returns whether anything changed.
    fn set_condition(&mut self, type_: &str, status: &str, reason: &str, message: &str) -> bool {
        let now = self.clock.now();
        match self.conditions.iter_mut().find(|c| c.type_ == type_) {
            Some(c)
                if c.status == status
                    && c.reason.as_deref() == Some(reason)
                    && c.message.as_deref() == Some(message) =>
            {
                false
            }
            Some(c) => {
                if c.status != status {
                    c.last_transition_time = Some(now.clone());
                }
                c.status = status.to_string();
                c.reason = Some(reason.to_string());
                c.message = Some(message.to_string());
                c.last_probe_time = Some(now);
                true
            }
            None if status == "True" => {
                self.conditions.push(JobCondition {
                    type_: type_.to_string(),
                    status: status.to_string(),
                    reason: Some(reason.to_string()),
                    message: Some(message.to_string()),
                    last_probe_time: Some(now.clone()),
                    last_transition_time: Some(now),
                });
                true
            }
            None => false,
        }
    }
}

impl Controller for JobController {
    fn name(&self) -> &'static str {
        "job-controller"
    }

    fn reconcile(&mut self, store: &mut dyn ClusterStore) -> Result<bool, ControllerError> {
        let clock = Clock::new(store.now_ms(), &store.now());
        if self.initialized {
            self.apply_watch(store);
        } else {
            self.initialize(store);
        }
        self.dirty.extend(self.timers.take_due(clock.now_ms));
        let dirty = std::mem::take(&mut self.dirty);
        let mut wrote = false;
        let mut errors = Vec::new();
        for job_ref in &dirty {
            match self.sync_job(store, job_ref, &clock) {
                Ok(w) => wrote |= w,
                Err(e) => {
                    tracing::warn!(job = %job_ref, error = %e, "job sync failed; retrying");
                    errors.push(format!("{job_ref}: {e}"));
                    self.timers.set(job_ref, Some(clock.now_ms.saturating_add(RETRY_MS)));
                }
            }
        }
        if errors.is_empty() {
            Ok(wrote)
        } else {
            Err(ControllerError { controller: "job-controller", message: errors.join("; ") })
        }
    }

    fn next_wakeup_ms(&self) -> Option<u64> {
        self.timers.earliest()
    }
}
