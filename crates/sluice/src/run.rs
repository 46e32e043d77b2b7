//! `sluice run`: build, plan and run an application in this process, then print its summary.
//!
//! Ctrl-C or SIGTERM stops the job and drains it (exit status 0 once it drained); a second one
//! aborts it (its PEs killed, its segments and directory removed) and exits with 130, as does
//! one during start-up. A failed job prints its root cause, then what followed from it, and
//! exits with 1. A run stopped before its sources ended says its output is partial
//! ([`crate::ending`]).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use sluice_apps::AppConfig;
use sluice_plan::PhysicalPlan;
use sluice_runtime::configuration::MAX_WORKERS;
use sluice_runtime::progress::Asked;
use sluice_runtime::{JobReport, Launcher, RunOptions};
use sluice_sync::IdleStrategy;

use crate::checkpointing::CheckpointArgs;
use crate::companions::Companions;
use crate::ending::Ending;
use crate::logs::{self, Verbosity};
use crate::observe::ObserveArgs;
use crate::online::{OnlineArgs, Redeploys, SharedStop};
use crate::plan_choice::{parse_seconds, AppArgs};
use sluice_web::job_server;

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
    /// Record a profile of the run for the optimizers (`sluice plan --optimize
    /// fusion|replication|placement --profile FILE`): each instance's tuples and sampled CPU
    /// time, the tuples each instance delivered to each downstream one.
    #[arg(long, value_name = "FILE.json")]
    profile: Option<PathBuf>,
    /// Tuples per second from generating sources (0: as fast as possible; default 100000). A
    /// file (--input) is read as fast as the job takes it unless --throttle-input is given.
    #[arg(long)]
    rate: Option<u64>,
    /// Read the input file at --rate tuples per second too.
    #[arg(long, requires = "rate", requires = "input")]
    throttle_input: bool,
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
    /// Run each process's plan threads on at most this many polling workers (OS threads, one
    /// pinned per core), which take them in turn without waiting on the kernel, when the plan
    /// has more (default: the machine's cores).
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_WORKERS)))]
    workers: Option<u32>,
    /// The most messages a receiver hands over per poll (default 256).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    poll_batch: Option<u32>,
    /// The most bytes the sinks of a job running in PE processes may return to this process
    /// (`collect()`; default 268435456): past it the job fails naming the limit.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    collect_limit: Option<u64>,
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
    /// A TOML file of run options and settings (`rate = 1000`, `[set]` then `parallelism =
    /// 4`); the command line and SLUICE_* variables win over it (see `sluice config show`).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Log only errors (the summary still goes to standard output).
    #[arg(long, short, conflicts_with = "verbose")]
    quiet: bool,
    /// Log debug events too (RUST_LOG, e.g. `RUST_LOG=debug`, chooses when neither flag is given).
    #[arg(long, short)]
    verbose: bool,
    /// Serve a web page of the running job at http://ADDRESS:PORT/ (binds only this address,
    /// e.g. 127.0.0.1:8080): the plan drawn, with live rates, queue fill and backpressure.
    #[arg(long, value_name = "ADDRESS:PORT")]
    ui: Option<SocketAddr>,
    #[command(flatten)]
    observe: ObserveArgs,
    #[command(flatten)]
    online: OnlineArgs,
    #[command(flatten)]
    checkpoints: CheckpointArgs,
}

/// The exit status of a job the user interrupted, as a shell gives a command killed by SIGINT.
const INTERRUPTED_STATUS: i32 = 130;

/// How much longer than its duration a job fed by companions runs before it is stopped
/// anyway, should they not end: their start after the job's, their drain, and room to spare.
const COMPANION_LATE: Duration = Duration::from_secs(10);

/// Generated input runs this long unless `--duration` says otherwise.
const DEFAULT_GENERATED_DURATION: Duration = Duration::from_secs(5);
/// Generated input runs at this rate unless `--rate` says otherwise.
pub(crate) const DEFAULT_GENERATED_RATE: u64 = 100_000;

/// What `run` uses for the options left unset whose default is not a fixed value of the
/// command line, by option, as `sluice config show` tells them.
pub(crate) fn implicit_defaults() -> Vec<(&'static str, String)> {
    let defaults = RunOptions::default();
    vec![
        (
            "rate",
            format!("{DEFAULT_GENERATED_RATE} for a generated source; a file is read unthrottled"),
        ),
        (
            "duration",
            format!(
                "{} for a generated source; a file is read to its end",
                DEFAULT_GENERATED_DURATION.as_secs_f64()
            ),
        ),
        (
            "queue-capacity",
            sluice_transport::DEFAULT_QUEUE_CAPACITY.to_string(),
        ),
        ("idle", "chosen from the thread and core counts".into()),
        ("workers", "the machine's cores".into()),
        (
            "stall-timeout",
            defaults.stall_timeout.as_secs_f64().to_string(),
        ),
        (
            "drain-timeout",
            defaults.drain_timeout.as_secs_f64().to_string(),
        ),
        (
            "start-timeout",
            defaults.start_timeout.as_secs_f64().to_string(),
        ),
    ]
}

pub(crate) fn run(mut args: RunArgs) -> anyhow::Result<()> {
    logs::init(match (args.quiet, args.verbose) {
        (true, _) => Verbosity::Quiet,
        (_, true) => Verbosity::Verbose,
        _ => Verbosity::Normal,
    });
    if let Some(file) = &args.config {
        tracing::debug!(file = %file.display(), "configuration file");
    }
    let generated = args.input.is_none();
    let config = AppConfig {
        input: args.input.clone(),
        output: args.output.clone(),
        rate: source_rate(&args),
        duration: args.duration,
        rate_multiple: args.rate_multiple,
        settings: Default::default(),
    };
    let duration = args
        .duration
        .or(generated.then_some(DEFAULT_GENERATED_DURATION));
    args.app.checkpointed = args.checkpoints.is_on();
    let (app, plan) = args.app.build(config)?;
    if args.json && app.json.is_none() {
        anyhow::bail!("{} has no JSON summary (--json): omdp has", args.app.app);
    }
    // A job fed by companions ends when they end (they carry the duration, and start after
    // the job); its own duration only stops it should they not.
    let fed = app.companions.iter().any(|c| c.feeds_the_job);
    let mut options = run_options(
        &args,
        duration.map(|d| if fed { d + COMPANION_LATE } else { d }),
    );
    // The sources' rate asked: none for a file, nor for "as fast as possible" (0).
    let asked = args
        .rate
        .filter(|&rate| generated && rate > 0)
        .map(|rate| Asked { rate });
    let watch = args.observe.prepare(&mut options, asked)?;
    // On-line placement weighs each instance by its CPU time, as TurboStream's monitor does.
    options.profile_cpu = args.profile.is_some() || args.online.online_placement;
    options.suspendable = args.online.online_placement;
    options.checkpoints = args.checkpoints.options(&args.app.app, &app.graph)?;
    let from = args.checkpoints.from()?;
    if let Some(checkpoint) = &from {
        tracing::info!("starting from checkpoint {}", checkpoint.n);
    }
    let http = job_server::serve_if_asked(args.ui, args.observe.metrics_address(), &plan)?;
    log_start(&plan, duration, &options);
    let shared = SharedStop::default();
    let stop = shared.handle();
    let interrupts = if sluice_runtime::is_pe_process() {
        // A PE keeps the default actions: its launcher stops it over its control stream.
        Arc::default()
    } else {
        // Before the start, so that an interrupt during it is a stop too.
        stop_on_interrupts(&shared)?
    };
    let mut companions = Companions::default();
    let mut observers = None;
    let started = match &from {
        Some(checkpoint) => {
            sluice_runtime::resume_with(&app.graph, &plan, &options, &stop, checkpoint)
        }
        None => sluice_runtime::start_with(&app.graph, &plan, &options, &stop),
    };
    let result = started.and_then(|job| {
        tracing::info!("started: the sources run (Ctrl-C stops and drains)");
        observers = Some(watch.start(&job));
        if let Some(http) = &http {
            http.attach(job.metrics_handle(), job.checkpoint_handle());
        }
        if !sluice_runtime::is_pe_process() {
            companions.start(&app.companions, &stop);
        }
        if !args.online.online_placement {
            return job.wait();
        }
        let redeploys = Redeploys {
            graph: &app.graph,
            plan_options: args.app.plan_options().map_err(|e| {
                sluice_runtime::RunError::Launch(format!("cannot plan a redeploy: {e:#}"))
            })?,
            options,
            args: &args.online,
            started: std::time::Instant::now(),
        };
        crate::online::supervise(job, &plan, &redeploys, &shared)
    });
    if let Some(observers) = observers {
        observers.finish(result.as_ref().ok());
    }
    let input_ended = companions.ended_the_input();
    let companions_ended = companions.stop();
    let report = result.map_err(|error| {
        if error.is_interrupt() {
            // Everything the job made is gone by now.
            tracing::error!("{error}");
            std::process::exit(INTERRUPTED_STATUS);
        }
        error
    })?;
    companions_ended?;
    if let Some(path) = &args.profile {
        crate::optimize::write_profile(path, &plan, &report)?;
    }
    let partial = Ending {
        // The companions feeding the job ended its input: its sources' own end.
        stopped: shared.is_stopping() && !input_ended,
        interrupted: interrupts.load(Ordering::Relaxed) > 0,
        duration,
        elapsed: report.elapsed,
        reads_file: !generated,
        generated_left: app
            .finite_input
            .as_ref()
            .filter(|_| generated)
            .and_then(|input| input.left_in(&report)),
        fed,
    }
    .partial();
    if let Some(why) = &partial {
        tracing::warn!("the output is partial: {why}");
    }
    let lost = report.lost_tuples();
    for line in lost_lines(&lost) {
        tracing::warn!("{line}");
    }
    print_results(&args, &app, &report, partial.as_deref(), &lost)
}

/// The run's options from the command line's, with the job's `duration`.
fn run_options(args: &RunArgs, duration: Option<Duration>) -> RunOptions {
    let defaults = RunOptions::default();
    RunOptions {
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
        workers: args.workers.map(|n| n as usize),
        poll_batch: args.poll_batch.map_or(defaults.poll_batch, |n| n as usize),
        collect_limit: args.collect_limit.unwrap_or(defaults.collect_limit),
        // Said by `run` itself, with the reason ([`crate::ending`]).
        partial_notice: false,
        ..defaults
    }
}

/// Says what runs: the plan's shape in the launcher, the PE's part in a PE.
fn log_start(plan: &PhysicalPlan, duration: Option<Duration>, options: &RunOptions) {
    if sluice_runtime::is_pe_process() {
        tracing::debug!(job = %plan.job, "this PE builds its part of the job");
        return;
    }
    tracing::info!(
        "running {} ({}, {} process(es), {} thread(s)){}",
        plan.job,
        plan.strategy,
        plan.pes.len(),
        plan.threads().count(),
        duration.map_or(String::new(), |d| format!(" for {:.1} s", d.as_secs_f64()))
    );
    tracing::debug!(options = ?options, "run options");
}

/// Installs the Ctrl-C (and SIGTERM) handler: the first stops the job, draining; the next
/// aborts it. Returns the count of interrupts.
fn stop_on_interrupts(shared: &SharedStop) -> anyhow::Result<Arc<AtomicUsize>> {
    let interrupts = Arc::new(AtomicUsize::new(0));
    let handle = shared.clone();
    let counted = interrupts.clone();
    ctrlc::set_handler(move || {
        if counted.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::info!("stopping: draining in-flight tuples (Ctrl-C again to abort)");
            handle.stop();
        } else {
            tracing::warn!("aborting: removing the job's processes and segments");
            handle.abort();
        }
    })
    .context("cannot install the Ctrl-C handler")?;
    Ok(interrupts)
}

/// Prints the job's results on stdout: the application's summary (or its JSON object with
/// `--json`), the checkpoints, the output file, why the output is `partial`, and the tuples
/// `lost` on each edge.
fn print_results(
    args: &RunArgs,
    app: &sluice_apps::App,
    report: &JobReport,
    partial: Option<&str>,
    lost: &[(String, u64)],
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match (&app.json, args.json) {
        (Some(json), true) => {
            let mut object = json(report);
            object["plan"] = serde_json::Value::from(args.app.plan.as_str());
            object["partial"] = serde_json::Value::from(partial.is_some());
            object["lost_tuples"] = lost
                .iter()
                .map(|(edge, count)| (edge.clone(), serde_json::Value::from(*count)))
                .collect::<serde_json::Map<_, _>>()
                .into();
            writeln!(out, "{object}")?;
        }
        _ => writeln!(out, "{}", (app.summarize)(report))?,
    }
    if let (Some(checkpoints), false) = (&report.checkpoints, args.json) {
        writeln!(out, "{checkpoints}")?;
    }
    if let Some(output) = &args.output {
        writeln!(out, "output: {}", output.display())?;
    }
    if let (Some(why), false) = (partial, args.json) {
        writeln!(out, "partial output: {why}")?;
    }
    if !args.json {
        for line in lost_lines(lost) {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// The summary's line for each edge that lost tuples on the way (`udp-mq`'s datagrams that
/// never arrived, `shm-osr`'s skipped records): a loss is said, not only counted in
/// `sluice_edge_lost_tuples_total`.
fn lost_lines(lost: &[(String, u64)]) -> Vec<String> {
    lost.iter()
        .map(|(edge, count)| format!("lost: {count} tuples on the edge {edge}"))
        .collect()
}

/// The rate the application's sources are paced at: `--rate` (100,000/s by default) for a
/// generated source; for a file (`--input`) none, unless `--throttle-input` asks for `--rate`,
/// since a file has an end of its own and `--rate` set for generated runs (in a configuration
/// file, say) would otherwise stretch reading it to hours. `--rate` with a file and without
/// `--throttle-input` is said to be ignored.
fn source_rate(args: &RunArgs) -> Option<u64> {
    match (&args.input, args.rate) {
        (None, rate) => Some(rate.unwrap_or(DEFAULT_GENERATED_RATE)),
        (Some(_), Some(rate)) if args.throttle_input => Some(rate),
        (Some(file), Some(rate)) => {
            if !sluice_runtime::is_pe_process() {
                tracing::warn!(
                    "--rate {rate} does not throttle the input file {}: a file is read as fast as \
                     the job takes it (add --throttle-input to read it at {rate} tuples/s)",
                    file.display()
                );
            }
            None
        }
        (Some(_), None) => None,
    }
}
