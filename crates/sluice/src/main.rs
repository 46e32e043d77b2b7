//! `sluice`: run, plan and benchmark streaming applications. A thin entry point: each
//! subcommand lives in its own module.
#![forbid(unsafe_code)]

mod apps;
mod companions;
mod feed;
mod plan;
mod plan_choice;
mod query;
mod run;
mod shell;
mod stdout;

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
    Bench(sluice_bench::BenchArgs),
    /// Send, record or print the synthetic OPRA-style options feed.
    Feed(feed::FeedArgs),
}

/// Parses the command line; `sluice run NAME --help` also lists NAME's settings and plans.
fn parse() -> Cli {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let mut command = Cli::command();
    if let Some(app) = apps::help_asked_for(&args) {
        command = command.mut_subcommand("run", |run| run.after_help(apps::help(app)));
    }
    let matches = command.get_matches_from(args);
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

fn main() {
    let cli = parse();
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Plan(args) => plan::plan(args),
        Command::Apps => apps::list(),
        Command::Query(args) => query::query(args),
        Command::Bench(args) => sluice_bench::main(args),
        Command::Feed(args) => feed::feed(args),
    };
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
