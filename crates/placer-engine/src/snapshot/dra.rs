//! Dynamic Resource Allocation (`resource.k8s.io/v1`) as the scheduler sees it: DeviceClasses
//! with their compiled CEL selectors, ResourceSlices, ResourceClaims with their compiled
//! request selectors, the PodGroups that name claims, and the allocations the engine has
//! decided but the store has not shown yet (upstream's in-flight claims / assume cache).
//!
//! [`DraState::allocate`] is the structured-parameters allocator (upstream's `structured`
//! package, stable feature set): per node, the devices of the newest generation of each
//! pool whose slice reaches the node (`nodeName`, `nodeSelector`, `allNodes`, or per
//! device), minus the devices held by any allocated claim, are matched against each
//! request's DeviceClass selectors and its own selectors; `exactly` requests with
//! `allocationMode: ExactCount` (default, `count` default 1) or `All`; `matchAttribute`
//! constraints across requests; the first full solution in device order wins (an
//! exhaustive search, as upstream's). The allocation's node selector follows upstream:
//! a node-local device pins the claim to that node.
//!
//! The state lives in the [`super::Snapshot`] so that a pod assumed during a placement
//! search holds its devices until the rollback, like the capacity it holds.

pub mod cel;

use std::collections::BTreeMap;
use std::sync::Arc;

use placer_api::k8s::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use placer_api::k8s::api::resource::v1::{
    AllocationResult, Device, DeviceAllocationResult, DeviceAttribute, DeviceClass,
    DeviceRequestAllocationResult, ResourceClaim, ResourceClaimConsumerReference, ResourceSlice,
};
use placer_api::k8s::api::scheduling::v1alpha2::PodGroup;
use rustc_hash::FxHashSet;

use crate::framework::helper::node_selector_terms_match;
use crate::model::{NodeStatic, ObjectKey, PodInfo, PodKey};
use cel::{CelError, DeviceEnv, Expr};

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

/// A ResourceClaim with its request selectors compiled (by request index).
#[derive(Debug)]
pub struct ClaimEntry {
    pub key: ObjectKey,
    pub claim: Arc<ResourceClaim>,
    selectors: Vec<Vec<Result<Expr, CelError>>>,
}

impl ClaimEntry {
    fn new(key: ObjectKey, claim: Arc<ResourceClaim>) -> ClaimEntry {
        let selectors = requests(&claim)
            .iter()
            .map(|r| {
                let exact = r.exactly.as_ref();
                exact
                    .and_then(|e| e.selectors.as_ref())
                    .into_iter()
                    .flatten()
                    .map(|s| match &s.cel {
                        Some(c) => cel::compile(&c.expression),
                        None => Err(CelError("CEL expression empty (unsupported selector type?)".into())),
                    })
                    .collect()
            })
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
    /// `DRAWorkloadResourceClaims`: PodGroup-owned claims and PodGroup reservations.
    pub workload_claims: bool,
}

impl DraState {
    pub fn upsert_class(&mut self, class: Arc<DeviceClass>) {
        let Some(name) = class.metadata.name.clone() else { return };
        let selectors = class
            .spec
            .selectors
            .iter()
            .flatten()
            .map(|s| match &s.cel {
                Some(c) => cel::compile(&c.expression),
                None => Err(CelError("CEL expression empty (unsupported selector type?)".into())),
            })
            .collect();
        self.classes.insert(name, Arc::new(ClassEntry { class, selectors }));
    }
    pub fn remove_class(&mut self, name: &str) {
        self.classes.remove(name);
    }
    pub fn upsert_slice(&mut self, slice: Arc<ResourceSlice>) {
        let Some(name) = slice.metadata.name.clone() else { return };
        self.remove_slice(&name);
        let node = slice.spec.node_name.clone().unwrap_or_default();
        self.by_node.entry(node).or_default().insert(name.clone());
        self.slices.insert(name, slice);
        self.refresh_pools();
    }
    pub fn remove_slice(&mut self, name: &str) {
        if let Some(old) = self.slices.remove(name) {
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
    }
    /// A claim as the store has it; an allocation seen there supersedes the pending one.
    pub fn upsert_claim(&mut self, claim: Arc<ResourceClaim>) {
        let Some(name) = claim.metadata.name.clone() else { return };
        let key = ObjectKey::new(claim.metadata.namespace.clone().unwrap_or_else(|| "default".into()), name);
        if claim.status.as_ref().is_some_and(|s| s.allocation.is_some()) {
            self.pending.remove(&key);
        }
        self.claims.insert(key.clone(), Arc::new(ClaimEntry::new(key, claim)));
    }
    pub fn remove_claim(&mut self, key: &ObjectKey) {
        self.claims.remove(key);
        self.pending.remove(key);
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
        if controller.is_some_and(|o| o.uid == pod.uid && o.kind == "Pod") {
            return Ok(());
        }
        let claim = &entry.key;
        let pod_key = &pod.key;
        match (&pod.group, self.workload_claims) {
            (Some(group), true) => {
                let by_group = controller.is_some_and(|o| {
                    o.kind == "PodGroup"
                        && o.name == *group
                        && o.api_version.starts_with(&format!("{SCHEDULING_GROUP}/"))
                });
                if by_group {
                    return Ok(());
                }
                Err(format!(
                    "ResourceClaim {claim} was not created for Pod {pod_key} (neither Pod nor PodGroup {group} is the owner)"
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
        let group = pod
            .group
            .as_ref()
            .filter(|_| self.workload_claims)
            .and_then(|g| self.groups.get(&ObjectKey::new(pod.key.namespace.clone(), g.as_str())));
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
            uid: pod.uid.clone(),
        }
    }

    /// Devices held by allocated claims (stored or pending).
    pub fn in_use(&self) -> FxHashSet<DeviceId> {
        let mut used = FxHashSet::default();
        let stored = self
            .claims
            .iter()
            .filter(|(k, _)| !self.pending.contains_key(*k))
            .filter_map(|(_, e)| e.stored_allocation());
        let pending = self.pending.values().map(|p| &*p.allocation);
        for a in stored.chain(pending) {
            for r in a.devices.as_ref().and_then(|d| d.results.as_deref()).unwrap_or(&[]) {
                used.insert((r.driver.as_str().into(), r.pool.as_str().into(), r.device.as_str().into()));
            }
        }
        used
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
            .entry(key)
            .or_insert_with(|| Pending { allocation: allocation.clone(), pods: Vec::new() });
        entry.allocation = allocation;
        if !entry.pods.contains(&pod) {
            entry.pods.push(pod);
        }
        old
    }

    /// Puts back what [`DraState::record`] replaced.
    pub(crate) fn restore(&mut self, key: ObjectKey, old: Option<Pending>) {
        match old {
            Some(p) => {
                self.pending.insert(key, p);
            }
            None => {
                self.pending.remove(&key);
            }
        }
    }

    /// A pod whose binding failed or that went away: its pending allocations are dropped
    /// once no other pod holds them.
    pub fn forget_pod(&mut self, pod: &PodKey) {
        self.pending.retain(|_, p| {
            p.pods.retain(|k| k != pod);
            !p.pods.is_empty()
        });
    }

    /// Checks the requests of a claim to allocate (upstream PreFilter): every request is an
    /// `exactly` request of a DeviceClass that exists. The error is upstream's wording.
    pub fn check_requests(&self, entry: &ClaimEntry) -> Result<(), String> {
        for r in requests(&entry.claim) {
            match (&r.exactly, &r.first_available) {
                (Some(e), _) => {
                    if e.device_class_name.is_empty() {
                        return Err(format!("request {}: unsupported request type", r.name));
                    }
                    if !self.classes.contains_key(&e.device_class_name) {
                        return Err(format!("request {}: device class {} does not exist", r.name, e.device_class_name));
                    }
                }
                (None, Some(list)) if !list.is_empty() => {
                    return Err(format!(
                        "resource claim {}, request {}: firstAvailable (prioritized list) is not supported by Placer yet",
                        entry.key, r.name
                    ))
                }
                _ => return Err(format!("resource claim {}, request {}: unknown request type", entry.key, r.name)),
            }
        }
        Ok(())
    }

    /// Allocates `claims` for `node` with the devices not in `in_use` (see the module
    /// docs). `Ok(None)`: no solution on this node; `Err`: the claims cannot be evaluated
    /// (invalid CEL, unsupported request), whatever the node.
    pub fn allocate(
        &self,
        claims: &[&ClaimEntry],
        node: &NodeStatic,
        in_use: &FxHashSet<DeviceId>,
    ) -> Result<Option<Vec<AllocationResult>>, String> {
        let cands = self.candidates(node);
        let mut reqs: Vec<Req<'_>> = Vec::new();
        let mut cons: Vec<Constraint<'_>> = Vec::new();
        for (ci, entry) in claims.iter().enumerate() {
            for (ri, r) in requests(&entry.claim).iter().enumerate() {
                let Some(e) = &r.exactly else {
                    return Err(format!("claim {}, request {}: unknown request type", entry.key, r.name));
                };
                let Some(class) = self.classes.get(&e.device_class_name) else {
                    return Err(format!(
                        "claim {}, request {}: could not retrieve device class {}: not found",
                        entry.key, r.name, e.device_class_name
                    ));
                };
                let mut matching = Vec::new();
                for (k, c) in cands.iter().enumerate() {
                    let env = DeviceEnv { driver: &c.id.0, device: c.device };
                    let ok = selectors_match(&class.selectors, &env, |i, m| {
                        format!("class {}: selector #{i} on device {}: {m}", e.device_class_name, show(&c.id))
                    })? && selectors_match(&entry.selectors[ri], &env, |i, m| {
                        format!("claim {}: selector #{i} on device {}: {m}", entry.key, show(&c.id))
                    })?;
                    if ok {
                        matching.push(k);
                    }
                }
                let mode = e.allocation_mode.as_deref().unwrap_or("ExactCount");
                let count = match mode {
                    "ExactCount" => usize::try_from(e.count.unwrap_or(1)).map_err(|_| {
                        format!(
                            "claim {}, request {}: exact count {} is invalid",
                            entry.key,
                            r.name,
                            e.count.unwrap_or(1)
                        )
                    })?,
                    "All" => {
                        // Every matching device, all of them free.
                        if matching.iter().any(|&k| in_use.contains(&cands[k].id)) {
                            return Ok(None);
                        }
                        matching.len()
                    }
                    other => {
                        return Err(format!(
                            "claim {}, request {}: unsupported count mode {other}",
                            entry.key, r.name
                        ))
                    }
                };
                reqs.push(Req { claim: ci, name: &r.name, matching, count });
            }
            for (i, c) in
                entry.claim.spec.devices.iter().flat_map(|d| d.constraints.iter().flatten()).enumerate()
            {
                match (&c.match_attribute, &c.distinct_attribute) {
                    (Some(attr), _) => cons.push(Constraint {
                        claim: ci,
                        attribute: attr,
                        requests: c.requests.as_deref().filter(|r| !r.is_empty()),
                        value: None,
                        held: 0,
                    }),
                    _ => {
                        return Err(format!(
                            "claim {}, constraint #{i}: empty constraint (unsupported constraint type?)",
                            entry.key
                        ))
                    }
                }
            }
        }
        let mut search = Search {
            cands: &cands,
            reqs: &reqs,
            in_use,
            taken: vec![false; cands.len()],
            cons,
            chosen: Vec::new(),
            budget: 1_000_000,
        };
        if !search.run(0, 0, 0) {
            return Ok(None);
        }
        let mut results: Vec<Vec<DeviceRequestAllocationResult>> = vec![Vec::new(); claims.len()];
        let mut slices: Vec<Vec<&ResourceSlice>> = vec![Vec::new(); claims.len()];
        for &(ri, k) in &search.chosen {
            let (req, c) = (&reqs[ri], &cands[k]);
            results[req.claim].push(DeviceRequestAllocationResult {
                request: req.name.to_string(),
                driver: c.id.0.to_string(),
                pool: c.id.1.to_string(),
                device: c.id.2.to_string(),
                ..Default::default()
            });
            slices[req.claim].push(c.slice);
        }
        Ok(Some(
            results
                .into_iter()
                .zip(slices)
                .map(|(results, slices)| AllocationResult {
                    devices: Some(DeviceAllocationResult { results: Some(results), config: None }),
                    node_selector: node_selector(&slices, &node.name),
                    allocation_timestamp: None,
                })
                .collect(),
        ))
    }

    /// The devices whose slice (or, with per-device node selection, the device itself)
    /// reaches `node`, from the newest generation of each pool, in slice-name then device
    /// order.
    fn candidates(&self, node: &NodeStatic) -> Vec<Cand<'_>> {
        let empty = BTreeMap::new();
        let labels = node.node.metadata.labels.as_ref().unwrap_or(&empty);
        let reaches = |node_name: Option<&String>, all: Option<bool>, sel: Option<&NodeSelector>| {
            node_name.is_some_and(|n| *n == node.name)
                || all == Some(true)
                || sel.is_some_and(|s| node_selector_terms_match(&s.node_selector_terms, &node.name, labels))
        };
        let mut names: Vec<&String> =
            [node.name.as_str(), ""].iter().filter_map(|n| self.by_node.get(*n)).flatten().collect();
        names.sort();
        let mut out = Vec::new();
        for s in names.into_iter().filter_map(|n| self.slices.get(n)) {
            let pool = (s.spec.driver.clone(), s.spec.pool.name.clone());
            if self.newest.get(&pool) != Some(&s.spec.pool.generation) {
                continue;
            }
            let per_device = s.spec.per_device_node_selection == Some(true);
            if !per_device
                && !reaches(s.spec.node_name.as_ref(), s.spec.all_nodes, s.spec.node_selector.as_ref())
            {
                continue;
            }
            for d in s.spec.devices.iter().flatten() {
                if per_device && !reaches(d.node_name.as_ref(), d.all_nodes, d.node_selector.as_ref()) {
                    continue;
                }
                let id =
                    (s.spec.driver.as_str().into(), s.spec.pool.name.as_str().into(), d.name.as_str().into());
                out.push(Cand { id, device: d, slice: s });
            }
        }
        out
    }
}

fn show(id: &DeviceId) -> String {
    format!("{}/{}/{}", id.0, id.1, id.2)
}

fn selectors_match(
    selectors: &[Result<Expr, CelError>],
    env: &DeviceEnv<'_>,
    context: impl Fn(usize, String) -> String,
) -> Result<bool, String> {
    for (i, s) in selectors.iter().enumerate() {
        let expr = s.as_ref().map_err(|e| context(i, format!("CEL compile error: {e}")))?;
        if !cel::matches(expr, env).map_err(|e| context(i, format!("CEL runtime error: {e}")))? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Upstream's `createNodeSelector`: a node-local device pins the allocation to its node;
/// otherwise the slices' node selectors are merged; devices for all nodes add nothing.
fn node_selector(slices: &[&ResourceSlice], node: &str) -> Option<NodeSelector> {
    let mut term = NodeSelectorTerm::default();
    for s in slices {
        if s.spec.node_name.is_some() {
            return Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_fields: Some(vec![NodeSelectorRequirement {
                        key: "metadata.name".into(),
                        operator: "In".into(),
                        values: Some(vec![node.to_string()]),
                    }]),
                    match_expressions: None,
                }],
            });
        }
        if let Some(first) = s.spec.node_selector.as_ref().and_then(|n| n.node_selector_terms.first()) {
            for (from, to) in [
                (&first.match_fields, &mut term.match_fields),
                (&first.match_expressions, &mut term.match_expressions),
            ] {
                for r in from.iter().flatten() {
                    let list = to.get_or_insert_with(Vec::new);
                    if !list.contains(r) {
                        list.push(r.clone());
                    }
                }
            }
        }
    }
    (term.match_fields.is_some() || term.match_expressions.is_some())
        .then(|| NodeSelector { node_selector_terms: vec![term] })
}

struct Cand<'a> {
    id: DeviceId,
    device: &'a Device,
    slice: &'a ResourceSlice,
}

struct Req<'a> {
    claim: usize,
    name: &'a str,
    /// Candidate indices matching the class and request selectors, in order.
    matching: Vec<usize>,
    count: usize,
}

/// A `matchAttribute` constraint while searching.
struct Constraint<'a> {
    claim: usize,
    attribute: &'a str,
    requests: Option<&'a [String]>,
    value: Option<&'a DeviceAttribute>,
    held: usize,
}

/// Upstream's `lookupAttribute`: the fully qualified name, or the bare name when the
/// domain is the driver's.
fn lookup_attribute<'a>(device: &'a Device, driver: &str, name: &str) -> Option<&'a DeviceAttribute> {
    let attrs = device.attributes.as_ref()?;
    attrs.get(name).or_else(|| {
        let (domain, id) = cel::split_name(name, driver);
        (domain == driver).then(|| attrs.get(id)).flatten()
    })
}

struct Search<'a, 'b> {
    cands: &'b [Cand<'a>],
    reqs: &'b [Req<'a>],
    in_use: &'b FxHashSet<DeviceId>,
    taken: Vec<bool>,
    cons: Vec<Constraint<'a>>,
    chosen: Vec<(usize, usize)>,
    budget: u32,
}

impl Search<'_, '_> {
    /// Picks devices for request `ri` from `from` on (`got` so far), then the next
    /// requests; true when every request is satisfied.
    fn run(&mut self, ri: usize, from: usize, got: usize) -> bool {
        let Some(req) = self.reqs.get(ri) else { return true };
        if got == req.count {
            return self.run(ri + 1, 0, 0);
        }
        for pos in from..req.matching.len() {
            if self.budget == 0 {
                return false;
            }
            self.budget -= 1;
            let k = req.matching[pos];
            if self.taken[k] || self.in_use.contains(&self.cands[k].id) || !self.add_constraints(ri, k) {
                continue;
            }
            self.taken[k] = true;
            self.chosen.push((ri, k));
            if self.run(ri, pos + 1, got + 1) {
                return true;
            }
            self.chosen.pop();
            self.taken[k] = false;
            self.remove_constraints(ri);
        }
        false
    }

    fn applies(c: &Constraint<'_>, req: &Req<'_>) -> bool {
        c.claim == req.claim && c.requests.is_none_or(|r| r.iter().any(|n| n == req.name))
    }

    fn add_constraints(&mut self, ri: usize, k: usize) -> bool {
        let (req, cand) = (&self.reqs[ri], &self.cands[k]);
        let mut values = Vec::new();
        for (i, c) in self.cons.iter().enumerate() {
            if !Self::applies(c, req) {
                continue;
            }
            let Some(v) = lookup_attribute(cand.device, &cand.id.0, c.attribute) else { return false };
            if c.value.is_some_and(|have| have != v) {
                return false;
            }
            values.push((i, v));
        }
        for (i, v) in values {
            self.cons[i].value = Some(v);
            self.cons[i].held += 1;
        }
        true
    }

    fn remove_constraints(&mut self, ri: usize) {
        let req = &self.reqs[ri];
        for c in self.cons.iter_mut() {
            if Self::applies(c, req) {
                c.held -= 1;
                if c.held == 0 {
                    c.value = None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::node;
    use placer_api::k8s::api::resource::v1::{
        CELDeviceSelector, DeviceClaim, DeviceClassSpec, DeviceConstraint, DeviceRequest, DeviceSelector,
        ExactDeviceRequest, ResourceClaimSpec, ResourcePool, ResourceSliceSpec,
    };
    use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn sel(e: &str) -> DeviceSelector {
        DeviceSelector { cel: Some(CELDeviceSelector { expression: e.into() }) }
    }

    fn class(name: &str, driver: &str) -> Arc<DeviceClass> {
        Arc::new(DeviceClass {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: DeviceClassSpec {
                selectors: Some(vec![sel(&format!("device.driver == {driver:?}"))]),
                ..Default::default()
            },
        })
    }

    fn device(name: &str, attrs: &[(&str, i64)]) -> Device {
        let attributes = attrs
            .iter()
            .map(|(k, v)| (k.to_string(), DeviceAttribute { int: Some(*v), ..Default::default() }))
            .collect();
        Device { name: name.into(), attributes: Some(attributes), ..Default::default() }
    }

    fn slice(name: &str, driver: &str, node: Option<&str>, devices: Vec<Device>) -> Arc<ResourceSlice> {
        Arc::new(ResourceSlice {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: ResourceSliceSpec {
                driver: driver.into(),
                node_name: node.map(Into::into),
                all_nodes: node.is_none().then_some(true),
                pool: ResourcePool { name: name.into(), generation: 1, resource_slice_count: 1 },
                devices: Some(devices),
                ..Default::default()
            },
        })
    }

    fn claim(name: &str, requests: Vec<DeviceRequest>, constraints: Vec<DeviceConstraint>) -> ClaimEntry {
        let c = ResourceClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: ResourceClaimSpec {
                devices: Some(DeviceClaim {
                    requests: Some(requests),
                    constraints: Some(constraints),
                    config: None,
                }),
            },
            status: None,
        };
        ClaimEntry::new(ObjectKey::new("default", name), Arc::new(c))
    }

    fn request(
        name: &str,
        class: &str,
        mode: Option<&str>,
        count: Option<i64>,
        selectors: &[&str],
    ) -> DeviceRequest {
        DeviceRequest {
            name: name.into(),
            exactly: Some(ExactDeviceRequest {
                device_class_name: class.into(),
                allocation_mode: mode.map(Into::into),
                count,
                selectors: Some(selectors.iter().map(|s| sel(s)).collect()),
                ..Default::default()
            }),
            first_available: None,
        }
    }

    fn devices_of(a: &AllocationResult) -> Vec<String> {
        a.devices
            .as_ref()
            .unwrap()
            .results
            .as_ref()
            .unwrap()
            .iter()
            .map(|r| format!("{}/{}", r.pool, r.device))
            .collect()
    }

    fn state() -> DraState {
        let mut s = DraState::default();
        s.upsert_class(class("gpu", "gpu.example.com"));
        s.upsert_slice(slice(
            "n1",
            "gpu.example.com",
            Some("n1"),
            vec![device("g0", &[("link", 0)]), device("g1", &[("link", 1)]), device("g2", &[("link", 1)])],
        ));
        s.upsert_slice(slice("n2", "gpu.example.com", Some("n2"), vec![device("g0", &[("link", 0)])]));
        s
    }

    #[test]
    fn exact_count_skips_devices_in_use_and_pins_node_local_allocations() {
        let s = state();
        let n1 = node("n1").build();
        let c = claim("c", vec![request("r", "gpu", None, Some(2), &[])], vec![]);
        let mut used = FxHashSet::default();
        used.insert(("gpu.example.com".into(), "n1".into(), "g0".into()));
        let got = s.allocate(&[&c], &n1, &used).unwrap().unwrap();
        assert_eq!(devices_of(&got[0]), ["n1/g1", "n1/g2"]);
        let terms = &got[0].node_selector.as_ref().unwrap().node_selector_terms;
        assert_eq!(
            terms[0].match_fields.as_ref().unwrap()[0].values.as_deref(),
            Some(&["n1".to_string()][..])
        );
        // Only one device on n2: two cannot be allocated there.
        let n2 = node("n2").build();
        assert_eq!(s.allocate(&[&c], &n2, &FxHashSet::default()).unwrap(), None);
    }

    #[test]
    fn match_attribute_backtracks_to_devices_that_agree() {
        let s = state();
        let c = claim(
            "c",
            vec![request("a", "gpu", None, Some(1), &[]), request("b", "gpu", None, Some(1), &[])],
            vec![DeviceConstraint {
                match_attribute: Some("gpu.example.com/link".into()),
                ..Default::default()
            }],
        );
        // g0 (link 0) is tried first for `a`; no second device has link 0, so g1 + g2.
        let got = s.allocate(&[&c], &node("n1").build(), &FxHashSet::default()).unwrap().unwrap();
        assert_eq!(devices_of(&got[0]), ["n1/g1", "n1/g2"]);
    }

    #[test]
    fn all_mode_takes_every_matching_device_and_fails_if_one_is_held() {
        let s = state();
        let c = claim(
            "c",
            vec![request(
                "r",
                "gpu",
                Some("All"),
                None,
                &[r#"device.attributes["gpu.example.com"].link == 1"#],
            )],
            vec![],
        );
        let n1 = node("n1").build();
        let got = s.allocate(&[&c], &n1, &FxHashSet::default()).unwrap().unwrap();
        assert_eq!(devices_of(&got[0]), ["n1/g1", "n1/g2"]);
        let mut used = FxHashSet::default();
        used.insert(("gpu.example.com".into(), "n1".into(), "g2".into()));
        assert_eq!(s.allocate(&[&c], &n1, &used).unwrap(), None);
    }

    #[test]
    fn two_claims_of_one_pod_never_share_a_device_and_all_nodes_slices_add_no_selector() {
        let mut s = state();
        s.upsert_class(class("chan", "imex.example.com"));
        s.upsert_slice(slice("imex", "imex.example.com", None, vec![device("ch0", &[])]));
        let a = claim("a", vec![request("r", "gpu", None, Some(1), &[])], vec![]);
        let b = claim("b", vec![request("r", "gpu", None, Some(1), &[])], vec![]);
        let n2 = node("n2").build();
        assert_eq!(s.allocate(&[&a, &b], &n2, &FxHashSet::default()).unwrap(), None, "n2 has one GPU");
        let ch = claim("ch", vec![request("r", "chan", None, None, &[])], vec![]);
        let got = s.allocate(&[&ch], &n2, &FxHashSet::default()).unwrap().unwrap();
        assert_eq!(devices_of(&got[0]), ["imex/ch0"]);
        assert_eq!(got[0].node_selector, None, "a device for all nodes does not restrict the node");
    }

    #[test]
    fn selector_errors_name_the_claim_and_the_device() {
        let s = state();
        let c = claim(
            "c",
            vec![request("r", "gpu", None, None, &[r#"device.attributes["gpu.example.com"].model == "x""#])],
            vec![],
        );
        let err = s.allocate(&[&c], &node("n1").build(), &FxHashSet::default()).unwrap_err();
        assert_eq!(err, "claim default/c: selector #0 on device gpu.example.com/n1/g0: CEL runtime error: no such key: model");
    }

    #[test]
    fn pending_allocations_hold_devices_until_the_store_shows_them_or_their_pods_go() {
        let mut s = state();
        let c = claim("c", vec![request("r", "gpu", None, Some(1), &[])], vec![]);
        let got = s.allocate(&[&c], &node("n2").build(), &FxHashSet::default()).unwrap().unwrap();
        s.record(c.key.clone(), Arc::new(got[0].clone()), ObjectKey::new("default", "p"));
        assert_eq!(s.in_use().len(), 1);
        assert_eq!(
            s.allocate(&[&c], &node("n2").build(), &s.in_use()).unwrap(),
            None,
            "n2's only GPU is held"
        );
        s.forget_pod(&ObjectKey::new("default", "p"));
        assert!(s.in_use().is_empty());
    }
}
