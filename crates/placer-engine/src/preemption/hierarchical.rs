//! Preemption for the hierarchical strategy (seed 002, Kueue's Topology Aware Scheduling):
//! a unit (one PodGroup, or a leader + workers PodGroup pair) whose topology request does
//! not fit may evict lower-priority workloads. The profile option
//! `topologyPreemption.withinClusterQueue` ([`WithinClusterQueue`], Kueue's ClusterQueue
//! `preemption.withinClusterQueue`) chooses the candidates: `LowerPriority` (Placer's
//! default), `LowerOrNewerEqualPriority`, or `Never` (Kueue's API default: no preemption).
//!
//! Kueue's classical preemption (`pkg/scheduler/preemption/preemption.go`,
//! `classicalPreemptions`, `fillBackWorkloads`; ordering `preemption/common/ordering.go`),
//! with TAS deciding fit (`workloadFits` runs `FindTopologyAssignmentsForWorkload` on a
//! snapshot from which the candidates' usage was removed):
//!
//! 1. **Eligibility**: not if a member pod says `preemptionPolicy: Never`, nor while a
//!    member's nominated node still holds a lower-priority pod on its way out (the
//!    preemption issued earlier is pending; Kueue's "Pending the preemption of N
//!    workload(s)").
//! 2. **Candidates**: victim units ([`super::victims::workload_units_up_to`]: a whole
//!    `disruptionMode: PodGroup` group, else single pods) of strictly lower priority than
//!    the unit (`LowerOrNewerEqualPriority`: also of equal priority and created after the
//!    unit, Kueue's `findCandidates`; a unit's time is its PodGroups' earliest
//!    `creationTimestamp`, a single pod's, outside any PodGroup, its start time),
//!    outside the unit's own PodGroups, in Kueue's order: units already being
//!    evicted first, then lower priority first, then (Placer) units whose eviction keeps
//!    every PodDisruptionBudget before those that overdraw one, then the most recently
//!    started first, then by key.
//! 3. **Removal**: candidates are removed in that order until the unit's placement
//!    succeeds (the whole topology algorithm runs each time, so the domain that frees up
//!    first, i.e. needs the fewest and least important victims, is the one chosen). If it
//!    does not fit without every candidate, nothing is evicted.
//! 4. **Fill back**: the removed candidates before the last one are put back in reverse
//!    order; one stays if the unit still fits. The rest are the victims.
//! 5. The unit is nominated to the nodes of its placement and waits for the victims to go.
//!
//! The snapshot is left as found.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::sync::Arc;

use placer_api::k8s::apimachinery::pkg::apis::meta::v1::Time;

use crate::config::WithinClusterQueue;
use crate::model::{GroupKey, PodInfo};
use crate::podgroup::GroupCycle;
use crate::snapshot::Snapshot;

use super::pdb::split_by_violation;
use super::victims::{remove_unit, restore_unit, workload_units_up_to, VictimUnit};
use super::{waiting_on_terminating, PreemptionEnv, MSG_NOT_ELIGIBLE_NEVER, MSG_NO_VICTIMS_PREEMPTOR};

/// The victims found and the placement the unit gets once they are gone.
#[derive(Debug)]
pub struct HierarchicalPlan<T> {
    /// Pods to evict (whole units), least important unit first; pods already on their way
    /// out are not repeated.
    pub victims: Vec<Arc<PodInfo>>,
    /// What the unit's placement answered with the victims removed.
    pub placement: T,
}

/// One candidate with what orders it.
struct Candidate {
    unit: VictimUnit,
    terminating: bool,
    violates: bool,
}

/// Kueue's candidate order (see the module docs): `Less` when `a` is removed first.
fn removal_order(a: &Candidate, b: &Candidate) -> Ordering {
    b.terminating
        .cmp(&a.terminating)
        .then(a.unit.priority.cmp(&b.unit.priority))
        .then(a.violates.cmp(&b.violates))
        .then_with(|| b.unit.earliest_start.cmp(&a.unit.earliest_start))
        .then_with(|| a.unit.key().cmp(b.unit.key()))
}

/// The priority a hierarchical unit preempts with: its PodGroups' priority when one sets
/// `priority` or `priorityClassName`, else its pods' (a Job's pods carry the template's
/// PriorityClass; Kueue's workload priority comes from it). The lowest over the unit.
pub fn unit_priority(cycles: &[&GroupCycle]) -> i32 {
    cycles
        .iter()
        .filter(|c| !c.pods.is_empty())
        .map(|c| {
            let spec = &c.group.pod_group.spec;
            let set =
                spec.priority.is_some() || spec.priority_class_name.as_deref().is_some_and(|n| !n.is_empty());
            match (set, c.group.priority) {
                (true, Some(p)) => p,
                _ => c.pods.iter().map(|p| p.priority).min().unwrap_or(0),
            }
        })
        .min()
        .unwrap_or(0)
}

/// The time Kueue orders a workload by (its queue-order timestamp): the earliest
/// `creationTimestamp` of the unit's PodGroups.
pub fn unit_created(cycles: &[&GroupCycle]) -> Option<Time> {
    cycles.iter().filter_map(|c| c.group.pod_group.metadata.creation_timestamp.clone()).min()
}

/// Kueue-mode preemption over a snapshot.
pub struct HierarchicalPreemptor<'a> {
    env: PreemptionEnv<'a>,
    policy: WithinClusterQueue,
    /// Calls that looked for victims (for `scheduler_preemption_attempts_total`).
    pub attempts: u64,
}

impl<'a> HierarchicalPreemptor<'a> {
    pub fn new(env: PreemptionEnv<'a>, policy: WithinClusterQueue) -> Self {
        HierarchicalPreemptor { env, policy, attempts: 0 }
    }

    /// When a victim unit was created: its PodGroup's `creationTimestamp`, or a pod's start
    /// time outside any PodGroup.
    fn unit_time(&self, unit: &VictimUnit) -> Option<Time> {
        let group = unit.group.clone().or_else(|| unit.pods.first().and_then(|p| p.group_key()));
        match group.and_then(|g| self.env.groups.info(&g)) {
            Some(info) => info.pod_group.metadata.creation_timestamp.clone(),
            None => unit.earliest_start.0.clone(),
        }
    }

    /// Whether `unit` is a candidate for a preemptor of `priority` created at `created`
    /// (Kueue's `findCandidates` for `withinClusterQueue`).
    fn candidate(&self, unit: &VictimUnit, priority: i32, created: Option<&Time>) -> bool {
        match self.policy {
            WithinClusterQueue::Never => false,
            WithinClusterQueue::LowerPriority => unit.priority < priority,
            WithinClusterQueue::LowerOrNewerEqualPriority => {
                unit.priority < priority
                    || (unit.priority == priority
                        && matches!((created, self.unit_time(unit)), (Some(p), Some(c)) if *p < c))
            }
        }
    }

    /// Why the unit may not preempt at all, if it may not.
    pub fn ineligible(&self, snap: &Snapshot, cycles: &[&GroupCycle], priority: i32) -> Option<&'static str> {
        let pods = || cycles.iter().flat_map(|c| c.pods.iter());
        if pods().any(|p| p.preemption_never) {
            return Some(MSG_NOT_ELIGIBLE_NEVER);
        }
        waiting_on_terminating(&self.env, snap, pods().map(|p| &**p), priority)
    }

    /// Victims that let the unit of `cycles` fit, found with `place` (the unit's placement
    /// on the snapshot as it stands: `Ok` with the result, or `Err` with why not). Leaves
    /// `snap` as found.
    pub fn find<T>(
        &mut self,
        snap: &mut Snapshot,
        cycles: &[&GroupCycle],
        priority: i32,
        mut place: impl FnMut(&mut Snapshot) -> Result<T, String>,
    ) -> Result<HierarchicalPlan<T>, String> {
        if let Some(reason) = self.ineligible(snap, cycles, priority) {
            return Err(reason.to_string());
        }
        let own: BTreeSet<&GroupKey> = cycles.iter().map(|c| &c.group.key).collect();
        let nodes = snap.node_ids().to_vec();
        let created = unit_created(cycles);
        // Every policy's candidates have at most the preemptor's priority (none under
        // `Never`): the others are never built.
        let max_priority = match self.policy {
            WithinClusterQueue::Never => return Err(MSG_NO_VICTIMS_PREEMPTOR.to_string()),
            WithinClusterQueue::LowerPriority => priority.saturating_sub(1),
            WithinClusterQueue::LowerOrNewerEqualPriority => priority,
        };
        let mut units: Vec<VictimUnit> =
            workload_units_up_to(snap, self.env.groups, &nodes, None, max_priority)
                .into_iter()
                .filter(|u| self.candidate(u, priority, created.as_ref()))
                .filter(|u| !u.pods.iter().any(|p| p.group_key().is_some_and(|g| own.contains(&g))))
                .collect();
        if units.is_empty() {
            return Err(MSG_NO_VICTIMS_PREEMPTOR.to_string());
        }
        self.attempts += 1;
        // PDB verdicts, spending the budgets least important unit first.
        units.sort_by(|a, b| super::victims::by_importance(b, a));
        let mut budgets = self.env.budgets();
        let (violating, other) = split_by_violation(units, VictimUnit::pods, &mut budgets);
        let env = &self.env;
        let candidate = |unit: VictimUnit, violates: bool| Candidate {
            terminating: unit.pods.iter().all(|p| env.is_terminating(p)),
            unit,
            violates,
        };
        let mut candidates: Vec<Candidate> = violating
            .into_iter()
            .map(|u| candidate(u, true))
            .chain(other.into_iter().map(|u| candidate(u, false)))
            .collect();
        candidates.sort_by(removal_order);

        let mark = snap.checkpoint();
        // Without every candidate the unit must fit, else nothing is evicted.
        for c in &candidates {
            remove_unit(snap, &c.unit);
        }
        let everything = place(snap);
        snap.rollback(mark);
        if let Err(why) = everything {
            return Err(format!(
                "preemption: the pod group does not fit even without its {} lower-priority victim(s): {why}",
                candidates.len()
            ));
        }

        // Remove in order until the unit fits.
        let mut fitted: Option<(usize, T)> = None;
        for (i, c) in candidates.iter().enumerate() {
            remove_unit(snap, &c.unit);
            if let Ok(t) = place(snap) {
                fitted = Some((i, t));
                break;
            }
        }
        let Some((last, mut placement)) = fitted else {
            snap.rollback(mark);
            return Err("preemption: the pod group does not fit after removing its victims".to_string());
        };
        // Fill back, most recently removed first (the last one is needed).
        let mut removed = vec![true; last + 1];
        for i in (0..last).rev() {
            let before = snap.checkpoint();
            restore_unit(snap, &candidates[i].unit);
            match place(snap) {
                Ok(t) => {
                    removed[i] = false;
                    placement = t;
                }
                Err(_) => snap.rollback(before),
            }
        }
        snap.rollback(mark);

        let mut victims = Vec::new();
        for (c, _) in candidates.iter().zip(&removed).filter(|(_, r)| **r) {
            victims.extend(c.unit.pods.iter().filter(|p| !self.env.is_terminating(p)).cloned());
        }
        Ok(HierarchicalPlan { victims, placement })
    }
}
