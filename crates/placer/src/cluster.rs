//! `placer cluster [SCENARIO]`: the embedded cluster served over the Kubernetes API on a
//! loopback address, for kubectl, `placer serve` and other clients (see
//! `docs/serve.md`). A simulator feature, not a production API server.

use std::collections::BTreeSet;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::ValueEnum;
use placer_api::gates::FeatureGates;
use placer_apiserver::admission::SYSTEM_NAMESPACES;
use placer_apiserver::{ClusterOptions, Setup};
use placer_cluster::embedded::EmbeddedCluster;
use placer_cluster::Kind;
use placer_controllers::job::kubelet::parse_duration_ms;
use placer_engine::SchedulerConfig;
use placer_sim::{load_file, scheduler_config, setup_cluster, Scenario};

use crate::output::write_load_error;
use crate::Status;

const LONG_ABOUT: &str = "\
Serve the embedded cluster over the Kubernetes REST API.

Starts the cluster of SCENARIO (its `cluster` section: nodes, generated nodes, bound
pods; the other sections are not run) or an empty one, with its controllers (Jobs,
CronJobs, a simulated kubelet that runs bound pods) and, unless --scheduler none, the
embedded scheduler. kubectl and Placer's own client (`placer serve`) work against it
unchanged. Virtual time runs at wall-clock speed times --speed.

This is a simulator and a test bed, not a production API server: plain HTTP on the
address given, no authentication, no authorization, no admission webhooks.";

const AFTER_LONG_HELP: &str = "\
Examples:
  placer cluster examples/gang-rack.yaml --listen 127.0.0.1:6443 --kubeconfig /tmp/placer.kubeconfig
  kubectl --kubeconfig /tmp/placer.kubeconfig get nodes -L topology.example.com/rack
  placer cluster examples/gang-rack.yaml --manifests | kubectl --kubeconfig /tmp/placer.kubeconfig create -f -

  # Placer as the cluster's scheduler, in another process:
  placer cluster examples/gang-rack.yaml --scheduler none --kubeconfig /tmp/k --state /tmp/state.jsonl
  placer serve --config placer.yaml --kubeconfig /tmp/k

SIGTERM or Ctrl-C stops the server. With --state, every acknowledged write is in the
file before the answer is sent, so the process can be killed and started again with
the same --state (and --listen) and clients carry on.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchedulerMode {
    /// The embedded scheduler binds pods (scheduler names `default-scheduler` and
    /// `placer`, or the scenario's).
    Embedded,
    /// No scheduler: run one against the API (`placer serve`).
    None,
}

/// `placer cluster` options.
#[derive(Debug, clap::Args)]
#[command(about = "Serve the embedded cluster over the Kubernetes API (a simulator, not a production API server)", long_about = LONG_ABOUT, after_long_help = AFTER_LONG_HELP)]
pub struct Args {
    /// A scenario file whose `cluster` section is the starting cluster (default: empty).
    #[arg(value_name = "SCENARIO")]
    scenario: Option<PathBuf>,
    /// Address to serve on (plain HTTP; port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Write a kubeconfig for the server to this file.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Whether the embedded scheduler runs.
    #[arg(long, value_enum, default_value = "embedded")]
    scheduler: SchedulerMode,
    /// Virtual time runs this many times as fast as the wall clock (timestamps, pod run
    /// times, backoffs, CronJob schedules).
    #[arg(long, value_name = "FACTOR", default_value = "1")]
    speed: f64,
    /// State file: restored from when it exists (the scenario is then ignored), and kept
    /// current, so a killed server restarts where it stopped.
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
    /// Added to every API request before it is handled, e.g. 5ms (for testing clients).
    #[arg(long, value_name = "DURATION", default_value = "0s")]
    latency: String,
    /// Watch history kept, in changes; watches from older resourceVersions get 410 Gone
    /// and relist.
    #[arg(long, value_name = "N", default_value = "10000")]
    watch_cache_size: usize,
    /// Events are deleted this long after they were last seen.
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    event_ttl: String,
    /// Print the scenario's `submit` manifests as a YAML stream kubectl reads, and exit.
    #[arg(long)]
    manifests: bool,
}

fn duration(flag: &str, text: &str) -> anyhow::Result<Duration> {
    parse_duration_ms(text).map(Duration::from_millis).with_context(|| format!("--{flag}"))
}

/// The scenario's submit manifests, one YAML document each, after a Namespace for each
/// namespace they use that a cluster does not have from the start (so `kubectl create -f`
/// works on an empty cluster).
fn print_manifests(s: &Scenario) -> anyhow::Result<()> {
    let declared: BTreeSet<String> = s
        .submit
        .iter()
        .filter(|m| m.object.kind() == Kind::Namespace)
        .filter_map(|m| m.object.metadata().name.clone())
        .collect();
    let mut docs: Vec<serde_json::Value> = s
        .submit
        .iter()
        .filter(|m| m.object.kind().namespaced())
        .filter_map(|m| m.object.metadata().namespace.clone())
        .filter(|ns| !SYSTEM_NAMESPACES.contains(&ns.as_str()) && !declared.contains(ns))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(|ns| serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
        .collect();
    docs.extend(s.submit.iter().map(|m| m.object.to_json()));
    let mut out = std::io::stdout().lock();
    for (i, doc) in docs.iter().enumerate() {
        if i > 0 {
            writeln!(out, "---")?;
        }
        let text = serde_saphyr::to_string(doc).context("writing YAML")?;
        write!(out, "{text}")?;
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    let scenario = match &args.scenario {
        None => None,
        Some(path) => match load_file(path) {
            Ok(s) => Some(s),
            Err(e) => {
                write_load_error(&mut anstream::stderr(), &e)?;
                return Ok(Status::BadInput);
            }
        },
    };
    if args.manifests {
        let Some(s) = &scenario else { anyhow::bail!("--manifests needs a SCENARIO") };
        print_manifests(s)?;
        return Ok(Status::Pass);
    }
    if !(args.speed.is_finite() && args.speed > 0.0) {
        anyhow::bail!("--speed must be a positive number, got {}", args.speed);
    }
    let config = match &scenario {
        Some(s) => scheduler_config(s).map_err(|e| anyhow::anyhow!("{}: {e}", s.file.display()))?,
        None => SchedulerConfig::default(),
    };
    let gates: FeatureGates = config.gates.clone();
    let options = ClusterOptions {
        listen: args.listen,
        scheduler: (args.scheduler == SchedulerMode::Embedded).then_some(config),
        gates,
        speed: args.speed,
        latency: duration("latency", &args.latency)?,
        watch_cache_size: args.watch_cache_size,
        event_ttl: duration("event-ttl", &args.event_ttl)?,
        state_file: args.state.clone(),
        kubeconfig: args.kubeconfig.clone(),
    };
    let setup = move |mut store: EmbeddedCluster| -> Result<Setup, String> {
        // Objects of the scenario are created now, not at the virtual clock's epoch.
        store.set_now_ms(placer_apiserver::state::wall_store_ms());
        let frozen = match &scenario {
            // Pods the scenario lists as terminating stay so only in the simulator (its node
            // lifecycle controller is not in placer cluster yet).
            Some(s) => setup_cluster(s, &mut store).map_err(|e| format!("{}: {e}", s.file.display()))?.0,
            None => Default::default(),
        };
        Ok(Setup { store, frozen })
    };
    let kubeconfig = args.kubeconfig.clone();
    let scheduler = args.scheduler;
    placer_apiserver::run_blocking(
        options,
        setup,
        move |running| {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(
                out,
                "placer cluster: serving the Kubernetes API on http://{} (scheduler: {}){}",
                running.addr,
                if scheduler == SchedulerMode::Embedded { "embedded" } else { "none" },
                kubeconfig.as_ref().map(|k| format!(", kubeconfig {}", k.display())).unwrap_or_default()
            );
            let _ = out.flush();
        },
        placer_kube::serve::shutdown_signal(),
    )?;
    Ok(Status::Pass)
}
