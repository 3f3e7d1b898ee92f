//! Server-side apply and `metadata.managedFields`.
//!
//! Every write through the API records which manager set which fields (the `fieldsV1`
//! format: `f:<field>`, `k:{<keys>}` for list items identified by key, `v:<value>` for
//! set members, `.` for an item itself). An apply (`PATCH` with
//! `application/apply-patch+yaml`) by manager M:
//!
//! * conflicts (409, reason `Conflict`, one `FieldManagerConflict` cause per field) when
//!   it sets a field another manager owns to a different value, unless `force=true`,
//!   which takes the field over;
//! * merges its configuration into the object (maps by key, keyed lists by item, sets by
//!   member, everything else replaced);
//! * removes the fields M applied before and applies no more, unless another manager
//!   owns them;
//! * makes M's `Apply` entry exactly the configuration's fields.
//!
//! Any other write makes its manager (the `fieldManager` parameter, else the client's
//! user agent up to the first `/`) the owner of the fields it changed, taking them from
//! other managers, and drops removed fields from every entry. This is the part of
//! kube-apiserver's field manager that `kubectl apply --server-side` and leader election
//! by apply rely on; it does not know the OpenAPI schema, only the list types of
//! [`crate::patch::list_type`], and it does not track status writes.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

use crate::patch::{list_type, ListType};

/// A field path: `["f:spec", "f:containers", "k:{\"name\":\"a\"}", "f:image"]`.
pub type FieldPath = Vec<String>;
/// A set of field paths.
pub type FieldSet = BTreeSet<FieldPath>;

/// Server-owned metadata fields nobody manages.
const SERVER_FIELDS: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "deletionTimestamp",
    "selfLink",
    "generateName",
];

/// The fields of an object (apiVersion, kind, identity and, unless `with_status`, status
/// excluded).
pub fn fields_of(obj: &Value, with_status: bool) -> FieldSet {
    let mut out = FieldSet::new();
    let Value::Object(m) = obj else { return out };
    for (k, v) in m {
        match k.as_str() {
            "apiVersion" | "kind" => {}
            "status" if !with_status => {}
            "metadata" => {
                if let Value::Object(meta) = v {
                    for (mk, mv) in meta {
                        if !SERVER_FIELDS.contains(&mk.as_str()) {
                            walk(mv, mk, &mut vec!["f:metadata".into(), format!("f:{mk}")], &mut out);
                        }
                    }
                }
            }
            _ => walk(v, k, &mut vec![format!("f:{k}")], &mut out),
        }
    }
    out
}

fn walk(v: &Value, name: &str, path: &mut FieldPath, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, sub) in m {
                path.push(format!("f:{k}"));
                walk(sub, k, path, out);
                path.pop();
            }
        }
        Value::Array(items) => match list_type(name) {
            ListType::Map(keys) if items.iter().all(Value::is_object) => {
                for item in items {
                    path.push(item_key(item, keys));
                    out.insert(path.clone());
                    if let Value::Object(m) = item {
                        for (k, sub) in m {
                            path.push(format!("f:{k}"));
                            walk(sub, k, path, out);
                            path.pop();
                        }
                    }
                    path.pop();
                }
            }
            ListType::Set => {
                for item in items {
                    path.push(format!("v:{item}"));
                    out.insert(path.clone());
                    path.pop();
                }
            }
            _ => {
                out.insert(path.clone());
            }
        },
        _ => {
            out.insert(path.clone());
        }
    }
}

fn item_key(item: &Value, keys: &[&str]) -> String {
    let mut k = Map::new();
    for key in keys {
        if let Some(v) = item.get(*key) {
            k.insert(key.to_string(), v.clone());
        }
    }
    format!("k:{}", Value::Object(k))
}

/// The value at `path` in `obj` (`None` when absent).
pub fn value_at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut v = obj;
    for (i, element) in path.iter().enumerate() {
        if let Some(field) = element.strip_prefix("f:") {
            v = v.get(field)?;
        } else if let Some(key) = element.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(key).ok()?;
            v = v.as_array()?.iter().find(|item| key.iter().all(|(k, kv)| item.get(k) == Some(kv)))?;
        } else if let Some(member) = element.strip_prefix("v:") {
            let member: Value = serde_json::from_str(member).ok()?;
            let found = v.as_array()?.iter().find(|x| **x == member)?;
            if i + 1 == path.len() {
                return Some(found);
            }
            v = found;
        } else {
            return None;
        }
    }
    Some(v)
}

/// `.spec.containers[name="a"].image`
pub fn display_path(path: &[String]) -> String {
    let mut s = String::new();
    for e in path {
        if let Some(f) = e.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = e.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let parts: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
            s.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = e.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        }
    }
    s
}

/// `fieldsV1` of a set.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for e in path {
            let child = node.entry(e.clone()).or_insert_with(|| Value::Object(Map::new()));
            node = child.as_object_mut().expect("fieldsV1 nodes are objects");
        }
        // Mark the path itself when it also has children (or gets them later).
        node.insert(".".into(), json!({}));
    }
    clean_dots(&mut root);
    Value::Object(root)
}

/// Keeps `.` only where a node has other children.
fn clean_dots(node: &mut Map<String, Value>) {
    if node.len() == 1 && node.contains_key(".") {
        node.remove(".");
    }
    for (k, v) in node.iter_mut() {
        if k != "." {
            if let Value::Object(m) = v {
                clean_dots(m);
            }
        }
    }
}

/// The set of a `fieldsV1` value.
pub fn from_fields_v1(v: &Value) -> FieldSet {
    fn go(node: &Map<String, Value>, path: &mut FieldPath, out: &mut FieldSet) {
        if node.is_empty() && !path.is_empty() {
            out.insert(path.clone());
            return;
        }
        for (k, v) in node {
            if k == "." {
                out.insert(path.clone());
                continue;
            }
            path.push(k.clone());
            if let Value::Object(m) = v {
                go(m, path, out);
            }
            path.pop();
        }
    }
    let mut out = FieldSet::new();
    if let Value::Object(m) = v {
        go(m, &mut Vec::new(), &mut out);
    }
    out
}

/// One `managedFields` entry, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: Option<String>,
    pub fields: FieldSet,
}

impl Entry {
    fn to_json(&self) -> Value {
        let mut v = json!({
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(&self.fields),
        });
        if let Some(s) = &self.subresource {
            v["subresource"] = json!(s);
        }
        v
    }
}

/// The managedFields entries of an object.
pub fn entries(obj: &Value) -> Vec<Entry> {
    let Some(Value::Array(list)) = obj.get("metadata").and_then(|m| m.get("managedFields")) else {
        return Vec::new();
    };
    list.iter()
        .map(|e| Entry {
            manager: e.get("manager").and_then(Value::as_str).unwrap_or_default().to_string(),
            operation: e.get("operation").and_then(Value::as_str).unwrap_or("Update").to_string(),
            api_version: e.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string(),
            time: e.get("time").and_then(Value::as_str).unwrap_or_default().to_string(),
            subresource: e.get("subresource").and_then(Value::as_str).map(str::to_string),
            fields: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
        })
        .collect()
}

fn set_entries(obj: &mut Value, list: Vec<Entry>) {
    let list: Vec<Value> = list.into_iter().filter(|e| !e.fields.is_empty()).map(|e| e.to_json()).collect();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// Who writes, and when.
#[derive(Debug, Clone)]
pub struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    /// RFC 3339 time of the write.
    pub time: &'a str,
}

/// Records a non-apply write from `old` (None on create) to `new` in `new`'s
/// managedFields. A write that sent no managedFields keeps the stored ones.
pub fn record_update(old: Option<&Value>, new: &mut Value, w: &Writer<'_>) {
    let sent = new.get("metadata").and_then(|m| m.get("managedFields")).is_some();
    let mut list = if sent { entries(new) } else { old.map(entries).unwrap_or_default() };
    let old_fields = old.map(|o| fields_of(o, false)).unwrap_or_default();
    let new_fields = fields_of(new, false);
    let changed: FieldSet = new_fields
        .iter()
        .filter(|p| !old_fields.contains(*p) || old.and_then(|o| value_at(o, p)) != value_at(new, p))
        .cloned()
        .collect();
    let removed: FieldSet = old_fields.difference(&new_fields).cloned().collect();
    for e in list.iter_mut() {
        if e.subresource.is_some() {
            continue;
        }
        e.fields.retain(|p| !(removed.contains(p) || (changed.contains(p) && e.manager != w.manager)));
    }
    if !changed.is_empty() {
        match list
            .iter_mut()
            .find(|e| e.manager == w.manager && e.operation == "Update" && e.subresource.is_none())
        {
            Some(e) => {
                e.fields.extend(changed);
                e.time = w.time.to_string();
                e.api_version = w.api_version.to_string();
            }
            None => list.push(Entry {
                manager: w.manager.to_string(),
                operation: "Update".into(),
                api_version: w.api_version.to_string(),
                time: w.time.to_string(),
                subresource: None,
                fields: changed,
            }),
        }
    }
    set_entries(new, list);
}

/// An apply that conflicts with other managers: `(manager, field)` pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflicts(pub Vec<(String, String)>);

impl Conflicts {
    /// The Status message and causes kube-apiserver gives.
    pub fn message(&self) -> String {
        let n = self.0.len();
        let plural = if n == 1 { "" } else { "s" };
        let mut by_manager: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (m, f) in &self.0 {
            by_manager.entry(m).or_default().push(f);
        }
        let parts: Vec<String> = by_manager
            .iter()
            .map(|(m, fields)| {
                if fields.len() == 1 {
                    format!("conflict with \"{m}\": {}", fields[0])
                } else {
                    format!("conflicts with \"{m}\":\n- {}", fields.join("\n- "))
                }
            })
            .collect();
        format!("Apply failed with {n} conflict{plural}: {}", parts.join("\n"))
    }

    pub fn causes(&self) -> Value {
        Value::Array(
            self.0
                .iter()
                .map(|(m, f)| json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"{m}\""), "field": f}))
                .collect(),
        )
    }
}

/// Applies `config` by `w.manager` onto `live` (None: the object does not exist yet).
/// Returns the new object, with its managedFields.
pub fn apply(live: Option<&Value>, config: &Value, w: &Writer<'_>, force: bool) -> Result<Value, Conflicts> {
    let config_fields = fields_of(config, false);
    let mut list = live.map(entries).unwrap_or_default();
    let empty = json!({});
    let live_v = live.unwrap_or(&empty);
    // Conflicts with other managers' fields set to another value.
    let mut conflicts = Vec::new();
    for e in list.iter_mut() {
        if e.manager == w.manager || e.subresource.is_some() {
            continue;
        }
        let clashing: Vec<FieldPath> = e
            .fields
            .iter()
            .filter(|p| config_fields.contains(*p) && value_at(live_v, p) != value_at(config, p))
            .filter(|p| !is_item_marker(p) || value_at(live_v, p).is_none())
            .cloned()
            .collect();
        if clashing.is_empty() {
            continue;
        }
        if force {
            e.fields.retain(|p| !clashing.contains(p));
        } else {
            conflicts.extend(clashing.iter().map(|p| (e.manager.clone(), display_path(p))));
        }
    }
    if !conflicts.is_empty() {
        return Err(Conflicts(conflicts));
    }
    let mut obj = live.cloned().unwrap_or_else(|| json!({}));
    // Fields this manager applied before and no longer applies, owned by nobody else.
    let previous: FieldSet = list
        .iter()
        .find(|e| e.manager == w.manager && e.operation == "Apply" && e.subresource.is_none())
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let others: FieldSet = list
        .iter()
        .filter(|e| !(e.manager == w.manager && e.operation == "Apply"))
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    let mut dropped: Vec<&FieldPath> =
        previous.iter().filter(|p| !config_fields.contains(*p) && !others.contains(*p)).collect();
    dropped.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in dropped {
        remove_path(&mut obj, p);
    }
    merge_config(&mut obj, config, "");
    list.retain(|e| !(e.manager == w.manager && e.operation == "Apply" && e.subresource.is_none()));
    list.push(Entry {
        manager: w.manager.to_string(),
        operation: "Apply".into(),
        api_version: w.api_version.to_string(),
        time: w.time.to_string(),
        subresource: None,
        fields: config_fields,
    });
    set_entries(&mut obj, list);
    Ok(obj)
}

fn is_item_marker(p: &FieldPath) -> bool {
    p.last().is_some_and(|e| e.starts_with("k:") || e.starts_with("v:"))
}

fn merge_config(target: &mut Value, config: &Value, name: &str) {
    match config {
        Value::Object(c) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            let Value::Object(t) = target else { unreachable!() };
            for (k, v) in c {
                if k == "metadata" && name.is_empty() {
                    if let Value::Object(cm) = v {
                        let tm = t.entry("metadata").or_insert_with(|| json!({}));
                        for (mk, mv) in cm {
                            if mk == "managedFields"
                                || (mk == "resourceVersion" && mv.as_str().is_none_or(str::is_empty))
                            {
                                continue;
                            }
                            if let Some(tm) = tm.as_object_mut() {
                                merge_config(tm.entry(mk.clone()).or_insert(Value::Null), mv, mk);
                            }
                        }
                    }
                    continue;
                }
                if v.is_null() {
                    t.remove(k);
                    continue;
                }
                merge_config(t.entry(k.clone()).or_insert(Value::Null), v, k);
            }
        }
        Value::Array(items) => match list_type(name) {
            ListType::Map(keys) if items.iter().all(Value::is_object) => {
                if !target.is_array() {
                    *target = Value::Array(Vec::new());
                }
                let Value::Array(list) = target else { unreachable!() };
                for item in items {
                    let matches = |x: &Value| keys.iter().all(|k| x.get(*k) == item.get(*k));
                    match list.iter().position(matches) {
                        Some(i) => merge_config(&mut list[i], item, ""),
                        None => list.push(item.clone()),
                    }
                }
            }
            ListType::Set => {
                if !target.is_array() {
                    *target = Value::Array(Vec::new());
                }
                let Value::Array(list) = target else { unreachable!() };
                for item in items {
                    if !list.contains(item) {
                        list.push(item.clone());
                    }
                }
            }
            _ => *target = config.clone(),
        },
        other => *target = other.clone(),
    }
}

fn remove_path(obj: &mut Value, path: &[String]) {
    let Some((last, parent_path)) = path.split_last() else { return };
    let mut v = obj;
    for e in parent_path {
        let next = if let Some(f) = e.strip_prefix("f:") {
            v.get_mut(f)
        } else if let Some(k) = e.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            v.as_array_mut()
                .and_then(|a| a.iter_mut().find(|item| key.iter().all(|(k, kv)| item.get(k) == Some(kv))))
        } else {
            None
        };
        match next {
            Some(n) => v = n,
            None => return,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = v.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(k) = last.strip_prefix("k:") {
        let key: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
        if let Some(a) = v.as_array_mut() {
            a.retain(|item| !key.iter().all(|(k, kv)| item.get(k) == Some(kv)));
        }
    } else if let Some(m) = last.strip_prefix("v:") {
        let member: Value = serde_json::from_str(m).unwrap_or(Value::Null);
        if let Some(a) = v.as_array_mut() {
            a.retain(|x| *x != member);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(manager: &str) -> Writer<'_> {
        Writer { manager, api_version: "v1", time: "2026-01-01T00:00:00Z" }
    }

    #[test]
    fn fields_v1_round_trips() {
        let obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "c", "image": "i"}], "tolerations": [{"key": "k"}]},
            "status": {"phase": "Running"}});
        let set = fields_of(&obj, false);
        let v1 = to_fields_v1(&set);
        assert_eq!(
            v1,
            json!({"f:metadata": {"f:labels": {"f:a": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}, "f:tolerations": {}}})
        );
        assert_eq!(from_fields_v1(&v1), set);
        let p =
            vec!["f:spec".to_string(), "f:containers".into(), "k:{\"name\":\"c\"}".into(), "f:image".into()];
        assert_eq!(value_at(&obj, &p), Some(&json!("i")));
        assert_eq!(display_path(&p), ".spec.containers[name=\"c\"].image");
    }

    #[test]
    fn apply_conflicts_with_another_managers_different_value_unless_forced() {
        let config_a = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}});
        let live = apply(None, &config_a, &w("mgr-a"), false).unwrap();
        // The same values by another manager: shared ownership, no conflict.
        let shared = apply(Some(&live), &config_a, &w("mgr-c"), false).unwrap();
        assert_eq!(entries(&shared).len(), 2);
        let config_b = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
            "spec": {"holderIdentity": "b", "leaseDurationSeconds": 15}});
        let err = apply(Some(&live), &config_b, &w("mgr-b"), false).unwrap_err();
        assert_eq!(
            err.message(),
            "Apply failed with 1 conflict: conflict with \"mgr-a\": .spec.holderIdentity"
        );
        let forced = apply(Some(&live), &config_b, &w("mgr-b"), true).unwrap();
        assert_eq!(forced["spec"]["holderIdentity"], "b");
        let owners: Vec<(String, usize)> =
            entries(&forced).into_iter().map(|e| (e.manager, e.fields.len())).collect();
        assert_eq!(owners, [("mgr-a".to_string(), 1), ("mgr-b".to_string(), 2)]);
    }

    #[test]
    fn a_released_field_no_longer_conflicts() {
        let config_a = json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}});
        let live = apply(None, &config_a, &w("mgr-a"), false).unwrap();
        // Another manager clears the field with a patch (an update).
        let mut released = live.clone();
        released["spec"] = json!({});
        record_update(Some(&live), &mut released, &w("mgr-b"));
        assert!(entries(&released).iter().all(|e| e.manager == "mgr-b"), "{released}");
        let config_b = json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "b"}});
        assert!(apply(Some(&released), &config_b, &w("mgr-b"), false).is_ok());
    }

    #[test]
    fn apply_removes_fields_the_manager_stopped_applying_and_merges_keyed_lists() {
        let v1 = json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "2"}},
            "spec": {"containers": [{"name": "c", "image": "i:1"}]}});
        let live = apply(None, &v1, &w("kubectl"), false).unwrap();
        let mut updated = live.clone();
        updated["spec"]["containers"][0]["env"] = json!([{"name": "X", "value": "1"}]);
        record_update(Some(&live), &mut updated, &w("other"));
        let v2 = json!({"metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "c", "image": "i:2"}]}});
        let out = apply(Some(&updated), &v2, &w("kubectl"), false).unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"a": "1"}), "b was only kubectl's: removed");
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "c", "image": "i:2", "env": [{"name": "X", "value": "1"}]}])
        );
    }

    #[test]
    fn updates_take_ownership_of_changed_fields() {
        let live = apply(None, &json!({"metadata": {"name": "p"}, "spec": {"x": 1, "y": 1}}), &w("a"), false)
            .unwrap();
        let mut new = live.clone();
        new["spec"]["x"] = json!(2);
        record_update(Some(&live), &mut new, &w("b"));
        let e = entries(&new);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].fields.len(), 1, "a keeps y");
        assert_eq!((e[1].manager.as_str(), e[1].operation.as_str()), ("b", "Update"));
        // An update that sent no managedFields keeps them; one that changes nothing adds none.
        let mut same = new.clone();
        same["metadata"].as_object_mut().unwrap().remove("managedFields");
        record_update(Some(&new), &mut same, &w("c"));
        assert_eq!(entries(&same), e);
    }
}
