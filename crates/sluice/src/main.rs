//! `sluice`: run, plan and benchmark streaming applications. A thin entry point: each
//! subcommand lives in its own module.
#![forbid(unsafe_code)]

mod apps;
mod checkpoint_figures;
mod checkpointing;
mod checkpoints;
mod companions;
mod config;
mod ending;
mod feed;
mod jobs;
mod logs;
mod observe;
mod online;
mod optimize;
mod plan;
mod plan_choice;
mod query;
mod run;
mod savepoint;
mod shell;
mod stdout;
mod top;
mod ui;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Sluice: a low-latency stream processing engine.
#[derive(Parser)]
#[command(name = "sluice", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a built-in application.
    Run(run::RunArgs),
    /// Print the physical plan of an application: threads, operators, edges, transports.
    Plan(plan::PlanArgs),
    /// List the built-in applications.
    Apps,
    /// Run SCSQL queries: continuous queries whose stream processes run as a job.
    Query(query::QueryArgs),
    /// Measure a transport: throughput or latency, beside a baseline measured in the same run.
    #[cfg(feature = "bench")]
    Bench(sluice_bench::BenchArgs),
    /// Send, record or print the synthetic OPRA-style options feed.
    Feed(feed::FeedArgs),
    /// Show the configuration `sluice run` would use: from the command line, the environment
    /// (SLUICE_*), a file (--config) and the defaults.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// List the running jobs of this user on this host.
    Jobs,
    /// Drain and stop a running job, as Ctrl-C does in its terminal.
    Stop(jobs::StopArgs),
    /// Watch a running job live in the terminal: rates, queues, backpressure, latency.
    Top(top::TopArgs),
    /// List a job's checkpoints and savepoints: size, duration, alignment, complete or not.
    Checkpoints(checkpoints::CheckpointsArgs),
    /// Take a savepoint of a running checkpointed job: its next checkpoint, kept in a
    /// directory of its own (`sluice run APP --from DIR` starts from it).
    Savepoint(savepoint::SavepointArgs),
    /// Serve a REST API and a web page of every job of this user on this host, running and
    /// ended: list, watch, stop, savepoint.
    Ui(ui::UiArgs),
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Print every option and setting of `sluice run` with the same arguments, its effective
    /// value, and where that came from.
    Show(run::RunArgs),
}

/// Parses the command line, with what the environment and a configuration file add to `run`
/// (see [`config`]); `sluice run NAME --help` also lists NAME's settings and plans.
fn parse() -> anyhow::Result<(Cli, config::Effective)> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let mut command = Cli::command();
    if let Some(app) = apps::help_asked_for(&args) {
        command = command.mut_subcommand("run", |run| run.after_help(apps::help(app)));
    }
    let matches = command.clone().get_matches_from(&args);
    let (args, effective) = config::resolve(args, &command, &matches, std::env::vars_os())?;
    let matches = command.get_matches_from(args);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    Ok((cli, effective))
}

fn main() {
    let result = parse().and_then(|(cli, effective)| match cli.command {
        Command::Run(args) => run::run(args),
        Command::Plan(args) => plan::plan(args),
        Command::Apps => apps::list(),
        Command::Query(args) => query::query(args),
        #[cfg(feature = "bench")]
        Command::Bench(args) => sluice_bench::main(args),
        Command::Feed(args) => feed::feed(args),
        Command::Config(ConfigCommand::Show(_)) => config::show(&effective),
        Command::Jobs => jobs::list(),
        Command::Stop(args) => jobs::stop(args),
        Command::Top(args) => top::top(args),
        Command::Checkpoints(args) => checkpoints::checkpoints(args),
        Command::Savepoint(args) => savepoint::savepoint(args),
        Command::Ui(args) => ui::ui(args),
    });
    if let Err(error) = result {
        if stdout::was_closed(&error) {
            // The reader of standard output went away (`sluice plan ... | head -1`): what it
            // did not read, it chose not to read. The status says whether sluice's own work
            // succeeded, so it is 0, as it would be had the reader read to the end; a failed
            // job still fails (its error is not a broken pipe). The conventional 141 of a
            // program killed by SIGPIPE would fail `set -o pipefail` pipelines for the
            // reader's choice, and SIGPIPE's default action, which gives it, would kill a
            // launcher between its children and shared segments without cleaning up.
            std::process::exit(0);
        }
        stdout::tell(format_args!("error: {error:#}"));
        std::process::exit(1);
    }
}
