//! Replaying a trace under one configuration, through the full simulator.
//!
//! The cluster is an [`EmbeddedCluster`] (with the `JobValidation` admission check) run by
//! the same controllers as `placer simulate`: the Job controller (Workload / PodGroup
//! creation for gang Jobs, its simulated kubelet, TTL deletion), the scheduler driver
//! (queue, backoff, preemption, bindings) and the simulated kubelet for pods no Job owns
//! (pods succeed once their `placer.dev/run-time` has elapsed).
//!
//! The clock jumps from one instant to the next at which something happens: an arrival, a
//! controller's timed work (a pod's run time ending, a backoff expiring, a Job's TTL), or
//! a sample. At each instant the arrivals due are created and the controllers reconcile
//! until a round changes nothing; the lab then reads the store's watch (bindings, pod
//! phases, deletions) to account for resources and workloads, and acts as the workloads'
//! owner: a finished PodGroup's pods and group are deleted, a preempted PodGroup (or
//! single pod) is resubmitted whole as a new attempt (Jobs are left to the Job controller).
//!
//! The replay ends when every arrival is in and nothing runs or waits, when what waits has
//! not been placed for an idle window (twice the maximum backoff plus a second) while
//! nothing ran, or at the trace's horizon.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;

use placer_cluster::embedded::EmbeddedCluster;
use placer_cluster::{ClusterStore, Kind, Object, ObjectRef, WatchEventKind};
use placer_controllers::job::{JobController, JobValidation};
use placer_controllers::scheduler::SchedulerController;
use placer_controllers::Controller;
use placer_engine::NoopObserver;
use placer_sim::kubelet::SimKubelet;

use crate::configs::LabConfig;
use crate::metrics::{Device, Fragmentation, GangShape, Usage};
use crate::objects::{self, NAMESPACE, WORKLOAD_LABEL};
use crate::trace::{ArrivalKind, Res, Trace};

/// Where the Job controller and the scheduler are in the controller list (the kubelet is
/// last).
const JOB_CONTROLLER: usize = 0;
const SCHEDULER: usize = 1;

/// Reconcile rounds at one instant before the replay gives up.
const MAX_ROUNDS: usize = 10_000;

/// Progress of a replay: (configuration id, virtual ms, workloads arrived, completed).
pub type ProgressFn = Arc<dyn Fn(&str, u64, usize, usize) + Send + Sync>;

/// Switches of a replay.
#[derive(Clone, Default)]
pub struct ReplayOptions {
    /// Called after every sample.
    pub progress: Option<ProgressFn>,
}

/// Why the replay stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Stop {
    /// Every workload finished (or never started while the cluster sat idle).
    Drained,
    /// The trace's horizon.
    Horizon,
}

/// What became of one arrival.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadRecord {
    /// First time its `minCount` pods were all bound.
    pub start_ms: Option<u64>,
    /// When its last pod succeeded.
    pub end_ms: Option<u64>,
    /// Distinct domains per level (coarsest first) its pods were bound to when it started.
    pub domains: Vec<u32>,
    /// Times it was preempted after starting.
    pub restarts: u32,
}

/// The cluster at one sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    pub t_ms: u64,
    /// Utilisation of the trace's device (GPU, or CPU) and of CPU, 0..=1.
    pub device_util: f64,
    pub cpu_util: f64,
    /// Gangs arrived and waiting (not holding resources, not finished).
    pub pending_gangs: usize,
    pub running_gangs: usize,
    pub frag: Fragmentation,
}

/// Everything one replay produced.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    pub config: String,
    pub records: Vec<WorkloadRecord>,
    pub samples: Vec<Sample>,
    /// Virtual time at the end.
    pub end_ms: u64,
    pub stop: Stop,
    /// Average utilisation of (cpu, memory, gpu, pods) over `[0, end_ms]`.
    pub average: [f64; 4],
    /// The same over the loaded period `[0, last arrival]` (the whole run when the last
    /// arrival is at 0): the drain after it is the same for every configuration that
    /// places everything, so it would hide the differences.
    pub loaded_average: [f64; 4],
    pub device: Device,
    /// Wall-clock seconds the replay took.
    pub wall_seconds: f64,
    /// Distinct errors the controllers reported (they retried).
    pub controller_errors: Vec<String>,
    /// Where the wall time went.
    pub time: PhaseTimes,
}

/// Where a replay's wall time went, in seconds (not part of what it measures).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseTimes {
    /// The Job controller's reconciles (Workload / PodGroup creation, its kubelet, TTL).
    pub job_controller: f64,
    /// The scheduler driver's reconciles (queue, engine cycles, preemption, bindings).
    pub scheduler: f64,
    /// The simulated kubelet for pods no Job owns.
    pub kubelet: f64,
    /// The lab reading the watch, accounting and resubmitting, and creating arrivals.
    pub lab: f64,
    /// Taking samples (utilisation, fragmentation, median gangs placeable).
    pub samples: f64,
    /// Instants the clock stopped at, and reconcile rounds over all of them.
    pub instants: u64,
    pub rounds: u64,
}

/// A replay that could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{config}: {message}")]
    Setup { config: String, message: String },
    #[error(
        "{config}: the cluster did not settle at virtual time {t_ms} ms after {MAX_ROUNDS} reconcile rounds"
    )]
    DidNotSettle { config: String, t_ms: u64 },
}

/// A pod the lab follows.
#[derive(Debug, Clone)]
struct PodTrack {
    workload: usize,
    attempt: u32,
    /// Node index while the pod holds resources.
    holding: Option<usize>,
    done: bool,
}

/// A workload the lab follows.
#[derive(Debug, Clone, Default)]
struct WlState {
    arrived: bool,
    attempt: u32,
    /// Nodes of pods of the current attempt that hold resources.
    bound: Vec<usize>,
    succeeded: u32,
    /// A preemption of the current attempt was already counted.
    preempted: bool,
    finished: bool,
}

struct Replay<'a> {
    trace: &'a Trace,
    config: &'a LabConfig,
    store: EmbeddedCluster,
    controllers: Vec<Box<dyn Controller>>,
    seen_rv: u64,
    node_index: FxHashMap<String, usize>,
    /// Domain of every node per level (coarsest first).
    domains: Vec<Vec<u32>>,
    workload_index: FxHashMap<String, usize>,
    pods: FxHashMap<String, PodTrack>,
    /// Pods the lab deleted itself (not preemptions).
    own_deletes: FxHashSet<String>,
    wl: Vec<WlState>,
    records: Vec<WorkloadRecord>,
    usage: Usage,
    device: Device,
    shape: Option<GangShape>,
    rack_level: Option<usize>,
    errors: BTreeMap<String, ()>,
    /// Last time a pod was bound or finished.
    last_progress_ms: u64,
    running: usize,
    completed: usize,
    time: PhaseTimes,
}

/// Replays `trace` under `config`.
pub fn replay(trace: &Trace, config: &LabConfig, opts: &ReplayOptions) -> Result<RunResult, ReplayError> {
    let started = Instant::now();
    let setup = |message: String| ReplayError::Setup { config: config.id.to_string(), message };
    let sched = config.scheduler_config(trace).map_err(setup)?;
    let idle_window_ms = sched.pod_max_backoff_ms.saturating_mul(2) + 1_000;
    let gates = sched.gates.clone();

    let mut store = EmbeddedCluster::new();
    store.add_admission(Box::new(JobValidation::new(gates.clone())));
    // Nothing reads the events the controllers record (a FailedScheduling per member of
    // every failed attempt: millions on the mixed trace), so none is built.
    store.discard_events();
    let nodes = objects::nodes(&trace.cluster);
    let levels = trace.cluster.levels().to_vec();
    let mut node_index = FxHashMap::default();
    let mut domains = vec![Vec::with_capacity(nodes.len()); levels.len()];
    let mut interned: Vec<FxHashMap<String, u32>> = vec![FxHashMap::default(); levels.len()];
    let mut alloc = Vec::with_capacity(nodes.len());
    for (i, n) in nodes.into_iter().enumerate() {
        let name = n.metadata.name.clone().unwrap_or_default();
        let labels = n.metadata.labels.clone().unwrap_or_default();
        for (l, key) in levels.iter().enumerate() {
            let v = labels.get(key).cloned().unwrap_or_default();
            let next = interned[l].len() as u32;
            domains[l].push(*interned[l].entry(v).or_insert(next));
        }
        let mut r = Res::from_list(
            n.status.as_ref().and_then(|s| s.allocatable.as_ref()).unwrap_or(&BTreeMap::new()),
        );
        if r.pods == 0 {
            r.pods = 110;
        }
        alloc.push(r);
        node_index.insert(name, i);
        store.create(Object::Node(n.into())).map_err(|e| setup(format!("creating a node: {e}")))?;
    }
    // The level right above the nodes (racks), when the lowest level is per node.
    let per_node = |l: usize| interned[l].len() == alloc.len();
    let rack_level = match levels.len() {
        0 => None,
        n if per_node(n - 1) => n.checked_sub(2),
        n => Some(n - 1),
    };

    let controllers: Vec<Box<dyn Controller>> = vec![
        Box::new(JobController::new(gates)),
        Box::new(SchedulerController::new(sched, Box::new(NoopObserver))),
        Box::new(SimKubelet::default()),
    ];
    let device = Device::for_arrivals(&trace.arrivals);
    let mut r = Replay {
        trace,
        config,
        store,
        controllers,
        seen_rv: 0,
        node_index,
        domains,
        workload_index: trace.arrivals.iter().enumerate().map(|(i, a)| (a.name.clone(), i)).collect(),
        pods: FxHashMap::default(),
        own_deletes: FxHashSet::default(),
        wl: vec![WlState::default(); trace.arrivals.len()],
        records: vec![WorkloadRecord::default(); trace.arrivals.len()],
        usage: Usage::new(alloc),
        device,
        shape: GangShape::median(&trace.arrivals, device),
        rack_level,
        errors: BTreeMap::new(),
        last_progress_ms: 0,
        running: 0,
        completed: 0,
        time: PhaseTimes::default(),
    };
    r.settle()?;

    let mut samples = Vec::new();
    let mut next_arrival = 0usize;
    let mut next_sample = 0u64;
    let last_arrival_ms = trace.arrivals.last().map_or(0, |a| a.at_ms);
    let mut loaded_average: Option<[f64; 4]> = None;
    let horizon = trace.horizon_ms.unwrap_or(u64::MAX);
    let stop = loop {
        let now = r.store.now_ms();
        if loaded_average.is_none() && last_arrival_ms > 0 && now >= last_arrival_ms {
            loaded_average = Some(r.usage.average(last_arrival_ms));
        }
        // Arrivals due now.
        let mut arrived = false;
        let lab_started = Instant::now();
        while next_arrival < trace.arrivals.len() && trace.arrivals[next_arrival].at_ms <= now {
            r.submit(next_arrival);
            next_arrival += 1;
            arrived = true;
        }
        r.time.lab += lab_started.elapsed().as_secs_f64();
        if arrived {
            r.settle()?;
        }
        if next_sample <= now {
            samples.push(r.sample(now));
            next_sample = now + trace.sample_interval_ms;
            if let Some(p) = &opts.progress {
                p(config.id, now, next_arrival, r.completed);
            }
        }
        // Done?
        let all_in = next_arrival >= trace.arrivals.len();
        let waiting = r.wl.iter().filter(|w| w.arrived && !w.finished).count();
        if all_in && waiting == 0 {
            break Stop::Drained;
        }
        if all_in && r.running == 0 && now >= r.last_progress_ms.saturating_add(idle_window_ms) {
            break Stop::Drained;
        }
        // Next instant.
        let arrival_t = trace.arrivals.get(next_arrival).map(|a| a.at_ms);
        let wake_t = r.controllers.iter().filter_map(|c| c.next_wakeup_ms()).filter(|t| *t > now).min();
        let mut next = [arrival_t, wake_t].into_iter().flatten().min();
        if all_in && r.running == 0 {
            // Only retries can happen: give them the idle window, then stop.
            let deadline = r.last_progress_ms.saturating_add(idle_window_ms).max(now + 1);
            next = Some(next.map_or(deadline, |t| t.min(deadline)));
        }
        let Some(mut t) = next else { break Stop::Drained };
        t = t.min(next_sample.max(now + 1));
        if t > horizon {
            r.store.set_now_ms(horizon);
            r.usage.advance(horizon);
            break Stop::Horizon;
        }
        r.store.set_now_ms(t);
        r.time.instants += 1;
        r.settle()?;
    };
    let end_ms = r.store.now_ms();
    let last = samples.last().map(|s: &Sample| s.t_ms);
    if last != Some(end_ms) {
        samples.push(r.sample(end_ms));
    }
    let average = r.usage.average(end_ms);
    let loaded_average = loaded_average.unwrap_or(average);
    Ok(RunResult {
        config: config.id.to_string(),
        records: r.records,
        samples,
        end_ms,
        stop,
        average,
        loaded_average,
        device,
        wall_seconds: started.elapsed().as_secs_f64(),
        controller_errors: r.errors.into_keys().collect(),
        time: r.time,
    })
}

impl Replay<'_> {
    fn err(&mut self, message: String) {
        if self.errors.len() < 20 {
            self.errors.insert(message, ());
        }
    }

    /// Creates the objects of arrival `i`.
    fn submit(&mut self, i: usize) {
        let trace = self.trace;
        let a = &trace.arrivals[i];
        self.wl[i].arrived = true;
        for obj in objects::objects(a, &self.trace.cluster) {
            if let Err(e) = self.store.create(obj) {
                self.err(format!("creating {}: {e}", a.name));
            }
        }
    }

    /// Reconciles to a fixed point, then follows what changed; repeats while the lab
    /// itself acted (deleting finished work, resubmitting preempted work).
    fn settle(&mut self) -> Result<(), ReplayError> {
        loop {
            self.fixed_point()?;
            let started = Instant::now();
            let acted = self.observe();
            self.time.lab += started.elapsed().as_secs_f64();
            if !acted {
                return Ok(());
            }
        }
    }

    fn fixed_point(&mut self) -> Result<(), ReplayError> {
        for _ in 0..MAX_ROUNDS {
            let before = self.store.resource_version();
            let mut wrote = false;
            self.time.rounds += 1;
            for (i, c) in self.controllers.iter_mut().enumerate() {
                let started = Instant::now();
                let result = c.reconcile(&mut self.store);
                let spent = started.elapsed().as_secs_f64();
                match i {
                    JOB_CONTROLLER => self.time.job_controller += spent,
                    SCHEDULER => self.time.scheduler += spent,
                    _ => self.time.kubelet += spent,
                }
                match result {
                    Ok(w) => wrote |= w,
                    Err(e) => {
                        let m = e.to_string();
                        if self.errors.len() < 20 {
                            self.errors.insert(m, ());
                        }
                    }
                }
            }
            if !wrote && self.store.resource_version() == before {
                return Ok(());
            }
        }
        Err(ReplayError::DidNotSettle { config: self.config.id.to_string(), t_ms: self.store.now_ms() })
    }

    /// Reads the watch since the last call. Returns whether the lab wrote to the store.
    fn observe(&mut self) -> bool {
        let now = self.store.now_ms();
        let events = self.store.watch_since(self.seen_rv);
        self.seen_rv = self.store.resource_version();
        // Every controller has read the log up to here (the fixed point's last round
        // changed nothing after they read it), and so has the lab now: older entries are
        // never read again, and without this the log holds every version of every pod of
        // the run (GiBs on the built-in traces).
        self.store.compact_log(self.seen_rv);
        let mut acted = false;
        for e in events {
            let Object::Pod(p) = &e.object else { continue };
            let name = p.metadata.name.as_deref().unwrap_or_default();
            if e.kind == WatchEventKind::Deleted {
                acted |= self.pod_deleted(name, now);
                continue;
            }
            let Some(wl_name) = p.metadata.labels.as_ref().and_then(|l| l.get(WORKLOAD_LABEL)) else {
                continue;
            };
            let Some(&w) = self.workload_index.get(wl_name) else { continue };
            let attempt = self.wl[w].attempt;
            // Looked up before it is inserted: most events are of pods already tracked, and
            // `entry` would copy the name for each.
            if !self.pods.contains_key(name) {
                let track = PodTrack { workload: w, attempt, holding: None, done: false };
                self.pods.insert(name.to_string(), track);
            }
            let track = self.pods.get_mut(name).expect("tracked above");
            if track.done {
                continue;
            }
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("");
            let node = p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .and_then(|n| self.node_index.get(n))
                .copied();
            let terminal = phase == "Succeeded" || phase == "Failed";
            if let (Some(n), None, false) = (node, track.holding, terminal) {
                track.holding = Some(n);
                let current = track.attempt == self.wl[w].attempt;
                self.usage.take(n, &self.trace.arrivals[w].res, now);
                self.last_progress_ms = now;
                if current {
                    self.bound(w, n, now);
                }
            }
            if terminal {
                let track = self.pods.get_mut(name).expect("tracked above");
                track.done = true;
                let current = track.attempt == self.wl[w].attempt;
                if let Some(n) = track.holding.take() {
                    self.usage.release(n, &self.trace.arrivals[w].res, now);
                    self.last_progress_ms = now;
                    if current {
                        self.unbound(w, n);
                    }
                }
                if phase == "Succeeded" && current {
                    acted |= self.succeeded(w, now);
                }
            }
        }
        acted
    }

    /// A pod of the current attempt of `w` holds node `n` now.
    fn bound(&mut self, w: usize, n: usize, now: u64) {
        let trace = self.trace;
        let a = &trace.arrivals[w];
        let st = &mut self.wl[w];
        if st.bound.is_empty() {
            self.running += 1;
        }
        st.bound.push(n);
        let rec = &mut self.records[w];
        if rec.start_ms.is_none() && st.bound.len() + st.succeeded as usize >= a.min_count as usize {
            rec.start_ms = Some(now);
            rec.domains = self
                .domains
                .iter()
                .map(|ids| {
                    let mut d: Vec<u32> = st.bound.iter().map(|&n| ids[n]).collect();
                    d.sort_unstable();
                    d.dedup();
                    d.len() as u32
                })
                .collect();
        }
    }

    fn unbound(&mut self, w: usize, n: usize) {
        let st = &mut self.wl[w];
        if let Some(i) = st.bound.iter().position(|&x| x == n) {
            st.bound.swap_remove(i);
            if st.bound.is_empty() {
                self.running -= 1;
            }
        }
    }

    /// A pod of the current attempt of `w` succeeded. Returns whether the lab wrote.
    fn succeeded(&mut self, w: usize, now: u64) -> bool {
        let trace = self.trace;
        let a = &trace.arrivals[w];
        self.wl[w].succeeded += 1;
        if self.wl[w].succeeded < a.pods || self.wl[w].finished {
            return false;
        }
        self.wl[w].finished = true;
        self.records[w].end_ms = Some(now);
        self.completed += 1;
        // The owner cleans up: a Job deletes itself (TTL 0); PodGroups and pods are deleted
        // here so the store and the engine stay small.
        match a.kind {
            ArrivalKind::Job => false,
            ArrivalKind::Pod | ArrivalKind::PodGroup => {
                let attempt = self.wl[w].attempt;
                for i in 0..a.pods {
                    self.delete_pod(&objects::pod_name(a, attempt, i));
                }
                if a.kind == ArrivalKind::PodGroup {
                    let r = ObjectRef::new(Kind::PodGroup, NAMESPACE, a.name.clone());
                    if let Err(e) = self.store.delete(&r) {
                        self.err(format!("deleting {r}: {e}"));
                    }
                }
                true
            }
        }
    }

    fn delete_pod(&mut self, name: &str) {
        let r = ObjectRef::new(Kind::Pod, NAMESPACE, name);
        if self.store.get(&r).is_some() {
            self.own_deletes.insert(name.to_string());
            if let Err(e) = self.store.delete(&r) {
                self.err(format!("deleting {r}: {e}"));
            }
        }
    }

    /// A pod went away. Returns whether the lab wrote (a resubmission).
    fn pod_deleted(&mut self, name: &str, now: u64) -> bool {
        let own = self.own_deletes.remove(name);
        let Some(track) = self.pods.remove(name) else { return false };
        let w = track.workload;
        let current = track.attempt == self.wl[w].attempt;
        if let Some(n) = track.holding {
            self.usage.release(n, &self.trace.arrivals[w].res, now);
            self.last_progress_ms = now;
            if current {
                self.unbound(w, n);
            }
        }
        if own || !current || track.done || self.wl[w].finished {
            return false;
        }
        // Deleted by someone else before it finished: preemption (or node loss).
        let trace = self.trace;
        let a = &trace.arrivals[w];
        if self.records[w].start_ms.is_some() && !self.wl[w].preempted {
            self.records[w].restarts += 1;
            self.wl[w].preempted = true;
        }
        if a.kind == ArrivalKind::Job {
            return false; // the Job controller replaces its pods
        }
        // The owner resubmits the whole workload as a new attempt.
        let attempt = self.wl[w].attempt;
        for i in 0..a.pods {
            self.delete_pod(&objects::pod_name(a, attempt, i));
        }
        let st = &mut self.wl[w];
        if !st.bound.is_empty() {
            self.running -= 1;
        }
        st.bound.clear();
        st.succeeded = 0;
        st.preempted = false;
        st.attempt += 1;
        for p in objects::pods(a, st.attempt) {
            if let Err(e) = self.store.create(Object::Pod(p.into())) {
                let m = format!("resubmitting {}: {e}", a.name);
                self.err(m);
            }
        }
        true
    }

    fn sample(&mut self, now: u64) -> Sample {
        let started = Instant::now();
        let s = self.take_sample(now);
        self.time.samples += started.elapsed().as_secs_f64();
        s
    }

    fn take_sample(&mut self, now: u64) -> Sample {
        self.usage.advance(now);
        let mut pending = 0;
        let mut running = 0;
        for (i, st) in self.wl.iter().enumerate() {
            if !self.trace.arrivals[i].is_gang() || !st.arrived || st.finished {
                continue;
            }
            if st.bound.is_empty() {
                pending += 1;
            } else {
                running += 1;
            }
        }
        Sample {
            t_ms: now,
            device_util: self.usage.now(self.device),
            cpu_util: self.usage.now(Device::Cpu),
            pending_gangs: pending,
            running_gangs: running,
            frag: Fragmentation::measure(
                &self.usage,
                self.device,
                &self.domains,
                self.rack_level,
                self.shape.as_ref(),
            ),
        }
    }
}
