//! `TaintToleration`: NoSchedule / NoExecute taints must be tolerated (filter); untolerated
//! PreferNoSchedule taints lower the score. A node whose `Ready` condition is not `True`
//! carries `node.kubernetes.io/not-ready:NoExecute`, as the node lifecycle controller would
//! have set it.

use crate::framework::{
    CycleState, Dependence, FilterPlugin, FilterResult, PodInfo, Rejection, ScorePlugin, MAX_NODE_SCORE,
};
use placer_api::k8s::api::core::v1::Toleration;

use crate::framework::helper::{first_untolerated_taint, node_taints, tolerates, PREFER_NO_SCHEDULE};
use crate::framework::normalize::default_normalize;
use crate::framework::NodeId;
use crate::framework::{NodeState, Snapshot};

/// Plugin name.
pub const NAME: &str = "TaintToleration";

/// The `TaintToleration` filter and score.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaintToleration;

impl FilterPlugin for TaintToleration {
    fn name(&self) -> &'static str {
        NAME
    }

    fn dependence(&self, _pod: &PodInfo) -> Dependence {
        Dependence::NodeLocal
    }

    fn reads_only_pod_and_node(&self, _pod: &PodInfo) -> bool {
        true
    }

    /// Passes every node without NoSchedule / NoExecute taints.
    fn quick_pass(&self, _state: &CycleState<'_>) -> Option<crate::framework::QuickPass> {
        Some(crate::framework::QuickPass { no_hard_taints: true, ..Default::default() })
    }

    fn filter(&self, state: &CycleState<'_>, _snap: &Snapshot, node: &NodeState) -> FilterResult {
        if !node.flags.has_hard_taints {
            return Ok(());
        }
        match first_untolerated_taint(&node.info, state.parsed.tolerations) {
            None => Ok(()),
            Some(t) => Err(Rejection::unresolvable(
                NAME,
                format!("node(s) had untolerated taint {{{}: {}}}", t.key, t.value),
            )),
        }
    }
}

impl ScorePlugin for TaintToleration {
    fn name(&self) -> &'static str {
        NAME
    }

    fn default_weight(&self) -> i64 {
        3
    }

    /// Reads only the pod and the node.
    fn node_local(&self) -> bool {
        true
    }

    fn reads_only_pod_and_node(&self) -> bool {
        true
    }

    /// The number of PreferNoSchedule taints not tolerated by a toleration with effect
    /// PreferNoSchedule or empty.
    fn score(&self, state: &CycleState<'_>, _snap: &Snapshot, _id: NodeId, node: &NodeState) -> i64 {
        if !node.flags.has_prefer_no_schedule_taints {
            return 0;
        }
        let tolerations = state.parsed.tolerations;
        let prefer =
            |tol: &&Toleration| matches!(tol.effect.as_deref(), None | Some("") | Some(PREFER_NO_SCHEDULE));
        node_taints(&node.info)
            .filter(|t| t.effect == PREFER_NO_SCHEDULE)
            .filter(|t| !tolerations.iter().filter(prefer).any(|tol| tolerates(tol, *t)))
            .count() as i64
    }

    /// [`Self::score`] per node, reading the node's state only where its dense record
    /// says it has PreferNoSchedule taints (elsewhere the score is 0).
    fn score_all(&self, state: &CycleState<'_>, snap: &Snapshot, feasible: &[NodeId], out: &mut [i64]) {
        for (o, &id) in out.iter_mut().zip(feasible) {
            *o = if snap.hot(id).flags.has_prefer_no_schedule_taints {
                self.score(state, snap, id, snap.node(id))
            } else {
                0
            };
        }
    }

    fn normalize(&self, _state: &CycleState<'_>, _feasible: &[NodeId], scores: &mut [i64]) {
        default_normalize(MAX_NODE_SCORE, true, scores);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::{node, pod, snapshot_with};
    use crate::schedule_one::{filter_node, find_node, prepare};
    use crate::{framework::Code, framework::Framework, SchedulerConfig};

    #[test]
    fn no_schedule_and_no_execute_taints_reject_untolerating_pods() {
        let fw = crate::plugins::pod_framework(&SchedulerConfig::default());
        for effect in ["NoSchedule", "NoExecute"] {
            let snap = snapshot_with(vec![node("n1").taint("dedicated", "gpu", effect).build()], vec![]);
            let id = snap.node_ids()[0];
            let st = filter_node(&fw, &snap, &pod("p").build(), id);
            assert_eq!(st.code, Code::UnschedulableAndUnresolvable, "{effect}");
            assert_eq!(st.reasons, vec!["node(s) had untolerated taint {dedicated: gpu}".to_string()]);
            let tolerant = pod("p").toleration("dedicated", "Equal", "gpu", effect).build();
            assert!(filter_node(&fw, &snap, &tolerant, id).is_success(), "{effect}");
        }
    }

    #[test]
    fn prefer_no_schedule_taints_do_not_filter() {
        let fw = crate::plugins::pod_framework(&SchedulerConfig::default());
        let snap = snapshot_with(vec![node("n1").taint("spot", "", "PreferNoSchedule").build()], vec![]);
        assert!(filter_node(&fw, &snap, &pod("p").build(), snap.node_ids()[0]).is_success());
    }

    #[test]
    fn not_ready_nodes_carry_a_not_ready_no_execute_taint() {
        let fw = crate::plugins::pod_framework(&SchedulerConfig::default());
        let snap = snapshot_with(vec![node("n1").not_ready().build()], vec![]);
        let id = snap.node_ids()[0];
        let st = filter_node(&fw, &snap, &pod("p").build(), id);
        assert_eq!(
            st.reasons,
            vec!["node(s) had untolerated taint {node.kubernetes.io/not-ready: }".to_string()]
        );
        let tolerant = pod("p").toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute").build();
        assert!(filter_node(&fw, &snap, &tolerant, id).is_success());
    }

    #[test]
    fn score_counts_untolerated_prefer_no_schedule_taints_reversed() {
        let snap = snapshot_with(
            vec![
                node("a").taint("x", "1", "PreferNoSchedule").taint("y", "1", "PreferNoSchedule").build(),
                node("b").taint("x", "1", "PreferNoSchedule").build(),
                node("c").build(),
            ],
            vec![],
        );
        let fw = Framework::empty();
        let p = pod("p").toleration("y", "Exists", "", "PreferNoSchedule").build();
        let state = prepare(&fw, &snap, &p).unwrap();
        let mut scores: Vec<i64> = snap
            .node_ids()
            .iter()
            .map(|&id| TaintToleration.score(&state, &snap, id, snap.node(id)))
            .collect();
        assert_eq!(scores, vec![1, 1, 0]);
        TaintToleration.normalize(&state, snap.node_ids(), &mut scores);
        assert_eq!(scores, vec![0, 0, 100]);
        let plain = pod("q").build();
        let state = prepare(&fw, &snap, &plain).unwrap();
        let mut scores: Vec<i64> = snap
            .node_ids()
            .iter()
            .map(|&id| TaintToleration.score(&state, &snap, id, snap.node(id)))
            .collect();
        TaintToleration.normalize(&state, snap.node_ids(), &mut scores);
        assert_eq!(scores, vec![0, 50, 100]);
        let full = crate::plugins::pod_framework(&SchedulerConfig::default());
        assert_eq!(find_node(&full, &snap, &plain, snap.node_ids()), Ok(snap.node_id("c").unwrap()));
    }

    proptest::proptest! {
        /// `score_all` (which reads a node's state only where its dense record has
        /// PreferNoSchedule taints) gives every node the score `score` gives it, for nodes
        /// with PreferNoSchedule, NoSchedule or no taints, tolerated or not.
        #[test]
        fn score_all_matches_score_node_by_node(
            taints in proptest::collection::vec((0u8..4, 0u8..3), 1..8),
            tolerate in 0u8..4,
        ) {
            let nodes = taints
                .iter()
                .enumerate()
                .map(|(i, &(kind, key))| {
                    let b = node(&format!("n{i}"));
                    let key = format!("k{key}");
                    match kind {
                        0 => b.build(),
                        1 => b.taint(&key, "v", "PreferNoSchedule").build(),
                        2 => b.taint(&key, "v", "PreferNoSchedule").taint("other", "", "PreferNoSchedule").build(),
                        _ => b.taint(&key, "v", "NoSchedule").build(),
                    }
                })
                .collect();
            let snap = snapshot_with(nodes, vec![]);
            let p = match tolerate {
                0 => pod("p").build(),
                1 => pod("p").toleration("k0", "Exists", "", "PreferNoSchedule").build(),
                2 => pod("p").toleration("k1", "Equal", "v", "").build(),
                _ => pod("p").toleration("", "Exists", "", "").build(),
            };
            let fw = Framework::empty();
            let state = prepare(&fw, &snap, &p).unwrap();
            let ids = snap.node_ids().to_vec();
            let mut all = vec![-1i64; ids.len()];
            TaintToleration.score_all(&state, &snap, &ids, &mut all);
            let one: Vec<i64> = ids.iter().map(|&id| TaintToleration.score(&state, &snap, id, snap.node(id))).collect();
            proptest::prop_assert_eq!(all, one);
        }
    }
}
