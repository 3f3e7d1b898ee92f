//! A pod's scheduling constraints as the plugins read them, parsed once per scheduling
//! attempt and borrowed from the pod's [`crate::model::PodSchedulingView`] (kube-scheduler's
//! `framework.PodInfo`): node selector and affinity, tolerations, pod (anti-)affinity terms
//! with their `matchLabelKeys` resolved, topology spread constraints.

use placer_api::k8s::api::core::v1::{
    NodeSelectorTerm, PodAffinityTerm, PreferredSchedulingTerm, Toleration, TopologySpreadConstraint,
    WeightedPodAffinityTerm,
};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::LabelSelector;
use smallvec::SmallVec;

use super::helper::{
    first_untolerated_taint, label_selector_is_empty, label_selector_matches, labels_or_empty,
    node_selector_terms_match, validate_label_selector, Labels, NamespaceIndex, NamespaceLabels,
    SelectorError,
};
use crate::model::{NodeStatic, PodInfo};
use crate::snapshot::NodeState;

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
    /// The `whenUnsatisfiable: DoNotSchedule` constraints (PodTopologySpread's filter).
    pub spread_filter: Vec<SpreadConstraint<'a>>,
    /// The `whenUnsatisfiable: ScheduleAnyway` constraints (PodTopologySpread's score).
    pub spread_score: Vec<SpreadConstraint<'a>>,
}

impl<'a> ParsedPod<'a> {
    /// Reads the pod's constraints.
    pub fn new(pod: &'a PodInfo) -> ParsedPod<'a> {
        let view = &*pod.view;
        let namespace = &*pod.key.namespace;
        let labels = pod.labels();
        let node_affinity = view.affinity.as_deref().and_then(|a| a.node_affinity.as_ref());
        let terms = PodTerms::of(pod);
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
            spread_filter: spread(&view.topology_spread_constraints, "DoNotSchedule", labels),
            spread_score: spread(&view.topology_spread_constraints, "ScheduleAnyway", labels),
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

/// The pod (anti-)affinity terms of a pod, as slices of its `spec.affinity`.
#[derive(Debug, Clone, Copy, Default)]
pub struct PodTerms<'a> {
    pub required_affinity: &'a [PodAffinityTerm],
    pub required_anti_affinity: &'a [PodAffinityTerm],
    pub preferred_affinity: &'a [WeightedPodAffinityTerm],
    pub preferred_anti_affinity: &'a [WeightedPodAffinityTerm],
}

impl<'a> PodTerms<'a> {
    /// The terms of `pod`.
    pub fn of(pod: &'a PodInfo) -> PodTerms<'a> {
        let Some(affinity) = pod.view.affinity.as_deref() else {
            return PodTerms::default();
        };
        let aff = affinity.pod_affinity.as_ref();
        let anti = affinity.pod_anti_affinity.as_ref();
        PodTerms {
            required_affinity: aff
                .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_deref())
                .unwrap_or(&[]),
            required_anti_affinity: anti
                .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_deref())
                .unwrap_or(&[]),
            preferred_affinity: aff
                .and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_deref())
                .unwrap_or(&[]),
            preferred_anti_affinity: anti
                .and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_deref())
                .unwrap_or(&[]),
        }
    }
}

/// One pod affinity term seen from the pod that owns it.
#[derive(Debug, Clone)]
pub struct AffinityTerm<'a> {
    pub term: &'a PodAffinityTerm,
    /// Namespace of the owning pod (the default when the term names no namespace).
    pub owner_namespace: &'a str,
    /// `matchLabelKeys` (true: `key in (value)`) and `mismatchLabelKeys` (false:
    /// `key notin (value)`) resolved against the owning pod's labels.
    pub label_keys: SmallVec<[(&'a str, &'a str, bool); 2]>,
}

impl<'a> AffinityTerm<'a> {
    /// The term `term` of a pod in `owner_namespace` with labels `owner_labels`.
    pub fn new(term: &'a PodAffinityTerm, owner_namespace: &'a str, owner_labels: &'a Labels) -> Self {
        let mut label_keys = SmallVec::new();
        if term.label_selector.is_some() {
            for (keys, is_in) in [(&term.match_label_keys, true), (&term.mismatch_label_keys, false)] {
                for k in keys.iter().flatten() {
                    if let Some(v) = owner_labels.get(k) {
                        label_keys.push((k.as_str(), v.as_str(), is_in));
                    }
                }
            }
        }
        AffinityTerm { term, owner_namespace, label_keys }
    }

    /// The topology key.
    pub fn topology_key(&self) -> &'a str {
        &self.term.topology_key
    }

    /// Whether the term applies to pods of namespace `ns` (namespace labels from
    /// `namespaces`).
    pub fn selects_namespace(&self, ns: &str, namespaces: &NamespaceIndex) -> bool {
        let names = self.term.namespaces.as_deref().unwrap_or(&[]);
        match &self.term.namespace_selector {
            None if names.is_empty() => ns == self.owner_namespace,
            sel => {
                names.iter().any(|n| n == ns)
                    || sel
                        .as_ref()
                        .is_some_and(|s| label_selector_matches(s, &NamespaceLabels::of(ns, namespaces)))
            }
        }
    }

    /// Whether the term selects a pod of namespace `ns` with labels `labels` (a term
    /// without a label selector selects nothing).
    pub fn matches(&self, ns: &str, labels: &Labels, namespaces: &NamespaceIndex) -> bool {
        let Some(sel) = &self.term.label_selector else { return false };
        self.selects_namespace(ns, namespaces)
            && label_selector_matches(sel, labels)
            && self
                .label_keys
                .iter()
                .all(|&(k, v, is_in)| (labels.get(k).map(String::as_str) == Some(v)) == is_in)
    }

    /// Whether the term selects `pod`.
    pub fn matches_pod(&self, pod: &PodInfo, namespaces: &NamespaceIndex) -> bool {
        self.matches(&pod.key.namespace, pod.labels(), namespaces)
    }

    /// Checks the term's selectors as the API server would.
    pub fn validate(&self) -> Result<(), SelectorError> {
        if let Some(sel) = &self.term.label_selector {
            validate_label_selector(sel)?;
        }
        if let Some(sel) = &self.term.namespace_selector {
            validate_label_selector(sel)?;
        }
        Ok(())
    }
}

/// One constraint of the pod, with its selector merged with `matchLabelKeys`.
#[derive(Debug, Clone)]
pub struct SpreadConstraint<'a> {
    pub max_skew: i64,
    pub topology_key: &'a str,
    /// `None`: the constraint has no label selector and selects nothing.
    pub selector: Option<&'a LabelSelector>,
    /// `matchLabelKeys` resolved against the pod's labels: `key = value` requirements.
    pub label_keys: SmallVec<[(&'a str, &'a str); 2]>,
    pub min_domains: i64,
    /// `nodeAffinityPolicy: Honor` (the default).
    pub honor_node_affinity: bool,
    /// `nodeTaintsPolicy: Honor` (default `Ignore`).
    pub honor_node_taints: bool,
}

impl<'a> SpreadConstraint<'a> {
    pub fn new(c: &'a TopologySpreadConstraint, pod_labels: &'a Labels) -> Self {
        let mut label_keys = SmallVec::new();
        if c.label_selector.is_some() {
            for k in c.match_label_keys.iter().flatten() {
                if let Some(v) = pod_labels.get(k) {
                    label_keys.push((k.as_str(), v.as_str()));
                }
            }
        }
        SpreadConstraint {
            max_skew: i64::from(c.max_skew),
            topology_key: &c.topology_key,
            selector: c.label_selector.as_ref(),
            label_keys,
            min_domains: i64::from(c.min_domains.unwrap_or(1)),
            honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
            honor_node_taints: c.node_taints_policy.as_deref() == Some("Honor"),
        }
    }

    /// Whether the selector selects these labels.
    pub fn selects(&self, labels: &Labels) -> bool {
        let Some(sel) = self.selector else { return false };
        label_selector_matches(sel, labels)
            && self.label_keys.iter().all(|&(k, v)| labels.get(k).map(String::as_str) == Some(v))
    }

    /// A selector without requirements counts no pods (kube's `selector.Empty()`).
    pub fn counts_nothing(&self) -> bool {
        self.selector.is_none_or(|s| label_selector_is_empty(s) && self.label_keys.is_empty())
    }

    /// Matching pods on the node: same namespace, not terminating, selected.
    pub fn count_on(&self, node: &NodeState, namespace: &str) -> i64 {
        if self.counts_nothing() {
            return 0;
        }
        node.pods
            .iter()
            .filter(|p| !p.deleting && &*p.key.namespace == namespace && self.selects(p.labels()))
            .count() as i64
    }

    /// Whether the node's domain is eligible under the inclusion policies.
    pub fn includes(&self, parsed: &ParsedPod<'_>, node: &NodeState) -> bool {
        (!self.honor_node_affinity || parsed.matches_node_selector_and_affinity(&node.info))
            && (!self.honor_node_taints || first_untolerated_taint(&node.info, parsed.tolerations).is_none())
    }
}

/// The constraints with `whenUnsatisfiable == when`.
fn spread<'a>(
    all: &'a [TopologySpreadConstraint],
    when: &str,
    labels: &'a Labels,
) -> Vec<SpreadConstraint<'a>> {
    all.iter().filter(|c| c.when_unsatisfiable == when).map(|c| SpreadConstraint::new(c, labels)).collect()
}
