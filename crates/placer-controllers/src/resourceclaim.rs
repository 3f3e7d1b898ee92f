//! The ResourceClaim controller (kube-controller-manager's `resourceclaim` controller) for
//! the embedded cluster.
//!
//! * A pod's `spec.resourceClaims` entry that names a ResourceClaimTemplate gets a
//!   ResourceClaim generated from it (`generateName: <pod>-<claim>-`, both truncated in
//!   proportion beyond 57 characters; the template's labels and annotations plus
//!   `resource.kubernetes.io/pod-claim-name`; owned by the pod as its controller), recorded
//!   in the pod's `status.resourceClaimStatuses`.
//! * With `DRAWorkloadResourceClaims`, a PodGroup's `spec.resourceClaims` entry naming a
//!   template gets ONE claim owned by the PodGroup, recorded in the PodGroup's
//!   `status.resourceClaimStatuses`; a member pod whose entry matches it (same name, same
//!   template) resolves to that claim (the pod's status records the PodGroup's claim) and
//!   no claim is generated for the pod. A pod entry that does not match gets its own.
//! * `status.reservedFor` entries of pods that are gone, replaced or done, and of
//!   PodGroups that are gone, are removed; a claim left without consumers is deallocated
//!   (`status.allocation` cleared), and a claim generated for a pod that is done is
//!   deleted. Deleting a pod or PodGroup deletes the claims it owns (the store's garbage
//!   collection follows owner references).
//!
//! `placer cluster` always runs it (it stands for kube-controller-manager). `placer serve`
//! runs it only with `resourceClaimController.enabled: true`, for clusters whose
//! kube-controller-manager does not run its `resourceclaim-controller`: two controllers
//! would each generate a claim for the same pod.

use std::collections::{BTreeMap, BTreeSet};

use placer_api::gates::{FeatureGates, Gate};
use placer_api::k8s::api::core::v1::{Pod, PodResourceClaimStatus};
use placer_api::k8s::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use placer_api::k8s::api::scheduling::v1alpha2::{PodGroup, PodGroupResourceClaimStatus};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use placer_cluster::{ClusterStore, Kind, Object, ObjectRef, StoreError, WatchEventKind};

use crate::{Controller, ControllerError};

/// Annotation on a claim generated for a pod: the pod's claim entry name.
pub const POD_CLAIM_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";
/// Annotation on a claim generated for a PodGroup: the PodGroup's claim entry name.
pub const POD_GROUP_CLAIM_ANNOTATION: &str = "resource.kubernetes.io/podgroup-claim-name";
const NAME: &str = "resourceclaim-controller";

/// See the module docs.
pub struct ResourceClaimController {
    workload_claims: bool,
    seen_rv: u64,
}

impl ResourceClaimController {
    pub fn new(gates: &FeatureGates) -> Self {
        ResourceClaimController {
            workload_claims: gates.enabled(Gate::DRAWorkloadResourceClaims),
            seen_rv: 0,
        }
    }
}

fn err(e: StoreError) -> ControllerError {
    ControllerError { controller: NAME, message: e.to_string() }
}

fn ns(meta: &ObjectMeta) -> String {
    meta.namespace.clone().unwrap_or_else(|| "default".to_string())
}

fn is_done(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
        || (pod.metadata.deletion_timestamp.is_some()
            && pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or("").is_empty())
}

/// `generateName` of a generated claim: `<owner>-<claim>-`, truncated as upstream does.
pub fn generate_name(owner: &str, claim: &str) -> String {
    let name = format!("{owner}-{claim}-");
    let max = 57;
    if name.len() <= max {
        return name;
    }
    let cut = |s: &str| {
        let n = s.len() * max / name.len();
        s.char_indices().take_while(|(i, _)| *i < n).map(|(_, c)| c).collect::<String>()
    };
    format!("{}-{}", cut(owner), cut(claim))
}

fn controller_ref(api_version: &str, kind: &str, meta: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The claim owned (as controller) by `owner_uid` with `annotation` = `entry`, or a new one
/// created from the template.
fn find_or_create(
    store: &mut dyn ClusterStore,
    namespace: &str,
    owner: OwnerReference,
    annotation: &str,
    entry: &str,
    template: &str,
) -> Result<Option<String>, ControllerError> {
    let existing = store.list(Kind::ResourceClaim).into_iter().find_map(|o| match o {
        Object::ResourceClaim(c)
            if ns(&c.metadata) == namespace
                && c.metadata.deletion_timestamp.is_none()
                && c.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.controller == Some(true) && o.uid == owner.uid)
                && c.metadata.annotations.as_ref().and_then(|a| a.get(annotation)).map(String::as_str)
                    == Some(entry) =>
        {
            c.metadata.name.clone()
        }
        _ => None,
    });
    if existing.is_some() {
        return Ok(existing);
    }
    let r = ObjectRef::new(Kind::ResourceClaimTemplate, namespace, template);
    let Some(Object::ResourceClaimTemplate(t)) = store.get(&r) else {
        // Retried when the template appears; the pod's scheduling message says the claim
        // is not created yet.
        return Ok(None);
    };
    let ResourceClaimTemplate { spec, .. } = t;
    let mut annotations = spec.metadata.as_ref().and_then(|m| m.annotations.clone()).unwrap_or_default();
    annotations.insert(annotation.to_string(), entry.to_string());
    let claim = ResourceClaim {
        metadata: ObjectMeta {
            generate_name: Some(generate_name(&owner.name, entry)),
            namespace: Some(namespace.to_string()),
            owner_references: Some(vec![owner]),
            annotations: Some(annotations),
            labels: spec.metadata.as_ref().and_then(|m| m.labels.clone()),
            ..Default::default()
        },
        spec: spec.spec,
        status: None,
    };
    let created = store.create(Object::ResourceClaim(claim)).map_err(err)?;
    Ok(created.metadata().name.clone())
}

impl ResourceClaimController {
    /// Generates the claims of a PodGroup's template entries; true when it wrote.
    fn sync_group(&self, store: &mut dyn ClusterStore, pg: &PodGroup) -> Result<bool, ControllerError> {
        if !self.workload_claims || pg.metadata.deletion_timestamp.is_some() {
            return Ok(false);
        }
        let namespace = ns(&pg.metadata);
        let mut statuses =
            pg.status.as_ref().and_then(|s| s.resource_claim_statuses.clone()).unwrap_or_default();
        let mut changed = false;
        for entry in pg.spec.resource_claims.iter().flatten() {
            let Some(template) = &entry.resource_claim_template_name else { continue };
            if statuses.iter().any(|s| s.name == entry.name && s.resource_claim_name.is_some()) {
                continue;
            }
            let owner = controller_ref("scheduling.k8s.io/v1alpha2", "PodGroup", &pg.metadata);
            let Some(name) =
                find_or_create(store, &namespace, owner, POD_GROUP_CLAIM_ANNOTATION, &entry.name, template)?
            else {
                continue;
            };
            statuses.retain(|s| s.name != entry.name);
            statuses.push(PodGroupResourceClaimStatus {
                name: entry.name.clone(),
                resource_claim_name: Some(name),
            });
            changed = true;
        }
        if !changed {
            return Ok(false);
        }
        let mut pg = pg.clone();
        pg.status.get_or_insert_with(Default::default).resource_claim_statuses = Some(statuses);
        store.update_status(Object::PodGroup(pg)).map_err(err)?;
        Ok(true)
    }

    /// Generates (or resolves to the PodGroup's) the claims of a pending pod's template
    /// entries; true when it wrote.
    fn sync_pod(&self, store: &mut dyn ClusterStore, pod: &Pod) -> Result<bool, ControllerError> {
        if is_done(pod) || pod.metadata.deletion_timestamp.is_some() {
            return Ok(false);
        }
        let namespace = ns(&pod.metadata);
        let spec = pod.spec.as_ref();
        let entries = spec.and_then(|s| s.resource_claims.as_deref()).unwrap_or(&[]);
        let mut statuses =
            pod.status.as_ref().and_then(|s| s.resource_claim_statuses.clone()).unwrap_or_default();
        let group = spec
            .and_then(|s| s.scheduling_group.as_ref())
            .and_then(|g| g.pod_group_name.clone())
            .filter(|_| self.workload_claims)
            .and_then(|g| match store.get(&ObjectRef::new(Kind::PodGroup, &namespace, &g)) {
                Some(Object::PodGroup(pg)) => Some(pg),
                _ => None,
            });
        let mut changed = false;
        for entry in entries {
            let Some(template) = &entry.resource_claim_template_name else { continue };
            if statuses.iter().any(|s| s.name == entry.name) {
                continue;
            }
            let group_entry = group.as_ref().and_then(|pg| {
                let same = pg.spec.resource_claims.iter().flatten().any(|g| {
                    g.name == entry.name
                        && g.resource_claim_template_name.as_ref() == Some(template)
                        && g.resource_claim_name.is_none()
                });
                same.then_some(pg)
            });
            let name = match group_entry {
                // The PodGroup's claim; it is generated when the PodGroup is synced.
                Some(pg) => pg
                    .status
                    .as_ref()
                    .and_then(|s| s.resource_claim_statuses.as_ref())
                    .and_then(|l| l.iter().find(|s| s.name == entry.name))
                    .and_then(|s| s.resource_claim_name.clone()),
                None => {
                    let owner = controller_ref("v1", "Pod", &pod.metadata);
                    find_or_create(store, &namespace, owner, POD_CLAIM_ANNOTATION, &entry.name, template)?
                }
            };
            let Some(name) = name else { continue };
            statuses
                .push(PodResourceClaimStatus { name: entry.name.clone(), resource_claim_name: Some(name) });
            changed = true;
        }
        if !changed {
            return Ok(false);
        }
        let mut pod = pod.clone();
        pod.status.get_or_insert_with(Default::default).resource_claim_statuses = Some(statuses);
        match store.update_status(Object::Pod(pod.into())) {
            Ok(_) => Ok(true),
            Err(StoreError::Conflict(_) | StoreError::NotFound(_)) => Ok(false),
            Err(e) => Err(err(e)),
        }
    }

    /// Drops reservations of consumers that are gone or done; deallocates a claim left
    /// without consumers and deletes one generated for a pod that is done.
    fn sync_claim(
        &self,
        store: &mut dyn ClusterStore,
        claim: &ResourceClaim,
    ) -> Result<bool, ControllerError> {
        let namespace = ns(&claim.metadata);
        let reserved = claim.status.as_ref().and_then(|s| s.reserved_for.clone()).unwrap_or_default();
        let valid: Vec<_> = reserved
            .iter()
            .filter(|c| match (c.api_group.as_deref().unwrap_or(""), c.resource.as_str()) {
                ("", "pods") => match store.get(&ObjectRef::new(Kind::Pod, &namespace, &c.name)) {
                    Some(Object::Pod(p)) => p.metadata.uid.as_deref() == Some(c.uid.as_str()) && !is_done(&p),
                    _ => false,
                },
                ("scheduling.k8s.io", "podgroups") => {
                    match store.get(&ObjectRef::new(Kind::PodGroup, &namespace, &c.name)) {
                        Some(Object::PodGroup(g)) => g.metadata.uid.as_deref() == Some(c.uid.as_str()),
                        _ => false,
                    }
                }
                _ => true,
            })
            .cloned()
            .collect();
        let mut wrote = false;
        if valid.len() < reserved.len() {
            let mut c = claim.clone();
            let status = c.status.get_or_insert_with(Default::default);
            if valid.is_empty() {
                status.allocation = None;
            }
            status.reserved_for = (!valid.is_empty()).then_some(valid.clone());
            store.update_status(Object::ResourceClaim(c)).map_err(err)?;
            wrote = true;
        }
        if valid.is_empty() {
            let owner = claim
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true) && o.api_version == "v1" && o.kind == "Pod");
            if let Some(owner) = owner {
                if let Some(Object::Pod(p)) = store.get(&ObjectRef::new(Kind::Pod, &namespace, &owner.name)) {
                    if p.metadata.uid.as_deref() != Some(owner.uid.as_str()) || is_done(&p) {
                        let r = ObjectRef::new(
                            Kind::ResourceClaim,
                            &namespace,
                            claim.metadata.name.clone().unwrap_or_default(),
                        );
                        match store.delete(&r) {
                            Ok(()) | Err(StoreError::NotFound(_)) => wrote = true,
                            Err(e) => return Err(err(e)),
                        }
                    }
                }
            }
        }
        Ok(wrote)
    }
}

impl Controller for ResourceClaimController {
    fn name(&self) -> &'static str {
        NAME
    }

    fn reconcile(&mut self, store: &mut dyn ClusterStore) -> Result<bool, ControllerError> {
        // What changed, by kind; the objects are read fresh from the store.
        let mut last = None;
        let mut groups: BTreeSet<(String, String)> = BTreeSet::new();
        let mut pods: BTreeSet<(String, String)> = BTreeSet::new();
        let mut claims_check = false;
        let mut templates = false;
        store.visit_events_since(self.seen_rv, &mut |e| {
            last = Some(e.resource_version);
            let key = || {
                let m = e.object.metadata();
                (ns(m), m.name.clone().unwrap_or_default())
            };
            match (&e.object, e.kind) {
                (Object::PodGroup(_), WatchEventKind::Deleted) => claims_check = true,
                (Object::PodGroup(_), _) => {
                    groups.insert(key());
                }
                (Object::Pod(p), kind) => {
                    if kind == WatchEventKind::Deleted || is_done(p) {
                        claims_check = true;
                    } else if p
                        .spec
                        .as_ref()
                        .is_some_and(|s| s.resource_claims.as_ref().is_some_and(|c| !c.is_empty()))
                    {
                        pods.insert(key());
                    }
                }
                (Object::ResourceClaim(_), _) => claims_check = true,
                (Object::ResourceClaimTemplate(_), _) => templates = true,
                _ => {}
            }
        });
        let Some(last) = last else { return Ok(false) };
        self.seen_rv = last;
        if templates {
            // A template that appeared lets waiting pods and PodGroups get their claims.
            for o in store.list(Kind::PodGroup) {
                groups.insert((ns(o.metadata()), o.metadata().name.clone().unwrap_or_default()));
            }
            for o in store.list(Kind::Pod) {
                if let Object::Pod(p) = &o {
                    if p.status.as_ref().and_then(|s| s.resource_claim_statuses.as_ref()).map_or(0, Vec::len)
                        < p.spec.as_ref().and_then(|s| s.resource_claims.as_ref()).map_or(0, Vec::len)
                    {
                        pods.insert((ns(o.metadata()), o.metadata().name.clone().unwrap_or_default()));
                    }
                }
            }
        }
        let mut wrote = false;
        let mut group_members: BTreeMap<(String, String), ()> = BTreeMap::new();
        for (namespace, name) in &groups {
            if let Some(Object::PodGroup(pg)) = store.get(&ObjectRef::new(Kind::PodGroup, namespace, name)) {
                if self.sync_group(store, &pg)? {
                    wrote = true;
                    group_members.insert((namespace.clone(), name.clone()), ());
                }
            }
        }
        if !group_members.is_empty() {
            // Members waiting for their PodGroup's claim.
            for o in store.list(Kind::Pod) {
                if let Object::Pod(p) = &o {
                    let g = p
                        .spec
                        .as_ref()
                        .and_then(|s| s.scheduling_group.as_ref())
                        .and_then(|g| g.pod_group_name.clone());
                    if let Some(g) = g {
                        if group_members.contains_key(&(ns(&p.metadata), g)) {
                            pods.insert((ns(&p.metadata), p.metadata.name.clone().unwrap_or_default()));
                        }
                    }
                }
            }
        }
        for (namespace, name) in &pods {
            if let Some(Object::Pod(p)) = store.get(&ObjectRef::new(Kind::Pod, namespace, name)) {
                wrote |= self.sync_pod(store, &p)?;
            }
        }
        if claims_check {
            for o in store.list(Kind::ResourceClaim) {
                if let Object::ResourceClaim(c) = o {
                    wrote |= self.sync_claim(store, &c)?;
                }
            }
        }
        Ok(wrote)
    }

    fn next_wakeup_ms(&self) -> Option<u64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_follow_upstream_truncation() {
        assert_eq!(generate_name("worker-0", "gpu"), "worker-0-gpu-");
        let long = generate_name(&"p".repeat(60), &"c".repeat(20));
        assert!(long.len() <= 57, "{long}");
        assert!(long.starts_with("ppp") && long.ends_with("ccc"), "both parts are kept: {long}");
    }
}
