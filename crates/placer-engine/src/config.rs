//! Scheduler configuration, in the spirit of KubeSchedulerConfiguration; [`args`]: the
//! plugins' `pluginConfig` arguments.

pub mod args;

use std::collections::BTreeMap;

use placer_api::gates::FeatureGates;

pub use crate::tas::{Algorithm as TopologyAlgorithm, AlgorithmChoice as TopologyAlgorithms};

/// How the engine is set up. The same struct serves the simulator (a scenario's
/// `scheduler` block) and `placer serve` (its configuration file).
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// Pods whose `spec.schedulerName` is one of these are scheduled; other pods only
    /// use capacity.
    pub scheduler_names: Vec<String>,
    pub gates: FeatureGates,
    /// Declared topology hierarchy, coarsest first. Non-empty: seed 002's hierarchical
    /// algorithms choose domains and per-node counts. Empty: KEP-5732 placements.
    pub topology_levels: Vec<String>,
    /// Score plugin weights by plugin name; plugins absent here use their defaults.
    pub plugin_weights: BTreeMap<String, i64>,
    /// `percentageOfPlacementsToScore`: `None` = the adaptive default of seed 000.
    pub percentage_of_placements_to_score: Option<u32>,
    /// `percentageOfNodesToScore` for single pods: `None` = kube-scheduler's adaptive
    /// default (every node below 100 nodes, `50 - nodes/125` percent, at least 5%).
    pub percentage_of_nodes_to_score: Option<u32>,
    /// Pod-level NodeResourcesFit scoring strategy.
    pub node_resources_fit_strategy: ScoringStrategy,
    /// Placement-level NodeResourcesFit scoring strategy (`placementScoringStrategy`).
    pub placement_scoring_strategy: ScoringStrategy,
    /// Initial and maximum backoff of a failed pod, in milliseconds.
    pub pod_initial_backoff_ms: u64,
    pub pod_max_backoff_ms: u64,
    /// How placements are searched: Placer's optimized path (the default) or the plain
    /// KEP-5732 algorithm, kept for benchmarks and as a reference.
    pub placement_search: PlacementSearch,
    /// Plugins enabled and disabled per extension point, as a KubeSchedulerConfiguration
    /// profile's `plugins` (applied to the defaults of [`crate::plugins::registry`]).
    pub plugins: PluginsConfig,
    /// Profile option `evictGangOnFailedNode`: when the pods a PodGroup lost with a failed
    /// node cannot be replaced, evict the whole gang and place it again (`true`) or keep
    /// the replacements Pending next to the survivors (`false`). `None`: the mode's
    /// default, on with `topologyLevels` (Kueue's `TASFailedNodeReplacementFailFast`
    /// gate), off without (KEP-5732 keeps them Pending in the old domain).
    pub evict_gang_on_failed_node: Option<bool>,
    /// Profile option `topologyAlgorithms` (with `topologyLevels`): the seed 002 algorithm
    /// of required, preferred and unconstrained requests; unset kinds follow the gates.
    pub topology_algorithms: TopologyAlgorithms,
    /// Profile option `topologyPreemption.withinClusterQueue` (with `topologyLevels`):
    /// which workloads a unit whose topology request does not fit may preempt, as Kueue's
    /// ClusterQueue `preemption.withinClusterQueue`. Placer's default is
    /// [`WithinClusterQueue::LowerPriority`] (Kueue's API default is `Never`).
    pub within_cluster_queue: WithinClusterQueue,
    /// `NodeResourcesFitArgs.ignoredResources`: extended resources the NodeResourcesFit
    /// filter does not check.
    pub fit_ignored_resources: Vec<String>,
    /// `NodeResourcesFitArgs.ignoredResourceGroups`: extended resource groups (the part
    /// before `/`) the NodeResourcesFit filter does not check.
    pub fit_ignored_resource_groups: Vec<String>,
    /// `NodeResourcesBalancedAllocationArgs.resources`: the resources whose allocation
    /// fractions are balanced (weights are 1). Default cpu and memory.
    pub balanced_allocation_resources: Vec<(String, i64)>,
    /// `NodeAffinityArgs.addedAffinity`: node affinity every pod must also satisfy
    /// (required terms) and is scored by (preferred terms).
    pub node_affinity_added: Option<std::sync::Arc<placer_api::k8s::api::core::v1::NodeAffinity>>,
    /// `InterPodAffinityArgs`.
    pub inter_pod_affinity: args::InterPodAffinityConfig,
    /// `PodTopologySpreadArgs.defaultingType` / `defaultConstraints` (default `System`).
    pub spread_defaulting: args::SpreadDefaulting,
    /// `DefaultPreemptionArgs`: how many candidate nodes per-pod preemption looks for.
    pub preemption_candidates: args::PreemptionCandidates,
    /// `VolumeBindingArgs`.
    pub volume_binding: args::VolumeBindingConfig,
}

/// Kueue's ClusterQueue `preemption.withinClusterQueue`: the candidates of Kueue-mode
/// preemption (the hierarchical strategy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WithinClusterQueue {
    /// No preemption: a unit that does not fit waits.
    Never,
    /// Workloads of strictly lower priority (Placer's default).
    #[default]
    LowerPriority,
    /// Workloads of lower priority, and of equal priority created after the preemptor.
    LowerOrNewerEqualPriority,
}

impl WithinClusterQueue {
    /// Every policy, in documentation order.
    pub const ALL: [WithinClusterQueue; 3] = [
        WithinClusterQueue::Never,
        WithinClusterQueue::LowerPriority,
        WithinClusterQueue::LowerOrNewerEqualPriority,
    ];

    /// The name in configuration (Kueue's spelling).
    pub fn name(self) -> &'static str {
        match self {
            WithinClusterQueue::Never => "Never",
            WithinClusterQueue::LowerPriority => "LowerPriority",
            WithinClusterQueue::LowerOrNewerEqualPriority => "LowerOrNewerEqualPriority",
        }
    }

    /// Parses a configured value; the error names the accepted values, as Kueue's API
    /// validation (`Unsupported value`).
    pub fn parse(value: &str) -> Result<WithinClusterQueue, String> {
        WithinClusterQueue::ALL.iter().copied().find(|p| p.name() == value).ok_or_else(|| {
            format!(
                "Unsupported value: {value:?}: supported values: \"Never\", \"LowerPriority\", \"LowerOrNewerEqualPriority\""
            )
        })
    }
}

impl SchedulerConfig {
    /// Whether a gang whose lost pods find no replacement is evicted and placed again
    /// (see [`SchedulerConfig::evict_gang_on_failed_node`]).
    pub fn evicts_gang_on_failed_node(&self) -> bool {
        self.evict_gang_on_failed_node.unwrap_or_else(|| {
            !self.topology_levels.is_empty()
                && self.gates.enabled(placer_api::gates::Gate::TASFailedNodeReplacementFailFast)
        })
    }
}

/// An extension point a profile configures plugins at (KubeSchedulerConfiguration's
/// `plugins.<point>`), plus the placement points of KEP-5732.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ExtensionPoint {
    /// Every point the plugin implements.
    MultiPoint,
    /// PreFilter and Filter (one trait here).
    Filter,
    /// PreScore, Score and NormalizeScore (one trait here).
    Score,
    Reserve,
    Permit,
    PreBind,
    PlacementGenerate,
    PlacementFeasible,
    PlacementScore,
}

impl ExtensionPoint {
    /// Every point, in configuration order.
    pub const ALL: &'static [ExtensionPoint] = &[
        ExtensionPoint::MultiPoint,
        ExtensionPoint::Filter,
        ExtensionPoint::Score,
        ExtensionPoint::Reserve,
        ExtensionPoint::Permit,
        ExtensionPoint::PreBind,
        ExtensionPoint::PlacementGenerate,
        ExtensionPoint::PlacementFeasible,
        ExtensionPoint::PlacementScore,
    ];

    /// The key under `plugins` (`filter`, `placementScore`, ...). `preFilter` and
    /// `preScore` are accepted as names of [`ExtensionPoint::Filter`] and
    /// [`ExtensionPoint::Score`].
    pub fn key(self) -> &'static str {
        match self {
            ExtensionPoint::MultiPoint => "multiPoint",
            ExtensionPoint::Filter => "filter",
            ExtensionPoint::Score => "score",
            ExtensionPoint::Reserve => "reserve",
            ExtensionPoint::Permit => "permit",
            ExtensionPoint::PreBind => "preBind",
            ExtensionPoint::PlacementGenerate => "placementGenerate",
            ExtensionPoint::PlacementFeasible => "placementFeasible",
            ExtensionPoint::PlacementScore => "placementScore",
        }
    }

    /// The point configured under `key`.
    pub fn from_key(key: &str) -> Option<ExtensionPoint> {
        match key {
            "preFilter" => Some(ExtensionPoint::Filter),
            "preScore" => Some(ExtensionPoint::Score),
            _ => ExtensionPoint::ALL.iter().copied().find(|p| p.key() == key),
        }
    }
}

/// A plugin named in a [`PluginSet`], with the weight of a score plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginRef {
    pub name: String,
    /// Score plugins only; `None`: the plugin's default weight.
    pub weight: Option<i64>,
}

/// Plugins enabled (in addition to the defaults, run after them) and default plugins
/// disabled (`*`: all of them) at one extension point.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginSet {
    pub enabled: Vec<PluginRef>,
    pub disabled: Vec<String>,
}

/// KubeSchedulerConfiguration's `plugins` of one profile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginsConfig {
    pub points: BTreeMap<ExtensionPoint, PluginSet>,
}

impl PluginsConfig {
    /// The set configured at `point` (empty when none).
    pub fn at(&self, point: ExtensionPoint) -> Option<&PluginSet> {
        self.points.get(&point)
    }

    /// Disables the default plugin `name` at `point`.
    pub fn disable(&mut self, point: ExtensionPoint, name: &str) {
        self.points.entry(point).or_default().disabled.push(name.to_string());
    }

    /// Enables plugin `name` at `point` (after the defaults), with an optional weight.
    pub fn enable(&mut self, point: ExtensionPoint, name: &str, weight: Option<i64>) {
        self.points.entry(point).or_default().enabled.push(PluginRef { name: name.to_string(), weight });
    }
}

/// How the engine searches the candidate placements of a PodGroup.
///
/// Both modes implement the same semantics and must reach the same decisions; they differ
/// only in how much work they do. `placer bench` runs workloads in both modes side by side
/// and reports the speed-up of [`PlacementSearch::Optimized`] over
/// [`PlacementSearch::Baseline`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PlacementSearch {
    /// Placer's search: placements and their capacity sums read from the snapshot's
    /// cached domain index, rejected early by an aggregate-capacity pre-filter, uniform
    /// groups evaluated by counting copies per node and placed in one pass, and the
    /// hierarchical domain tree of seed 002 when topology levels are configured.
    #[default]
    Optimized,
    /// The plain KEP-5732 algorithm: every generated placement is fully simulated pod by
    /// pod, with no aggregate pre-filter, no copy counting and no domain tree.
    Baseline,
}

/// NodeResourcesFit scoring strategies.
#[derive(Debug, Clone, PartialEq)]
pub enum ScoringStrategy {
    LeastAllocated {
        resources: Vec<(String, i64)>,
    },
    MostAllocated {
        resources: Vec<(String, i64)>,
    },
    /// Shape: (utilization 0-100, score 0-10) points.
    RequestedToCapacityRatio {
        resources: Vec<(String, i64)>,
        shape: Vec<(i64, i64)>,
    },
}

impl ScoringStrategy {
    fn default_resources() -> Vec<(String, i64)> {
        vec![("cpu".to_string(), 1), ("memory".to_string(), 1)]
    }
    pub fn least_allocated() -> Self {
        ScoringStrategy::LeastAllocated { resources: Self::default_resources() }
    }
    pub fn most_allocated() -> Self {
        ScoringStrategy::MostAllocated { resources: Self::default_resources() }
    }
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            scheduler_names: vec!["default-scheduler".to_string(), "placer".to_string()],
            gates: FeatureGates::default(),
            topology_levels: Vec::new(),
            plugin_weights: BTreeMap::new(),
            percentage_of_placements_to_score: None,
            percentage_of_nodes_to_score: None,
            node_resources_fit_strategy: ScoringStrategy::least_allocated(),
            placement_scoring_strategy: ScoringStrategy::most_allocated(),
            pod_initial_backoff_ms: 1_000,
            pod_max_backoff_ms: 10_000,
            placement_search: PlacementSearch::Optimized,
            plugins: PluginsConfig::default(),
            evict_gang_on_failed_node: None,
            topology_algorithms: TopologyAlgorithms::default(),
            within_cluster_queue: WithinClusterQueue::default(),
            fit_ignored_resources: Vec::new(),
            fit_ignored_resource_groups: Vec::new(),
            balanced_allocation_resources: vec![("cpu".to_string(), 1), ("memory".to_string(), 1)],
            node_affinity_added: None,
            inter_pod_affinity: args::InterPodAffinityConfig::default(),
            spread_defaulting: args::SpreadDefaulting::default(),
            preemption_candidates: args::PreemptionCandidates::default(),
            volume_binding: args::VolumeBindingConfig::default(),
        }
    }
}

impl SchedulerConfig {
    pub fn weight(&self, plugin: &str, default: i64) -> i64 {
        self.plugin_weights.get(plugin).copied().unwrap_or(default)
    }

    pub fn schedules(&self, scheduler_name: &str) -> bool {
        self.scheduler_names.iter().any(|n| n == scheduler_name)
    }
}
