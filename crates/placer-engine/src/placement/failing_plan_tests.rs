//! The failing gang's counted plan (`failing_plan.rs`) against the plain member-by-member
//! search, on clusters large enough for kube's sampling, with and without a per-pod
//! preemption hook that sometimes places a member that fits nowhere: the outcomes, their
//! messages included, and the hook's call count must be the same.

use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::config::PlacementSearch;
use crate::framework::preemption::{GroupHooks, PodPreemption, PreemptionPlan};
use crate::framework::FitError;
use crate::observer::NoopObserver;
use crate::plugins::testing::{node, pod, snapshot_with};
use crate::podgroup::tests::group;

/// Places a member on the first node where preemption could help when `hash(name) % every
/// == 0`, evicting nothing; decides from its arguments only, as a real hook does.
struct Granting {
    every: u64,
    calls: u64,
}

impl PodPreemption for Granting {
    fn preempt(
        &mut self,
        _: &mut Snapshot,
        pod: &PodInfo,
        _: &[NodeId],
        fit: &FitError,
    ) -> Option<PreemptionPlan> {
        self.calls += 1;
        let h = pod.key.name.bytes().fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
        let node = *fit.preemptable_nodes.first()?;
        (h % self.every == 0).then(|| PreemptionPlan { node, victims: Vec::new() })
    }

    fn uncount(&mut self, calls: u64) {
        self.calls -= calls;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]
    #[test]
    fn counted_failures_decide_like_the_search(
        // Mostly full nodes (0), so that the copies often fall short of the gang.
        cores in proptest::collection::vec(prop_oneof![12 => Just(0u32), 1 => 1u32..4], 101..131),
        tainted in proptest::collection::vec(any::<bool>(), 8),
        size in 2usize..14,
        min in 2i32..14,
        cpu in 1u32..5,
        hook in proptest::option::of(1u64..4),
    ) {
        let nodes: Vec<crate::model::NodeStatic> = cores
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                let b = node(&format!("n{i}")).cpu(&c.max(1).to_string());
                if tainted[i % tainted.len()] && i % 3 == 0 { b.taint("x", "y", "NoSchedule").build() } else { b.build() }
            })
            .collect();
        // A node with 0 "cores" is kept full by a pod using its one core.
        let existing: Vec<PodInfo> = cores
            .iter()
            .enumerate()
            .filter(|(_, &c)| c == 0)
            .map(|(i, _)| pod(&format!("e{i}")).cpu("1").on(&format!("n{i}")).build())
            .collect();
        let pods: Vec<(u64, Arc<PodInfo>)> = (0..size)
            .map(|i| (i as u64, Arc::new(pod(&format!("m{i}")).cpu(&format!("{}m", cpu * 500)).build())))
            .collect();
        let cycle = GroupCycle::new(group("pg", Some(min.min(size as i32)), None), true, pods, vec![]);
        let run = |search: PlacementSearch| {
            let config = SchedulerConfig { placement_search: search, ..SchedulerConfig::default() };
            let mut snap = snapshot_with(nodes.clone(), existing.clone());
            let fw = crate::plugins::pod_framework(&config);
            let pf = crate::plugins::placement_framework(&config);
            let ctx = GroupContext { placements: &pf, algo: &fw, config: &config };
            let mut granting = hook.map(|every| Granting { every, calls: 0 });
            let hooks = GroupHooks {
                pod_preemption: granting.as_mut().map(|g| g as &mut dyn PodPreemption),
                group_preemption: None,
            };
            let out = schedule_pod_group(&ctx, &mut snap, &cycle, hooks, &mut NoopObserver);
            (format!("{out:?}"), granting.map(|g| g.calls))
        };
        prop_assert_eq!(run(PlacementSearch::default()), run(PlacementSearch::Baseline));
    }
}

/// The shortcut is taken (the plan holds 2..needed copies) in a cluster the test builds
/// for it, so the property above is not vacuous.
#[test]
fn a_gang_short_of_copies_gets_a_plan() {
    let nodes: Vec<_> =
        (0..120).map(|i| node(&format!("n{i}")).cpu(if i < 3 { "2" } else { "1" }).build()).collect();
    let existing: Vec<PodInfo> =
        (3..120).map(|i| pod(&format!("e{i}")).cpu("1").on(&format!("n{i}")).build()).collect();
    let snap = snapshot_with(nodes, existing);
    let pods: Vec<(u64, Arc<PodInfo>)> =
        (0..8).map(|i| (i as u64, Arc::new(pod(&format!("m{i}")).cpu("1").build()))).collect();
    let cycle = GroupCycle::new(group("pg", Some(8), None), true, pods, vec![]);
    let config = SchedulerConfig::default();
    let fw = crate::plugins::pod_framework(&config);
    let pf = crate::plugins::placement_framework(&config);
    let ctx = GroupContext { placements: &pf, algo: &fw, config: &config };
    let plan = super::failing_plan::failing_plan(&ctx, &snap, &cycle, snap.node_ids());
    assert_eq!(plan.map(|p| p.len()), Some(6), "three nodes with two free cores each");
}
