//! `sluice run`: build, plan and run an application in this process, then print its summary.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use sluice_apps::AppConfig;
use sluice_runtime::{Launcher, RunOptions};
use sluice_sync::IdleStrategy;

use crate::plan_choice::{parse_seconds, AppArgs};

/// Arguments of `sluice run`.
#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    app: AppArgs,
    /// Input file for applications that read one.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Output file for applications that write one.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Tuples per second from generating sources (0: as fast as possible).
    #[arg(long)]
    rate: Option<u64>,
    /// Stop (and drain) after this many seconds; generating sources default to 5.
    #[arg(long, value_parser = parse_seconds)]
    duration: Option<Duration>,
    /// Where the PEs run: `local` (a child process per PE), `mpi` (the ranks of Open MPI's
    /// mpirun) or `in-process` (threads of this process).
    #[arg(long, default_value = "local", value_parser = ["local", "mpi", "in-process"])]
    launcher: String,
    /// How idle threads wait: busy-spin, yield, backoff or park (default: chosen from the
    /// thread and core counts).
    #[arg(long, value_parser = IdleStrategy::parse)]
    idle: Option<IdleStrategy>,
}

/// Generated input runs this long unless `--duration` says otherwise.
const DEFAULT_GENERATED_DURATION: Duration = Duration::from_secs(5);
/// Generated input runs at this rate unless `--rate` says otherwise.
const DEFAULT_GENERATED_RATE: u64 = 100_000;

pub(crate) fn run(args: RunArgs) -> anyhow::Result<()> {
    let generated = args.input.is_none();
    let config = AppConfig {
        input: args.input.clone(),
        output: args.output.clone(),
        rate: args.rate.or(generated.then_some(DEFAULT_GENERATED_RATE)),
        duration: args.duration,
        settings: Default::default(),
    };
    let duration = args
        .duration
        .or(generated.then_some(DEFAULT_GENERATED_DURATION));
    let (app, plan) = args.app.build(config)?;
    let options = RunOptions {
        idle: args.idle,
        duration,
        launcher: match args.launcher.as_str() {
            "mpi" => Launcher::Mpi,
            "in-process" => Launcher::InProcess,
            _ => Launcher::Local,
        },
        ..RunOptions::default()
    };
    if !sluice_runtime::is_pe_process() {
        // A closed standard error loses the line, and nothing else.
        let _ = writeln!(
            std::io::stderr(),
            "running {} ({}, {} process(es), {} thread(s)){}",
            plan.job,
            plan.strategy,
            plan.pes.len(),
            plan.threads().count(),
            duration.map_or(String::new(), |d| format!(" for {:.1} s", d.as_secs_f64()))
        );
    }
    let job = sluice_runtime::start(&app.graph, &plan, &options)?;
    let stop = job.stop_handle();
    let interrupts = Arc::new(AtomicUsize::new(0));
    ctrlc::set_handler(move || {
        if interrupts.fetch_add(1, Ordering::Relaxed) == 0 {
            eprintln!("stopping: draining in-flight tuples (Ctrl-C again to abort)");
            stop.stop();
        } else {
            std::process::exit(130);
        }
    })
    .context("cannot install the Ctrl-C handler")?;
    let report = job.wait()?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", (app.summarize)(&report))?;
    if let Some(output) = &args.output {
        writeln!(out, "output: {}", output.display())?;
    }
    Ok(())
}
