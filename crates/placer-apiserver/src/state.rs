//! The state shared by the HTTP handlers and the controller thread: the embedded store
//! behind one lock, the wall-clock mapping of its virtual clock, the state file, and the
//! notifications (watchers wait for a new resourceVersion; the controller thread for
//! any API write).
//!
//! The state file is written with group commit: a write takes the store's lock only to
//! change the store and queue its watch events; it then waits, outside that lock, until
//! the state file holds its change ([`Shared::sync`]). The first waiter writes everything
//! queued by then (one append and flush for all the writes that arrived together), the
//! others find their change already written. Nothing is answered, and no watcher is told
//! of a change, before the change is in the file.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use placer_cluster::embedded::{Counters, EmbeddedCluster, EPOCH_UNIX_MS};
use placer_cluster::{ClusterStore, Kind, WatchEvent};
use tokio::sync::watch;

use crate::events::EventRecorder;
use crate::persist::Journal;

/// Maps wall-clock time onto the store's virtual clock: virtual time runs `speed` times
/// as fast as the wall clock, from where it was at start (the wall clock's own reading
/// for a fresh cluster, so timestamps are real at speed 1).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
    start_ms: u64,
    speed: f64,
}

/// Wall-clock milliseconds since the store's epoch (2026-01-01), 0 before it.
pub fn wall_store_ms() -> u64 {
    let unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    u64::try_from(unix.saturating_sub(EPOCH_UNIX_MS)).unwrap_or(0)
}

impl Clock {
    /// Starts at `start_ms` of store time.
    pub fn new(start_ms: u64, speed: f64) -> Clock {
        let speed = if speed.is_finite() && speed > 0.0 { speed } else { 1.0 };
        Clock { start: Instant::now(), start_ms, speed }
    }

    /// Store time now.
    pub fn now_ms(&self) -> u64 {
        let elapsed = self.start.elapsed().as_secs_f64() * 1000.0 * self.speed;
        self.start_ms.saturating_add(elapsed as u64)
    }

    /// Wall time until store time `ms` (zero if passed).
    pub fn until(&self, ms: u64) -> Duration {
        let ahead = ms.saturating_sub(self.now_ms()) as f64 / self.speed;
        Duration::from_secs_f64(ahead / 1000.0)
    }

    pub fn speed(&self) -> f64 {
        self.speed
    }
}

/// Everything under the lock.
#[derive(Debug)]
pub struct Inner {
    pub store: EmbeddedCluster,
    pub events: EventRecorder,
    pub clock: Clock,
    /// The state file until [`Shared::new`] takes it (it has its own lock there).
    journal: Option<Journal>,
    /// An API write happened since the controllers last ran.
    pub dirty: bool,
    /// The last resourceVersion watchers were told about.
    notified_rv: u64,
}

impl Inner {
    pub fn new(
        store: EmbeddedCluster,
        events: EventRecorder,
        clock: Clock,
        journal: Option<Journal>,
    ) -> Inner {
        let notified_rv = store.resource_version();
        Inner { store, events, clock, journal, dirty: true, notified_rv }
    }

    /// Moves the store's clock to the wall clock's reading (never backwards).
    pub fn tick(&mut self) {
        let now = self.clock.now_ms();
        if now > self.store.now_ms() {
            self.store.set_now_ms(now);
        }
    }
}

/// Changes whose stored JSON is kept for watchers.
const RENDERED: usize = 4096;

/// Changes made under the store's lock that the state file does not hold yet.
#[derive(Debug, Default)]
struct Pending {
    /// In resourceVersion order, each with the store's counters after its write.
    events: Vec<(WatchEvent, Counters)>,
}

/// See the module documentation.
#[derive(Debug)]
pub struct Shared {
    inner: Mutex<Inner>,
    /// The state file (`None`: no `--state`). Taken after the store's lock, never before.
    journal: Mutex<Option<Journal>>,
    /// Queued by writers under the store's lock; taken under the journal's lock.
    pending: Mutex<Pending>,
    /// Whether there is a state file at all.
    persistent: bool,
    /// Every change up to this resourceVersion is in the state file (or there is none).
    durable: AtomicU64,
    /// The store's resourceVersion after the last write announced.
    latest: AtomicU64,
    /// The stored JSON of the changes written last (resourceVersion order): the journal
    /// serializes each changed object once and watchers send the same text.
    rendered: Mutex<VecDeque<(u64, Arc<str>)>>,
    /// Signalled on every API write (the controller thread waits on it).
    pub control: Condvar,
    /// Per kind (`Kind as usize`): a resourceVersion at or after its last change that
    /// watchers were told of. Set before `changes` moves past the change, so a watcher
    /// that reads `changes` and then finds its kind's entry at or below its position has
    /// nothing to send and need not take the store's lock ([`Shared::changed_since`]).
    kind_latest: [AtomicU64; Kind::ALL.len()],
    changes: watch::Sender<u64>,
    /// Turns true when the server shuts down (watches end).
    closing: watch::Sender<bool>,
}

impl Shared {
    pub fn new(mut inner: Inner) -> Shared {
        let rv = inner.store.resource_version();
        let (changes, _) = watch::channel(rv);
        let (closing, _) = watch::channel(false);
        let journal = inner.journal.take();
        Shared {
            persistent: journal.is_some(),
            journal: Mutex::new(journal),
            pending: Mutex::new(Pending::default()),
            durable: AtomicU64::new(rv),
            latest: AtomicU64::new(rv),
            rendered: Mutex::new(VecDeque::new()),
            kind_latest: std::array::from_fn(|_| AtomicU64::new(rv)),
            inner: Mutex::new(inner),
            control: Condvar::new(),
            changes,
            closing,
        }
    }

    /// The lock (a panic under it leaves the store consistent: every store call completes
    /// or fails whole, so a poisoned lock is taken over). The clock is moved forward.
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        guard.tick();
        guard
    }

    /// Runs `f` under the lock, queues what it changed for the state file and wakes the
    /// controller thread; then, outside the lock, waits until the state file holds the
    /// change (see the module documentation) and watchers are told.
    pub fn write<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        let mut guard = self.lock();
        let result = f(&mut guard);
        self.finish(&mut guard);
        let rv = guard.store.resource_version();
        drop(guard);
        self.sync(rv);
        result
    }

    /// Queues changes for the state file and wakes the controller thread. Call under the
    /// lock after writing, then [`Shared::sync`] after releasing it.
    pub fn finish(&self, inner: &mut Inner) {
        if self.queue(inner) {
            inner.dirty = true;
            self.control.notify_all();
        }
    }

    /// Queues changes made by the controller thread (does not wake it); call
    /// [`Shared::sync`] after releasing the lock.
    pub fn announce(&self, inner: &mut Inner) {
        self.queue(inner);
    }

    /// Queues the watch events after the last queued one; true if there were any.
    fn queue(&self, inner: &mut Inner) -> bool {
        let rv = inner.store.resource_version();
        if rv == inner.notified_rv {
            return false;
        }
        if !self.persistent {
            // Told at once below: the kinds first.
            match inner.store.log_since(inner.notified_rv) {
                Ok(events) => self.note_kinds(events.iter()),
                Err(_) => Kind::ALL.iter().for_each(|k| self.note_kind(*k, rv)),
            }
        }
        if self.persistent {
            let counters = inner.store.counters();
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            match inner.store.log_since(inner.notified_rv) {
                Ok(events) => pending.events.extend(events.iter().map(|e| (e.clone(), counters))),
                // Cannot happen (the log is compacted only after its changes were queued);
                // the next fold writes the whole store anyway.
                Err(e) => {
                    tracing::error!(floor = e.floor, "changes left the watch log before the state file")
                }
            }
        }
        inner.notified_rv = rv;
        self.latest.fetch_max(rv, Ordering::SeqCst);
        if !self.persistent {
            self.durable.fetch_max(rv, Ordering::SeqCst);
            self.changes.send_replace(rv);
        }
        true
    }

    /// Returns once the state file holds every change up to `rv` (at once without a state
    /// file). Never call it under the store's lock from a request handler: the writer that
    /// finds changes queued writes them all (group commit).
    pub fn sync(&self, rv: u64) {
        if self.durable.load(Ordering::SeqCst) >= rv {
            return;
        }
        let mut journal = self.journal.lock().unwrap_or_else(|p| p.into_inner());
        if self.durable.load(Ordering::SeqCst) >= rv {
            return;
        }
        self.flush(&mut journal);
    }

    /// The stored JSON of the object of the change at `rv`, if it was written lately.
    pub fn rendered(&self, rv: u64) -> Option<Arc<str>> {
        let rendered = self.rendered.lock().unwrap_or_else(|p| p.into_inner());
        let i = rendered.partition_point(|(at, _)| *at < rv);
        rendered.get(i).filter(|(at, _)| *at == rv).map(|(_, text)| text.clone())
    }

    /// Whether a change of `kind` after resourceVersion `pos` may have been announced to
    /// watchers (false: every change of `kind` watchers were told of is at or before `pos`).
    /// Read `subscribe`'s value first, then this: false means nothing of `kind` up to that
    /// value is newer than `pos`.
    pub fn changed_since(&self, kind: Kind, pos: u64) -> bool {
        self.kind_latest[kind as usize].load(Ordering::SeqCst) > pos
    }

    fn note_kind(&self, kind: Kind, rv: u64) {
        self.kind_latest[kind as usize].fetch_max(rv, Ordering::SeqCst);
    }

    fn note_kinds<'a>(&self, events: impl Iterator<Item = &'a WatchEvent>) {
        for e in events {
            self.note_kind(e.object.kind(), e.resource_version);
        }
    }

    /// [`Shared::sync`] up to the latest announced change (what a read may have seen).
    pub fn sync_latest(&self) {
        self.sync(self.latest.load(Ordering::SeqCst));
    }

    /// Writes every queued change to the state file and tells watchers. Under the
    /// journal's lock.
    fn flush(&self, journal: &mut Option<Journal>) {
        let events = std::mem::take(&mut self.pending.lock().unwrap_or_else(|p| p.into_inner()).events);
        let Some(last) = events.last().map(|(e, _)| e.resource_version) else { return };
        let texts: Vec<Arc<str>> =
            events.iter().map(|(e, _)| Arc::from(e.object.to_json().to_string())).collect();
        if let Some(j) = journal.as_mut() {
            if let Err(e) = j.append_rendered(&events, &texts) {
                tracing::error!(error = %e, "cannot write the state file; changes are not persisted");
            }
        }
        {
            let mut rendered = self.rendered.lock().unwrap_or_else(|p| p.into_inner());
            rendered.extend(events.iter().map(|(e, _)| e.resource_version).zip(texts));
            while rendered.len() > RENDERED {
                rendered.pop_front();
            }
        }
        self.note_kinds(events.iter().map(|(e, _)| e));
        self.durable.fetch_max(last, Ordering::SeqCst);
        self.changes.send_modify(|v| *v = (*v).max(last));
    }

    /// Folds the journal into a new snapshot of `store` once it has more than `limit`
    /// lines. Under the store's lock (the snapshot is the store as it is).
    pub fn fold_journal(&self, store: &EmbeddedCluster, limit: usize) {
        let mut journal = self.journal.lock().unwrap_or_else(|p| p.into_inner());
        if journal.as_ref().is_none_or(|j| j.lines() <= limit) {
            return;
        }
        // What is queued goes to the old file first: the file is whole if the fold fails.
        self.flush(&mut journal);
        if let Some(j) = journal.as_mut() {
            if let Err(e) = j.rewrite(store) {
                tracing::error!(error = %e, "cannot rewrite the state file");
            }
        }
    }

    /// A receiver of the latest resourceVersion.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Ends every watch (shutdown).
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// A receiver that turns true at shutdown.
    pub fn closing(&self) -> watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// Waits under the lock for an API write or `timeout`.
    pub fn wait<'a>(&self, guard: MutexGuard<'a, Inner>, timeout: Duration) -> MutexGuard<'a, Inner> {
        let (mut guard, _) = self
            .control
            .wait_timeout_while(guard, timeout, |inner| !inner.dirty)
            .unwrap_or_else(|p| p.into_inner());
        guard.tick();
        guard
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::persist::tests::pod;

    #[test]
    fn a_write_is_answered_and_watched_only_once_the_state_file_holds_it() {
        let dir = std::env::temp_dir().join(format!("placer-group-commit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.jsonl");
        let store = EmbeddedCluster::new();
        let journal = Journal::create(&path, &store).unwrap();
        let shared = Arc::new(Shared::new(Inner::new(
            store,
            EventRecorder::new("t"),
            Clock::new(0, 1.0),
            Some(journal),
        )));
        // Writers race (their changes are written together); each checks, once answered,
        // that the file holds its change and that watchers may be told of it.
        let writers: Vec<_> = (0..6)
            .map(|t| {
                let (shared, path) = (shared.clone(), path.clone());
                std::thread::spawn(move || {
                    let changes = shared.subscribe();
                    for i in 0..40 {
                        let name = format!("p{t}-{i}");
                        let rv = shared.write(|inner| {
                            inner.store.create(pod(&name)).unwrap();
                            inner.store.resource_version()
                        });
                        let text = std::fs::read_to_string(&path).unwrap();
                        assert!(
                            text.contains(&format!("\"name\":\"{name}\"")),
                            "{name} answered before it was written"
                        );
                        assert!(*changes.borrow() >= rv, "watchers not told of {name}");
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        // A restart finds every write, and nothing is left queued.
        let restored = Journal::load(&path).unwrap();
        let guard = shared.lock();
        assert_eq!(restored.objects().count(), 240);
        // Every object at its version (timestamps are whole seconds in the file, so the
        // objects are compared by name and resourceVersion).
        let versions = |store: &EmbeddedCluster| -> Vec<(Option<String>, Option<String>)> {
            store
                .objects()
                .map(|o| (o.metadata().name.clone(), o.metadata().resource_version.clone()))
                .collect()
        };
        assert_eq!(versions(&restored), versions(&guard.store));
        // (The clock moves on without writes, so only the write counters must match.)
        assert_eq!(restored.resource_version(), guard.store.resource_version());
        assert_eq!(restored.counters().uid_counter, guard.store.counters().uid_counter);
        drop(guard);
        // Folding keeps it whole.
        {
            let guard = shared.lock();
            shared.fold_journal(&guard.store, 0);
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
        assert_eq!(Journal::load(&path).unwrap().objects().count(), 240);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A watcher of a kind that did not change since its position may skip the store.
    #[test]
    fn changes_are_announced_per_kind() {
        let dir = std::env::temp_dir().join(format!("placer-kinds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.jsonl");
        for persistent in [false, true] {
            let store = EmbeddedCluster::new();
            let journal = persistent.then(|| Journal::create(&path, &store).unwrap());
            let shared = Shared::new(Inner::new(store, EventRecorder::new("t"), Clock::new(0, 1.0), journal));
            let start = *shared.subscribe().borrow();
            let rv = shared.write(|inner| {
                inner.store.create(pod("a")).unwrap();
                inner.store.resource_version()
            });
            let changes = shared.subscribe();
            assert!(*changes.borrow() >= rv, "persistent {persistent}");
            assert!(shared.changed_since(Kind::Pod, start), "persistent {persistent}");
            assert!(!shared.changed_since(Kind::Pod, rv), "persistent {persistent}");
            assert!(!shared.changed_since(Kind::Node, start), "persistent {persistent}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_clock_runs_at_its_speed() {
        let c = Clock::new(1_000, 1000.0);
        std::thread::sleep(Duration::from_millis(20));
        assert!(c.now_ms() >= 21_000, "{}", c.now_ms());
        assert!(c.until(c.now_ms() + 10_000) <= Duration::from_millis(10));
        assert_eq!(Clock::new(0, -1.0).speed(), 1.0);
    }
}
