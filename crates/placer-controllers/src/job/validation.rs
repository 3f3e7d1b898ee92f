//! `JobValidation`: the v1.36 admission check that freezes `spec.parallelism` of Jobs
//! scheduled as a gang (seed 001, "Validation for Parallelism Changes"; SEMANTICS §14).

use placer_api::gates::{FeatureGates, Gate};
use placer_api::k8s::api::batch::v1::Job;
use placer_cluster::{Admission, ClusterStore, Kind, Object};

use super::gang::{gang_min_count, is_controlled_by, job_key};

/// Rejects an update that changes `spec.parallelism` of a Job bound to a gang PodGroup,
/// with `cannot change parallelism for a Job referencing gang-scheduled PodGroup "<pg>"`:
///
/// * the old Job's template names a PodGroup (`schedulingGroup.podGroupName`) that exists
///   in its namespace and has a gang policy; or
/// * the template names none and some PodGroup of the namespace is controlled by the Job
///   (controller ownerReference with its UID) and has a gang policy.
///
/// Everything else is allowed: creates, updates that keep parallelism, both gates
/// (`GenericWorkload`, `WorkloadWithJob`) off, a missing PodGroup, a basic PodGroup, a
/// PodGroup controlled by another Job, Jobs that never got a PodGroup (NonIndexed,
/// parallelism 1, ...).
///
/// # Real-cluster mode
///
/// Against a real API server this check cannot run: Placer is not an admission webhook, so
/// the server accepts the new parallelism. The [`super::JobController`] then notices that
/// a gang Job's `spec.parallelism` differs from its PodGroup's `minCount`, records a
/// `Warning` event `ParallelismChangeIgnored` on the Job, and keeps running the gang at
/// `minCount` pods (the gang is never resized; the PodGroup's policy is immutable). The
/// kube-apiserver's own `JobValidation` plugin, when enabled there, rejects the change as
/// described above.
#[derive(Debug, Clone)]
pub struct JobValidation {
    gates: FeatureGates,
}

/// The rejection message for a gang PodGroup.
pub fn parallelism_forbidden_message(pod_group: &str) -> String {
    format!("cannot change parallelism for a Job referencing gang-scheduled PodGroup \"{pod_group}\"")
}

impl JobValidation {
    /// The check with the cluster-wide feature gates (the API server's).
    pub fn new(gates: FeatureGates) -> Self {
        JobValidation { gates }
    }

    /// The check on an update from `old` to `new`, with the PodGroups of the store.
    pub fn check(&self, store: &dyn ClusterStore, old: &Job, new: &Job) -> Result<(), String> {
        if !self.gates.enabled(Gate::GenericWorkload) && !self.gates.enabled(Gate::WorkloadWithJob) {
            return Ok(());
        }
        let parallelism = |j: &Job| j.spec.as_ref().and_then(|s| s.parallelism);
        if parallelism(old) == parallelism(new) {
            return Ok(());
        }
        let (namespace, _) = job_key(old);
        let named_group = old
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|s| s.scheduling_group.as_ref())
            .and_then(|g| g.pod_group_name.as_deref());
        if let Some(name) = named_group {
            let r = placer_cluster::ObjectRef::new(Kind::PodGroup, namespace, name);
            return match store.get(&r) {
                Some(Object::PodGroup(pg)) if gang_min_count(&pg).is_some() => {
                    Err(parallelism_forbidden_message(name))
                }
                _ => Ok(()),
            };
        }
        let Some(uid) = old.metadata.uid.as_deref().filter(|u| !u.is_empty()) else { return Ok(()) };
        for obj in store.list(Kind::PodGroup) {
            let Object::PodGroup(pg) = obj else { continue };
            let same_namespace = pg.metadata.namespace.as_deref().unwrap_or("default") == namespace;
            if same_namespace && is_controlled_by(&pg.metadata, uid) && gang_min_count(&pg).is_some() {
                return Err(parallelism_forbidden_message(pg.metadata.name.as_deref().unwrap_or("")));
            }
        }
        Ok(())
    }
}

impl Admission for JobValidation {
    fn admit(&self, store: &dyn ClusterStore, old: Option<&Object>, new: &Object) -> Result<(), String> {
        match (old, new) {
            (Some(Object::Job(old)), Object::Job(new)) => self.check(store, old, new),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    // Behaviour against a store is tested in `super::tests` (it needs the embedded cluster).
    use super::*;

    #[test]
    fn the_message_names_the_pod_group() {
        assert_eq!(
            parallelism_forbidden_message("gang-pg"),
            "cannot change parallelism for a Job referencing gang-scheduled PodGroup \"gang-pg\""
        );
    }
}
