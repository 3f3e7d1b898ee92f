//! The PodGroup cycle as the engine runs it, for both strategies: gather the unit's queued
//! members, build one [`GroupCycle`] per PodGroup, let the strategy chosen at build time
//! decide ([`crate::strategy::Strategy`]), and hand every decision to `outcome.rs`.
//!
//! A unit is one PodGroup, or (hierarchical strategy) the PodGroups of a Kueue PodSet group
//! (`tas_unit.rs`), decided together.

use super::*;
use crate::framework::group::{GroupDecision, MSG_GROUP_UNSCHEDULABLE};
use crate::strategy::Strategy;
use crate::tas::engine_bridge::{cycle_tolerations, node_failed, running_on_nodes};

impl Engine {
    /// Takes `first` and every other queued, ungated member of `groups` out of the queue
    /// (kube's PopSpecificPod), dropping pods being deleted or already assumed. `None` when
    /// nothing is left to schedule, or when the members name different schedulers (then
    /// each fails with kube-scheduler's error).
    pub(super) fn gather_members(
        &mut self,
        first: QueuedPod,
        groups: &[GroupKey],
        now_ms: u64,
        obs: &mut dyn Observer,
        out: &mut Vec<Decision>,
    ) -> Option<Vec<QueuedPod>> {
        let mut members = vec![first];
        for g in groups {
            for key in self.queue.group_members(g) {
                if let Some(q) = self.queue.take_ungated(&key) {
                    members.push(q);
                }
            }
        }
        members.retain(|m| !m.pod.deleting && !self.assumed.contains_key(&m.pod.key));
        let first_name = members.first()?.pod.scheduler_name.clone();
        if let Some(other) = members.iter().find(|m| m.pod.scheduler_name != first_name) {
            let message = format!(
                "all pods in a single pod group should have the same .spec.schedulerName set, got: {:?} and {:?}",
                first_name, other.pod.scheduler_name
            );
            obs.count(METRIC_PODGROUP_ATTEMPTS, &[("result", "error")], 1);
            for m in members {
                self.fail(m, REASON_SCHEDULER_ERROR, message.clone(), false, now_ms, out);
            }
            return None;
        }
        Some(members)
    }

    /// Members of `group` already bound or assumed, with their node, in key order.
    pub(super) fn scheduled_members(&self, group: &GroupKey) -> Vec<(PodKey, Option<NodeId>)> {
        let Some(entry) = self.groups.get(group) else { return Vec::new() };
        let mut scheduled: Vec<(PodKey, Option<NodeId>)> = entry
            .members
            .iter()
            .filter(|k| {
                self.assumed.contains_key(*k)
                    || self.pods.get(*k).is_some_and(|p| p.node_name.is_some() && !p.terminal)
            })
            .map(|k| (k.clone(), self.snapshot.pod_node(k)))
            .collect();
        // Sorted after filtering: a gang's first cycle has no scheduled member to sort.
        scheduled.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        scheduled
    }

    /// The PodGroup cycle for the unit of `first`'s PodGroup.
    pub(super) fn schedule_group(
        &mut self,
        first: QueuedPod,
        now_ms: u64,
        obs: &mut dyn Observer,
        out: &mut Vec<Decision>,
    ) {
        let Some(group_key) = first.pod.group_key() else {
            self.schedule_single(first, now_ms, obs, out);
            return;
        };
        if self.groups.info(&group_key).is_none() {
            let reason = waiting_for_group_message(&group_key.name);
            self.queue.gate(first, reason.into());
            return;
        }
        if let Some(reason) = self.tas_unit_wait_reason(&group_key) {
            self.queue.gate(first, reason.into());
            return;
        }
        let timer = obs.start_timer();
        let algorithm_timer = obs.start_timer();
        let unit = self.unit_of(&group_key);
        let Some(members) = self.gather_members(first, &unit, now_ms, obs, out) else {
            return;
        };

        let mut cycles: Vec<(GroupKey, GroupCycle)> = Vec::with_capacity(unit.len());
        for g in &unit {
            let Some(info) = self.groups.info(g).cloned() else { continue };
            let pods: Vec<(u64, Arc<PodInfo>)> = members
                .iter()
                .filter(|q| q.pod.group_key().as_ref() == Some(g))
                .map(|q| (q.arrival, q.pod.clone()))
                .collect();
            let cycle =
                GroupCycle::new(info, self.gate(Gate::GangScheduling), pods, self.scheduled_members(g));
            cycles.push((g.clone(), cycle));
        }
        let mut queued: FxHashMap<PodKey, QueuedPod> =
            members.into_iter().map(|m| (m.pod.key.clone(), m)).collect();

        let decisions = match self.group_failure_state(&cycles) {
            Some(state) => match self.reused_group_failure(state, &cycles[0].1, obs) {
                Some(decision) => vec![Some(decision)],
                None => self.decide_recorded(state, &cycles, obs),
            },
            None => self.decide(&cycles, obs),
        };
        let secs = obs.elapsed_seconds(algorithm_timer);
        obs.observe(METRIC_PODGROUP_ALGORITHM_DURATION, &[], secs);
        let mut results: Vec<&'static str> = Vec::with_capacity(cycles.len());
        for ((key, cycle), decision) in cycles.iter().zip(decisions) {
            if let Some(decision) = decision {
                results.push(self.carry_out(key, cycle, decision, &mut queued, now_ms, obs, out));
            }
        }
        // Members without a verdict (should not happen) go back as unschedulable.
        let mut rest: Vec<QueuedPod> = queued.into_values().collect();
        rest.sort_by_key(|q| q.arrival);
        for q in rest {
            self.fail(q, REASON_UNSCHEDULABLE, MSG_GROUP_UNSCHEDULABLE.to_string(), true, now_ms, out);
        }
        let secs = obs.elapsed_seconds(timer);
        for result in results {
            obs.observe(METRIC_PODGROUP_ATTEMPT_DURATION, &[("result", result)], secs);
        }
        obs.observe(METRIC_PODGROUP_DURATION, &[], secs);
    }

    /// The strategy's decisions for a unit's cycles (same order; `None`: a cycle without
    /// pods to place). The only place the two strategies differ.
    pub(super) fn decide(
        &mut self,
        cycles: &[(GroupKey, GroupCycle)],
        obs: &mut dyn Observer,
    ) -> Vec<Option<GroupDecision>> {
        if let Strategy::Hierarchical(_) = &self.strategy {
            return self.decide_hierarchical(cycles, obs);
        }
        let mut out = Vec::with_capacity(cycles.len());
        for (key, cycle) in cycles {
            let outcome = self.run_group_cycle(cycle, obs);
            out.push(Some(self.evict_for_failed_nodes(key, cycle, outcome)));
        }
        out
    }

    /// KEP-5732 strategy, a placed gang whose members lost on failed nodes cannot be
    /// replaced next to the survivors: with the profile option `evictGangOnFailedNode` on it
    /// is evicted whole, to be placed again; off (the default) the replacements stay
    /// Pending and the failed nodes are published on the group.
    fn evict_for_failed_nodes(
        &mut self,
        key: &GroupKey,
        cycle: &GroupCycle,
        outcome: GroupOutcome,
    ) -> GroupDecision {
        let GroupOutcome::Unschedulable { message, .. } = &outcome else { return GroupDecision::of(outcome) };
        if cycle.scheduled.is_empty() || cycle.pods.is_empty() {
            return GroupDecision::of(outcome);
        }
        let Some(lost) = self.lost_on.get(key) else { return GroupDecision::of(outcome) };
        let tolerations = cycle_tolerations(cycle);
        let running = running_on_nodes(&self.snapshot, cycle);
        let failed: Vec<String> = lost
            .iter()
            .filter(|n| {
                let on_node = running.get(n.as_str()).copied().unwrap_or(0);
                node_failed(&self.snapshot, n, tolerations, on_node, &self.config.gates)
            })
            .cloned()
            .collect();
        if failed.is_empty() || !self.config.evicts_gang_on_failed_node() {
            return GroupDecision { unhealthy_nodes: failed, ..GroupDecision::of(outcome) };
        }
        self.lost_on.remove(key);
        let message = format!("no replacement for failed node(s) {} fits: {message}", failed.join(", "));
        GroupDecision::of(GroupOutcome::EvictForNodeFailure { failed_nodes: failed, message })
    }

    /// On first sight of a PodGroup (e.g. after a restart): the failed nodes it was
    /// waiting on, published on it, are where it lost pods (KEP-5732 keeps no assignment
    /// to find them in).
    pub(super) fn restore_lost_nodes(&mut self, key: &GroupKey, pg: &PodGroup) {
        let published = unhealthy_nodes_of(pg.metadata.annotations.as_ref());
        if !published.is_empty() {
            self.lost_on.entry(key.clone()).or_default().extend(published);
        }
    }
}

/// The node names of a PodGroup's `placer.dev/unhealthy-nodes` annotation (Kueue's
/// `unhealthyNodes` JSON; anything else reads as none).
pub(crate) fn unhealthy_nodes_of(annotations: Option<&BTreeMap<String, String>>) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct UnhealthyNode {
        name: String,
    }
    annotations
        .and_then(|a| a.get(placer_api::annotations::UNHEALTHY_NODES))
        .and_then(|text| serde_json::from_str::<Vec<UnhealthyNode>>(text).ok())
        .map(|nodes| nodes.into_iter().map(|n| n.name).collect())
        .unwrap_or_default()
}

/// The `placer.dev/unhealthy-nodes` value for `nodes` (`None` when there are none).
pub(crate) fn unhealthy_nodes_value(nodes: &[String]) -> Option<String> {
    (!nodes.is_empty()).then(|| {
        let list: Vec<serde_json::Value> = nodes.iter().map(|n| serde_json::json!({ "name": n })).collect();
        serde_json::Value::Array(list).to_string()
    })
}
