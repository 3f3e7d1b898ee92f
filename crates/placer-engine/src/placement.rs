//! KEP-5732 placements (seed 000; SEMANTICS §5-§9): the three-phase algorithm that picks a
//! set of nodes (a placement) for a PodGroup before its pods are bound.
//!
//! 1. **Generate** candidate placements with the [`PlacementGenerate`] plugins. Each gets
//!    the parent placement (all nodes) and returns placements inside it; several
//!    generators combine by the non-empty intersections of their placements.
//! 2. **Evaluate** each placement: first a cheap aggregate pre-filter (can the placement's
//!    total free capacity hold the pods the group needs at all?), then the PodGroup cycle
//!    ([`crate::podgroup::run_group_in_nodes`]) restricted to the placement's nodes, rolled
//!    back afterwards. [`PlacementFeasible`] plugins stop an evaluation early once
//!    `minCount` is out of reach.
//! 3. **Score** the feasible placements with the [`PlacementScore`] plugins (+ their
//!    NormalizePlacementScore), total = sum of weight x normalized score; the highest total
//!    wins, ties go to the lexicographically smallest placement name. The winner's
//!    evaluated per-pod assignment is what binds.
//!
//! Beta extensions implemented: multiple generators, early rejection,
//! `percentageOfPlacementsToScore` (deterministic: placements are evaluated in name order
//! instead of shuffled), and the placement holding the most members' `nominatedNodeName`s
//! is evaluated first and taken at once if it works.
//!
//! A group without a topology constraint (or with the `TopologyAwareWorkloadScheduling`
//! gate off) gets one placement holding every node. With `topology_levels` configured, the
//! hierarchical TAS module of seed 002 chooses instead ([`hierarchical_assignment`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::config::SchedulerConfig;
use crate::framework::Status;
use crate::model::{NodeId, PodInfo};
use crate::observer::Observer;
use crate::plugins::node_resources::fit_count_on;
use crate::plugins::placement_gang::GangScheduling;
use crate::plugins::placement_pods_count::PodGroupPodsCount;
use crate::plugins::placement_resources::NodeResourcesFitPlacement;
use crate::plugins::placement_topology::TopologyPlacementGenerator;
use crate::podgroup::{
    run_group_in_nodes, run_uniform_group_in_nodes, GroupAttempt, GroupCycle, GroupPreemption, PodPreemption,
    PodScheduler, Verdict, MSG_GROUP_UNSCHEDULABLE,
};
use crate::resources::{Resources, PODS};
use crate::snapshot::{
    DomainAggregate, Snapshot, TopologyDomains, DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST,
};
use crate::tas::engine_bridge::{place_unit, TasCache};

/// Feature gate of the placement algorithm.
pub const GATE_TAS: &str = "TopologyAwareWorkloadScheduling";
/// Feature gate of the GangScheduling plugin.
pub const GATE_GANG: &str = "GangScheduling";

/// Counter: candidate placements generated.
pub const METRIC_PLACEMENT_TOTAL: &str = "scheduler_placement_total";
/// Counter `{result=feasible|infeasible}`: placements evaluated.
pub const METRIC_PLACEMENT_EVALUATIONS: &str = "scheduler_placement_evaluations_total";
/// Histogram `{result}`: seconds to evaluate one placement.
pub const METRIC_PLACEMENT_EVALUATION_DURATION: &str = "scheduler_placement_evaluation_duration_seconds";
/// Histogram `{plugin, extension_point, status}`: one plugin at one extension point
/// (observed for placement generation, as KEP-5732's monitoring section asks).
pub const METRIC_PLUGIN_EXECUTION_DURATION: &str = "scheduler_plugin_execution_duration_seconds";

// ---------------------------------------------------------------------------------------
// Extension points.
// ---------------------------------------------------------------------------------------

/// A candidate set of nodes for a PodGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Unique among the candidates of one cycle; for topology placements the domain value.
    pub name: Arc<str>,
    /// Nodes of the placement, in snapshot (name) order. Shared: topology placements come
    /// from the snapshot's domain index without copying.
    pub nodes: Arc<[NodeId]>,
}

/// What a generator produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GeneratedPlacements {
    pub placements: Vec<Placement>,
    /// Why no placement was produced, for the group's message.
    pub note: Option<String>,
}

/// PlacementGenerate: candidate placements for a group inside a parent placement.
pub trait PlacementGenerate: Send + Sync {
    /// Plugin name.
    fn name(&self) -> &'static str;
    /// Whether the plugin restricts this group at all (false: it would return the parent).
    fn applies(&self, cycle: &GroupCycle) -> bool;
    /// Placements inside `parent`. An `Err` (status Error) fails the group's cycle.
    fn generate(
        &self,
        snap: &Snapshot,
        cycle: &GroupCycle,
        parent: &Placement,
    ) -> Result<GeneratedPlacements, Status>;
}

/// Progress of a group inside one placement, as PlacementFeasible sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlacementProgress {
    /// Members not yet tried.
    pub remaining: u32,
    /// Members already bound or assumed plus those placed so far in this placement.
    pub scheduled: u32,
    /// Pods placed so far in this placement.
    pub placed: u32,
}

/// PlacementFeasible (KEP-5732 beta "early rejection"): called before the first pod and
/// after every pod. `Unschedulable` stops the evaluation, `Wait` means "not yet", and a
/// final `Wait` counts as unschedulable.
pub trait PlacementFeasible: Send + Sync {
    /// Plugin name.
    fn name(&self) -> &'static str;
    /// The verdict for the progress so far.
    fn feasible(&self, cycle: &GroupCycle, progress: PlacementProgress) -> Status;
}

/// Sums over a placement's nodes before the cycle's pods are assumed (the numbers the
/// snapshot keeps per topology domain): allocatable, requested, requested with kube's
/// non-zero defaults (scoring view) and clamped free capacity.
pub type PlacementAggregate = DomainAggregate;

/// A feasible placement handed to PlacementScore: which pods fit there (not on which
/// nodes: placements may be evaluated by counting) and the placement's aggregates.
#[derive(Debug, Clone, Copy)]
pub struct PlacementCandidate<'a> {
    pub placement: &'a Placement,
    /// Indexes (into [`GroupCycle::pods`]) of the pods that fit in the placement.
    pub placed_pods: &'a [usize],
    /// Members already scheduled plus `placed_pods`.
    pub scheduled_total: u32,
    pub aggregate: &'a PlacementAggregate,
}

/// PlacementScore (+ NormalizePlacementScore).
pub trait PlacementScore: Send + Sync {
    /// Plugin name (also the key of its weight in [`SchedulerConfig::plugin_weights`]).
    fn name(&self) -> &'static str;
    /// Raw score of one feasible placement.
    fn score(
        &self,
        snap: &Snapshot,
        cycle: &GroupCycle,
        candidate: &PlacementCandidate<'_>,
    ) -> Result<i64, Status>;
    /// Rewrites the raw scores of all candidates (same order).
    fn normalize(&self, _cycle: &GroupCycle, _scores: &mut [i64]) -> Result<(), Status> {
        Ok(())
    }
}

/// The configured placement plugins.
pub struct PlacementFramework {
    pub generators: Vec<Box<dyn PlacementGenerate>>,
    pub feasible: Vec<Box<dyn PlacementFeasible>>,
    /// Score plugins with their weights (weight 0 leaves a plugin out).
    pub scorers: Vec<(Box<dyn PlacementScore>, i64)>,
    /// `TopologyAwareWorkloadScheduling` gate.
    pub tas_enabled: bool,
    /// `percentageOfPlacementsToScore` (`None`: adaptive).
    pub percentage_of_placements_to_score: Option<u32>,
}

impl std::fmt::Debug for PlacementFramework {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlacementFramework")
            .field("generators", &self.generators.iter().map(|g| g.name()).collect::<Vec<_>>())
            .field("feasible", &self.feasible.iter().map(|g| g.name()).collect::<Vec<_>>())
            .field("scorers", &self.scorers.iter().map(|(s, w)| (s.name(), *w)).collect::<Vec<_>>())
            .field("tas_enabled", &self.tas_enabled)
            .finish()
    }
}

impl PlacementFramework {
    /// The default placement plugins for `config`: TopologyPlacementGenerator, GangScheduling
    /// (when its gate is on), PodGroupPodsCount and NodeResourcesFit (weights from
    /// `config`, default 1).
    pub fn new(config: &SchedulerConfig) -> PlacementFramework {
        let mut feasible: Vec<Box<dyn PlacementFeasible>> = Vec::new();
        if config.gates.enabled(GATE_GANG) {
            feasible.push(Box::new(GangScheduling));
        }
        let mut scorers: Vec<(Box<dyn PlacementScore>, i64)> = Vec::new();
        let pods_count = PodGroupPodsCount;
        let w = config.weight(pods_count.name(), 1);
        if w != 0 {
            scorers.push((Box::new(pods_count), w));
        }
        let fit = NodeResourcesFitPlacement::new(&config.placement_scoring_strategy);
        let w = config.weight(fit.name(), 1);
        if w != 0 {
            scorers.push((Box::new(fit), w));
        }
        PlacementFramework {
            generators: vec![Box::new(TopologyPlacementGenerator)],
            feasible,
            scorers,
            tas_enabled: config.gates.enabled(GATE_TAS),
            percentage_of_placements_to_score: config.percentage_of_placements_to_score,
        }
    }

    /// Whether the group goes through placement generation (gate on and some generator
    /// restricts it).
    pub fn constrains(&self, cycle: &GroupCycle) -> bool {
        self.tas_enabled && self.generators.iter().any(|g| g.applies(cycle))
    }

    /// Runs every applicable generator inside `parent` and intersects their results.
    pub fn generate(
        &self,
        snap: &Snapshot,
        cycle: &GroupCycle,
        parent: &Placement,
    ) -> Result<GeneratedPlacements, Status> {
        let mut combined: Option<GeneratedPlacements> = None;
        for g in self.generators.iter().filter(|g| g.applies(cycle)) {
            let next = g.generate(snap, cycle, parent)?;
            combined = Some(match combined {
                None => next,
                Some(prev) => GeneratedPlacements {
                    placements: intersect_placements(&prev.placements, &next.placements),
                    note: prev.note.or(next.note),
                },
            });
        }
        let mut out =
            combined.unwrap_or_else(|| GeneratedPlacements { placements: vec![parent.clone()], note: None });
        out.placements.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

/// Non-empty pairwise intersections of two placement lists, named `a/b`.
pub fn intersect_placements(a: &[Placement], b: &[Placement]) -> Vec<Placement> {
    let mut out = Vec::new();
    for pb in b {
        let set: rustc_hash::FxHashSet<NodeId> = pb.nodes.iter().copied().collect();
        for pa in a {
            let nodes: Vec<NodeId> = pa.nodes.iter().copied().filter(|n| set.contains(n)).collect();
            if !nodes.is_empty() {
                out.push(Placement { name: format!("{}/{}", pa.name, pb.name).into(), nodes: nodes.into() });
            }
        }
    }
    out.sort_by(|x, y| x.name.cmp(&y.name));
    out
}

// ---------------------------------------------------------------------------------------
// Percentage of placements to score (SEMANTICS §8).
// ---------------------------------------------------------------------------------------

/// How many feasible placements to find before scoring: with `n` = nodes summed over all
/// placements and `p` placements, `percent` = the configured value if > 0, else
/// `max(5, 100 - n * 9 / 500)`; result `max(1, p * percent / 100)`.
pub fn placements_to_find(configured: Option<u32>, total_nodes: usize, placements: usize) -> usize {
    let percent = match configured {
        Some(p) if p > 0 => u64::from(p.min(100)),
        _ => {
            let n = total_nodes as u64;
            100u64.saturating_sub(n.saturating_mul(9) / 500).max(5)
        }
    };
    let found = (placements as u64).saturating_mul(percent) / 100;
    usize::try_from(found.max(1)).unwrap_or(usize::MAX)
}

// ---------------------------------------------------------------------------------------
// Aggregate pre-filter.
// ---------------------------------------------------------------------------------------

/// What the pods to place need, computed once per cycle.
#[derive(Debug, Clone)]
enum Demand {
    /// All pods request the same: count copies per node.
    Uniform { requests: Resources, needed: u32 },
    /// Mixed requests: per resource, the sum of the `needed` smallest requests.
    Mixed { sum: Resources, needed: u32 },
}

impl Demand {
    fn new(cycle: &GroupCycle) -> Demand {
        let needed = cycle.needed().min(u32::try_from(cycle.pods.len()).unwrap_or(u32::MAX)).max(1);
        let first = cycle.pods.first().map(|p| &p.requests);
        if let Some(first) = first {
            if cycle.pods.iter().all(|p| &p.requests == first) {
                return Demand::Uniform { requests: first.clone(), needed };
            }
        }
        let mut names: Vec<&str> = Vec::new();
        for p in &cycle.pods {
            for (name, _) in p.requests.iter_nonzero() {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        let mut sum = Resources::default();
        let mut values: Vec<i64> = Vec::with_capacity(cycle.pods.len());
        for name in names {
            values.clear();
            values.extend(cycle.pods.iter().map(|p| p.requests.get(name)));
            values.sort_unstable();
            let s: i64 = values.iter().take(needed as usize).sum();
            sum.set(name, s);
        }
        Demand::Mixed { sum, needed }
    }
}

/// Why the pre-filter rejected a placement. The limiting resource of a uniform group is
/// looked up only when a message is built (most rejected placements never need one).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rejection {
    /// The named limiting resource (`Insufficient cpu`, `Too many pods`).
    Reason(String),
    /// Fewer copies of the uniform pod fit than the group needs.
    UniformShort,
}

impl Rejection {
    /// The message naming the limiting resource.
    fn message(&self, snap: &Snapshot, nodes: &[NodeId], demand: &Demand) -> String {
        match (self, demand) {
            (Rejection::Reason(r), _) => r.clone(),
            (Rejection::UniformShort, Demand::Uniform { requests, needed }) => {
                limiting_uniform(snap, nodes, requests, u64::from(*needed))
            }
            (Rejection::UniformShort, Demand::Mixed { .. }) => "Insufficient resources".to_string(),
        }
    }
}

/// Aggregates a placement and checks whether its free capacity can hold the pods the group
/// needs. Sound: a placement it rejects cannot be feasible.
fn prefilter(snap: &Snapshot, nodes: &[NodeId], demand: &Demand) -> Result<(), Rejection> {
    prefilter_with(snap, nodes, &sum_nodes(snap, nodes), demand)
}

/// The sums of `nodes`.
fn sum_nodes(snap: &Snapshot, nodes: &[NodeId]) -> PlacementAggregate {
    let mut agg = PlacementAggregate::default();
    for &id in nodes {
        agg.add_node(snap.node(id));
    }
    agg
}

/// [`prefilter`] with the placement's sums already known (the snapshot's domain index).
/// A uniform group is first checked against the aggregate bound (no node visited), then,
/// if the bound allows it, by exact copies per node.
fn prefilter_with(
    snap: &Snapshot,
    nodes: &[NodeId],
    agg: &DomainAggregate,
    demand: &Demand,
) -> Result<(), Rejection> {
    match demand {
        Demand::Uniform { requests, needed } => {
            let needed = u64::from(*needed);
            if agg.copies_upper_bound(requests) < needed {
                return Err(Rejection::UniformShort);
            }
            let copies: u64 = nodes.iter().map(|&id| u64::from(fit_count_on(snap.node(id), requests))).sum();
            if copies >= needed {
                Ok(())
            } else {
                Err(Rejection::UniformShort)
            }
        }
        Demand::Mixed { sum, needed } => {
            if agg.free.pods < i64::from(*needed) {
                return Err(Rejection::Reason("Too many pods".to_string()));
            }
            for (name, want) in sum.iter_nonzero() {
                if agg.free.get(name) < want {
                    return Err(Rejection::Reason(format!("Insufficient {name}")));
                }
            }
            Ok(())
        }
    }
}

/// The resource that limits copies of `requests` in `nodes` below `needed` (failure path
/// only): the first (pods, cpu, memory, ephemeral-storage, extended by name) whose own copy
/// count is short, else the one with the fewest copies.
fn limiting_uniform(snap: &Snapshot, nodes: &[NodeId], requests: &Resources, needed: u64) -> String {
    let mut dims: Vec<(&str, i64)> = vec![(PODS, 1)];
    dims.extend(requests.iter_nonzero());
    let mut fewest: Option<(u64, &str)> = None;
    for (name, req) in dims {
        if req <= 0 {
            continue;
        }
        let copies: u64 = nodes
            .iter()
            .map(|&id| {
                let n = snap.node(id);
                let free = n.info.allocatable.get(name) - n.requested.get(name);
                u64::try_from((free / req).max(0)).unwrap_or(0)
            })
            .sum();
        if copies < needed {
            return reason_for(name);
        }
        if fewest.is_none_or(|(c, _)| copies < c) {
            fewest = Some((copies, name));
        }
    }
    fewest.map(|(_, n)| reason_for(n)).unwrap_or_else(|| "Insufficient resources".to_string())
}

fn reason_for(resource: &str) -> String {
    if resource == PODS {
        "Too many pods".to_string()
    } else {
        format!("Insufficient {resource}")
    }
}

// ---------------------------------------------------------------------------------------
// Hierarchical TAS hook.
// ---------------------------------------------------------------------------------------

/// One PodGroup's result of a hierarchical (seed 002) cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct HierarchicalResult {
    /// What to do with the group's pods: `Scheduled` (no placement name) or
    /// `Unschedulable` / `Error` with the Kueue-like message.
    pub outcome: GroupOutcome,
    /// On success, the group's `TopologyAssignment` (compact v1beta2 encoding) as JSON, for
    /// the [`placer_api::annotations::TOPOLOGY_ASSIGNMENT`] annotation.
    pub topology_assignment: Option<String>,
}

/// The hierarchical topology-aware scheduling of seed 002 (`crate::tas`), used for every
/// PodGroup when `config.topology_levels` is non-empty.
///
/// `cycles` is a unit decided together: one PodGroup, or the leader and workers PodGroups
/// of a PodSet group (same `kueue.x-k8s.io/podset-group-name`), bound both or neither. The
/// algorithm chooses domains and per-leaf counts; every pod is then confirmed by the
/// pod-level filters of `ctx.algo` (see [`crate::tas::engine_bridge`]). Returns one entry
/// per cycle, `None` for a cycle without pods to place. `snap` is left as found.
pub fn hierarchical_assignment(
    ctx: &GroupContext<'_>,
    snap: &mut Snapshot,
    cache: &mut TasCache,
    cycles: &[&GroupCycle],
) -> Vec<Option<HierarchicalResult>> {
    match place_unit(ctx.algo, ctx.config, snap, cache, cycles) {
        Ok(members) => members
            .into_iter()
            .map(|m| {
                m.map(|m| {
                    let failures =
                        m.left_out.into_iter().map(|(i, why)| (i, group_pod_message(&why))).collect();
                    HierarchicalResult {
                        outcome: GroupOutcome::Scheduled {
                            placement: None,
                            assignments: m.assignments,
                            failures,
                        },
                        topology_assignment: serde_json::to_string(&m.topology_assignment).ok(),
                    }
                })
            })
            .collect(),
        Err(failure) => cycles
            .iter()
            .map(|cycle| {
                if cycle.pods.is_empty() {
                    return None;
                }
                let outcome = if failure.internal {
                    GroupOutcome::Error { message: failure.message.clone() }
                } else {
                    unschedulable_all(cycle, failure.message.clone())
                };
                Some(HierarchicalResult { outcome, topology_assignment: None })
            })
            .collect(),
    }
}

// ---------------------------------------------------------------------------------------
// The placement algorithm.
// ---------------------------------------------------------------------------------------

/// Optional preemption steps of a group cycle (implemented in `crate::preemption`).
#[derive(Default)]
pub struct GroupHooks<'a> {
    /// Per-pod PostFilter inside the cycle (not used for groups with a topology constraint,
    /// SEMANTICS §13).
    pub pod_preemption: Option<&'a mut dyn PodPreemption>,
    /// Workload-aware preemption when the group is unschedulable (not used for groups with
    /// a topology constraint in v1.36).
    pub group_preemption: Option<&'a mut dyn GroupPreemption>,
}

/// The decision for a PodGroup cycle. Pod indexes refer to [`GroupCycle::pods`].
#[derive(Debug, Clone)]
pub enum GroupOutcome {
    /// Bind `assignments`; the pods in `failures` go back to the queue with their message.
    Scheduled {
        /// The chosen placement's name (`None` without a topology constraint).
        placement: Option<String>,
        assignments: Vec<(usize, NodeId)>,
        failures: Vec<(usize, String)>,
    },
    /// Feasible only once `victims` are gone: evict them, nominate `nominations`, retry later.
    WaitingOnPreemption {
        nominations: Vec<(usize, NodeId)>,
        victims: Vec<Arc<PodInfo>>,
        failures: Vec<(usize, String)>,
    },
    /// Not feasible: the group's message and one message per pod.
    Unschedulable { message: String, pod_messages: Vec<(usize, String)> },
    /// The cycle failed (e.g. members in two domains).
    Error { message: String },
}

impl PartialEq for GroupOutcome {
    fn eq(&self, other: &Self) -> bool {
        use GroupOutcome::*;
        match (self, other) {
            (
                Scheduled { placement: p1, assignments: a1, failures: f1 },
                Scheduled { placement: p2, assignments: a2, failures: f2 },
            ) => p1 == p2 && a1 == a2 && f1 == f2,
            (
                WaitingOnPreemption { nominations: n1, victims: v1, failures: f1 },
                WaitingOnPreemption { nominations: n2, victims: v2, failures: f2 },
            ) => n1 == n2 && crate::podgroup::same_pods(v1, v2) && f1 == f2,
            (
                Unschedulable { message: m1, pod_messages: p1 },
                Unschedulable { message: m2, pod_messages: p2 },
            ) => m1 == m2 && p1 == p2,
            (Error { message: m1 }, Error { message: m2 }) => m1 == m2,
            _ => false,
        }
    }
}

/// Everything a group cycle needs besides the snapshot.
pub struct GroupContext<'a> {
    pub placements: &'a PlacementFramework,
    pub algo: &'a dyn PodScheduler,
    pub config: &'a SchedulerConfig,
}

/// How one placement fared.
enum Eval {
    /// Rejected by the aggregate pre-filter; the message is built on demand.
    Prefiltered(Rejection),
    /// Evaluated by the PodGroup cycle.
    Simulated(GroupAttempt),
    /// Evaluated by counting copies (uniform group with node-local filters only).
    Counted { feasible: bool, reason: String },
}

/// One evaluated (or pre-filtered) placement.
struct Evaluated {
    /// Index into the placement list.
    idx: usize,
    eval: Eval,
    /// Pods (indexes into the cycle) that fit there.
    placed_pods: PlacedPods,
    /// Scheduled members plus `placed_pods`.
    scheduled_total: u32,
}

/// Which pods (indexes into the cycle) fit in a placement.
#[derive(Debug, Clone)]
enum PlacedPods {
    /// The first `n` pods (counted placements: identical pods, taken in order).
    First(usize),
    /// These pods (simulated placements).
    Listed(Vec<usize>),
}

impl PlacedPods {
    fn len(&self) -> usize {
        match self {
            PlacedPods::First(n) => *n,
            PlacedPods::Listed(v) => v.len(),
        }
    }

    /// The indexes; `first_indexes` is `0..` at least as long as any `First` count.
    fn as_slice<'a>(&'a self, first_indexes: &'a [usize]) -> &'a [usize] {
        match self {
            PlacedPods::First(n) => &first_indexes[..*n],
            PlacedPods::Listed(v) => v,
        }
    }
}

impl Evaluated {
    fn feasible(&self) -> bool {
        match &self.eval {
            Eval::Prefiltered(_) => false,
            Eval::Simulated(a) => a.is_feasible(),
            Eval::Counted { feasible, .. } => *feasible,
        }
    }
    /// Why the placement is infeasible; `rejection` turns a pre-filter rejection into a
    /// message.
    fn reason(&self, rejection: impl Fn(usize, &Rejection) -> String) -> String {
        match &self.eval {
            Eval::Prefiltered(r) => rejection(self.idx, r),
            Eval::Simulated(a) => a.main_reason(),
            Eval::Counted { reason, .. } => reason.clone(),
        }
    }
}

/// Counts how many pods of a uniform, node-local group fit in `nodes`: the nodes passing
/// the filters for one pod each take as many copies as their free resources allow. Exact
/// for such groups because placing a copy changes only the node's requested resources,
/// which the filters check exactly as the copy count does.
fn count_in_placement(
    algo: &dyn PodScheduler,
    snap: &Snapshot,
    cycle: &GroupCycle,
    nodes: &[NodeId],
    feasible: &[Box<dyn PlacementFeasible>],
) -> Evaluated {
    let pod = &cycle.pods[0];
    let total = cycle.pods.len() as u64;
    let (placed, reason_if_short) = match algo.feasible_nodes(snap, pod, nodes) {
        Err(fit) => (0, crate::podgroup::dominant_reason(&fit).unwrap_or_default()),
        Ok(ok) => {
            let copies: u64 = ok.iter().map(|&n| u64::from(fit_count_on(snap.node(n), &pod.requests))).sum();
            let needed = u64::from(cycle.needed());
            let reason = if copies < needed.min(total) {
                limiting_uniform(snap, &ok, &pod.requests, needed)
            } else {
                String::new()
            };
            (copies.min(total), reason)
        }
    };
    let placed_u32 = u32::try_from(placed).unwrap_or(u32::MAX);
    let scheduled_total = cycle.scheduled_count().saturating_add(placed_u32);
    let progress = PlacementProgress { remaining: 0, scheduled: scheduled_total, placed: placed_u32 };
    let verdict = feasible.iter().map(|p| p.feasible(cycle, progress)).find(|s| !s.is_success());
    let ok = verdict.is_none() && placed > 0;
    let reason = if ok {
        String::new()
    } else if !reason_if_short.is_empty() {
        reason_if_short
    } else {
        verdict.map(|s| s.reasons.join(", ")).unwrap_or_else(|| "no pod of the group fits".to_string())
    };
    Evaluated {
        idx: 0,
        eval: Eval::Counted { feasible: ok, reason },
        placed_pods: PlacedPods::First(placed as usize),
        scheduled_total,
    }
}

/// Runs the placement algorithm for one cycle: generation, pre-filter, evaluation, scoring
/// and selection. `snap` is left as found (every simulation is rolled back).
pub fn schedule_pod_group(
    ctx: &GroupContext<'_>,
    snap: &mut Snapshot,
    cycle: &GroupCycle,
    mut hooks: GroupHooks<'_>,
    obs: &mut dyn Observer,
) -> GroupOutcome {
    if cycle.pods.is_empty() {
        return GroupOutcome::Unschedulable {
            message: "no pod of the group to schedule".to_string(),
            pod_messages: vec![],
        };
    }
    if cycle.gang {
        if let Some(msg) = cycle.cannot_reach_min_count() {
            return unschedulable_all(cycle, msg);
        }
    }
    let pf = ctx.placements;
    let constrained = pf.constrains(cycle);

    if !ctx.config.topology_levels.is_empty() {
        // Seed 002 semantics. The engine calls `hierarchical_assignment` itself (with a
        // cached tree and leader + workers units); this serves direct callers.
        let mut cache = TasCache::new(ctx.config);
        return match hierarchical_assignment(ctx, snap, &mut cache, &[cycle]).pop().flatten() {
            Some(r) => r.outcome,
            None => unschedulable_all(cycle, "no pod of the group to schedule".to_string()),
        };
    }

    if !constrained {
        return schedule_in_all_nodes(ctx, snap, cycle, hooks, obs);
    }

    // The optimized search keeps the key's domains and their sums in the snapshot,
    // re-summing only the domains that changed since the last cycle; the generator and
    // the pre-filter read them instead of every node. The baseline walks the nodes.
    let baseline = ctx.config.placement_search == crate::config::PlacementSearch::Baseline;
    if !baseline {
        if let Some(key) = cycle.group.topology_key.as_deref() {
            snap.refresh_topology_domains(key);
        }
    }

    // Phase 1: generate.
    let parent = Placement { name: "".into(), nodes: snap.all_nodes() };
    let timer = obs.start_timer();
    let generated = pf.generate(snap, cycle, &parent);
    let secs = obs.elapsed_seconds(timer);
    let status = if generated.is_ok() { "Success" } else { "Error" };
    obs.observe(
        METRIC_PLUGIN_EXECUTION_DURATION,
        &[
            ("plugin", crate::plugins::placement_topology::NAME),
            ("extension_point", "PlacementGenerate"),
            ("status", status),
        ],
        secs,
    );
    let generated = match generated {
        Ok(g) => g,
        Err(status) => return GroupOutcome::Error { message: status.reasons.join(", ") },
    };
    let placements = generated.placements;
    obs.count(METRIC_PLACEMENT_TOTAL, &[], placements.len() as u64);
    let key = cycle.group.topology_key.clone().unwrap_or_default();

    // What the group needs, for the aggregate pre-filter of each placement visited.
    let demand = Demand::new(cycle);

    // Order: name order, the placement with the most nominated members first.
    let mut order: Vec<usize> = (0..placements.len()).collect();
    let nominated_first = nominated_placement(snap, cycle, &placements);
    if let Some(first) = nominated_first {
        order.retain(|&i| i != first);
        order.insert(0, first);
    }
    let total_nodes: usize = placements.iter().map(|p| p.nodes.len()).sum();
    let to_find = if pf.scorers.is_empty() {
        usize::MAX
    } else {
        placements_to_find(pf.percentage_of_placements_to_score, total_nodes, placements.len())
    };
    let plan = EvaluationPlan {
        placements: &placements,
        prefilter: (!baseline).then_some(&demand),
        key: &key,
        order: &order,
        to_find,
        nominated_first,
    };

    // Phase 2 and 3, first by counting where that is exact, then (if the winner's
    // simulation disagrees with its count) by simulating every placement.
    let counting = !baseline && crate::podgroup::is_uniform_node_local(cycle);
    for use_counting in [counting, false] {
        let evaluated = evaluate_placements(ctx, snap, cycle, &plan, use_counting, obs);
        if let Some(first) = evaluated.first() {
            if nominated_first == Some(first.idx) && first.feasible() {
                // The nominated placement works: take it without scoring.
                match confirm(ctx, snap, cycle, &placements[first.idx], first) {
                    Some(attempt) => {
                        return scheduled_outcome(cycle, Some(&key), &attempt, Some(&placements[first.idx]))
                    }
                    None => continue,
                }
            }
        }
        let feasible: Vec<&Evaluated> = evaluated.iter().filter(|e| e.feasible()).collect();
        let winner = match feasible.len() {
            0 => {
                let outcome = constrained_unschedulable(
                    snap,
                    &demand,
                    cycle,
                    &key,
                    &placements,
                    &evaluated,
                    generated.note.as_deref(),
                );
                // PREEMPTION HOOK (Placer gate TopologyAwareWorkloadPreemption): the engine
                // passes a group hook for constrained groups only with that gate on.
                return match hooks.group_preemption.as_deref_mut() {
                    None => outcome,
                    Some(wap) => match wap.preempt_in_placements(snap, cycle, &placements) {
                        Ok((_, plan)) => GroupOutcome::WaitingOnPreemption {
                            nominations: plan.nominations,
                            victims: plan.victims,
                            failures: Vec::new(),
                        },
                        Err(reason) => match outcome {
                            GroupOutcome::Unschedulable { message, .. } => {
                                unschedulable_all(cycle, format!("{message}; {reason}"))
                            }
                            other => other,
                        },
                    },
                };
            }
            1 => feasible[0],
            _ => match score_placements(snap, cycle, pf, &placements, &feasible, !baseline) {
                Ok(i) => feasible[i],
                Err(status) => {
                    return GroupOutcome::Error {
                        message: format!("placement scoring failed: {}", status.reasons.join(", ")),
                    }
                }
            },
        };
        if let Some(attempt) = confirm(ctx, snap, cycle, &placements[winner.idx], winner) {
            return scheduled_outcome(cycle, Some(&key), &attempt, Some(&placements[winner.idx]));
        }
    }
    GroupOutcome::Error {
        message: "internal error: the selected placement could not be confirmed".to_string(),
    }
}

/// What phase 2 needs besides the cycle.
struct EvaluationPlan<'a> {
    placements: &'a [Placement],
    /// The pre-filter's input; `None`: no pre-filter (the baseline search).
    prefilter: Option<&'a Demand>,
    /// The topology key (for the snapshot's domain index).
    key: &'a str,
    order: &'a [usize],
    to_find: usize,
    nominated_first: Option<usize>,
}

/// Phase 2: evaluates placements in `plan.order` until `plan.to_find` feasible ones are
/// found (or the nominated placement, evaluated first, is feasible).
fn evaluate_placements(
    ctx: &GroupContext<'_>,
    snap: &mut Snapshot,
    cycle: &GroupCycle,
    plan: &EvaluationPlan<'_>,
    counting: bool,
    obs: &mut dyn Observer,
) -> Vec<Evaluated> {
    let pf = ctx.placements;
    let mut evaluated: Vec<Evaluated> = Vec::new();
    let mut found = 0usize;
    for (pos, &idx) in plan.order.iter().enumerate() {
        let timer = obs.start_timer();
        let rejected = plan.prefilter.and_then(|demand| {
            let p = &plan.placements[idx];
            match cached_sums(snap.topology_domains(plan.key), idx, p) {
                Some(sums) => prefilter_with(snap, &p.nodes, sums, demand),
                None => prefilter(snap, &p.nodes, demand),
            }
            .err()
        });
        let e = if let Some(rejection) = rejected {
            Evaluated {
                idx,
                eval: Eval::Prefiltered(rejection),
                placed_pods: PlacedPods::First(0),
                scheduled_total: cycle.scheduled_count(),
            }
        } else if counting {
            let mut e = count_in_placement(ctx.algo, snap, cycle, &plan.placements[idx].nodes, &pf.feasible);
            e.idx = idx;
            e
        } else {
            let mark = snap.checkpoint();
            // v1.36: groups with a topology constraint never preempt (SEMANTICS §13).
            let attempt =
                run_group_in_nodes(ctx.algo, snap, cycle, &plan.placements[idx].nodes, &pf.feasible, None);
            snap.rollback(mark);
            Evaluated {
                idx,
                placed_pods: PlacedPods::Listed(attempt.placed.iter().map(|(i, _)| *i).collect()),
                scheduled_total: attempt.scheduled_total(cycle),
                eval: Eval::Simulated(attempt),
            }
        };
        let feasible = e.feasible();
        let secs = obs.elapsed_seconds(timer);
        record_evaluation(obs, feasible, secs);
        evaluated.push(e);
        if feasible {
            found += 1;
            if pos == 0 && plan.nominated_first == Some(idx) {
                break;
            }
        }
        if found >= plan.to_find {
            break;
        }
    }
    evaluated
}

/// The per-pod assignment of a chosen placement: the simulation already done, or (for a
/// counted placement) a simulation now, which must agree with the count.
fn confirm(
    ctx: &GroupContext<'_>,
    snap: &mut Snapshot,
    cycle: &GroupCycle,
    placement: &Placement,
    chosen: &Evaluated,
) -> Option<GroupAttempt> {
    match &chosen.eval {
        Eval::Simulated(a) => Some(a.clone()),
        Eval::Prefiltered(_) => None,
        Eval::Counted { .. } => {
            let mark = snap.checkpoint();
            let attempt =
                run_uniform_group_in_nodes(ctx.algo, snap, cycle, &placement.nodes, &ctx.placements.feasible);
            snap.rollback(mark);
            (attempt.is_feasible() && attempt.placed.len() == chosen.placed_pods.len()).then_some(attempt)
        }
    }
}

fn record_evaluation(obs: &mut dyn Observer, feasible: bool, secs: f64) {
    let result = if feasible { "feasible" } else { "infeasible" };
    obs.count(METRIC_PLACEMENT_EVALUATIONS, &[("result", result)], 1);
    obs.observe(METRIC_PLACEMENT_EVALUATION_DURATION, &[("result", result)], secs);
}

/// The single-placement path: every node (no constraint, or the gate off).
fn schedule_in_all_nodes(
    ctx: &GroupContext<'_>,
    snap: &mut Snapshot,
    cycle: &GroupCycle,
    hooks: GroupHooks<'_>,
    obs: &mut dyn Observer,
) -> GroupOutcome {
    let pf = ctx.placements;
    let nodes: Vec<NodeId> = snap.node_ids().to_vec();
    if pf.tas_enabled {
        obs.count(METRIC_PLACEMENT_TOTAL, &[], 1);
    }
    let timer = obs.start_timer();
    let mark = snap.checkpoint();
    let attempt = run_group_in_nodes(ctx.algo, snap, cycle, &nodes, &pf.feasible, hooks.pod_preemption);
    snap.rollback(mark);
    let secs = obs.elapsed_seconds(timer);
    if pf.tas_enabled {
        record_evaluation(obs, attempt.is_feasible(), secs);
    }
    if attempt.is_feasible() {
        if attempt.preemptions.is_empty() {
            return scheduled_outcome(cycle, None, &attempt, None);
        }
        let mut victims: Vec<Arc<PodInfo>> = Vec::new();
        for p in &attempt.preemptions {
            for v in &p.victims {
                if !victims.iter().any(|x| x.key == v.key) {
                    victims.push(v.clone());
                }
            }
        }
        let failures = attempt.failed.iter().map(|(i, fit)| (*i, fit.to_string())).collect();
        return GroupOutcome::WaitingOnPreemption { nominations: attempt.placed.clone(), victims, failures };
    }
    let mut message = unconstrained_message(cycle, &attempt);
    if let Some(wap) = hooks.group_preemption {
        match wap.preempt(snap, cycle, &nodes) {
            Ok(plan) => {
                return GroupOutcome::WaitingOnPreemption {
                    nominations: plan.nominations,
                    victims: plan.victims,
                    failures: Vec::new(),
                }
            }
            Err(reason) => message = format!("{message}; {reason}"),
        }
    }
    unschedulable_from_attempt(cycle, message, &attempt, false)
}

/// Group message without a topology constraint: how many pods fit of how many needed, and
/// why the first pod that did not fit failed.
fn unconstrained_message(cycle: &GroupCycle, attempt: &GroupAttempt) -> String {
    let fit = attempt.scheduled_total(cycle);
    let detail = match attempt.failed.first() {
        Some((_, e)) => e.to_string(),
        None => match &attempt.verdict {
            Verdict::Unschedulable(m) => m.clone(),
            Verdict::Feasible => String::new(),
        },
    };
    format!("{fit}/{} pods fit: {detail}", cycle.min_count)
}

fn group_pod_message(message: &str) -> String {
    format!("{MSG_GROUP_UNSCHEDULABLE}: {message}")
}

fn unschedulable_all(cycle: &GroupCycle, message: String) -> GroupOutcome {
    let pm = group_pod_message(&message);
    GroupOutcome::Unschedulable {
        pod_messages: (0..cycle.pods.len()).map(|i| (i, pm.clone())).collect(),
        message,
    }
}

/// Unschedulable outcome from one attempt: pods that failed keep their own FitError (unless
/// `group_message_for_all`), the others get the group message.
fn unschedulable_from_attempt(
    cycle: &GroupCycle,
    message: String,
    attempt: &GroupAttempt,
    group_message_for_all: bool,
) -> GroupOutcome {
    let pm = group_pod_message(&message);
    let mut pod_messages: Vec<(usize, String)> = (0..cycle.pods.len()).map(|i| (i, pm.clone())).collect();
    if !group_message_for_all {
        for (i, fit) in &attempt.failed {
            if let Some(slot) = pod_messages.get_mut(*i) {
                slot.1 = fit.to_string();
            }
        }
    }
    GroupOutcome::Unschedulable { message, pod_messages }
}

fn scheduled_outcome(
    cycle: &GroupCycle,
    key: Option<&str>,
    attempt: &GroupAttempt,
    placement: Option<&Placement>,
) -> GroupOutcome {
    let suffix = match (key, placement) {
        (Some(k), Some(p)) => {
            format!(" Pods of PodGroup {} must share one {k} domain: {:?}.", cycle.group.key, p.name)
        }
        _ => String::new(),
    };
    let mut failures: Vec<(usize, String)> =
        attempt.failed.iter().map(|(i, fit)| (*i, format!("{fit}{suffix}"))).collect();
    for &i in &attempt.skipped {
        failures.push((i, format!("{MSG_GROUP_UNSCHEDULABLE}: pod was not tried")));
    }
    GroupOutcome::Scheduled {
        placement: placement.map(|p| p.name.to_string()),
        assignments: attempt.placed.clone(),
        failures,
    }
}

/// Group message when no placement is feasible, e.g.
/// `0/8 placements for rack can hold minCount=16: 6 Insufficient nvidia.com/gpu, 2 node(s)
/// didn't match Pod's node affinity/selector; best placement "r3" fits 12/16 pods`.
fn constrained_unschedulable(
    snap: &Snapshot,
    demand: &Demand,
    cycle: &GroupCycle,
    key: &str,
    placements: &[Placement],
    evaluated: &[Evaluated],
    note: Option<&str>,
) -> GroupOutcome {
    let need =
        if cycle.gang { format!("minCount={}", cycle.min_count) } else { "any pod of the group".to_string() };
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for e in evaluated {
        let reason = e.reason(|i, r| r.message(snap, &placements[i].nodes, demand));
        *reasons.entry(reason).or_insert(0) += 1;
    }
    let detail = if placements.is_empty() {
        note.map(str::to_string).unwrap_or_else(|| format!("no node has label {key:?}"))
    } else {
        reasons.iter().map(|(r, n)| format!("{n} {r}")).collect::<Vec<_>>().join(", ")
    };
    let mut message = format!("0/{} placements for {key} can hold {need}: {detail}", placements.len());
    let best = evaluated
        .iter()
        .filter(|e| !matches!(e.eval, Eval::Prefiltered(_)))
        .map(|e| (e.idx, e.scheduled_total))
        .fold(None::<(usize, u32)>, |best, (i, n)| match best {
            Some((_, b)) if b >= n => best,
            _ => Some((i, n)),
        });
    if let Some((i, n)) = best {
        if n > 0 {
            message.push_str(&format!(
                "; best placement {:?} fits {n}/{} pods",
                placements[i].name, cycle.min_count
            ));
        }
    }
    unschedulable_all(cycle, message)
}

/// The placement holding the most members' `nominatedNodeName` (strictly more than the
/// previous best, so the first in name order on ties); `None` if no member is nominated.
fn nominated_placement(snap: &Snapshot, cycle: &GroupCycle, placements: &[Placement]) -> Option<usize> {
    let mut nominated: FxHashMap<NodeId, u32> = FxHashMap::default();
    for p in &cycle.pods {
        if let Some(id) = p.nominated_node_name.as_deref().and_then(|n| snap.node_id(n)) {
            *nominated.entry(id).or_insert(0) += 1;
        }
    }
    if nominated.is_empty() {
        return None;
    }
    let mut best: Option<(usize, u32)> = None;
    for (i, p) in placements.iter().enumerate() {
        let count: u32 = p.nodes.iter().filter_map(|n| nominated.get(n)).sum();
        if count > best.map_or(0, |(_, c)| c) {
            best = Some((i, count));
        }
    }
    best.map(|(i, _)| i)
}

/// The sums of placement `i` kept by the domain index, when the placement is the index's
/// domain of that name (same nodes) and its sums are fresh.
fn cached_sums<'a>(
    index: Option<&'a TopologyDomains>,
    i: usize,
    p: &Placement,
) -> Option<&'a DomainAggregate> {
    let index = index?;
    // Placements generated from the index come in its order: try position `i` first.
    let d = match index.domains().get(i) {
        Some(d) if Arc::ptr_eq(&d.value, &p.name) || d.value == p.name => d,
        _ => index.find(&p.name)?,
    };
    if Arc::ptr_eq(&d.nodes, &p.nodes) || d.nodes == p.nodes {
        d.aggregate()
    } else {
        None
    }
}

/// Scores feasible placements; returns the index (into `feasible`) of the winner. The
/// placements' sums come from the domain index when `use_index` and it holds them fresh.
fn score_placements(
    snap: &Snapshot,
    cycle: &GroupCycle,
    pf: &PlacementFramework,
    placements: &[Placement],
    feasible: &[&Evaluated],
    use_index: bool,
) -> Result<usize, Status> {
    let index =
        cycle.group.topology_key.as_deref().filter(|_| use_index).and_then(|k| snap.topology_domains(k));
    let aggregates: Vec<std::borrow::Cow<'_, PlacementAggregate>> = feasible
        .iter()
        .map(|e| {
            let p = &placements[e.idx];
            match cached_sums(index, e.idx, p) {
                Some(sums) => std::borrow::Cow::Borrowed(sums),
                None => std::borrow::Cow::Owned(sum_nodes(snap, &p.nodes)),
            }
        })
        .collect();
    let first_indexes: Vec<usize> = (0..cycle.pods.len()).collect();
    let candidates: Vec<PlacementCandidate<'_>> = feasible
        .iter()
        .zip(&aggregates)
        .map(|(e, aggregate)| PlacementCandidate {
            placement: &placements[e.idx],
            placed_pods: e.placed_pods.as_slice(&first_indexes),
            scheduled_total: e.scheduled_total,
            aggregate,
        })
        .collect();
    let totals = total_scores(snap, cycle, pf, &candidates)?;
    Ok(select_best(&candidates, &totals))
}

/// Weighted sum of normalized scores of every candidate (same order).
pub fn total_scores(
    snap: &Snapshot,
    cycle: &GroupCycle,
    pf: &PlacementFramework,
    candidates: &[PlacementCandidate<'_>],
) -> Result<Vec<i64>, Status> {
    let mut totals = vec![0i64; candidates.len()];
    let mut scores = vec![0i64; candidates.len()];
    for (plugin, weight) in &pf.scorers {
        for (s, c) in scores.iter_mut().zip(candidates) {
            *s = plugin.score(snap, cycle, c)?;
        }
        plugin.normalize(cycle, &mut scores)?;
        for (t, s) in totals.iter_mut().zip(&scores) {
            *t = t.saturating_add(s.saturating_mul(*weight));
        }
    }
    Ok(totals)
}

/// Highest total wins; equal totals go to the lexicographically smallest name.
fn select_best(candidates: &[PlacementCandidate<'_>], totals: &[i64]) -> usize {
    let mut best = 0;
    for i in 1..candidates.len() {
        let better = totals[i] > totals[best]
            || (totals[i] == totals[best] && candidates[i].placement.name < candidates[best].placement.name);
        if better {
            best = i;
        }
    }
    best
}

/// Requested resources of a placement after the attempt's pods (non-zero view).
pub fn requested_after(cycle: &GroupCycle, candidate: &PlacementCandidate<'_>) -> Resources {
    let mut r = candidate.aggregate.requested_non_zero.clone();
    for &i in candidate.placed_pods {
        if let Some(p) = cycle.pods.get(i) {
            // `r += non_zero(p.requests)` without building the copy.
            r.add(&p.requests);
            if p.requests.cpu == 0 {
                r.cpu += DEFAULT_MILLI_CPU_REQUEST;
            }
            if p.requests.memory == 0 {
                r.memory += DEFAULT_MEMORY_REQUEST;
            }
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observer::NoopObserver;
    use crate::podgroup::tests::{group, node, pod, FirstFit};
    use crate::podgroup::GroupCycle;
    use proptest::prelude::*;

    fn snap_of(nodes: &[(&str, i64, &str)]) -> Snapshot {
        let mut s = Snapshot::new();
        for (name, cpu, rack) in nodes {
            s.upsert_node(node(name, *cpu, &[("rack", rack)]));
        }
        s
    }

    fn gang_cycle(n: usize, cpu_milli: i64, min: i32) -> GroupCycle {
        let pods = (0..n).map(|i| (i as u64, pod(&format!("p{i}"), cpu_milli, Some("pg"), None))).collect();
        GroupCycle::new(group("pg", Some(min), Some("rack")), true, pods, vec![])
    }

    fn run(snap: &mut Snapshot, cycle: &GroupCycle, config: &SchedulerConfig) -> GroupOutcome {
        let pf = PlacementFramework::new(config);
        let ctx = GroupContext { placements: &pf, algo: &FirstFit, config };
        schedule_pod_group(&ctx, snap, cycle, GroupHooks::default(), &mut NoopObserver)
    }

    fn chosen_racks(snap: &Snapshot, outcome: &GroupOutcome) -> Vec<String> {
        match outcome {
            GroupOutcome::Scheduled { assignments, .. } => {
                let mut v: Vec<String> = assignments
                    .iter()
                    .map(|(_, n)| snap.node(*n).info.label("rack").unwrap_or("").to_string())
                    .collect();
                v.dedup();
                v
            }
            other => panic!("expected Scheduled, got {other:?}"),
        }
    }

    #[test]
    fn percentage_formula_follows_the_proposal() {
        assert_eq!(placements_to_find(None, 0, 10), 10, "100% for tiny clusters");
        assert_eq!(placements_to_find(None, 5000, 250), 25, "10% at 5000 nodes");
        assert_eq!(placements_to_find(None, 100_000, 1000), 50, "floor of 5%");
        assert_eq!(placements_to_find(None, 5000, 3), 1, "at least one");
        assert_eq!(placements_to_find(Some(50), 5000, 10), 5, "explicit value wins");
        assert_eq!(placements_to_find(Some(0), 0, 4), 4, "0 means adaptive");
    }

    #[test]
    fn gang_lands_on_the_only_rack_with_room() {
        // SEMANTICS scenario 001: rack-2 is half full, rack-3 has one node.
        let mut snap = snap_of(&[
            ("n1", 2000, "rack-1"),
            ("n2", 2000, "rack-1"),
            ("n3", 2000, "rack-1"),
            ("n4", 2000, "rack-2"),
            ("n5", 2000, "rack-2"),
            ("n6", 2000, "rack-3"),
        ]);
        snap.upsert_pod(pod("existing", 2000, None, Some("n4")));
        let c = gang_cycle(3, 1000, 3);
        let out = run(&mut snap, &c, &SchedulerConfig::default());
        assert_eq!(chosen_racks(&snap, &out), ["rack-1"]);
        assert_eq!(snap.node(snap.node_id("n1").unwrap()).requested.cpu, 0, "snapshot left as found");
    }

    #[test]
    fn scoring_prefers_the_fuller_rack_75_over_50() {
        let mut snap = snap_of(&[
            ("n1", 2000, "rack-1"),
            ("n2", 2000, "rack-1"),
            ("n3", 2000, "rack-2"),
            ("n4", 2000, "rack-2"),
            ("n5", 2000, "rack-2"),
            ("n6", 2000, "rack-3"),
        ]);
        let c = gang_cycle(3, 1000, 3);
        let out = run(&mut snap, &c, &SchedulerConfig::default());
        assert_eq!(chosen_racks(&snap, &out), ["rack-1"]);
    }

    #[test]
    fn scoring_counts_existing_pods_83_beats_75() {
        let mut snap = snap_of(&[
            ("n1", 2000, "rack-1"),
            ("n2", 2000, "rack-1"),
            ("n3", 2000, "rack-2"),
            ("n4", 2000, "rack-2"),
            ("n5", 2000, "rack-2"),
            ("n6", 2000, "rack-3"),
            ("n7", 2000, "rack-3"),
            ("n8", 2000, "rack-3"),
            ("n9", 2000, "rack-4"),
        ]);
        snap.upsert_pod(pod("e1", 2000, None, Some("n3")));
        snap.upsert_pod(pod("e2", 1000, None, Some("n8")));
        let c = gang_cycle(3, 1000, 3);
        let out = run(&mut snap, &c, &SchedulerConfig::default());
        assert_eq!(chosen_racks(&snap, &out), ["rack-2"]);
    }

    #[test]
    fn least_allocated_strategy_prefers_the_emptier_rack() {
        let mut snap = snap_of(&[
            ("n1", 2000, "a"),
            ("n2", 2000, "a"),
            ("n3", 2000, "b"),
            ("n4", 2000, "b"),
            ("n5", 2000, "b"),
        ]);
        let c = gang_cycle(3, 1000, 3);
        let config = SchedulerConfig {
            placement_scoring_strategy: crate::config::ScoringStrategy::least_allocated(),
            ..SchedulerConfig::default()
        };
        let out = run(&mut snap, &c, &config);
        assert_eq!(chosen_racks(&snap, &out), ["b"]);
    }

    #[test]
    fn baseline_search_reaches_the_same_decision_without_shortcuts() {
        let racks = [("n1", 2000, "r1"), ("n2", 1000, "r2"), ("n3", 2000, "r3"), ("n4", 2000, "r3")];
        let baseline = SchedulerConfig {
            placement_search: crate::config::PlacementSearch::Baseline,
            ..SchedulerConfig::default()
        };
        for (pods, min) in [(2, 2), (3, 3), (4, 4)] {
            let c = gang_cycle(pods, 1000, min);
            let (mut a, mut b) = (snap_of(&racks), snap_of(&racks));
            let optimized = run(&mut a, &c, &SchedulerConfig::default());
            let plain = run(&mut b, &c, &baseline);
            assert_eq!(format!("{optimized:?}"), format!("{plain:?}"), "{pods} pods");
        }
        // Infeasible everywhere: both fail; the baseline, having simulated, also names the
        // best placement it tried.
        let c = gang_cycle(5, 1000, 5);
        assert!(matches!(run(&mut snap_of(&racks), &c, &baseline), GroupOutcome::Unschedulable { .. }));
        assert!(matches!(
            run(&mut snap_of(&racks), &c, &SchedulerConfig::default()),
            GroupOutcome::Unschedulable { .. }
        ));
    }

    #[test]
    fn equal_scores_go_to_the_smallest_name() {
        let mut snap = snap_of(&[("n1", 2000, "zeta"), ("n2", 2000, "alpha"), ("n3", 2000, "mid")]);
        let c = gang_cycle(2, 1000, 2);
        let out = run(&mut snap, &c, &SchedulerConfig::default());
        assert_eq!(chosen_racks(&snap, &out), ["alpha"]);
    }

    #[test]
    fn no_fitting_rack_names_placements_and_the_limiting_resource() {
        let mut snap = snap_of(&[("n1", 2000, "r1"), ("n2", 1000, "r2"), ("n3", 4000, "r3")]);
        snap.upsert_pod(pod("big", 3000, None, Some("n3")));
        let c = gang_cycle(3, 1000, 3);
        match run(&mut snap, &c, &SchedulerConfig::default()) {
            GroupOutcome::Unschedulable { message, pod_messages } => {
                assert_eq!(message, "0/3 placements for rack can hold minCount=3: 3 Insufficient cpu");
                assert_eq!(pod_messages.len(), 3);
                assert!(pod_messages[0].1.starts_with("pod group is unschedulable: 0/3 placements"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn basic_group_places_what_fits_in_one_rack() {
        let mut snap = snap_of(&[("n1", 2000, "r1"), ("n2", 2000, "r2")]);
        let pods = (0..3).map(|i| (i as u64, pod(&format!("p{i}"), 1000, Some("pg"), None))).collect();
        let c = GroupCycle::new(group("pg", None, Some("rack")), true, pods, vec![]);
        match run(&mut snap, &c, &SchedulerConfig::default()) {
            GroupOutcome::Scheduled { placement, assignments, failures } => {
                assert_eq!(placement.as_deref(), Some("r1"));
                assert_eq!(assignments.len(), 2);
                assert_eq!(failures.len(), 1);
                assert!(failures[0].1.contains("must share one rack domain: \"r1\""), "{}", failures[0].1);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn without_constraint_one_placement_holds_every_node() {
        let mut snap = snap_of(&[("n1", 1000, "r1"), ("n2", 1000, "r2")]);
        let pods = (0..2).map(|i| (i as u64, pod(&format!("p{i}"), 1000, Some("pg"), None))).collect();
        let c = GroupCycle::new(group("pg", Some(2), None), true, pods, vec![]);
        let out = run(&mut snap, &c, &SchedulerConfig::default());
        assert_eq!(chosen_racks(&snap, &out), ["r1", "r2"]);
    }

    #[test]
    fn tas_gate_off_ignores_the_constraint() {
        let mut snap = snap_of(&[("n1", 1000, "r1"), ("n2", 1000, "r2")]);
        let c = gang_cycle(2, 1000, 2);
        let mut config = SchedulerConfig::default();
        config.gates.set(GATE_TAS, false).unwrap();
        let out = run(&mut snap, &c, &config);
        assert_eq!(chosen_racks(&snap, &out), ["r1", "r2"]);
    }

    #[test]
    fn unconstrained_failure_says_how_many_pods_fit() {
        let mut snap = snap_of(&[("n1", 2000, "r1")]);
        let pods = (0..3).map(|i| (i as u64, pod(&format!("p{i}"), 1000, Some("pg"), None))).collect();
        let c = GroupCycle::new(group("pg", Some(3), None), true, pods, vec![]);
        match run(&mut snap, &c, &SchedulerConfig::default()) {
            GroupOutcome::Unschedulable { message, pod_messages } => {
                assert_eq!(message, "2/3 pods fit: 0/1 nodes are available: 1 Insufficient cpu.");
                assert_eq!(pod_messages[2].1, "0/1 nodes are available: 1 Insufficient cpu.");
                assert!(pod_messages[0].1.starts_with("pod group is unschedulable: 2/3 pods fit"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nominated_placement_is_evaluated_first_and_taken() {
        // r2 would score higher (fuller), but the members are nominated to r1.
        let mut snap = snap_of(&[("n1", 4000, "r1"), ("n2", 2000, "r2")]);
        let pods = (0..2)
            .map(|i| {
                let mut p = (*pod(&format!("p{i}"), 1000, Some("pg"), None)).clone();
                p.nominated_node_name = Some("n1".into());
                (i as u64, Arc::new(p))
            })
            .collect();
        let c = GroupCycle::new(group("pg", Some(2), Some("rack")), true, pods, vec![]);
        let out = run(&mut snap, &c, &SchedulerConfig::default());
        assert_eq!(chosen_racks(&snap, &out), ["r1"]);
    }

    #[test]
    fn percentage_limits_the_placements_evaluated() {
        // 4 racks of which r0 and r1 fit; 50% -> 2 feasible to find.
        struct Counter(u64);
        impl Observer for Counter {
            fn count(&mut self, name: &'static str, _l: &[(&'static str, &str)], v: u64) {
                if name == METRIC_PLACEMENT_EVALUATIONS {
                    self.0 += v;
                }
            }
            fn observe(&mut self, _: &'static str, _: &[(&'static str, &str)], _: f64) {}
        }
        let mut snap =
            snap_of(&[("n0", 2000, "r0"), ("n1", 2000, "r1"), ("n2", 2000, "r2"), ("n3", 2000, "r3")]);
        let c = gang_cycle(2, 1000, 2);
        let config =
            SchedulerConfig { percentage_of_placements_to_score: Some(25), ..SchedulerConfig::default() };
        let pf = PlacementFramework::new(&config);
        let ctx = GroupContext { placements: &pf, algo: &FirstFit, config: &config };
        let mut obs = Counter(0);
        let out = schedule_pod_group(&ctx, &mut snap, &c, GroupHooks::default(), &mut obs);
        assert_eq!(chosen_racks(&snap, &out), ["r0"]);
        assert_eq!(obs.0, 1, "25% of 4 placements: stop after the first feasible one");
    }

    #[test]
    fn prefilter_rejects_by_aggregate_and_names_the_resource() {
        let snap = snap_of(&[("n1", 2000, "r"), ("n2", 2000, "r")]);
        let c = gang_cycle(5, 1000, 5);
        let demand = Demand::new(&c);
        assert_eq!(prefilter(&snap, snap.node_ids(), &demand), Err(Rejection::UniformShort));
        let agg = sum_nodes(&snap, snap.node_ids());
        assert_eq!(Rejection::UniformShort.message(&snap, snap.node_ids(), &demand), "Insufficient cpu");
        assert_eq!(agg.allocatable.cpu, 4000);
        let c = gang_cycle(4, 1000, 4);
        assert_eq!(prefilter(&snap, snap.node_ids(), &Demand::new(&c)), Ok(()));
    }

    #[test]
    fn prefilter_for_mixed_requests_sums_the_smallest() {
        let snap = snap_of(&[("n1", 2000, "r")]);
        let pods = vec![
            (0, pod("a", 1500, Some("pg"), None)),
            (1, pod("b", 500, Some("pg"), None)),
            (2, pod("c", 1000, Some("pg"), None)),
        ];
        let c = GroupCycle::new(group("pg", Some(2), Some("rack")), true, pods.clone(), vec![]);
        assert_eq!(prefilter(&snap, snap.node_ids(), &Demand::new(&c)), Ok(()), "500m + 1000m fit in 2 cpu");
        let c = GroupCycle::new(group("pg", Some(3), Some("rack")), true, pods, vec![]);
        assert_eq!(
            prefilter(&snap, snap.node_ids(), &Demand::new(&c)),
            Err(Rejection::Reason("Insufficient cpu".to_string()))
        );
    }

    #[test]
    fn intersections_keep_only_shared_nodes() {
        let a = vec![
            Placement { name: "r1".into(), nodes: vec![NodeId(0), NodeId(1)].into() },
            Placement { name: "r2".into(), nodes: vec![NodeId(2)].into() },
        ];
        let b = vec![Placement { name: "z1".into(), nodes: vec![NodeId(1), NodeId(2)].into() }];
        let got = intersect_placements(&a, &b);
        assert_eq!(
            got,
            vec![
                Placement { name: "r1/z1".into(), nodes: vec![NodeId(1)].into() },
                Placement { name: "r2/z1".into(), nodes: vec![NodeId(2)].into() }
            ]
        );
    }

    proptest! {
        /// Counting copies gives the same verdict, pod count and order of evaluation as
        /// simulating the cycle, for uniform groups, with the real pod-level framework.
        #[test]
        fn counting_agrees_with_simulation(
            nodes in proptest::collection::vec((0i64..4000, 0usize..4, 0i64..3000), 1..12),
            n_pods in 1usize..10,
            cpu in 100i64..2000,
            min in 1i32..10,
            gang in any::<bool>(),
        ) {
            let racks = ["r0", "r1", "r2", "r3"];
            let mut snap = Snapshot::new();
            for (i, (c, r, used)) in nodes.iter().enumerate() {
                snap.upsert_node(node(&format!("n{i}"), *c, &[("rack", racks[*r])]));
                if *used > 0 {
                    snap.upsert_pod(pod(&format!("e{i}"), *used, None, Some(&format!("n{i}"))));
                }
            }
            let pods: Vec<_> = (0..n_pods).map(|i| (i as u64, pod(&format!("p{i}"), cpu, Some("pg"), None))).collect();
            let g = group("pg", if gang { Some(min) } else { None }, Some("rack"));
            let c = GroupCycle::new(g, true, pods, vec![]);
            prop_assert!(crate::podgroup::is_uniform_node_local(&c));
            let config = SchedulerConfig::default();
            let fw = crate::framework::Framework::new(&config);
            let pf = PlacementFramework::new(&config);
            let ctx = GroupContext { placements: &pf, algo: &fw, config: &config };
            let placements = pf.generate(&snap, &c, &Placement { name: "".into(), nodes: snap.node_ids().into() }).unwrap().placements;
            let order: Vec<usize> = (0..placements.len()).collect();
            let plan = EvaluationPlan { placements: &placements, prefilter: None, key: "rack", order: &order, to_find: usize::MAX, nominated_first: None };
            let counted = evaluate_placements(&ctx, &mut snap, &c, &plan, true, &mut NoopObserver);
            let simulated = evaluate_placements(&ctx, &mut snap, &c, &plan, false, &mut NoopObserver);
            prop_assert_eq!(counted.len(), simulated.len());
            for (a, b) in counted.iter().zip(&simulated) {
                prop_assert_eq!(a.idx, b.idx);
                prop_assert_eq!(a.feasible(), b.feasible(), "placement {}", placements[a.idx].name.clone());
                if b.feasible() {
                    prop_assert_eq!(a.placed_pods.len(), b.placed_pods.len());
                    prop_assert_eq!(a.scheduled_total, b.scheduled_total);
                }
                // The shortcut for identical members places them exactly as the
                // simulation does, and leaves the snapshot as found.
                let nodes = &placements[a.idx].nodes;
                let requested: Vec<i64> = snap.nodes().map(|n| n.requested.cpu).collect();
                let fast = crate::podgroup::run_uniform_group_in_nodes(&fw, &mut snap, &c, nodes, &pf.feasible);
                let after: Vec<i64> = snap.nodes().map(|n| n.requested.cpu).collect();
                prop_assert_eq!(requested, after);
                let mark = snap.checkpoint();
                let slow = run_group_in_nodes(&fw, &mut snap, &c, nodes, &pf.feasible, None);
                snap.rollback(mark);
                prop_assert_eq!(&fast.placed, &slow.placed);
                prop_assert_eq!(fast.failed.iter().map(|(i, f)| (*i, f.to_string())).collect::<Vec<_>>(), slow.failed.iter().map(|(i, f)| (*i, f.to_string())).collect::<Vec<_>>());
                prop_assert_eq!(fast.is_feasible(), slow.is_feasible());
            }
        }
    }

    proptest! {
        /// Every pod of a constrained group lands in one domain, a gang places at least
        /// minCount pods or nothing, and identical inputs give identical outcomes.
        #[test]
        fn constrained_groups_share_one_domain(
            nodes in proptest::collection::vec((500i64..4000, 0usize..4), 1..10),
            n_pods in 1usize..8,
            cpu in 100i64..2000,
            min in 1i32..8,
            gang in any::<bool>(),
        ) {
            let racks = ["r0", "r1", "r2", "r3"];
            let spec: Vec<(String, i64, &str)> =
                nodes.iter().enumerate().map(|(i, (c, r))| (format!("n{i}"), *c, racks[*r])).collect();
            let list: Vec<(&str, i64, &str)> = spec.iter().map(|(n, c, r)| (n.as_str(), *c, *r)).collect();
            let mut snap = snap_of(&list);
            let pods: Vec<_> = (0..n_pods).map(|i| (i as u64, pod(&format!("p{i}"), cpu, Some("pg"), None))).collect();
            let g = group("pg", if gang { Some(min) } else { None }, Some("rack"));
            let c = GroupCycle::new(g, true, pods, vec![]);
            let config = SchedulerConfig::default();
            let first = run(&mut snap, &c, &config);
            let second = run(&mut snap, &c, &config);
            prop_assert_eq!(&first, &second);
            if let GroupOutcome::Scheduled { assignments, .. } = &first {
                let mut domains: Vec<&str> =
                    assignments.iter().map(|(_, n)| snap.node(*n).info.label("rack").unwrap_or("")).collect();
                domains.dedup();
                prop_assert_eq!(domains.len(), 1);
                if gang {
                    prop_assert!(assignments.len() as i32 >= min);
                }
                prop_assert!(!assignments.is_empty());
            }
        }
    }
}
