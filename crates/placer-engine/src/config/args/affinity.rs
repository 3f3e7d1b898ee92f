//! `NodeAffinityArgs` and `InterPodAffinityArgs`.

use placer_api::k8s::api::core::v1::{NodeAffinity, NodeSelectorRequirement, NodeSelectorTerm};
use serde::{Deserialize, Serialize};

use super::{echo, go_strings, supported, PluginArgs};
use crate::config::SchedulerConfig;

/// What the engine keeps of `InterPodAffinityArgs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterPodAffinityConfig {
    /// `hardPodAffinityWeight`: the score an existing pod's required affinity term that
    /// selects the incoming pod adds (0-100, default 1; 0: such terms do not score).
    pub hard_pod_affinity_weight: i64,
    /// `ignorePreferredTermsOfExistingPods`: skip scoring when the incoming pod has no
    /// preferred (anti-)affinity terms of its own.
    pub ignore_preferred_terms_of_existing_pods: bool,
}

impl Default for InterPodAffinityConfig {
    fn default() -> Self {
        InterPodAffinityConfig { hard_pod_affinity_weight: 1, ignore_preferred_terms_of_existing_pods: false }
    }
}

/// `InterPodAffinityArgs`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InterPodAffinityArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Default 1 (`SetDefaults_InterPodAffinityArgs`).
    #[serde(default)]
    pub hard_pod_affinity_weight: Option<i64>,
    #[serde(default)]
    pub ignore_preferred_terms_of_existing_pods: bool,
}

impl PluginArgs for InterPodAffinityArgs {
    const KIND: &'static str = "InterPodAffinityArgs";

    fn type_meta(&mut self) -> (&mut Option<String>, &mut Option<String>) {
        (&mut self.api_version, &mut self.kind)
    }

    fn defaulted(mut self, _config: &SchedulerConfig) -> Self {
        self.hard_pod_affinity_weight.get_or_insert(1);
        self
    }

    /// `ValidateInterPodAffinityArgs`.
    fn validate(&self, _config: &SchedulerConfig, path: &str, errs: &mut Vec<String>) {
        let weight = self.hard_pod_affinity_weight.unwrap_or(1);
        if !(0..=100).contains(&weight) {
            errs.push(format!(
                "{path}.hardPodAffinityWeight: Invalid value: {weight}: not in valid range [0, 100]"
            ));
        }
    }

    fn apply(self, config: &mut SchedulerConfig) {
        config.inter_pod_affinity = InterPodAffinityConfig {
            hard_pod_affinity_weight: self.hard_pod_affinity_weight.unwrap_or(1),
            ignore_preferred_terms_of_existing_pods: self.ignore_preferred_terms_of_existing_pods,
        };
    }

    fn effective(config: &SchedulerConfig) -> Self {
        InterPodAffinityArgs {
            hard_pod_affinity_weight: Some(config.inter_pod_affinity.hard_pod_affinity_weight),
            ignore_preferred_terms_of_existing_pods: config
                .inter_pod_affinity
                .ignore_preferred_terms_of_existing_pods,
            ..InterPodAffinityArgs::default()
        }
    }
}

/// `NodeAffinityArgs`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeAffinityArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_affinity: Option<NodeAffinity>,
}

/// component-helpers' `validSelectorOperators`.
const LABEL_OPERATORS: [&str; 6] = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];
/// component-helpers' `validFieldSelectorOperators`.
const FIELD_OPERATORS: [&str; 2] = ["In", "NotIn"];

/// component-helpers' `nodeSelectorRequirementsAsSelector` for one requirement at `p`:
/// the operator, then the API machinery's `labels.NewRequirement` (key, values for the
/// operator, each value a label value), every problem in upstream's order and words.
fn label_requirement_errors(errs: &mut Vec<String>, p: &str, r: &NodeSelectorRequirement) {
    let op = r.operator.as_str();
    if !LABEL_OPERATORS.contains(&op) {
        errs.push(format!(
            "{p}.operator: Unsupported value: {}: supported values: {}",
            echo(op),
            supported(&LABEL_OPERATORS)
        ));
        return;
    }
    let qualified = placer_api::names::qualified_name_errors(&r.key);
    if !qualified.is_empty() {
        errs.push(format!("{p}.key: Invalid value: {}: {}", echo(&r.key), qualified.join("; ")));
    }
    let values = r.values.as_deref();
    let vals = values.unwrap_or(&[]);
    let invalid = |m: &str| format!("{p}.values: Invalid value: {}: {m}", go_strings(values));
    match op {
        "In" | "NotIn" if vals.is_empty() => {
            errs.push(invalid("for 'in', 'notin' operators, values set can't be empty"));
        }
        "Exists" | "DoesNotExist" if !vals.is_empty() => {
            errs.push(invalid("values set must be empty for exists and does not exist"));
        }
        "Gt" | "Lt" => {
            if vals.len() != 1 {
                errs.push(invalid("for 'Gt', 'Lt' operators, exactly one value is required"));
            }
            for (i, v) in vals.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    errs.push(format!(
                        "{p}.values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                        echo(v)
                    ));
                }
            }
        }
        _ => {}
    }
    for (i, v) in vals.iter().enumerate() {
        let bad = placer_api::names::label_value_errors(v);
        if !bad.is_empty() {
            errs.push(format!("{p}.values[{i}][{}]: Invalid value: {}: {}", r.key, echo(v), bad.join("; ")));
        }
    }
}

/// component-helpers' `nodeSelectorRequirementsAsFieldSelector` for one requirement.
fn field_requirement_errors(errs: &mut Vec<String>, p: &str, r: &NodeSelectorRequirement) {
    match r.operator.as_str() {
        "In" | "NotIn" => {
            if r.values.as_ref().is_none_or(|v| v.len() != 1) {
                errs.push(format!(
                    "{p}.values: Invalid value: {}: must have one element",
                    go_strings(r.values.as_deref())
                ));
            }
        }
        op => errs.push(format!(
            "{p}.operator: Unsupported value: {}: supported values: {}",
            echo(op),
            supported(&FIELD_OPERATORS)
        )),
    }
}

/// component-helpers' `newNodeSelectorTerm` at `path`: an empty term is skipped by the
/// callers.
fn term_errors(errs: &mut Vec<String>, path: &str, term: &NodeSelectorTerm) {
    for (i, r) in term.match_expressions.iter().flatten().enumerate() {
        label_requirement_errors(errs, &format!("{path}.matchExpressions[{i}]"), r);
    }
    for (i, r) in term.match_fields.iter().flatten().enumerate() {
        field_requirement_errors(errs, &format!("{path}.matchFields[{i}]"), r);
    }
}

fn is_empty_term(t: &NodeSelectorTerm) -> bool {
    t.match_expressions.as_ref().is_none_or(Vec::is_empty)
        && t.match_fields.as_ref().is_none_or(Vec::is_empty)
}

impl PluginArgs for NodeAffinityArgs {
    const KIND: &'static str = "NodeAffinityArgs";

    fn type_meta(&mut self) -> (&mut Option<String>, &mut Option<String>) {
        (&mut self.api_version, &mut self.kind)
    }

    /// `ValidateNodeAffinityArgs`: `NewNodeSelector` on the required terms and
    /// `NewPreferredSchedulingTerms` on the preferred ones (whose paths name the term's
    /// index, not `preference`; terms of weight 0 and empty terms are not parsed).
    fn validate(&self, _config: &SchedulerConfig, path: &str, errs: &mut Vec<String>) {
        let Some(a) = &self.added_affinity else { return };
        let base = format!("{path}.addedAffinity");
        if let Some(sel) = &a.required_during_scheduling_ignored_during_execution {
            for (i, t) in sel.node_selector_terms.iter().enumerate().filter(|(_, t)| !is_empty_term(t)) {
                let at =
                    format!("{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]");
                term_errors(errs, &at, t);
            }
        }
        let preferred = a.preferred_during_scheduling_ignored_during_execution.iter().flatten();
        for (i, t) in preferred.enumerate() {
            if t.weight == 0 || is_empty_term(&t.preference) {
                continue;
            }
            term_errors(
                errs,
                &format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"),
                &t.preference,
            );
        }
    }

    fn apply(self, config: &mut SchedulerConfig) {
        config.node_affinity_added = self.added_affinity.map(std::sync::Arc::new);
    }

    fn effective(config: &SchedulerConfig) -> Self {
        NodeAffinityArgs {
            added_affinity: config.node_affinity_added.as_deref().cloned(),
            ..NodeAffinityArgs::default()
        }
    }
}
