//! A small stand-in for the Kubernetes API over HTTP, for tests and measurements of
//! `placer serve` until the end-to-end bed (`placer cluster`) lands: objects in memory,
//! list and watch (JSON lines), get, create, replace (also `/status`), merge patch,
//! delete, the pod `binding` subresource, events; a fixed latency injected before every
//! answer; every request recorded (method, path) so tests can compare the API calls with
//! the RBAC rules.
//!
//! It answers what `placer serve` asks, not the whole API: no field or label selectors, no
//! admission, no resourceVersion conflicts except for `PUT` with a stale version.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::sync::broadcast;

/// One recorded request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub watch: bool,
}

#[derive(Default)]
struct Inner {
    /// Collection path (e.g. `/api/v1/pods`, `/apis/scheduling.k8s.io/v1alpha2/podgroups`)
    /// → objects by `namespace/name`.
    objects: BTreeMap<String, BTreeMap<String, Value>>,
    rv: u64,
    requests: Vec<Request>,
    /// Binding requests: (received, answered).
    bindings: Vec<(Instant, Instant)>,
}

/// The server's state; clone to inspect it while it runs.
#[derive(Clone)]
pub struct FakeApi {
    inner: Arc<Mutex<Inner>>,
    latency: Duration,
    events: broadcast::Sender<(String, Value)>,
}

/// `(group path prefix, resource)` of a kind Placer reads, e.g. `("/api/v1", "pods")`.
fn collection_of(kind: &str) -> (&'static str, &'static str) {
    match kind {
        "Node" => ("/api/v1", "nodes"),
        "Pod" => ("/api/v1", "pods"),
        "PodGroup" => ("/apis/scheduling.k8s.io/v1alpha2", "podgroups"),
        "Workload" => ("/apis/scheduling.k8s.io/v1alpha2", "workloads"),
        "PriorityClass" => ("/apis/scheduling.k8s.io/v1", "priorityclasses"),
        "PodDisruptionBudget" => ("/apis/policy/v1", "poddisruptionbudgets"),
        "Job" => ("/apis/batch/v1", "jobs"),
        "Event" => ("/apis/events.k8s.io/v1", "events"),
        "Lease" => ("/apis/coordination.k8s.io/v1", "leases"),
        "Namespace" => ("/api/v1", "namespaces"),
        "DeviceClass" => ("/apis/resource.k8s.io/v1", "deviceclasses"),
        "ResourceSlice" => ("/apis/resource.k8s.io/v1", "resourceslices"),
        "ResourceClaim" => ("/apis/resource.k8s.io/v1", "resourceclaims"),
        "ResourceClaimTemplate" => ("/apis/resource.k8s.io/v1", "resourceclaimtemplates"),
        "PersistentVolumeClaim" => ("/api/v1", "persistentvolumeclaims"),
        "PersistentVolume" => ("/api/v1", "persistentvolumes"),
        "StorageClass" => ("/apis/storage.k8s.io/v1", "storageclasses"),
        "CSINode" => ("/apis/storage.k8s.io/v1", "csinodes"),
        "CSIDriver" => ("/apis/storage.k8s.io/v1", "csidrivers"),
        "CSIStorageCapacity" => ("/apis/storage.k8s.io/v1", "csistoragecapacities"),
        "VolumeAttachment" => ("/apis/storage.k8s.io/v1", "volumeattachments"),
        other => panic!("fake API: no collection for kind {other}"),
    }
}

/// A parsed request path.
#[derive(Debug)]
struct Target {
    /// `/api/v1/pods` style: group prefix + resource, namespace-free.
    collection: String,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

fn parse(path: &str) -> Option<Target> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (prefix, rest) = match *parts.first()? {
        "api" => (format!("/api/{}", parts.get(1)?), &parts[2..]),
        "apis" => (format!("/apis/{}/{}", parts.get(1)?, parts.get(2)?), &parts[3..]),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (Some(ns.to_string()), tail),
        other => (None, other),
    };
    let resource = rest.first()?;
    Some(Target {
        collection: format!("{prefix}/{resource}"),
        namespace,
        name: rest.get(1).map(|s| s.to_string()),
        subresource: rest.get(2).map(|s| s.to_string()),
    })
}

fn key(ns: Option<&str>, name: &str) -> String {
    format!("{}/{name}", ns.unwrap_or(""))
}

fn json_with(code: StatusCode, v: Value) -> Response {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(&v).unwrap_or_default()))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn json_ok(v: Value) -> Response {
    json_with(StatusCode::OK, v)
}

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                      "status": if code < 300 { "Success" } else { "Failure" },
                      "reason": reason, "message": message, "code": code});
    json_with(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), body)
}

impl FakeApi {
    pub fn new(latency: Duration) -> FakeApi {
        let (events, _) = broadcast::channel(1 << 16);
        FakeApi { inner: Arc::default(), latency, events }
    }

    /// Adds an object (JSON with apiVersion, kind, metadata).
    pub fn add(&self, mut obj: Value) {
        let kind = obj["kind"].as_str().unwrap_or_default().to_string();
        let (prefix, resource) = collection_of(&kind);
        let mut inner = self.inner.lock().unwrap();
        inner.rv += 1;
        let rv = inner.rv;
        let meta = &mut obj["metadata"];
        meta["resourceVersion"] = json!(rv.to_string());
        if meta.get("uid").is_none() {
            meta["uid"] = json!(format!("uid-{rv}"));
        }
        meta["generation"] = json!(1);
        let k = key(meta["namespace"].as_str(), meta["name"].as_str().unwrap_or_default());
        let collection = format!("{prefix}/{resource}");
        inner.objects.entry(collection.clone()).or_default().insert(k, obj.clone());
        drop(inner);
        let _ = self.events.send((collection, json!({"type": "ADDED", "object": obj})));
    }

    /// Replaces a stored object (as another client's update would, e.g. the node
    /// lifecycle controller's) and tells the watchers.
    pub fn update(&self, obj: Value) {
        let (prefix, resource) = collection_of(obj["kind"].as_str().unwrap_or_default());
        let k =
            key(obj["metadata"]["namespace"].as_str(), obj["metadata"]["name"].as_str().unwrap_or_default());
        self.store(&format!("{prefix}/{resource}"), k, obj, "MODIFIED");
    }

    /// Deletes a stored object (as another client would, e.g. the taint manager evicting a
    /// pod) and tells the watchers; the object deleted, if there was one.
    pub fn remove(&self, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let (prefix, resource) = collection_of(kind);
        let collection = format!("{prefix}/{resource}");
        let removed = self
            .inner
            .lock()
            .unwrap()
            .objects
            .get_mut(&collection)
            .and_then(|m| m.remove(&key(namespace, name)));
        if let Some(o) = &removed {
            let _ = self.events.send((collection, json!({"type": "DELETED", "object": o.clone()})));
        }
        removed
    }

    /// Serves on 127.0.0.1 (port 0: any) until the returned handle is dropped or aborted.
    pub async fn serve(&self, port: u16) -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("a local port");
        let addr = listener.local_addr().expect("an address");
        let app = axum::Router::new().fallback(handle).with_state(self.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (addr, task)
    }

    pub fn requests(&self) -> Vec<Request> {
        self.inner.lock().unwrap().requests.clone()
    }

    pub fn bindings(&self) -> Vec<(Instant, Instant)> {
        self.inner.lock().unwrap().bindings.clone()
    }

    pub fn object(&self, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let (prefix, resource) = collection_of(kind);
        let inner = self.inner.lock().unwrap();
        inner.objects.get(&format!("{prefix}/{resource}"))?.get(&key(Some(namespace), name)).cloned()
    }

    /// Objects of a kind.
    pub fn list(&self, kind: &str) -> Vec<Value> {
        let (prefix, resource) = collection_of(kind);
        let inner = self.inner.lock().unwrap();
        inner
            .objects
            .get(&format!("{prefix}/{resource}"))
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Stores `obj` under `collection` with a new resourceVersion and tells the watchers.
    fn store(&self, collection: &str, k: String, mut obj: Value, event: &str) -> Value {
        let mut inner = self.inner.lock().unwrap();
        inner.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(inner.rv.to_string());
        inner.objects.entry(collection.to_string()).or_default().insert(k, obj.clone());
        drop(inner);
        let _ = self.events.send((collection.to_string(), json!({"type": event, "object": obj.clone()})));
        obj
    }
}

fn query_has(uri: &Uri, key: &str) -> bool {
    uri.query().is_some_and(|q| q.split('&').any(|kv| kv == key || kv.starts_with(&format!("{key}="))))
}

async fn handle(State(api): State<FakeApi>, method: Method, uri: Uri, body: Bytes) -> Response {
    let watch = query_has(&uri, "watch")
        && uri.query().is_some_and(|q| q.contains("watch=true") || q.contains("watch=1"));
    api.inner.lock().unwrap().requests.push(Request {
        method: method.to_string(),
        path: uri.path().to_string(),
        watch,
    });
    let received = Instant::now();
    if !api.latency.is_zero() {
        tokio::time::sleep(api.latency).await;
    }
    let Some(t) = parse(uri.path()) else { return status(404, "NotFound", "no such path") };
    let body: Value =
        if body.is_empty() { Value::Null } else { serde_json::from_slice(&body).unwrap_or(Value::Null) };

    match (method.clone(), t.name.as_deref(), t.subresource.as_deref()) {
        (Method::GET, None, None) if watch => watch_stream(&api, t),
        (Method::GET, None, None) => {
            let inner = api.inner.lock().unwrap();
            let items: Vec<Value> = inner
                .objects
                .get(&t.collection)
                .map(|m| {
                    m.values()
                        .filter(|o| {
                            t.namespace.is_none()
                                || o["metadata"]["namespace"].as_str() == t.namespace.as_deref()
                        })
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            let rv = inner.rv.to_string();
            json_ok(
                json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": rv}, "items": items}),
            )
        }
        (Method::GET, Some(name), None) => {
            let inner = api.inner.lock().unwrap();
            match inner.objects.get(&t.collection).and_then(|m| m.get(&key(t.namespace.as_deref(), name))) {
                Some(o) => json_ok(o.clone()),
                None => status(404, "NotFound", &format!("{name} not found")),
            }
        }
        (Method::POST, Some(name), Some("binding")) => {
            let k = key(t.namespace.as_deref(), name);
            let pod = api.inner.lock().unwrap().objects.get(&t.collection).and_then(|m| m.get(&k)).cloned();
            let Some(mut pod) = pod else {
                return status(404, "NotFound", &format!("pods \"{name}\" not found"));
            };
            if pod["spec"]["nodeName"].as_str().is_some() {
                return status(409, "Conflict", &format!("pod {name} is already assigned to a node"));
            }
            let uid = body["metadata"]["uid"].as_str();
            if uid.is_some() && uid != pod["metadata"]["uid"].as_str() {
                return status(409, "Conflict", "Precondition failed: UID in precondition does not match");
            }
            pod["spec"]["nodeName"] = body["target"]["name"].clone();
            api.store(&t.collection, k, pod, "MODIFIED");
            api.inner.lock().unwrap().bindings.push((received, Instant::now()));
            status(201, "", "")
        }
        (Method::PUT, Some(name), sub) => {
            let k = key(t.namespace.as_deref(), name);
            let current =
                api.inner.lock().unwrap().objects.get(&t.collection).and_then(|m| m.get(&k)).cloned();
            let Some(current) = current else { return status(404, "NotFound", &format!("{name} not found")) };
            if body["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"] {
                return status(409, "Conflict", "the object has been modified; please apply your changes to the latest version and try again");
            }
            let mut next = current.clone();
            if sub == Some("status") {
                next["status"] = body["status"].clone();
            } else {
                next = body;
            }
            json_ok(api.store(&t.collection, k, next, "MODIFIED"))
        }
        (Method::PATCH, Some(name), _) => {
            let k = key(t.namespace.as_deref(), name);
            let current =
                api.inner.lock().unwrap().objects.get(&t.collection).and_then(|m| m.get(&k)).cloned();
            let Some(mut current) = current else {
                return status(404, "NotFound", &format!("{name} not found"));
            };
            merge(&mut current, &body);
            json_ok(api.store(&t.collection, k, current, "MODIFIED"))
        }
        (Method::POST, None, None) => {
            let mut obj = body;
            let name = match obj["metadata"]["name"].as_str() {
                Some(n) => n.to_string(),
                None => {
                    let prefix = obj["metadata"]["generateName"].as_str().unwrap_or("obj-").to_string();
                    let n = format!("{prefix}{}", api.inner.lock().unwrap().rv + 1);
                    obj["metadata"]["name"] = json!(n.clone());
                    n
                }
            };
            if let Some(ns) = &t.namespace {
                obj["metadata"]["namespace"] = json!(ns);
            }
            let k = key(t.namespace.as_deref(), &name);
            if api.inner.lock().unwrap().objects.get(&t.collection).is_some_and(|m| m.contains_key(&k)) {
                return status(409, "AlreadyExists", &format!("{name} already exists"));
            }
            let uid = format!("uid-{name}-{}", api.inner.lock().unwrap().rv + 1);
            obj["metadata"]["uid"] = json!(uid);
            let stored = api.store(&t.collection, k, obj, "ADDED");
            json_with(StatusCode::CREATED, stored)
        }
        (Method::DELETE, Some(name), None) => {
            let k = key(t.namespace.as_deref(), name);
            let removed = api.inner.lock().unwrap().objects.get_mut(&t.collection).and_then(|m| m.remove(&k));
            match removed {
                Some(o) => {
                    let _ = api
                        .events
                        .send((t.collection.clone(), json!({"type": "DELETED", "object": o.clone()})));
                    json_ok(o)
                }
                None => status(404, "NotFound", &format!("{name} not found")),
            }
        }
        _ => status(405, "MethodNotAllowed", "not supported by the fake API"),
    }
}

/// An endless watch: every later change of the collection as a JSON line.
fn watch_stream(api: &FakeApi, t: Target) -> Response {
    let rx = api.events.subscribe();
    let collection = t.collection;
    let stream = futures::stream::unfold(rx, move |mut rx| {
        let collection = collection.clone();
        async move {
            loop {
                match rx.recv().await {
                    Ok((c, event)) if c == collection => {
                        let mut line = serde_json::to_vec(&event).unwrap_or_default();
                        line.push(b'\n');
                        return Some((Ok::<_, std::convert::Infallible>(Bytes::from(line)), rx));
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        }
    });
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| status(500, "InternalError", "stream"))
}

/// JSON merge patch (RFC 7386).
fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

/// The RBAC `(apiGroup, resource[/subresource], verb)` of a recorded request.
pub fn rbac_verb(r: &Request) -> Option<(String, String, String)> {
    let t = parse(&r.path)?;
    let mut parts = t.collection.trim_start_matches('/').split('/');
    let group = match parts.next()? {
        "api" => String::new(),
        _ => parts.next()?.to_string(),
    };
    let resource = t.collection.rsplit('/').next()?.to_string();
    let resource = match &t.subresource {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource,
    };
    let verb = match (r.method.as_str(), t.name.is_some()) {
        ("GET", false) if r.watch => "watch",
        ("GET", false) => "list",
        ("GET", true) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", _) => "delete",
        _ => return None,
    };
    Some((group, resource, verb.to_string()))
}

/// A kubeconfig pointing at `addr` (plain HTTP, a dummy token).
pub fn kubeconfig(addr: SocketAddr) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster: {{server: \"http://{addr}\"}}\n\
         contexts:\n- name: fake\n  context: {{cluster: fake, user: fake}}\ncurrent-context: fake\n\
         users:\n- name: fake\n  user: {{token: fake}}\n"
    )
}

/// `n` nodes of `cpu` CPUs each, labelled with a rack per 8 nodes.
pub fn add_nodes(api: &FakeApi, n: usize, cpu: u32) {
    for i in 0..n {
        api.add(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("node-{i:04}"),
                         "labels": {"kubernetes.io/hostname": format!("node-{i:04}"), "rack": format!("rack-{}", i / 8)}},
            "status": {"allocatable": {"cpu": cpu.to_string(), "memory": "256Gi", "pods": "110"},
                       "capacity": {"cpu": cpu.to_string(), "memory": "256Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}));
    }
}

/// A gang PodGroup of `n` pods (`minCount` = `n`), each asking for 100m CPU, for
/// `scheduler`, kept in one domain of the node label `topology` if given.
pub fn add_gang(
    api: &FakeApi,
    namespace: &str,
    name: &str,
    n: usize,
    scheduler: &str,
    topology: Option<&str>,
) {
    let mut spec = json!({"schedulingPolicy": {"gang": {"minCount": n}}});
    if let Some(key) = topology {
        spec["schedulingConstraints"] = json!({"topology": [{"key": key}]});
    }
    api.add(json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace}, "spec": spec}));
    for i in 0..n {
        api.add(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{name}-{i}"), "namespace": namespace},
            "spec": {"schedulerName": scheduler, "schedulingGroup": {"podGroupName": name},
                     "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}]},
            "status": {"phase": "Pending"}}));
    }
}

/// A DeviceClass `gpu.example.com` and, on each of the first `nodes` nodes of
/// [`add_nodes`], a node-local ResourceSlice of `gpus` devices of that driver.
pub fn add_gpus(api: &FakeApi, nodes: usize, gpus: usize) {
    api.add(json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}}));
    for i in 0..nodes {
        let node = format!("node-{i:04}");
        let devices: Vec<Value> = (0..gpus).map(|g| json!({"name": format!("gpu-{g}")})).collect();
        api.add(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": format!("{node}-gpus")},
            "spec": {"driver": "gpu.example.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}));
    }
}
