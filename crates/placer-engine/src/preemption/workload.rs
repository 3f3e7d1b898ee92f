//! Workload-aware preemption (KEP-5710; SEMANTICS §12): the whole PodGroup preempts, with
//! the PodGroup's priority, and victims are units (whole `disruptionMode: PodGroup` groups,
//! or single pods).
//!
//! For a group the cycle found unschedulable inside a node set (all nodes, or with the
//! Placer gate `TopologyAwareWorkloadPreemption` one placement's domain):
//! 1. **Eligibility**: not if any member pod says `preemptionPolicy: Never`, nor while a
//!    member's nominated node still holds a lower-priority pod on its way out.
//! 2. **Candidates**: victim units with a pod in the node set and a priority strictly below
//!    the group's. None: `No preemption victims found for incoming preemptor`.
//! 3. **Simulation**: every candidate is removed at once and the group algorithm runs
//!    (no preemption inside). Not feasible: that reason, nothing is evicted.
//! 4. **Reprieve** (v1.36's `podgrouppreemption.go`): the candidates, PDB-violating ones
//!    first, each part most important first ([`super::victims::by_importance`]), are put
//!    back one at a time and the whole group algorithm runs again (all members, every
//!    node of the set); if the group still places as many members as with every candidate
//!    gone the unit stays, else it is removed again and becomes a victim. So a unit is kept whenever the group fits elsewhere
//!    without it, whatever node the first simulation chose (later master re-checks only
//!    that node; not v1.36). All pods of every victim unit are evicted.
//! 5. The group is nominated to the nodes of the last feasible run (the final victim set)
//!    and waits for the victims to go.
//!
//! Across placements (topology-aware variant) the placement with the cheapest victim set
//! wins: fewest PDB violations, then the lowest priority of the most important victim,
//! then the fewest victim pods, then the smallest priority sum, then the fewest PodGroups
//! disrupted, then the placement name.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::framework::FitError;
use crate::model::{GroupKey, NodeId, PodInfo};
use crate::placement::{Placement, PlacementFeasible};
use crate::podgroup::{run_group_in_nodes, GroupCycle, GroupPreemption, GroupPreemptionPlan};
use crate::snapshot::Snapshot;

use super::pdb::{split_by_violation, Budget};
use super::victims::{remove_unit, restore_unit, workload_units_up_to, VictimUnit};
use super::{
    preemptor_priority, waiting_on_terminating, PreemptionEnv, MSG_NOT_ELIGIBLE_NEVER,
    MSG_NO_VICTIMS_PREEMPTOR,
};

/// A victim set that lets a group fit inside one node set.
#[derive(Debug, Clone)]
pub struct WorkloadCandidate {
    /// Victim units, most important first.
    pub victims: Vec<VictimUnit>,
    /// How many of them overdraw a PodDisruptionBudget.
    pub pdb_violations: usize,
    /// (index into [`GroupCycle::pods`], node) of each member placed in the simulation.
    pub nominations: Vec<(usize, NodeId)>,
}

/// How much a victim set costs; smaller is better (compared field by field, in order).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct WorkloadCost {
    pub pdb_violations: usize,
    /// Priority of the most important victim (`i64::MIN` without victims).
    pub highest_priority: i64,
    pub victim_pods: usize,
    /// Sum of the victims' unit priorities.
    pub priority_sum: i64,
    /// Distinct PodGroups losing at least one pod.
    pub groups_disrupted: usize,
}

impl WorkloadCandidate {
    /// The cost used to compare candidates of different placements.
    pub fn cost(&self) -> WorkloadCost {
        let mut groups: BTreeSet<GroupKey> = BTreeSet::new();
        let mut victim_pods = 0;
        let mut priority_sum = 0i64;
        for u in &self.victims {
            victim_pods += u.pods.len();
            priority_sum += i64::from(u.priority) * i64::try_from(u.pods.len()).unwrap_or(i64::MAX);
            for p in &u.pods {
                groups.extend(p.group_key());
            }
        }
        WorkloadCost {
            pdb_violations: self.pdb_violations,
            highest_priority: self.victims.iter().map(|u| i64::from(u.priority)).max().unwrap_or(i64::MIN),
            victim_pods,
            priority_sum,
            groups_disrupted: groups.len(),
        }
    }

    /// Every victim pod, unit by unit.
    pub fn victim_pods(&self) -> Vec<Arc<PodInfo>> {
        self.victims.iter().flat_map(|u| u.pods.iter().cloned()).collect()
    }

    /// The plan the group cycle carries out.
    pub fn into_plan(self) -> GroupPreemptionPlan {
        GroupPreemptionPlan { victims: self.victim_pods(), nominations: self.nominations }
    }
}

/// Workload-aware preemption over a snapshot; implements [`GroupPreemption`].
pub struct WorkloadPreemptor<'a> {
    env: PreemptionEnv<'a>,
    feasible: &'a [Box<dyn PlacementFeasible>],
    budgets: Option<Vec<Budget>>,
    /// Calls so far (for `scheduler_preemption_attempts_total`).
    pub attempts: u64,
}

impl<'a> WorkloadPreemptor<'a> {
    /// `feasible`: the PlacementFeasible plugins the group algorithm runs with.
    pub fn new(env: PreemptionEnv<'a>, feasible: &'a [Box<dyn PlacementFeasible>]) -> Self {
        WorkloadPreemptor { env, feasible, budgets: None, attempts: 0 }
    }

    fn budgets(&mut self) -> Vec<Budget> {
        if self.budgets.is_none() {
            self.budgets = Some(self.env.budgets());
        }
        self.budgets.clone().unwrap_or_default()
    }

    /// Why the group may not preempt at all, if it may not.
    pub fn ineligible(&self, snap: &Snapshot, cycle: &GroupCycle) -> Option<&'static str> {
        if cycle.pods.iter().any(|p| p.preemption_never) {
            return Some(MSG_NOT_ELIGIBLE_NEVER);
        }
        let priority = preemptor_priority(&cycle.group);
        waiting_on_terminating(&self.env, snap, cycle.pods.iter().map(|p| &**p), priority)
    }

    /// A victim set letting the group fit inside `nodes`, or why there is none. Leaves
    /// `snap` as found. Eligibility is the caller's business ([`Self::ineligible`]).
    pub fn candidate_in(
        &mut self,
        snap: &mut Snapshot,
        cycle: &GroupCycle,
        nodes: &[NodeId],
    ) -> Result<WorkloadCandidate, String> {
        let priority = preemptor_priority(&cycle.group);
        let units: Vec<VictimUnit> = workload_units_up_to(
            snap,
            self.env.groups,
            nodes,
            Some(&cycle.group.key),
            priority.saturating_sub(1),
        )
        .into_iter()
        .filter(|u| u.priority < priority)
        .collect();
        if units.is_empty() {
            return Err(MSG_NO_VICTIMS_PREEMPTOR.to_string());
        }
        let mark = snap.checkpoint();
        for u in &units {
            remove_unit(snap, u);
        }
        let mut placed = match self.fits(snap, cycle, nodes) {
            Ok(placed) => placed,
            Err(reason) => {
                snap.rollback(mark);
                return Err(format!(
                    "preemption: the pod group does not fit even without its {} lower-priority victim(s): {reason}",
                    units.len()
                ));
            }
        };
        // A reprieve must keep every member the simulation without any candidate placed
        // (a basic group is feasible with fewer; it would then reprieve everything).
        let needed = placed.len();
        let mut removed = units;
        removed.sort_by(super::victims::by_importance);
        let mut budgets = self.budgets();
        let (violating, other) = split_by_violation(removed, VictimUnit::pods, &mut budgets);
        let mut victims: Vec<VictimUnit> = Vec::new();
        let mut pdb_violations = 0;
        for (unit, violates) in
            violating.into_iter().map(|u| (u, true)).chain(other.into_iter().map(|u| (u, false)))
        {
            let before = snap.checkpoint();
            restore_unit(snap, &unit);
            match self.fits(snap, cycle, nodes) {
                Ok(now) if now.len() >= needed => placed = now,
                _ => {
                    snap.rollback(before);
                    pdb_violations += usize::from(violates);
                    victims.push(unit);
                }
            }
        }
        snap.rollback(mark);
        victims.sort_by(super::victims::by_importance);
        Ok(WorkloadCandidate { victims, pdb_violations, nominations: placed })
    }

    /// Runs the whole group algorithm inside `nodes` on the snapshot as it is (no
    /// preemption inside) and undoes it: where the members were placed when the group is
    /// feasible, else the reason it is not.
    fn fits(
        &self,
        snap: &mut Snapshot,
        cycle: &GroupCycle,
        nodes: &[NodeId],
    ) -> Result<Vec<(usize, NodeId)>, String> {
        let before = snap.checkpoint();
        let attempt = run_group_in_nodes(self.env.algo, snap, cycle, nodes, self.feasible, None);
        snap.rollback(before);
        if attempt.is_feasible() {
            Ok(attempt.placed)
        } else {
            Err(attempt.main_reason())
        }
    }

    /// The cheapest victim set over `placements` (ties: the earlier placement), or why
    /// none works. Leaves `snap` as found.
    pub fn best_placement(
        &mut self,
        snap: &mut Snapshot,
        cycle: &GroupCycle,
        placements: &[Placement],
    ) -> Result<(usize, WorkloadCandidate), String> {
        let mut best: Option<(usize, WorkloadCandidate, WorkloadCost)> = None;
        let mut reasons = FitError { num_nodes: placements.len(), ..FitError::default() };
        for (i, p) in placements.iter().enumerate() {
            match self.candidate_in(snap, cycle, &p.nodes) {
                Ok(c) => {
                    let cost = c.cost();
                    if best.as_ref().is_none_or(|(_, _, b)| cost < *b) {
                        best = Some((i, c, cost));
                    }
                }
                Err(reason) => reasons.add(&reason),
            }
        }
        match best {
            Some((i, c, _)) => Ok((i, c)),
            None => Err(format!(
                "preemption: 0/{} placements can be freed: {}",
                placements.len(),
                reasons.histogram().join(", ")
            )),
        }
    }
}

impl GroupPreemption for WorkloadPreemptor<'_> {
    fn preempt(
        &mut self,
        snap: &mut Snapshot,
        cycle: &GroupCycle,
        nodes: &[NodeId],
    ) -> Result<GroupPreemptionPlan, String> {
        self.attempts += 1;
        if let Some(reason) = self.ineligible(snap, cycle) {
            return Err(reason.to_string());
        }
        self.candidate_in(snap, cycle, nodes).map(WorkloadCandidate::into_plan)
    }

    fn preempt_in_placements(
        &mut self,
        snap: &mut Snapshot,
        cycle: &GroupCycle,
        placements: &[Placement],
    ) -> Result<(usize, GroupPreemptionPlan), String> {
        self.attempts += 1;
        if let Some(reason) = self.ineligible(snap, cycle) {
            return Err(reason.to_string());
        }
        self.best_placement(snap, cycle, placements).map(|(i, c)| (i, c.into_plan()))
    }
}
