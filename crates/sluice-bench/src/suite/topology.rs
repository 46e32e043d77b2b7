//! `sluice bench topology NAME --rates 1000,5000,... [--plans fused,threaded,processes]`: a
//! Storm topology's end-to-end latency against its input rate under each plan, the TurboStream
//! paper's Figure 10 (average latency of the Throughput Test topology from 1,000 to 80,000
//! tuples/s).
//!
//! Each plan and rate is one `sluice bench app NAME --plan P --rate R --no-yardsticks`, run as
//! a child process as the suite runs its applications (module `app_job`: a plan of several
//! processes re-executes the command that runs it, once per PE, so each measurement needs a
//! command of its own). Each gives the median over `--repeat` runs of the mean, p50, p99 and
//! p99.9 latency and of the rate the spout reached while it sent. Queues are bounded: a
//! topology that cannot keep up holds its spout back, so the rate reached falls below the
//! rate asked (the table marks it) and latency stays that of full queues rather than growing
//! with a backlog.

use std::io::Write;

use anyhow::{bail, Context};
use clap::Args;
use serde_json::Value;

use super::app_job::AppJob;
use super::report::topology_table;
use super::rows::rows;
use crate::apps::{Benchable, BENCHABLE};
use crate::foundation::args::RunArgs;

/// Options of `sluice bench topology`.
#[derive(Debug, Clone, Args)]
pub struct TopologyArgs {
    /// The topology: `sol` or `throughput-test`.
    pub app: String,
    /// Input rates, tuples per second from the spout, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "N,...",
        default_value = "1000,5000,10000,20000,40000,80000"
    )]
    pub rates: Vec<u64>,
    /// Plans, comma-separated: `fused`, `threaded`, `processes`, or a plan file.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "PLAN,...",
        default_value = "fused,threaded,processes"
    )]
    pub plans: Vec<String>,
    /// How long and how often each point runs, and how it prints (`--json`: each point's
    /// record, one line each).
    #[command(flatten)]
    pub run: RunArgs,
    /// Application setting, `key=value`; repeatable (see `sluice run NAME --help`).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub settings: Vec<String>,
}

/// The benchable applications that report the rate their source reached: the topologies.
fn topology(name: &str) -> anyhow::Result<&'static Benchable> {
    let topologies = BENCHABLE.iter().filter(|b| b.input_rate.is_some());
    if let Some(found) = topologies.clone().find(|b| b.name == name) {
        return Ok(found);
    }
    let names: Vec<&str> = topologies.map(|b| b.name).collect();
    bail!(
        "no topology named '{name}'; topologies: {}",
        names.join(", ")
    )
}

/// Checks `args`: a topology, rates and plans given, the settings and every plan valid for
/// the application (built and planned once here, so that a mistake is one line before any
/// run).
fn checked(args: &TopologyArgs) -> anyhow::Result<&'static Benchable> {
    let bench = topology(&args.app)?;
    args.run.checked()?;
    if args.rates.is_empty() || args.rates.contains(&0) {
        bail!("--rates must list rates of at least 1 tuple per second");
    }
    if args.plans.is_empty() {
        bail!("--plans must list at least one plan");
    }
    let config = sluice_apps::AppConfig {
        settings: sluice_apps::Settings::parse(args.settings.iter().map(String::as_str))?,
        ..sluice_apps::AppConfig::default()
    };
    let app = sluice_apps::build(bench.name, &config)?;
    for plan in &args.plans {
        let request = sluice_apps::plan_request(bench.name, plan)?;
        sluice_plan::plan(&app.graph, &request, &sluice_plan::PlanOptions::default())
            .with_context(|| format!("--plans {plan}"))?;
    }
    Ok(bench)
}

/// The jobs of `args`: every plan at every rate, plan by plan.
fn jobs(bench: &Benchable, args: &TopologyArgs) -> anyhow::Result<Vec<AppJob>> {
    let timing = args.run.checked()?;
    Ok(args
        .plans
        .iter()
        .flat_map(|plan| {
            args.rates.iter().map(move |&rate| {
                AppJob::new(bench, plan.clone(), Some(rate), timing).app_only(&args.settings)
            })
        })
        .collect())
}

/// Runs `sluice bench topology` and prints its table, or its records with `--json`.
pub(crate) fn main(args: &TopologyArgs) -> anyhow::Result<()> {
    let bench = checked(args)?;
    let mut records: Vec<Value> = Vec::new();
    let mut out = std::io::stdout().lock();
    for job in jobs(bench, args)? {
        eprintln!("{}", job.label());
        let record = job.run();
        if args.run.json {
            writeln!(out, "{record}")?;
        }
        records.push(record);
    }
    if !args.run.json {
        let rows = rows(&records);
        let table = topology_table(bench.name, &rows.iter().collect::<Vec<_>>());
        write!(
            out,
            "{}",
            table
                .markdown()
                .replacen("### ", "sluice bench topology ", 1)
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: TopologyArgs,
    }

    fn parse(line: &str) -> TopologyArgs {
        Cli::try_parse_from(std::iter::once("topology").chain(line.split_whitespace()))
            .unwrap()
            .args
    }

    #[test]
    fn every_plan_runs_at_every_rate_without_yardsticks() {
        let args = parse("sol --rates 1000,40000 --plans fused,processes --set levels=2");
        let bench = checked(&args).unwrap();
        let jobs = jobs(bench, &args).unwrap();
        let labels: Vec<String> = jobs.iter().map(AppJob::label).collect();
        assert_eq!(
            labels,
            [
                "sol fused at 1000/s",
                "sol fused at 40000/s",
                "sol processes at 1000/s",
                "sol processes at 40000/s"
            ]
        );
        let defaults = parse("throughput-test");
        assert_eq!(defaults.rates, [1000, 5000, 10000, 20000, 40000, 80000]);
        assert_eq!(defaults.plans, ["fused", "threaded", "processes"]);
    }

    #[test]
    fn mistakes_are_one_line_before_any_run() {
        for (line, needle) in [
            (
                "wordcount",
                "no topology named 'wordcount'; topologies: sol, throughput-test",
            ),
            ("sol --rates 0", "--rates must list rates of at least 1"),
            ("sol --set levels=0", "setting levels: 0 is out of range"),
            ("sol --plans fused,nosuch", "--plan nosuch"),
            ("sol --duration 0", "--duration must be more than 0"),
        ] {
            let error = format!("{:#}", checked(&parse(line)).err().expect(line));
            assert!(error.contains(needle), "{line}: {error}");
        }
    }
}
