//! Exposition names of the scheduler's metrics. Those the engine reports are its own
//! constants (so a rename there cannot drift from the families here); the others are
//! reported by the scheduler driver (`placer-controllers`).

pub use placer_engine::metrics::{
    METRIC_PLACEMENT_EVALUATIONS as PLACEMENT_EVALUATIONS,
    METRIC_PLACEMENT_EVALUATION_DURATION as PLACEMENT_EVALUATION_DURATION,
    METRIC_PLACEMENT_TOTAL as PLACEMENT_TOTAL, METRIC_PLUGIN_EXECUTION_DURATION as PLUGIN_EXECUTION_DURATION,
};
pub use placer_engine::metrics::{
    METRIC_PODGROUP_ALGORITHM_DURATION as PODGROUP_SCHEDULING_ALGORITHM_DURATION,
    METRIC_PODGROUP_ATTEMPTS as PODGROUP_SCHEDULE_ATTEMPTS,
    METRIC_PODGROUP_ATTEMPT_DURATION as PODGROUP_SCHEDULING_ATTEMPT_DURATION,
    METRIC_PODGROUP_DURATION as PODGROUP_SCHEDULING_DURATION, METRIC_SCHEDULE_ATTEMPTS as SCHEDULE_ATTEMPTS,
    METRIC_SCHEDULING_ALGORITHM_DURATION as SCHEDULING_ALGORITHM_DURATION,
};
pub use placer_engine::metrics::{
    METRIC_PREEMPTION_ATTEMPTS as PREEMPTION_ATTEMPTS, METRIC_PREEMPTION_VICTIMS as PREEMPTION_VICTIMS,
};

/// Histogram `{result, profile}`: one pod's scheduling attempt, algorithm and binding.
pub const SCHEDULING_ATTEMPT_DURATION: &str = "scheduler_scheduling_attempt_duration_seconds";
/// Gauge `{queue}`: pending pods by queue (`active`, `backoff`, `unschedulable`, `gated`).
pub const PENDING_PODS: &str = "scheduler_pending_pods";
/// Gauge `{queue, type}`: pending entities (`pod`, `podgroup`) by queue (KEP-5732's name).
pub const PENDING_ENTITIES: &str = "scheduler_pending_entities";
/// Gauge `{queue, type}`: the same numbers under the name kube-scheduler's source uses.
pub const QUEUED_ENTITIES: &str = "scheduler_queued_entities";
/// Histogram `{attempts}`: from a pod's first entry in the queue until it is bound.
pub const POD_SCHEDULING_SLI_DURATION: &str = "scheduler_pod_scheduling_sli_duration_seconds";
/// Histogram `{attempts}`: the same observations under the pre-1.29 name KEP-5732 cites.
pub const POD_SCHEDULING_DURATION: &str = "scheduler_pod_scheduling_duration_seconds";
/// Histogram: attempts it took to schedule a pod.
pub const POD_SCHEDULING_ATTEMPTS: &str = "scheduler_pod_scheduling_attempts";
/// Gauge `{operation}`: concurrent work in flight (`binding`: binding calls).
pub const GOROUTINES: &str = "scheduler_goroutines";
/// Histogram: victims of a workload's (PodGroup's) preemption.
pub const WORKLOAD_PREEMPTION_VICTIMS: &str = "scheduler_workload_preemption_victims";
