//! The configurations a trace is replayed under: the two upstream placement semantics
//! (KEP-5732 scored placements; seed 002's hierarchy with each of its algorithms) and
//! Placer's own. Every configuration schedules the same objects on the same cluster; only
//! the scheduler's configuration differs.

use std::collections::BTreeMap;

use placer_api::gates::FeatureGates;
use placer_engine::{check_profile, ExtensionPoint, SchedulerConfig, ScoringStrategy};

use crate::trace::{Trace, GPU};

/// One configuration of the comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabConfig {
    /// Short id used on the command line (`--configs kep5732,tas-bestfit`).
    pub id: &'static str,
    /// What it is, for the table's legend.
    pub title: &'static str,
    /// Hierarchical (seed 002) semantics: `topologyLevels` = the cluster's levels.
    pub hierarchical: bool,
    /// Feature gates on top of the trace's.
    pub gates: &'static [(&'static str, bool)],
    /// Plugin weights on top of the defaults.
    pub weights: &'static [(&'static str, i64)],
    /// Plugins the profile enables at `placementScore`, with their weights.
    pub placement_scores: &'static [(&'static str, i64)],
    /// Pod-level NodeResourcesFit scores MostAllocated over cpu, memory and the trace's
    /// GPUs (bin packing) instead of kube-scheduler's default LeastAllocated.
    pub bin_pack_nodes: bool,
    /// `percentageOfPlacementsToScore: 100`: every feasible placement is scored. The
    /// adaptive default stops after the first feasible placements in name order (10 % on
    /// 5,000 nodes: the first block of ten, 25 racks of 250), so a placement score only
    /// chooses among those.
    pub score_every_placement: bool,
}

/// KEP-5732: no `topologyLevels`, placements generated per domain of the required level
/// and scored (NodeResourcesFit MostAllocated, PodGroupPodsCount).
pub const KEP5732: LabConfig = LabConfig {
    id: "kep5732",
    title: "KEP-5732 scored placements (kube-scheduler TAS)",
    hierarchical: false,
    gates: &[],
    weights: &[],
    placement_scores: &[],
    bin_pack_nodes: false,
    score_every_placement: false,
};

/// Seed 002 with BestFit everywhere (`TASProfileBestFit`).
pub const TAS_BEST_FIT: LabConfig = LabConfig {
    id: "tas-bestfit",
    title: "seed 002 hierarchy, BestFit (TASProfileBestFit)",
    hierarchical: true,
    gates: &[("TASProfileBestFit", true)],
    weights: &[],
    placement_scores: &[],
    bin_pack_nodes: false,
    score_every_placement: false,
};

/// Seed 002 with BalancedPlacement for preferred requests (`TASBalancedPlacement`;
/// BestFit for required, LeastFreeCapacity for unconstrained, as seed 002's table says).
pub const TAS_BALANCED: LabConfig = LabConfig {
    id: "tas-balanced",
    title: "seed 002 hierarchy, BalancedPlacement (TASBalancedPlacement)",
    hierarchical: true,
    gates: &[("TASBalancedPlacement", true)],
    weights: &[],
    placement_scores: &[],
    bin_pack_nodes: false,
    score_every_placement: false,
};

/// Seed 002 with LeastFreeCapacity everywhere (`TASProfileLeastFreeCapacity`, Kueue's
/// profile until v0.16).
pub const TAS_LFC: LabConfig = LabConfig {
    id: "tas-lfc",
    title: "seed 002 hierarchy, LeastFreeCapacity (TASProfileLeastFreeCapacity)",
    hierarchical: true,
    gates: &[("TASProfileLeastFreeCapacity", true)],
    weights: &[],
    placement_scores: &[],
    bin_pack_nodes: false,
    score_every_placement: false,
};

/// Placer: KEP-5732 placements scored by `PlacementFragmentation` (weight 5, over the
/// default placement scores), every feasible placement scored, pods bin-packed inside the
/// chosen placement (NodeResourcesFit MostAllocated, GPUs weighted 5).
pub const PLACER: LabConfig = LabConfig {
    id: "placer",
    title: "Placer: KEP-5732 + PlacementFragmentation score + bin-packed nodes",
    hierarchical: false,
    gates: &[],
    weights: &[],
    placement_scores: &[("PlacementFragmentation", 5)],
    bin_pack_nodes: true,
    score_every_placement: true,
};

/// Placer's fragmentation score alone, every feasible placement scored (nodes scored as
/// kube-scheduler does), to tell the two parts of [`PLACER`] apart.
pub const PLACER_SCORE_ONLY: LabConfig = LabConfig {
    id: "placer-score",
    title: "KEP-5732 + PlacementFragmentation score only (default node scores)",
    hierarchical: false,
    gates: &[],
    weights: &[],
    placement_scores: &[("PlacementFragmentation", 5)],
    bin_pack_nodes: false,
    score_every_placement: true,
};

/// Kueue's default profile (`TASProfileMixed`): BestFit, LeastFreeCapacity for
/// unconstrained requests. Not in the default set (it differs from BestFit only there).
pub const TAS_MIXED: LabConfig = LabConfig {
    id: "tas-mixed",
    title: "seed 002 hierarchy, Kueue's default profile (TASProfileMixed)",
    hierarchical: true,
    gates: &[],
    weights: &[],
    placement_scores: &[],
    bin_pack_nodes: false,
    score_every_placement: false,
};

/// Every configuration `placer replay` knows, in table order.
pub fn all() -> Vec<LabConfig> {
    vec![KEP5732, TAS_BEST_FIT, TAS_LFC, TAS_BALANCED, PLACER, TAS_MIXED, PLACER_SCORE_ONLY]
}

/// The configurations run when none are named.
pub fn defaults() -> Vec<LabConfig> {
    vec![KEP5732, TAS_BEST_FIT, TAS_LFC, TAS_BALANCED, PLACER]
}

/// Looks configurations up by id (`all` for every one).
pub fn select(ids: &[String]) -> Result<Vec<LabConfig>, String> {
    if ids.iter().any(|i| i == "all") {
        return Ok(all());
    }
    ids.iter()
        .map(|id| {
            all().into_iter().find(|c| c.id == id).ok_or_else(|| {
                let known: Vec<&str> = all().iter().map(|c| c.id).collect();
                format!("unknown configuration {id:?} (known: {}, all)", known.join(", "))
            })
        })
        .collect()
}

impl LabConfig {
    /// The scheduler configuration for `trace`: Placer's defaults, the trace's gates, then
    /// this configuration's gates, levels and weights.
    pub fn scheduler_config(&self, trace: &Trace) -> Result<SchedulerConfig, String> {
        let mut gates: BTreeMap<&str, bool> = trace.gates.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        gates.extend(self.gates.iter().copied());
        let gates = FeatureGates::with_overrides(gates).map_err(|e| e.to_string())?;
        let mut c = SchedulerConfig { gates, ..SchedulerConfig::default() };
        if self.hierarchical {
            c.topology_levels = trace.cluster.levels().to_vec();
        }
        for (name, w) in self.weights {
            c.plugin_weights.insert(name.to_string(), *w);
        }
        for (name, w) in self.placement_scores {
            c.plugins.enable(ExtensionPoint::PlacementScore, name, Some(*w));
        }
        if self.score_every_placement {
            c.percentage_of_placements_to_score = Some(100);
        }
        if self.bin_pack_nodes {
            let mut resources = vec![("cpu".to_string(), 1), ("memory".to_string(), 1)];
            if trace.arrivals.iter().any(|a| a.res.gpu > 0) {
                resources.push((GPU.to_string(), 5));
            }
            c.node_resources_fit_strategy = ScoringStrategy::MostAllocated { resources };
        }
        check_profile(&c).map_err(|e| e.to_string())?;
        Ok(c)
    }
}
