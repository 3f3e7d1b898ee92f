//! Preemption: making room for a pod, or a whole PodGroup, by evicting lower-priority pods.
//!
//! * [`pod`]: per-pod preemption (kube-scheduler's DefaultPreemption PostFilter), used by
//!   standalone pods and, with the `WorkloadAwarePreemption` gate off, by PodGroup members
//!   inside the group cycle (SEMANTICS §4: a feasible group that needed it waits for the
//!   victims to go, nominated to the chosen nodes).
//! * [`workload`]: workload-aware preemption (SEMANTICS §12): the PodGroup is the preemptor,
//!   with the PodGroup's priority; `disruptionMode: PodGroup` groups are evicted whole. In
//!   v1.36 groups with a topology constraint never preempt (SEMANTICS §13); the Placer gate
//!   `TopologyAwareWorkloadPreemption` lets them preempt inside one domain.
//! * [`hierarchical`]: Kueue-mode preemption for the hierarchical strategy (seed 002): the
//!   unit's whole topology placement decides fit; candidates removed in Kueue's order, then
//!   filled back.
//! * [`victims`]: victim units and their importance order; [`pdb`]: PodDisruptionBudgets.
//!
//! Everything here simulates on the snapshot and leaves it as found; the engine carries the
//! result out (evictions, nominations, conditions, events).
//!
//! **Nominated pods.** A pod (or group) that preempted is nominated to its node(s) until the
//! victims are gone. So that lower-priority pods do not take the room meanwhile, the engine
//! counts nominated pods as placed ([`assume_nominated`]) while filtering pods of lower or
//! equal priority ([`nominated_for`]), as upstream's `RunFilterPluginsWithNominatedPods`.

pub mod hierarchical;
pub mod pdb;
pub mod pod;
pub mod victims;
pub mod workload;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use placer_api::k8s::api::policy::v1::PodDisruptionBudget;
use rustc_hash::FxHashMap;

use crate::model::{GroupKey, NodeId, PodGroupInfo, PodInfo, PodKey};
use crate::podgroup::{GroupIndex, PodScheduler};
use crate::snapshot::Snapshot;

pub use pod::PodPreemptor;
pub use workload::WorkloadPreemptor;

/// The preemptor has `preemptionPolicy: Never` (a member pod, for a group).
pub const MSG_NOT_ELIGIBLE_NEVER: &str = "not eligible due to preemptionPolicy=Never.";
/// A lower-priority pod on the nominated node is still terminating.
pub const MSG_NOT_ELIGIBLE_TERMINATING: &str = "not eligible due to a terminating pod on the nominated node.";
/// No unit of lower priority than the preemptor group.
pub const MSG_NO_VICTIMS_PREEMPTOR: &str = "No preemption victims found for incoming preemptor";
/// v1.36 refuses workload-aware preemption for groups with a topology constraint.
pub const MSG_CONSTRAINED_UNSUPPORTED: &str =
    "workload aware preemption is not supported for pod groups with scheduling constraints";
/// Reason of the `DisruptionTarget` conditions written on victims.
pub const REASON_PREEMPTION_BY_SCHEDULER: &str = "PreemptionByScheduler";

/// What preemption reads besides the snapshot.
#[derive(Clone, Copy)]
pub struct PreemptionEnv<'a> {
    /// The pod-level filters.
    pub algo: &'a dyn PodScheduler,
    /// PodGroups: disruption modes, priorities and members.
    pub groups: &'a GroupIndex,
    /// PodDisruptionBudgets, by key.
    pub pdbs: &'a BTreeMap<PodKey, Arc<PodDisruptionBudget>>,
    /// Every pod the engine knows (for PDB health counts).
    pub pods: &'a FxHashMap<PodKey, Arc<PodInfo>>,
    /// Victims already being evicted (deletion requested, not yet observed), with the uid
    /// of the pod the eviction was meant for.
    pub evicting: &'a BTreeMap<PodKey, std::sync::Arc<str>>,
}

impl PreemptionEnv<'_> {
    /// PodDisruptionBudgets with the disruptions they allow now.
    pub fn budgets(&self) -> Vec<pdb::Budget> {
        if self.pdbs.is_empty() {
            return Vec::new();
        }
        pdb::budgets(self.pdbs, self.pods.values())
    }

    /// The pod is on its way out (being deleted, or evicted by an earlier decision).
    pub fn is_terminating(&self, pod: &PodInfo) -> bool {
        pod.deleting || self.evicting.get(&pod.key) == Some(&pod.uid)
    }

    /// The priority a pod has as a workload: its PodGroup's if it belongs to one, else its
    /// own.
    pub fn effective_priority(&self, pod: &PodInfo) -> i32 {
        effective_priority(self.groups, pod)
    }
}

/// [`MSG_NOT_ELIGIBLE_TERMINATING`] when a node some of `pods` are nominated to still holds
/// a pod of lower priority than `priority` on its way out (an earlier preemption is still
/// pending), else `None`.
pub fn waiting_on_terminating<'p>(
    env: &PreemptionEnv<'_>,
    snap: &Snapshot,
    pods: impl Iterator<Item = &'p PodInfo>,
    priority: i32,
) -> Option<&'static str> {
    let nominated: BTreeSet<NodeId> =
        pods.filter_map(|p| p.nominated_node_name.as_deref().and_then(|n| snap.node_id(n))).collect();
    let terminating = nominated.iter().any(|&id| {
        snap.node(id).pods.iter().any(|p| env.effective_priority(p) < priority && env.is_terminating(p))
    });
    terminating.then_some(MSG_NOT_ELIGIBLE_TERMINATING)
}

/// The priority of a PodGroup as a preemptor: resolved `spec.priority`, 0 when unset.
pub fn preemptor_priority(group: &PodGroupInfo) -> i32 {
    group.priority.unwrap_or(0)
}

/// A pod's priority as a workload: its PodGroup's priority when it belongs to an existing
/// PodGroup, else the pod's own priority.
pub fn effective_priority(groups: &GroupIndex, pod: &PodInfo) -> i32 {
    pod.group_key().and_then(|g| groups.info(&g).map(|info| preemptor_priority(info))).unwrap_or(pod.priority)
}

/// The nominated pods the filters of a pod of priority `priority` must count as placed:
/// pods nominated to a node (`nominations`: pod -> node name) that are still pending, whose
/// priority (`priority_of`) is at least `priority`, and that `skip` does not exclude (the
/// pods being scheduled themselves). In key order.
pub fn nominated_for<'p>(
    nominations: &'p BTreeMap<PodKey, String>,
    pods: &'p FxHashMap<PodKey, Arc<PodInfo>>,
    priority: i32,
    priority_of: impl Fn(&PodInfo) -> i32,
    skip: impl Fn(&PodKey) -> bool,
) -> Vec<(Arc<PodInfo>, &'p str)> {
    nominations
        .iter()
        .filter(|(key, _)| !skip(key))
        .filter_map(|(key, node)| pods.get(key).map(|p| (p, node)))
        .filter(|(p, _)| p.node_name.is_none() && !p.terminal && !p.deleting && priority_of(p) >= priority)
        .map(|(p, node)| (p.clone(), node.as_str()))
        .collect()
}

/// Places `nominated` pods on their nodes for the rest of the simulation (the caller rolls
/// back). Pods nominated to a node that no longer exists are left out. Returns how many
/// were placed.
pub fn assume_nominated(snap: &mut Snapshot, nominated: &[(Arc<PodInfo>, &str)]) -> usize {
    let mut placed = 0;
    for (pod, node) in nominated {
        if let Some(id) = snap.node_id(node) {
            if snap.pod_node(&pod.key).is_none() {
                snap.assume(pod.clone(), id);
                placed += 1;
            }
        }
    }
    placed
}

/// PodGroups losing pods to `victims`, with how many each loses, in key order. Only groups
/// whose PodGroup object exists are listed.
pub fn disrupted_groups(groups: &GroupIndex, victims: &[Arc<PodInfo>]) -> Vec<(GroupKey, usize)> {
    let mut out: BTreeMap<GroupKey, usize> = BTreeMap::new();
    for v in victims {
        if let Some(g) = v.group_key().filter(|g| groups.info(g).is_some()) {
            *out.entry(g).or_insert(0) += 1;
        }
    }
    out.into_iter().collect()
}

/// Nodes of a plan's nominations, deduplicated, in id order.
pub fn nominated_nodes(nominations: &[(usize, NodeId)]) -> Vec<NodeId> {
    let set: BTreeSet<NodeId> = nominations.iter().map(|(_, n)| *n).collect();
    set.into_iter().collect()
}
