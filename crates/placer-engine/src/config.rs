//! Scheduler configuration, in the spirit of KubeSchedulerConfiguration.

use std::collections::BTreeMap;

use placer_api::gates::FeatureGates;

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
