//! The engine side of hierarchical TAS (seed 002): from the snapshot to a [`TasProblem`],
//! and from a [`TasAssignment`] back to pods on nodes, every pod confirmed by the pod-level
//! filters before anything is bound.
//!
//! One call of [`place_unit`] decides a *unit*: a single PodGroup, or the two PodGroups of a
//! leader + workers group (same `kueue.x-k8s.io/podset-group-name`), bound both or neither.
//!
//! 1. **Nodes** ([`TasCache`]): the snapshot's nodes that are Ready, schedulable and carry a
//!    label for every level (SEMANTICS §1). Their [`DomainTree`] is cached while the node
//!    set is unchanged (keyed by [`Snapshot::node_generation`]); capacity and filter
//!    outcomes are read fresh every cycle: `free` = allocatable − requested (bound and
//!    assumed pods, so groups placed earlier are visible), `worker_ok` / `leader_ok` = the
//!    pod-level filters of a representative pod *without* NodeResourcesFit (TAS counts
//!    resources itself), `affinity_score` = the preferred node-affinity weights (gate
//!    `TASRespectNodeAffinityPreferred`).
//! 2. **Assignment**: [`super::find_assignment_in`] with the parsed requests. A single group
//!    whose `minCount` is below its pod count (or a basic group) places as many pods as the
//!    topology holds, at least `minCount`; a leader + workers group is all or nothing.
//! 3. **Pods to leaves**: ranks (pod index minus `kueue.x-k8s.io/pod-index-offset`, the
//!    workers of a leader + workers group offset by the leader) map to leaves in the
//!    assignment's order (SEMANTICS §13); without usable indexes, pods fill leaves in cycle
//!    order. A hostname leaf is its node; in a bucket leaf (lowest level not the hostname)
//!    the pod-level algorithm picks the node among the bucket's nodes.
//! 4. **Fidelity**: each pod is confirmed with the full pod-level filters (inter-pod
//!    affinity, spreading, ports...) with the earlier ones assumed. When a pod fails, the
//!    counted plan is not bound: the nodes where it failed are capped at the pods they did
//!    take (a failing leader excludes them for the leader) and the assignment is computed
//!    again, at most [`MAX_PLAN_ATTEMPTS`] times.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap;

use placer_api::annotations::PODSET_GROUP_NAME;
use placer_api::gates::Gate;

use crate::config::{PlacementSearch, SchedulerConfig};
use crate::framework::helper::{labels_or_empty, node_selector_term_matches};
use crate::framework::ParsedPod;
use crate::framework::{Dependence, FitError, Framework};
use crate::model::{NodeId, PodInfo};
use crate::podgroup::{GroupCycle, PodScheduler};
use crate::resources::Resources;
use crate::schedule_one::{filter_prepared, prepare_without};
use crate::snapshot::Snapshot;

use super::assignment::{DomainCount, TopologyAssignment};
use super::{
    find_assignment_in, parse_request, validate_group, DomainTree, FailureKind, TasAssignment, TasFailure,
    TasNode, TasProblem, TopologyMode, TopologyRequest, TOPOLOGY_NAME,
};

/// How many counted plans are tried before a unit fails because none survives the
/// pod-level filters.
pub const MAX_PLAN_ATTEMPTS: usize = 16;

/// State kept across cycles: the filters TAS evaluates per node and the domain tree of the
/// current node set. One cache belongs to one snapshot.
pub struct TasCache {
    /// The profile's pod-level filters ([`Framework::filters_only`]); those checking plain
    /// resources are skipped per pod.
    filters: Framework,
    /// Rebuild the tree on every cycle ([`PlacementSearch::Baseline`]).
    no_cache: bool,
    topology: Option<Topology>,
    builds: u64,
}

impl std::fmt::Debug for TasCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TasCache")
            .field("filters", &self.filters)
            .field("cached_nodes", &self.topology.as_ref().map(|t| t.ids.len()))
            .field("builds", &self.builds)
            .finish()
    }
}

/// The eligible nodes of one node set and their domain tree.
struct Topology {
    node_generation: u64,
    levels: Vec<String>,
    /// Snapshot ids of the eligible nodes; index `i` is [`TasNode`] `i` of every problem.
    ids: Vec<NodeId>,
    /// The inverse of `ids`.
    index: FxHashMap<NodeId, usize>,
    /// Name and level values of each eligible node (capacity fields are filled per cycle).
    base: Vec<TasNode>,
    tree: DomainTree,
}

impl Topology {
    fn index_of(&self, id: NodeId) -> Option<usize> {
        self.index.get(&id).copied()
    }
}

impl TasCache {
    /// A cache for an engine configured with `config`.
    pub fn new(config: &SchedulerConfig) -> TasCache {
        let filters = Framework::filters_only(crate::plugins::pod_framework(config));
        TasCache {
            filters,
            no_cache: config.placement_search == PlacementSearch::Baseline,
            topology: None,
            builds: 0,
        }
    }

    /// How many times a domain tree was built (for tests and metrics).
    #[cfg(test)]
    pub fn tree_builds(&self) -> u64 {
        self.builds
    }

    /// Makes the cached node set and tree those of `snap` for `levels`, rebuilding only when
    /// nodes changed.
    fn refresh(&mut self, snap: &Snapshot, levels: &[String]) -> Result<&Topology, TasFailure> {
        let fresh = self.topology.as_ref().is_some_and(|t| {
            !self.no_cache && t.node_generation == snap.node_generation() && t.levels == levels
        });
        if !fresh {
            let mut ids = Vec::new();
            let mut base = Vec::new();
            for &id in snap.node_ids() {
                let n = snap.node(id);
                if !n.info.ready || n.info.unschedulable {
                    continue;
                }
                let Some(values) =
                    levels.iter().map(|l| n.info.label(l).map(str::to_string)).collect::<Option<Vec<_>>>()
                else {
                    continue;
                };
                ids.push(id);
                base.push(TasNode::new(n.name(), values, Resources::default()));
            }
            let tree = DomainTree::new(levels, &base)?;
            self.builds += 1;
            self.topology = Some(Topology {
                node_generation: snap.node_generation(),
                levels: levels.to_vec(),
                index: ids.iter().enumerate().map(|(i, &id)| (id, i)).collect(),
                ids,
                base,
                tree,
            });
        }
        self.topology.as_ref().ok_or_else(|| {
            TasFailure::new(FailureKind::Internal, "the topology cache is empty after a build".to_string())
        })
    }
}

/// What one PodGroup of a successful unit gets.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberPlacement {
    /// (index into the cycle's pods, node) for every pod to bind, in the order placed.
    pub assignments: Vec<(usize, NodeId)>,
    /// Pods of the cycle left out because the topology holds fewer (at least `minCount`
    /// were placed), with the reason.
    pub left_out: Vec<(usize, String)>,
    /// The group's pods per domain in the compact v1beta2 encoding.
    pub topology_assignment: TopologyAssignment,
}

/// Why a unit cannot be placed now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitFailure {
    /// Kueue-like, e.g. `topology "default" allows to fit only 3 out of 4 pod(s)`, or the
    /// validation error naming the PodGroup and the annotation.
    pub message: String,
    /// An internal error (reason `SchedulerError`) rather than "does not fit".
    pub internal: bool,
}

impl UnitFailure {
    fn unschedulable(message: impl Into<String>) -> UnitFailure {
        UnitFailure { message: message.into(), internal: false }
    }
}

impl From<TasFailure> for UnitFailure {
    fn from(f: TasFailure) -> UnitFailure {
        UnitFailure { internal: f.kind == FailureKind::Internal, message: f.message }
    }
}

/// The role of a PodGroup in the problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Worker,
    Leader,
}

/// One PodGroup of the problem with what the algorithm needs of it.
struct Member<'c> {
    /// Index into the unit's cycles.
    unit_index: usize,
    cycle: &'c GroupCycle,
    /// Requests of one pod: the per-resource maximum over the cycle's pods.
    requests: Resources,
    /// The cycle's pods in placing order (indexes into `cycle.pods`): by rank when every
    /// pod has a usable index, else in cycle order.
    order: Vec<usize>,
}

/// Per-node corrections learnt from plans that failed the pod-level filters.
#[derive(Debug, Default)]
struct Corrections {
    /// Most pods a node (index into the topology's nodes) may take.
    caps: BTreeMap<usize, i64>,
    /// Nodes the leader may not use.
    no_leader: BTreeSet<usize>,
}

/// Decides a unit: one PodGroup, or the leader and workers PodGroups of a PodSet group
/// (`cycles` in key order). Cycles without pods take no part in the problem, but their
/// scheduled members (like everybody's) pin a required domain. On success returns one
/// entry per cycle (`None` for cycles without pods). `snap` is left as found.
pub fn place_unit(
    algo: &dyn PodScheduler,
    config: &SchedulerConfig,
    snap: &mut Snapshot,
    cache: &mut TasCache,
    cycles: &[&GroupCycle],
) -> Result<Vec<Option<MemberPlacement>>, UnitFailure> {
    let levels = config.topology_levels.as_slice();
    let gates = &config.gates;
    if cycles.iter().all(|c| c.pods.is_empty()) {
        return Err(UnitFailure::unschedulable("no pod of the group to schedule"));
    }
    for c in cycles.iter().filter(|c| c.gang && !c.pods.is_empty()) {
        if let Some(msg) = c.cannot_reach_min_count() {
            return Err(UnitFailure::unschedulable(format!("PodGroup {}: {msg}", c.group.key)));
        }
    }

    // Requests, validated against the levels (every member, with its total pod count).
    let mut requests = Vec::with_capacity(cycles.len());
    for c in cycles {
        let total = total_pods(c);
        requests.push(
            parse_request(&c.group, levels, gates, total)
                .map_err(|e| UnitFailure::unschedulable(e.to_string()))?,
        );
    }
    // Roles: leader + workers when the unit has several PodGroups.
    let (worker_idx, leader_idx) = if cycles.len() > 1 {
        let name = cycles[0].group.annotation(PODSET_GROUP_NAME).unwrap_or_default().to_string();
        let keys: Vec<String> = cycles.iter().map(|c| c.group.key.to_string()).collect();
        let list: Vec<(&str, &TopologyRequest, u32)> = keys
            .iter()
            .zip(cycles)
            .zip(&requests)
            .map(|((k, c), r)| (k.as_str(), r, total_pods(c)))
            .collect();
        let (leader, workers) =
            validate_group(&name, &list).map_err(|e| UnitFailure::unschedulable(e.to_string()))?;
        (workers, Some(leader))
    } else {
        (0, None)
    };
    // Who is placed now: the workers (or, when only the leader has pods, the leader alone
    // with its own request) and the leader.
    let leader_now = leader_idx.filter(|&l| !cycles[l].pods.is_empty());
    let (main_idx, main_role, leader_now) = if cycles[worker_idx].pods.is_empty() {
        match leader_now {
            Some(l) => (l, Role::Leader, None),
            None => return Err(UnitFailure::unschedulable("no pod of the group to schedule")),
        }
    } else {
        (worker_idx, Role::Worker, leader_now)
    };
    // Rank offsets as Kueue's TopologyUngater gives them: the workers of a leader + workers
    // group start after the leader's pods, and each PodGroup's own
    // `kueue.x-k8s.io/pod-index-offset` is added to that.
    let leader_offset = match leader_idx {
        Some(l) if main_role == Role::Worker => i64::from(total_pods(cycles[l])),
        _ => 0,
    };
    let main_offset = leader_offset + own_offset(cycles[main_idx])?;
    let main = member(main_idx, cycles[main_idx], main_offset);
    let leader = match leader_now {
        Some(l) => Some(member(l, cycles[l], own_offset(cycles[l])?)),
        None => None,
    };
    let request = &requests[main_idx];

    cache.refresh(snap, levels)?;
    let repair = match (cycles, cache.topology.as_ref()) {
        ([one], Some(topology)) if leader.is_none() => Repair::plan(topology, snap, one, request, gates),
        _ => None,
    };
    let request = repair.as_ref().map_or(request, |r| &r.request);
    let pinned = match repair.as_ref().and_then(|r| r.domain.clone()) {
        Some(domain) => Some(domain),
        None => pinned_nodes(cache, snap, cycles, request)?,
    };

    let mut corrections = Corrections::default();
    let mut last_failure = String::new();
    for _ in 0..MAX_PLAN_ATTEMPTS {
        let nodes = build_nodes(cache, snap, &main, leader.as_ref(), pinned.as_deref(), &corrections, config);
        let Some(topology) = cache.topology.as_ref() else {
            return Err(UnitFailure { message: "the topology cache is empty".to_string(), internal: true });
        };
        let (assignment, count) =
            assign(topology, &nodes, &main, leader.as_ref(), request, config).map_err(|mut f| {
                if !last_failure.is_empty() {
                    f.message =
                        format!("{}; earlier plans failed the pod-level filters: {last_failure}", f.message);
                }
                f
            })?;
        match confirm(algo, snap, topology, &assignment, &main, count, leader.as_ref()) {
            Ok(placed) => {
                let mut out = results(cycles.len(), &assignment, &main, count, leader.as_ref(), placed);
                if let (Some(r), Some(Some(m))) = (&repair, out.get_mut(main.unit_index)) {
                    m.topology_assignment = r.merged(&assignment);
                }
                return Ok(out);
            }
            Err(failures) => {
                last_failure = failures.message.clone();
                corrections.learn(&failures);
            }
        }
    }
    Err(UnitFailure::unschedulable(format!(
        "topology {TOPOLOGY_NAME:?}: no assignment passed the pod-level filters in {MAX_PLAN_ATTEMPTS} attempts; \
         last: {last_failure}"
    )))
}

/// How the hierarchical algorithm ranks the domains for a single PodGroup's cycle (no
/// leader + workers unit, no repair of a placed gang): the problem [`place_unit`] would
/// build on its first plan, handed to [`super::rank_domains`]. `snap` is not changed.
pub fn rank_unit(
    config: &SchedulerConfig,
    snap: &Snapshot,
    cache: &mut TasCache,
    cycle: &GroupCycle,
) -> Result<super::TasRanking, UnitFailure> {
    let levels = config.topology_levels.as_slice();
    if cycle.pods.is_empty() {
        return Err(UnitFailure::unschedulable("no pod of the group to schedule"));
    }
    let request = parse_request(&cycle.group, levels, &config.gates, total_pods(cycle))
        .map_err(|e| UnitFailure::unschedulable(e.to_string()))?;
    let main = member(0, cycle, own_offset(cycle)?);
    cache.refresh(snap, levels)?;
    let pinned = pinned_nodes(cache, snap, &[cycle], &request)?;
    let nodes = build_nodes(cache, snap, &main, None, pinned.as_deref(), &Corrections::default(), config);
    let Some(topology) = cache.topology.as_ref() else {
        return Err(UnitFailure { message: "the topology cache is empty".to_string(), internal: true });
    };
    let problem = TasProblem {
        levels: &topology.levels,
        nodes: &nodes,
        worker_requests: &main.requests,
        worker_count: u32::try_from(cycle.pods.len()).unwrap_or(u32::MAX),
        leader: None,
        request: &request,
        gates: &config.gates,
        algorithms: config.topology_algorithms,
    };
    Ok(super::rank_domains(&topology.tree, &problem)?)
}

/// Members already scheduled plus the pods of this cycle.
fn total_pods(c: &GroupCycle) -> u32 {
    u32::try_from(c.pods.len()).unwrap_or(u32::MAX).saturating_add(c.scheduled_count())
}

/// A PodGroup's own `kueue.x-k8s.io/pod-index-offset` ([`super::pod_index_offset`]), read
/// from the PodGroup, else from its first pod by name (Kueue reads the first pod it lists).
fn own_offset(cycle: &GroupCycle) -> Result<i64, UnitFailure> {
    let first = cycle.pods.iter().min_by(|a, b| a.key.name.cmp(&b.key.name));
    super::pod_index_offset(
        &cycle.group,
        first.and_then(|p| p.view.pod_index_offset.as_deref().map(String::as_str)),
    )
    .map_err(|e| UnitFailure::unschedulable(e.to_string()))
}

fn member(unit_index: usize, cycle: &GroupCycle, offset: i64) -> Member<'_> {
    let mut requests = Resources::default();
    for p in &cycle.pods {
        requests.max_with(&p.requests);
    }
    Member { unit_index, cycle, requests, order: placing_order(&cycle.pods, offset, total_pods(cycle)) }
}

/// The pod's index in its group ([`crate::model::pod_index`]: the label a
/// `kueue.x-k8s.io/pod-group-pod-index-label` annotation names, else
/// `kueue.x-k8s.io/pod-group-pod-index`, else the Job completion index).
pub fn pod_index(pod: &PodInfo) -> Option<u64> {
    pod.view.pod_index
}

/// Pods in placing order: by rank (index − `offset`; the offset may be negative) when every
/// pod has an index, each rank is in `0..size` (`size`: the group's pod count) and no two
/// share one, else in the order given (SEMANTICS §13; Kueue's `readRanksForLabels`, which
/// falls back to greedy order for the whole PodSet on a rank below 0 or past the size).
pub fn placing_order(pods: &[std::sync::Arc<PodInfo>], offset: i64, size: u32) -> Vec<usize> {
    let mut ranked: Vec<(i128, usize)> = Vec::with_capacity(pods.len());
    for (i, p) in pods.iter().enumerate() {
        match pod_index(p).map(|x| i128::from(x) - i128::from(offset)) {
            Some(rank) if (0..i128::from(size)).contains(&rank) => ranked.push((rank, i)),
            _ => return (0..pods.len()).collect(),
        }
    }
    ranked.sort_unstable();
    if ranked.windows(2).any(|w| w[0].0 == w[1].0) {
        return (0..pods.len()).collect();
    }
    ranked.into_iter().map(|(_, i)| i).collect()
}

/// For a required level: the nodes (topology indexes) of the one domain that the unit's
/// scheduled members already use, so that new pods join it. `None`: no restriction.
fn pinned_nodes(
    cache: &TasCache,
    snap: &Snapshot,
    cycles: &[&GroupCycle],
    request: &TopologyRequest,
) -> Result<Option<Vec<bool>>, UnitFailure> {
    let TopologyMode::Required(level) = request.mode else { return Ok(None) };
    let Some(topology) = cache.topology.as_ref() else { return Ok(None) };
    let mut domain: Option<&[String]> = None;
    for c in cycles {
        for (key, node) in &c.scheduled {
            let node = node.or_else(|| snap.pod_node(key));
            let Some(i) = node.and_then(|n| topology.index_of(n)) else { continue };
            let prefix = &topology.base[i].values[..=level];
            match domain {
                None => domain = Some(prefix),
                Some(d) if d == prefix => {}
                Some(d) => {
                    return Err(UnitFailure::unschedulable(format!(
                        "PodGroup {}: scheduled members already run in two {} domains ({:?} and {:?})",
                        c.group.key,
                        topology.levels[level],
                        d.join("/"),
                        prefix.join("/")
                    )))
                }
            }
        }
    }
    Ok(domain.map(|d| topology.base.iter().map(|n| n.values[..=level] == *d).collect()))
}

/// The problem's nodes for this cycle: capacity, filter outcomes, affinity scores.
fn build_nodes(
    cache: &TasCache,
    snap: &Snapshot,
    main: &Member<'_>,
    leader: Option<&Member<'_>>,
    pinned: Option<&[bool]>,
    corrections: &Corrections,
    config: &SchedulerConfig,
) -> Vec<TasNode> {
    let Some(topology) = cache.topology.as_ref() else { return Vec::new() };
    let fw = &cache.filters;
    let worker_pod = &main.cycle.pods[main.order[0]];
    // TAS counts plain resources itself: the filters that declare they check them
    // (`Dependence::PlainResources`) are skipped for its per-node verdicts.
    let worker_state = prepare_without(fw, snap, worker_pod, Dependence::PlainResources).ok();
    let leader_pod = leader.map(|l| &l.cycle.pods[l.order[0]]);
    let leader_state = leader_pod.and_then(|p| prepare_without(fw, snap, p, Dependence::PlainResources).ok());
    let affinity = config.gates.enabled(Gate::TASRespectNodeAffinityPreferred);
    let parsed = ParsedPod::new(worker_pod);
    let devices = DeviceNeed::of(snap, worker_pod);
    let mut nodes = topology.base.clone();
    for (i, node) in nodes.iter_mut().enumerate() {
        let id = topology.ids[i];
        let state = snap.node(id);
        node.free = state.free();
        if let Some(&cap) = corrections.caps.get(&i) {
            node.free.pods = node.free.pods.min(cap);
        }
        let allowed = pinned.is_none_or(|p| p.get(i).copied().unwrap_or(false));
        node.worker_ok =
            allowed && worker_state.as_ref().is_some_and(|s| filter_prepared(fw, s, snap, id).is_ok());
        if node.worker_ok {
            if let Some(d) = &devices {
                // A domain holds no more pods than its devices serve.
                node.free.pods = snap.dra().copies(&d.claims(), &state.info, &d.in_use, node.free.pods);
            }
        }
        node.leader_ok = allowed
            && !corrections.no_leader.contains(&i)
            && match (leader_pod, &leader_state) {
                (None, _) => true,
                (Some(_), Some(s)) => filter_prepared(fw, s, snap, id).is_ok(),
                (Some(_), None) => false,
            };
        if affinity {
            let labels = labels_or_empty(state.info.labels());
            node.affinity_score = parsed
                .preferred_node_terms
                .iter()
                .filter(|t| {
                    t.weight != 0 && node_selector_term_matches(&t.preference, &state.info.name, labels)
                })
                .map(|t| i64::from(t.weight))
                .sum();
        }
    }
    nodes
}

/// The claims each worker pod allocates for itself (generated from a template for that pod)
/// and the devices in use, when there are such claims: the tree counts how many pods each
/// node's free devices serve (members of a group use the same templates, so the
/// representative's claims stand for every member's). Claims shared by the group (a
/// PodGroup's, or one named by every pod) are allocated once and are left to the filters.
struct DeviceNeed {
    entries: Vec<std::sync::Arc<crate::snapshot::dra::ClaimEntry>>,
    in_use: rustc_hash::FxHashSet<crate::snapshot::dra::DeviceId>,
}

impl DeviceNeed {
    fn of(snap: &Snapshot, pod: &PodInfo) -> Option<DeviceNeed> {
        if pod.view.resource_claims.is_empty() {
            return None;
        }
        let claims = snap.dra().pod_claims(pod).ok()?;
        let entries: Vec<_> = claims
            .into_iter()
            .filter(|c| c.allocation.is_none())
            .filter(|c| {
                c.entry.claim.metadata.owner_references.iter().flatten().any(|o| {
                    o.controller == Some(true) && o.kind == "Pod" && *o.uid == *pod.uid && !pod.uid.is_empty()
                })
            })
            .map(|c| c.entry)
            .collect();
        (!entries.is_empty()).then(|| DeviceNeed { entries, in_use: snap.dra().in_use() })
    }

    fn claims(&self) -> Vec<&crate::snapshot::dra::ClaimEntry> {
        self.entries.iter().map(|e| &**e).collect()
    }
}

/// Runs the algorithm. A single group whose `minCount` allows fewer pods than it has gets
/// the largest count (a multiple of the slice size, at least the pods still needed) that
/// fits; the failure for the full count is reported when none does.
fn assign(
    topology: &Topology,
    nodes: &[TasNode],
    main: &Member<'_>,
    leader: Option<&Member<'_>>,
    request: &TopologyRequest,
    config: &SchedulerConfig,
) -> Result<(TasAssignment, u32), UnitFailure> {
    let full = u32::try_from(main.cycle.pods.len()).unwrap_or(u32::MAX);
    let run = |count: u32| {
        find_assignment_in(
            &topology.tree,
            &TasProblem {
                levels: &topology.levels,
                nodes,
                worker_requests: &main.requests,
                worker_count: count,
                leader: leader.map(|l| (&l.requests, u32::try_from(l.cycle.pods.len()).unwrap_or(u32::MAX))),
                request,
                gates: &config.gates,
                algorithms: config.topology_algorithms,
            },
        )
    };
    let first = match run(full) {
        Ok(a) => return Ok((a, full)),
        Err(f) => f,
    };
    if leader.is_some() || !matches!(first.kind, FailureKind::NotFit { .. }) {
        return Err(first.into());
    }
    // Smaller counts: multiples of the slice size from the pods still needed up to `full`.
    // Feasibility is monotone in the count, so a binary search finds the largest.
    let step = request.slice_size().max(1);
    let needed = main.cycle.needed().clamp(1, full.max(1));
    let (mut lo, mut hi) = (needed.div_ceil(step), full.saturating_sub(1) / step);
    let mut best: Option<(TasAssignment, u32)> = None;
    while lo <= hi && lo > 0 {
        let mid = lo + (hi - lo) / 2;
        match run(mid * step) {
            Ok(a) => {
                best = Some((a, mid * step));
                lo = mid + 1;
            }
            Err(_) => hi = mid - 1,
        }
    }
    best.ok_or_else(|| first.into())
}

/// Pods that failed the pod-level filters in one plan.
struct PlanFailures {
    /// (topology node indexes of the leaf, pods of the unit placed on each, role).
    leaves: Vec<(Vec<usize>, Vec<i64>, Role)>,
    message: String,
}

impl Corrections {
    fn learn(&mut self, f: &PlanFailures) {
        for (nodes, placed, role) in &f.leaves {
            for (&n, &k) in nodes.iter().zip(placed) {
                match role {
                    Role::Leader => {
                        self.no_leader.insert(n);
                    }
                    Role::Worker => {
                        let cap = self.caps.entry(n).or_insert(k);
                        *cap = (*cap).min(k);
                    }
                }
            }
        }
    }
}

/// Places the plan's pods on the snapshot one by one (leader first, then workers by rank),
/// each confirmed by the pod-level algorithm restricted to its leaf's nodes, and rolls
/// back. Returns, per role, (index into the cycle's pods, node).
fn confirm(
    algo: &dyn PodScheduler,
    snap: &mut Snapshot,
    topology: &Topology,
    a: &TasAssignment,
    main: &Member<'_>,
    count: u32,
    leader: Option<&Member<'_>>,
) -> Result<[Vec<(usize, NodeId)>; 2], PlanFailures> {
    // (role, pod index in its cycle, leaf).
    let mut targets: Vec<(Role, usize, &super::LeafAssignment)> = Vec::new();
    if let Some(l) = leader {
        let mut ranks = l.order.iter();
        for leaf in &a.leader {
            for _ in 0..leaf.count {
                if let Some(&i) = ranks.next() {
                    targets.push((Role::Leader, i, leaf));
                }
            }
        }
    }
    for (rank, &i) in main.order.iter().take(count as usize).enumerate() {
        if let Some(leaf) = a.worker_leaf_of_rank(rank as u64).and_then(|x| a.worker.get(x)) {
            targets.push((Role::Worker, i, leaf));
        }
    }
    let mark = snap.checkpoint();
    let mut placed_on: BTreeMap<usize, i64> = BTreeMap::new();
    let mut out: [Vec<(usize, NodeId)>; 2] = [Vec::new(), Vec::new()];
    let mut failures = PlanFailures { leaves: Vec::new(), message: String::new() };
    for (role, i, leaf) in targets {
        let cycle = match (role, leader) {
            (Role::Leader, Some(l)) => l.cycle,
            _ => main.cycle,
        };
        let pod = &cycle.pods[i];
        let ids: Vec<NodeId> = leaf.nodes.iter().filter_map(|&n| topology.ids.get(n).copied()).collect();
        match algo.find_node(snap, pod, &ids) {
            Ok(node) => {
                snap.assume(pod.clone(), node);
                if let Some(n) = topology.index_of(node) {
                    *placed_on.entry(n).or_insert(0) += 1;
                }
                out[usize::from(role == Role::Leader)].push((i, node));
            }
            Err(fit) => {
                if failures.message.is_empty() {
                    failures.message = leaf_failure_message(pod, leaf, &fit);
                }
                let placed = leaf.nodes.iter().map(|n| placed_on.get(n).copied().unwrap_or(0)).collect();
                failures.leaves.push((leaf.nodes.clone(), placed, role));
            }
        }
    }
    snap.rollback(mark);
    if failures.leaves.is_empty() {
        Ok(out)
    } else {
        Err(failures)
    }
}

fn leaf_failure_message(pod: &PodInfo, leaf: &super::LeafAssignment, fit: &FitError) -> String {
    format!("pod {} in domain {:?}: {fit}", pod.key, leaf.values.join("/"))
}

/// Builds the per-member results of a confirmed plan.
fn results(
    unit_len: usize,
    a: &TasAssignment,
    main: &Member<'_>,
    count: u32,
    leader: Option<&Member<'_>>,
    placed: [Vec<(usize, NodeId)>; 2],
) -> Vec<Option<MemberPlacement>> {
    let mut out: Vec<Option<MemberPlacement>> = vec![None; unit_len];
    let [workers, leaders] = placed;
    let full = main.cycle.pods.len();
    let left_out: Vec<(usize, String)> = main
        .order
        .iter()
        .skip(count as usize)
        .map(|&i| (i, format!("topology {TOPOLOGY_NAME:?} allows to fit only {count} out of {full} pod(s)")))
        .collect();
    out[main.unit_index] = Some(MemberPlacement {
        assignments: workers,
        left_out,
        topology_assignment: TopologyAssignment::from_assignment(a),
    });
    if let Some(l) = leader {
        let domains: Vec<DomainCount> =
            a.leader.iter().map(|x| DomainCount { values: x.values.clone(), count: x.count }).collect();
        let encoded = TopologyAssignment::encode(&a.levels, &domains)
            .unwrap_or_else(|_| TopologyAssignment { levels: a.levels.clone(), slices: Vec::new() });
        out[l.unit_index] = Some(MemberPlacement {
            assignments: leaders,
            left_out: Vec::new(),
            topology_assignment: encoded,
        });
    }
    out
}

mod repair;
#[cfg(test)]
mod tests;

use repair::Repair;
pub use repair::{cycle_tolerations, failed_nodes, node_failed, running_on_nodes};
