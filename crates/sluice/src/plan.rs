//! `sluice plan`: print the physical plan of an application, or draw it (`--svg FILE`, with no
//! Graphviz needed).

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;

use clap::Args;
use sluice_apps::AppConfig;
use sluice_plan::{AutoChoice, PhysicalPlan, PlanRequest};

use crate::plan_choice::{AppArgs, DEFAULT_PLAN};

/// Arguments of `sluice plan`.
#[derive(Args, Debug)]
pub(crate) struct PlanArgs {
    #[command(flatten)]
    app: AppArgs,
    /// Print Graphviz DOT instead of text.
    #[arg(long)]
    dot: bool,
    /// Print the plan as JSON, as PEs receive it.
    #[arg(long, conflicts_with = "dot")]
    json: bool,
    /// Draw the plan as SVG into FILE (PEs, threads, operators, transports); prints nothing.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["dot", "json"])]
    svg: Option<PathBuf>,
    /// Tuples a second each source is asked for, which `--plan auto` plans for; 0: as fast
    /// as they go (default: `sluice run`'s, 100000).
    #[arg(long)]
    rate: Option<u64>,
    #[command(flatten)]
    optimize: crate::optimize::OptimizeArgs,
}

pub(crate) fn plan(args: PlanArgs) -> anyhow::Result<()> {
    if args.app.app.ends_with(".py") {
        let plan = script_plan(&args.app)?;
        return print(&args, &plan, None);
    }
    if args.optimize.optimizer.is_some() {
        return crate::optimize::optimize(&args.app, &args.optimize);
    }
    let rate = Some(args.rate.unwrap_or(crate::run::DEFAULT_GENERATED_RATE));
    let config = AppConfig {
        rate,
        ..AppConfig::default()
    };
    let (app, plan) = args.app.build(config)?;
    let why = match args.app.request()? {
        PlanRequest::Auto => {
            let options = args.app.options_at(rate)?;
            Some(AutoChoice::new(&app.graph, &options)?.reason)
        }
        _ => None,
    };
    print(&args, &plan, why)
}

/// Prints `plan` as `args` ask (text, with `why` after it when auto chose it; DOT; JSON), or
/// draws it into `--svg`'s file.
fn print(args: &PlanArgs, plan: &PhysicalPlan, why: Option<String>) -> anyhow::Result<()> {
    if let Some(path) = &args.svg {
        return std::fs::write(path, plan.to_svg())
            .with_context(|| format!("cannot write {}", path.display()));
    }
    let mut out = std::io::stdout().lock();
    if args.dot {
        write!(out, "{}", plan.to_dot())?;
    } else if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&plan)?)?;
    } else {
        write!(out, "{plan}")?;
        if let Some(why) = why {
            writeln!(out, "{why}")?;
        }
    }
    Ok(())
}

/// The plan a Python script's job runs on: the script run by `$SLUICE_PYTHON` (`python3`
/// without it) up to its `Dataflow.run`, which writes the plan instead of running (the
/// package reads [`PLAN_ONLY_INTO`]) and ends the script. The plan is the one its `run`
/// names, or `--plan`'s when that is not the default; what the script prints goes to
/// standard error, so standard output is the plan alone.
fn script_plan(app: &AppArgs) -> anyhow::Result<PhysicalPlan> {
    let python = std::env::var_os("SLUICE_PYTHON").unwrap_or_else(|| "python3".into());
    let into = tempfile::Builder::new().prefix("sluice-plan-").tempfile()?;
    let mut command = Command::new(&python);
    command.arg(&app.app).env(PLAN_ONLY_INTO, into.path());
    if app.plan != DEFAULT_PLAN {
        command.env(PLAN_ONLY_REQUEST, &app.plan);
    }
    let status = command
        .stdout(std::io::stderr())
        .status()
        .with_context(|| format!("cannot run {} {}", python.to_string_lossy(), app.app))?;
    if !status.success() {
        anyhow::bail!(
            "{} ended ({status}) before its job's plan was written",
            app.app
        );
    }
    let json = std::fs::read(into.path())?;
    if json.is_empty() {
        anyhow::bail!(
            "{} ended without running a job: `sluice plan` prints the plan of the first \
             Dataflow.run it calls",
            app.app
        );
    }
    serde_json::from_slice(&json).with_context(|| format!("the plan {} wrote", app.app))
}

/// The variable the Python package's `Dataflow.run` writes its plan into (a file) and ends
/// the script, instead of running; `PLAN_ONLY_REQUEST` names the plan to make instead of the
/// script's own.
const PLAN_ONLY_INTO: &str = "SLUICE_PLAN_ONLY_INTO";
const PLAN_ONLY_REQUEST: &str = "SLUICE_PLAN_ONLY_REQUEST";
