//! `ExampleSmallPlacement` (test only): a placement score plugin showing what a new one
//! costs: this file and one line in [`super::registry`]. Placements with fewer nodes score
//! higher; a profile enables it with a weight (`plugins.placementScore.enabled`).

use crate::framework::{GroupCycle, PlacementCandidate, PlacementScore, Snapshot, Status};

/// Plugin name.
pub const NAME: &str = "ExampleSmallPlacement";

/// Prefers small placements.
pub struct ExampleSmallPlacement;

impl PlacementScore for ExampleSmallPlacement {
    fn name(&self) -> &'static str {
        NAME
    }
    fn score(
        &self,
        _snap: &Snapshot,
        _cycle: &GroupCycle,
        c: &PlacementCandidate<'_>,
    ) -> Result<i64, Status> {
        Ok(100 - (c.placement.nodes.len() as i64).min(100))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{ExtensionPoint, SchedulerConfig};
    use crate::framework::preemption::GroupHooks;
    use crate::framework::GroupOutcome;
    use crate::observer::NoopObserver;
    use crate::placement::{schedule_pod_group, GroupContext};
    use crate::podgroup::tests::{group, node, pod};
    use crate::podgroup::GroupCycle;
    use crate::snapshot::Snapshot;

    fn chosen(config: &SchedulerConfig) -> Option<String> {
        let mut snap = Snapshot::new();
        for (n, rack) in [("a1", "big"), ("a2", "big"), ("a3", "big"), ("b1", "small")] {
            snap.upsert_node(node(n, 4000, &[("rack", rack)]));
        }
        let pods = (0..2).map(|i| (i as u64, pod(&format!("p{i}"), 1000, Some("pg"), None))).collect();
        let cycle = GroupCycle::new(group("pg", Some(2), Some("rack")), true, pods, vec![]);
        let (fw, pf) = (crate::plugins::pod_framework(config), crate::plugins::placement_framework(config));
        let ctx = GroupContext { placements: &pf, algo: &fw, config };
        match schedule_pod_group(&ctx, &mut snap, &cycle, GroupHooks::default(), &mut NoopObserver) {
            GroupOutcome::Scheduled { placement, .. } => placement,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn enabled_by_a_profile_it_scores_placements() {
        assert_eq!(chosen(&SchedulerConfig::default()).as_deref(), Some("small"), "fuller placement wins");
        let mut config = SchedulerConfig::default();
        config.plugin_weights.insert("NodeResourcesFit".into(), 0);
        config.plugin_weights.insert("PodGroupPodsCount".into(), 0);
        assert_eq!(chosen(&config).as_deref(), Some("big"), "no score: the smallest name");
        config.plugins.enable(ExtensionPoint::PlacementScore, super::NAME, Some(1));
        assert_eq!(chosen(&config).as_deref(), Some("small"));
    }
}
