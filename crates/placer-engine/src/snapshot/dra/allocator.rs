//! The structured-parameters allocator (upstream's `k8s.io/dynamic-resource-allocation/
//! structured`, v1.36 with its default feature gates), as [`DraState::allocate`]:
//!
//! * requests are `exactly` (one way to satisfy them) or `firstAvailable` (a prioritized
//!   list: the subrequests are tried in order, the first that leads to a full solution of
//!   every request of every claim wins; results name `request/subrequest`);
//! * `allocationMode: ExactCount` (`count`, default 1) or `All` (every matching device of
//!   the node, at least one, all of them usable, or no solution);
//! * `adminAccess`: devices in use by other claims may be allocated (never twice in one
//!   claim) and the allocation does not make them in use for others;
//! * device taints: a device with a taint whose effect is not `None` is allocated only to
//!   a request that tolerates it (`tolerations`, copied into the result);
//! * `matchAttribute` (every device of the requests it names has the same value) and
//!   `distinctAttribute` (all different) constraints, a request or a `request/subrequest`
//!   naming where they apply;
//! * the first full solution in device order wins (an exhaustive search with a budget,
//!   as upstream's);
//! * partitionable devices (`sharedCounters` / `consumesCounters`) and consumable capacity
//!   (`allowMultipleAllocations`, `capacity.requests`, `requestPolicy`, results with
//!   `shareID` and `consumedCapacity`): see `shared.rs`;
//! * device binding conditions: a result copies the device's `bindingConditions` and
//!   `bindingFailureConditions`; a device with `bindsToNode` pins the allocation to the
//!   node like a node-local one (PreBind then waits for the conditions, see the
//!   DynamicResources plugin).

use placer_api::k8s::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use placer_api::k8s::api::resource::v1::{
    AllocationResult, Device, DeviceAllocationResult, DeviceAttribute, DeviceRequest,
    DeviceRequestAllocationResult, DeviceSelector, DeviceTaint, DeviceToleration, ResourceSlice,
};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;

use super::cel::{self, CelError, DeviceEnv, Expr};
use super::index::SliceCache;
use super::shared::{self, Consumed, PoolCounters, SharedUse};
use super::{requests, ClaimEntry, ClassEntry, DeviceId, DraState};
use crate::framework::helper::node_selector_terms_match;
use crate::model::NodeStatic;

mod search;

/// One way to satisfy a request, as the API spells it: the `exactly` request itself or
/// one subrequest of `firstAvailable`.
#[derive(Debug, Clone, Copy)]
pub struct RequestView<'a> {
    /// The subrequest's name (`None` for `exactly`).
    pub sub: Option<&'a str>,
    pub class: &'a str,
    pub mode: Option<&'a str>,
    pub count: Option<i64>,
    pub selectors: &'a [DeviceSelector],
    pub tolerations: &'a [DeviceToleration],
    pub admin_access: bool,
    /// `capacity.requests` (consumable capacity).
    pub capacity: Option<&'a BTreeMap<String, placer_api::k8s::apimachinery::pkg::api::resource::Quantity>>,
}

/// The ways to satisfy `r`, in the order they are tried (empty: neither `exactly` nor
/// `firstAvailable`).
pub fn alternatives(r: &DeviceRequest) -> Vec<RequestView<'_>> {
    if let Some(e) = &r.exactly {
        return vec![RequestView {
            sub: None,
            class: &e.device_class_name,
            mode: e.allocation_mode.as_deref(),
            count: e.count,
            selectors: e.selectors.as_deref().unwrap_or(&[]),
            tolerations: e.tolerations.as_deref().unwrap_or(&[]),
            admin_access: e.admin_access == Some(true),
            capacity: e.capacity.as_ref().and_then(|c| c.requests.as_ref()),
        }];
    }
    r.first_available
        .iter()
        .flatten()
        .map(|s| RequestView {
            sub: Some(&s.name),
            class: &s.device_class_name,
            mode: s.allocation_mode.as_deref(),
            count: s.count,
            selectors: s.selectors.as_deref().unwrap_or(&[]),
            tolerations: s.tolerations.as_deref().unwrap_or(&[]),
            admin_access: false,
            capacity: s.capacity.as_ref().and_then(|c| c.requests.as_ref()),
        })
        .collect()
}

/// Compiles selectors (a selector without CEL is an error when evaluated).
pub fn compile(selectors: &[DeviceSelector]) -> Vec<Result<Expr, CelError>> {
    selectors
        .iter()
        .map(|s| match &s.cel {
            Some(c) => cel::compile(&c.expression),
            None => Err(CelError("CEL expression empty (unsupported selector type?)".into())),
        })
        .collect()
}

/// Upstream's `resourceclaim.ToleratesTaint`.
pub fn tolerates(t: &DeviceToleration, taint: &DeviceTaint) -> bool {
    let key = t.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    if t.effect.as_deref().is_some_and(|e| !e.is_empty() && e != taint.effect) {
        return false;
    }
    match t.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" => {
            !key.is_empty() && t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

/// Every taint of the device that has an effect (`NoSchedule`, `NoExecute`) is tolerated.
pub(super) fn taints_tolerated(d: &Device, tolerations: &[DeviceToleration]) -> bool {
    d.taints
        .iter()
        .flatten()
        .filter(|t| t.effect != "None")
        .all(|taint| tolerations.iter().any(|t| tolerates(t, taint)))
}

impl DraState {
    /// Checks the requests of a claim to allocate (upstream PreFilter): every request is
    /// an `exactly` or `firstAvailable` request whose DeviceClasses exist. The error is
    /// upstream's wording where it has one.
    pub fn check_requests(&self, entry: &ClaimEntry) -> Result<(), String> {
        for r in requests(&entry.claim) {
            let alts = alternatives(r);
            if alts.is_empty() {
                return Err(format!(
                    "resource claim {}, request {}: unknown request type",
                    entry.key, r.name
                ));
            }
            for a in alts {
                let name = match a.sub {
                    Some(sub) => format!("{}/{sub}", r.name),
                    None => r.name.clone(),
                };
                if a.class.is_empty() {
                    return Err(format!("request {name}: unsupported request type"));
                }
                if !self.classes.contains_key(a.class) {
                    return Err(format!("request {name}: device class {} does not exist", a.class));
                }
                if self.disabled.consumable_capacity && a.capacity.is_some() {
                    return Err(format!(
                        "claim {}, request {name}: has capacity requests, but the DRAConsumableCapacity feature is disabled",
                        entry.key
                    ));
                }
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
        self.allocate_with(claims, node, in_use, None)
    }

    /// [`DraState::allocate`] with `extra` capacity held on shared devices besides the
    /// allocated claims' (what earlier copies took, for [`DraState::copies`]).
    fn allocate_with(
        &self,
        claims: &[&ClaimEntry],
        node: &NodeStatic,
        in_use: &FxHashSet<DeviceId>,
        extra: Option<&SharedUse>,
    ) -> Result<Option<Vec<AllocationResult>>, String> {
        let mut cands = self.candidates(node);
        // Shared devices and counters: only looked up when a candidate needs them.
        let needs_shared = cands.iter().any(|c| c.multi || !c.consumes.is_empty());
        let mut shared = if needs_shared { self.shared_in_use() } else { SharedUse::default() };
        for (id, used) in extra.into_iter().flatten() {
            shared::add_shared(&mut shared, id.clone(), used.iter().map(|(n, m)| (n.clone(), *m)));
        }
        let mut pools: Vec<PoolCounters> = Vec::new();
        let mut pool_index: BTreeMap<(&str, &str), Option<usize>> = BTreeMap::new();
        for c in cands.iter_mut().filter(|c| !c.consumes.is_empty()) {
            let key = (c.slice.spec.driver.as_str(), c.slice.spec.pool.name.as_str());
            let index = *pool_index.entry(key).or_insert_with(|| {
                let counters = self.counters_of(key.0, key.1, |id| shared::is_allocated(in_use, &shared, id));
                counters.ok().map(|pc| {
                    pools.push(pc);
                    pools.len() - 1
                })
            });
            c.pool = index.unwrap_or(usize::MAX);
        }
        // An invalid pool (a counter set consumed that no slice defines, ...) is not
        // allocated from at all.
        cands.retain(|c| {
            let key = (c.slice.spec.driver.as_str(), c.slice.spec.pool.name.as_str());
            pool_index.get(&key).is_none_or(Option::is_some)
        });
        let mut reqs: Vec<Req<'_>> = Vec::new();
        let mut cons: Vec<Constraint<'_>> = Vec::new();
        for (ci, entry) in claims.iter().enumerate() {
            for (ri, r) in requests(&entry.claim).iter().enumerate() {
                let views = alternatives(r);
                if views.is_empty() {
                    return Err(format!("claim {}, request {}: unknown request type", entry.key, r.name));
                }
                let mut alts = Vec::with_capacity(views.len());
                for (ai, v) in views.into_iter().enumerate() {
                    let name = match v.sub {
                        Some(sub) => format!("{}/{sub}", r.name),
                        None => r.name.clone(),
                    };
                    if self.disabled.consumable_capacity && v.capacity.is_some() {
                        return Err(format!(
                            "claim {}, request {name}: has capacity requests, but the DRAConsumableCapacity feature is disabled",
                            entry.key
                        ));
                    }
                    let Some(class) = self.classes.get(v.class) else {
                        return Err(format!(
                            "claim {}, request {name}: could not retrieve device class {}: not found",
                            entry.key, v.class
                        ));
                    };
                    let own =
                        entry.selectors.get(ri).and_then(|s| s.get(ai)).map(Vec::as_slice).unwrap_or(&[]);
                    let mut matching = Vec::new();
                    let mut consumed = FxHashMap::default();
                    for (k, c) in cands.iter().enumerate() {
                        if !device_matches(entry, v.class, class, own, c)? {
                            continue;
                        }
                        // Capacity: what the request takes of the device must fit (and
                        // follow its request policy); a shared device remembers it.
                        let taken = if self.disabled.consumable_capacity {
                            Vec::new()
                        } else {
                            let Some(taken) = shared::consumed(c.device, v.capacity) else { continue };
                            taken
                        };
                        if c.multi {
                            consumed.insert(k, taken);
                        }
                        matching.push(k);
                    }
                    let all = match v.mode.unwrap_or("ExactCount") {
                        "ExactCount" => false,
                        "All" => true,
                        other => {
                            return Err(format!(
                                "claim {}, request {name}: unsupported count mode {other}",
                                entry.key
                            ))
                        }
                    };
                    if all {
                        // "All" cannot be known while a pool reaching the node is
                        // incomplete or invalid (upstream's validateDeviceRequest).
                        let problems = self.pool_problems(node);
                        let first = problems
                            .incomplete
                            .iter()
                            .map(|k| (k, "being updated"))
                            .chain(problems.invalid.iter().map(|k| (k, "invalid")))
                            .min();
                        if let Some((pool, state)) = first {
                            return Err(format!(
                                "claim {}, request {name}: asks for all devices, but resource pool {} is currently {state}",
                                entry.key,
                                super::pools::show_pool(pool)
                            ));
                        }
                    }
                    let count = if all {
                        matching.len()
                    } else {
                        usize::try_from(v.count.unwrap_or(1)).ok().filter(|c| *c > 0).ok_or_else(|| {
                            format!(
                                "claim {}, request {name}: exact count {} is invalid",
                                entry.key,
                                v.count.unwrap_or(1)
                            )
                        })?
                    };
                    if !all {
                        // Untolerated taints rule a device out for this (sub)request.
                        matching.retain(|&k| taints_tolerated(cands[k].device, v.tolerations));
                    }
                    alts.push(Alt {
                        name,
                        sub: v.sub,
                        matching,
                        count,
                        all,
                        admin: v.admin_access,
                        tolerations: v.tolerations,
                        consumed,
                    });
                }
                reqs.push(Req { claim: ci, name: &r.name, alts });
            }
            for (i, c) in
                entry.claim.spec.devices.iter().flat_map(|d| d.constraints.iter().flatten()).enumerate()
            {
                let (attribute, distinct) = match (&c.match_attribute, &c.distinct_attribute) {
                    (Some(a), None) => (a.as_str(), false),
                    (None, Some(a)) => (a.as_str(), true),
                    _ => {
                        return Err(format!(
                            "claim {}, constraint #{i}: exactly one of matchAttribute or distinctAttribute is required",
                            entry.key
                        ))
                    }
                };
                cons.push(Constraint {
                    claim: ci,
                    attribute,
                    distinct,
                    requests: c.requests.as_deref().filter(|r| !r.is_empty()),
                    values: Vec::new(),
                });
            }
        }
        let mut search = Search {
            cands: &cands,
            reqs: &reqs,
            in_use,
            taken: vec![Vec::new(); cands.len()],
            cons,
            chosen: Vec::new(),
            alt: vec![0; reqs.len()],
            budget: 1_000_000,
            shared: &shared,
            counters_used: vec![BTreeMap::new(); pools.len()],
            pools,
            held: vec![0; cands.len()],
            allocating: vec![BTreeMap::new(); cands.len()],
        };
        if !search.run(0) {
            return Ok(None);
        }
        let mut results: Vec<Vec<DeviceRequestAllocationResult>> = vec![Vec::new(); claims.len()];
        let mut slices: Vec<Vec<(&ResourceSlice, &Device)>> = vec![Vec::new(); claims.len()];
        for &(ri, k) in &search.chosen {
            let req = &reqs[ri];
            let alt = &req.alts[search.alt[ri]];
            let c = &cands[k];
            let position = results[req.claim].len().to_string();
            let share_id = c.multi.then(|| {
                let claim = claims[req.claim];
                let uid = claim.claim.metadata.uid.as_deref().unwrap_or("");
                shared::share_id(&[
                    &claim.key.to_string(),
                    uid,
                    &alt.name,
                    &c.id.0,
                    &c.id.1,
                    &c.id.2,
                    &position,
                ])
            });
            let consumed_capacity = alt
                .consumed
                .get(&k)
                .filter(|v| c.multi && !v.is_empty())
                .map(|v| v.iter().map(|x| (x.name.clone(), x.quantity.clone())).collect());
            let non_empty = |v: &Option<Vec<String>>| v.clone().filter(|v| !v.is_empty());
            results[req.claim].push(DeviceRequestAllocationResult {
                request: alt.name.clone(),
                driver: c.id.0.to_string(),
                pool: c.id.1.to_string(),
                device: c.id.2.to_string(),
                admin_access: alt.admin.then_some(true),
                tolerations: (!alt.tolerations.is_empty()).then(|| alt.tolerations.to_vec()),
                share_id,
                consumed_capacity,
                binding_conditions: non_empty(&c.device.binding_conditions),
                binding_failure_conditions: non_empty(&c.device.binding_failure_conditions),
            });
            slices[req.claim].push((c.slice, c.device));
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

    /// How many pods, each with its own copy of `claims` (claims generated from the same
    /// templates), the free devices of `node` serve, at most `limit`: allocations are made
    /// one after the other, each taking devices from the next. The domain tree of the
    /// hierarchical strategy caps a node's pod count with it.
    pub fn copies(
        &self,
        claims: &[&ClaimEntry],
        node: &NodeStatic,
        in_use: &FxHashSet<DeviceId>,
        limit: i64,
    ) -> i64 {
        self.count_copies(claims, node, in_use, limit).0
    }

    /// [`DraState::copies`], and whether it stopped on an allocator error (a selector
    /// that does not evaluate) rather than on a node without a solution.
    pub(super) fn count_copies(
        &self,
        claims: &[&ClaimEntry],
        node: &NodeStatic,
        in_use: &FxHashSet<DeviceId>,
        limit: i64,
    ) -> (i64, bool) {
        // Only the node's candidates are ever looked up in the set, unless one of them
        // consumes counters: then every device of its pool is (`counters_of`).
        let cands = self.candidates(node);
        let mut used: FxHashSet<DeviceId> = if cands.iter().any(|c| !c.consumes.is_empty()) {
            in_use.clone()
        } else {
            cands.into_iter().map(|c| c.id).filter(|id| in_use.contains(id)).collect()
        };
        let mut extra = SharedUse::default();
        let mut n = 0;
        while n < limit {
            let results = match self.allocate_with(claims, node, &used, Some(&extra)) {
                Ok(Some(results)) => results,
                Ok(None) => break,
                Err(_) => return (n, true),
            };
            let before = used.len();
            let mut shared_taken = false;
            for r in results.iter().flat_map(|a| a.devices.iter().flat_map(|d| d.results.iter().flatten())) {
                let id: DeviceId =
                    (r.driver.as_str().into(), r.pool.as_str().into(), r.device.as_str().into());
                if r.share_id.is_some() {
                    shared_taken = true;
                    let taken = r.consumed_capacity.iter().flatten();
                    let taken =
                        taken.map(|(k, q)| (k.clone(), placer_api::quantity::parse_milli(&q.0).unwrap_or(0)));
                    shared::add_shared(&mut extra, id, taken);
                } else if r.admin_access != Some(true) {
                    used.insert(id);
                }
            }
            n += 1;
            if used.len() == before && !shared_taken {
                // Nothing taken (admin access only): every copy fits.
                return (limit, false);
            }
        }
        (n, false)
    }

    /// The devices whose slice (or, with per-device node selection, the device itself)
    /// reaches `node`, from the newest generation of each pool, in slice-name then device
    /// order.
    pub(super) fn candidates(&self, node: &NodeStatic) -> Vec<Cand<'_>> {
        let empty = BTreeMap::new();
        let labels = node.node.metadata.labels.as_ref().unwrap_or(&empty);
        let reaches = |node_name: Option<&String>, all: Option<bool>, sel: Option<&NodeSelector>| {
            node_name.is_some_and(|n| **n == *node.name)
                || all == Some(true)
                || sel.is_some_and(|s| node_selector_terms_match(&s.node_selector_terms, &node.name, labels))
        };
        let mut names: Vec<&String> =
            [&*node.name, ""].iter().filter_map(|n| self.by_node.get(*n)).flatten().collect();
        names.sort();
        let mut out = Vec::new();
        let off = self.disabled;
        // Nothing is allocated from incomplete or invalid pools (see `pools.rs`).
        let problems = self.pool_problems(node);
        for name in names {
            let Some(s) = self.slices.get(name) else { continue };
            if problems.excludes(&s.spec.driver, &s.spec.pool.name) {
                continue;
            }
            let counters = s.spec.shared_counters.as_ref().is_some_and(|c| !c.is_empty());
            if off.partitionable_devices && (s.spec.per_device_node_selection.is_some() || counters) {
                continue;
            }
            // The slice's ids and generation as cached when it was stored (see `index.rs`),
            // else computed.
            let cache = self.cache.get(name).filter(|c| std::sync::Arc::ptr_eq(&c.slice, s));
            let current = match cache {
                Some(c) => c.current,
                None => {
                    let pool = (s.spec.driver.clone(), s.spec.pool.name.clone());
                    self.newest.get(&pool) == Some(&s.spec.pool.generation)
                }
            };
            if !current {
                continue;
            }
            let per_device = s.spec.per_device_node_selection == Some(true);
            if !per_device
                && !reaches(s.spec.node_name.as_ref(), s.spec.all_nodes, s.spec.node_selector.as_ref())
            {
                continue;
            }
            for (index, d) in s.spec.devices.iter().flatten().enumerate() {
                if per_device && !reaches(d.node_name.as_ref(), d.all_nodes, d.node_selector.as_ref()) {
                    continue;
                }
                let consumes = d.consumes_counters.as_ref().is_some_and(|c| !c.is_empty());
                let conditions = d.binding_conditions.as_ref().is_some_and(|c| !c.is_empty());
                if (off.partitionable_devices && consumes) || (off.binding_conditions && conditions) {
                    continue;
                }
                let id = match cache.and_then(|c| c.ids.get(index)) {
                    Some(id) => id.clone(),
                    None => (
                        s.spec.driver.as_str().into(),
                        s.spec.pool.name.as_str().into(),
                        d.name.as_str().into(),
                    ),
                };
                out.push(Cand {
                    id,
                    device: d,
                    slice: s,
                    multi: !off.consumable_capacity && d.allow_multiple_allocations == Some(true),
                    consumes: shared::consumption(d),
                    pool: usize::MAX,
                    index,
                    cache,
                });
            }
        }
        out
    }
}

impl DraState {
    /// The counters of pool (`driver`, `pool`): every slice of its newest generation.
    pub(super) fn counters_of(
        &self,
        driver: &str,
        pool: &str,
        allocated: impl Fn(&DeviceId) -> bool,
    ) -> Result<PoolCounters, String> {
        let generation = self.newest.get(&(driver.to_string(), pool.to_string())).copied();
        let slices = self.slices.values().map(|s| &**s).filter(move |s| {
            s.spec.driver == driver && s.spec.pool.name == pool && Some(s.spec.pool.generation) == generation
        });
        shared::pool_counters(slices, allocated)
    }
}

fn show(id: &DeviceId) -> String {
    format!("{}/{}/{}", id.0, id.1, id.2)
}

/// Whether `class` (named `name`) selects the device `id` (`env`); `Err`: the allocator's
/// message for a selector that does not evaluate.
pub(super) fn class_selectors_match(
    name: &str,
    class: &ClassEntry,
    env: &DeviceEnv<'_>,
    id: &DeviceId,
) -> Result<bool, String> {
    selectors_match(&class.selectors, env, |i, m| {
        format!("class {name}: selector #{i} on device {}: {m}", show(id))
    })
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

/// Whether candidate `c` is selected by DeviceClass `class` (named `name`) and by the
/// request's own compiled selectors `own` of claim `entry`; `Err`: the allocator's message
/// for a selector that does not evaluate.
pub(super) fn device_matches(
    entry: &ClaimEntry,
    name: &str,
    class: &ClassEntry,
    own: &[Result<Expr, CelError>],
    c: &Cand<'_>,
) -> Result<bool, String> {
    let env = DeviceEnv { driver: &c.id.0, device: c.device };
    // The class's verdict as cached for this device (see `index.rs`), else evaluated.
    let by_class = match c.cache.and_then(|sc| sc.verdict(name, c.index)) {
        Some(cached) => cached.clone()?,
        None => class_selectors_match(name, class, &env, &c.id)?,
    };
    Ok(by_class
        && selectors_match(own, &env, |i, m| {
            format!("claim {}: selector #{i} on device {}: {m}", entry.key, show(&c.id))
        })?)
}

/// Upstream's `createNodeSelector`: a node-local device (or one that `bindsToNode`) pins
/// the allocation to its node; otherwise the node selectors are merged; devices for all
/// nodes add nothing.
fn node_selector(devices: &[(&ResourceSlice, &Device)], node: &str) -> Option<NodeSelector> {
    let mut term = NodeSelectorTerm::default();
    for (s, d) in devices {
        // With per-device node selection the device says where it is.
        let (node_name, selector) = if s.spec.per_device_node_selection == Some(true) {
            (d.node_name.as_ref(), d.node_selector.as_ref())
        } else {
            (s.spec.node_name.as_ref(), s.spec.node_selector.as_ref())
        };
        if node_name.is_some() || d.binds_to_node == Some(true) {
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
        if let Some(first) = selector.and_then(|n| n.node_selector_terms.first()) {
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

pub(super) struct Cand<'a> {
    pub(super) id: DeviceId,
    pub(super) device: &'a Device,
    pub(super) slice: &'a ResourceSlice,
    /// `allowMultipleAllocations`.
    pub(super) multi: bool,
    /// What it consumes of its pool's counters.
    pub(super) consumes: Vec<(shared::CounterKey, i64)>,
    /// Its pool's counters in [`Search::pools`] (`usize::MAX`: it consumes none).
    pub(super) pool: usize,
    /// The device's index in its slice, and the slice's cache (see `index.rs`).
    pub(super) index: usize,
    pub(super) cache: Option<&'a SliceCache>,
}

/// A request of one of the claims being allocated.
struct Req<'a> {
    claim: usize,
    name: &'a str,
    /// `exactly`: one; `firstAvailable`: the subrequests in order.
    alts: Vec<Alt<'a>>,
}

struct Alt<'a> {
    /// The result's `request`: `request` or `request/subrequest`.
    name: String,
    sub: Option<&'a str>,
    /// Candidate indices matching the class and request selectors, in order (with
    /// `ExactCount`, only devices whose taints the request tolerates).
    matching: Vec<usize>,
    count: usize,
    /// `All`: exactly the devices of `matching`, every one of them usable.
    all: bool,
    admin: bool,
    tolerations: &'a [DeviceToleration],
    /// What it takes of each capacity of the shared devices (by candidate) of `matching`.
    consumed: FxHashMap<usize, Vec<Consumed>>,
}

/// A `matchAttribute` or `distinctAttribute` constraint while searching.
struct Constraint<'a> {
    claim: usize,
    attribute: &'a str,
    distinct: bool,
    requests: Option<&'a [String]>,
    /// The values of the devices chosen so far that it applies to.
    values: Vec<&'a DeviceAttribute>,
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
    /// The claims (indices) each candidate is allocated to in this search.
    taken: Vec<Vec<usize>>,
    cons: Vec<Constraint<'a>>,
    chosen: Vec<(usize, usize)>,
    /// The alternative being tried for each request.
    alt: Vec<usize>,
    budget: u32,
    /// Capacity held on shared devices by allocated claims.
    shared: &'b SharedUse,
    /// Counters left in each pool after the allocated devices, and what this search took.
    pools: Vec<PoolCounters>,
    counters_used: Vec<BTreeMap<shared::CounterKey, i64>>,
    /// How many times this search picked each candidate, and what it took of a shared
    /// device's capacity.
    held: Vec<u32>,
    allocating: Vec<BTreeMap<String, i64>>,
}
