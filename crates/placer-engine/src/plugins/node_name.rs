//! `NodeName`: a pod with `spec.nodeName` fits only that node.

use crate::framework::{CycleState, Dependence, FilterPlugin, FilterResult, PodInfo, PreResult, Rejection};
use crate::framework::{NodeState, Snapshot};

/// Plugin name.
pub const NAME: &str = "NodeName";
/// Filter reason.
pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

/// The `NodeName` filter.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeName;

impl FilterPlugin for NodeName {
    fn name(&self) -> &'static str {
        NAME
    }

    fn dependence(&self, _pod: &PodInfo) -> Dependence {
        Dependence::NodeLocal
    }

    fn pre_filter(&self, state: &mut CycleState<'_>, _snap: &Snapshot) -> Result<PreResult, Rejection> {
        Ok(if state.parsed.node_name.is_some() { PreResult::Run } else { PreResult::Skip })
    }

    fn filter(&self, state: &CycleState<'_>, _snap: &Snapshot, node: &NodeState) -> FilterResult {
        match state.parsed.node_name {
            Some(name) if name != node.name() => Err(Rejection::unresolvable(NAME, ERR_REASON)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::plugins::testing::{node, pod, snapshot_with};
    use crate::schedule_one::filter_node;
    use crate::{framework::Code, SchedulerConfig};

    #[test]
    fn pod_with_node_name_fits_only_that_node() {
        let fw = crate::plugins::pod_framework(&SchedulerConfig::default());
        let snap = snapshot_with(vec![node("a").build(), node("b").build()], vec![]);
        let p = pod("p").on("b").build();
        let st = filter_node(&fw, &snap, &p, snap.node_id("a").unwrap());
        assert_eq!(st.code, Code::UnschedulableAndUnresolvable);
        assert_eq!(st.reasons, vec!["node(s) didn't match the requested node name".to_string()]);
        assert!(filter_node(&fw, &snap, &p, snap.node_id("b").unwrap()).is_success());
    }
}
