//! The engine facade: cluster events in, decisions out.

use std::sync::Arc;

use placer_api::k8s::api::core::v1::{Node, Pod};
use placer_api::k8s::api::policy::v1::PodDisruptionBudget;
use placer_api::k8s::api::scheduling::v1::PriorityClass;
use placer_api::k8s::api::scheduling::v1alpha2::PodGroup;

use crate::config::SchedulerConfig;
use crate::model::{GroupKey, PodKey};
use crate::observer::Observer;

/// A change in the cluster, fed to [`Engine::apply`] in the order it happened.
#[derive(Debug, Clone)]
pub enum ClusterEvent {
    NodeUpserted(Arc<Node>),
    NodeDeleted(String),
    PodUpserted(Arc<Pod>),
    PodDeleted(PodKey),
    PodGroupUpserted(Arc<PodGroup>),
    PodGroupDeleted(GroupKey),
    PriorityClassUpserted(Arc<PriorityClass>),
    PriorityClassDeleted(String),
    PodDisruptionBudgetUpserted(Arc<PodDisruptionBudget>),
    PodDisruptionBudgetDeleted(PodKey),
}

/// Something the caller must carry out in the cluster, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Bind the pod (binding subresource). The engine already counts the pod on the node;
    /// if the binding fails, call [`Engine::binding_failed`].
    Bind { pod: PodKey, uid: String, node: String },
    /// Set (or clear) `status.nominatedNodeName`.
    Nominate { pod: PodKey, node: Option<String> },
    /// The pod could not be scheduled this time: condition PodScheduled=False with this
    /// reason (`Unschedulable` or `SchedulerError`) and message, and a `FailedScheduling`
    /// event with the message.
    PodUnschedulable { pod: PodKey, reason: String, message: String },
    /// Set the PodGroup's `PodGroupScheduled` condition (only emitted when it changes).
    PodGroupCondition { group: GroupKey, status: bool, reason: String, message: String },
    /// Set an annotation on the PodGroup (e.g. the topology assignment).
    PodGroupAnnotation { group: GroupKey, key: String, value: String },
    /// Preemption: delete this victim pod; event reason `Preempted` with the message.
    Evict { pod: PodKey, uid: String, message: String },
    /// Preemption: condition `DisruptionTarget` (reason `PreemptionByScheduler`) on a
    /// victim PodGroup.
    PodGroupDisruptionTarget { group: GroupKey, message: String },
    /// A `Scheduled` event for a bound pod ("Successfully assigned ns/pod to node").
    ScheduledEvent { pod: PodKey, message: String },
}

/// The scheduler: queue, snapshot and framework.
pub struct Engine {
    config: SchedulerConfig,
}

impl Engine {
    pub fn new(config: SchedulerConfig) -> Engine {
        Engine { config }
    }

    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    /// Applies one cluster change (incremental: snapshot and queue are updated, not rebuilt).
    pub fn apply(&mut self, _event: ClusterEvent, _now_ms: u64) {}

    /// Runs scheduling cycles for everything ready at `now_ms` and returns the decisions.
    pub fn schedule(&mut self, _now_ms: u64, _observer: &mut dyn Observer) -> Vec<Decision> {
        Vec::new()
    }

    /// The earliest virtual time at which a backed-off pod becomes ready again.
    pub fn next_wakeup_ms(&self) -> Option<u64> {
        None
    }

    /// A binding the engine asked for failed: forget the assumption and requeue the pod.
    pub fn binding_failed(&mut self, _pod: &PodKey, _now_ms: u64) {}
}
