//! Micro-benchmarks of the engine's hot paths (criterion).
//!
//! * `find_node/5000_nodes`: the pod-level algorithm (filter + score) over 5,000 nodes.
//! * `fit_count/rack_of_20`: NodeResourcesFit copy counting over one 20-node rack.
//! * `tas/find_assignment/...`: seed 002's hierarchical search for a 1,024-pod
//!   preferred-rack request on the 10,000-node 16 x 25 x 25 tree (with and without
//!   building the domain tree).
//! * `placement/total_scores/250_racks`: PlacementScore + normalize over 250 rack
//!   placements of a 64-pod gang.
//! * `single_sequence/{identical,mixed}/{plain,reuse}`: 300 single pods in a row, the plain
//!   sampled search against the one reusing the previous pod's per-node results.
//! * `placement/schedule_pod_group/...`: a whole PodGroup cycle (generate, pre-filter,
//!   evaluate, score, confirm) for a 64-pod rack gang on 5,000 nodes, in both placement
//!   searches.
//!
//! `cargo bench -p placer-engine` measures; `cargo test --benches -p placer-engine` runs
//! each benchmark once as a smoke test. Figures on shared machines are indicative only.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use placer_api::gates::FeatureGates;
use placer_api::k8s::api::core::v1::{
    Container, Node, NodeStatus, Pod, PodSchedulingGroup, PodSpec, ResourceRequirements,
};
use placer_api::k8s::api::scheduling::v1alpha2::{
    GangSchedulingPolicy, PodGroup, PodGroupSchedulingConstraints, PodGroupSchedulingPolicy, PodGroupSpec,
    TopologyConstraint,
};
use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use placer_engine::bench::{
    self as tas, find_node, find_node_sampled, find_node_sampled_reusing, fit_count,
    num_feasible_nodes_to_find, placement_framework, pod_framework, schedule_pod_group, total_scores,
    DomainTree, GroupContext, GroupCycle, GroupHooks, NodeId, NodeStatic, Placement, PlacementAggregate,
    PlacementCandidate, PodGroupInfo, PodInfo, SingleReuse, Snapshot, TasNode, TasProblem, TopologyMode,
    TopologyRequest,
};
use placer_engine::NoopObserver;
use placer_engine::{PlacementSearch, Resources, SchedulerConfig};

const RACK: &str = "topology.example.com/rack";
const GPU: &str = "nvidia.com/gpu";
const RACKS: usize = 250;
const HOSTS_PER_RACK: usize = 20;

fn list(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect()
}

/// A GPU server: 64 cores, 512 GiB, 110 pods, 8 GPUs.
fn node(name: &str, rack: &str) -> Node {
    let alloc = list(&[("cpu", "64"), ("memory", "512Gi"), ("pods", "110"), (GPU, "8")]);
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(
                [
                    (RACK.to_string(), rack.to_string()),
                    ("kubernetes.io/hostname".to_string(), name.to_string()),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        status: Some(NodeStatus {
            allocatable: Some(alloc.clone()),
            capacity: Some(alloc),
            ..NodeStatus::default()
        }),
        ..Node::default()
    }
}

/// A one-GPU worker (4 cores, 32 GiB), optionally in a group and bound to a node.
fn pod(name: &str, group: Option<&str>, node: Option<&str>) -> Arc<PodInfo> {
    pod_asking(name, group, node, &[("cpu", "4"), ("memory", "32Gi"), (GPU, "1")])
}

/// A pod asking for `requests`, optionally in a group and bound to a node.
fn pod_asking(
    name: &str,
    group: Option<&str>,
    node: Option<&str>,
    requests: &[(&str, &str)],
) -> Arc<PodInfo> {
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("bench".to_string()),
            uid: Some(format!("uid-{name}")),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: node.map(str::to_string),
            scheduler_name: Some("placer".to_string()),
            scheduling_group: group.map(|g| PodSchedulingGroup { pod_group_name: Some(g.to_string()) }),
            containers: vec![Container {
                name: "worker".to_string(),
                resources: Some(ResourceRequirements {
                    requests: Some(list(requests)),
                    limits: Some(list(
                        &requests.iter().copied().filter(|(k, _)| *k == GPU).collect::<Vec<_>>(),
                    )),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    };
    Arc::new(PodInfo::from_pod(Arc::new(pod)).expect("benchmark pod reads"))
}

/// 5,000 nodes in 250 racks of 20, every node holding 0-6 bound one-GPU pods.
fn loaded_snapshot() -> Snapshot {
    let mut snap = Snapshot::new();
    for r in 0..RACKS {
        for h in 0..HOSTS_PER_RACK {
            let name = format!("r{r:03}-h{h:02}");
            let info = NodeStatic::from_node(Arc::new(node(&name, &format!("r{r:03}")))).expect("node reads");
            snap.upsert_node(info);
            for p in 0..(r * 7 + h) % 7 {
                snap.upsert_pod(pod(&format!("{name}-p{p}"), None, Some(&name)));
            }
        }
    }
    snap
}

fn gang_cycle(size: u32) -> GroupCycle {
    let pg = PodGroup {
        metadata: ObjectMeta {
            name: Some("gang".to_string()),
            namespace: Some("bench".to_string()),
            ..ObjectMeta::default()
        },
        spec: PodGroupSpec {
            scheduling_policy: PodGroupSchedulingPolicy {
                gang: Some(GangSchedulingPolicy { min_count: size as i32 }),
                basic: None,
            },
            scheduling_constraints: Some(PodGroupSchedulingConstraints {
                topology: Some(vec![TopologyConstraint { key: RACK.to_string() }]),
            }),
            ..PodGroupSpec::default()
        },
        status: None,
    };
    let info = Arc::new(PodGroupInfo::from_pod_group(Arc::new(pg)).expect("group reads"));
    let pods = (0..size).map(|i| (u64::from(i), pod(&format!("gang-{i}"), Some("gang"), None))).collect();
    GroupCycle::new(info, true, pods, Vec::new())
}

fn bench_find_node(c: &mut Criterion) {
    let snap = loaded_snapshot();
    let fw = pod_framework(&SchedulerConfig::default());
    let p = pod("incoming", None, None);
    c.bench_function("find_node/5000_nodes", |b| {
        b.iter(|| find_node(&fw, black_box(&snap), black_box(&p), snap.node_ids()).expect("a node fits"))
    });
}

fn bench_fit_count(c: &mut Criterion) {
    let snap = loaded_snapshot();
    let p = pod("incoming", None, None);
    let rack: Vec<NodeId> = snap.node_ids()[..HOSTS_PER_RACK].to_vec();
    c.bench_function("fit_count/rack_of_20", |b| {
        b.iter(|| rack.iter().map(|&n| fit_count(black_box(&snap), black_box(&p), n)).sum::<u32>())
    });
}

fn bench_tas(c: &mut Criterion) {
    let levels: Vec<String> = vec![
        "topology.example.com/block".to_string(),
        RACK.to_string(),
        "kubernetes.io/hostname".to_string(),
    ];
    let mut nodes = Vec::with_capacity(10_000);
    for b in 0..16 {
        for r in 0..25 {
            for h in 0..25 {
                let mut free =
                    Resources { cpu: 64_000, memory: 512 << 30, pods: 110, ..Resources::default() };
                // Some GPUs taken, so racks differ and BestFit has to choose.
                let used = ((b * 25 + r) * 3 + h) % 5;
                free.set(GPU, 8 - used as i64);
                nodes.push(TasNode::new(
                    format!("b{b:02}-r{r:02}-h{h:02}"),
                    vec![format!("b{b:02}"), format!("b{b:02}-r{r:02}"), format!("b{b:02}-r{r:02}-h{h:02}")],
                    free,
                ));
            }
        }
    }
    let mut requests = Resources { cpu: 8_000, memory: 64 << 30, ..Resources::default() };
    requests.set(GPU, 1);
    let request = TopologyRequest::new(TopologyMode::Preferred(1));
    let gates = FeatureGates::default();
    let problem = TasProblem {
        levels: &levels,
        nodes: &nodes,
        worker_requests: &requests,
        worker_count: 1024,
        leader: None,
        request: &request,
        gates: &gates,
        algorithms: Default::default(),
    };
    let tree = DomainTree::new(&levels, &nodes).expect("tree builds");
    let mut g = c.benchmark_group("tas");
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    g.bench_function("find_assignment/1024_pods_preferred_rack_10k_nodes", |b| {
        b.iter(|| tas::find_assignment(black_box(&problem)).expect("fits"))
    });
    g.bench_function("find_assignment_in/1024_pods_preferred_rack_10k_nodes_prebuilt_tree", |b| {
        b.iter(|| tas::find_assignment_in(&tree, black_box(&problem)).expect("fits"))
    });
    // One figure per algorithm of seed 002 on the same tree: BestFit (above, the default
    // for preferred), BalancedPlacement (gate TASBalancedPlacement, preferred) and
    // LeastFreeCapacity (the default for unconstrained requests).
    let balanced_gates = FeatureGates::with_overrides([("TASBalancedPlacement", true)]).expect("known gate");
    let balanced = TasProblem { gates: &balanced_gates, ..problem };
    g.bench_function("algorithm/balanced_placement/1024_pods_preferred_rack_10k_nodes", |b| {
        b.iter(|| tas::find_assignment_in(&tree, black_box(&balanced)).expect("fits"))
    });
    let unconstrained = TopologyRequest::new(TopologyMode::Unconstrained);
    let least_free = TasProblem { request: &unconstrained, ..problem };
    g.bench_function("algorithm/least_free_capacity/1024_pods_unconstrained_10k_nodes", |b| {
        b.iter(|| tas::find_assignment_in(&tree, black_box(&least_free)).expect("fits"))
    });
    g.finish();
}

fn bench_placement(c: &mut Criterion) {
    let mut snap = loaded_snapshot();
    let cycle = gang_cycle(64);
    let placements: Vec<Placement> = snap
        .node_ids()
        .chunks(HOSTS_PER_RACK)
        .enumerate()
        .map(|(i, ids)| Placement { name: format!("r{i:03}").into(), nodes: ids.into() })
        .collect();
    let aggregates: Vec<PlacementAggregate> = placements
        .iter()
        .map(|p| {
            let mut a = PlacementAggregate::default();
            for &id in p.nodes.iter() {
                let n = snap.node(id);
                a.allocatable.add(&n.info.allocatable);
                a.requested.add(&n.requested);
                a.requested_non_zero.add(&n.non_zero_requested);
            }
            a
        })
        .collect();
    let placed: Vec<usize> = (0..cycle.pods.len()).collect();
    let candidates: Vec<PlacementCandidate<'_>> = placements
        .iter()
        .zip(&aggregates)
        .map(|(p, a)| PlacementCandidate {
            placement: p,
            placed_pods: &placed,
            scheduled_total: 64,
            aggregate: a,
        })
        .collect();

    let mut g = c.benchmark_group("placement");
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    let config = SchedulerConfig::default();
    let pf = placement_framework(&config);
    g.bench_function("total_scores/250_racks", |b| {
        b.iter(|| total_scores(black_box(&snap), &cycle, &pf, black_box(&candidates)).expect("scores"))
    });
    for search in [PlacementSearch::Optimized, PlacementSearch::Baseline] {
        let config = SchedulerConfig { placement_search: search, ..SchedulerConfig::default() };
        let fw = pod_framework(&config);
        let pf = placement_framework(&config);
        let ctx = GroupContext { placements: &pf, algo: &fw, config: &config };
        let name = format!("schedule_pod_group/64_pod_rack_gang_5000_nodes/{search:?}").to_lowercase();
        g.bench_function(name, |b| {
            b.iter(|| {
                schedule_pod_group(
                    &ctx,
                    &mut snap,
                    black_box(&cycle),
                    GroupHooks::default(),
                    &mut NoopObserver,
                )
            })
        });
    }
    g.finish();
}

/// 300 single pods in a row on the 5,000 loaded nodes, each assumed where it lands, with
/// kube's sampling (500 nodes found per pod) and the rotating start: the plain sampled
/// search against the one reusing the previous pod's per-node results, for pods of one
/// shape (`identical`) and for `d-single-pods`' mix of ~420 shapes (`mixed`, where the
/// previous pod rarely shares the shape: the reuse's overhead).
fn bench_single_sequence(c: &mut Criterion) {
    let base = loaded_snapshot();
    let fw = pod_framework(&SchedulerConfig::default());
    let ids = base.node_ids().to_vec();
    let to_find = num_feasible_nodes_to_find(None, ids.len());
    let mut group = c.benchmark_group("single_sequence");
    group.sample_size(10).measurement_time(Duration::from_secs(3));
    for mixed in [false, true] {
        let mut seed = 0xDu64;
        let mut next = |lo: u64, hi: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            lo + seed % (hi - lo)
        };
        let pods: Vec<Arc<PodInfo>> = (0..300)
            .map(|i| {
                let (cpu, mem, gpu) =
                    if mixed { (next(2, 16) * 250, next(1, 16), next(0, 4) == 0) } else { (1000, 2, false) };
                let (cpu, mem) = (format!("{cpu}m"), format!("{mem}Gi"));
                let mut req = vec![("cpu", cpu.as_str()), ("memory", mem.as_str())];
                if gpu {
                    req.push((GPU, "1"));
                }
                pod_asking(&format!("s{i}"), None, None, &req)
            })
            .collect();
        for reuse in [false, true] {
            let name = format!(
                "{}/{}",
                if mixed { "mixed" } else { "identical" },
                if reuse { "reuse" } else { "plain" }
            );
            group.bench_function(name, |b| {
                b.iter_batched(
                    || base.clone(),
                    |mut snap| {
                        let mut cache = SingleReuse::default();
                        let mut start = 0;
                        for p in &pods {
                            let (found, examined) = if reuse {
                                find_node_sampled_reusing(&fw, &snap, p, &ids, start, to_find, &mut cache)
                            } else {
                                find_node_sampled(&fw, &snap, p, &ids, start, to_find)
                            };
                            start = (start + examined) % ids.len();
                            if let Ok(node) = found {
                                snap.assume(p.clone(), node);
                            }
                        }
                        snap
                    },
                    BatchSize::LargeInput,
                )
            });
        }
    }
    group.finish();
}

criterion_group!(
    benches,
    bench_find_node,
    bench_fit_count,
    bench_tas,
    bench_placement,
    bench_single_sequence
);
criterion_main!(benches);
