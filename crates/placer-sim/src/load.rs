//! Loading a scenario file: YAML parsing, typing of the manifests, validation.
//!
//! Parsing runs in two passes over the same text. The first pass reads the scenario
//! structure with only the `apiVersion` / `kind` / `metadata` header of every manifest and
//! records, in the order the parser meets them, which [`Kind`] each manifest is. Unknown
//! kinds are reported here, all of them, with their position. The second pass reads the
//! file again and deserializes each manifest straight into the typed struct of its kind
//! (k8s-openapi), taking the kinds from that record: no detour through an untyped value,
//! so a label value `on` or `0123` stays a string.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;
use std::path::{Path, PathBuf};

use placer_api::k8s::api::batch::v1::{CronJob, Job};
use placer_api::k8s::api::core::v1::{Node, Pod};
use placer_api::k8s::api::policy::v1::PodDisruptionBudget;
use placer_api::k8s::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use placer_api::k8s::api::scheduling::v1::PriorityClass;
use placer_api::k8s::api::scheduling::v1alpha2::{PodGroup, Workload};
use placer_cluster::{Kind, Object, ObjectRef};
use serde::de::{Deserializer, Error as _, IgnoredAny};
use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::scenario::{
    parse_duration_ms, Expect, GenerateSpec, Manifest, Scenario, SchedulerSpec, Step, StepAction, TaintStep,
};
use crate::validate;

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
    /// YAML syntax error, or YAML that does not have the scenario's shape (unknown field,
    /// wrong type, ...).
    #[error("{}:{line}:{column}: {message}", file.display())]
    Yaml {
        file: PathBuf,
        line: u64,
        column: u64,
        message: String,
        /// The parser's rendering with a source snippet (for terminals).
        snippet: String,
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
            LoadError::Io { file, .. } | LoadError::Yaml { file, .. } | LoadError::Invalid { file, .. } => {
                file
            }
        }
    }

    /// True when the scenario declares this rejection: its top-level `expect.error` is a
    /// substring of one of the problems.
    pub fn is_expected(&self) -> bool {
        match self {
            LoadError::Invalid { problems, expected_error: Some(expected), file } => {
                problems.iter().any(|p| p.render(file).contains(expected.as_str()))
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
    /// 1-based line and column of the enclosing manifest or entry (0: unknown).
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
        f.write_str(&self.at)?;
        if let Some(object) = &self.object {
            write!(f, ": {object}")?;
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Reads, parses and validates a scenario file.
pub fn load_file(path: impl AsRef<Path>) -> Result<Scenario, LoadError> {
    let path = path.as_ref();
    let text =
        std::fs::read_to_string(path).map_err(|source| LoadError::Io { file: path.to_path_buf(), source })?;
    load_str(&text, path)
}

/// Parses and validates scenario text; `file` names it in messages.
pub fn load_str(text: &str, file: impl AsRef<Path>) -> Result<Scenario, LoadError> {
    let file = file.as_ref().to_path_buf();
    // Pass 1: structure + manifest headers.
    let (headers, kinds) = with_tape(Tape::Record(Vec::new()), || {
        serde_saphyr::from_str_with_options::<RawScenario<Spanned<Header>>>(text, yaml_options())
    });
    let headers = headers.map_err(|e| yaml_error(&file, e))?;
    let expected_error = headers.expect.as_ref().and_then(|e| e.error.clone());
    let problems = check_headers(&headers);
    if !problems.is_empty() {
        return Err(LoadError::Invalid { file, problems, expected_error });
    }
    let Tape::Record(kinds) = kinds else {
        return Err(internal(&file, "manifest kinds were not recorded"));
    };
    // Pass 2: typed manifests.
    let (raw, rest) = with_tape(Tape::Replay(kinds.into_iter().collect()), || {
        serde_saphyr::from_str_with_options::<RawScenario<Spanned<Typed>>>(text, yaml_options())
    });
    let raw = raw.map_err(|e| yaml_error(&file, e))?;
    if !matches!(&rest, Tape::Replay(left) if left.is_empty()) {
        return Err(internal(&file, "manifest kinds out of step between passes"));
    }
    let mut problems = Vec::new();
    let scenario = convert(raw, file.clone(), &mut problems);
    validate::validate(&scenario, &mut problems);
    if problems.is_empty() {
        Ok(scenario)
    } else {
        Err(LoadError::Invalid { file, problems, expected_error })
    }
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
/// stay strings there, as they do in typed fields.
fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! { strict_booleans: true, leading_zero_numbers_as_strings: true }
}

fn yaml_error(file: &Path, e: serde_saphyr::Error) -> LoadError {
    let (line, column) = e.location().map(|l| (l.line(), l.column())).unwrap_or((0, 0));
    let mut message = e.without_snippet().to_string();
    let suffix = format!(" at line {line}, column {column}");
    if let Some(stripped) = message.strip_suffix(&suffix) {
        message = stripped.to_string();
    }
    LoadError::Yaml { file: file.to_path_buf(), line, column, message, snippet: e.to_string() }
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

enum Tape {
    Off,
    Record(Vec<Option<Kind>>),
    Replay(VecDeque<Option<Kind>>),
}

thread_local! {
    static TAPE: RefCell<Tape> = const { RefCell::new(Tape::Off) };
}

/// Runs `f` with the tape installed; returns its result and the tape's final state.
fn with_tape<T>(tape: Tape, f: impl FnOnce() -> T) -> (T, Tape) {
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
struct Header {
    api_version: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    namespace: Option<String>,
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
struct Typed(Option<Object>);

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
            Some(Kind::Node) => Object::Node(Node::deserialize(d)?),
            Some(Kind::Pod) => Object::Pod(Pod::deserialize(d)?),
            Some(Kind::PodGroup) => Object::PodGroup(PodGroup::deserialize(d)?),
            Some(Kind::Workload) => Object::Workload(Workload::deserialize(d)?),
            Some(Kind::Job) => Object::Job(Job::deserialize(d)?),
            Some(Kind::CronJob) => Object::CronJob(CronJob::deserialize(d)?),
            Some(Kind::PriorityClass) => Object::PriorityClass(PriorityClass::deserialize(d)?),
            Some(Kind::PodDisruptionBudget) => {
                Object::PodDisruptionBudget(PodDisruptionBudget::deserialize(d)?)
            }
            Some(Kind::DeviceClass) => Object::DeviceClass(DeviceClass::deserialize(d)?),
            Some(Kind::ResourceSlice) => Object::ResourceSlice(ResourceSlice::deserialize(d)?),
            Some(Kind::ResourceClaim) => Object::ResourceClaim(ResourceClaim::deserialize(d)?),
            Some(Kind::ResourceClaimTemplate) => {
                Object::ResourceClaimTemplate(ResourceClaimTemplate::deserialize(d)?)
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
            (Some(ns), Some(n)) => format!("{ns}/{n}"),
            (None, Some(n)) => n.clone(),
            _ => "(unnamed)".to_string(),
        };
        let message = match (&v.api_version, &v.kind) {
            (Some(a), Some(k)) if Kind::from_type(a, k).is_none() => {
                format!("unknown apiVersion/kind {a:?} {k:?} for object {object} (known: {})", known_kinds())
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
fn normalize(mut object: Object) -> Object {
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
            object: Object::Node(n.value),
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
            object: normalize(Object::Pod(p.value)),
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
                    problems.push(problem("deletePod", format!("expected namespace/name, got {text:?}")));
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
        format!("unknown apiVersion/kind {api_version:?} {kind_name:?} (known: {})", known_kinds())
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
             submit:\n  - {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c}]}}\n",
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
        assert!(message.starts_with("unknown field `submitt`"), "{message}");
        assert!(err.to_string().starts_with("t.yaml:2:1: unknown field `submitt`"), "{err}");
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
