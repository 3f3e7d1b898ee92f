//! Traces: what arrives when, on which cluster.
//!
//! A trace is a YAML file (format in `docs/replay.md`):
//!
//! ```yaml
//! name: small
//! cluster:
//!   generate:                       # the scenario format's cluster.generate
//!     levels: [topology.placer.dev/block, topology.placer.dev/rack, kubernetes.io/hostname]
//!     fanout: [2, 4, 8]
//!     allocatable: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}
//! scheduler:                        # optional, applied under every configuration
//!   featureGates: {WorkloadAwarePreemption: true}
//! sampleInterval: 30s               # optional: how often utilisation and fragmentation are sampled
//! horizon: 6h                       # optional: virtual time at which the replay stops
//! arrivals:
//!   - {name: train-0, at: 0s, pods: 8, requests: {cpu: "8", nvidia.com/gpu: "8"}, required: rack, runTime: 2h}
//!   - {at: 90s, kind: Job, pods: 4, requests: {cpu: "4"}, preferred: rack, slice: {level: hostname, size: 2}, runTime: 10m}
//!   - {at: 95s, kind: Pod, requests: {cpu: "1"}, priority: 100, runTime: 30s}
//! ```
//!
//! or the same header with `arrivalsCsv: arrivals.csv` (relative to the YAML file) instead
//! of `arrivals`: a CSV file with a header row naming the columns
//! `name,at,kind,pods,minCount,cpu,memory,gpu,requests,required,preferred,sliceLevel,sliceSize,priority,runTime,class`
//! (any order, any subset that includes `at` and `runTime`; `requests` holds other
//! resources as `name=quantity;name=quantity`; lines starting with `#` are comments).
//!
//! Both forms go through one validation ([`arrival_from_fields`]) so they accept the same
//! values and report the same problems, each naming the file, the line and the field.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use placer_api::k8s::apimachinery::pkg::api::resource::Quantity;
use placer_api::quantity::{parse_milli, parse_units};
use placer_controllers::job::kubelet::parse_duration_ms;
use placer_sim::scenario::GenerateSpec;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use serde_saphyr::Spanned;

/// The GPU extended resource, the lab's "device".
pub const GPU: &str = "nvidia.com/gpu";
/// Most nodes a generated cluster may have.
pub const MAX_NODES: usize = 100_000;
/// Most pods one arrival may have.
pub const MAX_PODS: u32 = 10_000;
/// Most arrivals a trace may have.
pub const MAX_ARRIVALS: usize = 200_000;
/// Longest arrival name (pod names add a suffix to it).
pub const MAX_NAME: usize = 48;
/// Most problems listed in one error (the rest are counted).
const MAX_PROBLEMS: usize = 50;

/// What an arrival creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ArrivalKind {
    /// A `scheduling.k8s.io/v1alpha2` PodGroup (gang, `minCount`) and its pods.
    PodGroup,
    /// An Indexed `batch/v1` Job with `parallelism = completions = pods`: the Job
    /// controller creates the Workload, the PodGroup (KEP-5547) and the pods. A Job of one
    /// pod is not gang-shaped and runs as a single pod.
    Job,
    /// One pod without a group.
    Pod,
}

impl ArrivalKind {
    fn parse(s: &str) -> Option<ArrivalKind> {
        match s {
            "PodGroup" => Some(ArrivalKind::PodGroup),
            "Job" => Some(ArrivalKind::Job),
            "Pod" => Some(ArrivalKind::Pod),
            _ => None,
        }
    }

    /// The name as written in traces.
    pub fn name(self) -> &'static str {
        match self {
            ArrivalKind::PodGroup => "PodGroup",
            ArrivalKind::Job => "Job",
            ArrivalKind::Pod => "Pod",
        }
    }
}

/// The topology request of an arrival. Levels are indexes into [`Cluster::levels`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct TopologyAsk {
    /// All pods in one domain of this level.
    pub required: Option<usize>,
    /// One domain of this level if possible (Kueue's `podset-preferred-topology`).
    pub preferred: Option<usize>,
    /// Slices of `size` pods, each in one domain of `level`.
    pub slice: Option<(usize, u32)>,
}

impl TopologyAsk {
    /// No request at all.
    pub fn is_none(&self) -> bool {
        self.required.is_none() && self.preferred.is_none() && self.slice.is_none()
    }
}

/// Per-pod requests of the resources the lab measures (the engine reads the full list).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Res {
    pub cpu_milli: i64,
    pub memory: i64,
    pub gpu: i64,
    pub pods: i64,
}

impl Res {
    /// Reads the measured resources out of a resource list (unknown names are skipped;
    /// the list was validated before).
    pub fn from_list(list: &BTreeMap<String, Quantity>) -> Res {
        let get = |k: &str, f: fn(&str) -> Result<i64, placer_api::quantity::QuantityError>| {
            list.get(k).and_then(|q| f(&q.0).ok()).unwrap_or(0)
        };
        Res {
            cpu_milli: get("cpu", parse_milli),
            memory: get("memory", parse_units),
            gpu: get(GPU, parse_units),
            pods: get("pods", parse_units),
        }
    }

    pub fn add(&mut self, o: &Res) {
        self.cpu_milli += o.cpu_milli;
        self.memory += o.memory;
        self.gpu += o.gpu;
        self.pods += o.pods;
    }

    pub fn sub(&mut self, o: &Res) {
        self.cpu_milli -= o.cpu_milli;
        self.memory -= o.memory;
        self.gpu -= o.gpu;
        self.pods -= o.pods;
    }

    /// How many copies of `per` fit into `self` (every requested resource counts; a pod
    /// slot per copy). `u64::MAX` never happens: a pod always takes a slot.
    pub fn copies(&self, per: &Res) -> i64 {
        let mut n = if per.pods > 0 { self.pods / per.pods } else { self.pods };
        for (free, need) in [(self.cpu_milli, per.cpu_milli), (self.memory, per.memory), (self.gpu, per.gpu)]
        {
            if need > 0 {
                n = n.min(free / need);
            }
        }
        n.max(0)
    }
}

/// One arrival of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Arrival {
    /// Unique within the trace; objects are named after it.
    pub name: String,
    /// Virtual time of the arrival (ms from the start).
    pub at_ms: u64,
    pub kind: ArrivalKind,
    /// Pods of the workload.
    pub pods: u32,
    /// Gang `minCount` (equal to `pods` for Jobs and single pods).
    pub min_count: u32,
    /// Requests of every pod, as written.
    pub requests: BTreeMap<String, Quantity>,
    /// The measured part of `requests` (with one pod slot).
    pub res: Res,
    pub topology: TopologyAsk,
    /// `spec.priority` of the pods and the PodGroup.
    pub priority: i32,
    /// How long every pod runs once started (ms).
    pub run_ms: u64,
    /// Free-form class for the per-class breakdown (defaults to the kind and size).
    pub class: String,
}

impl Arrival {
    /// A gang: more than one pod (a PodGroup, or a Job of more than one pod).
    pub fn is_gang(&self) -> bool {
        self.kind != ArrivalKind::Pod && self.pods > 1
    }
}

/// The generated cluster of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    pub spec: GenerateSpec,
}

impl Cluster {
    /// Topology label keys, coarsest first.
    pub fn levels(&self) -> &[String] {
        &self.spec.levels
    }

    /// Allocatable of every node, measured resources.
    pub fn node_res(&self) -> Res {
        Res::from_list(&self.spec.allocatable)
    }

    pub fn node_count(&self) -> usize {
        self.spec.node_count()
    }

    /// Resolves a level written in a trace: the label key itself, its last path segment
    /// (`rack` for `topology.placer.dev/rack`), that segment without a `topology-` prefix
    /// (`rack` for `cloud.provider.com/topology-rack`), or `host` for
    /// `kubernetes.io/hostname`.
    pub fn level_index(&self, name: &str) -> Option<usize> {
        self.levels().iter().position(|l| short_names(l).iter().any(|s| s == name) || l == name)
    }

    /// The short name of a level (for tables): `rack`, `block`, `hostname`.
    pub fn short_name(&self, level: usize) -> String {
        self.levels()
            .get(level)
            .map(|l| short_names(l).pop().unwrap_or_else(|| l.clone()))
            .unwrap_or_default()
    }
}

fn short_names(level: &str) -> Vec<String> {
    let last = level.rsplit('/').next().unwrap_or(level).to_string();
    let mut out = vec![last.clone()];
    if let Some(s) = last.strip_prefix("topology-") {
        out.push(s.to_string());
    }
    if level == "kubernetes.io/hostname" {
        out.push("host".to_string());
        out.push("hostname".to_string());
    }
    out
}

/// A loaded, validated trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    pub name: String,
    pub description: Option<String>,
    /// Where it came from (a file, or `generated:<name>`).
    pub source: String,
    pub cluster: Cluster,
    /// Feature gates set under every configuration (on top of each configuration's own).
    pub gates: BTreeMap<String, bool>,
    /// Sampling period of the timeline (ms).
    pub sample_interval_ms: u64,
    /// Virtual time at which the replay stops, if any.
    pub horizon_ms: Option<u64>,
    /// Arrivals ordered by time (stable: equal times keep the file's order).
    pub arrivals: Vec<Arrival>,
}

impl Trace {
    /// Gangs (see [`Arrival::is_gang`]).
    pub fn gang_count(&self) -> usize {
        self.arrivals.iter().filter(|a| a.is_gang()).count()
    }

    /// Pods over all arrivals.
    pub fn pod_count(&self) -> u64 {
        self.arrivals.iter().map(|a| u64::from(a.pods)).sum()
    }
}

// ---------------------------------------------------------------------------------------
// Errors

/// One thing wrong with a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file it is in (the CSV file for arrivals read from one).
    pub file: PathBuf,
    /// 1-based line (0 when unknown).
    pub line: u64,
    /// The field as written: `arrivals[3].runTime`, `column runTime`, `cluster.generate.fanout`.
    pub field: String,
    pub message: String,
}

impl Problem {
    /// A problem with the field `loc` of `file`.
    fn at(file: &Path, loc: &Located, message: String) -> Problem {
        Problem { file: file.to_path_buf(), line: loc.line, field: loc.field.clone(), message }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if self.line > 0 {
            write!(f, ":{}", self.line)?;
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Why a trace could not be loaded. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{}: {source}", file.display())]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// YAML syntax, or a shape that is not a trace (unknown field, a list where a map belongs).
    #[error("{}:{line}:{column}: {message}", file.display())]
    Yaml { file: PathBuf, line: u64, column: u64, message: String },
    /// Well-formed but invalid: every problem on its own line.
    #[error("{}", render(problems, *more))]
    Invalid { problems: Vec<Problem>, more: usize },
}

fn render(problems: &[Problem], more: usize) -> String {
    let mut lines: Vec<String> = problems.iter().map(Problem::to_string).collect();
    if more > 0 {
        lines.push(format!("... and {more} more problems"));
    }
    lines.join("\n")
}

impl TraceError {
    fn invalid(mut problems: Vec<Problem>) -> TraceError {
        let more = problems.len().saturating_sub(MAX_PROBLEMS);
        problems.truncate(MAX_PROBLEMS);
        TraceError::Invalid { problems, more }
    }
}

// ---------------------------------------------------------------------------------------
// A field value with its position: the common form of YAML and CSV arrivals.

/// A scalar read as text, with the line it was on and the field's name as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub text: String,
    pub line: u64,
    pub field: String,
}

/// One arrival as read, before validation: every field optional, with positions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawFields {
    /// Where the arrival starts (for problems about the arrival as a whole).
    pub line: u64,
    /// How the arrival is named in messages: `arrivals[3]` or `row 3`.
    pub at: String,
    pub name: Option<Located>,
    pub time: Option<Located>,
    pub kind: Option<Located>,
    pub pods: Option<Located>,
    pub min_count: Option<Located>,
    pub requests: Vec<(String, Located)>,
    pub required: Option<Located>,
    pub preferred: Option<Located>,
    pub slice_level: Option<Located>,
    pub slice_size: Option<Located>,
    pub priority: Option<Located>,
    pub run_time: Option<Located>,
    pub class: Option<Located>,
}

/// Validates one arrival (`index` in file order). Problems name `file`, the line and the field.
pub fn arrival_from_fields(
    raw: &RawFields,
    index: usize,
    cluster: &Cluster,
    file: &Path,
    problems: &mut Vec<Problem>,
) -> Option<Arrival> {
    let before = problems.len();
    let mut bad = |loc: &Located, message: String| problems.push(Problem::at(file, loc, message));

    let name = match &raw.name {
        Some(n) => {
            if let Err(m) = check_name(&n.text) {
                bad(n, m);
            }
            n.text.clone()
        }
        None => format!("w{index}"),
    };
    let at_ms = match &raw.time {
        Some(t) => parse_duration_ms(&t.text).map_err(|e| bad(t, e.to_string())).unwrap_or(0),
        None => 0,
    };
    let kind = match &raw.kind {
        Some(k) => ArrivalKind::parse(&k.text).unwrap_or_else(|| {
            bad(k, format!("unknown kind {:?}: expected PodGroup, Job or Pod", k.text));
            ArrivalKind::PodGroup
        }),
        None => ArrivalKind::PodGroup,
    };
    let count = |loc: &Located, what: &str, bad: &mut dyn FnMut(&Located, String)| -> Option<u32> {
        match loc.text.trim().parse::<u32>() {
            Ok(n) if (1..=MAX_PODS).contains(&n) => Some(n),
            Ok(n) => {
                bad(loc, format!("{what} {n} is out of range: expected 1 to {MAX_PODS}"));
                None
            }
            Err(_) => {
                bad(loc, format!("{what} {:?} is not a whole number", loc.text));
                None
            }
        }
    };
    let pods = match &raw.pods {
        Some(p) => count(p, "pods", &mut bad).unwrap_or(1),
        None => 1,
    };
    let min_count = match &raw.min_count {
        Some(m) => {
            let v = count(m, "minCount", &mut bad).unwrap_or(pods);
            if v > pods {
                bad(m, format!("minCount {v} is larger than pods {pods}"));
            }
            if kind != ArrivalKind::PodGroup && v != pods {
                bad(
                    m,
                    format!(
                        "minCount applies to PodGroup arrivals only (a {} gang needs all its pods)",
                        kind.name()
                    ),
                );
            }
            v.min(pods)
        }
        None => pods,
    };
    if kind == ArrivalKind::Pod && pods != 1 {
        if let Some(p) = &raw.pods {
            bad(p, format!("a Pod arrival has exactly 1 pod, not {pods} (use PodGroup or Job for more)"));
        }
    }

    let mut requests = BTreeMap::new();
    for (resource, q) in &raw.requests {
        let parsed = if resource == "cpu" { parse_milli(&q.text) } else { parse_units(&q.text) };
        match parsed {
            Ok(v) if v < 0 => bad(q, format!("request {resource}={} is negative", q.text)),
            Ok(_) if resource == "pods" => {
                bad(q, "pods is not a request (every pod takes one slot)".to_string())
            }
            Ok(_) => {
                requests.insert(resource.clone(), Quantity(q.text.trim().to_string()));
            }
            Err(e) => bad(q, format!("request {resource}={:?}: {e}", q.text)),
        }
    }
    if raw.requests.is_empty() {
        problems.push(Problem {
            file: file.to_path_buf(),
            line: raw.line,
            field: raw.at.clone(),
            message: "no requests: give at least one (e.g. cpu)".to_string(),
        });
    }
    let mut bad = |loc: &Located, message: String| problems.push(Problem::at(file, loc, message));

    let level = |loc: &Located, bad: &mut dyn FnMut(&Located, String)| -> Option<usize> {
        let l = cluster.level_index(loc.text.trim());
        if l.is_none() {
            let known: Vec<String> = (0..cluster.levels().len()).map(|i| cluster.short_name(i)).collect();
            bad(loc, format!("unknown level {:?}: the cluster's levels are {}", loc.text, known.join(", ")));
        }
        l
    };
    let mut topology = TopologyAsk::default();
    if let Some(r) = &raw.required {
        topology.required = level(r, &mut bad);
    }
    if let Some(p) = &raw.preferred {
        if raw.required.is_some() {
            bad(p, "required and preferred are mutually exclusive".to_string());
        } else {
            topology.preferred = level(p, &mut bad);
        }
    }
    match (&raw.slice_level, &raw.slice_size) {
        (Some(l), Some(s)) => {
            let lv = level(l, &mut bad);
            let size = count(s, "slice size", &mut bad);
            if let (Some(lv), Some(size)) = (lv, size) {
                let main = topology.required.or(topology.preferred).unwrap_or(0);
                if lv < main {
                    bad(
                        l,
                        format!(
                            "the slice level {} is above the requested level {}",
                            l.text,
                            cluster.short_name(main)
                        ),
                    );
                }
                if !pods.is_multiple_of(size) {
                    bad(s, format!("slice size {size} does not divide pods {pods}"));
                }
                topology.slice = Some((lv, size));
            }
        }
        (Some(l), None) => bad(l, "a slice level needs a slice size".to_string()),
        (None, Some(s)) => bad(s, "a slice size needs a slice level".to_string()),
        (None, None) => {}
    }
    if kind == ArrivalKind::Pod && !topology.is_none() {
        let loc = raw.required.as_ref().or(raw.preferred.as_ref()).or(raw.slice_level.as_ref());
        if let Some(loc) = loc {
            bad(loc, "a single Pod has no topology request".to_string());
        }
    }

    let priority = match &raw.priority {
        Some(p) => p.text.trim().parse::<i32>().unwrap_or_else(|_| {
            bad(p, format!("priority {:?} is not a 32-bit integer", p.text));
            0
        }),
        None => 0,
    };
    let run_ms = match &raw.run_time {
        Some(r) => match parse_duration_ms(&r.text) {
            Ok(0) => {
                bad(r, "runTime must be positive".to_string());
                1
            }
            Ok(ms) => ms,
            Err(e) => {
                bad(r, e.to_string());
                1
            }
        },
        None => {
            problems.push(Problem {
                file: file.to_path_buf(),
                line: raw.line,
                field: raw.at.clone(),
                message: "runTime is required".to_string(),
            });
            1
        }
    };
    let class = match &raw.class {
        Some(c) => c.text.trim().to_string(),
        None => default_class(kind, pods, &topology, cluster),
    };
    if problems.len() > before {
        return None;
    }
    let mut res = Res::from_list(&requests);
    res.pods = 1;
    Some(Arrival { name, at_ms, kind, pods, min_count, requests, res, topology, priority, run_ms, class })
}

/// `PodGroup x8 rack`, `Pod`: the class of an arrival that names none.
fn default_class(kind: ArrivalKind, pods: u32, t: &TopologyAsk, cluster: &Cluster) -> String {
    let mut s = if kind == ArrivalKind::Pod { "Pod".to_string() } else { format!("{} x{pods}", kind.name()) };
    if let Some(l) = t.required {
        s.push_str(&format!(" required-{}", cluster.short_name(l)));
    } else if let Some(l) = t.preferred {
        s.push_str(&format!(" preferred-{}", cluster.short_name(l)));
    }
    if let Some((l, n)) = t.slice {
        s.push_str(&format!(" slice-{}x{n}", cluster.short_name(l)));
    }
    s
}

/// Names become object names with suffixes: lower-case letters, digits and `-`, starting
/// and ending with a letter or digit.
fn check_name(name: &str) -> Result<(), String> {
    let ok_chars = name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let ends = name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && name.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric());
    if name.is_empty() || name.len() > MAX_NAME || !ok_chars || !ends {
        return Err(format!(
            "invalid name {name:?}: expected 1 to {MAX_NAME} lower-case letters, digits or '-', starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// YAML

/// Any YAML scalar, read as its text (so `8`, `"8"` and `8.0` reach validation alike).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Text(String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a scalar (text or number)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

type Field = Option<Spanned<Text>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawTrace {
    name: String,
    #[serde(default)]
    description: Option<String>,
    cluster: RawCluster,
    #[serde(default)]
    scheduler: Option<RawScheduler>,
    #[serde(default)]
    sample_interval: Field,
    #[serde(default)]
    horizon: Field,
    #[serde(default)]
    arrivals: Option<Spanned<Vec<Spanned<RawArrival>>>>,
    #[serde(default)]
    arrivals_csv: Field,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawCluster {
    generate: Spanned<GenerateSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawScheduler {
    #[serde(default)]
    feature_gates: BTreeMap<String, bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawArrival {
    #[serde(default)]
    name: Field,
    #[serde(default)]
    at: Field,
    #[serde(default)]
    kind: Field,
    #[serde(default)]
    pods: Field,
    #[serde(default)]
    min_count: Field,
    #[serde(default)]
    requests: BTreeMap<String, Spanned<Text>>,
    #[serde(default)]
    required: Field,
    #[serde(default)]
    preferred: Field,
    #[serde(default)]
    slice: Option<RawSlice>,
    #[serde(default)]
    priority: Field,
    #[serde(default)]
    run_time: Field,
    #[serde(default)]
    class: Field,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSlice {
    #[serde(default)]
    level: Field,
    #[serde(default)]
    size: Field,
}

fn loc(f: &Field, path: &str) -> Option<Located> {
    f.as_ref().map(|s| Located {
        text: s.value.0.clone(),
        line: s.referenced.line(),
        field: path.to_string(),
    })
}

impl RawArrival {
    fn fields(&self, i: usize, line: u64) -> RawFields {
        let at = format!("arrivals[{i}]");
        let p = |name: &str| format!("{at}.{name}");
        RawFields {
            line,
            name: loc(&self.name, &p("name")),
            time: loc(&self.at, &p("at")),
            kind: loc(&self.kind, &p("kind")),
            pods: loc(&self.pods, &p("pods")),
            min_count: loc(&self.min_count, &p("minCount")),
            requests: self
                .requests
                .iter()
                .map(|(k, v)| {
                    let l = Located {
                        text: v.value.0.clone(),
                        line: v.referenced.line(),
                        field: p(&format!("requests.{k}")),
                    };
                    (k.clone(), l)
                })
                .collect(),
            required: loc(&self.required, &p("required")),
            preferred: loc(&self.preferred, &p("preferred")),
            slice_level: self.slice.as_ref().and_then(|s| loc(&s.level, &p("slice.level"))),
            slice_size: self.slice.as_ref().and_then(|s| loc(&s.size, &p("slice.size"))),
            priority: loc(&self.priority, &p("priority")),
            run_time: loc(&self.run_time, &p("runTime")),
            class: loc(&self.class, &p("class")),
            at,
        }
    }
}

/// Reads and validates a trace file.
pub fn load_file(path: impl AsRef<Path>) -> Result<Trace, TraceError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path)
        .map_err(|source| TraceError::Io { file: path.to_path_buf(), source })?;
    load_str(&text, path, |csv| {
        let p = path.parent().unwrap_or(Path::new(".")).join(csv);
        let t = std::fs::read_to_string(&p).map_err(|source| TraceError::Io { file: p.clone(), source })?;
        Ok((p, t))
    })
}

/// Parses and validates trace text; `file` names it in messages, `read_csv` reads the
/// file `arrivalsCsv` names (path relative to the trace), returning its path and text.
pub fn load_str(
    text: &str,
    file: impl AsRef<Path>,
    read_csv: impl FnOnce(&str) -> Result<(PathBuf, String), TraceError>,
) -> Result<Trace, TraceError> {
    let file = file.as_ref().to_path_buf();
    let options = serde_saphyr::options! { strict_booleans: true, leading_zero_numbers_as_strings: true };
    let raw: RawTrace = serde_saphyr::from_str_with_options(text, options).map_err(|e| {
        let (line, column) = e.location().map(|l| (l.line(), l.column())).unwrap_or((0, 0));
        let mut message = e.without_snippet().to_string();
        let suffix = format!(" at line {line}, column {column}");
        if let Some(s) = message.strip_suffix(&suffix) {
            message = s.to_string();
        }
        TraceError::Yaml { file: file.clone(), line, column, message }
    })?;

    let mut problems = Vec::new();
    let problem = |line: u64, field: &str, message: String| Problem {
        file: file.clone(),
        line,
        field: field.to_string(),
        message,
    };
    let gen_line = raw.cluster.generate.referenced.line();
    let spec = raw.cluster.generate.value;
    problems.extend(check_cluster(&spec).into_iter().map(|(f, m)| problem(gen_line, &f, m)));
    let cluster = Cluster { spec };

    let mut gates = BTreeMap::new();
    if let Some(s) = raw.scheduler {
        for (name, v) in s.feature_gates {
            if let Err(e) = placer_api::gates::FeatureGates::with_overrides([(name.as_str(), v)]) {
                problems.push(problem(0, &format!("scheduler.featureGates.{name}"), e.to_string()));
            }
            gates.insert(name, v);
        }
    }
    let duration = |f: &Field, field: &str, problems: &mut Vec<Problem>| -> Option<u64> {
        let s = f.as_ref()?;
        match parse_duration_ms(&s.value.0) {
            Ok(0) => {
                problems.push(problem(s.referenced.line(), field, "must be positive".to_string()));
                None
            }
            Ok(ms) => Some(ms),
            Err(e) => {
                problems.push(problem(s.referenced.line(), field, e.to_string()));
                None
            }
        }
    };
    let sample = duration(&raw.sample_interval, "sampleInterval", &mut problems);
    let horizon_ms = duration(&raw.horizon, "horizon", &mut problems);

    let mut arrivals = Vec::new();
    let mut check_all = |rows: Vec<RawFields>, in_file: &Path, problems: &mut Vec<Problem>| {
        if rows.len() > MAX_ARRIVALS {
            problems.push(Problem {
                file: in_file.to_path_buf(),
                line: 0,
                field: String::new(),
                message: format!("{} arrivals: at most {MAX_ARRIVALS} are allowed", rows.len()),
            });
            return;
        }
        let mut names: BTreeMap<String, u64> = BTreeMap::new();
        for (i, r) in rows.iter().enumerate() {
            if let Some(a) = arrival_from_fields(r, i, &cluster, in_file, problems) {
                if let Some(first) = names.insert(a.name.clone(), r.line) {
                    let l = r.name.as_ref().map_or(r.line, |n| n.line);
                    problems.push(Problem {
                        file: in_file.to_path_buf(),
                        line: l,
                        field: r.name.as_ref().map_or(r.at.clone(), |n| n.field.clone()),
                        message: format!("duplicate name {:?} (first on line {first})", a.name),
                    });
                    continue;
                }
                arrivals.push(a);
            }
        }
    };
    match (&raw.arrivals, &raw.arrivals_csv) {
        (Some(_), Some(c)) => problems.push(problem(
            c.referenced.line(),
            "arrivalsCsv",
            "give either arrivals or arrivalsCsv, not both".to_string(),
        )),
        (None, None) => problems.push(problem(
            0,
            "arrivals",
            "the trace has no arrivals (arrivals or arrivalsCsv)".to_string(),
        )),
        (Some(list), None) => {
            let rows: Vec<RawFields> =
                list.value.iter().enumerate().map(|(i, a)| a.value.fields(i, a.referenced.line())).collect();
            if rows.is_empty() {
                problems.push(problem(list.referenced.line(), "arrivals", "the list is empty".to_string()));
            }
            check_all(rows, &file, &mut problems);
        }
        (None, Some(c)) => match read_csv(&c.value.0) {
            Err(e) => problems.push(problem(c.referenced.line(), "arrivalsCsv", e.to_string())),
            Ok((csv_file, csv_text)) => match parse_csv(&csv_text) {
                Err(p) => problems.push(Problem { file: csv_file, ..p }),
                Ok(rows) => {
                    if rows.is_empty() {
                        problems.push(Problem {
                            file: csv_file.clone(),
                            line: 0,
                            field: String::new(),
                            message: "no arrival rows".to_string(),
                        });
                    }
                    check_all(rows, &csv_file, &mut problems)
                }
            },
        },
    }
    if !problems.is_empty() {
        return Err(TraceError::invalid(problems));
    }
    arrivals.sort_by_key(|a| a.at_ms);
    let sample_interval_ms = sample.unwrap_or_else(|| default_sample_interval(&arrivals));
    Ok(Trace {
        name: raw.name,
        description: raw.description,
        source: file.display().to_string(),
        cluster,
        gates,
        sample_interval_ms,
        horizon_ms,
        arrivals,
    })
}

/// About 300 samples over the arrivals plus a median run time, at least one second.
pub fn default_sample_interval(arrivals: &[Arrival]) -> u64 {
    let last = arrivals.iter().map(|a| a.at_ms).max().unwrap_or(0);
    let mut runs: Vec<u64> = arrivals.iter().map(|a| a.run_ms).collect();
    runs.sort_unstable();
    let median = runs.get(runs.len() / 2).copied().unwrap_or(0);
    ((last + median) / 300).max(1_000)
}

/// Problems of a `cluster.generate` block, as (field, message).
fn check_cluster(g: &GenerateSpec) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let f = |s: &str| format!("cluster.generate.{s}");
    if g.levels.is_empty() {
        out.push((f("levels"), "at least one level is needed".to_string()));
    }
    if g.fanout.len() != g.levels.len() {
        out.push((f("fanout"), format!("{} entries for {} levels", g.fanout.len(), g.levels.len())));
    }
    if g.fanout.contains(&0) {
        out.push((f("fanout"), "every fanout must be at least 1".to_string()));
    }
    if g.node_count() > MAX_NODES {
        out.push((f("fanout"), format!("{} nodes: at most {MAX_NODES} are allowed", g.node_count())));
    }
    let mut seen = BTreeSet::new();
    for l in &g.levels {
        if !seen.insert(l) {
            out.push((f("levels"), format!("level {l:?} is listed twice")));
        }
    }
    for (k, q) in &g.allocatable {
        let v = if k == "cpu" { parse_milli(&q.0) } else { parse_units(&q.0) };
        match v {
            Ok(v) if v < 0 => out.push((f(&format!("allocatable.{k}")), format!("{:?} is negative", q.0))),
            Ok(_) => {}
            Err(e) => out.push((f(&format!("allocatable.{k}")), format!("{:?}: {e}", q.0))),
        }
    }
    if !g.allocatable.contains_key("pods") {
        out.push((f("allocatable.pods"), "missing: give the pod slots of a node (e.g. \"110\")".to_string()));
    }
    out
}

// ---------------------------------------------------------------------------------------
// CSV

/// Columns a CSV trace may have.
pub const CSV_COLUMNS: [&str; 16] = [
    "name",
    "at",
    "kind",
    "pods",
    "minCount",
    "cpu",
    "memory",
    "gpu",
    "requests",
    "required",
    "preferred",
    "sliceLevel",
    "sliceSize",
    "priority",
    "runTime",
    "class",
];

/// Splits one CSV line into fields (RFC 4180: `"` quotes, `""` inside quotes).
fn split_csv_line(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut was_quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            (true, '"') => quoted = false,
            (true, c) => cur.push(c),
            (false, '"') if cur.trim().is_empty() && !was_quoted => {
                cur.clear();
                quoted = true;
                was_quoted = true;
            }
            (false, '"') => return Err("a quote inside an unquoted field".to_string()),
            (false, ',') => {
                fields.push(std::mem::take(&mut cur));
                was_quoted = false;
            }
            (false, c) => cur.push(c),
        }
    }
    if quoted {
        return Err("unterminated quote".to_string());
    }
    fields.push(cur);
    Ok(fields)
}

/// Reads CSV arrivals into the common form. The problem returned on a malformed file has
/// an empty `file` (the caller fills it).
pub fn parse_csv(text: &str) -> Result<Vec<RawFields>, Problem> {
    let problem =
        |line: u64, field: String, message: String| Problem { file: PathBuf::new(), line, field, message };
    let mut header: Option<Vec<String>> = None;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = (i + 1) as u64;
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let fields = split_csv_line(line).map_err(|m| problem(n, String::new(), m))?;
        let fields: Vec<String> = fields.into_iter().map(|f| f.trim().to_string()).collect();
        let Some(cols) = &header else {
            let mut seen = BTreeSet::new();
            for c in &fields {
                if !CSV_COLUMNS.contains(&c.as_str()) {
                    return Err(problem(
                        n,
                        format!("column {c}"),
                        format!("unknown column (known: {})", CSV_COLUMNS.join(", ")),
                    ));
                }
                if !seen.insert(c.clone()) {
                    return Err(problem(n, format!("column {c}"), "listed twice".to_string()));
                }
            }
            for needed in ["at", "runTime"] {
                if !seen.contains(needed) {
                    return Err(problem(
                        n,
                        format!("column {needed}"),
                        "missing from the header".to_string(),
                    ));
                }
            }
            header = Some(fields);
            continue;
        };
        if fields.len() != cols.len() {
            return Err(problem(
                n,
                String::new(),
                format!("{} fields, the header has {}", fields.len(), cols.len()),
            ));
        }
        let mut raw = RawFields { line: n, at: format!("row {}", rows.len()), ..RawFields::default() };
        for (col, value) in cols.iter().zip(fields) {
            if value.is_empty() {
                continue;
            }
            let l = Located { text: value.clone(), line: n, field: format!("column {col}") };
            match col.as_str() {
                "name" => raw.name = Some(l),
                "at" => raw.time = Some(l),
                "kind" => raw.kind = Some(l),
                "pods" => raw.pods = Some(l),
                "minCount" => raw.min_count = Some(l),
                "cpu" | "memory" => raw.requests.push((col.clone(), l)),
                "gpu" => raw.requests.push((GPU.to_string(), l)),
                "requests" => {
                    for part in value.split(';').map(str::trim).filter(|p| !p.is_empty()) {
                        let Some((k, v)) = part.split_once('=') else {
                            return Err(problem(
                                n,
                                l.field.clone(),
                                format!("{part:?}: expected name=quantity, separated by ';'"),
                            ));
                        };
                        let item = Located { text: v.trim().to_string(), line: n, field: l.field.clone() };
                        raw.requests.push((k.trim().to_string(), item));
                    }
                }
                "required" => raw.required = Some(l),
                "preferred" => raw.preferred = Some(l),
                "sliceLevel" => raw.slice_level = Some(l),
                "sliceSize" => raw.slice_size = Some(l),
                "priority" => raw.priority = Some(l),
                "runTime" => raw.run_time = Some(l),
                "class" => raw.class = Some(l),
                _ => {}
            }
        }
        let mut names = BTreeSet::new();
        for (k, l) in &raw.requests {
            if !names.insert(k.clone()) {
                return Err(problem(n, l.field.clone(), format!("request {k} is given twice")));
            }
        }
        rows.push(raw);
    }
    if header.is_none() {
        return Err(problem(0, String::new(), "no header row".to_string()));
    }
    Ok(rows)
}

// ---------------------------------------------------------------------------------------
// Writing traces (generated ones, so they can be edited and replayed)

/// A duration as a trace writes it: the largest exact unit (`90s`, `2h`, `1500ms`).
pub fn fmt_duration(ms: u64) -> String {
    for (unit, f) in [("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
        if ms >= f && ms.is_multiple_of(f) {
            return format!("{}{unit}", ms / f);
        }
    }
    format!("{ms}ms")
}

/// The trace as YAML in the format [`load_str`] reads (arrivals inline, one per line).
pub fn to_yaml(t: &Trace) -> String {
    use std::fmt::Write;
    let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let map = |m: &BTreeMap<String, Quantity>| {
        m.iter().map(|(k, v)| format!("{}: {}", q(k), q(&v.0))).collect::<Vec<_>>().join(", ")
    };
    let mut out = String::new();
    let _ = writeln!(out, "name: {}", q(&t.name));
    if let Some(d) = &t.description {
        let _ = writeln!(out, "description: {}", q(d));
    }
    let g = &t.cluster.spec;
    let _ = writeln!(out, "cluster:\n  generate:");
    let _ = writeln!(out, "    levels: [{}]", g.levels.iter().map(|l| q(l)).collect::<Vec<_>>().join(", "));
    let _ =
        writeln!(out, "    fanout: [{}]", g.fanout.iter().map(u32::to_string).collect::<Vec<_>>().join(", "));
    let _ = writeln!(out, "    allocatable: {{{}}}", map(&g.allocatable));
    if !g.labels.is_empty() {
        let labels =
            g.labels.iter().map(|(k, v)| format!("{}: {}", q(k), q(v))).collect::<Vec<_>>().join(", ");
        let _ = writeln!(out, "    labels: {{{labels}}}");
    }
    if !t.gates.is_empty() {
        let gates = t.gates.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ");
        let _ = writeln!(out, "scheduler:\n  featureGates: {{{gates}}}");
    }
    let _ = writeln!(out, "sampleInterval: {}", fmt_duration(t.sample_interval_ms));
    if let Some(h) = t.horizon_ms {
        let _ = writeln!(out, "horizon: {}", fmt_duration(h));
    }
    let _ = writeln!(out, "arrivals:");
    let level = |l: usize| q(&t.cluster.short_name(l));
    for a in &t.arrivals {
        let mut f = vec![format!("name: {}", a.name), format!("at: {}", fmt_duration(a.at_ms))];
        if a.kind != ArrivalKind::PodGroup {
            f.push(format!("kind: {}", a.kind.name()));
        }
        if a.pods != 1 {
            f.push(format!("pods: {}", a.pods));
        }
        if a.min_count != a.pods {
            f.push(format!("minCount: {}", a.min_count));
        }
        f.push(format!("requests: {{{}}}", map(&a.requests)));
        if let Some(l) = a.topology.required {
            f.push(format!("required: {}", level(l)));
        }
        if let Some(l) = a.topology.preferred {
            f.push(format!("preferred: {}", level(l)));
        }
        if let Some((l, n)) = a.topology.slice {
            f.push(format!("slice: {{level: {}, size: {n}}}", level(l)));
        }
        if a.priority != 0 {
            f.push(format!("priority: {}", a.priority));
        }
        f.push(format!("runTime: {}", fmt_duration(a.run_ms)));
        f.push(format!("class: {}", q(&a.class)));
        let _ = writeln!(out, "  - {{{}}}", f.join(", "));
    }
    out
}

#[cfg(test)]
mod tests;
