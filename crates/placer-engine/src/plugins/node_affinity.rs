//! `NodeAffinity`: `spec.nodeSelector` and required node affinity (filter), preferred node
//! affinity (score).
//!
//! PreFilter narrows the candidates when every required term pins `metadata.name` with
//! `In` (kube's `PreFilterResult`); the other nodes then read
//! `node(s) didn't satisfy plugin(s) [NodeAffinity]`.

use crate::framework::helper::{labels_or_empty, node_selector_term_is_empty, node_selector_term_matches};
use crate::framework::normalize::default_normalize;
use crate::framework::NodeId;
use crate::framework::{
    CycleState, Dependence, FilterPlugin, FilterResult, PodInfo, PreResult, Rejection, ScorePlugin,
    MAX_NODE_SCORE,
};
use crate::framework::{NodeState, Snapshot};

/// Plugin name.
pub const NAME: &str = "NodeAffinity";
/// Filter reason.
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";
/// PreFilter reason when the terms pin disjoint node names.
pub const ERR_REASON_CONFLICT: &str = "pod affinity terms conflict";

/// The `NodeAffinity` filter and score.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeAffinity;

impl FilterPlugin for NodeAffinity {
    fn name(&self) -> &'static str {
        NAME
    }

    fn dependence(&self, _pod: &PodInfo) -> Dependence {
        Dependence::NodeLocal
    }

    fn pre_filter<'a>(
        &self,
        state: &mut CycleState<'a>,
        _snap: &'a Snapshot,
    ) -> Result<PreResult, Rejection> {
        let parsed = &state.parsed;
        if parsed.node_selector.is_none() && parsed.required_node_terms.is_none() {
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
}
