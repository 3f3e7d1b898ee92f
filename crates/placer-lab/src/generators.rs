//! Built-in traces, deterministic for a seed.
//!
//! * [`kueue_tas`]: the shape of Kueue's TAS performance test
//!   (`test/performance/scheduler/configs/tas/generator.yaml` in kubernetes-sigs/kueue):
//!   640 nodes as 1 block x 10 racks x 64 hosts (96 cpu, 256Gi), 30 ClusterQueues (5
//!   cohorts x 6) each submitting 500 workloads: 350 small (2 pods x 500m, 200 ms),
//!   100 medium (4 x 1250m, 500 ms), 50 large (8 x 2500m, 1 s), each third with a
//!   required rack, a preferred rack, or rack slices ("balanced": slice sizes 1, 2, 4),
//!   priorities 50 / 100 / 200, created every 100 / 500 / 1200 ms per set: 15,000
//!   workloads. Kueue caps what runs at the queues' nominal quota (30 x 20 cpu = 600 cpu,
//!   1/102.4 of the cluster) and reports that quota 62.4 % used; Placer has no quota, so
//!   the cluster itself is the cap, and every run time is stretched by the same 102.4 to
//!   offer the cluster the load upstream offers the quota.
//! * [`gpu_training`]: 5,000 nodes x 8 GPUs (10 blocks x 25 racks x 20 hosts), gangs of
//!   8 to 1,024 GPUs with log-uniform sizes, heavy-tailed (log-normal) run times, a
//!   required rack up to 128 GPUs and a required block above, submitted as Indexed Jobs
//!   (the Job controller makes their Workloads and PodGroups) at a rate that offers about
//!   115 % of the cluster.
//! * [`mixed`]: 1,000 GPU nodes where single pods (one-GPU inference and cpu-only
//!   services, minutes long) and training gangs (2-32 pods of 2-8 GPUs, a required or a
//!   preferred rack, an hour long) compete for about 110 % of the cluster.
//!
//! `scale` shrinks a trace (fewer workloads and nodes, the same shape) for tests.

use std::collections::BTreeMap;

use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;
use placer_bench::rng::XorShift;
use placer_sim::scenario::GenerateSpec;

use crate::trace::{default_sample_interval, Arrival, ArrivalKind, Cluster, Res, TopologyAsk, Trace, GPU};

/// Built-in trace names, in the order `placer replay` runs them.
pub const BUILTIN: [&str; 3] = ["kueue-tas", "gpu-training", "mixed"];

/// Kueue's quota is 1/102.4 of its cluster: run times are stretched by this.
pub const KUEUE_RUNTIME_STRETCH: f64 = 61_440.0 / 600.0;

/// The built-in trace `name`.
pub fn builtin(name: &str, seed: u64, scale: f64) -> Result<Trace, String> {
    match name {
        "kueue-tas" => Ok(kueue_tas(seed, scale)),
        "gpu-training" => Ok(gpu_training(seed, scale)),
        "mixed" => Ok(mixed(seed, scale)),
        other => Err(format!("unknown built-in trace {other:?} (known: {})", BUILTIN.join(", "))),
    }
}

fn q(s: &str) -> Quantity {
    Quantity(s.to_string())
}

fn list(pairs: &[(&str, String)]) -> BTreeMap<String, Quantity> {
    pairs.iter().map(|(k, v)| (k.to_string(), q(v))).collect()
}

fn cluster(levels: &[&str], fanout: Vec<u32>, allocatable: &[(&str, &str)]) -> Cluster {
    Cluster {
        spec: GenerateSpec {
            levels: levels.iter().map(|s| s.to_string()).collect(),
            fanout,
            allocatable: allocatable.iter().map(|(k, v)| (k.to_string(), q(v))).collect(),
            labels: BTreeMap::new(),
        },
    }
}

/// Uniform in [0, 1).
fn unit(r: &mut XorShift) -> f64 {
    (r.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Standard normal (Box-Muller).
fn normal(r: &mut XorShift) -> f64 {
    let u1 = unit(r).max(f64::MIN_POSITIVE);
    let u2 = unit(r);
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Log-normal with this median and shape, clamped to [lo, hi] (ms).
fn log_normal_ms(r: &mut XorShift, median_ms: f64, sigma: f64, lo: u64, hi: u64) -> u64 {
    let v = median_ms * (sigma * normal(r)).exp();
    (v.round() as u64).clamp(lo, hi)
}

fn scaled(n: u32, scale: f64, min: u32) -> u32 {
    ((f64::from(n) * scale).round() as u32).max(min)
}

#[allow(clippy::too_many_arguments)]
fn arrival(
    name: String,
    at_ms: u64,
    kind: ArrivalKind,
    pods: u32,
    requests: BTreeMap<String, Quantity>,
    topology: TopologyAsk,
    priority: i32,
    run_ms: u64,
    class: &str,
) -> Arrival {
    let mut res = Res::from_list(&requests);
    res.pods = 1;
    Arrival {
        name,
        at_ms,
        kind,
        pods,
        min_count: pods,
        requests,
        res,
        topology,
        priority,
        run_ms,
        class: class.to_string(),
    }
}

fn finish(
    name: &str,
    description: String,
    cluster: Cluster,
    gates: &[(&str, bool)],
    mut arrivals: Vec<Arrival>,
    seed: u64,
) -> Trace {
    arrivals.sort_by_key(|a| a.at_ms);
    Trace {
        name: name.to_string(),
        description: Some(description),
        source: format!("generated:{name} seed={seed}"),
        cluster,
        gates: gates.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        sample_interval_ms: default_sample_interval(&arrivals),
        horizon_ms: None,
        arrivals,
    }
}

/// Kueue's TAS performance test shape (see the module documentation). The seed only
/// jitters creation times within a millisecond's worth of queue order: upstream's
/// generator is clocked, not random.
pub fn kueue_tas(seed: u64, scale: f64) -> Trace {
    const BLOCK: &str = "cloud.provider.com/topology-block";
    const RACK: &str = "cloud.provider.com/topology-rack";
    let hosts = scaled(64, scale, 2);
    let cluster = cluster(
        &[BLOCK, RACK, "kubernetes.io/hostname"],
        vec![1, 10, hosts],
        &[("cpu", "96"), ("memory", "256Gi"), ("pods", "110")],
    );
    /// (count, creation interval ms, class, run time ms, priority, cpu, pods, how)
    type Set = (u32, u64, &'static str, u64, i32, &'static str, u32, How);
    #[derive(Clone, Copy)]
    enum How {
        Required,
        Preferred,
        Slices(u32),
    }
    let sets: [Set; 9] = [
        (120, 100, "small-required-rack", 200, 50, "500m", 2, How::Required),
        (120, 100, "small-preferred-rack", 200, 50, "500m", 2, How::Preferred),
        (110, 100, "small-balanced-rack", 200, 50, "500m", 2, How::Slices(1)),
        (34, 500, "medium-required-rack", 500, 100, "1250m", 4, How::Required),
        (33, 500, "medium-preferred-rack", 500, 100, "1250m", 4, How::Preferred),
        (33, 500, "medium-balanced-rack", 500, 100, "1250m", 4, How::Slices(2)),
        (17, 1200, "large-required-rack", 1000, 200, "2500m", 8, How::Required),
        (17, 1200, "large-preferred-rack", 1000, 200, "2500m", 8, How::Preferred),
        (16, 1200, "large-balanced-rack", 1000, 200, "2500m", 8, How::Slices(4)),
    ];
    let queues = scaled(30, scale, 1);
    let mut rng = XorShift::new(seed);
    let mut arrivals = Vec::new();
    for queue in 0..queues {
        for (count, interval, class, run, priority, cpu, pods, how) in sets {
            for k in 1..=u64::from(count) {
                let topology = match how {
                    How::Required => TopologyAsk { required: Some(1), ..TopologyAsk::default() },
                    How::Preferred => TopologyAsk { preferred: Some(1), ..TopologyAsk::default() },
                    How::Slices(s) => TopologyAsk { slice: Some((1, s)), ..TopologyAsk::default() },
                };
                let at = k * interval + rng.below(u64::from(queues));
                arrivals.push(arrival(
                    format!("{class}-q{queue}-{k}"),
                    at,
                    ArrivalKind::PodGroup,
                    pods,
                    list(&[("cpu", cpu.to_string())]),
                    topology,
                    priority,
                    (run as f64 * KUEUE_RUNTIME_STRETCH).round() as u64,
                    class,
                ));
            }
        }
    }
    finish(
        "kueue-tas",
        format!(
            "Kueue's TAS performance test shape: 1 block x 10 racks x {hosts} hosts (96 cpu), {queues} queues x 500 workloads of 2/4/8 pods \
             (required rack, preferred rack, rack slices), priorities 50/100/200, run times x{KUEUE_RUNTIME_STRETCH:.1}"
        ),
        cluster,
        &[("WorkloadAwarePreemption", true)],
        arrivals,
        seed,
    )
}

/// The GPU training mix (see the module documentation).
pub fn gpu_training(seed: u64, scale: f64) -> Trace {
    const BLOCK: &str = "topology.placer.dev/block";
    const RACK: &str = "topology.placer.dev/rack";
    let blocks = scaled(10, scale, 1);
    let cluster = cluster(
        &[BLOCK, RACK, "kubernetes.io/hostname"],
        vec![blocks, 25, 20],
        &[("cpu", "128"), ("memory", "2Ti"), ("pods", "110"), (GPU, "8")],
    );
    let capacity_gpus = f64::from(blocks * 25 * 20 * 8);
    let gangs = scaled(1_200, scale, 4);
    let mut rng = XorShift::new(seed);
    let mut arrivals = Vec::new();
    let mut work = 0.0;
    for i in 0..gangs {
        // log-uniform GPUs in [8, 1024]
        let gpus = 8.0 * 128f64.powf(unit(&mut rng));
        let per_pod: u32 = if gpus >= 64.0 {
            8
        } else {
            match rng.below(10) {
                0..=3 => 8,
                4..=6 => 4,
                7..=8 => 2,
                _ => 1,
            }
        };
        let pods = ((gpus / f64::from(per_pod)).round() as u32).max(1);
        let total = pods * per_pod;
        let topology = if total <= 128 {
            TopologyAsk { required: Some(1), ..TopologyAsk::default() }
        } else {
            TopologyAsk { required: Some(0), ..TopologyAsk::default() }
        };
        let run = log_normal_ms(&mut rng, 45.0 * 60_000.0, 1.5, 2 * 60_000, 24 * 3_600_000);
        work += f64::from(total) * run as f64;
        let requests = list(&[
            ("cpu", (12 * per_pod).to_string()),
            ("memory", format!("{}Gi", 200 * per_pod)),
            (GPU, per_pod.to_string()),
        ]);
        let class = if total <= 128 { "gang <=128 GPUs, rack" } else { "gang >128 GPUs, block" };
        let kind = if pods > 1 { ArrivalKind::Job } else { ArrivalKind::PodGroup };
        arrivals.push(arrival(format!("train-{i}"), 0, kind, pods, requests, topology, 0, run, class));
    }
    // Poisson arrivals over the window that offers 115 % of the cluster.
    let window = work / (1.15 * capacity_gpus);
    let mean_gap = window / f64::from(gangs);
    let mut t: f64 = 0.0;
    for a in &mut arrivals {
        a.at_ms = t.round() as u64;
        t += -mean_gap * (1.0 - unit(&mut rng)).ln();
    }
    finish(
        "gpu-training",
        format!(
            "GPU training mix: {} nodes x 8 GPUs ({blocks} blocks x 25 racks x 20 hosts), {gangs} gangs of 8-1024 GPUs (log-uniform), \
             log-normal run times (median 45 min), rack required up to 128 GPUs, block above; Indexed Jobs; 115 % offered load",
            blocks * 500
        ),
        cluster,
        &[],
        arrivals,
        seed,
    )
}

/// GPUs of one rack of `mixed`: 20 hosts x 8.
const MIXED_RACK_GPUS: u32 = 20 * 8;

/// Single pods and gangs competing (see the module documentation).
pub fn mixed(seed: u64, scale: f64) -> Trace {
    const BLOCK: &str = "topology.placer.dev/block";
    const RACK: &str = "topology.placer.dev/rack";
    let blocks = scaled(5, scale, 1);
    let cluster = cluster(
        &[BLOCK, RACK, "kubernetes.io/hostname"],
        vec![blocks, 10, 20],
        &[("cpu", "64"), ("memory", "512Gi"), ("pods", "110"), (GPU, "8")],
    );
    let nodes = f64::from(blocks * 200);
    let capacity_gpus = nodes * 8.0;
    let mut rng = XorShift::new(seed);
    let gangs = scaled(700, scale, 4);
    let singles = scaled(12_000, scale, 8);
    let mut arrivals = Vec::new();
    let mut gang_work = 0.0;
    for i in 0..gangs {
        let pods = 1u32 << (1 + rng.below(5)); // 2..32
        let per_pod: u32 = match rng.below(10) {
            0..=4 => 8,
            5..=7 => 4,
            _ => 2,
        };
        // A required rack only where the gang fits one (as `gpu-training` sizes its required
        // level): a gang larger than a rack asks for its block instead, so that no gang of
        // the trace waits for a domain that can never hold it.
        let topology = match (rng.chance(1, 2), pods * per_pod <= MIXED_RACK_GPUS) {
            (true, true) => TopologyAsk { required: Some(1), ..TopologyAsk::default() },
            (true, false) => TopologyAsk { required: Some(0), ..TopologyAsk::default() },
            (false, _) => TopologyAsk { preferred: Some(1), ..TopologyAsk::default() },
        };
        let class = match (topology.required, topology.preferred) {
            (Some(1), _) => "gang, rack required",
            (Some(_), _) => "gang, block required",
            _ => "gang, rack preferred",
        };
        let run = log_normal_ms(&mut rng, 60.0 * 60_000.0, 1.2, 5 * 60_000, 12 * 3_600_000);
        gang_work += f64::from(pods * per_pod) * run as f64;
        let requests = list(&[
            ("cpu", (6 * per_pod).to_string()),
            ("memory", format!("{}Gi", 48 * per_pod)),
            (GPU, per_pod.to_string()),
        ]);
        arrivals.push(arrival(
            format!("gang-{i}"),
            0,
            ArrivalKind::PodGroup,
            pods,
            requests,
            topology,
            0,
            run,
            class,
        ));
    }
    // Gangs offer 70 % of the GPUs over the window, one-GPU singles 40 %.
    let window = gang_work / (0.7 * capacity_gpus);
    let single_gpu_work = 0.4 * capacity_gpus * window;
    let mut singles_list = Vec::new();
    let mut gpu_singles_work = 0.0;
    for i in 0..singles {
        let gpu = rng.chance(2, 3);
        let run = log_normal_ms(&mut rng, 10.0 * 60_000.0, 1.0, 30_000, 4 * 3_600_000);
        let requests = if gpu {
            gpu_singles_work += run as f64;
            list(&[("cpu", "4".to_string()), ("memory", "32Gi".to_string()), (GPU, "1".to_string())])
        } else {
            list(&[("cpu", "2".to_string()), ("memory", "8Gi".to_string())])
        };
        let class = if gpu { "single, 1 GPU" } else { "single, cpu" };
        singles_list.push(arrival(
            format!("pod-{i}"),
            0,
            ArrivalKind::Pod,
            1,
            requests,
            TopologyAsk::default(),
            0,
            run,
            class,
        ));
    }
    // Stretch single run times so they offer their share (at most 12 h, as the gangs).
    if gpu_singles_work > 0.0 {
        let f = single_gpu_work / gpu_singles_work;
        for a in &mut singles_list {
            a.run_ms = ((a.run_ms as f64 * f).round() as u64).clamp(1_000, 12 * 3_600_000);
        }
    }
    arrivals.extend(singles_list);
    // Interleave: Poisson arrivals over the window, in a shuffled order.
    for i in (1..arrivals.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        arrivals.swap(i, j);
    }
    let mean_gap = window / arrivals.len() as f64;
    let mut t: f64 = 0.0;
    for a in &mut arrivals {
        a.at_ms = t.round() as u64;
        t += -mean_gap * (1.0 - unit(&mut rng)).ln();
    }
    finish(
        "mixed",
        format!(
            "Mixed cluster: {} nodes x 8 GPUs ({blocks} blocks x 10 racks x 20 hosts), {singles} single pods (2/3 one-GPU) and {gangs} gangs \
             of 2-32 pods x 2-8 GPUs (rack required or preferred; block required for gangs larger than a rack); about 110 % offered load",
            blocks * 200
        ),
        cluster,
        &[],
        arrivals,
        seed,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_trace_and_other_seed_differs() {
        for name in BUILTIN {
            let a = builtin(name, 7, 0.05).unwrap();
            let b = builtin(name, 7, 0.05).unwrap();
            assert_eq!(a, b, "{name}");
            let c = builtin(name, 8, 0.05).unwrap();
            assert_ne!(a.arrivals, c.arrivals, "{name}");
        }
        assert!(builtin("nope", 1, 1.0).is_err());
    }

    #[test]
    fn kueue_shape_matches_upstream_counts() {
        let t = kueue_tas(1, 1.0);
        assert_eq!(t.cluster.node_count(), 640);
        assert_eq!(t.arrivals.len(), 15_000);
        let pods: u64 = t.pod_count();
        assert_eq!(pods, 30 * (350 * 2 + 100 * 4 + 50 * 8));
        let small = t.arrivals.iter().find(|a| a.class == "small-required-rack").unwrap();
        assert_eq!((small.pods, small.priority, small.run_ms), (2, 50, 20_480));
        assert_eq!(small.res.cpu_milli, 500);
        let balanced = t.arrivals.iter().find(|a| a.class == "large-balanced-rack").unwrap();
        assert_eq!(balanced.topology.slice, Some((1, 4)));
        assert!(t.arrivals.iter().all(|a| a.at_ms <= 17 * 1200 + 30));
    }

    #[test]
    fn gpu_training_sizes_and_constraints() {
        let t = gpu_training(3, 1.0);
        assert_eq!(t.cluster.node_count(), 5_000);
        for a in &t.arrivals {
            let gpus = i64::from(a.pods) * a.res.gpu;
            assert!((8..=1024).contains(&gpus), "{} has {gpus} GPUs", a.name);
            assert_eq!(a.topology.required, Some(if gpus <= 128 { 1 } else { 0 }));
            assert!(a.run_ms >= 120_000 && a.run_ms <= 24 * 3_600_000);
        }
        let big = t.arrivals.iter().filter(|a| i64::from(a.pods) * a.res.gpu > 512).count();
        let small = t.arrivals.iter().filter(|a| i64::from(a.pods) * a.res.gpu < 16).count();
        assert!(big > 100 && small > 100, "log-uniform: both ends populated ({small} small, {big} big)");
    }

    #[test]
    fn mixed_has_singles_and_gangs() {
        let t = mixed(5, 0.1);
        let singles = t.arrivals.iter().filter(|a| a.kind == ArrivalKind::Pod).count();
        assert!(singles > 0 && t.gang_count() > 0);
        assert!(t.arrivals.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
    }

    #[test]
    fn mixed_requires_a_rack_only_of_gangs_a_rack_can_hold() {
        let t = mixed(1, 1.0);
        let rack_gpus = i64::from(MIXED_RACK_GPUS);
        let gpus = |a: &Arrival| i64::from(a.pods) * a.res.gpu;
        let required = |a: &Arrival, level| a.is_gang() && a.topology.required == Some(level);
        assert!(t.arrivals.iter().filter(|a| required(a, 1)).all(|a| gpus(a) <= rack_gpus));
        // Gangs larger than a rack still ask for a domain: their block.
        let blocks: Vec<_> = t.arrivals.iter().filter(|a| required(a, 0)).collect();
        assert!(!blocks.is_empty() && blocks.iter().all(|a| gpus(a) > rack_gpus));
    }
}
