//! Hierarchical topology-aware scheduling (seed 002, Kueue's Topology Aware Scheduling).
//!
//! A pure algorithm over an input the engine prepares: the nodes that passed readiness,
//! `spec.unschedulable` and carry every level label, each with its free capacity and the
//! outcome of the pod-level filters ([`TasNode`]); the PodGroup's parsed
//! [`TopologyRequest`]; and the per-pod requests. [`find_assignment`] answers with per-leaf
//! pod counts ([`TasAssignment`]) or a Kueue-style [`TasFailure`].
//!
//! * [`request`]: reading and validating the topology request of a PodGroup.
//! * [`tree`]: the domain tree (built once per node set, reusable while only capacity
//!   changes) and capacity counting; also the per-domain "how many pods fit" pre-filter.
//! * `algorithm` / `balanced`: BestFit, LeastFreeCapacity and BalancedPlacement, slices,
//!   multi-layer constraints, leader + workers, exactly as SEMANTICS.md of the Kueue
//!   conformance corpus states them.
//! * [`assignment`]: the compact v1beta2 `TopologyAssignment` encoding.
//! * [`engine_bridge`]: the engine's side: problems built from the snapshot, pods mapped to
//!   leaves and confirmed by the pod-level filters.
//!
//! Which algorithm runs (seed 002 "Selecting the algorithm", SEMANTICS §5):
//!
//! | request | levels searched | algorithm |
//! | --- | --- | --- |
//! | required | that level only | BestFit |
//! | preferred | that level, then each higher one, then spread | BestFit, or BalancedPlacement with `TASBalancedPlacement` |
//! | unconstrained / implied | lowest level | LeastFreeCapacity with `TASProfileMixed` (default), BestFit otherwise or with `TASProfileBestFit` |
//! | slices only | highest level, slices below | as unconstrained |
//!
//! `TASProfileLeastFreeCapacity` (Kueue until v0.16) makes every request LeastFreeCapacity
//! (Kueue's `useLeastFreeCapacityAlgorithm`).
//!
//! Deliberate differences from Kueue, all outside what its conformance corpus pins: a
//! node that fails the pods' filters adds nothing to a leaf even when the lowest level is
//! not the hostname (Kueue ignores filters for such bucket leaves), and a bucket's
//! affinity score is the sum of its nodes' scores (Kueue uses 0).

pub mod assignment;
pub mod engine_bridge;
pub mod request;
pub mod strategy;
pub mod tree;

mod algorithm;
mod balanced;
#[cfg(test)]
mod tests;

use placer_api::gates::{FeatureGates, Gate};

use crate::resources::Resources;

use algorithm::{DomainState, Params, Solver};
#[cfg(test)]
pub use request::SliceLayer;
pub use request::{parse_request, validate_group, TasError, TopologyMode, TopologyRequest};
#[cfg(test)]
pub use tree::HOSTNAME_LEVEL;
pub use tree::{DomainId, DomainTree};

/// The name failure messages give the topology (Placer declares a single one).
/// Kueue's `NodeFailureDelay`: a node not ready for this long (from its `Ready` condition's
/// `lastTransitionTime`) is failed for the groups placed on it (seed 002 "Node failures").
pub const NODE_FAILURE_DELAY_MS: i64 = 30_000;

pub const TOPOLOGY_NAME: &str = "default";

/// One node as the algorithm sees it. The caller has already dropped nodes that are not
/// ready, are unschedulable or miss a level label, applied the pod-level filters (taints,
/// node selector, required node affinity) and subtracted what bound pods use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TasNode {
    pub name: String,
    /// Label value for each level, in the order of the levels.
    pub values: Vec<String>,
    /// Free capacity (allocatable minus requested); `pods` = free pod slots.
    pub free: Resources,
    /// The node passes the workers' pod-level filters.
    pub worker_ok: bool,
    /// The node passes the leader's pod-level filters.
    pub leader_ok: bool,
    /// Sum of the weights of the workers' preferred node-affinity terms the node matches
    /// (read with gate `TASRespectNodeAffinityPreferred` only).
    pub affinity_score: i64,
}

impl TasNode {
    /// A node that passes every filter, with no affinity score.
    pub fn new(name: impl Into<String>, values: Vec<String>, free: Resources) -> TasNode {
        TasNode { name: name.into(), values, free, worker_ok: true, leader_ok: true, affinity_score: 0 }
    }
}

/// Everything one assignment needs.
#[derive(Debug, Clone, Copy)]
pub struct TasProblem<'a> {
    /// The topology levels, coarsest first (the ones `request` was parsed against).
    pub levels: &'a [String],
    pub nodes: &'a [TasNode],
    /// Requests of one worker pod (without `pods`: one pod slot is added here).
    pub worker_requests: &'a Resources,
    /// Number of worker pods.
    pub worker_count: u32,
    /// Requests and count of the leader PodGroup of a leader + workers group. The count
    /// must be 1.
    pub leader: Option<(&'a Resources, u32)>,
    /// The workers' request; it governs the whole group.
    pub request: &'a TopologyRequest,
    pub gates: &'a FeatureGates,
}

/// The pods given to one leaf domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafAssignment {
    /// Value path of the leaf, one value per level.
    pub values: Vec<String>,
    pub count: u32,
    /// Indexes into [`TasProblem::nodes`] of the leaf's nodes: exactly one when the lowest
    /// level is `kubernetes.io/hostname`, the bucket's nodes (name order) otherwise.
    pub nodes: Vec<usize>,
}

/// Which algorithm produced an assignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    BestFit,
    LeastFreeCapacity,
    BalancedPlacement,
}

/// Per-leaf pod counts. A leaf is a node when the lowest level is
/// `kubernetes.io/hostname`, else a bucket of nodes sharing a value path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TasAssignment {
    pub levels: Vec<String>,
    /// Worker pods per leaf, in value-path order, no zero counts.
    pub worker: Vec<LeafAssignment>,
    /// The leader's leaf (empty without a leader).
    pub leader: Vec<LeafAssignment>,
    pub algorithm: Algorithm,
    /// The level at which all pods (or all slices) were found to fit in the chosen
    /// domains: the requested level, a higher one for a preferred request that climbed.
    pub fit_level: usize,
}

impl TasAssignment {
    /// Total worker pods assigned.
    pub fn worker_pods(&self) -> u64 {
        self.worker.iter().map(|l| l.count as u64).sum()
    }

    /// The worker leaf (index into [`TasAssignment::worker`]) of a pod rank: leaves are
    /// taken in value-path order, ranks `0..c1` go to the first, the next `c2` to the
    /// second, and so on (SEMANTICS §13). The rank is the pod index minus
    /// `kueue.x-k8s.io/pod-index-offset`; in a leader + workers group, workers are offset
    /// by the leader count. `None` past the last pod.
    pub fn worker_leaf_of_rank(&self, rank: u64) -> Option<usize> {
        let mut end = 0u64;
        self.worker.iter().position(|l| {
            end += l.count as u64;
            rank < end
        })
    }
}

/// Why no assignment was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The topology holds only `fit` of the `requested` pods (or slices, or leaders).
    NotFit { fit: u64, requested: u64 },
    /// No domain at the level searched (no node at all).
    NoDomains,
    /// The problem is inconsistent (request parsed for other levels, bad leader count, a
    /// tree built from other nodes).
    Invalid,
    /// An invariant of the algorithm broke; a bug.
    Internal,
}

/// The group cannot be placed now; `message` reads like Kueue's, e.g.
/// `topology "default" allows to fit only 3 out of 4 pod(s)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TasFailure {
    pub kind: FailureKind,
    pub message: String,
}

impl TasFailure {
    pub(crate) fn new(kind: FailureKind, message: String) -> TasFailure {
        TasFailure { kind, message }
    }

    fn invalid(message: String) -> TasFailure {
        TasFailure::new(FailureKind::Invalid, message)
    }
}

impl From<TasError> for TasFailure {
    fn from(e: TasError) -> TasFailure {
        TasFailure::invalid(e.to_string())
    }
}

/// Finds per-leaf counts for the problem's PodGroup (and leader), building the domain tree
/// of `p.nodes` first. See [`find_assignment_in`] to reuse a tree.
pub fn find_assignment(p: &TasProblem) -> Result<TasAssignment, TasFailure> {
    let tree = DomainTree::new(p.levels, p.nodes)?;
    find_assignment_in(&tree, p)
}

/// Like [`find_assignment`] over a tree built from `p.nodes` (same slice, same order);
/// only the nodes' capacity and filter outcomes may have changed since.
pub fn find_assignment_in(tree: &DomainTree, p: &TasProblem) -> Result<TasAssignment, TasFailure> {
    if tree.levels() != p.levels || tree.node_count() != p.nodes.len() {
        return Err(TasFailure::invalid(
            "the domain tree was built for other levels or nodes than the problem's".to_string(),
        ));
    }
    let params = resolve(p)?;
    let algorithm = if params.lfc { Algorithm::LeastFreeCapacity } else { Algorithm::BestFit };
    let mut solver = Solver::new(tree, params);
    let mut st = solver.fill(p.nodes, p.worker_requests, p.leader.map(|(r, _)| r));

    let balanced_allowed =
        p.gates.enabled(Gate::TASBalancedPlacement) && matches!(p.request.mode, TopologyMode::Preferred(_));
    if balanced_allowed {
        if let Some(choice) = solver.find_best_balanced(&mut st) {
            let phase1 = choice.pruned.snapshot_same(&st);
            choice.pruned.restore(&mut st);
            match solver.apply_balanced(&mut st, &choice) {
                Ok((domains, fit_level)) => {
                    let leaves = solver.descend(&mut st, domains, fit_level, true)?;
                    return Ok(build(tree, p, &st, &leaves, Algorithm::BalancedPlacement, fit_level));
                }
                // Balancing gave up: back to the phase-1 counts and BestFit.
                Err(_) => phase1.restore(&mut st),
            }
        }
    }
    let (fit_level, domains) = solver.find_fit_level(&st, solver.p.requested_level)?;
    let leaves = solver.descend(&mut st, domains, fit_level, false)?;
    Ok(build(tree, p, &st, &leaves, algorithm, fit_level))
}

/// Resolves the request and gates into the run's parameters.
fn resolve(p: &TasProblem) -> Result<Params, TasFailure> {
    let depth = p.levels.len();
    let r = p.request;
    let check = |level: usize| {
        if level < depth {
            Ok(level)
        } else {
            Err(TasFailure::invalid(format!(
                "the topology request names level #{level}, but there are {depth} levels"
            )))
        }
    };
    let (requested_level, required) = match r.mode {
        TopologyMode::Required(l) => (check(l)?, true),
        TopologyMode::Preferred(l) => (check(l)?, false),
        TopologyMode::SliceOnly => (0, false),
        TopologyMode::Unconstrained | TopologyMode::Implied => (depth - 1, false),
    };
    let slice_level = match r.slices.first() {
        Some(l) => check(l.level)?,
        None => depth - 1,
    };
    if slice_level < requested_level {
        return Err(TasFailure::invalid(format!(
            "podset slice topology {} is above the podset topology {}",
            p.levels[slice_level], p.levels[requested_level]
        )));
    }
    let mut inner_size = vec![None; depth];
    let mut prev = r.slices.first().copied();
    for layer in r.slices.iter().skip(1) {
        let level = check(layer.level)?;
        let Some(before) = prev else { break };
        if level <= before.level || layer.size == 0 || before.size % layer.size != 0 {
            return Err(TasFailure::invalid(format!(
                "slice layer at level {} (size {}) must be below level {} and divide its size {}",
                p.levels[level], layer.size, p.levels[before.level], before.size
            )));
        }
        for slot in inner_size.iter_mut().take(level + 1).skip(before.level + 1) {
            *slot = Some(layer.size as i64);
        }
        prev = Some(*layer);
    }
    let leader_count = match p.leader {
        None => 0,
        Some((_, 1)) => 1,
        Some((_, n)) => {
            return Err(TasFailure::invalid(format!("a leader PodGroup has exactly 1 pod, not {n}")))
        }
    };
    let unconstrained = r.mode.is_unconstrained();
    let slice_size = r.slice_size().max(1) as i64;
    Ok(Params {
        count: p.worker_count as i64,
        leader_count,
        slice_size,
        requested_level,
        slice_level,
        required,
        unconstrained,
        // Kueue's useLeastFreeCapacityAlgorithm: the LeastFreeCapacity profile, or an
        // unconstrained request under the (default) mixed profile.
        lfc: p.gates.enabled(Gate::TASProfileLeastFreeCapacity)
            || (unconstrained
                && p.gates.enabled(Gate::TASProfileMixed)
                && !p.gates.enabled(Gate::TASProfileBestFit)),
        affinity: p.gates.enabled(Gate::TASRespectNodeAffinityPreferred),
        inner_size,
        layers: if r.slices.len() > 1 {
            r.slices.iter().map(|l| (l.level, l.size as i64)).collect()
        } else {
            Vec::new()
        },
    })
}

fn build(
    tree: &DomainTree,
    p: &TasProblem,
    st: &[DomainState],
    leaves: &[DomainId],
    algorithm: Algorithm,
    fit_level: usize,
) -> TasAssignment {
    let mut leaves = leaves.to_vec();
    leaves.sort_unstable();
    leaves.dedup();
    let entry = |d: DomainId, count: i64| LeafAssignment {
        values: tree.path(d),
        count: u32::try_from(count).unwrap_or(u32::MAX),
        nodes: tree.leaf_nodes(d).iter().map(|&n| n as usize).collect(),
    };
    let worker =
        leaves.iter().filter(|d| st[d.idx()].pods > 0).map(|&d| entry(d, st[d.idx()].pods)).collect();
    let leader = if p.leader.is_some() {
        leaves.iter().filter(|d| st[d.idx()].leader > 0).map(|&d| entry(d, st[d.idx()].leader)).collect()
    } else {
        Vec::new()
    };
    TasAssignment { levels: p.levels.to_vec(), worker, leader, algorithm, fit_level }
}
