//! Kueue's eviction of a Job's workload, for Kueue-mode (`topologyLevels`) preemption.
//!
//! Kueue does not delete a preempted workload's pods one by one
//! (`pkg/scheduler/preemption`, `pkg/controller/jobframework`): it evicts the Workload
//! (conditions `Preempted=True`, reason `InClusterQueue`, and `Evicted=True`, reason
//! `Preempted`, both with the message `Preempted to accommodate a workload (UID: <uid>,
//! JobUID: <uid>) due to prioritization in the ClusterQueue`; events `Preempted` and
//! `EvictedDueToPreempted` on the Workload), then the Job reconciler stops the Job
//! (`spec.suspend: true`, event `Stopped`), so the Job controller deletes its active pods
//! without counting them as failures. Once the Job has no active pod the workload is
//! requeued (`Requeued=True`, reason `Preempted`) and the Job unsuspended when admitted
//! again; on that admission `Evicted` and `Preempted` turn `False` (reason
//! `QuotaReserved`, message `Previously: <message>`).
//!
//! Placer's PodGroup is the Workload: its status carries those conditions. The scheduler
//! driver evicts ([`SchedulerController`]'s `Evict` of a pod whose controller is a Job the
//! embedded Job controller manages, in hierarchical mode): it marks the Job with
//! [`ANN_EVICTED`] and suspends it. The Job controller requeues ([`requeue`]): once the
//! suspended, marked Job has no active pod it removes the mark and unsuspends it; the new
//! pods wait in the scheduler's queue, which is Kueue's admission here.

use placer_api::k8s::api::batch::v1::Job;
use placer_api::k8s::api::core::v1::Pod;
use placer_api::k8s::api::scheduling::v1alpha2::PodGroup;
use placer_cluster::{ClusterStore, Kind, Object, ObjectRef, StoreError};
use placer_engine::GroupKey;

use super::{group_ref, record, set_group_condition, DriverError, SchedulerController};

/// Annotation on a Job the scheduler evicted (suspended) for a preemption; its value is
/// the eviction's message. The Job controller requeues the Job and removes it.
pub const ANN_EVICTED: &str = "placer.dev/evicted-by-preemption";
/// Kueue's Workload condition types, written on the PodGroup.
pub const CONDITION_EVICTED: &str = "Evicted";
pub const CONDITION_PREEMPTED: &str = "Preempted";
pub const CONDITION_REQUEUED: &str = "Requeued";
/// Reason of `Evicted` and `Requeued` (Kueue's `WorkloadEvictedByPreemption`).
pub const REASON_PREEMPTED: &str = "Preempted";
/// Reason of `Preempted` (Kueue's `InClusterQueueReason`).
pub const REASON_IN_CLUSTER_QUEUE: &str = "InClusterQueue";
/// Reason of `Evicted` / `Preempted` once the workload is admitted again.
pub const REASON_QUOTA_RESERVED: &str = "QuotaReserved";

/// Kueue's preemption message (`preemptionMessage`), for a preemptor PodGroup with
/// `uid` whose Job has `job_uid` (`UNKNOWN` when either is not known).
pub fn preemption_message(uid: Option<&str>, job_uid: Option<&str>) -> String {
    let or_unknown = |s: Option<&str>| s.filter(|s| !s.is_empty()).unwrap_or("UNKNOWN").to_string();
    format!(
        "Preempted to accommodate a workload (UID: {}, JobUID: {}) due to prioritization in the ClusterQueue",
        or_unknown(uid),
        or_unknown(job_uid)
    )
}

/// The controller reference of `meta` when it names a batch/v1 Job.
fn job_owner(meta: &placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<(&str, &str)> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true) && r.kind == "Job" && r.api_version == "batch/v1")
        .map(|r| (r.name.as_str(), r.uid.as_str()))
}

/// The Job controlling `pod`, when it exists (same uid), has not finished and is managed
/// by `managed_by` (`spec.managedBy`, unset meaning the default Job controller).
pub fn controlling_job(store: &dyn ClusterStore, pod: &Pod, managed_by: &str) -> Option<Job> {
    let (name, uid) = job_owner(&pod.metadata)?;
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let Some(Object::Job(job)) = store.get(&ObjectRef::new(Kind::Job, namespace, name.to_string())) else {
        return None;
    };
    let finished = job.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| {
        cs.iter().any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
    });
    let managed =
        job.spec.as_ref().and_then(|s| s.managed_by.as_deref()).unwrap_or(crate::job::DEFAULT_MANAGED_BY)
            == managed_by;
    (job.metadata.uid.as_deref() == Some(uid) && !finished && managed).then_some(*job)
}

/// The message of evicting for the engine's `message` (`Preempted by podgroup ns/name`):
/// the preemptor PodGroup's uid and its Job's.
fn message_for(store: &dyn ClusterStore, engine_message: &str) -> String {
    let preemptor = engine_message
        .strip_prefix("Preempted by podgroup ")
        .and_then(|k| k.split_once('/'))
        .map(|(ns, name)| ObjectRef::new(Kind::PodGroup, ns.to_string(), name.to_string()));
    let pg: Option<PodGroup> = preemptor.and_then(|r| match store.get(&r) {
        Some(Object::PodGroup(pg)) => Some(pg),
        _ => None,
    });
    let uid = pg.as_ref().and_then(|pg| pg.metadata.uid.clone());
    let job_uid = pg.as_ref().and_then(|pg| job_owner(&pg.metadata).map(|(_, uid)| uid.to_string()));
    preemption_message(uid.as_deref(), job_uid.as_deref())
}

fn store_error(action: &'static str, r: &ObjectRef, source: StoreError) -> DriverError {
    DriverError::Store { action, target: r.to_string(), source: Box::new(source) }
}

impl SchedulerController {
    /// Evicts `job` (whose pod `victim` the engine preempted) as Kueue evicts a workload:
    /// conditions and events on its PodGroup, the Job marked and suspended. Once per Job.
    pub(super) fn evict_job(
        &mut self,
        store: &mut dyn ClusterStore,
        victim: &Pod,
        job: &Job,
        engine_message: &str,
    ) -> Result<bool, DriverError> {
        let suspended = job.spec.as_ref().and_then(|s| s.suspend) == Some(true);
        let marked = job.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(ANN_EVICTED));
        if suspended && marked {
            return Ok(false);
        }
        let message = message_for(store, engine_message);
        let namespace = job.metadata.namespace.clone().unwrap_or_default();
        let job_ref =
            ObjectRef::new(Kind::Job, namespace.clone(), job.metadata.name.clone().unwrap_or_default());
        // The workload: the victim's PodGroup.
        let group = victim
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_group.as_ref())
            .and_then(|g| g.pod_group_name.clone())
            .map(|name| GroupKey::new(namespace.clone(), name))
            .filter(|g| store.contains(&group_ref(g)));
        if let Some(g) = &group {
            for (type_, reason) in
                [(CONDITION_PREEMPTED, REASON_IN_CLUSTER_QUEUE), (CONDITION_EVICTED, REASON_PREEMPTED)]
            {
                super::with_retry(store, "update status of", &group_ref(g), |store| {
                    set_group_condition(store, g, type_, true, reason, &message)
                })?;
            }
            record(store, group_ref(g), "Normal", "Preempted", message.clone());
            record(store, group_ref(g), "Normal", "EvictedDueToPreempted", message.clone());
        }
        let patch = serde_json::json!({
            "metadata": {"annotations": {ANN_EVICTED: message}},
            "spec": {"suspend": true},
        });
        match store.merge_patch(&job_ref, &patch) {
            Ok(_) => {}
            Err(StoreError::NotFound(_)) => return Ok(false),
            Err(source) => return Err(store_error("suspend", &job_ref, source)),
        }
        record(store, job_ref, "Normal", "Stopped", message);
        Ok(true)
    }
}

/// The Job controller's half: a Job the scheduler evicted ([`ANN_EVICTED`]), suspended and
/// without active pods, is requeued: `Requeued=True` on its PodGroup `group` (when it has
/// one), the mark removed and the Job unsuspended. Returns whether it wrote.
pub fn requeue(
    store: &mut dyn ClusterStore,
    job: &Job,
    group: Option<&GroupKey>,
) -> Result<bool, StoreError> {
    let Some(message) = job.metadata.annotations.as_ref().and_then(|a| a.get(ANN_EVICTED)).cloned() else {
        return Ok(false);
    };
    if let Some(g) = group.filter(|g| store.contains(&group_ref(g))) {
        set_group_condition(store, g, CONDITION_REQUEUED, true, REASON_PREEMPTED, &message)?;
    }
    let r = ObjectRef::new(
        Kind::Job,
        job.metadata.namespace.clone().unwrap_or_default(),
        job.metadata.name.clone().unwrap_or_default(),
    );
    let patch = serde_json::json!({
        "metadata": {"annotations": {ANN_EVICTED: null}},
        "spec": {"suspend": false},
    });
    store.merge_patch(&r, &patch)?;
    Ok(true)
}

/// On admission again (the PodGroup scheduled): `Evicted` and `Preempted` that are `True`
/// turn `False` with reason `QuotaReserved` and `Previously: <message>`, as Kueue's
/// `SetQuotaReservation`.
pub(super) fn readmitted(store: &mut dyn ClusterStore, group: &GroupKey) -> Result<bool, StoreError> {
    let Some(Object::PodGroup(pg)) = store.get(&group_ref(group)) else { return Ok(false) };
    let mut wrote = false;
    for type_ in [CONDITION_EVICTED, CONDITION_PREEMPTED] {
        let previous = pg
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == type_ && c.status == "True"))
            .map(|c| c.message.clone());
        if let Some(message) = previous {
            wrote |= set_group_condition(
                store,
                group,
                type_,
                false,
                REASON_QUOTA_RESERVED,
                &format!("Previously: {message}"),
            )?;
        }
    }
    Ok(wrote)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kueue's `preemptionMessage`: `UNKNOWN` for a missing uid.
    #[test]
    fn preemption_message_names_the_preemptor_and_its_job() {
        assert_eq!(
            preemption_message(Some("wl-uid"), Some("job-uid")),
            "Preempted to accommodate a workload (UID: wl-uid, JobUID: job-uid) due to prioritization in the ClusterQueue"
        );
        assert_eq!(
            preemption_message(None, Some("")),
            "Preempted to accommodate a workload (UID: UNKNOWN, JobUID: UNKNOWN) due to prioritization in the ClusterQueue"
        );
    }
}
