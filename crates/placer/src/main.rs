//! `placer`: the command-line entry point of Placer, a topology-aware gang scheduler for
//! Kubernetes.
//!
//! One module per subcommand: [`simulate`] runs scenario files on the embedded cluster,
//! [`validate`] only checks them, [`cluster`] serves the embedded cluster over the
//! Kubernetes API, [`serve`] schedules a real cluster, [`bench`] measures the engine.
//! [`output`] holds the rendering they share. Adding a
//! subcommand means a module with an `Args` struct (clap derive) and a `run` function
//! returning a [`Status`], and one variant in [`Command`].
//!
//! Exit codes: 0 when every expectation holds, 1 when one does not (or a run could not
//! complete), 2 on bad input (unreadable, malformed or invalid files, bad arguments).

mod bench;
mod cluster;
mod compare;
mod config;
mod explain;
mod html;
mod input;
mod output;
mod replay;
mod serve;
mod simulate;
mod validate;

use std::process::ExitCode;

/// mimalloc instead of glibc's malloc: the simulator and the engine allocate and free many
/// small objects (Kubernetes objects, strings, per-attempt vectors). On the 50,000-node
/// `placer simulate` file it cut wall time by about a tenth (system time by a third), and
/// `placer bench`'s ingest by about a tenth. Built with `no_thp`: with transparent huge
/// pages allowed, mimalloc's page faults stalled now and then on compaction, which tripled
/// `b-mixed`'s p99 per decision in half the runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};

/// Placer: a topology-aware gang scheduler for Kubernetes.
#[derive(Debug, Parser)]
#[command(name = "placer", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run scenario files on the embedded cluster and check their expectations.
    ///
    /// The scenario format (every field, with an example) is documented in
    /// docs/scenario-format.md of the Placer repository.
    Simulate(simulate::Args),
    /// Check scenario files (syntax, types, validation) without running them.
    Validate(validate::Args),
    /// Run a scenario and explain each PodGroup's decision: candidate domains with free
    /// capacity and pods that fit, what the closest one lacks, filter rejections.
    Explain(explain::Args),
    /// Run a scenario as written and with `--set` overrides; print what changed per
    /// PodGroup and the two cluster summaries side by side.
    Compare(compare::Args),
    // No doc comment: it would replace the long help defined in `serve`.
    Serve(serve::ServeArgs),
    // No doc comment: the long help is defined in `cluster`.
    Cluster(cluster::Args),
    /// Measure the engine: throughput, decision latency, scaling, optimized vs baseline.
    Bench(bench::Args),
    /// Replay traces under several placement semantics and compare placement quality.
    Replay(replay::Args),
    /// Print the effective scheduling profile (every plugin with its weight and args) as a
    /// KubeSchedulerConfiguration: Placer's defaults, a scenario's or a serve config's.
    Config(config::Args),
}

/// Outcome of a command, ordered by severity (the worst file decides the exit code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// Everything holds.
    Pass = 0,
    /// An expectation failed, or a run could not complete.
    Fail = 1,
    /// Bad input.
    BadInput = 2,
}

impl From<Status> for ExitCode {
    fn from(s: Status) -> ExitCode {
        ExitCode::from(s as u8)
    }
}

fn init_tracing(default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("PLACER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    // A second initialization (never happens in the binary) would only be ignored.
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(_) => {} // `serve` sets up its own logging
        Command::Cluster(_) => init_tracing("info"),
        _ => init_tracing("warn"),
    }
    let result = match cli.command {
        Command::Simulate(args) => simulate::run(args),
        Command::Validate(args) => validate::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Cluster(args) => cluster::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Config(args) => config::run(args),
    };
    match result {
        Ok(status) => status.into(),
        Err(e) => {
            let broken_pipe = e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            });
            if broken_pipe {
                // The reader went away (`placer simulate ... | head`): nothing left to say.
                return ExitCode::SUCCESS;
            }
            anstream::eprintln!("{}error:{} {e:#}", output::ERROR, output::RESET);
            Status::BadInput.into()
        }
    }
}
