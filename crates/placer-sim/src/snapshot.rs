//! Cluster dumps as input: the output of `kubectl get nodes,pods,... -A -o yaml`.
//!
//! A dump is a `v1` `List` (or a typed list such as `NodeList`) with `items`, or several
//! YAML documents each holding one object (or a list). The kinds a simulation needs are
//! kept: Nodes, Pods, PodGroups, Workloads, PriorityClasses and Namespaces. Everything
//! else (Deployments, Services, Jobs, Events, ...) is skipped and counted, so a dump of a
//! whole namespace loads; [`Snapshot::skipped_summary`] says what was left out in one line.
//!
//! Parsing follows the scenario loader's two passes (see [`crate::load`]): pass 1 reads
//! the `apiVersion` / `kind` of every object, pass 2 deserializes each object straight into
//! its typed k8s-openapi struct (no detour through an untyped value). Server-owned fields
//! that a create would refuse or overwrite (`resourceVersion`, `managedFields`) are
//! dropped; the rest of each object (status included: a node's allocatable, a pod's phase)
//! is kept.
//!
//! [`Snapshot::into_scenario`] turns a dump into a scenario: the nodes are the cluster,
//! bound pods are `cluster.pods`, and the rest is submitted in dependency order
//! (Namespaces, PriorityClasses, Workloads, PodGroups, then unbound pods), so the
//! scheduler decides the pods that were Pending in the dump. [`Snapshot::merge_into`]
//! does the same below an existing scenario (its own nodes and submissions come after).

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

use placer_cluster::{Kind, Object};
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::load::{
    locate_problems, normalize, with_tape, yaml_error, yaml_options, Header, LoadError, Tape, Typed,
    MAX_INPUT_BYTES, TAPE,
};
use crate::scenario::{Manifest, Scenario};

/// The kinds a dump contributes; every other kind is skipped.
pub const SNAPSHOT_KINDS: [Kind; 6] =
    [Kind::Namespace, Kind::PriorityClass, Kind::Node, Kind::Workload, Kind::PodGroup, Kind::Pod];

/// The objects of a cluster dump.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The dump file (`-` for stdin).
    pub file: PathBuf,
    /// Kept objects, in dump order, as manifests (`path` is `items[i]` or `documents[i]`).
    pub objects: Vec<Manifest>,
    /// Skipped objects: `apiVersion kind` -> how many.
    pub skipped: BTreeMap<String, usize>,
}

impl Snapshot {
    /// `skipped 3 objects of kinds not simulated: apps/v1 Deployment (2), v1 Service (1)`,
    /// or `None` when nothing was skipped.
    pub fn skipped_summary(&self) -> Option<String> {
        if self.skipped.is_empty() {
            return None;
        }
        let total: usize = self.skipped.values().sum();
        let kinds: Vec<String> = self.skipped.iter().map(|(k, n)| format!("{k} ({n})")).collect();
        let plural = if total == 1 { "" } else { "s" };
        Some(format!(
            "{}: skipped {total} object{plural} of kinds the simulation does not load: {}",
            self.file.display(),
            kinds.join(", ")
        ))
    }

    /// Number of objects of `kind` kept.
    pub fn count(&self, kind: Kind) -> usize {
        self.objects.iter().filter(|m| m.object.kind() == kind).count()
    }

    /// A scenario whose cluster is this dump (named after the file).
    pub fn into_scenario(self) -> Result<Scenario, LoadError> {
        let stem = self.file.file_stem().and_then(|s| s.to_str()).unwrap_or("snapshot").to_string();
        let mut name: String = stem
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
            .collect::<String>()
            .trim_matches('-')
            .to_string();
        if name.is_empty() {
            name = "snapshot".into();
        }
        let scenario = Scenario {
            file: self.file.clone(),
            name,
            description: Some(format!("cluster dump {}", self.file.display())),
            source: None,
            scheduler: Default::default(),
            nodes: Vec::new(),
            generate: None,
            pods: Vec::new(),
            submit: Vec::new(),
            steps: Vec::new(),
            expect: None,
        };
        self.merge_into(scenario)
    }

    /// `scenario` on top of this dump: the dump's nodes and bound pods come first in the
    /// cluster, its other objects are submitted before the scenario's own. The result is
    /// validated again as a whole.
    pub fn merge_into(self, mut scenario: Scenario) -> Result<Scenario, LoadError> {
        let rank = |m: &Manifest| SNAPSHOT_KINDS.iter().position(|k| *k == m.object.kind()).unwrap_or(0);
        let mut nodes = Vec::new();
        let mut bound = Vec::new();
        let mut submit = Vec::new();
        for m in self.objects {
            let bucket = match &m.object {
                Object::Node(_) => 0,
                Object::Pod(p)
                    if p.spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .is_some_and(|n| !n.is_empty()) =>
                {
                    1
                }
                _ => 2,
            };
            match bucket {
                0 => nodes.push(m),
                1 => bound.push(m),
                _ => submit.push(m),
            }
        }
        submit.sort_by_key(|m| rank(m));
        nodes.append(&mut scenario.nodes);
        bound.append(&mut scenario.pods);
        submit.append(&mut scenario.submit);
        scenario.nodes = nodes;
        scenario.pods = bound;
        scenario.submit = submit;
        let mut problems = Vec::new();
        crate::validate::validate(&scenario, &mut problems);
        if problems.is_empty() {
            Ok(scenario)
        } else {
            Err(LoadError::Invalid { file: scenario.file.clone(), problems, expected_error: None })
        }
    }
}

/// Reads a dump file (`-`: stdin), at most [`MAX_INPUT_BYTES`].
pub fn load_snapshot(path: impl AsRef<Path>) -> Result<Snapshot, LoadError> {
    let path = path.as_ref();
    let text = crate::inputs::read_input(path)?;
    load_snapshot_str(&text, path)
}

/// What pass 1 found about one document.
enum DocPlan {
    /// A list: its items' kinds are on the tape.
    List,
    /// One object of a kind Placer knows (or not).
    Object(Option<Kind>),
}

thread_local! {
    static DOCS: RefCell<VecDeque<DocPlan>> = const { RefCell::new(VecDeque::new()) };
    static SKIPPED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Pass 1 view of a document.
struct DocHeader;

impl<'de> Deserialize<'de> for DocHeader {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = DocHeader;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a Kubernetes object or a List of them")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DocHeader, A::Error> {
                let (mut api_version, mut kind, mut has_items) = (None::<String>, None::<String>, false);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "apiVersion" => api_version = map.next_value()?,
                        "kind" => kind = map.next_value()?,
                        "items" => {
                            let items: Option<Vec<Spanned<Header>>> = map.next_value()?;
                            for h in items.iter().flatten() {
                                let h = &h.value;
                                let known = match (&h.api_version, &h.kind) {
                                    (Some(a), Some(k)) => Kind::from_type(a, k),
                                    _ => None,
                                };
                                if !known.is_some_and(|k| SNAPSHOT_KINDS.contains(&k)) {
                                    SKIPPED.with(|s| s.borrow_mut().push(header_name(h)));
                                }
                            }
                            has_items = true;
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                let is_list = has_items || kind.as_deref().is_some_and(|k| k.ends_with("List"));
                let plan = if is_list {
                    DocPlan::List
                } else {
                    let known = match (&api_version, &kind) {
                        (Some(a), Some(k)) => Kind::from_type(a, k),
                        _ => None,
                    };
                    let known = known.filter(|k| SNAPSHOT_KINDS.contains(k));
                    if known.is_none() {
                        let h = Header { api_version, kind, name: None, namespace: None };
                        SKIPPED.with(|s| s.borrow_mut().push(header_name(&h)));
                    }
                    DocPlan::Object(known)
                };
                DOCS.with(|d| d.borrow_mut().push_back(plan));
                Ok(DocHeader)
            }
        }
        d.deserialize_map(V)
    }
}

fn header_name(h: &Header) -> String {
    format!(
        "{} {}",
        h.api_version.as_deref().unwrap_or("<no apiVersion>"),
        h.kind.as_deref().unwrap_or("<no kind>")
    )
}

/// Pass 2 view of a document: its kept objects.
struct DocTyped(Vec<Spanned<Typed>>);

#[derive(Deserialize)]
struct ListBody {
    #[serde(default)]
    items: Vec<Spanned<Typed>>,
}

impl<'de> Deserialize<'de> for DocTyped {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let plan = DOCS.with(|docs| docs.borrow_mut().pop_front());
        match plan {
            Some(DocPlan::List) => Ok(DocTyped(ListBody::deserialize(d)?.items)),
            Some(DocPlan::Object(kind)) => {
                TAPE.with(|t| {
                    if let Tape::Replay(q) = &mut *t.borrow_mut() {
                        q.push_front(kind);
                    }
                });
                let typed = Spanned::<Typed>::deserialize(d)?;
                Ok(DocTyped(vec![typed]))
            }
            None => Err(serde::de::Error::custom("internal error: documents out of step between passes")),
        }
    }
}

/// Parses dump text; `file` names it in messages.
pub fn load_snapshot_str(text: &str, file: impl AsRef<Path>) -> Result<Snapshot, LoadError> {
    let file = file.as_ref().to_path_buf();
    if text.len() > MAX_INPUT_BYTES {
        return Err(LoadError::TooLarge { file, limit: MAX_INPUT_BYTES });
    }
    DOCS.with(|d| d.borrow_mut().clear());
    SKIPPED.with(|s| s.borrow_mut().clear());
    let (headers, kinds) = with_tape(Tape::Record(Vec::new()), || {
        serde_saphyr::from_multiple_with_options::<DocHeader>(text, yaml_options())
    });
    headers.map_err(|e| yaml_error(&file, text, e, None))?;
    let skipped_names = SKIPPED.with(|s| std::mem::take(&mut *s.borrow_mut()));
    let Tape::Record(kinds) = kinds else {
        return Err(LoadError::Io {
            file,
            source: std::io::Error::other("internal error: object kinds were not recorded"),
        });
    };
    // Items of kinds the dump does not contribute are read as nothing in pass 2.
    let kinds: VecDeque<Option<Kind>> =
        kinds.into_iter().map(|k| k.filter(|k| SNAPSHOT_KINDS.contains(k))).collect();
    let (docs, _) = with_tape(Tape::Replay(kinds), || {
        serde_saphyr::from_multiple_with_options::<DocTyped>(text, yaml_options())
    });
    DOCS.with(|d| d.borrow_mut().clear());
    let docs = docs.map_err(|e| yaml_error(&file, text, e, None))?;
    let mut skipped = BTreeMap::new();
    for name in skipped_names {
        *skipped.entry(name).or_insert(0) += 1;
    }
    let mut objects = Vec::new();
    for typed in docs.into_iter().flat_map(|d| d.0) {
        let (line, column) = (typed.referenced.line(), typed.referenced.column());
        let Some(mut object) = typed.value.0 else { continue };
        let meta = object.metadata_mut();
        meta.resource_version = None;
        meta.managed_fields = None;
        let path = format!("snapshot {}", crate::load::describe(&object));
        objects.push(Manifest { object: normalize(object), path, line, column });
    }
    let snapshot = Snapshot { file: file.clone(), objects, skipped };
    // Each object is checked as the API server would on create.
    let mut problems = Vec::new();
    for m in &snapshot.objects {
        crate::validate::validate_manifest(m, &mut problems);
    }
    if problems.is_empty() {
        Ok(snapshot)
    } else {
        locate_problems(text, &mut problems);
        Err(LoadError::Invalid { file, problems, expected_error: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = r#"apiVersion: v1
kind: List
metadata:
  resourceVersion: ""
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: n1
    resourceVersion: "17"
    labels: {rack: "on"}
  status:
    allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
- apiVersion: v1
  kind: Pod
  metadata: {name: running, namespace: team, resourceVersion: "20", uid: 0b1c}
  spec:
    nodeName: n1
    containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]
  status: {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata: {name: waiting, namespace: team}
  spec:
    containers: [{name: c, image: i, resources: {requests: {cpu: "2"}}}]
  status: {phase: Pending}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web, namespace: team}
  spec: {selector: {}, template: {}}
- apiVersion: v1
  kind: Service
  metadata: {name: web, namespace: team}
"#;

    #[test]
    fn a_list_dump_keeps_what_the_simulation_needs_and_counts_the_rest() {
        let s = load_snapshot_str(LIST, "dump.yaml").unwrap();
        assert_eq!((s.count(Kind::Node), s.count(Kind::Pod)), (1, 2));
        let labels = s.objects[0].object.metadata().labels.clone().unwrap();
        assert_eq!(labels["rack"], "on");
        assert_eq!(s.objects[0].object.metadata().resource_version, None);
        assert_eq!(
            s.skipped_summary().unwrap(),
            "dump.yaml: skipped 2 objects of kinds the simulation does not load: apps/v1 Deployment (1), v1 Service (1)"
        );
        let scenario = s.into_scenario().unwrap();
        assert_eq!(scenario.name, "dump");
        assert_eq!((scenario.nodes.len(), scenario.pods.len(), scenario.submit.len()), (1, 1, 1));
    }

    #[test]
    fn several_documents_and_typed_lists_load_too() {
        let text = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\napiVersion: v1\nkind: PodList\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: i}]}}\n---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n";
        let s = load_snapshot_str(text, "d.yaml").unwrap();
        assert_eq!((s.count(Kind::Node), s.count(Kind::Pod)), (1, 1));
        assert_eq!(s.skipped.get("batch/v1 Job"), Some(&1));
        assert_eq!(s.objects[1].object.metadata().namespace.as_deref(), Some("default"));
    }

    #[test]
    fn invalid_objects_in_a_dump_are_reported_with_their_position() {
        let text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n  spec: {containers: [{name: c}]}\n";
        let err = load_snapshot_str(text, "d.yaml").unwrap_err();
        let message = err.to_string();
        assert!(message.contains("d.yaml:"), "{message}");
        assert!(message.contains("Pod default/p"), "{message}");
        assert!(message.contains("image"), "{message}");
    }
}
