use super::*;
use crate::plugins::node_resources::fit_count;
use crate::plugins::testing::{node, pod, snapshot_with};
use crate::SchedulerConfig;
use proptest::prelude::*;
use std::sync::Arc;

/// The pod `p` of the generated sizes: `cpu` halves of a core, `mem` halves of a GiB,
/// `gpus` GPUs.
fn arb_pod(cpu: u32, mem: u32, gpus: u32) -> crate::plugins::testing::PodBuilder {
    let b = pod("p").cpu(&format!("{}m", cpu * 500)).mem(&format!("{}Mi", mem * 512));
    if gpus > 0 {
        b.gpu(gpus)
    } else {
        b
    }
}

fn fw() -> Framework {
    crate::plugins::pod_framework(&SchedulerConfig::default())
}

#[test]
fn fit_error_counts_the_first_failing_filter_per_node_like_kube() {
    let mut nodes = Vec::new();
    for i in 0..4 {
        nodes.push(node(&format!("t{i}")).cpu("8").taint("key", "value", "NoSchedule").build());
    }
    for i in 0..8 {
        nodes.push(node(&format!("s{i}")).cpu("1").build());
    }
    let snap = snapshot_with(nodes, vec![]);
    let err = find_node(&fw(), &snap, &pod("p").cpu("2").build(), snap.node_ids()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "0/12 nodes are available: 4 node(s) had untolerated taint {key: value}, 8 Insufficient cpu."
    );
    assert_eq!(err.preemptable_nodes.len(), 8, "only resource rejections are preemptable");
    let names: Vec<&str> = err.preemptable_nodes.iter().map(|&id| snap.node(id).name()).collect();
    assert!(names.iter().all(|n| n.starts_with('s')));
}

#[test]
fn fit_error_parts_sort_as_strings() {
    let mut e = FitError { num_nodes: 12, ..FitError::default() };
    e.add_n("node(s) had untolerated taint {a: b}", 2);
    e.add_n("Insufficient cpu", 10);
    assert_eq!(
        e.to_string(),
        "0/12 nodes are available: 10 Insufficient cpu, 2 node(s) had untolerated taint {a: b}."
    );
    e.post_message =
        Some("preemption: 0/12 nodes are available: 12 No preemption victims found for incoming pod".into());
    assert_eq!(
        e.to_string(),
        "0/12 nodes are available: 10 Insufficient cpu, 2 node(s) had untolerated taint {a: b}. \
         preemption: 0/12 nodes are available: 12 No preemption victims found for incoming pod."
    );
}

#[test]
fn a_node_can_contribute_several_reasons() {
    let snap = snapshot_with(vec![node("a").cpu("1").mem("1Gi").build()], vec![]);
    let err = find_node(&fw(), &snap, &pod("p").cpu("2").mem("2Gi").build(), snap.node_ids()).unwrap_err();
    assert_eq!(err.to_string(), "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.");
}

#[test]
fn ties_go_to_the_first_node_in_the_given_order() {
    let snap = snapshot_with(vec![node("a").cpu("4").build(), node("b").cpu("4").build()], vec![]);
    let p = pod("p").cpu("1").build();
    let ids = snap.node_ids().to_vec();
    assert_eq!(find_node(&fw(), &snap, &p, &ids), Ok(ids[0]));
    let reversed: Vec<NodeId> = ids.iter().rev().copied().collect();
    assert_eq!(find_node(&fw(), &snap, &p, &reversed), Ok(ids[1]));
}

#[test]
fn least_allocated_default_spreads_pods() {
    let snap = snapshot_with(
        vec![node("a").cpu("4").mem("4Gi").build(), node("b").cpu("4").mem("4Gi").build()],
        vec![pod("old").cpu("2").mem("2Gi").on("a").build()],
    );
    assert_eq!(
        find_node(&fw(), &snap, &pod("p").cpu("1").mem("1Gi").build(), snap.node_ids()),
        snap.node_id("b").ok_or_else(FitError::default)
    );
}

#[test]
fn most_allocated_packs_pods() {
    let config = SchedulerConfig {
        node_resources_fit_strategy: crate::config::ScoringStrategy::most_allocated(),
        ..SchedulerConfig::default()
    };
    let fw = crate::plugins::pod_framework(&config);
    let snap = snapshot_with(
        vec![node("a").cpu("4").mem("4Gi").build(), node("b").cpu("4").mem("4Gi").build()],
        vec![pod("old").cpu("2").mem("2Gi").on("b").build()],
    );
    assert_eq!(
        find_node(&fw, &snap, &pod("p").cpu("1").mem("1Gi").build(), snap.node_ids()),
        Ok(snap.node_id("b").unwrap())
    );
}

#[test]
fn assumed_pods_use_capacity() {
    let mut snap = snapshot_with(vec![node("a").cpu("2").build()], vec![]);
    let a = snap.node_ids()[0];
    snap.assume(Arc::new(pod("g0").cpu("2").build()), a);
    let err = find_node(&fw(), &snap, &pod("g1").cpu("1").build(), &[a]).unwrap_err();
    assert_eq!(err.to_string(), "0/1 nodes are available: 1 Insufficient cpu.");
    assert_eq!(err.preemptable_nodes, vec![a]);
}

#[test]
fn too_many_pods() {
    let snap = snapshot_with(vec![node("a").pods(1).build()], vec![pod("old").on("a").build()]);
    let st = filter_node(&fw(), &snap, &pod("p").build(), snap.node_ids()[0]);
    assert_eq!((st.code, st.reasons), (Code::Unschedulable, vec!["Too many pods".to_string()]));
}

#[test]
fn feasible_nodes_to_find_follows_kube_scheduler() {
    assert_eq!(num_feasible_nodes_to_find(None, 50), 50);
    assert_eq!(num_feasible_nodes_to_find(None, 1000), 420);
    assert_eq!(num_feasible_nodes_to_find(None, 5000), 500);
    assert_eq!(num_feasible_nodes_to_find(None, 50_000), 2500);
    assert_eq!(num_feasible_nodes_to_find(Some(100), 5000), 5000);
    assert_eq!(num_feasible_nodes_to_find(Some(1), 5000), 100);
}

#[test]
fn sampled_search_stops_early_and_reports_what_it_examined() {
    let nodes: Vec<_> = (0..10).map(|i| node(&format!("n{i}")).cpu("4").mem("8Gi").build()).collect();
    let snap = snapshot_with(nodes, vec![]);
    let p = pod("p").cpu("1").mem("1Gi").build();
    let ids = snap.node_ids().to_vec();
    let (chosen, examined) = find_node_sampled(&fw(), &snap, &p, &ids, 7, 2);
    assert_eq!(examined, 2);
    assert!(chosen.is_ok());
    let (all, examined) = find_node_sampled(&fw(), &snap, &pod("big").cpu("9").build(), &ids, 3, 2);
    assert_eq!(examined, 10, "an unschedulable pod is checked against every node");
    assert_eq!(all.unwrap_err().num_nodes, 10);
}

#[test]
fn no_nodes_given() {
    let snap = snapshot_with(vec![], vec![]);
    let err = find_node(&fw(), &snap, &pod("p").build(), &[]).unwrap_err();
    assert_eq!(err.num_nodes, 0);
}

#[test]
fn score_nodes_reports_totals_in_order() {
    let snap = snapshot_with(
        vec![node("a").cpu("4").mem("4Gi").build(), node("b").cpu("4").mem("4Gi").build()],
        vec![pod("old").cpu("2").mem("2Gi").on("a").build()],
    );
    let scored = score_nodes(&fw(), &snap, &pod("p").cpu("1").mem("1Gi").build(), snap.node_ids()).unwrap();
    assert_eq!(scored.len(), 2);
    assert!(scored[1].1 > scored[0].1);
}

/// Nodes (cpu cores, memory GiB, pod slots), bound pods (node index, cpu and memory in
/// half units), and the incoming pod's (cpu, memory) in half units.
type Cluster = (Vec<(u32, u32, u32)>, Vec<(usize, u32, u32)>, (u32, u32));

fn arb_cluster() -> impl Strategy<Value = Cluster> {
    let nodes = prop::collection::vec((1u32..16, 1u32..16, 1u32..6), 1..8);
    nodes.prop_flat_map(|nodes| {
        let n = nodes.len();
        let pods = prop::collection::vec((0..n, 0u32..8, 0u32..8), 0..12);
        (Just(nodes), pods, (0u32..10, 0u32..10))
    })
}

fn build(nodes: &[(u32, u32, u32)], pods: &[(usize, u32, u32)]) -> Snapshot {
    let ns = nodes
        .iter()
        .enumerate()
        .map(|(i, &(cpu, mem, slots))| {
            node(&format!("n{i}")).cpu(&cpu.to_string()).mem(&format!("{mem}Gi")).pods(slots).build()
        })
        .collect();
    snapshot_with(ns, bound_pods(pods))
}

/// Pods bound to `n{node}` with (cpu, memory) in half units, as [`arb_cluster`] draws them.
fn bound_pods(pods: &[(usize, u32, u32)]) -> Vec<PodInfo> {
    pods.iter()
        .enumerate()
        .map(|(i, &(n, cpu, mem))| {
            pod(&format!("e{i}"))
                .cpu(&format!("{}m", cpu * 500))
                .mem(&format!("{}Mi", mem * 512))
                .on(&format!("n{n}"))
                .build()
        })
        .collect()
}

/// Nodes in zones with optional taints, pods with app labels, and an incoming pod with a
/// spread constraint, anti-affinity and a toleration chosen at random.
#[derive(Debug, Clone)]
struct Constrained {
    nodes: Vec<(u32, u8, bool)>,
    pods: Vec<(usize, u8)>,
    incoming: (u8, u8, bool),
}

fn arb_constrained() -> impl Strategy<Value = Constrained> {
    prop::collection::vec((1u32..6, 0u8..3, any::<bool>()), 1..8).prop_flat_map(|nodes| {
        let n = nodes.len();
        (Just(nodes), prop::collection::vec((0..n, 0u8..3), 0..12), (0u8..3, 0u8..4, any::<bool>()))
            .prop_map(|(nodes, pods, incoming)| Constrained { nodes, pods, incoming })
    })
}

fn build_constrained(c: &Constrained) -> (Snapshot, PodInfo) {
    use crate::plugins::testing::{affinity_term, match_labels, spread};
    let ns = c
        .nodes
        .iter()
        .enumerate()
        .map(|(i, &(cpu, zone, tainted))| {
            let b = node(&format!("n{i}"))
                .cpu(&cpu.to_string())
                .label("kubernetes.io/hostname", &format!("n{i}"))
                .label("zone", &format!("z{zone}"));
            if tainted {
                b.taint("dedicated", "x", "NoSchedule").build()
            } else {
                b.build()
            }
        })
        .collect();
    let ps = c
        .pods
        .iter()
        .enumerate()
        .map(|(i, &(n, app))| {
            pod(&format!("e{i}")).cpu("1").label("app", &format!("a{app}")).on(&format!("n{n}")).build()
        })
        .collect();
    let (app, kind, tolerate) = c.incoming;
    let app_label = format!("a{app}");
    let mut p = pod("p").cpu("1").label("app", &app_label);
    let sel = || match_labels(&[("app", app_label.as_str())]);
    p = match kind {
        0 => p.spread(spread(1, "zone", "DoNotSchedule", sel())),
        1 => p.pod_anti_affinity(affinity_term("kubernetes.io/hostname", sel())),
        2 => p.pod_affinity(affinity_term("zone", sel())),
        _ => p.spread(spread(1, "zone", "ScheduleAnyway", sel())),
    };
    if tolerate {
        p = p.toleration("dedicated", "Exists", "", "NoSchedule");
    }
    (snapshot_with(ns, ps), p.build())
}

proptest! {
    #[test]
    fn the_chosen_node_passes_every_filter(c in arb_constrained()) {
        let (snap, p) = build_constrained(&c);
        let fw = fw();
        let feasible = feasible_nodes(&fw, &snap, &p, snap.node_ids());
        match find_node(&fw, &snap, &p, snap.node_ids()) {
            Ok(id) => {
                prop_assert!(filter_node(&fw, &snap, &p, id).is_success());
                prop_assert!(feasible.unwrap_or_default().contains(&id));
                prop_assert!(fit_count(&snap, &p, id) >= 1);
            }
            Err(e) => {
                prop_assert!(feasible.is_err());
                prop_assert_eq!(e.reasons.values().sum::<usize>() >= snap.num_nodes(), true);
                for &id in snap.node_ids() {
                    prop_assert!(!filter_node(&fw, &snap, &p, id).is_success());
                }
            }
        }
    }

    #[test]
    fn constrained_decisions_are_deterministic(c in arb_constrained()) {
        let (a, pa) = build_constrained(&c);
        let (b, pb) = build_constrained(&c);
        let ra = find_node(&fw(), &a, &pa, a.node_ids()).map(|id| a.node(id).name().to_string()).map_err(|e| e.to_string());
        let rb = find_node(&fw(), &b, &pb, b.node_ids()).map(|id| b.node(id).name().to_string()).map_err(|e| e.to_string());
        prop_assert_eq!(ra, rb);
    }

    #[test]
    fn the_chosen_node_never_exceeds_its_resources((nodes, pods, (cpu, mem)) in arb_cluster()) {
        let snap = build(&nodes, &pods);
        let p = arb_pod(cpu, mem, 0).build();
        if let Ok(id) = find_node(&fw(), &snap, &p, snap.node_ids()) {
            let n = snap.node(id);
            let alloc = &n.info.allocatable;
            prop_assert!(n.requested.cpu + p.requests.cpu <= alloc.cpu || p.requests.cpu == 0);
            prop_assert!(n.requested.memory + p.requests.memory <= alloc.memory || p.requests.memory == 0);
            prop_assert!(n.requested.pods < alloc.pods);
            prop_assert!(fit_count(&snap, &p, id) >= 1);
        } else {
            for &id in snap.node_ids() {
                prop_assert_eq!(fit_count(&snap, &p, id), 0);
            }
        }
    }

    #[test]
    fn identical_inputs_give_identical_results((nodes, pods, (cpu, mem)) in arb_cluster()) {
        let p = arb_pod(cpu, mem, 0).build();
        let a = build(&nodes, &pods);
        let b = build(&nodes, &pods);
        let ra = find_node(&fw(), &a, &p, a.node_ids()).map(|id| a.node(id).name().to_string()).map_err(|e| e.to_string());
        let rb = find_node(&fw(), &b, &p, b.node_ids()).map(|id| b.node(id).name().to_string()).map_err(|e| e.to_string());
        prop_assert_eq!(ra, rb);
    }

    /// The shortcut for identical copies lands every copy where a full search per copy
    /// (each assumed before the next) would, including with normalized scores
    /// (PreferNoSchedule taints, preferred node affinity) and under several strategies.
    #[test]
    fn place_copies_matches_one_search_per_copy(
        (nodes, pods, (cpu, mem)) in arb_cluster(),
        tainted in prop::collection::vec(any::<bool>(), 8),
        zones in prop::collection::vec(0u8..3, 8),
        prefer_zone in prop::option::of(0u8..3),
        tolerate in any::<bool>(),
        most_allocated in any::<bool>(),
        copies in 1usize..24,
    ) {
        use crate::plugins::testing::node_req;
        let ns = nodes
            .iter()
            .enumerate()
            .map(|(i, &(c, m, slots))| {
                let b = node(&format!("n{i}"))
                    .cpu(&c.to_string())
                    .mem(&format!("{m}Gi"))
                    .pods(slots)
                    .label("zone", &format!("z{}", zones[i]));
                if tainted[i] { b.taint("spot", "x", "PreferNoSchedule").build() } else { b.build() }
            })
            .collect();
        let mut snap = snapshot_with(ns, bound_pods(&pods));
        let mut b = pod("p").cpu(&format!("{}m", cpu * 500)).mem(&format!("{}Mi", mem * 512));
        if let Some(z) = prefer_zone {
            b = b.preferred_node_term(3, vec![node_req("zone", "In", &[&format!("z{z}")])]);
        }
        if tolerate {
            b = b.toleration("spot", "Exists", "", "PreferNoSchedule");
        }
        let p = Arc::new(b.build());
        let mut config = SchedulerConfig::default();
        if most_allocated {
            config.node_resources_fit_strategy = crate::config::ScoringStrategy::most_allocated();
        }
        let fw = crate::plugins::pod_framework(&config);
        let nodes_all = snap.node_ids().to_vec();
        let Some(plan) = place_copies(&fw, &snap, &p, &nodes_all, copies) else {
            // Only when not even one copy fits.
            prop_assert!(find_node(&fw, &snap, &p, &nodes_all).is_err());
            return Ok(());
        };
        let mark = snap.checkpoint();
        let mut searched = Vec::new();
        for _ in 0..copies {
            match find_node(&fw, &snap, &p, &nodes_all) {
                Ok(id) => {
                    snap.assume(p.clone(), id);
                    searched.push(id);
                }
                Err(_) => break,
            }
        }
        snap.rollback(mark);
        prop_assert_eq!(plan, searched);
    }

    #[test]
    fn feasible_nodes_agree_with_fit_count((nodes, pods, (cpu, mem)) in arb_cluster()) {
        let snap = build(&nodes, &pods);
        let p = arb_pod(cpu, mem, 0).build();
        let feasible = feasible_nodes(&fw(), &snap, &p, snap.node_ids()).unwrap_or_default();
        for &id in snap.node_ids() {
            prop_assert_eq!(feasible.contains(&id), fit_count(&snap, &p, id) >= 1);
        }
    }
}

/// The plain pod-level search, written out as kube-scheduler's loop with none of
/// `find_node_sampled`'s shortcuts: nodes visited as `nodes[(start + k) % n]`, every filter
/// asked in order unless its PreFilter skipped it, every active score plugin's raw score
/// on every feasible node, normalized, weighted, the first highest total chosen. The
/// reference the optimized search is compared with.
fn plain_sampled(
    fw: &Framework,
    snap: &Snapshot,
    p: &PodInfo,
    nodes: &[NodeId],
    start: usize,
    to_find: usize,
) -> (Result<NodeId, String>, usize) {
    let n = nodes.len();
    let mut state = match prepare(fw, snap, p) {
        Ok(s) => s,
        Err(r) => return (Err(prefilter_fit_error(&r, n).to_string()), n),
    };
    let mut feasible = Vec::new();
    let mut err: Option<FitError> = None;
    let mut examined = 0;
    for k in 0..n {
        let id = nodes[(start % n + k) % n];
        examined += 1;
        let mut verdict = Ok(());
        for (i, f) in fw.filters.iter().enumerate() {
            if state.skip_filters & (1 << i) == 0 {
                verdict = f.filter(&state, snap, snap.node(id));
                if verdict.is_err() {
                    break;
                }
            }
        }
        match verdict {
            Ok(()) => {
                feasible.push(id);
                if feasible.len() >= to_find {
                    break;
                }
            }
            Err(r) => {
                let e = err.get_or_insert_with(|| FitError { num_nodes: n, ..FitError::default() });
                for reason in &r.reasons {
                    e.add(reason);
                }
            }
        }
    }
    if feasible.is_empty() {
        return (Err(err.unwrap_or(FitError { num_nodes: n, ..FitError::default() }).to_string()), examined);
    }
    feasible.sort();
    if feasible.len() == 1 {
        return (Ok(feasible[0]), examined);
    }
    let mut totals = vec![0i64; feasible.len()];
    for (plugin, weight) in &fw.scores {
        if plugin.pre_score(&mut state, snap, &feasible) == PreResult::Skip {
            continue;
        }
        let mut column: Vec<i64> =
            feasible.iter().map(|&id| plugin.score(&state, snap, id, snap.node(id))).collect();
        plugin.normalize(&state, &feasible, &mut column);
        for (t, s) in totals.iter_mut().zip(&column) {
            *t += s * weight;
        }
    }
    let mut best = 0;
    for (i, t) in totals.iter().enumerate() {
        if *t > totals[best] {
            best = i;
        }
    }
    (Ok(feasible[best]), examined)
}

proptest! {
    /// The optimized single-pod search (rotating start without a division per node, the
    /// active filters walked by bit, 64-bit score arithmetic) picks the node the plain
    /// loop picks, examines as many nodes, and fails with the same message, on clusters
    /// with hard and soft taints, extended resources, preferred node affinity and any
    /// sampling window.
    #[test]
    fn sampled_search_matches_the_plain_loop(
        (nodes, pods, (cpu, mem)) in arb_cluster(),
        taints in prop::collection::vec(0u8..4, 8),
        gpus in prop::collection::vec(0u32..3, 8),
        zones in prop::collection::vec(0u8..3, 8),
        prefer_zone in prop::option::of(0u8..3),
        want_gpu in 0u32..3,
        tolerate in any::<bool>(),
        most_allocated in any::<bool>(),
        start in 0usize..16,
        to_find in 1usize..10,
    ) {
        use crate::plugins::testing::node_req;
        let ns = nodes
            .iter()
            .enumerate()
            .map(|(i, &(c, m, slots))| {
                let b = node(&format!("n{i}"))
                    .cpu(&c.to_string())
                    .mem(&format!("{m}Gi"))
                    .pods(slots)
                    .gpus(gpus[i])
                    .label("zone", &format!("z{}", zones[i]));
                match taints[i] {
                    0 => b.build(),
                    1 => b.taint("spot", "x", "PreferNoSchedule").build(),
                    2 => b.taint("dedicated", "x", "NoSchedule").build(),
                    _ => b.unschedulable().build(),
                }
            })
            .collect();
        let snap = snapshot_with(ns, bound_pods(&pods));
        let mut b = arb_pod(cpu, mem, want_gpu);
        if let Some(z) = prefer_zone {
            b = b.preferred_node_term(3, vec![node_req("zone", "In", &[&format!("z{z}")])]);
        }
        if tolerate {
            b = b.toleration("spot", "Exists", "", "PreferNoSchedule");
            b = b.toleration("dedicated", "Exists", "", "NoSchedule");
        }
        let p = b.build();
        let mut config = SchedulerConfig::default();
        if most_allocated {
            config.node_resources_fit_strategy = crate::config::ScoringStrategy::most_allocated();
        }
        let fw = crate::plugins::pod_framework(&config);
        let ids = snap.node_ids().to_vec();
        let to_find = to_find.min(ids.len().saturating_sub(1)).max(1);
        let (got, got_examined) = find_node_sampled(&fw, &snap, &p, &ids, start, to_find);
        let (want, want_examined) = plain_sampled(&fw, &snap, &p, &ids, start, to_find);
        prop_assert_eq!(got.map_err(|e| e.to_string()), want);
        prop_assert_eq!(got_examined, want_examined);
    }
}

proptest! {
    /// Wherever a pod's quick test holds on a node, every filter the pod runs passes that
    /// node: the test only ever settles nodes the filters would pass; and the test on a
    /// node's dense record answers as the test on its state. Nodes are
    /// unschedulable, tainted (tolerated or not), short of cpu, memory, GPUs or pod slots.
    #[test]
    fn quick_pass_implies_the_filters(
        (nodes, pods, (cpu, mem)) in arb_cluster(),
        kinds in prop::collection::vec(0u8..5, 8),
        gpus in prop::collection::vec(0u32..3, 8),
        want_gpu in 0u32..3,
        tolerate in 0u8..3,
    ) {
        let ns = nodes
            .iter()
            .enumerate()
            .map(|(i, &(c, m, slots))| {
                let b = node(&format!("n{i}")).cpu(&c.to_string()).mem(&format!("{m}Gi")).pods(slots).gpus(gpus[i]);
                match kinds[i] {
                    0 | 1 => b.build(),
                    2 => b.taint("dedicated", "x", "NoSchedule").build(),
                    3 => b.taint("gone", "x", "NoExecute").build(),
                    _ => b.unschedulable().build(),
                }
            })
            .collect();
        let snap = snapshot_with(ns, bound_pods(&pods));
        let mut b = arb_pod(cpu, mem, want_gpu);
        match tolerate {
            0 => {}
            1 => b = b.toleration("dedicated", "Exists", "", "NoSchedule"),
            _ => b = b.toleration("", "Exists", "", ""),
        }
        let p = b.build();
        let fw = fw();
        let state = prepare(&fw, &snap, &p).expect("no PreFilter rejects these pods");
        let quick = state.quick.expect("the default filters all have a quick test for a plain pod");
        // The search runs the test on the nodes' dense records where the pod's requests
        // allow: it must answer as the test on the nodes' states.
        prop_assert!(state.hot.is_some(), "every node lists nvidia.com/gpu (maybe 0): the records count it");
        for &id in snap.node_ids() {
            if let Some(hot) = state.hot.as_ref() {
                prop_assert_eq!(quick.holds_hot(hot, snap.hot(id)), quick.holds(&p, snap.node(id)));
            }
            if !quick.holds(&p, snap.node(id)) {
                continue;
            }
            for (i, f) in fw.filters.iter().enumerate() {
                if state.skip_filters & (1 << i) == 0 {
                    prop_assert!(
                        f.filter(&state, &snap, snap.node(id)).is_ok(),
                        "{} rejects {} where the quick test holds",
                        f.name(),
                        snap.node(id).name()
                    );
                }
            }
        }
    }
}

/// One step of [`reuse_matches_the_plain_search`]: schedule a pod of a shape, or change
/// the cluster between pods.
#[derive(Debug, Clone)]
enum Step {
    /// Schedule a pod of shape `0..4`; with nominated pods assumed for the search and
    /// rolled back after when the flag is set.
    Schedule(usize, bool),
    /// Delete the i-th placed pod (modulo their count).
    Delete(usize),
    /// Toggle a PreferNoSchedule taint on node i (modulo the node count).
    Taint(usize),
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0usize..4, prop::bool::weighted(0.15)).prop_map(|(s, n)| Step::Schedule(s, n)),
        1 => (0usize..64).prop_map(Step::Delete),
        1 => (0usize..64).prop_map(Step::Taint),
    ]
}

proptest! {
    /// The single-pod search with the previous pod's per-node results reused
    /// (`find_node_sampled_reusing`) decides like `find_node_sampled` for every pod of a
    /// sequence (runs of identical pods, shapes with a toleration or a preferred zone,
    /// bindings, deletions, node updates, nominated pods assumed and rolled back), with the
    /// same nodes examined and the same failures; and it does reuse.
    #[test]
    fn reuse_matches_the_plain_search(
        nodes in prop::collection::vec((1u32..16, 1u32..16, 1u32..6, 0u8..3, 0u8..3), 3..24),
        steps in prop::collection::vec(arb_step(), 1..60),
        to_find in 1usize..12,
        most_allocated in any::<bool>(),
    ) {
        use crate::plugins::testing::node_req;
        let node_of = |i: usize, (c, m, slots, zone, taint): (u32, u32, u32, u8, u8), soft: bool| {
            let b = node(&format!("n{i:02}"))
                .cpu(&c.to_string())
                .mem(&format!("{m}Gi"))
                .pods(slots)
                .label("zone", &format!("z{zone}"));
            let b = if soft { b.taint("spot", "x", "PreferNoSchedule") } else { b };
            if taint == 2 { b.taint("dedicated", "x", "NoSchedule").build() } else { b.build() }
        };
        let mut soft: Vec<bool> = nodes.iter().map(|n| n.4 == 1).collect();
        let ns = nodes.iter().enumerate().map(|(i, &n)| node_of(i, n, soft[i])).collect();
        let mut snap = snapshot_with(ns, vec![]);
        let mut config = SchedulerConfig::default();
        if most_allocated {
            config.node_resources_fit_strategy = crate::config::ScoringStrategy::most_allocated();
        }
        let fw = crate::plugins::pod_framework(&config);
        let shape = |s: usize, name: &str| {
            let b = pod(name).cpu(&format!("{}m", 500 + 500 * (s % 2))).mem("1Gi");
            match s {
                2 => b.toleration("spot", "Exists", "", "PreferNoSchedule"),
                3 => b.preferred_node_term(3, vec![node_req("zone", "In", &["z1"])]),
                _ => b,
            }
            .build()
        };
        let mut reuse = SingleReuse::default();
        let mut placed: Vec<crate::model::PodKey> = Vec::new();
        let mut start = 0usize;
        for (k, step) in steps.into_iter().enumerate() {
            match step {
                Step::Schedule(s, nominated) => {
                    let p = Arc::new(shape(s, &format!("p{k}")));
                    let ids = snap.node_ids().to_vec();
                    let to_find = to_find.min(ids.len() - 1).max(1);
                    let mark = snap.checkpoint();
                    if nominated {
                        let other = Arc::new(shape(s, &format!("nominated{k}")));
                        snap.assume(other, ids[k % ids.len()]);
                    }
                    let want = find_node_sampled(&fw, &snap, &p, &ids, start, to_find);
                    let got = find_node_sampled_reusing(&fw, &snap, &p, &ids, start, to_find, &mut reuse);
                    prop_assert_eq!(&got, &want);
                    snap.rollback(mark);
                    start = (start + want.1) % ids.len();
                    if let Ok(id) = want.0 {
                        let name = snap.node(id).name().to_string();
                        snap.upsert_pod(Arc::new(
                            pod(&format!("p{k}"))
                                .cpu(&format!("{}m", 500 + 500 * (s % 2)))
                                .mem("1Gi")
                                .on(&name)
                                .build(),
                        ));
                        placed.push(p.key.clone());
                    }
                }
                Step::Delete(i) => {
                    if !placed.is_empty() {
                        let key = placed.remove(i % placed.len());
                        snap.remove_pod(&key);
                    }
                }
                Step::Taint(i) => {
                    let i = i % nodes.len();
                    soft[i] = !soft[i];
                    snap.upsert_node(node_of(i, nodes[i], soft[i]));
                }
            }
        }
    }
}

#[test]
fn identical_pods_reuse_the_unchanged_nodes() {
    let ns = (0..200).map(|i| node(&format!("n{i:03}")).cpu("64").mem("256Gi").pods(110).build()).collect();
    let mut snap = snapshot_with(ns, vec![]);
    let fw = fw();
    let ids = snap.node_ids().to_vec();
    let to_find = num_feasible_nodes_to_find(None, ids.len());
    assert!(to_find < ids.len(), "the search samples");
    let mut reuse = SingleReuse::default();
    let mut start = 0;
    for k in 0..40 {
        let p = Arc::new(pod(&format!("p{k}")).cpu("1").mem("2Gi").build());
        let want = find_node_sampled(&fw, &snap, &p, &ids, start, to_find);
        let got = find_node_sampled_reusing(&fw, &snap, &p, &ids, start, to_find, &mut reuse);
        assert_eq!(got, want);
        start = (start + want.1) % ids.len();
        let name = snap.node(want.0.unwrap()).name().to_string();
        snap.upsert_pod(Arc::new(pod(&format!("p{k}")).cpu("1").mem("2Gi").on(&name).build()));
    }
    // 40 pods x 100 nodes scored: the first pass over the 200 nodes computes, later pods
    // recompute only the nodes a binding changed.
    assert!(reuse.hits > 3_000, "hits {} misses {}", reuse.hits, reuse.misses);
    assert!(reuse.misses < 300, "hits {} misses {}", reuse.hits, reuse.misses);
    // A pod of another shape runs the plain search and empties the cache; the next pod of
    // that shape computes every node again (and fills the cache), the one after reuses.
    let other = |k: usize| Arc::new(pod(&format!("q{k}")).cpu("2").mem("2Gi").build());
    let (hits, misses) = (reuse.hits, reuse.misses);
    let got = find_node_sampled_reusing(&fw, &snap, &other(0), &ids, start, to_find, &mut reuse);
    assert_eq!(got, find_node_sampled(&fw, &snap, &other(0), &ids, start, to_find));
    assert_eq!((reuse.hits, reuse.misses), (hits, misses), "the plain search, nothing cached");
    let got = find_node_sampled_reusing(&fw, &snap, &other(1), &ids, start, to_find, &mut reuse);
    assert_eq!(got, find_node_sampled(&fw, &snap, &other(1), &ids, start, to_find));
    assert_eq!((reuse.hits, reuse.misses), (hits, misses + to_find as u64), "computed and cached");
    let got = find_node_sampled_reusing(&fw, &snap, &other(2), &ids, start, to_find, &mut reuse);
    assert_eq!(got, find_node_sampled(&fw, &snap, &other(2), &ids, start, to_find));
    assert_eq!(reuse.hits, hits + to_find as u64, "reused");
}

proptest! {
    /// The walk's rotation gives what a sort gives, on walks (two runs around a start) and
    /// on any other order.
    #[test]
    fn sort_walked_sorts(
        n in 0u32..40,
        start in 0usize..40,
        take in 0usize..40,
        shuffled in proptest::collection::vec(0u32..20, 0..30),
    ) {
        let nodes: Vec<NodeId> = (0..n).map(NodeId).collect();
        let start = if nodes.is_empty() { 0 } else { start % nodes.len() };
        let mut walked: Vec<NodeId> = nodes[start..].iter().chain(&nodes[..start]).copied().take(take).collect();
        let mut expected = walked.clone();
        expected.sort();
        sort_walked(&mut walked);
        prop_assert_eq!(walked, expected);
        let mut any: Vec<NodeId> = shuffled.into_iter().map(NodeId).collect();
        let mut expected = any.clone();
        expected.sort();
        sort_walked(&mut any);
        prop_assert_eq!(any, expected);
    }
}
