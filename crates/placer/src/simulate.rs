//! `placer simulate FILE...`: runs scenarios on the embedded cluster.
//!
//! For every file: a result line (PASS / FAIL), the PodGroup table, a cluster summary and
//! every failed expectation (`expected X, got Y`). `--output json|yaml` writes the final
//! objects of every run to stdout as a `v1` `List` per scenario (the human-readable
//! report then goes to stderr); `--metrics FILE` writes the scheduler's metrics of all
//! the runs (OpenMetrics text, wall-clock durations, the families `placer serve` exposes
//! on `/metrics`) to FILE, apart from the report.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressStyle};
use placer_sim::{RunOptions, RunReport};

use crate::input::{resolve_or_report, InputArgs, SetArgs};

use crate::output::{
    event_objects, write_events, write_expected_rejection, write_load_error, write_report, FAIL, RESET,
};
use crate::Status;

/// Clusters at least this large get a spinner while they run.
const LARGE: usize = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Json,
    Yaml,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    set: SetArgs,
    /// Write the final objects (all kinds) to stdout in this format.
    #[arg(long, short = 'o', value_enum, value_name = "FORMAT")]
    output: Option<Format>,
    /// Write the scheduler's metrics of all runs to FILE (OpenMetrics text format,
    /// wall-clock durations), as `placer serve` exposes them on /metrics.
    #[arg(long, value_name = "FILE")]
    metrics: Option<PathBuf>,
    /// Print the events the run recorded (scheduler, Job controller, kubelet) after the
    /// table. JSON / YAML output always includes them, as v1 Event objects.
    #[arg(long)]
    events: bool,
    /// Write a self-contained HTML report to FILE: the topology as nested boxes with each
    /// node's use per resource coloured by PodGroup, the PodGroups not fully bound with
    /// their reason, the PodGroup table, and a timeline when virtual time advanced. With
    /// several scenarios, FILE gets the first; the others go next to it as
    /// `FILE-<scenario>.html`.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
}

/// The objects of a run as a `v1` `List`.
fn object_list(report: &RunReport) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {},
        "items": report
            .objects
            .iter()
            .map(|o| o.to_json())
            .chain(event_objects(report))
            .collect::<Vec<_>>(),
    })
}

fn progress_bar(files: usize) -> ProgressBar {
    if files < 2 {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(files as u64);
    if let Ok(style) = ProgressStyle::with_template("{bar:30} {pos}/{len} {wide_msg}") {
        pb.set_style(style);
    }
    pb
}

/// Where the report of the `index`-th run goes.
fn report_path(path: &std::path::Path, index: usize, name: &str) -> PathBuf {
    if index == 0 {
        return path.to_path_buf();
    }
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("report");
    path.with_file_name(format!("{stem}-{name}.html"))
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    let machine = args.output.is_some();
    // Human-readable text goes to stderr when stdout carries machine output.
    let mut human: Box<dyn Write> =
        if machine { Box::new(anstream::stderr()) } else { Box::new(anstream::stdout()) };
    let Some(inputs) = resolve_or_report(&args.input, &args.set) else { return Ok(Status::BadInput) };
    let files = inputs.entries();
    // One scenario: the process ends after it, and the operating system takes the memory
    // back faster than freeing 50,000 nodes object by object.
    let skip_teardown = files.len() == 1;
    let pb = progress_bar(files.len());
    let metrics = args
        .metrics
        .as_ref()
        .map(|_| placer_sim::Metrics::new("default-scheduler", placer_sim::MetricsClock::Wall));
    let mut status = Status::Pass;
    let mut reports = Vec::new();
    for file in &files {
        pb.set_message(file.display().to_string());
        let scenario = match inputs.load(file) {
            Ok(s) => s,
            Err(e) if e.is_expected() => {
                pb.suspend(|| write_expected_rejection(&mut human, file, &e))?;
                pb.inc(1);
                continue;
            }
            Err(e) => {
                // Errors go to stderr, whatever stdout carries.
                pb.suspend(|| write_load_error(&mut anstream::stderr(), &e))?;
                status = status.max(Status::BadInput);
                pb.inc(1);
                continue;
            }
        };
        let spinner =
            (files.len() < 2 && scenario.node_count().max(scenario.submit.len()) >= LARGE).then(|| {
                let s = ProgressBar::new_spinner();
                s.enable_steady_tick(Duration::from_millis(120));
                s
            });
        let shown = spinner.clone().unwrap_or_else(|| pb.clone());
        let opts = RunOptions {
            wall_clock_metrics: metrics.is_some(),
            metrics: metrics.clone(),
            progress: Some(Arc::new(move |phase: &str| shown.set_message(phase.to_string()))),
            timeline: args.report.is_some(),
            skip_teardown,
            ..RunOptions::default()
        };
        let result = placer_sim::run(&scenario, &opts);
        if let Some(s) = spinner {
            s.finish_and_clear();
        }
        match result {
            Ok(report) => {
                pb.suspend(|| {
                    write_report(&mut human, &report)?;
                    if args.events {
                        write_events(&mut human, &report)?;
                    }
                    Ok::<(), std::io::Error>(())
                })?;
                if !report.passed() {
                    status = status.max(Status::Fail);
                }
                if let Some(path) = &args.report {
                    let path = report_path(path, reports.len(), &report.name);
                    std::fs::write(&path, crate::html::render(&report))
                        .with_context(|| format!("cannot write the report to {}", path.display()))?;
                }
                reports.push(report);
            }
            Err(e) => {
                pb.suspend(|| writeln!(anstream::stderr(), "{FAIL}FAIL{RESET} {e}"))?;
                status = status.max(Status::Fail);
            }
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    human.flush()?;
    if let (Some(path), Some(metrics)) = (&args.metrics, &metrics) {
        std::fs::write(path, metrics.render())
            .with_context(|| format!("cannot write the metrics to {}", path.display()))?;
    }
    if let Some(format) = args.output {
        let mut out = std::io::stdout().lock();
        for (i, report) in reports.iter().enumerate() {
            let list = object_list(report);
            match format {
                Format::Json => {
                    serde_json::to_writer_pretty(&mut out, &list).context("writing JSON")?;
                    writeln!(out)?;
                }
                Format::Yaml => {
                    if i > 0 {
                        writeln!(out, "---")?;
                    }
                    let text = serde_saphyr::to_string(&list).context("writing YAML")?;
                    write!(out, "{text}")?;
                }
            }
        }
        out.flush()?;
    }
    if skip_teardown {
        // `main` returns right after this.
        std::mem::forget(reports);
    }
    Ok(status)
}
