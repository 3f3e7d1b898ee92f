//! Patches: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic merge patch
//! (lists merged by key for the fields Kubernetes declares with a patch strategy, and the
//! `$patch`, `$retainKeys`, `$setElementOrder` and `$deleteFromPrimitiveList` directives
//! kubectl sends).

use serde_json::{Map, Value};

/// How the items of a list field are identified, by field name (the kinds served have no
/// field name used with two list types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListType {
    /// Items are maps identified by these keys (the first is the strategic merge key).
    Map(&'static [&'static str]),
    /// Items are scalars, each present once.
    Set,
    /// The list is replaced whole.
    Atomic,
}

/// The list type of field `name`.
pub fn list_type(name: &str) -> ListType {
    match name {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "schedulingGates"
        | "podGroupTemplates"
        | "containerStatuses"
        | "initContainerStatuses"
        | "ephemeralContainerStatuses" => ListType::Map(&["name"]),
        "ports" => ListType::Map(&["containerPort"]),
        "volumeMounts" => ListType::Map(&["mountPath"]),
        "volumeDevices" => ListType::Map(&["devicePath"]),
        "hostAliases" => ListType::Map(&["ip"]),
        "conditions" | "addresses" => ListType::Map(&["type"]),
        "ownerReferences" => ListType::Map(&["uid"]),
        "topologySpreadConstraints" => ListType::Map(&["topologyKey", "whenUnsatisfiable"]),
        "finalizers" | "podCIDRs" => ListType::Set,
        _ => ListType::Atomic,
    }
}

/// A patch that cannot be applied (answered 422, or 400 for a malformed one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchError {
    pub message: String,
    /// True when the patch itself is malformed.
    pub bad_request: bool,
}

fn bad(message: impl Into<String>) -> PatchError {
    PatchError { message: message.into(), bad_request: true }
}

fn failed(message: impl Into<String>) -> PatchError {
    PatchError { message: message.into(), bad_request: false }
}

/// RFC 7386.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    placer_cluster::embedded::merge_json(target, patch);
}

/// RFC 6902: `add`, `remove`, `replace`, `move`, `copy`, `test`.
pub fn json_patch(doc: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let Value::Array(ops) = patch else { return Err(bad("a JSON patch must be a list of operations")) };
    for (i, op) in ops.iter().enumerate() {
        let field = |name: &str| {
            op.get(name)
                .and_then(Value::as_str)
                .ok_or_else(|| bad(format!("operation {i}: missing {name:?}")))
        };
        let path = field("path")?;
        match field("op")? {
            "add" => add(
                doc,
                path,
                op.get("value").cloned().ok_or_else(|| bad(format!("operation {i}: missing value")))?,
            )?,
            "remove" => {
                remove(doc, path)?;
            }
            "replace" => {
                let value =
                    op.get("value").cloned().ok_or_else(|| bad(format!("operation {i}: missing value")))?;
                let target = pointer_mut(doc, path)?.ok_or_else(|| {
                    failed(format!("replace operation does not apply: doc is missing key: {path}"))
                })?;
                *target = value;
            }
            "move" => {
                let from = field("from")?;
                let value = remove(doc, from)?;
                add(doc, path, value)?;
            }
            "copy" => {
                let from = field("from")?;
                let value = doc
                    .pointer(&unescape_pointer(from)?)
                    .cloned()
                    .ok_or_else(|| failed(format!("copy from missing path {from}")))?;
                add(doc, path, value)?;
            }
            "test" => {
                let want = op.get("value").ok_or_else(|| bad(format!("operation {i}: missing value")))?;
                if doc.pointer(&unescape_pointer(path)?) != Some(want) {
                    return Err(failed(format!("testing value {path} failed")));
                }
            }
            other => return Err(bad(format!("unexpected kind: {other}"))),
        }
    }
    Ok(())
}

/// Checks a JSON pointer's syntax (serde_json resolves `~0` / `~1` itself).
fn unescape_pointer(p: &str) -> Result<String, PatchError> {
    if !p.is_empty() && !p.starts_with('/') {
        return Err(bad(format!("invalid JSON pointer {p:?}")));
    }
    Ok(p.to_string())
}

fn split_pointer(p: &str) -> Result<(String, String), PatchError> {
    let p = unescape_pointer(p)?;
    let idx = p.rfind('/').ok_or_else(|| bad("cannot operate on the whole document"))?;
    let last = p[idx + 1..].replace("~1", "/").replace("~0", "~");
    Ok((p[..idx].to_string(), last))
}

fn pointer_mut<'a>(doc: &'a mut Value, p: &str) -> Result<Option<&'a mut Value>, PatchError> {
    Ok(doc.pointer_mut(&unescape_pointer(p)?))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    let (parent, last) = split_pointer(path)?;
    let target = doc
        .pointer_mut(&parent)
        .ok_or_else(|| failed(format!("add operation does not apply: doc is missing path: {path}")))?;
    match target {
        Value::Object(m) => {
            m.insert(last, value);
        }
        Value::Array(a) => {
            if last == "-" {
                a.push(value);
            } else {
                let i: usize = last.parse().map_err(|_| bad(format!("invalid array index {last:?}")))?;
                if i > a.len() {
                    return Err(failed(format!("add operation does not apply: index {i} out of bounds")));
                }
                a.insert(i, value);
            }
        }
        _ => return Err(failed(format!("add operation does not apply: {parent} is not a container"))),
    }
    Ok(())
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, PatchError> {
    let (parent, last) = split_pointer(path)?;
    let missing = || failed(format!("remove operation does not apply: doc is missing path: {path}"));
    match doc.pointer_mut(&parent).ok_or_else(missing)? {
        Value::Object(m) => m.remove(&last).ok_or_else(missing),
        Value::Array(a) => {
            let i: usize = last.parse().map_err(|_| bad(format!("invalid array index {last:?}")))?;
            if i >= a.len() {
                return Err(missing());
            }
            Ok(a.remove(i))
        }
        _ => Err(missing()),
    }
}

/// Strategic merge patch of `patch` onto `target` (both whole objects).
pub fn strategic_merge(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let Value::Object(p) = patch else { return Err(bad("a strategic merge patch must be a JSON object")) };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    merge_map(target, p)
}

fn merge_map(target: &mut Value, patch: &Map<String, Value>) -> Result<(), PatchError> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut replaced = patch.clone();
            replaced.remove("$patch");
            *target = Value::Object(strip_directives(replaced));
            return Ok(());
        }
        Some("delete") => {
            *target = Value::Null;
            return Ok(());
        }
        Some(other) if other != "merge" => return Err(bad(format!("unknown patch type {other:?}"))),
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else { unreachable!() };
    let retain: Option<Vec<String>> = patch
        .get("$retainKeys")
        .and_then(Value::as_array)
        .map(|keys| keys.iter().filter_map(|k| k.as_str().map(str::to_string)).collect());
    for (key, value) in patch {
        if key == "$patch" || key == "$retainKeys" || key.starts_with("$setElementOrder/") {
            continue;
        }
        if key.starts_with("$deleteFromPrimitiveList/") {
            continue;
        }
        match value {
            Value::Null => {
                t.remove(key);
            }
            Value::Object(sub) => {
                let entry = t.entry(key.clone()).or_insert(Value::Null);
                merge_map(entry, sub)?;
                if entry.is_null() {
                    t.remove(key);
                }
            }
            Value::Array(items) => {
                let entry = t.entry(key.clone()).or_insert(Value::Array(Vec::new()));
                merge_list(entry, items, list_type(key))?;
            }
            other => {
                t.insert(key.clone(), other.clone());
            }
        }
    }
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(gone)) = (t.get_mut(field), value) {
                list.retain(|v| !gone.contains(v));
            }
        }
    }
    if let Some(keep) = retain {
        t.retain(|k, _| keep.contains(k));
    }
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$setElementOrder/") {
            if let (Some(Value::Array(list)), Value::Array(order)) = (t.get_mut(field), value) {
                reorder(list, order, list_type(field));
            }
        }
    }
    Ok(())
}

fn merge_list(target: &mut Value, items: &[Value], lt: ListType) -> Result<(), PatchError> {
    let replace = items.iter().any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"));
    if replace {
        *target = Value::Array(
            items
                .iter()
                .filter(|i| i.get("$patch").is_none())
                .cloned()
                .map(|v| match v {
                    Value::Object(m) => Value::Object(strip_directives(m)),
                    v => v,
                })
                .collect(),
        );
        return Ok(());
    }
    if !target.is_array() {
        *target = Value::Array(Vec::new());
    }
    let Value::Array(list) = target else { unreachable!() };
    match lt {
        ListType::Map(keys) if items.iter().all(Value::is_object) => {
            let key = keys[0];
            for item in items {
                let id = item.get(key);
                let pos = id.and_then(|id| list.iter().position(|x| x.get(key) == Some(id)));
                match (item.get("$patch").and_then(Value::as_str), pos) {
                    (Some("delete"), Some(i)) => {
                        list.remove(i);
                    }
                    (Some("delete"), None) => {}
                    (_, Some(i)) => {
                        let Value::Object(m) = item else { unreachable!() };
                        merge_map(&mut list[i], m)?;
                    }
                    (_, None) => {
                        let Value::Object(m) = item else { unreachable!() };
                        list.push(Value::Object(strip_directives(m.clone())));
                    }
                }
            }
        }
        ListType::Set => {
            for item in items {
                if !list.contains(item) {
                    list.push(item.clone());
                }
            }
        }
        _ => *list = items.to_vec(),
    }
    Ok(())
}

fn strip_directives(mut m: Map<String, Value>) -> Map<String, Value> {
    m.retain(|k, _| !k.starts_with('$'));
    for v in m.values_mut() {
        match v {
            Value::Object(inner) => *inner = strip_directives(std::mem::take(inner)),
            Value::Array(items) => {
                for item in items.iter_mut() {
                    if let Value::Object(inner) = item {
                        *inner = strip_directives(std::mem::take(inner));
                    }
                }
            }
            _ => {}
        }
    }
    m
}

/// Orders `list` as `order` lists it (items it does not name keep their place at the end).
fn reorder(list: &mut [Value], order: &[Value], lt: ListType) {
    let rank = |item: &Value| -> usize {
        order
            .iter()
            .position(|o| match lt {
                ListType::Map(keys) => item.get(keys[0]).is_some() && item.get(keys[0]) == o.get(keys[0]),
                _ => item == o,
            })
            .unwrap_or(usize::MAX)
    };
    list.sort_by_key(rank);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_patch_operations() {
        let mut doc = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"list": [1, 2]}});
        let patch = json!([
            {"op": "add", "path": "/metadata/labels/b~1c", "value": "2"},
            {"op": "replace", "path": "/metadata/labels/a", "value": "3"},
            {"op": "add", "path": "/spec/list/-", "value": 3},
            {"op": "remove", "path": "/spec/list/0"},
            {"op": "test", "path": "/spec/list/0", "value": 2},
            {"op": "copy", "from": "/spec/list", "path": "/spec/copy"},
            {"op": "move", "from": "/spec/copy", "path": "/spec/moved"}
        ]);
        json_patch(&mut doc, &patch).unwrap();
        assert_eq!(
            doc,
            json!({"metadata": {"labels": {"a": "3", "b/c": "2"}}, "spec": {"list": [2, 3], "moved": [2, 3]}})
        );
        let err =
            json_patch(&mut doc, &json!([{"op": "test", "path": "/spec/list/0", "value": 9}])).unwrap_err();
        assert!(!err.bad_request);
        assert!(json_patch(&mut doc, &json!([{"op": "remove", "path": "/nope"}])).is_err());
        assert!(json_patch(&mut doc, &json!({"op": "add"})).unwrap_err().bad_request);
    }

    #[test]
    fn strategic_merge_merges_keyed_lists_and_honours_directives() {
        let mut pod = json!({"metadata": {"finalizers": ["a"], "labels": {"x": "1", "y": "2"}},
            "spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}],
                     "tolerations": [{"key": "k"}]}});
        let patch = json!({"metadata": {"finalizers": ["b"], "labels": {"y": null}},
            "spec": {"containers": [{"name": "b", "image": "b:2"}, {"name": "c", "image": "c:1"}, {"name": "a", "$patch": "delete"}],
                     "tolerations": [{"key": "t"}],
                     "$setElementOrder/containers": [{"name": "c"}, {"name": "b"}]}});
        strategic_merge(&mut pod, &patch).unwrap();
        assert_eq!(
            pod,
            json!({"metadata": {"finalizers": ["a", "b"], "labels": {"x": "1"}},
            "spec": {"containers": [{"name": "c", "image": "c:1"}, {"name": "b", "image": "b:2"}],
                     "tolerations": [{"key": "t"}]}})
        );
        let mut m = json!({"spec": {"a": 1, "b": 2}});
        strategic_merge(&mut m, &json!({"spec": {"$patch": "replace", "c": 3}})).unwrap();
        assert_eq!(m, json!({"spec": {"c": 3}}));
        strategic_merge(&mut m, &json!({"spec": {"$retainKeys": ["d"], "d": 4}})).unwrap();
        assert_eq!(m, json!({"spec": {"d": 4}}));
        strategic_merge(
            &mut m,
            &json!({"metadata": {"finalizers": ["x", "y"], "$deleteFromPrimitiveList/finalizers": ["x"]}}),
        )
        .unwrap();
        assert_eq!(m["metadata"]["finalizers"], json!(["y"]));
    }

    #[test]
    fn lease_patches_as_kube_lease_manager_sends_them() {
        let mut lease =
            json!({"spec": {"holderIdentity": "a", "renewTime": "t1", "leaseDurationSeconds": 15}});
        strategic_merge(&mut lease, &json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "spec": {"holderIdentity": null, "renewTime": null, "acquireTime": null, "leaseDurationSeconds": null}})).unwrap();
        assert_eq!(lease, json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": {}}));
    }
}
