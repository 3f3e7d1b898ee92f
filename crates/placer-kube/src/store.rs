//! [`KubeStore`]: the [`ClusterStore`] over the Kubernetes API.
//!
//! # Reads: a watch cache
//! One watcher (`kube::runtime::watcher`) per kind feeds a local cache plus an ordered
//! change log with a local resourceVersion (see [`crate::cache`]). `get`, `list` and
//! `watch_since` read that cache: they never block on the network and behave exactly like
//! the embedded store's. After a watch expires (410 Gone) the watcher relists and the
//! cache records only the difference, so no object is lost or reported twice.
//!
//! # Writes: the API, synchronously
//! [`ClusterStore`] is synchronous and the controllers are too. The scheduling loop
//! therefore runs on a dedicated OS thread (not a runtime worker) and every write blocks
//! that thread on the tokio runtime with [`Handle::block_on`] (through
//! `tokio::task::block_in_place`, so a call from a multi-threaded runtime worker is
//! tolerated too; a current-thread runtime is not supported). The watchers, the event
//! publisher, leader election and HTTP keep running on the runtime meanwhile.
//!
//! The answer to each write is put into the cache at once (read-your-writes: a
//! controller sees what it created on its next read, as with the embedded store); the
//! watch event that follows is recognised as the same version and not recorded twice.
//!
//! | store call | API request |
//! |---|---|
//! | `bind` | `POST pods/{name}/binding` with `metadata.uid` set; the answer is a `Status`. Never retried: a 404/409 (pod gone, already bound, uid mismatch) is `NotFound`/`Conflict`, and the engine's `binding_failed` requeues the pod |
//! | `update_status` | `PUT {kind}/{name}/status`; on 409 `GET` the object and `PUT` again with the fresh resourceVersion and the caller's changes re-applied (up to [`STATUS_UPDATE_ATTEMPTS`] times: conditions merged by type, other fields the caller changed re-applied) |
//! | `create` | `POST {kind}` (resourceVersion cleared) |
//! | `update` | `PUT {kind}/{name}` (optimistic: a stale resourceVersion is `Conflict`) |
//! | `merge_patch` | `PATCH {kind}/{name}` with `application/merge-patch+json` |
//! | `delete` | `DELETE {kind}/{name}`, graceful, background propagation, uid precondition from the cache |
//! | `record_event` | `POST events.k8s.io/v1 events` (repeats are patched into a series), asynchronously |
//!
//! Transient API errors (429, 5xx, connection failures) are retried with capped
//! exponential backoff ([`RetryPolicy`]); creates with `generateName` only on 429.
//! While a write gate ([`Leadership`]) is down every write is refused locally.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy};
use kube::core::Status;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::watcher::{self, Event as WatcherEvent};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use placer_api::k8s::api::batch::v1::Job;
use placer_api::k8s::api::core::v1::{Binding, Node, ObjectReference, Pod};
use placer_api::k8s::api::policy::v1::PodDisruptionBudget;
use placer_api::k8s::api::scheduling::v1::PriorityClass;
use placer_api::k8s::api::scheduling::v1alpha2::{PodGroup, Workload};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use placer_api::k8s::jiff::Timestamp;
use placer_cluster::{ClusterStore, EventRecord, Kind, Object, ObjectRef, StoreError, WatchEvent};
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::cache::{Shared, Source, Wake};
use crate::kinds::{dynamic_api, from_dynamic, to_dynamic, KindType};
use crate::leader::Leadership;
use crate::metrics::{
    Metrics, API_REQUESTS, BINDING_DURATION, CACHE_SYNCED, EVENTS_DROPPED, RELISTS, WATCH_EVENTS,
};
use crate::retry::{is_transient, status_code, store_error, with_retry, Idempotency, RetryPolicy};
use crate::status::merge_status;

/// The kinds `placer serve` watches (CronJobs are not: Placer does not run CronJobs in a
/// real cluster).
pub const WATCHED_KINDS: &[Kind] = &[
    Kind::Node,
    Kind::Pod,
    Kind::PodGroup,
    Kind::Workload,
    Kind::PriorityClass,
    Kind::PodDisruptionBudget,
    Kind::Job,
];

/// How many times a status update is attempted when it keeps conflicting.
pub const STATUS_UPDATE_ATTEMPTS: u32 = 5;

/// Field manager recorded on Placer's writes.
pub const FIELD_MANAGER: &str = "placer";

/// Tuning of a [`KubeStore`].
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub retry: RetryPolicy,
    /// `reportingInstance` of the events Placer publishes (the pod name in a cluster).
    pub instance: String,
    /// Events kept in memory for [`ClusterStore::events`].
    pub recent_events: usize,
    /// Events waiting to be published; more are dropped (and counted).
    pub event_queue: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            retry: RetryPolicy::default(),
            instance: std::env::var("POD_NAME").unwrap_or_else(|_| "placer".to_string()),
            recent_events: 1000,
            event_queue: 4096,
        }
    }
}

/// Read access to the cache for the HTTP endpoints (synced state, pending pods).
#[derive(Debug, Clone)]
pub struct CacheStatus {
    shared: Arc<Shared>,
    kinds: Vec<Kind>,
}

impl CacheStatus {
    /// Kinds whose first list has not completed yet.
    pub fn unsynced(&self) -> Vec<Kind> {
        let cache = self.shared.lock();
        self.kinds.iter().copied().filter(|k| !cache.is_synced(*k)).collect()
    }

    pub fn synced(&self) -> bool {
        self.unsynced().is_empty()
    }

    /// Pods addressed to one of `scheduler_names` that are neither bound, terminating nor
    /// finished.
    pub fn pending_pods(&self, scheduler_names: &[String]) -> usize {
        let cache = self.shared.lock();
        let mut n = 0;
        cache.for_each(Kind::Pod, |o| {
            let Some(pod) = o.as_pod() else { return };
            let Some(spec) = &pod.spec else { return };
            let mine = spec.scheduler_name.as_deref().is_some_and(|s| scheduler_names.iter().any(|n| n == s));
            let finished = pod
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|p| p == "Succeeded" || p == "Failed");
            if mine && spec.node_name.is_none() && pod.metadata.deletion_timestamp.is_none() && !finished {
                n += 1;
            }
        });
        n
    }
}

/// Wakes the scheduling loop's [`KubeStore::wait_for_change`] (leadership changes,
/// shutdown).
#[derive(Debug, Clone)]
pub struct StoreWaker {
    shared: Arc<Shared>,
}

impl StoreWaker {
    pub fn wake(&self) {
        self.shared.wake();
    }
}

/// The watcher tasks; aborted when dropped.
#[derive(Debug)]
pub struct Watchers {
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Watchers {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Wall-clock milliseconds since the Unix epoch, never going backwards.
#[derive(Debug, Default)]
struct Clock {
    last: AtomicU64,
}

impl Clock {
    fn now_ms(&self) -> u64 {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let prev = self.last.fetch_max(wall, Ordering::SeqCst);
        prev.max(wall)
    }
}

/// See the module documentation.
pub struct KubeStore {
    client: Client,
    handle: Handle,
    shared: Arc<Shared>,
    metrics: Arc<Metrics>,
    options: StoreOptions,
    gate: Option<Leadership>,
    recent_events: Mutex<VecDeque<EventRecord>>,
    event_tx: mpsc::Sender<(EventRecord, Option<String>)>,
    clock: Clock,
}

impl std::fmt::Debug for KubeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeStore")
            .field("resource_version", &self.resource_version())
            .finish_non_exhaustive()
    }
}

impl KubeStore {
    /// A store over `client`; async work runs on `handle`. Starts the event publisher;
    /// watchers start with [`KubeStore::start_watchers`].
    pub fn new(client: Client, handle: Handle, metrics: Arc<Metrics>, options: StoreOptions) -> KubeStore {
        let (event_tx, event_rx) = mpsc::channel(options.event_queue.max(1));
        handle.spawn(publish_events(client.clone(), options.instance.clone(), event_rx, metrics.clone()));
        KubeStore {
            client,
            handle,
            shared: Arc::new(Shared::default()),
            metrics,
            recent_events: Mutex::new(VecDeque::new()),
            options,
            gate: None,
            event_tx,
            clock: Clock::default(),
        }
    }

    /// Refuses every write while `gate` is not leading.
    pub fn set_write_gate(&mut self, gate: Leadership) {
        self.gate = Some(gate);
    }

    /// Starts one watcher per kind in `kinds` (normally [`WATCHED_KINDS`]).
    pub fn start_watchers(&self, kinds: &[Kind]) -> Watchers {
        let mut tasks = Vec::new();
        for &kind in kinds {
            let shared = self.shared.clone();
            let metrics = self.metrics.clone();
            let client = self.client.clone();
            let task = match kind {
                Kind::Node => self.handle.spawn(reflect::<Node>(client, shared, metrics)),
                Kind::Pod => self.handle.spawn(reflect::<Pod>(client, shared, metrics)),
                Kind::PodGroup => self.handle.spawn(reflect::<PodGroup>(client, shared, metrics)),
                Kind::Workload => self.handle.spawn(reflect::<Workload>(client, shared, metrics)),
                Kind::Job => self.handle.spawn(reflect::<Job>(client, shared, metrics)),
                Kind::CronJob => {
                    use placer_api::k8s::api::batch::v1::CronJob;
                    self.handle.spawn(reflect::<CronJob>(client, shared, metrics))
                }
                Kind::PriorityClass => self.handle.spawn(reflect::<PriorityClass>(client, shared, metrics)),
                Kind::PodDisruptionBudget => {
                    self.handle.spawn(reflect::<PodDisruptionBudget>(client, shared, metrics))
                }
                Kind::Namespace => {
                    use placer_api::k8s::api::core::v1::Namespace;
                    self.handle.spawn(reflect::<Namespace>(client, shared, metrics))
                }
                Kind::Event => {
                    use placer_api::k8s::api::core::v1::Event;
                    self.handle.spawn(reflect::<Event>(client, shared, metrics))
                }
                Kind::Lease => {
                    use placer_api::k8s::api::coordination::v1::Lease;
                    self.handle.spawn(reflect::<Lease>(client, shared, metrics))
                }
            };
            tasks.push(task);
        }
        Watchers { tasks }
    }

    /// Synced state and queue depth, for the HTTP endpoints.
    pub fn status(&self, kinds: &[Kind]) -> CacheStatus {
        CacheStatus { shared: self.shared.clone(), kinds: kinds.to_vec() }
    }

    pub fn waker(&self) -> StoreWaker {
        StoreWaker { shared: self.shared.clone() }
    }

    /// Blocks until the store changes after `after`, the waker is used, or `timeout`
    /// passes. Returns true if it changed.
    pub fn wait_for_change(&self, after: u64, timeout: Duration) -> bool {
        self.shared.wait(after, timeout) == Wake::Changed
    }

    /// Forgets log entries up to `through`: every reader has consumed them. A reader asking
    /// from before that point later gets the current state instead (see [`crate::cache`]).
    pub fn compact(&self, through: u64) {
        self.shared.lock().compact(through);
    }

    /// Records an object as if a watcher had delivered it (tests, e2e setup).
    pub fn inject(&self, obj: Object) {
        self.shared.update(|c| c.apply(obj, Source::Watch));
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Runs a future on the runtime from the (non-async) calling thread.
    fn block_on<F: Future>(&self, f: F) -> F::Output {
        tokio::task::block_in_place(|| self.handle.block_on(f))
    }

    fn check_gate(&self, what: &ObjectRef) -> Result<(), StoreError> {
        match &self.gate {
            Some(g) if !g.is_leader() => {
                Err(StoreError::Other(format!("not the leader: refusing to write {what}")))
            }
            _ => Ok(()),
        }
    }

    fn count_request(&self, verb: &'static str, kind: Kind, result: &Result<(), &kube::Error>) {
        let code = match result {
            Ok(()) => "2xx".to_string(),
            Err(e) => status_code(e).map_or_else(|| "0".to_string(), |c| c.to_string()),
        };
        self.metrics.inc_counter(API_REQUESTS, &[("verb", verb), ("kind", kind.name()), ("code", &code)], 1);
    }

    /// `namespace/name` of the PodGroup an object is or belongs to (for logs).
    fn pod_group_of(&self, r: &ObjectRef) -> Option<String> {
        match r.kind {
            Kind::PodGroup => Some(format!("{}/{}", r.namespace, r.name)),
            Kind::Pod => self
                .shared
                .lock()
                .get(r)
                .and_then(|o| {
                    o.as_pod()
                        .and_then(|p| p.spec.as_ref())
                        .and_then(|s| s.scheduling_group.as_ref())
                        .and_then(|g| g.pod_group_name.clone())
                })
                .map(|g| format!("{}/{g}", r.namespace)),
            _ => None,
        }
    }

    fn remember(&self, obj: &Object) {
        let mut obj = obj.clone();
        slim(&mut obj);
        self.shared.update(|c| c.apply(obj, Source::LocalWrite));
    }

    fn finish_write(
        &self,
        verb: &'static str,
        r: &ObjectRef,
        result: Result<kube::core::DynamicObject, kube::Error>,
    ) -> Result<Object, StoreError> {
        self.count_request(verb, r.kind, &result.as_ref().map(|_| ()));
        match result {
            Ok(answer) => {
                let obj = from_dynamic(r.kind, answer)?;
                self.remember(&obj);
                Ok(obj)
            }
            Err(e) => {
                let err = store_error(r, &e);
                tracing::debug!(
                    verb,
                    object = %r,
                    pod_group = self.pod_group_of(r).as_deref(),
                    error = %e,
                    "write failed",
                );
                Err(err)
            }
        }
    }
}

impl ClusterStore for KubeStore {
    fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    fn now(&self) -> Time {
        let ms = i64::try_from(self.now_ms()).unwrap_or(i64::MAX);
        Time(Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH))
    }

    fn resource_version(&self) -> u64 {
        self.shared.lock().resource_version()
    }

    fn get(&self, r: &ObjectRef) -> Option<Object> {
        self.shared.lock().get(r)
    }

    fn list(&self, kind: Kind) -> Vec<Object> {
        self.shared.lock().list(kind)
    }

    fn create(&mut self, mut obj: Object) -> Result<Object, StoreError> {
        let r = obj.object_ref();
        self.check_gate(&r)?;
        let meta = obj.metadata_mut();
        meta.resource_version = None;
        if r.kind.namespaced() && meta.namespace.is_none() {
            meta.namespace = Some(r.namespace.clone());
        }
        let idempotency =
            if r.name.is_empty() { Idempotency::NotIdempotent } else { Idempotency::Idempotent };
        let api = dynamic_api(self.client.clone(), r.kind, &r.namespace);
        let body = to_dynamic(&obj)?;
        let pp = PostParams { field_manager: Some(FIELD_MANAGER.to_string()), ..PostParams::default() };
        let result =
            self.block_on(with_retry(self.options.retry, idempotency, &self.metrics, "create", || {
                api.create(&pp, &body)
            }));
        let created = self.finish_write("create", &r, result)?;
        tracing::debug!(
            object = %created.object_ref(),
            pod_group = self.pod_group_of(&created.object_ref()).as_deref(),
            "created",
        );
        Ok(created)
    }

    fn update(&mut self, obj: Object) -> Result<Object, StoreError> {
        let r = obj.object_ref();
        self.check_gate(&r)?;
        let api = dynamic_api(self.client.clone(), r.kind, &r.namespace);
        let body = to_dynamic(&obj)?;
        let pp = PostParams { field_manager: Some(FIELD_MANAGER.to_string()), ..PostParams::default() };
        let result = self.block_on(with_retry(
            self.options.retry,
            Idempotency::Idempotent,
            &self.metrics,
            "update",
            || api.replace(&r.name, &pp, &body),
        ));
        self.finish_write("update", &r, result)
    }

    fn update_status(&mut self, obj: Object) -> Result<Object, StoreError> {
        let r = obj.object_ref();
        self.check_gate(&r)?;
        let pod_group = self.pod_group_of(&r);
        let api = dynamic_api(self.client.clone(), r.kind, &r.namespace);
        let desired_json = obj.to_json();
        let desired = desired_json.get("status").cloned();
        let base = self.shared.lock().get(&r).and_then(|o| o.to_json().get("status").cloned());
        let has_rv = obj.metadata().resource_version.as_deref().is_some_and(|s| !s.is_empty());
        let first = to_dynamic(&obj)?;
        let pp = PostParams { field_manager: Some(FIELD_MANAGER.to_string()), ..PostParams::default() };
        let retry = self.options.retry;
        let metrics = self.metrics.clone();

        let result = self.block_on(async {
            // Re-reads the object and re-applies the caller's change on it.
            let refresh = || async {
                let fresh =
                    with_retry(retry, Idempotency::Idempotent, &metrics, "get", || api.get(&r.name)).await?;
                let mut fresh_json = serde_json::to_value(&fresh).map_err(kube::Error::SerdeError)?;
                let merged = merge_status(base.as_ref(), desired.as_ref(), fresh_json.get("status"));
                if let Some(map) = fresh_json.as_object_mut() {
                    map.insert("status".to_string(), merged);
                }
                serde_json::from_value::<kube::core::DynamicObject>(fresh_json)
                    .map_err(kube::Error::SerdeError)
            };
            let mut body = if has_rv { first } else { refresh().await? };
            let mut attempt = 1;
            loop {
                let result = with_retry(retry, Idempotency::Idempotent, &metrics, "update_status", || {
                    api.replace_status(&r.name, &pp, &body)
                })
                .await;
                match result {
                    Err(kube::Error::Api(s)) if s.code == 409 && attempt < STATUS_UPDATE_ATTEMPTS => {
                        tracing::debug!(
                            object = %r,
                            pod_group = pod_group.as_deref(),
                            attempt,
                            "status update conflict; retrying on a fresh copy",
                        );
                        attempt += 1;
                        body = refresh().await?;
                    }
                    other => return other,
                }
            }
        });
        self.finish_write("update_status", &r, result)
    }

    fn merge_patch(&mut self, r: &ObjectRef, patch: &serde_json::Value) -> Result<Object, StoreError> {
        self.check_gate(r)?;
        let api = dynamic_api(self.client.clone(), r.kind, &r.namespace);
        let pp = PatchParams { field_manager: Some(FIELD_MANAGER.to_string()), ..PatchParams::default() };
        let patch = Patch::Merge(patch);
        let result = self.block_on(with_retry(
            self.options.retry,
            Idempotency::Idempotent,
            &self.metrics,
            "patch",
            || api.patch(&r.name, &pp, &patch),
        ));
        self.finish_write("patch", r, result)
    }

    fn delete(&mut self, r: &ObjectRef) -> Result<(), StoreError> {
        self.check_gate(r)?;
        let uid = self.shared.lock().get(r).and_then(|o| o.metadata().uid.clone());
        let api = dynamic_api(self.client.clone(), r.kind, &r.namespace);
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            preconditions: uid.map(|uid| Preconditions { uid: Some(uid), resource_version: None }),
            ..DeleteParams::default()
        };
        let result = self.block_on(with_retry(
            self.options.retry,
            Idempotency::Idempotent,
            &self.metrics,
            "delete",
            || api.delete(&r.name, &dp),
        ));
        self.count_request("delete", r.kind, &result.as_ref().map(|_| ()));
        match result {
            Ok(either) => {
                tracing::info!(object = %r, pod_group = self.pod_group_of(r).as_deref(), "deleted");
                if let either::Either::Left(still_there) = either {
                    // Graceful deletion: the object is terminating; the watch reports its end.
                    if let Ok(obj) = from_dynamic(r.kind, still_there) {
                        self.remember(&obj);
                    }
                }
                Ok(())
            }
            Err(e) => Err(store_error(r, &e)),
        }
    }

    fn bind(&mut self, namespace: &str, name: &str, uid: &str, node: &str) -> Result<(), StoreError> {
        let r = ObjectRef::new(Kind::Pod, namespace, name);
        self.check_gate(&r)?;
        let pod_group = self.pod_group_of(&r);
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(namespace.to_string()),
                uid: (!uid.is_empty()).then(|| uid.to_string()),
                ..ObjectMeta::default()
            },
            target: ObjectReference {
                api_version: Some("v1".to_string()),
                kind: Some("Node".to_string()),
                name: Some(node.to_string()),
                ..ObjectReference::default()
            },
        };
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let pp = PostParams { field_manager: Some(FIELD_MANAGER.to_string()), ..PostParams::default() };
        let start = Instant::now();
        // Never retried: if the answer was lost, the pod may be bound already; the watch
        // tells, and the engine requeues the pod through `binding_failed` meanwhile.
        let result: Result<Status, kube::Error> =
            self.block_on(api.create_subresource::<Binding, Status>("binding", name, &pp, &binding));
        let elapsed = start.elapsed().as_secs_f64();
        self.count_request("bind", Kind::Pod, &result.as_ref().map(|_| ()));
        let outcome = match &result {
            Ok(s) if s.is_failure() => "error",
            Ok(_) => "ok",
            Err(kube::Error::Api(s)) if s.code == 409 => "conflict",
            Err(kube::Error::Api(s)) if s.code == 404 => "not_found",
            Err(_) => "error",
        };
        self.metrics.observe(BINDING_DURATION, &[("result", outcome)], elapsed);
        match result {
            Ok(s) if s.is_failure() => {
                let e = kube::Error::Api(Box::new(s));
                tracing::warn!(
                    pod = %format!("{namespace}/{name}"),
                    pod_group = pod_group.as_deref(),
                    node,
                    error = %e,
                    "binding failed",
                );
                Err(store_error(&r, &e))
            }
            Ok(_) => {
                tracing::info!(
                    pod = %format!("{namespace}/{name}"),
                    pod_group = pod_group.as_deref(),
                    node,
                    "bound",
                );
                Ok(())
            }
            Err(e) => {
                let transient = is_transient(&e, Idempotency::Idempotent);
                tracing::warn!(
                    pod = %format!("{namespace}/{name}"),
                    pod_group = pod_group.as_deref(),
                    node,
                    error = %e,
                    transient,
                    "binding failed",
                );
                Err(store_error(&r, &e))
            }
        }
    }

    fn record_event(&mut self, event: EventRecord) {
        {
            let mut recent = self.recent_events.lock().unwrap_or_else(|p| p.into_inner());
            if recent.len() >= self.options.recent_events.max(1) {
                recent.pop_front();
            }
            recent.push_back(event.clone());
        }
        if self.gate.as_ref().is_some_and(|g| !g.is_leader()) {
            return;
        }
        let uid = self.shared.lock().get(&event.regarding).and_then(|o| o.metadata().uid.clone());
        if let Err(e) = self.event_tx.try_send((event, uid)) {
            tracing::debug!(error = %e, "event queue full; dropping an event");
            self.metrics.inc_counter(EVENTS_DROPPED, &[("cause", "queue_full")], 1);
        }
    }

    fn events(&self) -> Vec<EventRecord> {
        self.recent_events.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect()
    }

    fn watch_since(&self, after: u64) -> Vec<WatchEvent> {
        self.shared.lock().watch_since(after)
    }
}

/// Feeds one kind's watch into the cache until the task is aborted.
async fn reflect<K: KindType>(client: Client, shared: Arc<Shared>, metrics: Arc<Metrics>) {
    let kind = K::KIND;
    let api: Api<K> = Api::all(client);
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut synced_once = false;
    while let Some(item) = stream.next().await {
        match item {
            Ok(WatcherEvent::Init) => shared.update(|c| c.begin_relist(kind)),
            Ok(WatcherEvent::InitApply(obj)) => shared.update(|c| c.relist_item(slimmed(obj))),
            Ok(WatcherEvent::InitDone) => {
                let outcome = shared.update(|c| c.finish_relist(kind));
                metrics.inc_counter(RELISTS, &[("kind", kind.name())], 1);
                for (n, t) in
                    [(outcome.added, "added"), (outcome.modified, "modified"), (outcome.deleted, "deleted")]
                {
                    if n > 0 {
                        metrics.inc_counter(WATCH_EVENTS, &[("kind", kind.name()), ("type", t)], n as u64);
                    }
                }
                if synced_once {
                    tracing::info!(
                        %kind,
                        added = outcome.added,
                        modified = outcome.modified,
                        deleted = outcome.deleted,
                        "relisted",
                    );
                } else {
                    synced_once = true;
                    tracing::info!(%kind, objects = outcome.added, "listed");
                }
            }
            Ok(WatcherEvent::Apply(obj)) => {
                for change in shared.update(|c| c.apply(slimmed(obj), Source::Watch)) {
                    let t = match change {
                        placer_cluster::WatchEventKind::Added => "added",
                        placer_cluster::WatchEventKind::Modified => "modified",
                        placer_cluster::WatchEventKind::Deleted => "deleted",
                    };
                    metrics.inc_counter(WATCH_EVENTS, &[("kind", kind.name()), ("type", t)], 1);
                }
            }
            Ok(WatcherEvent::Delete(obj)) => {
                if shared.update(|c| c.delete(slimmed(obj))) {
                    metrics.inc_counter(WATCH_EVENTS, &[("kind", kind.name()), ("type", "deleted")], 1);
                }
            }
            Err(e) => {
                let hint = match &e {
                    watcher::Error::InitialListFailed(kube::Error::Api(s)) if s.code == 404 => {
                        " (is the API served? PodGroups need scheduling.k8s.io/v1alpha2 on the API server)"
                    }
                    watcher::Error::InitialListFailed(kube::Error::Api(s)) if s.code == 403 => {
                        " (check the ClusterRole: list and watch are needed)"
                    }
                    _ => "",
                };
                tracing::warn!(%kind, error = %e, "watch error{hint}; retrying with backoff");
            }
        }
    }
    tracing::debug!(%kind, "watcher ended");
}

/// Drops what no controller reads and costs memory per object: `managedFields` (often
/// larger than the rest of a pod) and the last-applied annotation of `kubectl apply`.
fn slim(obj: &mut Object) {
    let meta = obj.metadata_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

fn slimmed<K: KindType>(obj: K) -> Object {
    let mut obj = obj.into_object();
    slim(&mut obj);
    obj
}

/// Publishes events through kube's `Recorder` (one per reporting controller): repeats
/// within a few minutes become a series on one Event object.
async fn publish_events(
    client: Client,
    instance: String,
    mut rx: mpsc::Receiver<(EventRecord, Option<String>)>,
    metrics: Arc<Metrics>,
) {
    let mut recorders: std::collections::HashMap<String, Recorder> = std::collections::HashMap::new();
    while let Some((record, uid)) = rx.recv().await {
        let controller = reporting_controller(&record.reporter);
        let recorder = recorders
            .entry(controller.clone())
            .or_insert_with(|| {
                Recorder::new(client.clone(), Reporter { controller, instance: Some(instance.clone()) })
            })
            .clone();
        let regarding = object_reference(&record.regarding, uid);
        let event = KubeEvent {
            type_: if record.type_ == "Warning" { EventType::Warning } else { EventType::Normal },
            reason: truncate(&record.reason, 128),
            note: Some(truncate(&record.note, 1024)),
            action: truncate(&event_action(&record.reason), 128),
            secondary: None,
        };
        if let Err(e) = recorder.publish(&event, &regarding).await {
            metrics.inc_counter(EVENTS_DROPPED, &[("cause", "api_error")], 1);
            tracing::debug!(
                regarding = %record.regarding,
                reason = %record.reason,
                error = %e,
                "could not publish an event",
            );
        }
    }
}

/// `reportingController` must be a domain-prefixed path: `placer-scheduler` becomes
/// `placer.dev/placer-scheduler`.
pub(crate) fn reporting_controller(reporter: &str) -> String {
    let reporter = if reporter.is_empty() { "placer" } else { reporter };
    if reporter.contains('/') {
        reporter.to_string()
    } else {
        format!("placer.dev/{reporter}")
    }
}

/// The events.k8s.io `action` for an event reason.
pub(crate) fn event_action(reason: &str) -> String {
    match reason {
        "Scheduled" => "Binding".to_string(),
        "FailedScheduling" => "Scheduling".to_string(),
        "Preempted" => "Preempting".to_string(),
        "Nominated" => "Nominating".to_string(),
        "" => "Reconciling".to_string(),
        other => other.to_string(),
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

pub(crate) fn object_reference(r: &ObjectRef, uid: Option<String>) -> ObjectReference {
    ObjectReference {
        api_version: Some(r.kind.api_version().to_string()),
        kind: Some(r.kind.name().to_string()),
        name: Some(r.name.clone()),
        namespace: (!r.namespace.is_empty()).then(|| r.namespace.clone()),
        uid,
        ..ObjectReference::default()
    }
}

/// Used by `CacheStatus` consumers in metrics: sets the synced gauge.
pub(crate) fn export_synced(metrics: &Metrics, status: &CacheStatus) {
    metrics.set_gauge(CACHE_SYNCED, &[], if status.synced() { 1.0 } else { 0.0 });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reporters_become_domain_prefixed_controllers() {
        assert_eq!(reporting_controller("placer-scheduler"), "placer.dev/placer-scheduler");
        assert_eq!(reporting_controller("example.com/x"), "example.com/x");
        assert_eq!(reporting_controller(""), "placer.dev/placer");
    }

    #[test]
    fn event_fields_respect_api_limits() {
        assert_eq!(event_action("FailedScheduling"), "Scheduling");
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("abc", 10), "abc");
    }

    #[test]
    fn cached_objects_drop_managed_fields_and_last_applied_configuration() {
        use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
        let mut pod = Pod::default();
        pod.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        pod.metadata.annotations = Some(
            [
                ("kubectl.kubernetes.io/last-applied-configuration".to_string(), "{}".to_string()),
                ("keep".to_string(), "me".to_string()),
            ]
            .into(),
        );
        let obj = slimmed(pod);
        assert!(obj.metadata().managed_fields.is_none());
        assert_eq!(obj.metadata().annotations.as_ref().unwrap().keys().collect::<Vec<_>>(), vec!["keep"]);
    }

    #[test]
    fn the_clock_never_goes_backwards() {
        let c = Clock::default();
        c.last.store(u64::MAX - 1, Ordering::SeqCst);
        assert_eq!(c.now_ms(), u64::MAX - 1);
    }
}
