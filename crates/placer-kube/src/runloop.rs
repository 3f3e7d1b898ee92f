//! The scheduling loop: runs the controllers over the store whenever it has new events or
//! a controller's wake-up time passes, and only while this replica leads.
//!
//! [`SchedulingLoop::step`] is one pass and is independent of the Kubernetes backend (its
//! tests run it over an in-memory fake). [`run`] drives it on the dedicated scheduling
//! thread over a [`KubeStore`], waiting between passes.
//!
//! Leadership terms: controllers are created when this replica starts leading and
//! dropped when it stops (the engine's assumptions and backoffs belong to one term). A new
//! term's controllers read the store from the beginning (the cache serves its current
//! state), so a replica that was standing by takes over with a fresh, complete view.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use placer_api::k8s::apimachinery::pkg::apis::meta::v1::Time;
use placer_cluster::{ClusterStore, EventRecord, Kind, Object, ObjectRef, StoreError, WatchEvent};
use placer_controllers::Controller;

use crate::leader::Leadership;
use crate::metrics::{Metrics, RECONCILE_ERRORS};
use crate::store::KubeStore;

/// Which part of the store a controller sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Everything.
    Full,
    /// Jobs only when `spec.managedBy` equals this value (other Jobs belong to the
    /// Kubernetes Job controller); every other kind in full.
    ManagedJobs(&'static str),
}

/// A controller and its view of the store.
pub struct Slot {
    pub controller: Box<dyn Controller>,
    pub view: View,
}

/// Builds the controllers of a leadership term.
pub type ControllerFactory = Box<dyn FnMut() -> Vec<Slot> + Send>;

/// The outcome of one [`SchedulingLoop::step`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Not leading: nothing ran, no controller exists.
    Standby,
    /// The controllers ran.
    Ran {
        /// Some controller wrote something (run again before waiting).
        wrote: bool,
        /// Reconcile errors in this pass.
        errors: usize,
        /// Every controller has read the store at least up to this resourceVersion.
        consumed_through: u64,
        /// The earliest wake-up time (store milliseconds) any controller asked for.
        next_wakeup_ms: Option<u64>,
    },
}

struct Term {
    slots: Vec<Slot>,
    /// Per slot: how far it has read the store's watch.
    positions: Vec<u64>,
}

/// See the module documentation.
pub struct SchedulingLoop {
    factory: ControllerFactory,
    leadership: Leadership,
    metrics: Arc<Metrics>,
    term: Option<Term>,
    terms_started: u64,
}

impl SchedulingLoop {
    pub fn new(factory: ControllerFactory, leadership: Leadership, metrics: Arc<Metrics>) -> Self {
        SchedulingLoop { factory, leadership, metrics, term: None, terms_started: 0 }
    }

    /// How many leadership terms have started (each with fresh controllers).
    pub fn terms_started(&self) -> u64 {
        self.terms_started
    }

    /// Whether controllers currently exist (a term is running).
    pub fn in_term(&self) -> bool {
        self.term.is_some()
    }

    /// One pass: every controller reconciles once, if and while this replica leads.
    /// Losing leadership between two controllers ends the term at once.
    pub fn step(&mut self, store: &mut dyn ClusterStore) -> Step {
        if !self.leadership.is_leader() {
            if self.term.take().is_some() {
                tracing::warn!("not leading: scheduling stopped, controllers dropped");
            }
            return Step::Standby;
        }
        if self.term.is_none() {
            let slots = (self.factory)();
            self.terms_started += 1;
            tracing::info!(
                term = self.terms_started,
                controllers = slots.len(),
                "leading: scheduling started"
            );
            let positions = vec![0; slots.len()];
            self.term = Some(Term { slots, positions });
        }
        let Some(term) = self.term.as_mut() else { return Step::Standby };

        let mut wrote = false;
        let mut errors = 0;
        let mut lost = false;
        for (slot, position) in term.slots.iter_mut().zip(term.positions.iter_mut()) {
            if !self.leadership.is_leader() {
                lost = true;
                break;
            }
            let mut tracked = Tracking { inner: &mut *store, position: Cell::new(*position) };
            let result = match slot.view {
                View::Full => slot.controller.reconcile(&mut tracked),
                View::ManagedJobs(manager) => {
                    slot.controller.reconcile(&mut ManagedJobs { inner: &mut tracked, manager })
                }
            };
            *position = tracked.position.get();
            match result {
                Ok(w) => wrote |= w,
                Err(e) => {
                    errors += 1;
                    self.metrics.inc_counter(RECONCILE_ERRORS, &[("controller", slot.controller.name())], 1);
                    tracing::warn!(controller = slot.controller.name(), error = %e, "reconcile failed");
                }
            }
        }
        if lost {
            self.term = None;
            tracing::warn!("lost leadership during a pass: scheduling stopped, controllers dropped");
            return Step::Standby;
        }
        let consumed_through =
            term.positions.iter().copied().min().unwrap_or_else(|| store.resource_version());
        let next_wakeup_ms = term.slots.iter().filter_map(|s| s.controller.next_wakeup_ms()).min();
        Step::Ran { wrote, errors, consumed_through, next_wakeup_ms }
    }
}

/// Passes every call through and remembers how far the controller has read the watch.
struct Tracking<'a> {
    inner: &'a mut dyn ClusterStore,
    /// A `Cell`: `watch_since` takes `&self`.
    position: Cell<u64>,
}

impl ClusterStore for Tracking<'_> {
    fn now_ms(&self) -> u64 {
        self.inner.now_ms()
    }
    fn now(&self) -> Time {
        self.inner.now()
    }
    fn resource_version(&self) -> u64 {
        self.inner.resource_version()
    }
    fn get(&self, r: &ObjectRef) -> Option<Object> {
        self.inner.get(r)
    }
    fn list(&self, kind: Kind) -> Vec<Object> {
        self.inner.list(kind)
    }
    fn create(&mut self, obj: Object) -> Result<Object, StoreError> {
        self.inner.create(obj)
    }
    fn update(&mut self, obj: Object) -> Result<Object, StoreError> {
        self.inner.update(obj)
    }
    fn update_status(&mut self, obj: Object) -> Result<Object, StoreError> {
        self.inner.update_status(obj)
    }
    fn merge_patch(&mut self, r: &ObjectRef, patch: &serde_json::Value) -> Result<Object, StoreError> {
        self.inner.merge_patch(r, patch)
    }
    fn delete(&mut self, r: &ObjectRef) -> Result<(), StoreError> {
        self.inner.delete(r)
    }
    fn bind(&mut self, namespace: &str, name: &str, uid: &str, node: &str) -> Result<(), StoreError> {
        self.inner.bind(namespace, name, uid, node)
    }
    fn record_event(&mut self, event: EventRecord) {
        self.inner.record_event(event)
    }
    fn keeps_events(&self) -> bool {
        self.inner.keeps_events()
    }
    fn events(&self) -> Vec<EventRecord> {
        self.inner.events()
    }
    fn watch_since(&self, after: u64) -> Vec<WatchEvent> {
        // Everything up to the version read before the call is in the answer.
        let current = self.inner.resource_version();
        let events = self.inner.watch_since(after);
        let last = events.last().map_or(0, |e| e.resource_version);
        self.position.set(self.position.get().max(after).max(current).max(last));
        events
    }
}

/// Hides the Jobs another controller manages.
struct ManagedJobs<'a> {
    inner: &'a mut dyn ClusterStore,
    manager: &'static str,
}

impl ManagedJobs<'_> {
    fn visible(&self, obj: &Object) -> bool {
        match obj {
            Object::Job(job) => job.spec.as_ref().and_then(|s| s.managed_by.as_deref()) == Some(self.manager),
            _ => true,
        }
    }
}

impl ClusterStore for ManagedJobs<'_> {
    fn now_ms(&self) -> u64 {
        self.inner.now_ms()
    }
    fn now(&self) -> Time {
        self.inner.now()
    }
    fn resource_version(&self) -> u64 {
        self.inner.resource_version()
    }
    fn get(&self, r: &ObjectRef) -> Option<Object> {
        self.inner.get(r).filter(|o| self.visible(o))
    }
    fn list(&self, kind: Kind) -> Vec<Object> {
        let mut all = self.inner.list(kind);
        all.retain(|o| self.visible(o));
        all
    }
    fn create(&mut self, obj: Object) -> Result<Object, StoreError> {
        self.inner.create(obj)
    }
    fn update(&mut self, obj: Object) -> Result<Object, StoreError> {
        self.inner.update(obj)
    }
    fn update_status(&mut self, obj: Object) -> Result<Object, StoreError> {
        self.inner.update_status(obj)
    }
    fn merge_patch(&mut self, r: &ObjectRef, patch: &serde_json::Value) -> Result<Object, StoreError> {
        self.inner.merge_patch(r, patch)
    }
    fn delete(&mut self, r: &ObjectRef) -> Result<(), StoreError> {
        self.inner.delete(r)
    }
    fn bind(&mut self, namespace: &str, name: &str, uid: &str, node: &str) -> Result<(), StoreError> {
        self.inner.bind(namespace, name, uid, node)
    }
    fn record_event(&mut self, event: EventRecord) {
        self.inner.record_event(event)
    }
    fn keeps_events(&self) -> bool {
        self.inner.keeps_events()
    }
    fn events(&self) -> Vec<EventRecord> {
        self.inner.events()
    }
    fn watch_since(&self, after: u64) -> Vec<WatchEvent> {
        let mut events = self.inner.watch_since(after);
        events.retain(|e| self.visible(&e.object));
        events
    }
}

/// Timing of [`run`].
#[derive(Debug, Clone, Copy)]
pub struct LoopTiming {
    /// After a change wakes the loop, wait this long for more to arrive (a gang's pods are
    /// usually created together) before reconciling.
    pub batch_window: Duration,
    /// The longest wait without a change (a periodic pass also catches missed wake-ups).
    pub idle_pass: Duration,
    /// Wait after a pass with reconcile errors, doubled up to `max_error_backoff`.
    pub error_backoff: Duration,
    pub max_error_backoff: Duration,
}

impl Default for LoopTiming {
    fn default() -> Self {
        LoopTiming {
            batch_window: Duration::from_millis(20),
            idle_pass: Duration::from_secs(5),
            error_backoff: Duration::from_millis(500),
            max_error_backoff: Duration::from_secs(30),
        }
    }
}

/// Runs the loop on the calling (dedicated, non-async) thread until `stop` is set.
/// Wake the store's waker after setting `stop` or changing leadership.
pub fn run(store: &mut KubeStore, mut scheduling: SchedulingLoop, stop: &AtomicBool, timing: LoopTiming) {
    let mut error_backoff = timing.error_backoff;
    while !stop.load(Ordering::SeqCst) {
        let rv_at_start = store.resource_version();
        match scheduling.step(store) {
            Step::Standby => {
                // No reader while standing by: the log can go.
                store.compact(store.resource_version());
                store.wait_for_change(u64::MAX, timing.idle_pass);
            }
            Step::Ran { wrote, errors, consumed_through, next_wakeup_ms } => {
                store.compact(consumed_through);
                if errors > 0 {
                    store.wait_for_change(u64::MAX, error_backoff);
                    error_backoff = (error_backoff * 2).min(timing.max_error_backoff);
                    continue;
                }
                error_backoff = timing.error_backoff;
                if wrote {
                    continue;
                }
                let now = store.now_ms();
                let until_wakeup = next_wakeup_ms
                    .map(|t| Duration::from_millis(t.saturating_sub(now)))
                    .unwrap_or(timing.idle_pass);
                if until_wakeup.is_zero() {
                    continue;
                }
                // Changes every controller has read need no new pass; neither do changes
                // from before this pass (a controller that reads no watch must not make
                // the loop spin).
                let seen = consumed_through.max(rv_at_start);
                if store.wait_for_change(seen, until_wakeup.min(timing.idle_pass))
                    && !timing.batch_window.is_zero()
                {
                    std::thread::sleep(timing.batch_window);
                }
            }
        }
    }
    tracing::info!("scheduling loop stopped");
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::batch::v1::{Job, JobSpec};
    use placer_api::k8s::api::core::v1::Node;
    use placer_cluster::WatchEventKind;
    use placer_controllers::ControllerError;
    use std::sync::Mutex;

    /// A minimal in-memory store: objects and a log, nothing else.
    #[derive(Default)]
    struct FakeStore {
        log: Vec<WatchEvent>,
        binds: usize,
    }

    impl FakeStore {
        fn add(&mut self, object: Object) {
            let rv = self.log.len() as u64 + 1;
            self.log.push(WatchEvent { resource_version: rv, kind: WatchEventKind::Added, object });
        }
    }

    impl ClusterStore for FakeStore {
        fn now_ms(&self) -> u64 {
            0
        }
        fn now(&self) -> Time {
            Time(placer_api::k8s::jiff::Timestamp::UNIX_EPOCH)
        }
        fn resource_version(&self) -> u64 {
            self.log.len() as u64
        }
        fn get(&self, r: &ObjectRef) -> Option<Object> {
            self.log.iter().rev().find(|e| &e.object.object_ref() == r).map(|e| e.object.clone())
        }
        fn list(&self, kind: Kind) -> Vec<Object> {
            self.log.iter().filter(|e| e.object.kind() == kind).map(|e| e.object.clone()).collect()
        }
        fn create(&mut self, obj: Object) -> Result<Object, StoreError> {
            self.add(obj.clone());
            Ok(obj)
        }
        fn update(&mut self, obj: Object) -> Result<Object, StoreError> {
            Ok(obj)
        }
        fn update_status(&mut self, obj: Object) -> Result<Object, StoreError> {
            Ok(obj)
        }
        fn merge_patch(&mut self, r: &ObjectRef, _: &serde_json::Value) -> Result<Object, StoreError> {
            Err(StoreError::NotFound(r.clone()))
        }
        fn delete(&mut self, _: &ObjectRef) -> Result<(), StoreError> {
            Ok(())
        }
        fn bind(&mut self, _: &str, _: &str, _: &str, _: &str) -> Result<(), StoreError> {
            self.binds += 1;
            Ok(())
        }
        fn record_event(&mut self, _: EventRecord) {}
        fn events(&self) -> Vec<EventRecord> {
            Vec::new()
        }
        fn watch_since(&self, after: u64) -> Vec<WatchEvent> {
            self.log.iter().filter(|e| e.resource_version > after).cloned().collect()
        }
    }

    /// Reads the watch, binds once per reconcile, and records what it saw.
    struct Probe {
        seen_rv: u64,
        seen: Arc<Mutex<Vec<String>>>,
        flip_leadership: Option<Leadership>,
    }

    impl Controller for Probe {
        fn name(&self) -> &'static str {
            "probe"
        }
        fn reconcile(&mut self, store: &mut dyn ClusterStore) -> Result<bool, ControllerError> {
            for e in store.watch_since(self.seen_rv) {
                self.seen_rv = e.resource_version;
                self.seen.lock().unwrap().push(e.object.metadata().name.clone().unwrap_or_default());
            }
            let _ = store.bind("ns", "p", "", "n");
            if let Some(l) = &self.flip_leadership {
                l.set_leader(false);
            }
            Ok(false)
        }
        fn next_wakeup_ms(&self) -> Option<u64> {
            None
        }
    }

    fn node(name: &str) -> Object {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        Object::Node(n.into())
    }

    fn job(name: &str, managed_by: Option<&str>) -> Object {
        let mut j = Job::default();
        j.metadata.name = Some(name.into());
        j.metadata.namespace = Some("ns".into());
        j.spec = Some(JobSpec { managed_by: managed_by.map(str::to_string), ..JobSpec::default() });
        Object::Job(Box::new(j))
    }

    fn probe_loop(
        leadership: &Leadership,
        seen: &Arc<Mutex<Vec<String>>>,
        created: &Arc<Mutex<u32>>,
    ) -> SchedulingLoop {
        let seen = seen.clone();
        let created = created.clone();
        let factory: ControllerFactory = Box::new(move || {
            *created.lock().unwrap() += 1;
            vec![Slot {
                controller: Box::new(Probe { seen_rv: 0, seen: seen.clone(), flip_leadership: None }),
                view: View::Full,
            }]
        });
        SchedulingLoop::new(factory, leadership.clone(), Metrics::new())
    }

    #[test]
    fn without_leadership_nothing_runs() {
        let leadership = Leadership::standby();
        let (seen, created) = (Arc::default(), Arc::default());
        let mut l = probe_loop(&leadership, &seen, &created);
        let mut store = FakeStore::default();
        store.add(node("n1"));
        assert_eq!(l.step(&mut store), Step::Standby);
        assert_eq!(store.binds, 0);
        assert_eq!(*created.lock().unwrap(), 0, "no controller is even created");
    }

    #[test]
    fn losing_leadership_stops_scheduling_and_a_new_term_starts_fresh() {
        let leadership = Leadership::standby();
        let (seen, created) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(0)));
        let mut l = probe_loop(&leadership, &seen, &created);
        let mut store = FakeStore::default();
        store.add(node("n1"));

        leadership.set_leader(true);
        assert!(matches!(l.step(&mut store), Step::Ran { errors: 0, consumed_through: 1, .. }));
        assert_eq!(store.binds, 1);
        assert_eq!(*seen.lock().unwrap(), vec!["n1"]);

        // Lease lost: the next pass runs nothing and drops the controllers.
        leadership.set_leader(false);
        store.add(node("n2"));
        assert_eq!(l.step(&mut store), Step::Standby);
        assert_eq!(l.step(&mut store), Step::Standby);
        assert_eq!(store.binds, 1, "no write after the lease is lost");
        assert!(!l.in_term());

        // Lease regained: fresh controllers read the whole store again.
        leadership.set_leader(true);
        assert!(matches!(l.step(&mut store), Step::Ran { .. }));
        assert_eq!(*created.lock().unwrap(), 2);
        assert_eq!(l.terms_started(), 2);
        assert_eq!(*seen.lock().unwrap(), vec!["n1", "n1", "n2"]);
        assert_eq!(store.binds, 2);
    }

    #[test]
    fn losing_leadership_mid_pass_skips_the_remaining_controllers() {
        let leadership = Leadership::standby();
        leadership.set_leader(true);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (s1, s2, flip) = (seen.clone(), seen.clone(), leadership.clone());
        let factory: ControllerFactory = Box::new(move || {
            vec![
                Slot {
                    controller: Box::new(Probe {
                        seen_rv: 0,
                        seen: s1.clone(),
                        flip_leadership: Some(flip.clone()),
                    }),
                    view: View::Full,
                },
                Slot {
                    controller: Box::new(Probe { seen_rv: 0, seen: s2.clone(), flip_leadership: None }),
                    view: View::Full,
                },
            ]
        });
        let mut l = SchedulingLoop::new(factory, leadership.clone(), Metrics::new());
        let mut store = FakeStore::default();
        store.add(node("n1"));
        assert_eq!(l.step(&mut store), Step::Standby);
        assert_eq!(store.binds, 1, "only the first controller ran");
        assert!(!l.in_term());
    }

    #[test]
    fn the_job_controller_view_hides_jobs_managed_elsewhere() {
        let mut store = FakeStore::default();
        store.add(job("ours", Some(crate::config::JOB_MANAGED_BY)));
        store.add(job("kubes", None));
        store.add(job("other", Some("kueue.x-k8s.io/multikueue")));
        store.add(node("n1"));
        let view = ManagedJobs { inner: &mut store, manager: crate::config::JOB_MANAGED_BY };
        let names = |v: Vec<Object>| v.iter().map(|o| o.metadata().name.clone().unwrap()).collect::<Vec<_>>();
        assert_eq!(names(view.list(Kind::Job)), vec!["ours"]);
        assert!(view.get(&ObjectRef::new(Kind::Job, "ns", "kubes")).is_none());
        assert_eq!(names(view.watch_since(0).into_iter().map(|e| e.object).collect()), vec!["ours", "n1"]);
        assert_eq!(names(view.list(Kind::Node)), vec!["n1"]);
    }

    #[test]
    fn consumed_positions_follow_what_each_controller_read() {
        let leadership = Leadership::always();
        let (seen, created) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(0)));
        let mut l = probe_loop(&leadership, &seen, &created);
        let mut store = FakeStore::default();
        store.add(node("n1"));
        store.add(node("n2"));
        assert!(matches!(l.step(&mut store), Step::Ran { consumed_through: 2, .. }));
        store.add(node("n3"));
        assert!(matches!(l.step(&mut store), Step::Ran { consumed_through: 3, .. }));
    }
}
