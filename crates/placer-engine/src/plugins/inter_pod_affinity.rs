//! `InterPodAffinity`: required pod affinity and anti-affinity (filter), preferred terms
//! (score), as kube-scheduler's `interpodaffinity` plugin.
//!
//! PreFilter counts, per topology pair `(key, value)`:
//! * existing pods whose required anti-affinity terms select the incoming pod;
//! * existing pods matching all the incoming pod's required affinity terms;
//! * existing pods matching each of its required anti-affinity terms.
//!
//! The Filter then checks the node's pairs. A pod whose affinity terms select no existing
//! pod may still land on a node that has every topology key, if it matches its own terms
//! (the first pod of a self-affine group).
//!
//! Namespaces: a term applies to `namespaces`, plus the namespaces its `namespaceSelector`
//! selects; without either, to the pod's own namespace. The engine knows no Namespace
//! objects: a namespace selector is evaluated against `kubernetes.io/metadata.name` only
//! (`{}` selects every namespace). `matchLabelKeys` / `mismatchLabelKeys` are merged into
//! the label selector as `key in (value)` / `key notin (value)` with the owning pod's
//! label values, as the API server does.

use rustc_hash::FxHashMap;

use crate::framework::helper::labels_or_empty;
use crate::framework::{AffinityTerm, NodeId, PodInfo, PodTerms};
use crate::framework::{
    CycleState, Dependence, FilterPlugin, FilterResult, PreResult, Rejection, ScorePlugin, MAX_NODE_SCORE,
};
use crate::framework::{InterPodAffinityConfig, NodeState, SchedulerConfig, Snapshot};

/// Plugin name.
pub const NAME: &str = "InterPodAffinity";
/// Filter reason: an existing pod's anti-affinity selects the incoming pod.
pub const ERR_EXISTING_ANTI_AFFINITY: &str = "node(s) didn't satisfy existing pods anti-affinity rules";
/// Filter reason: the incoming pod's affinity is not satisfied.
pub const ERR_AFFINITY: &str = "node(s) didn't match pod affinity rules";
/// Filter reason: the incoming pod's anti-affinity is violated.
pub const ERR_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";

/// Counts per topology pair `(key, value)`, owning its strings so that it can live in the
/// pod's [`crate::framework::CycleData`]; looked up by borrowed `&str`s.
#[derive(Debug, Default)]
pub struct TopologyCounts {
    by_key: FxHashMap<Box<str>, FxHashMap<Box<str>, i64>>,
}

impl TopologyCounts {
    fn add(&mut self, key: &str, value: &str, n: i64) {
        let values = match self.by_key.get_mut(key) {
            Some(v) => v,
            None => self.by_key.entry(key.into()).or_default(),
        };
        match values.get_mut(value) {
            Some(c) => *c += n,
            None => {
                values.insert(value.into(), n);
            }
        }
    }

    /// The count of `(key, value)` (0 when absent).
    pub fn get(&self, key: &str, value: &str) -> i64 {
        self.by_key.get(key).and_then(|v| v.get(value)).copied().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

/// Topology pair of `node` for `key`.
fn pair<'a>(node: &'a NodeState, key: &str) -> Option<(&'a str, &'a str)> {
    node.info.labels().and_then(|l| l.get_key_value(key)).map(|(k, v)| (k.as_str(), v.as_str()))
}

fn bump(counts: &mut TopologyCounts, node: &NodeState, key: &str, value: i64) {
    if let Some((k, v)) = pair(node, key) {
        counts.add(k, v, value);
    }
}

/// PreFilter state.
#[derive(Debug, Default)]
pub struct FilterState {
    /// Existing pods whose required anti-affinity selects the incoming pod.
    pub existing_anti_affinity: TopologyCounts,
    /// Existing pods matching all of the incoming pod's required affinity terms.
    pub affinity: TopologyCounts,
    /// Existing pods matching each required anti-affinity term of the incoming pod.
    pub anti_affinity: TopologyCounts,
}

/// PreScore state: score contributions per topology key and value.
#[derive(Debug, Default)]
pub struct ScoreState {
    pub topology_score: TopologyCounts,
}

impl ScoreState {
    fn add(&mut self, node: &NodeState, key: &str, value: i64) {
        bump(&mut self.topology_score, node, key, value);
    }
}

/// The `InterPodAffinity` filter and score, with the profile's `InterPodAffinityArgs`
/// (the score reads them).
#[derive(Debug, Clone, Copy, Default)]
pub struct InterPodAffinity {
    args: InterPodAffinityConfig,
}

impl InterPodAffinity {
    pub fn new(config: &SchedulerConfig) -> Self {
        InterPodAffinity { args: config.inter_pod_affinity }
    }
}

impl FilterPlugin for InterPodAffinity {
    fn name(&self) -> &'static str {
        NAME
    }

    fn dependence(&self, pod: &PodInfo) -> Dependence {
        // Without terms of its own, the verdict depends on existing pods' anti-affinity
        // only, which placing copies of this pod does not change.
        let terms = crate::framework::PodTerms::of(pod);
        if terms.required_affinity.is_empty() && terms.required_anti_affinity.is_empty() {
            Dependence::NodeLocal
        } else {
            Dependence::OtherPods
        }
    }

    fn pre_filter<'a>(&self, state: &mut CycleState<'a>, snap: &'a Snapshot) -> Result<PreResult, Rejection> {
        let parsed = &state.parsed;
        for t in parsed.required_affinity.iter().chain(&parsed.required_anti_affinity) {
            t.validate().map_err(|e| Rejection::unresolvable(NAME, format!("parsing pod: {e}")))?;
        }
        let has_terms = !parsed.required_affinity.is_empty() || !parsed.required_anti_affinity.is_empty();
        if !has_terms && snap.num_pods_with_required_anti_affinity() == 0 {
            return Ok(PreResult::Skip);
        }
        let mut s = FilterState::default();
        let (ns, labels) = (parsed.namespace, parsed.labels);
        if snap.num_pods_with_required_anti_affinity() > 0 {
            for node in snap.nodes().filter(|n| n.pods_with_required_anti_affinity > 0) {
                for existing in node.pods.iter().filter(|p| p.has_required_pod_anti_affinity()) {
                    let owner_labels = existing.labels();
                    for t in PodTerms::of(existing).required_anti_affinity {
                        let term = AffinityTerm::new(t, &existing.key.namespace, owner_labels);
                        if term.matches(ns, labels, snap.namespaces()) {
                            bump(&mut s.existing_anti_affinity, node, term.topology_key(), 1);
                        }
                    }
                }
            }
        }
        if has_terms {
            for node in snap.nodes() {
                for existing in &node.pods {
                    if !parsed.required_affinity.is_empty()
                        && parsed.required_affinity.iter().all(|t| t.matches_pod(existing, snap.namespaces()))
                    {
                        for t in &parsed.required_affinity {
                            bump(&mut s.affinity, node, t.topology_key(), 1);
                        }
                    }
                    for t in &parsed.required_anti_affinity {
                        if t.matches_pod(existing, snap.namespaces()) {
                            bump(&mut s.anti_affinity, node, t.topology_key(), 1);
                        }
                    }
                }
            }
        }
        if !has_terms && s.existing_anti_affinity.is_empty() {
            return Ok(PreResult::Skip);
        }
        state.data.write(NAME, s);
        Ok(PreResult::Run)
    }

    fn filter(&self, state: &CycleState<'_>, snap: &Snapshot, node: &NodeState) -> FilterResult {
        let Some(s) = state.data.read::<FilterState>(NAME) else { return Ok(()) };
        let parsed = &state.parsed;
        let node_labels = labels_or_empty(node.info.labels());

        // Required affinity: every topology key present, matching pods in each domain.
        let mut pods_exist = true;
        for t in &parsed.required_affinity {
            let Some(v) = node_labels.get(t.topology_key()) else {
                return Err(Rejection::unresolvable(NAME, ERR_AFFINITY));
            };
            if s.affinity.get(t.topology_key(), v) <= 0 {
                pods_exist = false;
            }
        }
        if !pods_exist {
            let self_affine = s.affinity.is_empty()
                && parsed
                    .required_affinity
                    .iter()
                    .all(|t| t.matches(parsed.namespace, parsed.labels, snap.namespaces()));
            if !self_affine {
                return Err(Rejection::unresolvable(NAME, ERR_AFFINITY));
            }
        }

        if !s.anti_affinity.is_empty() {
            for t in &parsed.required_anti_affinity {
                if let Some(v) = node_labels.get(t.topology_key()) {
                    if s.anti_affinity.get(t.topology_key(), v) > 0 {
                        return Err(Rejection::unschedulable(NAME, ERR_ANTI_AFFINITY));
                    }
                }
            }
        }

        if !s.existing_anti_affinity.is_empty() {
            for (k, v) in node_labels {
                if s.existing_anti_affinity.get(k, v) > 0 {
                    return Err(Rejection::unschedulable(NAME, ERR_EXISTING_ANTI_AFFINITY));
                }
            }
        }
        Ok(())
    }
}

impl ScorePlugin for InterPodAffinity {
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
        _feasible: &[NodeId],
    ) -> PreResult {
        let parsed = &state.parsed;
        let has_constraints =
            !parsed.preferred_affinity.is_empty() || !parsed.preferred_anti_affinity.is_empty();
        if !has_constraints
            && (snap.num_pods_with_affinity() == 0 || self.args.ignore_preferred_terms_of_existing_pods)
        {
            return PreResult::Skip;
        }
        let (ns, labels) = (parsed.namespace, parsed.labels);
        let mut s = ScoreState::default();
        for node in snap.nodes() {
            if !has_constraints && node.pods_with_affinity == 0 {
                continue;
            }
            if node.info.labels().is_none_or(|l| l.is_empty()) {
                continue;
            }
            for existing in &node.pods {
                let existing_has_affinity = existing.has_pod_affinity();
                if !has_constraints && !existing_has_affinity {
                    continue;
                }
                // The incoming pod's preferred terms selecting the existing pod.
                for (w, t) in &parsed.preferred_affinity {
                    if t.matches_pod(existing, snap.namespaces()) {
                        s.add(node, t.topology_key(), *w);
                    }
                }
                for (w, t) in &parsed.preferred_anti_affinity {
                    if t.matches_pod(existing, snap.namespaces()) {
                        s.add(node, t.topology_key(), -*w);
                    }
                }
                if !existing_has_affinity {
                    continue;
                }
                // The existing pod's terms selecting the incoming pod.
                let terms = PodTerms::of(existing);
                let owner_ns = &*existing.key.namespace;
                let owner_labels = existing.labels();
                let hard = self.args.hard_pod_affinity_weight;
                for t in terms.required_affinity.iter().filter(|_| hard > 0) {
                    let term = AffinityTerm::new(t, owner_ns, owner_labels);
                    if term.matches(ns, labels, snap.namespaces()) {
                        s.add(node, term.topology_key(), hard);
                    }
                }
                for w in terms.preferred_affinity {
                    let term = AffinityTerm::new(&w.pod_affinity_term, owner_ns, owner_labels);
                    if term.matches(ns, labels, snap.namespaces()) {
                        s.add(node, term.topology_key(), i64::from(w.weight));
                    }
                }
                for w in terms.preferred_anti_affinity {
                    let term = AffinityTerm::new(&w.pod_affinity_term, owner_ns, owner_labels);
                    if term.matches(ns, labels, snap.namespaces()) {
                        s.add(node, term.topology_key(), -i64::from(w.weight));
                    }
                }
            }
        }
        if s.topology_score.is_empty() {
            return PreResult::Skip;
        }
        state.data.write(NAME, s);
        PreResult::Run
    }

    fn score(&self, state: &CycleState<'_>, _snap: &Snapshot, _id: NodeId, node: &NodeState) -> i64 {
        let Some(s) = state.data.read::<ScoreState>(NAME) else { return 0 };
        let labels = labels_or_empty(node.info.labels());
        s.topology_score
            .by_key
            .iter()
            .filter_map(|(k, values)| labels.get(&**k).and_then(|v| values.get(v.as_str())))
            .sum()
    }

    /// Min-max scaling to `0..=100`.
    fn normalize(&self, state: &CycleState<'_>, _feasible: &[NodeId], scores: &mut [i64]) {
        if state.data.read::<ScoreState>(NAME).is_none_or(|s| s.topology_score.is_empty()) {
            return;
        }
        let (Some(&min), Some(&max)) = (scores.iter().min(), scores.iter().max()) else { return };
        let diff = max - min;
        for s in scores.iter_mut() {
            *s =
                if diff > 0 { (MAX_NODE_SCORE as f64 * ((*s - min) as f64 / diff as f64)) as i64 } else { 0 };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::{Code, Framework};
    use crate::plugins::testing::{affinity_term, match_labels, node, pod, snapshot_with};
    use crate::schedule_one::{feasible_nodes, filter_node, find_node};
    use crate::SchedulerConfig;
    use placer_api::k8s::apimachinery::pkg::apis::meta::v1::LabelSelector;

    const HOST: &str = "kubernetes.io/hostname";
    const ZONE: &str = "topology.kubernetes.io/zone";

    fn fw() -> Framework {
        crate::plugins::pod_framework(&SchedulerConfig::default())
    }

    fn zoned(name: &str, zone: &str) -> crate::model::NodeStatic {
        node(name).cpu("8").label(HOST, name).label(ZONE, zone).build()
    }

    #[test]
    fn affinity_requires_a_matching_pod_in_the_domain() {
        let snap = snapshot_with(
            vec![zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2")],
            vec![pod("db").label("app", "db").on("a").build()],
        );
        let p = pod("web").pod_affinity(affinity_term(ZONE, match_labels(&[("app", "db")]))).build();
        let ids = snap.node_ids().to_vec();
        assert_eq!(feasible_nodes(&fw(), &snap, &p, &ids).unwrap(), vec![ids[0], ids[1]]);
        let st = filter_node(&fw(), &snap, &p, ids[2]);
        assert_eq!(st.code, Code::UnschedulableAndUnresolvable);
        assert_eq!(st.reasons, vec![ERR_AFFINITY.to_string()]);
    }

    #[test]
    fn affinity_needs_the_topology_key_on_the_node() {
        let snap = snapshot_with(
            vec![zoned("a", "z1"), node("bare").cpu("8").build()],
            vec![pod("db").label("app", "db").on("a").build()],
        );
        let p = pod("web").pod_affinity(affinity_term(ZONE, match_labels(&[("app", "db")]))).build();
        assert_eq!(
            filter_node(&fw(), &snap, &p, snap.node_id("bare").unwrap()).code,
            Code::UnschedulableAndUnresolvable
        );
    }

    #[test]
    fn first_pod_of_a_self_affine_group_lands_anywhere_with_the_key() {
        let snap =
            snapshot_with(vec![zoned("a", "z1"), zoned("b", "z2"), node("bare").cpu("8").build()], vec![]);
        let p = pod("w0")
            .label("app", "web")
            .pod_affinity(affinity_term(ZONE, match_labels(&[("app", "web")])))
            .build();
        let ids = snap.node_ids().to_vec();
        assert_eq!(
            feasible_nodes(&fw(), &snap, &p, &ids).unwrap(),
            vec![snap.node_id("a").unwrap(), snap.node_id("b").unwrap()],
            "every node with the topology key"
        );
        let other = pod("x")
            .label("app", "other")
            .pod_affinity(affinity_term(ZONE, match_labels(&[("app", "web")])))
            .build();
        assert!(
            feasible_nodes(&fw(), &snap, &other, &ids).is_err(),
            "a pod not matching its own terms waits"
        );
    }

    #[test]
    fn self_affine_group_follows_its_first_assumed_pod() {
        let mut snap = snapshot_with(vec![zoned("a", "z1"), zoned("b", "z2")], vec![]);
        let term = affinity_term(ZONE, match_labels(&[("app", "web")]));
        let first = std::sync::Arc::new(pod("w0").label("app", "web").pod_affinity(term.clone()).build());
        snap.assume(first, snap.node_id("b").unwrap());
        let second = pod("w1").label("app", "web").pod_affinity(term).build();
        assert_eq!(
            feasible_nodes(&fw(), &snap, &second, snap.node_ids()).unwrap(),
            vec![snap.node_id("b").unwrap()],
            "assumed pods of the same cycle count"
        );
    }

    #[test]
    fn anti_affinity_of_the_incoming_pod() {
        let snap = snapshot_with(
            vec![zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2")],
            vec![pod("w0").label("app", "web").on("a").build()],
        );
        let p = pod("w1")
            .label("app", "web")
            .pod_anti_affinity(affinity_term(HOST, match_labels(&[("app", "web")])))
            .build();
        let ids = snap.node_ids().to_vec();
        let st = filter_node(&fw(), &snap, &p, ids[0]);
        assert_eq!(st.code, Code::Unschedulable);
        assert_eq!(st.reasons, vec![ERR_ANTI_AFFINITY.to_string()]);
        assert_eq!(feasible_nodes(&fw(), &snap, &p, &ids).unwrap(), vec![ids[1], ids[2]]);
        let zonal = pod("w1")
            .label("app", "web")
            .pod_anti_affinity(affinity_term(ZONE, match_labels(&[("app", "web")])))
            .build();
        assert_eq!(feasible_nodes(&fw(), &snap, &zonal, &ids).unwrap(), vec![ids[2]]);
    }

    #[test]
    fn anti_affinity_of_existing_pods_against_the_incoming_pod() {
        let existing = pod("guard")
            .label("app", "guard")
            .pod_anti_affinity(affinity_term(ZONE, match_labels(&[("app", "web")])))
            .on("a")
            .build();
        let snap = snapshot_with(vec![zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2")], vec![existing]);
        let ids = snap.node_ids().to_vec();
        let web = pod("w").label("app", "web").build();
        assert_eq!(feasible_nodes(&fw(), &snap, &web, &ids).unwrap(), vec![ids[2]]);
        let st = filter_node(&fw(), &snap, &web, ids[1]);
        assert_eq!(
            (st.code, st.reasons),
            (Code::Unschedulable, vec![ERR_EXISTING_ANTI_AFFINITY.to_string()])
        );
        assert_eq!(
            feasible_nodes(&fw(), &snap, &pod("db").label("app", "db").build(), &ids).unwrap().len(),
            3
        );
    }

    #[test]
    fn terms_apply_to_the_owner_namespace_unless_told_otherwise() {
        let snap = snapshot_with(
            vec![zoned("a", "z1"), zoned("b", "z2")],
            vec![pod("db").namespace("data").label("app", "db").on("a").build()],
        );
        let ids = snap.node_ids().to_vec();
        let same_ns = pod("web").pod_affinity(affinity_term(ZONE, match_labels(&[("app", "db")]))).build();
        assert!(feasible_nodes(&fw(), &snap, &same_ns, &ids).is_err(), "db lives in another namespace");
        let mut named = affinity_term(ZONE, match_labels(&[("app", "db")]));
        named.namespaces = Some(vec!["data".into()]);
        let p = pod("web").pod_affinity(named).build();
        assert_eq!(feasible_nodes(&fw(), &snap, &p, &ids).unwrap(), vec![ids[0]]);
        let mut all = affinity_term(ZONE, match_labels(&[("app", "db")]));
        all.namespace_selector = Some(LabelSelector::default());
        let p = pod("web").pod_affinity(all).build();
        assert_eq!(
            feasible_nodes(&fw(), &snap, &p, &ids).unwrap(),
            vec![ids[0]],
            "{{}} selects all namespaces"
        );
        let mut by_name = affinity_term(ZONE, match_labels(&[("app", "db")]));
        by_name.namespace_selector = Some(match_labels(&[("kubernetes.io/metadata.name", "data")]));
        let p = pod("web").pod_affinity(by_name).build();
        assert_eq!(feasible_nodes(&fw(), &snap, &p, &ids).unwrap(), vec![ids[0]]);
    }

    #[test]
    fn match_label_keys_narrow_the_selector() {
        let snap = snapshot_with(
            vec![zoned("a", "z1"), zoned("b", "z2")],
            vec![
                pod("v1").label("app", "web").label("rev", "1").on("a").build(),
                pod("v2").label("app", "web").label("rev", "2").on("b").build(),
            ],
        );
        let mut term = affinity_term(HOST, match_labels(&[("app", "web")]));
        term.match_label_keys = Some(vec!["rev".into()]);
        let p = pod("new").label("app", "web").label("rev", "2").pod_anti_affinity(term).build();
        assert_eq!(
            feasible_nodes(&fw(), &snap, &p, snap.node_ids()).unwrap(),
            vec![snap.node_id("a").unwrap()]
        );
    }

    #[test]
    fn preferred_affinity_attracts_and_anti_affinity_repels() {
        let snap = snapshot_with(
            vec![zoned("a", "z1"), zoned("b", "z2"), zoned("c", "z3")],
            vec![
                pod("cache").label("app", "cache").on("b").build(),
                pod("noisy").label("app", "noisy").on("c").build(),
            ],
        );
        let p = pod("web")
            .preferred_pod_affinity(50, affinity_term(ZONE, match_labels(&[("app", "cache")])))
            .preferred_pod_anti_affinity(50, affinity_term(ZONE, match_labels(&[("app", "noisy")])))
            .build();
        assert_eq!(find_node(&fw(), &snap, &p, snap.node_ids()), Ok(snap.node_id("b").unwrap()));
        let avoid = pod("web")
            .preferred_pod_anti_affinity(50, affinity_term(ZONE, match_labels(&[("app", "cache")])))
            .build();
        let fw_only = {
            let mut config = SchedulerConfig::default();
            for other in ["NodeResourcesFit", "NodeResourcesBalancedAllocation", "TaintToleration"] {
                config.plugin_weights.insert(other.into(), 0);
            }
            crate::plugins::pod_framework(&config)
        };
        assert_eq!(find_node(&fw_only, &snap, &avoid, snap.node_ids()), Ok(snap.node_id("a").unwrap()));
    }

    #[test]
    fn existing_pods_required_affinity_attracts_the_incoming_pod() {
        let snap = snapshot_with(
            vec![zoned("a", "z1"), zoned("b", "z2")],
            vec![pod("sidecar")
                .pod_affinity(affinity_term(ZONE, match_labels(&[("app", "web")])))
                .on("b")
                .build()],
        );
        let p = pod("web").label("app", "web").build();
        assert_eq!(find_node(&fw(), &snap, &p, snap.node_ids()), Ok(snap.node_id("b").unwrap()));
    }

    /// Only InterPodAffinity scores (ties go to the first node by name).
    fn affinity_only(args: InterPodAffinityConfig) -> Framework {
        let mut config = SchedulerConfig { inter_pod_affinity: args, ..SchedulerConfig::default() };
        for other in ["NodeResourcesFit", "NodeResourcesBalancedAllocation", "TaintToleration"] {
            config.plugin_weights.insert(other.into(), 0);
        }
        crate::plugins::pod_framework(&config)
    }

    /// kube's `TestPreferredAffinityWithHardPodAffinitySymmetricWeight`: an existing pod's
    /// required affinity scores `hardPodAffinityWeight`; 0 turns that off.
    #[test]
    fn hard_pod_affinity_weight_scores_existing_pods_required_terms() {
        let snap = snapshot_with(
            vec![zoned("a", "z1"), zoned("b", "z2")],
            vec![pod("sidecar")
                .pod_affinity(affinity_term(ZONE, match_labels(&[("app", "web")])))
                .on("b")
                .build()],
        );
        let p = pod("web").label("app", "web").build();
        let b = snap.node_id("b").unwrap();
        let a = snap.node_id("a").unwrap();
        assert_eq!(
            find_node(&affinity_only(InterPodAffinityConfig::default()), &snap, &p, snap.node_ids()),
            Ok(b)
        );
        let zero =
            InterPodAffinityConfig { hard_pod_affinity_weight: 0, ..InterPodAffinityConfig::default() };
        assert_eq!(find_node(&affinity_only(zero), &snap, &p, snap.node_ids()), Ok(a));
    }

    /// kube's `TestPreferredAffinity` "ignorePreferredTermsOfExistingPods": an incoming pod
    /// without preferred terms is not scored by existing pods' preferred terms.
    #[test]
    fn ignore_preferred_terms_of_existing_pods() {
        let snap = snapshot_with(
            vec![zoned("a", "z1"), zoned("b", "z2")],
            vec![pod("cache")
                .preferred_pod_affinity(80, affinity_term(ZONE, match_labels(&[("app", "web")])))
                .on("b")
                .build()],
        );
        let p = pod("web").label("app", "web").build();
        assert_eq!(
            find_node(&affinity_only(InterPodAffinityConfig::default()), &snap, &p, snap.node_ids()),
            Ok(snap.node_id("b").unwrap())
        );
        let ignore = InterPodAffinityConfig {
            ignore_preferred_terms_of_existing_pods: true,
            ..InterPodAffinityConfig::default()
        };
        assert_eq!(
            find_node(&affinity_only(ignore), &snap, &p, snap.node_ids()),
            Ok(snap.node_id("a").unwrap())
        );
    }

    #[test]
    fn invalid_incoming_selector_rejects_the_pod_in_prefilter() {
        let snap = snapshot_with(vec![zoned("a", "z1")], vec![]);
        let mut sel = match_labels(&[]);
        sel.match_expressions =
            Some(vec![placer_api::k8s::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                key: "app".into(),
                operator: "In".into(),
                values: None,
            }]);
        let p = pod("bad").pod_affinity(affinity_term(ZONE, sel)).build();
        let err = find_node(&fw(), &snap, &p, snap.node_ids()).unwrap_err();
        assert!(err.to_string().starts_with("0/1 nodes are available: parsing pod: "), "{err}");
        assert!(err.preemptable_nodes.is_empty());
    }
}
