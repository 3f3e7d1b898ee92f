//! `PodTopologySpread`: `whenUnsatisfiable: DoNotSchedule` constraints (filter) and
//! `ScheduleAnyway` constraints (score), as kube-scheduler's `podtopologyspread` plugin.
//!
//! A domain (one value of the constraint's topology key) is eligible when its node has
//! every constraint's topology key and passes the inclusion policies: `nodeAffinityPolicy`
//! (default `Honor`: the pod's nodeSelector / required node affinity) and
//! `nodeTaintsPolicy` (default `Ignore`). Matching pods are those of the pod's namespace,
//! not terminating, selected by the constraint's selector (merged with `matchLabelKeys`).
//! A node passes when `matching(domain) + self - globalMin <= maxSkew`, where the global
//! minimum counts as 0 while fewer than `minDomains` domains are eligible.
//!
//! The system default constraints (built from Services / ReplicaSets / StatefulSets
//! selecting the pod) are not applied: the engine does not see those objects.

use placer_api::k8s::api::core::v1::TopologySpreadConstraint;
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::LabelSelector;
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;

use crate::framework::{
    CycleState, FilterPlugin, FilterResult, PreResult, Rejection, ScorePlugin, MAX_NODE_SCORE,
};
use crate::model::NodeId;
use crate::plugins::helper::{
    first_untolerated_taint, label_selector_is_empty, label_selector_matches, labels_or_empty,
    validate_label_selector, Labels,
};
use crate::plugins::ParsedPod;
use crate::snapshot::{NodeState, Snapshot};

/// Plugin name.
pub const NAME: &str = "PodTopologySpread";
/// Filter reason: the skew would exceed `maxSkew`.
pub const ERR_CONSTRAINTS_NOT_MATCH: &str = "node(s) didn't match pod topology spread constraints";
/// Filter reason: the node lacks a constraint's topology key.
pub const ERR_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

const HOSTNAME: &str = "kubernetes.io/hostname";

/// One constraint of the pod, with its selector merged with `matchLabelKeys`.
#[derive(Debug, Clone)]
pub struct Constraint<'a> {
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

impl<'a> Constraint<'a> {
    fn new(c: &'a TopologySpreadConstraint, pod_labels: &'a Labels) -> Self {
        let mut label_keys = SmallVec::new();
        if c.label_selector.is_some() {
            for k in c.match_label_keys.iter().flatten() {
                if let Some(v) = pod_labels.get(k) {
                    label_keys.push((k.as_str(), v.as_str()));
                }
            }
        }
        Constraint {
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
    fn counts_nothing(&self) -> bool {
        self.selector.is_none_or(|s| label_selector_is_empty(s) && self.label_keys.is_empty())
    }

    /// Matching pods on the node: same namespace, not terminating, selected.
    fn count_on(&self, node: &NodeState, namespace: &str) -> i64 {
        if self.counts_nothing() {
            return 0;
        }
        node.pods
            .iter()
            .filter(|p| !p.deleting && &*p.key.namespace == namespace && self.selects(p.labels()))
            .count() as i64
    }

    /// Whether the node's domain is eligible under the inclusion policies.
    fn includes(&self, parsed: &ParsedPod<'_>, node: &NodeState) -> bool {
        (!self.honor_node_affinity || parsed.matches_node_selector_and_affinity(&node.info))
            && (!self.honor_node_taints || first_untolerated_taint(&node.info, parsed.tolerations).is_none())
    }
}

/// The pod's constraints with `whenUnsatisfiable == when`.
fn constraints<'a>(parsed: &ParsedPod<'a>, when: &str) -> Result<Vec<Constraint<'a>>, Rejection> {
    let mut out = Vec::new();
    for c in parsed.spread_constraints.iter().filter(|c| c.when_unsatisfiable == when) {
        if let Some(sel) = &c.label_selector {
            validate_label_selector(sel)
                .map_err(|e| Rejection::unresolvable(NAME, format!("get constraints from pod: {e}")))?;
        }
        out.push(Constraint::new(c, parsed.labels));
    }
    Ok(out)
}

fn has_all_keys(node: &NodeState, constraints: &[Constraint<'_>]) -> bool {
    let labels = labels_or_empty(node.info.labels());
    constraints.iter().all(|c| labels.contains_key(c.topology_key))
}

fn label<'a>(node: &'a NodeState, key: &str) -> Option<&'a str> {
    node.info.labels().and_then(|l| l.get(key)).map(String::as_str)
}

/// PreFilter state.
#[derive(Debug, Default)]
pub struct FilterState<'a> {
    pub constraints: Vec<Constraint<'a>>,
    /// Per constraint: matching pods per eligible domain.
    pub counts: Vec<FxHashMap<&'a str, i64>>,
    /// Per constraint: the smallest count over eligible domains (`i64::MAX` when none).
    pub min_match: Vec<i64>,
}

impl FilterState<'_> {
    fn global_min(&self, i: usize) -> i64 {
        if (self.counts[i].len() as i64) < self.constraints[i].min_domains {
            0
        } else {
            self.min_match[i]
        }
    }
}

/// PreScore state.
#[derive(Debug, Default)]
pub struct ScoreState<'a> {
    pub constraints: Vec<Constraint<'a>>,
    /// Feasible nodes missing a topology key: they score 0.
    pub ignored: FxHashSet<NodeId>,
    /// Per constraint (not hostname): matching pods per domain of a feasible node.
    pub counts: Vec<FxHashMap<&'a str, i64>>,
    /// Per constraint: `ln(domains + 2)`.
    pub weights: Vec<f64>,
}

/// The `PodTopologySpread` filter and score.
#[derive(Debug, Clone, Copy, Default)]
pub struct PodTopologySpread;

impl FilterPlugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        NAME
    }

    fn pre_filter<'a>(&self, state: &mut CycleState<'a>, snap: &'a Snapshot) -> Result<PreResult, Rejection> {
        let cs = constraints(&state.parsed, "DoNotSchedule")?;
        if cs.is_empty() {
            return Ok(PreResult::Skip);
        }
        let mut counts: Vec<FxHashMap<&'a str, i64>> = vec![FxHashMap::default(); cs.len()];
        let namespace = state.parsed.namespace;
        for node in snap.nodes() {
            if !has_all_keys(node, &cs) {
                continue;
            }
            for (i, c) in cs.iter().enumerate() {
                if !c.includes(&state.parsed, node) {
                    continue;
                }
                let Some(value) = label(node, c.topology_key) else { continue };
                *counts[i].entry(value).or_insert(0) += c.count_on(node, namespace);
            }
        }
        let min_match = counts.iter().map(|m| m.values().copied().min().unwrap_or(i64::MAX)).collect();
        state.plugins.pod_topology_spread = Some(FilterState { constraints: cs, counts, min_match });
        Ok(PreResult::Run)
    }

    fn filter(&self, state: &CycleState<'_>, _snap: &Snapshot, node: &NodeState) -> FilterResult {
        let Some(s) = state.plugins.pod_topology_spread.as_ref() else { return Ok(()) };
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(value) = label(node, c.topology_key) else {
                return Err(Rejection::unresolvable(NAME, ERR_NODE_LABEL_NOT_MATCH));
            };
            let self_match = i64::from(c.selects(state.parsed.labels));
            let matching = s.counts[i].get(value).copied().unwrap_or(0);
            let skew = matching.saturating_add(self_match).saturating_sub(s.global_min(i));
            if skew > c.max_skew {
                return Err(Rejection::unschedulable(NAME, ERR_CONSTRAINTS_NOT_MATCH));
            }
        }
        Ok(())
    }
}

impl ScorePlugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        NAME
    }

    fn default_weight(&self) -> i64 {
        2
    }

    fn pre_score<'a>(
        &self,
        state: &mut CycleState<'a>,
        snap: &'a Snapshot,
        feasible: &[NodeId],
    ) -> PreResult {
        if snap.num_nodes() == 0 {
            return PreResult::Skip;
        }
        let Ok(cs) = constraints(&state.parsed, "ScheduleAnyway") else { return PreResult::Skip };
        if cs.is_empty() {
            return PreResult::Skip;
        }
        let mut s = ScoreState { counts: vec![FxHashMap::default(); cs.len()], ..ScoreState::default() };
        let mut sizes = vec![0usize; cs.len()];
        for &id in feasible {
            let node = snap.node(id);
            if !has_all_keys(node, &cs) {
                s.ignored.insert(id);
                continue;
            }
            for (i, c) in cs.iter().enumerate() {
                if c.topology_key == HOSTNAME {
                    continue;
                }
                if let Some(value) = label(node, c.topology_key) {
                    if !s.counts[i].contains_key(value) {
                        s.counts[i].insert(value, 0);
                        sizes[i] += 1;
                    }
                }
            }
        }
        s.weights = cs
            .iter()
            .zip(&sizes)
            .map(|(c, &size)| {
                let size = if c.topology_key == HOSTNAME { feasible.len() - s.ignored.len() } else { size };
                ((size + 2) as f64).ln()
            })
            .collect();
        let namespace = state.parsed.namespace;
        for node in snap.nodes() {
            if !has_all_keys(node, &cs) {
                continue;
            }
            for (i, c) in cs.iter().enumerate() {
                if !c.includes(&state.parsed, node) {
                    continue;
                }
                let Some(value) = label(node, c.topology_key) else { continue };
                if let Some(count) = s.counts[i].get_mut(value) {
                    *count += c.count_on(node, namespace);
                }
            }
        }
        s.constraints = cs;
        state.plugins.pod_topology_spread_score = Some(s);
        PreResult::Run
    }

    fn score(&self, state: &CycleState<'_>, _snap: &Snapshot, id: NodeId, node: &NodeState) -> i64 {
        let Some(s) = state.plugins.pod_topology_spread_score.as_ref() else { return 0 };
        if s.ignored.contains(&id) {
            return 0;
        }
        let mut score = 0.0;
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(value) = label(node, c.topology_key) else { continue };
            let count = if c.topology_key == HOSTNAME {
                c.count_on(node, state.parsed.namespace)
            } else {
                s.counts[i].get(value).copied().unwrap_or(0)
            };
            score += count as f64 * s.weights[i] + (c.max_skew - 1) as f64;
        }
        score.round() as i64
    }

    /// Fewer matching pods score higher: `100 * (max + min - score) / max`; ignored nodes 0.
    fn normalize(&self, state: &CycleState<'_>, feasible: &[NodeId], scores: &mut [i64]) {
        let Some(s) = state.plugins.pod_topology_spread_score.as_ref() else { return };
        let counted =
            || feasible.iter().zip(scores.iter()).filter(|(id, _)| !s.ignored.contains(id)).map(|(_, v)| *v);
        let min = counted().min().unwrap_or(i64::MAX);
        let max = counted().max().unwrap_or(0).max(0);
        for (id, v) in feasible.iter().zip(scores.iter_mut()) {
            *v = if s.ignored.contains(id) {
                0
            } else if max == 0 {
                MAX_NODE_SCORE
            } else {
                MAX_NODE_SCORE * (max + min - *v) / max
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::{Code, Framework};
    use crate::plugins::testing::{match_labels, node, node_req, pod, snapshot_with, spread};
    use crate::schedule_one::{feasible_nodes, filter_node, find_node};
    use crate::SchedulerConfig;

    const ZONE: &str = "topology.kubernetes.io/zone";

    fn fw() -> Framework {
        Framework::new(&SchedulerConfig::default())
    }

    fn zoned(name: &str, zone: &str) -> crate::model::NodeStatic {
        node(name).cpu("8").label(HOSTNAME, name).label(ZONE, zone).build()
    }

    fn web(name: &str) -> crate::plugins::testing::PodBuilder {
        pod(name).label("app", "web")
    }

    #[test]
    fn skew_above_max_skew_is_rejected() {
        let snap = snapshot_with(
            vec![zoned("a", "z1"), zoned("b", "z2")],
            vec![web("w0").on("a").build(), web("w1").on("a").build(), web("w2").on("b").build()],
        );
        let p = web("new").spread(spread(1, ZONE, "DoNotSchedule", match_labels(&[("app", "web")]))).build();
        let st = filter_node(&fw(), &snap, &p, snap.node_id("a").unwrap());
        assert_eq!((st.code, st.reasons), (Code::Unschedulable, vec![ERR_CONSTRAINTS_NOT_MATCH.to_string()]));
        assert!(filter_node(&fw(), &snap, &p, snap.node_id("b").unwrap()).is_success());
        let loose =
            web("new").spread(spread(2, ZONE, "DoNotSchedule", match_labels(&[("app", "web")]))).build();
        assert!(filter_node(&fw(), &snap, &loose, snap.node_id("a").unwrap()).is_success());
    }

    #[test]
    fn nodes_without_the_topology_key_are_unresolvable() {
        let snap = snapshot_with(vec![zoned("a", "z1"), node("bare").cpu("8").build()], vec![]);
        let p = web("new").spread(spread(1, ZONE, "DoNotSchedule", match_labels(&[("app", "web")]))).build();
        let st = filter_node(&fw(), &snap, &p, snap.node_id("bare").unwrap());
        assert_eq!(
            (st.code, st.reasons),
            (Code::UnschedulableAndUnresolvable, vec![ERR_NODE_LABEL_NOT_MATCH.to_string()])
        );
    }

    #[test]
    fn pods_not_matching_the_selector_or_elsewhere_do_not_count() {
        let snap = snapshot_with(
            vec![zoned("a", "z1"), zoned("b", "z2")],
            vec![
                pod("other").label("app", "db").on("a").build(),
                web("elsewhere").namespace("other").on("a").build(),
                web("leaving").terminating().on("a").build(),
            ],
        );
        let p = web("new").spread(spread(1, ZONE, "DoNotSchedule", match_labels(&[("app", "web")]))).build();
        assert_eq!(feasible_nodes(&fw(), &snap, &p, snap.node_ids()).unwrap().len(), 2);
    }

    #[test]
    fn min_domains_treats_the_global_minimum_as_zero() {
        let snap = snapshot_with(
            vec![zoned("a", "z1"), zoned("b", "z2")],
            vec![web("w0").on("a").build(), web("w1").on("b").build()],
        );
        let mut c = spread(1, ZONE, "DoNotSchedule", match_labels(&[("app", "web")]));
        let p = web("new").spread(c.clone()).build();
        assert_eq!(feasible_nodes(&fw(), &snap, &p, snap.node_ids()).unwrap().len(), 2);
        c.min_domains = Some(3);
        let p = web("new").spread(c).build();
        let err = feasible_nodes(&fw(), &snap, &p, snap.node_ids()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "0/2 nodes are available: 2 node(s) didn't match pod topology spread constraints."
        );
        assert_eq!(err.preemptable_nodes.len(), 2);
    }

    #[test]
    fn node_affinity_policy_honor_excludes_domains_the_pod_cannot_use() {
        // z1 is empty but the pod may not go there; z2 and z3 hold one matching pod each.
        let snap = snapshot_with(
            vec![zoned("a", "z1"), zoned("b", "z2"), zoned("c", "z3")],
            vec![web("w0").on("b").build(), web("w1").on("c").build()],
        );
        let c = spread(1, ZONE, "DoNotSchedule", match_labels(&[("app", "web")]));
        let not_z1 = || vec![node_req(ZONE, "NotIn", &["z1"])];
        let p = web("new").spread(c.clone()).required_node_term(not_z1(), vec![]).build();
        let ids = snap.node_ids().to_vec();
        assert_eq!(
            feasible_nodes(&fw(), &snap, &p, &ids).unwrap(),
            vec![ids[1], ids[2]],
            "Honor: minimum over z2, z3"
        );
        let mut ignore = c;
        ignore.node_affinity_policy = Some("Ignore".into());
        let p = web("new").spread(ignore).required_node_term(not_z1(), vec![]).build();
        assert!(feasible_nodes(&fw(), &snap, &p, &ids).is_err(), "Ignore: empty z1 sets the minimum to 0");
    }

    #[test]
    fn node_taints_policy_honor_excludes_tainted_domains() {
        let snap = snapshot_with(
            vec![
                node("a").cpu("8").label(ZONE, "z1").taint("k", "v", "NoSchedule").build(),
                zoned("b", "z2"),
            ],
            vec![web("w0").on("b").build()],
        );
        let mut c = spread(1, ZONE, "DoNotSchedule", match_labels(&[("app", "web")]));
        let p = web("new").spread(c.clone()).build();
        // Ignore (default): z1 counts with 0 pods, so z2 (1 pod) would reach skew 2.
        assert!(find_node(&fw(), &snap, &p, snap.node_ids()).is_err());
        c.node_taints_policy = Some("Honor".into());
        let p = web("new").spread(c).build();
        assert_eq!(find_node(&fw(), &snap, &p, snap.node_ids()), Ok(snap.node_id("b").unwrap()));
    }

    #[test]
    fn assumed_pods_of_the_cycle_count() {
        let mut snap = snapshot_with(vec![zoned("a", "z1"), zoned("b", "z2")], vec![]);
        let c = spread(1, ZONE, "DoNotSchedule", match_labels(&[("app", "web")]));
        snap.assume(std::sync::Arc::new(web("w0").spread(c.clone()).build()), snap.node_id("a").unwrap());
        let p = web("w1").spread(c).build();
        assert_eq!(
            feasible_nodes(&fw(), &snap, &p, snap.node_ids()).unwrap(),
            vec![snap.node_id("b").unwrap()]
        );
    }

    #[test]
    fn match_label_keys_restrict_counting_to_the_same_revision() {
        let snap = snapshot_with(
            vec![zoned("a", "z1"), zoned("b", "z2")],
            vec![
                web("old0").label("rev", "1").on("a").build(),
                web("old1").label("rev", "1").on("a").build(),
            ],
        );
        let mut c = spread(1, ZONE, "DoNotSchedule", match_labels(&[("app", "web")]));
        c.match_label_keys = Some(vec!["rev".into()]);
        let p = web("new").label("rev", "2").spread(c).build();
        assert_eq!(feasible_nodes(&fw(), &snap, &p, snap.node_ids()).unwrap().len(), 2);
    }

    #[test]
    fn schedule_anyway_prefers_the_emptier_domain() {
        let snap = snapshot_with(
            vec![zoned("a", "z1"), zoned("b", "z2")],
            vec![web("w0").on("a").build(), web("w1").on("a").build()],
        );
        let p = web("new").spread(spread(1, ZONE, "ScheduleAnyway", match_labels(&[("app", "web")]))).build();
        assert_eq!(find_node(&fw(), &snap, &p, snap.node_ids()), Ok(snap.node_id("b").unwrap()));
        let host =
            web("new").spread(spread(1, HOSTNAME, "ScheduleAnyway", match_labels(&[("app", "web")]))).build();
        assert_eq!(find_node(&fw(), &snap, &host, snap.node_ids()), Ok(snap.node_id("b").unwrap()));
    }
}
