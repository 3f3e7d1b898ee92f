//! `placer replay [TRACE...]`: placement quality, measured (crate `placer-lab`).
//!
//! Replays traces (files, or the built-in workloads when none is given) through the full
//! simulator under several configurations and prints, per trace, one table side by side:
//! utilisation, gang wait percentiles, completions, domains per gang, fragmentation, and
//! the best configuration per measure. `--plot FILE` writes the timelines (utilisation and
//! pending gangs per configuration) as a standalone SVG or a self-contained HTML page.
//! Trace format and figures: docs/replay.md.
//!
//! Exit code 0 after a run, 2 on bad input (a trace that does not load, an unknown
//! configuration or built-in name), 1 when a replay could not complete.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use placer_lab::{configs, generators, plot, report, trace, ReplayOptions, Trace, TraceReport};

use crate::Status;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Trace files (YAML, see docs/replay.md). Without any, the built-in workloads run.
    #[arg(value_name = "TRACE")]
    traces: Vec<PathBuf>,
    /// Built-in workloads to run (comma-separated): kueue-tas, gpu-training, mixed, all.
    /// Default: all of them when no trace file is given.
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    builtin: Vec<String>,
    /// Configurations to compare (comma-separated ids, or `all`). Default: kep5732,
    /// tas-bestfit, tas-lfc, tas-balanced, placer.
    #[arg(long, value_name = "IDS", value_delimiter = ',')]
    configs: Vec<String>,
    /// Seed of the built-in generators.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Scale the built-in workloads (workloads and nodes; 1.0 = full size).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Replays run at once (default: the available cores).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Write the timelines to FILE: `.html` (page with charts and tables) or `.svg`.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Print the summaries as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Write the (single) selected built-in trace to FILE as YAML and exit, to edit or
    /// replay it later.
    #[arg(long, value_name = "FILE")]
    write_trace: Option<PathBuf>,
}

fn load(args: &Args) -> anyhow::Result<Result<Vec<Trace>, String>> {
    if !(args.scale > 0.0 && args.scale <= 10.0) {
        return Ok(Err(format!(
            "--scale {} is out of range: expected more than 0 and at most 10",
            args.scale
        )));
    }
    let mut traces = Vec::new();
    for file in &args.traces {
        match trace::load_file(file) {
            Ok(t) => traces.push(t),
            Err(e) => return Ok(Err(e.to_string())),
        }
    }
    let names: Vec<String> =
        if args.builtin.iter().any(|b| b == "all") || (args.builtin.is_empty() && args.traces.is_empty()) {
            generators::BUILTIN.iter().map(|s| s.to_string()).collect()
        } else {
            args.builtin.clone()
        };
    for name in names {
        match generators::builtin(&name, args.seed, args.scale) {
            Ok(t) => traces.push(t),
            Err(e) => return Ok(Err(e)),
        }
    }
    Ok(Ok(traces))
}

pub fn run(args: Args) -> anyhow::Result<Status> {
    let traces = match load(&args)? {
        Ok(t) => t,
        Err(message) => {
            anstream::eprintln!("{}error:{} {message}", crate::output::ERROR, crate::output::RESET);
            return Ok(Status::BadInput);
        }
    };
    if let Some(out) = &args.write_trace {
        let [t] = traces.as_slice() else {
            anstream::eprintln!(
                "{}error:{} --write-trace needs exactly one trace",
                crate::output::ERROR,
                crate::output::RESET
            );
            return Ok(Status::BadInput);
        };
        std::fs::write(out, trace::to_yaml(t)).with_context(|| format!("writing {}", out.display()))?;
        return Ok(Status::Pass);
    }
    let selected = if args.configs.is_empty() {
        configs::defaults()
    } else {
        match configs::select(&args.configs) {
            Ok(c) => c,
            Err(message) => {
                anstream::eprintln!("{}error:{} {message}", crate::output::ERROR, crate::output::RESET);
                return Ok(Status::BadInput);
            }
        }
    };
    if cfg!(debug_assertions) {
        tracing::warn!("placer replay in a debug build: replays are slow (use --release)");
    }
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let terminal = std::io::stderr().is_terminal();
    let mut reports: Vec<TraceReport> = Vec::new();
    let mut status = Status::Pass;
    for t in &traces {
        let multi = MultiProgress::new();
        if !terminal {
            multi.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        let bars: Vec<ProgressBar> = selected
            .iter()
            .map(|c| {
                let pb = multi.add(ProgressBar::new(t.arrivals.len() as u64));
                if let Ok(style) =
                    ProgressStyle::with_template("{prefix:>28} {bar:30} {pos}/{len} arrived {wide_msg}")
                {
                    pb.set_style(style);
                }
                pb.set_prefix(format!("{} {}", t.name, c.id));
                pb
            })
            .collect();
        let ids: Vec<&'static str> = selected.iter().map(|c| c.id).collect();
        let bars = Arc::new(bars);
        let progress_bars = Arc::clone(&bars);
        let opts = ReplayOptions {
            progress: Some(Arc::new(move |config: &str, t_ms: u64, arrived: usize, completed: usize| {
                if let Some(i) = ids.iter().position(|c| *c == config) {
                    progress_bars[i].set_position(arrived as u64);
                    progress_bars[i].set_message(format!(
                        "{completed} done, t={}",
                        report::fmt_secs(Some(t_ms as f64 / 1000.0))
                    ));
                }
            })),
        };
        let result = placer_lab::run_lab(t, &selected, &opts, threads);
        for b in bars.iter() {
            b.finish_and_clear();
        }
        match result {
            Ok(r) => {
                if !args.json {
                    let mut out = std::io::stdout().lock();
                    out.write_all(report::render_text(&r).as_bytes())?;
                    writeln!(out)?;
                    out.flush()?;
                }
                reports.push(r);
            }
            Err(e) => {
                anstream::eprintln!("{}error:{} {}: {e}", crate::output::ERROR, crate::output::RESET, t.name);
                status = Status::Fail;
            }
        }
    }
    if args.json {
        let json = serde_json::to_string_pretty(&reports)?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "{json}")?;
        out.flush()?;
    }
    if let Some(file) = &args.plot {
        let text = match file.extension().and_then(|e| e.to_str()) {
            Some("svg") => plot::svg(&reports),
            _ => plot::html(&reports),
        };
        std::fs::write(file, text).with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(status)
}
