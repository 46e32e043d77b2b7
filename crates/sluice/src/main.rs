//! `sluice`: run, plan and benchmark streaming applications. A thin entry point: each
//! subcommand lives in its own module.
#![forbid(unsafe_code)]

mod apps;
mod plan;
mod plan_choice;
mod run;

use clap::{Parser, Subcommand};

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
    /// Measure a transport: throughput or latency, beside a baseline measured in the same run.
    Bench(sluice_bench::BenchArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Plan(args) => plan::plan(args),
        Command::Apps => apps::list(),
        Command::Bench(args) => sluice_bench::main(args),
    };
    if let Err(error) = result {
        eprintln!("error: {error:#}");
        std::process::exit(1);
    }
}
