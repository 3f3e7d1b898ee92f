//! The verbs: get, list (selectors, `limit` / `continue`), create, update, patch (JSON,
//! merge, strategic, apply), delete (preconditions, propagation, namespaces), delete
//! collection, and the `status`, `binding` and `eviction` subresources. Every write goes
//! through the store's own create / update / update_status / bind / delete, so the
//! store's admission applies.

use std::collections::BTreeMap;

use placer_api::k8s::apimachinery::pkg::apis::meta::v1::LabelSelector as MetaSelector;
use placer_cluster::embedded::EmbeddedCluster;
use placer_cluster::{ClusterStore, Kind, Object, ObjectRef};
use serde_json::{json, Value};

use crate::admission;
use crate::apply::{self, Writer};
use crate::convert;
use crate::errors::{success, ApiError, ApiResult};
use crate::patch;
use crate::request::{Query, Target};
use crate::resources::{self, Resource};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::state::{Inner, Shared};
use crate::table::{self, IncludeObject};

/// Largest request body accepted (kube-apiserver's limit).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// One request, as the verbs need it.
#[derive(Debug)]
pub struct Call<'a> {
    pub method: &'a str,
    pub target: &'a Target,
    pub query: &'a Query,
    pub content_type: &'a str,
    pub accept: &'a str,
    pub user_agent: &'a str,
    pub body: &'a [u8],
}

/// A JSON answer, with `Warning` headers.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub code: u16,
    pub body: Value,
    pub warnings: Vec<String>,
}

impl Reply {
    fn ok(code: u16, body: Value) -> Reply {
        Reply { code, body, warnings: Vec::new() }
    }
}

/// Runs a non-watch request.
pub fn call(shared: &Shared, c: &Call<'_>) -> ApiResult<Reply> {
    let r = c.target.resource();
    match (c.method, c.target) {
        ("GET", Target::Collection { namespace, .. }) => list(shared, r, namespace.as_deref(), c),
        ("GET", Target::Object { .. }) if sub_is(c.target, &[None, Some("status")]) => get(shared, r, c),
        ("POST", Target::Collection { namespace, .. }) => create(shared, r, namespace.as_deref(), c),
        ("POST", Target::Object { subresource: Some(s), namespace, name, .. }) if s == "binding" => {
            bind(shared, namespace.as_deref().unwrap_or(""), name, c)
        }
        ("POST", Target::Object { subresource: Some(s), namespace, name, .. }) if s == "eviction" => {
            evict(shared, namespace.as_deref().unwrap_or(""), name, c)
        }
        ("PUT", Target::Object { .. }) if sub_is(c.target, &[None, Some("status"), Some("finalize")]) => {
            update(shared, r, c)
        }
        ("PATCH", Target::Object { .. }) if sub_is(c.target, &[None, Some("status")]) => patch(shared, r, c),
        ("DELETE", Target::Object { subresource: None, .. }) => delete(shared, r, c),
        ("DELETE", Target::Collection { namespace, .. }) => {
            delete_collection(shared, r, namespace.as_deref(), c)
        }
        (m, _) => Err(ApiError::method_not_allowed(m)),
    }
}

fn sub_is(t: &Target, allowed: &[Option<&str>]) -> bool {
    match t {
        Target::Object { subresource, .. } => allowed.contains(&subresource.as_deref()),
        Target::Collection { .. } => false,
    }
}

fn object_ref(t: &Target) -> ObjectRef {
    match t {
        Target::Object { resource, namespace, name, .. } => {
            ObjectRef::new(resource.kind, namespace.clone().unwrap_or_default(), name.clone())
        }
        Target::Collection { resource, namespace } => {
            ObjectRef::new(resource.kind, namespace.clone().unwrap_or_default(), "")
        }
    }
}

/// The stored object as `r` serves it.
pub fn served(r: &Resource, obj: &Object) -> Value {
    convert::to_served(r, obj.to_json())
}

/// The field manager: `fieldManager`, else the user agent up to its first `/`.
fn manager(c: &Call<'_>) -> String {
    if let Some(m) = c.query.get("fieldManager") {
        return m.chars().take(128).collect();
    }
    let ua = c.user_agent.split('/').next().unwrap_or("").trim();
    if ua.is_empty() {
        "unknown".to_string()
    } else {
        ua.chars().take(128).collect()
    }
}

fn now_rfc3339(store: &EmbeddedCluster) -> String {
    let t = store.now().0;
    placer_api::k8s::jiff::Timestamp::from_second(t.as_second()).map(|t| t.to_string()).unwrap_or_default()
}

/// JSON or YAML body.
pub fn decode_body(content_type: &str, body: &[u8]) -> ApiResult<Value> {
    let media = content_type.split(';').next().unwrap_or("").trim();
    if body.is_empty() {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    if media == "application/vnd.kubernetes.protobuf" {
        return crate::protobuf::decode(body).map_err(|why| {
            let mut e = ApiError::unsupported_media_type(media);
            e.message = why;
            e
        });
    }
    if media.contains("protobuf") || media.contains("cbor") {
        return Err(ApiError::unsupported_media_type(media));
    }
    let yaml = media.ends_with("yaml");
    if yaml {
        let text = std::str::from_utf8(body)
            .map_err(|e| ApiError::bad_request(format!("the body is not UTF-8: {e}")))?;
        serde_saphyr::from_str::<Value>(text)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding JSON body: {e}")))
    }
}

/// Reads a written object of `r`: apiVersion / kind filled or checked, converted to the
/// stored form, typed. Unknown fields are an error with `fieldValidation=Strict` and a
/// warning otherwise (unless `Ignore`).
fn decode_object(r: &Resource, mut value: Value, c: &Call<'_>) -> ApiResult<(Object, Vec<String>)> {
    let Value::Object(fields) = &mut value else {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    };
    let api_version = r.api_version();
    for (key, want) in [("apiVersion", api_version.as_str()), ("kind", r.kind_name)] {
        match fields.get(key) {
            None | Some(Value::Null) => {
                fields.insert(key.to_string(), json!(want));
            }
            Some(Value::String(s)) if s == want || s.is_empty() => {
                fields.insert(key.to_string(), json!(want));
            }
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({}) does not match the expected API version ({api_version}) or kind {}",
                    other.as_str().unwrap_or("?"),
                    r.kind_name
                )))
            }
        }
    }
    let stored = convert::to_stored(r, value);
    let obj = Object::from_json(r.kind, stored.clone())
        .map_err(|e| ApiError::bad_request(format!("error decoding the {} object: {e}", r.kind_name)))?;
    let unknown = unknown_fields(&stored, &obj.to_json());
    let mut warnings = Vec::new();
    if !unknown.is_empty() {
        match c.query.get("fieldValidation") {
            Some("Strict") => {
                let list: Vec<String> = unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect();
                return Err(ApiError::bad_request(format!("strict decoding error: {}", list.join(", "))));
            }
            Some("Ignore") => {}
            _ => warnings.extend(unknown.iter().map(|f| format!("unknown field \"{f}\""))),
        }
    }
    Ok((obj, warnings))
}

/// Fields of `input` that the typed object dropped (k8s-openapi ignores unknown fields).
fn unknown_fields(input: &Value, typed: &Value) -> Vec<String> {
    fn go(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
        match (a, b) {
            (Value::Object(am), Value::Object(bm)) => {
                for (k, av) in am {
                    let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                    match bm.get(k) {
                        None if !(av.is_null() || (path == "metadata" && k == "creationTimestamp")) => {
                            out.push(p)
                        }
                        None => {}
                        Some(bv) => go(av, bv, &p, out),
                    }
                }
            }
            (Value::Array(aa), Value::Array(ba)) => {
                for (i, (av, bv)) in aa.iter().zip(ba).enumerate() {
                    go(av, bv, &format!("{path}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    go(input, typed, "", &mut out);
    out
}

fn get(shared: &Shared, r: &'static Resource, c: &Call<'_>) -> ApiResult<Reply> {
    let target = object_ref(c.target);
    let inner = shared.lock();
    let obj = inner.store.get(&target).ok_or_else(|| ApiError::not_found(r, &target.name))?;
    if let Some(version) = table::wants_table(c.accept) {
        let include = IncludeObject::parse(c.query.get("includeObject"));
        let meta = json!({"resourceVersion": inner.store.resource_version().to_string()});
        let t = table::table(
            r.kind,
            std::slice::from_ref(&obj),
            |o| served(r, o),
            inner.store.now().0,
            version,
            include,
            meta,
        );
        return Ok(Reply::ok(200, t));
    }
    let body = served(r, &obj);
    if table::wants_metadata(c.accept) {
        return Ok(Reply::ok(200, table::partial_metadata(&body, "v1")));
    }
    Ok(Reply::ok(200, body))
}

/// A `continue` token: the list's resourceVersion and the last key returned.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ContinueToken {
    rv: u64,
    after: String,
}

impl ContinueToken {
    fn encode(&self) -> String {
        base64_encode(
            json!({"v": "meta.k8s.io/v1", "rv": self.rv, "start": self.after}).to_string().as_bytes(),
        )
    }

    fn decode(s: &str) -> ApiResult<ContinueToken> {
        let bad = || {
            ApiError::bad_request(
                "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            )
        };
        let bytes = base64_decode(s).ok_or_else(bad)?;
        let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
        Ok(ContinueToken {
            rv: v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?,
            after: v.get("start").and_then(Value::as_str).ok_or_else(bad)?.to_string(),
        })
    }
}

fn key_of(o: &Object) -> String {
    let r = o.object_ref();
    if r.namespace.is_empty() {
        r.name
    } else {
        format!("{}/{}", r.namespace, r.name)
    }
}

/// Objects of `r` in `namespace` (all when `None`) that match the request's selectors.
pub fn select(
    store: &EmbeddedCluster,
    r: &Resource,
    namespace: Option<&str>,
    query: &Query,
) -> ApiResult<Vec<Object>> {
    let labels = LabelSelector::parse(query.get("labelSelector").unwrap_or(""))?;
    let fields = FieldSelector::parse(
        query.get("fieldSelector").unwrap_or(""),
        r.kind,
        r.conversion == resources::Conversion::EventsV1,
    )?;
    let mut out = store.list(r.kind);
    out.retain(|o| {
        let in_ns = namespace.is_none_or(|ns| o.metadata().namespace.as_deref() == Some(ns));
        in_ns
            && labels.matches(o.metadata().labels.as_ref())
            && (fields.is_empty() || fields.matches(r.kind, &o.to_json()))
    });
    Ok(out)
}

fn list(shared: &Shared, r: &'static Resource, namespace: Option<&str>, c: &Call<'_>) -> ApiResult<Reply> {
    let limit = c.query.number("limit")?.filter(|l| *l > 0);
    let token = c.query.get("continue").map(ContinueToken::decode).transpose()?;
    let inner = shared.lock();
    let rv = inner.store.resource_version();
    if let Some(t) = &token {
        if t.rv < inner.store.log_floor() {
            return Err(ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."));
        }
    }
    let mut objects = select(&inner.store, r, namespace, c.query)?;
    if let Some(t) = &token {
        objects.retain(|o| key_of(o) > t.after);
    }
    let list_rv = token.as_ref().map_or(rv, |t| t.rv);
    let mut meta = json!({"resourceVersion": list_rv.to_string()});
    if let Some(limit) = limit {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        if objects.len() > limit {
            let remaining = objects.len() - limit;
            objects.truncate(limit);
            let after = objects.last().map(key_of).unwrap_or_default();
            meta["continue"] = json!(ContinueToken { rv: list_rv, after }.encode());
            meta["remainingItemCount"] = json!(remaining);
        }
    }
    if let Some(version) = table::wants_table(c.accept) {
        let include = IncludeObject::parse(c.query.get("includeObject"));
        let t = table::table(r.kind, &objects, |o| served(r, o), inner.store.now().0, version, include, meta);
        return Ok(Reply::ok(200, t));
    }
    if table::wants_metadata(c.accept) {
        let items: Vec<Value> =
            objects.iter().map(|o| table::partial_metadata(&served(r, o), "v1")).collect();
        return Ok(Reply::ok(
            200,
            json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "items": items}),
        ));
    }
    let items: Vec<Value> = objects.iter().map(|o| served(r, o)).collect();
    Ok(Reply::ok(
        200,
        json!({"kind": format!("{}List", r.kind_name), "apiVersion": r.api_version(), "metadata": meta, "items": items}),
    ))
}

/// Sets the path's namespace on a written object (400 when the body names another).
fn place(r: &Resource, value: &mut Value, namespace: Option<&str>, name: Option<&str>) -> ApiResult<()> {
    let meta =
        value.as_object_mut().ok_or_else(|| ApiError::bad_request("the body must be a JSON object"))?;
    let meta = meta.entry("metadata").or_insert_with(|| json!({}));
    let meta = meta.as_object_mut().ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
    if r.namespaced() {
        let ns = namespace.unwrap_or("default");
        match meta.get("namespace").and_then(Value::as_str) {
            Some(given) if !given.is_empty() && given != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ))
            }
            _ => {
                meta.insert("namespace".into(), json!(ns));
            }
        }
    } else {
        meta.remove("namespace");
    }
    if let Some(name) = name {
        match meta.get("name").and_then(Value::as_str) {
            Some(given) if given != name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({given}) does not match the name on the URL ({name})"
                )))
            }
            _ => {
                meta.insert("name".into(), json!(name));
            }
        }
    }
    Ok(())
}

/// Creates `obj` (typed, prepared) with its managedFields; shared by POST and apply.
fn store_create(
    inner: &mut Inner,
    r: &'static Resource,
    mut obj: Object,
    manager_json: Option<Value>,
    c: &Call<'_>,
) -> ApiResult<Object> {
    let ns = obj.object_ref().namespace;
    admission::check_namespace(&inner.store, r.kind, &ns)?;
    admission::prepare_create(&inner.store, &mut obj)?;
    let time = now_rfc3339(&inner.store);
    let api_version = r.api_version();
    let mut json = obj.to_json();
    match manager_json {
        // An apply: its managedFields are already computed.
        Some(fields) => {
            if let Some(m) = json.get_mut("metadata").and_then(Value::as_object_mut) {
                m.insert("managedFields".into(), fields);
            }
        }
        None => {
            if let Some(m) = json.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("managedFields");
            }
            let mgr = manager(c);
            apply::record_update(
                None,
                &mut json,
                &Writer { manager: &mgr, api_version: &api_version, time: &time },
            );
        }
    }
    let obj = Object::from_json(r.kind, json).map_err(|e| ApiError::internal(e.to_string()))?;
    if c.query.dry_run() {
        return Ok(obj);
    }
    inner.store.create(obj).map_err(ApiError::from_store)
}

fn create(shared: &Shared, r: &'static Resource, namespace: Option<&str>, c: &Call<'_>) -> ApiResult<Reply> {
    let mut value = decode_body(c.content_type, c.body)?;
    place(r, &mut value, namespace, None)?;
    let (obj, warnings) = decode_object(r, value, c)?;
    let created = shared.write(|inner| store_create(inner, r, obj, None, c))?;
    Ok(Reply { code: 201, body: served(r, &created), warnings })
}

fn update(shared: &Shared, r: &'static Resource, c: &Call<'_>) -> ApiResult<Reply> {
    let Target::Object { namespace, name, subresource, .. } = c.target else { unreachable!() };
    let mut value = decode_body(c.content_type, c.body)?;
    place(r, &mut value, namespace.as_deref(), Some(name))?;
    let (mut obj, warnings) = decode_object(r, value, c)?;
    let target = object_ref(c.target);
    let updated = shared.write(|inner| -> ApiResult<Object> {
        let old = inner.store.get(&target).ok_or_else(|| ApiError::not_found(r, name))?;
        if subresource.as_deref() == Some("status") {
            if c.query.dry_run() {
                return Ok(obj);
            }
            return inner.store.update_status(obj).map_err(ApiError::from_store);
        }
        admission::prepare_update(&mut obj);
        let obj = with_update_fields(&inner.store, r, &old, obj, c)?;
        if c.query.dry_run() {
            return Ok(obj);
        }
        inner.store.update(obj).map_err(ApiError::from_store)
    })?;
    Ok(Reply { code: 200, body: served(r, &updated), warnings })
}

/// `new` with managedFields recording this non-apply write over `old`.
fn with_update_fields(
    store: &EmbeddedCluster,
    r: &Resource,
    old: &Object,
    new: Object,
    c: &Call<'_>,
) -> ApiResult<Object> {
    let time = now_rfc3339(store);
    let api_version = r.api_version();
    let mgr = manager(c);
    let mut json = new.to_json();
    apply::record_update(
        Some(&old.to_json()),
        &mut json,
        &Writer { manager: &mgr, api_version: &api_version, time: &time },
    );
    Object::from_json(r.kind, json).map_err(|e| ApiError::internal(e.to_string()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

fn patch_type(content_type: &str) -> ApiResult<PatchType> {
    match content_type.split(';').next().unwrap_or("").trim() {
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
        "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchType::Apply),
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

fn patch_error(r: &Resource, name: &str, e: patch::PatchError) -> ApiError {
    if e.bad_request {
        ApiError::bad_request(e.message)
    } else {
        ApiError::invalid(r, name, &[(String::new(), e.message)])
    }
}

fn patch(shared: &Shared, r: &'static Resource, c: &Call<'_>) -> ApiResult<Reply> {
    let Target::Object { namespace, name, subresource, .. } = c.target else { unreachable!() };
    let kind = patch_type(c.content_type)?;
    let body =
        decode_body(if kind == PatchType::Apply { "application/yaml" } else { "application/json" }, c.body)?;
    let target = object_ref(c.target);
    let status = subresource.as_deref() == Some("status");
    let force = c.query.flag("force");
    if kind == PatchType::Apply && c.query.get("fieldManager").is_none() {
        return Err(ApiError::bad_request(
            "PATCH requests of type application/apply-patch+yaml must specify a field manager (fieldManager)",
        ));
    }
    let mgr = manager(c);
    let api_version = r.api_version();
    let (code, obj, warnings) = shared.write(|inner| -> ApiResult<(u16, Object, Vec<String>)> {
        let time = now_rfc3339(&inner.store);
        let writer = Writer { manager: &mgr, api_version: &api_version, time: &time };
        let Some(old) = inner.store.get(&target) else {
            if kind != PatchType::Apply || status {
                return Err(ApiError::not_found(r, name));
            }
            // Apply creates what does not exist.
            let mut config = body.clone();
            place(r, &mut config, namespace.as_deref(), Some(name))?;
            let (typed, warnings) = decode_object(r, config.clone(), c)?;
            let config_stored = convert::to_stored(r, typed.to_json());
            let new = apply::apply(None, &config_stored, &writer, force)
                .map_err(|e| conflict_error(r, name, &e))?;
            let fields = new.get("metadata").and_then(|m| m.get("managedFields")).cloned();
            let created = store_create(inner, r, typed, fields, c)?;
            return Ok((201, created, warnings));
        };
        let old_json = old.to_json();
        let mut doc = convert::to_served(r, old_json.clone());
        let mut warnings = Vec::new();
        match kind {
            PatchType::Json => patch::json_patch(&mut doc, &body).map_err(|e| patch_error(r, name, e))?,
            PatchType::Merge => {
                if !body.is_object() {
                    return Err(ApiError::bad_request("a merge patch must be a JSON object"));
                }
                patch::merge_patch(&mut doc, &body)
            }
            PatchType::Strategic => {
                patch::strategic_merge(&mut doc, &body).map_err(|e| patch_error(r, name, e))?
            }
            PatchType::Apply => {
                let mut config = body.clone();
                place(r, &mut config, namespace.as_deref(), Some(name))?;
                let (typed, w) = decode_object(r, config.clone(), c)?;
                warnings = w;
                // Apply the configuration as written (typed decoding fills defaults the
                // configuration did not set; only the given fields are applied).
                let config_stored = convert::to_stored(r, config);
                let _ = typed;
                doc = apply::apply(Some(&old_json), &config_stored, &writer, force)
                    .map_err(|e| conflict_error(r, name, &e))?;
                doc = convert::to_served(r, doc);
            }
        }
        // Identity cannot change through a patch.
        for (field, want) in
            [("name", old.metadata().name.clone()), ("namespace", old.metadata().namespace.clone())]
        {
            let got =
                doc.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str).map(str::to_string);
            if got != want {
                return Err(ApiError::invalid(
                    r,
                    name,
                    &[(format!("metadata.{field}"), "Invalid value: field is immutable".into())],
                ));
            }
        }
        let stored = convert::to_stored(r, doc);
        let mut new = Object::from_json(r.kind, stored).map_err(|e| {
            ApiError::invalid(
                r,
                name,
                &[(String::new(), format!("the patched object cannot be decoded: {e}"))],
            )
        })?;
        if status {
            if c.query.dry_run() {
                return Ok((200, new, warnings));
            }
            let out = inner.store.update_status(new).map_err(ApiError::from_store)?;
            return Ok((200, out, warnings));
        }
        admission::prepare_update(&mut new);
        let new =
            if kind == PatchType::Apply { new } else { with_update_fields(&inner.store, r, &old, new, c)? };
        if c.query.dry_run() {
            return Ok((200, new, warnings));
        }
        let out = inner.store.update(new).map_err(ApiError::from_store)?;
        Ok((200, out, warnings))
    })?;
    Ok(Reply { code, body: served(r, &obj), warnings })
}

fn conflict_error(r: &Resource, name: &str, e: &apply::Conflicts) -> ApiError {
    let mut err = ApiError::new(409, "Conflict", e.message());
    let mut details = json!({"name": name, "kind": r.plural, "causes": e.causes()});
    if !r.group.is_empty() {
        details["group"] = json!(r.group);
    }
    err.details = Some(details);
    err
}

/// `DeleteOptions` from the body or the query.
#[derive(Debug, Default)]
struct DeleteOptions {
    propagation: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    dry_run: bool,
}

fn delete_options(c: &Call<'_>) -> ApiResult<DeleteOptions> {
    let body = if c.body.is_empty() { json!({}) } else { decode_body(c.content_type, c.body)? };
    let pre = body.get("preconditions");
    let text = |v: Option<&Value>| v.and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    let dry_run_body =
        body.get("dryRun").and_then(Value::as_array).is_some_and(|a| a.iter().any(|v| v == "All"));
    Ok(DeleteOptions {
        propagation: text(body.get("propagationPolicy"))
            .or_else(|| c.query.get("propagationPolicy").map(str::to_string)),
        uid: text(pre.and_then(|p| p.get("uid"))),
        resource_version: text(pre.and_then(|p| p.get("resourceVersion"))),
        dry_run: dry_run_body || c.query.dry_run(),
    })
}

/// Deletes one object with preconditions and propagation; returns what was deleted.
fn delete_one(
    inner: &mut Inner,
    r: &Resource,
    target: &ObjectRef,
    opts: &DeleteOptions,
) -> ApiResult<Object> {
    let obj = inner.store.get(target).ok_or_else(|| ApiError::not_found(r, &target.name))?;
    let meta = obj.metadata();
    if let Some(uid) = &opts.uid {
        if meta.uid.as_ref() != Some(uid) {
            let why = format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta.uid.clone().unwrap_or_default()
            );
            return Err(ApiError::conflict(r, &target.name, &why));
        }
    }
    if let Some(rv) = &opts.resource_version {
        if meta.resource_version.as_ref() != Some(rv) {
            let why = format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                meta.resource_version.clone().unwrap_or_default()
            );
            return Err(ApiError::conflict(r, &target.name, &why));
        }
    }
    if opts.dry_run {
        return Ok(obj);
    }
    let uid = meta.uid.clone().unwrap_or_default();
    if target.kind == Kind::Namespace {
        // Terminating: the namespace controller (the controller thread) deletes what is in
        // it, then the namespace itself.
        let Object::Namespace(mut ns) = obj.clone() else { return Ok(obj) };
        ns.status.get_or_insert_with(Default::default).phase = Some("Terminating".into());
        ns.metadata.resource_version = None;
        let updated = inner.store.update_status(Object::Namespace(ns)).map_err(ApiError::from_store)?;
        return Ok(updated);
    }
    if opts.propagation.as_deref() == Some("Orphan") && !uid.is_empty() {
        orphan_dependents(&mut inner.store, &uid)?;
    }
    inner.store.delete(target).map_err(ApiError::from_store)?;
    Ok(obj)
}

/// Removes owner references to `uid` from every object (propagationPolicy Orphan).
fn orphan_dependents(store: &mut EmbeddedCluster, uid: &str) -> ApiResult<()> {
    for kind in Kind::ALL {
        for mut o in store.list(kind) {
            let Some(refs) = o.metadata().owner_references.clone() else { continue };
            if !refs.iter().any(|x| x.uid == uid) {
                continue;
            }
            let kept: Vec<_> = refs.into_iter().filter(|x| x.uid != uid).collect();
            o.metadata_mut().owner_references = if kept.is_empty() { None } else { Some(kept) };
            store.update(o).map_err(ApiError::from_store)?;
        }
    }
    Ok(())
}

/// Pods and namespaces answer a delete with the object (kube's `ReturnDeletedObject`);
/// other kinds with a success Status.
fn deleted_reply(
    r: &Resource,
    obj: &Object,
    now: &placer_api::k8s::apimachinery::pkg::apis::meta::v1::Time,
) -> Value {
    match r.kind {
        Kind::Pod | Kind::Namespace => {
            let mut o = obj.clone();
            o.metadata_mut().deletion_timestamp = Some(now.clone());
            o.metadata_mut().deletion_grace_period_seconds = Some(0);
            if let Object::Namespace(ns) = &mut o {
                ns.status.get_or_insert_with(Default::default).phase = Some("Terminating".into());
            }
            served(r, &o)
        }
        _ => {
            let meta = obj.metadata();
            let mut details = json!({"name": meta.name, "kind": r.plural, "uid": meta.uid});
            if !r.group.is_empty() {
                details["group"] = json!(r.group);
            }
            success(200, Some(details))
        }
    }
}

fn delete(shared: &Shared, r: &'static Resource, c: &Call<'_>) -> ApiResult<Reply> {
    let opts = delete_options(c)?;
    let target = object_ref(c.target);
    let (obj, now) =
        shared.write(|inner| delete_one(inner, r, &target, &opts).map(|o| (o, inner.store.now())))?;
    Ok(Reply::ok(200, deleted_reply(r, &obj, &now)))
}

fn delete_collection(
    shared: &Shared,
    r: &'static Resource,
    namespace: Option<&str>,
    c: &Call<'_>,
) -> ApiResult<Reply> {
    let opts = delete_options(c)?;
    let deleted = shared.write(|inner| -> ApiResult<Vec<Object>> {
        let targets = select(&inner.store, r, namespace, c.query)?;
        let mut out = Vec::new();
        for o in targets {
            match delete_one(inner, r, &o.object_ref(), &opts) {
                Ok(d) => out.push(d),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    })?;
    let items: Vec<Value> = deleted.iter().map(|o| served(r, o)).collect();
    Ok(Reply::ok(
        200,
        json!({"kind": format!("{}List", r.kind_name), "apiVersion": r.api_version(), "metadata": {}, "items": items}),
    ))
}

fn bind(shared: &Shared, namespace: &str, name: &str, c: &Call<'_>) -> ApiResult<Reply> {
    let pods = resources::for_kind(Kind::Pod);
    let body = decode_body(c.content_type, c.body)?;
    let target = body.get("target").cloned().unwrap_or(Value::Null);
    let node = target.get("name").and_then(Value::as_str).unwrap_or("").to_string();
    let kind = target.get("kind").and_then(Value::as_str).unwrap_or("");
    let binding = resources::Resource { kind_name: "Binding", ..*pods };
    if node.is_empty() {
        return Err(ApiError::invalid(&binding, name, &[("target.name".into(), "Required value".into())]));
    }
    if !kind.is_empty() && kind != "Node" {
        return Err(ApiError::invalid(
            &binding,
            name,
            &[("target.kind".into(), format!("Invalid value: {kind:?}: must be empty or 'Node'"))],
        ));
    }
    if let Some(n) = body.get("metadata").and_then(|m| m.get("name")).and_then(Value::as_str) {
        if n != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
    }
    let uid =
        body.get("metadata").and_then(|m| m.get("uid")).and_then(Value::as_str).unwrap_or("").to_string();
    let binding_res = resources::Resource { plural: "pods/binding", ..*pods };
    shared.write(|inner| -> ApiResult<()> {
        let r = ObjectRef::new(Kind::Pod, namespace, name);
        let Some(Object::Pod(pod)) = inner.store.get(&r) else { return Err(ApiError::not_found(pods, name)) };
        if pod.metadata.deletion_timestamp.is_some() {
            return Err(ApiError::conflict(
                &binding_res,
                name,
                &format!("pod {name} is being deleted, cannot be assigned to a host"),
            ));
        }
        if !uid.is_empty() && pod.metadata.uid.as_deref() != Some(uid.as_str()) {
            let why = format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                pod.metadata.uid.clone().unwrap_or_default()
            );
            return Err(ApiError::conflict(&binding_res, name, &why));
        }
        if let Some(bound) = pod.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty()) {
            return Err(ApiError::conflict(
                &binding_res,
                name,
                &format!("pod {name} is already assigned to node \"{bound}\""),
            ));
        }
        inner.store.bind(namespace, name, &uid, &node).map_err(ApiError::from_store)?;
        tracing::debug!(pod = %format!("{namespace}/{name}"), uid = pod.metadata.uid.as_deref().unwrap_or(""), %node, "pod bound");
        Ok(())
    })?;
    Ok(Reply::ok(201, success(201, None)))
}

/// `metav1.LabelSelector` against labels.
pub fn selector_matches(s: &MetaSelector, labels: Option<&BTreeMap<String, String>>) -> bool {
    let get = |k: &str| labels.and_then(|l| l.get(k));
    s.match_labels.iter().flatten().all(|(k, v)| get(k) == Some(v))
        && s.match_expressions.iter().flatten().all(|e| {
            let values = e.values.clone().unwrap_or_default();
            match e.operator.as_str() {
                "In" => get(&e.key).is_some_and(|v| values.contains(v)),
                "NotIn" => get(&e.key).is_none_or(|v| !values.contains(v)),
                "Exists" => get(&e.key).is_some(),
                "DoesNotExist" => get(&e.key).is_none(),
                _ => false,
            }
        })
}

fn evict(shared: &Shared, namespace: &str, name: &str, c: &Call<'_>) -> ApiResult<Reply> {
    let pods = resources::for_kind(Kind::Pod);
    let body = if c.body.is_empty() { json!({}) } else { decode_body(c.content_type, c.body)? };
    if let Some(n) = body.get("metadata").and_then(|m| m.get("name")).and_then(Value::as_str) {
        if n != name {
            return Err(ApiError::bad_request("name in URL does not match name in Eviction object"));
        }
    }
    shared.write(|inner| -> ApiResult<()> {
        let r = ObjectRef::new(Kind::Pod, namespace, name);
        let Some(Object::Pod(pod)) = inner.store.get(&r) else { return Err(ApiError::not_found(pods, name)) };
        let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        let ignore_budget = matches!(phase.as_str(), "Succeeded" | "Failed" | "Pending") || pod.metadata.deletion_timestamp.is_some();
        if !ignore_budget {
            let budgets: Vec<Object> = inner
                .store
                .list(Kind::PodDisruptionBudget)
                .into_iter()
                .filter(|o| match o {
                    Object::PodDisruptionBudget(p) => {
                        p.metadata.namespace.as_deref() == Some(namespace)
                            && p.spec.as_ref().and_then(|s| s.selector.as_ref()).is_some_and(|s| selector_matches(s, pod.metadata.labels.as_ref()))
                    }
                    _ => false,
                })
                .collect();
            if budgets.len() > 1 {
                return Err(ApiError::internal("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."));
            }
            if let Some(Object::PodDisruptionBudget(mut pdb)) = budgets.into_iter().next() {
                let status = pdb.status.clone().unwrap_or_default();
                if status.disruptions_allowed.unwrap_or(0) <= 0 {
                    let mut e = ApiError::new(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.");
                    e.details = Some(json!({"causes": [{"reason": "DisruptionBudget", "message": format!(
                        "The disruption budget {} needs {} healthy pods and has {} currently",
                        pdb.metadata.name.clone().unwrap_or_default(), status.desired_healthy.unwrap_or(0), status.current_healthy.unwrap_or(0))}]}));
                    return Err(e);
                }
                let s = pdb.status.get_or_insert_with(Default::default);
                s.disruptions_allowed = Some(s.disruptions_allowed.unwrap_or(0) - 1);
                pdb.metadata.resource_version = None;
                inner.store.update_status(Object::PodDisruptionBudget(pdb)).map_err(ApiError::from_store)?;
            }
        }
        inner.store.delete(&r).map_err(ApiError::from_store)
    })?;
    Ok(Reply::ok(201, success(201, None)))
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter(|c| *c != b'=') {
        let c = match c {
            b'+' => b'-',
            b'/' => b'_',
            c => c,
        };
        let v = B64.iter().position(|x| *x == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let t = ContinueToken { rv: 42, after: "demo/train-7".into() };
        assert_eq!(ContinueToken::decode(&t.encode()).unwrap(), t);
        assert!(ContinueToken::decode("!!").is_err());
        for s in ["", "a", "ab", "abc", "abcd"] {
            assert_eq!(base64_decode(&base64_encode(s.as_bytes())).unwrap(), s.as_bytes());
        }
    }

    #[test]
    fn unknown_fields_are_found() {
        let input = json!({"metadata": {"name": "p", "bogus": 1}, "spec": {"containers": [{"name": "c", "imagee": "x"}]}, "extra": null});
        let typed = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
        assert_eq!(unknown_fields(&input, &typed), ["metadata.bogus", "spec.containers[0].imagee"]);
    }
}
