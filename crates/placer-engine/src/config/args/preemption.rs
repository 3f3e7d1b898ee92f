//! `DefaultPreemptionArgs`: how many candidate nodes per-pod preemption evaluates.

use serde::{Deserialize, Serialize};

use super::PluginArgs;
use crate::config::SchedulerConfig;

/// `DefaultPreemptionArgs`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DefaultPreemptionArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Default 10 (`SetDefaults_DefaultPreemptionArgs`).
    #[serde(default)]
    pub min_candidate_nodes_percentage: Option<i32>,
    /// Default 100.
    #[serde(default)]
    pub min_candidate_nodes_absolute: Option<i32>,
}

/// What the engine keeps of `DefaultPreemptionArgs` (valid: percentage in [0, 100],
/// absolute >= 0, not both 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreemptionCandidates {
    pub min_percentage: i32,
    pub min_absolute: i32,
}

impl Default for PreemptionCandidates {
    fn default() -> Self {
        PreemptionCandidates { min_percentage: 10, min_absolute: 100 }
    }
}

impl PreemptionCandidates {
    /// Upstream's `calculateNumCandidates`: how many candidates the dry run must find among
    /// `potential` nodes: `potential * percentage / 100`, at least the absolute minimum,
    /// at most `potential`.
    pub fn num_candidates(&self, potential: usize) -> usize {
        let pct = usize::try_from(self.min_percentage).unwrap_or(0);
        let abs = usize::try_from(self.min_absolute).unwrap_or(0);
        (potential.saturating_mul(pct) / 100).max(abs).min(potential)
    }
}

impl PluginArgs for DefaultPreemptionArgs {
    const KIND: &'static str = "DefaultPreemptionArgs";

    fn type_meta(&mut self) -> (&mut Option<String>, &mut Option<String>) {
        (&mut self.api_version, &mut self.kind)
    }

    fn defaulted(mut self, _config: &SchedulerConfig) -> Self {
        let d = PreemptionCandidates::default();
        self.min_candidate_nodes_percentage.get_or_insert(d.min_percentage);
        self.min_candidate_nodes_absolute.get_or_insert(d.min_absolute);
        self
    }

    /// `ValidateDefaultPreemptionArgs`.
    fn validate(&self, _config: &SchedulerConfig, path: &str, errs: &mut Vec<String>) {
        let pct = self.min_candidate_nodes_percentage.unwrap_or(10);
        let abs = self.min_candidate_nodes_absolute.unwrap_or(100);
        let pp = format!("{path}.minCandidateNodesPercentage");
        let ap = format!("{path}.minCandidateNodesAbsolute");
        if !(0..=100).contains(&pct) {
            errs.push(format!("{pp}: Invalid value: {pct}: not in valid range [0, 100]"));
        }
        if abs < 0 {
            errs.push(format!("{ap}: Invalid value: {abs}: not in valid range [0, inf)"));
        }
        if pct == 0 && abs == 0 {
            errs.push(format!(
                "{pp}: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute"
            ));
            errs.push(format!(
                "{ap}: Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage"
            ));
        }
    }

    fn apply(self, config: &mut SchedulerConfig) {
        let d = PreemptionCandidates::default();
        config.preemption_candidates = PreemptionCandidates {
            min_percentage: self.min_candidate_nodes_percentage.unwrap_or(d.min_percentage),
            min_absolute: self.min_candidate_nodes_absolute.unwrap_or(d.min_absolute),
        };
    }

    fn effective(config: &SchedulerConfig) -> Self {
        DefaultPreemptionArgs {
            min_candidate_nodes_percentage: Some(config.preemption_candidates.min_percentage),
            min_candidate_nodes_absolute: Some(config.preemption_candidates.min_absolute),
            ..DefaultPreemptionArgs::default()
        }
    }
}
