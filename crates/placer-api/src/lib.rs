//! Kubernetes API types Placer works with, and the small vocabulary around them.
//!
//! * [`k8s`] re-exports `k8s-openapi` built for Kubernetes v1.36 (the only crate of the
//!   workspace that enables a version feature), so every other crate names the real types:
//!   `Pod`, `Node`, `Job`, `PriorityClass`, and `scheduling.k8s.io/v1alpha2` `Workload` /
//!   `PodGroup`.
//! * [`quantity`] parses resource quantities exactly (fixed point, no floats).
//! * [`gates`] holds the feature gates named in the seeds, with their defaults.
//! * [`names`] checks names, label keys and label values as the API server does.
//! * [`annotations`] names the Kueue topology annotations Placer accepts on PodGroups.

pub mod annotations;
pub mod gates;
pub mod names;
pub mod quantity;

pub use k8s_openapi as k8s;
