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

pub use config::args::{ArgsError, InterPodAffinityConfig, NodeResourcesFitArgs, PluginConfigEntry};
pub use config::{
    ExtensionPoint, PlacementSearch, PluginRef, PluginSet, PluginsConfig, SchedulerConfig, ScoringStrategy,
    TopologyAlgorithm, TopologyAlgorithms, WithinClusterQueue,
};
pub use engine::{
    ClusterEvent, Decision, DomainFit, Engine, FilterSummary, GroupExplanation, PlacementScores,
    ReleasedPodObject, ScoredPlacement, StorageEvent, VolumeWrite, CONDITION_POD_GROUP_SCHEDULED,
    REASON_NODE_FAILURES, REASON_SCHEDULED, REASON_SCHEDULER_ERROR, REASON_UNSCHEDULABLE,
};
pub use framework::registry::{EffectiveProfile, UnknownPlugin};
pub use tas::{Algorithm as TasAlgorithm, RankedDomain, TasRanking};

/// What the PV controller shares with the volume binder: a claim's and a volume's class,
/// the claim's request and volume name, the volume's capacity.
pub mod volumes {
    pub use crate::snapshot::volumes::{capacity_bytes, claim_class, pv_class, requested_bytes, volume_name};
}
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

/// Applies a profile's `pluginConfig` entries (KubeSchedulerConfiguration's
/// `profiles[].pluginConfig`, at field path `path`) to `config`, with kube-scheduler's
/// defaulting and validation messages; plugins declare their arguments in the registry.
/// Set `config.gates` first: some arguments are defaulted and validated by them. Each
/// error names its plugin and field; the caller adds the file and the profile.
pub fn apply_plugin_config(
    config: &mut SchedulerConfig,
    entries: &[PluginConfigEntry],
    path: &str,
) -> Result<(), Vec<ArgsError>> {
    config::args::apply_plugin_config(config, entries, path)
}

/// The effective profile of `config` as a KubeSchedulerConfiguration (`placer config`):
/// one profile per scheduler name, every plugin each extension point runs, in order, score
/// plugins with their weights, and the arguments of the plugins in it (`pluginConfig`).
/// Generated from the plugin registry; serializes with KubeSchedulerConfiguration's keys.
pub fn effective_configuration(config: &SchedulerConfig) -> EffectiveConfiguration {
    EffectiveConfiguration {
        api_version: "kubescheduler.config.k8s.io/v1",
        kind: "KubeSchedulerConfiguration",
        profiles: plugins::registry().effective_profiles(config),
    }
}

/// What [`effective_configuration`] returns.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EffectiveConfiguration {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub profiles: Vec<EffectiveProfile>,
}

/// Compiles a DRA device selector (a DeviceClass's or a request's `selectors[].cel.expression`)
/// with the CEL subset the allocator evaluates. Loaders call this so that an expression the
/// API server would reject, or one Placer cannot evaluate, is an error naming the field.
pub fn check_device_selector(expression: &str) -> Result<(), String> {
    snapshot::dra::cel::compile(expression).map(|_| ()).map_err(|e| e.to_string())
}

/// Checks the Kueue topology annotations of a pod template (a Job's, whose PodGroup will
/// carry them) against the topology `levels` (coarsest first) and the `pod_count` of the
/// PodGroup made from it, as the hierarchical strategy reads them (seed 002 "Validation":
/// named levels exist, slices below the main level, a slice size dividing the pods,
/// multi-layer order and sizes, mutual exclusion, gates). The message names the annotation
/// and reads without a PodGroup name. No levels: nothing to check.
pub fn check_topology_annotations(
    annotations: &std::collections::BTreeMap<String, String>,
    levels: &[String],
    gates: &placer_api::gates::FeatureGates,
    pod_count: u32,
) -> Result<(), String> {
    use placer_api::k8s::api::scheduling::v1alpha2::PodGroup;
    if levels.is_empty() {
        return Ok(());
    }
    let mut pg = PodGroup::default();
    pg.metadata.name = Some("template".to_string());
    pg.metadata.namespace = Some("default".to_string());
    pg.metadata.annotations = Some(annotations.clone());
    let info = model::PodGroupInfo::from_pod_group(std::sync::Arc::new(pg)).map_err(|e| e.to_string())?;
    match tas::parse_request(&info, levels, gates, pod_count) {
        Ok(_) => Ok(()),
        Err(e) => {
            let text = e.to_string();
            Err(text.strip_prefix("PodGroup default/template: ").map(str::to_string).unwrap_or(text))
        }
    }
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
    pub use crate::schedule_one::{
        find_node, find_node_sampled, find_node_sampled_reusing, num_feasible_nodes_to_find, SingleReuse,
    };
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
