//! Placer's scheduling engine: a pure, synchronous library.
//!
//! Cluster objects go in as [`ClusterEvent`]s, scheduling decisions come out as
//! [`Decision`]s. There is no I/O, no clock and no async here: time is passed in (virtual
//! milliseconds), durations are measured by the [`Observer`] the caller hands in. The
//! simulator, the real-cluster mode, the benchmarks and the tests all drive this same
//! [`Engine`].
//!
//! Layers, bottom up:
//! * [`resources`], [`model`]: resource vectors, the engine's view of pods and nodes.
//! * [`snapshot`]: nodes with their pods and requested resources, updated incrementally,
//!   with assume / checkpoint / rollback for simulating placements.
//! * [`framework`]: extension points (filter, score, placement generate, placement score,
//!   placement feasible) as small traits, plugins registered by name with weights.
//! * [`plugins`]: kube-scheduler's pod-level plugins and the placement plugins.
//! * [`schedule_one`]: the pod-level algorithm (filter, score, select) over a node set.
//! * [`podgroup`]: the PodGroup scheduling cycle (gang / basic), run inside a placement.
//! * [`placement`]: KEP-5732 placement generation, feasibility, scoring and selection.
//! * [`tas`]: hierarchical topology-aware scheduling (seed 002: Kueue's algorithms).
//! * [`preemption`]: per-pod and workload-aware preemption.
//! * [`queue`]: the scheduling queue (priority, gates, backoff, PreEnqueue for gangs).
//! * [`engine`]: the facade tying them together.

pub mod config;
pub mod engine;
pub mod framework;
pub mod model;
pub mod observer;
pub mod placement;
pub mod plugins;
pub mod podgroup;
pub mod preemption;
pub mod queue;
pub mod resources;
pub mod schedule_one;
pub mod snapshot;
pub mod strategy;
pub mod tas;

pub use config::SchedulerConfig;
pub use engine::{ClusterEvent, Decision, Engine};
pub use observer::{NoopObserver, Observer};
