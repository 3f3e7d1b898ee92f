//! The writes that run both on the scheduling thread (through [`crate::store::KubeStore`],
//! blocking) and off it (through [`crate::dispatch::KubeDispatcher`]): pod bindings and
//! status updates. A [`Writer`] is cheap to clone and holds no lock across an await.

use std::sync::Arc;
use std::time::Instant;

use kube::api::PostParams;
use kube::core::Status;
use kube::{Api, Client};
use placer_api::k8s::api::core::v1::{Binding, ObjectReference, Pod};
use placer_api::k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use placer_cluster::{Kind, Object, ObjectRef, StoreError};

use crate::cache::{Shared, Source};
use crate::kinds::{dynamic_api, from_dynamic, to_dynamic};
use crate::leader::Leadership;
use crate::metrics::{Metrics, API_REQUESTS, API_RETRIES, BINDING_DURATION};
use crate::retry::{describe, is_transient, status_code, store_error, with_retry, Idempotency, RetryPolicy};
use crate::status::merge_status;
use crate::store::{slim, FIELD_MANAGER, STATUS_UPDATE_ATTEMPTS};

/// See the module documentation.
#[derive(Clone)]
pub(crate) struct Writer {
    pub client: Client,
    pub shared: Arc<Shared>,
    pub metrics: Arc<Metrics>,
    pub retry: RetryPolicy,
    pub gate: Option<Leadership>,
    /// The API server's URL, for messages.
    pub server: Arc<str>,
}

impl Writer {
    pub fn check_gate(&self, what: &ObjectRef) -> Result<(), StoreError> {
        match &self.gate {
            Some(g) if !g.is_leader() => {
                Err(StoreError::Other(format!("not the leader: refusing to write {what}")))
            }
            _ => Ok(()),
        }
    }

    pub fn count_request(&self, verb: &'static str, kind: Kind, result: &Result<(), &kube::Error>) {
        let code = match result {
            Ok(()) => "2xx".to_string(),
            Err(e) => status_code(e).map_or_else(|| "0".to_string(), |c| c.to_string()),
        };
        self.metrics.inc_counter(API_REQUESTS, &[("verb", verb), ("kind", kind.name()), ("code", &code)], 1);
    }

    /// `namespace/name` of the PodGroup an object is or belongs to (for logs).
    pub fn pod_group_of(&self, r: &ObjectRef) -> Option<String> {
        match r.kind {
            Kind::PodGroup => Some(format!("{}/{}", r.namespace, r.name)),
            Kind::Pod => self
                .shared
                .lock()
                .get(r)
                .and_then(|o| {
                    o.as_pod()
                        .and_then(|p| p.spec.as_ref())
                        .and_then(|s| s.scheduling_group.as_ref())
                        .and_then(|g| g.pod_group_name.clone())
                })
                .map(|g| format!("{}/{g}", r.namespace)),
            _ => None,
        }
    }

    /// Puts a write's answer into the cache (read-your-writes).
    pub fn remember(&self, obj: &Object) {
        let mut obj = obj.clone();
        slim(&mut obj);
        self.shared.update(|c| c.apply(obj, Source::LocalWrite));
    }

    pub fn finish_write(
        &self,
        verb: &'static str,
        r: &ObjectRef,
        result: Result<kube::core::DynamicObject, kube::Error>,
    ) -> Result<Object, StoreError> {
        self.count_request(verb, r.kind, &result.as_ref().map(|_| ()));
        match result {
            Ok(answer) => {
                let obj = from_dynamic(r.kind, answer)?;
                self.remember(&obj);
                Ok(obj)
            }
            Err(e) => {
                let err = store_error(r, &e);
                tracing::debug!(
                    verb,
                    object = %r,
                    pod_group = self.pod_group_of(r).as_deref(),
                    server = %self.server,
                    error = %describe(&e),
                    "write failed",
                );
                Err(err)
            }
        }
    }

    /// `PUT {kind}/{name}/status`; on 409 `GET` the object and `PUT` again with the fresh
    /// resourceVersion and the caller's changes (relative to `base`, the status the caller
    /// computed from) re-applied, up to [`STATUS_UPDATE_ATTEMPTS`] times.
    pub async fn update_status(
        &self,
        obj: Object,
        base: Option<serde_json::Value>,
    ) -> Result<Object, StoreError> {
        let r = obj.object_ref();
        self.check_gate(&r)?;
        let pod_group = self.pod_group_of(&r);
        let api = dynamic_api(self.client.clone(), r.kind, &r.namespace);
        let desired_json = obj.to_json();
        let desired = desired_json.get("status").cloned();
        let has_rv = obj.metadata().resource_version.as_deref().is_some_and(|s| !s.is_empty());
        let first = to_dynamic(&obj)?;
        let pp = PostParams { field_manager: Some(FIELD_MANAGER.to_string()), ..PostParams::default() };
        let retry = self.retry;
        let metrics = self.metrics.clone();

        let result = async {
            // Re-reads the object and re-applies the caller's change on it.
            let refresh = || async {
                let fresh =
                    with_retry(retry, Idempotency::Idempotent, &metrics, "get", || api.get(&r.name)).await?;
                let mut fresh_json = serde_json::to_value(&fresh).map_err(kube::Error::SerdeError)?;
                let merged = merge_status(base.as_ref(), desired.as_ref(), fresh_json.get("status"));
                if let Some(map) = fresh_json.as_object_mut() {
                    map.insert("status".to_string(), merged);
                }
                serde_json::from_value::<kube::core::DynamicObject>(fresh_json)
                    .map_err(kube::Error::SerdeError)
            };
            let mut body = if has_rv { first } else { refresh().await? };
            let mut attempt = 1;
            loop {
                let result = with_retry(retry, Idempotency::Idempotent, &metrics, "update_status", || {
                    api.replace_status(&r.name, &pp, &body)
                })
                .await;
                match result {
                    Err(kube::Error::Api(s)) if s.code == 409 && attempt < STATUS_UPDATE_ATTEMPTS => {
                        tracing::debug!(
                            object = %r,
                            pod_group = pod_group.as_deref(),
                            attempt,
                            "status update conflict; retrying on a fresh copy",
                        );
                        attempt += 1;
                        body = refresh().await?;
                    }
                    other => return other,
                }
            }
        }
        .await;
        self.finish_write("update_status", &r, result)
    }

    /// `POST pods/{name}/binding` with the pod's UID. Transient failures (429, 5xx, no
    /// answer) are retried up to `retry.attempts` times with jittered backoff; since an
    /// answer may have been lost, a retry answered 409 counts as bound when the pod is
    /// bound to `node` by then.
    pub async fn bind(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        node: &str,
        retry: RetryPolicy,
    ) -> Result<(), StoreError> {
        let r = ObjectRef::new(Kind::Pod, namespace, name);
        self.check_gate(&r)?;
        let pod_group = self.pod_group_of(&r);
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(namespace.to_string()),
                uid: (!uid.is_empty()).then(|| uid.to_string()),
                ..ObjectMeta::default()
            },
            target: ObjectReference {
                api_version: Some("v1".to_string()),
                kind: Some("Node".to_string()),
                name: Some(node.to_string()),
                ..ObjectReference::default()
            },
        };
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let pp = PostParams { field_manager: Some(FIELD_MANAGER.to_string()), ..PostParams::default() };
        let mut attempt = 0;
        loop {
            let start = Instant::now();
            let result: Result<Status, kube::Error> =
                api.create_subresource::<Binding, Status>("binding", name, &pp, &binding).await;
            let result = match result {
                Ok(s) if s.is_failure() => Err(kube::Error::Api(Box::new(s))),
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            };
            let elapsed = start.elapsed().as_secs_f64();
            self.count_request("bind", Kind::Pod, &result.as_ref().map(|_| ()));
            let outcome = match &result {
                Ok(()) => "ok",
                Err(kube::Error::Api(s)) if s.code == 409 => "conflict",
                Err(kube::Error::Api(s)) if s.code == 404 => "not_found",
                Err(_) => "error",
            };
            self.metrics.observe(BINDING_DURATION, &[("result", outcome)], elapsed);
            let e = match result {
                Ok(()) => {
                    tracing::debug!(pod = %r, pod_group = pod_group.as_deref(), node, "bound");
                    return Ok(());
                }
                Err(e) => e,
            };
            if attempt > 0
                && matches!(&e, kube::Error::Api(s) if s.code == 409)
                && self.bound_to(&api, name, node).await
            {
                tracing::debug!(pod = %r, node, "bound (an earlier attempt's answer was lost)");
                return Ok(());
            }
            let transient = is_transient(&e, Idempotency::Idempotent);
            if transient && attempt + 1 < retry.attempts && self.check_gate(&r).is_ok() {
                let wait = retry.jittered(attempt);
                tracing::debug!(pod = %r, node, error = %describe(&e), wait_ms = wait.as_millis() as u64, "retrying a binding");
                self.metrics.inc_counter(API_RETRIES, &[("verb", "bind")], 1);
                tokio::time::sleep(wait).await;
                attempt += 1;
                continue;
            }
            tracing::warn!(
                pod = %r,
                pod_group = pod_group.as_deref(),
                node,
                server = %self.server,
                error = %describe(&e),
                transient,
                "binding failed",
            );
            return Err(store_error(&r, &e));
        }
    }

    async fn bound_to(&self, api: &Api<Pod>, name: &str, node: &str) -> bool {
        matches!(api.get(name).await, Ok(p) if p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
    }
}
