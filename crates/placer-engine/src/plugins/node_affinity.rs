//! `NodeAffinity`: `spec.nodeSelector` and required node affinity (filter), preferred node
//! affinity (score).
//!
//! PreFilter narrows the candidates when every required term pins `metadata.name` with
//! `In` (kube's `PreFilterResult`); the other nodes then read
//! `node(s) didn't satisfy plugin(s) [NodeAffinity]`.
//!
//! `NodeAffinityArgs.addedAffinity` (the profile's) applies to every pod: its required
//! terms filter first (`node(s) didn't match scheduler-enforced node affinity`), its
//! preferred terms add to the score.

use std::sync::Arc;

use placer_api::k8s::api::core::v1::NodeAffinity as AddedAffinity;

use crate::framework::helper::{labels_or_empty, node_selector_term_is_empty, node_selector_term_matches};
use crate::framework::normalize::default_normalize;
use crate::framework::NodeId;
use crate::framework::{
    CycleState, Dependence, FilterPlugin, FilterResult, PodInfo, PreResult, Rejection, ScorePlugin,
    MAX_NODE_SCORE,
};
use crate::framework::{NodeState, SchedulerConfig, Snapshot};

/// Plugin name.
pub const NAME: &str = "NodeAffinity";
/// Filter reason.
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";
/// Filter reason: the profile's `addedAffinity` does not select the node.
pub const ERR_REASON_ENFORCED: &str = "node(s) didn't match scheduler-enforced node affinity";
/// PreFilter reason when the terms pin disjoint node names.
pub const ERR_REASON_CONFLICT: &str = "pod affinity terms conflict";

/// The `NodeAffinity` filter and score, with the profile's `addedAffinity`.
#[derive(Debug, Clone, Default)]
pub struct NodeAffinity {
    added: Option<Arc<AddedAffinity>>,
}

impl NodeAffinity {
    pub fn new(config: &SchedulerConfig) -> Self {
        NodeAffinity { added: config.node_affinity_added.clone() }
    }

    /// Whether the added required terms (ORed) select the node; true without them.
    fn added_selects(&self, node: &NodeState) -> bool {
        let Some(selector) =
            self.added.as_ref().and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
        else {
            return true;
        };
        let labels = labels_or_empty(node.info.labels());
        selector.node_selector_terms.iter().any(|t| node_selector_term_matches(t, &node.info.name, labels))
    }

    fn added_preferred(&self) -> &[placer_api::k8s::api::core::v1::PreferredSchedulingTerm] {
        self.added
            .as_ref()
            .and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_deref())
            .unwrap_or(&[])
    }
}

impl FilterPlugin for NodeAffinity {
    fn name(&self) -> &'static str {
        NAME
    }

    fn dependence(&self, _pod: &PodInfo) -> Dependence {
        Dependence::NodeLocal
    }

    fn reads_only_pod_and_node(&self, _pod: &PodInfo) -> bool {
        true
    }

    fn pre_filter<'a>(
        &self,
        state: &mut CycleState<'a>,
        _snap: &'a Snapshot,
    ) -> Result<PreResult, Rejection> {
        let parsed = &state.parsed;
        let added = self
            .added
            .as_ref()
            .is_some_and(|a| a.required_during_scheduling_ignored_during_execution.is_some());
        if parsed.node_selector.is_none() && parsed.required_node_terms.is_none() && !added {
            return Ok(PreResult::Skip);
        }
        let terms = parsed.required_node_terms.unwrap_or(&[]);
        if terms.is_empty() {
            return Ok(PreResult::Run);
        }
        // Node names each term pins with `metadata.name In`; a term without such a field
        // requirement allows every node.
        let mut union: Vec<&'a str> = Vec::new();
        for term in terms {
            let mut term_names: Option<Vec<&'a str>> = None;
            for r in term.match_fields.iter().flatten() {
                if r.key != "metadata.name" || r.operator != "In" {
                    continue;
                }
                let values: Vec<&'a str> = r.values.iter().flatten().map(String::as_str).collect();
                term_names = Some(match term_names {
                    None => values,
                    Some(prev) => prev.into_iter().filter(|n| values.contains(n)).collect(),
                });
            }
            match term_names {
                None => return Ok(PreResult::Run),
                Some(names) => union.extend(names),
            }
        }
        if union.is_empty() {
            return Err(Rejection::unresolvable(NAME, ERR_REASON_CONFLICT));
        }
        state.restrict_nodes(NAME, union);
        Ok(PreResult::Run)
    }

    fn filter(&self, state: &CycleState<'_>, _snap: &Snapshot, node: &NodeState) -> FilterResult {
        if !self.added_selects(node) {
            return Err(Rejection::unresolvable(NAME, ERR_REASON_ENFORCED));
        }
        if state.parsed.matches_node_selector_and_affinity(&node.info) {
            Ok(())
        } else {
            Err(Rejection::unresolvable(NAME, ERR_REASON_POD))
        }
    }
}

impl ScorePlugin for NodeAffinity {
    fn name(&self) -> &'static str {
        NAME
    }

    fn default_weight(&self) -> i64 {
        2
    }

    /// Reads only the pod and the node.
    fn node_local(&self) -> bool {
        true
    }

    fn reads_only_pod_and_node(&self) -> bool {
        true
    }

    fn pre_score<'a>(
        &self,
        state: &mut CycleState<'a>,
        _snap: &'a Snapshot,
        _feasible: &[NodeId],
    ) -> PreResult {
        let any = state
            .parsed
            .preferred_node_terms
            .iter()
            .chain(self.added_preferred())
            .any(|t| t.weight != 0 && !node_selector_term_is_empty(&t.preference));
        if any {
            PreResult::Run
        } else {
            PreResult::Skip
        }
    }

    /// The sum of the weights of the preferred terms the node matches.
    fn score(&self, state: &CycleState<'_>, _snap: &Snapshot, _id: NodeId, node: &NodeState) -> i64 {
        let labels = labels_or_empty(node.info.labels());
        state
            .parsed
            .preferred_node_terms
            .iter()
            .chain(self.added_preferred())
            .filter(|t| t.weight != 0 && node_selector_term_matches(&t.preference, &node.info.name, labels))
            .map(|t| i64::from(t.weight))
            .sum()
    }

    fn normalize(&self, _state: &CycleState<'_>, _feasible: &[NodeId], scores: &mut [i64]) {
        default_normalize(MAX_NODE_SCORE, false, scores);
    }
}

#[cfg(test)]
mod tests {
    use crate::framework::{Code, Framework};
    use crate::plugins::testing::{node, node_req, pod, snapshot_with};
    use crate::schedule_one::{feasible_nodes, filter_node, find_node};
    use crate::SchedulerConfig;

    fn fw() -> Framework {
        crate::plugins::pod_framework(&SchedulerConfig::default())
    }

    #[test]
    fn node_selector_must_match_every_label() {
        let snap = snapshot_with(
            vec![
                node("a").label("disk", "ssd").label("zone", "z1").build(),
                node("b").label("disk", "hdd").build(),
            ],
            vec![],
        );
        let p = pod("p").node_selector("disk", "ssd").node_selector("zone", "z1").build();
        assert!(filter_node(&fw(), &snap, &p, snap.node_id("a").unwrap()).is_success());
        let st = filter_node(&fw(), &snap, &p, snap.node_id("b").unwrap());
        assert_eq!(st.code, Code::UnschedulableAndUnresolvable);
        assert_eq!(st.reasons, vec!["node(s) didn't match Pod's node affinity/selector".to_string()]);
    }

    #[test]
    fn required_terms_are_ored_and_expressions_anded() {
        let snap = snapshot_with(
            vec![
                node("a").label("zone", "z1").label("gpus", "8").build(),
                node("b").label("zone", "z2").label("gpus", "2").build(),
                node("c").label("zone", "z3").build(),
            ],
            vec![],
        );
        let p = pod("p")
            .required_node_term(vec![node_req("zone", "In", &["z1"]), node_req("gpus", "Gt", &["4"])], vec![])
            .required_node_term(vec![node_req("zone", "In", &["z2"]), node_req("gpus", "Lt", &["4"])], vec![])
            .build();
        let ids = snap.node_ids().to_vec();
        assert_eq!(feasible_nodes(&fw(), &snap, &p, &ids).unwrap(), vec![ids[0], ids[1]]);
        let none =
            pod("p").required_node_term(vec![node_req("zone", "NotIn", &["z1", "z2", "z3"])], vec![]).build();
        let err = feasible_nodes(&fw(), &snap, &none, &ids).unwrap_err();
        assert_eq!(
            err.to_string(),
            "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
        );
        let exists = pod("p").required_node_term(vec![node_req("gpus", "DoesNotExist", &[])], vec![]).build();
        assert_eq!(feasible_nodes(&fw(), &snap, &exists, &ids).unwrap(), vec![ids[2]]);
    }

    #[test]
    fn match_fields_on_node_name_narrow_the_candidates() {
        let snap = snapshot_with(
            vec![node("a").cpu("1").build(), node("b").cpu("1").build(), node("c").cpu("1").build()],
            vec![],
        );
        let ids = snap.node_ids().to_vec();
        let p = pod("p")
            .cpu("2")
            .required_node_term(vec![], vec![node_req("metadata.name", "In", &["b"])])
            .build();
        let err = feasible_nodes(&fw(), &snap, &p, &ids).unwrap_err();
        assert_eq!(
            err.to_string(),
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]."
        );
        assert_eq!(err.preemptable_nodes, vec![ids[1]]);
        let fits = pod("p").required_node_term(vec![], vec![node_req("metadata.name", "In", &["c"])]).build();
        assert_eq!(find_node(&fw(), &snap, &fits, &ids), Ok(ids[2]));
    }

    #[test]
    fn preferred_terms_score_by_weight() {
        let snap = snapshot_with(
            vec![
                node("a").cpu("4").label("zone", "z1").build(),
                node("b").cpu("4").label("zone", "z2").label("ssd", "true").build(),
            ],
            vec![],
        );
        let p = pod("p")
            .preferred_node_term(10, vec![node_req("zone", "In", &["z1"])])
            .preferred_node_term(30, vec![node_req("ssd", "Exists", &[])])
            .build();
        assert_eq!(find_node(&fw(), &snap, &p, snap.node_ids()), Ok(snap.node_id("b").unwrap()));
    }

    /// kube's node_affinity_test "Pod with addedAffinity" cases: the profile's required
    /// terms filter every pod first, its preferred terms score.
    #[test]
    fn added_affinity_applies_to_every_pod() {
        use placer_api::k8s::api::core::v1::{NodeSelector, NodeSelectorTerm, PreferredSchedulingTerm};
        let snap = snapshot_with(
            vec![
                node("a").cpu("4").label("zone", "foo").build(),
                node("b").cpu("4").label("zone", "foo").label("disk", "ssd").build(),
                node("c").cpu("4").label("zone", "bar").build(),
            ],
            vec![],
        );
        let term = |r| NodeSelectorTerm { match_expressions: Some(vec![r]), match_fields: None };
        let added = placer_api::k8s::api::core::v1::NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![term(node_req("zone", "In", &["foo"]))],
            }),
            preferred_during_scheduling_ignored_during_execution: Some(vec![PreferredSchedulingTerm {
                weight: 5,
                preference: term(node_req("disk", "Exists", &[])),
            }]),
        };
        let config = SchedulerConfig {
            node_affinity_added: Some(std::sync::Arc::new(added)),
            ..SchedulerConfig::default()
        };
        let fw = crate::plugins::pod_framework(&config);
        let p = pod("p").build();
        let st = filter_node(&fw, &snap, &p, snap.node_id("c").unwrap());
        assert_eq!(st.code, Code::UnschedulableAndUnresolvable);
        assert_eq!(st.reasons, vec!["node(s) didn't match scheduler-enforced node affinity".to_string()]);
        assert_eq!(
            find_node(&fw, &snap, &p, snap.node_ids()),
            Ok(snap.node_id("b").unwrap()),
            "preferred adds"
        );
        // The pod's own selector still applies on top.
        let own = pod("p").node_selector("zone", "bar").build();
        assert!(feasible_nodes(&fw, &snap, &own, snap.node_ids()).is_err());
    }
}
