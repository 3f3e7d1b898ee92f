//! Pod-level and placement-level plugins.
//!
//! Pod-level plugins follow kube-scheduler v1.36's default profile. Filters run in kube's
//! order, and the first rejection decides a node's reason:
//! `NodeUnschedulable`, `NodeName`, `TaintToleration`, `NodeAffinity`, `NodePorts`,
//! `NodeResourcesFit`, `PodTopologySpread`, `InterPodAffinity`. Score plugins and their default weights:
//! `TaintToleration` 3, `NodeAffinity` 2, `NodeResourcesFit` 1, `PodTopologySpread` 2,
//! `InterPodAffinity` 2, `NodeResourcesBalancedAllocation` 1 (overridable through
//! [`SchedulerConfig::weight`]; weight 0 disables a score plugin).
//!
//! Plugins that look at existing pods (`InterPodAffinity`, `PodTopologySpread`, the
//! resource plugins) read them from the snapshot on every attempt, so pods assumed earlier
//! in the same PodGroup cycle count like bound ones.
//!
//! Placement plugins (KEP-5732) live in `placement_*.rs` files.

pub mod helper;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_resources;
pub mod node_unschedulable;
pub mod normalize;
pub mod placement_gang;
pub mod placement_pods_count;
pub mod placement_resources;
pub mod placement_topology;
pub mod pod_topology_spread;
pub mod taint_toleration;

#[cfg(test)]
pub(crate) mod testing;

use placer_api::k8s::api::core::v1::{
    NodeSelectorTerm, PreferredSchedulingTerm, Toleration, TopologySpreadConstraint,
};

use crate::config::SchedulerConfig;
use crate::framework::Framework;
use crate::model::{NodeStatic, PodInfo};
use helper::{labels_or_empty, node_selector_terms_match, Labels};
use inter_pod_affinity::AffinityTerm;

/// A pod's scheduling constraints, read once per scheduling attempt and borrowed from its
/// [`crate::model::PodSchedulingView`] (no copies of selectors or tolerations).
#[derive(Debug, Clone)]
pub struct ParsedPod<'a> {
    pub pod: &'a PodInfo,
    pub namespace: &'a str,
    pub labels: &'a Labels,
    /// `spec.nodeName` (non-empty).
    pub node_name: Option<&'a str>,
    pub tolerations: &'a [Toleration],
    /// `spec.nodeSelector` (non-empty).
    pub node_selector: Option<&'a Labels>,
    /// `requiredDuringScheduling` node selector terms, when set (an empty list selects
    /// no node).
    pub required_node_terms: Option<&'a [NodeSelectorTerm]>,
    pub preferred_node_terms: &'a [PreferredSchedulingTerm],
    pub required_affinity: Vec<AffinityTerm<'a>>,
    pub required_anti_affinity: Vec<AffinityTerm<'a>>,
    /// Preferred pod affinity terms with their weights.
    pub preferred_affinity: Vec<(i64, AffinityTerm<'a>)>,
    /// Preferred pod anti-affinity terms with their weights.
    pub preferred_anti_affinity: Vec<(i64, AffinityTerm<'a>)>,
    pub spread_constraints: &'a [TopologySpreadConstraint],
}

impl<'a> ParsedPod<'a> {
    /// Reads the pod's constraints.
    pub fn new(pod: &'a PodInfo) -> ParsedPod<'a> {
        let view = &*pod.view;
        let namespace = &*pod.key.namespace;
        let labels = pod.labels();
        let node_affinity = view.affinity.as_deref().and_then(|a| a.node_affinity.as_ref());
        let terms = inter_pod_affinity::PodTerms::of(pod);
        let term = |t| AffinityTerm::new(t, namespace, labels);
        ParsedPod {
            pod,
            namespace,
            labels,
            node_name: pod.node_name.as_deref(),
            tolerations: &view.tolerations,
            node_selector: Some(&view.node_selector).filter(|m| !m.is_empty()),
            required_node_terms: node_affinity
                .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
                .map(|s| s.node_selector_terms.as_slice()),
            preferred_node_terms: node_affinity
                .and_then(|n| n.preferred_during_scheduling_ignored_during_execution.as_deref())
                .unwrap_or(&[]),
            required_affinity: terms.required_affinity.iter().map(term).collect(),
            required_anti_affinity: terms.required_anti_affinity.iter().map(term).collect(),
            preferred_affinity: terms
                .preferred_affinity
                .iter()
                .map(|w| (i64::from(w.weight), term(&w.pod_affinity_term)))
                .collect(),
            preferred_anti_affinity: terms
                .preferred_anti_affinity
                .iter()
                .map(|w| (i64::from(w.weight), term(&w.pod_affinity_term)))
                .collect(),
            spread_constraints: &view.topology_spread_constraints,
        }
    }

    /// Whether the node satisfies `spec.nodeSelector` and the required node affinity
    /// (kube's `RequiredNodeAffinity.Match`).
    pub fn matches_node_selector_and_affinity(&self, node: &NodeStatic) -> bool {
        let labels = labels_or_empty(node.labels());
        if let Some(sel) = self.node_selector {
            if !sel.iter().all(|(k, v)| labels.get(k) == Some(v)) {
                return false;
            }
        }
        match self.required_node_terms {
            Some(terms) => node_selector_terms_match(terms, &node.name, labels),
            None => true,
        }
    }
}

/// PreFilter / PreScore state of the built-in plugins for one pod.
#[derive(Debug, Default)]
pub struct PluginStates<'a> {
    pub inter_pod_affinity: Option<inter_pod_affinity::FilterState<'a>>,
    pub inter_pod_affinity_score: Option<inter_pod_affinity::ScoreState<'a>>,
    pub pod_topology_spread: Option<pod_topology_spread::FilterState<'a>>,
    pub pod_topology_spread_score: Option<pod_topology_spread::ScoreState<'a>>,
}

/// Registers kube-scheduler's default pod-level plugins, filters in kube's order, score
/// plugins with weights from `config`.
pub fn register_defaults(fw: &mut Framework, config: &SchedulerConfig) {
    fw.add_filter(Box::new(node_unschedulable::NodeUnschedulable));
    fw.add_filter(Box::new(node_name::NodeName));
    fw.add_filter(Box::new(taint_toleration::TaintToleration));
    fw.add_filter(Box::new(node_affinity::NodeAffinity));
    fw.add_filter(Box::new(node_ports::NodePorts));
    fw.add_filter(Box::new(node_resources::NodeResourcesFit::new(config)));
    fw.add_filter(Box::new(pod_topology_spread::PodTopologySpread));
    fw.add_filter(Box::new(inter_pod_affinity::InterPodAffinity));

    let scores: Vec<Box<dyn crate::framework::ScorePlugin>> = vec![
        Box::new(taint_toleration::TaintToleration),
        Box::new(node_affinity::NodeAffinity),
        Box::new(node_resources::NodeResourcesFit::new(config)),
        Box::new(pod_topology_spread::PodTopologySpread),
        Box::new(inter_pod_affinity::InterPodAffinity),
        Box::new(node_resources::BalancedAllocation::default()),
    ];
    for p in scores {
        let weight = config.weight(p.name(), p.default_weight());
        fw.add_score(p, weight);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_profile_matches_kube_scheduler() {
        let fw = Framework::new(&SchedulerConfig::default());
        assert_eq!(
            fw.filter_names(),
            vec![
                "NodeUnschedulable",
                "NodeName",
                "TaintToleration",
                "NodeAffinity",
                "NodePorts",
                "NodeResourcesFit",
                "PodTopologySpread",
                "InterPodAffinity"
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
                ("NodeResourcesBalancedAllocation", 1)
            ]
        );
    }

    #[test]
    fn weights_come_from_the_config_and_zero_disables() {
        let mut config = SchedulerConfig::default();
        config.plugin_weights.insert("NodeResourcesFit".into(), 5);
        config.plugin_weights.insert("TaintToleration".into(), 0);
        let fw = Framework::new(&config);
        let weights = fw.score_weights();
        assert!(weights.contains(&("NodeResourcesFit", 5)));
        assert!(!weights.iter().any(|(n, _)| *n == "TaintToleration"));
    }
}
