//! The hierarchical strategy's cycle with Kueue-mode preemption
//! ([`crate::preemption::hierarchical`]): nominated pods of at least the unit's priority
//! are counted as placed, the unit is placed by the seed 002 algorithms, and a unit that
//! does not fit may evict lower-priority workloads (profile option
//! `topologyPreemption.withinClusterQueue`, on by default). The preemption is carried out like the
//! KEP-5732 path's (`outcome.rs`: evictions, `DisruptionTarget`, nominations, the
//! `PodGroupScheduled=False` condition while it waits).

use std::collections::BTreeSet;

use super::*;
use crate::config::WithinClusterQueue;
use crate::framework::group::{group_pod_message, GroupDecision};
use crate::metrics::METRIC_PREEMPTION_ATTEMPTS;
use crate::preemption::hierarchical::{unit_priority, HierarchicalPlan, HierarchicalPreemptor};
use crate::preemption::PreemptionEnv;
use crate::tas::engine_bridge::{place_unit, MemberPlacement};
use crate::tas::strategy::hierarchical_assignment;

impl Engine {
    /// The hierarchical strategy's decisions for a unit's cycles (same order; `None`: a
    /// cycle without pods to place).
    pub(super) fn decide_hierarchical(
        &mut self,
        cycles: &[(GroupKey, GroupCycle)],
        obs: &mut dyn Observer,
    ) -> Vec<Option<GroupDecision>> {
        let refs: Vec<&GroupCycle> = cycles.iter().map(|(_, c)| c).collect();
        // The unit's own members (nominated by an earlier cycle) are what is scheduled.
        let own: BTreeSet<PodKey> = cycles
            .iter()
            .flat_map(|(k, _)| self.groups.get(k).map(|e| e.members.clone()).unwrap_or_default())
            .collect();
        let room =
            refs.iter().flat_map(|c| c.pods.iter()).map(|p| self.nomination_priority(p)).min().unwrap_or(0);
        let mark = self.assume_nominated_pods(room, |k| own.contains(k));
        let Strategy::Hierarchical(cache) = &mut self.strategy else {
            self.snapshot.rollback(mark);
            return Vec::new();
        };
        let ctx = GroupContext { placements: &self.placements, algo: &self.fw, config: &self.config };
        let mut decisions = hierarchical_assignment(&ctx, &mut self.snapshot, cache, &refs);
        let unschedulable = decisions.iter().flatten().count() > 0
            && decisions.iter().flatten().all(|d| matches!(d.outcome, GroupOutcome::Unschedulable { .. }));
        // Kueue-mode preemption: the unit preempts with its priority, victims by disruption
        // unit, candidates as `withinClusterQueue` says (Placer's default `LowerPriority`).
        let policy = self.config.within_cluster_queue;
        if unschedulable && policy != WithinClusterQueue::Never {
            let env = PreemptionEnv {
                algo: &self.fw,
                groups: &self.groups,
                pdbs: &self.pdbs,
                pods: &self.pods,
                evicting: &self.preempt.evicting,
            };
            let mut preemptor = HierarchicalPreemptor::new(env, policy);
            let found = preemptor.find(&mut self.snapshot, &refs, unit_priority(&refs), |snap| {
                place_unit(ctx.algo, ctx.config, snap, cache, &refs).map_err(|f| f.message)
            });
            if preemptor.attempts > 0 {
                obs.count(METRIC_PREEMPTION_ATTEMPTS, &[("kind", "podgroup")], preemptor.attempts);
            }
            // Kueue keeps the fit message when preemption cannot help.
            if let Ok(plan) = found {
                decisions = waiting_on(plan);
            }
        }
        self.snapshot.rollback(mark);
        decisions
    }
}

/// Every member of a unit waits for `plan`'s victims, nominated to its planned nodes; the
/// victims are carried out once (with the first member that has pods).
fn waiting_on(plan: HierarchicalPlan<Vec<Option<MemberPlacement>>>) -> Vec<Option<GroupDecision>> {
    let mut victims = Some(plan.victims);
    plan.placement
        .into_iter()
        .map(|m| {
            m.map(|m| {
                GroupDecision::of(GroupOutcome::WaitingOnPreemption {
                    nominations: m.assignments,
                    victims: victims.take().unwrap_or_default(),
                    failures: m.left_out.into_iter().map(|(i, why)| (i, group_pod_message(&why))).collect(),
                })
            })
        })
        .collect()
}
