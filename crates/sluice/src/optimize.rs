//! `sluice plan APP --optimize placement`: TurboStream's traffic-cutting placement of the
//! application's instances on the hosts of `--hosts` (this machine alone without it), written
//! as a plan file that `sluice run APP --plan FILE` runs as it is, after a comparison with the
//! placements round robin and Storm's even scheduler would give.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use sluice_apps::AppConfig;
use sluice_plan::traffic_placement::{compare, plan_file, task_graph, Scheduler};

use crate::plan_choice::AppArgs;

/// The optimizers `--optimize` knows.
pub(crate) const OPTIMIZERS: [&str; 1] = ["placement"];

/// Places `app`'s instances on its hosts and writes the plan file to `output` (standard output
/// when `None`); the comparison goes to standard error, so the plan file can be piped.
pub(crate) fn placement(app: &AppArgs, output: Option<&Path>) -> anyhow::Result<()> {
    // A PE per instance, to learn the instances and the edges between them.
    let per_instance = AppArgs {
        plan: "processes".into(),
        ..app.clone()
    };
    let (_, processes) = per_instance.build(AppConfig::default())?;
    let slots: Vec<usize> = processes.hosts.iter().map(|h| h.cores).collect();
    let tasks = task_graph(&processes, |_| 1.0);
    eprintln!(
        "{}: {} tasks on {} host(s) with {} slot(s)",
        processes.job,
        tasks.len(),
        slots.len(),
        slots.iter().sum::<usize>()
    );
    eprintln!(
        "{:<24} {:>20} {:>15}",
        "scheduler", "traffic across hosts", "load imbalance"
    );
    for (scheduler, quality) in compare(&tasks, &slots) {
        eprintln!(
            "{:<24} {:>19.1}% {:>15.2}",
            scheduler.name(),
            100.0 * quality.cross_host_traffic,
            quality.imbalance
        );
    }
    let host_of = Scheduler::Consolidated.assign(&tasks, &slots);
    let file = plan_file(&processes, &processes.hosts, &host_of);
    let text = format!(
        "# sluice plan {} --optimize placement: TurboStream's consolidation onto {} host(s)\n{}",
        app.app,
        slots.len(),
        toml::to_string(&file).context("cannot write the plan as TOML")?
    );
    match output {
        Some(path) => {
            std::fs::write(path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("plan: {}", path.display());
        }
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    Ok(())
}
