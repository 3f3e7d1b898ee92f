//! `KubeStore` against a mocked API server: every request kind Placer makes, with its
//! path, verb and body, and the store's behaviour on the answers (conflicts, expiry,
//! retries, leadership).
//!
//! The store's methods are synchronous and block on the runtime, so each call runs on a
//! blocking thread while the test body plays the API server on the mock's handle.

use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use placer_api::k8s::api::core::v1::Pod;
use placer_api::k8s::api::scheduling::v1alpha2::PodGroup;
use placer_cluster::{ClusterStore, EventRecord, Kind, Object, ObjectRef, StoreError, WatchEventKind};
use placer_kube::{KubeStore, Leadership, Metrics, RetryPolicy, StoreOptions};
use serde_json::{json, Value};
use tower_test::mock::{Handle, SendResponse};

type ApiHandle = Handle<Request<Body>, Response<Body>>;

fn store_with_mock() -> (KubeStore, ApiHandle) {
    let (svc, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(svc, "default");
    let options = StoreOptions {
        retry: RetryPolicy {
            attempts: 3,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(20),
        },
        instance: "placer-0".into(),
        ..StoreOptions::default()
    };
    let store = KubeStore::new(client, tokio::runtime::Handle::current(), Metrics::new(), options);
    (store, handle)
}

/// Runs a store call on a blocking thread; returns the store with the result.
fn call<T: Send + 'static>(
    mut store: KubeStore,
    f: impl FnOnce(&mut KubeStore) -> T + Send + 'static,
) -> tokio::task::JoinHandle<(KubeStore, T)> {
    tokio::task::spawn_blocking(move || {
        let result = f(&mut store);
        (store, result)
    })
}

/// The next request, as (method, path and query, JSON body).
async fn next(handle: &mut ApiHandle) -> (Method, String, Value, SendResponse<Response<Body>>) {
    let (request, send) = tokio::time::timeout(Duration::from_secs(10), handle.next_request())
        .await
        .expect("a request within 10s")
        .expect("the client is alive");
    let method = request.method().clone();
    let uri = request.uri().to_string();
    let bytes = request.into_body().collect_bytes().await.expect("a readable body");
    let body =
        if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).expect("a JSON body") };
    (method, uri, body, send)
}

async fn no_more_requests(handle: &mut ApiHandle) {
    // Either nothing arrives, or the client is gone (`None`).
    let more = tokio::time::timeout(Duration::from_millis(300), handle.next_request()).await;
    if let Ok(Some((request, _))) = more {
        panic!("expected no further request, got {} {}", request.method(), request.uri());
    }
}

fn reply(send: SendResponse<Response<Body>>, status: u16, body: Value) {
    let response = Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(&body).unwrap()))
        .unwrap();
    send.send_response(response);
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": if code < 300 { "Success" } else { "Failure" },
           "reason": reason, "message": message, "code": code})
}

fn pod_json(name: &str, uid: &str, rv: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv},
           "spec": {"containers": [{"name": "c", "image": "busybox"}], "schedulerName": "placer",
                    "schedulingGroup": {"podGroupName": "train"}}})
}

fn pod(name: &str, uid: &str, rv: &str) -> Object {
    Object::Pod(serde_json::from_value::<Pod>(pod_json(name, uid, rv)).unwrap().into())
}

fn pod_group_json(rv: &str, conditions: Value) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
           "metadata": {"name": "train", "namespace": "ns", "uid": "pg-uid", "resourceVersion": rv},
           "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
           "status": {"conditions": conditions}})
}

fn condition(type_: &str, status: &str, reason: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_posts_to_the_binding_subresource_with_the_pod_uid() {
    let (store, mut api) = store_with_mock();
    let task = call(store, |s| s.bind("ns", "worker-0", "uid-0", "node-a"));

    let (method, uri, body, send) = next(&mut api).await;
    assert_eq!(method, Method::POST);
    assert_eq!(uri, "/api/v1/namespaces/ns/pods/worker-0/binding?&fieldManager=placer");
    assert_eq!(
        body,
        json!({"apiVersion": "v1", "kind": "Binding",
               "metadata": {"name": "worker-0", "namespace": "ns", "uid": "uid-0"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"}})
    );
    reply(send, 201, status(201, "", ""));

    let (store, result) = task.await.unwrap();
    assert_eq!(result, Ok(()));
    assert_eq!(store.metrics().histogram_count("placer_binding_duration_seconds", &[("result", "ok")]), 1);
    assert_eq!(
        store.metrics().counter_value(
            "placer_api_requests_total",
            &[("verb", "bind"), ("kind", "Pod"), ("code", "2xx")]
        ),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_conflict_is_a_conflict_and_is_not_retried() {
    let (store, mut api) = store_with_mock();
    let task = call(store, |s| s.bind("ns", "worker-0", "uid-0", "node-a"));
    let (_, _, _, send) = next(&mut api).await;
    reply(send, 409, status(409, "Conflict", "pod worker-0 is already assigned to node \"node-b\""));

    let (store, result) = task.await.unwrap();
    assert_eq!(result, Err(StoreError::Conflict(ObjectRef::new(Kind::Pod, "ns", "worker-0"))));
    no_more_requests(&mut api).await;
    assert_eq!(
        store.metrics().histogram_count("placer_binding_duration_seconds", &[("result", "conflict")]),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_of_a_deleted_pod_is_not_found_and_server_errors_are_not_retried() {
    let (store, mut api) = store_with_mock();
    let task = call(store, |s| s.bind("ns", "gone", "uid-1", "node-a"));
    let (_, _, _, send) = next(&mut api).await;
    reply(send, 404, status(404, "NotFound", "pods \"gone\" not found"));
    let (store, result) = task.await.unwrap();
    assert_eq!(result, Err(StoreError::NotFound(ObjectRef::new(Kind::Pod, "ns", "gone"))));

    let task = call(store, |s| s.bind("ns", "p", "uid-2", "node-a"));
    let (_, _, _, send) = next(&mut api).await;
    reply(send, 503, status(503, "ServiceUnavailable", "etcd leader changed"));
    let (_store, result) = task.await.unwrap();
    assert!(matches!(result, Err(StoreError::Other(_))), "{result:?}");
    no_more_requests(&mut api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_group_status_conflict_is_retried_on_a_fresh_copy() {
    let (store, mut api) = store_with_mock();
    let cached: PodGroup = serde_json::from_value(pod_group_json("5", json!([]))).unwrap();
    store.inject(Object::PodGroup(cached.clone()));

    let mut desired = cached.clone();
    desired.status.get_or_insert_with(Default::default).conditions =
        Some(vec![serde_json::from_value(condition("PodGroupScheduled", "True", "Scheduled")).unwrap()]);
    let task = call(store, move |s| s.update_status(Object::PodGroup(desired)));

    // 1. PUT with the cached resourceVersion: conflict.
    let (method, uri, body, send) = next(&mut api).await;
    assert_eq!(method, Method::PUT);
    assert_eq!(
        uri,
        "/apis/scheduling.k8s.io/v1alpha2/namespaces/ns/podgroups/train/status?&fieldManager=placer"
    );
    assert_eq!(body["metadata"]["resourceVersion"], "5");
    reply(send, 409, status(409, "Conflict", "the object has been modified"));

    // 2. GET the fresh object (someone else added a condition meanwhile).
    let (method, uri, _, send) = next(&mut api).await;
    assert_eq!(method, Method::GET);
    assert_eq!(uri, "/apis/scheduling.k8s.io/v1alpha2/namespaces/ns/podgroups/train");
    reply(send, 200, pod_group_json("7", json!([condition("DisruptionTarget", "False", "None")])));

    // 3. PUT again with the fresh resourceVersion and both conditions.
    let (method, uri, body, send) = next(&mut api).await;
    assert_eq!(method, Method::PUT);
    assert!(uri.starts_with("/apis/scheduling.k8s.io/v1alpha2/namespaces/ns/podgroups/train/status"));
    assert_eq!(body["metadata"]["resourceVersion"], "7");
    let types: Vec<&str> = body["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, vec!["DisruptionTarget", "PodGroupScheduled"]);
    let mut answer = body.clone();
    answer["metadata"]["resourceVersion"] = json!("8");
    reply(send, 200, answer);

    let (store, result) = task.await.unwrap();
    let written = result.expect("the retry succeeds");
    assert_eq!(written.metadata().resource_version.as_deref(), Some("8"));
    // Read-your-writes: the cache holds the answer already.
    let r = ObjectRef::new(Kind::PodGroup, "ns", "train");
    assert_eq!(store.get(&r).unwrap().metadata().resource_version.as_deref(), Some("8"));
    assert_eq!(store.watch_since(1).last().map(|e| e.kind), Some(WatchEventKind::Modified));
    no_more_requests(&mut api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_conflicts_give_up_after_a_few_attempts() {
    let (store, mut api) = store_with_mock();
    let cached: PodGroup = serde_json::from_value(pod_group_json("5", json!([]))).unwrap();
    store.inject(Object::PodGroup(cached.clone()));
    let task = call(store, move |s| s.update_status(Object::PodGroup(cached)));
    for attempt in 1..=5 {
        let (method, _, _, send) = next(&mut api).await;
        assert_eq!(method, Method::PUT, "attempt {attempt}");
        reply(send, 409, status(409, "Conflict", "modified"));
        if attempt < 5 {
            let (method, _, _, send) = next(&mut api).await;
            assert_eq!(method, Method::GET);
            reply(send, 200, pod_group_json(&format!("{}", 5 + attempt), json!([])));
        }
    }
    let (_store, result) = task.await.unwrap();
    assert_eq!(result.unwrap_err(), StoreError::Conflict(ObjectRef::new(Kind::PodGroup, "ns", "train")));
    no_more_requests(&mut api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_conditions_and_nominated_node_go_to_the_pod_status_subresource() {
    let (store, mut api) = store_with_mock();
    let cached = pod("worker-1", "uid-1", "40");
    store.inject(cached.clone());
    let Object::Pod(p) = cached else { unreachable!() };
    let mut p = std::sync::Arc::unwrap_or_clone(p);
    let status = p.status.get_or_insert_with(Default::default);
    status.nominated_node_name = Some("node-b".into());
    status.conditions = Some(vec![serde_json::from_value(
        json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available"}),
    )
    .unwrap()]);
    let task = call(store, move |s| s.update_status(Object::Pod(p.into())));

    let (method, uri, body, send) = next(&mut api).await;
    assert_eq!(method, Method::PUT);
    assert_eq!(uri, "/api/v1/namespaces/ns/pods/worker-1/status?&fieldManager=placer");
    assert_eq!(body["metadata"]["resourceVersion"], "40");
    assert_eq!(body["status"]["nominatedNodeName"], "node-b");
    assert_eq!(body["status"]["conditions"][0]["reason"], "Unschedulable");
    reply(send, 200, {
        let mut b = body.clone();
        b["metadata"]["resourceVersion"] = json!("41");
        b
    });
    let (_, result) = task.await.unwrap();
    assert!(result.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_posts_the_object_and_the_answer_is_visible_at_once() {
    let (store, mut api) = store_with_mock();
    let mut new_pod: Pod = serde_json::from_value(pod_json("", "", "")).unwrap();
    new_pod.metadata.name = None;
    new_pod.metadata.uid = None;
    new_pod.metadata.resource_version = Some("999".into());
    new_pod.metadata.generate_name = Some("job-a-".into());
    let task = call(store, move |s| s.create(Object::Pod(new_pod.into())));

    let (method, uri, body, send) = next(&mut api).await;
    assert_eq!(method, Method::POST);
    assert_eq!(uri, "/api/v1/namespaces/ns/pods?&fieldManager=placer");
    assert_eq!(body["metadata"]["generateName"], "job-a-");
    assert!(body["metadata"].get("resourceVersion").is_none(), "resourceVersion is cleared on create");
    reply(send, 201, pod_json("job-a-x7k2p", "uid-new", "77"));

    let (store, result) = task.await.unwrap();
    let created = result.unwrap();
    assert_eq!(created.metadata().name.as_deref(), Some("job-a-x7k2p"));
    let r = ObjectRef::new(Kind::Pod, "ns", "job-a-x7k2p");
    assert!(store.get(&r).is_some());
    let events = store.watch_since(0);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, WatchEventKind::Added);
    // The watch event for the same version, arriving later, is not recorded twice.
    store.inject(pod("job-a-x7k2p", "uid-new", "77"));
    assert_eq!(store.watch_since(0).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_are_retried_on_server_errors_only_when_repeating_is_safe() {
    let (store, mut api) = store_with_mock();
    // A fixed name: a repeat cannot create a second object.
    let task = call(store, |s| s.create(pod("fixed", "", "")));
    let (_, _, _, send) = next(&mut api).await;
    reply(send, 503, status(503, "ServiceUnavailable", "try again"));
    let (method, _, _, send) = next(&mut api).await;
    assert_eq!(method, Method::POST);
    reply(send, 201, pod_json("fixed", "u", "3"));
    let (store, result) = task.await.unwrap();
    assert!(result.is_ok());
    assert_eq!(store.metrics().counter_value("placer_api_retries_total", &[("verb", "create")]), 1);

    // generateName: a 503 might have created it already; no retry.
    let mut generated: Pod = serde_json::from_value(pod_json("", "", "")).unwrap();
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("g-".into());
    let task = call(store, move |s| s.create(Object::Pod(generated.into())));
    let (_, _, _, send) = next(&mut api).await;
    reply(send, 503, status(503, "ServiceUnavailable", "try again"));
    let (_store, result) = task.await.unwrap();
    assert!(result.is_err());
    no_more_requests(&mut api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_replaces_the_object_and_a_stale_version_is_a_conflict() {
    let (store, mut api) = store_with_mock();
    let job: placer_api::k8s::api::batch::v1::Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "resourceVersion": "12"},
        "spec": {"template": {"spec": {"containers": []}}}
    }))
    .unwrap();
    let task = call(store, move |s| s.update(Object::Job(Box::new(job))));
    let (method, uri, body, send) = next(&mut api).await;
    assert_eq!(method, Method::PUT);
    assert_eq!(uri, "/apis/batch/v1/namespaces/ns/jobs/j?&fieldManager=placer");
    assert_eq!(body["metadata"]["resourceVersion"], "12");
    reply(send, 409, status(409, "Conflict", "the object has been modified"));
    let (_store, result) = task.await.unwrap();
    assert_eq!(result.unwrap_err(), StoreError::Conflict(ObjectRef::new(Kind::Job, "ns", "j")));
    no_more_requests(&mut api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_patch_sends_a_json_merge_patch() {
    let (store, mut api) = store_with_mock();
    let task = call(store, |s| {
        s.merge_patch(
            &ObjectRef::new(Kind::PodGroup, "ns", "train"),
            &json!({"metadata": {"annotations": {"placer.dev/topology-assignment": "{}"}}}),
        )
    });
    let (request, send) = api.next_request().await.unwrap();
    assert_eq!(request.method(), Method::PATCH);
    assert_eq!(
        request.uri().to_string(),
        "/apis/scheduling.k8s.io/v1alpha2/namespaces/ns/podgroups/train?&fieldManager=placer"
    );
    assert_eq!(request.headers()["content-type"], "application/merge-patch+json");
    let body: Value = serde_json::from_slice(&request.into_body().collect_bytes().await.unwrap()).unwrap();
    assert_eq!(body, json!({"metadata": {"annotations": {"placer.dev/topology-assignment": "{}"}}}));
    reply(send, 200, pod_group_json("9", json!([])));
    let (_, result) = task.await.unwrap();
    assert_eq!(result.unwrap().metadata().resource_version.as_deref(), Some("9"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_is_graceful_with_the_cached_uid_as_precondition() {
    let (store, mut api) = store_with_mock();
    store.inject(pod("victim", "uid-v", "50"));
    let task = call(store, |s| s.delete(&ObjectRef::new(Kind::Pod, "ns", "victim")));
    let (method, uri, body, send) = next(&mut api).await;
    assert_eq!(method, Method::DELETE);
    assert_eq!(uri, "/api/v1/namespaces/ns/pods/victim?");
    assert_eq!(body["propagationPolicy"], "Background");
    assert_eq!(body["preconditions"]["uid"], "uid-v");
    assert!(body.get("gracePeriodSeconds").is_none(), "the pod's own grace period applies");
    let mut terminating = pod_json("victim", "uid-v", "51");
    terminating["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    reply(send, 200, terminating);
    let (store, result) = task.await.unwrap();
    assert_eq!(result, Ok(()));
    let cached = store.get(&ObjectRef::new(Kind::Pod, "ns", "victim")).unwrap();
    assert!(cached.metadata().deletion_timestamp.is_some(), "the terminating copy is cached");

    // A uid mismatch (the pod was recreated) is a conflict.
    let task = call(store, |s| s.delete(&ObjectRef::new(Kind::Pod, "ns", "victim")));
    let (_, _, _, send) = next(&mut api).await;
    reply(
        send,
        409,
        status(409, "Conflict", "Precondition failed: UID in precondition: uid-v, UID in object meta: uid-w"),
    );
    let (_, result) = task.await.unwrap();
    assert_eq!(result, Err(StoreError::Conflict(ObjectRef::new(Kind::Pod, "ns", "victim"))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_published_to_events_k8s_io() {
    let (store, mut api) = store_with_mock();
    store.inject(pod("worker-0", "uid-0", "5"));
    let task = call(store, |s| {
        s.record_event(EventRecord {
            regarding: ObjectRef::new(Kind::Pod, "ns", "worker-0"),
            type_: "Warning".into(),
            reason: "FailedScheduling".into(),
            note: "0/4 nodes are available: 4 Insufficient cpu.".into(),
            reporter: "placer-scheduler".into(),
            time_ms: 0,
        });
        s.events().len()
    });
    let (store, kept) = task.await.unwrap();
    assert_eq!(kept, 1, "events() returns what was recorded");

    let (method, uri, body, send) = next(&mut api).await;
    assert_eq!(method, Method::POST);
    assert_eq!(uri, "/apis/events.k8s.io/v1/namespaces/ns/events?");
    assert_eq!(body["reason"], "FailedScheduling");
    assert_eq!(body["type"], "Warning");
    assert_eq!(body["action"], "Scheduling");
    assert_eq!(body["note"], "0/4 nodes are available: 4 Insufficient cpu.");
    assert_eq!(body["reportingController"], "placer.dev/placer-scheduler");
    assert_eq!(body["reportingInstance"], "placer-0");
    assert_eq!(
        body["regarding"],
        json!({"apiVersion": "v1", "kind": "Pod", "name": "worker-0", "namespace": "ns", "uid": "uid-0"})
    );
    reply(send, 201, body);
    drop(store);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_refused_locally_while_not_leading() {
    let (mut store, mut api) = store_with_mock();
    let leadership = Leadership::standby();
    store.set_write_gate(leadership.clone());
    let task = call(store, |s| {
        (
            s.bind("ns", "p", "u", "n"),
            s.create(pod("x", "", "")),
            s.delete(&ObjectRef::new(Kind::Pod, "ns", "p")),
        )
    });
    let (store, (bind, create, delete)) = task.await.unwrap();
    for result in [bind.map(|_| ()), create.map(|_| ()), delete] {
        assert!(
            matches!(&result, Err(StoreError::Other(m)) if m.starts_with("not the leader")),
            "{result:?}"
        );
    }
    no_more_requests(&mut api).await;

    leadership.set_leader(true);
    let task = call(store, |s| s.bind("ns", "p", "u", "n"));
    let (_, uri, _, send) = next(&mut api).await;
    assert!(uri.ends_with("/pods/p/binding?&fieldManager=placer"));
    reply(send, 201, status(201, "", ""));
    assert_eq!(task.await.unwrap().1, Ok(()));
}

fn pod_list(rv: &str, pods: &[(&str, &str)]) -> Value {
    json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": rv},
           "items": pods.iter().map(|(name, prv)| pod_json(name, &format!("uid-{name}"), prv)).collect::<Vec<_>>()})
}

async fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting until {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_expiry_relists_without_losing_or_duplicating_objects() {
    let (store, mut api) = store_with_mock();
    let watchers = store.start_watchers(&[Kind::Pod]);
    let status = store.status(&[Kind::Pod]);

    // Initial list.
    let (method, uri, _, send) = next(&mut api).await;
    assert_eq!(method, Method::GET);
    assert!(uri.starts_with("/api/v1/pods?"), "{uri}");
    assert!(!uri.contains("watch=true"));
    reply(send, 200, pod_list("100", &[("a", "10"), ("b", "11"), ("c", "12")]));

    // Watch from the list's version; it expires at once.
    let (_, uri, _, send) = next(&mut api).await;
    assert!(uri.contains("watch=true") && uri.contains("resourceVersion=100"), "{uri}");
    wait_until("the first list is synced", || status.synced()).await;
    let after_sync = store.resource_version();
    assert_eq!(after_sync, 3);
    let gone = json!({"type": "ERROR", "object": status_json_410()});
    send.send_response(
        Response::builder().status(200).body(Body::from(format!("{gone}\n").into_bytes())).unwrap(),
    );

    // Relist: a unchanged, b modified, c deleted, d new.
    let (method, uri, _, send) = next(&mut api).await;
    assert_eq!(method, Method::GET);
    assert!(!uri.contains("watch=true"), "a relist, not a watch: {uri}");
    reply(send, 200, pod_list("200", &[("a", "10"), ("b", "150"), ("d", "160")]));

    // The next watch starts from the new list; leave it open.
    let (_, uri, _, _open_watch) = next(&mut api).await;
    assert!(uri.contains("watch=true") && uri.contains("resourceVersion=200"), "{uri}");

    wait_until("the relist is applied", || store.resource_version() > after_sync).await;
    let changes: Vec<(WatchEventKind, String)> = store
        .watch_since(after_sync)
        .into_iter()
        .map(|e| (e.kind, e.object.metadata().name.clone().unwrap()))
        .collect();
    assert_eq!(
        changes,
        vec![
            (WatchEventKind::Modified, "b".to_string()),
            (WatchEventKind::Added, "d".to_string()),
            (WatchEventKind::Deleted, "c".to_string()),
        ]
    );
    let names: Vec<String> =
        store.list(Kind::Pod).iter().map(|o| o.metadata().name.clone().unwrap()).collect();
    assert_eq!(names, vec!["a", "b", "d"]);
    assert_eq!(store.metrics().counter_value("placer_relists_total", &[("kind", "Pod")]), 2);
    drop(watchers);
}

fn status_json_410() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": "too old resource version: 100 (150)", "reason": "Expired", "code": 410})
}

mod dispatcher {
    use super::*;
    use placer_controllers::scheduler::{BindCall, BindOutcome, BindResult, Dispatcher};
    use placer_engine::{GroupKey, PodKey};

    fn call(name: &str, group: Option<&str>) -> BindCall {
        BindCall {
            pod: PodKey::new("ns", name),
            uid: format!("uid-{name}"),
            node: "node-a".into(),
            group: group.map(|g| GroupKey::new("ns", g)),
        }
    }

    /// Outcomes until `n` have arrived (10 s at most).
    async fn outcomes(d: &mut placer_kube::KubeDispatcher, n: usize) -> Vec<BindOutcome> {
        let mut out = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while out.len() < n {
            assert!(tokio::time::Instant::now() < deadline, "only {out:?}");
            out.extend(d.completed());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        out
    }

    fn pod_name(uri: &str) -> String {
        uri.split("/pods/").nth(1).and_then(|r| r.split('/').next()).unwrap_or_default().to_string()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bindings_run_concurrently_up_to_the_bound() {
        let (store, mut api) = store_with_mock();
        let mut d = store.dispatcher(2);
        for n in ["a", "b", "c"] {
            d.bind(call(n, None));
        }
        let (_, u1, _, s1) = next(&mut api).await;
        let (_, u2, _, s2) = next(&mut api).await;
        let mut first_two = vec![pod_name(&u1), pod_name(&u2)];
        first_two.sort();
        assert_eq!(first_two, ["a", "b"], "two in flight, in decision order");
        no_more_requests(&mut api).await;
        assert_eq!(d.in_flight(), 3);
        reply(s1, 201, status(201, "", ""));
        let (_, u3, _, s3) = next(&mut api).await;
        assert_eq!(pod_name(&u3), "c", "the third starts when a slot frees");
        reply(s2, 201, status(201, "", ""));
        reply(s3, 201, status(201, "", ""));
        let out = outcomes(&mut d, 3).await;
        assert!(out.iter().all(|o| o.result == BindResult::Bound), "{out:?}");
        assert_eq!(d.in_flight(), 0);
        assert_eq!(d.outstanding(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_transient_failure_is_retried_and_a_lost_answer_is_recognised() {
        let (store, mut api) = store_with_mock();
        let metrics = store.metrics().clone();
        let mut d = store.dispatcher(1);
        d.bind(call("x", None));
        let (_, _, _, s) = next(&mut api).await;
        reply(s, 503, status(503, "ServiceUnavailable", "etcd leader changed"));
        let (method, uri, _, s) = next(&mut api).await;
        assert_eq!((method, pod_name(&uri)), (Method::POST, "x".to_string()), "retried");
        // The first attempt did bind (its answer was lost): the retry meets a conflict and
        // the dispatcher checks where the pod is.
        reply(s, 409, status(409, "Conflict", "pod x is already assigned to node \"node-a\""));
        let (method, uri, _, s) = next(&mut api).await;
        assert_eq!((method, uri.as_str()), (Method::GET, "/api/v1/namespaces/ns/pods/x"));
        let mut bound = pod_json("x", "uid-x", "9");
        bound["spec"]["nodeName"] = json!("node-a");
        reply(s, 200, bound);
        let out = outcomes(&mut d, 1).await;
        assert_eq!(out[0].result, BindResult::Bound);
        assert_eq!(metrics.counter_value("placer_api_retries_total", &[("verb", "bind")]), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_permanent_failure_is_reported_and_a_gangs_queue_can_be_cancelled() {
        let (store, mut api) = store_with_mock();
        let mut d = store.dispatcher(1);
        for n in ["a", "b", "c"] {
            d.bind(call(n, Some("gang")));
        }
        d.bind(call("other", Some("another")));
        let (_, uri, _, s) = next(&mut api).await;
        assert_eq!(pod_name(&uri), "a");
        // The driver cancels the gang (say, another member failed): b and c never leave.
        d.cancel_group(&GroupKey::new("ns", "gang"));
        let cancelled = d.completed();
        let names: Vec<String> = cancelled.iter().map(|o| o.call.pod.name.to_string()).collect();
        assert_eq!(names, ["b", "c"]);
        assert!(cancelled.iter().all(|o| o.result == BindResult::Cancelled));
        reply(s, 404, status(404, "NotFound", "pods \"a\" not found"));
        let (_, uri, _, s) = next(&mut api).await;
        assert_eq!(pod_name(&uri), "other", "other groups go on");
        reply(s, 201, status(201, "", ""));
        let out = outcomes(&mut d, 2).await;
        assert_eq!(
            out[0].result,
            BindResult::Failed(StoreError::NotFound(ObjectRef::new(Kind::Pod, "ns", "a")))
        );
        assert_eq!(out[1].result, BindResult::Bound);
        no_more_requests(&mut api).await;
        assert_eq!(d.outstanding(), 0);
    }
}
