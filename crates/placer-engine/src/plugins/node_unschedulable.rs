//! `NodeUnschedulable`: nodes with `spec.unschedulable` only take pods that tolerate
//! `node.kubernetes.io/unschedulable:NoSchedule`.

use crate::framework::helper::{tolerations_tolerate, TaintRef, NO_SCHEDULE, TAINT_UNSCHEDULABLE};
use crate::framework::{CycleState, Dependence, FilterPlugin, FilterResult, PodInfo, Rejection};
use crate::framework::{NodeState, Snapshot};

/// Plugin name.
pub const NAME: &str = "NodeUnschedulable";
/// Filter reason.
pub const ERR_REASON: &str = "node(s) were unschedulable";

/// The `NodeUnschedulable` filter.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeUnschedulable;

impl FilterPlugin for NodeUnschedulable {
    fn name(&self) -> &'static str {
        NAME
    }

    fn dependence(&self, _pod: &PodInfo) -> Dependence {
        Dependence::NodeLocal
    }

    fn reads_only_pod_and_node(&self, _pod: &PodInfo) -> bool {
        true
    }

    /// Passes every node without `spec.unschedulable`.
    fn quick_pass(&self, _state: &CycleState<'_>) -> Option<crate::framework::QuickPass> {
        Some(crate::framework::QuickPass { schedulable: true, ..Default::default() })
    }

    fn filter(&self, state: &CycleState<'_>, _snap: &Snapshot, node: &NodeState) -> FilterResult {
        if !node.flags.unschedulable {
            return Ok(());
        }
        let taint = TaintRef { key: TAINT_UNSCHEDULABLE, value: "", effect: NO_SCHEDULE };
        if tolerations_tolerate(state.parsed.tolerations, taint) {
            return Ok(());
        }
        Err(Rejection::unresolvable(NAME, ERR_REASON))
    }
}

#[cfg(test)]
mod tests {
    use crate::plugins::testing::{node, pod, snapshot_with};
    use crate::schedule_one::filter_node;
    use crate::{framework::Code, SchedulerConfig};

    #[test]
    fn unschedulable_nodes_reject_pods_unless_tolerated() {
        let fw = crate::plugins::pod_framework(&SchedulerConfig::default());
        let snap = snapshot_with(vec![node("n1").cpu("1").unschedulable().build()], vec![]);
        let id = snap.node_ids()[0];
        let st = filter_node(&fw, &snap, &pod("p").build(), id);
        assert_eq!(st.code, Code::UnschedulableAndUnresolvable);
        assert_eq!(st.reasons, vec!["node(s) were unschedulable".to_string()]);
        assert_eq!(st.plugin, "NodeUnschedulable");
        let tolerant =
            pod("p").toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule").build();
        assert!(filter_node(&fw, &snap, &tolerant, id).is_success());
    }
}
