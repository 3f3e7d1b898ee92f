//! The controller thread: the embedded cluster's controllers (Job, CronJob, ResourceClaim,
//! the simulated kubelet and, with `--scheduler embedded`, the scheduler) run to a fixed point after
//! every API write and whenever one of them has timed work due, on the store's virtual
//! clock mapped onto the wall clock. It also finishes deleting terminating namespaces
//! (the namespace controller). Between passes it expires old Events, compacts the
//! watch log to its configured size and folds a long journal into a new snapshot.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use placer_api::gates::FeatureGates;
use placer_cluster::embedded::EmbeddedCluster;
use placer_cluster::{ClusterStore, Kind, Object, ObjectRef, StoreError};
use placer_controllers::cronjob::CronJobController;
use placer_controllers::job::JobController;
use placer_controllers::resourceclaim::ResourceClaimController;
use placer_controllers::scheduler::SchedulerController;
use placer_controllers::Controller;
use placer_engine::SchedulerConfig;
use placer_sim::kubelet::SimKubelet;
use placer_sim::Metrics;

use crate::events::ControllerStore;
use crate::state::Shared;

/// Reconcile rounds one pass may take before it yields (a controller that keeps writing).
const MAX_ROUNDS: usize = 10_000;
/// Longest wait between passes without a write or a wake-up.
const IDLE: Duration = Duration::from_secs(1);
/// How often old Events are expired.
const EVENT_SWEEP: Duration = Duration::from_secs(10);

/// What the controller thread runs and keeps bounded.
#[derive(Debug, Clone)]
pub struct ControlOptions {
    /// `Some`: the embedded scheduler runs with this configuration.
    pub scheduler: Option<SchedulerConfig>,
    pub gates: FeatureGates,
    /// Watch log entries kept for watchers (older ones answer 410 Gone).
    pub watch_cache_size: usize,
    /// Events are deleted this long (store time) after they were last seen.
    pub event_ttl_ms: u64,
    /// Journal lines after which the state file is rewritten as one snapshot.
    pub journal_limit: usize,
}

/// The controllers of `placer cluster`, in the simulator's order. Pods whose uid is in
/// `frozen` keep the phase the scenario gave them.
pub fn controllers(
    options: &ControlOptions,
    frozen: HashSet<String>,
    metrics: &Metrics,
) -> Vec<Box<dyn Controller>> {
    let mut list: Vec<Box<dyn Controller>> = vec![
        Box::new(JobController::new(options.gates.clone())),
        Box::new(placer_controllers::ephemeral::EphemeralVolumeController::new()),
        Box::new(placer_controllers::persistentvolume::PersistentVolumeController::new()),
    ];
    if let Some(config) = &options.scheduler {
        list.push(Box::new(SchedulerController::new(config.clone(), Box::new(metrics.observer()))));
    }
    list.push(Box::new(SimKubelet::new(frozen)));
    list.push(Box::new(CronJobController::new()));
    // kube-controller-manager's resourceclaim-controller: claims from templates for pods
    // and PodGroups, reservations of consumers that are gone released (seed 004). It runs
    // here whatever the scheduler, as it does in a real cluster; `placer serve` then leaves
    // its own off.
    list.push(Box::new(ResourceClaimController::new(&options.gates)));
    // Hook: the node lifecycle controller (NotReady taints and evictions, seed 002) joins
    // this list once it exists; nothing else needs to change.
    list
}

/// How long a namespace stays `Terminating` before its content is deleted: the real
/// namespace controller takes seconds, and `kubectl delete -f` of a file that holds a
/// namespace and objects in it deletes them one by one in the meantime.
const NAMESPACE_GRACE: Duration = Duration::from_secs(1);

/// The namespace controller: deletes everything in a `Terminating` namespace, then the
/// namespace, [`NAMESPACE_GRACE`] after it started terminating.
#[derive(Debug, Default)]
pub struct NamespaceController {
    terminating_since: HashMap<String, Instant>,
}

impl NamespaceController {
    /// Finalizes the namespaces that are due; returns the wait until the next one is.
    pub fn run(&mut self, store: &mut EmbeddedCluster) -> Option<Duration> {
        let terminating: Vec<String> = store
            .list(Kind::Namespace)
            .into_iter()
            .filter(|o| matches!(o, Object::Namespace(ns) if ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating")))
            .filter_map(|o| o.metadata().name.clone())
            .collect();
        self.terminating_since.retain(|name, _| terminating.contains(name));
        let mut next: Option<Duration> = None;
        for name in terminating {
            let since = *self.terminating_since.entry(name.clone()).or_insert_with(Instant::now);
            let left = NAMESPACE_GRACE.saturating_sub(since.elapsed());
            if !left.is_zero() {
                next = Some(next.map_or(left, |n| n.min(left)));
                continue;
            }
            finalize_namespace(store, &name);
            self.terminating_since.remove(&name);
        }
        next
    }
}

/// Deletes every object in namespace `name`, then the namespace.
fn finalize_namespace(store: &mut EmbeddedCluster, name: &str) {
    for kind in Kind::ALL.into_iter().filter(|k| k.namespaced()) {
        for o in store.list(kind) {
            if o.metadata().namespace.as_deref() == Some(name) {
                if let Err(e) = store.delete(&o.object_ref()) {
                    if !matches!(e, StoreError::NotFound(_)) {
                        tracing::warn!(error = %e, namespace = %name, "cannot delete an object of a terminating namespace");
                    }
                }
            }
        }
    }
    if let Err(e) = store.delete(&ObjectRef::new(Kind::Namespace, "", name)) {
        if !matches!(e, StoreError::NotFound(_)) {
            tracing::warn!(error = %e, namespace = %name, "cannot delete a terminating namespace");
        }
    }
}

/// Runs the controllers until `stop` is set (then wake the thread through
/// [`Shared::control`]).
pub fn run(
    shared: Arc<Shared>,
    mut controllers: Vec<Box<dyn Controller>>,
    options: ControlOptions,
    stop: Arc<AtomicBool>,
) {
    let mut last_sweep = Instant::now();
    let mut namespaces = NamespaceController::default();
    let mut errors_seen: HashSet<String> = HashSet::new();
    let mut guard = shared.lock();
    while !stop.load(Ordering::SeqCst) {
        guard.dirty = false;
        let namespace_due = namespaces.run(&mut guard.store);
        let inner = &mut *guard;
        let mut view = ControllerStore { store: &mut inner.store, events: &mut inner.events };
        let mut rounds = 0;
        loop {
            let before = view.resource_version();
            let mut wrote = false;
            for c in controllers.iter_mut() {
                match c.reconcile(&mut view) {
                    Ok(w) => wrote |= w,
                    Err(e) => {
                        let text = e.to_string();
                        if errors_seen.len() < 1000 && errors_seen.insert(text.clone()) {
                            tracing::warn!(error = %text, "controller error (it retries)");
                        }
                    }
                }
            }
            rounds += 1;
            if (!wrote && view.resource_version() == before) || rounds >= MAX_ROUNDS {
                if rounds >= MAX_ROUNDS {
                    tracing::warn!(rounds, "controllers still writing; yielding");
                }
                break;
            }
        }
        let next_ms = controllers.iter().filter_map(|c| c.next_wakeup_ms()).min();
        if last_sweep.elapsed() >= EVENT_SWEEP {
            last_sweep = Instant::now();
            let ttl = options.event_ttl_ms;
            let inner = &mut *guard;
            let expired = inner.events.expire(&mut inner.store, ttl);
            if expired > 0 {
                tracing::debug!(expired, "expired events");
            }
        }
        // Every controller has read the log up to here; watchers keep the newest entries.
        let rv = guard.store.resource_version();
        let keep = options.watch_cache_size as u64;
        if guard.store.watch_log_len() as u64 > keep {
            guard.store.compact_log(rv.saturating_sub(keep));
        }
        shared.announce(&mut guard);
        // The controllers' changes reach the state file (and then watchers) outside the
        // lock, together with whatever API writes arrive meanwhile.
        let rv = guard.store.resource_version();
        drop(guard);
        shared.sync(rv);
        guard = shared.lock();
        let limit = options.journal_limit.max(guard.store.len());
        shared.fold_journal(&guard.store, limit);
        let mut wait = match next_ms {
            Some(t) => guard.clock.until(t).min(IDLE),
            None => IDLE,
        };
        if let Some(due) = namespace_due {
            wait = wait.min(due.max(Duration::from_millis(10)));
        }
        if rounds >= MAX_ROUNDS {
            drop(guard);
            std::thread::sleep(Duration::from_millis(10));
            guard = shared.lock();
        } else if !wait.is_zero() && !guard.dirty {
            guard = shared.wait(guard, wait);
        }
    }
    tracing::debug!("controller thread stopped");
}
