//! The command line of `sluice bench`: every subcommand and the options it takes. The top of
//! the crate's layers, the one place that names the benchmarks of every layer below.

use anyhow::bail;
use clap::{Args, Subcommand};

use crate::foundation::args::{Bench, LatencyArgs, Settings, ThroughputArgs};

/// Measure Sluice's transports, each against a hand-written baseline run alongside.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// What to measure.
    #[command(subcommand)]
    pub command: BenchCommand,
}

/// The benchmarks.
#[derive(Debug, Clone, Subcommand)]
pub enum BenchCommand {
    /// Tuples per second and Gbit/s from a sender to a receiver, measured at the receiver
    /// between its first and last tuple.
    Throughput(ThroughputArgs),
    /// Latency percentiles at a fixed rate: one way from CLOCK_MONOTONIC send timestamps
    /// carried in the tuples, or half the round trip through a reflector process (`--method`;
    /// the default across tcp and udp-mq).
    Latency(LatencyArgs),
    /// A built-in application's throughput under a plan, beside hand-written single-threaded
    /// programs doing the same computation on the same input, and with `--rate` its end-to-end
    /// latency.
    App(crate::apps::AppBenchArgs),
    /// OMDP's per-hop latency against the feed rate under each plan (the Vega paper's Figure
    /// 8), and the highest rate multiple each sustains.
    Omdp(crate::apps::OmdpBenchArgs),
    /// A Storm topology's (sol, throughput-test) end-to-end latency against its input rate
    /// under each plan: average, p50 and p99, and the rate the spout reached (marked when full
    /// queues held it back).
    Topology(crate::suite::TopologyArgs),
    /// The compression or encryption pipeline over a fixed input at each number of senders
    /// and receivers: MB/s and the speedup over a serial program measured in the same run (the
    /// TCD parallel runtime paper's curves).
    Pipeline(crate::apps::PipelineBenchArgs),
    /// Where each scheduler puts a topology's tasks on a simulated cluster of 2, 4 and 8
    /// hosts: the traffic crossing hosts and the load imbalance of round robin, Storm's even
    /// scheduler and Sluice's consolidation (the TurboStream paper's Table II); with `--run`
    /// (root), each placement run on hosts made of network namespaces: its rate, end-to-end
    /// latency and measured traffic across hosts.
    Placement(crate::apps::PlacementBenchArgs),
    /// The pause of on-line placement's redeploy: a running job suspended and resumed from
    /// its state on the scheduler's placement over two hosts of this machine (drain, restart),
    /// beside a cold start of the same plan, every repetition checked to lose and repeat no
    /// tuple.
    Redeploy(crate::apps::RedeployBenchArgs),
    /// WordCount's checkpoints through `sluice run`: throughput and p99 with a checkpoint
    /// every second beside without (interleaved rounds), recovery after `kill -9` of a PE
    /// split into detection, restart and restore with replay, and checkpoint duration and
    /// size beside the disk's write+fsync of the same bytes.
    Checkpoint(crate::apps::CheckpointBenchArgs),
    /// Kafka -> WordCount -> Kafka records/s at least once and exactly once, beside Kafka's own
    /// ProducerPerformance and ConsumerPerformance on the same broker in the same run.
    Kafka(crate::apps::KafkaBenchArgs),
    /// The hardware's own limits: cache-line ping-pong between two cores and one core's
    /// memcpy bandwidth.
    Baseline(crate::transports::hardware::BaselineArgs),
    /// Every experiment of the papers, beside the hardware and the peer libraries, in one run:
    /// results.jsonl, report.md, report.html and plots in a directory.
    Suite(crate::suite::SuiteArgs),
    /// The receiving process of a cross-process benchmark (started by the benchmark itself).
    #[command(hide = true)]
    Peer(crate::transports::endpoints::PeerArgs),
    /// The receiving process of a peer library's benchmark (started by the suite itself).
    #[command(hide = true)]
    PeerLib(crate::suite::PeerReceiverArgs),
    /// A sending process of a `shm-osr` benchmark (started by the benchmark itself).
    #[command(hide = true)]
    OsrSender(crate::transports::shm_osr::OsrSenderArgs),
}

impl BenchArgs {
    /// The validated settings of a throughput or latency benchmark.
    pub(crate) fn settings(&self) -> anyhow::Result<Settings> {
        let (common, bench, method) = match &self.command {
            BenchCommand::Throughput(t) => (&t.common, Bench::Throughput, None),
            BenchCommand::Latency(l) => (&l.common, Bench::Latency { rate: l.rate }, l.method),
            BenchCommand::Baseline(_)
            | BenchCommand::App(_)
            | BenchCommand::Omdp(_)
            | BenchCommand::Topology(_)
            | BenchCommand::Pipeline(_)
            | BenchCommand::Placement(_)
            | BenchCommand::Redeploy(_)
            | BenchCommand::Checkpoint(_)
            | BenchCommand::Kafka(_)
            | BenchCommand::Suite(_)
            | BenchCommand::PeerLib(_)
            | BenchCommand::Peer(_)
            | BenchCommand::OsrSender(_) => {
                bail!("this benchmark has no transport settings")
            }
        };
        Settings::from_args(common, bench, method)
    }
}
