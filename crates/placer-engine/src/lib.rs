//! Placer's scheduling engine: a pure, synchronous library.
//!
//! Cluster objects go in as [`ClusterEvent`]s, scheduling decisions come out as
//! [`Decision`]s. There is no I/O, no clock and no async here: time is passed in (virtual
//! milliseconds), durations are measured by the [`Observer`] the caller hands in. The
//! simulator, the real-cluster mode, the benchmarks and the tests all drive this same
//! [`Engine`].
//!
//! The public API is this facade: the engine, its events and decisions, its configuration
//! (with [`check_profile`] for loaders), the observer and the metric names, the keys and
//! the few model helpers the simulator's report reads. Benchmarks and integration tests
//! that need internals use the [`bench`] and [`testing`] facades.
//!
//! Modules, bottom up (see `ARCHITECTURE.md` for their invariants):
//! * `resources`, `model`: resource vectors, the engine's view of pods and nodes.
//! * `snapshot`: nodes with their pods and requested resources, updated incrementally,
//!   with assume / checkpoint / rollback for simulating placements.
//! * `framework`: extension points (pod, placement, group), the registry by name.
//! * `plugins`: kube-scheduler's pod-level plugins and the placement plugins.
//! * `schedule_one`: the pod-level algorithm (filter, score, select) over a node set.
//! * `podgroup`: the PodGroup cycle inside one node set (gang / basic).
//! * `placement`: the KEP-5732 strategy: placement search, pre-filter, messages.
//! * `tas`: the hierarchical strategy (seed 002: Kueue's algorithms) and its adapter.
//! * `strategy`: which of the two the engine uses, chosen once.
//! * `preemption`: per-pod and workload-aware preemption.
//! * `queue`: the scheduling queue (priority, gates, backoff, PreEnqueue for gangs).
//! * `engine`: the facade tying them together; `engine/outcome.rs` turns every group
//!   decision into [`Decision`]s.

pub(crate) mod config;
pub(crate) mod engine;
pub(crate) mod framework;
pub mod metrics;
pub(crate) mod model;
pub(crate) mod observer;
pub(crate) mod placement;
pub(crate) mod plugins;
pub(crate) mod podgroup;
pub(crate) mod preemption;
pub(crate) mod queue;
pub(crate) mod resources;
pub(crate) mod schedule_one;
pub(crate) mod snapshot;
pub(crate) mod strategy;
pub(crate) mod tas;

pub use config::{
    ExtensionPoint, PlacementSearch, PluginRef, PluginSet, PluginsConfig, SchedulerConfig, ScoringStrategy,
};
pub use engine::{
    ClusterEvent, Decision, DomainFit, Engine, FilterSummary, GroupExplanation,
    CONDITION_POD_GROUP_SCHEDULED, REASON_NODE_FAILURES, REASON_SCHEDULED, REASON_SCHEDULER_ERROR,
    REASON_UNSCHEDULABLE,
};
pub use framework::registry::UnknownPlugin;
pub use model::{pod_requests, GroupKey, GroupPolicy, ObjectKey, PodKey};
pub use observer::{NoopObserver, Observer};
pub use preemption::REASON_PREEMPTION_BY_SCHEDULER;
pub use queue::QueueState;
pub use resources::{Resources, CPU, EPHEMERAL_STORAGE, MEMORY, PODS};

/// Checks a configuration's profile against the plugins Placer has: every name under
/// `plugins.<point>.enabled` / `disabled` must exist at that point. Loaders call this so
/// a typo is a configuration error naming the point and the plugin.
pub fn check_profile(config: &SchedulerConfig) -> Result<(), UnknownPlugin> {
    plugins::registry().check(config)
}

/// Compiles a DRA device selector (a DeviceClass's or a request's `selectors[].cel.expression`)
/// with the CEL subset the allocator evaluates. Loaders call this so that an expression the
/// API server would reject, or one Placer cannot evaluate, is an error naming the field.
pub fn check_device_selector(expression: &str) -> Result<(), String> {
    snapshot::dra::cel::compile(expression).map(|_| ()).map_err(|e| e.to_string())
}

/// Internals for the criterion benchmarks (`benches/`): not a stable API.
pub mod bench {
    pub use crate::framework::group::GroupCycle;
    pub use crate::framework::placement::{total_scores, Placement, PlacementAggregate, PlacementCandidate};
    pub use crate::framework::preemption::GroupHooks;
    pub use crate::framework::{Framework, PlacementFramework};
    pub use crate::model::{NodeId, NodeStatic, PodGroupInfo, PodInfo};
    pub use crate::placement::{schedule_pod_group, GroupContext};
    pub use crate::plugins::node_resources::fit_count;
    pub use crate::plugins::{placement_framework, pod_framework};
    pub use crate::schedule_one::find_node;
    pub use crate::snapshot::Snapshot;
    pub use crate::tas::{
        find_assignment, find_assignment_in, DomainTree, TasNode, TasProblem, TopologyMode, TopologyRequest,
    };
}

/// Internals for integration tests (`tests/`, and other crates' tests): not a stable API.
pub mod testing {
    pub use crate::model::{GroupPolicy, NodeStatic, PodGroupInfo, PodInfo, PodSchedulingView};
    pub use crate::tas::assignment::{DomainCount, TopologyAssignment};
    pub use crate::tas::tree::{fit_count, with_one_pod};
    pub use crate::tas::{
        find_assignment, parse_request, validate_group, TasNode, TasProblem, TopologyRequest,
    };
}
