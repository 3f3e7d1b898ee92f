//! The scenario file: its types as loaded and validated (see `shared/scenarios/FORMAT.md`).
//!
//! The scenario's own structure (`name`, `scheduler`, `cluster`, `steps`, `expect`, ...)
//! is strict: an unknown field is an error. The Kubernetes manifests inside it are parsed
//! straight into the typed k8s-openapi structs of their `apiVersion` / `kind`, so label
//! values such as `on` or `0123` reach the object exactly as written. Object patterns
//! (`expect.objects`, `expect.absent`) and merge patches (`patch` steps) are kept as JSON
//! values.

use std::collections::BTreeMap;
use std::path::PathBuf;

use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;
use placer_cluster::{Object, ObjectRef};
use serde::{Deserialize, Serialize};

/// A loaded, validated scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// The file it was read from (as given by the caller).
    pub file: PathBuf,
    /// Unique kebab-case name.
    pub name: String,
    /// What the case pins down.
    pub description: Option<String>,
    /// Where the facts come from.
    pub source: Option<String>,
    /// `scheduler` (defaults when absent).
    pub scheduler: SchedulerSpec,
    /// `cluster.nodes`, in file order.
    pub nodes: Vec<Manifest>,
    /// `cluster.generate`.
    pub generate: Option<GenerateSpec>,
    /// `cluster.pods`: pods already bound to a node.
    pub pods: Vec<Manifest>,
    /// `submit`, in file order.
    pub submit: Vec<Manifest>,
    pub steps: Vec<Step>,
    /// The top-level `expect` (checked after the last step).
    pub expect: Option<Expect>,
}

impl Scenario {
    /// The declared topology levels (`scheduler.profile.topologyLevels`), coarsest first.
    pub fn topology_levels(&self) -> &[String] {
        self.scheduler.profile.as_ref().map(|p| p.topology_levels.as_slice()).unwrap_or(&[])
    }

    /// Number of nodes the cluster starts with (listed plus generated).
    pub fn node_count(&self) -> usize {
        self.nodes.len() + self.generate.as_ref().map_or(0, GenerateSpec::node_count)
    }
}

/// One Kubernetes object of the scenario, with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The typed object (namespaced kinds without a namespace are put in `default`).
    pub object: Object,
    /// Position in the scenario, e.g. `submit[2]`, `steps[1].submit[0]`, `cluster.nodes[3]`.
    pub path: String,
    /// 1-based line and column of the manifest in the file (0 when unknown).
    pub line: u64,
    pub column: u64,
}

/// One entry of `steps`.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// `steps[i]`.
    pub path: String,
    /// 1-based line and column of the step in the file.
    pub line: u64,
    pub column: u64,
    /// What the step does.
    pub action: StepAction,
}

/// What a step does.
#[derive(Debug, Clone, PartialEq)]
pub enum StepAction {
    /// Create more objects, in order.
    Submit(Vec<Manifest>),
    /// Delete a pod (`namespace/name`).
    DeletePod { namespace: String, name: String },
    /// Delete a node; its pods are then deleted as the pod garbage collector would.
    DeleteNode(String),
    /// JSON merge patch of an existing object; a rejection is checked by the next
    /// `expect.error`.
    Patch { target: ObjectRef, patch: serde_json::Value },
    /// Set the node's `Ready` condition to `False` (the node lifecycle controller then
    /// adds the `not-ready` `NoSchedule` and `NoExecute` taints).
    MarkNotReady(String),
    /// Set the node's `Ready` condition back to `True` (the lifecycle taints go).
    MarkReady(String),
    /// Set the node's `Ready` condition to `Unknown`, as when its kubelet stops posting
    /// status (the `unreachable` taints follow).
    MarkUnreachable(String),
    /// Add a taint to a node.
    Taint(TaintStep),
    /// Move the virtual clock forward.
    Advance { ms: u64 },
    /// Check expectations at this point.
    Expect(Expect),
}

/// `scheduler`: the scheduler configuration of the scenario.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SchedulerSpec {
    /// Gate overrides over Placer's defaults; unknown names are an error.
    #[serde(default)]
    pub feature_gates: BTreeMap<String, bool>,
    #[serde(default)]
    pub profile: Option<ProfileSpec>,
}

/// `scheduler.profile`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProfileSpec {
    /// The declared hierarchy, coarsest first (Kueue's Topology).
    #[serde(default)]
    pub topology_levels: Vec<String>,
    /// Placer extension: score plugin weights by plugin name.
    #[serde(default)]
    pub plugin_weights: BTreeMap<String, i64>,
    /// Placer extension: `percentageOfPlacementsToScore` (absent: adaptive default).
    #[serde(default)]
    pub percentage_of_placements_to_score: Option<u32>,
    /// Placer extension: pod-level NodeResourcesFit strategy, `LeastAllocated` (default)
    /// or `MostAllocated`.
    #[serde(default)]
    pub scoring_strategy: Option<String>,
    /// Placer extension: placement-level NodeResourcesFit strategy, `MostAllocated`
    /// (default) or `LeastAllocated`.
    #[serde(default)]
    pub placement_scoring_strategy: Option<String>,
    /// Placer extension: initial pod backoff, a duration such as `1s` or `0s`.
    #[serde(default)]
    pub pod_initial_backoff: Option<String>,
    /// Placer extension: maximum pod backoff, a duration such as `10s`.
    #[serde(default)]
    pub pod_max_backoff: Option<String>,
    /// Placer extension: the `schedulerName`s this scheduler serves.
    #[serde(default)]
    pub scheduler_names: Option<Vec<String>>,
    /// KubeSchedulerConfiguration's `plugins`: per extension point (`filter`, `score`,
    /// `reserve`, `permit`, `preBind`, `placementGenerate`, `placementFeasible`,
    /// `placementScore`, `multiPoint`; `preFilter` / `preScore` name the filter / score
    /// points), plugins `enabled` after the defaults and default plugins `disabled`.
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginSetSpec>,
    /// KubeSchedulerConfiguration's `pluginConfig`: plugin arguments by plugin name (e.g.
    /// `NodeResourcesFit`'s `scoringStrategy`), validated as kube-scheduler validates them.
    #[serde(default)]
    pub plugin_config: Vec<placer_engine::PluginConfigEntry>,
    /// Placer extension: when a gang's pods lost with a failed node find no replacement,
    /// evict the whole gang and place it again (`true`) or keep them Pending (`false`).
    /// Absent: on with `topologyLevels` (Kueue's fail-fast), off without (KEP-5732).
    #[serde(default)]
    pub evict_gang_on_failed_node: Option<bool>,
    /// Placer extension (with `topologyLevels`): the seed 002 algorithm of each kind of
    /// request; absent kinds follow the feature gates.
    #[serde(default)]
    pub topology_algorithms: Option<TopologyAlgorithmsSpec>,
    /// Placer extension (with `topologyLevels`): Kueue-mode preemption, as a ClusterQueue's
    /// `preemption` (`withinClusterQueue`).
    #[serde(default)]
    pub topology_preemption: Option<TopologyPreemptionSpec>,
}

/// `scheduler.profile.topologyPreemption`: Kueue's ClusterQueue `preemption`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TopologyPreemptionSpec {
    /// `Never`, `LowerPriority` (Placer's default) or `LowerOrNewerEqualPriority`.
    #[serde(default)]
    pub within_cluster_queue: Option<String>,
}

impl TopologyPreemptionSpec {
    /// The engine's policy, checked (the error names the field).
    pub fn to_config(&self) -> Result<placer_engine::WithinClusterQueue, String> {
        match &self.within_cluster_queue {
            None => Ok(placer_engine::WithinClusterQueue::default()),
            Some(v) => placer_engine::WithinClusterQueue::parse(v)
                .map_err(|m| format!("topologyPreemption.withinClusterQueue: {m}")),
        }
    }
}

/// `scheduler.profile.topologyAlgorithms`: `BestFit`, `LeastFreeCapacity` or
/// `BalancedPlacement` (preferred only) per kind of request.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TopologyAlgorithmsSpec {
    #[serde(default)]
    pub required: Option<String>,
    #[serde(default)]
    pub preferred: Option<String>,
    #[serde(default)]
    pub unconstrained: Option<String>,
}

impl TopologyAlgorithmsSpec {
    /// The engine's choice, checked (the error names the field).
    pub fn to_config(&self) -> Result<placer_engine::TopologyAlgorithms, String> {
        placer_engine::TopologyAlgorithms::from_names(
            self.required.as_deref(),
            self.preferred.as_deref(),
            self.unconstrained.as_deref(),
        )
    }
}

/// `plugins.<point>` of a profile.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginSetSpec {
    #[serde(default)]
    pub enabled: Vec<PluginSpec>,
    /// `[{name: "*"}]` disables every default plugin of the point.
    #[serde(default)]
    pub disabled: Vec<PluginSpec>,
}

/// One plugin of a [`PluginSetSpec`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginSpec {
    pub name: String,
    /// Score plugins only.
    #[serde(default)]
    pub weight: Option<i64>,
}

/// `cluster.generate`: a regular topology of identical nodes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GenerateSpec {
    /// Label keys, coarsest first.
    pub levels: Vec<String>,
    /// Children per parent at each level (same length as `levels`).
    pub fanout: Vec<u32>,
    /// Allocatable (and capacity) of every generated node.
    pub allocatable: BTreeMap<String, Quantity>,
    /// Extra labels on every generated node.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

impl GenerateSpec {
    /// Number of nodes this generates (saturating).
    pub fn node_count(&self) -> usize {
        self.fanout.iter().fold(1usize, |n, f| n.saturating_mul(*f as usize))
    }
}

/// `taint` step.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TaintStep {
    /// Node name.
    pub node: String,
    /// Taint key.
    pub key: String,
    /// Taint value (optional).
    #[serde(default)]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute` (evicts pods that do not tolerate it).
    pub effect: String,
}

/// An `expect` block. Every field is optional; what is present must hold exactly.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expect {
    /// `namespace/name` -> node name, or `Pending` for an unbound pod.
    #[serde(default)]
    pub pods: BTreeMap<String, String>,
    /// `namespace/name` of a PodGroup -> what must hold for it.
    #[serde(default)]
    pub pod_groups: BTreeMap<String, PodGroupExpect>,
    /// Object patterns that some object must match (subset match).
    #[serde(default)]
    pub objects: Vec<serde_json::Value>,
    /// Object patterns no object may match.
    #[serde(default)]
    pub absent: Vec<serde_json::Value>,
    /// Substring of the error the scenario (top level) or the preceding steps must fail with.
    #[serde(default)]
    pub error: Option<String>,
}

/// Expectations on one PodGroup (its pods are those naming it in `spec.schedulingGroup`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodGroupExpect {
    /// True: at least one pod of the group is bound; false: none is.
    #[serde(default)]
    pub scheduled: Option<bool>,
    /// Exact number of bound pods.
    #[serde(default)]
    pub bound_pods: Option<u32>,
    /// Every bound pod's node has the same value of this label.
    #[serde(default)]
    pub same_domain: Option<String>,
    /// Label key -> the sorted set of values used by the bound pods' nodes.
    #[serde(default)]
    pub domains: Option<BTreeMap<String, Vec<String>>>,
    /// Label key -> exact bound pod count per value.
    #[serde(default)]
    pub pods_per_domain: Option<BTreeMap<String, BTreeMap<String, u32>>>,
    /// A condition of the PodGroup's status.
    #[serde(default)]
    pub condition: Option<ConditionExpect>,
}

/// Expected condition (`message` and `reason` are checked only when given).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConditionExpect {
    /// Condition type, e.g. `PodGroupScheduled`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

/// Parses a duration: one or more `<integer><unit>` terms, units `ms`, `s`, `m`, `h`
/// (`500ms`, `30s`, `5m`, `1h30m`). Returns milliseconds.
pub fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let err = || {
        format!(
            "invalid duration {}: expected a number with a unit, e.g. 500ms, 30s, 5m, 1h",
            placer_cluster::validation::echo(text)
        )
    };
    let s = text.trim();
    if s.is_empty() {
        return Err(err());
    }
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut total: u64 = 0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if start == i {
            return Err(err());
        }
        let value: u64 = s[start..i].parse().map_err(|_| err())?;
        let unit_start = i;
        while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
            i += 1;
        }
        let factor = match &s[unit_start..i] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => return Err(err()),
        };
        total = value.checked_mul(factor).and_then(|v| total.checked_add(v)).ok_or_else(err)?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_accept_units_and_compounds() {
        assert_eq!(parse_duration_ms("500ms"), Ok(500));
        assert_eq!(parse_duration_ms("30s"), Ok(30_000));
        assert_eq!(parse_duration_ms("5m"), Ok(300_000));
        assert_eq!(parse_duration_ms("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration_ms("0s"), Ok(0));
    }

    #[test]
    fn durations_need_a_known_unit() {
        for bad in ["", "30", "s", "1d", "-1s", "1.5s", "30 s"] {
            let err = parse_duration_ms(bad).unwrap_err();
            assert!(err.starts_with("invalid duration"), "{bad}: {err}");
        }
    }

    #[test]
    fn generated_node_count_multiplies_fanouts() {
        let g = GenerateSpec {
            levels: vec!["a".into(), "b".into()],
            fanout: vec![4, 8],
            allocatable: BTreeMap::new(),
            labels: BTreeMap::new(),
        };
        assert_eq!(g.node_count(), 32);
    }
}
