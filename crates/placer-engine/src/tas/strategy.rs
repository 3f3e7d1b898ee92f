//! The hierarchical strategy's adapter: a seed 002 unit decided by
//! [`super::engine_bridge::place_unit`], answered with the [`GroupOutcome`] every strategy
//! gives.

use crate::framework::group::{
    group_pod_message, unschedulable_all, GroupCycle, GroupDecision, GroupOutcome,
};
use crate::placement::GroupContext;
use crate::snapshot::Snapshot;

use placer_api::gates::Gate;

use super::engine_bridge::{failed_nodes, place_unit, TasCache};

/// Kueue's node-failure controller evicts a placed workload as soon as a second of its
/// assigned nodes fails while it still waits for replacements (`evictWorkloadIfNeeded`:
/// one failed node is replaced, several are not), whether or not replacements would fit and
/// whatever `TASFailedNodeReplacementFailFast` says. Here that is a placed group, with pods
/// to place again, that lost pods on two or more failed nodes.
fn evict_for_multiple_failed_nodes(
    ctx: &GroupContext<'_>,
    snap: &Snapshot,
    cycles: &[&GroupCycle],
) -> Option<Vec<Option<GroupDecision>>> {
    let [cycle] = cycles else { return None };
    let gates = &ctx.config.gates;
    if cycle.pods.is_empty() || cycle.scheduled.is_empty() || !gates.enabled(Gate::TASFailedNodeReplacement) {
        return None;
    }
    let failed = failed_nodes(snap, cycle, gates);
    if failed.len() < 2 {
        return None;
    }
    let message = format!(
        "Workload eviction triggered due to multiple TAS assigned node failures, including: {}",
        failed.join(", ")
    );
    Some(vec![Some(GroupDecision::of(GroupOutcome::EvictForNodeFailure { failed_nodes: failed, message }))])
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
) -> Vec<Option<GroupDecision>> {
    if let Some(evicted) = evict_for_multiple_failed_nodes(ctx, snap, cycles) {
        return evicted;
    }
    match place_unit(ctx.algo, ctx.config, snap, cache, cycles) {
        Ok(members) => members
            .into_iter()
            .map(|m| {
                m.map(|m| {
                    let failures =
                        m.left_out.into_iter().map(|(i, why)| (i, group_pod_message(&why))).collect();
                    GroupDecision {
                        outcome: GroupOutcome::Scheduled {
                            placement: None,
                            assignments: m.assignments,
                            failures,
                        },
                        topology_assignment: serde_json::to_string(&m.topology_assignment).ok(),
                        unhealthy_nodes: Vec::new(),
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
                let gates = &ctx.config.gates;
                // A placed group whose replacements do not fit: its failed nodes (seed 002).
                let repairing = cycles.len() == 1
                    && !failure.internal
                    && !cycle.scheduled.is_empty()
                    && gates.enabled(Gate::TASFailedNodeReplacement);
                let failed = if repairing { failed_nodes(snap, cycle, gates) } else { Vec::new() };
                if !failed.is_empty() && ctx.config.evicts_gang_on_failed_node() {
                    let message = format!(
                        "no replacement for failed node(s) {} fits: {}",
                        failed.join(", "),
                        failure.message
                    );
                    return Some(GroupDecision::of(GroupOutcome::EvictForNodeFailure {
                        failed_nodes: failed,
                        message,
                    }));
                }
                let outcome = if failure.internal {
                    GroupOutcome::Error { message: failure.message.clone() }
                } else {
                    unschedulable_all(cycle, failure.message.clone())
                };
                Some(GroupDecision { outcome, topology_assignment: None, unhealthy_nodes: failed })
            })
            .collect(),
    }
}
