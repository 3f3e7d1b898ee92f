//! Watches: a stream of `{"type": ..., "object": ...}` lines.
//!
//! * Without `resourceVersion` (or with `0`) the stream starts with an `ADDED` event per
//!   existing object; with `sendInitialEvents=true` those end with a `BOOKMARK` annotated
//!   `k8s.io/initial-events-end`.
//! * From a `resourceVersion`, every change after it; one the watch log no longer holds
//!   gets a single `ERROR` event with a 410 `Expired` Status, and the stream ends (the
//!   client relists).
//! * Label and field selectors filter; an object that stops matching is sent as `DELETED`,
//!   one that starts matching as `ADDED`, as kube-apiserver's watch cache does.
//! * With a Table `Accept` (`kubectl get -w`) every object is sent as a one-row Table.
//! * `allowWatchBookmarks=true` adds a `BOOKMARK` with the current resourceVersion every
//!   few seconds of quiet; `timeoutSeconds` ends the stream (default 30 minutes).

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use placer_api::k8s::jiff::Timestamp;
use placer_cluster::{ClusterStore, Object, ObjectRef, WatchEvent, WatchEventKind};
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::crud::served;
use crate::errors::{ApiError, ApiResult};
use crate::request::{Query, Target};
use crate::resources::{Conversion, Resource};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::state::Shared;
use crate::table::{self, IncludeObject};

/// Quiet time after which a bookmark is sent (when asked for).
const BOOKMARK_EVERY: Duration = Duration::from_secs(15);
/// Watch length without `timeoutSeconds`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// Existing objects as ADDED first.
    Initial,
    From(u64),
}

/// A parsed watch request.
#[derive(Debug, Clone)]
pub struct WatchSpec {
    resource: &'static Resource,
    namespace: Option<String>,
    name: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    bookmarks: bool,
    initial_events_end: bool,
    timeout: Duration,
    start: Start,
    /// `kubectl get -w`: every object as a one-row Table (version, row objects).
    table: Option<(&'static str, IncludeObject)>,
}

impl WatchSpec {
    pub fn parse(target: &Target, query: &Query, accept: &str) -> ApiResult<WatchSpec> {
        let (resource, namespace, name) = match target {
            Target::Collection { resource, namespace } => (*resource, namespace.clone(), None),
            Target::Object { resource, namespace, name, subresource: None } => {
                (*resource, namespace.clone(), Some(name.clone()))
            }
            Target::Object { .. } => return Err(ApiError::method_not_allowed("WATCH")),
        };
        let labels = LabelSelector::parse(query.get("labelSelector").unwrap_or(""))?;
        let fields = FieldSelector::parse(
            query.get("fieldSelector").unwrap_or(""),
            resource.kind,
            resource.conversion == Conversion::EventsV1,
        )?;
        let name = name.or_else(|| fields.required("metadata.name").map(str::to_string));
        let send_initial = query.flag("sendInitialEvents");
        let start = match query.get("resourceVersion") {
            _ if send_initial => Start::Initial,
            None | Some("0") => Start::Initial,
            Some(v) => Start::From(v.parse().map_err(|_| {
                ApiError::bad_request(format!(
                    "invalid resourceVersion {v:?}: resource versions of this server are integers"
                ))
            })?),
        };
        let timeout = query.number("timeoutSeconds")?.map(Duration::from_secs).unwrap_or(DEFAULT_TIMEOUT);
        Ok(WatchSpec {
            resource,
            namespace,
            name,
            labels,
            fields,
            bookmarks: query.flag("allowWatchBookmarks"),
            initial_events_end: send_initial && query.flag("allowWatchBookmarks"),
            timeout,
            start,
            table: table::wants_table(accept).map(|v| (v, IncludeObject::parse(query.get("includeObject")))),
        })
    }

    /// An object as the watch sends it.
    fn render(&self, o: &Object, now: Timestamp, rv: u64) -> Value {
        match self.table {
            None => served(self.resource, o),
            Some((version, include)) => {
                let meta = json!({"resourceVersion": rv.to_string()});
                table::table(
                    self.resource.kind,
                    std::slice::from_ref(o),
                    |x| served(self.resource, x),
                    now,
                    version,
                    include,
                    meta,
                )
            }
        }
    }

    fn in_scope(&self, o: &Object) -> bool {
        let m = o.metadata();
        o.kind() == self.resource.kind
            && self.namespace.as_deref().is_none_or(|ns| m.namespace.as_deref() == Some(ns))
            && self.name.as_deref().is_none_or(|n| m.name.as_deref() == Some(n))
    }

    fn matches(&self, o: &Object) -> bool {
        self.labels.matches(o.metadata().labels.as_ref())
            && (self.fields.is_empty() || self.fields.matches(self.resource.kind, &o.to_json()))
    }
}

enum Wake {
    Changed,
    Bookmark,
    Done,
}

enum Phase {
    Start,
    Running,
    Done,
}

struct Watcher {
    shared: Arc<Shared>,
    spec: WatchSpec,
    rx: watch::Receiver<u64>,
    closing: watch::Receiver<bool>,
    pos: u64,
    known: HashSet<ObjectRef>,
    deadline: Instant,
    last_sent: Instant,
    phase: Phase,
}

fn line(event_type: &str, object: Value) -> String {
    let mut s = json!({"type": event_type, "object": object}).to_string();
    s.push('\n');
    s
}

impl Watcher {
    fn bookmark(&self, initial_end: bool) -> String {
        let mut meta = json!({"resourceVersion": self.pos.to_string(), "creationTimestamp": null});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        line(
            "BOOKMARK",
            json!({"kind": self.spec.resource.kind_name, "apiVersion": self.spec.resource.api_version(), "metadata": meta}),
        )
    }

    fn expired(&self, floor: u64) -> String {
        let pos = self.pos;
        line("ERROR", ApiError::expired(format!("too old resource version: {pos} ({floor})")).status())
    }

    /// The first batch: existing objects, or nothing (a start from a resourceVersion).
    fn start(&mut self) -> String {
        let mut out = String::new();
        let guard = self.shared.lock();
        self.rx.borrow_and_update();
        let store = &guard.store;
        match self.spec.start {
            Start::Initial => {
                self.pos = store.resource_version();
                for o in store.list(self.spec.resource.kind) {
                    if self.spec.in_scope(&o) && self.spec.matches(&o) {
                        self.known.insert(o.object_ref());
                        out.push_str(&line("ADDED", self.spec.render(&o, store.now().0, self.pos)));
                    }
                }
                if self.spec.initial_events_end {
                    out.push_str(&self.bookmark(true));
                }
            }
            Start::From(rv) => {
                self.pos = rv;
                if rv < store.log_floor() {
                    self.phase = Phase::Done;
                    return self.expired(store.log_floor());
                }
                for o in store.list(self.spec.resource.kind) {
                    let current = o
                        .metadata()
                        .resource_version
                        .as_deref()
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0);
                    if current <= rv && self.spec.in_scope(&o) && self.spec.matches(&o) {
                        self.known.insert(o.object_ref());
                    }
                }
            }
        }
        out
    }

    /// Every change after `pos` that watchers may see (see [`Shared::sync`]). The lock is
    /// held only to take the events; they are rendered after it is released.
    fn collect(&mut self) -> String {
        let upto = *self.rx.borrow_and_update();
        let (events, now) = {
            let guard = self.shared.lock();
            let store = &guard.store;
            match store.log_since(self.pos) {
                Ok(events) => {
                    let events: Vec<WatchEvent> = events
                        .iter()
                        .take_while(|e| e.resource_version <= upto)
                        .filter(|e| self.spec.in_scope(&e.object))
                        .cloned()
                        .collect();
                    (events, store.now().0)
                }
                Err(e) => {
                    self.phase = Phase::Done;
                    return self.expired(e.floor);
                }
            }
        };
        let mut out = String::new();
        for e in events {
            let r = e.object.object_ref();
            let event_type = match e.kind {
                WatchEventKind::Deleted => {
                    if self.known.remove(&r) || self.spec.matches(&e.object) {
                        Some("DELETED")
                    } else {
                        None
                    }
                }
                _ if self.spec.matches(&e.object) => {
                    Some(if self.known.insert(r) { "ADDED" } else { "MODIFIED" })
                }
                _ if self.known.remove(&r) => Some("DELETED"),
                _ => None,
            };
            let Some(t) = event_type else { continue };
            let stored_form = self.spec.resource.conversion == Conversion::None && self.spec.table.is_none();
            let stored = if stored_form { self.shared.rendered(e.resource_version) } else { None };
            match stored {
                // The text the state file got: the object as this resource serves it.
                Some(text) => {
                    out.push_str(&format!("{{\"type\":\"{t}\",\"object\":{text}}}\n"));
                }
                None => out.push_str(&line(t, self.spec.render(&e.object, now, e.resource_version))),
            }
        }
        self.pos = self.pos.max(upto);
        out
    }

    async fn next(mut self) -> Option<(Result<Bytes, Infallible>, Watcher)> {
        loop {
            match self.phase {
                Phase::Done => return None,
                Phase::Start => {
                    self.phase = Phase::Running;
                    // The existing objects are sent once the state file holds them.
                    let out = tokio::task::block_in_place(|| {
                        let out = self.start();
                        self.shared.sync(self.pos);
                        out
                    });
                    if !out.is_empty() {
                        self.last_sent = Instant::now();
                        return Some((Ok(Bytes::from(out)), self));
                    }
                }
                Phase::Running => {
                    // Nothing of this watch's kind changed since its position (most wakes
                    // of a one-kind watch on a busy server): move on without the lock.
                    let upto = *self.rx.borrow_and_update();
                    let out = if self.shared.changed_since(self.spec.resource.kind, self.pos) {
                        tokio::task::block_in_place(|| self.collect())
                    } else {
                        self.pos = self.pos.max(upto);
                        String::new()
                    };
                    if !out.is_empty() {
                        self.last_sent = Instant::now();
                        return Some((Ok(Bytes::from(out)), self));
                    }
                    let bookmark_at = self.last_sent + BOOKMARK_EVERY;
                    let bookmarks = self.spec.bookmarks;
                    let deadline = self.deadline;
                    let wake = tokio::select! {
                        changed = self.rx.changed() => if changed.is_err() { Wake::Done } else { Wake::Changed },
                        _ = tokio::time::sleep_until(bookmark_at), if bookmarks => Wake::Bookmark,
                        _ = tokio::time::sleep_until(deadline) => Wake::Done,
                        _ = self.closing.wait_for(|c| *c) => Wake::Done,
                    };
                    match wake {
                        Wake::Changed => {}
                        Wake::Done => self.phase = Phase::Done,
                        Wake::Bookmark => {
                            self.last_sent = Instant::now();
                            let b = self.bookmark(false);
                            return Some((Ok(Bytes::from(b)), self));
                        }
                    }
                }
            }
        }
    }
}

/// The streaming body of a watch.
pub fn stream(shared: Arc<Shared>, spec: WatchSpec) -> Body {
    let rx = shared.subscribe();
    let closing = shared.closing();
    let now = Instant::now();
    let w = Watcher {
        shared,
        deadline: now + spec.timeout,
        spec,
        rx,
        closing,
        pos: 0,
        known: HashSet::new(),
        last_sent: now,
        phase: Phase::Start,
    };
    Body::from_stream(futures::stream::unfold(w, Watcher::next))
}
