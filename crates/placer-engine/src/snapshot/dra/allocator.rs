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
//!   as upstream's).
//!
//! Not implemented, and rejected rather than ignored (load time in scenario files and
//! `placer cluster`, a Pending pod whose message says so in `placer serve`): consumable
//! capacity (`capacity` requests, devices with `allowMultipleAllocations`), partitionable
//! devices (`sharedCounters`, `consumesCounters`) and binding conditions. In the engine
//! such devices are never candidates (see [`unsupported_device`]), so nothing is
//! over-allocated.

use placer_api::k8s::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use placer_api::k8s::api::resource::v1::{
    AllocationResult, Device, DeviceAllocationResult, DeviceAttribute, DeviceRequest,
    DeviceRequestAllocationResult, DeviceSelector, DeviceTaint, DeviceToleration, ResourceSlice,
};
use rustc_hash::FxHashSet;
use std::collections::BTreeMap;

use super::cel::{self, CelError, DeviceEnv, Expr};
use super::index::SliceCache;
use super::{requests, ClaimEntry, ClassEntry, DeviceId, DraState};
use crate::framework::helper::node_selector_terms_match;
use crate::model::NodeStatic;

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
    /// `capacity` requests (consumable capacity): not supported.
    pub capacity: bool,
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
            capacity: e.capacity.as_ref().is_some_and(|c| c.requests.as_ref().is_some_and(|r| !r.is_empty())),
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
            capacity: s.capacity.as_ref().is_some_and(|c| c.requests.as_ref().is_some_and(|r| !r.is_empty())),
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

/// What of a device Placer's allocator does not implement, if anything (see the module
/// docs): such a device is never allocated.
pub fn unsupported_device(slice: &ResourceSlice, d: &Device) -> Option<&'static str> {
    if d.allow_multiple_allocations == Some(true) {
        return Some("allowMultipleAllocations (consumable capacity)");
    }
    if d.consumes_counters.as_ref().is_some_and(|c| !c.is_empty())
        || slice.spec.shared_counters.as_ref().is_some_and(|c| !c.is_empty())
    {
        return Some("consumesCounters / sharedCounters (partitionable devices)");
    }
    if d.binding_conditions.as_ref().is_some_and(|c| !c.is_empty()) {
        return Some("bindingConditions");
    }
    None
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
fn taints_tolerated(d: &Device, tolerations: &[DeviceToleration]) -> bool {
    d.taints
        .iter()
        .flatten()
        .filter(|t| t.effect != "None")
        .all(|taint| tolerations.iter().any(|t| tolerates(t, taint)))
}

impl DraState {
    /// Checks the requests of a claim to allocate (upstream PreFilter): every request is
    /// an `exactly` or `firstAvailable` request whose DeviceClasses exist, without
    /// consumable capacity. The error is upstream's wording where it has one.
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
                if a.capacity {
                    return Err(format!(
                        "resource claim {}, request {name}: capacity requests (consumable capacity) are not supported by Placer yet",
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
        let cands = self.candidates(node);
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
                    if v.capacity {
                        return Err(format!(
                            "claim {}, request {name}: capacity requests (consumable capacity) are not supported by Placer yet",
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
                    for (k, c) in cands.iter().enumerate() {
                        let env = DeviceEnv { driver: &c.id.0, device: c.device };
                        // The class's verdict as cached for this device (see `index.rs`),
                        // else evaluated.
                        let by_class = match c.cache.and_then(|sc| sc.verdict(v.class, c.index)) {
                            Some(cached) => cached.clone()?,
                            None => class_selectors_match(v.class, class, &env, &c.id)?,
                        };
                        let ok = by_class
                            && selectors_match(own, &env, |i, m| {
                                format!("claim {}: selector #{i} on device {}: {m}", entry.key, show(&c.id))
                            })?;
                        if ok {
                            matching.push(k);
                        }
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
        };
        if !search.run(0) {
            return Ok(None);
        }
        let mut results: Vec<Vec<DeviceRequestAllocationResult>> = vec![Vec::new(); claims.len()];
        let mut slices: Vec<Vec<&ResourceSlice>> = vec![Vec::new(); claims.len()];
        for &(ri, k) in &search.chosen {
            let req = &reqs[ri];
            let alt = &req.alts[search.alt[ri]];
            let c = &cands[k];
            results[req.claim].push(DeviceRequestAllocationResult {
                request: alt.name.clone(),
                driver: c.id.0.to_string(),
                pool: c.id.1.to_string(),
                device: c.id.2.to_string(),
                admin_access: alt.admin.then_some(true),
                tolerations: (!alt.tolerations.is_empty()).then(|| alt.tolerations.to_vec()),
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
        // Only the node's candidates are ever looked up in the set: the devices in use
        // among them are all it needs (not a copy of every device in use).
        let mut used: FxHashSet<DeviceId> =
            self.candidates(node).into_iter().map(|c| c.id).filter(|id| in_use.contains(id)).collect();
        let mut n = 0;
        while n < limit {
            let Ok(Some(results)) = self.allocate(claims, node, &used) else { break };
            let before = used.len();
            for r in results.iter().flat_map(|a| a.devices.iter().flat_map(|d| d.results.iter().flatten())) {
                if r.admin_access != Some(true) {
                    used.insert((r.driver.as_str().into(), r.pool.as_str().into(), r.device.as_str().into()));
                }
            }
            n += 1;
            if used.len() == before {
                // Nothing taken (admin access only): every copy fits.
                return limit;
            }
        }
        n
    }

    /// The devices whose slice (or, with per-device node selection, the device itself)
    /// reaches `node`, from the newest generation of each pool, in slice-name then device
    /// order, without the devices Placer cannot allocate ([`unsupported_device`]).
    pub(super) fn candidates(&self, node: &NodeStatic) -> Vec<Cand<'_>> {
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
        for name in names {
            let Some(s) = self.slices.get(name) else { continue };
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
                if unsupported_device(s, d).is_some() {
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
                out.push(Cand { id, device: d, slice: s, index, cache });
            }
        }
        out
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

pub(super) struct Cand<'a> {
    pub(super) id: DeviceId,
    pub(super) device: &'a Device,
    pub(super) slice: &'a ResourceSlice,
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
}

impl Search<'_, '_> {
    /// Satisfies request `ri` (trying its alternatives in order), then the next ones;
    /// true when every request is satisfied.
    fn run(&mut self, ri: usize) -> bool {
        let Some(req) = self.reqs.get(ri) else { return true };
        for a in 0..req.alts.len() {
            self.alt[ri] = a;
            if self.pick(ri, a, 0, 0) {
                return true;
            }
        }
        false
    }

    /// Picks devices for alternative `a` of request `ri` from `from` on (`got` so far).
    fn pick(&mut self, ri: usize, a: usize, from: usize, got: usize) -> bool {
        let reqs = self.reqs;
        let alt = &reqs[ri].alts[a];
        if alt.all && alt.matching.is_empty() {
            return false;
        }
        if got == alt.count {
            return self.run(ri + 1);
        }
        for pos in from..alt.matching.len() {
            if self.budget == 0 {
                return false;
            }
            self.budget -= 1;
            let k = alt.matching[pos];
            let usable = self.usable(ri, a, k) && self.add_constraints(ri, a, k);
            if !usable {
                if alt.all {
                    // Every device of an `All` request is needed.
                    return false;
                }
                continue;
            }
            let claim = reqs[ri].claim;
            self.taken[k].push(claim);
            self.chosen.push((ri, k));
            if self.pick(ri, a, pos + 1, got + 1) {
                return true;
            }
            self.chosen.pop();
            self.taken[k].pop();
            self.remove_constraints(ri, a, k);
            if alt.all {
                return false;
            }
        }
        false
    }

    /// In use (by an allocated claim or earlier in this search) and taints.
    fn usable(&self, ri: usize, a: usize, k: usize) -> bool {
        let (req, alt) = (&self.reqs[ri], &self.reqs[ri].alts[a]);
        let taken = &self.taken[k];
        let free = if alt.admin {
            !taken.contains(&req.claim)
        } else {
            taken.is_empty() && !self.in_use.contains(&self.cands[k].id)
        };
        free && (!alt.all || taints_tolerated(self.cands[k].device, alt.tolerations))
    }

    fn applies(c: &Constraint<'_>, req: &Req<'_>, alt: &Alt<'_>) -> bool {
        c.claim == req.claim
            && c.requests.is_none_or(|r| {
                r.iter().any(|n| {
                    n == req.name
                        || alt.sub.is_some_and(|s| {
                            n.strip_prefix(req.name).and_then(|t| t.strip_prefix('/')) == Some(s)
                        })
                })
            })
    }

    fn add_constraints(&mut self, ri: usize, a: usize, k: usize) -> bool {
        let (reqs, cands) = (self.reqs, self.cands);
        let (req, cand) = (&reqs[ri], &cands[k]);
        let alt = &req.alts[a];
        let mut values = Vec::new();
        for (i, c) in self.cons.iter().enumerate() {
            if !Self::applies(c, req, alt) {
                continue;
            }
            let Some(v) = lookup_attribute(cand.device, &cand.id.0, c.attribute) else { return false };
            let ok = if c.distinct {
                !c.values.contains(&v)
            } else {
                c.values.first().is_none_or(|have| *have == v)
            };
            if !ok {
                return false;
            }
            values.push((i, v));
        }
        for (i, v) in values {
            self.cons[i].values.push(v);
        }
        true
    }

    fn remove_constraints(&mut self, ri: usize, a: usize, k: usize) {
        let (reqs, cands) = (self.reqs, self.cands);
        let (req, cand) = (&reqs[ri], &cands[k]);
        let alt = &req.alts[a];
        for c in self.cons.iter_mut() {
            if Self::applies(c, req, alt) {
                if let Some(v) = lookup_attribute(cand.device, &cand.id.0, c.attribute) {
                    if let Some(pos) = c.values.iter().rposition(|have| *have == v) {
                        c.values.remove(pos);
                    }
                }
            }
        }
    }
}
