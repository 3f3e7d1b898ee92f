//! Copy counting with devices (`DraState::copy_claims`, `DraState::node_copies`) against the
//! plain path: members with claims generated from templates, on random clusters of
//! node-local GPUs, with every kind of request and device the allocator knows, including
//! those copy counting must refuse (a network-attached slice, a device allowing multiple
//! allocations, a claim shared by name, claims that differ, an invalid selector).

use std::sync::Arc;

use placer_api::k8s::api::core::v1::ContainerPort;
use placer_api::k8s::api::resource::v1::*;
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use proptest::prelude::*;

use super::*;
use crate::config::{ExtensionPoint, PlacementSearch};
use crate::framework::preemption::GroupHooks;
use crate::observer::NoopObserver;
use crate::plugins::testing::{pod, snapshot_with};
use crate::podgroup::tests::group;
use crate::snapshot::dra::DraState;

const DRIVER: &str = "gpu.example.com";

/// What sets a case apart from plain one-GPU claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    /// A slice of two devices for all nodes besides the node-local ones: not counted.
    NetworkAttached,
    /// n0's first GPU allows multiple allocations: not counted there.
    MultiAllocation,
    /// Two requests whose devices must match on `model` (GPUs alternate two models).
    MatchAttribute,
    AdminAccess,
    AllocationModeAll,
    /// Even GPUs are tainted; the requests tolerate nothing.
    Tainted,
    /// Members also name one claim by name, shared: not counted.
    SharedByName,
    /// A request selector that does not compile: the filter's error.
    InvalidSelector,
    /// Two requests, each of `count` GPUs.
    TwoRequests,
}

const KINDS: [Kind; 10] = [
    Kind::Plain,
    Kind::NetworkAttached,
    Kind::MultiAllocation,
    Kind::MatchAttribute,
    Kind::AdminAccess,
    Kind::AllocationModeAll,
    Kind::Tainted,
    Kind::SharedByName,
    Kind::InvalidSelector,
    Kind::TwoRequests,
];

fn exact(name: &str, count: i64, kind: Kind) -> DeviceRequest {
    DeviceRequest {
        name: name.into(),
        exactly: Some(ExactDeviceRequest {
            device_class_name: "gpu".into(),
            count: (kind != Kind::AllocationModeAll).then_some(count),
            allocation_mode: (kind == Kind::AllocationModeAll).then(|| "All".into()),
            admin_access: (kind == Kind::AdminAccess).then_some(true),
            selectors: (kind == Kind::InvalidSelector).then(|| {
                vec![DeviceSelector { cel: Some(CELDeviceSelector { expression: "device.(".into() }) }]
            }),
            ..Default::default()
        }),
        first_available: None,
    }
}

/// The claim spec of a member asking for `count` GPUs.
fn claim_spec(count: i64, kind: Kind) -> ResourceClaimSpec {
    let (requests, constraints) = match kind {
        Kind::MatchAttribute => (
            vec![exact("a", 1, kind), exact("b", count, kind)],
            Some(vec![DeviceConstraint {
                match_attribute: Some(format!("{DRIVER}/model")),
                ..Default::default()
            }]),
        ),
        Kind::TwoRequests => (vec![exact("a", count, kind), exact("b", count, kind)], None),
        _ => (vec![exact("r", count, kind)], None),
    };
    ResourceClaimSpec { devices: Some(DeviceClaim { requests: Some(requests), constraints, config: None }) }
}

/// The GPU class, one node-local slice per node (`gpus[i]` GPUs `g{k}` with a `model`
/// attribute), the devices `held` by an allocated claim, the claims generated for the
/// members (`m{i}-gpu`, owned by member `m{i}`), and what `kind` adds.
fn dra(gpus: &[u8], held: &[(usize, u8)], counts: &[i64], kind: Kind) -> DraState {
    let mut s = DraState::default();
    s.upsert_class(crate::plugins::testing::device_class("gpu", DRIVER));
    let gpu = |i: usize, k: u8| Device {
        name: format!("g{k}"),
        attributes: Some(
            [("model".to_string(), DeviceAttribute { int: Some(i64::from(k % 2)), ..Default::default() })]
                .into(),
        ),
        taints: (kind == Kind::Tainted && k.is_multiple_of(2)).then(|| {
            vec![DeviceTaint { key: "bad".into(), effect: "NoSchedule".into(), ..Default::default() }]
        }),
        allow_multiple_allocations: (kind == Kind::MultiAllocation && i == 0 && k == 0).then_some(true),
        ..Default::default()
    };
    let slice = |name: String, node: Option<String>, devices: Vec<Device>| {
        Arc::new(ResourceSlice {
            metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
            spec: ResourceSliceSpec {
                driver: DRIVER.into(),
                all_nodes: node.is_none().then_some(true),
                node_name: node,
                pool: ResourcePool { name, generation: 1, resource_slice_count: 1 },
                devices: Some(devices),
                ..Default::default()
            },
        })
    };
    for (i, &n) in gpus.iter().enumerate() {
        s.upsert_slice(slice(format!("n{i}"), Some(format!("n{i}")), (0..n).map(|k| gpu(i, k)).collect()));
    }
    if kind == Kind::NetworkAttached {
        s.upsert_slice(slice("net".into(), None, (0..2).map(|k| gpu(99, k)).collect()));
    }
    let results: Vec<DeviceRequestAllocationResult> = held
        .iter()
        .filter(|(n, d)| gpus.get(*n).is_some_and(|g| d < g))
        .map(|(n, d)| DeviceRequestAllocationResult {
            request: "r".into(),
            driver: DRIVER.into(),
            pool: format!("n{n}"),
            device: format!("g{d}"),
            ..Default::default()
        })
        .collect();
    let meta = |name: String, owner: Option<String>| ObjectMeta {
        name: Some(name),
        namespace: Some("default".into()),
        owner_references: owner.map(|pod| {
            vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                uid: format!("uid-{pod}"),
                name: pod,
                controller: Some(true),
                ..Default::default()
            }]
        }),
        ..Default::default()
    };
    s.upsert_claim(Arc::new(ResourceClaim {
        metadata: meta("held".into(), None),
        spec: claim_spec(1, Kind::Plain),
        status: Some(ResourceClaimStatus {
            allocation: Some(AllocationResult {
                devices: Some(DeviceAllocationResult { results: Some(results), config: None }),
                ..Default::default()
            }),
            ..Default::default()
        }),
    }));
    s.upsert_claim(Arc::new(ResourceClaim {
        metadata: meta("common".into(), None),
        spec: claim_spec(1, Kind::AdminAccess),
        status: None,
    }));
    for (i, &count) in counts.iter().enumerate() {
        s.upsert_claim(Arc::new(ResourceClaim {
            metadata: meta(format!("m{i}-gpu"), Some(format!("m{i}"))),
            spec: claim_spec(count, kind),
            status: None,
        }));
    }
    s
}

/// Member `i` with its generated claim.
fn member(i: usize, cpu: &str, kind: Kind, port: bool) -> Arc<PodInfo> {
    let mut b = pod(&format!("m{i}")).cpu(cpu).template_claim("gpu", "one-gpu", &format!("m{i}-gpu"));
    if kind == Kind::SharedByName {
        b = b.resource_claim("common", "common");
    }
    if port {
        b = b.port(ContainerPort { container_port: 80, host_port: Some(8080), ..Default::default() });
    }
    Arc::new(b.build())
}

/// The outcome's comparable part: the variant, and what binds where.
fn essence(o: &GroupOutcome, snap: &Snapshot) -> String {
    match o {
        GroupOutcome::Scheduled { placement, assignments, failures } => {
            let names: Vec<&str> = assignments.iter().map(|(_, n)| snap.node(*n).name()).collect();
            let failed: Vec<usize> = failures.iter().map(|(i, _)| *i).collect();
            format!("scheduled {placement:?} {assignments:?} {names:?} failed {failed:?}")
        }
        GroupOutcome::WaitingOnPreemption { .. } => "waiting".to_string(),
        GroupOutcome::Unschedulable { .. } => "unschedulable".to_string(),
        GroupOutcome::Error { message } => format!("error {message}"),
        GroupOutcome::EvictForNodeFailure { failed_nodes, message } => {
            format!("evict for {failed_nodes:?}: {message}")
        }
    }
}

/// A random case.
#[derive(Debug, Clone)]
struct Case {
    /// Per node: cores, rack, GPUs.
    nodes: Vec<(u32, u8, u8)>,
    held: Vec<(usize, u8)>,
    /// Per member: GPUs per request.
    counts: Vec<i64>,
    kind: Kind,
    cpu: &'static str,
    min: i32,
    gang: bool,
    dra_off: bool,
    port: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        proptest::collection::vec((1u32..5, 0u8..3, 0u8..4), 1..9),
        proptest::collection::vec((0usize..9, 0u8..6), 0..8),
        (1i64..3, proptest::collection::vec(1i64..3, 1..7), any::<bool>()),
        0usize..KINDS.len() + 2,
        (0usize..3, 1i32..7, any::<bool>(), 0u8..12),
    )
        .prop_map(|(nodes, held, (count, counts, uniform), kind, (cpu, min, gang, profile))| Case {
            nodes,
            held,
            counts: if uniform { vec![count; counts.len()] } else { counts },
            // Plain claims more often than the others.
            kind: KINDS.get(kind).copied().unwrap_or(Kind::Plain),
            cpu: ["250m", "1", "2"][cpu],
            min,
            gang,
            dra_off: profile == 0,
            port: profile == 1,
        })
}

impl Case {
    fn snapshot(&self) -> Snapshot {
        let ns = super::soundness_tests::rack_nodes(self.nodes.iter().map(|&(cores, rack, _)| (cores, rack)));
        let mut snap = snapshot_with(ns, Vec::new());
        let gpus: Vec<u8> = self.nodes.iter().map(|n| n.2).collect();
        *snap.dra_mut() = dra(&gpus, &self.held, &self.counts, self.kind);
        snap
    }

    fn cycle(&self) -> GroupCycle {
        let pods =
            (0..self.counts.len()).map(|i| (i as u64, member(i, self.cpu, self.kind, self.port))).collect();
        GroupCycle::new(
            group("pg", if self.gang { Some(self.min) } else { None }, Some("rack")),
            true,
            pods,
            vec![],
        )
    }

    fn config(&self, search: PlacementSearch) -> SchedulerConfig {
        let mut config = SchedulerConfig { placement_search: search, ..SchedulerConfig::default() };
        if self.dra_off {
            config.plugins.disable(ExtensionPoint::Filter, "DynamicResources");
        }
        config
    }

    /// The whole placement search, optimized or plain.
    fn decide(&self, search: PlacementSearch) -> String {
        let config = self.config(search);
        let mut snap = self.snapshot();
        let fw = crate::plugins::pod_framework(&config);
        let pf = crate::plugins::placement_framework(&config);
        let ctx = GroupContext { placements: &pf, algo: &fw, config: &config };
        let out =
            schedule_pod_group(&ctx, &mut snap, &self.cycle(), GroupHooks::default(), &mut NoopObserver);
        essence(&out, &snap)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    /// The optimized search (copy counting with devices where it is exact) decides as the
    /// plain one.
    #[test]
    fn device_copy_counting_decides_like_the_plain_search(c in case()) {
        prop_assert_eq!(c.decide(PlacementSearch::Optimized), c.decide(PlacementSearch::Baseline));
    }

    /// Placement by placement: counting gives the same verdict and pod count as simulating
    /// the members, and the one-pass placement of identical members places them where the
    /// simulation does (and leaves the snapshot as found).
    #[test]
    fn device_copy_counting_agrees_with_simulation(c in case()) {
        let config = c.config(PlacementSearch::Optimized);
        let mut snap = c.snapshot();
        let cycle = c.cycle();
        let fw = crate::plugins::pod_framework(&config);
        let pf = crate::plugins::placement_framework(&config);
        let ctx = GroupContext { placements: &pf, algo: &fw, config: &config };
        let Some(counting) = counting_is_exact(&ctx, &snap, &cycle) else { return Ok(()) };
        let placements = pf.generate(&snap, &cycle, &Placement { name: "".into(), nodes: snap.node_ids().into() }).unwrap().placements;
        let order: Vec<usize> = (0..placements.len()).collect();
        let plan = EvaluationPlan { placements: &placements, prefilter: None, devices: None, key: "rack", order: &order, to_find: usize::MAX, nominated_first: None };
        let counted = evaluate_placements(&ctx, &mut snap, &cycle, &plan, Some(&counting), &mut NoopObserver);
        let simulated = evaluate_placements(&ctx, &mut snap, &cycle, &plan, None, &mut NoopObserver);
        prop_assert_eq!(counted.len(), simulated.len());
        for (a, b) in counted.iter().zip(&simulated) {
            prop_assert_eq!(a.feasible(), b.feasible(), "placement {}", placements[a.idx].name.clone());
            if b.feasible() {
                prop_assert_eq!(a.placed_pods.len(), b.placed_pods.len());
                prop_assert_eq!(a.scheduled_total, b.scheduled_total);
            }
            let nodes = &placements[a.idx].nodes;
            let before = snap.dra().in_use_recomputed();
            let fast = crate::podgroup::run_uniform_group_in_nodes(&fw, &mut snap, &cycle, nodes, &pf.feasible);
            prop_assert_eq!(&before, &snap.dra().in_use_recomputed());
            let mark = snap.checkpoint();
            let slow = crate::podgroup::run_group_in_nodes(&fw, &mut snap, &cycle, nodes, &pf.feasible, None);
            snap.rollback(mark);
            prop_assert_eq!(&fast.placed, &slow.placed);
            prop_assert_eq!(
                fast.failed.iter().map(|(i, f)| (*i, f.to_string())).collect::<Vec<_>>(),
                slow.failed.iter().map(|(i, f)| (*i, f.to_string())).collect::<Vec<_>>()
            );
        }
    }
}

/// Copy counting is what evaluates a rack-constrained gang of one-GPU members whose claims
/// come from one template (the `h-dra-gangs` shape), and it counts the devices: r0's nodes
/// have cpu for every member but GPUs for three; r1 holds all four.
#[test]
fn template_claims_are_counted_per_node() {
    let c = Case {
        nodes: vec![(16, 0, 2), (16, 0, 1), (4, 1, 2), (4, 1, 2)],
        held: Vec::new(),
        counts: vec![1; 4],
        kind: Kind::Plain,
        cpu: "1",
        min: 4,
        gang: true,
        dra_off: false,
        port: false,
    };
    let config = c.config(PlacementSearch::Optimized);
    let mut snap = c.snapshot();
    let cycle = c.cycle();
    let fw = crate::plugins::pod_framework(&config);
    let pf = crate::plugins::placement_framework(&config);
    let ctx = GroupContext { placements: &pf, algo: &fw, config: &config };
    let counting = counting_is_exact(&ctx, &snap, &cycle).expect("template claims are counted");
    assert!(counting.devices.is_some());
    let placements = pf
        .generate(&snap, &cycle, &Placement { name: "".into(), nodes: snap.node_ids().into() })
        .unwrap()
        .placements;
    let order: Vec<usize> = (0..placements.len()).collect();
    let plan = EvaluationPlan {
        placements: &placements,
        prefilter: None,
        devices: None,
        key: "rack",
        order: &order,
        to_find: usize::MAX,
        nominated_first: None,
    };
    let evaluated = evaluate_placements(&ctx, &mut snap, &cycle, &plan, Some(&counting), &mut NoopObserver);
    let summary: Vec<(String, bool, usize, String)> = evaluated
        .iter()
        .map(|e| {
            assert!(matches!(e.eval, Eval::Counted { .. }), "{}: simulated", placements[e.idx].name);
            (
                placements[e.idx].name.to_string(),
                e.feasible(),
                e.placed_pods.len(),
                e.reason(|_, _| String::new()),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("r0".to_string(), false, 3, crate::plugins::dynamic_resources::ERR_CANNOT_ALLOCATE.to_string()),
            ("r1".to_string(), true, 4, String::new()),
        ]
    );
    assert_eq!(c.decide(PlacementSearch::Optimized), c.decide(PlacementSearch::Baseline));
}
