//! Plugin arguments as KubeSchedulerConfiguration's `pluginConfig` writes them
//! (`kubescheduler.config.k8s.io/v1`), with kube-scheduler's defaulting and validation
//! messages (`pkg/scheduler/apis/config/validation/validation_pluginargs.go`).
//!
//! Both homes read `pluginConfig` through [`apply_plugin_config`] (a scenario's
//! `scheduler.profile.pluginConfig`, `placer serve`'s `pluginConfig`), so a profile means
//! the same everywhere. Which plugins take arguments is the registry's business
//! (`crate::plugins::registry`, `Registry::args`): a plugin registers how to read and how
//! to show its arguments next to its factories.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{SchedulerConfig, ScoringStrategy};

/// `NodeResourcesFitArgs`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeResourcesFitArgs {
    /// `kubescheduler.config.k8s.io/v1` when written (kube-scheduler prints it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `NodeResourcesFitArgs` when written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_resources: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_resource_groups: Vec<String>,
    #[serde(default)]
    pub scoring_strategy: Option<ScoringStrategyArgs>,
}

/// `ScoringStrategy`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScoringStrategyArgs {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub resources: Vec<ResourceSpecArgs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_to_capacity_ratio: Option<RequestedToCapacityRatioArgs>,
}

/// `ResourceSpec`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceSpecArgs {
    pub name: String,
    #[serde(default)]
    pub weight: i64,
}

/// `RequestedToCapacityRatioParam`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RequestedToCapacityRatioArgs {
    #[serde(default)]
    pub shape: Vec<UtilizationShapePointArgs>,
}

/// `UtilizationShapePoint`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UtilizationShapePointArgs {
    pub utilization: i64,
    pub score: i64,
}

/// The `apiVersion` of plugin arguments.
pub const ARGS_API_VERSION: &str = "kubescheduler.config.k8s.io/v1";
const SUPPORTED_TYPES: [&str; 3] = ["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"];
/// kube's `MaxCustomPriorityScore`.
const MAX_CUSTOM_PRIORITY_SCORE: i64 = 10;

/// kube-scheduler's defaulting of a `[]ResourceSpec`: cpu and memory when empty, weight 1
/// for a resource without one.
fn default_resources(resources: &mut Vec<ResourceSpecArgs>) {
    if resources.is_empty() {
        *resources = vec![
            ResourceSpecArgs { name: "cpu".into(), weight: 1 },
            ResourceSpecArgs { name: "memory".into(), weight: 1 },
        ];
    }
    for r in resources.iter_mut().filter(|r| r.weight == 0) {
        r.weight = 1;
    }
}

/// `apiVersion` and `kind` of written arguments, when given, must be the plugin's.
fn check_type_meta(
    errs: &mut Vec<String>,
    path: &str,
    api_version: Option<&str>,
    kind: Option<&str>,
    expected: &str,
) {
    if let Some(v) = api_version.filter(|v| *v != ARGS_API_VERSION) {
        errs.push(format!(
            "{path}.apiVersion: Unsupported value: {}: supported values: {ARGS_API_VERSION:?}",
            echo(v)
        ));
    }
    if let Some(k) = kind.filter(|k| *k != expected) {
        errs.push(format!(
            "{path}.kind: Unsupported value: {}: supported values: {}",
            echo(k),
            echo(expected)
        ));
    }
}

/// Parses a plugin's `args` (at `path`) as `T`; the error is a field error on `path`.
fn parse_args<T: serde::de::DeserializeOwned>(args: &Value, path: &str) -> Result<T, Vec<String>> {
    // Absent `args` (null) are the defaults, as kube-scheduler reads a missing args object.
    let args = if args.is_null() { json!({}) } else { args.clone() };
    serde_json::from_value::<T>(args.clone())
        .map_err(|e| vec![format!("{path}: Invalid value: {}: {e}", echo(&args))])
}

/// A JSON rendering of a value in an error, as the API machinery's `field.Invalid` prints it.
fn echo(v: impl Serialize) -> String {
    serde_json::to_string(&v).unwrap_or_default()
}

impl NodeResourcesFitArgs {
    /// kube-scheduler's `SetDefaults_NodeResourcesFitArgs`: LeastAllocated over cpu and
    /// memory when no strategy is given, cpu and memory when no resources are, weight 1
    /// for a resource without one.
    pub fn defaulted(mut self) -> Self {
        let strategy = self.scoring_strategy.get_or_insert_with(|| ScoringStrategyArgs {
            type_: "LeastAllocated".to_string(),
            ..ScoringStrategyArgs::default()
        });
        default_resources(&mut strategy.resources);
        self
    }

    /// kube-scheduler's `ValidateNodeResourcesFitArgs` on defaulted arguments, with
    /// `path` the field path of the arguments (`profiles[0].pluginConfig[1].args`).
    pub fn validate(&self, path: &str) -> Vec<String> {
        let mut errs = Vec::new();
        check_type_meta(
            &mut errs,
            path,
            self.api_version.as_deref(),
            self.kind.as_deref(),
            "NodeResourcesFitArgs",
        );
        for (i, r) in self.ignored_resources.iter().enumerate() {
            if let Err(m) = placer_api::names::check_label_key(r) {
                errs.push(format!("{path}.ignoredResources[{i}]: Invalid value: {}: {m}", echo(r)));
            }
        }
        for (i, g) in self.ignored_resource_groups.iter().enumerate() {
            if g.contains('/') {
                errs.push(format!(
                    "{path}.ignoredResourceGroups[{i}]: Invalid value: {}: resource group name can't contain '/'",
                    echo(g)
                ));
            }
            if let Err(m) = placer_api::names::check_label_key(g) {
                errs.push(format!("{path}.ignoredResourceGroups[{i}]: Invalid value: {}: {m}", echo(g)));
            }
        }
        let sp = format!("{path}.scoringStrategy");
        let Some(s) = &self.scoring_strategy else {
            errs.push(format!("{sp}: Required value: ScoringStrategy field is required"));
            return errs;
        };
        if !SUPPORTED_TYPES.contains(&s.type_.as_str()) {
            let supported: Vec<String> = SUPPORTED_TYPES.iter().map(|t| format!("{t:?}")).collect();
            errs.push(format!(
                "{sp}.type: Unsupported value: {}: supported values: {}",
                echo(&s.type_),
                supported.join(", ")
            ));
        }
        for (i, r) in s.resources.iter().enumerate() {
            if r.weight <= 0 || r.weight > 100 {
                errs.push(format!(
                    "{sp}.resources[{i}].weight: Invalid value: {}: resource weight of {} not in valid range (0, 100]",
                    r.weight, r.name
                ));
            }
        }
        if s.type_ == "RequestedToCapacityRatio" {
            match &s.requested_to_capacity_ratio {
                None => errs.push(format!(
                    "{sp}.requestedToCapacityRatio: Required value: must be specified when type is RequestedToCapacityRatio"
                )),
                Some(r) => validate_shape(&mut errs, &format!("{sp}.requestedToCapacityRatio.shape"), &r.shape),
            }
        } else if s.requested_to_capacity_ratio.is_some() {
            errs.push(format!(
                "{sp}.requestedToCapacityRatio: Forbidden: must be nil when type is not RequestedToCapacityRatio"
            ));
        }
        errs
    }

    /// The engine's strategy (call on defaulted, valid arguments).
    pub fn strategy(&self) -> ScoringStrategy {
        let Some(s) = &self.scoring_strategy else { return ScoringStrategy::least_allocated() };
        let resources: Vec<(String, i64)> = s.resources.iter().map(|r| (r.name.clone(), r.weight)).collect();
        match s.type_.as_str() {
            "MostAllocated" => ScoringStrategy::MostAllocated { resources },
            "RequestedToCapacityRatio" => ScoringStrategy::RequestedToCapacityRatio {
                resources,
                shape: s
                    .requested_to_capacity_ratio
                    .iter()
                    .flat_map(|r| &r.shape)
                    .map(|p| (p.utilization, p.score))
                    .collect(),
            },
            _ => ScoringStrategy::LeastAllocated { resources },
        }
    }

    /// The arguments that give `strategy`.
    pub fn of(strategy: &ScoringStrategy) -> NodeResourcesFitArgs {
        let (type_, resources, shape) = match strategy {
            ScoringStrategy::LeastAllocated { resources } => ("LeastAllocated", resources, None),
            ScoringStrategy::MostAllocated { resources } => ("MostAllocated", resources, None),
            ScoringStrategy::RequestedToCapacityRatio { resources, shape } => {
                ("RequestedToCapacityRatio", resources, Some(shape))
            }
        };
        NodeResourcesFitArgs {
            api_version: Some(ARGS_API_VERSION.to_string()),
            kind: Some("NodeResourcesFitArgs".to_string()),
            scoring_strategy: Some(ScoringStrategyArgs {
                type_: type_.to_string(),
                resources: resources
                    .iter()
                    .map(|(name, weight)| ResourceSpecArgs { name: name.clone(), weight: *weight })
                    .collect(),
                requested_to_capacity_ratio: shape.map(|s| RequestedToCapacityRatioArgs {
                    shape: s
                        .iter()
                        .map(|&(utilization, score)| UtilizationShapePointArgs { utilization, score })
                        .collect(),
                }),
            }),
            ..NodeResourcesFitArgs::default()
        }
    }
}

/// kube-scheduler's `validateFunctionShape`.
fn validate_shape(errs: &mut Vec<String>, path: &str, shape: &[UtilizationShapePointArgs]) {
    if shape.is_empty() {
        errs.push(format!("{path}: Required value: at least one point must be specified"));
        return;
    }
    if let Some(i) = (1..shape.len()).find(|&i| shape[i - 1].utilization >= shape[i].utilization) {
        errs.push(format!(
            "{path}[{i}].utilization: Invalid value: {}: utilization values must be sorted in increasing order",
            shape[i].utilization
        ));
    }
    for (i, p) in shape.iter().enumerate() {
        if !(0..=100).contains(&p.utilization) {
            errs.push(format!(
                "{path}[{i}].utilization: Invalid value: {}: not in valid range [0, 100]",
                p.utilization
            ));
        }
        if !(0..=MAX_CUSTOM_PRIORITY_SCORE).contains(&p.score) {
            errs.push(format!(
                "{path}[{i}].score: Invalid value: {}: not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]",
                p.score
            ));
        }
    }
}

/// Reads `NodeResourcesFit`'s `args` (at `path`) into `config`: the pod-level scoring
/// strategy. Errors are the field errors, each starting with its path.
pub fn read_node_resources_fit(
    config: &mut SchedulerConfig,
    args: &Value,
    path: &str,
) -> Result<(), Vec<String>> {
    let parsed = parse_args::<NodeResourcesFitArgs>(args, path)?.defaulted();
    let errs = parsed.validate(path);
    if !errs.is_empty() {
        return Err(errs);
    }
    config.node_resources_fit_strategy = parsed.strategy();
    config.fit_ignored_resources = parsed.ignored_resources.clone();
    config.fit_ignored_resource_groups = parsed.ignored_resource_groups.clone();
    Ok(())
}

/// `NodeResourcesFit`'s effective arguments, as `pluginConfig` would write them.
pub fn show_node_resources_fit(config: &SchedulerConfig) -> Value {
    serde_json::to_value(NodeResourcesFitArgs {
        ignored_resources: config.fit_ignored_resources.clone(),
        ignored_resource_groups: config.fit_ignored_resource_groups.clone(),
        ..NodeResourcesFitArgs::of(&config.node_resources_fit_strategy)
    })
    .unwrap_or_else(|_| json!({}))
}

/// `NodeResourcesBalancedAllocationArgs`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeResourcesBalancedAllocationArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default)]
    pub resources: Vec<ResourceSpecArgs>,
}

impl NodeResourcesBalancedAllocationArgs {
    /// kube-scheduler's `SetDefaults_NodeResourcesBalancedAllocationArgs`: cpu and memory
    /// when no resources are given, weight 1 for a resource without one.
    pub fn defaulted(mut self) -> Self {
        default_resources(&mut self.resources);
        self
    }

    /// kube-scheduler's `ValidateNodeResourcesBalancedAllocationArgs`.
    pub fn validate(&self, path: &str) -> Vec<String> {
        let mut errs = Vec::new();
        check_type_meta(
            &mut errs,
            path,
            self.api_version.as_deref(),
            self.kind.as_deref(),
            "NodeResourcesBalancedAllocationArgs",
        );
        for (i, r) in self.resources.iter().enumerate() {
            if self.resources[..i].iter().any(|o| o.name == r.name) {
                errs.push(format!("{path}.resources[{i}].name: Duplicate value: {}", echo(&r.name)));
            }
            if r.weight != 1 {
                errs.push(format!("{path}.resources[{i}].weight: Invalid value: {}: must be 1", r.weight));
            }
        }
        errs
    }
}

/// Reads `NodeResourcesBalancedAllocation`'s `args` (at `path`): the resources it balances.
pub fn read_balanced_allocation(
    config: &mut SchedulerConfig,
    args: &Value,
    path: &str,
) -> Result<(), Vec<String>> {
    let parsed = parse_args::<NodeResourcesBalancedAllocationArgs>(args, path)?.defaulted();
    let errs = parsed.validate(path);
    if !errs.is_empty() {
        return Err(errs);
    }
    config.balanced_allocation_resources = parsed.resources.into_iter().map(|r| (r.name, r.weight)).collect();
    Ok(())
}

/// `NodeResourcesBalancedAllocation`'s effective arguments.
pub fn show_balanced_allocation(config: &SchedulerConfig) -> Value {
    serde_json::to_value(NodeResourcesBalancedAllocationArgs {
        api_version: Some(ARGS_API_VERSION.to_string()),
        kind: Some("NodeResourcesBalancedAllocationArgs".to_string()),
        resources: config
            .balanced_allocation_resources
            .iter()
            .map(|(name, weight)| ResourceSpecArgs { name: name.clone(), weight: *weight })
            .collect(),
    })
    .unwrap_or_else(|_| json!({}))
}

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

/// Reads `InterPodAffinity`'s `args` (at `path`), validated as kube-scheduler's
/// `ValidateInterPodAffinityArgs`.
pub fn read_inter_pod_affinity(
    config: &mut SchedulerConfig,
    args: &Value,
    path: &str,
) -> Result<(), Vec<String>> {
    let parsed = parse_args::<InterPodAffinityArgs>(args, path)?;
    let mut errs = Vec::new();
    check_type_meta(
        &mut errs,
        path,
        parsed.api_version.as_deref(),
        parsed.kind.as_deref(),
        "InterPodAffinityArgs",
    );
    let weight = parsed.hard_pod_affinity_weight.unwrap_or(1);
    if !(0..=100).contains(&weight) {
        errs.push(format!(
            "{path}.hardPodAffinityWeight: Invalid value: {weight}: not in valid range [0, 100]"
        ));
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    config.inter_pod_affinity = InterPodAffinityConfig {
        hard_pod_affinity_weight: weight,
        ignore_preferred_terms_of_existing_pods: parsed.ignore_preferred_terms_of_existing_pods,
    };
    Ok(())
}

/// `InterPodAffinity`'s effective arguments.
pub fn show_inter_pod_affinity(config: &SchedulerConfig) -> Value {
    serde_json::to_value(InterPodAffinityArgs {
        api_version: Some(ARGS_API_VERSION.to_string()),
        kind: Some("InterPodAffinityArgs".to_string()),
        hard_pod_affinity_weight: Some(config.inter_pod_affinity.hard_pod_affinity_weight),
        ignore_preferred_terms_of_existing_pods: config
            .inter_pod_affinity
            .ignore_preferred_terms_of_existing_pods,
    })
    .unwrap_or_else(|_| json!({}))
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
    pub added_affinity: Option<placer_api::k8s::api::core::v1::NodeAffinity>,
}

/// Why a node selector requirement cannot be parsed (component-helpers' `nodeaffinity`,
/// which `ValidateNodeAffinityArgs` runs), if it cannot.
fn requirement_problem(
    r: &placer_api::k8s::api::core::v1::NodeSelectorRequirement,
    field: bool,
) -> Option<String> {
    let values = r.values.as_deref().unwrap_or(&[]);
    if field {
        if r.key != "metadata.name" {
            return Some(format!("key: Invalid value: {}: not a valid field selector key", echo(&r.key)));
        }
        if values.len() != 1 {
            return Some("values: Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector".to_string());
        }
    } else if let Err(m) = placer_api::names::check_label_key(&r.key) {
        return Some(format!("key: Invalid value: {}: {m}", echo(&r.key)));
    }
    let ok = match r.operator.as_str() {
        "In" | "NotIn" => !values.is_empty(),
        "Exists" | "DoesNotExist" => !field && values.is_empty(),
        "Gt" | "Lt" => !field && values.len() == 1 && values[0].parse::<i64>().is_ok(),
        other => return Some(format!("operator: Unsupported value: {}", echo(other))),
    };
    if !ok {
        return Some(format!(
            "values: Invalid value: {}: not valid for operator {}",
            echo(values),
            echo(&r.operator)
        ));
    }
    values.iter().filter(|_| !field).find_map(|v| {
        placer_api::names::check_label_value(v)
            .err()
            .map(|m| format!("values: Invalid value: {}: {m}", echo(v)))
    })
}

fn term_problems(
    errs: &mut Vec<String>,
    path: &str,
    term: &placer_api::k8s::api::core::v1::NodeSelectorTerm,
) {
    for (i, r) in term.match_expressions.iter().flatten().enumerate() {
        if let Some(m) = requirement_problem(r, false) {
            errs.push(format!("{path}.matchExpressions[{i}].{m}"));
        }
    }
    for (i, r) in term.match_fields.iter().flatten().enumerate() {
        if let Some(m) = requirement_problem(r, true) {
            errs.push(format!("{path}.matchFields[{i}].{m}"));
        }
    }
}

/// Reads `NodeAffinity`'s `args` (at `path`): `addedAffinity`, every requirement checked
/// as kube-scheduler's `ValidateNodeAffinityArgs` parses it.
pub fn read_node_affinity(config: &mut SchedulerConfig, args: &Value, path: &str) -> Result<(), Vec<String>> {
    let parsed = parse_args::<NodeAffinityArgs>(args, path)?;
    let mut errs = Vec::new();
    check_type_meta(
        &mut errs,
        path,
        parsed.api_version.as_deref(),
        parsed.kind.as_deref(),
        "NodeAffinityArgs",
    );
    if let Some(a) = &parsed.added_affinity {
        let base = format!("{path}.addedAffinity");
        if let Some(sel) = &a.required_during_scheduling_ignored_during_execution {
            for (i, t) in sel.node_selector_terms.iter().enumerate() {
                term_problems(
                    &mut errs,
                    &format!("{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]"),
                    t,
                );
            }
        }
        for (i, t) in a.preferred_during_scheduling_ignored_during_execution.iter().flatten().enumerate() {
            term_problems(
                &mut errs,
                &format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference"),
                &t.preference,
            );
        }
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    config.node_affinity_added = parsed.added_affinity.map(std::sync::Arc::new);
    Ok(())
}

/// `NodeAffinity`'s effective arguments.
pub fn show_node_affinity(config: &SchedulerConfig) -> Value {
    serde_json::to_value(NodeAffinityArgs {
        api_version: Some(ARGS_API_VERSION.to_string()),
        kind: Some("NodeAffinityArgs".to_string()),
        added_affinity: config.node_affinity_added.as_deref().cloned(),
    })
    .unwrap_or_else(|_| json!({}))
}

/// One `pluginConfig` entry: a plugin name and its arguments.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginConfigEntry {
    pub name: String,
    #[serde(default)]
    pub args: Value,
}

/// Applies a profile's `pluginConfig` (at `path`, e.g. `profiles[0].pluginConfig`) to
/// `config` through the registry's argument readers. Every problem is reported, each with
/// its field path: a plugin named twice (`Duplicate value`), a plugin that does not exist
/// or takes no arguments, and the plugin's own validation.
pub fn apply_plugin_config(
    config: &mut SchedulerConfig,
    entries: &[PluginConfigEntry],
    path: &str,
) -> Result<(), Vec<String>> {
    let registry = crate::plugins::registry();
    let mut errs = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if entries[..i].iter().any(|o| o.name == e.name) {
            errs.push(format!("{at}: Duplicate value: {}", echo(&e.name)));
            continue;
        }
        match registry.args_reader(&e.name) {
            Some(read) => {
                if let Err(mut more) = read(config, &e.args, &format!("{at}.args")) {
                    errs.append(&mut more);
                }
            }
            None if registry.has(&e.name) => errs.push(format!(
                "{at}.name: Invalid value: {}: plugin takes no arguments in Placer",
                echo(&e.name)
            )),
            None => errs.push(format!("{at}.name: Invalid value: {}: unknown plugin", echo(&e.name))),
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(entries: Value) -> Result<SchedulerConfig, Vec<String>> {
        let entries: Vec<PluginConfigEntry> = serde_json::from_value(entries).expect("entries");
        let mut c = SchedulerConfig::default();
        apply_plugin_config(&mut c, &entries, "profiles[0].pluginConfig").map(|()| c)
    }

    #[test]
    fn requested_to_capacity_ratio_with_shape_and_weights() {
        let c = apply(json!([{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": [{"name": "cpu", "weight": 3}, {"name": "nvidia.com/gpu"}],
            "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}
        }}}]))
        .expect("valid");
        assert_eq!(
            c.node_resources_fit_strategy,
            ScoringStrategy::RequestedToCapacityRatio {
                resources: vec![("cpu".into(), 3), ("nvidia.com/gpu".into(), 1)],
                shape: vec![(0, 0), (100, 10)],
            }
        );
    }

    #[test]
    fn defaults_fill_the_strategy_and_resources() {
        let c = apply(json!([{"name": "NodeResourcesFit", "args": {}}])).expect("valid");
        assert_eq!(c.node_resources_fit_strategy, ScoringStrategy::least_allocated());
        let c =
            apply(json!([{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated",
            "resources": [{"name": "memory", "weight": 5}]}}}]))
            .expect("valid");
        assert_eq!(
            c.node_resources_fit_strategy,
            ScoringStrategy::MostAllocated { resources: vec![("memory".into(), 5)] }
        );
    }

    #[test]
    fn upstream_validation_messages() {
        let errs = apply(json!([{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Random",
            "resources": [{"name": "cpu", "weight": 101}]}}}]))
        .unwrap_err();
        assert_eq!(
            errs,
            [
                "profiles[0].pluginConfig[0].args.scoringStrategy.type: Unsupported value: \"Random\": supported values: \"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\"",
                "profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].weight: Invalid value: 101: resource weight of cpu not in valid range (0, 100]",
            ]
        );
        let errs = apply(json!([{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "RequestedToCapacityRatio"}}}]))
            .unwrap_err();
        assert_eq!(errs, ["profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio: Required value: must be specified when type is RequestedToCapacityRatio"]);
        let errs = apply(json!([{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "RequestedToCapacityRatio",
            "requestedToCapacityRatio": {"shape": [{"utilization": 50, "score": 11}, {"utilization": 50, "score": 2}, {"utilization": 101, "score": -1}]}}}}]))
        .unwrap_err();
        let p = "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape";
        assert_eq!(
            errs,
            [
                format!("{p}[1].utilization: Invalid value: 50: utilization values must be sorted in increasing order"),
                format!("{p}[0].score: Invalid value: 11: not in valid range [0, 10]"),
                format!("{p}[2].utilization: Invalid value: 101: not in valid range [0, 100]"),
                format!("{p}[2].score: Invalid value: -1: not in valid range [0, 10]"),
            ]
        );
        let errs =
            apply(json!([{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "LeastAllocated",
            "requestedToCapacityRatio": {"shape": []}}}}]))
            .unwrap_err();
        assert_eq!(errs, ["profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when type is not RequestedToCapacityRatio"]);
        let errs = apply(json!([{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "RequestedToCapacityRatio",
            "requestedToCapacityRatio": {"shape": []}}}}]))
        .unwrap_err();
        assert_eq!(errs, [format!("{p}: Required value: at least one point must be specified")]);
    }

    /// kube's `TestValidateNodeResourcesFitArgs` ignoredResources / ignoredResourceGroups.
    #[test]
    fn ignored_resources_and_groups() {
        let c = apply(json!([{"name": "NodeResourcesFit", "args": {
            "ignoredResources": ["example.com/foo"], "ignoredResourceGroups": ["example.com"]}}]))
        .expect("valid");
        assert_eq!(c.fit_ignored_resources, ["example.com/foo"]);
        assert_eq!(c.fit_ignored_resource_groups, ["example.com"]);
        let shown = show_node_resources_fit(&c);
        assert_eq!(shown["ignoredResources"], json!(["example.com/foo"]));
        let errs = apply(json!([{"name": "NodeResourcesFit", "args": {
            "ignoredResources": ["foo.com/bar/baz"], "ignoredResourceGroups": ["example.com/aaa"]}}]))
        .unwrap_err();
        let p = "profiles[0].pluginConfig[0].args";
        // "example.com/aaa" is a valid qualified name: only the '/' error.
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(
            errs[0].starts_with(&format!("{p}.ignoredResources[0]: Invalid value: \"foo.com/bar/baz\": ")),
            "{errs:?}"
        );
        assert_eq!(
            errs[1],
            format!("{p}.ignoredResourceGroups[0]: Invalid value: \"example.com/aaa\": resource group name can't contain '/'")
        );
    }

    /// kube's `TestValidateNodeResourcesBalancedAllocationArgs` and the defaulting.
    #[test]
    fn balanced_allocation_resources() {
        let c = apply(json!([{"name": "NodeResourcesBalancedAllocation", "args": {"resources": [
            {"name": "cpu"}, {"name": "memory", "weight": 1}, {"name": "nvidia.com/gpu"}]}}]))
        .expect("valid");
        assert_eq!(
            c.balanced_allocation_resources,
            [("cpu".to_string(), 1), ("memory".to_string(), 1), ("nvidia.com/gpu".to_string(), 1)]
        );
        let c = apply(json!([{"name": "NodeResourcesBalancedAllocation", "args": {}}])).expect("valid");
        assert_eq!(c.balanced_allocation_resources, SchedulerConfig::default().balanced_allocation_resources);
        let errs = apply(json!([{"name": "NodeResourcesBalancedAllocation", "args": {"resources": [
            {"name": "cpu", "weight": 2}, {"name": "cpu", "weight": 1}]}}]))
        .unwrap_err();
        assert_eq!(
            errs,
            [
                "profiles[0].pluginConfig[0].args.resources[0].weight: Invalid value: 2: must be 1",
                "profiles[0].pluginConfig[0].args.resources[1].name: Duplicate value: \"cpu\"",
            ]
        );
    }

    /// kube's `TestValidateNodeAffinityArgs`: valid added affinity is kept, a bad key or
    /// operator is a field error naming the term.
    #[test]
    fn node_affinity_added_affinity() {
        let c = apply(json!([{"name": "NodeAffinity", "args": {"addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "label-1", "operator": "In", "values": ["label-1-val"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}}]
        }}}]))
        .expect("valid");
        assert!(c.node_affinity_added.is_some());
        assert_eq!(
            show_node_affinity(&c)["addedAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
                ["weight"],
            1
        );
        let errs = apply(json!([{"name": "NodeAffinity", "args": {"addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "invalid key", "operator": "In", "values": ["label-1-val"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1", "node-2"]}]}}]
        }}}]))
        .unwrap_err();
        let p = "profiles[0].pluginConfig[0].args.addedAffinity";
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].starts_with(&format!(
            "{p}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key: Invalid value: \"invalid key\": "
        )));
        assert!(errs[1].starts_with(&format!(
            "{p}.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchFields[0].values: Required value"
        )));
    }

    /// kube's `TestValidateInterPodAffinityArgs`.
    #[test]
    fn inter_pod_affinity_args() {
        let c = apply(json!([{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 0,
            "ignorePreferredTermsOfExistingPods": true}}]))
        .expect("valid");
        assert_eq!(
            c.inter_pod_affinity,
            InterPodAffinityConfig {
                hard_pod_affinity_weight: 0,
                ignore_preferred_terms_of_existing_pods: true
            }
        );
        let c = apply(json!([{"name": "InterPodAffinity", "args": {}}])).expect("valid");
        assert_eq!(c.inter_pod_affinity, InterPodAffinityConfig::default());
        for w in [-1, 101] {
            let errs = apply(json!([{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": w}}]))
                .unwrap_err();
            assert_eq!(
                errs,
                [format!(
                    "profiles[0].pluginConfig[0].args.hardPodAffinityWeight: Invalid value: {w}: not in valid range [0, 100]"
                )]
            );
        }
        let errs = apply(json!([{"name": "InterPodAffinity", "args": {"kind": "NodeResourcesFitArgs"}}]))
            .unwrap_err();
        assert_eq!(
            errs,
            ["profiles[0].pluginConfig[0].args.kind: Unsupported value: \"NodeResourcesFitArgs\": supported values: \"InterPodAffinityArgs\""]
        );
    }

    #[test]
    fn shown_args_of_every_plugin_read_back_the_same() {
        let c = SchedulerConfig {
            balanced_allocation_resources: vec![("cpu".into(), 1), ("example.com/foo".into(), 1)],
            inter_pod_affinity: InterPodAffinityConfig {
                hard_pod_affinity_weight: 7,
                ignore_preferred_terms_of_existing_pods: true,
            },
            ..SchedulerConfig::default()
        };
        let mut back = SchedulerConfig::default();
        read_balanced_allocation(&mut back, &show_balanced_allocation(&c), "args").expect("valid");
        read_inter_pod_affinity(&mut back, &show_inter_pod_affinity(&c), "args").expect("valid");
        assert_eq!(back.balanced_allocation_resources, c.balanced_allocation_resources);
        assert_eq!(back.inter_pod_affinity, c.inter_pod_affinity);
    }

    #[test]
    fn unknown_and_duplicate_plugins() {
        let errs = apply(json!([
            {"name": "NodeResourcesFit", "args": {}},
            {"name": "NodeResourcesFit", "args": {}},
            {"name": "Bogus", "args": {}},
            {"name": "NodeName", "args": {}}
        ]))
        .unwrap_err();
        assert_eq!(
            errs,
            [
                "profiles[0].pluginConfig[1]: Duplicate value: \"NodeResourcesFit\"",
                "profiles[0].pluginConfig[2].name: Invalid value: \"Bogus\": unknown plugin",
                "profiles[0].pluginConfig[3].name: Invalid value: \"NodeName\": plugin takes no arguments in Placer",
            ]
        );
    }

    #[test]
    fn shown_args_read_back_the_same() {
        let c = SchedulerConfig {
            node_resources_fit_strategy: ScoringStrategy::RequestedToCapacityRatio {
                resources: vec![("cpu".into(), 2)],
                shape: vec![(0, 10), (100, 0)],
            },
            ..SchedulerConfig::default()
        };
        let shown = show_node_resources_fit(&c);
        let mut back = SchedulerConfig::default();
        read_node_resources_fit(&mut back, &shown, "args").expect("valid");
        assert_eq!(back.node_resources_fit_strategy, c.node_resources_fit_strategy);
    }
}
