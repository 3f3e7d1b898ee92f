//! Dynamic Resource Allocation (`resource.k8s.io/v1`) as the scheduler sees it: DeviceClasses
//! with their compiled CEL selectors, ResourceSlices, ResourceClaims with their compiled
//! request selectors, the PodGroups that name claims, and the allocations the engine has
//! decided but the store has not shown yet (upstream's in-flight claims / assume cache).
//!
//! [`DraState::allocate`] (in `allocator.rs`) is the structured-parameters allocator
//! (upstream's `structured` package with v1.36's default features): per node, the devices
//! of the newest generation of each pool whose slice reaches the node (`nodeName`,
//! `nodeSelector`, `allNodes`, or per device), minus the devices held by any allocated
//! claim, are matched against each request's DeviceClass selectors and its own selectors;
//! see that module for what it supports and what it rejects. The allocation's node
//! selector follows upstream: a node-local device pins the claim to that node.
//!
//! The state lives in the [`super::Snapshot`] so that a pod assumed during a placement
//! search holds its devices until the rollback, like the capacity it holds.

mod allocator;
pub mod cel;
mod copies;
mod index;
mod pools;
mod shared;

use allocator::alternatives;

use std::collections::BTreeMap;
use std::sync::Arc;

use placer_api::k8s::api::resource::v1::{
    AllocationResult, DeviceClass, ResourceClaim, ResourceClaimConsumerReference, ResourceSlice,
};
use placer_api::k8s::api::scheduling::v1alpha2::PodGroup;
use rustc_hash::FxHashSet;

pub use copies::CopyClaims;
pub use index::DeviceDemand;
use index::{held_devices, InUseIndex, SliceCache};

use crate::model::{ObjectKey, PodInfo, PodKey};
use cel::{CelError, Expr};

/// A device: driver, pool, device name.
pub type DeviceId = (Arc<str>, Arc<str>, Arc<str>);

/// API group of PodGroups in `status.reservedFor`.
pub const SCHEDULING_GROUP: &str = "scheduling.k8s.io";

/// A DeviceClass with its selectors compiled.
#[derive(Debug)]
pub struct ClassEntry {
    pub class: Arc<DeviceClass>,
    selectors: Vec<Result<Expr, CelError>>,
}

/// A ResourceClaim with its request selectors compiled (by request index, then by
/// alternative: one for `exactly`, one per subrequest of `firstAvailable`).
#[derive(Debug)]
pub struct ClaimEntry {
    pub key: ObjectKey,
    pub claim: Arc<ResourceClaim>,
    selectors: Vec<Vec<Vec<Result<Expr, CelError>>>>,
}

impl ClaimEntry {
    fn new(key: ObjectKey, claim: Arc<ResourceClaim>) -> ClaimEntry {
        let selectors = requests(&claim)
            .iter()
            .map(|r| alternatives(r).iter().map(|a| allocator::compile(a.selectors)).collect())
            .collect();
        ClaimEntry { key, claim, selectors }
    }

    /// `status.allocation` as the store has it.
    pub fn stored_allocation(&self) -> Option<&AllocationResult> {
        self.claim.status.as_ref().and_then(|s| s.allocation.as_ref())
    }
}

fn requests(claim: &ResourceClaim) -> &[placer_api::k8s::api::resource::v1::DeviceRequest] {
    claim.spec.devices.as_ref().and_then(|d| d.requests.as_deref()).unwrap_or(&[])
}

/// An allocation decided by the engine, not yet seen in the store.
#[derive(Debug, Clone)]
pub struct Pending {
    pub allocation: Arc<AllocationResult>,
    /// The pods it was allocated for (bound or assumed); dropped with the last of them.
    pub pods: Vec<PodKey>,
}

/// One claim of a pod, resolved.
#[derive(Debug, Clone)]
pub struct PodClaimState {
    /// The entry's name in `spec.resourceClaims`.
    pub pod_claim: String,
    pub entry: Arc<ClaimEntry>,
    /// The claim's allocation (pending first, then the stored one).
    pub allocation: Option<Arc<AllocationResult>>,
}

/// A claim's status write the binding cycle decided: the allocation (when this pod's cycle
/// allocated it) and the consumer to add to `status.reservedFor`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimWrite {
    pub claim: ObjectKey,
    pub allocation: Option<AllocationResult>,
    pub consumer: ResourceClaimConsumerReference,
}

/// The DRA objects and in-flight allocations (see the module docs).
#[derive(Debug, Default, Clone)]
pub struct DraState {
    classes: BTreeMap<String, Arc<ClassEntry>>,
    slices: BTreeMap<String, Arc<ResourceSlice>>,
    /// Slice names by `spec.nodeName`; slices without one (node selector, all nodes,
    /// per-device selection) are under `""`. Filter visits a node's slices only.
    by_node: BTreeMap<String, std::collections::BTreeSet<String>>,
    /// Newest generation of each pool (driver, pool name).
    newest: BTreeMap<(String, String), i64>,
    claims: BTreeMap<ObjectKey, Arc<ClaimEntry>>,
    groups: BTreeMap<ObjectKey, Arc<PodGroup>>,
    pending: BTreeMap<ObjectKey, Pending>,
    /// Allocated claims whose every consumer is removed in the current simulation (e.g.
    /// preemption victims): their devices count as free until the rollback.
    freed: std::collections::BTreeSet<ObjectKey>,
    /// `DRAWorkloadResourceClaims`: PodGroup-owned claims and PodGroup reservations.
    pub workload_claims: bool,
    /// The devices in use, kept up to date by every change of `claims`, `pending` and
    /// `freed` (see `index.rs`).
    used: InUseIndex,
    /// Per slice name: ids, pool generation and class verdicts (see `index.rs`).
    cache: BTreeMap<String, SliceCache>,
    /// The v1.36 DRA features turned off by feature gates (all on by default).
    pub disabled: DisabledFeatures,
    /// Pools whose newest generation is incomplete or may be invalid (see `pools.rs`).
    troubled: BTreeMap<pools::PoolKey, pools::PoolTrouble>,
}

/// DRA features a configuration turned off (`DRAPartitionableDevices`,
/// `DRAConsumableCapacity`, `DRADeviceBindingConditions`), as upstream's allocator behaves
/// without them: slices with counters or per-device node selection and devices consuming
/// counters are ignored; capacity requests are an error and no device is shared; devices
/// with binding conditions are never allocated.
#[derive(Debug, Default, Clone, Copy)]
pub struct DisabledFeatures {
    pub partitionable_devices: bool,
    pub consumable_capacity: bool,
    pub binding_conditions: bool,
}

impl DraState {
    pub fn upsert_class(&mut self, class: Arc<DeviceClass>) {
        let Some(name) = class.metadata.name.clone() else { return };
        let selectors = allocator::compile(class.spec.selectors.as_deref().unwrap_or(&[]));
        let entry = Arc::new(ClassEntry { class, selectors });
        for c in self.cache.values_mut() {
            c.evaluate_class(&name, &entry);
        }
        self.classes.insert(name, entry);
    }
    pub fn remove_class(&mut self, name: &str) {
        self.classes.remove(name);
        for c in self.cache.values_mut() {
            c.classes.remove(name);
        }
    }
    pub fn upsert_slice(&mut self, slice: Arc<ResourceSlice>) {
        let Some(name) = slice.metadata.name.clone() else { return };
        self.remove_slice(&name);
        let node = slice.spec.node_name.clone().unwrap_or_default();
        self.by_node.entry(node).or_default().insert(name.clone());
        let mut cache = SliceCache::new(slice.clone());
        for (class, entry) in &self.classes {
            cache.evaluate_class(class, entry);
        }
        self.cache.insert(name.clone(), cache);
        self.slices.insert(name, slice);
        self.refresh_pools();
    }
    pub fn remove_slice(&mut self, name: &str) {
        if let Some(old) = self.slices.remove(name) {
            self.cache.remove(name);
            let node = old.spec.node_name.clone().unwrap_or_default();
            if let Some(set) = self.by_node.get_mut(&node) {
                set.remove(name);
                if set.is_empty() {
                    self.by_node.remove(&node);
                }
            }
            self.refresh_pools();
        }
    }
    fn refresh_pools(&mut self) {
        self.newest.clear();
        for s in self.slices.values() {
            let pool = (s.spec.driver.clone(), s.spec.pool.name.clone());
            let g = self.newest.entry(pool).or_insert(s.spec.pool.generation);
            *g = (*g).max(s.spec.pool.generation);
        }
        for c in self.cache.values_mut() {
            let s = &c.slice.spec;
            c.current = self.newest.get(&(s.driver.clone(), s.pool.name.clone())) == Some(&s.pool.generation);
        }
        self.refresh_troubles();
    }
    /// A claim as the store has it; an allocation seen there supersedes the pending one.
    pub fn upsert_claim(&mut self, claim: Arc<ResourceClaim>) {
        let Some(name) = claim.metadata.name.clone() else { return };
        let key = ObjectKey::new(claim.metadata.namespace.clone().unwrap_or_else(|| "default".into()), name);
        if claim.status.as_ref().is_some_and(|s| s.allocation.is_some()) {
            self.pending.remove(&key);
        }
        self.claims.insert(key.clone(), Arc::new(ClaimEntry::new(key.clone(), claim)));
        self.reindex(&key);
    }
    pub fn remove_claim(&mut self, key: &ObjectKey) {
        self.claims.remove(key);
        self.pending.remove(key);
        self.reindex(key);
    }
    /// A PodGroup (only its `spec.resourceClaims` and uid are read).
    pub fn upsert_group(&mut self, key: ObjectKey, group: Arc<PodGroup>) {
        self.groups.insert(key, group);
    }
    pub fn remove_group(&mut self, key: &ObjectKey) {
        self.groups.remove(key);
    }
    pub fn claim(&self, key: &ObjectKey) -> Option<&Arc<ClaimEntry>> {
        self.claims.get(key)
    }
    pub fn class(&self, name: &str) -> Option<&Arc<ClassEntry>> {
        self.classes.get(name)
    }
    pub fn pending(&self, key: &ObjectKey) -> Option<&Pending> {
        self.pending.get(key)
    }

    /// The claims of a pod (upstream's `foreachPodResourceClaim`): by name, or the claim
    /// generated from a template as `status.resourceClaimStatuses` records it, checked to
    /// exist, not to be deleting and to be owned by the pod (or, with
    /// `DRAWorkloadResourceClaims`, by its PodGroup). The error is upstream's message.
    pub fn pod_claims(&self, pod: &PodInfo) -> Result<Vec<PodClaimState>, String> {
        let mut out = Vec::with_capacity(pod.view.resource_claims.len());
        for pc in pod.view.resource_claims.iter() {
            let (name, must_check_owner) = match (&pc.resource_claim_name, &pc.resource_claim_template_name) {
                (Some(n), _) => (n.clone(), false),
                (None, Some(_)) => match &pc.generated {
                    Some(Some(n)) => (n.clone(), true),
                    Some(None) => continue,
                    None => return Err(format!("pod \"{}\": ResourceClaim not created yet", pod.key)),
                },
                (None, None) => {
                    return Err(format!(
                        "pod \"{}\", spec.resourceClaim {:?}: none of the supported fields are set",
                        pod.key, pc.name
                    ))
                }
            };
            let key = ObjectKey::new(pod.key.namespace.clone(), name.as_str());
            let Some(entry) = self.claims.get(&key) else {
                return Err(format!("resourceclaim.resource.k8s.io \"{name}\" not found"));
            };
            if entry.claim.metadata.deletion_timestamp.is_some() {
                return Err(format!("resourceclaim \"{name}\" is being deleted"));
            }
            if must_check_owner {
                self.is_for_pod(pod, entry)?;
            }
            let allocation = match self.pending.get(&key) {
                Some(p) => Some(p.allocation.clone()),
                None => entry.stored_allocation().cloned().map(Arc::new),
            };
            out.push(PodClaimState { pod_claim: pc.name.clone(), entry: entry.clone(), allocation });
        }
        Ok(out)
    }

    /// Upstream's `resourceclaim.IsForPod`.
    fn is_for_pod(&self, pod: &PodInfo, entry: &ClaimEntry) -> Result<(), String> {
        let controller =
            entry.claim.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true));
        if controller.is_some_and(|o| *o.uid == *pod.uid && o.kind == "Pod") {
            return Ok(());
        }
        let claim = &entry.key;
        let pod_key = &pod.key;
        match (&pod.group, self.workload_claims) {
            (Some(group), true) => {
                let by_group = controller.is_some_and(|o| {
                    o.kind == "PodGroup"
                        && *o.name == *group.name
                        && o.api_version.starts_with(&format!("{SCHEDULING_GROUP}/"))
                });
                if by_group {
                    return Ok(());
                }
                let group_key = group;
                Err(format!(
                    "ResourceClaim {claim} was not created for Pod {pod_key} or PodGroup {group_key} (neither Pod nor PodGroup is the owner)"
                ))
            }
            _ => Err(format!("ResourceClaim {claim} was not created for Pod {pod_key} (Pod is not owner)")),
        }
    }

    /// The `status.reservedFor` entry for `pod`'s claim entry (upstream's
    /// `resourceclaim.BindTo`): its PodGroup when, with `DRAWorkloadResourceClaims`, the
    /// PodGroup's `spec.resourceClaims` has the same entry (name, claim name, template
    /// name), otherwise the pod.
    pub fn consumer(&self, pod: &PodInfo, pod_claim: &str) -> ResourceClaimConsumerReference {
        let entry = pod.view.resource_claims.iter().find(|c| c.name == pod_claim);
        let group = pod.group.as_ref().filter(|_| self.workload_claims).and_then(|g| self.groups.get(g));
        if let (Some(entry), Some(group)) = (entry, group) {
            let same = group.spec.resource_claims.iter().flatten().any(|g| {
                g.name == entry.name
                    && g.resource_claim_name == entry.resource_claim_name
                    && g.resource_claim_template_name == entry.resource_claim_template_name
            });
            if same {
                return ResourceClaimConsumerReference {
                    api_group: Some(SCHEDULING_GROUP.to_string()),
                    resource: "podgroups".to_string(),
                    name: group.metadata.name.clone().unwrap_or_default(),
                    uid: group.metadata.uid.clone().unwrap_or_default(),
                };
            }
        }
        ResourceClaimConsumerReference {
            api_group: None,
            resource: "pods".to_string(),
            name: pod.key.name.to_string(),
            uid: pod.uid.to_string(),
        }
    }

    /// Devices held by allocated claims (stored or pending): a copy of
    /// [`DraState::in_use_set`].
    pub fn in_use(&self) -> FxHashSet<DeviceId> {
        self.used.set().clone()
    }

    /// Devices held by allocated claims (stored or pending), as the incremental index
    /// keeps them (equal to [`DraState::in_use_recomputed`]; see `index.rs`).
    pub fn in_use_set(&self) -> &FxHashSet<DeviceId> {
        self.used.set()
    }

    /// The devices claim `key` holds now: none while freed for a simulation, else its
    /// pending allocation, else the stored one.
    fn effective_allocation(&self, key: &ObjectKey) -> Option<&AllocationResult> {
        if self.freed.contains(key) {
            return None;
        }
        match self.pending.get(key) {
            Some(p) => Some(&p.allocation),
            None => self.claims.get(key).and_then(|e| e.stored_allocation()),
        }
    }

    /// Brings the in-use index up to date for claim `key` (after any change of its entry,
    /// its pending allocation or its freed mark).
    fn reindex(&mut self, key: &ObjectKey) {
        let devices = self.effective_allocation(key).map(held_devices).unwrap_or_default();
        self.used.set_claim(key, devices);
    }

    /// The allocations of allocated claims (stored or pending), without the freed ones.
    fn allocations(&self) -> impl Iterator<Item = &AllocationResult> {
        let stored = self
            .claims
            .iter()
            .filter(|(k, _)| !self.pending.contains_key(*k) && !self.freed.contains(*k))
            .filter_map(|(_, e)| e.stored_allocation());
        let pending =
            self.pending.iter().filter(|(k, _)| !self.freed.contains(*k)).map(|(_, p)| &*p.allocation);
        stored.chain(pending)
    }

    /// Devices held by allocated claims, computed from every claim (the plain path the
    /// index is checked against). Devices allocated with a share ID (consumable capacity)
    /// are in [`DraState::shared_in_use`] instead.
    pub fn in_use_recomputed(&self) -> FxHashSet<DeviceId> {
        let mut used = FxHashSet::default();
        for a in self.allocations() {
            used.extend(index::held_devices(a));
        }
        used
    }

    /// Capacity held on devices allocated with a share ID, by allocated claims (stored or
    /// pending): upstream's `AggregatedCapacity`.
    pub fn shared_in_use(&self) -> shared::SharedUse {
        let mut used = shared::SharedUse::default();
        for a in self.allocations() {
            let results = a.devices.as_ref().and_then(|d| d.results.as_deref()).unwrap_or(&[]);
            for r in results.iter().filter(|r| r.admin_access != Some(true) && r.share_id.is_some()) {
                let id: DeviceId =
                    (r.driver.as_str().into(), r.pool.as_str().into(), r.device.as_str().into());
                let taken = r.consumed_capacity.iter().flatten();
                let taken =
                    taken.map(|(k, q)| (k.clone(), placer_api::quantity::parse_milli(&q.0).unwrap_or(0)));
                shared::add_shared(&mut used, id, taken);
            }
        }
        used
    }

    /// The allocated claims of `pod`, a pod removed for a simulation, that no pod still
    /// placed consumes (`gone`: whether a pod is no longer placed): their devices become
    /// free until [`DraState::unfree`] (preemption counts the devices its victims free).
    /// Returns the claims newly freed. Claims reserved for a PodGroup stay held.
    pub(crate) fn free_claims_of(&mut self, pod: &PodInfo, gone: impl Fn(&PodKey) -> bool) -> Vec<ObjectKey> {
        let Ok(claims) = self.pod_claims(pod) else { return Vec::new() };
        let mut out = Vec::new();
        for c in claims.iter().filter(|c| c.allocation.is_some()) {
            let key = &c.entry.key;
            if self.freed.contains(key) {
                continue;
            }
            let reserved =
                c.entry.claim.status.as_ref().and_then(|s| s.reserved_for.as_deref()).unwrap_or(&[]);
            let pending_pods = self.pending.get(key).map(|p| p.pods.as_slice()).unwrap_or(&[]);
            let unused = reserved.iter().all(|r| {
                r.api_group.as_deref().unwrap_or("").is_empty()
                    && r.resource == "pods"
                    && gone(&PodKey::new(key.namespace.clone(), r.name.as_str()))
            }) && pending_pods.iter().all(&gone);
            if unused {
                self.freed.insert(key.clone());
                self.reindex(key);
                out.push(key.clone());
            }
        }
        out
    }

    /// Undoes [`DraState::free_claims_of`] for `key`.
    pub(crate) fn unfree(&mut self, key: &ObjectKey) {
        self.freed.remove(key);
        self.reindex(key);
    }

    /// Undoes [`DraState::hold_claims_of`] for `key`.
    pub(crate) fn refree(&mut self, key: ObjectKey) {
        self.freed.insert(key.clone());
        self.reindex(&key);
    }

    /// A pod placed again (after [`DraState::free_claims_of`]): its freed claims are held
    /// again. Returns them.
    pub(crate) fn hold_claims_of(&mut self, pod: &PodInfo) -> Vec<ObjectKey> {
        if self.freed.is_empty() {
            return Vec::new();
        }
        let Ok(claims) = self.pod_claims(pod) else { return Vec::new() };
        let held: Vec<ObjectKey> =
            claims.into_iter().map(|c| c.entry.key.clone()).filter(|k| self.freed.remove(k)).collect();
        for k in &held {
            self.reindex(k);
        }
        held
    }

    /// Records an allocation decided for `pod`; returns what was there before (for undo).
    pub(crate) fn record(
        &mut self,
        key: ObjectKey,
        allocation: Arc<AllocationResult>,
        pod: PodKey,
    ) -> Option<Pending> {
        let old = self.pending.get(&key).cloned();
        let entry = self
            .pending
            .entry(key.clone())
            .or_insert_with(|| Pending { allocation: allocation.clone(), pods: Vec::new() });
        entry.allocation = allocation;
        if !entry.pods.contains(&pod) {
            entry.pods.push(pod);
        }
        self.reindex(&key);
        old
    }

    /// Puts back what [`DraState::record`] replaced.
    pub(crate) fn restore(&mut self, key: ObjectKey, old: Option<Pending>) {
        match old {
            Some(p) => {
                self.pending.insert(key.clone(), p);
            }
            None => {
                self.pending.remove(&key);
            }
        }
        self.reindex(&key);
    }

    /// A pod whose binding failed or that went away: its pending allocations are dropped
    /// once no other pod holds them.
    pub fn forget_pod(&mut self, pod: &PodKey) {
        let mut dropped = Vec::new();
        self.pending.retain(|k, p| {
            p.pods.retain(|k| k != pod);
            let keep = !p.pods.is_empty();
            if !keep {
                dropped.push(k.clone());
            }
            keep
        });
        for k in &dropped {
            self.reindex(k);
        }
    }
}

#[cfg(test)]
mod tests;
