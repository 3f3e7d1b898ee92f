//! Placer's simulator: scenario files in, a cluster run on the embedded store out.
//!
//! A scenario (format: `shared/scenarios/FORMAT.md`) describes a cluster, what is
//! submitted to it, optional steps, and what must come out. This crate
//!
//! * loads it ([`load_file`], [`load_str`]): YAML parsing with file/line/column errors,
//!   manifests typed straight into k8s-openapi structs, and validation of everything
//!   before anything runs ([`LoadError`], [`Problem`]);
//! * runs it ([`run`]): an [`placer_cluster::embedded::EmbeddedCluster`] with the Job
//!   controller, the scheduler and a simulated kubelet, settled after the submissions and
//!   after every step, on a virtual clock ([`RunOptions`], [`RunReport`]);
//! * checks its expectations ([`expect`]) and summarizes the outcome ([`report`]);
//! * records the scheduler's metrics (`placer_metrics`, the implementation `placer serve`
//!   exposes too).
//!
//! [`simulate_file`] does all of it for one file, the way `placer simulate` and the
//! conformance suite use it.

pub mod expect;
pub mod explain;
pub mod failure_bench;
pub mod generate;
pub mod inputs;
pub mod kubelet;
pub mod lifecycle;
pub mod load;
pub mod report;
pub mod run;
pub mod scenario;
pub mod snapshot;
mod validate;
pub mod whatif;
mod yaml_walk;

use std::path::Path;

pub use expect::{CheckReport, Failure};
pub use inputs::{expand_paths, read_input};
pub use load::{load_file, load_str, warnings, LoadError, Problem};
pub use placer_metrics::{Clock as MetricsClock, Metrics};
pub use report::{ClusterSummary, GroupRow, GroupState};
pub use run::{
    add_admission_plugins, add_admission_plugins_for, run, scheduler_config, setup_cluster, RunError,
    RunOptions, RunReport, TimelineSample,
};
pub use scenario::Scenario;
pub use snapshot::{load_snapshot, load_snapshot_str, Snapshot};

/// What became of one scenario file.
#[derive(Debug)]
pub enum Outcome {
    /// It ran; the report says whether its expectations held.
    Ran(Box<RunReport>),
    /// It is a bad-input case and was rejected with the error its `expect.error` names.
    RejectedAsExpected(LoadError),
}

impl Outcome {
    /// True when the scenario's expectations hold.
    pub fn passed(&self) -> bool {
        match self {
            Outcome::Ran(r) => r.passed(),
            Outcome::RejectedAsExpected(_) => true,
        }
    }
}

/// Why a scenario file could not be simulated.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// Bad input: the file could not be read, parsed or validated.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The run could not complete.
    #[error(transparent)]
    Run(#[from] RunError),
}

/// Loads, validates and runs one file.
pub fn simulate_file(path: impl AsRef<Path>, opts: &RunOptions) -> Result<Outcome, SimulateError> {
    match load_file(path) {
        Ok(s) => Ok(Outcome::Ran(Box::new(run(&s, opts)?))),
        Err(e) if e.is_expected() => Ok(Outcome::RejectedAsExpected(e)),
        Err(e) => Err(e.into()),
    }
}
