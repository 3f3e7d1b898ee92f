//! The `placer serve` configuration file, in the spirit of `KubeSchedulerConfiguration`.
//!
//! ```yaml
//! apiVersion: placer.dev/v1alpha1     # optional
//! kind: PlacerConfiguration           # optional
//! schedulerName: placer               # pods with this spec.schedulerName are scheduled
//! topologyLevels:                     # coarsest first; empty = KEP-5732 placements
//!   - topology.kubernetes.io/zone
//!   - example.com/rack
//!   - kubernetes.io/hostname
//! percentageOfPlacementsToScore: 0    # 0 or absent: adaptive default
//! pluginWeights: {NodeResourcesFit: 2}
//! nodeResourcesFitStrategy: {type: LeastAllocated, resources: [{name: cpu, weight: 1}]}
//! placementScoringStrategy: {type: MostAllocated}
//! podInitialBackoffSeconds: 1
//! podMaxBackoffSeconds: 10
//! featureGates: {TASBalancedPlacement: true}
//! leaderElection: {enabled: true, leaseName: placer, namespace: placer-system}
//! metricsAddr: 0.0.0.0:8080
//! jobController: {enabled: true}
//! clientConnection: {qps: 50, burst: 100}   # kube-scheduler's defaults; qps -1: no limit
//! binding: {concurrency: 64}          # binding calls in flight at once
//! evictGangOnFailedNode: true         # lost pods with no replacement: evict and re-place
//!                                     # the gang (default: on with topologyLevels, else off)
//! pluginConfig:                       # KubeSchedulerConfiguration's plugin arguments
//!   - name: NodeResourcesFit
//!     args:
//!       scoringStrategy:
//!         type: RequestedToCapacityRatio
//!         resources: [{name: cpu, weight: 1}, {name: nvidia.com/gpu, weight: 5}]
//!         requestedToCapacityRatio: {shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]}
//! topologyAlgorithms:                 # with topologyLevels; absent kinds follow the gates
//!   required: BestFit                 # BestFit or LeastFreeCapacity
//!   preferred: BalancedPlacement      # BestFit, LeastFreeCapacity or BalancedPlacement
//!   unconstrained: LeastFreeCapacity  # BestFit or LeastFreeCapacity
//! topologyPreemption:                 # with topologyLevels: Kueue-mode preemption
//!   withinClusterQueue: LowerPriority # Never, LowerPriority (default), LowerOrNewerEqualPriority
//! ```
//!
//! Parsing rejects unknown fields; validation then checks every value and reports the
//! file and the field (`placer.yaml: leaderElection.leaseName: ...`).

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use placer_api::gates::FeatureGates;
use placer_engine::SchedulerConfig;
use placer_engine::ScoringStrategy;
use serde::Deserialize;

/// The only `apiVersion` accepted (when the field is present).
pub const API_VERSION: &str = "placer.dev/v1alpha1";
/// The only `kind` accepted (when the field is present).
pub const KIND: &str = "PlacerConfiguration";
/// `schedulerName` when the file does not set one.
pub const DEFAULT_SCHEDULER_NAME: &str = "placer";
/// `leaderElection.leaseName` when the file does not set one.
pub const DEFAULT_LEASE_NAME: &str = "placer";
/// `metricsAddr` when the file does not set one.
pub const DEFAULT_METRICS_ADDR: &str = "0.0.0.0:8080";
/// `clientConnection.qps` when the file does not set one (kube-scheduler's default).
pub const DEFAULT_QPS: f64 = 50.0;
/// `clientConnection.burst` when the file does not set one (kube-scheduler's default).
pub const DEFAULT_BURST: u32 = 100;
/// `binding.concurrency` when the file does not set one.
pub const DEFAULT_BINDING_CONCURRENCY: usize = 64;

/// The `spec.managedBy` value of Jobs that Placer's Job controller owns.
pub const JOB_MANAGED_BY: &str = "placer.dev/job-controller";

/// Score plugins the engine is known to register. A weight for another name is accepted
/// with a warning (a typo would otherwise silently do nothing).
pub const KNOWN_SCORE_PLUGINS: &[&str] = &[
    "TaintToleration",
    "NodeAffinity",
    "NodeResourcesFit",
    "PodTopologySpread",
    "InterPodAffinity",
    "NodeResourcesBalancedAllocation",
    "ImageLocality",
    "PodGroupPodsCount",
];

/// A configuration file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: cannot read the file", file.display())]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {message}", file.display())]
    Parse { file: PathBuf, message: String },
    #[error("{}: {field}: {message}", file.display())]
    Invalid { file: PathBuf, field: String, message: String },
}

/// The file as written (camelCase keys).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FileConfig {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub scheduler_name: Option<String>,
    #[serde(default)]
    pub topology_levels: Vec<String>,
    pub percentage_of_placements_to_score: Option<i64>,
    #[serde(default)]
    pub plugin_weights: BTreeMap<String, i64>,
    pub node_resources_fit_strategy: Option<StrategyFile>,
    pub placement_scoring_strategy: Option<StrategyFile>,
    pub pod_initial_backoff_seconds: Option<i64>,
    pub pod_max_backoff_seconds: Option<i64>,
    #[serde(default)]
    pub feature_gates: BTreeMap<String, bool>,
    #[serde(default)]
    pub leader_election: LeaderElectionFile,
    pub metrics_addr: Option<String>,
    #[serde(default)]
    pub job_controller: JobControllerFile,
    #[serde(default)]
    pub resource_claim_controller: ResourceClaimControllerFile,
    #[serde(default)]
    pub client_connection: ClientConnectionFile,
    #[serde(default)]
    pub binding: BindingFile,
    /// When a gang's pods lost with a failed node find no replacement, evict the whole
    /// gang and place it again (`true`) or keep them Pending (`false`). Absent: on with
    /// `topologyLevels`, off without.
    pub evict_gang_on_failed_node: Option<bool>,
    /// KubeSchedulerConfiguration's `pluginConfig`: plugin arguments, validated as
    /// kube-scheduler does (e.g. `NodeResourcesFit`'s `scoringStrategy`, which may not be
    /// combined with `nodeResourcesFitStrategy`).
    #[serde(default)]
    pub plugin_config: Vec<placer_engine::PluginConfigEntry>,
    /// The seed 002 algorithm per kind of topology request (with `topologyLevels`).
    pub topology_algorithms: Option<TopologyAlgorithmsFile>,
    /// Kueue-mode preemption (with `topologyLevels`), as a ClusterQueue's `preemption`.
    pub topology_preemption: Option<TopologyPreemptionFile>,
}

/// `topologyPreemption`: Kueue's ClusterQueue `preemption.withinClusterQueue`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TopologyPreemptionFile {
    pub within_cluster_queue: Option<String>,
}

/// `topologyAlgorithms`: `BestFit`, `LeastFreeCapacity` or `BalancedPlacement` (preferred
/// only) for required, preferred and unconstrained requests.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TopologyAlgorithmsFile {
    pub required: Option<String>,
    pub preferred: Option<String>,
    pub unconstrained: Option<String>,
}

/// `clientConnection` (as in `KubeSchedulerConfiguration`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClientConnectionFile {
    /// Requests per second to the API server, sustained. Default 50; -1: no limit.
    pub qps: Option<f64>,
    /// Requests allowed at once above `qps`. Default 100.
    pub burst: Option<i64>,
}

/// `binding`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BindingFile {
    /// Binding calls in flight at once (the scheduling thread never waits for one).
    /// Default 64.
    pub concurrency: Option<i64>,
}

/// `leaderElection`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LeaderElectionFile {
    /// Default true.
    pub enabled: Option<bool>,
    pub lease_name: Option<String>,
    /// Default: the namespace Placer runs in (`POD_NAMESPACE`, else the service account's).
    pub namespace: Option<String>,
    /// Default 15.
    pub lease_duration_seconds: Option<i64>,
    /// How long before expiry the holder renews. Default 5.
    pub renew_grace_seconds: Option<i64>,
}

/// `jobController`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JobControllerFile {
    /// Default true. Only Jobs with `spec.managedBy: placer.dev/job-controller` are touched.
    pub enabled: Option<bool>,
}

/// `resourceClaimController`: Placer's own ResourceClaim controller (claims generated from
/// ResourceClaimTemplates for pods and, with `DRAWorkloadResourceClaims`, PodGroups). Off by
/// default: kube-controller-manager's `resourceclaim-controller` runs in every cluster that
/// serves `resource.k8s.io/v1`; turn this on only where it does not (see docs/serve.md).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceClaimControllerFile {
    /// Default false.
    pub enabled: Option<bool>,
}

/// A NodeResourcesFit scoring strategy.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StrategyFile {
    /// `LeastAllocated`, `MostAllocated` or `RequestedToCapacityRatio`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Default: cpu and memory, weight 1 each.
    pub resources: Option<Vec<ResourceWeightFile>>,
    /// `RequestedToCapacityRatio` only.
    pub shape: Option<Vec<ShapePointFile>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceWeightFile {
    pub name: String,
    pub weight: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ShapePointFile {
    pub utilization: i64,
    pub score: i64,
}

/// Leader election as resolved from the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionSettings {
    pub lease_name: String,
    /// `None`: resolved at start from the environment (see [`LeaderElectionFile::namespace`]).
    pub namespace: Option<String>,
    pub lease_duration_seconds: u64,
    pub renew_grace_seconds: u64,
}

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct ServeSettings {
    pub scheduler_name: String,
    /// The engine's configuration (`scheduler_names` = `[scheduler_name]`).
    pub scheduler: SchedulerConfig,
    /// `None` when leader election is disabled.
    pub leader_election: Option<LeaderElectionSettings>,
    pub metrics_addr: SocketAddr,
    pub job_controller: bool,
    /// Placer runs the ResourceClaim controller (kube-controller-manager's does not).
    pub resource_claim_controller: bool,
    /// Client rate limit: `None` = unlimited, else (qps, burst).
    pub rate_limit: Option<(f64, u32)>,
    /// Binding calls in flight at once.
    pub binding_concurrency: usize,
    /// Accepted but suspicious settings (logged at start).
    pub warnings: Vec<String>,
}

/// Reads and validates a configuration file.
pub fn load(path: &Path) -> Result<ServeSettings, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| ConfigError::Read { file: path.to_path_buf(), source })?;
    parse(&text, path)
}

/// Parses and validates configuration text; `file` names it in errors.
pub fn parse(text: &str, file: &Path) -> Result<ServeSettings, ConfigError> {
    let raw: FileConfig = if text.trim().is_empty() {
        FileConfig::default()
    } else {
        serde_saphyr::from_str(text).map_err(|e| ConfigError::Parse {
            file: file.to_path_buf(),
            message: e.to_string().trim_start_matches("error: ").to_string(),
        })?
    };
    validate(raw, file)
}

struct Checker<'a> {
    file: &'a Path,
}

impl Checker<'_> {
    fn err(&self, field: impl fmt::Display, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.to_path_buf(),
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// Validates a parsed file and resolves defaults.
pub fn validate(raw: FileConfig, file: &Path) -> Result<ServeSettings, ConfigError> {
    let c = Checker { file };
    let mut warnings = Vec::new();

    if let Some(v) = &raw.api_version {
        if v != API_VERSION {
            return Err(c.err("apiVersion", format!("must be {API_VERSION:?}, not {v:?}")));
        }
    }
    if let Some(k) = &raw.kind {
        if k != KIND {
            return Err(c.err("kind", format!("must be {KIND:?}, not {k:?}")));
        }
    }

    let scheduler_name = raw.scheduler_name.unwrap_or_else(|| DEFAULT_SCHEDULER_NAME.to_string());
    if let Err(m) = check_qualified_name(&scheduler_name) {
        return Err(c.err("schedulerName", m));
    }
    if scheduler_name == "default-scheduler" {
        warnings.push(
            "schedulerName is \"default-scheduler\": Placer will compete with kube-scheduler for \
             every pod that does not name a scheduler"
                .to_string(),
        );
    }

    let mut seen = std::collections::BTreeSet::new();
    for (i, level) in raw.topology_levels.iter().enumerate() {
        if let Err(m) = check_qualified_name(level) {
            return Err(c.err(format!("topologyLevels[{i}]"), format!("{level:?} is not a label key: {m}")));
        }
        if !seen.insert(level.as_str()) {
            return Err(c.err(format!("topologyLevels[{i}]"), format!("{level:?} is listed twice")));
        }
    }

    let percentage = match raw.percentage_of_placements_to_score {
        None | Some(0) => None,
        Some(p @ 1..=100) => Some(p as u32),
        Some(p) => {
            return Err(c.err(
                "percentageOfPlacementsToScore",
                format!("must be between 0 (adaptive) and 100, not {p}"),
            ))
        }
    };

    for (name, weight) in &raw.plugin_weights {
        if !(0..=100).contains(weight) {
            return Err(c.err(
                format!("pluginWeights.{name}"),
                format!("weight must be between 0 (scoring off) and 100, not {weight}"),
            ));
        }
        if !KNOWN_SCORE_PLUGINS.contains(&name.as_str()) {
            warnings.push(format!(
                "pluginWeights.{name}: not a known score plugin ({}); the weight may have no effect",
                KNOWN_SCORE_PLUGINS.join(", ")
            ));
        }
    }

    let defaults = SchedulerConfig::default();
    let fit = match &raw.node_resources_fit_strategy {
        Some(s) => strategy(s, "nodeResourcesFitStrategy", &c)?,
        None => defaults.node_resources_fit_strategy.clone(),
    };
    let placement = match &raw.placement_scoring_strategy {
        Some(s) => strategy(s, "placementScoringStrategy", &c)?,
        None => defaults.placement_scoring_strategy.clone(),
    };

    let initial = match raw.pod_initial_backoff_seconds {
        None => defaults.pod_initial_backoff_ms,
        Some(s @ 1..=3600) => s as u64 * 1000,
        Some(s) => {
            return Err(c.err("podInitialBackoffSeconds", format!("must be between 1 and 3600, not {s}")))
        }
    };
    let max = match raw.pod_max_backoff_seconds {
        None => defaults.pod_max_backoff_ms.max(initial),
        Some(s @ 1..=3600) => s as u64 * 1000,
        Some(s) => return Err(c.err("podMaxBackoffSeconds", format!("must be between 1 and 3600, not {s}"))),
    };
    if max < initial {
        return Err(c.err("podMaxBackoffSeconds", "must not be smaller than podInitialBackoffSeconds"));
    }

    let mut gates = FeatureGates::default();
    for (name, value) in &raw.feature_gates {
        gates.set(name, *value).map_err(|e| c.err(format!("featureGates.{name}"), e.to_string()))?;
    }

    let le = &raw.leader_election;
    let leader_election = if le.enabled.unwrap_or(true) {
        let lease_name = le.lease_name.clone().unwrap_or_else(|| DEFAULT_LEASE_NAME.to_string());
        if let Err(m) = check_dns_subdomain(&lease_name) {
            return Err(c.err("leaderElection.leaseName", m));
        }
        if let Some(ns) = &le.namespace {
            if let Err(m) = check_dns_label(ns) {
                return Err(c.err("leaderElection.namespace", m));
            }
        }
        let duration = match le.lease_duration_seconds {
            None => 15,
            Some(d @ 2..=3600) => d as u64,
            Some(d) => {
                return Err(c.err(
                    "leaderElection.leaseDurationSeconds",
                    format!("must be between 2 and 3600, not {d}"),
                ))
            }
        };
        let grace = match le.renew_grace_seconds {
            None => 5.min(duration - 1),
            Some(g) if g >= 1 && (g as u64) < duration => g as u64,
            Some(g) => {
                return Err(c.err(
                    "leaderElection.renewGraceSeconds",
                    format!("must be at least 1 and less than leaseDurationSeconds ({duration}), not {g}"),
                ))
            }
        };
        Some(LeaderElectionSettings {
            lease_name,
            namespace: le.namespace.clone(),
            lease_duration_seconds: duration,
            renew_grace_seconds: grace,
        })
    } else {
        if le.lease_name.is_some() || le.namespace.is_some() {
            warnings.push("leaderElection is disabled: leaseName and namespace are ignored".to_string());
        }
        None
    };

    let addr_text = raw.metrics_addr.as_deref().unwrap_or(DEFAULT_METRICS_ADDR);
    let metrics_addr: SocketAddr = addr_text.parse().map_err(|_| {
        c.err("metricsAddr", format!("{addr_text:?} is not an address like 0.0.0.0:8080 or [::]:8080"))
    })?;

    let cc = &raw.client_connection;
    let rate_limit = match cc.qps {
        Some(-1.0) => None,
        Some(q) if !(q > 0.0 && q.is_finite()) => {
            return Err(
                c.err("clientConnection.qps", format!("must be positive, or -1 for no limit, not {q}"))
            )
        }
        q => {
            let burst = match cc.burst {
                None => DEFAULT_BURST,
                Some(b @ 1..=100_000) => b as u32,
                Some(b) => {
                    return Err(
                        c.err("clientConnection.burst", format!("must be between 1 and 100000, not {b}"))
                    )
                }
            };
            Some((q.unwrap_or(DEFAULT_QPS), burst))
        }
    };
    let binding_concurrency = match raw.binding.concurrency {
        None => DEFAULT_BINDING_CONCURRENCY,
        Some(n @ 1..=10_000) => n as usize,
        Some(n) => return Err(c.err("binding.concurrency", format!("must be between 1 and 10000, not {n}"))),
    };

    let topology_algorithms = match &raw.topology_algorithms {
        None => Default::default(),
        Some(a) => placer_engine::TopologyAlgorithms::from_names(
            a.required.as_deref(),
            a.preferred.as_deref(),
            a.unconstrained.as_deref(),
        )
        .map_err(|m| {
            let (field, message) = m.split_once(": ").unwrap_or(("topologyAlgorithms", m.as_str()));
            c.err(field, message.to_string())
        })?,
    };

    let within_cluster_queue =
        match raw.topology_preemption.as_ref().and_then(|t| t.within_cluster_queue.as_deref()) {
            None => Default::default(),
            Some(v) => placer_engine::WithinClusterQueue::parse(v)
                .map_err(|m| c.err("topologyPreemption.withinClusterQueue", m))?,
        };

    if raw.node_resources_fit_strategy.is_some()
        && raw.plugin_config.iter().any(|e| e.name == "NodeResourcesFit")
    {
        return Err(c.err(
            "nodeResourcesFitStrategy",
            "set either nodeResourcesFitStrategy or pluginConfig's NodeResourcesFit args, not both",
        ));
    }
    let mut scheduler = SchedulerConfig {
        scheduler_names: vec![scheduler_name.clone()],
        gates,
        topology_levels: raw.topology_levels.clone(),
        plugin_weights: raw.plugin_weights.clone(),
        percentage_of_placements_to_score: percentage,
        node_resources_fit_strategy: fit,
        placement_scoring_strategy: placement,
        pod_initial_backoff_ms: initial,
        pod_max_backoff_ms: max,
        evict_gang_on_failed_node: raw.evict_gang_on_failed_node,
        topology_algorithms,
        within_cluster_queue,
        // Settings the file does not expose keep the engine's defaults.
        ..defaults
    };
    if let Err(errs) = placer_engine::apply_plugin_config(&mut scheduler, &raw.plugin_config, "pluginConfig")
    {
        // `file: profile "name": plugin P: field: message`; several: each with its own
        // plugin and field.
        let named = |e: &placer_engine::ArgsError| {
            format!("profile {scheduler_name:?}: plugin {}: {}", e.plugin, e.field)
        };
        return Err(match errs.as_slice() {
            [one] => c.err(named(one), one.message.clone()),
            _ => c.err(
                format!("profile {scheduler_name:?}: pluginConfig"),
                errs.iter().map(|e| format!("plugin {}: {e}", e.plugin)).collect::<Vec<_>>().join("; "),
            ),
        });
    }

    Ok(ServeSettings {
        scheduler_name,
        scheduler,
        leader_election,
        metrics_addr,
        job_controller: raw.job_controller.enabled.unwrap_or(true),
        resource_claim_controller: raw.resource_claim_controller.enabled.unwrap_or(false),
        rate_limit,
        binding_concurrency,
        warnings,
    })
}

fn strategy(s: &StrategyFile, field: &str, c: &Checker<'_>) -> Result<ScoringStrategy, ConfigError> {
    let resources = match &s.resources {
        None => vec![("cpu".to_string(), 1), ("memory".to_string(), 1)],
        Some(list) if list.is_empty() => {
            return Err(c.err(format!("{field}.resources"), "must not be empty when set"))
        }
        Some(list) => {
            let mut out = Vec::with_capacity(list.len());
            for (i, r) in list.iter().enumerate() {
                if r.name.trim().is_empty() {
                    return Err(c.err(format!("{field}.resources[{i}].name"), "must not be empty"));
                }
                if out.iter().any(|(n, _): &(String, i64)| n == &r.name) {
                    return Err(c.err(
                        format!("{field}.resources[{i}].name"),
                        format!("{:?} is listed twice", r.name),
                    ));
                }
                let weight = r.weight.unwrap_or(1);
                if !(1..=100).contains(&weight) {
                    return Err(c.err(
                        format!("{field}.resources[{i}].weight"),
                        format!("must be between 1 and 100, not {weight}"),
                    ));
                }
                out.push((r.name.clone(), weight));
            }
            out
        }
    };
    match s.type_.as_str() {
        "LeastAllocated" | "MostAllocated" => {
            if s.shape.is_some() {
                return Err(c.err(format!("{field}.shape"), "only RequestedToCapacityRatio takes a shape"));
            }
            Ok(if s.type_ == "LeastAllocated" {
                ScoringStrategy::LeastAllocated { resources }
            } else {
                ScoringStrategy::MostAllocated { resources }
            })
        }
        "RequestedToCapacityRatio" => {
            let points = match &s.shape {
                Some(p) if !p.is_empty() => p,
                _ => return Err(c.err(format!("{field}.shape"), "RequestedToCapacityRatio needs a shape")),
            };
            let mut shape = Vec::with_capacity(points.len());
            for (i, p) in points.iter().enumerate() {
                if !(0..=100).contains(&p.utilization) {
                    return Err(c.err(format!("{field}.shape[{i}].utilization"), "must be between 0 and 100"));
                }
                if !(0..=10).contains(&p.score) {
                    return Err(c.err(format!("{field}.shape[{i}].score"), "must be between 0 and 10"));
                }
                if let Some((prev, _)) = shape.last() {
                    if p.utilization <= *prev {
                        return Err(c.err(
                            format!("{field}.shape[{i}].utilization"),
                            "utilization must increase from one point to the next",
                        ));
                    }
                }
                shape.push((p.utilization, p.score));
            }
            Ok(ScoringStrategy::RequestedToCapacityRatio { resources, shape })
        }
        other => Err(c.err(
            format!("{field}.type"),
            format!("{other:?} is not one of LeastAllocated, MostAllocated, RequestedToCapacityRatio"),
        )),
    }
}

/// A DNS-1123 label: lower-case alphanumerics and '-', at most 63, alphanumeric at both ends.
pub fn check_dns_label(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > 63 {
        return Err(format!("{s:?} must be 1 to 63 characters"));
    }
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !s.chars().all(ok_char) || !ends(s.chars().next()) || !ends(s.chars().last()) {
        return Err(format!(
            "{s:?} must consist of lower case alphanumeric characters or '-', and start and end \
             with an alphanumeric character"
        ));
    }
    Ok(())
}

/// A DNS-1123 subdomain: dot-separated labels, at most 253 characters.
pub fn check_dns_subdomain(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > 253 {
        return Err(format!("{s:?} must be 1 to 253 characters"));
    }
    for part in s.split('.') {
        check_dns_label(part).map_err(|_| {
            format!(
                "{s:?} must be a DNS subdomain: lower case alphanumeric characters, '-' or '.', \
                 starting and ending with an alphanumeric character"
            )
        })?;
    }
    Ok(())
}

/// A qualified name as used for label keys: an optional DNS-subdomain prefix and `/`, then
/// a name of at most 63 characters (alphanumerics, `-`, `_`, `.`; alphanumeric at both ends).
pub fn check_qualified_name(s: &str) -> Result<(), String> {
    let (prefix, name) = match s.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if let Some(p) = prefix {
        check_dns_subdomain(p).map_err(|m| format!("prefix: {m}"))?;
    }
    if name.is_empty() || name.len() > 63 {
        return Err(format!("name part of {s:?} must be 1 to 63 characters"));
    }
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !name.chars().all(ok_char) || !ends(name.chars().next()) || !ends(name.chars().last()) {
        return Err(format!(
            "name part of {s:?} must consist of alphanumeric characters, '-', '_' or '.', and start \
             and end with an alphanumeric character"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(text: &str) -> ServeSettings {
        match parse(text, Path::new("placer.yaml")) {
            Ok(s) => s,
            Err(e) => panic!("expected a valid configuration, got: {e}"),
        }
    }

    fn parse_err(text: &str) -> String {
        match parse(text, Path::new("placer.yaml")) {
            Ok(s) => panic!("expected an error, got {s:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn plugin_config_sets_the_fit_strategy_with_kube_schedulers_validation() {
        let s = parse_ok(
            "pluginConfig:\n- name: NodeResourcesFit\n  args:\n    scoringStrategy:\n      type: MostAllocated\n      resources: [{name: cpu, weight: 3}, {name: nvidia.com/gpu}]\n",
        );
        assert_eq!(
            s.scheduler.node_resources_fit_strategy,
            ScoringStrategy::MostAllocated {
                resources: vec![("cpu".into(), 3), ("nvidia.com/gpu".into(), 1)]
            }
        );
        assert_eq!(
            parse_err("pluginConfig:\n- name: NodeResourcesFit\n  args: {scoringStrategy: {type: Bogus}}\n"),
            "placer.yaml: profile \"placer\": plugin NodeResourcesFit: pluginConfig[0].args.scoringStrategy.type: Unsupported value: \"Bogus\": supported values: \"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\""
        );
        assert!(parse_err(
            "nodeResourcesFitStrategy: {type: MostAllocated}\npluginConfig:\n- name: NodeResourcesFit\n  args: {}\n"
        )
        .contains("not both"));
    }

    #[test]
    fn an_empty_file_gives_the_documented_defaults() {
        let s = parse_ok("");
        assert_eq!(s.scheduler_name, "placer");
        assert_eq!(s.scheduler.scheduler_names, vec!["placer".to_string()]);
        assert_eq!(s.metrics_addr.to_string(), "0.0.0.0:8080");
        assert!(s.job_controller);
        let le = s.leader_election.expect("leader election is on by default");
        assert_eq!(le.lease_name, "placer");
        assert_eq!(le.namespace, None);
        assert_eq!((le.lease_duration_seconds, le.renew_grace_seconds), (15, 5));
        assert_eq!(s.scheduler.percentage_of_placements_to_score, None);
        assert_eq!(s.rate_limit, Some((50.0, 100)), "kube-scheduler's clientConnection defaults");
        assert_eq!(s.binding_concurrency, 64);
    }

    #[test]
    fn client_connection_and_binding_are_validated() {
        let s = parse_ok("clientConnection: {qps: 200, burst: 400}\nbinding: {concurrency: 128}");
        assert_eq!((s.rate_limit, s.binding_concurrency), (Some((200.0, 400)), 128));
        assert_eq!(parse_ok("clientConnection: {qps: -1}").rate_limit, None, "-1: no limit");
        assert_eq!(
            parse_err("clientConnection: {qps: 0}"),
            "placer.yaml: clientConnection.qps: must be positive, or -1 for no limit, not 0"
        );
        assert_eq!(
            parse_err("clientConnection: {burst: 0}"),
            "placer.yaml: clientConnection.burst: must be between 1 and 100000, not 0"
        );
        assert_eq!(
            parse_err("binding: {concurrency: 0}"),
            "placer.yaml: binding.concurrency: must be between 1 and 10000, not 0"
        );
        assert!(parse_err("clientConnection: {qpss: 1}").contains("qpss"));
    }

    #[test]
    fn a_full_file_maps_onto_the_engine_configuration() {
        let s = parse_ok(
            r#"
apiVersion: placer.dev/v1alpha1
kind: PlacerConfiguration
schedulerName: gang-scheduler
topologyLevels: [topology.kubernetes.io/zone, example.com/rack, kubernetes.io/hostname]
percentageOfPlacementsToScore: 40
pluginWeights: {NodeResourcesFit: 3, TaintToleration: 0}
nodeResourcesFitStrategy:
  type: RequestedToCapacityRatio
  resources: [{name: cpu, weight: 2}, {name: nvidia.com/gpu}]
  shape: [{utilization: 0, score: 10}, {utilization: 100, score: 0}]
placementScoringStrategy: {type: LeastAllocated}
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 30
featureGates: {TASBalancedPlacement: true, GangScheduling: false}
leaderElection: {enabled: true, leaseName: placer-lock, namespace: placer-system, leaseDurationSeconds: 20, renewGraceSeconds: 4}
metricsAddr: "127.0.0.1:9090"
jobController: {enabled: false}
evictGangOnFailedNode: false
topologyAlgorithms: {required: LeastFreeCapacity, preferred: BalancedPlacement}
topologyPreemption: {withinClusterQueue: LowerOrNewerEqualPriority}
"#,
        );
        assert_eq!(
            s.scheduler.topology_algorithms,
            placer_engine::TopologyAlgorithms {
                required: Some(placer_engine::TopologyAlgorithm::LeastFreeCapacity),
                preferred: Some(placer_engine::TopologyAlgorithm::BalancedPlacement),
                unconstrained: None,
            }
        );
        assert_eq!(
            s.scheduler.within_cluster_queue,
            placer_engine::WithinClusterQueue::LowerOrNewerEqualPriority
        );
        assert_eq!(s.scheduler.evict_gang_on_failed_node, Some(false));
        assert!(!s.scheduler.evicts_gang_on_failed_node(), "the option overrides the hierarchical default");
        assert_eq!(s.scheduler.scheduler_names, vec!["gang-scheduler".to_string()]);
        assert_eq!(s.scheduler.topology_levels.len(), 3);
        assert_eq!(s.scheduler.percentage_of_placements_to_score, Some(40));
        assert_eq!(s.scheduler.weight("NodeResourcesFit", 1), 3);
        assert_eq!(s.scheduler.weight("TaintToleration", 3), 0);
        assert_eq!(
            s.scheduler.node_resources_fit_strategy,
            ScoringStrategy::RequestedToCapacityRatio {
                resources: vec![("cpu".into(), 2), ("nvidia.com/gpu".into(), 1)],
                shape: vec![(0, 10), (100, 0)],
            }
        );
        assert_eq!(s.scheduler.placement_scoring_strategy, ScoringStrategy::least_allocated());
        assert_eq!((s.scheduler.pod_initial_backoff_ms, s.scheduler.pod_max_backoff_ms), (2000, 30000));
        assert!(s.scheduler.gates.enabled(placer_api::gates::Gate::TASBalancedPlacement));
        assert!(!s.scheduler.gates.enabled(placer_api::gates::Gate::GangScheduling));
        let le = s.leader_election.unwrap();
        assert_eq!(le.namespace.as_deref(), Some("placer-system"));
        assert_eq!((le.lease_duration_seconds, le.renew_grace_seconds), (20, 4));
        assert_eq!(s.metrics_addr.to_string(), "127.0.0.1:9090");
        assert!(!s.job_controller);
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    }

    #[test]
    fn errors_name_the_file_and_the_field() {
        assert_eq!(
            parse_err("leaderElection: {leaseName: Bad_Name}"),
            "placer.yaml: leaderElection.leaseName: \"Bad_Name\" must be a DNS subdomain: lower case \
             alphanumeric characters, '-' or '.', starting and ending with an alphanumeric character"
        );
        assert!(parse_err("featureGates: {NoSuchGate: true}")
            .starts_with("placer.yaml: featureGates.NoSuchGate: unknown feature gate \"NoSuchGate\""));
        assert!(parse_err("percentageOfPlacementsToScore: 101")
            .starts_with("placer.yaml: percentageOfPlacementsToScore: must be between 0"));
        assert!(parse_err("pluginWeights: {NodeResourcesFit: -1}")
            .starts_with("placer.yaml: pluginWeights.NodeResourcesFit: weight must be between"));
        assert!(parse_err("topologyLevels: [rack, rack]").contains("topologyLevels[1]"));
        assert!(parse_err("topologyLevels: [\"bad key!\"]").contains("topologyLevels[0]"));
        assert!(parse_err("metricsAddr: localhost").starts_with("placer.yaml: metricsAddr:"));
        assert!(parse_err("kind: KubeSchedulerConfiguration").starts_with("placer.yaml: kind:"));
        assert!(parse_err("podInitialBackoffSeconds: 20\npodMaxBackoffSeconds: 10")
            .starts_with("placer.yaml: podMaxBackoffSeconds:"));
        assert!(parse_err("leaderElection: {leaseDurationSeconds: 5, renewGraceSeconds: 5}")
            .starts_with("placer.yaml: leaderElection.renewGraceSeconds:"));
        assert!(parse_err("nodeResourcesFitStrategy: {type: Random}")
            .starts_with("placer.yaml: nodeResourcesFitStrategy.type:"));
        assert!(parse_err("nodeResourcesFitStrategy: {type: RequestedToCapacityRatio}")
            .starts_with("placer.yaml: nodeResourcesFitStrategy.shape:"));
        assert!(parse_err("topologyAlgorithms: {required: BalancedPlacement}")
            .starts_with("placer.yaml: topologyAlgorithms.required: BalancedPlacement applies to preferred"));
        assert!(parse_err("topologyAlgorithms: {unconstrained: Fast}")
            .starts_with("placer.yaml: topologyAlgorithms.unconstrained: unknown algorithm \"Fast\""));
        assert!(parse_err("topologyAlgorithms: {mixed: BestFit}").contains("mixed"));
        assert!(parse_err("topologyPreemption: {withinClusterQueue: Always}").starts_with(
            "placer.yaml: topologyPreemption.withinClusterQueue: Unsupported value: \"Always\": supported values:"
        ));
    }

    #[test]
    fn unknown_fields_and_bad_yaml_are_parse_errors_with_the_file_name() {
        let e = parse_err("schedulerNmae: placer");
        assert!(e.starts_with("placer.yaml: "), "{e}");
        assert!(e.contains("schedulerNmae"), "{e}");
        let e = parse_err("schedulerName: [unclosed");
        assert!(e.starts_with("placer.yaml: "), "{e}");
    }

    #[test]
    fn suspicious_but_valid_settings_are_warnings() {
        let s = parse_ok("pluginWeights: {NodeResourceFit: 2}\nschedulerName: default-scheduler");
        assert_eq!(s.warnings.len(), 2, "{:?}", s.warnings);
        assert!(s.warnings.iter().any(|w| w.contains("NodeResourceFit")));
    }

    #[test]
    fn leader_election_can_be_disabled() {
        let s = parse_ok("leaderElection: {enabled: false}");
        assert!(s.leader_election.is_none());
    }

    #[test]
    fn name_checks_follow_kubernetes() {
        assert!(check_qualified_name("topology.kubernetes.io/zone").is_ok());
        assert!(check_qualified_name("rack").is_ok());
        assert!(check_qualified_name("/rack").is_err());
        assert!(check_qualified_name("Example.com/rack").is_err());
        assert!(check_dns_label("placer-system").is_ok());
        assert!(check_dns_label("-x").is_err());
        assert!(check_dns_subdomain("a.b-c.d").is_ok());
        assert!(check_dns_subdomain("a..b").is_err());
    }
}
