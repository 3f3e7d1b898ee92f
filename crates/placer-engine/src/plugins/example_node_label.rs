//! `ExampleNodeLabel` (test only): a filter plugin showing what a new filter costs: this
//! file and one line in [`super::registry`]. It rejects nodes labelled
//! `placer.dev/example-exclude: "true"`, and is enabled by a profile
//! (`plugins.filter.enabled: [{name: ExampleNodeLabel}]`).

use crate::framework::{
    CycleState, Dependence, FilterPlugin, FilterResult, NodeState, PodInfo, Rejection, Snapshot,
};

/// Plugin name.
pub const NAME: &str = "ExampleNodeLabel";

/// Rejects excluded nodes.
pub struct ExampleNodeLabel;

impl FilterPlugin for ExampleNodeLabel {
    fn name(&self) -> &'static str {
        NAME
    }
    fn dependence(&self, _pod: &PodInfo) -> Dependence {
        Dependence::NodeLocal
    }
    fn filter(&self, _state: &CycleState<'_>, _snap: &Snapshot, node: &NodeState) -> FilterResult {
        match node.info.label("placer.dev/example-exclude") {
            Some("true") => Err(Rejection::unresolvable(NAME, "node(s) are excluded by the example")),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{ExtensionPoint, SchedulerConfig};
    use crate::plugins::testing::{node, pod, snapshot_with};
    use crate::schedule_one::find_node;

    #[test]
    fn enabled_by_a_profile_it_filters_nodes() {
        let snap = snapshot_with(
            vec![
                node("a").cpu("4").label("placer.dev/example-exclude", "true").build(),
                node("b").cpu("1").build(),
            ],
            vec![],
        );
        let p = pod("p").cpu("1").build();
        let default = crate::plugins::pod_framework(&SchedulerConfig::default());
        assert_eq!(find_node(&default, &snap, &p, snap.node_ids()), Ok(snap.node_id("a").unwrap()));
        let mut config = SchedulerConfig::default();
        config.plugins.enable(ExtensionPoint::Filter, super::NAME, None);
        let fw = crate::plugins::pod_framework(&config);
        assert_eq!(find_node(&fw, &snap, &p, snap.node_ids()), Ok(snap.node_id("b").unwrap()));
    }
}
