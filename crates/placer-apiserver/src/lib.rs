//! `placer cluster`: the embedded cluster behind the Kubernetes REST API, on a loopback
//! address, faithful enough for the real `kubectl` and for `placer serve` (kube-rs) to
//! work against it unchanged. It is a simulator and a test bed, **not a production API
//! server**: no authentication or authorization, no TLS, no admission webhooks, no
//! OpenAPI schemas, one process, one lock.
//!
//! * [`resources`]: what is served (every kind the store holds); [`discovery`]: `/api`,
//!   `/apis`, group/version resource lists, aggregated discovery, `/version`.
//! * [`request`]: paths and query strings; [`crud`]: the verbs, each write through the
//!   store's own calls (so its admission applies) plus [`admission`] (namespace
//!   lifecycle, pod defaults, priority); [`patch`]: JSON, merge and strategic merge
//!   patches; [`apply`]: server-side apply and `managedFields`; [`protobuf`]: the few
//!   protobuf bodies recent kubectl sends; [`watch`]: watches with
//!   bookmarks and 410 Gone; [`table`]: `kubectl get` columns; [`errors`]: `Status`.
//! * [`state`]: the store behind one lock, its virtual clock on the wall clock (with a
//!   speed factor), notifications; [`control`]: the controller thread (Job, CronJob, the
//!   simulated kubelet, optionally the scheduler); [`events`]: recorded events as Event
//!   objects; [`persist`]: the state file (snapshot + journal).
//!
//! This crate and `placer-kube` are the only ones that depend on tokio and axum; it does
//! not depend on kube.

pub mod admission;
pub mod apply;
pub mod control;
pub mod convert;
pub mod crud;
pub mod discovery;
pub mod errors;
pub mod events;
pub mod patch;
pub mod persist;
pub mod protobuf;
pub mod request;
pub mod resources;
pub mod selectors;
pub mod server;
pub mod state;
pub mod table;
pub mod watch;

use std::collections::{BTreeSet, HashSet};
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use placer_api::gates::FeatureGates;
use placer_api::k8s::api::core::v1::Namespace;
use placer_cluster::embedded::EmbeddedCluster;
use placer_cluster::{ClusterStore, Kind, Object, ObjectRef};
use placer_engine::SchedulerConfig;

pub use control::ControlOptions;
pub use errors::ApiError;
pub use state::Shared;

/// How `placer cluster` runs.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Address to listen on (port 0: any free port).
    pub listen: SocketAddr,
    /// `Some`: run the embedded scheduler with this configuration.
    pub scheduler: Option<SchedulerConfig>,
    /// The cluster's feature gates (admission, Job controller).
    pub gates: FeatureGates,
    /// Virtual time runs this many times as fast as the wall clock.
    pub speed: f64,
    /// Added to every API request before it is handled.
    pub latency: Duration,
    /// Watch log entries kept (older resourceVersions answer 410 Gone).
    pub watch_cache_size: usize,
    /// Events are deleted this long after they were last seen.
    pub event_ttl: Duration,
    /// The state file: restored from when it exists, kept current otherwise.
    pub state_file: Option<PathBuf>,
    /// Where to write a kubeconfig for the server.
    pub kubeconfig: Option<PathBuf>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            scheduler: None,
            gates: FeatureGates::default(),
            speed: 1.0,
            latency: Duration::ZERO,
            watch_cache_size: 10_000,
            event_ttl: Duration::from_secs(3600),
            state_file: None,
            kubeconfig: None,
        }
    }
}

/// The initial cluster (when no state file is restored).
#[derive(Debug, Default)]
pub struct Setup {
    pub store: EmbeddedCluster,
    /// Pods whose phase the scenario fixed (the simulated kubelet leaves them alone).
    pub frozen: HashSet<String>,
}

/// Why the cluster could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    State(#[from] persist::PersistError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Setup(String),
}

/// A kubeconfig for a server at `http://{addr}` (context, cluster and user `placer`).
pub fn kubeconfig(addr: SocketAddr) -> String {
    format!(
        "apiVersion: v1\nkind: Config\n\
         # placer cluster: an embedded simulator, not a production API server (no TLS, no authentication)\n\
         clusters:\n- name: placer\n  cluster:\n    server: http://{addr}\n\
         users:\n- name: placer\n  user:\n    token: placer-cluster\n\
         contexts:\n- name: placer\n  context:\n    cluster: placer\n    user: placer\n    namespace: default\n\
         current-context: placer\n"
    )
}

/// Creates the system namespaces and the namespace of every stored namespaced object.
fn ensure_namespaces(store: &mut EmbeddedCluster) -> Result<(), String> {
    let mut wanted: BTreeSet<String> = admission::SYSTEM_NAMESPACES.iter().map(|s| s.to_string()).collect();
    for kind in Kind::ALL.into_iter().filter(|k| k.namespaced()) {
        for o in store.list(kind) {
            wanted.extend(o.metadata().namespace.clone());
        }
    }
    for name in wanted {
        if store.get(&ObjectRef::new(Kind::Namespace, "", name.clone())).is_some() {
            continue;
        }
        let mut ns = Namespace::default();
        ns.metadata.name = Some(name.clone());
        let mut obj = Object::Namespace(ns);
        admission::prepare_create(store, &mut obj).map_err(|e| e.message)?;
        store.create(obj).map_err(|e| format!("namespace {name}: {e}"))?;
    }
    Ok(())
}

/// Nodes of the starting cluster report what a kubelet would (see
/// [`admission::simulated_node_info`]).
fn register_nodes(store: &mut EmbeddedCluster) {
    for obj in store.list(Kind::Node) {
        let Object::Node(n) = obj else { continue };
        let mut n = std::sync::Arc::unwrap_or_clone(n);
        let before = n.status.clone();
        admission::simulated_node_info(&mut n);
        if n.status != before {
            n.metadata.resource_version = None;
            if let Err(e) = store.update_status(Object::Node(n.into())) {
                tracing::warn!(error = %e, "cannot register a node");
            }
        }
    }
}

/// The API server's validation and the simulator's admission plugins
/// (DefaultTolerationSeconds, JobValidation, CronJobValidation): a client of `placer
/// cluster` is refused what `placer simulate` refuses, with the API server's 422 / 403.
fn admit_as_the_simulator(store: &mut EmbeddedCluster, gates: &FeatureGates) {
    store.enable_validation();
    placer_sim::add_admission_plugins(store, gates);
}

/// The store to serve: restored from the state file when it exists, else `setup` fills
/// an empty store that already validates and admits as the simulator's does.
/// Returns it with the frozen pods and the open journal.
fn initial_state(
    options: &ClusterOptions,
    setup: impl FnOnce(EmbeddedCluster) -> Result<Setup, String>,
) -> Result<(EmbeddedCluster, HashSet<String>, Option<persist::Journal>), StartError> {
    let restored = match &options.state_file {
        Some(path) if path.exists() => {
            let store = persist::Journal::load(path)?;
            tracing::info!(file = %path.display(), objects = store.len(), resource_version = store.resource_version(), "restored the cluster from its state file");
            Some(store)
        }
        _ => None,
    };
    let (mut store, frozen) = match restored {
        Some(mut store) => {
            admit_as_the_simulator(&mut store, &options.gates);
            (store, HashSet::new())
        }
        None => {
            let mut store = EmbeddedCluster::new();
            admit_as_the_simulator(&mut store, &options.gates);
            let s = setup(store).map_err(StartError::Setup)?;
            (s.store, s.frozen)
        }
    };
    ensure_namespaces(&mut store).map_err(StartError::Setup)?;
    register_nodes(&mut store);
    let journal = match &options.state_file {
        Some(path) => Some(persist::Journal::create(path, &store)?),
        None => None,
    };
    Ok((store, frozen, journal))
}

/// A running server: its address, and the way to stop it.
#[derive(Debug)]
pub struct Running {
    pub addr: SocketAddr,
    pub shared: Arc<Shared>,
}

/// Runs the cluster until `shutdown` completes: restores or builds the store, starts the
/// controller thread, listens, writes the kubeconfig, then calls `ready` with the
/// address. Needs a multi-threaded tokio runtime.
pub async fn run(
    options: ClusterOptions,
    setup: impl FnOnce(EmbeddedCluster) -> Result<Setup, String>,
    ready: impl FnOnce(&Running),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    let (store, frozen, journal) = initial_state(&options, setup)?;
    let start_ms = store.now_ms().max(state::wall_store_ms());
    let clock = state::Clock::new(start_ms, options.speed);
    let inner = state::Inner::new(store, events::EventRecorder::new("placer-cluster"), clock, journal);
    let shared = Arc::new(Shared::new(inner));

    let socket = if options.listen.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    };
    let listen_err = |source| StartError::Listen { addr: options.listen, source };
    let socket = socket.map_err(listen_err)?;
    socket.set_reuseaddr(true).map_err(listen_err)?;
    socket.bind(options.listen).map_err(listen_err)?;
    let listener = socket.listen(1024).map_err(listen_err)?;
    let addr = listener.local_addr().map_err(listen_err)?;
    if let Some(path) = &options.kubeconfig {
        write_kubeconfig(path, addr)?;
    }

    let control_options = ControlOptions {
        scheduler: options.scheduler.clone(),
        gates: options.gates.clone(),
        watch_cache_size: options.watch_cache_size.max(1),
        event_ttl_ms: options.event_ttl.as_millis() as u64,
        journal_limit: 50_000,
    };
    // The embedded scheduler's metrics (not served: `placer serve` has the /metrics of
    // a real deployment).
    let profile = options.scheduler.as_ref().and_then(|c| c.scheduler_names.first().cloned());
    let metrics = placer_sim::Metrics::new(
        profile.as_deref().unwrap_or("default-scheduler"),
        placer_sim::MetricsClock::Wall,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let controller_thread = {
        let shared = shared.clone();
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("placer-controllers".into())
            .spawn(move || {
                let controllers = control::controllers(&control_options, frozen, &metrics);
                control::run(shared, controllers, control_options, stop)
            })
            .map_err(|e| StartError::Setup(format!("cannot start the controller thread: {e}")))?
    };

    let app =
        Arc::new(server::App { shared: shared.clone(), latency: options.latency, address: addr.to_string() });
    ready(&Running { addr, shared: shared.clone() });
    let closing = shared.clone();
    let result = axum::serve(listener, server::router(app))
        .with_graceful_shutdown(async move {
            shutdown.await;
            closing.close();
        })
        .await;
    stop.store(true, Ordering::SeqCst);
    shared.control.notify_all();
    {
        // Wake the thread even if it waits without a write.
        let mut g = shared.lock();
        g.dirty = true;
        shared.control.notify_all();
    }
    let _ = controller_thread.join();
    if let Err(e) = result {
        tracing::error!(error = %e, "the HTTP server failed");
    }
    Ok(())
}

/// [`run`] on a multi-threaded runtime of its own (call it from a plain `main`).
pub fn run_blocking(
    options: ClusterOptions,
    setup: impl FnOnce(EmbeddedCluster) -> Result<Setup, String>,
    ready: impl FnOnce(&Running),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("placer-cluster")
        .build()
        .map_err(|e| StartError::Setup(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(run(options, setup, ready, shutdown))
}

fn write_kubeconfig(path: &Path, addr: SocketAddr) -> Result<(), StartError> {
    let err = |source| StartError::Kubeconfig { path: path.to_path_buf(), source };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, kubeconfig(addr)).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::core::v1::Pod;

    #[test]
    fn the_served_store_validates_and_admits_as_the_simulators() {
        let (mut store, _, _) =
            initial_state(&ClusterOptions::default(), |store| Ok(Setup { store, frozen: HashSet::new() }))
                .unwrap();
        assert!(store.validates());
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "-1"}}}]}
        }))
        .unwrap();
        let err = store.create(Object::Pod(pod.clone().into())).unwrap_err();
        assert!(err.to_string().contains("spec.containers[0].resources.requests[cpu]"), "{err}");
        // DefaultTolerationSeconds runs on create, as in the simulator.
        let mut ok = pod;
        ok.spec.as_mut().unwrap().containers[0].resources = None;
        let created = store.create(Object::Pod(ok.into())).unwrap();
        let Object::Pod(created) = created else { panic!("not a pod") };
        let tolerations = created.spec.clone().unwrap().tolerations.unwrap_or_default();
        assert!(tolerations.iter().any(|t| t.key.as_deref() == Some("node.kubernetes.io/not-ready")));
    }
}
