//! `placer validate FILE...`: the checks of `simulate` without running anything.
//!
//! Exit code 0 when every file is valid (or is a bad-input case rejected with the error
//! its `expect.error` names), 2 otherwise.

use std::io::Write;
use std::path::PathBuf;

use placer_sim::load_file;

use crate::output::{write_expected_rejection, write_load_error, PASS, RESET};
use crate::Status;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scenario files (format: docs/scenario-format.md in the Placer repository).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    let mut out = anstream::stdout();
    let mut status = Status::Pass;
    for file in &args.files {
        match load_file(file) {
            Ok(s) => writeln!(
                out,
                "{PASS}ok{RESET} {} ({}: {} nodes, {} objects submitted, {} steps)",
                file.display(),
                s.name,
                s.node_count(),
                s.submit.len(),
                s.steps.len()
            )?,
            Err(e) if e.is_expected() => write_expected_rejection(&mut out, file, &e)?,
            Err(e) => {
                out.flush()?;
                write_load_error(&mut anstream::stderr(), &e)?;
                status = Status::BadInput;
            }
        }
    }
    out.flush()?;
    Ok(status)
}
