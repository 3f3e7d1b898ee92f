//! The embedded, in-memory cluster: a [`ClusterStore`] with a virtual clock.
//!
//! [`EmbeddedCluster`] behaves like a small API server, close enough for the controllers to
//! run unchanged against it:
//!
//! * Objects are kept per kind, ordered by namespace and name, so listings are
//!   deterministic.
//! * Every write takes the next `resourceVersion` (one counter for the whole store) and
//!   appends a [`WatchEvent`] to an ordered log ([`ClusterStore::watch_since`]). A write that
//!   changes nothing is a no-op: no new resourceVersion, no watch event.
//! * `create` fills `uid` (deterministic, from a counter), `creationTimestamp` (virtual
//!   clock), `generation` (1), the namespace (`default` when missing) and, for an empty name
//!   with `metadata.generateName`, a generated name `<generateName><5 chars>` as Kubernetes
//!   shapes it. A created Pod without a phase starts `Pending`.
//! * `update` replaces spec and metadata and keeps status; `update_status` replaces status
//!   only. Both check a non-empty `resourceVersion` (optimistic concurrency). `generation` is
//!   bumped when anything outside metadata and status changes.
//! * `merge_patch` applies an RFC 7386 JSON merge patch to spec and metadata (a `status`
//!   key in the patch is ignored, as the main resource ignores status).
//! * `bind` is the pod binding subresource: the pod must exist and be unbound, its uid must
//!   match when one is given, and the node must exist. It sets `spec.nodeName` and the
//!   `PodScheduled=True` condition, as the API server does.
//! * `delete` removes the object at once, then garbage-collects, in the background style,
//!   every object whose owner references all point at owners that no longer exist (matched
//!   by uid), cascading. Graceful deletion, as the API server does it: an object with
//!   `metadata.finalizers`, or a pod bound to an existing node, not terminal, with an
//!   explicit `terminationGracePeriodSeconds` above 0, is only marked: `deletionTimestamp`
//!   = now + grace period (`deletionGracePeriodSeconds` set), a `Modified` watch event. It
//!   is removed when its last finalizer goes (update or patch), or by a later `delete`
//!   once the grace period is over (the kubelet's final delete), or at once when its node
//!   is gone (pod garbage collection). A pod without an explicit grace period stands for
//!   containers that exit on SIGTERM: it goes at once. Deleting a terminating object again
//!   early changes nothing.
//! * A `deletionTimestamp` is kept through updates; [`EmbeddedCluster::create_terminating`]
//!   creates an object already terminating (scenario `cluster.pods`).
//! * Validation: a store made with [`EmbeddedCluster::validating`] checks every create,
//!   update and merge patch as the API server does ([`crate::validation`]): the object as a
//!   whole (names, labels, required fields, quantities, API limits), and on update the
//!   fields the API server keeps immutable (a bound pod's node and resources, a PodGroup's
//!   spec, `metadata.uid`, ...). A rejection is [`StoreError::Invalid`]. A store made with
//!   [`EmbeddedCluster::new`] skips these checks (unit tests of controllers build objects
//!   by hand).
//! * Admission hooks ([`EmbeddedCluster::add_admission`]) mutate on create before
//!   validation and check after it, on create, update and merge patch (never on status
//!   writes or bindings); a rejection is [`StoreError::Forbidden`].
//!   [`EmbeddedCluster::check_create`] runs the create path without writing, so a batch can
//!   be checked whole before any of it is created.
//! * The watch log can be compacted ([`EmbeddedCluster::compact_log`]), so a long run
//!   keeps memory bounded by what exists; a reader from before the compaction floor gets
//!   the surviving objects instead of the lost entries (an API watch: 410 Gone).
//! * The clock is virtual: it starts at 0 ms, which is `2026-01-01T00:00:00Z`, and moves
//!   only through [`EmbeddedCluster::advance_ms`] / [`EmbeddedCluster::set_now_ms`].

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use placer_api::k8s::api::core::v1::{Pod, PodCondition};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use placer_api::k8s::jiff::Timestamp;
use rustc_hash::FxHashMap;
use serde_json::Value;

mod objects;
mod snapshot;

use objects::ObjectMap;

pub use snapshot::{object_from_json, Counters, Snapshot, SnapshotError};

use crate::validation;
use crate::{
    Admission, ClusterStore, EventRecord, Kind, Object, ObjectRef, StoreError, WatchEvent, WatchEventKind,
};

/// Unix time of the virtual clock's 0: 2026-01-01T00:00:00Z, in milliseconds.
pub const EPOCH_UNIX_MS: i64 = 1_767_225_600_000;

/// Alphabet Kubernetes uses for generated name suffixes (no vowels, no confusable digits).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The watch log no longer holds the changes asked for (see
/// [`EmbeddedCluster::compact_log`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the watch log was compacted up to resourceVersion {floor}")]
pub struct LogCompacted {
    /// The oldest resourceVersion a reader may still ask changes after.
    pub floor: u64,
}

/// An in-memory cluster store with a virtual clock. See the module documentation.
pub struct EmbeddedCluster {
    objects: ObjectMap,
    /// uid -> object, for owner-reference lookups.
    by_uid: FxHashMap<String, ObjectRef>,
    /// owner uid -> objects that name it in `ownerReferences`.
    dependents: FxHashMap<String, BTreeSet<ObjectRef>>,
    resource_version: u64,
    log: Vec<WatchEvent>,
    /// Log entries up to this resourceVersion were compacted away.
    log_floor: u64,
    events: Vec<EventRecord>,
    /// Recorded events are kept ([`EmbeddedCluster::discard_events`]).
    keep_events: bool,
    now_ms: u64,
    uid_counter: u64,
    name_counter: u64,
    admission: Vec<Box<dyn Admission + Send>>,
    /// Run the API server's validation on writes ([`EmbeddedCluster::validating`]).
    validate: bool,
}

impl Default for EmbeddedCluster {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for EmbeddedCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedCluster")
            .field("objects", &self.objects.len())
            .field("resource_version", &self.resource_version)
            .field("now_ms", &self.now_ms)
            .field("admission", &self.admission.len())
            .finish()
    }
}

impl EmbeddedCluster {
    /// An empty cluster at virtual time 0 with no admission hooks.
    pub fn new() -> Self {
        EmbeddedCluster {
            objects: ObjectMap::default(),
            by_uid: FxHashMap::default(),
            dependents: FxHashMap::default(),
            resource_version: 0,
            log: Vec::new(),
            log_floor: 0,
            events: Vec::new(),
            keep_events: true,
            now_ms: 0,
            uid_counter: 0,
            name_counter: 0,
            admission: Vec::new(),
            validate: false,
        }
    }

    /// An empty cluster that validates every create, update and merge patch as the API
    /// server does (see the module documentation). This is the store `placer simulate`
    /// runs on.
    pub fn validating() -> Self {
        EmbeddedCluster { validate: true, ..Self::new() }
    }

    /// Validates writes from now on, as [`EmbeddedCluster::validating`] does (a store
    /// restored from a snapshot starts without).
    pub fn enable_validation(&mut self) {
        self.validate = true;
    }

    /// Whether writes are validated.
    pub fn validates(&self) -> bool {
        self.validate
    }

    /// Adds an admission hook; hooks run in the order they were added.
    pub fn add_admission(&mut self, admission: Box<dyn Admission + Send>) {
        self.admission.push(admission);
    }

    /// Moves the virtual clock forward by `ms`.
    pub fn advance_ms(&mut self, ms: u64) {
        self.now_ms = self.now_ms.saturating_add(ms);
    }

    /// Sets the virtual clock. Callers move it forward only: timestamps already handed out
    /// are not rewritten.
    pub fn set_now_ms(&mut self, ms: u64) {
        self.now_ms = ms;
    }

    /// Number of stored objects (all kinds).
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// True when the store holds no object.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Every stored object, ordered by kind, namespace and name.
    pub fn objects(&self) -> impl Iterator<Item = &Object> {
        self.objects.values()
    }

    /// From now on, recorded events are dropped, and [`ClusterStore::keeps_events`] tells
    /// the controllers so, which then do not build them: for a long simulation that never
    /// reads them (a replay records a `FailedScheduling` event per member of every failed
    /// PodGroup attempt, millions on the built-in traces).
    pub fn discard_events(&mut self) {
        self.keep_events = false;
        self.events = Vec::new();
    }

    /// Number of entries in the watch log.
    pub fn watch_log_len(&self) -> usize {
        self.log.len()
    }

    /// Compacts the watch log: forgets the entries with a resourceVersion up to `through`
    /// (at most the current one). The simulator compacts once every controller has read
    /// the log, `placer cluster` keeps a window of recent changes, so a long run stays
    /// bounded. A reader asking for changes after an earlier version
    /// cannot be answered from the log any more: [`EmbeddedCluster::log_since`] says so
    /// (an API watch answers 410 Gone), and [`ClusterStore::watch_since`] answers with the
    /// surviving objects changed since then as `Added`, then the log.
    pub fn compact_log(&mut self, through: u64) {
        let through = through.min(self.resource_version);
        if through <= self.log_floor {
            return;
        }
        let cut = self.log.partition_point(|e| e.resource_version <= through);
        self.log.drain(..cut);
        // `drain` keeps the capacity: without this the log would hold the memory of its
        // longest backlog (a 50,000-node setup: about 230 MB of `WatchEvent`s) for the
        // rest of the run.
        if self.log.capacity() > 4 * self.log.len().max(256) {
            self.log.shrink_to(2 * self.log.len());
        }
        self.log_floor = through;
    }

    /// The resourceVersion up to which the watch log was compacted (0: never).
    pub fn log_floor(&self) -> u64 {
        self.log_floor
    }

    /// Makes room for `additional` more objects (and their watch events), so that loading
    /// a large cluster does not grow the tables step by step. Only capacity changes.
    pub fn reserve(&mut self, additional: usize) {
        self.objects.reserve(additional);
        self.by_uid.reserve(additional);
        self.log.reserve(additional);
    }

    /// The watch log after `after`, borrowed; `Err` with the floor when entries after
    /// `after` were compacted away.
    pub fn log_since(&self, after: u64) -> Result<&[WatchEvent], LogCompacted> {
        if after < self.log_floor {
            return Err(LogCompacted { floor: self.log_floor });
        }
        let start = self.log.partition_point(|e| e.resource_version <= after);
        Ok(&self.log[start..])
    }

    /// `watch_since` for a reader from before the compaction floor: every surviving
    /// object changed after `after` up to the floor as `Added` (oldest first), then the
    /// log, where the first event of an object the reader has not been told about is an
    /// `Added`. Deletions before the floor are lost, as with an expired watch.
    fn watch_from_state(&self, after: u64) -> Vec<WatchEvent> {
        let rv_of = |o: &Object| o.metadata().resource_version.as_deref().and_then(|v| v.parse::<u64>().ok());
        let mut snapshot: Vec<(u64, &Object)> = self
            .objects
            .values()
            .filter_map(|o| rv_of(o).map(|rv| (rv, o)))
            .filter(|(rv, _)| *rv > after && *rv <= self.log_floor)
            .collect();
        snapshot.sort_by_key(|(rv, _)| *rv);
        let mut known: BTreeSet<ObjectRef> = snapshot.iter().map(|(_, o)| o.object_ref()).collect();
        let mut out: Vec<WatchEvent> = snapshot
            .into_iter()
            .map(|(rv, o)| WatchEvent {
                resource_version: rv,
                kind: WatchEventKind::Added,
                object: o.clone(),
            })
            .collect();
        for e in &self.log {
            let r = e.object.object_ref();
            let kind = match e.kind {
                WatchEventKind::Deleted => {
                    known.remove(&r);
                    WatchEventKind::Deleted
                }
                _ if known.insert(r) => WatchEventKind::Added,
                other => other,
            };
            out.push(WatchEvent { resource_version: e.resource_version, kind, object: e.object.clone() });
        }
        out
    }

    /// Runs the checks of `create` on `obj` without writing anything: the name (unless
    /// generated) is free, validation and the admission hooks accept it. A batch of
    /// objects checked this way is created whole or not at all (the objects of the batch
    /// are checked against the store, not against each other).
    pub fn check_create(&self, obj: &Object) -> Result<(), StoreError> {
        let mut obj = obj.clone();
        normalize_new(&mut obj);
        let generated = obj.metadata().name.as_deref().is_none_or(str::is_empty)
            && obj.metadata().generate_name.as_deref().is_some_and(|g| !g.is_empty());
        let r = obj.object_ref();
        if r.name.is_empty() && !generated {
            return Err(missing_name(r));
        }
        if !generated && self.objects.contains_key(&r) {
            return Err(StoreError::AlreadyExists(r));
        }
        for hook in &self.admission {
            hook.mutate_on_create(&mut obj);
        }
        self.validate_create(&obj)?;
        self.admit(None, &obj)
    }

    fn validate_create(&self, obj: &Object) -> Result<(), StoreError> {
        if !self.validate {
            return Ok(());
        }
        let errors = validation::validate(obj);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(StoreError::Invalid { what: obj.object_ref(), message: validation::render(&errors) })
        }
    }

    fn next_rv(&mut self) -> u64 {
        self.resource_version += 1;
        self.resource_version
    }

    fn next_uid(&mut self) -> String {
        self.uid_counter += 1;
        let a = splitmix64(self.uid_counter);
        let b = splitmix64(a ^ 0x5bd1_e995);
        // UUID v4 shape: 8-4-4-4-12 hex digits, version nibble 4, variant bits 10.
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0x0fff,
            0x8000 | ((b >> 48) & 0x3fff),
            b & 0xffff_ffff_ffff
        )
    }

    fn next_name_suffix(&mut self) -> String {
        self.name_counter += 1;
        let mut h = splitmix64(self.name_counter ^ 0x9e37_79b9);
        let mut s = String::with_capacity(5);
        for _ in 0..5 {
            s.push(NAME_ALPHABET[(h % NAME_ALPHABET.len() as u64) as usize] as char);
            h /= NAME_ALPHABET.len() as u64;
        }
        s
    }

    /// Creates `obj` keeping its `deletionTimestamp` (and `deletionGracePeriodSeconds`): an
    /// object that is already terminating, as a scenario's initial cluster may list it.
    pub fn create_terminating(&mut self, obj: Object) -> Result<Object, StoreError> {
        let deletion = obj.metadata().deletion_timestamp.clone();
        let grace = obj.metadata().deletion_grace_period_seconds;
        let created = self.create(obj)?;
        if deletion.is_none() {
            return Ok(created);
        }
        let mut marked = created;
        marked.metadata_mut().deletion_timestamp = deletion;
        marked.metadata_mut().deletion_grace_period_seconds = grace;
        let r = marked.object_ref();
        Ok(self.put(r, marked, WatchEventKind::Modified))
    }

    /// Seconds of graceful termination `delete` gives `obj`, `None` when it goes at once
    /// (see the module docs).
    fn grace_seconds(&self, obj: &Object) -> Option<i64> {
        let has_finalizers = obj.metadata().finalizers.as_ref().is_some_and(|f| !f.is_empty());
        let pod_grace = match obj {
            Object::Pod(p) => {
                let spec = p.spec.as_ref();
                let node = spec.and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty());
                let node_exists =
                    node.is_some_and(|n| self.objects.contains_key(&ObjectRef::new(Kind::Node, "", n)));
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                let terminal = matches!(phase, Some("Succeeded" | "Failed"));
                let grace = spec.and_then(|s| s.termination_grace_period_seconds).unwrap_or(0);
                (node_exists && !terminal && grace > 0).then_some(grace)
            }
            _ => None,
        };
        match (pod_grace, has_finalizers) {
            (Some(g), _) => Some(g),
            (None, true) => Some(0),
            (None, false) => None,
        }
    }

    fn admit(&self, old: Option<&Object>, new: &Object) -> Result<(), StoreError> {
        for hook in &self.admission {
            hook.admit(self, old, new)
                .map_err(|message| StoreError::Forbidden { what: new.object_ref(), message })?;
        }
        Ok(())
    }

    /// Stores `obj` under `r` (insert or replace), keeping the indexes current, and logs
    /// the watch event.
    fn put(&mut self, r: ObjectRef, mut obj: Object, kind: WatchEventKind) -> Object {
        let rv = self.next_rv();
        obj.metadata_mut().resource_version = Some(rv.to_string());
        self.insert_indexed(r, obj.clone());
        self.log.push(WatchEvent { resource_version: rv, kind, object: obj.clone() });
        obj
    }

    /// Inserts or replaces `r` and keeps the uid and owner indexes current (no log entry).
    fn insert_indexed(&mut self, r: ObjectRef, obj: Object) {
        // A new version with the same uid and owners (every status write, most updates)
        // replaces the old one where it is: the indexes would be rebuilt as they are.
        if let Some(slot) = self.objects.get_mut(&r) {
            let (a, b) = (slot.metadata(), obj.metadata());
            let uid_indexed = a.uid.as_ref().is_none_or(|uid| self.by_uid.get(uid) == Some(&r));
            if a.uid == b.uid && uid_indexed && same_owner_uids(a, b) {
                *slot = obj;
                return;
            }
        }
        if let Some(old) = self.objects.remove(&r) {
            self.unindex(&r, &old);
        }
        for uid in owner_uids(&obj) {
            self.dependents.entry(uid).or_default().insert(r.clone());
        }
        if let Some(uid) = obj.metadata().uid.clone() {
            self.by_uid.insert(uid, r.clone());
        }
        self.objects.insert(r, obj);
    }

    /// Drops `obj` (stored under `r`) from the uid and owner indexes.
    fn unindex(&mut self, r: &ObjectRef, obj: &Object) {
        for uid in owner_uids(obj) {
            if let Some(set) = self.dependents.get_mut(&uid) {
                set.remove(r);
                if set.is_empty() {
                    self.dependents.remove(&uid);
                }
            }
        }
        if let Some(uid) = &obj.metadata().uid {
            if self.by_uid.get(uid) == Some(r) {
                self.by_uid.remove(uid);
            }
        }
    }

    /// Removes `r` and logs the deletion. Returns the uid of the removed object.
    fn remove(&mut self, r: &ObjectRef) -> Option<String> {
        let mut obj = self.objects.remove(r)?;
        self.unindex(r, &obj);
        let uid = obj.metadata().uid.clone();
        let rv = self.next_rv();
        obj.metadata_mut().resource_version = Some(rv.to_string());
        self.log.push(WatchEvent { resource_version: rv, kind: WatchEventKind::Deleted, object: obj });
        uid
    }

    /// True when some owner reference of `obj` points at an object that still exists.
    fn has_live_owner(&self, obj: &Object, namespace: &str) -> bool {
        obj.metadata().owner_references.iter().flatten().any(|o| {
            if !o.uid.is_empty() {
                return self.by_uid.contains_key(&o.uid);
            }
            // An owner reference without uid: fall back to kind + name in the namespace.
            Kind::from_type(&o.api_version, &o.kind).is_some_and(|k| {
                let ns = if k.namespaced() { namespace } else { "" };
                self.objects.contains_key(&ObjectRef::new(k, ns, o.name.clone()))
            })
        })
    }

    /// Background garbage collection after `uid` was deleted: deletes dependents left
    /// without any live owner, cascading.
    fn collect_garbage(&mut self, uid: String) {
        let mut queue = VecDeque::from([uid]);
        while let Some(owner) = queue.pop_front() {
            let Some(deps) = self.dependents.get(&owner).cloned() else { continue };
            for dep in deps {
                let orphaned = match self.objects.get(&dep) {
                    Some(obj) => !self.has_live_owner(obj, &dep.namespace),
                    None => false,
                };
                if orphaned {
                    if let Some(dep_uid) = self.remove(&dep) {
                        queue.push_back(dep_uid);
                    }
                }
            }
            // Nothing can point at a deleted uid any more (uids are never reused).
            self.dependents.remove(&owner);
        }
    }

    /// Shared tail of `update` and `merge_patch`: server-owned fields from `old`, status
    /// kept, admission, no-op detection, generation bump.
    fn replace_spec(&mut self, r: ObjectRef, old: Object, mut new: Object) -> Result<Object, StoreError> {
        if self.validate {
            // What the writer sent for the identity fields, before the server fills them.
            let meta = new.metadata();
            let mut errors = Vec::new();
            for (field, sent, kept) in [
                ("metadata.name", meta.name.as_deref(), old.metadata().name.as_deref()),
                ("metadata.namespace", meta.namespace.as_deref(), old.metadata().namespace.as_deref()),
                ("metadata.uid", meta.uid.as_deref(), old.metadata().uid.as_deref()),
            ] {
                if let Some(sent) = sent.filter(|s| !s.is_empty() && Some(*s) != kept) {
                    if field != "metadata.namespace" || r.kind.namespaced() {
                        errors.push(validation::FieldError {
                            field: field.to_string(),
                            message: format!("Invalid value: {}: field is immutable", validation::echo(sent)),
                        });
                    }
                }
            }
            keep_server_fields(old.metadata(), new.metadata_mut());
            copy_status(&old, &mut new);
            errors.extend(validation::validate_update(&old, &new));
            if !errors.is_empty() {
                return Err(StoreError::Invalid { what: r, message: validation::render(&errors) });
            }
        } else {
            keep_server_fields(old.metadata(), new.metadata_mut());
            copy_status(&old, &mut new);
        }
        self.admit(Some(&old), &new)?;
        if new == old {
            return Ok(old);
        }
        let terminating = new.metadata().deletion_timestamp.is_some();
        if terminating && new.metadata().finalizers.as_ref().is_none_or(Vec::is_empty) {
            // The last finalizer went: a terminating object is removed once its grace
            // period is over (a pod still running waits for the kubelet's final delete).
            let over = new.metadata().deletion_timestamp.as_ref().is_none_or(|t| t.0 <= self.now().0);
            let no_grace = self.grace_seconds(&new).is_none();
            if over || no_grace {
                let last = self.put(r.clone(), new, WatchEventKind::Modified);
                if let Some(uid) = self.remove(&r) {
                    self.collect_garbage(uid);
                }
                return Ok(last);
            }
        }
        if spec_json(&old) != spec_json(&new) {
            let generation = old.metadata().generation.unwrap_or(0) + 1;
            new.metadata_mut().generation = Some(generation);
        }
        Ok(self.put(r, new, WatchEventKind::Modified))
    }

    fn check_rv(r: &ObjectRef, given: Option<&String>, stored: &Object) -> Result<(), StoreError> {
        match given {
            Some(rv) if !rv.is_empty() && Some(rv) != stored.metadata().resource_version.as_ref() => {
                Err(StoreError::Conflict(r.clone()))
            }
            _ => Ok(()),
        }
    }
}

impl ClusterStore for EmbeddedCluster {
    fn now_ms(&self) -> u64 {
        self.now_ms
    }

    fn now(&self) -> Time {
        let ms = i64::try_from(self.now_ms).unwrap_or(i64::MAX).saturating_add(EPOCH_UNIX_MS);
        Time(Timestamp::from_millisecond(ms).unwrap_or(Timestamp::MAX))
    }

    fn resource_version(&self) -> u64 {
        self.resource_version
    }

    fn get(&self, r: &ObjectRef) -> Option<Object> {
        self.objects.get(r).cloned()
    }

    fn contains(&self, r: &ObjectRef) -> bool {
        self.objects.contains_key(r)
    }

    fn list(&self, kind: Kind) -> Vec<Object> {
        self.objects.of_kind(kind).cloned().collect()
    }

    fn create(&mut self, mut obj: Object) -> Result<Object, StoreError> {
        let kind = obj.kind();
        normalize_new(&mut obj);
        {
            let now = self.now();
            let needs_name = obj.metadata().name.as_deref().is_none_or(str::is_empty);
            let generate_name = obj.metadata().generate_name.clone().filter(|g| !g.is_empty());
            let meta = obj.metadata_mut();
            if needs_name && generate_name.is_none() {
                let r = ObjectRef::new(kind, meta.namespace.clone().unwrap_or_default(), "");
                return Err(missing_name(r));
            }
            meta.uid = None;
            meta.creation_timestamp = Some(now);
            meta.generation = Some(1);
            meta.deletion_timestamp = None;
            meta.deletion_grace_period_seconds = None;
            meta.resource_version = None;
        }
        if let Some(prefix) = obj
            .metadata()
            .generate_name
            .clone()
            .filter(|_| obj.metadata().name.as_deref().is_none_or(str::is_empty))
        {
            // Kubernetes retries a colliding generated name; so do we, deterministically.
            let mut attempts = 0;
            loop {
                let name = format!("{prefix}{}", self.next_name_suffix());
                let candidate = ObjectRef::new(kind, obj.object_ref().namespace, name.clone());
                if !self.objects.contains_key(&candidate) || attempts >= 16 {
                    obj.metadata_mut().name = Some(name);
                    break;
                }
                attempts += 1;
            }
        }
        let r = obj.object_ref();
        if self.objects.contains_key(&r) {
            return Err(StoreError::AlreadyExists(r));
        }
        if let Some(pod) = obj.as_pod_mut() {
            let status = pod.status.get_or_insert_with(Default::default);
            if status.phase.as_deref().is_none_or(str::is_empty) {
                status.phase = Some("Pending".to_string());
            }
        }
        for hook in &self.admission {
            hook.mutate_on_create(&mut obj);
        }
        self.validate_create(&obj)?;
        self.admit(None, &obj)?;
        let uid = self.next_uid();
        obj.metadata_mut().uid = Some(uid);
        Ok(self.put(r, obj, WatchEventKind::Added))
    }

    fn update(&mut self, obj: Object) -> Result<Object, StoreError> {
        let r = obj.object_ref();
        let old = self.objects.get(&r).cloned().ok_or_else(|| StoreError::NotFound(r.clone()))?;
        Self::check_rv(&r, obj.metadata().resource_version.as_ref(), &old)?;
        self.replace_spec(r, old, obj)
    }

    fn update_status(&mut self, obj: Object) -> Result<Object, StoreError> {
        let r = obj.object_ref();
        // A pod read from the store with only its status changed (a scheduler's condition
        // write): it is the new version as it is, without copying the stored one. Equal
        // metadata includes the resourceVersion, so the check below would pass.
        if let (Object::Pod(given), Some(Object::Pod(stored))) = (&obj, self.objects.get(&r)) {
            if given.status != stored.status && given.metadata == stored.metadata && given.spec == stored.spec
            {
                return Ok(self.put(r, obj, WatchEventKind::Modified));
            }
        }
        let old = self.objects.get(&r).cloned().ok_or_else(|| StoreError::NotFound(r.clone()))?;
        Self::check_rv(&r, obj.metadata().resource_version.as_ref(), &old)?;
        let mut new = old.clone();
        match copy_status(&obj, &mut new) {
            None => {
                let message = format!("{} has no status subresource", r.kind);
                Err(StoreError::Invalid { what: r, message })
            }
            Some(false) => Ok(old),
            Some(true) => Ok(self.put(r, new, WatchEventKind::Modified)),
        }
    }

    fn status_write_changes_only_status(&self) -> bool {
        // `update_status` stores the given object when only its status differs, else the
        // stored one with the given status copied in (`copy_status`).
        true
    }

    fn update_pod_status_with(
        &mut self,
        r: &ObjectRef,
        write: &mut dyn FnMut(&mut Pod) -> bool,
    ) -> Result<Option<Object>, StoreError> {
        let Some(Object::Pod(stored)) = self.objects.get_mut(r) else {
            return Err(StoreError::NotFound(r.clone()));
        };
        #[cfg(debug_assertions)]
        let before = (**stored).clone();
        // In place when the store holds the only reference (the watch log was compacted
        // past the last version and no reader kept it); a copy otherwise.
        let pod = Arc::make_mut(stored);
        if !write(pod) {
            return Ok(None);
        }
        #[cfg(debug_assertions)]
        {
            let mut after = pod.clone();
            after.status.clone_from(&before.status);
            debug_assert!(
                after == before,
                "a status write through update_pod_status_with changed only the status"
            );
        }
        let rv = self.resource_version + 1;
        self.resource_version = rv;
        pod.metadata.resource_version = Some(rv.to_string());
        let obj = Object::Pod(stored.clone());
        self.log.push(WatchEvent {
            resource_version: rv,
            kind: WatchEventKind::Modified,
            object: obj.clone(),
        });
        Ok(Some(obj))
    }

    fn merge_patch(&mut self, r: &ObjectRef, patch: &Value) -> Result<Object, StoreError> {
        let old = self.objects.get(r).cloned().ok_or_else(|| StoreError::NotFound(r.clone()))?;
        let invalid = |message: String| StoreError::Invalid { what: r.clone(), message };
        let Value::Object(fields) = patch else {
            return Err(invalid("a merge patch must be a JSON object".to_string()));
        };
        for (key, expected) in [("apiVersion", r.kind.api_version()), ("kind", r.kind.name())] {
            match fields.get(key) {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) if s == expected => {}
                Some(other) => {
                    return Err(invalid(format!("{key}: Invalid value: {other}: must be {expected}")))
                }
            }
        }
        let given_rv = fields
            .get("metadata")
            .and_then(|m| m.get("resourceVersion"))
            .and_then(Value::as_str)
            .map(str::to_string);
        Self::check_rv(r, given_rv.as_ref(), &old)?;
        let mut doc = old.to_json();
        let mut spec_patch = fields.clone();
        for key in ["apiVersion", "kind", "status"] {
            spec_patch.remove(key);
        }
        merge_json(&mut doc, &Value::Object(spec_patch));
        let new = Object::from_json(r.kind, doc).map_err(|e| invalid(e.to_string()))?;
        self.replace_spec(r.clone(), old, new)
    }

    fn delete(&mut self, r: &ObjectRef) -> Result<(), StoreError> {
        let obj = self.objects.get(r).cloned().ok_or_else(|| StoreError::NotFound(r.clone()))?;
        let has_finalizers = obj.metadata().finalizers.as_ref().is_some_and(|f| !f.is_empty());
        if let Some(deadline) = obj.metadata().deletion_timestamp.clone() {
            // Already terminating: the final delete once the grace period is over (or the
            // node is gone); finalizers still hold it.
            let over = deadline.0 <= self.now().0 || self.grace_seconds(&obj).is_none();
            if has_finalizers || !over {
                return Ok(());
            }
        } else if let Some(grace) = self.grace_seconds(&obj) {
            let now_ms = i64::try_from(self.now_ms).unwrap_or(i64::MAX);
            let at = now_ms.saturating_add(grace.saturating_mul(1000)).saturating_add(EPOCH_UNIX_MS);
            let mut marked = obj;
            marked.metadata_mut().deletion_timestamp =
                Some(Time(Timestamp::from_millisecond(at).unwrap_or(Timestamp::MAX)));
            marked.metadata_mut().deletion_grace_period_seconds = Some(grace);
            if grace > 0 || has_finalizers {
                self.put(r.clone(), marked, WatchEventKind::Modified);
                return Ok(());
            }
        }
        match self.remove(r) {
            None => Err(StoreError::NotFound(r.clone())),
            Some(uid) => {
                self.collect_garbage(uid);
                Ok(())
            }
        }
    }

    fn bind(&mut self, namespace: &str, name: &str, uid: &str, node: &str) -> Result<(), StoreError> {
        let r = ObjectRef::new(Kind::Pod, namespace, name);
        let Some(Object::Pod(pod)) = self.objects.get(&r) else {
            return Err(StoreError::NotFound(r));
        };
        if !uid.is_empty() && pod.metadata.uid.as_deref() != Some(uid) {
            return Err(StoreError::Conflict(r));
        }
        if pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty()) {
            return Err(StoreError::Conflict(r));
        }
        let node_ref = ObjectRef::new(Kind::Node, "", node);
        if !self.objects.contains_key(&node_ref) {
            return Err(StoreError::NotFound(node_ref));
        }
        let mut pod = (**pod).clone();
        pod.spec.get_or_insert_with(Default::default).node_name = Some(node.to_string());
        let now = self.now();
        let status = pod.status.get_or_insert_with(Default::default);
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        let scheduled = PodCondition {
            type_: "PodScheduled".to_string(),
            status: "True".to_string(),
            last_transition_time: Some(now),
            ..Default::default()
        };
        match conditions.iter_mut().find(|c| c.type_ == "PodScheduled") {
            Some(c) => *c = scheduled,
            None => conditions.push(scheduled),
        }
        self.put(r, Object::Pod(pod.into()), WatchEventKind::Modified);
        Ok(())
    }

    fn record_event(&mut self, event: EventRecord) {
        if self.keep_events {
            self.events.push(event);
        }
    }

    fn keeps_events(&self) -> bool {
        self.keep_events
    }

    fn events(&self) -> Vec<EventRecord> {
        self.events.clone()
    }

    fn watch_since(&self, after: u64) -> Vec<WatchEvent> {
        match self.log_since(after) {
            Ok(events) => events.to_vec(),
            Err(_) => self.watch_from_state(after),
        }
    }

    fn watch_kinds_since(&self, after: u64, kinds: &[Kind]) -> Vec<WatchEvent> {
        match self.log_since(after) {
            Ok(events) => events.iter().filter(|e| kinds.contains(&e.object.kind())).cloned().collect(),
            Err(_) => {
                let mut events = self.watch_from_state(after);
                events.retain(|e| kinds.contains(&e.object.kind()));
                events
            }
        }
    }

    fn changed_since(&self, after: u64, kinds: &[Kind]) -> bool {
        match self.log_since(after) {
            Ok(events) => events.iter().any(|e| kinds.contains(&e.object.kind())),
            Err(_) => self.watch_from_state(after).iter().any(|e| kinds.contains(&e.object.kind())),
        }
    }

    fn visit_events_since(&self, after: u64, f: &mut dyn FnMut(&WatchEvent)) {
        match self.log_since(after) {
            Ok(events) => events.iter().for_each(f),
            Err(_) => self.watch_from_state(after).iter().for_each(f),
        }
    }

    fn visit(&self, kind: Kind, f: &mut dyn FnMut(&Object)) {
        for obj in self.objects.of_kind(kind) {
            f(obj);
        }
    }
}

/// What `create` does to any new object before checking it: the namespace defaults to
/// `default` (cluster-scoped kinds have none), and a pod starts `Pending`.
fn normalize_new(obj: &mut Object) {
    let namespaced = obj.kind().namespaced();
    let meta = obj.metadata_mut();
    if namespaced {
        if meta.namespace.as_deref().is_none_or(str::is_empty) {
            meta.namespace = Some("default".to_string());
        }
    } else {
        meta.namespace = None;
    }
    if let Some(pod) = obj.as_pod_mut() {
        let status = pod.status.get_or_insert_with(Default::default);
        if status.phase.as_deref().is_none_or(str::is_empty) {
            status.phase = Some("Pending".to_string());
        }
    }
}

fn missing_name(r: ObjectRef) -> StoreError {
    StoreError::Invalid {
        what: r,
        message: "metadata.name: Required value: name or generateName is required".to_string(),
    }
}

/// SplitMix64: a small, well-mixing deterministic hash of a counter.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The owners' uids the `dependents` index files an object under (references without a
/// uid are left out), in reference order.
fn indexed_owner_uids(m: &ObjectMeta) -> impl Iterator<Item = &str> {
    m.owner_references.iter().flatten().map(|o| o.uid.as_str()).filter(|u| !u.is_empty())
}

/// Whether two versions are filed under the same owners, in the same order.
fn same_owner_uids(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    indexed_owner_uids(a).eq(indexed_owner_uids(b))
}

fn owner_uids(obj: &Object) -> Vec<String> {
    indexed_owner_uids(obj.metadata()).map(str::to_string).collect()
}

/// Copies the fields the server owns from the stored metadata onto an incoming write.
fn keep_server_fields(old: &ObjectMeta, new: &mut ObjectMeta) {
    new.name = old.name.clone();
    new.namespace = old.namespace.clone();
    new.uid = old.uid.clone();
    new.creation_timestamp = old.creation_timestamp.clone();
    new.deletion_timestamp = old.deletion_timestamp.clone();
    new.deletion_grace_period_seconds = old.deletion_grace_period_seconds;
    new.generation = old.generation;
    new.resource_version = old.resource_version.clone();
    new.generate_name = old.generate_name.clone();
}

/// Copies `from`'s status onto `to` (same kind). `None`: the kind has no status
/// subresource; otherwise whether the status changed (shared objects are copied only then).
fn copy_status(from: &Object, to: &mut Object) -> Option<bool> {
    macro_rules! copy {
        ($a:expr, $b:expr) => {
            copy!($a, $b, $b)
        };
        // `$target`: where to write, evaluated only when the status differs.
        ($a:expr, $b:expr, $target:expr) => {{
            let changed = $a.status != $b.status;
            if changed {
                $target.status = $a.status.clone();
            }
            changed
        }};
    }
    Some(match (from, to) {
        (Object::Node(a), Object::Node(b)) => copy!(a, b, std::sync::Arc::make_mut(b)),
        (Object::Pod(a), Object::Pod(b)) => copy!(a, b, std::sync::Arc::make_mut(b)),
        (Object::PodGroup(a), Object::PodGroup(b)) => copy!(a, b),
        (Object::Job(a), Object::Job(b)) => copy!(a, b),
        (Object::CronJob(a), Object::CronJob(b)) => copy!(a, b),
        (Object::PodDisruptionBudget(a), Object::PodDisruptionBudget(b)) => copy!(a, b),
        (Object::Namespace(a), Object::Namespace(b)) => copy!(a, b),
        (Object::ResourceClaim(a), Object::ResourceClaim(b)) => copy!(a, b),
        (Object::PersistentVolumeClaim(a), Object::PersistentVolumeClaim(b)) => copy!(a, b),
        (Object::PersistentVolume(a), Object::PersistentVolume(b)) => copy!(a, b),
        _ => return None,
    })
}

/// Everything but metadata and status: what `generation` tracks.
fn spec_json(obj: &Object) -> Value {
    let mut v = obj.to_json();
    if let Value::Object(m) = &mut v {
        m.remove("metadata");
        m.remove("status");
    }
    v
}

/// RFC 7386 JSON merge patch: objects merge key by key, `null` removes a key, anything
/// else (including arrays) replaces the target.
pub fn merge_json(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(fields) => {
            if !target.is_object() {
                *target = Value::Object(serde_json::Map::new());
            }
            if let Value::Object(t) = target {
                for (key, value) in fields {
                    if value.is_null() {
                        t.remove(key);
                    } else {
                        merge_json(t.entry(key.clone()).or_insert(Value::Null), value);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::batch::v1::Job;
    use placer_api::k8s::api::core::v1::{Node, Pod, PodSpec, PodStatus};
    use placer_api::k8s::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use serde_json::json;

    fn pod(ns: &str, name: &str) -> Object {
        Object::pod(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                ..Default::default()
            },
            spec: Some(PodSpec::default()),
            status: None,
        })
    }

    fn node(name: &str) -> Object {
        Object::node(Node {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            ..Default::default()
        })
    }

    fn job(name: &str) -> Object {
        Object::Job(Box::new(Job {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            ..Default::default()
        }))
    }

    fn owned_by(mut obj: Object, owners: &[&Object]) -> Object {
        obj.metadata_mut().owner_references = Some(
            owners
                .iter()
                .map(|o| OwnerReference {
                    api_version: o.kind().api_version().into(),
                    kind: o.kind().name().into(),
                    name: o.metadata().name.clone().unwrap_or_default(),
                    uid: o.metadata().uid.clone().unwrap_or_default(),
                    ..Default::default()
                })
                .collect(),
        );
        obj
    }

    fn pod_ref(name: &str) -> ObjectRef {
        ObjectRef::new(Kind::Pod, "default", name)
    }

    fn rv(obj: &Object) -> u64 {
        obj.metadata().resource_version.as_deref().and_then(|s| s.parse().ok()).unwrap_or(0)
    }

    struct DenyLabel(&'static str);
    impl Admission for DenyLabel {
        fn admit(&self, _: &dyn ClusterStore, _: Option<&Object>, new: &Object) -> Result<(), String> {
            match new.metadata().labels.as_ref().and_then(|l| l.get(self.0)) {
                Some(_) => Err(format!("label {} is not allowed", self.0)),
                None => Ok(()),
            }
        }
    }

    #[test]
    fn create_fills_server_fields_deterministically() {
        let mut a = EmbeddedCluster::new();
        let mut b = EmbeddedCluster::new();
        let pa = a.create(pod("default", "p")).unwrap();
        let pb = b.create(pod("default", "p")).unwrap();
        assert_eq!(pa, pb, "two fresh stores hand out the same uid and timestamps");
        let m = pa.metadata();
        assert_eq!(m.resource_version.as_deref(), Some("1"));
        assert_eq!(m.generation, Some(1));
        assert_eq!(m.uid.as_deref().map(str::len), Some(36));
        assert_eq!(
            m.creation_timestamp.as_ref().map(|t| t.0.to_string()).as_deref(),
            Some("2026-01-01T00:00:00Z")
        );
        let phase = pa.as_pod().and_then(|p| p.status.as_ref()).and_then(|s| s.phase.clone());
        assert_eq!(phase.as_deref(), Some("Pending"), "a created pod starts Pending");
    }

    fn with_grace(mut obj: Object, node: Option<&str>, grace: Option<i64>, finalizer: bool) -> Object {
        if let Some(p) = obj.as_pod_mut() {
            let spec = p.spec.get_or_insert_with(Default::default);
            spec.node_name = node.map(str::to_string);
            spec.termination_grace_period_seconds = grace;
            if finalizer {
                p.metadata.finalizers = Some(vec!["example.com/f".to_string()]);
            }
        }
        obj
    }

    #[test]
    fn graceful_deletion_marks_then_removes() {
        let mut c = EmbeddedCluster::new();
        c.create(node("n1")).unwrap();
        c.create(with_grace(pod("default", "graceful"), Some("n1"), Some(30), false)).unwrap();
        c.create(with_grace(pod("default", "unbound"), None, Some(30), false)).unwrap();
        c.create(with_grace(pod("default", "no-grace"), Some("n1"), None, false)).unwrap();
        c.create(with_grace(pod("default", "final"), None, None, true)).unwrap();
        // A bound pod with a grace period is only marked; an early second delete changes nothing.
        c.delete(&pod_ref("graceful")).unwrap();
        let marked = c.get(&pod_ref("graceful")).unwrap();
        assert_eq!(
            marked.metadata().deletion_timestamp.as_ref().map(|t| t.0.to_string()).as_deref(),
            Some("2026-01-01T00:00:30Z")
        );
        assert_eq!(marked.metadata().deletion_grace_period_seconds, Some(30));
        c.set_now_ms(10_000);
        c.delete(&pod_ref("graceful")).unwrap();
        assert!(c.get(&pod_ref("graceful")).is_some());
        c.set_now_ms(30_000);
        c.delete(&pod_ref("graceful")).unwrap();
        assert!(c.get(&pod_ref("graceful")).is_none(), "the final delete after the grace period");
        // Unbound pods and pods without an explicit grace period go at once.
        c.delete(&pod_ref("unbound")).unwrap();
        c.delete(&pod_ref("no-grace")).unwrap();
        assert!(c.get(&pod_ref("unbound")).is_none() && c.get(&pod_ref("no-grace")).is_none());
        // A finalizer holds the object until it is removed.
        c.delete(&pod_ref("final")).unwrap();
        c.delete(&pod_ref("final")).unwrap();
        assert!(c.get(&pod_ref("final")).unwrap().metadata().deletion_timestamp.is_some());
        let patch = serde_json::json!({"metadata": {"finalizers": null}});
        c.merge_patch(&pod_ref("final"), &patch).unwrap();
        assert!(c.get(&pod_ref("final")).is_none());
    }

    #[test]
    fn terminating_pods_go_at_once_when_their_node_is_gone_and_can_be_created_terminating() {
        let mut c = EmbeddedCluster::new();
        c.create(node("n1")).unwrap();
        c.create(with_grace(pod("default", "a"), Some("n1"), Some(30), false)).unwrap();
        c.delete(&pod_ref("a")).unwrap();
        c.delete(&ObjectRef::new(Kind::Node, "", "n1")).unwrap();
        c.delete(&pod_ref("a")).unwrap();
        assert!(c.get(&pod_ref("a")).is_none(), "pod garbage collection of a deleted node");
        let mut t = pod("default", "t");
        t.metadata_mut().deletion_timestamp = Some(c.now());
        let created = c.create_terminating(t).unwrap();
        assert!(created.metadata().deletion_timestamp.is_some());
        assert!(c.get(&pod_ref("t")).unwrap().metadata().deletion_timestamp.is_some());
    }

    #[test]
    fn mutating_admission_runs_on_create() {
        struct Label;
        impl Admission for Label {
            fn admit(&self, _: &dyn ClusterStore, _: Option<&Object>, _: &Object) -> Result<(), String> {
                Ok(())
            }
            fn mutate_on_create(&self, obj: &mut Object) {
                obj.metadata_mut().labels = Some([("added".to_string(), "yes".to_string())].into());
            }
        }
        let mut c = EmbeddedCluster::new();
        c.add_admission(Box::new(Label));
        let created = c.create(pod("default", "p")).unwrap();
        assert_eq!(
            created.metadata().labels.as_ref().and_then(|l| l.get("added")).map(String::as_str),
            Some("yes")
        );
    }

    #[test]
    fn uids_are_unique() {
        let mut c = EmbeddedCluster::new();
        let uids: BTreeSet<_> = (0..100)
            .map(|i| c.create(pod("default", &format!("p{i}"))).unwrap().metadata().uid.clone())
            .collect();
        assert_eq!(uids.len(), 100);
    }

    #[test]
    fn namespace_defaults_and_cluster_scoped_kinds_have_none() {
        let mut c = EmbeddedCluster::new();
        let mut p = pod("x", "p");
        p.metadata_mut().namespace = None;
        assert_eq!(c.create(p).unwrap().metadata().namespace.as_deref(), Some("default"));
        let mut n = node("n1");
        n.metadata_mut().namespace = Some("ignored".into());
        assert_eq!(c.create(n).unwrap().metadata().namespace, None);
        assert!(c.get(&ObjectRef::new(Kind::Node, "", "n1")).is_some());
    }

    #[test]
    fn create_rejects_duplicates_and_missing_names() {
        let mut c = EmbeddedCluster::new();
        c.create(pod("default", "p")).unwrap();
        assert_eq!(c.create(pod("default", "p")), Err(StoreError::AlreadyExists(pod_ref("p"))));
        assert!(c.create(pod("other", "p")).is_ok(), "names are per namespace");
        let err = c.create(pod("default", "")).unwrap_err();
        assert!(matches!(err, StoreError::Invalid { .. }), "{err}");
    }

    #[test]
    fn generate_name_gives_kubernetes_shaped_deterministic_names() {
        let mut c = EmbeddedCluster::new();
        let mut names = Vec::new();
        for _ in 0..3 {
            let mut p = pod("default", "");
            p.metadata_mut().generate_name = Some("train-".into());
            names.push(c.create(p).unwrap().metadata().name.clone().unwrap());
        }
        for n in &names {
            assert_eq!(n.len(), "train-".len() + 5, "{n}");
            assert!(n.starts_with("train-"));
            assert!(n["train-".len()..].bytes().all(|b| NAME_ALPHABET.contains(&b)), "{n}");
        }
        assert_eq!(names.iter().collect::<BTreeSet<_>>().len(), 3);
        let mut again = EmbeddedCluster::new();
        let mut p = pod("default", "");
        p.metadata_mut().generate_name = Some("train-".into());
        assert_eq!(again.create(p).unwrap().metadata().name.as_ref(), Some(&names[0]));
    }

    #[test]
    fn list_is_sorted_by_namespace_then_name_and_per_kind() {
        let mut c = EmbeddedCluster::new();
        for (ns, name) in [("b", "a"), ("a", "z"), ("a", "b")] {
            c.create(pod(ns, name)).unwrap();
        }
        c.create(node("n")).unwrap();
        let got: Vec<_> = c.list(Kind::Pod).iter().map(|o| o.object_ref().to_string()).collect();
        assert_eq!(got, ["Pod a/b", "Pod a/z", "Pod b/a"]);
        assert_eq!(c.list(Kind::Node).len(), 1);
        assert!(c.list(Kind::Job).is_empty());
    }

    #[test]
    fn resource_versions_increase_and_watch_replays_in_order() {
        let mut c = EmbeddedCluster::new();
        c.create(pod("default", "a")).unwrap();
        c.create(pod("default", "b")).unwrap();
        c.delete(&pod_ref("a")).unwrap();
        assert_eq!(c.resource_version(), 3);
        let all = c.watch_since(0);
        let kinds: Vec<_> = all.iter().map(|e| (e.resource_version, e.kind)).collect();
        assert_eq!(
            kinds,
            [(1, WatchEventKind::Added), (2, WatchEventKind::Added), (3, WatchEventKind::Deleted)]
        );
        assert_eq!(c.watch_since(2).len(), 1);
        assert!(c.watch_since(3).is_empty());
        assert_eq!(rv(&all[2].object), 3, "a deleted object carries the deletion's resourceVersion");
    }

    #[test]
    fn an_object_stays_small_inline() {
        // Nodes and pods are counted by the ten thousand in the map and the log; a variant
        // of several KiB inline made each of them that large (3,472 bytes before the
        // largest kinds were boxed).
        assert!(std::mem::size_of::<Object>() <= 1024, "Object is {} bytes", std::mem::size_of::<Object>());
    }

    #[test]
    fn compaction_gives_back_the_memory_of_the_backlog() {
        let mut c = EmbeddedCluster::new();
        for i in 0..3000 {
            c.create(pod("default", &format!("p{i}"))).unwrap();
        }
        assert!(c.log.capacity() >= 3000);
        c.compact_log(2990);
        assert_eq!(c.watch_log_len(), 10);
        assert!(c.log.capacity() <= 1024, "capacity {} kept after compaction", c.log.capacity());
        let tail: Vec<u64> = c.log_since(2990).unwrap().iter().map(|e| e.resource_version).collect();
        assert_eq!(tail, (2991..=3000).collect::<Vec<u64>>());
    }

    #[test]
    fn compaction_forgets_old_log_entries_and_says_so() {
        let mut c = EmbeddedCluster::new();
        for name in ["a", "b", "c"] {
            c.create(pod("default", name)).unwrap();
        }
        c.delete(&pod_ref("a")).unwrap();
        c.compact_log(2);
        assert_eq!(c.log_floor(), 2);
        assert_eq!(c.watch_log_len(), 2);
        assert_eq!(c.log_since(1).unwrap_err(), LogCompacted { floor: 2 });
        let tail: Vec<u64> = c.log_since(2).unwrap().iter().map(|e| e.resource_version).collect();
        assert_eq!(tail, [3, 4]);
        c.compact_log(1);
        assert_eq!(c.log_floor(), 2, "the floor never moves back");
        c.compact_log(99);
        assert_eq!((c.log_floor(), c.watch_log_len()), (4, 0), "capped at the current version");
        assert!(c.log_since(4).unwrap().is_empty());
    }

    #[test]
    fn watch_since_before_the_floor_starts_from_the_surviving_objects() {
        let mut c = EmbeddedCluster::new();
        for name in ["a", "b", "c", "d"] {
            c.create(pod("default", name)).unwrap();
        }
        c.delete(&pod_ref("a")).unwrap(); // rv 5, compacted: lost for old readers
        c.compact_log(5);
        let mut b = c.get(&pod_ref("b")).unwrap();
        b.metadata_mut().labels = Some([("x".to_string(), "1".to_string())].into());
        c.update(b).unwrap(); // rv 6
        c.delete(&pod_ref("c")).unwrap(); // rv 7
        let seen: Vec<(u64, WatchEventKind, String)> = c
            .watch_since(1)
            .into_iter()
            .map(|e| (e.resource_version, e.kind, e.object.object_ref().name))
            .collect();
        use WatchEventKind::{Added, Deleted};
        assert_eq!(
            seen,
            [(4, Added, "d".into()), (6, Added, "b".into()), (7, Deleted, "c".into())],
            "objects unchanged since the reader's version stay out; b is new to the reader"
        );
        assert_eq!(c.watch_since(5).len(), 2, "from the floor on, the log answers");
    }

    #[test]
    fn update_keeps_status_and_server_fields_and_bumps_generation_on_spec_change() {
        let mut c = EmbeddedCluster::new();
        let mut p = pod("default", "p");
        if let Some(pp) = p.as_pod_mut() {
            pp.status = Some(PodStatus { phase: Some("Running".into()), ..Default::default() });
        }
        let created = c.create(p).unwrap();
        let mut changed = created.clone();
        if let Some(pp) = changed.as_pod_mut() {
            pp.status = Some(PodStatus { phase: Some("Failed".into()), ..Default::default() });
            pp.spec.as_mut().unwrap().priority = Some(7);
            pp.metadata.uid = Some("forged".into());
        }
        let updated = c.update(changed).unwrap();
        let up = updated.as_pod().unwrap();
        assert_eq!(up.status.as_ref().unwrap().phase.as_deref(), Some("Running"), "update keeps status");
        assert_eq!(up.spec.as_ref().unwrap().priority, Some(7));
        assert_eq!(up.metadata.uid, created.metadata().uid, "uid is server-owned");
        assert_eq!(up.metadata.generation, Some(2));
        assert_eq!(rv(&updated), 2);
    }

    #[test]
    fn label_only_update_keeps_generation() {
        let mut c = EmbeddedCluster::new();
        let mut p = c.create(pod("default", "p")).unwrap();
        p.metadata_mut().labels = Some([("a".to_string(), "b".to_string())].into());
        let updated = c.update(p).unwrap();
        assert_eq!(updated.metadata().generation, Some(1));
        assert_eq!(rv(&updated), 2);
    }

    #[test]
    fn writes_that_change_nothing_are_no_ops() {
        let mut c = EmbeddedCluster::new();
        let p = c.create(pod("default", "p")).unwrap();
        c.update(p.clone()).unwrap();
        c.update_status(p).unwrap();
        c.merge_patch(&pod_ref("p"), &json!({"metadata": {"name": "p"}})).unwrap();
        assert_eq!(c.resource_version(), 1);
        assert_eq!(c.watch_since(0).len(), 1);
    }

    #[test]
    fn a_pod_status_write_of_a_read_copy_is_stored_and_watched_like_any() {
        let mut c = EmbeddedCluster::new();
        let created = c.create(pod("default", "p")).unwrap();
        let rv = created.metadata().resource_version.clone();
        let mut write = created.clone();
        if let Some(pp) = write.as_pod_mut() {
            pp.status = Some(PodStatus { phase: Some("Running".into()), ..Default::default() });
        }
        let before = c.resource_version();
        let stored = c.update_status(write.clone()).unwrap();
        assert_ne!(stored.metadata().resource_version, rv, "a new resourceVersion");
        let got = c.get(&stored.object_ref()).unwrap();
        assert_eq!(got, stored);
        let sp = got.as_pod().unwrap();
        assert_eq!(sp.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
        assert_eq!(sp.spec, created.as_pod().unwrap().spec);
        let events = c.watch_since(before);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].object, stored);
        // The same write again (now stale) is a conflict; the same status is no write.
        assert!(matches!(c.update_status(write), Err(StoreError::Conflict(_))));
        let again = c.update_status(stored.clone()).unwrap();
        assert_eq!(again.metadata().resource_version, stored.metadata().resource_version);
    }

    #[test]
    fn update_status_changes_only_status() {
        let mut c = EmbeddedCluster::new();
        let created = c.create(pod("default", "p")).unwrap();
        let mut write = created.clone();
        if let Some(pp) = write.as_pod_mut() {
            pp.status = Some(PodStatus { phase: Some("Running".into()), ..Default::default() });
            pp.metadata.labels = Some([("ignored".to_string(), "x".to_string())].into());
            pp.spec.as_mut().unwrap().priority = Some(9);
        }
        let stored = c.update_status(write).unwrap();
        let sp = stored.as_pod().unwrap();
        assert_eq!(sp.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
        assert_eq!(sp.metadata.labels, None, "metadata is not changed through status");
        assert_eq!(sp.spec.as_ref().unwrap().priority, None, "spec is not changed through status");
        assert_eq!(sp.metadata.generation, Some(1));
    }

    #[test]
    fn a_pod_status_write_is_in_place_when_the_store_alone_holds_the_pod() {
        let mut c = EmbeddedCluster::new();
        c.create(pod("default", "p")).unwrap();
        let r = pod_ref("p");
        let phase = |c: &EmbeddedCluster| match c.get(&r) {
            Some(Object::Pod(p)) => p.status.as_ref().and_then(|s| s.phase.clone()),
            _ => None,
        };
        let set = |phase: &'static str| {
            move |p: &mut Pod| {
                p.status.get_or_insert_with(Default::default).phase = Some(phase.to_string());
                true
            }
        };
        // The log holds the created version: the write copies it, and the log keeps both.
        let Some(Object::Pod(created)) = c.get(&r) else { panic!() };
        let written = c.update_pod_status_with(&r, &mut set("Running")).unwrap().expect("written");
        let Object::Pod(written) = written else { panic!() };
        assert!(!Arc::ptr_eq(&created, &written));
        let created_phase = created.status.as_ref().and_then(|s| s.phase.as_deref());
        assert_ne!(created_phase, Some("Running"), "the version a reader holds is not changed");
        assert_eq!(phase(&c), Some("Running".to_string()));
        let rv = written.metadata.resource_version.clone();
        assert_eq!(rv, Some(c.resource_version().to_string()));
        drop((created, written));

        // Nobody else holds it (log compacted): the stored version is written in place,
        // with a new resourceVersion and a watch event.
        let floor = c.resource_version();
        c.compact_log(floor);
        let Some(Object::Pod(before)) = c.get(&r) else { panic!() };
        let address = Arc::as_ptr(&before);
        drop(before);
        let written = c.update_pod_status_with(&r, &mut set("Failed")).unwrap().expect("written");
        assert_eq!(phase(&c), Some("Failed".to_string()));
        let Object::Pod(written) = written else { panic!() };
        assert_eq!(Arc::as_ptr(&written), address);
        assert_ne!(written.metadata.resource_version, rv);
        let log = c.log_since(floor).unwrap();
        assert_eq!(log.len(), 1);
        assert_eq!(log[0].kind, WatchEventKind::Modified);
        assert_eq!(log[0].object, Object::Pod(written));

        // A write that changes nothing is no write; a missing pod is NotFound.
        let version = c.resource_version();
        assert_eq!(c.update_pod_status_with(&r, &mut |_| false).unwrap(), None);
        assert_eq!(c.resource_version(), version);
        assert_eq!(
            c.update_pod_status_with(&pod_ref("gone"), &mut |_| true),
            Err(StoreError::NotFound(pod_ref("gone")))
        );
    }

    #[test]
    fn status_write_on_a_kind_without_status_is_invalid() {
        let mut c = EmbeddedCluster::new();
        let pc = Object::PriorityClass(placer_api::k8s::api::scheduling::v1::PriorityClass {
            metadata: ObjectMeta { name: Some("high".into()), ..Default::default() },
            value: Some(100),
            ..Default::default()
        });
        let stored = c.create(pc).unwrap();
        assert!(matches!(c.update_status(stored), Err(StoreError::Invalid { .. })));
    }

    #[test]
    fn stale_resource_version_is_a_conflict_and_empty_means_unconditional() {
        let mut c = EmbeddedCluster::new();
        let v1 = c.create(pod("default", "p")).unwrap();
        let mut v2 = v1.clone();
        v2.metadata_mut().labels = Some([("a".to_string(), "1".to_string())].into());
        c.update(v2).unwrap();
        let mut stale = v1.clone();
        stale.metadata_mut().labels = Some([("a".to_string(), "2".to_string())].into());
        assert_eq!(c.update(stale.clone()), Err(StoreError::Conflict(pod_ref("p"))));
        assert_eq!(c.update_status(stale.clone()), Err(StoreError::Conflict(pod_ref("p"))));
        stale.metadata_mut().resource_version = None;
        assert!(c.update(stale).is_ok());
        let patch = json!({"metadata": {"resourceVersion": "1", "labels": {"a": "3"}}});
        assert_eq!(c.merge_patch(&pod_ref("p"), &patch), Err(StoreError::Conflict(pod_ref("p"))));
    }

    #[test]
    fn updating_a_missing_object_is_not_found() {
        let mut c = EmbeddedCluster::new();
        assert_eq!(c.update(pod("default", "p")), Err(StoreError::NotFound(pod_ref("p"))));
        assert_eq!(c.update_status(pod("default", "p")), Err(StoreError::NotFound(pod_ref("p"))));
        assert_eq!(c.merge_patch(&pod_ref("p"), &json!({})), Err(StoreError::NotFound(pod_ref("p"))));
        assert_eq!(c.delete(&pod_ref("p")), Err(StoreError::NotFound(pod_ref("p"))));
    }

    #[test]
    fn merge_patch_follows_rfc_7386() {
        let mut c = EmbeddedCluster::new();
        let mut j = job("train");
        if let Object::Job(jj) = &mut j {
            jj.metadata.labels = Some([("keep".into(), "1".into()), ("drop".into(), "1".into())].into());
            let spec = jj.spec.get_or_insert_with(Default::default);
            spec.parallelism = Some(4);
            spec.completions = Some(4);
        }
        c.create(j).unwrap();
        let r = ObjectRef::new(Kind::Job, "default", "train");
        let patch = json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "labels": {"drop": null, "new": "on"}},
            "spec": {"parallelism": 2},
            "status": {"active": 5}
        });
        let out = c.merge_patch(&r, &patch).unwrap();
        let Object::Job(jj) = out else { panic!("kind changed") };
        let labels = jj.metadata.labels.unwrap();
        assert_eq!(labels.get("keep").map(String::as_str), Some("1"));
        assert_eq!(labels.get("new").map(String::as_str), Some("on"));
        assert!(!labels.contains_key("drop"), "null removes a key");
        let spec = jj.spec.unwrap();
        assert_eq!((spec.parallelism, spec.completions), (Some(2), Some(4)));
        assert_eq!(jj.status, None, "status is not patched through the main resource");
        assert_eq!(jj.metadata.generation, Some(2));
    }

    #[test]
    fn merge_patch_rejects_a_different_kind_and_invalid_results() {
        let mut c = EmbeddedCluster::new();
        c.create(job("train")).unwrap();
        let r = ObjectRef::new(Kind::Job, "default", "train");
        assert!(matches!(c.merge_patch(&r, &json!({"kind": "Pod"})), Err(StoreError::Invalid { .. })));
        assert!(matches!(
            c.merge_patch(&r, &json!({"spec": {"parallelism": "many"}})),
            Err(StoreError::Invalid { .. })
        ));
        assert!(matches!(c.merge_patch(&r, &json!([1])), Err(StoreError::Invalid { .. })));
    }

    #[test]
    fn merge_json_replaces_arrays_and_scalars() {
        let mut doc = json!({"a": [1, 2], "b": {"c": 1}, "d": 1});
        merge_json(&mut doc, &json!({"a": [3], "b": 5, "e": {"f": null, "g": 1}}));
        assert_eq!(doc, json!({"a": [3], "b": 5, "d": 1, "e": {"g": 1}}));
    }

    #[test]
    fn admission_runs_on_create_update_and_patch_but_not_status() {
        let mut c = EmbeddedCluster::new();
        c.add_admission(Box::new(DenyLabel("forbidden")));
        let mut bad = pod("default", "p");
        bad.metadata_mut().labels = Some([("forbidden".to_string(), "x".to_string())].into());
        let err = c.create(bad.clone()).unwrap_err();
        assert_eq!(err.to_string(), "Pod default/p is forbidden: label forbidden is not allowed");
        let good = c.create(pod("default", "p")).unwrap();
        assert!(matches!(c.update(bad), Err(StoreError::Forbidden { .. })));
        let patch = json!({"metadata": {"labels": {"forbidden": "y"}}});
        assert!(matches!(c.merge_patch(&pod_ref("p"), &patch), Err(StoreError::Forbidden { .. })));
        let mut status = good.clone();
        status.metadata_mut().labels = Some([("forbidden".to_string(), "x".to_string())].into());
        if let Some(p) = status.as_pod_mut() {
            p.status = Some(PodStatus { phase: Some("Running".into()), ..Default::default() });
        }
        assert!(c.update_status(status).is_ok(), "status writes skip admission");
        assert_eq!(c.resource_version(), 2, "rejected writes leave no trace");
    }

    #[test]
    fn bind_sets_node_name_and_scheduled_condition() {
        let mut c = EmbeddedCluster::new();
        c.create(node("n1")).unwrap();
        let p = c.create(pod("default", "p")).unwrap();
        let uid = p.metadata().uid.clone().unwrap();
        c.bind("default", "p", &uid, "n1").unwrap();
        let bound = c.get(&pod_ref("p")).unwrap();
        let bp = bound.as_pod().unwrap();
        assert_eq!(bp.spec.as_ref().unwrap().node_name.as_deref(), Some("n1"));
        let cond = &bp.status.as_ref().unwrap().conditions.as_ref().unwrap()[0];
        assert_eq!((cond.type_.as_str(), cond.status.as_str()), ("PodScheduled", "True"));
        assert_eq!(c.watch_since(2).last().map(|e| e.kind), Some(WatchEventKind::Modified));
    }

    #[test]
    fn bind_refuses_missing_pods_and_nodes_bound_pods_and_uid_mismatch() {
        let mut c = EmbeddedCluster::new();
        c.create(node("n1")).unwrap();
        c.create(pod("default", "p")).unwrap();
        assert_eq!(c.bind("default", "nope", "", "n1"), Err(StoreError::NotFound(pod_ref("nope"))));
        assert_eq!(
            c.bind("default", "p", "", "n9"),
            Err(StoreError::NotFound(ObjectRef::new(Kind::Node, "", "n9")))
        );
        assert_eq!(c.bind("default", "p", "other-uid", "n1"), Err(StoreError::Conflict(pod_ref("p"))));
        c.bind("default", "p", "", "n1").unwrap();
        assert_eq!(c.bind("default", "p", "", "n1"), Err(StoreError::Conflict(pod_ref("p"))));
    }

    #[test]
    fn delete_collects_dependents_whose_owners_are_all_gone() {
        let mut c = EmbeddedCluster::new();
        let j1 = c.create(job("j1")).unwrap();
        let j2 = c.create(job("j2")).unwrap();
        c.create(owned_by(pod("default", "only-j1"), &[&j1])).unwrap();
        c.create(owned_by(pod("default", "both"), &[&j1, &j2])).unwrap();
        c.create(pod("default", "free")).unwrap();
        c.delete(&ObjectRef::new(Kind::Job, "default", "j1")).unwrap();
        assert!(c.get(&pod_ref("only-j1")).is_none());
        assert!(c.get(&pod_ref("both")).is_some(), "j2 still owns it");
        assert!(c.get(&pod_ref("free")).is_some());
        c.delete(&ObjectRef::new(Kind::Job, "default", "j2")).unwrap();
        assert!(c.get(&pod_ref("both")).is_none());
        let deleted: Vec<_> = c
            .watch_since(0)
            .into_iter()
            .filter(|e| e.kind == WatchEventKind::Deleted)
            .map(|e| e.object.object_ref().name)
            .collect();
        assert_eq!(deleted, ["j1", "only-j1", "j2", "both"]);
    }

    #[test]
    fn garbage_collection_cascades_and_matches_owners_by_uid() {
        let mut c = EmbeddedCluster::new();
        let j = c.create(job("train")).unwrap();
        let wl = c.create(owned_by(job("workload-like"), &[&j])).unwrap();
        c.create(owned_by(pod("default", "grandchild"), &[&wl])).unwrap();
        // A pod naming a same-named owner with another uid (a recreated Job) is not owned.
        let mut stranger = owned_by(pod("default", "stranger"), &[&j]);
        if let Some(refs) = stranger.metadata_mut().owner_references.as_mut() {
            refs[0].uid = "some-other-uid".into();
        }
        c.create(stranger).unwrap();
        c.delete(&ObjectRef::new(Kind::Job, "default", "train")).unwrap();
        assert!(c.get(&ObjectRef::new(Kind::Job, "default", "workload-like")).is_none());
        assert!(c.get(&pod_ref("grandchild")).is_none());
        assert!(c.get(&pod_ref("stranger")).is_some());
    }

    #[test]
    fn events_are_recorded_in_order() {
        let mut c = EmbeddedCluster::new();
        for reason in ["A", "B"] {
            c.record_event(EventRecord {
                regarding: pod_ref("p"),
                type_: "Normal".into(),
                reason: reason.into(),
                note: String::new(),
                reporter: "test".into(),
                time_ms: c.now_ms(),
            });
        }
        let reasons: Vec<_> = c.events().into_iter().map(|e| e.reason).collect();
        assert_eq!(reasons, ["A", "B"]);
        assert_eq!(c.resource_version(), 0, "events are not object writes");
    }

    #[test]
    fn a_store_discarding_events_keeps_none_and_none_is_built() {
        let mut c = EmbeddedCluster::new();
        crate::record_event(&mut c, || pod_ref("p"), "Normal", "Kept", String::new(), "test");
        assert!(c.keeps_events());
        c.discard_events();
        assert!(!c.keeps_events());
        assert!(c.events().is_empty(), "what was kept is dropped too");
        let built = std::cell::Cell::new(false);
        let regarding = || {
            built.set(true);
            pod_ref("p")
        };
        crate::record_event(&mut c, regarding, "Warning", "Dropped", String::new(), "test");
        assert!(!built.get(), "nothing is built for a store that keeps no event");
        assert!(c.events().is_empty());
    }

    fn valid_pod(name: &str, node: Option<&str>, cpu: &str) -> Object {
        Object::from_json(
            Kind::Pod,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}),
        )
        .unwrap()
    }

    fn invalid(r: Result<Object, StoreError>) -> String {
        match r {
            Err(StoreError::Invalid { message, .. }) => message,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn a_validating_store_rejects_invalid_creates_with_the_field() {
        let mut c = EmbeddedCluster::validating();
        let mut bad = valid_pod("p", None, "1");
        bad.metadata_mut().labels = Some([("bad key!".to_string(), "v".to_string())].into());
        let message = invalid(c.create(bad));
        assert!(message.starts_with("metadata.labels[bad key!]: Invalid value: \"bad key!\""), "{message}");
        assert_eq!(c.resource_version(), 0, "nothing was written");
        assert!(
            EmbeddedCluster::new().create(pod("default", "p")).is_ok(),
            "a plain store does not validate"
        );
    }

    #[test]
    fn patches_go_through_the_same_validation_and_immutability() {
        let mut c = EmbeddedCluster::validating();
        c.create(node("n1")).unwrap();
        c.create(node("n2")).unwrap();
        c.create(valid_pod("p", None, "1")).unwrap();
        c.bind("default", "p", "", "n1").unwrap();
        let moved = invalid(c.merge_patch(&pod_ref("p"), &json!({"spec": {"nodeName": "n2"}})));
        assert!(moved.contains("spec: Forbidden: pod updates may not change fields other than"), "{moved}");
        assert!(moved.contains("spec.nodeName changed from \"n1\" to \"n2\""), "{moved}");
        let patch = json!({"spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "16"}}}]}});
        let raised = invalid(c.merge_patch(&pod_ref("p"), &patch));
        assert!(raised.contains("requests.cpu changed from \"1\" to \"16\""), "{raised}");
        let uid = invalid(c.merge_patch(&pod_ref("p"), &json!({"metadata": {"uid": "forged"}})));
        assert_eq!(uid, "metadata.uid: Invalid value: \"forged\": field is immutable");
        let label = invalid(c.merge_patch(
            &ObjectRef::new(Kind::Node, "", "n1"),
            &json!({"metadata": {"labels": {"-bad": "x"}}}),
        ));
        assert!(label.starts_with("metadata.labels[-bad]: Invalid value"), "{label}");
        let renamed = invalid(c.merge_patch(&pod_ref("p"), &json!({"metadata": {"name": "q"}})));
        assert_eq!(renamed, "metadata.name: Invalid value: \"q\": field is immutable");
        let rv = c.resource_version();
        assert!(
            c.merge_patch(&pod_ref("p"), &json!({"metadata": {"labels": {"team": "a"}}})).is_ok(),
            "labels may change"
        );
        assert_eq!(c.resource_version(), rv + 1);
        let p = c.get(&pod_ref("p")).unwrap();
        assert_eq!(p.as_pod().unwrap().spec.as_ref().unwrap().node_name.as_deref(), Some("n1"));
    }

    #[test]
    fn a_podgroup_policy_cannot_be_patched_away() {
        let mut c = EmbeddedCluster::validating();
        let pg = Object::from_json(
            Kind::PodGroup,
            json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": "pg"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}}),
        )
        .unwrap();
        c.create(pg).unwrap();
        let r = ObjectRef::new(Kind::PodGroup, "default", "pg");
        let zero =
            invalid(c.merge_patch(&r, &json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 0}}}})));
        assert_eq!(
            zero,
            "[spec.schedulingPolicy.gang.minCount: Required value: must be greater than or equal to 1, \
             spec.schedulingPolicy: Invalid value: {\"gang\":{\"minCount\":0}}: field is immutable]"
        );
        let null = invalid(c.merge_patch(&r, &json!({"spec": null})));
        assert!(
            null.contains("spec.schedulingPolicy: Invalid value: \"\": must specify one of: `basic`, `gang`"),
            "{null}"
        );
        assert!(null.contains("spec.schedulingPolicy: Invalid value: {}: field is immutable"), "{null}");
    }

    #[test]
    fn check_create_runs_the_create_path_without_writing() {
        let mut c = EmbeddedCluster::validating();
        c.create(valid_pod("a", None, "1")).unwrap();
        assert_eq!(c.check_create(&valid_pod("a", None, "1")), Err(StoreError::AlreadyExists(pod_ref("a"))));
        assert!(matches!(c.check_create(&valid_pod("b", None, "-1")), Err(StoreError::Invalid { .. })));
        assert_eq!(c.check_create(&valid_pod("b", None, "1")), Ok(()));
        assert_eq!(c.resource_version(), 1);
        assert!(c.get(&pod_ref("b")).is_none());
    }

    #[test]
    fn visiting_and_asking_for_changes_answer_as_the_copied_watch_does() {
        let mut c = EmbeddedCluster::new();
        for name in ["a", "b", "c", "d"] {
            c.create(pod("default", name)).unwrap();
        }
        c.delete(&pod_ref("a")).unwrap();
        c.compact_log(5);
        c.delete(&pod_ref("c")).unwrap();
        // From the log (after the floor) and from the surviving objects (before it).
        for after in [0, 1, 3, 5, 6, 7] {
            let mut visited = Vec::new();
            c.visit_events_since(after, &mut |e| visited.push(e.clone()));
            assert_eq!(visited, c.watch_since(after), "after {after}");
            for kinds in [&[Kind::Pod][..], &[Kind::Node], &[Kind::Node, Kind::Pod], &[]] {
                assert_eq!(
                    c.changed_since(after, kinds),
                    !c.watch_kinds_since(after, kinds).is_empty(),
                    "after {after}, {kinds:?}"
                );
            }
        }
    }

    #[test]
    fn compaction_drops_consumed_watch_events() {
        let mut c = EmbeddedCluster::new();
        for name in ["a", "b", "c"] {
            c.create(pod("default", name)).unwrap();
        }
        c.compact_log(2);
        assert_eq!(c.watch_log_len(), 1);
        assert_eq!(c.watch_since(2).len(), 1);
        assert_eq!(c.watch_kinds_since(0, &[Kind::Node]).len(), 0);
        let mut names = Vec::new();
        c.visit(Kind::Pod, &mut |o| names.push(o.object_ref().name));
        assert_eq!(names, ["a", "b", "c"]);
    }

    #[test]
    fn virtual_clock_drives_timestamps() {
        let mut c = EmbeddedCluster::new();
        c.advance_ms(1_500);
        assert_eq!(c.now_ms(), 1_500);
        assert_eq!(c.now().0.to_string(), "2026-01-01T00:00:01.5Z");
        c.set_now_ms(60_000);
        let p = c.create(pod("default", "p")).unwrap();
        assert_eq!(p.metadata().creation_timestamp.as_ref().unwrap().0.to_string(), "2026-01-01T00:01:00Z");
    }

    /// The uid and owner indexes as built from the objects alone.
    fn rebuilt_indexes(
        c: &EmbeddedCluster,
    ) -> (FxHashMap<String, ObjectRef>, FxHashMap<String, BTreeSet<ObjectRef>>) {
        let mut by_uid = FxHashMap::default();
        let mut dependents: FxHashMap<String, BTreeSet<ObjectRef>> = FxHashMap::default();
        for (r, obj) in c.objects.iter() {
            if let Some(uid) = obj.metadata().uid.clone() {
                by_uid.insert(uid, r.clone());
            }
            for uid in owner_uids(obj) {
                dependents.entry(uid).or_default().insert(r.clone());
            }
        }
        (by_uid, dependents)
    }

    #[derive(Debug, Clone)]
    enum IndexOp {
        /// Update pod `i` with the owners in `mask` (bit j: job j) and label `v`.
        Update { i: usize, mask: u8, v: bool },
        /// Write pod `i`'s status.
        Status { i: usize, v: bool },
        /// Delete pod `i`, and create it again with the owners in `mask`.
        Recreate { i: usize, mask: u8 },
    }

    fn index_op() -> impl proptest::strategy::Strategy<Value = IndexOp> {
        use proptest::prelude::*;
        prop_oneof![
            (0..4usize, 0..8u8, any::<bool>()).prop_map(|(i, mask, v)| IndexOp::Update { i, mask, v }),
            (0..4usize, any::<bool>()).prop_map(|(i, v)| IndexOp::Status { i, v }),
            (0..4usize, 0..8u8).prop_map(|(i, mask)| IndexOp::Recreate { i, mask }),
        ]
    }

    proptest::proptest! {
        /// Whatever the writes, the uid and owner indexes are the ones the objects give:
        /// a new version with the same uid and owners replaced in place leaves them as
        /// rebuilding them would.
        #[test]
        fn indexes_follow_every_write(ops in proptest::collection::vec(index_op(), 0..40)) {
            let mut c = EmbeddedCluster::new();
            let jobs: Vec<Object> = (0..3).map(|j| c.create(job(&format!("j{j}"))).unwrap()).collect();
            let owners = |mask: u8| jobs.iter().enumerate().filter(|(j, _)| mask & (1 << j) != 0).map(|(_, o)| o).collect::<Vec<_>>();
            for i in 0..4 {
                c.create(owned_by(pod("default", &format!("p{i}")), &owners(0b001))).unwrap();
            }
            for op in ops {
                match op {
                    IndexOp::Update { i, mask, v } => {
                        let Some(mut obj) = c.get(&pod_ref(&format!("p{i}"))) else { continue };
                        obj = owned_by(obj, &owners(mask));
                        obj.metadata_mut().labels = Some([("v".to_string(), v.to_string())].into());
                        c.update(obj).unwrap();
                    }
                    IndexOp::Status { i, v } => {
                        let Some(mut obj) = c.get(&pod_ref(&format!("p{i}"))) else { continue };
                        if let Some(p) = obj.as_pod_mut() {
                            p.status = Some(PodStatus { phase: Some(if v { "Running" } else { "Pending" }.into()), ..Default::default() });
                        }
                        c.update_status(obj).unwrap();
                    }
                    IndexOp::Recreate { i, mask } => {
                        let _ = c.delete(&pod_ref(&format!("p{i}")));
                        c.create(owned_by(pod("default", &format!("p{i}")), &owners(mask))).unwrap();
                    }
                }
                let (by_uid, dependents) = rebuilt_indexes(&c);
                proptest::prop_assert_eq!(&c.by_uid, &by_uid);
                proptest::prop_assert_eq!(&c.dependents, &dependents);
            }
        }
    }
}
