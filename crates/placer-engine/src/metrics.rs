//! The names of the metrics the engine reports through its [`crate::Observer`] (seed 000
//! and kube-scheduler's names).

/// Counter `{result=scheduled|unschedulable|error}`: single-pod scheduling attempts.
pub const METRIC_SCHEDULE_ATTEMPTS: &str = "scheduler_schedule_attempts_total";

/// Counter `{result=scheduled|unschedulable|error}`: PodGroup cycles.
pub const METRIC_PODGROUP_ATTEMPTS: &str = "scheduler_podgroup_schedule_attempts_total";

/// Histogram: seconds per PodGroup cycle.
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
