//! The watch cache: the objects the watchers have seen, plus an ordered log of changes
//! numbered with a local, monotonically increasing resourceVersion.
//!
//! The API server's resourceVersions are opaque strings per object; controllers need one
//! total order over every kind (that is what [`ClusterStore::watch_since`] promises), so
//! the cache hands out its own numbers: every change it records (from a watch event, a
//! relist, or the answer to one of our own writes) gets the next one. The API server's
//! version is kept on each object and used only to drop duplicates and stale copies:
//!
//! * the same object version seen twice (our write's answer, then the watch event) is
//!   recorded once;
//! * an older copy arriving after a newer one (a watch event still in flight when our write
//!   answered) is ignored. The API server hands out increasing integers (etcd revisions);
//!   versions that are not integers are compared for equality only;
//! * a different `uid` under the same name is a recreated object: `Deleted` for the old
//!   one, then `Added`;
//! * the answer to our own write about an object the watch has already reported deleted
//!   (a `DELETE` answered with the object, whose watch event overtook the answer) is
//!   dropped: uids are never reused, so the cache remembers recently deleted ones.
//!
//! A relist (initial sync, or after the watch expired with 410 Gone) is applied as a
//! diff against the cache when it completes: `Added` / `Modified` for what changed,
//! `Deleted` for what is gone, nothing for what is unchanged. Objects we wrote ourselves
//! while the relist ran are kept even if the list predates them (the watch that follows
//! the list reports their fate).
//!
//! The log is compacted by the scheduling loop once every consumer has read past a
//! version. A reader asking from before the compaction floor (a fresh controller after a
//! leadership change) gets the surviving state as `Added` events first, then the log.
//!
//! [`ClusterStore::watch_since`]: placer_cluster::ClusterStore::watch_since

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use placer_cluster::{Kind, Object, ObjectRef, WatchEvent, WatchEventKind};

#[derive(Debug, Clone)]
struct Entry {
    object: Arc<Object>,
    /// Local resourceVersion of the last change.
    rv: u64,
}

#[derive(Debug, Clone)]
struct LogEntry {
    rv: u64,
    kind: WatchEventKind,
    object: Arc<Object>,
}

/// Where a change comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// A watch event or a relist.
    Watch,
    /// The API server's answer to one of our writes (read-your-writes).
    LocalWrite,
}

/// What a completed relist changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RelistOutcome {
    pub added: usize,
    pub modified: usize,
    pub deleted: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Same,
    Older,
    Newer,
}

fn api_rv(o: &Object) -> Option<&str> {
    o.metadata().resource_version.as_deref().filter(|s| !s.is_empty())
}

fn uid(o: &Object) -> Option<&str> {
    o.metadata().uid.as_deref().filter(|s| !s.is_empty())
}

/// Orders an incoming copy against the cached one by the API server's resourceVersion.
fn compare(incoming: &Object, cached: &Object) -> Order {
    match (api_rv(incoming), api_rv(cached)) {
        (Some(a), Some(b)) if a == b => Order::Same,
        (Some(a), Some(b)) => match (a.parse::<u64>(), b.parse::<u64>()) {
            (Ok(a), Ok(b)) if a < b => Order::Older,
            _ => Order::Newer,
        },
        _ => Order::Newer,
    }
}

/// The cache proper (always used under [`Shared`]'s lock).
#[derive(Debug, Default)]
pub(crate) struct Cache {
    objects: BTreeMap<ObjectRef, Entry>,
    /// Changes with `rv > floor`, in order.
    log: VecDeque<LogEntry>,
    floor: u64,
    rv: u64,
    /// Buffers of relists in progress.
    relists: BTreeMap<Kind, Vec<Object>>,
    /// Objects we wrote while a relist of their kind was in progress.
    written_during_relist: BTreeMap<Kind, BTreeSet<ObjectRef>>,
    synced: BTreeSet<Kind>,
    /// Bumped by [`Shared::wake`] so waiters return early.
    wake_generation: u64,
    /// Uids of objects seen deleted, most recent last (bounded by [`DELETED_UIDS`]).
    deleted_uids: HashSet<String>,
    deleted_order: VecDeque<String>,
}

/// How many deleted uids the cache remembers (a local write's answer arrives within
/// moments of its watch event; this is a generous margin).
const DELETED_UIDS: usize = 100_000;

impl Cache {
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    fn record(&mut self, kind: WatchEventKind, object: Arc<Object>) -> u64 {
        self.rv += 1;
        self.log.push_back(LogEntry { rv: self.rv, kind, object });
        self.rv
    }

    /// Records an added or modified object. Returns the changes recorded (none for a
    /// duplicate or stale copy; `Deleted` + `Added` for a recreated object).
    pub fn apply(&mut self, obj: Object, source: Source) -> Vec<WatchEventKind> {
        let r = obj.object_ref();
        if source == Source::LocalWrite && uid(&obj).is_some_and(|u| self.deleted_uids.contains(u)) {
            return Vec::new();
        }
        if source == Source::LocalWrite {
            if let Some(set) = self.written_during_relist.get_mut(&r.kind) {
                set.insert(r.clone());
            }
        }
        let new = Arc::new(obj);
        let mut changes = Vec::new();
        match self.objects.get(&r) {
            None => changes.push(WatchEventKind::Added),
            Some(entry) => match compare(&new, &entry.object) {
                Order::Same | Order::Older => return changes,
                Order::Newer => {
                    let replaced = matches!((uid(&new), uid(&entry.object)), (Some(a), Some(b)) if a != b);
                    if replaced {
                        let old = entry.object.clone();
                        self.record(WatchEventKind::Deleted, old);
                        changes.push(WatchEventKind::Deleted);
                        changes.push(WatchEventKind::Added);
                    } else {
                        changes.push(WatchEventKind::Modified);
                    }
                }
            },
        }
        let kind = *changes.last().unwrap_or(&WatchEventKind::Added);
        let rv = self.record(kind, new.clone());
        self.objects.insert(r, Entry { object: new, rv });
        changes
    }

    /// Records a deletion (the object as last seen). Ignored when the cache holds another
    /// object of that name (different uid) or a newer version.
    pub fn delete(&mut self, obj: Object) -> bool {
        let r = obj.object_ref();
        let Some(entry) = self.objects.get(&r) else { return false };
        if matches!((uid(&obj), uid(&entry.object)), (Some(a), Some(b)) if a != b)
            || compare(&obj, &entry.object) == Order::Older
        {
            return false;
        }
        self.objects.remove(&r);
        self.forget_uid(&obj);
        self.record(WatchEventKind::Deleted, Arc::new(obj));
        true
    }

    /// Remembers that `obj`'s uid is gone for good.
    fn forget_uid(&mut self, obj: &Object) {
        let Some(u) = uid(obj) else { return };
        if self.deleted_uids.insert(u.to_string()) {
            self.deleted_order.push_back(u.to_string());
            if self.deleted_order.len() > DELETED_UIDS {
                if let Some(old) = self.deleted_order.pop_front() {
                    self.deleted_uids.remove(&old);
                }
            }
        }
    }

    /// A relist of `kind` starts (the watcher's `Init`).
    pub fn begin_relist(&mut self, kind: Kind) {
        self.relists.insert(kind, Vec::new());
        self.written_during_relist.insert(kind, BTreeSet::new());
    }

    /// One listed object (the watcher's `InitApply`).
    pub fn relist_item(&mut self, obj: Object) {
        let kind = obj.kind();
        if !self.relists.contains_key(&kind) {
            self.begin_relist(kind);
        }
        self.relists.entry(kind).or_default().push(obj);
    }

    /// The relist of `kind` is complete (the watcher's `InitDone`): applies the diff.
    pub fn finish_relist(&mut self, kind: Kind) -> RelistOutcome {
        let listed = self.relists.remove(&kind).unwrap_or_default();
        let protected = self.written_during_relist.remove(&kind).unwrap_or_default();
        let mut outcome = RelistOutcome::default();
        let mut present = HashSet::with_capacity(listed.len());
        for obj in listed {
            present.insert(obj.object_ref());
            for change in self.apply(obj, Source::Watch) {
                match change {
                    WatchEventKind::Added => outcome.added += 1,
                    WatchEventKind::Modified => outcome.modified += 1,
                    WatchEventKind::Deleted => outcome.deleted += 1,
                }
            }
        }
        let gone: Vec<ObjectRef> = self
            .refs_of(kind)
            .filter(|r| !present.contains(*r) && !protected.contains(*r))
            .cloned()
            .collect();
        for r in gone {
            if let Some(entry) = self.objects.remove(&r) {
                self.forget_uid(&entry.object);
                self.record(WatchEventKind::Deleted, entry.object);
                outcome.deleted += 1;
            }
        }
        self.synced.insert(kind);
        outcome
    }

    pub fn is_synced(&self, kind: Kind) -> bool {
        self.synced.contains(&kind)
    }

    fn refs_of(&self, kind: Kind) -> impl Iterator<Item = &ObjectRef> {
        self.objects
            .range(ObjectRef::new(kind, "", "")..)
            .take_while(move |(r, _)| r.kind == kind)
            .map(|(r, _)| r)
    }

    pub fn get(&self, r: &ObjectRef) -> Option<Object> {
        self.objects.get(r).map(|e| (*e.object).clone())
    }

    /// Calls `f` on every object of `kind` without cloning (sorted by namespace and name).
    pub fn for_each(&self, kind: Kind, mut f: impl FnMut(&Object)) {
        for (_, e) in self.objects.range(ObjectRef::new(kind, "", "")..).take_while(|(r, _)| r.kind == kind) {
            f(&e.object);
        }
    }

    pub fn list(&self, kind: Kind) -> Vec<Object> {
        let mut out = Vec::new();
        self.for_each(kind, |o| out.push(o.clone()));
        out
    }

    /// Every change after `after`, in order (see the module documentation for readers from
    /// before the compaction floor).
    pub fn watch_since(&self, after: u64) -> Vec<WatchEvent> {
        let event = |rv, kind, object: &Arc<Object>| WatchEvent {
            resource_version: rv,
            kind,
            object: (**object).clone(),
        };
        if after >= self.floor {
            let start = self.log.partition_point(|e| e.rv <= after);
            return self.log.range(start..).map(|e| event(e.rv, e.kind, &e.object)).collect();
        }
        let mut snapshot: Vec<(u64, &ObjectRef, &Arc<Object>)> = self
            .objects
            .iter()
            .filter(|(_, e)| e.rv > after && e.rv <= self.floor)
            .map(|(r, e)| (e.rv, r, &e.object))
            .collect();
        snapshot.sort_by_key(|(rv, _, _)| *rv);
        let mut known: HashSet<ObjectRef> = snapshot.iter().map(|(_, r, _)| (*r).clone()).collect();
        let mut out: Vec<WatchEvent> =
            snapshot.into_iter().map(|(rv, _, o)| event(rv, WatchEventKind::Added, o)).collect();
        for e in &self.log {
            let kind = placer_cluster::resumed_kind(&mut known, e.object.object_ref(), e.kind);
            out.push(event(e.rv, kind, &e.object));
        }
        out
    }

    /// Drops log entries up to `through` (every reader has consumed them).
    pub fn compact(&mut self, through: u64) {
        let through = through.min(self.rv);
        while self.log.front().is_some_and(|e| e.rv <= through) {
            self.log.pop_front();
        }
        self.floor = self.floor.max(through);
    }

    #[cfg(test)]
    pub fn log_len(&self) -> usize {
        self.log.len()
    }
}

/// What [`Shared::wait`] returned for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    Changed,
    Woken,
    TimedOut,
}

/// The cache shared between the watcher tasks (async) and the scheduling thread (sync).
///
/// A `std` mutex: critical sections are short and never span an `.await`.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    cache: Mutex<Cache>,
    changed: Condvar,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, Cache> {
        // A panic inside a critical section leaves the cache consistent (every mutation is
        // completed before the next one starts), so a poisoned lock is taken over.
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` under the lock and wakes waiters if the resourceVersion moved.
    pub fn update<R>(&self, f: impl FnOnce(&mut Cache) -> R) -> R {
        let mut cache = self.lock();
        let before = cache.rv;
        let result = f(&mut cache);
        if cache.rv != before {
            self.changed.notify_all();
        }
        result
    }

    /// Blocks until the resourceVersion exceeds `after`, [`Shared::wake`] is called, or
    /// `timeout` passes.
    pub fn wait(&self, after: u64, timeout: Duration) -> Wake {
        let deadline = Instant::now() + timeout;
        let mut cache = self.lock();
        let generation = cache.wake_generation;
        loop {
            if cache.rv > after {
                return Wake::Changed;
            }
            if cache.wake_generation != generation {
                return Wake::Woken;
            }
            let now = Instant::now();
            if now >= deadline {
                return Wake::TimedOut;
            }
            cache = match self.changed.wait_timeout(cache, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Makes every current [`Shared::wait`] return.
    pub fn wake(&self) {
        let mut cache = self.lock();
        cache.wake_generation += 1;
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::core::v1::{Node, Pod};

    fn pod(name: &str, uid: &str, rv: &str) -> Object {
        let mut p = Pod::default();
        p.metadata.namespace = Some("ns".into());
        p.metadata.name = Some(name.into());
        p.metadata.uid = Some(uid.into());
        p.metadata.resource_version = Some(rv.into());
        Object::Pod(p.into())
    }

    fn node(name: &str, rv: &str) -> Object {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.uid = Some(format!("uid-{name}"));
        n.metadata.resource_version = Some(rv.into());
        Object::Node(n.into())
    }

    fn kinds(events: &[WatchEvent]) -> Vec<(u64, WatchEventKind, String)> {
        events
            .iter()
            .map(|e| (e.resource_version, e.kind, e.object.metadata().name.clone().unwrap_or_default()))
            .collect()
    }

    use WatchEventKind::{Added, Deleted, Modified};

    #[test]
    fn changes_get_consecutive_local_versions_across_kinds() {
        let mut c = Cache::default();
        c.apply(pod("a", "u1", "10"), Source::Watch);
        c.apply(node("n1", "11"), Source::Watch);
        c.apply(pod("a", "u1", "12"), Source::Watch);
        assert!(c.delete(pod("a", "u1", "13")));
        assert_eq!(
            kinds(&c.watch_since(0)),
            vec![
                (1, Added, "a".into()),
                (2, Added, "n1".into()),
                (3, Modified, "a".into()),
                (4, Deleted, "a".into())
            ]
        );
        assert_eq!(kinds(&c.watch_since(2)).len(), 2);
        assert_eq!(c.resource_version(), 4);
    }

    #[test]
    fn duplicates_and_stale_copies_are_not_recorded() {
        let mut c = Cache::default();
        // Our write's answer arrives first, then the watch events (older, then the same).
        c.apply(pod("a", "u1", "20"), Source::LocalWrite);
        assert!(c.apply(pod("a", "u1", "18"), Source::Watch).is_empty());
        assert!(c.apply(pod("a", "u1", "20"), Source::Watch).is_empty());
        assert_eq!(c.resource_version(), 1);
        assert_eq!(
            c.get(&pod("a", "u1", "").object_ref()).unwrap().metadata().resource_version.as_deref(),
            Some("20")
        );
    }

    #[test]
    fn the_late_answer_to_our_write_does_not_bring_back_a_deleted_object() {
        let mut c = Cache::default();
        c.apply(pod("a", "u1", "5"), Source::Watch);
        // We delete it; the watch reports the deletion before the DELETE's answer (the
        // object, as a pod delete returns it) is handled.
        assert!(c.delete(pod("a", "u1", "6")));
        assert!(c.apply(pod("a", "u1", "5"), Source::LocalWrite).is_empty());
        assert!(c.get(&pod("a", "", "").object_ref()).is_none());
        // A new object of that name is another uid and is recorded.
        assert_eq!(c.apply(pod("a", "u2", "9"), Source::LocalWrite), vec![Added]);
    }

    #[test]
    fn a_recreated_object_is_deleted_then_added() {
        let mut c = Cache::default();
        c.apply(pod("a", "u1", "5"), Source::Watch);
        assert_eq!(c.apply(pod("a", "u2", "9"), Source::Watch), vec![Deleted, Added]);
        // The old object's deletion, arriving late, does not remove the new one.
        assert!(!c.delete(pod("a", "u1", "7")));
        assert_eq!(c.get(&pod("a", "", "").object_ref()).unwrap().metadata().uid.as_deref(), Some("u2"));
    }

    #[test]
    fn a_relist_emits_only_the_difference() {
        let mut c = Cache::default();
        c.begin_relist(Kind::Pod);
        c.relist_item(pod("a", "ua", "1"));
        c.relist_item(pod("b", "ub", "2"));
        c.relist_item(pod("c", "uc", "3"));
        assert_eq!(c.finish_relist(Kind::Pod), RelistOutcome { added: 3, modified: 0, deleted: 0 });
        assert!(c.is_synced(Kind::Pod));
        let before = c.resource_version();

        // Watch expired; the relist shows a unchanged, b modified, c gone, d new.
        c.begin_relist(Kind::Pod);
        c.relist_item(pod("a", "ua", "1"));
        c.relist_item(pod("b", "ub", "7"));
        c.relist_item(pod("d", "ud", "8"));
        assert_eq!(c.finish_relist(Kind::Pod), RelistOutcome { added: 1, modified: 1, deleted: 1 });
        assert_eq!(
            kinds(&c.watch_since(before)),
            vec![(4, Modified, "b".into()), (5, Added, "d".into()), (6, Deleted, "c".into())]
        );
        let names: Vec<_> = c.list(Kind::Pod).iter().map(|o| o.metadata().name.clone().unwrap()).collect();
        assert_eq!(names, vec!["a", "b", "d"]);
    }

    #[test]
    fn a_relist_keeps_what_we_wrote_while_it_ran_and_other_kinds() {
        let mut c = Cache::default();
        c.apply(node("n1", "1"), Source::Watch);
        c.begin_relist(Kind::Pod);
        c.apply(pod("mine", "um", "50"), Source::LocalWrite);
        c.finish_relist(Kind::Pod);
        assert!(c.get(&pod("mine", "", "").object_ref()).is_some());
        assert!(c.get(&node("n1", "").object_ref()).is_some());
    }

    #[test]
    fn compaction_keeps_state_for_fresh_readers_and_the_log_for_current_ones() {
        let mut c = Cache::default();
        c.apply(pod("a", "ua", "1"), Source::Watch); // 1
        c.apply(pod("b", "ub", "2"), Source::Watch); // 2
        c.apply(pod("c", "uc", "3"), Source::Watch); // 3
        c.apply(pod("a", "ua", "4"), Source::Watch); // 4 Modified a
        c.compact(3);
        assert_eq!(c.log_len(), 1);
        c.apply(pod("b", "ub", "5"), Source::Watch); // 5 Modified b
        c.delete(pod("c", "uc", "6")); // 6 Deleted c

        // A reader at 3 or later sees the log unchanged.
        assert_eq!(
            kinds(&c.watch_since(3)),
            vec![(4, Modified, "a".into()), (5, Modified, "b".into()), (6, Deleted, "c".into())]
        );
        // A fresh reader: the unchanged objects as Added, then the log, where objects it
        // has not seen yet are presented as Added (c, deleted since, only as Deleted).
        assert_eq!(
            kinds(&c.watch_since(0)),
            vec![(4, Added, "a".into()), (5, Added, "b".into()), (6, Deleted, "c".into())]
        );
        c.apply(pod("e", "ue", "7"), Source::Watch); // 7
        c.compact(6);
        c.apply(pod("f", "uf", "8"), Source::Watch); // 8
        assert_eq!(
            kinds(&c.watch_since(0)),
            vec![
                (4, Added, "a".into()),
                (5, Added, "b".into()),
                (7, Added, "e".into()),
                (8, Added, "f".into())
            ]
        );
        c.compact(100);
        assert_eq!(c.log_len(), 0);
        let fresh = c.watch_since(0);
        assert_eq!(
            kinds(&fresh),
            vec![
                (4, Added, "a".into()),
                (5, Added, "b".into()),
                (7, Added, "e".into()),
                (8, Added, "f".into())
            ]
        );
        assert!(c.watch_since(8).is_empty(), "no duplicates for a reader positioned by the snapshot");
    }

    #[test]
    fn waiters_return_on_change_wake_or_timeout() {
        let shared = Arc::new(Shared::default());
        assert_eq!(shared.wait(0, Duration::from_millis(10)), Wake::TimedOut);
        let s2 = shared.clone();
        let t = std::thread::spawn(move || s2.wait(0, Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(20));
        shared.update(|c| c.apply(node("n", "1"), Source::Watch));
        assert_eq!(t.join().unwrap(), Wake::Changed);
        let s3 = shared.clone();
        let t = std::thread::spawn(move || s3.wait(1, Duration::from_secs(30)));
        // The waiter may not be waiting yet: wake until it returns.
        while !t.is_finished() {
            shared.wake();
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(t.join().unwrap(), Wake::Woken);
    }
}
