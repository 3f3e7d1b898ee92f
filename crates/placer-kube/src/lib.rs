//! Real-cluster mode: Placer as a secondary scheduler of a Kubernetes cluster.
//!
//! * [`store::KubeStore`] implements [`placer_cluster::ClusterStore`] over the Kubernetes
//!   API: watchers fill a local cache with its own ordered event log ([`cache`]); writes
//!   (bindings, status, creates, patches, deletes, events) go to the API server.
//! * [`runloop`] runs the controllers (the scheduler driver and, for Jobs with
//!   `spec.managedBy: placer.dev/job-controller`, the Job controller) on a dedicated
//!   thread whenever the store changes or a wake-up time passes, gated on [`leader`]ship.
//! * [`dispatch::KubeDispatcher`] binds and writes status off the scheduling thread, a
//!   bounded number of bindings at once; [`ratelimit`] paces every request
//!   (`clientConnection.qps` / `burst`).
//! * [`serve::serve`] is `placer serve`: configuration ([`config`]), leader election on a
//!   Lease, `/metrics` ([`metrics`]), `/healthz`, `/readyz` ([`http`]), graceful shutdown.
//!
//! This is the only crate of the workspace that depends on kube, tokio and axum.

pub mod cache;
pub mod config;
pub mod dispatch;
pub mod http;
mod kinds;
pub mod leader;
pub mod metrics;
pub mod ratelimit;
pub mod retry;
pub mod runloop;
pub mod serve;
mod status;
pub mod store;
mod writer;

pub use config::{ConfigError, ServeSettings};
pub use dispatch::KubeDispatcher;
pub use leader::Leadership;
pub use metrics::{Metrics, MetricsObserver};
pub use ratelimit::RateLimitLayer;
pub use retry::RetryPolicy;
pub use serve::{serve, ServeConfig};
pub use store::{KubeStore, StoreOptions};
