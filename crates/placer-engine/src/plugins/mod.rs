//! Pod-level and placement-level plugins.
//!
//! Pod-level plugins follow kube-scheduler v1.36's default profile. Filters run in kube's
//! order, and the first rejection decides a node's reason:
//! `NodeUnschedulable`, `NodeName`, `TaintToleration`, `NodeAffinity`, `NodePorts`,
//! `NodeResourcesFit`, `VolumeRestrictions`, `NodeVolumeLimits`, `VolumeBinding` (which
//! also reserves and pre-binds a pod's volumes), `VolumeZone`, `PodTopologySpread`,
//! `InterPodAffinity`, `DynamicResources` (which also reserves and pre-binds a pod's
//! ResourceClaims). Score plugins and their default weights:
//! `TaintToleration` 3, `NodeAffinity` 2, `NodeResourcesFit` 1, `PodTopologySpread` 2,
//! `InterPodAffinity` 2, `NodeResourcesBalancedAllocation` 1, `ImageLocality` 1 (overridable through
//! [`SchedulerConfig::weight`]; weight 0 disables a score plugin).
//!
//! Plugins that look at existing pods (`InterPodAffinity`, `PodTopologySpread`, the
//! resource plugins) read them from the snapshot on every attempt, so pods assumed earlier
//! in the same PodGroup cycle count like bound ones.
//!
//! Placement plugins (KEP-5732) live in `placement_*.rs` files.
//!
//! Every plugin is registered once, by name, in [`registry`]; a profile's
//! `plugins.<point>.disabled` / `enabled` select from it. A plugin file imports only
//! [`crate::framework`]. A new plugin is one new file here plus one line in [`registry`]
//! (and its `mod` line).

pub mod dynamic_resources;
#[cfg(test)]
mod example_node_label;
#[cfg(test)]
mod example_small_placement;
pub mod image_locality;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_resources;
pub mod node_unschedulable;
pub mod node_volume_limits;
pub mod placement_fragmentation;
pub mod placement_gang;
pub mod placement_pods_count;
pub mod placement_resources;
pub mod placement_topology;
pub mod pod_topology_spread;
pub mod taint_toleration;
pub mod volume_binding;
pub mod volume_restrictions;
pub mod volume_zone;

#[cfg(test)]
pub(crate) mod testing;

use placer_api::gates::Gate;

use crate::config::args;
use crate::framework::Registry;

/// kube-scheduler's PostFilter plugin, whose arguments Placer's per-pod preemption reads.
pub const DEFAULT_PREEMPTION: &str = "DefaultPreemption";

/// Every plugin Placer has, by name and extension point; registration order is execution
/// order. The defaults are kube-scheduler v1.36's profile and KEP-5732's placement plugins.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    // Filters, in kube's order.
    r.filter(node_unschedulable::NAME, |_| Some(Box::new(node_unschedulable::NodeUnschedulable)));
    r.filter(node_name::NAME, |_| Some(Box::new(node_name::NodeName)));
    r.filter(taint_toleration::NAME, |_| Some(Box::new(taint_toleration::TaintToleration)));
    r.filter(node_affinity::NAME, |c| Some(Box::new(node_affinity::NodeAffinity::new(c))));
    r.filter(node_ports::NAME, |_| Some(Box::new(node_ports::NodePorts)));
    r.filter(node_resources::FIT_NAME, |c| Some(Box::new(node_resources::NodeResourcesFit::new(c))));
    r.filter(volume_restrictions::NAME, |_| Some(Box::new(volume_restrictions::VolumeRestrictions)));
    r.filter(node_volume_limits::NAME, |_| Some(Box::new(node_volume_limits::NodeVolumeLimits)));
    r.filter(volume_binding::NAME, |_| Some(Box::new(volume_binding::VolumeBinding)));
    r.args::<args::VolumeBindingArgs>(volume_binding::NAME);
    r.filter(volume_zone::NAME, |_| Some(Box::new(volume_zone::VolumeZone)));
    r.filter(pod_topology_spread::NAME, |_| Some(Box::new(pod_topology_spread::PodTopologySpread)));
    r.filter(inter_pod_affinity::NAME, |_| Some(Box::new(inter_pod_affinity::InterPodAffinity::default())));
    r.filter(dynamic_resources::NAME, |_| Some(Box::new(dynamic_resources::DynamicResources)));
    #[cfg(test)]
    r.filter(example_node_label::NAME, |_| Some(Box::new(example_node_label::ExampleNodeLabel)))
        .off_by_default();
    // Score plugins with kube's default weights.
    r.score(taint_toleration::NAME, 3, |_| Some(Box::new(taint_toleration::TaintToleration)));
    r.score(node_affinity::NAME, 2, |c| Some(Box::new(node_affinity::NodeAffinity::new(c))));
    r.args::<args::NodeAffinityArgs>(node_affinity::NAME);
    r.score(node_resources::FIT_NAME, 1, |c| Some(Box::new(node_resources::NodeResourcesFit::new(c))));
    r.args::<args::NodeResourcesFitArgs>(node_resources::FIT_NAME);
    r.score(pod_topology_spread::NAME, 2, |_| Some(Box::new(pod_topology_spread::PodTopologySpread)));
    r.args::<args::PodTopologySpreadArgs>(pod_topology_spread::NAME);
    r.score(inter_pod_affinity::NAME, 2, |c| Some(Box::new(inter_pod_affinity::InterPodAffinity::new(c))));
    r.args::<args::InterPodAffinityArgs>(inter_pod_affinity::NAME);
    r.score(node_resources::BALANCED_NAME, 1, |c| Some(Box::new(node_resources::BalancedAllocation::new(c))));
    r.args::<args::NodeResourcesBalancedAllocationArgs>(node_resources::BALANCED_NAME);
    r.score(image_locality::NAME, 1, |_| Some(Box::new(image_locality::ImageLocality)));
    // Binding cycle.
    r.reserve(volume_binding::NAME, |_| Some(Box::new(volume_binding::VolumeBinding)));
    r.pre_bind(volume_binding::NAME, |_| Some(Box::new(volume_binding::VolumeBinding)));
    r.reserve(dynamic_resources::NAME, |_| Some(Box::new(dynamic_resources::DynamicResources)));
    r.pre_bind(dynamic_resources::NAME, |_| Some(Box::new(dynamic_resources::DynamicResources)));
    // PostFilter (per-pod preemption, `preemption::pod`): not a point of the registry,
    // but it takes arguments.
    r.args::<args::DefaultPreemptionArgs>(DEFAULT_PREEMPTION);
    // Placement plugins (KEP-5732).
    r.placement_generate(placement_topology::NAME, |_| {
        Some(Box::new(placement_topology::TopologyPlacementGenerator))
    });
    r.placement_feasible(placement_gang::NAME, |c| {
        c.gates.enabled(Gate::GangScheduling).then(|| Box::new(placement_gang::GangScheduling) as _)
    });
    r.placement_score(placement_pods_count::NAME, 1, |_| {
        Some(Box::new(placement_pods_count::PodGroupPodsCount))
    });
    #[cfg(test)]
    r.placement_score(example_small_placement::NAME, 1, |_| {
        Some(Box::new(example_small_placement::ExampleSmallPlacement))
    })
    .off_by_default();
    r.placement_score(placement_resources::NAME, 1, |c| {
        Some(Box::new(placement_resources::NodeResourcesFitPlacement::new(&c.placement_scoring_strategy)))
    });
    // Placer's fragmentation-aware placement score (off until a profile enables it).
    r.placement_score(placement_fragmentation::NAME, 1, |_| {
        Some(Box::new(placement_fragmentation::PlacementFragmentation))
    })
    .off_by_default();
    r
}

/// The pod-level framework of `config`'s profile.
pub fn pod_framework(config: &crate::framework::SchedulerConfig) -> crate::framework::Framework {
    registry().pod_framework(config)
}

/// The placement framework of `config`'s profile.
pub fn placement_framework(
    config: &crate::framework::SchedulerConfig,
) -> crate::framework::PlacementFramework {
    registry().placement_framework(config)
}

#[cfg(test)]
mod tests {

    use crate::framework::SchedulerConfig;

    #[test]
    fn default_profile_matches_kube_scheduler() {
        let fw = crate::plugins::pod_framework(&SchedulerConfig::default());
        assert_eq!(
            fw.filter_names(),
            vec![
                "NodeUnschedulable",
                "NodeName",
                "TaintToleration",
                "NodeAffinity",
                "NodePorts",
                "NodeResourcesFit",
                "VolumeRestrictions",
                "NodeVolumeLimits",
                "VolumeBinding",
                "VolumeZone",
                "PodTopologySpread",
                "InterPodAffinity",
                "DynamicResources"
            ]
        );
        assert_eq!(
            fw.score_weights(),
            vec![
                ("TaintToleration", 3),
                ("NodeAffinity", 2),
                ("NodeResourcesFit", 1),
                ("PodTopologySpread", 2),
                ("InterPodAffinity", 2),
                ("NodeResourcesBalancedAllocation", 1),
                ("ImageLocality", 1)
            ]
        );
    }

    #[test]
    fn the_effective_profile_lists_what_runs_with_weights_and_args() {
        let mut config = SchedulerConfig::default();
        config.plugin_weights.insert("ImageLocality".into(), 0);
        config.plugins.enable(
            crate::config::ExtensionPoint::PlacementScore,
            "PlacementFragmentation",
            Some(4),
        );
        config.plugins.disable(crate::config::ExtensionPoint::Filter, "NodePorts");
        let profiles = crate::plugins::registry().effective_profiles(&config);
        assert_eq!(profiles.len(), config.scheduler_names.len());
        let p = &profiles[0];
        let point =
            |key: &str| p.plugins.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone()).unwrap_or_default();
        assert!(!point("filter").iter().any(|(n, _)| *n == "NodePorts"));
        assert!(point("score").contains(&("NodeResourcesBalancedAllocation", Some(1))));
        assert!(!point("score").iter().any(|(n, _)| *n == "ImageLocality"), "weight 0: off");
        assert_eq!(point("placementScore").last(), Some(&("PlacementFragmentation", Some(4))));
        let names: Vec<&str> = p.plugin_config.iter().map(|(n, _)| *n).collect();
        // Every plugin with arguments, DefaultPreemption (PostFilter) included, in name
        // order as kube-scheduler lists the defaulted ones, each with upstream's defaults.
        assert_eq!(
            names,
            [
                "DefaultPreemption",
                "InterPodAffinity",
                "NodeAffinity",
                "NodeResourcesBalancedAllocation",
                "NodeResourcesFit",
                "PodTopologySpread",
                "VolumeBinding"
            ]
        );
        let args =
            |name: &str| p.plugin_config.iter().find(|(n, _)| *n == name).map(|(_, a)| a.clone()).unwrap();
        assert_eq!(args("DefaultPreemption")["minCandidateNodesPercentage"], 10);
        assert_eq!(args("DefaultPreemption")["minCandidateNodesAbsolute"], 100);
        assert_eq!(args("NodeAffinity")["kind"], "NodeAffinityArgs");
        assert_eq!(args("NodeResourcesFit")["scoringStrategy"]["type"], "LeastAllocated");
        assert_eq!(args("InterPodAffinity")["hardPodAffinityWeight"], 1);
        assert_eq!(args("NodeResourcesBalancedAllocation")["resources"][1]["name"], "memory");
        assert_eq!(args("PodTopologySpread")["defaultingType"], "System");
        assert_eq!(args("VolumeBinding")["bindTimeoutSeconds"], 600);
        assert!(args("VolumeBinding").get("shape").is_none(), "StorageCapacityScoring is off in v1.36");
        // Keys in KubeSchedulerConfiguration's order.
        let text = serde_json::to_string(p).expect("json");
        assert!(
            text.starts_with("{\"schedulerName\":\"default-scheduler\",\"plugins\":{\"filter\":"),
            "{text}"
        );
    }

    #[test]
    fn weights_come_from_the_config_and_zero_disables() {
        let mut config = SchedulerConfig::default();
        config.plugin_weights.insert("NodeResourcesFit".into(), 5);
        config.plugin_weights.insert("TaintToleration".into(), 0);
        let fw = crate::plugins::pod_framework(&config);
        let weights = fw.score_weights();
        assert!(weights.contains(&("NodeResourcesFit", 5)));
        assert!(!weights.iter().any(|(n, _)| *n == "TaintToleration"));
    }
}
