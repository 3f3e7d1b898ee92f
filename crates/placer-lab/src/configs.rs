//! The configurations a trace is replayed under: the two upstream placement semantics
//! (KEP-5732 scored placements; seed 002's hierarchy with each of its algorithms) and
//! Placer's own. Every configuration schedules the same objects on the same cluster; only
//! the scheduler's configuration differs.

use std::collections::BTreeMap;

use placer_api::gates::FeatureGates;
use placer_engine::SchedulerConfig;

use crate::trace::Trace;

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
    /// Placement score plugin weights on top of the defaults.
    pub weights: &'static [(&'static str, i64)],
}

/// KEP-5732: no `topologyLevels`, placements generated per domain of the required level
/// and scored (NodeResourcesFit MostAllocated, PodGroupPodsCount).
pub const KEP5732: LabConfig = LabConfig {
    id: "kep5732",
    title: "KEP-5732 scored placements (kube-scheduler TAS)",
    hierarchical: false,
    gates: &[],
    weights: &[],
};

/// Seed 002 with BestFit everywhere (`TASProfileBestFit`).
pub const TAS_BEST_FIT: LabConfig = LabConfig {
    id: "tas-bestfit",
    title: "seed 002 hierarchy, BestFit (TASProfileBestFit)",
    hierarchical: true,
    gates: &[("TASProfileBestFit", true)],
    weights: &[],
};

/// Seed 002 with BalancedPlacement for preferred requests (`TASBalancedPlacement`;
/// BestFit for required, LeastFreeCapacity for unconstrained, as seed 002's table says).
pub const TAS_BALANCED: LabConfig = LabConfig {
    id: "tas-balanced",
    title: "seed 002 hierarchy, BalancedPlacement (TASBalancedPlacement)",
    hierarchical: true,
    gates: &[("TASBalancedPlacement", true)],
    weights: &[],
};

/// Kueue's default profile (`TASProfileMixed`): BestFit, LeastFreeCapacity for
/// unconstrained requests. Not in the default set (it differs from BestFit only there).
pub const TAS_MIXED: LabConfig = LabConfig {
    id: "tas-mixed",
    title: "seed 002 hierarchy, Kueue's default profile (TASProfileMixed)",
    hierarchical: true,
    gates: &[],
    weights: &[],
};

/// Every configuration `placer replay` knows, in table order.
pub fn all() -> Vec<LabConfig> {
    vec![KEP5732, TAS_BEST_FIT, TAS_BALANCED, TAS_MIXED]
}

/// The configurations run when none are named.
pub fn defaults() -> Vec<LabConfig> {
    vec![KEP5732, TAS_BEST_FIT, TAS_BALANCED]
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
        Ok(c)
    }
}
