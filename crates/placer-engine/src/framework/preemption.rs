//! The preemption hooks of the group cycle (SEMANTICS §4, §12), implemented in
//! `crate::preemption`: per-pod PostFilter inside the cycle, workload-aware preemption when
//! the group is unschedulable (also inside one placement, for constrained groups).

use std::sync::Arc;

use super::group::GroupCycle;
use super::placement::Placement;
use super::status::FitError;
use crate::model::{NodeId, PodInfo};
use crate::snapshot::Snapshot;

/// Victims whose removal lets a pod (or a group) fit, and where.
#[derive(Debug, Clone)]
pub struct PreemptionPlan {
    /// The node the preemptor is nominated to.
    pub node: NodeId,
    /// Pods to evict (they are removed from the snapshot for the rest of the simulation).
    pub victims: Vec<Arc<PodInfo>>,
}

/// Per-pod PostFilter (kube's DefaultPreemption) as the group cycle and the single-pod
/// path call it for a pod that fits no node.
pub trait PodPreemption {
    /// Called when `pod` fits no node of `nodes` (`fit` says why). May simulate on `snap` but
    /// must leave it as found. Returns the node to nominate and the victims, or `None`.
    fn preempt(
        &mut self,
        snap: &mut Snapshot,
        pod: &PodInfo,
        nodes: &[NodeId],
        fit: &FitError,
    ) -> Option<PreemptionPlan>;

    /// Forgets the last `calls` calls in what the hook counts (for
    /// `scheduler_preemption_attempts_total`): a tentative run that is thrown away and run
    /// again must count once. Default: the hook counts nothing.
    fn uncount(&mut self, _calls: u64) {}
}

/// What workload-aware preemption decided for a group.
#[derive(Debug, Clone)]
pub struct GroupPreemptionPlan {
    /// Pods to evict, all together.
    pub victims: Vec<Arc<PodInfo>>,
    /// Member (index into [`GroupCycle::pods`]) and the node it is nominated to.
    pub nominations: Vec<(usize, NodeId)>,
}

/// Workload-aware preemption (kube's PodGroupPostFilter), called when a group is
/// unschedulable (SEMANTICS §12).
pub trait GroupPreemption {
    /// Finds victims whose removal lets the group fit inside `nodes`. May simulate on
    /// `snap` but must leave it as found. `Err` carries the reason it failed (appended to
    /// the group's message).
    fn preempt(
        &mut self,
        snap: &mut Snapshot,
        cycle: &GroupCycle,
        nodes: &[NodeId],
    ) -> Result<GroupPreemptionPlan, String>;

    /// Topology-aware variant (Placer gate `TopologyAwareWorkloadPreemption`) for a group
    /// with a topology constraint that fits no placement: finds victims inside one of
    /// `placements` (the group's candidate domains) and returns that placement's index with
    /// the plan. Same contract as [`GroupPreemption::preempt`] otherwise.
    fn preempt_in_placements(
        &mut self,
        snap: &mut Snapshot,
        cycle: &GroupCycle,
        placements: &[Placement],
    ) -> Result<(usize, GroupPreemptionPlan), String>;
}

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
