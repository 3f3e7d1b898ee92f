//! Controllers that run over a [`ClusterStore`]: the scheduler driver ([`scheduler`]) that
//! feeds store changes to the engine and carries out its decisions, and the Job
//! controller ([`job`]) with the Workload / PodGroup integration of KEP-5547, and a
//! minimal CronJob controller ([`cronjob`]), and the ResourceClaim controller
//! ([`resourceclaim`]) that generates DRA claims for pods and PodGroups.
//!
//! A controller is level-driven: [`Controller::reconcile`] reads what changed since its
//! last call (through the store's watch) and writes what follows from it.

pub mod cronjob;
pub mod ephemeral;
pub mod job;
pub mod persistentvolume;
pub mod resourceclaim;
pub mod scheduler;

use placer_cluster::ClusterStore;

/// A controller error worth reporting (the controller retries on its next reconcile).
#[derive(Debug, thiserror::Error)]
#[error("{controller}: {message}")]
pub struct ControllerError {
    pub controller: &'static str,
    pub message: String,
}

/// One controller of the control loop.
pub trait Controller {
    fn name(&self) -> &'static str;
    /// Processes every store change since the last call. Returns true when it wrote
    /// anything (so the loop runs again until nothing changes).
    fn reconcile(&mut self, store: &mut dyn ClusterStore) -> Result<bool, ControllerError>;
    /// The earliest store time (ms) at which the controller has timed work (backoff,
    /// a pod's run time), if any.
    fn next_wakeup_ms(&self) -> Option<u64>;
    /// The earliest retry (backoff) among [`Controller::next_wakeup_ms`]: what a settling
    /// loop may skip ahead to, unlike timers that model the passing of time (a node's
    /// failure delay).
    fn next_retry_ms(&self) -> Option<u64> {
        self.next_wakeup_ms()
    }
}
