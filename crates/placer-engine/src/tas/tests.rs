//! The worked examples of seed 002, as specifications, plus properties every assignment
//! keeps. The 122 conformance scenarios run in `tests/kueue_tas.rs`.

use std::collections::BTreeMap;

use placer_api::gates::FeatureGates;

use super::*;
use crate::resources::Resources;

const HOST: &str = HOSTNAME_LEVEL;

fn lv(levels: &[&str]) -> Vec<String> {
    levels.iter().map(|l| l.to_string()).collect()
}

/// A node with room for `pods` one-cpu pods (and plenty of pod slots).
fn node(path: &[&str], pods: i64) -> TasNode {
    let free = Resources { cpu: pods * 1000, pods: 110, ..Default::default() };
    TasNode::new(path.join("/"), path.iter().map(|v| v.to_string()).collect(), free)
}

fn one_cpu() -> Resources {
    Resources { cpu: 1000, ..Default::default() }
}

fn gates(overrides: &[(Gate, bool)]) -> FeatureGates {
    FeatureGates::with(overrides.iter().copied())
}

fn solve(
    levels: &[String],
    nodes: &[TasNode],
    count: u32,
    request: &TopologyRequest,
    gates: &FeatureGates,
) -> Result<TasAssignment, TasFailure> {
    let req = one_cpu();
    find_assignment(&TasProblem {
        levels,
        nodes,
        worker_requests: &req,
        worker_count: count,
        leader: None,
        request,
        gates,
        algorithms: Default::default(),
    })
}

/// Pods per lowest-level value.
fn per_leaf(a: &TasAssignment) -> BTreeMap<String, u32> {
    a.worker.iter().map(|l| (l.values.last().cloned().unwrap_or_default(), l.count)).collect()
}

fn counts(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// Seed 002 "Computing the assignment / Example": a rack whose nodes hold 3, 3, 2 and 1
/// pods, and 7 pods.
mod rack_3_3_2_1 {
    use super::*;

    fn rack() -> (Vec<String>, Vec<TasNode>) {
        let levels = lv(&["rack", HOST]);
        let nodes =
            vec![node(&["r1", "a"], 3), node(&["r1", "b"], 3), node(&["r1", "c"], 2), node(&["r1", "d"], 1)];
        (levels, nodes)
    }

    #[test]
    fn best_fit_takes_the_two_largest_then_the_node_that_holds_exactly_the_last_pod() {
        let (levels, nodes) = rack();
        let a = solve(
            &levels,
            &nodes,
            7,
            &TopologyRequest::new(TopologyMode::Required(0)),
            &FeatureGates::default(),
        )
        .unwrap();
        assert_eq!(a.algorithm, Algorithm::BestFit);
        assert_eq!(per_leaf(&a), counts(&[("a", 3), ("b", 3), ("d", 1)]));
    }

    #[test]
    fn least_free_capacity_takes_1_2_3_then_1_on_the_last_node() {
        let (levels, nodes) = rack();
        let a = solve(
            &levels,
            &nodes,
            7,
            &TopologyRequest::new(TopologyMode::Unconstrained),
            &FeatureGates::default(),
        )
        .unwrap();
        assert_eq!(a.algorithm, Algorithm::LeastFreeCapacity);
        assert_eq!(per_leaf(&a), counts(&[("d", 1), ("c", 2), ("a", 3), ("b", 1)]));
    }

    fn solve_with(
        count: u32,
        mode: TopologyMode,
        algorithms: AlgorithmChoice,
        g: &FeatureGates,
    ) -> TasAssignment {
        let (levels, nodes) = rack();
        let req = one_cpu();
        find_assignment(&TasProblem {
            levels: &levels,
            nodes: &nodes,
            worker_requests: &req,
            worker_count: count,
            leader: None,
            request: &TopologyRequest::new(mode),
            gates: g,
            algorithms,
        })
        .unwrap()
    }

    #[test]
    fn the_profile_chooses_the_algorithm_per_kind_of_request() {
        let lfc = AlgorithmChoice { required: Some(Algorithm::LeastFreeCapacity), ..Default::default() };
        let a = solve_with(7, TopologyMode::Required(0), lfc, &FeatureGates::default());
        assert_eq!(a.algorithm, Algorithm::LeastFreeCapacity);
        assert_eq!(per_leaf(&a), counts(&[("d", 1), ("c", 2), ("a", 3), ("b", 1)]));
        // Only required requests changed.
        let a = solve_with(7, TopologyMode::Preferred(0), lfc, &FeatureGates::default());
        assert_eq!(a.algorithm, Algorithm::BestFit);

        let best = AlgorithmChoice { unconstrained: Some(Algorithm::BestFit), ..Default::default() };
        for mode in [TopologyMode::Unconstrained, TopologyMode::Implied] {
            let a = solve_with(7, mode, best, &FeatureGates::default());
            assert_eq!(a.algorithm, Algorithm::BestFit, "{mode:?}");
            assert_eq!(per_leaf(&a), counts(&[("a", 3), ("b", 3), ("d", 1)]));
        }

        let pref_lfc =
            AlgorithmChoice { preferred: Some(Algorithm::LeastFreeCapacity), ..Default::default() };
        let a = solve_with(7, TopologyMode::Preferred(0), pref_lfc, &FeatureGates::default());
        assert_eq!(a.algorithm, Algorithm::LeastFreeCapacity);
    }

    #[test]
    fn the_profile_wins_over_the_gates_and_unset_kinds_follow_them() {
        let g = gates(&[(Gate::TASProfileLeastFreeCapacity, true)]);
        let best = AlgorithmChoice { required: Some(Algorithm::BestFit), ..Default::default() };
        assert_eq!(solve_with(7, TopologyMode::Required(0), best, &g).algorithm, Algorithm::BestFit);
        assert_eq!(
            solve_with(7, TopologyMode::Preferred(0), best, &g).algorithm,
            Algorithm::LeastFreeCapacity
        );
        // Defaults reproduce every gate combination of SEMANTICS §5.
        let none = AlgorithmChoice::default();
        let default = FeatureGates::default();
        assert_eq!(none.resolve(TopologyMode::Required(1), &default), Algorithm::BestFit);
        assert_eq!(none.resolve(TopologyMode::Preferred(1), &default), Algorithm::BestFit);
        assert_eq!(none.resolve(TopologyMode::Unconstrained, &default), Algorithm::LeastFreeCapacity);
        assert_eq!(none.resolve(TopologyMode::SliceOnly, &default), Algorithm::LeastFreeCapacity);
        let balanced = gates(&[(Gate::TASBalancedPlacement, true)]);
        assert_eq!(none.resolve(TopologyMode::Preferred(1), &balanced), Algorithm::BalancedPlacement);
        assert_eq!(none.resolve(TopologyMode::Required(1), &balanced), Algorithm::BestFit);
        let bf = gates(&[(Gate::TASProfileBestFit, true)]);
        assert_eq!(none.resolve(TopologyMode::Implied, &bf), Algorithm::BestFit);
    }

    #[test]
    fn profile_names_are_checked() {
        let c =
            AlgorithmChoice::from_names(Some("LeastFreeCapacity"), Some("BalancedPlacement"), None).unwrap();
        assert_eq!(c.required, Some(Algorithm::LeastFreeCapacity));
        assert_eq!(c.preferred, Some(Algorithm::BalancedPlacement));
        assert_eq!(c.unconstrained, None);
        let e = AlgorithmChoice::from_names(None, Some("MostFreeCapacity"), None).unwrap_err();
        assert_eq!(
            e,
            "topologyAlgorithms.preferred: unknown algorithm \"MostFreeCapacity\"; supported values: BestFit, \
             LeastFreeCapacity, BalancedPlacement"
        );
        let e = AlgorithmChoice::from_names(Some("BalancedPlacement"), None, None).unwrap_err();
        assert!(
            e.starts_with(
                "topologyAlgorithms.required: BalancedPlacement applies to preferred requests only"
            ),
            "{e}"
        );
        let e = AlgorithmChoice::from_names(None, None, Some("BalancedPlacement")).unwrap_err();
        assert!(e.starts_with("topologyAlgorithms.unconstrained:"), "{e}");
    }

    #[test]
    fn the_best_fit_profile_gate_makes_unconstrained_requests_best_fit() {
        let (levels, nodes) = rack();
        let g = gates(&[(Gate::TASProfileBestFit, true)]);
        let a = solve(&levels, &nodes, 7, &TopologyRequest::new(TopologyMode::Unconstrained), &g).unwrap();
        assert_eq!(a.algorithm, Algorithm::BestFit);
        assert_eq!(per_leaf(&a), counts(&[("a", 3), ("b", 3), ("d", 1)]));
    }

    #[test]
    fn the_least_free_capacity_profile_gate_makes_required_requests_least_free_capacity() {
        // Kueue's useLeastFreeCapacityAlgorithm: TASProfileLeastFreeCapacity || (unconstrained && mixed).
        let (levels, nodes) = rack();
        let g = gates(&[(Gate::TASProfileLeastFreeCapacity, true)]);
        let a = solve(&levels, &nodes, 7, &TopologyRequest::new(TopologyMode::Required(0)), &g).unwrap();
        assert_eq!(a.algorithm, Algorithm::LeastFreeCapacity);
        assert_eq!(per_leaf(&a), counts(&[("d", 1), ("c", 2), ("a", 3), ("b", 1)]));
    }

    #[test]
    fn seven_pods_do_not_fit_once_a_node_of_three_is_full() {
        let (levels, mut nodes) = rack();
        nodes[0].free.cpu = 0;
        let err = solve(
            &levels,
            &nodes,
            7,
            &TopologyRequest::new(TopologyMode::Required(0)),
            &FeatureGates::default(),
        )
        .unwrap_err();
        assert_eq!(err.kind, FailureKind::NotFit { fit: 6, requested: 7 });
        assert!(
            err.message.starts_with("topology \"default\" allows to fit only 6 out of 7 pod(s)"),
            "{}",
            err.message
        );
        assert!(err.message.contains("resource \"cpu\": 1"), "{}", err.message);
    }
}

/// Seed 002 "Two-level Topology Aware scheduling / Example": hosts holding 6, 5, 4, 3 and
/// 2 pods, slices of 2 pods per host.
mod slice_table {
    use super::*;

    fn rack() -> (Vec<String>, Vec<TasNode>) {
        let levels = lv(&["rack", HOST]);
        let nodes = [6, 5, 4, 3, 2].iter().map(|&c| node(&["r1", &format!("n{c}")], c)).collect();
        (levels, nodes)
    }

    #[test]
    fn best_fit_12_pods_prefers_the_tight_4_over_the_5_and_optimises_the_last_host() {
        let (levels, nodes) = rack();
        let request = TopologyRequest::new(TopologyMode::Required(0)).with_slices(1, 2);
        let a = solve(&levels, &nodes, 12, &request, &FeatureGates::default()).unwrap();
        assert_eq!(per_leaf(&a), counts(&[("n6", 6), ("n4", 4), ("n2", 2)]));
    }

    #[test]
    fn least_free_capacity_10_pods_fills_from_the_smallest_hosts() {
        let (levels, nodes) = rack();
        let request = TopologyRequest::new(TopologyMode::SliceOnly).with_slices(1, 2);
        let a = solve(&levels, &nodes, 10, &request, &FeatureGates::default()).unwrap();
        assert_eq!(a.algorithm, Algorithm::LeastFreeCapacity);
        assert_eq!(per_leaf(&a), counts(&[("n5", 2), ("n4", 4), ("n3", 2), ("n2", 2)]));
    }

    #[test]
    fn slices_are_never_split_across_hosts() {
        // Five hosts of 3 hold 15 pods but only five slices of 2.
        let levels = lv(&["rack", HOST]);
        let nodes: Vec<TasNode> = (0..5).map(|i| node(&["r1", &format!("h{i}")], 3)).collect();
        let request = TopologyRequest::new(TopologyMode::Required(0)).with_slices(1, 2);
        let err = solve(&levels, &nodes, 12, &request, &FeatureGates::default()).unwrap_err();
        assert_eq!(err.kind, FailureKind::NotFit { fit: 5, requested: 6 });
        assert!(err.message.contains("5 out of 6 slice(s)"), "{}", err.message);
    }
}

/// Seed 002 "Balanced placement / Example": block, rack, hostname, preferred rack. Rows are
/// blocks, each a list of racks, each a list of host capacities.
mod balanced_table {
    use super::*;

    fn cluster(blocks: &[&[&[i64]]]) -> (Vec<String>, Vec<TasNode>) {
        let mut nodes = Vec::new();
        for (b, racks) in blocks.iter().enumerate() {
            for (r, hosts) in racks.iter().enumerate() {
                for (h, &cap) in hosts.iter().enumerate() {
                    nodes.push(node(
                        &[&format!("b{b}"), &format!("b{b}-r{r}"), &format!("b{b}-r{r}-h{h}")],
                        cap,
                    ));
                }
            }
        }
        (lv(&["block", "rack", HOST]), nodes)
    }

    fn balanced(blocks: &[&[&[i64]]], count: u32, slice_size: u32) -> BTreeMap<String, u32> {
        let (levels, nodes) = cluster(blocks);
        let mut request = TopologyRequest::new(TopologyMode::Preferred(1));
        if slice_size > 1 {
            request = request.with_slices(2, slice_size);
        }
        let a =
            solve(&levels, &nodes, count, &request, &gates(&[(Gate::TASBalancedPlacement, true)])).unwrap();
        assert_eq!(a.algorithm, Algorithm::BalancedPlacement);
        per_leaf(&a)
    }

    #[test]
    fn row_1_two_racks_of_15_split_25_as_13_and_12() {
        assert_eq!(balanced(&[&[&[15], &[15]]], 25, 1), counts(&[("b0-r0-h0", 13), ("b0-r1-h0", 12)]));
    }

    #[test]
    fn row_2_one_rack_15_13_10_splits_23_as_12_and_11() {
        assert_eq!(balanced(&[&[&[15, 13, 10]]], 23, 1), counts(&[("b0-r0-h0", 12), ("b0-r0-h1", 11)]));
    }

    #[test]
    fn row_3_prefers_the_rack_with_the_higher_threshold() {
        assert_eq!(
            balanced(&[&[&[20, 10], &[15, 15]]], 22, 1),
            counts(&[("b0-r1-h0", 11), ("b0-r1-h1", 11)])
        );
    }

    #[test]
    fn row_4_twenty_pods_fill_the_20_host() {
        assert_eq!(balanced(&[&[&[20, 10], &[15, 15]]], 20, 1), counts(&[("b0-r0-h0", 20)]));
    }

    #[test]
    fn row_5_prefers_the_more_balanced_rack() {
        assert_eq!(
            balanced(&[&[&[10, 5], &[5, 5, 5]]], 15, 1),
            counts(&[("b0-r1-h0", 5), ("b0-r1-h1", 5), ("b0-r1-h2", 5)])
        );
    }

    #[test]
    fn row_6_prefers_the_block_where_the_request_fits_in_one_rack() {
        assert_eq!(
            balanced(&[&[&[15], &[15]], &[&[15, 15]]], 25, 1),
            counts(&[("b1-r0-h0", 13), ("b1-r0-h1", 12)])
        );
    }

    #[test]
    fn row_7_host_slices_of_5() {
        assert_eq!(
            balanced(&[&[&[15], &[15], &[15, 15]]], 25, 5),
            counts(&[("b0-r2-h0", 15), ("b0-r2-h1", 10)])
        );
    }

    #[test]
    fn without_the_gate_best_fit_packs_instead() {
        let (levels, nodes) = cluster(&[&[&[15], &[15]]]);
        let a = solve(
            &levels,
            &nodes,
            25,
            &TopologyRequest::new(TopologyMode::Preferred(1)),
            &FeatureGates::default(),
        )
        .unwrap();
        assert_eq!(a.algorithm, Algorithm::BestFit);
        assert_eq!(per_leaf(&a), counts(&[("b0-r0-h0", 15), ("b0-r1-h0", 10)]));
    }
}

/// Seed 002 "Multi-level Topology Aware scheduling / Example": blocks of 2 racks of 4
/// hosts of 8 pods; 64 pods in slices of 32 per block and 16 per rack.
#[test]
fn multi_level_64_pods_in_32_and_16_slices_put_8_on_every_host_of_one_block() {
    let levels = lv(&["block", "rack", HOST]);
    let mut nodes = Vec::new();
    for b in 0..2 {
        for r in 0..2 {
            for h in 0..4 {
                nodes.push(node(&[&format!("b{b}"), &format!("b{b}-r{r}"), &format!("b{b}-r{r}-h{h}")], 8));
            }
        }
    }
    let request = TopologyRequest {
        slices: vec![SliceLayer { level: 0, size: 32 }, SliceLayer { level: 1, size: 16 }],
        multi_layer: true,
        ..TopologyRequest::new(TopologyMode::Required(0))
    };
    let a = solve(&levels, &nodes, 64, &request, &FeatureGates::default()).unwrap();
    assert_eq!(a.worker.len(), 8);
    assert!(a.worker.iter().all(|l| l.count == 8 && l.values[0] == "b0"), "{a:?}");
}

#[test]
fn ranks_map_to_leaves_in_value_path_order() {
    let levels = lv(&["rack", HOST]);
    let nodes = vec![node(&["r1", "b"], 2), node(&["r1", "a"], 1), node(&["r1", "c"], 3)];
    let a =
        solve(&levels, &nodes, 6, &TopologyRequest::new(TopologyMode::Required(0)), &FeatureGates::default())
            .unwrap();
    let leaves: Vec<Option<&str>> =
        (0..7).map(|r| a.worker_leaf_of_rank(r).map(|i| a.worker[i].values[1].as_str())).collect();
    assert_eq!(leaves, [Some("a"), Some("b"), Some("b"), Some("c"), Some("c"), Some("c"), None]);
}

#[test]
fn multi_layer_failures_say_how_many_slices_fit_per_layer() {
    // Racks of two hosts of 3: a host holds one pair, a rack one group of 4 (not 6).
    let levels = lv(&["block", "rack", HOST]);
    let nodes: Vec<TasNode> =
        (0..4).map(|i| node(&["b1", &format!("r{}", i / 2), &format!("h{i}")], 3)).collect();
    let request = TopologyRequest {
        slices: vec![SliceLayer { level: 1, size: 4 }, SliceLayer { level: 2, size: 2 }],
        multi_layer: true,
        ..TopologyRequest::new(TopologyMode::Required(0))
    };
    let a = solve(&levels, &nodes, 8, &request, &FeatureGates::default()).unwrap();
    assert_eq!(per_leaf(&a), counts(&[("h0", 2), ("h1", 2), ("h2", 2), ("h3", 2)]));
    let err = solve(&levels, &nodes, 12, &request, &FeatureGates::default()).unwrap_err();
    assert_eq!(
        err.message,
        "topology \"default\" doesn't allow to fit; 2/3 slice(s) fit on level rack; 4/6 slice(s) fit on level kubernetes.io/hostname"
    );
}

#[test]
fn slice_only_requests_start_at_the_highest_level() {
    let levels = lv(&["block", HOST]);
    let nodes = vec![node(&["b1", "x1"], 4), node(&["b2", "x2"], 2), node(&["b2", "x3"], 2)];
    let request = TopologyRequest::new(TopologyMode::SliceOnly).with_slices(1, 2);
    // LeastFreeCapacity: the block with fewer slices that still holds both (b1: 2 slices,
    // b2: 2 slices, fewer pods first: b2 has 4 pods, b1 4; by name b1).
    let a = solve(&levels, &nodes, 4, &request, &FeatureGates::default()).unwrap();
    assert_eq!(a.algorithm, Algorithm::LeastFreeCapacity);
    assert_eq!(a.fit_level, 0);
    assert_eq!(a.worker_pods(), 4);
    assert!(a.worker.iter().all(|l| l.count % 2 == 0), "{a:?}");
}

#[test]
fn a_preferred_level_climbs_to_the_parent_then_spreads() {
    let levels = lv(&["block", "rack", HOST]);
    let nodes = vec![
        node(&["b1", "r1", "x1"], 2),
        node(&["b1", "r2", "x2"], 2),
        node(&["b2", "r1", "x3"], 3),
        node(&["b2", "r2", "x4"], 1),
    ];
    let request = TopologyRequest::new(TopologyMode::Preferred(1));
    // 4 pods: no rack holds them; block b1 (2 + 2) and b2 (3 + 1) both do: the pods go to
    // the block that fits, found at the block level.
    let a = solve(&levels, &nodes, 4, &request, &FeatureGates::default()).unwrap();
    assert_eq!(a.fit_level, 0);
    assert_eq!(a.worker_pods(), 4);
    // 8 pods: no block either; spread over the whole cluster.
    let a = solve(&levels, &nodes, 8, &request, &FeatureGates::default()).unwrap();
    assert_eq!(per_leaf(&a), counts(&[("x1", 2), ("x2", 2), ("x3", 3), ("x4", 1)]));
    // 9 pods do not fit anywhere.
    let err = solve(&levels, &nodes, 9, &request, &FeatureGates::default()).unwrap_err();
    assert_eq!(err.kind, FailureKind::NotFit { fit: 8, requested: 9 });
}

#[test]
fn a_leader_goes_with_its_workers_into_one_domain() {
    let levels = lv(&["rack", HOST]);
    let nodes = vec![node(&["r1", "x1"], 2), node(&["r2", "x2"], 3), node(&["r2", "x3"], 1)];
    let worker = one_cpu();
    let leader = one_cpu();
    let request = TopologyRequest::new(TopologyMode::Required(0));
    let g = FeatureGates::default();
    let a = find_assignment(&TasProblem {
        levels: &levels,
        nodes: &nodes,
        worker_requests: &worker,
        worker_count: 3,
        leader: Some((&leader, 1)),
        request: &request,
        gates: &g,
        algorithms: Default::default(),
    })
    .unwrap();
    // Rack r2 (3 + 1) holds the leader and the three workers; the leader takes a slot of
    // x2, whose two others go to workers, and x3 takes the last worker.
    let leader_leaves: Vec<&str> = a.leader.iter().map(|l| l.values[1].as_str()).collect();
    assert_eq!(leader_leaves, ["x2"]);
    assert_eq!(per_leaf(&a), counts(&[("x2", 2), ("x3", 1)]));
}

#[test]
fn filtered_nodes_hold_nothing_and_the_tree_can_be_reused() {
    let levels = lv(&["rack", HOST]);
    let mut nodes = vec![node(&["r1", "x1"], 4), node(&["r1", "x2"], 4)];
    let tree = DomainTree::new(&levels, &nodes).unwrap();
    let req = one_cpu();
    let request = TopologyRequest::new(TopologyMode::Required(0));
    let g = FeatureGates::default();
    let run = |nodes: &[TasNode]| {
        find_assignment_in(
            &tree,
            &TasProblem {
                levels: &levels,
                nodes,
                worker_requests: &req,
                worker_count: 4,
                leader: None,
                request: &request,
                gates: &g,
                algorithms: Default::default(),
            },
        )
    };
    let a = run(&nodes).unwrap();
    assert_eq!(per_leaf(&a), counts(&[("x1", 4)]));
    nodes[0].worker_ok = false;
    let a = run(&nodes).unwrap();
    assert_eq!(per_leaf(&a), counts(&[("x2", 4)]));
    assert_eq!(a.worker[0].nodes, [1]);
}

#[test]
fn assignments_are_deterministic_whatever_the_node_order() {
    let levels = lv(&["block", "rack", HOST]);
    let mut nodes = Vec::new();
    for b in 0..3 {
        for r in 0..3 {
            for h in 0..3 {
                nodes.push(node(&[&format!("b{b}"), &format!("r{r}"), &format!("h{b}{r}{h}")], 2));
            }
        }
    }
    let request = TopologyRequest::new(TopologyMode::Preferred(1));
    let forward = solve(&levels, &nodes, 7, &request, &FeatureGates::default()).unwrap();
    nodes.reverse();
    let backward = solve(&levels, &nodes, 7, &request, &FeatureGates::default()).unwrap();
    assert_eq!(per_leaf(&forward), per_leaf(&backward));
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    fn cluster() -> impl Strategy<Value = Vec<i64>> {
        proptest::collection::vec(0i64..6, 8)
    }

    proptest! {
        /// Whatever the mode, an assignment gives exactly the requested pods, never more
        /// to a node than it holds, and a required level is one domain.
        #[test]
        fn assignments_respect_capacity_count_and_required_level(
            caps in cluster(),
            count in 1u32..30,
            mode in 0usize..4,
            balanced in any::<bool>(),
        ) {
            let levels = lv(&["block", "rack", HOST]);
            let nodes: Vec<TasNode> = caps
                .iter()
                .enumerate()
                .map(|(i, &c)| node(&[&format!("b{}", i / 4), &format!("r{}", i / 2), &format!("h{i}")], c))
                .collect();
            let mode = [TopologyMode::Required(1), TopologyMode::Preferred(1), TopologyMode::Unconstrained, TopologyMode::Required(0)][mode];
            let g = gates(&[(Gate::TASBalancedPlacement, balanced)]);
            match solve(&levels, &nodes, count, &TopologyRequest::new(mode), &g) {
                Ok(a) => {
                    prop_assert_eq!(a.worker_pods(), count as u64);
                    for leaf in &a.worker {
                        let n = &nodes[leaf.nodes[0]];
                        prop_assert!(leaf.count as i64 * 1000 <= n.free.cpu);
                    }
                    if let TopologyMode::Required(l) = mode {
                        let first = &a.worker[0].values[l];
                        prop_assert!(a.worker.iter().all(|w| &w.values[l] == first));
                    }
                }
                Err(e) => {
                    let total: i64 = caps.iter().sum();
                    if matches!(mode, TopologyMode::Unconstrained | TopologyMode::Preferred(_)) {
                        prop_assert!(total < count as i64, "{}", e);
                    }
                }
            }
        }
    }
}

/// The benchmark shape: a 1,024-pod gang preferring a rack on 10,000 nodes (16 blocks x 25
/// racks x 25 hosts). Timing is printed, not asserted (shared cores); run with
/// `cargo test --release -p placer-engine tas::tests::large -- --ignored --nocapture`.
#[test]
#[ignore = "timing; run in release mode"]
fn large_cluster_timing() {
    let levels = lv(&["block", "rack", HOST]);
    let mut nodes = Vec::with_capacity(10_000);
    for b in 0..16 {
        for r in 0..25 {
            for h in 0..25 {
                let i = (b * 625 + r * 25 + h) as i64;
                let mut free = Resources { cpu: 64_000, memory: 512 << 30, pods: 110, ..Default::default() };
                free.set("nvidia.com/gpu", (i * 7919) % 9);
                let path = [
                    format!("block-{b:02}"),
                    format!("rack-{b:02}-{r:02}"),
                    format!("host-{b:02}-{r:02}-{h:02}"),
                ];
                nodes.push(TasNode::new(path[2].clone(), path.to_vec(), free));
            }
        }
    }
    let mut req = Resources { cpu: 4_000, memory: 16 << 30, ..Default::default() };
    req.set("nvidia.com/gpu", 1);
    for (name, request) in [
        ("preferred rack", TopologyRequest::new(TopologyMode::Preferred(1))),
        ("required block", TopologyRequest::new(TopologyMode::Required(0))),
        ("unconstrained", TopologyRequest::new(TopologyMode::Unconstrained)),
        ("block + host slices of 4", TopologyRequest::new(TopologyMode::Required(0)).with_slices(2, 4)),
        ("balanced, preferred rack", TopologyRequest::new(TopologyMode::Preferred(1))),
    ] {
        let g = gates(&[(Gate::TASBalancedPlacement, name.starts_with("balanced"))]);
        let problem = TasProblem {
            levels: &levels,
            nodes: &nodes,
            worker_requests: &req,
            worker_count: 1024,
            leader: None,
            request: &request,
            gates: &g,
            algorithms: Default::default(),
        };
        let tree_start = std::time::Instant::now();
        let tree = DomainTree::new(&levels, &nodes).unwrap();
        let tree_time = tree_start.elapsed();
        let mut times = Vec::new();
        let mut result = None;
        let runs = if name.starts_with("balanced") { 3 } else { 50 };
        for _ in 0..runs {
            let start = std::time::Instant::now();
            result = Some(find_assignment_in(&tree, &problem));
            times.push(start.elapsed());
        }
        times.sort();
        let a = result.unwrap().unwrap();
        assert_eq!(a.worker_pods(), 1024);
        let full_start = std::time::Instant::now();
        find_assignment(&problem).unwrap();
        println!(
            "{name}: tree {tree_time:?}; assignment p50 {:?}, max {:?}; tree + assignment {:?}; {} leaves",
            times[runs / 2],
            times[runs - 1],
            full_start.elapsed(),
            a.worker.len()
        );
    }
}
