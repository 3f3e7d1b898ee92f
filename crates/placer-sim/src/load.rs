//! Loading a scenario file: YAML parsing, typing of the manifests, validation.
//!
//! Parsing runs in two passes over the same text. The first pass reads the scenario
//! structure with only the `apiVersion` / `kind` / `metadata` header of every manifest and
//! records, in the order the parser meets them, which [`Kind`] each manifest is. Unknown
//! kinds are reported here, all of them, with their position. The second pass reads the
//! file again and deserializes each manifest straight into the typed struct of its kind
//! (k8s-openapi), taking the kinds from that record: no detour through an untyped value,
//! so a label value `on` or `0123` stays a string.
//!
//! Then the manifests are checked as the API server checks them: fields the typed structs
//! do not know (the server's strict field validation rejects them), quoted numbers in
//! number fields, and [`placer_cluster::validation`]. Every problem names the file, the
//! line and column of the field, the object and the field; parser errors are turned into
//! the same form (see [`yaml_walk`](crate::yaml_walk) for how positions are found).
//!
//! Input is bounded: a file larger than [`MAX_INPUT_BYTES`] is refused after reading that
//! much (`/dev/zero` included), and the YAML parser's node budget is what a file of that
//! size can hold ([`MAX_YAML_NODES`]).

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use placer_api::k8s::api::batch::v1::{CronJob, Job};
use placer_api::k8s::api::coordination::v1::Lease;
use placer_api::k8s::api::core::v1::{Event, Namespace, Node, Pod};
use placer_api::k8s::api::policy::v1::PodDisruptionBudget;
use placer_api::k8s::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
/// The storage kinds (core/v1 claims and volumes, storage.k8s.io/v1).
mod storage {
    pub use placer_api::k8s::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    pub use placer_api::k8s::api::storage::v1::{
        CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
    };
}
use placer_api::k8s::api::scheduling::v1::PriorityClass;
use placer_api::k8s::api::scheduling::v1alpha2::{PodGroup, Workload};
use placer_cluster::validation::echo;
use placer_cluster::{Kind, Object, ObjectRef};
use serde::de::{Deserializer, Error as _, IgnoredAny};
use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::scenario::{
    parse_duration_ms, Expect, GenerateSpec, Manifest, Scenario, SchedulerSpec, Step, StepAction, TaintStep,
};
use crate::validate;
use crate::yaml_walk::{self, NodeKind, Seg};

/// Largest scenario file Placer reads: 16 MiB, room for about 60,000 listed pods. Larger
/// input is refused after reading this much.
pub const MAX_INPUT_BYTES: usize = 16 * 1024 * 1024;

/// Most YAML nodes (scalars, lists, mappings, keys included) a scenario may have: every
/// node takes at least two bytes of text, so this is what [`MAX_INPUT_BYTES`] can hold.
/// It also bounds what aliases may expand to.
pub const MAX_YAML_NODES: usize = MAX_INPUT_BYTES / 2 + 1024;

/// Why a scenario could not be loaded. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("{}: {source}", file.display())]
    Io {
        /// The file.
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_INPUT_BYTES`].
    #[error(
        "{}: the file is larger than {} MiB ({limit} bytes), the most Placer reads from a scenario file",
        file.display(),
        limit / (1024 * 1024)
    )]
    TooLarge {
        /// The file.
        file: PathBuf,
        /// The limit in bytes.
        limit: usize,
    },
    /// YAML syntax error, or YAML that does not have the scenario's shape (unknown field,
    /// wrong type, ...). The message names the object and field when the error is inside
    /// one.
    #[error("{}:{line}:{column}: {message}", file.display())]
    Yaml {
        file: PathBuf,
        line: u64,
        column: u64,
        message: String,
        /// The parser's rendering with a source snippet (for terminals).
        snippet: String,
        /// The scenario's top-level `expect.error`, when it could be read.
        expected_error: Option<String>,
    },
    /// Well-formed YAML with invalid content: one or more problems, each on its own line.
    #[error("{}", render_problems(file, problems))]
    Invalid {
        file: PathBuf,
        problems: Vec<Problem>,
        /// The scenario's top-level `expect.error`, when it has one: the scenario is a
        /// bad-input case and expects to be rejected with a message containing it.
        expected_error: Option<String>,
    },
}

impl LoadError {
    /// The file the error is about.
    pub fn file(&self) -> &Path {
        match self {
            LoadError::Io { file, .. }
            | LoadError::TooLarge { file, .. }
            | LoadError::Yaml { file, .. }
            | LoadError::Invalid { file, .. } => file,
        }
    }

    /// True when the scenario declares this rejection: its top-level `expect.error` is a
    /// substring of one of the problems.
    pub fn is_expected(&self) -> bool {
        match self {
            LoadError::Invalid { problems, expected_error: Some(expected), file } => {
                problems.iter().any(|p| p.render(file).contains(expected.as_str()))
            }
            LoadError::Yaml { expected_error: Some(expected), .. } => {
                self.to_string().contains(expected.as_str())
            }
            _ => false,
        }
    }
}

fn render_problems(file: &Path, problems: &[Problem]) -> String {
    problems.iter().map(|p| p.render(file)).collect::<Vec<_>>().join("\n")
}

/// One validation problem: where, which object, which field, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line and column of the field (or, when it is absent, of the nearest
    /// enclosing part of the file that is present; 0: unknown).
    pub line: u64,
    pub column: u64,
    /// Position in the scenario, e.g. `submit[1]` or `scheduler.featureGates`.
    pub at: String,
    /// The object, `Kind namespace/name`, when the problem is inside a manifest.
    pub object: Option<String>,
    /// Field path inside the object or entry (may be empty).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl Problem {
    /// `file:line:col: at: object: field: message`, leaving out empty parts.
    pub fn render(&self, file: &Path) -> String {
        if self.line > 0 {
            format!("{}:{self}", file.display())
        } else {
            format!("{}: {self}", file.display())
        }
    }
}

impl fmt::Display for Problem {
    /// `line:col: at: object: field: message` (no file), leaving out empty parts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: ", self.line, self.column)?;
        }
        let mut parts = Vec::new();
        if !self.at.is_empty() {
            parts.push(self.at.as_str());
        }
        if let Some(object) = &self.object {
            parts.push(object.as_str());
        }
        if !self.field.is_empty() {
            parts.push(self.field.as_str());
        }
        parts.push(self.message.as_str());
        f.write_str(&parts.join(": "))
    }
}

/// Reads, parses and validates a scenario file. At most [`MAX_INPUT_BYTES`] are read.
pub fn load_file(path: impl AsRef<Path>) -> Result<Scenario, LoadError> {
    let path = path.as_ref();
    let text = crate::inputs::read_input(path)?;
    load_str(&text, path)
}

/// Parses and validates scenario text; `file` names it in messages.
pub fn load_str(text: &str, file: impl AsRef<Path>) -> Result<Scenario, LoadError> {
    let file = file.as_ref().to_path_buf();
    if text.len() > MAX_INPUT_BYTES {
        return Err(LoadError::TooLarge { file, limit: MAX_INPUT_BYTES });
    }
    // Pass 1: structure + manifest headers.
    let (headers, kinds) = with_tape(Tape::Record(Vec::new()), || {
        serde_saphyr::from_str_with_options::<RawScenario<Spanned<Header>>>(text, yaml_options())
    });
    let headers = headers.map_err(|e| yaml_error(&file, text, e, lenient_expected_error(text)))?;
    let expected_error = headers.expect.as_ref().and_then(|e| e.error.clone());
    let problems = check_headers(&headers);
    if !problems.is_empty() {
        return Err(LoadError::Invalid { file, problems, expected_error });
    }
    let Tape::Record(kinds) = kinds else {
        return Err(internal(&file, "manifest kinds were not recorded"));
    };
    drop(headers);
    // Pass 2: typed manifests.
    let (raw, rest) = with_tape(Tape::Replay(kinds.into_iter().collect()), || {
        serde_saphyr::from_str_with_options::<RawScenario<Spanned<Typed>>>(text, yaml_options())
    });
    let raw = raw.map_err(|e| yaml_error(&file, text, e, expected_error.clone()))?;
    if !matches!(&rest, Tape::Replay(left) if left.is_empty()) {
        return Err(internal(&file, "manifest kinds out of step between passes"));
    }
    let mut problems = Vec::new();
    let scenario = convert(raw, file.clone(), &mut problems);
    check_typing(text, &scenario, &mut problems);
    validate::validate(&scenario, &mut problems);
    if problems.is_empty() {
        Ok(scenario)
    } else {
        locate_problems(text, &mut problems);
        Err(LoadError::Invalid { file, problems, expected_error })
    }
}

/// What is valid in a loaded scenario but will not work as written (a CronJob whose job
/// template Kueue's Job webhook refuses), for `placer validate` to warn about; with the
/// file's text, each warning is at its field's line.
pub fn warnings(scenario: &Scenario, text: Option<&str>) -> Vec<Problem> {
    let mut warnings = validate::warnings(scenario);
    if let Some(text) = text.filter(|_| !warnings.is_empty()) {
        locate_problems(text, &mut warnings);
    }
    warnings
}

fn internal(file: &Path, message: &str) -> LoadError {
    LoadError::Invalid {
        file: file.to_path_buf(),
        problems: vec![Problem {
            line: 0,
            column: 0,
            at: "scenario".into(),
            object: None,
            field: String::new(),
            message: format!("internal error: {message}"),
        }],
        expected_error: None,
    }
}

/// YAML 1.2 core schema for untyped values (patterns, patches): `on`/`yes` and `0123`
/// stay strings there, as they do in typed fields. The budget is what
/// [`MAX_INPUT_BYTES`] of text can hold.
pub(crate) fn yaml_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_nodes = MAX_YAML_NODES;
    budget.max_events = MAX_YAML_NODES.saturating_mul(2).saturating_add(64);
    budget.max_reader_input_bytes = Some(MAX_INPUT_BYTES);
    serde_saphyr::options! {
        strict_booleans: true,
        leading_zero_numbers_as_strings: true,
        budget: Some(budget),
    }
}

/// The top-level `expect.error` of a file whose structure did not parse, if it can be read
/// at all (a bad-input case is still recognised).
fn lenient_expected_error(text: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Root {
        #[serde(default)]
        expect: Option<ExpectError>,
    }
    #[derive(Deserialize)]
    struct ExpectError {
        #[serde(default)]
        error: Option<String>,
    }
    serde_saphyr::from_str_with_options::<Root>(text, yaml_options()).ok()?.expect?.error
}

// ---------------------------------------------------------------------------------------
// Parser errors as problems: the object and field they are in, and a sentence.

/// Where a path of the file belongs: the entry it is in (`submit[2]`, `steps[1]`,
/// `scheduler.profile`, ...), how many segments that takes, and whether it is a manifest.
fn entry_of(path: &[Seg]) -> (usize, bool) {
    let key = |i: usize, k: &str| matches!(path.get(i), Some(Seg::Key(x)) if x == k);
    let index = |i: usize| matches!(path.get(i), Some(Seg::Index(_)));
    if key(0, "submit") && index(1) {
        (2, true)
    } else if key(0, "steps") && index(1) && key(2, "submit") && index(3) {
        (4, true)
    } else if key(0, "cluster") && (key(1, "nodes") || key(1, "pods")) && index(2) {
        (3, true)
    } else if (key(0, "steps") && index(1))
        || (key(0, "scheduler") && (key(1, "profile") || key(1, "featureGates")))
        || (key(0, "cluster") && path.len() > 1)
    {
        (2, false)
    } else {
        (path.len().min(1), false)
    }
}

/// `Kind namespace/name` of the manifest at `entry`, read from the text.
fn manifest_name(text: &str, entry: &[Seg]) -> String {
    let at = |tail: &[&str]| {
        let mut p = entry.to_vec();
        p.extend(tail.iter().map(|k| Seg::Key(k.to_string())));
        p
    };
    let found = yaml_walk::scalars_at(
        text,
        &[at(&["kind"]), at(&["metadata", "name"]), at(&["metadata", "namespace"]), at(&["apiVersion"])],
    );
    let implied = match entry.get(1) {
        Some(Seg::Key(k)) if k == "nodes" => "Node",
        Some(Seg::Key(k)) if k == "pods" => "Pod",
        _ => "object",
    };
    let kind = found[0].clone().unwrap_or_else(|| implied.to_string());
    let kind_known = |kind: &str| {
        let api_version = found[3].clone().unwrap_or_default();
        Kind::from_type(&api_version, kind).or_else(|| Kind::ALL.into_iter().find(|k| k.name() == kind))
    };
    let namespaced = kind_known(&kind).is_none_or(Kind::namespaced);
    match (&found[1], namespaced) {
        (Some(name), true) => {
            format!("{kind} {}/{name}", found[2].clone().unwrap_or_else(|| "default".to_string()))
        }
        (Some(name), false) => format!("{kind} {name}"),
        (None, _) => format!("{kind} (unnamed)"),
    }
}

/// What a parser error says, as a sentence about the value `found` at its position.
fn sentence(e: &serde_saphyr::Error, found: &str, in_step: bool) -> String {
    use serde_saphyr::Error as E;
    let integer = |ty: &str| match ty {
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => Some(format!("must be an integer ({ty})")),
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => {
            Some(format!("must be a non-negative integer ({ty})"))
        }
        _ => None,
    };
    match e {
        E::InvalidScalar { ty, .. } => match integer(ty) {
            Some(m) => format!("Invalid value: {found}: {m}"),
            None if ty.starts_with('f') => format!("Invalid value: {found}: must be a number"),
            None if *ty == "bool" => format!("Invalid value: {found}: must be true or false"),
            None => format!("Invalid value: {found}: must be a {ty}"),
        },
        E::InvalidBooleanStrict { .. } => format!("Invalid value: {found}: must be true or false"),
        E::NullIntoString { .. } => "Invalid value: null: must be a string".to_string(),
        E::DuplicateMappingKey { key, .. } => format!(
            "Duplicate value: {}: this key appears more than once in the same mapping",
            placer_cluster::validation::echo(key.as_deref().unwrap_or("?"))
        ),
        E::Unexpected { expected, .. } => match *expected {
            "sequence start" => format!("Invalid value: {found}: must be a list"),
            "mapping start" => format!("Invalid value: {found}: must be a mapping"),
            other => format!("Invalid value: {found}: expected {other}"),
        },
        E::SerdeUnknownField { field, expected, .. } => {
            let known = expected.join(", ");
            format!("unknown field {}: the fields here are {known}", placer_cluster::validation::echo(field))
        }
        E::SerdeMissingField { field, .. } => format!("Required value: {field} is missing"),
        E::SerdeUnknownVariant { variant, expected, .. } if in_step => format!(
            "unknown step {}: a step is one of {}",
            placer_cluster::validation::echo(variant),
            expected.join(", ")
        ),
        E::ExpectedMappingEndAfterEnumVariantValue { .. } => {
            "a step does exactly one thing: give each action its own `- ` entry".to_string()
        }
        E::Budget { breach, .. } => budget_sentence(&format!("{breach:?}")),
        E::MultipleDocuments { .. } => {
            "a scenario is one YAML document; this file has more than one (`---`)".to_string()
        }
        E::Eof { .. } => "the file ends before the scenario does".to_string(),
        other => {
            let text = other.to_string();
            if let Some(breach) = text.split("budget breached: ").nth(1) {
                return budget_sentence(breach);
            }
            let text = text.split(" at line ").next().unwrap_or(&text);
            let text = text.split(", set DuplicateKeyPolicy").next().unwrap_or(text);
            let text = text.split("; use Option<").next().unwrap_or(text);
            text.to_string()
        }
    }
}

/// A YAML reading limit that was hit (the parser's `BudgetBreach`, as it prints), as a
/// sentence.
fn budget_sentence(breach: &str) -> String {
    let mib = MAX_INPUT_BYTES / (1024 * 1024);
    let name = breach.split([' ', '{', '(']).next().unwrap_or(breach);
    match name {
        "Nodes" | "Events" => format!(
            "the file has more than {MAX_YAML_NODES} YAML nodes (keys, values and list items, aliases expanded); Placer reads at most that many, what a file of {mib} MiB can hold"
        ),
        "Depth" => "the file nests lists and mappings more than 64 levels deep; Placer reads at most 64".to_string(),
        "Aliases" | "Anchors" | "AliasAnchorRatio" | "RecordedAnchorEvents" | "RecordedAnchorBytes" => {
            "the file uses aliases (`*name`) to expand into much more than it spells out; Placer refuses such alias bombs"
                .to_string()
        }
        "InputBytes" => format!("the file is larger than {mib} MiB, the most Placer reads from a scenario file"),
        "Documents" => "a scenario is one YAML document; this file has too many (`---`)".to_string(),
        _ => format!("the file exceeds a YAML reading limit ({breach})"),
    }
}

/// A parser error with the object and field it is in, in the form of validation problems:
/// `line:col: submit[2]: PodGroup default/pg: spec.schedulingPolicy.gang.minCount: ...`.
pub(crate) fn yaml_error(
    file: &Path,
    text: &str,
    e: serde_saphyr::Error,
    expected_error: Option<String>,
) -> LoadError {
    let (line, column) = e.location().map(|l| (l.line(), l.column())).unwrap_or((0, 0));
    let inner = e.without_snippet();
    let (path, found) = match yaml_walk::node_at(text, line, column) {
        Some((path, found, _)) if line > 0 => (path, found),
        _ => (Vec::new(), String::new()),
    };
    let (entry_len, is_manifest) = entry_of(&path);
    let in_step = matches!(path.first(), Some(Seg::Key(k)) if k == "steps") && !is_manifest;
    let problem = Problem {
        line,
        column,
        at: yaml_walk::render(&path[..entry_len]),
        object: is_manifest.then(|| manifest_name(text, &path[..entry_len])),
        field: yaml_walk::render(&path[entry_len..]),
        message: sentence(inner, &found, in_step),
    };
    let message = problem.to_string();
    let message = match message.strip_prefix(&format!("{line}:{column}: ")) {
        Some(rest) => rest.to_string(),
        None => message,
    };
    LoadError::Yaml {
        file: file.to_path_buf(),
        line,
        column,
        message,
        snippet: e.to_string(),
        expected_error,
    }
}

/// Sets each problem's position to its field's (or the nearest enclosing part present in
/// the file): one walk over the text for all of them.
pub(crate) fn locate_problems(text: &str, problems: &mut [Problem]) {
    let wanted: Vec<Vec<Seg>> = problems
        .iter()
        .map(|p| {
            let mut path = yaml_walk::parse(&p.at);
            path.extend(yaml_walk::parse(&p.field));
            path
        })
        .collect();
    for (p, found) in problems.iter_mut().zip(yaml_walk::locate(text, &wanted)) {
        if let Some((line, column, _)) = found {
            p.line = line;
            p.column = column;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Typing the API server is strict about and serde is not.

/// The JSON value at `path` under `v`.
fn json_at<'a>(v: &'a serde_json::Value, path: &[Seg]) -> Option<&'a serde_json::Value> {
    path.iter().try_fold(v, |v, seg| match seg {
        Seg::Key(k) => v.get(k.as_str()),
        Seg::Index(i) => v.get(*i),
    })
}

/// Fields of a manifest the typed struct does not have (the API server's strict field
/// validation, `kubectl apply`'s default, rejects them) and quoted scalars that landed in
/// a number or boolean field (`minCount: "2"`: the API server does not convert a JSON
/// string into an integer). Serde accepts both silently.
fn check_typing(text: &str, s: &Scenario, problems: &mut Vec<Problem>) {
    let manifests: HashMap<&str, &Manifest> = s
        .nodes
        .iter()
        .chain(&s.pods)
        .chain(&s.submit)
        .chain(s.steps.iter().flat_map(|step| match &step.action {
            StepAction::Submit(list) => list.as_slice(),
            _ => &[],
        }))
        .map(|m| (m.path.as_str(), m))
        .collect();
    let mut current: Option<(String, serde_json::Value)> = None;
    yaml_walk::walk(text, |path, node| {
        if node.is_key {
            return ControlFlow::Continue(());
        }
        let (entry_len, is_manifest) = entry_of(path);
        if !is_manifest || path.len() <= entry_len {
            return ControlFlow::Continue(());
        }
        let entry = yaml_walk::render(&path[..entry_len]);
        if current.as_ref().is_none_or(|(e, _)| *e != entry) {
            let Some(m) = manifests.get(entry.as_str()) else { return ControlFlow::Continue(()) };
            current = Some((entry.clone(), m.object.to_json()));
        }
        let Some((_, json)) = &current else { return ControlFlow::Continue(()) };
        let field = &path[entry_len..];
        let Some(parent) = json_at(json, &field[..field.len() - 1]) else { return ControlFlow::Continue(()) };
        let here = match &field[field.len() - 1] {
            Seg::Key(k) => parent.get(k.as_str()),
            Seg::Index(i) => parent.get(*i),
        };
        let problem = |message: String| Problem {
            line: node.line,
            column: node.column,
            at: entry.clone(),
            object: Some(manifests.get(entry.as_str()).map_or_else(String::new, |m| describe(&m.object))),
            field: yaml_walk::render(field),
            message,
        };
        let merge_key = matches!(field.last(), Some(Seg::Key(k)) if k == "<<");
        match (here, node.kind) {
            (None, kind) if parent.is_object() && !kind.is_null() && !merge_key => {
                problems.push(problem(
                    "unknown field: the API server's strict field validation (kubectl apply's default) rejects it"
                        .to_string(),
                ));
            }
            (Some(v), NodeKind::Scalar { value, quoted: true }) if v.is_number() || v.is_boolean() => {
                let want = if v.is_boolean() { "true or false" } else { "a number" };
                problems.push(problem(format!(
                    "Invalid value: {}: must be {want}, not a string (the API server does not convert a quoted value)",
                    placer_cluster::validation::echo(value)
                )));
            }
            _ => {}
        }
        ControlFlow::Continue(())
    });
}

/// `Kind namespace/name` (or `Kind name`), as problems name objects (names cut like
/// echoed values).
pub(crate) fn describe(obj: &Object) -> String {
    let r = obj.object_ref();
    match (r.name.is_empty(), r.namespace.is_empty()) {
        (true, _) => format!("{} (unnamed)", r.kind),
        (false, true) => format!("{} {}", r.kind, short(&r.name)),
        (false, false) => format!("{} {}/{}", r.kind, short(&r.namespace), short(&r.name)),
    }
}

/// A name as problems show it: whole when short, else cut at the echo limit.
pub(crate) fn short(name: &str) -> String {
    if name.chars().count() <= placer_cluster::validation::MAX_ECHO_CHARS {
        name.to_string()
    } else {
        echo(name)
    }
}

// ---------------------------------------------------------------------------------------
// Raw file structure, generic over how a manifest is read (header only, or typed).

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawScenario<M> {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    scheduler: Option<SchedulerSpec>,
    #[serde(default)]
    cluster: Option<RawCluster>,
    #[serde(default = "Vec::new")]
    submit: Vec<M>,
    #[serde(default = "Vec::new")]
    steps: Vec<Spanned<RawStep<M>>>,
    #[serde(default)]
    expect: Option<Expect>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawCluster {
    #[serde(default)]
    nodes: Vec<Spanned<Node>>,
    #[serde(default)]
    generate: Option<GenerateSpec>,
    #[serde(default)]
    pods: Vec<Spanned<Pod>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
enum RawStep<M> {
    Submit(Vec<M>),
    DeletePod(String),
    DeleteNode(String),
    Patch(serde_json::Value),
    MarkNotReady(String),
    MarkReady(String),
    MarkUnreachable(String),
    Taint(TaintStep),
    Advance(String),
    Expect(Expect),
}

// ---------------------------------------------------------------------------------------
// The kind tape: pass 1 records the kind of every manifest in parse order, pass 2 replays
// it so each manifest is deserialized straight into its typed struct.

pub(crate) enum Tape {
    Off,
    Record(Vec<Option<Kind>>),
    Replay(VecDeque<Option<Kind>>),
}

thread_local! {
    pub(crate) static TAPE: RefCell<Tape> = const { RefCell::new(Tape::Off) };
}

/// Runs `f` with the tape installed; returns its result and the tape's final state.
pub(crate) fn with_tape<T>(tape: Tape, f: impl FnOnce() -> T) -> (T, Tape) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            TAPE.with(|t| *t.borrow_mut() = Tape::Off);
        }
    }
    TAPE.with(|t| *t.borrow_mut() = tape);
    let reset = Reset;
    let out = f();
    let tape = TAPE.with(|t| std::mem::replace(&mut *t.borrow_mut(), Tape::Off));
    drop(reset);
    (out, tape)
}

/// Pass-1 view of a manifest.
#[derive(Debug, Clone, Default)]
pub(crate) struct Header {
    pub(crate) api_version: Option<String>,
    pub(crate) kind: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) namespace: Option<String>,
}

#[derive(Deserialize)]
struct HeaderFields {
    #[serde(rename = "apiVersion", default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    metadata: Option<HeaderMeta>,
}

#[derive(Deserialize)]
struct HeaderMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
}

impl<'de> Deserialize<'de> for Header {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let f = HeaderFields::deserialize(d)?;
        let (name, namespace) = f.metadata.map(|m| (m.name, m.namespace)).unwrap_or_default();
        let header = Header { api_version: f.api_version, kind: f.kind, name, namespace };
        let kind = match (&header.api_version, &header.kind) {
            (Some(a), Some(k)) => Kind::from_type(a, k),
            _ => None,
        };
        TAPE.with(|t| {
            if let Tape::Record(v) = &mut *t.borrow_mut() {
                v.push(kind);
            }
        });
        Ok(header)
    }
}

/// Pass-2 view of a manifest: the typed object.
pub(crate) struct Typed(pub(crate) Option<Object>);

impl<'de> Deserialize<'de> for Typed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let next = TAPE.with(|t| match &mut *t.borrow_mut() {
            Tape::Replay(q) => q.pop_front().ok_or(()),
            _ => Err(()),
        });
        let kind = match next {
            Ok(kind) => kind,
            Err(()) => return Err(D::Error::custom("internal error: manifest kinds out of step")),
        };
        let object = match kind {
            None => {
                IgnoredAny::deserialize(d)?;
                return Ok(Typed(None));
            }
            Some(Kind::Node) => Object::Node(Node::deserialize(d)?.into()),
            Some(Kind::Pod) => Object::Pod(Pod::deserialize(d)?.into()),
            Some(Kind::PodGroup) => Object::PodGroup(PodGroup::deserialize(d)?),
            Some(Kind::Workload) => Object::Workload(Workload::deserialize(d)?),
            Some(Kind::Job) => Object::Job(Box::new(Job::deserialize(d)?)),
            Some(Kind::CronJob) => Object::CronJob(Box::new(CronJob::deserialize(d)?)),
            Some(Kind::PriorityClass) => Object::PriorityClass(PriorityClass::deserialize(d)?),
            Some(Kind::PodDisruptionBudget) => {
                Object::PodDisruptionBudget(PodDisruptionBudget::deserialize(d)?)
            }
            Some(Kind::Namespace) => Object::Namespace(Namespace::deserialize(d)?),
            Some(Kind::Event) => Object::Event(Event::deserialize(d)?),
            Some(Kind::Lease) => Object::Lease(Lease::deserialize(d)?),
            Some(Kind::DeviceClass) => Object::DeviceClass(DeviceClass::deserialize(d)?),
            Some(Kind::ResourceSlice) => Object::ResourceSlice(ResourceSlice::deserialize(d)?),
            Some(Kind::ResourceClaim) => Object::ResourceClaim(ResourceClaim::deserialize(d)?),
            Some(Kind::ResourceClaimTemplate) => {
                Object::ResourceClaimTemplate(ResourceClaimTemplate::deserialize(d)?)
            }
            Some(Kind::PersistentVolumeClaim) => {
                Object::PersistentVolumeClaim(storage::PersistentVolumeClaim::deserialize(d)?)
            }
            Some(Kind::PersistentVolume) => {
                Object::PersistentVolume(Box::new(storage::PersistentVolume::deserialize(d)?))
            }
            Some(Kind::StorageClass) => Object::StorageClass(storage::StorageClass::deserialize(d)?),
            Some(Kind::CSINode) => Object::CSINode(storage::CSINode::deserialize(d)?),
            Some(Kind::CSIDriver) => Object::CSIDriver(storage::CSIDriver::deserialize(d)?),
            Some(Kind::CSIStorageCapacity) => {
                Object::CSIStorageCapacity(storage::CSIStorageCapacity::deserialize(d)?)
            }
            Some(Kind::VolumeAttachment) => {
                Object::VolumeAttachment(Box::new(storage::VolumeAttachment::deserialize(d)?))
            }
        };
        Ok(Typed(Some(object)))
    }
}

fn known_kinds() -> String {
    Kind::ALL.iter().map(|k| format!("{} {}", k.api_version(), k.name())).collect::<Vec<_>>().join(", ")
}

/// Every submitted manifest must name a known apiVersion + kind.
fn check_headers(raw: &RawScenario<Spanned<Header>>) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut check = |h: &Spanned<Header>, at: String| {
        let v = &h.value;
        let object = match (&v.namespace, &v.name) {
            (Some(ns), Some(n)) => format!("{}/{}", short(ns), short(n)),
            (None, Some(n)) => short(n),
            _ => "(unnamed)".to_string(),
        };
        let message = match (&v.api_version, &v.kind) {
            (Some(a), Some(k)) if Kind::from_type(a, k).is_none() => {
                format!(
                    "unknown apiVersion/kind {} {} for object {object} (known: {})",
                    echo(a),
                    echo(k),
                    known_kinds()
                )
            }
            (Some(_), Some(_)) => return,
            _ => format!("object {object}: apiVersion and kind are required"),
        };
        problems.push(Problem {
            line: h.referenced.line(),
            column: h.referenced.column(),
            at,
            object: None,
            field: String::new(),
            message,
        });
    };
    for (i, h) in raw.submit.iter().enumerate() {
        check(h, format!("submit[{i}]"));
    }
    for (s, step) in raw.steps.iter().enumerate() {
        if let RawStep::Submit(list) = &step.value {
            for (i, h) in list.iter().enumerate() {
                check(h, format!("steps[{s}].submit[{i}]"));
            }
        }
    }
    problems
}

// ---------------------------------------------------------------------------------------
// Conversion of the typed raw file into a Scenario.

fn manifest(typed: Spanned<Typed>, path: String) -> Option<Manifest> {
    let line = typed.referenced.line();
    let column = typed.referenced.column();
    typed.value.0.map(|object| Manifest { object: normalize(object), path, line, column })
}

/// Namespaced objects without a namespace go to `default`, as `kubectl apply` does.
pub(crate) fn normalize(mut object: Object) -> Object {
    if object.kind().namespaced() {
        let meta = object.metadata_mut();
        if meta.namespace.as_deref().is_none_or(str::is_empty) {
            meta.namespace = Some("default".to_string());
        }
    }
    object
}

fn convert(raw: RawScenario<Spanned<Typed>>, file: PathBuf, problems: &mut Vec<Problem>) -> Scenario {
    let cluster = raw.cluster.unwrap_or(RawCluster { nodes: Vec::new(), generate: None, pods: Vec::new() });
    let nodes = cluster
        .nodes
        .into_iter()
        .enumerate()
        .map(|(i, n)| Manifest {
            path: format!("cluster.nodes[{i}]"),
            line: n.referenced.line(),
            column: n.referenced.column(),
            object: Object::Node(n.value.into()),
        })
        .collect();
    let pods = cluster
        .pods
        .into_iter()
        .enumerate()
        .map(|(i, p)| Manifest {
            path: format!("cluster.pods[{i}]"),
            line: p.referenced.line(),
            column: p.referenced.column(),
            object: normalize(Object::Pod(p.value.into())),
        })
        .collect();
    let submit =
        raw.submit.into_iter().enumerate().filter_map(|(i, m)| manifest(m, format!("submit[{i}]"))).collect();
    let mut steps = Vec::new();
    for (s, step) in raw.steps.into_iter().enumerate() {
        let path = format!("steps[{s}]");
        let (line, column) = (step.referenced.line(), step.referenced.column());
        let problem = |field: &str, message: String| Problem {
            line,
            column,
            at: path.clone(),
            object: None,
            field: field.to_string(),
            message,
        };
        let action = match step.value {
            RawStep::Submit(list) => StepAction::Submit(
                list.into_iter()
                    .enumerate()
                    .filter_map(|(i, m)| manifest(m, format!("steps[{s}].submit[{i}]")))
                    .collect(),
            ),
            RawStep::DeletePod(text) => match split_key(&text) {
                Some((namespace, name)) => StepAction::DeletePod { namespace, name },
                None => {
                    problems
                        .push(problem("deletePod", format!("expected namespace/name, got {}", echo(&text))));
                    continue;
                }
            },
            RawStep::DeleteNode(name) => StepAction::DeleteNode(name),
            RawStep::MarkNotReady(name) => StepAction::MarkNotReady(name),
            RawStep::MarkReady(name) => StepAction::MarkReady(name),
            RawStep::MarkUnreachable(name) => StepAction::MarkUnreachable(name),
            RawStep::Taint(t) => StepAction::Taint(t),
            RawStep::Advance(text) => match parse_duration_ms(&text) {
                Ok(ms) => StepAction::Advance { ms },
                Err(message) => {
                    problems.push(problem("advance", message));
                    continue;
                }
            },
            RawStep::Expect(e) => StepAction::Expect(e),
            RawStep::Patch(patch) => match patch_target(&patch) {
                Ok(target) => StepAction::Patch { target, patch },
                Err(message) => {
                    problems.push(problem("patch", message));
                    continue;
                }
            },
        };
        steps.push(Step { path, line, column, action });
    }
    Scenario {
        file,
        name: raw.name,
        description: raw.description,
        source: raw.source,
        scheduler: raw.scheduler.unwrap_or_default(),
        nodes,
        generate: cluster.generate,
        pods,
        submit,
        steps,
        expect: raw.expect,
    }
}

/// `namespace/name` -> parts (both non-empty, exactly one slash).
pub(crate) fn split_key(text: &str) -> Option<(String, String)> {
    let (ns, name) = text.split_once('/')?;
    if ns.is_empty() || name.is_empty() || name.contains('/') {
        return None;
    }
    Some((ns.to_string(), name.to_string()))
}

/// The object a `patch` step addresses: its apiVersion, kind, metadata.name and
/// metadata.namespace (default `default`).
fn patch_target(patch: &serde_json::Value) -> Result<ObjectRef, String> {
    let s = |v: Option<&serde_json::Value>| v.and_then(serde_json::Value::as_str).map(str::to_string);
    if !patch.is_object() {
        return Err(
            "a patch is a mapping with apiVersion, kind, metadata.name and the fields to change".into()
        );
    }
    let api_version = s(patch.get("apiVersion")).ok_or("apiVersion is required")?;
    let kind_name = s(patch.get("kind")).ok_or("kind is required")?;
    let kind = Kind::from_type(&api_version, &kind_name).ok_or_else(|| {
        format!(
            "unknown apiVersion/kind {} {} (known: {})",
            echo(&api_version),
            echo(&kind_name),
            known_kinds()
        )
    })?;
    let meta = patch.get("metadata");
    let name =
        s(meta.and_then(|m| m.get("name"))).filter(|n| !n.is_empty()).ok_or("metadata.name is required")?;
    let namespace = if kind.namespaced() {
        s(meta.and_then(|m| m.get("namespace"))).unwrap_or_else(|| "default".to_string())
    } else {
        String::new()
    };
    Ok(ObjectRef::new(kind, namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Scenario, LoadError> {
        load_str(text, "t.yaml")
    }

    fn problems(text: &str) -> Vec<String> {
        match load(text) {
            Err(LoadError::Invalid { problems, file, .. }) => {
                problems.iter().map(|p| p.render(&file)).collect()
            }
            Err(other) => panic!("expected validation problems, got {other}"),
            Ok(_) => panic!("expected validation problems, got a valid scenario"),
        }
    }

    #[test]
    fn manifests_are_typed_without_losing_scalar_spelling() {
        let s = load(
            "name: t\n\
             cluster:\n  nodes:\n    - metadata: {name: n1, labels: {a: on, b: '0123', c: 0123, d: 1.10}}\n\
             submit:\n  - apiVersion: v1\n    kind: Pod\n    metadata: {name: p, labels: {x: yes}}\n    \
             spec: {containers: [{name: c, image: i}]}\n",
        )
        .unwrap();
        let labels = s.nodes[0].object.metadata().labels.clone().unwrap();
        assert_eq!(labels["a"], "on");
        assert_eq!(labels["b"], "0123");
        assert_eq!(labels["c"], "0123");
        assert_eq!(labels["d"], "1.10");
        assert_eq!(s.submit[0].object.metadata().labels.as_ref().unwrap()["x"], "yes");
        assert_eq!(s.submit[0].path, "submit[0]");
        assert_eq!(s.submit[0].line, 6);
        assert_eq!(s.submit[0].object.metadata().namespace.as_deref(), Some("default"));
    }

    #[test]
    fn manifests_in_steps_before_submit_keep_their_kinds() {
        // Document order differs from struct field order: the tape follows the parser.
        let s = load(
            "name: t\n\
             steps:\n  - submit:\n      - {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: hi}, value: 5}\n\
             submit:\n  - {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: i}]}}\n",
        )
        .unwrap();
        assert_eq!(s.submit[0].object.kind(), Kind::Pod);
        let StepAction::Submit(list) = &s.steps[0].action else { panic!("not a submit step") };
        assert_eq!(list[0].object.kind(), Kind::PriorityClass);
        assert_eq!(list[0].path, "steps[0].submit[0]");
    }

    #[test]
    fn unknown_kinds_are_all_reported_with_position() {
        let got = problems(
            "name: t\nsubmit:\n  - {apiVersion: apps/v1, kind: Deployment, metadata: {name: web, namespace: prod}}\n  \
             - {kind: Pod, metadata: {name: p}}\n",
        );
        assert_eq!(got.len(), 2);
        assert!(
            got[0].starts_with(
                "t.yaml:3:5: submit[0]: unknown apiVersion/kind \"apps/v1\" \"Deployment\" for object prod/web"
            ),
            "{}",
            got[0]
        );
        assert_eq!(got[1], "t.yaml:4:5: submit[1]: object p: apiVersion and kind are required");
    }

    #[test]
    fn scenario_fields_are_strict() {
        let err = load("name: t\nsubmitt: []\n").unwrap_err();
        let LoadError::Yaml { line, column, message, .. } = &err else { panic!("{err}") };
        assert_eq!((*line, *column), (2, 1));
        assert!(
            message.starts_with("submitt: unknown field \"submitt\": the fields here are name,"),
            "{message}"
        );
        assert!(err.to_string().starts_with("t.yaml:2:1: submitt: unknown field"), "{err}");
    }

    #[test]
    fn wrong_types_inside_manifests_point_at_the_value() {
        let err = load("name: t\nsubmit:\n  - apiVersion: v1\n    kind: Pod\n    metadata: {name: p}\n    spec: {containers: 5}\n")
            .unwrap_err();
        let LoadError::Yaml { line, .. } = err else { panic!("{err}") };
        assert_eq!(line, 6);
    }

    #[test]
    fn yaml_syntax_errors_carry_line_and_column() {
        let err = load("name: t\nsubmit: [\n  - a\n").unwrap_err();
        let LoadError::Yaml { line, column, snippet, .. } = &err else { panic!("{err}") };
        assert_eq!((*line, *column), (3, 3));
        assert!(snippet.contains("-->"), "{snippet}");
    }

    #[test]
    fn steps_are_converted() {
        let s = load(
            "name: t\nsteps:\n  - deletePod: default/p\n  - deleteNode: n1\n  - advance: 1m\n  - markNotReady: n2\n  \
             - taint: {node: n1, key: k, effect: NoExecute}\n  \
             - patch: {apiVersion: batch/v1, kind: Job, metadata: {name: j}, spec: {parallelism: 2}}\n  \
             - expect: {error: nope}\n",
        )
        .unwrap();
        let actions: Vec<_> = s.steps.iter().map(|s| s.action.clone()).collect();
        assert_eq!(actions[0], StepAction::DeletePod { namespace: "default".into(), name: "p".into() });
        assert_eq!(actions[1], StepAction::DeleteNode("n1".into()));
        assert_eq!(actions[2], StepAction::Advance { ms: 60_000 });
        let StepAction::Patch { target, .. } = &actions[5] else { panic!("{:?}", actions[5]) };
        assert_eq!(target.to_string(), "Job default/j");
        assert_eq!(s.steps[6].line, 9);
    }

    #[test]
    fn malformed_steps_are_problems() {
        let got = problems(
            "name: t\nsteps:\n  - deletePod: p\n  - advance: soon\n  - patch: {apiVersion: v1, kind: Pod}\n",
        );
        assert_eq!(
            got,
            [
                "t.yaml:3:5: steps[0]: deletePod: expected namespace/name, got \"p\"",
                "t.yaml:4:5: steps[1]: advance: invalid duration \"soon\": expected a number with a unit, e.g. 500ms, 30s, 5m, 1h",
                "t.yaml:5:5: steps[2]: patch: metadata.name is required",
            ]
        );
    }

    #[test]
    fn untyped_patterns_keep_yaml_1_2_strings() {
        let s = load("name: t\nexpect:\n  objects:\n    - {apiVersion: v1, kind: Node, metadata: {labels: {a: on, b: 0123}}}\n")
            .unwrap();
        let pattern = &s.expect.unwrap().objects[0];
        assert_eq!(pattern["metadata"]["labels"]["a"], "on");
        assert_eq!(pattern["metadata"]["labels"]["b"], "0123");
    }

    fn yaml_message(text: &str) -> String {
        match load(text) {
            Err(e @ LoadError::Yaml { .. }) => e.to_string(),
            Err(other) => panic!("expected a parser error, got {other}"),
            Ok(_) => panic!("expected a parser error, got a valid scenario"),
        }
    }

    #[test]
    fn parser_errors_name_the_object_and_the_field() {
        let pg = |min: &str| {
            format!("name: t\nsubmit:\n  - apiVersion: scheduling.k8s.io/v1alpha2\n    kind: PodGroup\n    metadata: {{name: pg}}\n    spec:\n      schedulingPolicy: {{gang: {{minCount: {min}}}}}\n")
        };
        assert_eq!(
            yaml_message(&pg("x")),
            "t.yaml:7:43: submit[0]: PodGroup default/pg: spec.schedulingPolicy.gang.minCount: Invalid value: \"x\": must be an integer (i32)"
        );
        assert_eq!(
            yaml_message(&pg("99999999999")),
            "t.yaml:7:43: submit[0]: PodGroup default/pg: spec.schedulingPolicy.gang.minCount: Invalid value: \"99999999999\": must be an integer (i32)"
        );
        let dup = "name: t\nsubmit:\n  - apiVersion: v1\n    kind: Pod\n    metadata: {name: p}\n    spec:\n      containers:\n        - name: c\n          image: i\n          resources: {requests: {cpu: 1, cpu: 2}}\n";
        assert_eq!(
            yaml_message(dup),
            "t.yaml:10:42: submit[0]: Pod default/p: spec.containers[0].resources.requests.cpu: Duplicate value: \"cpu\": this key appears more than once in the same mapping"
        );
        assert_eq!(
            yaml_message("name: t\nexpect: {pods: {a/b: ~}}\n"),
            "t.yaml:2:22: expect: pods[a/b]: Invalid value: null: must be a string"
        );
        assert_eq!(
            yaml_message("name: t\nexpect: {podGroups: {a/b: {boundPods: many}}}\n"),
            "t.yaml:2:39: expect: podGroups[a/b].boundPods: Invalid value: \"many\": must be a non-negative integer (u32)"
        );
        assert_eq!(
            yaml_message("name: t\nscheduler: {profile: {topologyLevels: rack}}\n"),
            "t.yaml:2:39: scheduler.profile: topologyLevels: Invalid value: \"rack\": must be a list"
        );
        assert_eq!(
            yaml_message("name: t\ncluster: {generate: {levels: [a], fanout: [-1], allocatable: {}}}\n"),
            "t.yaml:2:44: cluster.generate: fanout[0]: Invalid value: \"-1\": must be a non-negative integer (u32)"
        );
        assert!(yaml_message("name: t\nsteps:\n  - teleport: x\n").starts_with(
            "t.yaml:3:5: steps[0]: teleport: unknown step \"teleport\": a step is one of submit,"
        ),);
        assert_eq!(yaml_message("name: ~\n"), "t.yaml:1:7: name: Invalid value: null: must be a string");
    }

    #[test]
    fn quoted_numbers_and_unknown_fields_are_rejected_as_the_api_server_does() {
        let got = problems(
            "name: t\nsubmit:\n  - apiVersion: scheduling.k8s.io/v1alpha2\n    kind: PodGroup\n    metadata: {name: pg}\n    spec:\n      schedulingPolicy: {gang: {minCount: \"2\"}}\n      minCout: 3\n",
        );
        assert_eq!(
            got,
            [
                "t.yaml:7:33: submit[0]: PodGroup default/pg: spec.schedulingPolicy.gang.minCount: Invalid value: \"2\": must be a number, not a string (the API server does not convert a quoted value)",
                "t.yaml:8:7: submit[0]: PodGroup default/pg: spec.minCout: unknown field: the API server's strict field validation (kubectl apply's default) rejects it",
            ]
        );
        // Quoted strings stay fine where the field is a string (labels, quantities).
        assert!(load("name: t\nsubmit:\n  - {apiVersion: v1, kind: Pod, metadata: {name: p, labels: {a: '1'}}, spec: {containers: [{name: c, image: i, resources: {requests: {cpu: '1'}}}]}}\n").is_ok());
    }

    #[test]
    fn long_values_are_echoed_at_most_200_characters() {
        let long = "x".repeat(1 << 20);
        let text = format!(
            "name: t\nsubmit:\n  - {{apiVersion: v1, kind: Pod, metadata: {{name: p, labels: {{a: {long}}}}}, spec: {{containers: [{{name: c, image: i}}]}}}}\n  - {{apiVersion: {long}, kind: {long}, metadata: {{name: {long}}}}}\nsteps:\n  - advance: {long}\n"
        );
        let err = load(&text).unwrap_err();
        let message = err.to_string();
        assert!(message.len() < 3_000, "{} bytes", message.len());
        assert!(message.contains("(1048576 characters)"), "{message}");
    }

    #[test]
    fn oversized_text_is_refused_before_parsing() {
        let text = format!("name: t\ndescription: {}\n", "x".repeat(MAX_INPUT_BYTES));
        let err = load(&text).unwrap_err();
        assert!(matches!(err, LoadError::TooLarge { limit: MAX_INPUT_BYTES, .. }), "{err}");
        assert_eq!(err.to_string(), "t.yaml: the file is larger than 16 MiB (16777216 bytes), the most Placer reads from a scenario file");
    }

    #[test]
    fn the_node_budget_is_a_sentence() {
        // Aliases expand into more nodes than the budget allows, in a small file.
        let mut text =
            String::from("name: t\nexpect:\n  objects:\n    - &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n");
        let mut prev = "a".to_string();
        for level in 0..8 {
            let name = format!("l{level}");
            text.push_str(&format!("    - &{name} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
            prev = name;
        }
        let message = yaml_message(&text);
        assert!(message.contains("the file "), "{message}");
        assert!(!message.contains("budget breached"), "{message}");
    }

    #[test]
    fn a_parser_error_can_be_the_expected_rejection() {
        let err = load(
            "name: t\nsubmit:\n  - {apiVersion: scheduling.k8s.io/v1alpha2, kind: PodGroup, metadata: {name: pg}, \
             spec: {schedulingPolicy: {gang: {minCount: many}}}}\nexpect: {error: must be an integer}\n",
        )
        .unwrap_err();
        assert!(err.is_expected(), "{err}");
        let err = load("name: t\nsubmitt: []\nexpect: {error: unknown field}\n").unwrap_err();
        assert!(err.is_expected(), "{err}");
    }

    #[test]
    fn expected_error_marks_a_rejection_as_expected() {
        let err = load(
            "name: t\nsubmit:\n  - {apiVersion: scheduling.k8s.io/v1alpha2, kind: PodGroup, metadata: {name: pg}, \
             spec: {schedulingPolicy: {gang: {minCount: 0}}}}\nexpect: {error: must be greater than or equal to 1}\n",
        )
        .unwrap_err();
        assert!(err.is_expected(), "{err}");
    }
}
