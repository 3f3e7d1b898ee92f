//! `placer validate FILE...`: the checks of `simulate` without running anything.
//!
//! Exit code 0 when every file is valid (or is a bad-input case rejected with the error
//! its `expect.error` names), 2 otherwise. A valid file may get warnings (exit code 0):
//! what is accepted at creation but will not work, e.g. a CronJob whose Jobs Kueue's Job
//! webhook will refuse.

use crate::input::{resolve_or_report, InputArgs, SetArgs};
use std::io::Write;

use crate::output::{write_expected_rejection, write_load_error, PASS, RESET, WARN};
use crate::Status;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    input: InputArgs,
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    let mut out = anstream::stdout();
    let mut status = Status::Pass;
    let Some(inputs) = resolve_or_report(&args.input, &SetArgs::default()) else {
        return Ok(Status::BadInput);
    };
    for file in &inputs.entries() {
        match inputs.load(file) {
            Ok(s) => {
                writeln!(
                    out,
                    "{PASS}ok{RESET} {} ({}: {} nodes, {} objects submitted, {} steps)",
                    file.display(),
                    s.name,
                    s.node_count(),
                    s.submit.len(),
                    s.steps.len()
                )?;
                for w in placer_sim::warnings(&s, inputs.plain_text(file).as_deref()) {
                    writeln!(out, "  {WARN}warning:{RESET} {}", w.render(file))?;
                }
            }
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
