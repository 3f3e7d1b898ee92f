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
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy};
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::watcher::{self, Event as WatcherEvent};
use kube::{Api, Client};
use placer_api::k8s::api::batch::v1::Job;
use placer_api::k8s::api::core::v1::{Node, ObjectReference, Pod};
use placer_api::k8s::api::policy::v1::PodDisruptionBudget;
use placer_api::k8s::api::scheduling::v1::PriorityClass;
use placer_api::k8s::api::scheduling::v1alpha2::{PodGroup, Workload};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::Time;
use placer_api::k8s::jiff::Timestamp;
use placer_cluster::{ClusterStore, EventRecord, Kind, Object, ObjectRef, StoreError, WatchEvent};
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::cache::{Shared, Source, Wake};
use crate::dispatch::KubeDispatcher;
use crate::kinds::{dynamic_api, from_dynamic, to_dynamic, KindType};
use crate::leader::Leadership;
use crate::metrics::{Metrics, CACHE_SYNCED, EVENTS_DROPPED, RELISTS, WATCH_ERRORS, WATCH_EVENTS};
use crate::retry::{describe, jitter, store_error, with_retry, Idempotency, RetryPolicy};
use crate::writer::Writer;

/// Every kind `placer serve` may watch (CronJobs are not: Placer does not run CronJobs in
/// a real cluster); see [`watched_kinds`].
pub const WATCHED_KINDS: &[Kind] = &[
    Kind::Node,
    Kind::Pod,
    Kind::PodGroup,
    Kind::Workload,
    Kind::PriorityClass,
    Kind::PodDisruptionBudget,
    Kind::Job,
    Kind::Namespace,
    Kind::DeviceClass,
    Kind::ResourceSlice,
    Kind::ResourceClaim,
    Kind::ResourceClaimTemplate,
    Kind::PersistentVolumeClaim,
    Kind::PersistentVolume,
    Kind::StorageClass,
    Kind::CSINode,
    Kind::CSIDriver,
    Kind::CSIStorageCapacity,
    Kind::VolumeAttachment,
];

/// The kinds the scheduler reads (its base role allows exactly their list and watch):
/// Namespaces (their labels select pods for pod affinity's namespaceSelector) and, with the
/// DynamicResources plugin, DeviceClasses, ResourceSlices and ResourceClaims
/// (`resource.k8s.io/v1`, served by default since Kubernetes v1.34); with the volume
/// plugins, PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes and CSIDrivers.
pub const SCHEDULER_KINDS: &[Kind] = &[
    Kind::Node,
    Kind::Pod,
    Kind::PodGroup,
    Kind::PriorityClass,
    Kind::PodDisruptionBudget,
    Kind::Namespace,
    Kind::DeviceClass,
    Kind::ResourceSlice,
    Kind::ResourceClaim,
    Kind::PersistentVolumeClaim,
    Kind::PersistentVolume,
    Kind::StorageClass,
    Kind::CSINode,
    Kind::CSIDriver,
    Kind::CSIStorageCapacity,
    Kind::VolumeAttachment,
];

/// The kinds `placer serve` watches: the scheduler's, plus Jobs and Workloads when the Job
/// integration runs, plus ResourceClaimTemplates when Placer's ResourceClaim controller
/// runs.
pub fn watched_kinds(job_controller: bool, resource_claim_controller: bool) -> Vec<Kind> {
    let mut kinds = SCHEDULER_KINDS.to_vec();
    if job_controller {
        kinds.extend([Kind::Workload, Kind::Job]);
    }
    if resource_claim_controller {
        kinds.push(Kind::ResourceClaimTemplate);
    }
    kinds
}

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
    /// The API server's URL, named in messages.
    pub server: String,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            retry: RetryPolicy::default(),
            instance: std::env::var("POD_NAME").unwrap_or_else(|_| "placer".to_string()),
            recent_events: 1000,
            event_queue: 4096,
            server: String::new(),
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
            let server: Arc<str> = self.options.server.clone().into();
            let task = match kind {
                Kind::Node => self.handle.spawn(reflect::<Node>(client, shared, metrics, server)),
                Kind::Pod => self.handle.spawn(reflect::<Pod>(client, shared, metrics, server)),
                Kind::PodGroup => self.handle.spawn(reflect::<PodGroup>(client, shared, metrics, server)),
                Kind::Workload => self.handle.spawn(reflect::<Workload>(client, shared, metrics, server)),
                Kind::Job => self.handle.spawn(reflect::<Job>(client, shared, metrics, server)),
                Kind::CronJob => {
                    use placer_api::k8s::api::batch::v1::CronJob;
                    self.handle.spawn(reflect::<CronJob>(client, shared, metrics, server))
                }
                Kind::PriorityClass => {
                    self.handle.spawn(reflect::<PriorityClass>(client, shared, metrics, server))
                }
                Kind::PodDisruptionBudget => {
                    self.handle.spawn(reflect::<PodDisruptionBudget>(client, shared, metrics, server))
                }
                Kind::Namespace => {
                    use placer_api::k8s::api::core::v1::Namespace;
                    self.handle.spawn(reflect::<Namespace>(client, shared, metrics, server))
                }
                Kind::Event => {
                    use placer_api::k8s::api::core::v1::Event;
                    self.handle.spawn(reflect::<Event>(client, shared, metrics, server))
                }
                Kind::Lease => {
                    use placer_api::k8s::api::coordination::v1::Lease;
                    self.handle.spawn(reflect::<Lease>(client, shared, metrics, server))
                }
                Kind::DeviceClass
                | Kind::ResourceSlice
                | Kind::ResourceClaim
                | Kind::ResourceClaimTemplate => {
                    use placer_api::k8s::api::resource::v1 as resource;
                    match kind {
                        Kind::DeviceClass => self
                            .handle
                            .spawn(reflect::<resource::DeviceClass>(client, shared, metrics, server)),
                        Kind::ResourceSlice => self
                            .handle
                            .spawn(reflect::<resource::ResourceSlice>(client, shared, metrics, server)),
                        Kind::ResourceClaim => self
                            .handle
                            .spawn(reflect::<resource::ResourceClaim>(client, shared, metrics, server)),
                        _ => self.handle.spawn(reflect::<resource::ResourceClaimTemplate>(
                            client, shared, metrics, server,
                        )),
                    }
                }
                Kind::PersistentVolumeClaim | Kind::PersistentVolume => {
                    use placer_api::k8s::api::core::v1 as core;
                    match kind {
                        Kind::PersistentVolumeClaim => {
                            self.handle.spawn(reflect::<core::PersistentVolumeClaim>(
                                client, shared, metrics, server,
                            ))
                        }
                        _ => self
                            .handle
                            .spawn(reflect::<core::PersistentVolume>(client, shared, metrics, server)),
                    }
                }
                Kind::StorageClass
                | Kind::CSINode
                | Kind::CSIDriver
                | Kind::CSIStorageCapacity
                | Kind::VolumeAttachment => {
                    use placer_api::k8s::api::storage::v1 as storage;
                    match kind {
                        Kind::StorageClass => self
                            .handle
                            .spawn(reflect::<storage::StorageClass>(client, shared, metrics, server)),
                        Kind::CSINode => {
                            self.handle.spawn(reflect::<storage::CSINode>(client, shared, metrics, server))
                        }
                        Kind::CSIDriver => {
                            self.handle.spawn(reflect::<storage::CSIDriver>(client, shared, metrics, server))
                        }
                        Kind::CSIStorageCapacity => self
                            .handle
                            .spawn(reflect::<storage::CSIStorageCapacity>(client, shared, metrics, server)),
                        _ => self
                            .handle
                            .spawn(reflect::<storage::VolumeAttachment>(client, shared, metrics, server)),
                    }
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

    /// The async writer over this store's client, cache and gate.
    pub(crate) fn writer(&self) -> Writer {
        Writer {
            client: self.client.clone(),
            shared: self.shared.clone(),
            metrics: self.metrics.clone(),
            retry: self.options.retry,
            gate: self.gate.clone(),
            server: self.options.server.clone().into(),
        }
    }

    /// A dispatcher that binds and writes status off the scheduling thread, at most
    /// `concurrency` bindings at once (see [`crate::dispatch`]).
    pub fn dispatcher(&self, concurrency: usize) -> KubeDispatcher {
        KubeDispatcher::new(self.writer(), self.handle.clone(), concurrency)
    }

    fn check_gate(&self, what: &ObjectRef) -> Result<(), StoreError> {
        self.writer().check_gate(what)
    }

    fn count_request(&self, verb: &'static str, kind: Kind, result: &Result<(), &kube::Error>) {
        self.writer().count_request(verb, kind, result)
    }

    /// `namespace/name` of the PodGroup an object is or belongs to (for logs).
    fn pod_group_of(&self, r: &ObjectRef) -> Option<String> {
        self.writer().pod_group_of(r)
    }

    fn remember(&self, obj: &Object) {
        self.writer().remember(obj)
    }

    fn finish_write(
        &self,
        verb: &'static str,
        r: &ObjectRef,
        result: Result<kube::core::DynamicObject, kube::Error>,
    ) -> Result<Object, StoreError> {
        self.writer().finish_write(verb, r, result)
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
        let base = self.shared.lock().get(&obj.object_ref()).and_then(|o| o.to_json().get("status").cloned());
        let writer = self.writer();
        self.block_on(writer.update_status(obj, base))
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
        // Called on the scheduling thread (no dispatcher): no retry, as before; a pod whose
        // binding failed goes back to the queue.
        let writer = self.writer();
        self.block_on(writer.bind(namespace, name, uid, node, RetryPolicy::none()))
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

/// Backoff of a watch after errors: exponential from [`WATCH_BACKOFF_MIN`] to
/// [`WATCH_BACKOFF_MAX`] with jitter, reset once the watch delivers again.
pub const WATCH_BACKOFF_MIN: Duration = Duration::from_millis(800);
pub const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The wait after the `failures`-th consecutive watch error (1-based), before jitter.
pub fn watch_backoff(failures: u32) -> Duration {
    let factor = 1u32.checked_shl(failures.saturating_sub(1).min(16)).unwrap_or(u32::MAX);
    WATCH_BACKOFF_MIN.saturating_mul(factor).min(WATCH_BACKOFF_MAX)
}

/// Whether the `failures`-th consecutive error of a watch is logged at warning level: the
/// first, then at powers of two (a server down for an hour gives a dozen lines per kind,
/// not thousands); the others go to debug.
pub fn watch_error_is_loud(failures: u32) -> bool {
    failures.is_power_of_two()
}

/// Feeds one kind's watch into the cache until the task is aborted.
async fn reflect<K: KindType>(client: Client, shared: Arc<Shared>, metrics: Arc<Metrics>, server: Arc<str>) {
    let kind = K::KIND;
    let api: Api<K> = Api::all(client);
    let url = api.resource_url().to_string();
    let stream = watcher::watcher(api, watcher::Config::default());
    futures::pin_mut!(stream);
    let mut synced_once = false;
    let mut failures: u32 = 0;
    while let Some(item) = stream.next().await {
        // `Init` starts a relist before any request: only an answer proves the server is back.
        let answered = matches!(
            item,
            Ok(WatcherEvent::InitApply(_)
                | WatcherEvent::InitDone
                | WatcherEvent::Apply(_)
                | WatcherEvent::Delete(_))
        );
        if answered && failures > 0 {
            tracing::info!(%kind, failures, "watch of {url} on {server} recovered");
            failures = 0;
        }
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
                failures = failures.saturating_add(1);
                metrics.inc_counter(WATCH_ERRORS, &[("kind", kind.name())], 1);
                let wait = jitter(watch_backoff(failures));
                let error = match &e {
                    watcher::Error::InitialListFailed(e)
                    | watcher::Error::WatchStartFailed(e)
                    | watcher::Error::WatchFailed(e) => describe(e),
                    watcher::Error::WatchError(s) => crate::retry::clean_text(&s.message),
                    other => crate::retry::clean_text(&other.to_string()),
                };
                if watch_error_is_loud(failures) {
                    tracing::warn!(
                        %kind,
                        failures,
                        retry_in_ms = wait.as_millis() as u64,
                        "watch of {url} on {server} failed: {error}{hint}",
                    );
                } else {
                    tracing::debug!(%kind, failures, "watch of {url} on {server} failed: {error}");
                }
                tokio::time::sleep(wait).await;
            }
        }
    }
    tracing::debug!(%kind, "watcher ended");
}

/// Drops what no controller reads and costs memory per object: `managedFields` (often
/// larger than the rest of a pod) and the last-applied annotation of `kubectl apply`.
pub(crate) fn slim(obj: &mut Object) {
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
    fn watch_errors_back_off_exponentially_and_are_logged_sparsely() {
        let waits: Vec<u64> = (1..=8).map(|n| watch_backoff(n).as_millis() as u64).collect();
        assert_eq!(waits, vec![800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
        let loud: Vec<u32> = (1..=40).filter(|n| watch_error_is_loud(*n)).collect();
        assert_eq!(loud, vec![1, 2, 4, 8, 16, 32]);
    }

    #[test]
    fn the_clock_never_goes_backwards() {
        let c = Clock::default();
        c.last.store(u64::MAX - 1, Ordering::SeqCst);
        assert_eq!(c.now_ms(), u64::MAX - 1);
    }
}
