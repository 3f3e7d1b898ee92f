//! The API as clients see it, through the router in process: status codes, `Status`
//! bodies, conflicts, patches, server-side apply, lists, watches, subresources, tables.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use placer_apiserver::events::EventRecorder;
use placer_apiserver::server::{router, App};
use placer_apiserver::state::{Clock, Inner, Shared};
use placer_cluster::embedded::EmbeddedCluster;
use placer_cluster::ClusterStore;
use serde_json::{json, Value};
use tower::ServiceExt;

struct Api {
    app: Arc<App>,
}

impl Api {
    fn new() -> Api {
        Api::with_store(EmbeddedCluster::new())
    }

    /// Over a store that validates writes, as `placer cluster`'s does.
    fn validating() -> Api {
        Api::with_store(EmbeddedCluster::validating())
    }

    fn with_store(mut store: EmbeddedCluster) -> Api {
        for ns in ["default", "demo"] {
            let mut n = placer_api::k8s::api::core::v1::Namespace::default();
            n.metadata.name = Some(ns.into());
            store.create(placer_cluster::Object::Namespace(n)).unwrap();
        }
        for (name, rack) in [("n1", "r1"), ("n2", "r2")] {
            let node: placer_api::k8s::api::core::v1::Node = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"rack": rack}},
                "status": {"allocatable": {"cpu": "4", "pods": "10"}, "conditions": [{"type": "Ready", "status": "True"}]}
            }))
            .unwrap();
            store.create(placer_cluster::Object::Node(node.into())).unwrap();
        }
        let inner = Inner::new(store, EventRecorder::new("test"), Clock::new(0, 1.0), None);
        let shared = Arc::new(Shared::new(inner));
        Api { app: Arc::new(App { shared, latency: Duration::ZERO, address: "127.0.0.1:1".into() }) }
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        accept: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value, Vec<String>) {
        let mut req = Request::builder().method(method).uri(path).header("user-agent", "test/1.0");
        if !accept.is_empty() {
            req = req.header("accept", accept);
        }
        if !content_type.is_empty() {
            req = req.header("content-type", content_type);
        }
        let body = body.map(|b| Body::from(b.to_string())).unwrap_or_else(Body::empty);
        let resp = router(self.app.clone()).oneshot(req.body(body).unwrap()).await.unwrap();
        let status = resp.status();
        let warnings =
            resp.headers().get_all("warning").iter().map(|v| v.to_str().unwrap().to_string()).collect();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
        (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null), warnings)
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let (s, v, _) = self.call("GET", path, "", "application/json", None).await;
        (s, v)
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let (s, v, _) = self.call("POST", path, "application/json", "application/json", Some(body)).await;
        (s, v)
    }

    async fn put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let (s, v, _) = self.call("PUT", path, "application/json", "application/json", Some(body)).await;
        (s, v)
    }

    async fn patch(&self, path: &str, content_type: &str, body: Value) -> (StatusCode, Value) {
        let (s, v, _) = self.call("PATCH", path, content_type, "application/json", Some(body)).await;
        (s, v)
    }

    async fn delete(&self, path: &str) -> (StatusCode, Value) {
        let (s, v, _) = self.call("DELETE", path, "", "application/json", None).await;
        (s, v)
    }

    /// A watch's events, read until `n` arrived or `wait` passed.
    async fn watch(&self, path: &str, n: usize, wait: Duration) -> Vec<Value> {
        self.watch_as(path, "application/json", n, wait).await
    }

    async fn watch_as(&self, path: &str, accept: &str, n: usize, wait: Duration) -> Vec<Value> {
        let req = Request::builder().uri(path).header("accept", accept).body(Body::empty()).unwrap();
        let resp = router(self.app.clone()).oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let mut body = resp.into_body().into_data_stream();
        let mut text = String::new();
        let mut events = Vec::new();
        let deadline = tokio::time::Instant::now() + wait;
        while events.len() < n {
            use futures::StreamExt;
            let chunk = match tokio::time::timeout_at(deadline, body.next()).await {
                Ok(Some(Ok(c))) => c,
                _ => break,
            };
            text.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(i) = text.find('\n') {
                let line: String = text.drain(..=i).collect();
                events.push(serde_json::from_str(line.trim()).unwrap());
            }
        }
        events
    }
}

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "web"}},
           "spec": {"containers": [{"name": "c", "image": "busybox:1.36", "resources": {"requests": {"cpu": "1"}}}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crud_with_kubernetes_status_codes_and_statuses() {
    let api = Api::new();
    let (s, created) = api.post("/api/v1/namespaces/demo/pods", pod("p")).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    assert_eq!(created["metadata"]["namespace"], "demo");
    assert_eq!(created["spec"]["schedulerName"], "default-scheduler", "defaults apply");
    assert_eq!(created["status"]["phase"], "Pending");
    assert_eq!(created["metadata"]["managedFields"][0]["manager"], "test");

    let (s, dup) = api.post("/api/v1/namespaces/demo/pods", pod("p")).await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert_eq!(
        (dup["kind"].as_str(), dup["reason"].as_str(), dup["code"].as_i64()),
        (Some("Status"), Some("AlreadyExists"), Some(409))
    );
    assert_eq!(dup["message"], "pods \"p\" already exists");

    let (s, missing) = api.get("/api/v1/namespaces/demo/pods/nope").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(missing["details"], json!({"name": "nope", "kind": "pods"}));

    let (s, no_ns) = api.post("/api/v1/namespaces/ghost/pods", pod("p")).await;
    assert_eq!(
        (s, no_ns["message"].as_str()),
        (StatusCode::NOT_FOUND, Some("namespaces \"ghost\" not found"))
    );

    let (s, mismatch) = api.post("/api/v1/namespaces/demo/pods", json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "other"}, "spec": {"containers": []}})).await;
    assert_eq!((s, mismatch["reason"].as_str()), (StatusCode::BAD_REQUEST, Some("BadRequest")));

    // Update with the current resourceVersion, then with the stale one.
    let mut v1 = created.clone();
    v1["metadata"]["labels"]["tier"] = json!("a");
    let (s, updated) = api.put("/api/v1/namespaces/demo/pods/p", v1.clone()).await;
    assert_eq!(s, StatusCode::OK, "{updated}");
    let (s, stale) = api.put("/api/v1/namespaces/demo/pods/p", v1).await;
    assert_eq!((s, stale["reason"].as_str()), (StatusCode::CONFLICT, Some("Conflict")));
    assert!(stale["message"].as_str().unwrap().contains("the object has been modified"));

    // Delete with a wrong uid precondition, then for real (a pod answers with itself).
    let req = json!({"preconditions": {"uid": "other"}});
    let (s, pre, _) =
        api.call("DELETE", "/api/v1/namespaces/demo/pods/p", "application/json", "", Some(req)).await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert!(pre["message"].as_str().unwrap().contains("Precondition failed: UID in precondition: other"));
    let (s, gone) = api.delete("/api/v1/namespaces/demo/pods/p").await;
    assert_eq!((s, gone["kind"].as_str()), (StatusCode::OK, Some("Pod")));
    assert!(gone["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(api.delete("/api/v1/namespaces/demo/pods/p").await.0, StatusCode::NOT_FOUND);

    // Other kinds answer a delete with a success Status.
    api.post("/apis/scheduling.k8s.io/v1/priorityclasses", json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 10})).await;
    let (s, st) = api.delete("/apis/scheduling.k8s.io/v1/priorityclasses/high").await;
    assert_eq!(
        (s, st["status"].as_str(), st["details"]["group"].as_str()),
        (StatusCode::OK, Some("Success"), Some("scheduling.k8s.io"))
    );

    assert_eq!(
        api.call(
            "PATCH",
            "/api/v1/namespaces/demo/pods",
            "application/merge-patch+json",
            "",
            Some(json!({}))
        )
        .await
        .0,
        StatusCode::METHOD_NOT_ALLOWED
    );
    assert_eq!(api.get("/api/v1/widgets").await.0, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_fields_warn_or_fail_with_strict_validation() {
    let api = Api::new();
    let mut p = pod("p");
    p["spec"]["bogus"] = json!(1);
    let (s, body, _) = api
        .call(
            "POST",
            "/api/v1/namespaces/demo/pods?fieldValidation=Strict",
            "application/json",
            "",
            Some(p.clone()),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(body["message"], "strict decoding error: unknown field \"spec.bogus\"");
    let (s, _, warnings) =
        api.call("POST", "/api/v1/namespaces/demo/pods", "application/json", "", Some(p)).await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(warnings, ["299 - \"unknown field \\\"spec.bogus\\\"\""]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patches_merge_json_strategic_and_status() {
    let api = Api::new();
    api.post("/api/v1/namespaces/demo/pods", pod("p")).await;
    let (s, p) = api
        .patch(
            "/api/v1/namespaces/demo/pods/p",
            "application/merge-patch+json",
            json!({"metadata": {"labels": {"app": null, "x": "1"}}}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{p}");
    assert_eq!(p["metadata"]["labels"], json!({"x": "1"}));
    let (s, p) = api
        .patch(
            "/api/v1/namespaces/demo/pods/p",
            "application/json-patch+json",
            json!([{"op": "add", "path": "/metadata/labels/y", "value": "2"}]),
        )
        .await;
    assert_eq!((s, &p["metadata"]["labels"]["y"]), (StatusCode::OK, &json!("2")));
    let (s, p) = api
        .patch(
            "/api/v1/namespaces/demo/pods/p",
            "application/strategic-merge-patch+json",
            json!({"spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{p}");
    assert_eq!(
        p["spec"]["containers"][0]["resources"]["requests"]["cpu"], "1",
        "the keyed list item was merged, not replaced"
    );
    assert_eq!(p["spec"]["containers"][0]["image"], "busybox:1.37");
    // Status through the main resource is ignored; through the subresource it applies.
    let (_, p) = api
        .patch(
            "/api/v1/namespaces/demo/pods/p",
            "application/merge-patch+json",
            json!({"status": {"phase": "Failed"}}),
        )
        .await;
    assert_eq!(p["status"]["phase"], "Pending");
    let (s, p) = api
        .patch(
            "/api/v1/namespaces/demo/pods/p/status",
            "application/merge-patch+json",
            json!({"status": {"phase": "Failed"}, "metadata": {"labels": {"z": "3"}}}),
        )
        .await;
    assert_eq!((s, &p["status"]["phase"]), (StatusCode::OK, &json!("Failed")));
    assert!(p["metadata"]["labels"].get("z").is_none(), "metadata is not changed through status");
    // A stale resourceVersion in a patch is a conflict; a bad JSON patch is 422.
    let (s, _) = api
        .patch(
            "/api/v1/namespaces/demo/pods/p",
            "application/merge-patch+json",
            json!({"metadata": {"resourceVersion": "1"}}),
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT);
    let (s, _) = api
        .patch(
            "/api/v1/namespaces/demo/pods/p",
            "application/json-patch+json",
            json!([{"op": "test", "path": "/metadata/name", "value": "q"}]),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    let (s, _) = api.patch("/api/v1/namespaces/demo/pods/p", "text/plain", json!({})).await;
    assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(
        api.patch("/api/v1/namespaces/demo/pods/nope", "application/merge-patch+json", json!({})).await.0,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_creates_conflicts_and_forces() {
    let api = Api::new();
    let lease = |holder: &str| json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "spec": {"holderIdentity": holder}});
    let path = "/apis/coordination.k8s.io/v1/namespaces/demo/leases/l";
    let apply = "application/apply-patch+yaml";
    let (s, _, _) = api.call("PATCH", path, apply, "", Some(lease("a"))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "an apply needs a field manager");
    let (s, created, _) =
        api.call("PATCH", &format!("{path}?fieldManager=mgr-a"), apply, "", Some(lease("a"))).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    let (s, again, _) =
        api.call("PATCH", &format!("{path}?fieldManager=mgr-a"), apply, "", Some(lease("a"))).await;
    assert_eq!(
        (s, &again["metadata"]["resourceVersion"]),
        (StatusCode::OK, &created["metadata"]["resourceVersion"]),
        "no change, no write"
    );
    let (s, conflict, _) =
        api.call("PATCH", &format!("{path}?fieldManager=mgr-b"), apply, "", Some(lease("b"))).await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert_eq!(conflict["reason"], "Conflict");
    assert_eq!(
        conflict["message"],
        "Apply failed with 1 conflict: conflict with \"mgr-a\": .spec.holderIdentity"
    );
    assert_eq!(conflict["details"]["causes"][0]["reason"], "FieldManagerConflict");
    let (s, forced, _) = api
        .call("PATCH", &format!("{path}?fieldManager=mgr-b&force=true"), apply, "", Some(lease("b")))
        .await;
    assert_eq!((s, &forced["spec"]["holderIdentity"]), (StatusCode::OK, &json!("b")));
    // A strategic merge patch clearing the field (a lease release) frees it for anyone.
    api.call(
        "PATCH",
        &format!("{path}?fieldManager=mgr-c"),
        "application/strategic-merge-patch+json",
        "",
        Some(json!({"spec": {"holderIdentity": null}})),
    )
    .await;
    let (s, _, _) =
        api.call("PATCH", &format!("{path}?fieldManager=mgr-a"), apply, "", Some(lease("a"))).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_select_and_page_and_expire() {
    let api = Api::new();
    for i in 0..5 {
        let mut p = pod(&format!("p{i}"));
        p["metadata"]["labels"]["i"] = json!(i.to_string());
        api.post("/api/v1/namespaces/demo/pods", p).await;
    }
    let (_, page) = api.get("/api/v1/namespaces/demo/pods?limit=2").await;
    assert_eq!(page["kind"], "PodList");
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    assert_eq!(page["metadata"]["remainingItemCount"], 3);
    let token = page["metadata"]["continue"].as_str().unwrap().to_string();
    let (_, rest) = api.get(&format!("/api/v1/namespaces/demo/pods?limit=10&continue={token}")).await;
    let names: Vec<&str> =
        rest["items"].as_array().unwrap().iter().map(|p| p["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["p2", "p3", "p4"]);
    assert_eq!(rest["metadata"]["resourceVersion"], page["metadata"]["resourceVersion"]);
    let (_, sel) = api.get("/api/v1/pods?labelSelector=i+in+(1,3)&fieldSelector=metadata.namespace%3Ddemo,status.phase%3DPending").await;
    assert_eq!(sel["items"].as_array().unwrap().len(), 2);
    let (s, bad) = api.get("/api/v1/pods?fieldSelector=spec.priority%3D1").await;
    assert_eq!(
        (s, bad["message"].as_str()),
        (StatusCode::BAD_REQUEST, Some("field label not supported: spec.priority"))
    );
    // Once the history behind a token is compacted away, the token is expired.
    api.post("/api/v1/namespaces/demo/pods", pod("late")).await;
    {
        let mut g = api.app.shared.lock();
        let rv = g.store.resource_version();
        g.store.compact_log(rv);
    }
    let (s, gone) = api.get(&format!("/api/v1/namespaces/demo/pods?continue={token}")).await;
    assert_eq!((s, gone["reason"].as_str()), (StatusCode::GONE, Some("Expired")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_stream_changes_bookmarks_and_410_gone() {
    let api = Arc::new(Api::new());
    let (_, created) = api.post("/api/v1/namespaces/demo/pods", pod("a")).await;
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    // Initial events, then the end-of-initial-events bookmark.
    let events = api
        .watch(
            "/api/v1/namespaces/demo/pods?watch=true&sendInitialEvents=true&allowWatchBookmarks=true",
            2,
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[1]["type"], "BOOKMARK");
    assert_eq!(events[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
    // From a resourceVersion: what changed after it, selectors applied.
    let watcher = {
        let api = api.clone();
        let path =
            format!("/api/v1/namespaces/demo/pods?watch=true&resourceVersion={rv}&labelSelector=app%3Dweb");
        tokio::spawn(async move { api.watch(&path, 3, Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    api.post("/api/v1/namespaces/demo/pods", pod("b")).await;
    api.patch(
        "/api/v1/namespaces/demo/pods/a",
        "application/merge-patch+json",
        json!({"metadata": {"labels": {"app": "db"}}}),
    )
    .await;
    api.delete("/api/v1/namespaces/demo/pods/b").await;
    let events = watcher.await.unwrap();
    let seen: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_string(),
                e["object"]["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [("ADDED".into(), "b".into()), ("DELETED".into(), "a".into()), ("DELETED".into(), "b".into())],
        "a left the selection"
    );
    // `kubectl get -w` asks for Tables: every object comes as a one-row Table.
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let events =
        api.watch_as("/api/v1/namespaces/demo/pods?watch=true", table, 1, Duration::from_secs(5)).await;
    assert_eq!(
        (events[0]["type"].as_str(), events[0]["object"]["kind"].as_str()),
        (Some("ADDED"), Some("Table"))
    );
    assert_eq!(events[0]["object"]["rows"][0]["cells"][0], "a");
    // A compacted history answers with one ERROR event: 410 Expired.
    {
        let mut g = api.app.shared.lock();
        let now = g.store.resource_version();
        g.store.compact_log(now);
    }
    let events = api
        .watch(
            &format!("/api/v1/namespaces/demo/pods?watch=true&resourceVersion={rv}"),
            1,
            Duration::from_secs(5),
        )
        .await;
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(
        (events[0]["object"]["code"].as_i64(), events[0]["object"]["reason"].as_str()),
        (Some(410), Some("Expired"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_and_eviction_subresources() {
    let api = Api::new();
    let (_, p) = api.post("/api/v1/namespaces/demo/pods", pod("p")).await;
    let uid = p["metadata"]["uid"].as_str().unwrap();
    let binding = |uid: &str| json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "uid": uid}, "target": {"kind": "Node", "name": "n1"}});
    let (s, st) = api.post("/api/v1/namespaces/demo/pods/p/binding", binding("someone-else")).await;
    assert_eq!(s, StatusCode::CONFLICT, "{st}");
    let (s, st) = api.post("/api/v1/namespaces/demo/pods/p/binding", binding(uid)).await;
    assert_eq!(
        (s, st["kind"].as_str(), st["status"].as_str()),
        (StatusCode::CREATED, Some("Status"), Some("Success"))
    );
    let (_, bound) = api.get("/api/v1/namespaces/demo/pods/p").await;
    assert_eq!(bound["spec"]["nodeName"], "n1");
    let (s, again) = api.post("/api/v1/namespaces/demo/pods/p/binding", binding(uid)).await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert!(again["message"].as_str().unwrap().contains("is already assigned to node \"n1\""), "{again}");
    // Eviction honours a PodDisruptionBudget that allows no disruption.
    api.patch(
        "/api/v1/namespaces/demo/pods/p/status",
        "application/merge-patch+json",
        json!({"status": {"phase": "Running"}}),
    )
    .await;
    api.post("/apis/policy/v1/namespaces/demo/poddisruptionbudgets", json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})).await;
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "demo"}});
    let (s, st) = api.post("/api/v1/namespaces/demo/pods/p/eviction", eviction.clone()).await;
    assert_eq!((s, st["reason"].as_str()), (StatusCode::TOO_MANY_REQUESTS, Some("TooManyRequests")));
    api.patch("/apis/policy/v1/namespaces/demo/poddisruptionbudgets/web/status", "application/merge-patch+json", json!({"status": {"disruptionsAllowed": 1, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}})).await;
    let (s, _) = api.post("/api/v1/namespaces/demo/pods/p/eviction", eviction).await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(api.get("/api/v1/namespaces/demo/pods/p").await.0, StatusCode::NOT_FOUND);
    let (_, pdb) = api.get("/apis/policy/v1/namespaces/demo/poddisruptionbudgets/web").await;
    assert_eq!(pdb["status"]["disruptionsAllowed"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_discovery_version_and_events_in_both_groups() {
    let api = Api::new();
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let (s, t, _) = api.call("GET", "/api/v1/nodes", "", accept, None).await;
    assert_eq!((s, t["kind"].as_str()), (StatusCode::OK, Some("Table")));
    let columns: Vec<&str> =
        t["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(&columns[..5], ["Name", "Status", "Roles", "Age", "Version"]);
    assert_eq!(t["rows"][0]["cells"][1], "Ready");
    assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    let (_, v) = api.get("/version").await;
    assert_eq!((v["major"].as_str(), v["minor"].as_str()), (Some("1"), Some("36")));
    let (_, groups) = api.get("/apis").await;
    assert!(groups["groups"].as_array().unwrap().iter().any(|g| g["name"] == "scheduling.k8s.io"));
    let (_, core) = api.get("/api/v1").await;
    assert!(core["resources"].as_array().unwrap().iter().any(|r| r["name"] == "pods/binding"));
    let (s, agg, _) = api
        .call(
            "GET",
            "/apis",
            "",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
            None,
        )
        .await;
    assert_eq!((s, agg["kind"].as_str()), (StatusCode::OK, Some("APIGroupDiscoveryList")));
    // An events.k8s.io Event is listed as a core Event and back.
    let (s, e) = api.post("/apis/events.k8s.io/v1/namespaces/demo/events", json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "regarding": {"kind": "Pod", "name": "p", "namespace": "demo"}, "note": "hello",
        "reason": "Scheduled", "type": "Normal", "action": "Binding", "reportingController": "placer.dev/x", "reportingInstance": "i"})).await;
    assert_eq!(s, StatusCode::CREATED, "{e}");
    assert_eq!(e["note"], "hello");
    let (_, core_events) =
        api.get("/api/v1/namespaces/demo/events?fieldSelector=involvedObject.name%3Dp").await;
    assert_eq!(core_events["items"][0]["message"], "hello");
    let (s, patched) = api
        .patch(
            "/apis/events.k8s.io/v1/namespaces/demo/events/e1",
            "application/merge-patch+json",
            json!({"series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"}}),
        )
        .await;
    assert_eq!((s, &patched["series"]["count"]), (StatusCode::OK, &json!(2)));
    assert_eq!(api.get("/healthz").await.0, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_object_is_refused_with_422_and_a_status_naming_the_field() {
    let api = Api::validating();
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "bad", "labels": {"bad key": "x"}},
        "spec": {"containers": [{"name": "c", "image": "busybox",
                  "resources": {"requests": {"cpu": "-1"}}}]}
    });
    let (status, body) = api.post("/api/v1/namespaces/default/pods", pod).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        (body["kind"].as_str(), body["reason"].as_str(), body["code"].as_u64()),
        (Some("Status"), Some("Invalid"), Some(422))
    );
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("Pod \"bad\" is invalid: "), "{message}");
    let fields: Vec<&str> = body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["field"].as_str())
        .collect();
    assert!(fields.contains(&"metadata.labels[bad key]"), "{body}");
    assert!(fields.contains(&"spec.containers[0].resources.requests[cpu]"), "{body}");
    assert_eq!(api.get("/api/v1/namespaces/default/pods/bad").await.0, StatusCode::NOT_FOUND);
}
