//! `sluice plan APP --optimize placement|fusion|replication`: a plan file computed for the
//! application, which `sluice run APP --plan FILE` runs as it is.
//! - `placement`: TurboStream's traffic-cutting placement of the instances on the hosts of
//!   `--hosts` (this machine alone without it), after a comparison with the placements round
//!   robin and Storm's even scheduler would give; from the traffic and CPU a run measured
//!   with `--profile FILE`, from declared rates without it.
//! - `fusion`: COLA-style fusion from a run's profile (`sluice run APP --profile FILE`):
//!   which instances share a thread, at most `--cores` threads.
//! - `replication`: the busiest operator that declared itself replicable gets the instances
//!   the cores allow, then fusion places them.
//!
//! The figures go to standard error, the plan file to `--output` or standard output.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use sluice_apps::AppConfig;
use sluice_plan::fusion::{FusionChoice, DEFAULT_HOP_NS};
use sluice_plan::fusion::{InstanceProfile, Profile};
use sluice_plan::replication::ReplicationChoice;
use sluice_plan::traffic_placement::{
    compare, plan_file, profiled_task_graph, task_graph, Scheduler,
};
use sluice_plan::{PhysicalPlan, PlanFile, PlanOptions, PlanRequest, ReplicaSpec};

use crate::plan_choice::AppArgs;

/// The options of `sluice plan` that compute a plan.
#[derive(Args, Debug)]
pub(crate) struct OptimizeArgs {
    /// Compute a plan instead of printing one: `placement` (instances on the hosts of
    /// `--hosts`, cutting the traffic between hosts), `fusion` (instances into threads, from
    /// `--profile`), `replication` (more instances of the busiest replicable operator, from
    /// `--profile`).
    #[arg(long = "optimize", value_name = "OPTIMIZER", value_parser = ["placement", "fusion", "replication"], conflicts_with_all = ["dot", "json"])]
    pub optimizer: Option<String>,
    /// Where `--optimize` writes its plan file (standard output without it).
    #[arg(long, requires = "optimizer")]
    output: Option<PathBuf>,
    /// A run's profile (`sluice run APP --profile FILE`): for fusion and replication, and for
    /// placement to weigh instances and edges as the run measured them.
    #[arg(long, requires = "optimizer")]
    profile: Option<PathBuf>,
    /// Cores the plan may use (default: this machine's).
    #[arg(long, requires = "optimizer")]
    cores: Option<usize>,
}

/// Runs the optimizer `args` names on `app`.
pub(crate) fn optimize(app: &AppArgs, args: &OptimizeArgs) -> anyhow::Result<()> {
    let (text, about) = match args.optimizer.as_deref() {
        Some("fusion") => fusion(app, args)?,
        Some("replication") => replication(app, args)?,
        _ => placement(app, args)?,
    };
    let text = format!(
        "# sluice plan {} --optimize {}: {about}\n{}",
        app.app,
        args.optimizer.as_deref().unwrap_or_default(),
        toml::to_string(&text).context("cannot write the plan as TOML")?
    );
    match &args.output {
        Some(path) => {
            std::fs::write(path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("plan: {}", path.display());
        }
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    Ok(())
}

/// The application planned with a PE per instance, to learn its instances and their edges;
/// the graph replicated as `replicas` say.
fn per_instance(app: &AppArgs) -> anyhow::Result<(sluice_apps::App, PhysicalPlan)> {
    AppArgs {
        plan: "processes".into(),
        ..app.clone()
    }
    .build(AppConfig::default())
}

/// Places `app`'s instances on its hosts, from a profile's measured figures if given.
fn placement(app: &AppArgs, args: &OptimizeArgs) -> anyhow::Result<(PlanFile, String)> {
    let (_, processes) = per_instance(app)?;
    let slots: Vec<usize> = processes.hosts.iter().map(|h| h.cores).collect();
    let (tasks, weighed) = match &args.profile {
        Some(path) => (
            profiled_task_graph(&processes, &read_profile(args, &processes)?),
            format!("as {} measured them", path.display()),
        ),
        None => (
            task_graph(&processes, |_| 1.0),
            "at declared rates".to_string(),
        ),
    };
    eprintln!(
        "{}: {} tasks on {} host(s) with {} slot(s), {weighed}",
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
    Ok((
        plan_file(&processes, &processes.hosts, &host_of),
        format!("TurboStream's consolidation onto {} host(s)", slots.len()),
    ))
}

/// Reads the profile `args` names and checks it is `plan`'s job's.
fn read_profile(args: &OptimizeArgs, plan: &PhysicalPlan) -> anyhow::Result<Profile> {
    let path = args
        .profile
        .as_ref()
        .context("this optimizer needs a run's profile: --profile FILE (made by sluice run APP --profile FILE)")?;
    let text = sluice_plan::read_text_file(path)
        .with_context(|| format!("cannot read profile {}", path.display()))?;
    let profile: Profile = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a profile sluice run --profile wrote",
            path.display()
        )
    })?;
    anyhow::ensure!(
        profile.job == plan.job,
        "{} profiles {}, not {}",
        path.display(),
        profile.job,
        plan.job
    );
    Ok(profile)
}

fn cores(args: &OptimizeArgs) -> usize {
    args.cores
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1)
}

/// Threads for `app`'s instances from a profile.
fn fusion(app: &AppArgs, args: &OptimizeArgs) -> anyhow::Result<(PlanFile, String)> {
    let (_, processes) = per_instance(app)?;
    let profile = read_profile(args, &processes)?;
    let cores = cores(args);
    let choice = FusionChoice::new(&processes, &profile, cores, DEFAULT_HOP_NS);
    let fused = FusionChoice::new(&processes, &profile, 1, DEFAULT_HOP_NS);
    report_fusion(&choice, &processes, fused.bottleneck());
    Ok((
        choice.plan_file(&processes),
        format!(
            "{} thread(s) on {cores} core(s) from {}",
            choice.threads.len(),
            args.profile.as_deref().unwrap_or(Path::new("")).display()
        ),
    ))
}

/// Prints each thread's expected load and the bottleneck against full fusion's.
fn report_fusion(choice: &FusionChoice, plan: &PhysicalPlan, fused: f64) {
    for (members, load) in choice.threads.iter().zip(&choice.loads) {
        let names: Vec<&str> = members
            .iter()
            .map(|&m| plan.instances[m].name.as_str())
            .collect();
        eprintln!(
            "thread: {:.2} core(s) at the profiled rate: {}",
            load,
            names.join(", ")
        );
    }
    if choice.bottleneck() > 0.0 {
        eprintln!(
            "expected throughput: {:.2}x full fusion's (bottleneck {:.2} against {:.2} core(s))",
            fused / choice.bottleneck(),
            choice.bottleneck(),
            fused
        );
    }
}

/// Writes the profile of a finished run of `plan` to `path` (JSON), unless this process is a
/// PE of the job (the launching process writes it, from every PE's report).
pub(crate) fn write_profile(
    path: &Path,
    plan: &sluice_plan::PhysicalPlan,
    report: &sluice_runtime::JobReport,
) -> anyhow::Result<()> {
    if sluice_runtime::is_pe_process() {
        return Ok(());
    }
    let mut sent: BTreeMap<(usize, usize), u64> = BTreeMap::new();
    for i in &report.instances {
        if let Some(from) = plan.instances.iter().find(|p| p.name == i.instance) {
            for &(to, tuples) in &i.sent {
                *sent.entry((from.id.0, to)).or_default() += tuples;
            }
        }
    }
    let profile = Profile::measured(
        plan,
        report.elapsed.as_secs_f64(),
        |name| {
            let i = report.instances.iter().find(|i| i.instance == name)?;
            Some(InstanceProfile {
                tuples_in: i.tuples_in,
                tuples_out: i.tuples_out,
                cpu_ns: i.cpu_ns,
            })
        },
        |from, to| sent.get(&(from, to)).copied().unwrap_or(0),
    );
    let text = serde_json::to_string_pretty(&profile)?;
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!("profile: {}", path.display());
    Ok(())
}

/// More instances of the busiest replicable operator, then threads for all.
fn replication(app: &AppArgs, args: &OptimizeArgs) -> anyhow::Result<(PlanFile, String)> {
    let (built, processes) = per_instance(app)?;
    let profile = read_profile(args, &processes)?;
    let cores = cores(args);
    let graph = &built.graph;
    let choice = ReplicationChoice::new(graph, &processes, &profile, cores)?;
    eprintln!(
        "{}: {:.2} core(s) at the profiled rate, {:.0}% of the job's CPU; {} instance(s) -> {}",
        choice.operator,
        choice.load,
        100.0 * choice.share,
        choice.from,
        choice.parallelism
    );
    if let Some(busier) = &choice.busier {
        eprintln!("note: {busier} is busier per instance but did not declare itself replicable");
    }
    let mut file = PlanFile {
        replicas: vec![ReplicaSpec {
            operator: choice.operator.clone(),
            parallelism: choice.parallelism,
        }],
        ..PlanFile::default()
    };
    // Threads for the replicated graph: fusion over the profile with the operator's figures
    // shared among its new instances.
    let request = PlanRequest::File("replication".into(), file.clone());
    let wide = sluice_plan::replicated_graph(graph, &request)?;
    let wide_plan = sluice_plan::plan(&wide, &PlanRequest::Processes, &PlanOptions::default())?;
    let spread = choice.spread(&processes, &profile, &wide_plan);
    let threads = FusionChoice::new(&wide_plan, &spread, cores, DEFAULT_HOP_NS);
    let fused = FusionChoice::new(&processes, &profile, 1, DEFAULT_HOP_NS);
    report_fusion(&threads, &wide_plan, fused.bottleneck());
    file.threads = threads.plan_file(&wide_plan).threads;
    Ok((
        file,
        format!(
            "{} as {} instance(s) on {cores} core(s)",
            choice.operator, choice.parallelism
        ),
    ))
}
