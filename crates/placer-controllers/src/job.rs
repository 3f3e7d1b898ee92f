//! The Job controller with the Workload / PodGroup integration of KEP-5547 (seed 001).

use placer_api::gates::FeatureGates;
use placer_cluster::{Admission, ClusterStore, Object};

use crate::{Controller, ControllerError};

/// Owns Jobs: creates their pods (and, for gang-shaped Jobs, Workload + PodGroup first),
/// counts results, keeps Job status.
pub struct JobController {
    gates: FeatureGates,
    seen_rv: u64,
}

impl JobController {
    pub fn new(gates: FeatureGates) -> Self {
        JobController { gates, seen_rv: 0 }
    }
}

impl Controller for JobController {
    fn name(&self) -> &'static str {
        "job-controller"
    }

    fn reconcile(&mut self, _store: &mut dyn ClusterStore) -> Result<bool, ControllerError> {
        let _ = (&self.gates, self.seen_rv);
        Ok(false)
    }

    fn next_wakeup_ms(&self) -> Option<u64> {
        None
    }
}

/// Admission check for Jobs: rejects a change of `spec.parallelism` on a gang-scheduled
/// Job (seed 001, "Validation for Parallelism Changes").
pub struct JobValidation {
    gates: FeatureGates,
}

impl JobValidation {
    pub fn new(gates: FeatureGates) -> Self {
        JobValidation { gates }
    }
}

impl Admission for JobValidation {
    fn admit(&self, _store: &dyn ClusterStore, _old: Option<&Object>, _new: &Object) -> Result<(), String> {
        let _ = &self.gates;
        Ok(())
    }
}
