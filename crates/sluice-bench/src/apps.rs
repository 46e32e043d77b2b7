//! The third layer: the application benchmarks, `sluice bench app NAME`. A built-in
//! application runs under a plan and, in the same invocation, hand-written single-threaded
//! Rust programs (its yardsticks) do the same computation on the same input; the result gives
//! the throughputs, the application's ratio to each yardstick and, with `--rate`, the
//! application's end-to-end latency percentiles. It stands on the foundation and on the
//! transports layer (for pinning).
//!
//! An application becomes benchable by one entry in `registry` (its name, the operator whose
//! tuples in are its throughput, its yardsticks), its yardsticks in a module of its own
//! (`wordcount`, `vwap`; `storm` for SOL and the Throughput Test). Module `measure` runs a
//! benchmark, `result` reports it. `placement` (`sluice bench placement`) and `redeploy`
//! (`sluice bench redeploy`, the pause of on-line placement's redeploy) place an
//! application's jobs on hosts, with what they share in `jobs`; `checkpoint` (`sluice bench
//! checkpoint`) measures checkpoints' overhead, recovery and size through `sluice run`; `kafka`
//! (`sluice bench kafka`) WordCount from Kafka to Kafka beside Kafka's own performance tools.

pub(crate) mod checkpoint;
mod entry;
mod jobs;
pub(crate) mod kafka;
mod measure;
pub(crate) mod omdp;
mod pipeline;
mod placement;
mod redeploy;
mod registry;
mod result;
mod speedup;
mod storm;
mod vwap;
mod wordcount;

pub use checkpoint::CheckpointBenchArgs;
pub(crate) use entry::Benchable;
pub use kafka::KafkaBenchArgs;
pub use measure::AppBenchArgs;
pub use omdp::OmdpBenchArgs;
pub use placement::PlacementBenchArgs;
pub(crate) use placement::{main as placement_main, table as placement_table};
pub(crate) use redeploy::main as redeploy_main;
pub use redeploy::RedeployBenchArgs;
pub(crate) use registry::BENCHABLE;
pub(crate) use speedup::main as pipeline_main;
pub use speedup::PipelineBenchArgs;

use std::io::Write;

use measure::{measure, AppSettings};

/// Runs `sluice bench app` and prints the result: a table, or one line of JSON with `--json`.
/// In a process the runtime started as a PE of the application's job, runs that PE instead.
pub(crate) fn main(args: &AppBenchArgs) -> anyhow::Result<()> {
    let settings = AppSettings::from_args(args)?;
    if sluice_runtime::is_pe_process() {
        return settings.run_pe();
    }
    let result = measure(&settings)?;
    let mut out = std::io::stdout().lock();
    if settings.json {
        writeln!(out, "{}", result.json())?;
    } else {
        write!(out, "{}", result.table())?;
    }
    Ok(())
}
