//! Writes the driver hands off instead of carrying them out on the scheduling thread.
//!
//! kube-scheduler assumes a pod on its node at the end of the scheduling cycle and binds it
//! in a goroutine of its own, so the next cycle starts at once. With a [`Dispatcher`] the
//! driver does the same: the engine has already assumed every [`Decision::Bind`]
//! (`placer_engine::Decision`), the driver hands the binding to the dispatcher and moves
//! on; outcomes come back through [`Dispatcher::completed`] on a later reconcile. Status
//! updates go the same way (at most one write per object and reconcile, in order per
//! object). Without a dispatcher (the simulator) every write is synchronous, as before.

use placer_cluster::{Object, StoreError};
use placer_engine::{GroupKey, PodKey};

/// A binding to carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindCall {
    pub pod: PodKey,
    pub uid: String,
    pub node: String,
    /// The PodGroup the pod belongs to, if any (a gang's queued bindings can be cancelled
    /// together).
    pub group: Option<GroupKey>,
}

/// How a binding ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindResult {
    /// The API server bound the pod.
    Bound,
    /// It failed for good (after the dispatcher's own retries of transient errors).
    Failed(StoreError),
    /// Never sent: [`Dispatcher::cancel_group`] released its group first.
    Cancelled,
}

/// A finished binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindOutcome {
    pub call: BindCall,
    pub result: BindResult,
}

/// A status write: the object as the driver wants it, and the status it was computed
/// from (so a write that conflicts is re-applied on a fresh copy with only the driver's
/// changes).
#[derive(Debug, Clone, PartialEq)]
pub struct StatusCall {
    pub object: Object,
    pub base: Option<serde_json::Value>,
}

/// Carries out writes concurrently, off the scheduling thread.
pub trait Dispatcher: Send {
    /// Starts a binding (bounded concurrency; queued beyond the bound).
    fn bind(&mut self, call: BindCall);
    /// Starts a status write; writes to one object run in the order given.
    fn update_status(&mut self, call: StatusCall);
    /// Cancels the bindings of `group` that have not been sent yet; they come back as
    /// [`BindResult::Cancelled`].
    fn cancel_group(&mut self, group: &GroupKey);
    /// Bindings finished since the last call.
    fn completed(&mut self) -> Vec<BindOutcome>;
    /// Bindings started and not yet reported through [`Dispatcher::completed`].
    fn in_flight(&self) -> usize;
}
