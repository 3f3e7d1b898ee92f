//! The HTTP side: one handler that routes by path (discovery, health, version, OpenAPI
//! stubs, resources), turns errors into `Status` objects and streams watches.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::Response;
use axum::Router;
use serde_json::{json, Value};

use crate::crud::{self, Call, Reply, MAX_BODY};
use crate::discovery;
use crate::errors::ApiError;
use crate::request::{self, Query, Target};
use crate::state::Shared;
use crate::watch::{self, WatchSpec};

/// What the handler needs.
#[derive(Debug)]
pub struct App {
    pub shared: Arc<Shared>,
    /// Added to every request before it is handled (`--latency`).
    pub latency: Duration,
    /// `host:port` clients reach the server at (discovery's serverAddressByClientCIDRs).
    pub address: String,
}

/// The router of the API server.
pub fn router(app: Arc<App>) -> Router {
    Router::new().fallback(handle).with_state(app)
}

fn json_response(code: u16, value: &Value, content_type: &str, warnings: &[String]) -> Response {
    let mut b = Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, content_type);
    for w in warnings {
        b = b.header("Warning", format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\"")));
    }
    b.body(Body::from(serde_json::to_vec(value).unwrap_or_default()))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

fn reply(r: Reply) -> Response {
    json_response(r.code, &r.body, "application/json", &r.warnings)
}

fn error(e: &ApiError) -> Response {
    json_response(e.code, &e.status(), "application/json", &[])
}

fn text(code: u16, body: &'static str) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::OK))
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Body::from(body))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

fn header_str(h: &HeaderMap, name: header::HeaderName) -> &str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

async fn handle(State(app): State<Arc<App>>, req: Request) -> Response {
    if !app.latency.is_zero() {
        tokio::time::sleep(app.latency).await;
    }
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let query = Query::parse(parts.uri.query());
    let accept = header_str(&parts.headers, header::ACCEPT).to_string();
    tracing::debug!(
        method = %parts.method,
        %path,
        query = parts.uri.query().unwrap_or(""),
        agent = ?header_str(&parts.headers, header::USER_AGENT),
        "request"
    );
    match path.trim_end_matches('/') {
        "/healthz" | "/livez" | "/readyz" => return text(200, "ok"),
        p if p.starts_with("/healthz/") || p.starts_with("/livez/") || p.starts_with("/readyz/") => {
            return text(200, "ok")
        }
        "/version" => return json_response(200, &discovery::version(), "application/json", &[]),
        "/api" => {
            return match discovery::wants_aggregated(&accept) {
                Some(ct) => json_response(200, &discovery::aggregated(true, ct), ct, &[]),
                None => json_response(200, &discovery::core_versions(&app.address), "application/json", &[]),
            }
        }
        "/apis" => {
            return match discovery::wants_aggregated(&accept) {
                Some(ct) => json_response(200, &discovery::aggregated(false, ct), ct, &[]),
                None => json_response(200, &discovery::group_list(), "application/json", &[]),
            }
        }
        "/openapi/v2" => return openapi_v2(&accept),
        _ => {}
    }
    let target = match request::parse_path(&path) {
        None => return group_discovery(&path),
        Some(Err(e)) => return error(&e),
        Some(Ok(t)) => t,
    };
    if parts.method == Method::GET && query.flag("watch") {
        return match WatchSpec::parse(&target, &query, &accept) {
            Ok(spec) => Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/json")
                .body(watch::stream(app.shared.clone(), spec))
                .unwrap_or_else(|_| Response::new(Body::empty())),
            Err(e) => error(&e),
        };
    }
    let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(_) => {
            return error(&ApiError::new(413, "RequestEntityTooLarge", "the request body is too large"))
        }
    };
    let call = Call {
        method: parts.method.as_str(),
        target: &target,
        query: &query,
        content_type: header_str(&parts.headers, header::CONTENT_TYPE),
        accept: &accept,
        user_agent: header_str(&parts.headers, header::USER_AGENT),
        body: &bytes,
    };
    // A write is answered once the state file holds it (`Shared::write`); a read waits
    // for what it may have seen to be there too.
    let result = tokio::task::block_in_place(|| {
        let result = crud::call(&app.shared, &call);
        app.shared.sync_latest();
        result
    });
    match result {
        Ok(r) => {
            log_write(&parts.method, &target, r.code);
            reply(r)
        }
        Err(e) => {
            tracing::debug!(method = %parts.method, %path, code = e.code, reason = e.reason, message = %e.message, "request failed");
            error(&e)
        }
    }
}

fn log_write(method: &Method, target: &Target, code: u16) {
    if *method != Method::GET {
        if let Target::Object { resource, namespace, name, subresource } = target {
            tracing::debug!(%method, resource = resource.plural, namespace = namespace.as_deref().unwrap_or(""), %name, subresource = subresource.as_deref().unwrap_or(""), code, "write");
        }
    }
}

/// `/api/v1`, `/apis/{group}`, `/apis/{group}/{version}`.
fn group_discovery(path: &str) -> Response {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let found = match segments.as_slice() {
        ["api", "v1"] => discovery::resource_list("", "v1"),
        ["apis", group] => discovery::group(group),
        ["apis", group, version] => discovery::resource_list(group, version),
        _ => None,
    };
    match found {
        Some(v) => json_response(200, &v, "application/json", &[]),
        None => error(&ApiError::no_route()),
    }
}

/// `/openapi/v2`: an empty document. Clients that validate manifests against it (kubectl
/// before server-side field validation) find no schema and skip client-side validation.
fn openapi_v2(accept: &str) -> Response {
    if accept.contains("protobuf") {
        // An empty protobuf message is an empty `openapi_v2.Document`.
        return Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
            .body(Body::empty())
            .unwrap_or_else(|_| Response::new(Body::empty()));
    }
    let doc = json!({"swagger": "2.0", "info": {"title": "Placer cluster (embedded simulator)", "version": discovery::GIT_VERSION}, "paths": {}, "definitions": {}});
    json_response(200, &doc, "application/json", &[])
}
