//! Checking `expect` blocks against the cluster.
//!
//! Each check that does not hold becomes a [`Failure`] with the path of the expectation
//! inside the block (`pods.default/p0`, `podGroups.default/pg.boundPods`, `objects[2]`)
//! and what was expected and found. Object patterns match as subsets (FORMAT.md): maps by
//! key, lists element-wise in order (a pattern list may be shorter than the object's
//! list; an empty pattern list matches only an empty or absent list), `{}` matches any
//! present value, `null` matches an absent value. Scalars compare by value, so a pattern
//! `4` matches `4` and `"4"`. A pattern's top-level `name` / `namespace` are shorthands
//! for `metadata.name` / `metadata.namespace`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use placer_cluster::{ClusterStore, Kind, Object, ObjectRef};
use serde_json::Value;

use crate::load::split_key;
use crate::scenario::{ConditionExpect, Expect, PodGroupExpect};

/// The PodGroup condition the scheduler maintains.
pub const POD_GROUP_SCHEDULED: &str = "PodGroupScheduled";

/// One expectation that does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Where in the expect block, e.g. `podGroups.default/pg.boundPods`.
    pub path: String,
    /// What the expectation asked for.
    pub expected: String,
    /// What the cluster had.
    pub got: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: expected {}, got {}", self.path, self.expected, self.got)
    }
}

/// The result of checking one expect block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// Which block: `expect`, `steps[3].expect`, or `end` (errors nobody expected).
    pub at: String,
    /// Number of individual checks made.
    pub checked: usize,
    /// The checks that did not hold.
    pub failures: Vec<Failure>,
}

impl CheckReport {
    /// True when every check held.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Checks `expect` against `store`. `errors` are the errors of the steps since the
/// previous check (for `expect.error`); an error nobody expected is a failure.
pub fn check(expect: &Expect, store: &dyn ClusterStore, errors: &[String], at: &str) -> CheckReport {
    let mut c = Checker { failures: Vec::new(), checked: 0 };
    if !expect.pods.is_empty() || !expect.pod_groups.is_empty() {
        let view = View::new(store);
        for (key, expected) in &expect.pods {
            c.pod(&view, key, expected);
        }
        for (key, g) in &expect.pod_groups {
            c.pod_group(&view, store, key, g);
        }
    }
    let mut objects = Objects::new(store);
    for (i, pattern) in expect.objects.iter().enumerate() {
        c.object(&mut objects, &format!("objects[{i}]"), pattern);
    }
    for (i, pattern) in expect.absent.iter().enumerate() {
        c.absent(&mut objects, &format!("absent[{i}]"), pattern);
    }
    c.errors(expect.error.as_deref(), errors);
    CheckReport { at: at.to_string(), checked: c.checked, failures: c.failures }
}

/// A report for errors that happened after the last expect block (nobody checked them).
pub fn unexpected_errors(errors: &[String]) -> Option<CheckReport> {
    if errors.is_empty() {
        return None;
    }
    let mut c = Checker { failures: Vec::new(), checked: 0 };
    c.errors(None, errors);
    Some(CheckReport { at: "end".into(), checked: c.checked, failures: c.failures })
}

struct Checker {
    failures: Vec<Failure>,
    checked: usize,
}

/// The objects of the kinds patterns name, as JSON, read once per check and indexed by
/// name: a block of N patterns against N objects costs N, not N squared.
struct Objects<'a> {
    store: &'a dyn ClusterStore,
    kinds: BTreeMap<Kind, KindObjects>,
}

#[derive(Default)]
struct KindObjects {
    items: Vec<(ObjectRef, Value)>,
    by_name: std::collections::HashMap<String, Vec<usize>>,
}

impl<'a> Objects<'a> {
    fn new(store: &'a dyn ClusterStore) -> Self {
        Objects { store, kinds: BTreeMap::new() }
    }

    fn of(&mut self, kind: Kind) -> &KindObjects {
        let store = self.store;
        self.kinds.entry(kind).or_insert_with(|| {
            let mut k = KindObjects::default();
            store.visit(kind, &mut |obj| {
                let r = obj.object_ref();
                k.by_name.entry(r.name.clone()).or_default().push(k.items.len());
                k.items.push((r, obj.to_json()));
            });
            k
        })
    }
}

/// The `metadata.name` a pattern pins, if any.
fn pattern_name(rest: &Value) -> Option<&str> {
    rest.pointer("/metadata/name").and_then(Value::as_str)
}

/// Prefix of a `podGroups` key that names a PodGroup by the Job whose controller made it.
pub const JOB_KEY_PREFIX: &str = "job:";

/// The PodGroup a `podGroups` key names: `namespace/name`, or `job:namespace/name` for
/// the PodGroup the Job controller made for that Job (the one whose controlling owner
/// reference is the Job), or `job:namespace/name/template` when the Job's Workload has
/// several PodGroup templates. Err: what was found instead, as a sentence.
pub fn resolve_group_key(store: &dyn ClusterStore, key: &str) -> Result<(String, String), String> {
    let Some(job_key) = key.strip_prefix(JOB_KEY_PREFIX) else {
        return split_key(key).ok_or_else(|| format!("{key:?}, not a namespace/name key"));
    };
    let mut parts = job_key.splitn(3, '/');
    let (Some(ns), Some(job)) = (parts.next(), parts.next()) else {
        return Err(format!("{key:?}, not job:namespace/name"));
    };
    let template = parts.next();
    if store.get(&ObjectRef::new(Kind::Job, ns, job)).is_none() {
        return Err(format!("not found (no Job {ns}/{job})"));
    }
    let mut found = Vec::new();
    store.visit(Kind::PodGroup, &mut |obj| {
        let Object::PodGroup(pg) = obj else { return };
        let r = obj.object_ref();
        let owned = pg
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "Job" && o.name == job && o.controller == Some(true));
        let template_name = pg
            .spec
            .pod_group_template_ref
            .as_ref()
            .and_then(|t| t.workload.as_ref())
            .map(|w| w.pod_group_template_name.as_str());
        if r.namespace == ns && owned && template.is_none_or(|t| template_name == Some(t)) {
            found.push(r.name);
        }
    });
    match found.len() {
        1 => Ok((ns.to_string(), found.remove(0))),
        0 => Err(format!(
            "not found (Job {ns}/{job} has no PodGroup{})",
            template.map(|t| format!(" of template {t}")).unwrap_or_default()
        )),
        _ => Err(format!(
            "{} PodGroups of Job {ns}/{job} ({}): name the template, job:{ns}/{job}/TEMPLATE",
            found.len(),
            found.join(", ")
        )),
    }
}

/// Pods and node labels, read once per check.
struct View {
    /// (namespace, name) -> node name ("" when unbound).
    pods: BTreeMap<(String, String), String>,
    /// (namespace, PodGroup name) -> node names of its bound pods ("" for unbound ones).
    groups: BTreeMap<(String, String), Vec<String>>,
    node_labels: BTreeMap<String, BTreeMap<String, String>>,
}

impl View {
    fn new(store: &dyn ClusterStore) -> View {
        let mut pods = BTreeMap::new();
        let mut groups: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        store.visit(Kind::Pod, &mut |obj| {
            let Object::Pod(p) = obj else { return };
            let r = obj.object_ref();
            let spec = p.spec.as_ref();
            let node = spec.and_then(|s| s.node_name.clone()).unwrap_or_default();
            if let Some(g) =
                spec.and_then(|s| s.scheduling_group.as_ref()).and_then(|g| g.pod_group_name.clone())
            {
                groups.entry((r.namespace.clone(), g)).or_default().push(node.clone());
            }
            pods.insert((r.namespace, r.name), node);
        });
        let mut node_labels = BTreeMap::new();
        store.visit(Kind::Node, &mut |n| {
            node_labels.insert(n.object_ref().name, n.metadata().labels.clone().unwrap_or_default());
        });
        View { pods, groups, node_labels }
    }

    /// The value of label `key` on `node`, or a marker saying why there is none.
    fn label(&self, node: &str, key: &str) -> String {
        match self.node_labels.get(node) {
            None => format!("<node {node} missing>"),
            Some(labels) => labels.get(key).cloned().unwrap_or_else(|| format!("<{node} has no {key}>")),
        }
    }
}

fn list<T: fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    format!("[{}]", items.into_iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", "))
}

fn map<T: fmt::Display>(items: &BTreeMap<String, T>) -> String {
    format!("{{{}}}", items.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", "))
}

impl Checker {
    fn fail(&mut self, path: String, expected: impl Into<String>, got: impl Into<String>) {
        self.failures.push(Failure { path, expected: expected.into(), got: got.into() });
    }

    fn pod(&mut self, view: &View, key: &str, expected: &str) {
        self.checked += 1;
        let path = format!("pods.{key}");
        let Some((ns, name)) = split_key(key) else {
            return self.fail(path, "a namespace/name key", key);
        };
        let got = match view.pods.get(&(ns, name)) {
            None => format!("not found (no Pod {key})"),
            Some(node) if node.is_empty() => "Pending".to_string(),
            Some(node) => node.clone(),
        };
        if got != expected {
            self.fail(path, expected, got);
        }
    }

    fn pod_group(&mut self, view: &View, store: &dyn ClusterStore, key: &str, g: &PodGroupExpect) {
        let base = format!("podGroups.{key}");
        let (ns, name) = match resolve_group_key(store, key) {
            Ok(found) => found,
            Err(got) => {
                self.checked += 1;
                return self.fail(base, "a PodGroup", got);
            }
        };
        let exists = store.get(&ObjectRef::new(Kind::PodGroup, ns.clone(), name.clone())).is_some();
        if !exists && !view.groups.contains_key(&(ns.clone(), name.clone())) {
            // Neither the PodGroup nor a pod naming it: every check would fail for the
            // same reason, so it is said once.
            self.checked += 1;
            return self.fail(
                base,
                "a PodGroup",
                format!("not found (no PodGroup {ns}/{name}, no pod names it)"),
            );
        }
        let bound: Vec<&String> = view
            .groups
            .get(&(ns.clone(), name.clone()))
            .into_iter()
            .flatten()
            .filter(|n| !n.is_empty())
            .collect();
        if let Some(expected) = g.scheduled {
            self.checked += 1;
            let got = !bound.is_empty();
            if got != expected {
                self.fail(
                    format!("{base}.scheduled"),
                    expected.to_string(),
                    format!("{got} ({} pods bound)", bound.len()),
                );
            }
        }
        if let Some(expected) = g.bound_pods {
            self.checked += 1;
            if bound.len() != expected as usize {
                self.fail(format!("{base}.boundPods"), expected.to_string(), bound.len().to_string());
            }
        }
        if let Some(key) = &g.same_domain {
            self.checked += 1;
            let values: BTreeSet<String> = bound.iter().map(|n| view.label(n, key)).collect();
            if values.len() != 1 || values.iter().any(|v| v.starts_with('<')) {
                let got = if bound.is_empty() {
                    "no bound pods".to_string()
                } else {
                    format!("values {}", list(&values))
                };
                self.fail(format!("{base}.sameDomain"), format!("one value of {key}"), got);
            }
        }
        for (key, expected) in g.domains.iter().flatten() {
            self.checked += 1;
            let got: BTreeSet<String> = bound.iter().map(|n| view.label(n, key)).collect();
            let expected: BTreeSet<String> = expected.iter().cloned().collect();
            if got != expected {
                self.fail(format!("{base}.domains.{key}"), list(&expected), list(&got));
            }
        }
        for (key, expected) in g.pods_per_domain.iter().flatten() {
            self.checked += 1;
            let mut got: BTreeMap<String, u32> = BTreeMap::new();
            for n in &bound {
                *got.entry(view.label(n, key)).or_insert(0) += 1;
            }
            if &got != expected {
                self.fail(format!("{base}.podsPerDomain.{key}"), map(expected), map(&got));
            }
        }
        if let Some(cond) = &g.condition {
            self.checked += 1;
            let r = ObjectRef::new(Kind::PodGroup, ns, name);
            self.condition(store.get(&r).as_ref(), cond, &format!("{base}.condition"));
        }
    }

    fn condition(&mut self, pg: Option<&Object>, want: &ConditionExpect, path: &str) {
        let mut expected = format!("{}={}", want.type_, want.status);
        if let Some(r) = &want.reason {
            expected.push_str(&format!(" reason={r}"));
        }
        if let Some(m) = &want.message {
            expected.push_str(&format!(" message={m:?}"));
        }
        let Some(pg) = pg else {
            return self.fail(path.to_string(), expected, "not found (no such PodGroup)");
        };
        let json = pg.to_json();
        let found = json
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(want.type_.as_str()));
        let Some(c) = found else {
            return self.fail(path.to_string(), expected, format!("no {} condition", want.type_));
        };
        let field = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let (status, reason, message) = (field("status"), field("reason"), field("message"));
        let ok = status == want.status
            && want.reason.as_ref().is_none_or(|r| *r == reason)
            && want.message.as_ref().is_none_or(|m| *m == message);
        if !ok {
            self.fail(
                path.to_string(),
                expected,
                format!("{}={status} reason={reason} message={message:?}", want.type_),
            );
        }
    }

    fn object(&mut self, objects: &mut Objects<'_>, path: &str, pattern: &Value) {
        self.checked += 1;
        let Some((kind, rest)) = split_pattern(pattern) else {
            return self.fail(
                path.to_string(),
                "a pattern with a known apiVersion and kind",
                pattern.to_string(),
            );
        };
        let all = objects.of(kind);
        // A pattern that pins the name is checked against the objects of that name only.
        if let Some(name) = pattern_name(&rest) {
            let named = all.by_name.get(name).into_iter().flatten();
            if named.into_iter().any(|&i| subset(&rest, Some(&all.items[i].1), "").is_ok()) {
                return;
            }
        }
        let mut closest: Option<(&ObjectRef, Mismatch)> = None;
        for (r, json) in &all.items {
            match subset(&rest, Some(json), "") {
                Ok(()) => return,
                Err(m) => {
                    let better = closest.as_ref().is_none_or(|(_, best)| m.depth > best.depth);
                    if better {
                        closest = Some((r, m));
                    }
                }
            }
        }
        let got = match closest {
            None => format!("no {kind} at all"),
            Some((r, m)) => format!(
                "no match among {} {kind}(s); closest {r} differs at {}: expected {}, got {}",
                all.items.len(),
                m.path,
                m.expected,
                m.got
            ),
        };
        self.fail(path.to_string(), format!("an object matching {}", compact(pattern)), got);
    }

    fn absent(&mut self, objects: &mut Objects<'_>, path: &str, pattern: &Value) {
        self.checked += 1;
        let Some((kind, rest)) = split_pattern(pattern) else {
            return self.fail(
                path.to_string(),
                "a pattern with a known apiVersion and kind",
                pattern.to_string(),
            );
        };
        let all = objects.of(kind);
        let candidates: Vec<usize> = match pattern_name(&rest) {
            Some(name) => all.by_name.get(name).cloned().unwrap_or_default(),
            None => (0..all.items.len()).collect(),
        };
        let matching: Vec<String> = candidates
            .into_iter()
            .filter(|&i| subset(&rest, Some(&all.items[i].1), "").is_ok())
            .map(|i| all.items[i].0.to_string())
            .collect();
        if !matching.is_empty() {
            self.fail(path.to_string(), format!("no object matching {}", compact(pattern)), list(&matching));
        }
    }

    fn errors(&mut self, expected: Option<&str>, errors: &[String]) {
        match expected {
            Some(want) => {
                self.checked += 1;
                if !errors.iter().any(|e| e.contains(want)) {
                    let got = if errors.is_empty() {
                        "no error".to_string()
                    } else {
                        list(errors.iter().map(|e| format!("{e:?}")))
                    };
                    self.fail("error".into(), format!("an error containing {want:?}"), got);
                }
            }
            None if !errors.is_empty() => {
                self.checked += 1;
                self.fail("error".into(), "no error", list(errors.iter().map(|e| format!("{e:?}"))));
            }
            None => {}
        }
    }
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Splits a pattern into its kind and the rest (with `name` / `namespace` shorthands
/// moved under `metadata`).
fn split_pattern(pattern: &Value) -> Option<(Kind, Value)> {
    let obj = pattern.as_object()?;
    let kind = Kind::from_type(obj.get("apiVersion")?.as_str()?, obj.get("kind")?.as_str()?)?;
    let mut rest = obj.clone();
    rest.remove("apiVersion");
    rest.remove("kind");
    for key in ["name", "namespace"] {
        if let Some(v) = rest.remove(key) {
            let meta = rest.entry("metadata").or_insert_with(|| Value::Object(Default::default()));
            if let Value::Object(m) = meta {
                m.entry(key).or_insert(v);
            }
        }
    }
    Some((kind, Value::Object(rest)))
}

/// Why a pattern does not match: the first difference, and how deep it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Path of the first difference (e.g. `spec.containers[0].name`).
    pub path: String,
    /// The pattern's value there.
    pub expected: String,
    /// The object's value there.
    pub got: String,
    depth: usize,
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Subset match of `pattern` against `actual` (`None` = absent). See the module docs.
pub fn subset(pattern: &Value, actual: Option<&Value>, path: &str) -> Result<(), Mismatch> {
    let depth = path.split(['.', '[']).filter(|s| !s.is_empty()).count();
    let mismatch = |expected: String, got: String| Mismatch { path: path.to_string(), expected, got, depth };
    let shown = |v: Option<&Value>| match v {
        None | Some(Value::Null) => "<absent>".to_string(),
        Some(v) => compact(v),
    };
    let actual = actual.filter(|a| !a.is_null());
    match pattern {
        Value::Null => match actual {
            None => Ok(()),
            Some(a) => Err(mismatch("<absent>".into(), compact(a))),
        },
        Value::Object(p) if p.is_empty() => match actual {
            Some(_) => Ok(()),
            None => Err(mismatch("<present>".into(), "<absent>".into())),
        },
        Value::Object(p) => {
            let Some(Value::Object(a)) = actual else {
                return Err(mismatch(compact(pattern), shown(actual)));
            };
            for (k, pv) in p {
                subset(pv, a.get(k), &join(path, k))?;
            }
            Ok(())
        }
        Value::Array(p) => {
            let a: &[Value] = match actual {
                None => &[],
                Some(Value::Array(a)) => a,
                Some(other) => return Err(mismatch(compact(pattern), compact(other))),
            };
            if p.is_empty() && !a.is_empty() {
                return Err(mismatch("[]".into(), compact(&Value::Array(a.to_vec()))));
            }
            if p.len() > a.len() {
                return Err(mismatch(
                    format!("at least {} elements", p.len()),
                    format!("{} elements", a.len()),
                ));
            }
            for (i, pv) in p.iter().enumerate() {
                subset(pv, a.get(i), &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        scalar => match actual {
            Some(a) if scalar_eq(scalar, a) => Ok(()),
            _ => Err(mismatch(compact(scalar), shown(actual))),
        },
    }
}

fn scalar_eq(p: &Value, a: &Value) -> bool {
    if p == a {
        return true;
    }
    match (p, a) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Number(n), Value::String(s)) | (Value::String(s), Value::Number(n)) => {
            s.parse::<f64>().ok().is_some_and(|v| Some(v) == n.as_f64())
        }
        (Value::Bool(b), Value::String(s)) | (Value::String(s), Value::Bool(b)) => *s == b.to_string(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use placer_api::k8s::api::core::v1::{Node, Pod, PodSchedulingGroup, PodSpec};
    use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use placer_cluster::embedded::EmbeddedCluster;
    use serde_json::json;

    fn ok(p: Value, a: Value) -> bool {
        subset(&p, Some(&a), "").is_ok()
    }

    #[test]
    fn maps_match_by_key_and_ignore_extra_keys() {
        assert!(ok(json!({"a": 1}), json!({"a": 1, "b": 2})));
        assert!(!ok(json!({"a": 1, "c": 3}), json!({"a": 1, "b": 2})));
        assert!(!ok(json!({"a": {"b": 1}}), json!({"a": 5})));
    }

    #[test]
    fn empty_map_means_present_with_any_value() {
        assert!(ok(json!({"s": {}}), json!({"s": {"podGroupName": "x"}})));
        assert!(ok(json!({"s": {}}), json!({"s": 3})));
        assert!(!ok(json!({"s": {}}), json!({"t": 1})));
    }

    #[test]
    fn lists_match_element_wise_in_order_as_a_prefix() {
        let refs = json!({"r": [{"kind": "Job", "uid": "1"}, {"kind": "Workload"}]});
        assert!(ok(json!({"r": [{"kind": "Job"}, {"kind": "Workload"}]}), refs.clone()));
        assert!(ok(json!({"r": [{"kind": "Job"}]}), refs.clone()), "a shorter pattern list is a prefix");
        assert!(!ok(json!({"r": [{"kind": "Workload"}, {"kind": "Job"}]}), refs.clone()), "order matters");
        assert!(!ok(json!({"r": [{}, {}, {}]}), refs.clone()));
        assert!(!ok(json!({"r": []}), refs), "[] means empty");
        assert!(ok(json!({"r": []}), json!({})), "[] matches an absent list");
    }

    #[test]
    fn scalars_compare_by_value() {
        assert!(ok(json!({"n": 4}), json!({"n": "4"})));
        assert!(ok(json!({"n": 4}), json!({"n": 4.0})));
        assert!(ok(json!({"b": true}), json!({"b": "true"})));
        assert!(!ok(json!({"n": 4}), json!({"n": 5})));
        assert!(ok(json!({"gone": null}), json!({})));
        assert!(!ok(json!({"gone": null}), json!({"gone": 1})));
    }

    #[test]
    fn mismatch_names_the_first_difference() {
        let m = subset(&json!({"spec": {"p": [{"m": 4}]}}), Some(&json!({"spec": {"p": [{"m": 3}]}})), "")
            .unwrap_err();
        assert_eq!((m.path.as_str(), m.expected.as_str(), m.got.as_str()), ("spec.p[0].m", "4", "3"));
    }

    fn node(name: &str, rack: &str) -> Object {
        Object::node(Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([("rack".to_string(), rack.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn pod(name: &str, group: &str) -> Object {
        Object::pod(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                scheduling_group: Some(PodSchedulingGroup { pod_group_name: Some(group.into()) }),
                ..Default::default()
            }),
            status: None,
        })
    }

    fn cluster() -> EmbeddedCluster {
        let mut c = EmbeddedCluster::new();
        c.create(node("n1", "r1")).unwrap();
        c.create(node("n2", "r1")).unwrap();
        c.create(node("n3", "r2")).unwrap();
        for (p, n) in [("a", Some("n1")), ("b", Some("n2")), ("c", Some("n2")), ("d", None)] {
            c.create(pod(p, "pg")).unwrap();
            if let Some(n) = n {
                c.bind("default", p, "", n).unwrap();
            }
        }
        c
    }

    fn expect(yaml: &str) -> Expect {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn pod_and_group_expectations_that_hold() {
        let c = cluster();
        let e = expect(
            "pods: {default/a: n1, default/d: Pending}\npodGroups:\n  default/pg:\n    scheduled: true\n    boundPods: 3\n    \
             sameDomain: rack\n    domains: {rack: [r1]}\n    podsPerDomain: {kubernetes.io/hostname: {}, rack: {r1: 3}}\n",
        );
        let mut e = e;
        // Nodes here have no hostname label: drop that map to keep this check about racks.
        e.pod_groups
            .get_mut("default/pg")
            .unwrap()
            .pods_per_domain
            .as_mut()
            .unwrap()
            .remove("kubernetes.io/hostname");
        let r = check(&e, &c, &[], "expect");
        assert!(r.passed(), "{:?}", r.failures);
        assert_eq!(r.checked, 7);
    }

    #[test]
    fn failures_say_expected_and_got() {
        let c = cluster();
        let e = expect(
            "pods: {default/a: n3, default/zz: Pending}\npodGroups:\n  default/pg:\n    boundPods: 4\n    \
             podsPerDomain: {rack: {r1: 2, r2: 1}}\n    condition: {type: PodGroupScheduled, status: 'True'}\n",
        );
        let got: Vec<String> =
            check(&e, &c, &[], "expect").failures.iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            [
                "pods.default/a: expected n3, got n1",
                "pods.default/zz: expected Pending, got not found (no Pod default/zz)",
                "podGroups.default/pg.boundPods: expected 4, got 3",
                "podGroups.default/pg.podsPerDomain.rack: expected {r1: 2, r2: 1}, got {r1: 3}",
                "podGroups.default/pg.condition: expected PodGroupScheduled=True, got not found (no such PodGroup)",
            ]
        );
    }

    #[test]
    fn a_missing_pod_group_is_not_found_once() {
        let c = cluster();
        let e = expect("podGroups:\n  default/nope:\n    scheduled: true\n    boundPods: 2\n");
        let got: Vec<String> =
            check(&e, &c, &[], "expect").failures.iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            ["podGroups.default/nope: expected a PodGroup, got not found (no PodGroup default/nope, no pod names it)"]
        );
        let e = expect("podGroups:\n  job:default/train:\n    scheduled: true\n");
        let got: Vec<String> =
            check(&e, &c, &[], "expect").failures.iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            ["podGroups.job:default/train: expected a PodGroup, got not found (no Job default/train)"]
        );
    }

    #[test]
    fn objects_and_absent_patterns() {
        let c = cluster();
        let e = expect(
            "objects:\n  - {apiVersion: v1, kind: Pod, metadata: {name: a}, spec: {nodeName: n1, schedulingGroup: {}}}\n  \
             - {apiVersion: v1, kind: Pod, namespace: default, name: a, spec: {nodeName: n2}}\n\
             absent:\n  - {apiVersion: v1, kind: Pod, namespace: default, name: gone}\n  \
             - {apiVersion: v1, kind: Pod, namespace: default, spec: {nodeName: n3}}\n  \
             - {apiVersion: v1, kind: Pod, namespace: default, spec: {nodeName: n2}}\n",
        );
        let got: Vec<String> =
            check(&e, &c, &[], "expect").failures.iter().map(ToString::to_string).collect();
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].starts_with("objects[1]: expected an object matching"), "{}", got[0]);
        assert!(
            got[0].contains("closest Pod default/a differs at spec.nodeName: expected \"n2\", got \"n1\""),
            "{}",
            got[0]
        );
        assert!(got[1].ends_with("got [Pod default/b, Pod default/c]"), "{}", got[1]);
    }

    #[test]
    fn error_expectations() {
        let c = EmbeddedCluster::new();
        let want = expect("error: cannot change parallelism\n");
        let errors = vec!["Job default/j is forbidden: cannot change parallelism for a Job".to_string()];
        assert!(check(&want, &c, &errors, "e").passed());
        let missed = check(&want, &c, &[], "e");
        assert_eq!(
            missed.failures[0].to_string(),
            "error: expected an error containing \"cannot change parallelism\", got no error"
        );
        let none = check(&Expect::default(), &c, &errors, "e");
        assert!(none.failures[0]
            .to_string()
            .starts_with("error: expected no error, got [\"Job default/j is forbidden"));
        assert!(unexpected_errors(&[]).is_none());
    }
}
