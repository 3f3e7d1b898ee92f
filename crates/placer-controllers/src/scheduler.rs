//! The scheduler driver: feeds store changes to the [`Engine`] and carries out its
//! decisions through the store (bindings, conditions, nominations, evictions, events).
//!
//! Each [`Controller::reconcile`]:
//! 1. reads `watch_since(seen_rv)` and turns Node, Pod, PodGroup, PriorityClass and
//!    PodDisruptionBudget changes into [`ClusterEvent`]s for the engine;
//! 2. runs [`Engine::schedule`] at the store's time;
//! 3. carries out the decisions in order: `bind` (a failure goes back to the engine with
//!    [`Engine::binding_failed`]), pod status (`PodScheduled=False` condition,
//!    `status.nominatedNodeName`), PodGroup status conditions (with `lastTransitionTime` =
//!    the store's time when the status flips), annotation merge patches, evictions
//!    (`DisruptionTarget` condition on the victim, then `delete`), and events (`Scheduled`, `FailedScheduling`, `Preempted`) reported by
//!    `placer-scheduler`.
//!
//! It returns true when it wrote an object (events alone do not count: they change no
//! object and no controller watches them).

use std::collections::BTreeSet;
use std::sync::Arc;

use placer_api::k8s::api::core::v1::PodCondition;
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::Condition;
use placer_cluster::{
    ClusterStore, EventRecord, Kind, Object, ObjectRef, StoreError, WatchEvent, WatchEventKind,
};
use placer_engine::{ClusterEvent, Decision, Engine, Observer, SchedulerConfig};
use placer_engine::{GroupKey, PodKey};

use crate::{Controller, ControllerError};

/// Who the scheduler's events are reported by.
pub const REPORTER: &str = "placer-scheduler";
/// Condition type written on PodGroups (v1.36).
pub const POD_GROUP_SCHEDULED: &str = "PodGroupScheduled";
/// Condition type written on preemption victims (pods and PodGroups).
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";
/// Reason of the `DisruptionTarget` condition of preemption victims.
pub const REASON_PREEMPTION_BY_SCHEDULER: &str = placer_engine::REASON_PREEMPTION_BY_SCHEDULER;

/// Runs the engine against a cluster store.
pub struct SchedulerController {
    engine: Engine,
    observer: Box<dyn Observer + Send>,
    /// Last store resourceVersion fed to the engine.
    seen_rv: u64,
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
}

impl SchedulerController {
    pub fn new(config: SchedulerConfig, observer: Box<dyn Observer + Send>) -> Self {
        SchedulerController { engine: Engine::new(config), observer, seen_rv: 0 }
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
        for event in store.watch_since(self.seen_rv) {
            self.seen_rv = self.seen_rv.max(event.resource_version);
            if let Some(e) = cluster_event(event) {
                self.engine.apply(e, now);
            }
        }
        for message in self.engine.take_ingest_errors() {
            tracing::warn!(controller = "scheduler", %message, "object not readable by the scheduler");
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
        match decision {
            Decision::Bind { pod, uid, node } => match store.bind(&pod.namespace, &pod.name, &uid, &node) {
                Ok(()) => Ok(true),
                Err(source) => {
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
            Decision::Nominate { pod, node } => with_retry(store, "nominate", &pod_ref(&pod), |store| {
                set_nominated(store, &pod, node.clone())
            }),
            Decision::PodUnschedulable { pod, reason, message } => {
                let wrote = with_retry(store, "update status of", &pod_ref(&pod), |store| {
                    set_pod_unschedulable(store, &pod, &reason, &message)
                })?;
                if store.get(&pod_ref(&pod)).is_some() {
                    record(store, pod_ref(&pod), "Warning", "FailedScheduling", message);
                }
                Ok(wrote)
            }
            Decision::PodGroupCondition { group, status, reason, message } => {
                with_retry(store, "update status of", &group_ref(&group), |store| {
                    set_group_condition(store, &group, POD_GROUP_SCHEDULED, status, &reason, &message)
                })
            }
            Decision::PodGroupDisruptionTarget { group, message } => {
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
            Decision::PodGroupAnnotation { group, key, value } => {
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
                // As upstream: DisruptionTarget on the victim first, then the deletion.
                let condition_message = format!(
                    "{REPORTER}: preempting to accommodate a higher priority {}",
                    message.strip_prefix("Preempted by ").unwrap_or("workload")
                );
                with_retry(store, "mark disruption target", &r, |store| {
                    set_pod_disruption_target(store, &pod, &condition_message)
                })?;
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
        self.sync(store);
        let now = store.now_ms();
        let decisions = self.engine.schedule(now, &mut *self.observer);
        let mut wrote = false;
        let mut failed_binds = BTreeSet::new();
        for decision in decisions {
            match self.execute(store, decision, &mut failed_binds) {
                Ok(w) => wrote |= w,
                Err(e) => {
                    wrote = true;
                    tracing::warn!(controller = "scheduler", error = %e, "decision not carried out");
                }
            }
        }
        Ok(wrote)
    }

    fn next_wakeup_ms(&self) -> Option<u64> {
        self.engine.next_wakeup_ms()
    }
}

/// The engine's view of a watch event (kinds the scheduler does not read give `None`).
pub fn cluster_event(event: WatchEvent) -> Option<ClusterEvent> {
    let deleted = event.kind == WatchEventKind::Deleted;
    let r = event.object.object_ref();
    Some(match event.object {
        Object::Node(_) if deleted => ClusterEvent::NodeDeleted(r.name),
        Object::Node(n) => ClusterEvent::NodeUpserted(Arc::new(n)),
        Object::Pod(_) if deleted => ClusterEvent::PodDeleted(PodKey::new(r.namespace, r.name)),
        Object::Pod(p) => ClusterEvent::PodUpserted(Arc::new(p)),
        Object::PodGroup(_) if deleted => ClusterEvent::PodGroupDeleted(GroupKey::new(r.namespace, r.name)),
        Object::PodGroup(g) => ClusterEvent::PodGroupUpserted(Arc::new(g)),
        Object::PriorityClass(_) if deleted => ClusterEvent::PriorityClassDeleted(r.name),
        Object::PriorityClass(pc) => ClusterEvent::PriorityClassUpserted(Arc::new(pc)),
        Object::PodDisruptionBudget(_) if deleted => {
            ClusterEvent::PodDisruptionBudgetDeleted(PodKey::new(r.namespace, r.name))
        }
        Object::PodDisruptionBudget(pdb) => ClusterEvent::PodDisruptionBudgetUpserted(Arc::new(pdb)),
        Object::Workload(_) | Object::Job(_) | Object::CronJob(_) => return None,
    })
}

fn pod_ref(key: &PodKey) -> ObjectRef {
    ObjectRef::new(Kind::Pod, &*key.namespace, &*key.name)
}

fn group_ref(key: &GroupKey) -> ObjectRef {
    ObjectRef::new(Kind::PodGroup, &*key.namespace, &*key.name)
}

fn record(store: &mut dyn ClusterStore, regarding: ObjectRef, type_: &str, reason: &str, note: String) {
    let time_ms = store.now_ms();
    store.record_event(EventRecord {
        regarding,
        type_: type_.to_string(),
        reason: reason.to_string(),
        note,
        reporter: REPORTER.to_string(),
        time_ms,
    });
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
    let Some(Object::Pod(mut pod)) = store.get(&r) else { return Err(StoreError::NotFound(r)) };
    let status = pod.status.get_or_insert_with(Default::default);
    if status.nominated_node_name == node {
        return Ok(false);
    }
    status.nominated_node_name = node;
    write_status(store, Object::Pod(pod))
}

fn set_pod_unschedulable(
    store: &mut dyn ClusterStore,
    key: &PodKey,
    reason: &str,
    message: &str,
) -> Result<bool, StoreError> {
    let r = pod_ref(key);
    let Some(Object::Pod(mut pod)) = store.get(&r) else { return Err(StoreError::NotFound(r)) };
    if pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty()) {
        return Ok(false);
    }
    let now = store.now();
    let conditions = pod.status.get_or_insert_with(Default::default).conditions.get_or_insert_with(Vec::new);
    let wanted = |c: &PodCondition| {
        c.status == "False" && c.reason.as_deref() == Some(reason) && c.message.as_deref() == Some(message)
    };
    match conditions.iter_mut().find(|c| c.type_ == "PodScheduled") {
        Some(c) if wanted(c) => return Ok(false),
        Some(c) => {
            if c.status != "False" {
                c.last_transition_time = Some(now);
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
            last_transition_time: Some(now),
            ..Default::default()
        }),
    }
    write_status(store, Object::Pod(pod))
}

/// Adds (or refreshes) the victim's `DisruptionTarget=True` condition, reason
/// `PreemptionByScheduler`.
fn set_pod_disruption_target(
    store: &mut dyn ClusterStore,
    key: &PodKey,
    message: &str,
) -> Result<bool, StoreError> {
    let r = pod_ref(key);
    let Some(Object::Pod(mut pod)) = store.get(&r) else { return Err(StoreError::NotFound(r)) };
    let now = store.now();
    let conditions = pod.status.get_or_insert_with(Default::default).conditions.get_or_insert_with(Vec::new);
    let wanted = PodCondition {
        type_: DISRUPTION_TARGET.to_string(),
        status: "True".to_string(),
        reason: Some(REASON_PREEMPTION_BY_SCHEDULER.to_string()),
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
    write_status(store, Object::Pod(pod))
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
