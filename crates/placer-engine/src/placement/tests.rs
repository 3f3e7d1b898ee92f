use super::*;
use crate::observer::NoopObserver;
use crate::podgroup::tests::{group, node, pod, FirstFit};
use crate::podgroup::GroupCycle;
use proptest::prelude::*;

fn snap_of(nodes: &[(&str, i64, &str)]) -> Snapshot {
    let mut s = Snapshot::new();
    for (name, cpu, rack) in nodes {
        s.upsert_node(node(name, *cpu, &[("rack", rack)]));
    }
    s
}

fn gang_cycle(n: usize, cpu_milli: i64, min: i32) -> GroupCycle {
    let pods = (0..n).map(|i| (i as u64, pod(&format!("p{i}"), cpu_milli, Some("pg"), None))).collect();
    GroupCycle::new(group("pg", Some(min), Some("rack")), true, pods, vec![])
}

fn run(snap: &mut Snapshot, cycle: &GroupCycle, config: &SchedulerConfig) -> GroupOutcome {
    let pf = crate::plugins::placement_framework(config);
    let ctx = GroupContext { placements: &pf, algo: &FirstFit, config };
    schedule_pod_group(&ctx, snap, cycle, GroupHooks::default(), &mut NoopObserver)
}

fn chosen_racks(snap: &Snapshot, outcome: &GroupOutcome) -> Vec<String> {
    match outcome {
        GroupOutcome::Scheduled { assignments, .. } => {
            let mut v: Vec<String> = assignments
                .iter()
                .map(|(_, n)| snap.node(*n).info.label("rack").unwrap_or("").to_string())
                .collect();
            v.dedup();
            v
        }
        other => panic!("expected Scheduled, got {other:?}"),
    }
}

#[test]
fn percentage_formula_follows_the_proposal() {
    assert_eq!(placements_to_find(None, 0, 10), 10, "100% for tiny clusters");
    assert_eq!(placements_to_find(None, 5000, 250), 25, "10% at 5000 nodes");
    assert_eq!(placements_to_find(None, 100_000, 1000), 50, "floor of 5%");
    assert_eq!(placements_to_find(None, 5000, 3), 1, "at least one");
    assert_eq!(placements_to_find(Some(50), 5000, 10), 5, "explicit value wins");
    assert_eq!(placements_to_find(Some(0), 0, 4), 4, "0 means adaptive");
}

#[test]
fn gang_lands_on_the_only_rack_with_room() {
    // SEMANTICS scenario 001: rack-2 is half full, rack-3 has one node.
    let mut snap = snap_of(&[
        ("n1", 2000, "rack-1"),
        ("n2", 2000, "rack-1"),
        ("n3", 2000, "rack-1"),
        ("n4", 2000, "rack-2"),
        ("n5", 2000, "rack-2"),
        ("n6", 2000, "rack-3"),
    ]);
    snap.upsert_pod(pod("existing", 2000, None, Some("n4")));
    let c = gang_cycle(3, 1000, 3);
    let out = run(&mut snap, &c, &SchedulerConfig::default());
    assert_eq!(chosen_racks(&snap, &out), ["rack-1"]);
    assert_eq!(snap.node(snap.node_id("n1").unwrap()).requested.cpu, 0, "snapshot left as found");
}

#[test]
fn scoring_prefers_the_fuller_rack_75_over_50() {
    let mut snap = snap_of(&[
        ("n1", 2000, "rack-1"),
        ("n2", 2000, "rack-1"),
        ("n3", 2000, "rack-2"),
        ("n4", 2000, "rack-2"),
        ("n5", 2000, "rack-2"),
        ("n6", 2000, "rack-3"),
    ]);
    let c = gang_cycle(3, 1000, 3);
    let out = run(&mut snap, &c, &SchedulerConfig::default());
    assert_eq!(chosen_racks(&snap, &out), ["rack-1"]);
}

#[test]
fn scoring_counts_existing_pods_83_beats_75() {
    let mut snap = snap_of(&[
        ("n1", 2000, "rack-1"),
        ("n2", 2000, "rack-1"),
        ("n3", 2000, "rack-2"),
        ("n4", 2000, "rack-2"),
        ("n5", 2000, "rack-2"),
        ("n6", 2000, "rack-3"),
        ("n7", 2000, "rack-3"),
        ("n8", 2000, "rack-3"),
        ("n9", 2000, "rack-4"),
    ]);
    snap.upsert_pod(pod("e1", 2000, None, Some("n3")));
    snap.upsert_pod(pod("e2", 1000, None, Some("n8")));
    let c = gang_cycle(3, 1000, 3);
    let out = run(&mut snap, &c, &SchedulerConfig::default());
    assert_eq!(chosen_racks(&snap, &out), ["rack-2"]);
}

#[test]
fn least_allocated_strategy_prefers_the_emptier_rack() {
    let mut snap = snap_of(&[
        ("n1", 2000, "a"),
        ("n2", 2000, "a"),
        ("n3", 2000, "b"),
        ("n4", 2000, "b"),
        ("n5", 2000, "b"),
    ]);
    let c = gang_cycle(3, 1000, 3);
    let config = SchedulerConfig {
        placement_scoring_strategy: crate::config::ScoringStrategy::least_allocated(),
        ..SchedulerConfig::default()
    };
    let out = run(&mut snap, &c, &config);
    assert_eq!(chosen_racks(&snap, &out), ["b"]);
}

#[test]
fn baseline_search_reaches_the_same_decision_without_shortcuts() {
    let racks = [("n1", 2000, "r1"), ("n2", 1000, "r2"), ("n3", 2000, "r3"), ("n4", 2000, "r3")];
    let baseline = SchedulerConfig {
        placement_search: crate::config::PlacementSearch::Baseline,
        ..SchedulerConfig::default()
    };
    for (pods, min) in [(2, 2), (3, 3), (4, 4)] {
        let c = gang_cycle(pods, 1000, min);
        let (mut a, mut b) = (snap_of(&racks), snap_of(&racks));
        let optimized = run(&mut a, &c, &SchedulerConfig::default());
        let plain = run(&mut b, &c, &baseline);
        assert_eq!(format!("{optimized:?}"), format!("{plain:?}"), "{pods} pods");
    }
    // Infeasible everywhere: both fail; the baseline, having simulated, also names the
    // best placement it tried.
    let c = gang_cycle(5, 1000, 5);
    assert!(matches!(run(&mut snap_of(&racks), &c, &baseline), GroupOutcome::Unschedulable { .. }));
    assert!(matches!(
        run(&mut snap_of(&racks), &c, &SchedulerConfig::default()),
        GroupOutcome::Unschedulable { .. }
    ));
}

#[test]
fn equal_scores_go_to_the_smallest_name() {
    let mut snap = snap_of(&[("n1", 2000, "zeta"), ("n2", 2000, "alpha"), ("n3", 2000, "mid")]);
    let c = gang_cycle(2, 1000, 2);
    let out = run(&mut snap, &c, &SchedulerConfig::default());
    assert_eq!(chosen_racks(&snap, &out), ["alpha"]);
}

#[test]
fn no_fitting_rack_names_placements_and_the_limiting_resource() {
    let mut snap = snap_of(&[("n1", 2000, "r1"), ("n2", 1000, "r2"), ("n3", 4000, "r3")]);
    snap.upsert_pod(pod("big", 3000, None, Some("n3")));
    let c = gang_cycle(3, 1000, 3);
    match run(&mut snap, &c, &SchedulerConfig::default()) {
        GroupOutcome::Unschedulable { message, pod_messages } => {
            assert_eq!(message, "0/3 placements for rack can hold minCount=3: 3 Insufficient cpu");
            assert_eq!(pod_messages.len(), 3);
            assert!(pod_messages[0].1.starts_with("pod group is unschedulable: 0/3 placements"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn basic_group_places_what_fits_in_one_rack() {
    let mut snap = snap_of(&[("n1", 2000, "r1"), ("n2", 2000, "r2")]);
    let pods = (0..3).map(|i| (i as u64, pod(&format!("p{i}"), 1000, Some("pg"), None))).collect();
    let c = GroupCycle::new(group("pg", None, Some("rack")), true, pods, vec![]);
    match run(&mut snap, &c, &SchedulerConfig::default()) {
        GroupOutcome::Scheduled { placement, assignments, failures } => {
            assert_eq!(placement.as_deref(), Some("r1"));
            assert_eq!(assignments.len(), 2);
            assert_eq!(failures.len(), 1);
            assert!(failures[0].1.contains("must share one rack domain: \"r1\""), "{}", failures[0].1);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn without_constraint_one_placement_holds_every_node() {
    let mut snap = snap_of(&[("n1", 1000, "r1"), ("n2", 1000, "r2")]);
    let pods = (0..2).map(|i| (i as u64, pod(&format!("p{i}"), 1000, Some("pg"), None))).collect();
    let c = GroupCycle::new(group("pg", Some(2), None), true, pods, vec![]);
    let out = run(&mut snap, &c, &SchedulerConfig::default());
    assert_eq!(chosen_racks(&snap, &out), ["r1", "r2"]);
}

#[test]
fn tas_gate_off_ignores_the_constraint() {
    let mut snap = snap_of(&[("n1", 1000, "r1"), ("n2", 1000, "r2")]);
    let c = gang_cycle(2, 1000, 2);
    let mut config = SchedulerConfig::default();
    config.gates.set_gate(placer_api::gates::Gate::TopologyAwareWorkloadScheduling, false);
    let out = run(&mut snap, &c, &config);
    assert_eq!(chosen_racks(&snap, &out), ["r1", "r2"]);
}

#[test]
fn unconstrained_failure_says_how_many_pods_fit() {
    let mut snap = snap_of(&[("n1", 2000, "r1")]);
    let pods = (0..3).map(|i| (i as u64, pod(&format!("p{i}"), 1000, Some("pg"), None))).collect();
    let c = GroupCycle::new(group("pg", Some(3), None), true, pods, vec![]);
    match run(&mut snap, &c, &SchedulerConfig::default()) {
        GroupOutcome::Unschedulable { message, pod_messages } => {
            assert_eq!(message, "2/3 pods fit: 0/1 nodes are available: 1 Insufficient cpu.");
            assert_eq!(pod_messages[2].1, "0/1 nodes are available: 1 Insufficient cpu.");
            assert!(pod_messages[0].1.starts_with("pod group is unschedulable: 2/3 pods fit"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn nominated_placement_is_evaluated_first_and_taken() {
    // r2 would score higher (fuller), but the members are nominated to r1.
    let mut snap = snap_of(&[("n1", 4000, "r1"), ("n2", 2000, "r2")]);
    let pods = (0..2)
        .map(|i| {
            let mut p = (*pod(&format!("p{i}"), 1000, Some("pg"), None)).clone();
            p.nominated_node_name = Some("n1".into());
            (i as u64, Arc::new(p))
        })
        .collect();
    let c = GroupCycle::new(group("pg", Some(2), Some("rack")), true, pods, vec![]);
    let out = run(&mut snap, &c, &SchedulerConfig::default());
    assert_eq!(chosen_racks(&snap, &out), ["r1"]);
}

#[test]
fn percentage_limits_the_placements_evaluated() {
    // 4 racks of which r0 and r1 fit; 50% -> 2 feasible to find.
    struct Counter(u64);
    impl Observer for Counter {
        fn count(&mut self, name: &'static str, _l: &[(&'static str, &str)], v: u64) {
            if name == METRIC_PLACEMENT_EVALUATIONS {
                self.0 += v;
            }
        }
        fn observe(&mut self, _: &'static str, _: &[(&'static str, &str)], _: f64) {}
    }
    let mut snap = snap_of(&[("n0", 2000, "r0"), ("n1", 2000, "r1"), ("n2", 2000, "r2"), ("n3", 2000, "r3")]);
    let c = gang_cycle(2, 1000, 2);
    let config =
        SchedulerConfig { percentage_of_placements_to_score: Some(25), ..SchedulerConfig::default() };
    let pf = crate::plugins::placement_framework(&config);
    let ctx = GroupContext { placements: &pf, algo: &FirstFit, config: &config };
    let mut obs = Counter(0);
    let out = schedule_pod_group(&ctx, &mut snap, &c, GroupHooks::default(), &mut obs);
    assert_eq!(chosen_racks(&snap, &out), ["r0"]);
    assert_eq!(obs.0, 1, "25% of 4 placements: stop after the first feasible one");
}

#[test]
fn prefilter_rejects_by_aggregate_and_names_the_resource() {
    let snap = snap_of(&[("n1", 2000, "r"), ("n2", 2000, "r")]);
    let c = gang_cycle(5, 1000, 5);
    let demand = Demand::new(&c);
    assert_eq!(prefilter(&snap, snap.node_ids(), &demand), Err(Rejection::UniformShort));
    let agg = sum_nodes(&snap, snap.node_ids());
    assert_eq!(Rejection::UniformShort.message(&snap, snap.node_ids(), &demand), "Insufficient cpu");
    assert_eq!(agg.allocatable.cpu, 4000);
    let c = gang_cycle(4, 1000, 4);
    assert_eq!(prefilter(&snap, snap.node_ids(), &Demand::new(&c)), Ok(()));
}

#[test]
fn prefilter_for_mixed_requests_sums_the_smallest() {
    let snap = snap_of(&[("n1", 2000, "r")]);
    let pods = vec![
        (0, pod("a", 1500, Some("pg"), None)),
        (1, pod("b", 500, Some("pg"), None)),
        (2, pod("c", 1000, Some("pg"), None)),
    ];
    let c = GroupCycle::new(group("pg", Some(2), Some("rack")), true, pods.clone(), vec![]);
    assert_eq!(prefilter(&snap, snap.node_ids(), &Demand::new(&c)), Ok(()), "500m + 1000m fit in 2 cpu");
    let c = GroupCycle::new(group("pg", Some(3), Some("rack")), true, pods, vec![]);
    assert_eq!(
        prefilter(&snap, snap.node_ids(), &Demand::new(&c)),
        Err(Rejection::Reason("Insufficient cpu".to_string()))
    );
}

#[test]
fn intersections_keep_only_shared_nodes() {
    let a = vec![
        Placement { name: "r1".into(), nodes: vec![NodeId(0), NodeId(1)].into() },
        Placement { name: "r2".into(), nodes: vec![NodeId(2)].into() },
    ];
    let b = vec![Placement { name: "z1".into(), nodes: vec![NodeId(1), NodeId(2)].into() }];
    let got = intersect_placements(&a, &b);
    assert_eq!(
        got,
        vec![
            Placement { name: "r1/z1".into(), nodes: vec![NodeId(1)].into() },
            Placement { name: "r2/z1".into(), nodes: vec![NodeId(2)].into() }
        ]
    );
}

proptest! {
    /// Counting copies gives the same verdict, pod count and order of evaluation as
    /// simulating the cycle, for uniform groups, with the real pod-level framework.
    #[test]
    fn counting_agrees_with_simulation(
        nodes in proptest::collection::vec((0i64..4000, 0usize..4, 0i64..3000), 1..12),
        n_pods in 1usize..10,
        cpu in 100i64..2000,
        min in 1i32..10,
        gang in any::<bool>(),
    ) {
        let racks = ["r0", "r1", "r2", "r3"];
        let mut snap = Snapshot::new();
        for (i, (c, r, used)) in nodes.iter().enumerate() {
            snap.upsert_node(node(&format!("n{i}"), *c, &[("rack", racks[*r])]));
            if *used > 0 {
                snap.upsert_pod(pod(&format!("e{i}"), *used, None, Some(&format!("n{i}"))));
            }
        }
        let pods: Vec<_> = (0..n_pods).map(|i| (i as u64, pod(&format!("p{i}"), cpu, Some("pg"), None))).collect();
        let g = group("pg", if gang { Some(min) } else { None }, Some("rack"));
        let c = GroupCycle::new(g, true, pods, vec![]);
        prop_assert!(crate::podgroup::is_uniform_node_local(&c, &snap));
        let config = SchedulerConfig::default();
        let fw = crate::plugins::pod_framework(&config);
        let pf = crate::plugins::placement_framework(&config);
        let ctx = GroupContext { placements: &pf, algo: &fw, config: &config };
        let placements = pf.generate(&snap, &c, &Placement { name: "".into(), nodes: snap.node_ids().into() }).unwrap().placements;
        let order: Vec<usize> = (0..placements.len()).collect();
        let plan = EvaluationPlan { placements: &placements, prefilter: None, devices: None, key: "rack", order: &order, to_find: usize::MAX, nominated_first: None };
        let counting = Counting { devices: None };
        let counted = evaluate_placements(&ctx, &mut snap, &c, &plan, Some(&counting), &mut NoopObserver);
        let simulated = evaluate_placements(&ctx, &mut snap, &c, &plan, None, &mut NoopObserver);
        prop_assert_eq!(counted.len(), simulated.len());
        for (a, b) in counted.iter().zip(&simulated) {
            prop_assert_eq!(a.idx, b.idx);
            prop_assert_eq!(a.feasible(), b.feasible(), "placement {}", placements[a.idx].name.clone());
            if b.feasible() {
                prop_assert_eq!(a.placed_pods.len(), b.placed_pods.len());
                prop_assert_eq!(a.scheduled_total, b.scheduled_total);
            }
            // The shortcut for identical members places them exactly as the
            // simulation does, and leaves the snapshot as found.
            let nodes = &placements[a.idx].nodes;
            let requested: Vec<i64> = snap.nodes().map(|n| n.requested.cpu).collect();
            let fast = crate::podgroup::run_uniform_group_in_nodes(&fw, &mut snap, &c, nodes, &pf.feasible);
            let after: Vec<i64> = snap.nodes().map(|n| n.requested.cpu).collect();
            prop_assert_eq!(requested, after);
            let mark = snap.checkpoint();
            let slow = run_group_in_nodes(&fw, &mut snap, &c, nodes, &pf.feasible, None);
            snap.rollback(mark);
            prop_assert_eq!(&fast.placed, &slow.placed);
            prop_assert_eq!(fast.failed.iter().map(|(i, f)| (*i, f.to_string())).collect::<Vec<_>>(), slow.failed.iter().map(|(i, f)| (*i, f.to_string())).collect::<Vec<_>>());
            prop_assert_eq!(fast.is_feasible(), slow.is_feasible());
        }
    }
}

proptest! {
    /// Every pod of a constrained group lands in one domain, a gang places at least
    /// minCount pods or nothing, and identical inputs give identical outcomes.
    #[test]
    fn constrained_groups_share_one_domain(
        nodes in proptest::collection::vec((500i64..4000, 0usize..4), 1..10),
        n_pods in 1usize..8,
        cpu in 100i64..2000,
        min in 1i32..8,
        gang in any::<bool>(),
    ) {
        let racks = ["r0", "r1", "r2", "r3"];
        let spec: Vec<(String, i64, &str)> =
            nodes.iter().enumerate().map(|(i, (c, r))| (format!("n{i}"), *c, racks[*r])).collect();
        let list: Vec<(&str, i64, &str)> = spec.iter().map(|(n, c, r)| (n.as_str(), *c, *r)).collect();
        let mut snap = snap_of(&list);
        let pods: Vec<_> = (0..n_pods).map(|i| (i as u64, pod(&format!("p{i}"), cpu, Some("pg"), None))).collect();
        let g = group("pg", if gang { Some(min) } else { None }, Some("rack"));
        let c = GroupCycle::new(g, true, pods, vec![]);
        let config = SchedulerConfig::default();
        let first = run(&mut snap, &c, &config);
        let second = run(&mut snap, &c, &config);
        prop_assert_eq!(&first, &second);
        if let GroupOutcome::Scheduled { assignments, .. } = &first {
            let mut domains: Vec<&str> =
                assignments.iter().map(|(_, n)| snap.node(*n).info.label("rack").unwrap_or("")).collect();
            domains.dedup();
            prop_assert_eq!(domains.len(), 1);
            if gang {
                prop_assert!(assignments.len() as i32 >= min);
            }
            prop_assert!(!assignments.is_empty());
        }
    }
}
