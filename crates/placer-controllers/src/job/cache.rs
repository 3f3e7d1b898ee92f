//! The Job controller's informer: the Jobs, Job-controlled pods, Workloads and PodGroups of
//! the store, kept current from the watch stream so a reconcile costs what changed, not
//! the size of the cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use placer_api::k8s::api::batch::v1::Job;
use placer_api::k8s::api::core::v1::Pod;
use placer_api::k8s::api::scheduling::v1alpha2::{PodGroup, Workload};
use placer_cluster::{Kind, Object, ObjectRef};
use rustc_hash::FxHashMap;

use super::gang::{controller_of, pod_group_workload_name, workload_job_name};

/// Cached objects. Pods are kept only when a Job controls them, indexed by the Job's UID,
/// and shared (a sync reads every pod of its Job without copying them).
#[derive(Debug, Default)]
pub(crate) struct Cache {
    pub jobs: BTreeMap<ObjectRef, Job>,
    pods: FxHashMap<ObjectRef, Arc<Pod>>,
    pods_by_job: FxHashMap<String, BTreeSet<ObjectRef>>,
    workloads: BTreeMap<ObjectRef, Workload>,
    /// (namespace, Job name of `spec.controllerRef`) -> Workloads.
    workloads_by_job: FxHashMap<(String, String), BTreeSet<ObjectRef>>,
    pod_groups: BTreeMap<ObjectRef, PodGroup>,
    /// (namespace, Workload name of `spec.podGroupTemplateRef`) -> PodGroups.
    pod_groups_by_workload: FxHashMap<(String, String), BTreeSet<ObjectRef>>,
}

/// The Job controlling a pod: its UID and name (the pod's namespace is the Job's).
pub(crate) fn pod_job_owner(pod: &Pod) -> Option<(&str, &str)> {
    controller_of(&pod.metadata)
        .filter(|r| r.kind == "Job" && r.api_version.starts_with("batch/"))
        .map(|r| (r.uid.as_str(), r.name.as_str()))
}

fn resource_version(obj: &Object) -> Option<u64> {
    obj.metadata().resource_version.as_deref().and_then(|v| v.parse().ok())
}

impl Cache {
    /// The cached version of `r`, if any, and its resourceVersion.
    fn cached_rv(&self, r: &ObjectRef) -> Option<u64> {
        let meta = match r.kind {
            Kind::Job => self.jobs.get(r).map(|o| &o.metadata),
            Kind::Pod => self.pods.get(r).map(|o| &o.metadata),
            Kind::Workload => self.workloads.get(r).map(|o| &o.metadata),
            Kind::PodGroup => self.pod_groups.get(r).map(|o| &o.metadata),
            _ => None,
        }?;
        meta.resource_version.as_deref().and_then(|v| v.parse().ok())
    }

    /// Whether `obj` is older than what the cache holds (a write of ours already seen).
    pub fn is_stale(&self, obj: &Object) -> bool {
        match (resource_version(obj), self.cached_rv(&obj.object_ref())) {
            (Some(new), Some(cached)) => new < cached,
            _ => false,
        }
    }

    /// Inserts or replaces an object of a cached kind; other kinds are ignored.
    pub fn upsert(&mut self, obj: Object) {
        let r = obj.object_ref();
        match obj {
            Object::Job(j) => {
                self.jobs.insert(r, *j);
            }
            Object::Pod(p) => self.upsert_pod(r, p),
            Object::Workload(w) => {
                self.remove(&r);
                if let Some(job) = workload_job_name(&w) {
                    self.workloads_by_job
                        .entry((r.namespace.clone(), job.to_string()))
                        .or_default()
                        .insert(r.clone());
                }
                self.workloads.insert(r, w);
            }
            Object::PodGroup(pg) => {
                self.remove(&r);
                if let Some(wl) = pod_group_workload_name(&pg) {
                    self.pod_groups_by_workload
                        .entry((r.namespace.clone(), wl.to_string()))
                        .or_default()
                        .insert(r.clone());
                }
                self.pod_groups.insert(r, pg);
            }
            _ => {}
        }
    }

    /// Inserts or replaces a pod already shared with the caller.
    pub fn upsert_shared_pod(&mut self, pod: Arc<Pod>) {
        let namespace = pod.metadata.namespace.clone().unwrap_or_else(|| "default".to_string());
        let r = ObjectRef::new(Kind::Pod, namespace, pod.metadata.name.clone().unwrap_or_default());
        self.upsert_pod(r, pod);
    }

    fn upsert_pod(&mut self, r: ObjectRef, pod: Arc<Pod>) {
        let new_owner = pod_job_owner(&pod).map(|(uid, _)| uid.to_string());
        if let Some(old) = self.pods.get(&r) {
            let old_owner = pod_job_owner(old).map(|(uid, _)| uid.to_string());
            if old_owner != new_owner {
                self.unindex_pod(&r, old_owner.as_deref());
            }
        }
        match new_owner {
            Some(uid) => {
                self.pods_by_job.entry(uid).or_default().insert(r.clone());
                self.pods.insert(r, pod);
            }
            None => {
                self.pods.remove(&r);
            }
        }
    }

    fn unindex_pod(&mut self, r: &ObjectRef, owner: Option<&str>) {
        if let Some(uid) = owner {
            if let Some(set) = self.pods_by_job.get_mut(uid) {
                set.remove(r);
                if set.is_empty() {
                    self.pods_by_job.remove(uid);
                }
            }
        }
    }

    /// Removes an object.
    pub fn remove(&mut self, r: &ObjectRef) {
        match r.kind {
            Kind::Job => {
                self.jobs.remove(r);
            }
            Kind::Pod => {
                if let Some(old) = self.pods.remove(r) {
                    let owner = pod_job_owner(&old).map(|(uid, _)| uid.to_string());
                    self.unindex_pod(r, owner.as_deref());
                }
            }
            Kind::Workload => {
                if let Some(old) = self.workloads.remove(r) {
                    if let Some(job) = workload_job_name(&old) {
                        unindex(&mut self.workloads_by_job, (r.namespace.clone(), job.to_string()), r);
                    }
                }
            }
            Kind::PodGroup => {
                if let Some(old) = self.pod_groups.remove(r) {
                    if let Some(wl) = pod_group_workload_name(&old) {
                        unindex(&mut self.pod_groups_by_workload, (r.namespace.clone(), wl.to_string()), r);
                    }
                }
            }
            _ => {}
        }
    }

    /// The pods a Job (by UID) controls, ordered by name.
    pub fn job_pods(&self, job_uid: &str) -> Vec<Arc<Pod>> {
        self.pods_by_job
            .get(job_uid)
            .into_iter()
            .flatten()
            .filter_map(|r| self.pods.get(r).cloned())
            .collect()
    }

    /// Workloads of `namespace` whose `spec.controllerRef` names the Job, ordered by name.
    pub fn workloads_for_job(&self, namespace: &str, job_name: &str) -> Vec<&Workload> {
        self.workloads_by_job
            .get(&(namespace.to_string(), job_name.to_string()))
            .into_iter()
            .flatten()
            .filter_map(|r| self.workloads.get(r))
            .collect()
    }

    /// PodGroups of `namespace` whose template reference names the Workload, ordered by name.
    pub fn pod_groups_for_workload(&self, namespace: &str, workload: &str) -> Vec<&PodGroup> {
        self.pod_groups_by_workload
            .get(&(namespace.to_string(), workload.to_string()))
            .into_iter()
            .flatten()
            .filter_map(|r| self.pod_groups.get(r))
            .collect()
    }

    /// The Jobs an object change may concern (by namespace and name).
    pub fn affected_jobs(&self, obj: &Object) -> Vec<ObjectRef> {
        let r = obj.object_ref();
        let job = |name: &str| ObjectRef::new(Kind::Job, r.namespace.clone(), name);
        let owner_jobs = || {
            obj.metadata()
                .owner_references
                .iter()
                .flatten()
                .filter(|o| o.kind == "Job")
                .map(|o| job(&o.name))
                .collect::<Vec<_>>()
        };
        match obj {
            Object::Job(_) => vec![r],
            Object::Pod(p) => pod_job_owner(p).map(|(_, name)| job(name)).into_iter().collect(),
            Object::Workload(w) => {
                let mut jobs = owner_jobs();
                jobs.extend(workload_job_name(w).map(job));
                jobs
            }
            Object::PodGroup(pg) => {
                let mut jobs = owner_jobs();
                if let Some(wl) = pod_group_workload_name(pg) {
                    let wl_ref = ObjectRef::new(Kind::Workload, r.namespace.clone(), wl);
                    if let Some(name) = self.workloads.get(&wl_ref).and_then(workload_job_name) {
                        jobs.push(job(name));
                    }
                }
                jobs
            }
            _ => Vec::new(),
        }
    }
}

fn unindex(
    index: &mut FxHashMap<(String, String), BTreeSet<ObjectRef>>,
    key: (String, String),
    r: &ObjectRef,
) {
    if let Some(set) = index.get_mut(&key) {
        set.remove(r);
        if set.is_empty() {
            index.remove(&key);
        }
    }
}
