//! The names of the metrics the engine reports through its [`crate::Observer`] (seed 000
//! and kube-scheduler's names).

/// Counter `{result=scheduled|unschedulable|error, profile}`: pod scheduling attempts,
/// counted by the driver once the outcome is known (a binding is part of the attempt).
pub const METRIC_SCHEDULE_ATTEMPTS: &str = "scheduler_schedule_attempts_total";

/// Histogram: seconds of the pod-level algorithm of one single-pod attempt.
pub const METRIC_SCHEDULING_ALGORITHM_DURATION: &str = "scheduler_scheduling_algorithm_duration_seconds";

/// Counter `{result=scheduled|unschedulable|error}`: PodGroup cycles.
pub const METRIC_PODGROUP_ATTEMPTS: &str = "scheduler_podgroup_schedule_attempts_total";

/// Histogram `{result}`: seconds per PodGroup cycle (algorithm and decisions).
pub const METRIC_PODGROUP_ATTEMPT_DURATION: &str = "scheduler_podgroup_scheduling_attempt_duration_seconds";

/// Histogram: seconds of the PodGroup algorithm of one cycle.
pub const METRIC_PODGROUP_ALGORITHM_DURATION: &str =
    "scheduler_podgroup_scheduling_algorithm_duration_seconds";

/// Histogram: seconds per PodGroup cycle (KEP-5732's name, no labels).
pub const METRIC_PODGROUP_DURATION: &str = "scheduler_podgroup_scheduling_duration_seconds";

/// Counter: candidate placements generated.
pub const METRIC_PLACEMENT_TOTAL: &str = "scheduler_placement_total";

/// Counter `{result=feasible|infeasible}`: placements evaluated.
pub const METRIC_PLACEMENT_EVALUATIONS: &str = "scheduler_placement_evaluations_total";

/// Histogram `{result}`: seconds to evaluate one placement.
pub const METRIC_PLACEMENT_EVALUATION_DURATION: &str = "scheduler_placement_evaluation_duration_seconds";

/// Counter `{kind=pod|podgroup}`: preemption attempts (PostFilter calls).
pub const METRIC_PREEMPTION_ATTEMPTS: &str = "scheduler_preemption_attempts_total";

/// Histogram `{kind=pod|podgroup}`: victims evicted per successful preemption.
pub const METRIC_PREEMPTION_VICTIMS: &str = "scheduler_preemption_victims";

/// Histogram `{plugin, extension_point, status}`: one plugin at one extension point
/// (observed for placement generation, as KEP-5732's monitoring section asks).
pub const METRIC_PLUGIN_EXECUTION_DURATION: &str = "scheduler_plugin_execution_duration_seconds";
