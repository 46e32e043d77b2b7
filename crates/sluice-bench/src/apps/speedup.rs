//! `sluice bench pipeline compress|encrypt --parallelism 1,2`: the TCD parallel runtime
//! paper's speedup curves (its Figure 4). For each parallelism, the pipeline does a fixed
//! input (`--size` bytes in packets of `--packet` bytes) with that many senders and receivers
//! (`2x1`: two senders, one receiver), and the serial program ([`super::pipeline`]) does the
//! same input on one thread in the same invocation, alternating, `--repeat` times each. The
//! result gives both throughputs in MB/s of input (decimal, as the paper) and the speedup: the
//! serial program's median time over the pipeline's.
//!
//! The pipeline's time is the job's, start-up and drain included; it must have verified every
//! packet of the input, or the run fails. By default it runs under the paper's layout,
//! `engines`: a thread per sender and per receiver ([`sluice_apps::pipeline::engines`]);
//! `engine-processes` makes each of them a process, joined by shared memory, as the paper's
//! MPI processes were; any plan `sluice run` takes works too (`threaded`: a thread per
//! operator instance). Idle threads park by default (`--idle`), since on a shared machine a
//! yielding receiver takes its time from the sender it waits on.
//!
//! Between the engines, packets cross what the planner chooses (threaded ports between
//! threads, shared memory between processes) or, with `--transport udp-mq`, the paper's own
//! link: UDP over `--queues` sockets a side, batched system calls (its Algorithms 1 and 2),
//! each packet's queue a hash of its flow so a flow keeps its order
//! ([`sluice_apps::pipeline::udp_mq_between_engines`]). `udp-mq` is at most once: a lost
//! datagram fails the run, at the sink (the first packet of its flow that did not arrive) or
//! here (the input verified short of its end), so a loss is reported, never measured as
//! speed.
//!
//! Each parallelism of a list runs in a child process of its own (`sluice bench pipeline` with
//! that one parallelism and `--json`): a plan of several processes re-executes the command that
//! runs it once per PE, and each of those must build the same graph.

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use serde::{Deserialize, Serialize};
use sluice_apps::pipeline::{self, mb_per_sec, Pipeline, BYTES_VERIFIED};
use sluice_apps::{AppConfig, Settings};
use sluice_plan::{PlanOptions, PlanRequest};
use sluice_runtime::RunOptions;
use sluice_sync::IdleStrategy;

use super::pipeline::Serial;
use crate::foundation::args::checked_repeat;
use crate::foundation::machine;
use crate::foundation::stats::median;
use crate::foundation::warnings::{self, Warning};

/// Options of `sluice bench pipeline`.
#[derive(Debug, Clone, Args)]
pub struct PipelineBenchArgs {
    /// The pipeline: `compress` or `encrypt`.
    #[arg(value_parser = ["compress", "encrypt"])]
    pub app: String,
    /// Senders and receivers of each measurement, comma-separated: `2` is two of each, `2x1`
    /// two senders and one receiver.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2",
        value_name = "N|SxR"
    )]
    pub parallelism: Vec<String>,
    /// Bytes of input (default: the application's, 64 MiB for compress, 512 MiB for encrypt).
    #[arg(long, value_name = "BYTES")]
    pub size: Option<u64>,
    /// Bytes of a packet (default 16384).
    #[arg(long, value_name = "BYTES")]
    pub packet: Option<u64>,
    /// `engines` (a thread per sender and per receiver), `engine-processes` (a process each),
    /// or any plan `sluice run` takes.
    #[arg(long, default_value = ENGINES)]
    pub plan: String,
    /// How the senders' packets reach the receivers: `planner` (threaded ports between
    /// threads, shared memory between processes) or `udp-mq` (the paper's UDP over several
    /// queues, a flow to a queue; with `engines` or `engine-processes` only).
    #[arg(long, value_parser = [PLANNER, UDP_MQ], default_value = PLANNER)]
    pub transport: String,
    /// Sockets on each side of a `udp-mq` link (the paper's hardware queues).
    #[arg(long, value_name = "Q", default_value_t = sluice_transport::udp_mq::DEFAULT_QUEUES)]
    pub queues: usize,
    /// How the pipeline's idle threads wait: busy-spin, yield, backoff or park. Park by
    /// default, not `sluice run`'s choice (yield, where threads do not outnumber cores): a
    /// receiver waiting on a sender that compresses spends its time yielding, and on a shared
    /// machine that time comes out of the sender's share (compress, one sender and one
    /// receiver: 31-34 MB/s yielding, 56-57 MB/s parked, 52 MB/s in one thread).
    #[arg(long, value_parser = IdleStrategy::parse, default_value = "park")]
    pub idle: IdleStrategy,
    /// Runs of the pipeline and of the serial program (alternating) per parallelism; the
    /// result is the median.
    #[arg(long, value_name = "R", default_value_t = 3)]
    pub repeat: usize,
    /// Print one JSON object per parallelism, one per line, instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Another setting of the application, `key=value` (`flows`, `level`, `seed`); repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub settings: Vec<String>,
}

/// The paper's layout, on threads.
const ENGINES: &str = "engines";
/// The paper's layout, in processes.
const ENGINE_PROCESSES: &str = "engine-processes";
/// Packets cross the transport the planner chooses.
const PLANNER: &str = "planner";
/// Packets cross `udp-mq`, as in the paper.
const UDP_MQ: &str = "udp-mq";

/// One parallelism measured: the record `--json` prints and the suite keeps.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SpeedupPoint {
    /// `pipeline`.
    pub(crate) bench: String,
    /// `compress` or `encrypt`.
    pub(crate) app: String,
    /// The plan, as named on the command line.
    pub(crate) plan: String,
    /// What joined senders to receivers: `planner` or `udp-mq`.
    pub(crate) transport: String,
    /// Sockets a side of a `udp-mq` link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) queues: Option<usize>,
    /// How idle threads waited.
    pub(crate) idle: String,
    /// Sending replicas.
    pub(crate) senders: usize,
    /// Receiving replicas.
    pub(crate) receivers: usize,
    /// Bytes of input.
    pub(crate) size_bytes: u64,
    /// Bytes of a packet.
    pub(crate) packet_bytes: usize,
    /// Flows.
    pub(crate) flows: u32,
    /// The pipeline's median MB/s of input.
    pub(crate) mb_per_sec: f64,
    /// The serial program's median MB/s of input.
    pub(crate) serial_mb_per_sec: f64,
    /// The serial program's median time over the pipeline's.
    pub(crate) speedup: f64,
    /// Seconds of every run of the pipeline.
    pub(crate) seconds: Vec<f64>,
    /// Seconds of every run of the serial program.
    pub(crate) serial_seconds: Vec<f64>,
    /// Figures that cannot be true as printed (the pipeline's or the serial program's repeats
    /// disagreeing), each with the rule it broke; empty when none.
    #[serde(default)]
    pub(crate) warnings: Vec<Warning>,
    /// The commit built, or `unknown`.
    pub(crate) commit: String,
    /// The CPU model.
    pub(crate) cpu: String,
    /// Cores available.
    pub(crate) cores: usize,
}

/// `N` or `SxR`: senders and receivers.
fn senders_receivers(text: &str) -> anyhow::Result<(usize, usize)> {
    let number = |part: &str| {
        part.trim().parse::<usize>().with_context(|| {
            format!("--parallelism {text}: expected N or SENDERSxRECEIVERS, e.g. 2 or 2x1")
        })
    };
    Ok(match text.split_once('x') {
        Some((senders, receivers)) => (number(senders)?, number(receivers)?),
        None => (number(text)?, number(text)?),
    })
}

impl PipelineBenchArgs {
    /// The application's settings every parallelism shares: the user's, the size, the
    /// packet.
    fn shared_settings(&self) -> Vec<String> {
        let mut settings = self.settings.clone();
        settings.extend(self.size.map(|s| format!("size={s}")));
        settings.extend(self.packet.map(|p| format!("packet={p}")));
        settings
    }

    /// The application's settings for `senders` and `receivers`.
    fn settings(&self, senders: usize, receivers: usize) -> Vec<String> {
        let mut settings = self.shared_settings();
        settings.push(format!("senders={senders}"));
        settings.push(format!("receivers={receivers}"));
        settings
    }

    /// The command line of the child measuring `parallelism` alone.
    fn child_args(&self, parallelism: &str) -> Vec<String> {
        let mut args: Vec<String> = ["bench", "pipeline", &self.app, "--json"]
            .map(String::from)
            .to_vec();
        for (option, value) in [
            ("--parallelism", parallelism.to_string()),
            ("--plan", self.plan.clone()),
            ("--transport", self.transport.clone()),
            ("--queues", self.queues.to_string()),
            ("--repeat", self.repeat.to_string()),
        ] {
            args.extend([option.to_string(), value]);
        }
        args.extend(["--idle".to_string(), self.idle.name().to_string()]);
        for setting in self.shared_settings() {
            args.extend(["--set".to_string(), setting]);
        }
        args
    }
}

/// One parallelism, built and planned.
struct Measurement {
    idle: IdleStrategy,
    /// Whether packets cross `udp-mq`, which may lose them.
    over_udp_mq: bool,
    pipeline: Pipeline,
    app: sluice_apps::App,
    physical: sluice_plan::PhysicalPlan,
}

impl Measurement {
    fn new(args: &PipelineBenchArgs, senders: usize, receivers: usize) -> anyhow::Result<Self> {
        let settings = args.settings(senders, receivers);
        let settings = Settings::parse(settings.iter().map(String::as_str))?;
        let pipeline = Pipeline::from_settings(&args.app, &settings)?;
        let config = AppConfig {
            settings,
            ..AppConfig::default()
        };
        let mut app = sluice_apps::build(&args.app, &config)?;
        let request = match args.plan.as_str() {
            ENGINES | ENGINE_PROCESSES => {
                let mut file = pipeline::engines(&pipeline, args.plan == ENGINE_PROCESSES);
                if args.transport == UDP_MQ {
                    let edge = pipeline::udp_mq_between_engines(&pipeline, args.queues)?;
                    file.edges.push(edge);
                }
                PlanRequest::File(args.plan.clone(), file)
            }
            other if args.transport == UDP_MQ => bail!(
                "--transport udp-mq joins the paper's engines: give --plan {ENGINES} or {ENGINE_PROCESSES}, not {other}"
            ),
            other => sluice_apps::plan_request(&args.app, other)?,
        };
        app.graph = sluice_plan::replicated_graph(&app.graph, &request)?;
        let physical = sluice_plan::plan(&app.graph, &request, &PlanOptions::default())?;
        Ok(Self {
            idle: args.idle,
            over_udp_mq: args.transport == UDP_MQ,
            pipeline,
            app,
            physical,
        })
    }

    /// Runs the pipeline over the whole input; returns its seconds.
    fn run_pipeline(&self) -> anyhow::Result<f64> {
        let options = RunOptions {
            idle: Some(self.idle),
            ..RunOptions::default()
        };
        let lossy = |e: sluice_runtime::RunError| {
            let e = anyhow::Error::from(e);
            if self.over_udp_mq {
                e.context("the pipeline over udp-mq, which is at most once: a lost datagram fails the sink's byte-for-byte check, naming the packet missing")
            } else {
                e
            }
        };
        let report =
            sluice_runtime::run(&self.app.graph, &self.physical, &options).map_err(lossy)?;
        let verified = report
            .operator_report("verify")
            .counters
            .get(BYTES_VERIFIED)
            .copied()
            .unwrap_or(0);
        if verified != self.pipeline.layout.size {
            let lost = if self.over_udp_mq {
                " (udp-mq lost the last packets of a flow)"
            } else {
                ""
            };
            bail!(
                "the pipeline verified {verified} of the input's {} bytes{lost}",
                self.pipeline.layout.size
            );
        }
        Ok(report.elapsed.as_secs_f64())
    }

    /// Runs the serial program over the whole input; returns its seconds.
    fn run_serial(&self) -> anyhow::Result<f64> {
        let started = Instant::now();
        Serial::new(&self.pipeline).whole_input()?;
        Ok(started.elapsed().as_secs_f64())
    }

    /// `repeat` runs of each, alternating.
    fn measure(&self, args: &PipelineBenchArgs, repeat: usize) -> anyhow::Result<SpeedupPoint> {
        let (mut seconds, mut serial_seconds) = (Vec::new(), Vec::new());
        for i in 1..=repeat {
            seconds.push(
                self.run_pipeline()
                    .with_context(|| format!("pipeline run {i}"))?,
            );
            serial_seconds.push(
                self.run_serial()
                    .with_context(|| format!("serial run {i}"))?,
            );
        }
        let (ours, theirs) = (median(&seconds), median(&serial_seconds));
        let warnings = [
            ("the pipeline", &seconds),
            ("the serial program", &serial_seconds),
        ]
        .into_iter()
        .filter_map(|(who, runs)| warnings::wide_spread(&format!("{who}'s time"), runs, "s"))
        .collect();
        let layout = self.pipeline.layout;
        Ok(SpeedupPoint {
            bench: "pipeline".into(),
            app: args.app.clone(),
            plan: args.plan.clone(),
            transport: args.transport.clone(),
            queues: self.over_udp_mq.then_some(args.queues),
            idle: self.idle.name().to_string(),
            senders: self.pipeline.senders,
            receivers: self.pipeline.receivers,
            size_bytes: layout.size,
            packet_bytes: layout.packet,
            flows: layout.flows,
            mb_per_sec: mb_per_sec(layout.size, ours),
            serial_mb_per_sec: mb_per_sec(layout.size, theirs),
            speedup: theirs / ours.max(1e-9),
            seconds,
            serial_seconds,
            warnings,
            commit: machine::commit().to_string(),
            cpu: machine::cpu(),
            cores: machine::cores(),
        })
    }
}

/// Runs the child measuring `parallelism` alone; returns its record.
fn child(args: &PipelineBenchArgs, parallelism: &str) -> anyhow::Result<SpeedupPoint> {
    let exe = std::env::current_exe().context("find the sluice binary")?;
    let output = Command::new(exe)
        .args(args.child_args(parallelism))
        .output()
        .context("start sluice bench pipeline")?;
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        bail!("parallelism {parallelism}: {}", err.trim());
    }
    let text = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(text.trim()).context("read the child's JSON")
}

/// Measures every parallelism `args` asks for: in this process when it is one, else each in
/// a child.
pub(crate) fn measure(args: &PipelineBenchArgs) -> anyhow::Result<Vec<SpeedupPoint>> {
    let repeat = checked_repeat(args.repeat)?;
    let points = args
        .parallelism
        .iter()
        .map(|p| senders_receivers(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    match points.as_slice() {
        [] => bail!("--parallelism needs at least one value"),
        [(senders, receivers)] => {
            let measurement = Measurement::new(args, *senders, *receivers)?;
            Ok(vec![measurement.measure(args, repeat)?])
        }
        _ => {
            // Every parallelism is checked before the first is measured.
            for (senders, receivers) in &points {
                Measurement::new(args, *senders, *receivers)?;
            }
            args.parallelism.iter().map(|p| child(args, p)).collect()
        }
    }
}

/// The points as a table: the setup, then a row per parallelism.
fn table(points: &[SpeedupPoint]) -> String {
    let mut out = String::new();
    if let Some(p) = points.first() {
        let _ = writeln!(
            out,
            "sluice bench pipeline {}: {} bytes in packets of {} B over {} flows, {} plan over {}, idle {}; median of {} run(s) each, beside the serial program; commit {}, {}, {} cores\n",
            p.app,
            p.size_bytes,
            p.packet_bytes,
            p.flows,
            p.plan,
            p.queues.map_or_else(
                || "the planner's transports".to_string(),
                |q| format!("{} ({q} queues a side, flow-hash)", p.transport)
            ),
            p.idle,
            p.seconds.len(),
            p.commit,
            p.cpu,
            p.cores
        );
    }
    let _ = writeln!(
        out,
        "{:>8} {:>10} {:>14} {:>14} {:>8}",
        "senders", "receivers", "pipeline MB/s", "serial MB/s", "speedup"
    );
    for p in points {
        let _ = writeln!(
            out,
            "{:>8} {:>10} {:>14.1} {:>14.1} {:>8.2}",
            p.senders, p.receivers, p.mb_per_sec, p.serial_mb_per_sec, p.speedup
        );
    }
    for p in points {
        for w in &p.warnings {
            let _ = writeln!(out, "warning: {}x{}: {}", p.senders, p.receivers, w.detail);
        }
    }
    out
}

/// Runs `sluice bench pipeline` and prints the result. In a process the runtime started as a
/// PE of the pipeline's job, runs that PE instead.
pub(crate) fn main(args: &PipelineBenchArgs) -> anyhow::Result<()> {
    if sluice_runtime::is_pe_process() {
        let [parallelism] = args.parallelism.as_slice() else {
            bail!("a PE of sluice bench pipeline measures one parallelism");
        };
        let (senders, receivers) = senders_receivers(parallelism)?;
        // Does not return: the runtime runs this PE's part of the job and exits.
        return Measurement::new(args, senders, receivers)?
            .run_pipeline()
            .map(drop);
    }
    let points = measure(args)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        for p in &points {
            writeln!(out, "{}", serde_json::to_string(p)?)?;
        }
    } else {
        write!(out, "{}", table(&points))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallelism_is_n_or_senders_x_receivers() {
        assert_eq!(senders_receivers("3").unwrap(), (3, 3));
        assert_eq!(senders_receivers("2x1").unwrap(), (2, 1));
        let e = senders_receivers("2y1").unwrap_err().to_string();
        assert!(e.contains("expected N or SENDERSxRECEIVERS"), "{e}");
    }

    #[test]
    fn a_child_measures_one_parallelism_with_the_same_options() {
        let args = PipelineBenchArgs {
            app: "encrypt".into(),
            parallelism: vec!["1".into(), "2x1".into()],
            size: Some(1000),
            packet: None,
            plan: ENGINE_PROCESSES.into(),
            transport: UDP_MQ.into(),
            queues: 3,
            idle: IdleStrategy::Backoff,
            repeat: 2,
            json: false,
            settings: vec!["flows=8".into()],
        };
        assert_eq!(
            args.child_args("2x1").join(" "),
            "bench pipeline encrypt --json --parallelism 2x1 --plan engine-processes --transport udp-mq --queues 3 --repeat 2 --idle backoff --set flows=8 --set size=1000"
        );
    }

    #[test]
    fn one_parallelism_is_measured_here_beside_the_serial_program() {
        let args = PipelineBenchArgs {
            app: "encrypt".into(),
            parallelism: vec!["2x1".into()],
            size: Some(100_000),
            packet: Some(4096),
            plan: ENGINES.into(),
            transport: PLANNER.into(),
            queues: 4,
            idle: IdleStrategy::Park,
            repeat: 1,
            json: true,
            settings: vec![],
        };
        let points = measure(&args).unwrap();
        let p = &points[0];
        assert_eq!((p.senders, p.receivers, p.size_bytes), (2, 1, 100_000));
        assert!(p.mb_per_sec > 0.0 && p.serial_mb_per_sec > 0.0 && p.speedup > 0.0);
        assert!(table(&points).contains("speedup"));
        let bad = PipelineBenchArgs {
            settings: vec!["flows=1".into()],
            ..args
        };
        let e = measure(&bad).unwrap_err().to_string();
        assert!(e.contains("setting flows"), "{e}");
    }
}
