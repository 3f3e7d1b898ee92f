//! The failure benchmark: gang Jobs on a rack topology, a share of the nodes failing at
//! random times of virtual time, and what recovery cost.
//!
//! The run is an ordinary scenario (built as YAML text and run with [`crate::run`]), so the
//! whole failure path is measured: the node lifecycle controller taints a failed node, the
//! taint manager evicts after the default 300 s toleration, the Job controller recreates
//! the pods (with its replacement backoff), and the scheduler repairs each gang inside its
//! rack or, when the rack has no room, evicts and re-places it whole.
//!
//! Figures, per affected gang (one that had a pod on a node when it failed): time to
//! recovery (from the failure to the last binding that made the gang whole again), whether
//! it was repaired in place or re-placed, and the GPU-hours its GPUs stood idle meanwhile
//! (the whole gang stalls while a member is missing; work lost since the last checkpoint is
//! not counted).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use placer_cluster::embedded::EPOCH_UNIX_MS;
use placer_cluster::{Kind, Object};

use crate::run::{run, RunOptions};

/// What to run.
#[derive(Debug, Clone)]
pub struct FailureBench {
    pub racks: u32,
    pub hosts_per_rack: u32,
    /// GPUs per node; every pod asks for a whole node.
    pub gpus_per_node: u32,
    /// Gangs filling a whole rack (cannot be repaired in place: re-placed).
    pub full_rack_gangs: u32,
    /// Gangs leaving room in their rack (repaired in place).
    pub partial_gangs: u32,
    /// Pods of a partial gang.
    pub partial_gang_size: u32,
    /// Nodes failed, at random times in `[0, window_s)` after the gangs started.
    pub failures: u32,
    pub window_s: u64,
    pub seed: u64,
}

impl FailureBench {
    /// The configuration: 5,000 nodes in 250 racks, 1 % failing over two hours.
    pub fn standard() -> FailureBench {
        FailureBench {
            racks: 250,
            hosts_per_rack: 20,
            gpus_per_node: 8,
            full_rack_gangs: 60,
            partial_gangs: 120,
            partial_gang_size: 16,
            failures: 50,
            window_s: 7_200,
            seed: 42,
        }
    }

    /// The standard run scaled to `racks` racks of `hosts` nodes with `failures` node
    /// failures (gang counts scale with the racks).
    pub fn scaled(racks: u32, hosts: u32, failures: u32) -> FailureBench {
        let mut b = FailureBench::standard();
        let scale = f64::from(racks) / f64::from(b.racks);
        b.racks = racks;
        b.hosts_per_rack = hosts;
        b.failures = failures;
        b.full_rack_gangs = ((f64::from(b.full_rack_gangs) * scale).round() as u32).max(1);
        b.partial_gangs = ((f64::from(b.partial_gangs) * scale).round() as u32).max(1);
        b.partial_gang_size = b.partial_gang_size.min(hosts.saturating_sub(2).max(1));
        b
    }
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct FailureReport {
    pub nodes: u32,
    pub gangs: u32,
    pub failures: u32,
    /// Gangs that had a pod on a failed node.
    pub affected: u32,
    pub repaired_in_place: u32,
    pub re_placed: u32,
    /// Affected gangs not whole again at the end of the run.
    pub not_recovered: u32,
    /// Time to recovery in seconds of virtual time, p50 and p99 (nearest rank).
    pub recovery_p50_s: f64,
    pub recovery_p99_s: f64,
    pub gpu_hours_lost: f64,
    /// Wall-clock seconds the simulation took.
    pub wall_s: f64,
}

impl std::fmt::Display for FailureReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "failure benchmark: {} nodes, {} gangs, {} node failures",
            self.nodes, self.gangs, self.failures
        )?;
        writeln!(
            f,
            "  affected gangs {}: repaired in place {}, re-placed {}, not recovered {}",
            self.affected, self.repaired_in_place, self.re_placed, self.not_recovered
        )?;
        writeln!(
            f,
            "  time to recovery p50 {:.0} s, p99 {:.0} s (virtual); GPU-hours lost {:.1}",
            self.recovery_p50_s, self.recovery_p99_s, self.gpu_hours_lost
        )?;
        write!(f, "  simulated in {:.1} s wall clock", self.wall_s)
    }
}

/// A deterministic xorshift generator.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

const RACK: &str = "topology.example.com/rack";

/// The scenario text and the failures (seconds after start, node name), in time order.
fn scenario(b: &FailureBench) -> (String, Vec<(u64, String)>) {
    let mut y = String::new();
    let _ = writeln!(y, "name: failure-benchmark");
    let _ = writeln!(y, "scheduler:\n  profile:\n    topologyLevels: [{RACK}, kubernetes.io/hostname]");
    let _ = writeln!(
        y,
        "cluster:\n  generate:\n    levels: [{RACK}, kubernetes.io/hostname]\n    fanout: [{}, {}]\n    \
         allocatable: {{cpu: \"64\", memory: 512Gi, pods: \"110\", nvidia.com/gpu: \"{}\"}}",
        b.racks, b.hosts_per_rack, b.gpus_per_node
    );
    let _ = writeln!(y, "submit:");
    let gangs = (0..b.full_rack_gangs)
        .map(|_| b.hosts_per_rack)
        .chain((0..b.partial_gangs).map(|_| b.partial_gang_size.min(b.hosts_per_rack)));
    for (i, size) in gangs.enumerate() {
        let _ = writeln!(
            y,
            "  - apiVersion: batch/v1\n    kind: Job\n    metadata: {{name: g{i:04}, namespace: default}}\n    spec:\n      \
             completionMode: Indexed\n      parallelism: {size}\n      completions: {size}\n      backoffLimit: 100\n      \
             template:\n        metadata:\n          annotations: {{kueue.x-k8s.io/podset-required-topology: {RACK}}}\n        \
             spec:\n          restartPolicy: Never\n          containers: [{{name: w, image: trainer, resources: \
             {{requests: {{cpu: \"8\", nvidia.com/gpu: \"{}\"}}, limits: {{nvidia.com/gpu: \"{}\"}}}}}}]",
            b.gpus_per_node, b.gpus_per_node
        );
    }
    let mut rng = Rng(b.seed | 1);
    let mut failed = BTreeSet::new();
    let total = u64::from(b.racks) * u64::from(b.hosts_per_rack);
    while failed.len() < b.failures.min(u32::try_from(total).unwrap_or(u32::MAX)) as usize {
        let n = rng.below(total);
        let (r, h) = (n / u64::from(b.hosts_per_rack), n % u64::from(b.hosts_per_rack));
        failed.insert(format!("r{r}-h{h}"));
    }
    let mut failures: Vec<(u64, String)> = failed.into_iter().map(|n| (rng.below(b.window_s), n)).collect();
    failures.sort();
    let _ = writeln!(y, "steps:");
    let mut now = 0;
    for (t, node) in &failures {
        if *t > now {
            let _ = writeln!(y, "  - advance: {}s", t - now);
            now = *t;
        }
        let _ = writeln!(y, "  - markNotReady: {node}");
    }
    let _ = writeln!(y, "  - advance: 1800s");
    (y, failures)
}

/// The Job (gang) name of a pod or PodGroup named `<job>-...`.
fn gang_of(name: &str) -> &str {
    name.split('-').next().unwrap_or(name)
}

/// Runs the benchmark. `progress` is told about each phase.
pub fn run_failure_bench(b: &FailureBench) -> Result<FailureReport, String> {
    let started = std::time::Instant::now();
    let (text, planned) = scenario(b);
    let s = crate::load_str(&text, "failure-benchmark.yaml").map_err(|e| e.to_string())?;
    let opts = RunOptions { max_rounds: 100_000, ..RunOptions::default() };
    let report = run(&s, &opts).map_err(|e| e.to_string())?;
    let mut bindings: BTreeMap<&str, Vec<(u64, String, String)>> = BTreeMap::new();
    let mut evictions: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for e in &report.events {
        match e.reason.as_str() {
            "Scheduled" if e.regarding.kind == Kind::Pod => {
                let node = e.note.rsplit(' ').next().unwrap_or("").to_string();
                bindings.entry(gang_of(&e.regarding.name)).or_default().push((
                    e.time_ms,
                    e.regarding.name.clone(),
                    node,
                ));
            }
            "EvictedDueToNodeFailures" if e.regarding.kind == Kind::PodGroup => {
                evictions.entry(gang_of(&e.regarding.name)).or_default().push(e.time_ms);
            }
            _ => {}
        }
    }
    // When each node failed: its Ready condition's last transition (virtual ms).
    let mut failures: Vec<(u64, String)> = report
        .objects
        .iter()
        .filter_map(|o| match o {
            Object::Node(n) => {
                let ready = n.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready")?;
                let at = ready.last_transition_time.as_ref()?.0.as_millisecond() - EPOCH_UNIX_MS;
                let name = n.metadata.name.clone()?;
                (ready.status != "True").then(|| (u64::try_from(at).unwrap_or(0), name))
            }
            _ => None,
        })
        .collect();
    failures.sort();
    let sizes: BTreeMap<String, u32> = (0..b.full_rack_gangs)
        .map(|_| b.hosts_per_rack)
        .chain((0..b.partial_gangs).map(|_| b.partial_gang_size.min(b.hosts_per_rack)))
        .enumerate()
        .map(|(i, n)| (format!("g{i:04}"), n))
        .collect();
    let mut recoveries: Vec<f64> = Vec::new();
    let (mut affected, mut repaired, mut re_placed, mut not_recovered) = (0, 0, 0, 0);
    let mut gpu_hours = 0.0;
    for (gang, size) in &sizes {
        let list = bindings.get(gang.as_str()).map(Vec::as_slice).unwrap_or(&[]);
        // The first failure of a node the gang ran on at that time.
        let mut on: BTreeMap<&str, &str> = BTreeMap::new(); // pod -> node
        let mut hit: Option<u64> = None;
        let mut events = list.iter().peekable();
        for (t, node) in &failures {
            let at = *t;
            while let Some((bt, pod, n)) = events.peek() {
                if *bt > at {
                    break;
                }
                on.insert(pod.as_str(), n.as_str());
                events.next();
            }
            if on.values().any(|n| n == node) {
                hit = Some(at);
                break;
            }
        }
        let Some(at) = hit else { continue };
        affected += 1;
        let evicted = evictions.get(gang.as_str()).is_some_and(|v| v.iter().any(|&e| e >= at));
        if evicted {
            re_placed += 1;
        } else {
            repaired += 1;
        }
        // Recovery: the binding after the failure that brought the gang back to `size`
        // pods bound since the failure (re-placed) or to one more (repaired).
        let after: Vec<u64> = list.iter().filter(|(t, _, _)| *t > at).map(|(t, _, _)| *t).collect();
        let needed = if evicted { *size as usize } else { 1 };
        match after.get(needed.saturating_sub(1)) {
            Some(&done) => {
                let secs = (done - at) as f64 / 1000.0;
                recoveries.push(secs);
                gpu_hours += secs / 3600.0 * f64::from(*size) * f64::from(b.gpus_per_node);
            }
            None => {
                not_recovered += 1;
                let secs = report.virtual_time_ms.saturating_sub(at) as f64 / 1000.0;
                gpu_hours += secs / 3600.0 * f64::from(*size) * f64::from(b.gpus_per_node);
            }
        }
    }
    recoveries.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        if recoveries.is_empty() {
            return 0.0;
        }
        let rank = ((p * recoveries.len() as f64).ceil() as usize).clamp(1, recoveries.len());
        recoveries[rank - 1]
    };
    Ok(FailureReport {
        nodes: b.racks * b.hosts_per_rack,
        gangs: b.full_rack_gangs + b.partial_gangs,
        failures: u32::try_from(planned.len()).unwrap_or(u32::MAX),
        affected,
        repaired_in_place: repaired,
        re_placed,
        not_recovered,
        recovery_p50_s: pct(0.50),
        recovery_p99_s: pct(0.99),
        gpu_hours_lost: gpu_hours,
        wall_s: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_run_repairs_and_re_places() {
        let b = FailureBench {
            racks: 4,
            hosts_per_rack: 4,
            gpus_per_node: 8,
            full_rack_gangs: 1,
            partial_gangs: 1,
            partial_gang_size: 2,
            failures: 8,
            window_s: 60,
            seed: 7,
        };
        let r = run_failure_bench(&b).unwrap();
        assert_eq!(r.nodes, 16);
        assert!(r.affected >= 1, "{r}");
        assert_eq!(r.repaired_in_place + r.re_placed, r.affected, "{r}");
        assert!(r.recovery_p50_s >= 300.0, "{r}");
    }
}
