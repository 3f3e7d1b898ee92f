//! `NodeResourcesFitArgs` and `NodeResourcesBalancedAllocationArgs`.

use serde::{Deserialize, Serialize};

use super::{echo, label_name_errors, supported, validate_shape, PluginArgs, UtilizationShapePointArgs};
use crate::config::{SchedulerConfig, ScoringStrategy};

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

const SUPPORTED_TYPES: [&str; 3] = ["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"];

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

fn resource_specs(resources: &[(String, i64)]) -> Vec<ResourceSpecArgs> {
    resources.iter().map(|(name, weight)| ResourceSpecArgs { name: name.clone(), weight: *weight }).collect()
}

impl NodeResourcesFitArgs {
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
            scoring_strategy: Some(ScoringStrategyArgs {
                type_: type_.to_string(),
                resources: resource_specs(resources),
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

impl PluginArgs for NodeResourcesFitArgs {
    const KIND: &'static str = "NodeResourcesFitArgs";

    fn type_meta(&mut self) -> (&mut Option<String>, &mut Option<String>) {
        (&mut self.api_version, &mut self.kind)
    }

    /// `SetDefaults_NodeResourcesFitArgs`: LeastAllocated over cpu and memory when no
    /// strategy is given, cpu and memory when no resources are, weight 1 for a resource
    /// without one.
    fn defaulted(mut self, _config: &SchedulerConfig) -> Self {
        let strategy = self.scoring_strategy.get_or_insert_with(|| ScoringStrategyArgs {
            type_: "LeastAllocated".to_string(),
            ..ScoringStrategyArgs::default()
        });
        default_resources(&mut strategy.resources);
        self
    }

    /// `ValidateNodeResourcesFitArgs`.
    fn validate(&self, _config: &SchedulerConfig, path: &str, errs: &mut Vec<String>) {
        for (i, r) in self.ignored_resources.iter().enumerate() {
            label_name_errors(errs, &format!("{path}.ignoredResources[{i}]"), r);
        }
        for (i, g) in self.ignored_resource_groups.iter().enumerate() {
            let at = format!("{path}.ignoredResourceGroups[{i}]");
            if g.contains('/') {
                errs.push(format!("{at}: Invalid value: {}: resource group name can't contain '/'", echo(g)));
            }
            label_name_errors(errs, &at, g);
        }
        let sp = format!("{path}.scoringStrategy");
        let Some(s) = &self.scoring_strategy else {
            errs.push(format!("{sp}: Required value: ScoringStrategy field is required"));
            return;
        };
        if !SUPPORTED_TYPES.contains(&s.type_.as_str()) {
            errs.push(format!(
                "{sp}.type: Unsupported value: {}: supported values: {}",
                echo(&s.type_),
                supported(&SUPPORTED_TYPES)
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
                Some(r) => validate_shape(errs, &format!("{sp}.requestedToCapacityRatio.shape"), &r.shape),
            }
        } else if s.requested_to_capacity_ratio.is_some() {
            errs.push(format!(
                "{sp}.requestedToCapacityRatio: Forbidden: must be nil when type is not RequestedToCapacityRatio"
            ));
        }
    }

    fn apply(self, config: &mut SchedulerConfig) {
        config.node_resources_fit_strategy = self.strategy();
        config.fit_ignored_resources = self.ignored_resources;
        config.fit_ignored_resource_groups = self.ignored_resource_groups;
    }

    fn effective(config: &SchedulerConfig) -> Self {
        NodeResourcesFitArgs {
            ignored_resources: config.fit_ignored_resources.clone(),
            ignored_resource_groups: config.fit_ignored_resource_groups.clone(),
            ..NodeResourcesFitArgs::of(&config.node_resources_fit_strategy)
        }
    }
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

impl PluginArgs for NodeResourcesBalancedAllocationArgs {
    const KIND: &'static str = "NodeResourcesBalancedAllocationArgs";

    fn type_meta(&mut self) -> (&mut Option<String>, &mut Option<String>) {
        (&mut self.api_version, &mut self.kind)
    }

    /// `SetDefaults_NodeResourcesBalancedAllocationArgs`: cpu and memory when no
    /// resources are given, weight 1 for a resource without one.
    fn defaulted(mut self, _config: &SchedulerConfig) -> Self {
        default_resources(&mut self.resources);
        self
    }

    /// `ValidateNodeResourcesBalancedAllocationArgs`.
    fn validate(&self, _config: &SchedulerConfig, path: &str, errs: &mut Vec<String>) {
        for (i, r) in self.resources.iter().enumerate() {
            if self.resources[..i].iter().any(|o| o.name == r.name) {
                errs.push(format!("{path}.resources[{i}].name: Duplicate value: {}", echo(&r.name)));
            }
            if r.weight != 1 {
                errs.push(format!("{path}.resources[{i}].weight: Invalid value: {}: must be 1", r.weight));
            }
        }
    }

    fn apply(self, config: &mut SchedulerConfig) {
        config.balanced_allocation_resources =
            self.resources.into_iter().map(|r| (r.name, r.weight)).collect();
    }

    fn effective(config: &SchedulerConfig) -> Self {
        NodeResourcesBalancedAllocationArgs {
            resources: resource_specs(&config.balanced_allocation_resources),
            ..NodeResourcesBalancedAllocationArgs::default()
        }
    }
}
