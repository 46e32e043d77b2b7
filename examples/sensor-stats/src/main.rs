//! `sensor-stats`: a Sluice application written in a crate of its own, the way a user writes
//! one. It defines its own tuple types (a fixed-size facade reading, a serialized summary) and
//! its own operators (per-sensor statistics, kept by key in parallel instances, and a sink that
//! writes them), builds the graph with the builder API, and runs it under the plan asked for.
//!
//! With `--plan processes` the program re-executes itself once per operator instance: every
//! process parses the same arguments and builds the same graph, and `sluice_runtime::run` makes
//! each child the PE the launcher assigned it (and returns only in the launching process).
//!
//! ```text
//! cargo run -p sensor-stats --release -- --plan processes --readings 1000000 --output stats.tsv
//! ```
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context;
use bytemuck::{Pod, Zeroable};
use clap::Parser;
use serde::{Deserialize, Serialize};
use sluice_graph::{
    expect_tuple, Graph, GraphBuilder, Operator, OperatorError, Output, Partitioning, Ports,
};
use sluice_ops::IterSource;
use sluice_plan::{PlanFile, PlanOptions, PlanRequest};
use sluice_runtime::RunOptions;
use sluice_types::{facade_tuple, normal_tuple, TupleRef};

/// One measurement: fixed size, so it crosses processes as its bytes, without serialization.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct Reading {
    sensor: u32,
    _pad: u32,
    /// The value in thousandths.
    milli: i64,
}
facade_tuple!(Reading);

/// What one sensor did over the whole stream.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Summary {
    sensor: u32,
    count: u64,
    sum_milli: i64,
    min_milli: i64,
    max_milli: i64,
}
normal_tuple!(Summary);

/// Keeps a [`Summary`] per sensor and emits them all when its input ends.
#[derive(Default)]
struct SensorStats {
    sensors: BTreeMap<u32, Summary>,
}

impl Operator for SensorStats {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let r = expect_tuple::<Reading>(port, tuple)?;
        let s = self.sensors.entry(r.sensor).or_insert(Summary {
            sensor: r.sensor,
            count: 0,
            sum_milli: 0,
            min_milli: i64::MAX,
            max_milli: i64::MIN,
        });
        s.count += 1;
        s.sum_milli += r.milli;
        s.min_milli = s.min_milli.min(r.milli);
        s.max_milli = s.max_milli.max(r.milli);
        Ok(())
    }

    fn finish(&mut self, out: &mut Output<'_>) -> Result<(), OperatorError> {
        for (_, summary) in std::mem::take(&mut self.sensors) {
            out.emit(0, summary)?;
        }
        Ok(())
    }
}

/// Writes every summary, sorted by sensor, when the stream ends.
struct WriteSummaries {
    output: Option<PathBuf>,
    summaries: Vec<Summary>,
}

impl Operator for WriteSummaries {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.summaries
            .push(expect_tuple::<Summary>(port, tuple)?.clone());
        Ok(())
    }

    fn finish(&mut self, _out: &mut Output<'_>) -> Result<(), OperatorError> {
        let Some(path) = &self.output else {
            return Ok(());
        };
        self.summaries.sort_by_key(|s| s.sensor);
        let write = || -> std::io::Result<()> {
            let mut w = BufWriter::new(File::create(path)?);
            for s in &self.summaries {
                let mean = s.sum_milli as f64 / s.count as f64 / 1000.0;
                writeln!(
                    w,
                    "{}\t{}\t{mean:.3}\t{:.3}\t{:.3}",
                    s.sensor,
                    s.count,
                    s.min_milli as f64 / 1000.0,
                    s.max_milli as f64 / 1000.0
                )?;
            }
            w.flush()
        };
        write().map_err(|e| OperatorError::io(format!("write {}", path.display()), e))
    }
}

/// Command-line arguments.
#[derive(Parser, Debug)]
#[command(about = "Per-sensor statistics over generated readings, on Sluice")]
struct Args {
    /// `fused`, `threaded`, `processes`, or a plan file.
    #[arg(long, default_value = "fused")]
    plan: String,
    /// Readings to generate.
    #[arg(long, default_value_t = 100_000)]
    readings: u64,
    /// Distinct sensors.
    #[arg(long, default_value_t = 64)]
    sensors: u32,
    /// Instances of the statistics operator (readings are partitioned by sensor).
    #[arg(long, default_value_t = 2)]
    parallelism: usize,
    /// Where to write `sensor, count, mean, min, max` lines.
    #[arg(long)]
    output: Option<PathBuf>,
}

/// A deterministic reading stream: every process that builds the graph builds the same one.
fn readings(n: u64, sensors: u32) -> impl Iterator<Item = Reading> {
    (0..n).map(move |i| Reading {
        sensor: (i.wrapping_mul(2_654_435_761) % u64::from(sensors.max(1))) as u32,
        _pad: 0,
        milli: (i.wrapping_mul(7919) % 100_003) as i64 - 50_000,
    })
}

fn graph(args: &Args) -> anyhow::Result<Graph> {
    let mut g = GraphBuilder::new("sensor-stats");
    let (n, sensors) = (args.readings, args.sensors);
    let source = g.source("readings", Ports::new().output::<Reading>(), move |_| {
        IterSource::new(readings(n, sensors))
    });
    let stats = g.operator(
        "stats",
        Ports::new().input::<Reading>().output::<Summary>(),
        |_| SensorStats::default(),
    );
    let output = args.output.clone();
    let sink = g.operator("write", Ports::new().input::<Summary>(), move |_| {
        WriteSummaries {
            output: output.clone(),
            summaries: Vec::new(),
        }
    });
    g.set_parallelism(stats, args.parallelism)?;
    g.connect_with(
        source.out(0),
        stats.input(0),
        Partitioning::key_by(|r: &Reading| r.sensor),
    )?;
    g.connect(stats.out(0), sink.input(0))?;
    Ok(g.build()?)
}

fn request(plan: &str) -> anyhow::Result<PlanRequest> {
    Ok(match plan {
        "fused" => PlanRequest::Fused,
        "threaded" => PlanRequest::Threaded,
        "processes" => PlanRequest::Processes,
        path => {
            let text = std::fs::read_to_string(path).with_context(|| format!("--plan {path}"))?;
            PlanRequest::File(path.to_string(), PlanFile::parse(&text)?)
        }
    })
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let graph = graph(&args)?;
    let plan = sluice_plan::plan(&graph, &request(&args.plan)?, &PlanOptions::default())?;
    let report = sluice_runtime::run(&graph, &plan, &RunOptions::default())?;
    println!(
        "{} readings from {} sensors in {:.3} s under {} ({} process(es))",
        report.tuples_in("stats"),
        report.tuples_in("write"),
        report.elapsed.as_secs_f64(),
        plan.strategy,
        plan.pes.len()
    );
    Ok(())
}
