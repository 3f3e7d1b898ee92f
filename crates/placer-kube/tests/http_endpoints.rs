//! `/healthz`, `/readyz` and `/metrics` over a store whose API is mocked.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body as AxumBody;
use http::{Request, Response, StatusCode};
use kube::client::Body;
use placer_cluster::Kind;
use placer_kube::http::{router, Health};
use placer_kube::{KubeStore, Leadership, Metrics, StoreOptions};
use serde_json::json;
use tower::ServiceExt;

async fn get(health: &Health, path: &str) -> (StatusCode, String, String) {
    let response = router(health.clone())
        .oneshot(Request::builder().uri(path).body(AxumBody::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let content_type =
        response.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    (status, content_type, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_and_metrics_follow_sync_leadership_and_the_loop() {
    let (svc, mut api) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(svc, "default");
    let metrics = Metrics::new();
    let store =
        KubeStore::new(client, tokio::runtime::Handle::current(), metrics.clone(), StoreOptions::default());
    let leadership = Leadership::standby();
    let health = Health {
        metrics: metrics.clone(),
        cache: store.status(&[Kind::Pod]),
        leadership: leadership.clone(),
        leader_election: true,
        loop_alive: Arc::new(AtomicBool::new(true)),
        scheduler_names: vec!["placer".into()],
    };

    // Before the first list: alive, not ready.
    assert_eq!(get(&health, "/healthz").await.0, StatusCode::OK);
    let (status, _, body) = get(&health, "/readyz").await;
    assert_eq!((status, body.as_str()), (StatusCode::SERVICE_UNAVAILABLE, "caches not synced: Pod\n"));

    // The pod list arrives: one pending pod for us, one bound, one for another scheduler.
    let watchers = store.start_watchers(&[Kind::Pod]);
    let (_, send) = api.next_request().await.unwrap();
    let pod = |name: &str, scheduler: &str, node: Option<&str>| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "ns", "uid": name, "resourceVersion": "1"},
               "spec": {"containers": [], "schedulerName": scheduler, "nodeName": node}})
    };
    let list = json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "5"},
                      "items": [pod("a", "placer", None), pod("b", "placer", Some("n1")), pod("c", "default-scheduler", None)]});
    send.send_response(Response::builder().body(Body::from(serde_json::to_vec(&list).unwrap())).unwrap());
    let (_watch, _keep_open) = api.next_request().await.unwrap();
    for _ in 0..500 {
        if health.cache.synced() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Synced, but the election has not started.
    let (status, _, body) = get(&health, "/readyz").await;
    assert_eq!((status, body.as_str()), (StatusCode::SERVICE_UNAVAILABLE, "leader election not running\n"));
    leadership.set_electing(true);
    assert_eq!(
        get(&health, "/readyz").await,
        (StatusCode::OK, "text/plain; charset=utf-8".into(), "ok: standing by\n".into())
    );
    leadership.set_leader(true);
    assert_eq!(get(&health, "/readyz").await.2, "ok: leading\n");

    let (status, content_type, text) = get(&health, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "application/openmetrics-text; version=1.0.0; charset=utf-8");
    assert!(text.contains("# TYPE placer_pending_pods gauge\nplacer_pending_pods 1.0\n"), "{text}");
    assert!(text.contains("placer_leader 1.0\n"), "{text}");
    assert!(text.contains("placer_cache_synced 1.0\n"), "{text}");
    assert!(text.contains("placer_watch_events_total{kind=\"Pod\",type=\"added\"} 3\n"), "{text}");

    // The scheduling thread died: liveness fails so the kubelet restarts the pod.
    health.loop_alive.store(false, Ordering::SeqCst);
    assert_eq!(get(&health, "/healthz").await.0, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(get(&health, "/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
    drop(watchers);
}
