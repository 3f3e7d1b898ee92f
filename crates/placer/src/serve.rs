//! `placer serve`: Placer as a secondary scheduler of a real cluster (see `docs/serve.md`).

use std::path::PathBuf;

use clap::Args;

use crate::Status;

const LONG_ABOUT: &str = "\
Run Placer as a secondary scheduler of a Kubernetes cluster.

Placer schedules the pods whose spec.schedulerName is the configured schedulerName
(default \"placer\"); all other pods are left to kube-scheduler but count against node
capacity. Pods that name a PodGroup (spec.schedulingGroup.podGroupName, API
scheduling.k8s.io/v1alpha2) are scheduled as a group: a gang is bound all together or
not at all, and a topology constraint (for example a rack label) keeps the whole group in
one domain. For Jobs with spec.managedBy: placer.dev/job-controller, Placer also acts as
the Job controller and creates their Workload, PodGroup and pods.

Requirements: Kubernetes v1.36 with the scheduling.k8s.io/v1alpha2 API and the
GenericWorkload feature gate enabled on the API server, and the RBAC rules in
deploy/rbac.yaml (plus deploy/components/job-controller for the Job integration). Run
several replicas with leader election on: only the holder of the
Lease schedules; the others stand by.";

const AFTER_LONG_HELP: &str = "\
Configuration file (all fields optional):
  schedulerName: placer                  # pods with this spec.schedulerName are ours
  topologyLevels: [topology.kubernetes.io/zone, example.com/rack, kubernetes.io/hostname]
  percentageOfPlacementsToScore: 0       # 0 = adaptive
  pluginWeights: {NodeResourcesFit: 1}
  featureGates: {TopologyAwareWorkloadScheduling: true}
  leaderElection: {enabled: true, leaseName: placer, namespace: placer-system}
  metricsAddr: 0.0.0.0:8080
  jobController: {enabled: true}
  clientConnection: {qps: 50, burst: 100}   # API requests per second; qps -1: no limit
  binding: {concurrency: 64}             # binding calls in flight at once
The file is validated at start; an error names the file and the field.

HTTP endpoints on metricsAddr:
  /metrics   OpenMetrics text: kube-scheduler's scheduling metrics (scheduler_*, with
             their upstream names and labels), binding latency, API requests and retries
  /healthz   200 while the scheduling loop runs (liveness probe)
  /readyz    200 once every watched kind is listed and, with leader election, while
             leading or standing by (readiness probe)

Cluster access: --kubeconfig, else $KUBECONFIG or ~/.kube/config when present, else the
in-cluster service account. Logs go to stderr; RUST_LOG sets the level (default info).
SIGTERM or Ctrl-C stops scheduling after the current pass, lets the bindings already
handed off finish, releases the Lease and exits.

Examples:
  placer serve --config /etc/placer/config.yaml
  placer serve --config placer.yaml --kubeconfig ~/.kube/kind-config --log-json";

/// `placer serve` options.
#[derive(Debug, Clone, Args)]
#[command(
    about = "Run Placer as a secondary scheduler of a Kubernetes cluster",
    long_about = LONG_ABOUT,
    after_long_help = AFTER_LONG_HELP
)]
pub struct ServeArgs {
    /// The configuration file (YAML); see below for its fields.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,

    /// The kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else in-cluster).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,

    /// Log JSON lines (one object per line, with the PodGroup of each scheduling record).
    #[arg(long)]
    pub log_json: bool,
}

/// Runs the scheduler until SIGTERM or Ctrl-C (then [`Status::Pass`]). It sets up its own
/// logging (`--log-json`, `RUST_LOG`), so `main` must not install a subscriber first.
pub fn run(args: ServeArgs) -> anyhow::Result<Status> {
    placer_kube::serve(placer_kube::ServeConfig {
        config_file: args.config,
        kubeconfig: args.kubeconfig,
        context: args.context,
        log_json: args.log_json,
    })?;
    Ok(Status::Pass)
}
