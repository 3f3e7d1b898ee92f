//! `placer config`: the effective scheduling profile as a KubeSchedulerConfiguration.
//!
//! Prints, as YAML, every plugin each extension point runs (in order), score plugins with
//! their weights, and every plugin's arguments (`pluginConfig`), for Placer's defaults, a
//! scenario's `scheduler` block (`--scenario`) or a `placer serve` configuration file
//! (`--serve-config`). The listing comes from the plugin registry, so every plugin Placer
//! has shows up without this command knowing it.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use placer_engine::SchedulerConfig;

use crate::output::write_load_error;
use crate::Status;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The profile of this scenario file's `scheduler` block.
    #[arg(long, value_name = "FILE", conflicts_with = "serve_config")]
    scenario: Option<PathBuf>,
    /// The profile of this `placer serve` configuration file.
    #[arg(long, value_name = "FILE")]
    serve_config: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    let config: SchedulerConfig = if let Some(file) = &args.scenario {
        match placer_sim::load_file(file) {
            Ok(s) => match placer_sim::scheduler_config(&s) {
                Ok(c) => c,
                Err(message) => {
                    eprintln!("{}: scheduler: {message}", file.display());
                    return Ok(Status::BadInput);
                }
            },
            Err(e) => {
                write_load_error(&mut anstream::stderr(), &e)?;
                return Ok(Status::BadInput);
            }
        }
    } else if let Some(file) = &args.serve_config {
        match placer_kube::config::load(file) {
            Ok(settings) => settings.scheduler,
            Err(e) => {
                eprintln!("{e}");
                return Ok(Status::BadInput);
            }
        }
    } else {
        SchedulerConfig::default()
    };
    let doc = placer_engine::effective_configuration(&config);
    let text = serde_saphyr::to_string(&doc).context("writing YAML")?;
    let mut out = anstream::stdout();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(Status::Pass)
}
