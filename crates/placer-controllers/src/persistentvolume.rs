//! The PersistentVolume controller (kube-controller-manager's `persistentvolume-binder`,
//! `pkg/controller/volume/persistentvolume`) with a simulated provisioner, for the embedded
//! cluster:
//!
//! * a PV without a claim is `Available`; one whose claim is gone is `Released` (deleted
//!   when it was provisioned and its reclaim policy is `Delete`);
//! * an unbound claim without `storageClassName` gets the default StorageClass
//!   (retroactive default class assignment);
//! * an unbound claim is bound to a PV pre-bound to it (its `claimRef`, as the scheduler's
//!   VolumeBinding PreBind sets it), or, with `Immediate` binding, to the smallest
//!   Available PV of its class that fits (size, access modes, volume mode, selector);
//! * with `WaitForFirstConsumer` and no PV pre-bound it waits (`WaitForFirstConsumer`
//!   event) until the scheduler sets `volume.kubernetes.io/selected-node`;
//! * a claim without a matching PV whose class has a provisioner is provisioned at once:
//!   a PV `pvc-<claim uid>` of the claim's size, access modes and class, with a CSI source
//!   of the provisioner and, for a selected node, node affinity on the node's values of the
//!   driver's CSINode `topologyKeys` (else of the class's `allowedTopologies` keys);
//! * binding sets the PV's `claimRef` and phase `Bound`, the claim's `volumeName`,
//!   `pv.kubernetes.io/bind-completed` and status (`Bound`, capacity, access modes); a bound
//!   claim whose PV is gone is `Lost`.
//!
//! In `placer serve` this controller does not run: kube-controller-manager's does (and a
//! CSI external-provisioner provisions).

use std::collections::BTreeMap;

use placer_api::k8s::api::core::v1::{
    CSIPersistentVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectReference,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimStatus, PersistentVolumeSpec,
    PersistentVolumeStatus, VolumeNodeAffinity,
};
use placer_api::k8s::api::storage::v1::StorageClass;
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use placer_cluster::{ClusterStore, Kind, Object, ObjectRef, StoreError};
use placer_engine::volumes::{
    capacity_bytes as capacity, claim_class, pv_class, requested_bytes as request, volume_name,
};

use crate::{Controller, ControllerError};

const NAME: &str = "persistentvolume-controller";
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
pub const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
pub const ANN_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
const ANN_BETA_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// See the module docs.
#[derive(Debug, Default)]
pub struct PersistentVolumeController {
    seen_rv: u64,
    /// Claims told to wait for their first consumer (the event is recorded once).
    waiting: std::collections::BTreeSet<(String, String)>,
}

impl PersistentVolumeController {
    pub fn new() -> Self {
        Self::default()
    }
}

fn err(e: StoreError) -> ControllerError {
    ControllerError { controller: NAME, message: e.to_string() }
}

fn ann<'a>(m: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    m.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

fn set_ann(m: &mut ObjectMeta, key: &str, value: &str) {
    m.annotations.get_or_insert_with(Default::default).insert(key.to_string(), value.to_string());
}

fn ns(m: &ObjectMeta) -> String {
    m.namespace.clone().unwrap_or_else(|| "default".to_string())
}

fn claim_ref(pv: &PersistentVolume) -> Option<&ObjectReference> {
    pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref())
}

/// Whether `pv` is pre-bound or bound to `claim` (name, namespace, and uid when set).
fn bound_to(pv: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    claim_ref(pv).is_some_and(|r| {
        r.name.as_deref() == claim.metadata.name.as_deref()
            && r.namespace.as_deref().unwrap_or("default") == ns(&claim.metadata)
            && r.uid.as_deref().is_none_or(|u| u.is_empty() || Some(u) == claim.metadata.uid.as_deref())
    })
}

fn is_delay_binding(class: Option<&StorageClass>) -> bool {
    class.and_then(|c| c.volume_binding_mode.as_deref()) == Some("WaitForFirstConsumer")
}

/// `FindMatchingVolume` in the controller's path (no node): a PV pre-bound to the claim,
/// else (not for delayed binding) the smallest Available PV that fits.
fn find_match<'a>(
    claim: &PersistentVolumeClaim,
    pvs: &'a [PersistentVolume],
    delay: bool,
) -> Option<&'a PersistentVolume> {
    let spec = claim.spec.clone().unwrap_or_default();
    let requested = request(claim);
    let class = claim_class(claim);
    let mode = spec.volume_mode.as_deref().unwrap_or("Filesystem");
    let modes = spec.access_modes.unwrap_or_default();
    let mut best: Option<&PersistentVolume> = None;
    for pv in pvs {
        if claim_ref(pv).is_some() && !bound_to(pv, claim) {
            continue;
        }
        let pspec = pv.spec.clone().unwrap_or_default();
        if capacity(pv) < requested
            || pspec.volume_mode.as_deref().unwrap_or("Filesystem") != mode
            || pv.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        let pv_modes = pspec.access_modes.unwrap_or_default();
        if !modes.iter().all(|m| pv_modes.contains(m)) {
            continue;
        }
        if bound_to(pv, claim) {
            return Some(pv);
        }
        if delay {
            continue;
        }
        let phase = pv.status.as_ref().and_then(|s| s.phase.as_deref());
        if !matches!(phase, None | Some("Available")) || pv_class(pv) != class {
            continue;
        }
        if let Some(sel) = &spec.selector {
            if !selector_matches(sel, pv.metadata.labels.as_ref()) {
                continue;
            }
        }
        if best.is_none_or(|b| capacity(b) > capacity(pv)) {
            best = Some(pv);
        }
    }
    best
}

/// A label selector against labels (matchLabels and matchExpressions).
fn selector_matches(
    sel: &placer_api::k8s::apimachinery::pkg::apis::meta::v1::LabelSelector,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    let empty = BTreeMap::new();
    let labels = labels.unwrap_or(&empty);
    let ml = sel.match_labels.iter().flatten().all(|(k, v)| labels.get(k) == Some(v));
    let me = sel.match_expressions.iter().flatten().all(|r| {
        let vals = r.values.as_deref().unwrap_or(&[]);
        match r.operator.as_str() {
            "In" => labels.get(&r.key).is_some_and(|v| vals.contains(v)),
            "NotIn" => labels.get(&r.key).is_none_or(|v| !vals.contains(v)),
            "Exists" => labels.contains_key(&r.key),
            "DoesNotExist" => !labels.contains_key(&r.key),
            _ => false,
        }
    });
    ml && me
}

fn record(store: &mut dyn ClusterStore, r: ObjectRef, type_: &str, reason: &str, note: String) {
    placer_cluster::record_event(store, || r, type_, reason, note, NAME);
}

fn claim_ref_of(claim: &PersistentVolumeClaim) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_string()),
        kind: Some("PersistentVolumeClaim".to_string()),
        namespace: Some(ns(&claim.metadata)),
        name: claim.metadata.name.clone(),
        uid: claim.metadata.uid.clone(),
        resource_version: claim.metadata.resource_version.clone(),
        ..Default::default()
    }
}

/// The default StorageClass: among classes annotated default, the newest, then by name.
fn default_class(classes: &[StorageClass]) -> Option<&StorageClass> {
    classes.iter().filter(|c| ann(&c.metadata, ANN_DEFAULT_CLASS) == Some("true")).max_by(|a, b| {
        let t = |c: &StorageClass| c.metadata.creation_timestamp.clone().map(|t| t.0);
        t(a).cmp(&t(b)).then_with(|| b.metadata.name.cmp(&a.metadata.name))
    })
}

struct World {
    pvs: Vec<PersistentVolume>,
    classes: Vec<StorageClass>,
}

impl World {
    fn read(store: &dyn ClusterStore) -> World {
        let mut pvs = Vec::new();
        let mut classes = Vec::new();
        for o in store.list(Kind::PersistentVolume) {
            if let Object::PersistentVolume(pv) = o {
                pvs.push(*pv);
            }
        }
        for o in store.list(Kind::StorageClass) {
            if let Object::StorageClass(c) = o {
                classes.push(c);
            }
        }
        World { pvs, classes }
    }

    fn class(&self, name: &str) -> Option<&StorageClass> {
        self.classes.iter().find(|c| c.metadata.name.as_deref() == Some(name))
    }
}

impl PersistentVolumeController {
    /// Binds `pv` and `claim` (both sides, spec then status).
    fn bind(
        &self,
        store: &mut dyn ClusterStore,
        mut pv: PersistentVolume,
        mut claim: PersistentVolumeClaim,
    ) -> Result<bool, ControllerError> {
        let pv_name = pv.metadata.name.clone().unwrap_or_default();
        let mut wrote = false;
        let spec = pv.spec.get_or_insert_with(Default::default);
        let needs_ref = spec
            .claim_ref
            .as_ref()
            .is_none_or(|r| r.uid.as_deref().unwrap_or("").is_empty() || r.uid != claim.metadata.uid);
        if needs_ref {
            let prebound = spec.claim_ref.is_some();
            spec.claim_ref = Some(claim_ref_of(&claim));
            if !prebound {
                set_ann(&mut pv.metadata, ANN_BOUND_BY_CONTROLLER, "yes");
            }
            pv = match store.update(Object::PersistentVolume(Box::new(pv))).map_err(err)? {
                Object::PersistentVolume(p) => *p,
                _ => return Ok(true),
            };
            wrote = true;
        }
        if pv.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound") {
            pv.status = Some(PersistentVolumeStatus {
                phase: Some("Bound".to_string()),
                ..pv.status.clone().unwrap_or_default()
            });
            pv = match store.update_status(Object::PersistentVolume(Box::new(pv))).map_err(err)? {
                Object::PersistentVolume(p) => *p,
                _ => return Ok(true),
            };
            wrote = true;
        }
        if volume_name(&claim) != pv_name || ann(&claim.metadata, ANN_BIND_COMPLETED).is_none() {
            let by_controller = volume_name(&claim).is_empty();
            claim.spec.get_or_insert_with(Default::default).volume_name = Some(pv_name.clone());
            set_ann(&mut claim.metadata, ANN_BIND_COMPLETED, "yes");
            if by_controller {
                set_ann(&mut claim.metadata, ANN_BOUND_BY_CONTROLLER, "yes");
            }
            claim = match store.update(Object::PersistentVolumeClaim(claim)).map_err(err)? {
                Object::PersistentVolumeClaim(c) => c,
                _ => return Ok(true),
            };
            wrote = true;
        }
        let spec = pv.spec.clone().unwrap_or_default();
        let status = PersistentVolumeClaimStatus {
            phase: Some("Bound".to_string()),
            access_modes: spec.access_modes.clone(),
            capacity: spec.capacity.clone(),
            ..claim.status.clone().unwrap_or_default()
        };
        if claim.status.as_ref() != Some(&status) {
            claim.status = Some(status);
            store.update_status(Object::PersistentVolumeClaim(claim)).map_err(err)?;
            wrote = true;
        }
        Ok(wrote)
    }

    /// Provisions a PV for `claim` with `class` (see the module docs).
    fn provision(
        &self,
        store: &mut dyn ClusterStore,
        claim: &PersistentVolumeClaim,
        class: &StorageClass,
    ) -> Result<Option<PersistentVolume>, ControllerError> {
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        let name = format!("pvc-{uid}");
        let spec = claim.spec.clone().unwrap_or_default();
        let selected = ann(&claim.metadata, ANN_SELECTED_NODE);
        let affinity = selected.and_then(|node| self.topology(store, class, node));
        let storage =
            spec.resources.as_ref().and_then(|r| r.requests.as_ref()).and_then(|r| r.get("storage")).cloned();
        let mut meta = ObjectMeta { name: Some(name.clone()), ..Default::default() };
        set_ann(&mut meta, ANN_PROVISIONED_BY, &class.provisioner);
        set_ann(&mut meta, ANN_BOUND_BY_CONTROLLER, "yes");
        let pv = PersistentVolume {
            metadata: meta,
            spec: Some(PersistentVolumeSpec {
                access_modes: spec.access_modes.clone(),
                capacity: storage.map(|q| BTreeMap::from([("storage".to_string(), q)])),
                claim_ref: Some(claim_ref_of(claim)),
                csi: Some(CSIPersistentVolumeSource {
                    driver: class.provisioner.clone(),
                    volume_handle: name.clone(),
                    ..Default::default()
                }),
                node_affinity: affinity,
                persistent_volume_reclaim_policy: Some(
                    class.reclaim_policy.clone().unwrap_or_else(|| "Delete".into()),
                ),
                storage_class_name: class.metadata.name.clone(),
                volume_mode: spec.volume_mode.clone(),
                mount_options: class.mount_options.clone(),
                ..Default::default()
            }),
            status: None,
        };
        let r = ObjectRef::new(Kind::PersistentVolume, "", name.clone());
        if let Some(Object::PersistentVolume(existing)) = store.get(&r) {
            return Ok(Some(*existing));
        }
        match store.create(Object::PersistentVolume(Box::new(pv))) {
            Ok(Object::PersistentVolume(pv)) => {
                let note = format!("Successfully provisioned volume {name} using {}", class.provisioner);
                let cr = ObjectRef::new(
                    Kind::PersistentVolumeClaim,
                    ns(&claim.metadata),
                    claim.metadata.name.clone().unwrap_or_default(),
                );
                record(store, cr, "Normal", "ProvisioningSucceeded", note);
                Ok(Some(*pv))
            }
            Ok(_) => Ok(None),
            Err(e) => {
                let cr = ObjectRef::new(
                    Kind::PersistentVolumeClaim,
                    ns(&claim.metadata),
                    claim.metadata.name.clone().unwrap_or_default(),
                );
                record(store, cr, "Warning", "ProvisioningFailed", e.to_string());
                Ok(None)
            }
        }
    }

    /// Node affinity of a volume provisioned for `node`: the node's values of the driver's
    /// CSINode topology keys, else of the class's allowedTopologies keys.
    fn topology(
        &self,
        store: &dyn ClusterStore,
        class: &StorageClass,
        node: &str,
    ) -> Option<VolumeNodeAffinity> {
        let Some(Object::Node(n)) = store.get(&ObjectRef::new(Kind::Node, "", node)) else { return None };
        let labels = n.metadata.labels.clone().unwrap_or_default();
        let mut keys: Vec<String> = match store.get(&ObjectRef::new(Kind::CSINode, "", node)) {
            Some(Object::CSINode(c)) => c
                .spec
                .drivers
                .iter()
                .find(|d| d.name == class.provisioner)
                .and_then(|d| d.topology_keys.clone())
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        if keys.is_empty() {
            keys = class
                .allowed_topologies
                .iter()
                .flatten()
                .flat_map(|t| t.match_label_expressions.iter().flatten().map(|e| e.key.clone()))
                .collect();
        }
        keys.sort();
        keys.dedup();
        let exprs: Vec<NodeSelectorRequirement> = keys
            .into_iter()
            .filter_map(|k| {
                let v = labels.get(&k)?.clone();
                Some(NodeSelectorRequirement { key: k, operator: "In".to_string(), values: Some(vec![v]) })
            })
            .collect();
        (!exprs.is_empty()).then(|| VolumeNodeAffinity {
            required: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(exprs),
                    match_fields: None,
                }],
            }),
        })
    }

    fn set_claim_phase(
        store: &mut dyn ClusterStore,
        mut claim: PersistentVolumeClaim,
        phase: &str,
    ) -> Result<bool, ControllerError> {
        if claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some(phase) {
            return Ok(false);
        }
        claim.status.get_or_insert_with(Default::default).phase = Some(phase.to_string());
        store.update_status(Object::PersistentVolumeClaim(claim)).map_err(err)?;
        Ok(true)
    }

    fn sync_claim(
        &mut self,
        store: &mut dyn ClusterStore,
        world: &mut World,
        mut claim: PersistentVolumeClaim,
    ) -> Result<bool, ControllerError> {
        let key = (ns(&claim.metadata), claim.metadata.name.clone().unwrap_or_default());
        let cref = ObjectRef::new(Kind::PersistentVolumeClaim, key.0.clone(), key.1.clone());
        if claim.metadata.deletion_timestamp.is_some() {
            return Ok(false);
        }
        let bound = ann(&claim.metadata, ANN_BIND_COMPLETED).is_some();
        if bound {
            let pv =
                world.pvs.iter().find(|p| p.metadata.name.as_deref() == Some(volume_name(&claim))).cloned();
            return match pv {
                Some(pv) if claim_ref(&pv).is_none() || bound_to(&pv, &claim) => self.bind(store, pv, claim),
                _ => {
                    let lost = Self::set_claim_phase(store, claim, "Lost")?;
                    if lost {
                        let note = "Bound claim has lost its PersistentVolume. Data on the volume is lost!";
                        record(store, cref, "Warning", "ClaimLost", note.to_string());
                    }
                    Ok(lost)
                }
            };
        }
        // Retroactive default class: an unbound claim with no class gets the default one.
        let no_class = ann(&claim.metadata, ANN_BETA_CLASS).is_none()
            && claim.spec.as_ref().is_some_and(|s| s.storage_class_name.is_none());
        if no_class && volume_name(&claim).is_empty() {
            if let Some(name) = default_class(&world.classes).and_then(|c| c.metadata.name.clone()) {
                claim.spec.get_or_insert_with(Default::default).storage_class_name = Some(name);
                store.update(Object::PersistentVolumeClaim(claim)).map_err(err)?;
                return Ok(true);
            }
        }
        if !volume_name(&claim).is_empty() {
            // Pre-bound by the user to a volume.
            let pv =
                world.pvs.iter().find(|p| p.metadata.name.as_deref() == Some(volume_name(&claim))).cloned();
            return match pv {
                Some(pv) if claim_ref(&pv).is_none() || bound_to(&pv, &claim) => self.bind(store, pv, claim),
                _ => Self::set_claim_phase(store, claim, "Pending"),
            };
        }
        let class = world.class(claim_class(&claim)).cloned();
        let delay = is_delay_binding(class.as_ref());
        if let Some(pv) = find_match(&claim, &world.pvs, delay).cloned() {
            return self.bind(store, pv, claim);
        }
        let selected = ann(&claim.metadata, ANN_SELECTED_NODE).is_some();
        if delay && !selected {
            let mut wrote = Self::set_claim_phase(store, claim, "Pending")?;
            if self.waiting.insert(key) {
                let note = "waiting for first consumer to be created before binding";
                record(store, cref, "Normal", "WaitForFirstConsumer", note.to_string());
                wrote = true;
            }
            return Ok(wrote);
        }
        match class {
            Some(class) if !class.provisioner.is_empty() && class.provisioner != NO_PROVISIONER => {
                if ann(&claim.metadata, ANN_STORAGE_PROVISIONER).is_none() {
                    set_ann(&mut claim.metadata, ANN_STORAGE_PROVISIONER, &class.provisioner);
                    claim = match store.update(Object::PersistentVolumeClaim(claim)).map_err(err)? {
                        Object::PersistentVolumeClaim(c) => c,
                        _ => return Ok(true),
                    };
                }
                match self.provision(store, &claim, &class)? {
                    Some(pv) => {
                        world.pvs.push(pv.clone());
                        self.bind(store, pv, claim).map(|_| true)
                    }
                    None => Self::set_claim_phase(store, claim, "Pending"),
                }
            }
            _ => {
                let first = claim.status.as_ref().and_then(|s| s.phase.as_deref()).is_none();
                let wrote = Self::set_claim_phase(store, claim, "Pending")?;
                if first && claim_class_is_empty(&cref, store) {
                    let note = "no persistent volumes available for this claim and no storage class is set";
                    record(store, cref, "Normal", "FailedBinding", note.to_string());
                }
                Ok(wrote)
            }
        }
    }

    fn sync_volume(
        &self,
        store: &mut dyn ClusterStore,
        mut pv: PersistentVolume,
    ) -> Result<bool, ControllerError> {
        let phase = pv.status.as_ref().and_then(|s| s.phase.clone());
        let target = match claim_ref(&pv) {
            None => "Available",
            Some(r) if r.uid.as_deref().unwrap_or("").is_empty() => "Available",
            Some(r) => {
                let cr = ObjectRef::new(
                    Kind::PersistentVolumeClaim,
                    r.namespace.clone().unwrap_or_else(|| "default".into()),
                    r.name.clone().unwrap_or_default(),
                );
                match store.get(&cr) {
                    Some(Object::PersistentVolumeClaim(c)) if c.metadata.uid == r.uid => {
                        if volume_name(&c) == pv.metadata.name.as_deref().unwrap_or("") {
                            "Bound"
                        } else {
                            // The claim is bound by its own sync.
                            return Ok(false);
                        }
                    }
                    _ => "Released",
                }
            }
        };
        if target == "Released" {
            let provisioned = ann(&pv.metadata, ANN_PROVISIONED_BY).is_some();
            let delete = pv.spec.as_ref().and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
                == Some("Delete");
            if provisioned && delete {
                let r =
                    ObjectRef::new(Kind::PersistentVolume, "", pv.metadata.name.clone().unwrap_or_default());
                return match store.delete(&r) {
                    Ok(()) | Err(StoreError::NotFound(_)) => Ok(true),
                    Err(e) => Err(err(e)),
                };
            }
        }
        if phase.as_deref() == Some(target) {
            return Ok(false);
        }
        pv.status.get_or_insert_with(Default::default).phase = Some(target.to_string());
        store.update_status(Object::PersistentVolume(Box::new(pv))).map_err(err)?;
        Ok(true)
    }
}

fn claim_class_is_empty(r: &ObjectRef, store: &dyn ClusterStore) -> bool {
    match store.get(r) {
        Some(Object::PersistentVolumeClaim(c)) => claim_class(&c).is_empty(),
        _ => false,
    }
}

impl Controller for PersistentVolumeController {
    fn name(&self) -> &'static str {
        NAME
    }

    fn reconcile(&mut self, store: &mut dyn ClusterStore) -> Result<bool, ControllerError> {
        let kinds = [
            Kind::PersistentVolumeClaim,
            Kind::PersistentVolume,
            Kind::StorageClass,
            Kind::Node,
            Kind::CSINode,
        ];
        let changed = store.changed_since(self.seen_rv, &kinds);
        let latest = store.resource_version();
        if !changed {
            self.seen_rv = latest;
            return Ok(false);
        }
        self.seen_rv = latest;
        let mut world = World::read(store);
        let mut wrote = false;
        for o in store.list(Kind::PersistentVolumeClaim) {
            if let Object::PersistentVolumeClaim(c) = o {
                if self.sync_claim(store, &mut world, c)? {
                    wrote = true;
                    world = World::read(store);
                }
            }
        }
        for o in store.list(Kind::PersistentVolume) {
            if let Object::PersistentVolume(pv) = o {
                wrote |= self.sync_volume(store, *pv)?;
            }
        }
        Ok(wrote)
    }

    fn next_wakeup_ms(&self) -> Option<u64> {
        None
    }
}

#[cfg(test)]
mod tests;
