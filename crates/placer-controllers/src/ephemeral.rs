//! The ephemeral volume controller (kube-controller-manager's `ephemeral-volume`
//! controller) for the embedded cluster: a pod's generic ephemeral volume
//! (`spec.volumes[].ephemeral.volumeClaimTemplate`) gets its PersistentVolumeClaim
//! `<pod>-<volume>`, from the template, owned by the pod (deleted with it by the store's
//! garbage collection). An existing claim of that name is left alone (the scheduler reports
//! it when the pod does not own it). In `placer serve` kube-controller-manager does this.

use placer_api::k8s::api::core::v1::{PersistentVolumeClaim, Pod};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use placer_cluster::{ClusterStore, Kind, Object, ObjectRef, StoreError, WatchEventKind};

use crate::{Controller, ControllerError};

const NAME: &str = "ephemeral-volume-controller";

/// See the module docs.
#[derive(Debug, Default)]
pub struct EphemeralVolumeController {
    seen_rv: u64,
}

impl EphemeralVolumeController {
    pub fn new() -> Self {
        Self::default()
    }

    fn sync_pod(&self, store: &mut dyn ClusterStore, pod: &Pod) -> Result<bool, ControllerError> {
        if pod.metadata.deletion_timestamp.is_some() {
            return Ok(false);
        }
        let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".to_string());
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let mut wrote = false;
        for v in pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or(&[]) {
            let Some(template) = v.ephemeral.as_ref().and_then(|e| e.volume_claim_template.as_ref()) else {
                continue;
            };
            let name = format!("{pod_name}-{}", v.name);
            if store.get(&ObjectRef::new(Kind::PersistentVolumeClaim, ns.clone(), name.clone())).is_some() {
                continue;
            }
            let meta = template.metadata.clone().unwrap_or_default();
            let claim = PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(name),
                    namespace: Some(ns.clone()),
                    labels: meta.labels,
                    annotations: meta.annotations,
                    owner_references: Some(vec![OwnerReference {
                        api_version: "v1".to_string(),
                        kind: "Pod".to_string(),
                        name: pod_name.clone(),
                        uid: pod.metadata.uid.clone().unwrap_or_default(),
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    }]),
                    ..Default::default()
                },
                spec: Some(template.spec.clone()),
                status: None,
            };
            match store.create(Object::PersistentVolumeClaim(claim)) {
                Ok(_) => wrote = true,
                Err(StoreError::AlreadyExists(_)) => {}
                Err(e) => return Err(ControllerError { controller: NAME, message: e.to_string() }),
            }
        }
        Ok(wrote)
    }
}

impl Controller for EphemeralVolumeController {
    fn name(&self) -> &'static str {
        NAME
    }

    fn reconcile(&mut self, store: &mut dyn ClusterStore) -> Result<bool, ControllerError> {
        let events = store.watch_kinds_since(self.seen_rv, &[Kind::Pod, Kind::PersistentVolumeClaim]);
        self.seen_rv = store.resource_version();
        let mut wrote = false;
        for e in events {
            match (&e.object, e.kind) {
                (Object::Pod(p), WatchEventKind::Added | WatchEventKind::Modified) => {
                    wrote |= self.sync_pod(store, p)?;
                }
                (Object::PersistentVolumeClaim(c), WatchEventKind::Deleted) => {
                    // A deleted claim of a live pod is created again.
                    for owner in c.metadata.owner_references.iter().flatten().filter(|o| o.kind == "Pod") {
                        let ns = c.metadata.namespace.clone().unwrap_or_else(|| "default".to_string());
                        if let Some(Object::Pod(p)) =
                            store.get(&ObjectRef::new(Kind::Pod, ns, owner.name.clone()))
                        {
                            wrote |= self.sync_pod(store, &p)?;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(wrote)
    }

    fn next_wakeup_ms(&self) -> Option<u64> {
        None
    }
}
