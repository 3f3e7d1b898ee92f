//! The state shared by the HTTP handlers and the controller thread: the embedded store
//! behind one lock, the wall-clock mapping of its virtual clock, the state file, and the
//! notifications (watchers wait for a new resourceVersion; the controller thread for
//! any API write).

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use placer_cluster::embedded::{EmbeddedCluster, EPOCH_UNIX_MS};
use placer_cluster::ClusterStore;
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
    pub journal: Option<Journal>,
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

    /// Writes the changes since the last commit to the state file.
    pub fn commit(&mut self) {
        if let Some(j) = self.journal.as_mut() {
            if let Err(e) = j.append(&self.store) {
                tracing::error!(error = %e, "cannot write the state file; changes are not persisted");
            }
        }
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct Shared {
    inner: Mutex<Inner>,
    /// Signalled on every API write (the controller thread waits on it).
    pub control: Condvar,
    changes: watch::Sender<u64>,
    /// Turns true when the server shuts down (watches end).
    closing: watch::Sender<bool>,
}

impl Shared {
    pub fn new(inner: Inner) -> Shared {
        let (changes, _) = watch::channel(inner.store.resource_version());
        let (closing, _) = watch::channel(false);
        Shared { inner: Mutex::new(inner), control: Condvar::new(), changes, closing }
    }

    /// The lock (a panic under it leaves the store consistent: every store call completes
    /// or fails whole, so a poisoned lock is taken over). The clock is moved forward.
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        guard.tick();
        guard
    }

    /// Runs `f` under the lock; then journals and announces what it changed.
    pub fn write<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        let mut guard = self.lock();
        let result = f(&mut guard);
        self.finish(&mut guard);
        result
    }

    /// Journals changes, tells watchers and the controller thread. Call under the lock
    /// after writing.
    pub fn finish(&self, inner: &mut Inner) {
        let rv = inner.store.resource_version();
        if rv != inner.notified_rv {
            inner.commit();
            inner.notified_rv = rv;
            inner.dirty = true;
            self.changes.send_replace(rv);
            self.control.notify_all();
        }
    }

    /// Announces changes made by the controller thread (does not wake it).
    pub fn announce(&self, inner: &mut Inner) {
        let rv = inner.store.resource_version();
        if rv != inner.notified_rv {
            inner.commit();
            inner.notified_rv = rv;
            self.changes.send_replace(rv);
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

    #[test]
    fn the_clock_runs_at_its_speed() {
        let c = Clock::new(1_000, 1000.0);
        std::thread::sleep(Duration::from_millis(20));
        assert!(c.now_ms() >= 21_000, "{}", c.now_ms());
        assert!(c.until(c.now_ms() + 10_000) <= Duration::from_millis(10));
        assert_eq!(Clock::new(0, -1.0).speed(), 1.0);
    }
}
