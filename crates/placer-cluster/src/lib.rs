//! The cluster-store trait and its embedded backend.
//!
//! Controllers (the scheduler driver, the Job controller) see the cluster only through
//! [`ClusterStore`]: typed objects ([`Object`]), list + ordered watch events with
//! `resourceVersion`, status updates, the pod binding subresource, merge patches,
//! deletion with owner-reference garbage collection, events, and a clock. The embedded
//! backend ([`embedded::EmbeddedCluster`]) implements it in memory with a virtual clock;
//! the real-cluster backend implements it over the Kubernetes API.

pub mod embedded;
pub mod object;
pub mod validation;

pub use object::{Kind, Object, ObjectRef};

use placer_api::k8s::api::core::v1::Pod;
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::Time;

/// Errors a store write can return (the embedded store's messages follow the API server's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("{0} not found")]
    NotFound(ObjectRef),
    #[error("{0} already exists")]
    AlreadyExists(ObjectRef),
    #[error("operation cannot be fulfilled on {0}: the object has been modified; please apply your changes to the latest version and try again")]
    Conflict(ObjectRef),
    #[error("{what} is invalid: {message}")]
    Invalid { what: ObjectRef, message: String },
    /// Rejected by an admission check (e.g. Job parallelism change for a gang Job).
    #[error("{what} is forbidden: {message}")]
    Forbidden { what: ObjectRef, message: String },
    #[error("{0}")]
    Other(String),
}

/// One entry of the watch stream.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    pub resource_version: u64,
    pub kind: WatchEventKind,
    pub object: Object,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEventKind {
    Added,
    Modified,
    Deleted,
}

/// The kind of a logged change replayed to a reader that knows exactly the objects in
/// `known` (a watch resumed from before the log's compaction floor): the first change of
/// an object it was not told about is `Added`; a deletion makes the object unknown again.
pub fn resumed_kind(
    known: &mut std::collections::HashSet<ObjectRef>,
    r: ObjectRef,
    kind: WatchEventKind,
) -> WatchEventKind {
    match kind {
        WatchEventKind::Deleted => {
            known.remove(&r);
            WatchEventKind::Deleted
        }
        _ if known.insert(r) => WatchEventKind::Added,
        other => other,
    }
}

/// A recorded event (events.k8s.io/v1 style): regarding, type, reason, note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    pub regarding: ObjectRef,
    /// `Normal` or `Warning`.
    pub type_: String,
    pub reason: String,
    pub note: String,
    /// Who reports it (e.g. `placer-scheduler`, `job-controller`).
    pub reporter: String,
    pub time_ms: u64,
}

/// Records an event of `reporter` about `regarding`, at the store's time; when the store
/// keeps no events ([`ClusterStore::keeps_events`]) nothing is built.
pub fn record_event(
    store: &mut dyn ClusterStore,
    regarding: impl FnOnce() -> ObjectRef,
    type_: &str,
    reason: &str,
    note: String,
    reporter: &str,
) {
    if !store.keeps_events() {
        return;
    }
    let time_ms = store.now_ms();
    store.record_event(EventRecord {
        regarding: regarding(),
        type_: type_.to_string(),
        reason: reason.to_string(),
        note,
        reporter: reporter.to_string(),
        time_ms,
    });
}

/// Checks a write before it is stored (admission). Returns a message to reject it.
pub trait Admission {
    /// `old` is `None` on create. Only spec/metadata writes are checked, not status or
    /// bindings.
    fn admit(&self, store: &dyn ClusterStore, old: Option<&Object>, new: &Object) -> Result<(), String>;

    /// A mutating admission step run on create, before every `admit` (e.g. the
    /// DefaultTolerationSeconds plugin adding tolerations to new pods). Default: nothing.
    fn mutate_on_create(&self, _obj: &mut Object) {}
}

/// The cluster as controllers see it.
pub trait ClusterStore {
    /// Current (virtual or real) time in milliseconds since the store's epoch.
    fn now_ms(&self) -> u64;
    /// `now_ms` as a Kubernetes timestamp.
    fn now(&self) -> Time;
    /// The latest resourceVersion handed out.
    fn resource_version(&self) -> u64;

    fn get(&self, r: &ObjectRef) -> Option<Object>;
    /// Whether the object exists (`get` without the copy).
    fn contains(&self, r: &ObjectRef) -> bool {
        self.get(r).is_some()
    }
    /// All objects of a kind, sorted by namespace and name.
    fn list(&self, kind: Kind) -> Vec<Object>;

    /// Creates an object: fills uid, resourceVersion, creationTimestamp, generation and
    /// (when `metadata.generateName` is set and the name is empty) a generated name.
    fn create(&mut self, obj: Object) -> Result<Object, StoreError>;
    /// Replaces spec and metadata (status is kept). A non-empty resourceVersion must match.
    fn update(&mut self, obj: Object) -> Result<Object, StoreError>;
    /// Replaces status only (the status subresource). A non-empty resourceVersion must match.
    fn update_status(&mut self, obj: Object) -> Result<Object, StoreError>;
    /// Whether a successful `update_status` changes nothing but the status and the
    /// resourceVersion of the version it replaced: the version it returns is the one the
    /// writer read with the status it sent, managedFields included, so a writer knows what
    /// the watch will show without comparing it field by field. Default: false (an API
    /// server also updates `managedFields`).
    fn status_write_changes_only_status(&self) -> bool {
        false
    }
    /// Writes the status of the pod `r` through `write`, which may change `status` only
    /// and returns whether it changed anything. Returns the new version, or `None` when
    /// `write` changed nothing (no write). The default reads the pod, copies it and sends
    /// the copy to [`ClusterStore::update_status`]; a store that holds its objects can
    /// write in place when nobody else holds the stored version, sparing the copy of the
    /// whole pod that a condition write otherwise costs.
    fn update_pod_status_with(
        &mut self,
        r: &ObjectRef,
        write: &mut dyn FnMut(&mut Pod) -> bool,
    ) -> Result<Option<Object>, StoreError> {
        let Some(Object::Pod(pod)) = self.get(r) else { return Err(StoreError::NotFound(r.clone())) };
        let mut pod = std::sync::Arc::unwrap_or_clone(pod);
        if !write(&mut pod) {
            return Ok(None);
        }
        self.update_status(Object::Pod(pod.into())).map(Some)
    }
    /// JSON merge patch (RFC 7386) of spec/metadata.
    fn merge_patch(&mut self, r: &ObjectRef, patch: &serde_json::Value) -> Result<Object, StoreError>;
    /// Deletes an object; objects whose owner references all point at deleted owners are
    /// garbage-collected (cascading).
    fn delete(&mut self, r: &ObjectRef) -> Result<(), StoreError>;
    /// The pod binding subresource: sets `spec.nodeName` once. `uid`, when non-empty, must
    /// match the pod's uid (a recreated pod of the same name is never bound by mistake).
    fn bind(&mut self, namespace: &str, name: &str, uid: &str, node: &str) -> Result<(), StoreError>;

    fn record_event(&mut self, event: EventRecord);
    fn events(&self) -> Vec<EventRecord>;
    /// Whether recorded events are kept: when not, a caller may skip building them.
    fn keeps_events(&self) -> bool {
        true
    }

    /// Watch: every change with a resourceVersion greater than `after`, in order.
    fn watch_since(&self, after: u64) -> Vec<WatchEvent>;

    /// `watch_since` restricted to some kinds: a store can skip copying the others.
    fn watch_kinds_since(&self, after: u64, kinds: &[Kind]) -> Vec<WatchEvent> {
        let mut events = self.watch_since(after);
        events.retain(|e| kinds.contains(&e.object.kind()));
        events
    }

    /// Whether anything of `kinds` changed after `after` (what `watch_kinds_since` would
    /// answer non-empty): a store can tell without copying the events.
    fn changed_since(&self, after: u64, kinds: &[Kind]) -> bool {
        !self.watch_kinds_since(after, kinds).is_empty()
    }

    /// Calls `f` with every event `watch_since(after)` answers, in order; a store can do it
    /// without copying them.
    fn visit_events_since(&self, after: u64, f: &mut dyn FnMut(&WatchEvent)) {
        for event in self.watch_since(after) {
            f(&event);
        }
    }

    /// Calls `f` with every object of a kind, in `list` order; a store can do it without
    /// copying them.
    fn visit(&self, kind: Kind, f: &mut dyn FnMut(&Object)) {
        for obj in self.list(kind) {
            f(&obj);
        }
    }
}
