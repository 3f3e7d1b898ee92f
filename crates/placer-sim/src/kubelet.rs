//! The simulated node side for pods no Job owns: a kubelet that runs bound pods, and the
//! pod garbage collector that removes pods of deleted nodes.
//!
//! Pods owned by a Job the embedded Job controller manages are run by that controller's
//! own simulated kubelet (`placer_controllers::job::kubelet`); this controller runs every
//! other pod (including those of Jobs another controller manages) with the
//! same rules (bound -> `Running` with `startTime`; with `placer.dev/run-time`,
//! `Succeeded` once it has elapsed). Pods listed in `cluster.pods` with an explicit phase
//! other than `Running` are left as written (a bound `Pending` pod stays `Pending`).

use std::collections::{BTreeSet, HashSet};

use placer_api::k8s::api::core::v1::Pod;
use placer_cluster::{ClusterStore, Kind, Object, ObjectRef, WatchEventKind};
use placer_controllers::job::kubelet::{kubelet_idle, kubelet_step, run_time_ms, Clock};
use placer_controllers::job::DEFAULT_MANAGED_BY;
use placer_controllers::{Controller, ControllerError};

/// Reporter / controller name.
pub const NAME: &str = "sim-kubelet";

/// Runs pods not owned by a Job; deletes pods whose node was deleted.
#[derive(Debug, Default)]
pub struct SimKubelet {
    seen_rv: u64,
    /// Pods (by uid) whose phase the scenario fixed.
    frozen: HashSet<String>,
    /// (wake time, pod) of running pods with a run time.
    timers: BTreeSet<(u64, ObjectRef)>,
}

impl SimKubelet {
    /// A kubelet that leaves the pods with these uids alone.
    pub fn new(frozen: HashSet<String>) -> Self {
        SimKubelet { seen_rv: 0, frozen, timers: BTreeSet::new() }
    }

    /// Pods of Jobs the embedded Job controller manages (`spec.managedBy` unset or
    /// `kubernetes.io/job-controller`) are run by that controller's own simulated
    /// kubelet. Pods of Jobs another controller manages (`placer serve`'s Job controller
    /// against `placer cluster`) are run here, as a kubelet runs every pod.
    fn run_by_job_controller(store: &dyn ClusterStore, pod: &Pod) -> bool {
        let owner = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true) && o.kind == "Job" && o.api_version == "batch/v1");
        let Some(owner) = owner else { return false };
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        match store.get(&ObjectRef::new(Kind::Job, namespace, owner.name.clone())) {
            Some(Object::Job(job)) => job
                .spec
                .as_ref()
                .and_then(|s| s.managed_by.as_deref())
                .is_none_or(|m| m == DEFAULT_MANAGED_BY),
            _ => true,
        }
    }

    /// Runs one kubelet step for `pod`; returns whether it wrote.
    fn step(&mut self, store: &mut dyn ClusterStore, pod: &Pod) -> Result<bool, ControllerError> {
        if Self::run_by_job_controller(store, pod)
            || pod.metadata.uid.as_ref().is_some_and(|u| self.frozen.contains(u))
        {
            return Ok(false);
        }
        let run_time = match run_time_ms(pod) {
            None => None,
            Some(Ok(ms)) => Some(ms),
            Some(Err(e)) => return Err(err(format!("pod {}: {e}", pod_ref(pod)))),
        };
        let clock = Clock::new(store.now_ms(), &store.now());
        let step = kubelet_step(pod, &clock, run_time);
        if let Some(at) = step.wake_at_ms {
            self.timers.insert((at, pod_ref(pod)));
        }
        let Some(status) = step.status else { return Ok(false) };
        let mut updated = pod.clone();
        updated.status = Some(status);
        updated.metadata.resource_version = None;
        match store.update_status(Object::Pod(updated.into())) {
            Ok(_) => Ok(true),
            // The pod went away in the meantime: nothing to run.
            Err(placer_cluster::StoreError::NotFound(_)) => Ok(false),
            Err(e) => Err(err(e.to_string())),
        }
    }
}

fn err(message: String) -> ControllerError {
    ControllerError { controller: NAME, message }
}

pub(crate) fn pod_ref(pod: &Pod) -> ObjectRef {
    ObjectRef::new(
        Kind::Pod,
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

impl Controller for SimKubelet {
    fn name(&self) -> &'static str {
        NAME
    }

    fn reconcile(&mut self, store: &mut dyn ClusterStore) -> Result<bool, ControllerError> {
        let seen_rv = std::mem::replace(&mut self.seen_rv, store.resource_version());
        let mut wrote = false;
        let mut errors = Vec::new();
        let mut deleted_nodes = BTreeSet::new();
        let mut changed_pods = BTreeSet::new();
        store.visit_events_since(seen_rv, &mut |e| {
            match (&e.object, e.kind) {
                (Object::Node(n), WatchEventKind::Deleted) => {
                    deleted_nodes.insert(n.metadata.name.clone().unwrap_or_default());
                }
                // A version the kubelet would leave alone (a pending pod's condition
                // write, a finished pod) needs no step: whatever version is current, a
                // later event of the batch brings it. Only a run time that does not read
                // is still reported, as the step of that version reports it.
                (Object::Pod(p), WatchEventKind::Added | WatchEventKind::Modified)
                    if !kubelet_idle(p) || matches!(run_time_ms(p), Some(Err(_))) =>
                {
                    changed_pods.insert(pod_ref(p));
                }
                _ => {}
            }
        });
        // Pod garbage collection: pods bound to a node that no longer exists.
        if !deleted_nodes.is_empty() {
            for obj in store.list(Kind::Pod) {
                let Object::Pod(p) = &obj else { continue };
                let node = p.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or("");
                if deleted_nodes.contains(node) && store.get(&ObjectRef::new(Kind::Node, "", node)).is_none()
                {
                    match store.delete(&obj.object_ref()) {
                        Ok(()) => wrote = true,
                        Err(placer_cluster::StoreError::NotFound(_)) => {}
                        Err(e) => errors.push(e.to_string()),
                    }
                }
            }
        }
        // Timers that are due.
        let now = store.now_ms();
        while let Some((at, r)) = self.timers.first().cloned() {
            if at > now {
                break;
            }
            self.timers.remove(&(at, r.clone()));
            changed_pods.insert(r);
        }
        for r in changed_pods {
            if let Some(Object::Pod(p)) = store.get(&r) {
                match self.step(store, &p) {
                    Ok(w) => wrote |= w,
                    Err(e) => errors.push(e.message),
                }
            }
        }
        self.seen_rv = store.resource_version();
        match errors.into_iter().next() {
            Some(message) => Err(err(message)),
            None => Ok(wrote),
        }
    }

    fn next_wakeup_ms(&self) -> Option<u64> {
        self.timers.first().map(|(at, _)| *at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::annotations::SIM_RUN_TIME;
    use placer_api::k8s::api::core::v1::{Node, PodSpec};
    use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use placer_cluster::embedded::EmbeddedCluster;

    fn pod(name: &str, node: Option<&str>, run_time: Option<&str>) -> Object {
        Object::pod(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                annotations: run_time.map(|r| [(SIM_RUN_TIME.to_string(), r.to_string())].into()),
                ..Default::default()
            },
            spec: Some(PodSpec { node_name: node.map(String::from), ..Default::default() }),
            status: None,
        })
    }

    fn node(name: &str) -> Object {
        Object::node(Node {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            ..Default::default()
        })
    }

    fn phase(store: &EmbeddedCluster, name: &str) -> Option<String> {
        store
            .get(&ObjectRef::new(Kind::Pod, "default", name))
            .and_then(|o| o.as_pod().and_then(|p| p.status.as_ref()).and_then(|s| s.phase.clone()))
    }

    #[test]
    fn bound_pods_run_and_finish_after_their_run_time() {
        let mut store = EmbeddedCluster::new();
        store.create(node("n1")).unwrap();
        store.create(pod("a", None, Some("30s"))).unwrap();
        let mut k = SimKubelet::default();
        assert!(!k.reconcile(&mut store).unwrap(), "an unbound pod does not run");
        store.bind("default", "a", "", "n1").unwrap();
        assert!(k.reconcile(&mut store).unwrap());
        assert_eq!(phase(&store, "a").as_deref(), Some("Running"));
        assert_eq!(k.next_wakeup_ms(), Some(30_000));
        store.set_now_ms(30_000);
        assert!(k.reconcile(&mut store).unwrap());
        assert_eq!(phase(&store, "a").as_deref(), Some("Succeeded"));
        assert_eq!(k.next_wakeup_ms(), None);
        assert!(!k.reconcile(&mut store).unwrap(), "settled");
    }

    #[test]
    fn pods_of_jobs_managed_elsewhere_run_here() {
        use placer_api::k8s::api::batch::v1::{Job, JobSpec};
        use placer_api::k8s::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let mut store = EmbeddedCluster::new();
        store.create(node("n1")).unwrap();
        for (job, managed_by) in [("ours", None), ("theirs", Some("placer.dev/job-controller"))] {
            let mut j = Job::default();
            j.metadata.name = Some(job.into());
            j.metadata.namespace = Some("default".into());
            j.spec = Some(JobSpec { managed_by: managed_by.map(str::to_string), ..Default::default() });
            let uid = store.create(Object::Job(Box::new(j))).unwrap().metadata().uid.clone().unwrap();
            let mut p = pod(&format!("{job}-0"), Some("n1"), None);
            p.metadata_mut().owner_references = Some(vec![OwnerReference {
                api_version: "batch/v1".into(),
                kind: "Job".into(),
                name: job.into(),
                uid,
                controller: Some(true),
                ..Default::default()
            }]);
            store.create(p).unwrap();
        }
        let mut k = SimKubelet::default();
        k.reconcile(&mut store).unwrap();
        assert_eq!(phase(&store, "ours-0").as_deref(), Some("Pending"), "the Job controller runs it");
        assert_eq!(phase(&store, "theirs-0").as_deref(), Some("Running"));
    }

    #[test]
    fn frozen_pods_keep_their_phase() {
        let mut store = EmbeddedCluster::new();
        store.create(node("n1")).unwrap();
        let created = store.create(pod("a", Some("n1"), None)).unwrap();
        let uid = created.metadata().uid.clone().unwrap();
        let mut k = SimKubelet::new([uid].into());
        assert!(!k.reconcile(&mut store).unwrap());
        assert_eq!(phase(&store, "a").as_deref(), Some("Pending"));
    }

    #[test]
    fn versions_the_kubelet_leaves_alone_are_skipped_without_losing_a_step_or_an_error() {
        let mut store = EmbeddedCluster::new();
        store.create(node("n1")).unwrap();
        store.create(pod("bad", None, Some("soon"))).unwrap();
        let mut k = SimKubelet::default();
        let e = k.reconcile(&mut store).unwrap_err();
        assert!(e.message.contains("default/bad"), "{}", e.message);
        store.delete(&ObjectRef::new(Kind::Pod, "default", "bad")).unwrap();
        // Created pending, a status write while pending, then bound: one batch, and the
        // bound version runs.
        store.create(pod("a", None, Some("30s"))).unwrap();
        let Some(Object::Pod(pending)) = store.get(&ObjectRef::new(Kind::Pod, "default", "a")) else {
            panic!("created")
        };
        let mut written = (*pending).clone();
        written.status = Some(placer_api::k8s::api::core::v1::PodStatus {
            phase: Some("Pending".into()),
            ..Default::default()
        });
        store.update_status(Object::pod(written)).unwrap();
        store.bind("default", "a", "", "n1").unwrap();
        assert!(k.reconcile(&mut store).unwrap());
        assert_eq!(phase(&store, "a").as_deref(), Some("Running"));
        assert_eq!(k.next_wakeup_ms(), Some(30_000));
    }

    #[test]
    fn pods_of_a_deleted_node_are_collected() {
        let mut store = EmbeddedCluster::new();
        store.create(node("n1")).unwrap();
        store.create(node("n2")).unwrap();
        store.create(pod("on-n1", Some("n1"), None)).unwrap();
        store.create(pod("on-n2", Some("n2"), None)).unwrap();
        let mut k = SimKubelet::default();
        k.reconcile(&mut store).unwrap();
        store.delete(&ObjectRef::new(Kind::Node, "", "n1")).unwrap();
        assert!(k.reconcile(&mut store).unwrap());
        assert!(store.get(&ObjectRef::new(Kind::Pod, "default", "on-n1")).is_none());
        assert!(store.get(&ObjectRef::new(Kind::Pod, "default", "on-n2")).is_some());
    }
}
