//! `PodTopologySpreadArgs`: `defaultConstraints` and `defaultingType`.
//!
//! Upstream applies default constraints (the system ones, or the listed ones) only to a pod
//! without constraints of its own, and only with the selector `helper.DefaultSelector`
//! deduces from the Services, ReplicationControllers, ReplicaSets and StatefulSets that
//! select or own the pod; an empty selector means no default constraint. Placer loads none
//! of those four kinds (neither home lists them), so the selector is always empty, exactly
//! as upstream with empty listers: the arguments are read, validated and shown, and no
//! pod gets a default constraint. See `plugins::pod_topology_spread`.

use placer_api::k8s::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::{Deserialize, Serialize};

use super::{echo, label_name_errors, supported, PluginArgs};
use crate::config::SchedulerConfig;

/// A `defaultConstraints` entry: a core/v1 `TopologySpreadConstraint`, read with Go's zero
/// values for missing fields so that validation (not parsing) reports them, as upstream.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SpreadConstraintArgs {
    #[serde(default)]
    pub max_skew: i32,
    #[serde(default)]
    pub topology_key: String,
    #[serde(default)]
    pub when_unsatisfiable: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_domains: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_taints_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_label_keys: Option<Vec<String>>,
}

/// `PodTopologySpreadArgs`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodTopologySpreadArgs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default_constraints: Vec<SpreadConstraintArgs>,
    /// `System` (default) or `List`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub defaulting_type: String,
}

/// What the engine keeps of `PodTopologySpreadArgs`: which default constraints a pod
/// without constraints of its own would get (with the selector deduced from its
/// Services / controllers; see the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub enum SpreadDefaulting {
    /// `defaultingType: System`: upstream's `systemDefaultConstraints`, hostname maxSkew 3
    /// and zone maxSkew 5, both `ScheduleAnyway`.
    #[default]
    System,
    /// `defaultingType: List`: the listed `defaultConstraints` (possibly none).
    List(Vec<SpreadConstraintArgs>),
}

const DEFAULTING_TYPES: [&str; 2] = ["System", "List"];
/// Sorted, as `sets.List` gives them to `field.NotSupported`.
const ACTIONS: [&str; 2] = ["DoNotSchedule", "ScheduleAnyway"];

impl PluginArgs for PodTopologySpreadArgs {
    const KIND: &'static str = "PodTopologySpreadArgs";

    fn type_meta(&mut self) -> (&mut Option<String>, &mut Option<String>) {
        (&mut self.api_version, &mut self.kind)
    }

    /// `SetDefaults_PodTopologySpreadArgs`: `System` when no type is given.
    fn defaulted(mut self, _config: &SchedulerConfig) -> Self {
        if self.defaulting_type.is_empty() {
            self.defaulting_type = "System".to_string();
        }
        self
    }

    /// `ValidatePodTopologySpreadArgs`.
    fn validate(&self, _config: &SchedulerConfig, path: &str, errs: &mut Vec<String>) {
        let dt = &self.defaulting_type;
        if !DEFAULTING_TYPES.contains(&dt.as_str()) {
            errs.push(format!(
                "{path}.defaultingType: Unsupported value: {}: supported values: {}",
                echo(dt),
                supported(&DEFAULTING_TYPES)
            ));
        } else if dt == "System" && !self.default_constraints.is_empty() {
            errs.push(format!(
                "{path}.defaultingType: Invalid value: {}: when .defaultConstraints are not empty",
                echo(dt)
            ));
        }
        let list = &self.default_constraints;
        for (i, c) in list.iter().enumerate() {
            let p = format!("{path}.defaultConstraints[{i}]");
            if c.max_skew <= 0 {
                errs.push(format!("{p}.maxSkew: Invalid value: {}: not in valid range (0, inf)", c.max_skew));
            }
            if c.topology_key.is_empty() {
                errs.push(format!("{p}.topologyKey: Required value: can not be empty"));
            } else {
                label_name_errors(errs, &format!("{p}.topologyKey"), &c.topology_key);
            }
            if c.when_unsatisfiable.is_empty() {
                errs.push(format!("{p}.whenUnsatisfiable: Required value: can not be empty"));
            } else if !ACTIONS.contains(&c.when_unsatisfiable.as_str()) {
                errs.push(format!(
                    "{p}.whenUnsatisfiable: Unsupported value: {}: supported values: {}",
                    echo(&c.when_unsatisfiable),
                    supported(&ACTIONS)
                ));
            }
            if c.label_selector.is_some() {
                errs.push(format!(
                    "{p}.labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod"
                ));
            }
            let repeated = list[..i]
                .iter()
                .any(|o| o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable);
            if repeated {
                errs.push(format!(
                    "{path}.defaultConstraints[{i}]: Duplicate value: {}",
                    echo(format!("{{{}, {}}}", c.topology_key, c.when_unsatisfiable))
                ));
            }
        }
    }

    fn apply(self, config: &mut SchedulerConfig) {
        config.spread_defaulting = if self.defaulting_type == "List" {
            SpreadDefaulting::List(self.default_constraints)
        } else {
            SpreadDefaulting::System
        };
    }

    fn effective(config: &SchedulerConfig) -> Self {
        let (defaulting_type, default_constraints) = match &config.spread_defaulting {
            SpreadDefaulting::System => ("System", Vec::new()),
            SpreadDefaulting::List(list) => ("List", list.clone()),
        };
        PodTopologySpreadArgs {
            default_constraints,
            defaulting_type: defaulting_type.to_string(),
            ..PodTopologySpreadArgs::default()
        }
    }
}
