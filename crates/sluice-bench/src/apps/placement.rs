//! `sluice bench placement`: the TurboStream paper's Table II for Sluice, on a simulated
//! cluster. For each application (SOL, the Throughput Test by default) and each number of
//! hosts, a hosts file of that many hosts sharing a fixed number of worker slots (the paper's
//! 8 workers over 8, 4 and 2 nodes: 8N8W, 4N8W, 2N8W), the fraction of the traffic that
//! crosses hosts and the load imbalance under round robin, Storm's even scheduler and
//! Sluice's consolidation. The traffic is the topology's, at declared rates
//! ([`sluice_plan::traffic_placement`]); no job runs, so the figures do not depend on the
//! machine.
//!
//! With `--run` (root only), each placement runs for real on hosts made of network namespaces
//! and the table gives, beside the predicted traffic across hosts, the measured one, the rate
//! reached and the end-to-end latency (module `measured`).

mod measured;

use std::fmt::Write as _;
use std::io::Write;
use std::net::Ipv4Addr;

use clap::Args;
use sluice_apps::{AppConfig, Settings};
use sluice_plan::traffic_placement::{compare, task_graph};
use sluice_plan::{HostsFile, PlanOptions, PlanRequest};

use super::jobs::hosts_file;
use crate::foundation::args::RunArgs;

/// Arguments of `sluice bench placement`.
#[derive(Debug, Clone, Args)]
pub struct PlacementBenchArgs {
    /// The applications, comma-separated.
    #[arg(long, default_value = "sol,throughput-test", value_delimiter = ',')]
    apps: Vec<String>,
    /// The numbers of hosts, comma-separated.
    #[arg(long, default_value = "2,4,8", value_delimiter = ',')]
    hosts: Vec<usize>,
    /// Worker slots in the whole cluster, spread evenly over its hosts (at least one each).
    #[arg(long, default_value_t = 8)]
    workers: usize,
    /// Application setting, `key=value`; repeatable, given to every application.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    settings: Vec<String>,
    /// Run each scheduler's placement on that many hosts made of network namespaces (needs
    /// root) and measure the rate, the end-to-end latency and the traffic across hosts.
    #[arg(long)]
    run: bool,
    /// With --run: tuples per second from the spout.
    #[arg(long, value_name = "N", default_value_t = 5000)]
    rate: u64,
    /// With --run: how long and how often each placement runs, and how it prints.
    #[command(flatten)]
    runs: RunArgs,
}

/// Prints the table, computed or, with `--run`, measured.
pub(crate) fn main(args: &PlacementBenchArgs) -> anyhow::Result<()> {
    if args.run {
        return measured::main(args);
    }
    let settings = Settings::parse(args.settings.iter().map(String::as_str))?;
    let apps: Vec<&str> = args.apps.iter().map(String::as_str).collect();
    let table = table(&apps, &args.hosts, args.workers, &settings)?;
    std::io::stdout().lock().write_all(table.as_bytes())?;
    Ok(())
}

/// The table, in markdown: a row per application, cluster and scheduler.
pub(crate) fn table(
    apps: &[&str],
    host_counts: &[usize],
    workers: usize,
    settings: &Settings,
) -> anyhow::Result<String> {
    let mut out = String::from(
        "| application | tasks | hosts x slots | scheduler | traffic across hosts | load imbalance |\n\
         |---|---:|---|---|---:|---:|\n",
    );
    for &app in apps {
        let config = AppConfig {
            settings: settings.clone(),
            ..AppConfig::default()
        };
        let built = sluice_apps::build(app, &config)?;
        for &count in host_counts {
            anyhow::ensure!(count > 0, "--hosts takes numbers of hosts above 0");
            let hosts = cluster(count, workers);
            let slots: Vec<usize> = hosts.hosts.iter().map(|h| h.cores).collect();
            let options = PlanOptions {
                hosts: Some(hosts),
                ..PlanOptions::default()
            };
            let plan = sluice_plan::plan(&built.graph, &PlanRequest::Processes, &options)?;
            let tasks = task_graph(&plan, |_| 1.0);
            for (scheduler, quality) in compare(&tasks, &slots) {
                let _ = writeln!(
                    out,
                    "| {app} | {} | {count} x {} | {} | {:.1}% | {:.2} |",
                    tasks.len(),
                    slots[0],
                    scheduler.name(),
                    100.0 * quality.cross_host_traffic,
                    quality.imbalance
                );
            }
        }
    }
    Ok(out)
}

/// `count` hosts sharing `workers` slots as evenly as they can (at least one each).
fn cluster(count: usize, workers: usize) -> HostsFile {
    hosts_file((0..count).map(|h| {
        (
            format!("n{}", h + 1),
            Ipv4Addr::new(10, 0, 0, (h % 250 + 1) as u8).into(),
            (workers / count + usize::from(h < workers % count)).max(1),
        )
    }))
}
