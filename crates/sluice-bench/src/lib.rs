//! `sluice bench`: the engine's benchmark commands.
//!
//! - `sluice bench throughput --transport fused|threaded --size BYTES`: a sender floods a
//!   receiver; tuples per second and Gbit/s are measured at the receiver between its first and
//!   last tuple (the IBM Streams report's sender -> receiver test).
//! - `sluice bench latency --transport fused|threaded --size BYTES --rate N`: the sender sends
//!   `N` tuples per second, each carrying its send time from `CLOCK_MONOTONIC`
//!   ([`sluice_types::monotonic_ns`]) in its first eight bytes; the receiver records arrival
//!   minus send time; the result gives p50, p99, p99.9 and the mean.
//!
//! Sluice is measured for real: a `source -> sink` graph planned fused or threaded and run by
//! `sluice_runtime` (module `transports::engine`). Each run is followed by a run of a
//! hand-written baseline sharing the same sender and receiver code (module
//! `transports::baseline`): a direct call for fused, a `crossbeam_channel::bounded(4096)`
//! between two pinned threads for threaded. Each run warms up first (discarded), `--repeat`
//! runs give medians plus every run's figures.
//!
//! - `--transport shm-vega|tcp|tcp-batched|tcp-adaptive`: sender and receiver in two pinned
//!   processes (module `transports::processes`); shm-vega against the hardware (cache-line
//!   transfer, memcpy), the tcp profiles against raw TCP on loopback measured in the same run
//!   (module `transports::network`).
//! - `--transport udp-mq [--queues Q]`: the same across UDP, against raw UDP with one system
//!   call per datagram (module `transports::udp`); nothing holds a UDP sender back, so the
//!   share of tuples lost is reported beside the rate.
//!
//! - `--transport mpi` (feature `mpi`): two ranks of one `mpirun` joined by the `mpi`
//!   transport, against raw TCP on loopback measured in the same run (module
//!   `transports::mpi`).
//!
//! - `sluice bench baseline`: the hardware's limits (cache-line one-way time between two cores,
//!   one core's memcpy bandwidth), module `transports::hardware`.
//!
//! - `sluice bench app NAME --plan P [--rate N]`: a built-in application's throughput under a
//!   plan beside hand-written single-threaded programs doing the same computation (its
//!   yardsticks), and with a rate its end-to-end latency (module `apps`).
//! - `sluice bench pipeline compress|encrypt --parallelism 1,2`: the compression or encryption
//!   pipeline over a fixed input at each number of senders and receivers, its MB/s and its
//!   speedup over a serial program measured in the same run (module `apps`).
//!
//! - `sluice bench topology NAME --rates R,... [--plans P,...]`: a Storm topology's (`sol`,
//!   `throughput-test`) end-to-end latency and the input rate it reached, against the input
//!   rate asked, under each plan (module `suite::topology`, which runs `sluice bench app` for
//!   each point).
//!
//! - `sluice bench placement`: where each scheduler puts a topology's tasks on 2, 4 and 8
//!   hosts, and with `--run` each placement run on network-namespace hosts (module `apps`).
//! - `sluice bench redeploy [--apps A,...] [--repeat R]`: the pause of on-line placement's
//!   redeploy (drain, restart) beside a cold start of the same plan, every repetition checked
//!   to lose and repeat no tuple (module `apps`).
//! - `sluice bench checkpoint [--quick]`: WordCount's checkpoints through `sluice run`: the
//!   overhead of a checkpoint every second (throughput and p99 beside no checkpoints,
//!   interleaved), recovery after `kill -9` of a PE, and checkpoint duration and size beside
//!   the disk's own write rate (module `apps`).
//!
//! The CLI calls [`main`] with its parsed [`BenchArgs`]; [`run`] returns the [`BenchResult`]
//! without printing.
//!
//! The crate is built in layers, each using only the layers below it, and no two of its
//! modules use each other (`tests/layers.rs` fails otherwise): `foundation` (settings, tuples,
//! sending and recording, statistics, the result types) <- `transports` (the transport
//! benchmarks and their baselines) <- `apps` (the application benchmarks and their
//! yardsticks) <- `suite` (every experiment and its report) <- `cli` (the command line, which
//! names them all) and this root, which only dispatches.
#![forbid(unsafe_code)]

mod apps;
mod cli;
mod foundation;
mod suite;
mod transports;

pub use apps::{
    AppBenchArgs, CheckpointBenchArgs, PipelineBenchArgs, PlacementBenchArgs, RedeployBenchArgs,
};
pub use cli::{BenchArgs, BenchCommand};
pub use foundation::args::{
    CommonArgs, LatencyArgs, LatencyMethod, RunArgs, ThroughputArgs, Transport, TupleEncoding,
    MAX_NORMAL_SIZE,
};
pub use foundation::netns;
pub use foundation::payload::{SUPPORTED_FACADE_SIZES, TIMESTAMP_BYTES};
pub use foundation::record::{Loss, RunFigures};
pub use foundation::report::{render_json, render_table, BaselineResult, BenchResult};
pub use foundation::stats::{gbit_per_sec, median, tuples_per_sec, LatencySummary};
pub use foundation::warnings::{Check, Warning};
pub use suite::{Experiment, PeerReceiverArgs, SuiteArgs, TopologyArgs};
pub use transports::hardware::{BaselineArgs, HardwareResult, MemcpyFigure};

use transports::{hardware, measure, processes, shm_osr};

/// Runs the benchmark `args` asks for and prints its result: a table, or one line of JSON with
/// `--json`.
pub fn main(args: BenchArgs) -> anyhow::Result<()> {
    match &args.command {
        BenchCommand::App(app) => apps::main(app),
        BenchCommand::Omdp(args) => apps::omdp::main(args),
        BenchCommand::Pipeline(pipeline) => apps::pipeline_main(pipeline),
        BenchCommand::Placement(placement) => apps::placement_main(placement),
        BenchCommand::Redeploy(redeploy) => apps::redeploy_main(redeploy),
        BenchCommand::Checkpoint(checkpoint) => apps::checkpoint::main(checkpoint),
        BenchCommand::Kafka(kafka) => apps::kafka::main(kafka),
        BenchCommand::Baseline(baseline) => hardware::main(baseline),
        BenchCommand::Peer(peer) => processes::peer(peer),
        BenchCommand::OsrSender(sender) => shm_osr::sender(sender),
        BenchCommand::Suite(suite) => suite::main(suite),
        BenchCommand::Topology(topology) => suite::topology(topology),
        BenchCommand::PeerLib(receiver) => suite::peer_receiver(receiver),
        BenchCommand::Throughput(_) | BenchCommand::Latency(_) => measure::main(&args.settings()?),
    }
}

/// Runs the benchmark `args` asks for and returns its result.
pub fn run(args: &BenchArgs) -> anyhow::Result<BenchResult> {
    measure::measure(&args.settings()?)
}
