//! Runs one [`Workload`] against an in-process [`Engine`] (no store, no I/O) and measures
//! it.
//!
//! Nodes are fed first. Then, for a batch workload, each submission (a PodGroup with its
//! pods, or one pod) is applied and followed by one `schedule` call; only the `schedule`
//! calls are timed. Every [`Decision::Bind`] is fed back as a `PodUpserted` with
//! `spec.nodeName` set, as the store would after the binding, which confirms the pod the
//! engine had assumed. A churn workload advances virtual time in ticks: finished groups'
//! pods are deleted, arrivals are submitted and scheduled one at a time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use placer_api::k8s::api::core::v1::Pod;
use placer_api::k8s::api::resource::v1::ResourceClaim;
use placer_engine::PlacementSearch;
use placer_engine::{ClusterEvent, Decision, Engine, SchedulerConfig};
use placer_engine::{GroupKey, PodKey};
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::memory;
use crate::objects::{self, NAMESPACE};
use crate::observer::BenchObserver;
use crate::stats::LatencySummary;
use crate::workloads::{ChurnPlan, GroupSpec, Plan, Submission, Workload};

/// What one workload run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadResult {
    pub id: String,
    pub title: String,
    /// `optimized` or `baseline`.
    pub search: String,
    pub nodes: u64,
    /// E.g. `250 racks x 20 hosts`.
    pub topology: String,
    /// PodGroups submitted (0 for single pods).
    pub groups: u64,
    /// Pods submitted.
    pub pods: u64,
    pub bound_pods: u64,
    /// Groups whose every pod was bound (pods bound for single pods).
    pub placed: u64,
    /// `placed / groups` (`bound / pods` for single pods).
    pub placed_share: f64,
    /// Scheduling cycles: PodGroup cycles plus single-pod cycles.
    pub decisions: u64,
    /// Wall time spent inside `Engine::schedule`.
    pub schedule_seconds: f64,
    /// Wall time spent inside `Engine::apply` for the workload's pods and PodGroups
    /// (submissions, binding confirmations, deletions; nodes excluded): the cost of the
    /// watch events a real scheduler handles besides its cycles.
    pub apply_seconds: f64,
    /// `bound_pods / schedule_seconds`.
    pub pods_per_second: f64,
    /// End to end: `bound_pods / (apply_seconds + schedule_seconds)`, what a scheduler
    /// fed by a watch sustains (ingest and decisions, not the store).
    pub end_to_end_pods_per_second: f64,
    /// Decision latency.
    pub latency: LatencySummary,
    /// What a latency sample is: `schedule call` (one submission per call) or `group cycle`
    /// (the engine's per-cycle duration, used for churn where a call may retry waiting
    /// groups).
    pub latency_source: String,
    /// Decision latency of the largest gangs alone (batch workloads with groups): the bars
    /// of the issue are stated for them (e.g. a 1,024-pod gang).
    pub largest_group: Option<GroupLatency>,
    /// Mean `scheduler_placement_evaluations_total` per PodGroup cycle (`None` without
    /// PodGroup cycles).
    pub placements_per_decision: Option<f64>,
    /// Resident memory once the nodes were loaded.
    pub memory_after_nodes_bytes: Option<u64>,
    /// Peak resident memory during the run (`VmHWM`, reset at the start when possible).
    pub peak_memory_bytes: Option<u64>,
    /// Resident memory the nodes added, per node (`mem nodes` minus the resident size
    /// before they were fed, over the node count).
    pub memory_per_node_bytes: Option<u64>,
    /// Peak memory above `mem nodes`, per pod submitted.
    pub memory_per_pod_bytes: Option<u64>,
    /// FNV-1a of every binding (pod, node) in order: equal digests mean equal decisions.
    pub decisions_digest: String,
    /// Wall time of the whole run, generation and feeding included.
    pub total_seconds: f64,
}

impl WorkloadResult {
    /// Mean wall time per decision, in milliseconds.
    pub fn mean_decision_ms(&self) -> f64 {
        if self.decisions == 0 {
            0.0
        } else {
            self.schedule_seconds * 1000.0 / self.decisions as f64
        }
    }
}

/// Latency of the decisions of one gang size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GroupLatency {
    /// Pods per gang.
    pub size: u32,
    pub latency: LatencySummary,
}

/// Latency of the largest gangs: `sizes[i]` is the gang size submitted before the call
/// that took `seconds[i]` (0 for a single pod).
fn largest_group_latency(sizes: &[u32], seconds: &[f64]) -> Option<GroupLatency> {
    let size = sizes.iter().copied().max().filter(|&s| s > 0)?;
    let samples: Vec<f64> = sizes.iter().zip(seconds).filter(|(s, _)| **s == size).map(|(_, t)| *t).collect();
    Some(GroupLatency { size, latency: LatencySummary::from_seconds(&samples) })
}

/// Display name of a search mode.
pub fn search_name(search: PlacementSearch) -> &'static str {
    match search {
        PlacementSearch::Optimized => "optimized",
        PlacementSearch::Baseline => "baseline",
    }
}

/// FNV-1a, 64 bits.
#[derive(Debug, Clone, Copy)]
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Progress of one submitted group.
#[derive(Debug, Clone, Copy)]
struct GroupState {
    size: u32,
    bound: u32,
    /// Virtual time at which its last pod was bound.
    placed_at: Option<u64>,
}

/// No group: a single pod.
const NO_GROUP: u32 = u32::MAX;

/// The engine with everything needed to feed it and account for its decisions.
struct Driver {
    engine: Engine,
    obs: BenchObserver,
    /// Pods submitted and not bound yet, with their group index.
    pending: FxHashMap<PodKey, (Arc<Pod>, u32)>,
    groups: Vec<GroupState>,
    /// Indexes of groups that became fully bound during the last `schedule` call.
    newly_placed: Vec<u32>,
    bound_pods: u64,
    schedule_time: Duration,
    apply_time: Duration,
    call_seconds: Vec<f64>,
    digest: Fnv,
    /// GPUs by DRA claims (see [`Workload::dra`]); the claims as the store holds them.
    dra: bool,
    claims: FxHashMap<String, ResourceClaim>,
}

impl Driver {
    fn new(config: SchedulerConfig) -> Driver {
        Driver {
            dra: false,
            claims: FxHashMap::default(),
            engine: Engine::new(config),
            obs: BenchObserver::new(),
            pending: FxHashMap::default(),
            groups: Vec::new(),
            newly_placed: Vec::new(),
            bound_pods: 0,
            schedule_time: Duration::ZERO,
            apply_time: Duration::ZERO,
            call_seconds: Vec::new(),
            digest: Fnv::new(),
        }
    }

    /// `Engine::apply`, timed.
    fn apply(&mut self, event: ClusterEvent, now_ms: u64) {
        self.apply_all(vec![event], now_ms);
    }

    /// `Engine::apply` of each event in order, timed as one span: the events are made
    /// before, so the span holds the engine's work and no clock reads between events.
    fn apply_all(&mut self, events: Vec<ClusterEvent>, now_ms: u64) {
        let start = Instant::now();
        for event in events {
            self.engine.apply(event, now_ms);
        }
        self.apply_time += start.elapsed();
    }

    /// Applies a PodGroup and its pods; returns the group's index.
    fn submit_group(&mut self, g: &GroupSpec, now_ms: u64) -> u32 {
        let idx = u32::try_from(self.groups.len()).unwrap_or(NO_GROUP - 1);
        self.groups.push(GroupState { size: g.size, bound: 0, placed_at: None });
        let pg = objects::pod_group(&g.name, g.size, g.ask);
        let mut events = Vec::with_capacity(1 + g.size as usize * if self.dra { 2 } else { 1 });
        events.push(ClusterEvent::PodGroupUpserted(Arc::new(pg)));
        for i in 0..g.size {
            let name = g.pod_name(i);
            let mut pod = objects::pod(&name, Some(&g.name), g.pod);
            if self.dra && g.pod.gpus > 0 {
                let (with_claim, claim) = objects::with_gpu_claim(&pod, g.pod.gpus);
                pod = with_claim;
                let claim_name = claim.metadata.name.clone().unwrap_or_default();
                events.push(ClusterEvent::ResourceClaimUpserted(Arc::new(claim.clone())));
                self.claims.insert(claim_name, claim);
            }
            let pod = Arc::new(pod);
            self.pending.insert(PodKey::new(NAMESPACE, name), (pod.clone(), idx));
            events.push(ClusterEvent::PodUpserted(pod));
        }
        self.apply_all(events, now_ms);
        idx
    }

    fn submit_pod(&mut self, name: &str, shape: objects::PodShape, now_ms: u64) {
        let pod = Arc::new(objects::pod(name, None, shape));
        self.pending.insert(PodKey::new(NAMESPACE, name), (pod.clone(), NO_GROUP));
        self.apply(ClusterEvent::PodUpserted(pod), now_ms);
    }

    /// Deletes a group's pods and the PodGroup (the group finished).
    fn delete_group(&mut self, g: &GroupSpec, now_ms: u64) {
        for i in 0..g.size {
            let key = PodKey::new(NAMESPACE, g.pod_name(i));
            self.pending.remove(&key);
            self.apply(ClusterEvent::PodDeleted(key), now_ms);
        }
        self.apply(ClusterEvent::PodGroupDeleted(GroupKey::new(NAMESPACE, g.name.clone())), now_ms);
    }

    /// One timed `schedule` call, then the bindings fed back (timed as ingest).
    ///
    /// As in a store, the bound version replaces the pending one before the engine reads
    /// the event: the pending version is then freed by the engine, which held it last
    /// (the object it read), and the bound one stays with the store (held here until the
    /// engine has taken every event).
    fn schedule(&mut self, now_ms: u64) -> Duration {
        let start = Instant::now();
        let decisions = self.engine.schedule(now_ms, &mut self.obs);
        let took = start.elapsed();
        self.schedule_time += took;
        self.call_seconds.push(took.as_secs_f64());
        self.newly_placed.clear();
        let mut events = Vec::with_capacity(decisions.len());
        let mut stored = Vec::with_capacity(decisions.len());
        for d in decisions {
            if let Decision::ClaimStatus { claim, allocation, consumer } = d {
                // As the store shows the claim once PreBind wrote its status.
                if let Some(c) = self.claims.get_mut(&*claim.name) {
                    let status = c.status.get_or_insert_with(Default::default);
                    if status.allocation.is_none() {
                        status.allocation = allocation.map(|a| *a);
                    }
                    status.reserved_for.get_or_insert_with(Vec::new).push(*consumer);
                    events.push(ClusterEvent::ResourceClaimUpserted(Arc::new(c.clone())));
                }
                continue;
            }
            let Decision::Bind { pod, node, .. } = d else { continue };
            self.digest.write(pod.name.as_bytes());
            self.digest.write(b"=");
            self.digest.write(node.as_bytes());
            self.digest.write(b"\n");
            let Some((obj, group)) = self.pending.remove(&pod) else { continue };
            self.bound_pods += 1;
            if let Some(state) = self.groups.get_mut(group as usize) {
                state.bound += 1;
                if state.bound == state.size {
                    state.placed_at = Some(now_ms);
                    self.newly_placed.push(group);
                }
            }
            let bound = Arc::new(objects::bound(&obj, &node));
            stored.push(bound.clone());
            events.push(ClusterEvent::PodUpserted(bound));
        }
        self.apply_all(events, now_ms);
        drop(stored);
        took
    }
}

/// Runs `w` with the given placement search. `progress` gets the number of steps as its
/// length and one tick per submission (batch) or virtual tick (churn).
pub fn run_workload(w: &Workload, search: PlacementSearch, progress: &ProgressBar) -> WorkloadResult {
    let started = Instant::now();
    memory::reset_peak();
    let config = SchedulerConfig {
        topology_levels: w.topology_levels.clone(),
        placement_search: search,
        ..SchedulerConfig::default()
    };
    let mut d = Driver::new(config);
    d.dra = w.dra;
    let memory_before_nodes = memory::current_rss();
    if w.dra {
        d.engine.apply(ClusterEvent::DeviceClassUpserted(Arc::new(objects::gpu_class())), 0);
    }
    let gpus = w.cluster.shape.gpus;
    w.cluster.for_each_node(|n| {
        if w.dra {
            let slice = objects::gpu_slice(n.metadata.name.as_deref().unwrap_or_default(), gpus);
            d.engine.apply(ClusterEvent::ResourceSliceUpserted(Arc::new(slice)), 0);
        }
        d.engine.apply(ClusterEvent::NodeUpserted(Arc::new(n)), 0)
    });
    let memory_after_nodes = memory::current_rss();
    progress.set_length(w.plan.steps());
    progress.set_position(0);

    let (groups, pods) = w.plan.totals();
    let (placed, latency_seconds, latency_source, largest_group) = match &w.plan {
        Plan::Batch(items) => {
            let mut sizes: Vec<u32> = Vec::with_capacity(items.len());
            for (now_ms, item) in (1u64..).zip(items) {
                match item {
                    Submission::Group(g) => {
                        d.submit_group(g, now_ms);
                        sizes.push(g.size);
                    }
                    Submission::Pod { name, pod } => {
                        d.submit_pod(name, *pod, now_ms);
                        sizes.push(0);
                    }
                }
                d.schedule(now_ms);
                progress.inc(1);
            }
            let placed = if groups == 0 {
                d.bound_pods
            } else {
                d.groups.iter().filter(|g| g.placed_at.is_some()).count() as u64
            };
            let largest = largest_group_latency(&sizes, &d.call_seconds);
            (placed, std::mem::take(&mut d.call_seconds), "schedule call", largest)
        }
        Plan::Churn(plan) => {
            run_churn(&mut d, plan, progress);
            let placed = d.groups.iter().filter(|g| g.placed_at.is_some()).count() as u64;
            (placed, std::mem::take(&mut d.obs.cycle_seconds), "group cycle", None)
        }
    };
    let peak = memory::peak_rss();

    let schedule_seconds = d.schedule_time.as_secs_f64();
    let apply_seconds = d.apply_time.as_secs_f64();
    let nodes = w.cluster.node_count();
    let per = |bytes: Option<u64>, n: u64| bytes.filter(|_| n > 0).map(|b| b / n);
    let memory_per_node_bytes =
        per(memory_after_nodes.zip(memory_before_nodes).map(|(a, b)| a.saturating_sub(b)), nodes);
    let memory_per_pod_bytes = per(peak.zip(memory_after_nodes).map(|(p, a)| p.saturating_sub(a)), pods);
    let denominator = if groups == 0 { pods } else { groups };
    let decisions = d.obs.group_cycles + d.obs.pod_cycles;
    WorkloadResult {
        id: w.id.clone(),
        title: w.title.clone(),
        search: search_name(search).to_string(),
        nodes,
        topology: w.cluster.describe(),
        groups,
        pods,
        bound_pods: d.bound_pods,
        placed,
        placed_share: if denominator == 0 { 0.0 } else { placed as f64 / denominator as f64 },
        decisions,
        schedule_seconds,
        apply_seconds,
        pods_per_second: if schedule_seconds > 0.0 { d.bound_pods as f64 / schedule_seconds } else { 0.0 },
        end_to_end_pods_per_second: if schedule_seconds + apply_seconds > 0.0 {
            d.bound_pods as f64 / (schedule_seconds + apply_seconds)
        } else {
            0.0
        },
        latency: LatencySummary::from_seconds(&latency_seconds),
        latency_source: latency_source.to_string(),
        largest_group,
        placements_per_decision: (d.obs.group_cycles > 0)
            .then(|| d.obs.placement_evaluations as f64 / d.obs.group_cycles as f64),
        memory_after_nodes_bytes: memory_after_nodes,
        peak_memory_bytes: peak,
        memory_per_node_bytes,
        memory_per_pod_bytes,
        decisions_digest: format!("{:016x}", d.digest.0),
        total_seconds: started.elapsed().as_secs_f64(),
    }
}

/// The churn loop: at each tick, delete the groups whose run time is over, then submit and
/// schedule the arrivals one by one (or schedule once if none arrive, so waiting groups
/// can retry after their backoff).
fn run_churn(d: &mut Driver, plan: &ChurnPlan, progress: &ProgressBar) {
    let tick = plan.tick_ms.max(1);
    // (end time, arrival index) of running groups; group index -> arrival index.
    let mut running: Vec<(u64, usize)> = Vec::new();
    let mut arrival_of: FxHashMap<u32, usize> = FxHashMap::default();
    let mut next = 0usize;
    let mut now = 0u64;
    while now < plan.duration_ms {
        let mut finished: Vec<usize> = Vec::new();
        running.retain(|&(end, a)| {
            if end <= now {
                finished.push(a);
                false
            } else {
                true
            }
        });
        for a in finished {
            d.delete_group(&plan.arrivals[a].group, now);
        }
        let mut scheduled = false;
        while next < plan.arrivals.len() && plan.arrivals[next].at_ms <= now {
            let idx = d.submit_group(&plan.arrivals[next].group, now);
            arrival_of.insert(idx, next);
            next += 1;
            d.schedule(now);
            scheduled = true;
            start_running(d, plan, &arrival_of, &mut running, now);
        }
        if !scheduled {
            d.schedule(now);
            start_running(d, plan, &arrival_of, &mut running, now);
        }
        now += tick;
        progress.inc(1);
    }
}

/// Groups that became fully bound in the last call start their run time.
fn start_running(
    d: &Driver,
    plan: &ChurnPlan,
    arrival_of: &FxHashMap<u32, usize>,
    running: &mut Vec<(u64, usize)>,
    now: u64,
) {
    for g in &d.newly_placed {
        if let Some(&a) = arrival_of.get(g) {
            running.push((now + plan.arrivals[a].run_ms, a));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::{upstream, Recipe};

    #[test]
    fn upstream_workload_places_every_gang() {
        let r = run_workload(&upstream(), PlacementSearch::Optimized, &ProgressBar::hidden());
        assert_eq!((r.nodes, r.groups, r.pods), (100, 80, 800));
        assert_eq!(r.placed, 80, "8 gangs of 10 fill each rack of 80 GPUs");
        assert_eq!(r.bound_pods, 800);
        assert_eq!(r.decisions, 80);
        assert_eq!(r.latency.samples, 80);
        assert!(r.placements_per_decision.is_some_and(|p| p >= 1.0));
        assert!((r.placed_share - 1.0).abs() < 1e-9);
        assert_eq!(r.largest_group.map(|g| (g.size, g.latency.samples)), Some((10, 80)));
    }

    #[test]
    fn largest_group_latency_keeps_only_the_largest_size() {
        let g =
            largest_group_latency(&[8, 64, 0, 64, 16], &[0.001, 0.010, 0.5, 0.020, 0.002]).expect("groups");
        assert_eq!(g.size, 64);
        assert_eq!(g.latency.samples, 2);
        assert!((g.latency.max_ms - 20.0).abs() < 1e-9);
        assert_eq!(largest_group_latency(&[0, 0], &[0.1, 0.2]), None);
    }

    #[test]
    fn runs_are_deterministic_in_their_decisions() {
        let w = Recipe::MixedGangs.build(true);
        let a = run_workload(&w, PlacementSearch::Optimized, &ProgressBar::hidden());
        let b = run_workload(&w, PlacementSearch::Optimized, &ProgressBar::hidden());
        assert_eq!(a.decisions_digest, b.decisions_digest);
        assert_eq!(a.bound_pods, b.bound_pods);
        assert!(a.placed > 0);
    }

    #[test]
    fn single_pods_and_churn_run() {
        let r =
            run_workload(&Recipe::SinglePods.build(true), PlacementSearch::Optimized, &ProgressBar::hidden());
        assert_eq!(r.groups, 0);
        assert_eq!(r.bound_pods, r.pods, "2,000 small pods fit 500 nodes");
        assert_eq!(r.placements_per_decision, None);

        let r = run_workload(&Recipe::Churn.build(true), PlacementSearch::Optimized, &ProgressBar::hidden());
        assert_eq!(r.latency_source, "group cycle");
        assert!(r.placed > 0 && r.placed <= r.groups);
        assert!(r.decisions >= r.placed);
    }
}
