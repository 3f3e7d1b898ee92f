//! Per-pod preemption (kube-scheduler's DefaultPreemption PostFilter), for standalone pods
//! and, with `WorkloadAwarePreemption` off, for PodGroup members inside the group cycle.
//!
//! For a pod that fits no node:
//! 1. **Eligibility**: `preemptionPolicy: Never` never preempts; a pod whose nominated node
//!    still holds a lower-priority pod on its way out waits for it instead of preempting
//!    again.
//! 2. **Candidates**: only nodes the filters rejected as `Unschedulable` (removing pods
//!    might help). On each, in node order: remove every bound pod of strictly lower
//!    priority, check the pod fits, then reprieve the removed pods most important first
//!    (PDB-violating ones before the others): a pod goes back if the preemptor still fits
//!    with it. What is not reprieved is the node's victim set. As upstream's
//!    `DryRunPreemption`, the search stops once it has found
//!    `DefaultPreemptionArgs`' number of candidates (`calculateNumCandidates`: 10% of the
//!    potential nodes, at least 100, at most all) with at least one that violates no PDB.
//!    Upstream starts at a random offset; Placer starts at the first node (offset 0), so
//!    decisions stay deterministic.
//! 3. **Choice** among candidate nodes, as upstream's `pickOneNodeForPreemption`: fewest PDB
//!    violations, then the lowest priority of the most important victim, then the smallest
//!    sum of victim priorities, then the fewest victims, then the latest start of the most
//!    important victims, then the first node in name order.
//!
//! PDBs are honoured approximately: budgets are computed as [`super::pdb`] describes, and,
//! as upstream, a PDB only orders reprieves and candidates; it never forbids a preemption.
//! Members of the preemptor's own PodGroup are never its victims.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::config::args::PreemptionCandidates;
use crate::framework::FitError;
use crate::model::{GroupKey, NodeId, PodInfo};
use crate::podgroup::{PodPreemption, PreemptionPlan};
use crate::snapshot::Snapshot;

use super::pdb::{split_by_violation, Budget};
use super::victims::{by_importance, is_running, StartTime, VictimUnit};
use super::{PreemptionEnv, MSG_NOT_ELIGIBLE_NEVER, MSG_NOT_ELIGIBLE_TERMINATING};

/// Per-node reason when the node has no lower-priority pod.
pub const MSG_NO_VICTIMS_POD: &str = "No preemption victims found for incoming pod";
/// Per-node reason when the filters rejected the node for something removing pods cannot fix.
pub const MSG_NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";

/// Victims on one candidate node.
#[derive(Debug, Clone)]
pub struct NodeCandidate {
    pub node: NodeId,
    /// Most important first.
    pub victims: Vec<Arc<PodInfo>>,
    /// How many victims overdraw a PodDisruptionBudget.
    pub pdb_violations: usize,
}

impl NodeCandidate {
    /// Sum of victim priorities, each shifted to be positive (upstream adds MaxInt32 + 1).
    fn priority_sum(&self) -> i64 {
        self.victims.iter().map(|v| i64::from(v.priority) + i64::from(i32::MAX) + 1).sum()
    }

    /// The earliest start among the victims of the highest priority.
    fn earliest_start_of_most_important(&self) -> StartTime {
        let top = self.victims.first().map_or(i32::MIN, |v| v.priority);
        self.victims
            .iter()
            .filter(|v| v.priority == top)
            .map(|v| StartTime::of(v))
            .min()
            .unwrap_or(StartTime(None))
    }
}

/// `Less` when candidate `a` is the better place to preempt on.
pub fn better_candidate(a: &NodeCandidate, b: &NodeCandidate) -> Ordering {
    let top = |c: &NodeCandidate| c.victims.first().map_or(i64::MIN, |v| i64::from(v.priority));
    a.pdb_violations
        .cmp(&b.pdb_violations)
        .then_with(|| top(a).cmp(&top(b)))
        .then_with(|| a.priority_sum().cmp(&b.priority_sum()))
        .then_with(|| a.victims.len().cmp(&b.victims.len()))
        .then_with(|| b.earliest_start_of_most_important().cmp(&a.earliest_start_of_most_important()))
}

/// Per-pod preemption over a snapshot. Implements [`PodPreemption`] for the group cycle;
/// [`PodPreemptor::preempt_pod`] also says why it failed.
pub struct PodPreemptor<'a> {
    env: PreemptionEnv<'a>,
    /// `DefaultPreemptionArgs`: when the candidate search may stop.
    candidates: PreemptionCandidates,
    budgets: Option<Vec<Budget>>,
    /// PostFilter calls so far (for `scheduler_preemption_attempts_total`).
    pub attempts: u64,
    /// Why the last call found nothing (`preemption: ...`), for the pod's message.
    pub last_failure: Option<String>,
}

impl<'a> PodPreemptor<'a> {
    pub fn new(env: PreemptionEnv<'a>) -> Self {
        PodPreemptor {
            env,
            candidates: PreemptionCandidates::default(),
            budgets: None,
            attempts: 0,
            last_failure: None,
        }
    }

    /// With the profile's `DefaultPreemptionArgs` (the defaults otherwise).
    pub fn with_candidates(mut self, candidates: PreemptionCandidates) -> Self {
        self.candidates = candidates;
        self
    }

    fn budgets(&mut self) -> Vec<Budget> {
        if self.budgets.is_none() {
            self.budgets = Some(self.env.budgets());
        }
        self.budgets.clone().unwrap_or_default()
    }

    /// Finds the node to nominate `pod` to and the victims to evict there, among `nodes`
    /// (`fit` is why the pod fits none of them). Leaves `snap` as found. `Err` carries the
    /// PostFilter message (appended to the pod's FitError).
    pub fn preempt_pod(
        &mut self,
        snap: &mut Snapshot,
        pod: &PodInfo,
        nodes: &[NodeId],
        fit: &FitError,
    ) -> Result<PreemptionPlan, String> {
        self.attempts += 1;
        if pod.preemption_never {
            return Err(MSG_NOT_ELIGIBLE_NEVER.trim_end_matches('.').to_string());
        }
        if let Some(id) = pod.nominated_node_name.as_deref().and_then(|n| snap.node_id(n)) {
            let terminating =
                snap.node(id).pods.iter().any(|p| p.priority < pod.priority && self.env.is_terminating(p));
            if terminating {
                return Err(MSG_NOT_ELIGIBLE_TERMINATING.trim_end_matches('.').to_string());
            }
        }
        let own_group = pod.group_key();
        let mut reasons = FitError { num_nodes: nodes.len(), ..FitError::default() };
        // A set: a full cluster makes both lists as long as the node list.
        let preemptable: rustc_hash::FxHashSet<NodeId> = fit.preemptable_nodes.iter().copied().collect();
        let potential: Vec<NodeId> = nodes.iter().copied().filter(|n| preemptable.contains(n)).collect();
        for _ in potential.len()..nodes.len() {
            reasons.add(MSG_NOT_HELPFUL);
        }
        let wanted = self.candidates.num_candidates(potential.len());
        let (mut found, mut non_violating) = (0, 0);
        let mut best: Option<NodeCandidate> = None;
        // Nodes without a pod below the preemptor's priority, counted in one go.
        let mut no_victims = 0;
        for node in potential {
            if snap.node(node).lowest_priority() >= pod.priority {
                no_victims += 1;
                continue;
            }
            match self.select_victims_on_node(snap, pod, node, own_group.as_ref()) {
                Err(reason) => reasons.add(&reason),
                Ok(candidate) => {
                    if candidate.victims.is_empty() {
                        // Fits without evicting anything (e.g. a nomination went away).
                        best = Some(candidate);
                        break;
                    }
                    found += 1;
                    non_violating += usize::from(candidate.pdb_violations == 0);
                    if best.as_ref().is_none_or(|b| better_candidate(&candidate, b) == Ordering::Less) {
                        best = Some(candidate);
                    }
                    if non_violating > 0 && found >= wanted {
                        break;
                    }
                }
            }
        }
        match best {
            Some(c) => {
                self.last_failure = None;
                Ok(PreemptionPlan { node: c.node, victims: c.victims })
            }
            None => {
                if no_victims > 0 {
                    reasons.add_n(MSG_NO_VICTIMS_POD, no_victims);
                }
                let msg = format!(
                    "preemption: 0/{} nodes are available: {}",
                    nodes.len(),
                    reasons.histogram().join(", ")
                );
                self.last_failure = Some(msg.clone());
                Err(msg)
            }
        }
    }

    /// Upstream's `SelectVictimsOnNode`: the smallest set of lower-priority pods (reprieved
    /// most important first) whose removal lets `pod` pass the filters on `node`.
    fn select_victims_on_node(
        &mut self,
        snap: &mut Snapshot,
        pod: &PodInfo,
        node: NodeId,
        own_group: Option<&GroupKey>,
    ) -> Result<NodeCandidate, String> {
        let mut potential: Vec<VictimUnit> = snap
            .node(node)
            .pods
            .iter()
            .filter(|p| is_running(p) && p.priority < pod.priority)
            .filter(|p| {
                own_group.is_none_or(|g| p.key.namespace != g.namespace || p.group_name() != Some(&*g.name))
            })
            .map(|p| VictimUnit::single(p.clone(), node))
            .collect();
        if potential.is_empty() {
            return Err(MSG_NO_VICTIMS_POD.to_string());
        }
        potential.sort_by(by_importance);
        let mark = snap.checkpoint();
        for u in &potential {
            super::victims::remove_unit(snap, u);
        }
        let status = self.env.algo.filter_node(snap, pod, node);
        if !status.is_success() {
            snap.rollback(mark);
            return Err(status.reasons.join(", "));
        }
        let mut budgets = self.budgets();
        let (violating, other) = split_by_violation(potential, VictimUnit::pods, &mut budgets);
        let mut victims = Vec::new();
        let mut pdb_violations = 0;
        for (unit, violates) in violating.iter().map(|u| (u, true)).chain(other.iter().map(|u| (u, false))) {
            let before = snap.checkpoint();
            super::victims::restore_unit(snap, unit);
            if !self.env.algo.filter_node(snap, pod, node).is_success() {
                snap.rollback(before);
                victims.extend(unit.pods.iter().cloned());
                pdb_violations += usize::from(violates);
            }
        }
        snap.rollback(mark);
        victims.sort_by(|a, b| {
            b.priority
                .cmp(&a.priority)
                .then_with(|| StartTime::of(a).cmp(&StartTime::of(b)))
                .then_with(|| a.key.cmp(&b.key))
        });
        Ok(NodeCandidate { node, victims, pdb_violations })
    }
}

impl PodPreemption for PodPreemptor<'_> {
    fn preempt(
        &mut self,
        snap: &mut Snapshot,
        pod: &PodInfo,
        nodes: &[NodeId],
        fit: &FitError,
    ) -> Option<PreemptionPlan> {
        self.preempt_pod(snap, pod, nodes, fit).ok()
    }

    fn uncount(&mut self, calls: u64) {
        self.attempts = self.attempts.saturating_sub(calls);
    }
}
