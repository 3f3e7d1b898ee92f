//! `placer serve`: the scheduler as a secondary scheduler of a real cluster.
//!
//! Start-up: read and validate the configuration file, connect to the API server, start
//! the watchers and the HTTP endpoints, wait until every watched kind is listed, start
//! leader election (if configured) and the scheduling thread. Shutdown (SIGTERM or
//! Ctrl-C): stop the scheduling thread (its write in flight completes, no new one starts),
//! then release the lease, then stop HTTP and the watchers.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use placer_controllers::job::{JobController, JobControllerConfig, PodLifecycle};
use placer_controllers::resourceclaim::ResourceClaimController;
use placer_controllers::scheduler::SchedulerController;
use tokio::sync::{oneshot, watch};

use crate::config::{self, ServeSettings, JOB_MANAGED_BY};
use crate::dispatch::KubeDispatcher;
use crate::http::{self, Health};
use crate::leader::{self, Leadership};
use crate::metrics::{Metrics, LEADER};
use crate::ratelimit::RateLimitLayer;
use crate::runloop::{self, ControllerFactory, LoopTiming, SchedulingLoop, Slot, View};
use crate::store::{watched_kinds, KubeStore, StoreOptions};

/// Command-line options of `placer serve`.
#[derive(Debug, Clone, Default)]
pub struct ServeConfig {
    /// The configuration file (YAML, see [`crate::config`]).
    pub config_file: PathBuf,
    /// A kubeconfig file; default: `$KUBECONFIG` or `~/.kube/config` when present, else the
    /// in-cluster service account.
    pub kubeconfig: Option<PathBuf>,
    /// A context of the kubeconfig; default: its current context.
    pub context: Option<String>,
    /// Log JSON lines instead of text.
    pub log_json: bool,
}

/// Runs `placer serve` until SIGTERM or Ctrl-C. Builds its own tokio runtime (call it
/// from a plain `main`).
pub fn serve(options: ServeConfig) -> anyhow::Result<()> {
    init_logging(options.log_json);
    install_crypto_provider();
    let settings = config::load(&options.config_file)?;
    for warning in &settings.warnings {
        tracing::warn!(file = %options.config_file.display(), "{warning}");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("placer-rt")
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let (client, server) = connect(&options, settings.rate_limit).await?;
        let store_options = StoreOptions { server, ..StoreOptions::default() };
        run(client, settings, store_options, shutdown_signal()).await
    })
}

/// Sets up `tracing` output on stderr: text, or JSON lines (records about a pod or a
/// PodGroup carry a `pod_group` field). The level comes from `RUST_LOG` (default `info`).
/// Text carries ANSI colour codes only when stderr is a terminal. Does nothing if a
/// subscriber is already installed.
pub fn init_logging(json: bool) {
    use tracing_subscriber::EnvFilter;
    // kube's client logs every failed request at error level; Placer's own messages say
    // the same once, with the URL and server, under a backoff.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,kube_client::client::builder=off"));
    let result = if json {
        tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .try_init()
    } else {
        // Colour codes only on a terminal: in a pod (`kubectl logs`) or a log file they
        // would be noise around every field.
        use std::io::IsTerminal;
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .try_init()
    };
    let _ = result;
}

/// Installs rustls's ring provider for the process (kube uses ring; a dependency enabling
/// aws-lc-rs as well would otherwise make the first TLS connection panic).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A client for the configured cluster, every request paced by `rate_limit` (qps, burst;
/// `None`: unlimited), and the API server's URL.
pub async fn connect(
    options: &ServeConfig,
    rate_limit: Option<(f64, u32)>,
) -> anyhow::Result<(Client, String)> {
    let config = match &options.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            let opts = KubeConfigOptions { context: options.context.clone(), ..KubeConfigOptions::default() };
            kube::Config::from_custom_kubeconfig(kubeconfig, &opts)
                .await
                .with_context(|| format!("cannot use kubeconfig {}", path.display()))?
        }
        None if options.context.is_some() => {
            let opts = KubeConfigOptions { context: options.context.clone(), ..KubeConfigOptions::default() };
            kube::Config::from_kubeconfig(&opts).await.context("cannot load the kubeconfig")?
        }
        None => kube::Config::infer().await.context(
            "cannot find a cluster: no kubeconfig ($KUBECONFIG or ~/.kube/config) and not in a pod",
        )?,
    };
    client_for(config, rate_limit)
}

/// A client for `config` whose requests are paced by `rate_limit` (qps, burst; `None`:
/// unlimited), and the API server's URL.
pub fn client_for(config: kube::Config, rate_limit: Option<(f64, u32)>) -> anyhow::Result<(Client, String)> {
    let server = config.cluster_url.to_string();
    let client = kube::client::ClientBuilder::try_from(config)
        .with_context(|| format!("cannot create the Kubernetes client for {server}"))?
        .with_layer(&RateLimitLayer::new(rate_limit))
        .build();
    Ok((client, server))
}

/// Completes on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => tracing::info!("interrupted: shutting down"),
        _ = term => tracing::info!("SIGTERM: shutting down"),
    }
}

/// The controllers of one leadership term.
fn controller_factory(
    settings: &ServeSettings,
    metrics: Arc<Metrics>,
    dispatcher: KubeDispatcher,
) -> ControllerFactory {
    let scheduler = settings.scheduler.clone();
    let job_controller = settings.job_controller;
    let claim_controller = settings.resource_claim_controller;
    Box::new(move || {
        let observer = Box::new(metrics.observer());
        let mut driver =
            SchedulerController::with_dispatcher(scheduler.clone(), observer, Box::new(dispatcher.fresh()));
        // Kueue-mode preemption evicts (suspends, then requeues) only the Jobs our own Job
        // controller manages; without it victims' pods are deleted.
        driver.set_job_eviction(job_controller.then(|| JOB_MANAGED_BY.to_string()));
        let mut slots = vec![Slot { controller: Box::new(driver), view: View::Full }];
        if job_controller {
            // Real kubelets run the pods; only Jobs that opted in are ours. The view hides the
            // others as well, so no Job is ever handled by two controllers.
            let config = JobControllerConfig {
                pod_lifecycle: PodLifecycle::External,
                managed_by: JOB_MANAGED_BY.to_string(),
            };
            slots.push(Slot {
                controller: Box::new(JobController::with_config(scheduler.gates.clone(), config)),
                view: View::ManagedJobs(JOB_MANAGED_BY),
            });
        }
        if claim_controller {
            // Only where kube-controller-manager's resourceclaim-controller does not run:
            // two controllers would each generate a claim for the same pod.
            slots.push(Slot {
                controller: Box::new(ResourceClaimController::new(&scheduler.gates)),
                view: View::Full,
            });
        }
        slots
    })
}

/// Runs the scheduler on an existing runtime until `shutdown` completes (or the
/// scheduling thread dies, which is an error).
pub async fn run(
    client: Client,
    settings: ServeSettings,
    store_options: StoreOptions,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    tokio::pin!(shutdown);
    tracing::info!(
        scheduler = %settings.scheduler_name,
        topology_levels = ?settings.scheduler.topology_levels,
        leader_election = settings.leader_election.is_some(),
        job_controller = settings.job_controller,
        resource_claim_controller = settings.resource_claim_controller,
        "starting"
    );
    let metrics = Metrics::for_profile(&settings.scheduler_name);
    let leadership =
        if settings.leader_election.is_some() { Leadership::standby() } else { Leadership::always() };
    metrics.set_gauge(LEADER, &[], if leadership.is_leader() { 1.0 } else { 0.0 });

    let mut store =
        KubeStore::new(client.clone(), tokio::runtime::Handle::current(), metrics.clone(), store_options);
    store.set_write_gate(leadership.clone());
    let kinds = watched_kinds(settings.job_controller, settings.resource_claim_controller);
    let watchers = store.start_watchers(&kinds);
    let cache = store.status(&kinds);
    let dispatcher = store.dispatcher(settings.binding_concurrency);
    let waker = store.waker();
    let loop_alive = Arc::new(AtomicBool::new(true));

    // HTTP first, so probes answer (not ready) while the caches fill.
    let health = Health {
        metrics: metrics.clone(),
        cache: cache.clone(),
        leadership: leadership.clone(),
        leader_election: settings.leader_election.is_some(),
        loop_alive: loop_alive.clone(),
        scheduler_names: settings.scheduler.scheduler_names.clone(),
    };
    let listener = tokio::net::TcpListener::bind(settings.metrics_addr)
        .await
        .with_context(|| format!("cannot listen on metricsAddr {}", settings.metrics_addr))?;
    // With port 0 the system picks the port: log the one in use.
    let metrics_addr = listener.local_addr().unwrap_or(settings.metrics_addr);
    let (http_stop_tx, http_stop_rx) = oneshot::channel::<()>();
    let http_task = tokio::spawn(async move {
        let result = axum::serve(listener, http::router(health))
            .with_graceful_shutdown(async {
                let _ = http_stop_rx.await;
            })
            .await;
        if let Err(e) = result {
            tracing::error!(error = %e, "HTTP server failed");
        }
    });
    tracing::info!(
        addr = %metrics_addr,
        scheduler = %settings.scheduler_name,
        "serving /metrics, /healthz, /readyz",
    );

    // Wait for every kind to be listed: scheduling on a partial view would overcommit.
    let mut last_report = tokio::time::Instant::now();
    loop {
        if cache.synced() {
            break;
        }
        tokio::select! {
            _ = &mut shutdown => {
                let _ = http_stop_tx.send(());
                let _ = http_task.await;
                drop(watchers);
                return Ok(());
            }
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        if last_report.elapsed() > Duration::from_secs(30) {
            last_report = tokio::time::Instant::now();
            let kinds: Vec<&str> = cache.unsynced().iter().map(|k| k.name()).collect();
            tracing::warn!(waiting_for = ?kinds, "caches not synced yet");
        }
    }
    tracing::info!("caches synced");

    // Leader election.
    let (election_stop_tx, election_stop_rx) = watch::channel(false);
    let election = settings.leader_election.clone().map(|le| {
        let namespace = leader::lease_namespace(&le);
        let identity = leader::identity();
        let waker = waker.clone();
        let metrics = metrics.clone();
        let flag = leadership.clone();
        tokio::spawn(leader::run_election(
            client.clone(),
            le,
            namespace,
            identity,
            leadership.clone(),
            move || {
                metrics.set_gauge(LEADER, &[], if flag.is_leader() { 1.0 } else { 0.0 });
                waker.wake();
            },
            election_stop_rx,
        ))
    });

    // The scheduling thread.
    let stop = Arc::new(AtomicBool::new(false));
    let (done_tx, mut done_rx) = oneshot::channel::<std::thread::Result<()>>();
    let factory = controller_factory(&settings, metrics.clone(), dispatcher.clone());
    let thread_leadership = leadership.clone();
    let thread_stop = stop.clone();
    let thread_alive = loop_alive.clone();
    std::thread::Builder::new()
        .name("placer-scheduler".to_string())
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                // Built here: controllers live and die on this thread (they need not be Send).
                let scheduling = SchedulingLoop::new(factory, thread_leadership, metrics);
                runloop::run(&mut store, scheduling, &thread_stop, LoopTiming::default());
            }));
            thread_alive.store(false, Ordering::SeqCst);
            let _ = done_tx.send(result);
        })
        .context("cannot start the scheduling thread")?;

    let loop_result = tokio::select! {
        _ = &mut shutdown => None,
        result = &mut done_rx => Some(result),
    };

    // Orderly stop: scheduling first, then the lease, then HTTP and the watchers.
    let mut outcome = Ok(());
    match loop_result {
        None => {
            // The pass under way finishes (a gang is bound whole), then the loop ends.
            stop.store(true, Ordering::SeqCst);
            waker.wake();
            match tokio::time::timeout(Duration::from_secs(30), &mut done_rx).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(_))) => outcome = Err(anyhow::anyhow!("the scheduling loop panicked")),
                Ok(Err(_)) => {}
                Err(_) => tracing::warn!("the scheduling loop did not stop within 30s"),
            }
        }
        Some(Ok(Ok(()))) => outcome = Err(anyhow::anyhow!("the scheduling loop stopped unexpectedly")),
        Some(Ok(Err(_))) | Some(Err(_)) => outcome = Err(anyhow::anyhow!("the scheduling loop panicked")),
    }
    // Bindings already handed off finish (a gang decided before the signal is bound whole)
    // while this replica still holds the lease.
    let drain_start = tokio::time::Instant::now();
    while dispatcher.outstanding() > 0 && drain_start.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if dispatcher.outstanding() > 0 {
        tracing::warn!(outstanding = dispatcher.outstanding(), "bindings still in flight at shutdown");
    }
    let _ = election_stop_tx.send(true);
    if let Some(task) = election {
        let _ = task.await;
    }
    let _ = http_stop_tx.send(());
    let _ = http_task.await;
    drop(watchers);
    tracing::info!("stopped");
    outcome
}
