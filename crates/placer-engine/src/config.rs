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
    /// Pod-level NodeResourcesFit scoring strategy.
    pub node_resources_fit_strategy: ScoringStrategy,
    /// Placement-level NodeResourcesFit scoring strategy (`placementScoringStrategy`).
    pub placement_scoring_strategy: ScoringStrategy,
    /// Initial and maximum backoff of a failed pod, in milliseconds.
    pub pod_initial_backoff_ms: u64,
    pub pod_max_backoff_ms: u64,
}

/// NodeResourcesFit scoring strategies.
#[derive(Debug, Clone, PartialEq)]
pub enum ScoringStrategy {
    LeastAllocated { resources: Vec<(String, i64)> },
    MostAllocated { resources: Vec<(String, i64)> },
    /// Shape: (utilization 0-100, score 0-10) points.
    RequestedToCapacityRatio { resources: Vec<(String, i64)>, shape: Vec<(i64, i64)> },
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
            node_resources_fit_strategy: ScoringStrategy::least_allocated(),
            placement_scoring_strategy: ScoringStrategy::most_allocated(),
            pod_initial_backoff_ms: 1_000,
            pod_max_backoff_ms: 10_000,
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
