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
//! (Kueue's `useLeastFreeCapacityAlgorithm`). The profile option `topologyAlgorithms`
//! ([`AlgorithmChoice`]) overrides the gates per kind of request (required, preferred,
//! unconstrained); BalancedPlacement is for preferred requests only.
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
use std::sync::Arc;

use algorithm::{DomainState, Params, Solver};
#[cfg(test)]
pub use request::SliceLayer;
pub use request::{parse_request, pod_index_offset, validate_group, TasError, TopologyMode, TopologyRequest};
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
    /// Shared with the cached topology, so a problem's copy of the nodes costs no string copies.
    pub name: Arc<str>,
    /// Label value for each level, in the order of the levels (shared like `name`).
    pub values: Arc<[String]>,
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
        let name: String = name.into();
        TasNode {
            name: Arc::from(name),
            values: Arc::from(values),
            free,
            worker_ok: true,
            leader_ok: true,
            affinity_score: 0,
        }
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
    /// The profile's algorithm per kind of request (`topologyAlgorithms`); what it leaves
    /// unset follows the gates.
    pub algorithms: AlgorithmChoice,
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

/// Which algorithm produced an assignment, or is chosen for a kind of request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    BestFit,
    LeastFreeCapacity,
    BalancedPlacement,
}

impl Algorithm {
    /// Every algorithm, in the order messages list them.
    pub const ALL: [Algorithm; 3] =
        [Algorithm::BestFit, Algorithm::LeastFreeCapacity, Algorithm::BalancedPlacement];

    /// The name the profile uses (`BestFit`, `LeastFreeCapacity`, `BalancedPlacement`).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::BestFit => "BestFit",
            Algorithm::LeastFreeCapacity => "LeastFreeCapacity",
            Algorithm::BalancedPlacement => "BalancedPlacement",
        }
    }

    /// The algorithm of a profile name (exact spelling).
    pub fn from_name(name: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.name() == name)
    }
}

/// The algorithm for each kind of request, as the profile option `topologyAlgorithms`
/// chooses it (seed 002 "Selecting the algorithm": Kueue plans a configuration to replace
/// its `TASProfile...` gates). `None` keeps the gates' choice ([`AlgorithmChoice::resolve`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AlgorithmChoice {
    /// Required requests (`podset-required-topology`, `schedulingConstraints.topology`).
    pub required: Option<Algorithm>,
    /// Preferred requests (`podset-preferred-topology`).
    pub preferred: Option<Algorithm>,
    /// Unconstrained, implied and slice-only requests.
    pub unconstrained: Option<Algorithm>,
}

impl AlgorithmChoice {
    /// Checks the choice: BalancedPlacement balances a preferred request over the domains
    /// one level below its preferred level (seed 002 "Balanced placement"), which a
    /// required request (one domain of its level) or an unconstrained one (no level) does
    /// not have. Returns the profile field at fault and why.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        for (field, choice) in [("required", self.required), ("unconstrained", self.unconstrained)] {
            if choice == Some(Algorithm::BalancedPlacement) {
                return Err((
                    field,
                    format!(
                        "BalancedPlacement applies to preferred requests only (it spreads a PodGroup evenly \
                         over the domains below its preferred level); use BestFit or LeastFreeCapacity for \
                         {field} requests"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Reads the profile's names (`topologyAlgorithms.required` / `preferred` /
    /// `unconstrained`; absent: the gates' choice) and checks them. The error names the
    /// field and lists the algorithms.
    pub fn from_names(
        required: Option<&str>,
        preferred: Option<&str>,
        unconstrained: Option<&str>,
    ) -> Result<AlgorithmChoice, String> {
        let read = |field: &str, name: Option<&str>| match name {
            None => Ok(None),
            Some(n) => Algorithm::from_name(n).map(Some).ok_or_else(|| {
                let known: Vec<&str> = Algorithm::ALL.iter().map(|a| a.name()).collect();
                format!(
                    "topologyAlgorithms.{field}: unknown algorithm {n:?}; supported values: {}",
                    known.join(", ")
                )
            }),
        };
        let choice = AlgorithmChoice {
            required: read("required", required)?,
            preferred: read("preferred", preferred)?,
            unconstrained: read("unconstrained", unconstrained)?,
        };
        choice.check().map_err(|(field, why)| format!("topologyAlgorithms.{field}: {why}"))?;
        Ok(choice)
    }

    /// The algorithm for a request of `mode` (seed 002 "Selecting the algorithm", SEMANTICS
    /// §5): the profile's choice, else the gates': `TASProfileLeastFreeCapacity` makes
    /// every request LeastFreeCapacity; `TASBalancedPlacement` makes preferred requests
    /// BalancedPlacement; unconstrained ones run LeastFreeCapacity under `TASProfileMixed`
    /// (default) unless `TASProfileBestFit`; everything else runs BestFit.
    pub fn resolve(&self, mode: TopologyMode, gates: &FeatureGates) -> Algorithm {
        let lfc_profile = gates.enabled(Gate::TASProfileLeastFreeCapacity);
        match mode {
            TopologyMode::Required(_) => self.required.unwrap_or(if lfc_profile {
                Algorithm::LeastFreeCapacity
            } else {
                Algorithm::BestFit
            }),
            TopologyMode::Preferred(_) => {
                self.preferred.unwrap_or(if gates.enabled(Gate::TASBalancedPlacement) {
                    Algorithm::BalancedPlacement
                } else if lfc_profile {
                    Algorithm::LeastFreeCapacity
                } else {
                    Algorithm::BestFit
                })
            }
            TopologyMode::Unconstrained | TopologyMode::Implied | TopologyMode::SliceOnly => {
                let mixed = gates.enabled(Gate::TASProfileMixed) && !gates.enabled(Gate::TASProfileBestFit);
                self.unconstrained.unwrap_or(if lfc_profile || mixed {
                    Algorithm::LeastFreeCapacity
                } else {
                    Algorithm::BestFit
                })
            }
        }
    }
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
    let chosen = p.algorithms.resolve(p.request.mode, p.gates);
    let params = resolve(p, chosen)?;
    let algorithm = if params.lfc { Algorithm::LeastFreeCapacity } else { Algorithm::BestFit };
    let mut solver = Solver::new(tree, params);
    let mut st = solver.fill(p.nodes, p.worker_requests, p.leader.map(|(r, _)| r));

    let balanced_allowed =
        chosen == Algorithm::BalancedPlacement && matches!(p.request.mode, TopologyMode::Preferred(_));
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

/// One domain of the requested level as the algorithm ranks it (phase 1 counts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankedDomain {
    /// Value path, coarsest level first.
    pub path: Vec<String>,
    /// Worker pods that fit.
    pub pods: i64,
    /// Slices that fit (pods / slice size at the slice level; pods without slices).
    pub slices: i64,
    /// 1 when the leader fits in the domain (leader + workers groups).
    pub leader: i64,
    /// Sum of preferred node-affinity weights (gate `TASRespectNodeAffinityPreferred`).
    pub affinity: i64,
    /// Worker pods assigned here by the run (0: not used).
    pub assigned: u64,
}

/// How the hierarchical algorithm ranks the domains of the requested level for a
/// problem, and what it decided ([`find_assignment_in`] on the same problem).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TasRanking {
    /// The algorithm chosen for the request (the one that ran may differ: a
    /// BalancedPlacement that gives up falls back; see `ran`).
    pub chosen: Algorithm,
    /// The algorithm that produced the assignment (`None`: no assignment).
    pub ran: Option<Algorithm>,
    /// The topology levels, coarsest first.
    pub levels: Vec<String>,
    /// Index of the level searched first (required / preferred level; the lowest for an
    /// unconstrained or implied request; the highest for a slices-only one).
    pub requested_level: usize,
    pub required: bool,
    /// Pods (or slices) the request needs, and the slice size.
    pub count: i64,
    pub slice_size: i64,
    /// The level where the pods were found to fit (the requested one, higher for a
    /// preferred request that climbed).
    pub fit_level: Option<usize>,
    /// Every domain of the requested level in the algorithm's sort order.
    pub domains: Vec<RankedDomain>,
    /// Why no assignment (empty on success).
    pub failure: String,
}

/// Ranks the requested level's domains exactly as phase 2a sorts them (leader-capable
/// first, the affinity score with its gate, then slices: most first for BestFit, fewest
/// first for LeastFreeCapacity, then fewer pods, then name) from the phase-1 counts, and
/// runs [`find_assignment_in`] for the decision. Read-only.
pub fn rank_domains(tree: &DomainTree, p: &TasProblem) -> Result<TasRanking, TasFailure> {
    let chosen = p.algorithms.resolve(p.request.mode, p.gates);
    let params = resolve(p, chosen)?;
    let (requested_level, required, lfc) = (params.requested_level, params.required, params.lfc);
    let (count, slice_size) = (params.count, params.slice_size);
    let mut solver = Solver::new(tree, params);
    let st = solver.fill(p.nodes, p.worker_requests, p.leader.map(|(r, _)| r));
    let mut sorted: Vec<DomainId> = tree.level_domains(requested_level).collect();
    solver.sort_with_leader(&st, &mut sorted, lfc);
    let outcome = find_assignment_in(tree, p);
    let assigned = |path: &[String]| -> u64 {
        outcome.as_ref().map_or(0, |a| {
            a.worker
                .iter()
                .filter(|l| l.values.len() > requested_level && l.values[..=requested_level] == path[..])
                .map(|l| u64::from(l.count))
                .sum()
        })
    };
    let domains = sorted
        .iter()
        .map(|&d| {
            let s = &st[d.idx()];
            let path = tree.path(d);
            RankedDomain {
                assigned: assigned(&path),
                path,
                pods: if p.leader.is_some() { s.pods_with_leader } else { s.pods },
                slices: if p.leader.is_some() { s.slices_with_leader } else { s.slices },
                leader: s.leader,
                affinity: s.affinity,
            }
        })
        .collect();
    Ok(TasRanking {
        chosen,
        ran: outcome.as_ref().ok().map(|a| a.algorithm),
        levels: p.levels.to_vec(),
        requested_level,
        required,
        count,
        slice_size,
        fit_level: outcome.as_ref().ok().map(|a| a.fit_level),
        domains,
        failure: outcome.err().map(|f| f.message).unwrap_or_default(),
    })
}

/// Resolves the request and the chosen algorithm into the run's parameters.
/// BalancedPlacement falls back to BestFit (LeastFreeCapacity under the
/// `TASProfileLeastFreeCapacity` gate) when it gives up.
fn resolve(p: &TasProblem, chosen: Algorithm) -> Result<Params, TasFailure> {
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
        // Kueue's useLeastFreeCapacityAlgorithm, or the profile's choice.
        lfc: chosen == Algorithm::LeastFreeCapacity
            || (chosen == Algorithm::BalancedPlacement && p.gates.enabled(Gate::TASProfileLeastFreeCapacity)),
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
