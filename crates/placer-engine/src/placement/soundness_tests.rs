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

/// Nodes `n{i}` with `cores` CPUs in rack `r{rack}` (labels `kubernetes.io/hostname`, `rack`).
pub(super) fn rack_nodes(nodes: impl Iterator<Item = (u32, u8)>) -> Vec<crate::model::NodeStatic> {
    nodes
        .enumerate()
        .map(|(i, (cores, rack))| {
            let name = format!("n{i}");
            node(&name)
                .cpu(&cores.to_string())
                .label("kubernetes.io/hostname", &name)
                .label("rack", &format!("r{rack}"))
                .build()
        })
        .collect()
}

/// A DRA cluster for [`device_prefilter_decides_like_the_plain_search`]: the GPU class,
/// one slice per node with its devices (each GPU `g{k}`), and the claims `c{i}` of the
/// members (`count` GPUs each); `held` devices (node, device) are allocated to a claim.
fn dra_state(gpus: &[u8], held: &[(usize, u8)], counts: &[i64]) -> crate::snapshot::dra::DraState {
    use placer_api::k8s::api::resource::v1::*;
    use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    const DRIVER: &str = "gpu.example.com";
    let mut s = crate::snapshot::dra::DraState::default();
    s.upsert_class(Arc::new(DeviceClass {
        metadata: ObjectMeta { name: Some("gpu".into()), ..Default::default() },
        spec: DeviceClassSpec {
            selectors: Some(vec![DeviceSelector {
                cel: Some(CELDeviceSelector { expression: format!("device.driver == {DRIVER:?}") }),
            }]),
            ..Default::default()
        },
    }));
    for (i, &n) in gpus.iter().enumerate() {
        let name = format!("n{i}");
        s.upsert_slice(Arc::new(ResourceSlice {
            metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
            spec: ResourceSliceSpec {
                driver: DRIVER.into(),
                node_name: Some(name.clone()),
                pool: ResourcePool { name, generation: 1, resource_slice_count: 1 },
                devices: Some(
                    (0..n).map(|k| Device { name: format!("g{k}"), ..Default::default() }).collect(),
                ),
                ..Default::default()
            },
        }));
    }
    let claim = |name: String, count: i64, allocated: Vec<(String, String)>| ResourceClaim {
        metadata: ObjectMeta { name: Some(name), namespace: Some("default".into()), ..Default::default() },
        spec: ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(vec![DeviceRequest {
                    name: "r".into(),
                    exactly: Some(ExactDeviceRequest {
                        device_class_name: "gpu".into(),
                        count: Some(count),
                        ..Default::default()
                    }),
                    first_available: None,
                }]),
                constraints: None,
                config: None,
            }),
        },
        status: (!allocated.is_empty()).then(|| ResourceClaimStatus {
            allocation: Some(AllocationResult {
                devices: Some(DeviceAllocationResult {
                    results: Some(
                        allocated
                            .into_iter()
                            .map(|(pool, device)| DeviceRequestAllocationResult {
                                request: "r".into(),
                                driver: DRIVER.into(),
                                pool,
                                device,
                                ..Default::default()
                            })
                            .collect(),
                    ),
                    config: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
    };
    let held: Vec<(String, String)> = held.iter().map(|(n, d)| (format!("n{n}"), format!("g{d}"))).collect();
    s.upsert_claim(Arc::new(claim("held".into(), 1, held)));
    for (i, &count) in counts.iter().enumerate() {
        s.upsert_claim(Arc::new(claim(format!("c{i}"), count, Vec::new())));
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    /// With device claims, the optimized search (device pre-filter, domain index) decides
    /// as the plain one: same placement, same nodes, same variant; also with the
    /// DynamicResources filter disabled (where the device pre-filter must stay off).
    #[test]
    fn device_prefilter_decides_like_the_plain_search(
        nodes in proptest::collection::vec((1u32..4, 0u8..3, 0u8..4), 1..8),
        held in proptest::collection::vec((0usize..8, 0u8..4), 0..6),
        counts in proptest::collection::vec(1i64..3, 1..6),
        shared in any::<bool>(),
        min in 1i32..6,
        gang in any::<bool>(),
        dra_off in any::<bool>(),
    ) {
        let ns = rack_nodes(nodes.iter().map(|&(cores, rack, _)| (cores, rack)));
        let gpus: Vec<u8> = nodes.iter().map(|n| n.2).collect();
        let pods: Vec<(u64, Arc<PodInfo>)> = counts
            .iter()
            .enumerate()
            .map(|(i, _)| {
                let mut b = pod(&format!("m{i}")).cpu("500m").resource_claim("gpu", &format!("c{i}"));
                if shared {
                    // A claim every member shares, allocated once.
                    b = b.resource_claim("common", "c0");
                }
                (i as u64, Arc::new(b.build()))
            })
            .collect();
        let g = group("pg", if gang { Some(min) } else { None }, Some("rack"));
        let cycle = GroupCycle::new(g, true, pods, vec![]);
        let mut config = SchedulerConfig::default();
        if dra_off {
            config.plugins.disable(ExtensionPoint::Filter, "DynamicResources");
        }
        let plain_config = SchedulerConfig { placement_search: PlacementSearch::Baseline, ..config.clone() };
        let run = |config: &SchedulerConfig| {
            let mut snap: Snapshot = snapshot_with(ns.clone(), Vec::new());
            *snap.dra_mut() = dra_state(&gpus, &held, &counts);
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

/// A rack-constrained gang goes to the rack that has its devices: rack r0 (first by name,
/// plenty of cpu) has its GPUs held by another claim; the device pre-filter rejects it
/// without simulating it, with the DynamicResources reason.
#[test]
fn a_rack_constrained_gang_goes_to_the_rack_with_free_devices() {
    let ns: Vec<crate::model::NodeStatic> = (0..4)
        .map(|i| {
            let name = format!("n{i}");
            node(&name)
                .cpu(if i < 2 { "16" } else { "2" })
                .label("kubernetes.io/hostname", &name)
                .label("rack", if i < 2 { "r0" } else { "r1" })
                .build()
        })
        .collect();
    let pods: Vec<(u64, Arc<PodInfo>)> = (0..4)
        .map(|i| {
            (
                i as u64,
                Arc::new(pod(&format!("m{i}")).cpu("1").resource_claim("gpu", &format!("c{i}")).build()),
            )
        })
        .collect();
    let cycle = GroupCycle::new(group("pg", Some(4), Some("rack")), true, pods, vec![]);
    let config = SchedulerConfig::default();
    let mut snap: Snapshot = snapshot_with(ns, Vec::new());
    // Two GPUs per node; both of n0's and n1's are held.
    *snap.dra_mut() = dra_state(&[2, 2, 2, 2], &[(0, 0), (0, 1), (1, 0), (1, 1)], &[1, 1, 1, 1]);
    let demand = snap.dra().device_demand(&cycle.pods, 4).expect("claims to allocate");
    assert_eq!(demand.total, 4);
    let r0: Vec<&crate::model::NodeStatic> = (0..2).map(|i| &*snap.node(snap.node_ids()[i]).info).collect();
    assert!(!snap.dra().devices_suffice(r0, &demand), "r0 has no free GPU");
    let fw = crate::plugins::pod_framework(&config);
    let pf = crate::plugins::placement_framework(&config);
    let ctx = GroupContext { placements: &pf, algo: &fw, config: &config };
    let out = schedule_pod_group(&ctx, &mut snap, &cycle, GroupHooks::default(), &mut NoopObserver);
    let GroupOutcome::Scheduled { placement, assignments, .. } = &out else { panic!("{out:?}") };
    assert_eq!(placement.as_deref(), Some("r1"));
    assert_eq!(assignments.len(), 4);
}

/// Claims may share a device that allows multiple allocations (consumable capacity), so
/// distinct claims no longer take distinct devices: the device pre-filter must not count
/// them (four one-device claims fit on one shareable device).
#[test]
fn no_device_demand_while_a_device_allows_multiple_allocations() {
    use placer_api::k8s::api::resource::v1::*;
    use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    let pods: Vec<Arc<PodInfo>> = (0..4)
        .map(|i| Arc::new(pod(&format!("m{i}")).cpu("1").resource_claim("gpu", &format!("c{i}")).build()))
        .collect();
    let mut dra = dra_state(&[1, 1], &[], &[1, 1, 1, 1]);
    assert_eq!(
        dra.device_demand(&pods, 4).map(|d| d.total),
        Some(4),
        "exclusive devices: four claims, four devices"
    );
    dra.upsert_slice(Arc::new(ResourceSlice {
        metadata: ObjectMeta { name: Some("n0".into()), ..Default::default() },
        spec: ResourceSliceSpec {
            driver: "gpu.example.com".into(),
            node_name: Some("n0".into()),
            pool: ResourcePool { name: "n0".into(), generation: 1, resource_slice_count: 1 },
            devices: Some(vec![Device {
                name: "g0".into(),
                allow_multiple_allocations: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        },
    }));
    assert_eq!(dra.device_demand(&pods, 4), None);
}
