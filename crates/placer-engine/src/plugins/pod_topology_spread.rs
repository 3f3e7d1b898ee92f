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
//! Default constraints (`PodTopologySpreadArgs`: the system ones, hostname maxSkew 3 and
//! zone maxSkew 5 `ScheduleAnyway`, or the listed `defaultConstraints`) apply upstream to a
//! pod without constraints of its own, with the selector `helper.DefaultSelector` deduces
//! from the Services, ReplicationControllers, ReplicaSets and StatefulSets selecting or
//! owning it; an empty selector gives no constraint. Placer loads none of those kinds, so
//! the selector is always empty and, exactly as upstream with empty listers, no pod gets a
//! default constraint (`SchedulerConfig::spread_defaulting` is read, validated and shown;
//! scenario `plugins/016`).

use rustc_hash::{FxHashMap, FxHashSet};

use crate::framework::helper::{labels_or_empty, validate_label_selector};
use crate::framework::NodeId;
use crate::framework::{
    CycleState, Dependence, FilterPlugin, FilterResult, PodInfo, PreResult, Rejection, ScorePlugin,
    MAX_NODE_SCORE,
};
use crate::framework::{NodeState, Snapshot};
use crate::framework::{ParsedPod, SpreadConstraint};

/// Plugin name.
pub const NAME: &str = "PodTopologySpread";
/// Filter reason: the skew would exceed `maxSkew`.
pub const ERR_CONSTRAINTS_NOT_MATCH: &str = "node(s) didn't match pod topology spread constraints";
/// Filter reason: the node lacks a constraint's topology key.
pub const ERR_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

const HOSTNAME: &str = "kubernetes.io/hostname";

/// Checks the selectors of the pod's constraints with `whenUnsatisfiable == when`.
fn validate(parsed: &ParsedPod<'_>, when: &str) -> Result<(), Rejection> {
    for c in parsed.spread_constraints.iter().filter(|c| c.when_unsatisfiable == when) {
        if let Some(sel) = &c.label_selector {
            validate_label_selector(sel)
                .map_err(|e| Rejection::unresolvable(NAME, format!("get constraints from pod: {e}")))?;
        }
    }
    Ok(())
}

fn has_all_keys(node: &NodeState, constraints: &[SpreadConstraint<'_>]) -> bool {
    let labels = labels_or_empty(node.info.labels());
    constraints.iter().all(|c| labels.contains_key(c.topology_key))
}

fn label<'a>(node: &'a NodeState, key: &str) -> Option<&'a str> {
    node.info.labels().and_then(|l| l.get(key)).map(String::as_str)
}

/// Matching pods per domain value, owning its strings (it lives in the pod's
/// [`crate::framework::CycleData`]).
pub type DomainCounts = FxHashMap<Box<str>, i64>;

/// PreFilter state (the constraints are `parsed.spread_filter`, in the same order).
#[derive(Debug, Default)]
pub struct FilterState {
    /// Per constraint: matching pods per eligible domain.
    pub counts: Vec<DomainCounts>,
    /// Per constraint: the smallest count over eligible domains (`i64::MAX` when none).
    pub min_match: Vec<i64>,
}

impl FilterState {
    fn global_min(&self, i: usize, c: &SpreadConstraint<'_>) -> i64 {
        if (self.counts[i].len() as i64) < c.min_domains {
            0
        } else {
            self.min_match[i]
        }
    }
}

/// PreScore state (the constraints are `parsed.spread_score`, in the same order).
#[derive(Debug, Default)]
pub struct ScoreState {
    /// Feasible nodes missing a topology key: they score 0.
    pub ignored: FxHashSet<NodeId>,
    /// Per constraint (not hostname): matching pods per domain of a feasible node.
    pub counts: Vec<DomainCounts>,
    /// Per constraint: `ln(domains + 2)`.
    pub weights: Vec<f64>,
}

fn add(counts: &mut DomainCounts, value: &str, n: i64) {
    match counts.get_mut(value) {
        Some(c) => *c += n,
        None => {
            counts.insert(value.into(), n);
        }
    }
}

/// The `PodTopologySpread` filter and score.
#[derive(Debug, Clone, Copy, Default)]
pub struct PodTopologySpread;

impl FilterPlugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        NAME
    }

    fn dependence(&self, pod: &PodInfo) -> Dependence {
        if pod.view.topology_spread_constraints.iter().any(|c| c.when_unsatisfiable == "DoNotSchedule") {
            Dependence::OtherPods
        } else {
            Dependence::NodeLocal
        }
    }

    fn pre_filter<'a>(&self, state: &mut CycleState<'a>, snap: &'a Snapshot) -> Result<PreResult, Rejection> {
        validate(&state.parsed, "DoNotSchedule")?;
        let cs = &state.parsed.spread_filter;
        if cs.is_empty() {
            return Ok(PreResult::Skip);
        }
        let mut counts: Vec<DomainCounts> = vec![FxHashMap::default(); cs.len()];
        let namespace = state.parsed.namespace;
        for node in snap.nodes() {
            if !has_all_keys(node, cs) {
                continue;
            }
            for (i, c) in cs.iter().enumerate() {
                if !c.includes(&state.parsed, node) {
                    continue;
                }
                let Some(value) = label(node, c.topology_key) else { continue };
                add(&mut counts[i], value, c.count_on(node, namespace));
            }
        }
        let min_match = counts.iter().map(|m| m.values().copied().min().unwrap_or(i64::MAX)).collect();
        state.data.write(NAME, FilterState { counts, min_match });
        Ok(PreResult::Run)
    }

    fn filter(&self, state: &CycleState<'_>, _snap: &Snapshot, node: &NodeState) -> FilterResult {
        let Some(s) = state.data.read::<FilterState>(NAME) else { return Ok(()) };
        for (i, c) in state.parsed.spread_filter.iter().enumerate() {
            let Some(value) = label(node, c.topology_key) else {
                return Err(Rejection::unresolvable(NAME, ERR_NODE_LABEL_NOT_MATCH));
            };
            let self_match = i64::from(c.selects(state.parsed.labels));
            let matching = s.counts[i].get(value).copied().unwrap_or(0);
            let skew = matching.saturating_add(self_match).saturating_sub(s.global_min(i, c));
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

    fn node_local(&self) -> bool {
        false
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
        if validate(&state.parsed, "ScheduleAnyway").is_err() {
            return PreResult::Skip;
        }
        let cs = &state.parsed.spread_score;
        if cs.is_empty() {
            return PreResult::Skip;
        }
        let mut s = ScoreState { counts: vec![FxHashMap::default(); cs.len()], ..ScoreState::default() };
        let mut sizes = vec![0usize; cs.len()];
        for &id in feasible {
            let node = snap.node(id);
            if !has_all_keys(node, cs) {
                s.ignored.insert(id);
                continue;
            }
            for (i, c) in cs.iter().enumerate() {
                if c.topology_key == HOSTNAME {
                    continue;
                }
                if let Some(value) = label(node, c.topology_key) {
                    if !s.counts[i].contains_key(value) {
                        s.counts[i].insert(value.into(), 0);
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
            if !has_all_keys(node, cs) {
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
        state.data.write(NAME, s);
        PreResult::Run
    }

    fn score(&self, state: &CycleState<'_>, _snap: &Snapshot, id: NodeId, node: &NodeState) -> i64 {
        let Some(s) = state.data.read::<ScoreState>(NAME) else { return 0 };
        if s.ignored.contains(&id) {
            return 0;
        }
        let mut score = 0.0;
        for (i, c) in state.parsed.spread_score.iter().enumerate() {
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
        let Some(s) = state.data.read::<ScoreState>(NAME) else { return };
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
        crate::plugins::pod_framework(&SchedulerConfig::default())
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
