//! HTTP endpoints: `/metrics`, `/healthz`, `/readyz`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::leader::Leadership;
use crate::metrics::{Metrics, CONTENT_TYPE, LEADER, PENDING_PODS};
use crate::store::{export_synced, CacheStatus};

/// What the endpoints look at.
#[derive(Debug, Clone)]
pub struct Health {
    pub metrics: Arc<Metrics>,
    pub cache: CacheStatus,
    pub leadership: Leadership,
    /// Whether leader election is configured (readiness then also needs it running).
    pub leader_election: bool,
    /// False once the scheduling thread has ended (liveness fails, the pod restarts).
    pub loop_alive: Arc<AtomicBool>,
    pub scheduler_names: Vec<String>,
}

/// The router; serve it with `axum::serve`.
pub fn router(health: Health) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(health)
}

async fn metrics(State(h): State<Health>) -> Response {
    h.metrics.set_gauge(PENDING_PODS, &[], h.cache.pending_pods(&h.scheduler_names) as f64);
    h.metrics.set_gauge(LEADER, &[], if h.leadership.is_leader() { 1.0 } else { 0.0 });
    export_synced(&h.metrics, &h.cache);
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], h.metrics.render()).into_response()
}

async fn healthz(State(h): State<Health>) -> Response {
    if h.loop_alive.load(Ordering::SeqCst) {
        (StatusCode::OK, "ok\n").into_response()
    } else {
        (StatusCode::INTERNAL_SERVER_ERROR, "scheduling loop stopped\n").into_response()
    }
}

/// The readiness verdict and its explanation.
pub fn readiness(h: &Health) -> (bool, String) {
    let unsynced = h.cache.unsynced();
    if !unsynced.is_empty() {
        let kinds: Vec<&str> = unsynced.iter().map(|k| k.name()).collect();
        return (false, format!("caches not synced: {}\n", kinds.join(", ")));
    }
    if !h.loop_alive.load(Ordering::SeqCst) {
        return (false, "scheduling loop stopped\n".to_string());
    }
    if !h.leader_election {
        return (true, "ok\n".to_string());
    }
    if !h.leadership.is_electing() {
        return (false, "leader election not running\n".to_string());
    }
    if h.leadership.is_leader() {
        (true, "ok: leading\n".to_string())
    } else {
        (true, "ok: standing by\n".to_string())
    }
}

async fn readyz(State(h): State<Health>) -> Response {
    match readiness(&h) {
        (true, msg) => (StatusCode::OK, msg).into_response(),
        (false, msg) => (StatusCode::SERVICE_UNAVAILABLE, msg).into_response(),
    }
}
