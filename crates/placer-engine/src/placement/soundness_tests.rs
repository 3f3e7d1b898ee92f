//! The optimized placement search (domain index, aggregate pre-filter, copy counting,
//! one-pass placement of identical members) against the plain one, on random clusters and
//! random PodGroups whose members use every constraint kind the filters know, under the
//! default profile and profiles that disable filters (where a shortcut that ignored the
//! filters' declared `Dependence` would be wrong).

use std::sync::Arc;

use placer_api::k8s::api::core::v1::ContainerPort;
use proptest::prelude::*;

use super::*;
use crate::config::{ExtensionPoint, PlacementSearch};
use crate::framework::preemption::GroupHooks;
use crate::observer::NoopObserver;
use crate::plugins::testing::{affinity_term, match_labels, node, node_req, pod, snapshot_with, spread};
use crate::podgroup::tests::group;

/// One member's constraint kind.
fn member(i: usize, kind: u8, cpu: u32) -> Arc<PodInfo> {
    let b = pod(&format!("m{i}")).cpu(&format!("{}m", cpu * 250)).label("app", "g");
    let b = match kind {
        0 => b,
        1 => b.node_selector("zone", "z0"),
        2 => b.required_node_term(vec![node_req("zone", "In", &["z1"])], vec![]),
        3 => b.preferred_node_term(5, vec![node_req("zone", "In", &["z0"])]),
        4 => b.toleration("dedicated", "Exists", "", "NoSchedule"),
        5 => b.port(ContainerPort { container_port: 80, host_port: Some(8080), ..Default::default() }),
        6 => b.pod_affinity(affinity_term("zone", match_labels(&[("app", "db")]))),
        7 => b.pod_anti_affinity(affinity_term("kubernetes.io/hostname", match_labels(&[("app", "g")]))),
        8 => b.spread(spread(1, "kubernetes.io/hostname", "DoNotSchedule", match_labels(&[("app", "g")]))),
        9 => b.spread(spread(1, "zone", "ScheduleAnyway", match_labels(&[("app", "g")]))),
        10 => b.gpu(1),
        _ => b.preferred_pod_anti_affinity(3, affinity_term("zone", match_labels(&[("app", "db")]))),
    };
    Arc::new(b.build())
}

/// The outcome's comparable part: the variant, and what binds where. (Failure messages
/// may differ: the plain search names the best placement it simulated.)
fn essence(o: &GroupOutcome) -> String {
    match o {
        GroupOutcome::Scheduled { placement, assignments, failures } => {
            let failed: Vec<usize> = failures.iter().map(|(i, _)| *i).collect();
            format!("scheduled {placement:?} {assignments:?} failed {failed:?}")
        }
        GroupOutcome::WaitingOnPreemption { .. } => "waiting".to_string(),
        GroupOutcome::Unschedulable { .. } => "unschedulable".to_string(),
        GroupOutcome::Error { message } => format!("error {message}"),
        GroupOutcome::EvictForNodeFailure { failed_nodes, message } => {
            format!("evict for {failed_nodes:?}: {message}")
        }
    }
}

type Nodes = Vec<(u32, u8, u8, bool, bool)>;

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]
    #[test]
    fn optimized_and_plain_search_decide_alike(
        nodes in proptest::collection::vec((1u32..6, 0u8..3, 0u8..2, any::<bool>(), any::<bool>()), 1..9),
        existing in proptest::collection::vec((0usize..9, 0u8..3, 1u32..8), 0..6),
        kinds in proptest::collection::vec(0u8..12, 1..7),
        uniform in any::<bool>(),
        cpu in 1u32..8,
        min in 1i32..7,
        gang in any::<bool>(),
        profile in 0u8..4,
    ) {
        let nodes: &Nodes = &nodes;
        let ns: Vec<crate::model::NodeStatic> = nodes
            .iter()
            .enumerate()
            .map(|(i, &(cores, rack, zone, tainted, gpus))| {
                let name = format!("n{i}");
                let b = node(&name)
                    .cpu(&cores.to_string())
                    .label("kubernetes.io/hostname", &name)
                    .label("rack", &format!("r{rack}"))
                    .label("zone", &format!("z{zone}"))
                    .gpus(if gpus { 2 } else { 0 });
                if tainted { b.taint("dedicated", "x", "NoSchedule").build() } else { b.build() }
            })
            .collect();
        let ps: Vec<PodInfo> = existing
            .iter()
            .enumerate()
            .filter(|(_, (n, _, _))| *n < nodes.len())
            .map(|(i, &(n, app, c))| {
                let app = ["db", "g", "web"][app as usize];
                pod(&format!("e{i}")).cpu(&format!("{}m", c * 125)).label("app", app).on(&format!("n{n}")).build()
            })
            .collect();
        let pods: Vec<(u64, Arc<PodInfo>)> = kinds
            .iter()
            .enumerate()
            .map(|(i, &k)| (i as u64, member(i, if uniform { kinds[0] } else { k }, cpu)))
            .collect();
        let g = group("pg", if gang { Some(min) } else { None }, Some("rack"));
        let cycle = GroupCycle::new(g, true, pods, vec![]);

        let mut config = SchedulerConfig::default();
        match profile {
            1 => config.plugins.disable(ExtensionPoint::Filter, "NodeResourcesFit"),
            2 => config.plugins.disable(ExtensionPoint::Filter, "TaintToleration"),
            3 => config.plugins.disable(ExtensionPoint::MultiPoint, "*"),
            _ => {}
        }
        let plain_config = SchedulerConfig { placement_search: PlacementSearch::Baseline, ..config.clone() };
        let run = |config: &SchedulerConfig| {
            let mut snap: Snapshot = snapshot_with(ns.clone(), ps.clone());
            let fw = crate::plugins::pod_framework(config);
            let pf = crate::plugins::placement_framework(config);
            let ctx = GroupContext { placements: &pf, algo: &fw, config };
            let out = schedule_pod_group(&ctx, &mut snap, &cycle, GroupHooks::default(), &mut NoopObserver);
            let names: Vec<String> = match &out {
                GroupOutcome::Scheduled { assignments, .. } => {
                    assignments.iter().map(|(_, n)| snap.node(*n).name().to_string()).collect()
                }
                _ => Vec::new(),
            };
            (essence(&out), names)
        };
        prop_assert_eq!(run(&config), run(&plain_config));
    }
}
