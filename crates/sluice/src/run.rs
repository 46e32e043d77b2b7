//! `sluice run`: build, plan and run an application in this process, then print its summary.
//!
//! Ctrl-C or SIGTERM stops the job and drains it (exit status 0 once it drained); a second one
//! aborts it (its PEs killed, its segments and directory removed) and exits with 130, as does
//! one during start-up. A failed job prints its root cause, then what followed from it, and
//! exits with 1.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use sluice_apps::AppConfig;
use sluice_runtime::{Launcher, RunOptions, StopHandle};
use sluice_sync::IdleStrategy;

use crate::companions::Companions;
use crate::observe::{JobIdentity, ObserveArgs};
use crate::plan_choice::{parse_seconds, AppArgs};
use crate::progress::Asked;
use crate::stdout::tell;

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
    /// The source rate as a multiple of the application's reference rate (omdp: the February
    /// 2008 OPRA rate, 24,000 packets/s; default 5).
    #[arg(long)]
    rate_multiple: Option<f64>,
    /// Print the summary as one JSON object (applications that have one: omdp).
    #[arg(long)]
    json: bool,
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
    /// Fail the job when a thread makes no progress, or a PE sends no heartbeat, for this many
    /// seconds (default 5).
    #[arg(long, value_parser = parse_seconds)]
    stall_timeout: Option<Duration>,
    /// Abort the job when a drain (after Ctrl-C, SIGTERM or --duration) has not ended this
    /// many seconds after the stop (default 30).
    #[arg(long, value_parser = parse_seconds)]
    drain_timeout: Option<Duration>,
    /// Fail the job when its PEs (through their hosts' launch commands too) take longer than
    /// this many seconds for a step of start-up (default 30).
    #[arg(long, value_parser = parse_seconds)]
    start_timeout: Option<Duration>,
    #[command(flatten)]
    observe: ObserveArgs,
}

/// The exit status of a job the user interrupted, as a shell gives a command killed by SIGINT.
const INTERRUPTED_STATUS: i32 = 130;

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
        rate_multiple: args.rate_multiple,
        settings: Default::default(),
    };
    let duration = args
        .duration
        .or(generated.then_some(DEFAULT_GENERATED_DURATION));
    let (app, plan) = args.app.build(config)?;
    if args.json && app.json.is_none() {
        anyhow::bail!("{} has no JSON summary (--json): omdp has", args.app.app);
    }
    let defaults = RunOptions::default();
    let mut options = RunOptions {
        idle: args.idle,
        duration,
        launcher: match args.launcher.as_str() {
            "mpi" => Launcher::Mpi,
            "in-process" => Launcher::InProcess,
            _ => Launcher::Local,
        },
        stall_timeout: args.stall_timeout.unwrap_or(defaults.stall_timeout),
        drain_timeout: args.drain_timeout.unwrap_or(defaults.drain_timeout),
        start_timeout: args.start_timeout.unwrap_or(defaults.start_timeout),
        ..defaults
    };
    let watch = args.observe.prepare(&mut options)?;
    if !sluice_runtime::is_pe_process() {
        tell(format_args!(
            "running {} ({}, {} process(es), {} thread(s)){}",
            plan.job,
            plan.strategy,
            plan.pes.len(),
            plan.threads().count(),
            duration.map_or(String::new(), |d| format!(" for {:.1} s", d.as_secs_f64()))
        ));
    }
    let stop = StopHandle::new();
    if !sluice_runtime::is_pe_process() {
        // Before the start, so that an interrupt during it is a stop too. A PE keeps the
        // default actions: its launcher stops it over its control stream.
        let handle = stop.clone();
        let interrupts = Arc::new(AtomicUsize::new(0));
        ctrlc::set_handler(move || {
            if interrupts.fetch_add(1, Ordering::Relaxed) == 0 {
                tell(format_args!(
                    "stopping: draining in-flight tuples (Ctrl-C again to abort)"
                ));
                handle.stop();
            } else {
                tell(format_args!(
                    "aborting: removing the job's processes and segments"
                ));
                handle.abort();
            }
        })
        .context("cannot install the Ctrl-C handler")?;
    }
    let mut companions = Companions::default();
    let mut observers = None;
    let result = sluice_runtime::start_with(&app.graph, &plan, &options, &stop).and_then(|job| {
        tell(format_args!(
            "started: the sources run (Ctrl-C stops and drains)"
        ));
        let identity = JobIdentity {
            app: &args.app.app,
            plan: &args.app.plan,
            pes: plan.pes.len(),
        };
        // The sources' rate asked: none for a file, nor for "as fast as possible" (0).
        let asked = args
            .rate
            .filter(|&rate| generated && rate > 0)
            .map(|rate| Asked { rate });
        observers = Some(watch.start(&job, identity, asked));
        if !sluice_runtime::is_pe_process() {
            companions.start(&app.companions, &stop);
        }
        job.wait()
    });
    if let Some(observers) = observers {
        observers.finish(result.as_ref().ok());
    }
    let companions_ended = companions.stop();
    let report = result.map_err(|error| {
        if error.is_interrupt() {
            // Everything the job made is gone by now.
            tell(format_args!("error: {error}"));
            std::process::exit(INTERRUPTED_STATUS);
        }
        error
    })?;
    companions_ended?;
    let mut out = std::io::stdout().lock();
    match (&app.json, args.json) {
        (Some(json), true) => {
            let mut object = json(&report);
            object["plan"] = serde_json::Value::from(args.app.plan.as_str());
            writeln!(out, "{object}")?;
        }
        _ => writeln!(out, "{}", (app.summarize)(&report))?,
    }
    if let Some(output) = &args.output {
        writeln!(out, "output: {}", output.display())?;
    }
    Ok(())
}
