//! The PodGroup cycle's types: its input ([`GroupCycle`]), what happened inside one node
//! set ([`GroupAttempt`]), its decision ([`GroupOutcome`], the one answer of every
//! strategy), the pod-level algorithm it runs for each member ([`PodScheduler`]) and the
//! preemption hooks ([`PodPreemption`], [`GroupPreemption`]).

use std::sync::Arc;

use super::status::{FitError, Status};
use crate::model::GroupPolicy;
use crate::model::{NodeId, PodGroupInfo, PodInfo, PodKey};
use crate::snapshot::Snapshot;

/// Message of a gang that cannot start: fewer known members than `minCount`.
pub const MSG_WAITING_FOR_QUORUM: &str =
    "waiting for minCount pods from a gang to appear in scheduling queue";
/// Prefix of pod messages when the whole group failed.
pub const MSG_GROUP_UNSCHEDULABLE: &str = "pod group is unschedulable";
/// Message of a group that must wait for preemption victims to go.
pub const MSG_WAITING_ON_PREEMPTION: &str = "pod group is waiting for preemption to complete";

/// PreEnqueue message of a member whose PodGroup does not exist (yet).
pub fn waiting_for_group_message(group_name: &str) -> String {
    format!("waiting for pod's pod group {group_name:?} to appear in scheduling queue")
}

// ---------------------------------------------------------------------------------------
// The pod-level algorithm as the cycle uses it.
// ---------------------------------------------------------------------------------------

/// The pod-level algorithm (filter, score, select) the cycle runs for each member.
/// Implemented by [`Framework`]; tests may use simpler implementations.
pub trait PodScheduler {
    /// The best node of `nodes` for `pod`, or why none fits.
    fn find_node(&self, snap: &Snapshot, pod: &PodInfo, nodes: &[NodeId]) -> Result<NodeId, FitError>;
    /// Whether `pod` passes every filter on `node`.
    fn filter_node(&self, snap: &Snapshot, pod: &PodInfo, node: NodeId) -> Status;
    /// The nodes of `nodes` (same order) where `pod` passes every filter, or why none does.
    fn feasible_nodes(
        &self,
        snap: &Snapshot,
        pod: &PodInfo,
        nodes: &[NodeId],
    ) -> Result<Vec<NodeId>, FitError>;
    /// Which placement-search shortcuts are exact for `pod` under this algorithm's
    /// filters (see [`crate::framework::Dependence`]).
    fn shortcuts(&self, pod: &PodInfo) -> crate::framework::Shortcuts;
    /// The nodes that up to `max` consecutive copies of `pod` would get from `find_node`,
    /// each copy assumed before the next, stopping at the first copy that fits nowhere;
    /// only for a pod whose feasibility and scores on a node depend on that node alone
    /// (see [`is_uniform_node_local`]). `None` (the default): simulate instead.
    fn place_copies(
        &self,
        _snap: &Snapshot,
        _pod: &Arc<PodInfo>,
        _nodes: &[NodeId],
        _max: usize,
    ) -> Option<Vec<NodeId>> {
        None
    }
}

// ---------------------------------------------------------------------------------------
// One cycle.
// ---------------------------------------------------------------------------------------

/// The input of one PodGroup cycle.
#[derive(Debug, Clone)]
pub struct GroupCycle {
    pub group: Arc<PodGroupInfo>,
    /// Whether gang semantics apply (gang policy and the `GangScheduling` gate on).
    pub gang: bool,
    /// `minCount` in effect: the gang's `minCount`, or 1.
    pub min_count: u32,
    /// Members to place in this cycle, in cycle order.
    pub pods: Vec<Arc<PodInfo>>,
    /// Members already bound or assumed, with their node (`None`: the node is not in the
    /// snapshot). They count toward `minCount` and pin the topology domain.
    pub scheduled: Vec<(PodKey, Option<NodeId>)>,
    /// Whether every pod of `pods` requests the same resources, as `new` found them
    /// (nothing changes `pods` after: a cycle is made for its members and read).
    uniform_requests: bool,
}

impl GroupCycle {
    /// A cycle for `group` with `pods` (sorted here into cycle order: priority desc, then
    /// `arrival` asc) and the already scheduled members. `gang_enabled` is the
    /// `GangScheduling` gate.
    pub fn new(
        group: Arc<PodGroupInfo>,
        gang_enabled: bool,
        mut pods: Vec<(u64, Arc<PodInfo>)>,
        scheduled: Vec<(PodKey, Option<NodeId>)>,
    ) -> GroupCycle {
        pods.sort_by(|(a_arrival, a), (b_arrival, b)| {
            b.priority.cmp(&a.priority).then(a_arrival.cmp(b_arrival)).then_with(|| a.key.cmp(&b.key))
        });
        let (gang, min_count) = match group.policy {
            GroupPolicy::Gang { min_count } if gang_enabled => (true, min_count.max(1)),
            _ => (false, 1),
        };
        let pods: Vec<Arc<PodInfo>> = pods.into_iter().map(|(_, p)| p).collect();
        let uniform_requests = pods.windows(2).all(|w| w[0].requests == w[1].requests);
        GroupCycle { group, gang, min_count, pods, scheduled, uniform_requests }
    }

    /// Whether every pod of the cycle requests the same resources.
    pub fn uniform_requests(&self) -> bool {
        debug_assert_eq!(
            self.uniform_requests,
            self.pods.windows(2).all(|w| w[0].requests == w[1].requests),
            "the cycle's pods are as it was made with"
        );
        self.uniform_requests
    }

    /// Members already scheduled, as a count.
    pub fn scheduled_count(&self) -> u32 {
        u32::try_from(self.scheduled.len()).unwrap_or(u32::MAX)
    }

    /// Pods that must be placed now for the group to be feasible: `minCount` minus the
    /// scheduled members, at least 1.
    pub fn needed(&self) -> u32 {
        self.min_count.saturating_sub(self.scheduled_count()).max(1)
    }

    /// The group can never be feasible with these pods: even if all were placed, scheduled
    /// plus placed stays below `minCount` (or there is nothing to place).
    pub fn cannot_reach_min_count(&self) -> Option<String> {
        let remaining = u32::try_from(self.pods.len()).unwrap_or(u32::MAX);
        let scheduled = self.scheduled_count();
        if remaining.saturating_add(scheduled) < self.min_count {
            return Some(format!(
                "minCount ({}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining",
                self.min_count
            ));
        }
        None
    }
}

/// A per-pod preemption performed during a cycle.
#[derive(Debug, Clone)]
pub struct PodPreemptionRecord {
    /// Index into [`GroupCycle::pods`].
    pub pod: usize,
    pub node: NodeId,
    pub victims: Vec<Arc<PodInfo>>,
}

impl PartialEq for PodPreemptionRecord {
    fn eq(&self, other: &Self) -> bool {
        self.pod == other.pod && self.node == other.node && same_pods(&self.victims, &other.victims)
    }
}

/// Two pod lists name the same pods (by key and uid) in the same order.
pub fn same_pods(a: &[Arc<PodInfo>], b: &[Arc<PodInfo>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.key == y.key && x.uid == y.uid)
}

/// The verdict on a group inside one node set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Feasible,
    /// Not feasible, with the `PlacementFeasible` message.
    Unschedulable(String),
}

/// What happened to a group inside one node set.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupAttempt {
    /// (index into [`GroupCycle::pods`], node) of each placed pod, in cycle order.
    pub placed: Vec<(usize, NodeId)>,
    /// (index, why) of each pod that fit no node.
    pub failed: Vec<(usize, FitError)>,
    /// Indexes of pods never tried because the loop stopped early.
    pub skipped: Vec<usize>,
    /// Per-pod preemptions (their pods are also in `placed`).
    pub preemptions: Vec<PodPreemptionRecord>,
    pub verdict: Verdict,
}

impl GroupAttempt {
    /// The group is feasible here.
    pub fn is_feasible(&self) -> bool {
        self.verdict == Verdict::Feasible
    }

    /// Scheduled members plus pods placed here.
    pub fn scheduled_total(&self, cycle: &GroupCycle) -> u32 {
        cycle.scheduled_count().saturating_add(u32::try_from(self.placed.len()).unwrap_or(u32::MAX))
    }

    /// Short reason of the failure: the most frequent reason of the first pod that failed
    /// (ties: the lexicographically smallest), else the verdict message.
    pub fn main_reason(&self) -> String {
        if let Some((_, fit)) = self.failed.first() {
            if let Some(reason) = dominant_reason(fit) {
                return reason;
            }
        }
        match &self.verdict {
            Verdict::Unschedulable(m) => m.clone(),
            Verdict::Feasible => String::new(),
        }
    }
}

/// The most frequent reason of a FitError (ties: lexicographically smallest), or its
/// PreFilter message.
pub fn dominant_reason(fit: &FitError) -> Option<String> {
    let mut best: Option<(&String, usize)> = None;
    for (reason, &count) in &fit.reasons {
        if best.is_none_or(|(_, c)| count > c) {
            best = Some((reason, count));
        }
    }
    best.map(|(r, _)| r.clone()).or_else(|| fit.pre_message.clone())
}

/// The decision for a PodGroup cycle. Pod indexes refer to [`GroupCycle::pods`].
#[derive(Debug, Clone)]
pub enum GroupOutcome {
    /// Bind `assignments`; the pods in `failures` go back to the queue with their message.
    Scheduled {
        /// The chosen placement's name (`None` without a topology constraint).
        placement: Option<String>,
        assignments: Vec<(usize, NodeId)>,
        failures: Vec<(usize, String)>,
    },
    /// Feasible only once `victims` are gone: evict them, nominate `nominations`, retry later.
    WaitingOnPreemption {
        nominations: Vec<(usize, NodeId)>,
        victims: Vec<Arc<PodInfo>>,
        failures: Vec<(usize, String)>,
    },
    /// Not feasible: the group's message and one message per pod.
    Unschedulable { message: String, pod_messages: Vec<(usize, String)> },
    /// The cycle failed (e.g. members in two domains).
    Error { message: String },
    /// No replacement for pods lost with failed nodes fits (seed 002,
    /// `TASFailedNodeReplacementFailFast`): evict every scheduled member, so that the
    /// whole group is placed again.
    EvictForNodeFailure { failed_nodes: Vec<String>, message: String },
}

impl PartialEq for GroupOutcome {
    fn eq(&self, other: &Self) -> bool {
        use GroupOutcome::*;
        match (self, other) {
            (
                Scheduled { placement: p1, assignments: a1, failures: f1 },
                Scheduled { placement: p2, assignments: a2, failures: f2 },
            ) => p1 == p2 && a1 == a2 && f1 == f2,
            (
                WaitingOnPreemption { nominations: n1, victims: v1, failures: f1 },
                WaitingOnPreemption { nominations: n2, victims: v2, failures: f2 },
            ) => n1 == n2 && same_pods(v1, v2) && f1 == f2,
            (
                Unschedulable { message: m1, pod_messages: p1 },
                Unschedulable { message: m2, pod_messages: p2 },
            ) => m1 == m2 && p1 == p2,
            (Error { message: m1 }, Error { message: m2 }) => m1 == m2,
            (
                EvictForNodeFailure { failed_nodes: n1, message: m1 },
                EvictForNodeFailure { failed_nodes: n2, message: m2 },
            ) => n1 == n2 && m1 == m2,
            _ => false,
        }
    }
}

/// A member's message when its whole group failed: `pod group is unschedulable: <message>`.
pub fn group_pod_message(message: &str) -> String {
    format!("{MSG_GROUP_UNSCHEDULABLE}: {message}")
}

/// Every pod of the cycle fails with the group's message.
pub fn unschedulable_all(cycle: &GroupCycle, message: String) -> GroupOutcome {
    let pm = group_pod_message(&message);
    GroupOutcome::Unschedulable {
        pod_messages: (0..cycle.pods.len()).map(|i| (i, pm.clone())).collect(),
        message,
    }
}

/// One PodGroup's decision, as either strategy answers it: what to do with its pods,
/// (hierarchical strategy, on success) its `TopologyAssignment` (compact v1beta2
/// encoding) as JSON for the [`placer_api::annotations::TOPOLOGY_ASSIGNMENT`] annotation,
/// and the failed nodes a placed group that lost pods waits to have replaced (for the
/// [`placer_api::annotations::UNHEALTHY_NODES`] annotation; empty otherwise).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupDecision {
    pub outcome: GroupOutcome,
    pub topology_assignment: Option<String>,
    pub unhealthy_nodes: Vec<String>,
}

impl GroupDecision {
    /// A decision without annotation.
    pub fn of(outcome: GroupOutcome) -> GroupDecision {
        GroupDecision { outcome, topology_assignment: None, unhealthy_nodes: Vec::new() }
    }
}
