//! The benchmark workloads: a regular cluster ([`ClusterSpec`]) and what is submitted to
//! it ([`Plan`]), generated deterministically from a fixed seed per workload.
//!
//! | id | cluster | submissions |
//! | --- | --- | --- |
//! | `a-upstream` | 100 nodes, 10 racks | gangs of 10 (1 GPU each) with a rack constraint until the cluster is full |
//! | `b-mixed-gangs` | 5,000 nodes, 250 racks | gangs of 8-256 with a rack constraint up to 90 % of the GPUs |
//! | `c-three-level` | 10,000 nodes, 16 blocks x 25 racks x 25 hosts | preferred-rack gangs of 64-1,024, some with rack slices |
//! | `d-single-pods` | 5,000 nodes, 250 racks | 50,000 pods without a group |
//! | `e-churn` | 5,000 nodes, 250 racks | gangs arriving and finishing for 60 s of virtual time |
//! | `scaling-<n>` | `b`'s shape at n nodes | `b`'s gang mix up to 30 % of the GPUs |
//! | `h-dra-gangs` | 1,000 nodes, 50 racks, 8 GPUs each as DRA devices | gangs of 16 one-GPU pods (a claim each, from a template) with a rack constraint up to 90 % of the GPUs |
//! | `i-extended-gangs` | the same with `nvidia.com/gpu` | the same gangs requesting the extended resource |
//!
//! `quick` shrinks every workload for smoke runs (CI).

use placer_api::k8s::api::core::v1::Node;
use serde::Serialize;

use crate::objects::{
    self, NodeShape, PodShape, Slice, TopologyAsk, BLOCK_LABEL, HOSTNAME_LABEL, RACK_LABEL,
};
use crate::rng::XorShift;

/// Nodes per rack in the two-level workloads (`b`, `d`, `e`, scaling): 5,000 nodes / 250 racks.
pub const HOSTS_PER_RACK: u32 = 20;

/// One level of a generated topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LevelSpec {
    /// Node label holding the domain.
    pub label: &'static str,
    /// Short prefix of the domain values (`b`, `r`).
    pub prefix: &'static str,
    /// Plural noun for descriptions (`blocks`, `racks`).
    pub noun: &'static str,
    /// Domains per parent domain.
    pub count: u32,
}

/// A regular cluster: `levels` coarsest first, then `hosts` nodes in each lowest domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterSpec {
    pub levels: Vec<LevelSpec>,
    pub hosts: u32,
    pub shape: NodeShape,
}

impl ClusterSpec {
    /// `racks` racks of `hosts` GPU servers.
    pub fn racks(racks: u32, hosts: u32) -> ClusterSpec {
        ClusterSpec {
            levels: vec![LevelSpec { label: RACK_LABEL, prefix: "r", noun: "racks", count: racks }],
            hosts,
            shape: NodeShape::GPU_SERVER,
        }
    }

    /// `blocks` blocks of `racks` racks of `hosts` GPU servers.
    pub fn blocks(blocks: u32, racks: u32, hosts: u32) -> ClusterSpec {
        ClusterSpec {
            levels: vec![
                LevelSpec { label: BLOCK_LABEL, prefix: "b", noun: "blocks", count: blocks },
                LevelSpec { label: RACK_LABEL, prefix: "r", noun: "racks", count: racks },
            ],
            hosts,
            shape: NodeShape::GPU_SERVER,
        }
    }

    /// Lowest-level domains (racks).
    pub fn domains(&self) -> u64 {
        self.levels.iter().map(|l| u64::from(l.count)).product()
    }

    /// Number of nodes.
    pub fn node_count(&self) -> u64 {
        self.domains() * u64::from(self.hosts)
    }

    /// GPUs in the whole cluster.
    pub fn gpus(&self) -> u64 {
        self.node_count() * u64::from(self.shape.gpus)
    }

    /// GPUs in one lowest-level domain (rack).
    pub fn gpus_per_domain(&self) -> u64 {
        u64::from(self.hosts) * u64::from(self.shape.gpus)
    }

    /// E.g. `16 blocks x 25 racks x 25 hosts`.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self.levels.iter().map(|l| format!("{} {}", l.count, l.noun)).collect();
        parts.push(format!("{} hosts", self.hosts));
        parts.join(" x ")
    }

    /// The engine's `topology_levels` for this cluster (coarsest first, hostname last).
    pub fn topology_levels(&self) -> Vec<String> {
        let mut v: Vec<String> = self.levels.iter().map(|l| l.label.to_string()).collect();
        v.push(HOSTNAME_LABEL.to_string());
        v
    }

    /// Calls `f` with every node, in name order. Names are zero-padded paths
    /// (`b03-r12-h07`), so name order is generation order and every level value is
    /// unique cluster-wide (`rack = b03-r12`).
    pub fn for_each_node(&self, mut f: impl FnMut(Node)) {
        let widths: Vec<usize> = self.levels.iter().map(|l| digits(l.count)).collect();
        let host_width = digits(self.hosts);
        let domains = self.domains();
        let mut values: Vec<String> = Vec::with_capacity(self.levels.len());
        for d in 0..domains {
            // Mixed-radix decomposition of the domain index, coarsest level first.
            values.clear();
            let mut rest = d;
            let mut indexes = vec![0u64; self.levels.len()];
            for (i, l) in self.levels.iter().enumerate().rev() {
                indexes[i] = rest % u64::from(l.count.max(1));
                rest /= u64::from(l.count.max(1));
            }
            let mut path = String::new();
            for (i, l) in self.levels.iter().enumerate() {
                if !path.is_empty() {
                    path.push('-');
                }
                path.push_str(&format!("{}{:0w$}", l.prefix, indexes[i], w = widths[i]));
                values.push(path.clone());
            }
            let labels: Vec<(&str, &str)> =
                self.levels.iter().zip(&values).map(|(l, v)| (l.label, v.as_str())).collect();
            for h in 0..self.hosts {
                let name = format!("{path}-h{h:0host_width$}");
                f(objects::node(&name, &labels, self.shape));
            }
        }
    }
}

/// Decimal digits of the largest index below `count`.
fn digits(count: u32) -> usize {
    count.saturating_sub(1).max(1).to_string().len()
}

/// A PodGroup to submit: `size` pods of one shape, `minCount = size`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupSpec {
    pub name: String,
    pub size: u32,
    pub pod: PodShape,
    pub ask: TopologyAsk,
}

impl GroupSpec {
    /// Name of the `i`-th pod of the group.
    pub fn pod_name(&self, i: u32) -> String {
        format!("{}-{i}", self.name)
    }
}

/// One submission of a batch workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Submission {
    Group(GroupSpec),
    /// A pod without a group.
    Pod {
        name: String,
        pod: PodShape,
    },
}

/// A group arriving during a churn run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Arrival {
    /// Virtual arrival time.
    pub at_ms: u64,
    pub group: GroupSpec,
    /// Virtual run time once bound; then its pods are deleted.
    pub run_ms: u64,
}

/// Churn: groups arriving at a steady rate, finishing after their run time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChurnPlan {
    pub arrivals: Vec<Arrival>,
    pub duration_ms: u64,
    pub tick_ms: u64,
}

/// What a workload submits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Plan {
    /// Submitted one at a time, each followed by one `schedule` call.
    Batch(Vec<Submission>),
    Churn(ChurnPlan),
}

impl Plan {
    /// Groups and pods submitted.
    pub fn totals(&self) -> (u64, u64) {
        match self {
            Plan::Batch(items) => items.iter().fold((0, 0), |(g, p), s| match s {
                Submission::Group(gs) => (g + 1, p + u64::from(gs.size)),
                Submission::Pod { .. } => (g, p + 1),
            }),
            Plan::Churn(c) => {
                (c.arrivals.len() as u64, c.arrivals.iter().map(|a| u64::from(a.group.size)).sum())
            }
        }
    }

    /// Steps the progress bar counts (submissions or ticks).
    pub fn steps(&self) -> u64 {
        match self {
            Plan::Batch(items) => items.len() as u64,
            Plan::Churn(c) => c.duration_ms.div_ceil(c.tick_ms.max(1)),
        }
    }
}

/// A generated workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Workload {
    pub id: String,
    pub title: String,
    pub cluster: ClusterSpec,
    /// `SchedulerConfig::topology_levels` (empty: KEP-5732 placements only).
    pub topology_levels: Vec<String>,
    pub plan: Plan,
    /// GPUs through Dynamic Resource Allocation instead of the `nvidia.com/gpu` extended
    /// resource: every node publishes a ResourceSlice of its GPUs, every GPU pod asks for
    /// one through a claim generated from a ResourceClaimTemplate.
    pub dra: bool,
}

/// A workload before it is generated (generation is deferred until it is selected).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recipe {
    Upstream,
    MixedGangs,
    ThreeLevel,
    SinglePods,
    Churn,
    /// The engine issue's pod-level figure: 5,000 nodes, 10,000 single pods.
    EngineSinglePods,
    /// The engine issue's group figure: 5,000 nodes, 1,000 gangs of 16 pods, no topology.
    EngineGangs,
    /// `b`'s shape at this many nodes.
    Scaling {
        nodes: u32,
    },
    /// 1,000 nodes x 8 GPUs, gangs of 16 one-GPU pods with a rack constraint: GPUs through
    /// DRA (`dra: true`) or the same workload with the extended resource.
    DeviceGangs {
        dra: bool,
    },
}

/// Node counts of the scaling curve.
pub fn scaling_points(quick: bool) -> Vec<u32> {
    if quick {
        vec![200, 400, 800, 1600]
    } else {
        vec![1_000, 5_000, 10_000, 50_000]
    }
}

/// `1000` -> `1k`, `50000` -> `50k`, `250` -> `250`.
pub fn short_count(n: u32) -> String {
    if n >= 1000 && n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

impl Recipe {
    /// Every workload of a full run, in run order (scaling last).
    pub fn all(quick: bool) -> Vec<Recipe> {
        let mut v = vec![
            Recipe::Upstream,
            Recipe::MixedGangs,
            Recipe::ThreeLevel,
            Recipe::SinglePods,
            Recipe::Churn,
            Recipe::EngineSinglePods,
            Recipe::EngineGangs,
            Recipe::DeviceGangs { dra: true },
            Recipe::DeviceGangs { dra: false },
        ];
        v.extend(scaling_points(quick).into_iter().map(|nodes| Recipe::Scaling { nodes }));
        v
    }

    /// Stable id (what `--filter` matches).
    pub fn id(&self) -> String {
        match self {
            Recipe::Upstream => "a-upstream".to_string(),
            Recipe::MixedGangs => "b-mixed-gangs".to_string(),
            Recipe::ThreeLevel => "c-three-level".to_string(),
            Recipe::SinglePods => "d-single-pods".to_string(),
            Recipe::Churn => "e-churn".to_string(),
            Recipe::EngineSinglePods => "f-single-10k".to_string(),
            Recipe::EngineGangs => "g-gangs-16".to_string(),
            Recipe::Scaling { nodes } => format!("scaling-{}", short_count(*nodes)),
            Recipe::DeviceGangs { dra: true } => "h-dra-gangs".to_string(),
            Recipe::DeviceGangs { dra: false } => "i-extended-gangs".to_string(),
        }
    }

    /// Whether the suite also runs it with the baseline placement search by default.
    pub fn baseline_by_default(&self) -> bool {
        matches!(self, Recipe::Upstream | Recipe::MixedGangs)
    }

    /// Generates the workload (deterministic).
    pub fn build(&self, quick: bool) -> Workload {
        match *self {
            Recipe::Upstream => upstream(),
            Recipe::MixedGangs => {
                let nodes = if quick { 500 } else { 5_000 };
                mixed_gangs(
                    self.id(),
                    "mixed gangs 8-256, rack constraint, to 90% of GPUs",
                    nodes,
                    0.9,
                    0xB0B,
                )
            }
            Recipe::ThreeLevel => three_level(quick),
            Recipe::SinglePods => single_pods(quick),
            Recipe::Churn => churn(quick),
            Recipe::EngineSinglePods => engine_single_pods(quick),
            Recipe::EngineGangs => engine_gangs(quick),
            Recipe::Scaling { nodes } => {
                mixed_gangs(self.id(), "b's gang mix at this size, to 30% of GPUs", nodes, 0.3, 0x5CA1E)
            }
            Recipe::DeviceGangs { dra } => device_gangs(self.id(), dra, quick),
        }
    }
}

/// `groups` gangs of `size` one-GPU pods with a rack constraint, named by `name`.
fn rack_gangs(groups: u64, size: u32, name: impl Fn(u64) -> String) -> Vec<Submission> {
    (0..groups)
        .map(|i| {
            Submission::Group(GroupSpec {
                name: name(i),
                size,
                pod: PodShape::GPU_WORKER,
                ask: TopologyAsk::Required { key: RACK_LABEL },
            })
        })
        .collect()
}

/// (a) The upstream-shaped workload: 100 nodes in 10 racks, gangs of 10 one-GPU pods with
/// a rack constraint, until every GPU is taken (8 gangs per rack).
pub fn upstream() -> Workload {
    let cluster = ClusterSpec::racks(10, 10);
    let size = 10u32;
    let groups = cluster.gpus() / u64::from(size);
    let items = rack_gangs(groups, size, |i| format!("a{i:05}"));
    Workload {
        id: Recipe::Upstream.id(),
        title: "gangs of 10, rack constraint, until full".to_string(),
        cluster,
        topology_levels: Vec::new(),
        plan: Plan::Batch(items),
        dra: false,
    }
}

/// (b) and the scaling points: `nodes` nodes in racks of [`HOSTS_PER_RACK`], gangs of 8,
/// 16, ..., 256 (uniform over the powers of two) with a rack constraint, submitted until
/// their GPUs reach `fill` of the cluster's. Gangs larger than a rack's GPUs are CPU-only
/// workers (they could never fit a rack with one GPU each).
pub fn mixed_gangs(id: String, title: &str, nodes: u32, fill: f64, seed: u64) -> Workload {
    let racks = (nodes / HOSTS_PER_RACK).max(1);
    let cluster = ClusterSpec::racks(racks, HOSTS_PER_RACK);
    let mut rng = XorShift::new(seed);
    let target = (cluster.gpus() as f64 * fill) as u64;
    let rack_gpus = cluster.gpus_per_domain();
    let mut gpus = 0u64;
    let mut items = Vec::new();
    while gpus < target {
        let size = 8u32 << rng.below(6);
        let pod = if u64::from(size) <= rack_gpus { PodShape::GPU_WORKER } else { PodShape::CPU_WORKER };
        gpus += u64::from(size) * u64::from(pod.gpus);
        items.push(Submission::Group(GroupSpec {
            name: format!("g{:05}", items.len()),
            size,
            pod,
            ask: TopologyAsk::Required { key: RACK_LABEL },
        }));
    }
    Workload {
        id,
        title: title.to_string(),
        cluster,
        topology_levels: Vec::new(),
        plan: Plan::Batch(items),
        dra: false,
    }
}

/// (c) 10,000 nodes in 16 blocks x 25 racks x 25 hosts with hierarchical topology levels;
/// gangs of 64-1,024 (powers of two) preferring one rack; half of the gangs of at least
/// 256 pods also require slices of 64 pods per rack. Submitted up to 30 % of the GPUs.
pub fn three_level(quick: bool) -> Workload {
    let (cluster, min, slice) = if quick {
        (ClusterSpec::blocks(2, 4, 10), 8u32, 8u32)
    } else {
        (ClusterSpec::blocks(16, 25, 25), 64, 64)
    };
    let mut rng = XorShift::new(0xC3);
    let target = (cluster.gpus() as f64 * 0.3) as u64;
    let mut gpus = 0u64;
    let mut items = Vec::new();
    while gpus < target {
        let size = min << rng.below(5);
        let slice = (size >= 4 * slice && rng.chance(1, 2)).then_some(Slice { key: RACK_LABEL, size: slice });
        gpus += u64::from(size);
        items.push(Submission::Group(GroupSpec {
            name: format!("t{:05}", items.len()),
            size,
            pod: PodShape::GPU_WORKER_LARGE,
            ask: TopologyAsk::Preferred { key: RACK_LABEL, slice },
        }));
    }
    let title = format!("preferred-rack gangs {min}-{}, some with rack slices", min << 4);
    Workload {
        id: Recipe::ThreeLevel.id(),
        title,
        topology_levels: cluster.topology_levels(),
        cluster,
        plan: Plan::Batch(items),
        dra: false,
    }
}

/// (d) 50,000 pods without a group on 5,000 nodes: 0.5-4 cores, 1-16 GiB, one in four with
/// a GPU.
pub fn single_pods(quick: bool) -> Workload {
    let (nodes, pods) = if quick { (500u32, 2_000u32) } else { (5_000, 50_000) };
    let cluster = ClusterSpec::racks(nodes / HOSTS_PER_RACK, HOSTS_PER_RACK);
    let mut rng = XorShift::new(0xD);
    let items = (0..pods)
        .map(|i| {
            let pod = PodShape {
                cpu_milli: u32::try_from(rng.range(2, 16)).unwrap_or(2) * 250,
                memory_mib: u32::try_from(rng.range(1, 16)).unwrap_or(1) * 1024,
                gpus: u32::from(rng.chance(1, 4)),
            };
            Submission::Pod { name: format!("p{i:06}"), pod }
        })
        .collect();
    Workload {
        id: Recipe::SinglePods.id(),
        title: "single pods, no group".to_string(),
        cluster,
        topology_levels: Vec::new(),
        plan: Plan::Batch(items),
        dra: false,
    }
}

/// (f) 5,000 nodes, 10,000 single pods of one CPU-only shape (the engine issue's
/// pod-level throughput figure).
pub fn engine_single_pods(quick: bool) -> Workload {
    let (nodes, pods) = if quick { (500u32, 1_000u32) } else { (5_000, 10_000) };
    let pod = PodShape { cpu_milli: 1_000, memory_mib: 2_048, gpus: 0 };
    let items = (0..pods).map(|i| Submission::Pod { name: format!("s{i:05}"), pod }).collect();
    Workload {
        id: Recipe::EngineSinglePods.id(),
        title: "10,000 single pods".to_string(),
        cluster: ClusterSpec::racks(nodes / HOSTS_PER_RACK, HOSTS_PER_RACK),
        topology_levels: Vec::new(),
        plan: Plan::Batch(items),
        dra: false,
    }
}

/// (g) 5,000 nodes, 1,000 gangs of 16 one-GPU pods without a topology constraint (the
/// engine issue's PodGroup-cycle throughput figure).
pub fn engine_gangs(quick: bool) -> Workload {
    let (nodes, groups) = if quick { (500u32, 100u32) } else { (5_000, 1_000) };
    let items = (0..groups)
        .map(|i| {
            Submission::Group(GroupSpec {
                name: format!("g{i:04}"),
                size: 16,
                pod: PodShape::GPU_WORKER,
                ask: TopologyAsk::None,
            })
        })
        .collect();
    Workload {
        id: Recipe::EngineGangs.id(),
        title: "1,000 gangs of 16, no topology".to_string(),
        cluster: ClusterSpec::racks(nodes / HOSTS_PER_RACK, HOSTS_PER_RACK),
        topology_levels: Vec::new(),
        plan: Plan::Batch(items),
        dra: false,
    }
}

/// (h, i) 1,000 nodes (50 racks x 20 hosts, 8 GPUs each), gangs of 16 one-GPU pods with a
/// rack constraint up to 90 % of the GPUs (450 gangs): GPUs as DRA devices requested
/// through claims (`h`), or as the `nvidia.com/gpu` extended resource (`i`), for the
/// ratio of the two.
pub fn device_gangs(id: String, dra: bool, quick: bool) -> Workload {
    let nodes = if quick { 100u32 } else { 1_000 };
    let cluster = ClusterSpec::racks(nodes / HOSTS_PER_RACK, HOSTS_PER_RACK);
    let size = 16u32;
    let groups = cluster.gpus() * 9 / 10 / u64::from(size);
    let items = rack_gangs(groups, size, |i| format!("d{i:04}"));
    let title = if dra { "gangs of 16, 1 GPU each by DRA claim" } else { "the same with nvidia.com/gpu" };
    Workload {
        id,
        title: title.to_string(),
        cluster,
        topology_levels: Vec::new(),
        plan: Plan::Batch(items),
        dra,
    }
}

/// (e) Churn on 5,000 nodes / 250 racks: 40 gangs per virtual second (8-128 one-GPU pods,
/// rack constraint) each running 5-30 s once bound, then deleted; 60 s of virtual time.
pub fn churn(quick: bool) -> Workload {
    let (nodes, duration_ms, per_tick, run) = if quick {
        (500u32, 10_000u64, 1u64, (2_000u64, 6_000u64))
    } else {
        (5_000, 60_000, 4, (5_000, 30_000))
    };
    let tick_ms = 100;
    let cluster = ClusterSpec::racks(nodes / HOSTS_PER_RACK, HOSTS_PER_RACK);
    let mut rng = XorShift::new(0xE);
    let mut arrivals = Vec::new();
    let mut t = 0;
    while t < duration_ms {
        for _ in 0..per_tick {
            let size = 8u32 << rng.below(5);
            arrivals.push(Arrival {
                at_ms: t,
                group: GroupSpec {
                    name: format!("c{:05}", arrivals.len()),
                    size,
                    pod: PodShape::GPU_WORKER,
                    ask: TopologyAsk::Required { key: RACK_LABEL },
                },
                run_ms: rng.range(run.0, run.1),
            });
        }
        t += tick_ms;
    }
    let rate = per_tick * 1000 / tick_ms;
    Workload {
        id: Recipe::Churn.id(),
        title: format!(
            "churn: {rate} gangs/s arrive, run {}-{} s, {} s virtual",
            run.0 / 1000,
            run.1 / 1000,
            duration_ms / 1000
        ),
        cluster,
        topology_levels: Vec::new(),
        plan: Plan::Churn(ChurnPlan { arrivals, duration_ms, tick_ms }),
        dra: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_engine::testing::NodeStatic;
    use std::collections::BTreeSet;
    use std::sync::Arc;

    fn nodes(c: &ClusterSpec) -> Vec<Node> {
        let mut v = Vec::new();
        c.for_each_node(|n| v.push(n));
        v
    }

    #[test]
    fn clusters_have_the_stated_shape_and_sorted_unique_names() {
        let c = ClusterSpec::blocks(2, 3, 4);
        assert_eq!((c.domains(), c.node_count(), c.gpus()), (6, 24, 192));
        assert_eq!(c.describe(), "2 blocks x 3 racks x 4 hosts");
        assert_eq!(c.topology_levels(), vec![BLOCK_LABEL, RACK_LABEL, HOSTNAME_LABEL]);
        let ns = nodes(&c);
        let names: Vec<String> = ns.iter().map(|n| n.metadata.name.clone().unwrap_or_default()).collect();
        assert_eq!(names.len(), 24);
        assert_eq!(names[0], "b0-r0-h0");
        assert_eq!(names[23], "b1-r2-h3");
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(sorted, names, "generation order is name order");
        let racks: BTreeSet<String> = ns
            .iter()
            .map(|n| {
                NodeStatic::from_node(Arc::new(n.clone()))
                    .expect("reads")
                    .label(RACK_LABEL)
                    .unwrap_or("")
                    .to_string()
            })
            .collect();
        assert_eq!(racks.len(), 6, "rack values are unique across blocks");

        let wide = ClusterSpec::racks(250, 20);
        let ns = nodes(&wide);
        assert_eq!(ns.len(), 5_000);
        assert_eq!(ns[0].metadata.name.as_deref(), Some("r000-h00"));
        assert_eq!(ns[4_999].metadata.name.as_deref(), Some("r249-h19"));
    }

    #[test]
    fn upstream_fills_the_cluster_exactly() {
        let w = upstream();
        assert_eq!(w.cluster.node_count(), 100);
        assert_eq!(w.cluster.domains(), 10);
        assert_eq!(w.plan.totals(), (80, 800));
        assert!(w.topology_levels.is_empty());
    }

    #[test]
    fn generation_is_deterministic() {
        for r in Recipe::all(true) {
            assert_eq!(r.build(true), r.build(true), "{}", r.id());
        }
        assert_eq!(Recipe::MixedGangs.build(false), Recipe::MixedGangs.build(false));
    }

    #[test]
    fn mixed_gangs_stay_in_range_and_fit_a_rack() {
        let w = Recipe::MixedGangs.build(false);
        assert_eq!(w.cluster.node_count(), 5_000);
        assert_eq!(w.cluster.domains(), 250);
        let Plan::Batch(items) = &w.plan else { panic!("batch") };
        let mut sizes = BTreeSet::new();
        let mut gpus = 0u64;
        for s in items {
            let Submission::Group(g) = s else { panic!("groups only") };
            assert!((8..=256).contains(&g.size));
            assert!(u64::from(g.size * g.pod.gpus) <= w.cluster.gpus_per_domain());
            assert_eq!(g.ask, TopologyAsk::Required { key: RACK_LABEL });
            sizes.insert(g.size);
            gpus += u64::from(g.size * g.pod.gpus);
        }
        assert_eq!(sizes.len(), 6, "every size of 8..=256 appears");
        assert!(gpus >= w.cluster.gpus() * 9 / 10 && gpus < w.cluster.gpus() * 9 / 10 + 256);
    }

    #[test]
    fn three_level_has_preferred_gangs_and_dividing_slices() {
        let w = Recipe::ThreeLevel.build(false);
        assert_eq!(w.cluster.node_count(), 10_000);
        assert_eq!(w.topology_levels.len(), 3);
        let Plan::Batch(items) = &w.plan else { panic!("batch") };
        let mut sliced = 0;
        let mut largest = 0;
        for s in items {
            let Submission::Group(g) = s else { panic!("groups only") };
            assert!((64..=1024).contains(&g.size));
            largest = largest.max(g.size);
            match g.ask {
                TopologyAsk::Preferred { key, slice } => {
                    assert_eq!(key, RACK_LABEL);
                    if let Some(sl) = slice {
                        assert_eq!(g.size % sl.size, 0);
                        sliced += 1;
                    }
                }
                other => panic!("unexpected ask {other:?}"),
            }
        }
        assert!(sliced > 0);
        assert_eq!(largest, 1024);
    }

    #[test]
    fn single_pods_and_churn_shapes() {
        let w = Recipe::SinglePods.build(false);
        assert_eq!(w.plan.totals(), (0, 50_000));
        assert_eq!(w.cluster.node_count(), 5_000);
        let w = Recipe::Churn.build(false);
        let Plan::Churn(c) = &w.plan else { panic!("churn") };
        assert_eq!(c.duration_ms, 60_000);
        assert_eq!(c.arrivals.len(), 2_400, "40 per second for 60 s");
        assert!(c.arrivals.iter().all(|a| a.at_ms < 60_000 && (5_000..=30_000).contains(&a.run_ms)));
        assert_eq!(w.plan.steps(), 600);
    }

    #[test]
    fn engine_issue_workloads_have_the_stated_sizes() {
        assert_eq!(engine_single_pods(false).plan.totals(), (0, 10_000));
        assert_eq!(engine_gangs(false).plan.totals(), (1_000, 16_000));
        assert_eq!(engine_gangs(false).cluster.node_count(), 5_000);
    }

    #[test]
    fn ids_and_scaling_points() {
        let ids: Vec<String> = Recipe::all(false).iter().map(Recipe::id).collect();
        assert_eq!(
            ids,
            [
                "a-upstream",
                "b-mixed-gangs",
                "c-three-level",
                "d-single-pods",
                "e-churn",
                "f-single-10k",
                "g-gangs-16",
                "h-dra-gangs",
                "i-extended-gangs",
                "scaling-1k",
                "scaling-5k",
                "scaling-10k",
                "scaling-50k"
            ]
        );
        let s = Recipe::Scaling { nodes: 10_000 }.build(false);
        assert_eq!(s.cluster.node_count(), 10_000);
        assert_eq!(short_count(250), "250");
    }
}
