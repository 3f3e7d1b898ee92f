//! The inputs the scenario commands share: scenario files, directories of them, `-` for
//! stdin, and `--snapshot DUMP` (a `kubectl get ... -o yaml` dump as the cluster).

use std::io::Write;
use std::path::{Path, PathBuf};

use placer_sim::whatif::{apply_settings, parse_setting, Setting};
use placer_sim::{expand_paths, load_file, load_snapshot, LoadError, Scenario, Snapshot};

use crate::output::{write_load_error, RESET, WARN};

/// Arguments naming what to run.
#[derive(Debug, Clone, clap::Args)]
pub struct InputArgs {
    /// Scenario files, directories (every *.yaml / *.yml inside, sorted) or `-` for stdin
    /// (format: docs/scenario-format.md in the Placer repository).
    #[arg(value_name = "FILE", required_unless_present = "snapshot")]
    pub files: Vec<PathBuf>,
    /// A cluster dump, the output of `kubectl get nodes,pods,podgroups,workloads,
    /// priorityclasses,namespaces -A -o yaml` (a List, or several documents): its nodes
    /// and bound pods become the cluster, its other objects are submitted first (Pending
    /// pods get scheduled). Kinds not simulated are skipped with a one-line summary.
    /// Without FILE the dump is simulated on its own.
    #[arg(long, value_name = "DUMP")]
    pub snapshot: Option<PathBuf>,
}

/// `--set PATH=VALUE`, for the commands that run scenarios.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SetArgs {
    /// What-if: override the scheduler configuration, e.g.
    /// `scheduler.featureGates.TASBalancedPlacement=true` or
    /// `scheduler.profile.topologyLevels=[block,rack]` (PATH below `scheduler`, VALUE in
    /// YAML). Repeatable; applied in order, then the scenario is validated again.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    pub sets: Vec<String>,
}

impl SetArgs {
    /// The parsed settings, or the first malformed one.
    pub fn settings(&self) -> Result<Vec<Setting>, String> {
        self.sets.iter().map(|s| parse_setting(s)).collect()
    }
}

/// The resolved inputs: file list and the loaded dump.
pub struct Inputs {
    /// Scenario files in order (`-` for stdin); empty with a dump alone.
    pub files: Vec<PathBuf>,
    snapshot: Option<Snapshot>,
    settings: Vec<Setting>,
}

impl Inputs {
    /// Expands directories and loads the dump. Errors are bad input.
    pub fn resolve(args: &InputArgs, settings: Vec<Setting>) -> Result<Inputs, LoadError> {
        let files = expand_paths(&args.files)?;
        let snapshot = args.snapshot.as_ref().map(load_snapshot).transpose()?;
        if let Some(summary) = snapshot.as_ref().and_then(Snapshot::skipped_summary) {
            let _ = writeln!(anstream::stderr(), "{WARN}note:{RESET} {summary}");
        }
        Ok(Inputs { files, snapshot, settings })
    }

    /// What to load, in order: each file, or the dump itself when there is no file.
    pub fn entries(&self) -> Vec<PathBuf> {
        match (&self.snapshot, self.files.is_empty()) {
            (Some(s), true) => vec![s.file.clone()],
            _ => self.files.clone(),
        }
    }

    /// Loads the scenario of one entry (merged with the dump, if any).
    pub fn load(&self, entry: &PathBuf) -> Result<Scenario, LoadError> {
        let scenario = self.load_plain(entry)?;
        if self.settings.is_empty() {
            Ok(scenario)
        } else {
            apply_settings(&scenario, &self.settings)
        }
    }

    /// The text of a plain scenario file, to place messages on its lines (none for stdin,
    /// which was read already, or with a dump merged in, whose objects shift the file's).
    pub fn plain_text(&self, entry: &Path) -> Option<String> {
        if self.snapshot.is_some() || entry.as_os_str() == "-" {
            return None;
        }
        placer_sim::read_input(entry).ok()
    }

    /// The scenario of one entry without the `--set` overrides.
    pub fn load_plain(&self, entry: &PathBuf) -> Result<Scenario, LoadError> {
        match &self.snapshot {
            Some(s) if self.files.is_empty() => s.clone().into_scenario(),
            Some(s) => s.clone().merge_into(load_file(entry)?),
            None => load_file(entry),
        }
    }
}

/// Resolves the inputs or reports why not (exit code 2).
pub fn resolve_or_report(args: &InputArgs, sets: &SetArgs) -> Option<Inputs> {
    let settings = match sets.settings() {
        Ok(s) => s,
        Err(message) => {
            let _ = writeln!(anstream::stderr(), "{}error:{RESET} {message}", crate::output::ERROR);
            return None;
        }
    };
    match Inputs::resolve(args, settings) {
        Ok(i) => Some(i),
        Err(e) => {
            let _ = write_load_error(&mut anstream::stderr(), &e);
            None
        }
    }
}
