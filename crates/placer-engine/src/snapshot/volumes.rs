//! Volumes as the scheduler sees them (kube-scheduler's volume binder and its assume
//! caches): PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes and
//! CSIDrivers, plus the bindings the engine has decided but the store has not shown yet.
//!
//! [`VolumeState::find_pod_volumes`] is upstream's `FindPodVolumes`: bound claims must have
//! their PV (`pvs bound to non-existent pv(s)` otherwise) and its node affinity must match
//! the node; each unbound `WaitForFirstConsumer` claim (smallest request first) takes the
//! smallest matching Available PV (class, size, volume mode, selector, access modes, node
//! affinity; a PV pre-bound to the claim wins) or is provisioned when its class has a
//! provisioner and the node satisfies `allowedTopologies` (and, for a CSI driver with
//! `storageCapacity: true`, a CSIStorageCapacity of the claim's class reachable from the
//! node has room: upstream's `hasEnoughCapacity`); a claim whose
//! `volume.kubernetes.io/selected-node` names another node rules the node out.
//!
//! Assumed state lives here so that a pod assumed during a placement search holds its PVs
//! (and its selected node) until the rollback, like the capacity it holds; the bindings a
//! pod's PreBind wrote stay recorded until the store shows them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use placer_api::k8s::api::core::v1::{
    NodeSelector, PersistentVolume, PersistentVolumeClaim, TopologySelectorTerm,
};
use placer_api::k8s::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};
use placer_api::quantity::parse_units;

use crate::framework::helper::{label_selector_matches, node_selector_terms_match, Labels};
use crate::model::{ObjectKey, PodInfo, PodVolume};

/// Annotation the scheduler sets on a claim to provision on a node.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// Annotation of a claim whose binding the PV controller completed.
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// The deprecated class annotation, read before `storageClassName` (as upstream).
pub const ANN_BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// A class with this provisioner cannot provision dynamically.
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// VolumeBinding's filter reasons (upstream's `ConflictReason`s).
pub const ERR_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
pub const ERR_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
pub const ERR_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
pub const ERR_NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";

/// The claim a PV is assumed (or recorded) bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssumedRef {
    pub claim: ObjectKey,
    pub uid: String,
}

/// Something undone by a rollback.
#[derive(Debug, Clone)]
pub enum Undo {
    Pv(String, Option<AssumedRef>),
    Node(ObjectKey, Option<String>),
}

/// A binding PreBind writes before the pod binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeWrite {
    /// Set the PV's `spec.claimRef` to the claim (the PV controller completes the binding);
    /// `by_controller`: the PV was not pre-bound to it by the user.
    BindPv { pv: String, claim: ObjectKey, uid: String, by_controller: bool },
    /// Set `volume.kubernetes.io/selected-node` on the claim (dynamic provisioning).
    SelectNode { claim: ObjectKey, node: String },
}

/// A pod's claims, resolved and sorted as upstream's `GetPodVolumeClaims`.
#[derive(Debug, Clone, Default)]
pub struct PodClaims {
    pub bound: Vec<Arc<PersistentVolumeClaim>>,
    /// Unbound with `WaitForFirstConsumer`: the scheduler binds them.
    pub delayed: Vec<Arc<PersistentVolumeClaim>>,
    /// Unbound with `Immediate` binding (or pre-bound, not yet complete).
    pub immediate: Vec<Arc<PersistentVolumeClaim>>,
}

/// What a pod's unbound claims get on a node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodVolumes {
    /// (claim key, claim uid, PV name, whether the PV was not pre-bound to the claim).
    pub static_bindings: Vec<(ObjectKey, String, String, bool)>,
    pub provisions: Vec<ObjectKey>,
}

impl PodVolumes {
    pub fn is_empty(&self) -> bool {
        self.static_bindings.is_empty() && self.provisions.is_empty()
    }
}

/// The storage objects and the assumed bindings (see the module docs).
#[derive(Debug, Default, Clone)]
pub struct VolumeState {
    pvcs: BTreeMap<ObjectKey, Arc<PersistentVolumeClaim>>,
    pvs: BTreeMap<String, Arc<PersistentVolume>>,
    classes: BTreeMap<String, Arc<StorageClass>>,
    csi_nodes: BTreeMap<String, Arc<CSINode>>,
    csi_drivers: BTreeMap<String, Arc<CSIDriver>>,
    capacities: BTreeMap<ObjectKey, Arc<CSIStorageCapacity>>,
    /// VolumeAttachments by name, and their names by `spec.nodeName` (kube-scheduler's
    /// `va.spec.nodename` index).
    attachments: BTreeMap<String, Arc<VolumeAttachment>>,
    attachments_by_node: BTreeMap<String, BTreeSet<String>>,
    /// PV name -> claim it is assumed bound to (not yet in the store).
    assumed_pv: BTreeMap<String, AssumedRef>,
    /// Claim -> node selected for provisioning (not yet in the store).
    assumed_node: BTreeMap<ObjectKey, String>,
}

fn key_of(meta: &placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<ObjectKey> {
    let ns = meta.namespace.clone().unwrap_or_else(|| "default".to_string());
    meta.name.clone().map(|n| ObjectKey::new(ns, n))
}

fn annotation<'a>(
    meta: &'a placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

/// The claim's class: the beta annotation, else `spec.storageClassName`, else `""`.
pub fn claim_class(pvc: &PersistentVolumeClaim) -> &str {
    annotation(&pvc.metadata, ANN_BETA_STORAGE_CLASS)
        .or_else(|| pvc.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()))
        .unwrap_or("")
}

/// The PV's class: the beta annotation, else `spec.storageClassName`, else `""`.
pub fn pv_class(pv: &PersistentVolume) -> &str {
    annotation(&pv.metadata, ANN_BETA_STORAGE_CLASS)
        .or_else(|| pv.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()))
        .unwrap_or("")
}

/// `spec.volumeName` of a claim (`""` when unset).
pub fn volume_name(pvc: &PersistentVolumeClaim) -> &str {
    pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or("")
}

/// Go's `Quantity.Value()`: the quantity in whole units, rounded up (0 when unreadable).
fn quantity_value(q: &str) -> i64 {
    parse_units(q).unwrap_or(0)
}

/// The claim's storage request in bytes (0 when unset or unreadable).
pub fn requested_bytes(pvc: &PersistentVolumeClaim) -> i64 {
    pvc.spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .and_then(|q| parse_units(&q.0).ok())
        .unwrap_or(0)
}

/// The PV's storage capacity in bytes (0 when unset or unreadable).
pub fn capacity_bytes(pv: &PersistentVolume) -> i64 {
    pv.spec
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .and_then(|q| parse_units(&q.0).ok())
        .unwrap_or(0)
}

/// The claim's access modes.
pub fn claim_access_modes(pvc: &PersistentVolumeClaim) -> &[String] {
    pvc.spec.as_ref().and_then(|s| s.access_modes.as_deref()).unwrap_or(&[])
}

/// Whether the claim is bound and its binding complete (upstream's `isPVCFullyBound`).
pub fn fully_bound(pvc: &PersistentVolumeClaim) -> bool {
    !volume_name(pvc).is_empty() && annotation(&pvc.metadata, ANN_BIND_COMPLETED).is_some()
}

/// Upstream's `CheckNodeAffinity`: the PV's required node affinity against the node's
/// labels (a node without a name, as upstream builds it).
pub fn pv_node_affinity_matches(pv: &PersistentVolume, labels: &Labels) -> bool {
    match pv.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref()) {
        None => true,
        Some(NodeSelector { node_selector_terms }) => {
            node_selector_terms_match(node_selector_terms, "", labels)
        }
    }
}

/// Upstream's `MatchTopologySelectorTerms`: no terms match every node; an empty term
/// matches none.
pub fn topology_terms_match(terms: Option<&[TopologySelectorTerm]>, labels: &Labels) -> bool {
    let terms = terms.unwrap_or(&[]);
    terms.is_empty()
        || terms.iter().any(|t| {
            let exprs = t.match_label_expressions.as_deref().unwrap_or(&[]);
            !exprs.is_empty()
                && exprs.iter().all(|r| labels.get(&r.key).is_some_and(|v| r.values.iter().any(|x| x == v)))
        })
}

/// Whether the claim is for `pod` (upstream's `ephemeral.VolumeIsForPod`).
fn volume_is_for_pod(pod: &PodInfo, pvc: &PersistentVolumeClaim) -> Result<(), String> {
    let owned = pvc
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && *o.uid == *pod.uid);
    if owned {
        Ok(())
    } else {
        Err(format!(
            "PVC {}/{} was not created for pod {} (pod is not owner)",
            pod.key.namespace,
            pvc.metadata.name.as_deref().unwrap_or(""),
            pod.key
        ))
    }
}

impl VolumeState {
    pub fn upsert_pvc(&mut self, pvc: Arc<PersistentVolumeClaim>) {
        let Some(key) = key_of(&pvc.metadata) else { return };
        if annotation(&pvc.metadata, ANN_SELECTED_NODE).is_some() || !volume_name(&pvc).is_empty() {
            self.assumed_node.remove(&key);
        }
        self.pvcs.insert(key, pvc);
    }
    pub fn remove_pvc(&mut self, key: &ObjectKey) {
        self.pvcs.remove(key);
        self.assumed_node.remove(key);
    }
    pub fn upsert_pv(&mut self, pv: Arc<PersistentVolume>) {
        let Some(name) = pv.metadata.name.clone() else { return };
        if pv.spec.as_ref().is_some_and(|s| s.claim_ref.is_some()) {
            self.assumed_pv.remove(&name);
        }
        self.pvs.insert(name, pv);
    }
    pub fn remove_pv(&mut self, name: &str) {
        self.pvs.remove(name);
        self.assumed_pv.remove(name);
    }
    pub fn upsert_class(&mut self, class: Arc<StorageClass>) {
        if let Some(name) = class.metadata.name.clone() {
            self.classes.insert(name, class);
        }
    }
    pub fn remove_class(&mut self, name: &str) {
        self.classes.remove(name);
    }
    pub fn upsert_csi_node(&mut self, node: Arc<CSINode>) {
        if let Some(name) = node.metadata.name.clone() {
            self.csi_nodes.insert(name, node);
        }
    }
    pub fn remove_csi_node(&mut self, name: &str) {
        self.csi_nodes.remove(name);
    }
    pub fn upsert_csi_driver(&mut self, driver: Arc<CSIDriver>) {
        if let Some(name) = driver.metadata.name.clone() {
            self.csi_drivers.insert(name, driver);
        }
    }
    pub fn remove_csi_driver(&mut self, name: &str) {
        self.csi_drivers.remove(name);
    }
    pub fn upsert_capacity(&mut self, capacity: Arc<CSIStorageCapacity>) {
        if let Some(key) = key_of(&capacity.metadata) {
            self.capacities.insert(key, capacity);
        }
    }
    pub fn remove_capacity(&mut self, key: &ObjectKey) {
        self.capacities.remove(key);
    }
    pub fn upsert_attachment(&mut self, va: Arc<VolumeAttachment>) {
        let Some(name) = va.metadata.name.clone() else { return };
        self.remove_attachment(&name);
        self.attachments_by_node.entry(va.spec.node_name.clone()).or_default().insert(name.clone());
        self.attachments.insert(name, va);
    }
    pub fn remove_attachment(&mut self, name: &str) {
        let Some(old) = self.attachments.remove(name) else { return };
        if let Some(names) = self.attachments_by_node.get_mut(&old.spec.node_name) {
            names.remove(name);
            if names.is_empty() {
                self.attachments_by_node.remove(&old.spec.node_name);
            }
        }
    }

    /// NodeVolumeLimits' `getNodeVolumeAttachmentInfo`: the CSI volumes the node's
    /// VolumeAttachments attach, as (attacher, the PV's CSI `volumeHandle`). An attachment
    /// without an attacher or a PV name, whose PV is unknown, or whose PV has no CSI source
    /// is skipped.
    pub fn attached_volumes(&self, node: &str) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.attachments_by_node.get(node).into_iter().flatten().filter_map(move |name| {
            let va = self.attachments.get(name)?;
            let attacher = va.spec.attacher.as_str();
            let pv_name = va.spec.source.persistent_volume_name.as_deref()?;
            if attacher.is_empty() {
                return None;
            }
            let csi = self.pvs.get(pv_name)?.spec.as_ref()?.csi.as_ref()?;
            Some((attacher, csi.volume_handle.as_str()))
        })
    }

    /// Upstream's `hasEnoughCapacity`: a claim without a storage request, or whose
    /// provisioner is no CSIDriver with `storageCapacity: true`, always fits; otherwise
    /// some CSIStorageCapacity of the class must reach the node (`nodeTopology` matches its
    /// labels; no topology reaches no node) with `maximumVolumeSize` (else `capacity`) at
    /// least the request.
    pub fn has_enough_capacity(
        &self,
        pvc: &PersistentVolumeClaim,
        class: &StorageClass,
        labels: &Labels,
    ) -> bool {
        let request = pvc
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"));
        let Some(request) = request else { return true };
        let Some(driver) = self.csi_drivers.get(&class.provisioner) else { return true };
        if driver.spec.storage_capacity != Some(true) {
            return true;
        }
        let size = quantity_value(&request.0);
        let class_name = class.metadata.name.as_deref().unwrap_or("");
        self.capacities.values().any(|c| {
            c.storage_class_name == class_name
                && c.maximum_volume_size
                    .as_ref()
                    .or(c.capacity.as_ref())
                    .is_some_and(|l| quantity_value(&l.0) >= size)
                && c.node_topology.as_ref().is_some_and(|t| label_selector_matches(t, labels))
        })
    }

    pub fn pvc(&self, namespace: &str, name: &str) -> Option<&Arc<PersistentVolumeClaim>> {
        self.pvcs.get(&ObjectKey::new(namespace, name))
    }
    pub fn pv(&self, name: &str) -> Option<&Arc<PersistentVolume>> {
        self.pvs.get(name)
    }
    pub fn class(&self, name: &str) -> Option<&Arc<StorageClass>> {
        self.classes.get(name)
    }
    pub fn csi_node(&self, name: &str) -> Option<&Arc<CSINode>> {
        self.csi_nodes.get(name)
    }
    pub fn csi_driver(&self, name: &str) -> Option<&Arc<CSIDriver>> {
        self.csi_drivers.get(name)
    }

    /// The claim a PV is bound (or assumed bound) to: the assumed one first.
    fn claim_ref_of(&self, pv: &PersistentVolume) -> Option<(String, String, String)> {
        let name = pv.metadata.name.as_deref().unwrap_or("");
        if let Some(a) = self.assumed_pv.get(name) {
            return Some((a.claim.namespace.to_string(), a.claim.name.to_string(), a.uid.clone()));
        }
        pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).map(|r| {
            (
                r.namespace.clone().unwrap_or_default(),
                r.name.clone().unwrap_or_default(),
                r.uid.clone().unwrap_or_default(),
            )
        })
    }

    /// The node a claim is selected (or assumed selected) to be provisioned on.
    pub fn selected_node<'a>(&'a self, key: &ObjectKey, pvc: &'a PersistentVolumeClaim) -> Option<&'a str> {
        self.assumed_node
            .get(key)
            .map(String::as_str)
            .or_else(|| annotation(&pvc.metadata, ANN_SELECTED_NODE))
    }

    /// Upstream's `IsDelayBindingMode`: the claim's class exists and waits for the first
    /// consumer. A class without `volumeBindingMode` is an error.
    fn delay_binding(&self, pvc: &PersistentVolumeClaim) -> Result<bool, String> {
        let class = claim_class(pvc);
        if class.is_empty() {
            return Ok(false);
        }
        match self.classes.get(class) {
            None => Ok(false),
            Some(c) => match c.volume_binding_mode.as_deref() {
                None => Err(format!("VolumeBindingMode not set for StorageClass {class:?}")),
                Some(m) => Ok(m == "WaitForFirstConsumer"),
            },
        }
    }

    /// VolumeBinding's PreFilter (`podHasPVCs`, then `GetPodVolumeClaims`): the pod's
    /// claims, or the unresolvable reason (a claim missing, lost, being deleted, or an
    /// ephemeral claim not the pod's). `Ok(None)`: the pod has no claims.
    pub fn pod_claims(&self, pod: &PodInfo) -> Result<Option<PodClaims>, ClaimsError> {
        let ns = &*pod.key.namespace;
        let mut any = false;
        let mut found = Vec::new();
        for v in pod.view.volumes.iter() {
            let PodVolume::Claim { claim, ephemeral } = v else { continue };
            any = true;
            let Some(pvc) = self.pvc(ns, claim) else {
                return Err(ClaimsError::Unresolvable(if *ephemeral {
                    format!("waiting for ephemeral volume controller to create the persistentvolumeclaim {claim:?}")
                } else {
                    format!("persistentvolumeclaim {claim:?} not found")
                }));
            };
            if pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost") {
                return Err(ClaimsError::Unresolvable(format!(
                    "persistentvolumeclaim {claim:?} bound to non-existent persistentvolume {:?}",
                    volume_name(pvc)
                )));
            }
            if pvc.metadata.deletion_timestamp.is_some() {
                return Err(ClaimsError::Unresolvable(format!(
                    "persistentvolumeclaim {claim:?} is being deleted"
                )));
            }
            if *ephemeral {
                volume_is_for_pod(pod, pvc).map_err(ClaimsError::Unresolvable)?;
            }
            found.push(pvc.clone());
        }
        if !any {
            return Ok(None);
        }
        let mut claims = PodClaims::default();
        for pvc in found {
            if fully_bound(&pvc) {
                claims.bound.push(pvc);
            } else if self.delay_binding(&pvc).map_err(ClaimsError::Error)? && volume_name(&pvc).is_empty() {
                claims.delayed.push(pvc);
            } else {
                claims.immediate.push(pvc);
            }
        }
        Ok(Some(claims))
    }

    /// Upstream's `FindMatchingVolume` in the scheduler's path: a PV pre-bound (or assumed
    /// bound) to the claim if its node affinity fits, else the smallest Available PV of the
    /// claim's class that fits the claim and the node.
    fn find_matching_volume(
        &self,
        key: &ObjectKey,
        pvc: &PersistentVolumeClaim,
        labels: &Labels,
        excluded: &[String],
    ) -> Option<Arc<PersistentVolume>> {
        let requested = requested_bytes(pvc);
        let class = claim_class(pvc);
        let spec = pvc.spec.clone().unwrap_or_default();
        let claim_mode = spec.volume_mode.as_deref().unwrap_or("Filesystem");
        let uid = pvc.metadata.uid.as_deref().unwrap_or("");
        let mut best: Option<(i64, &Arc<PersistentVolume>)> = None;
        for (name, pv) in &self.pvs {
            if pv_class(pv) != class || excluded.contains(name) {
                continue;
            }
            let claim_ref = self.claim_ref_of(pv);
            let bound_to_claim = claim_ref.as_ref().is_some_and(|(ns, n, u)| {
                **ns == *key.namespace && **n == *key.name && (u.is_empty() || u == uid)
            });
            if claim_ref.is_some() && !bound_to_claim {
                continue;
            }
            let size = capacity_bytes(pv);
            if size < requested {
                continue;
            }
            let pv_spec = pv.spec.clone().unwrap_or_default();
            if pv_spec.volume_mode.as_deref().unwrap_or("Filesystem") != claim_mode {
                continue;
            }
            if pv.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let affinity = pv_node_affinity_matches(pv, labels);
            if bound_to_claim {
                return affinity.then(|| pv.clone());
            }
            // Phase: the PV controller marks new volumes Available; a volume it has not
            // seen yet (no phase) counts as Available.
            let phase = pv.status.as_ref().and_then(|s| s.phase.as_deref());
            if !matches!(phase, None | Some("Available")) {
                continue;
            }
            if let Some(sel) = &spec.selector {
                let empty = Labels::new();
                if !label_selector_matches(sel, pv.metadata.labels.as_ref().unwrap_or(&empty)) {
                    continue;
                }
            }
            if !affinity {
                continue;
            }
            let pv_modes = pv_spec.access_modes.unwrap_or_default();
            if !claim_access_modes(pvc).iter().all(|m| pv_modes.contains(m)) {
                continue;
            }
            if best.is_none_or(|(s, _)| s > size) {
                best = Some((size, pv));
            }
        }
        best.map(|(_, pv)| pv.clone())
    }

    /// Upstream's `FindPodVolumes` for one node (see the module docs): the bindings and
    /// provisions the pod's unbound claims get there, or the node's reasons.
    pub fn find_pod_volumes(
        &self,
        claims: &PodClaims,
        node_name: &str,
        labels: &Labels,
    ) -> Result<Result<PodVolumes, Vec<&'static str>>, String> {
        // checkBoundClaims: the first claim whose PV is missing or does not fit decides; an
        // in-tree PV is checked with its CSI-translated node affinity where its plugin is
        // migrated (`tryTranslatePVToCSI`).
        let (mut bound_ok, mut pv_found) = (true, true);
        let csi_node = self.csi_nodes.get(node_name).map(|n| &**n);
        for pvc in &claims.bound {
            let Some(pv) = self.pvs.get(volume_name(pvc)) else {
                pv_found = false;
                break;
            };
            let pv = translation::pv_for_node_affinity(pv, csi_node)?;
            if !pv_node_affinity_matches(&pv, labels) {
                bound_ok = false;
                break;
            }
        }
        let unbound = self.find_unbound(claims, node_name, labels)?;
        let mut reasons = Vec::new();
        if !bound_ok {
            reasons.push(ERR_NODE_CONFLICT);
        }
        if let Err(reason) = unbound {
            // ERR_BIND_CONFLICT or ERR_NOT_ENOUGH_SPACE, in upstream's order.
            reasons.push(reason);
        }
        if !pv_found {
            reasons.push(ERR_PV_NOT_EXIST);
        }
        match unbound {
            Ok(volumes) if reasons.is_empty() => Ok(Ok(volumes)),
            _ => Ok(Err(reasons)),
        }
    }

    /// The unbound (`WaitForFirstConsumer`) claims of `claims` on a node: the reason
    /// ([`ERR_BIND_CONFLICT`], or [`ERR_NOT_ENOUGH_SPACE`] when a provisioning lacks
    /// capacity) when they cannot all be bound or provisioned there.
    fn find_unbound(
        &self,
        claims: &PodClaims,
        node_name: &str,
        labels: &Labels,
    ) -> Result<Result<PodVolumes, &'static str>, String> {
        let mut out = PodVolumes::default();
        if claims.delayed.is_empty() {
            return Ok(Ok(out));
        }
        let mut to_match = Vec::new();
        let mut to_provision = Vec::new();
        for pvc in &claims.delayed {
            let Some(key) = key_of(&pvc.metadata) else { continue };
            match self.selected_node(&key, pvc) {
                // Selected for another node: this one cannot have it.
                Some(n) if n != node_name => return Ok(Err(ERR_BIND_CONFLICT)),
                Some(_) => to_provision.push((key, pvc.clone())),
                None => to_match.push((key, pvc.clone())),
            }
        }
        // Smallest request first (a stable sort, as upstream's).
        to_match.sort_by_key(|(_, pvc)| requested_bytes(pvc));
        let mut chosen: Vec<String> = Vec::new();
        for (key, pvc) in to_match {
            match self.find_matching_volume(&key, &pvc, labels, &chosen) {
                Some(pv) => {
                    let name = pv.metadata.name.clone().unwrap_or_default();
                    let uid = pvc.metadata.uid.clone().unwrap_or_default();
                    let prebound = self.claim_ref_of(&pv).is_some();
                    chosen.push(name.clone());
                    out.static_bindings.push((key, uid, name, !prebound));
                }
                None => to_provision.push((key, pvc)),
            }
        }
        // checkVolumeProvisions: every claim left must be provisionable on the node.
        for (key, pvc) in to_provision {
            let class_name = claim_class(&pvc);
            if class_name.is_empty() {
                return Err(format!("no class for claim {:?}", format!("{}/{}", key.namespace, key.name)));
            }
            let Some(class) = self.classes.get(class_name) else {
                return Err(format!("failed to find storage class {class_name:?}"));
            };
            if class.provisioner.is_empty() || class.provisioner == NO_PROVISIONER {
                return Ok(Err(ERR_BIND_CONFLICT));
            }
            if !topology_terms_match(class.allowed_topologies.as_deref(), labels) {
                return Ok(Err(ERR_BIND_CONFLICT));
            }
            if !self.has_enough_capacity(&pvc, class, labels) {
                return Ok(Err(ERR_NOT_ENOUGH_SPACE));
            }
            out.provisions.push(key);
        }
        Ok(Ok(out))
    }

    /// Assumes `volumes` for a pod on `node`; returns the undo entries.
    pub fn assume(&mut self, volumes: &PodVolumes, node: &str) -> Vec<Undo> {
        let mut undo = Vec::new();
        for (claim, uid, pv, _) in &volumes.static_bindings {
            let old =
                self.assumed_pv.insert(pv.clone(), AssumedRef { claim: claim.clone(), uid: uid.clone() });
            undo.push(Undo::Pv(pv.clone(), old));
        }
        for claim in &volumes.provisions {
            let old = self.assumed_node.insert(claim.clone(), node.to_string());
            undo.push(Undo::Node(claim.clone(), old));
        }
        undo
    }

    /// Records a PreBind write until the store shows it.
    pub fn record(&mut self, write: &VolumeWrite) {
        match write {
            VolumeWrite::BindPv { pv, claim, uid, .. } => {
                self.assumed_pv.insert(pv.clone(), AssumedRef { claim: claim.clone(), uid: uid.clone() });
            }
            VolumeWrite::SelectNode { claim, node } => {
                self.assumed_node.insert(claim.clone(), node.clone());
            }
        }
    }

    /// Undoes one assume entry.
    pub fn restore(&mut self, undo: Undo) {
        match undo {
            Undo::Pv(pv, Some(old)) => {
                self.assumed_pv.insert(pv, old);
            }
            Undo::Pv(pv, None) => {
                self.assumed_pv.remove(&pv);
            }
            Undo::Node(claim, Some(old)) => {
                self.assumed_node.insert(claim, old);
            }
            Undo::Node(claim, None) => {
                self.assumed_node.remove(&claim);
            }
        }
    }

    /// The writes PreBind makes for `volumes` chosen on `node`.
    pub fn writes(volumes: &PodVolumes, node: &str) -> Vec<VolumeWrite> {
        let binds =
            volumes.static_bindings.iter().map(|(claim, uid, pv, by_controller)| VolumeWrite::BindPv {
                pv: pv.clone(),
                claim: claim.clone(),
                uid: uid.clone(),
                by_controller: *by_controller,
            });
        let provisions = volumes
            .provisions
            .iter()
            .map(|claim| VolumeWrite::SelectNode { claim: claim.clone(), node: node.to_string() });
        binds.chain(provisions).collect()
    }

    /// Whether any pod in `pods` other than `except` uses the claim `ns/name`
    /// (upstream's `IsPVCUsedByPods`).
    pub fn claim_in_use<'a>(
        pods: impl Iterator<Item = &'a PodInfo>,
        except: &ObjectKey,
        ns: &str,
        name: &str,
    ) -> bool {
        pods.filter(|p| p.key != *except && *p.key.namespace == *ns)
            .any(|p| p.view.volumes.iter().any(|v| v.claim() == Some(name)))
    }

    /// NodeVolumeLimits' `getCSIDriverInfo`: the CSI driver and volume handle of a claim,
    /// from its PV (an in-tree PV of a migrated plugin translated to its CSI driver when
    /// the node has a CSINode), or for an unbound claim (or a missing PV) from its class's
    /// provisioner (translated likewise) with the claim as handle. `None`: not counted.
    pub fn csi_driver_info(
        &self,
        csi_node: Option<&CSINode>,
        pvc: &PersistentVolumeClaim,
    ) -> Option<(String, String)> {
        let pv = self.pvs.get(volume_name(pvc)).filter(|_| !volume_name(pvc).is_empty());
        let Some(pv) = pv else { return self.csi_driver_info_from_class(csi_node, pvc) };
        if let Some(csi) = pv.spec.as_ref().and_then(|s| s.csi.as_ref()) {
            return Some((csi.driver.clone(), csi.volume_handle.clone()));
        }
        let plugin = translation::pv_plugin(pv)?;
        if !translation::migration_on(csi_node, plugin) {
            return None;
        }
        translation::translate_pv(pv).ok().map(|(d, h)| (d.to_string(), h))
    }

    /// `getCSIDriverInfoFromSC`: the class's provisioner (an in-tree one translated when
    /// its migration is on for the node, else not counted) and a handle unique to the claim.
    fn csi_driver_info_from_class(
        &self,
        csi_node: Option<&CSINode>,
        pvc: &PersistentVolumeClaim,
    ) -> Option<(String, String)> {
        let class = self.classes.get(claim_class(pvc))?;
        let ns = pvc.metadata.namespace.as_deref().unwrap_or("default");
        let name = pvc.metadata.name.as_deref().unwrap_or("");
        // Upstream prefixes a random string so that no real handle is equal to it.
        let handle = format!("\u{0}claim-{ns}/{name}");
        let provisioner = class.provisioner.as_str();
        if translation::is_migratable_plugin(provisioner) {
            if !translation::migration_on(csi_node, provisioner) {
                return None;
            }
            return translation::csi_driver_of(provisioner).map(|d| (d.to_string(), handle));
        }
        Some((provisioner.to_string(), handle))
    }
}

/// Why a pod's claims cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimsError {
    /// UnschedulableAndUnresolvable, with upstream's message.
    Unresolvable(String),
    /// An internal error (a class without binding mode).
    Error(String),
}

pub mod translation;

#[cfg(test)]
mod tests;
