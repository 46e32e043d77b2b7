//! `sluice plan`: print the physical plan of an application, or draw it (`--svg FILE`, with no
//! Graphviz needed).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;

use clap::Args;
use sluice_apps::AppConfig;
use sluice_plan::{AutoChoice, PlanRequest};

use crate::plan_choice::AppArgs;

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
    if args.optimize.optimizer.is_some() {
        return crate::optimize::optimize(&args.app, &args.optimize);
    }
    let rate = Some(args.rate.unwrap_or(crate::run::DEFAULT_GENERATED_RATE));
    let config = AppConfig {
        rate,
        ..AppConfig::default()
    };
    let (app, plan) = args.app.build(config)?;
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
        if args.app.request()? == PlanRequest::Auto {
            let options = args.app.options_at(rate)?;
            writeln!(out, "{}", AutoChoice::new(&app.graph, &options)?.reason)?;
        }
    }
    Ok(())
}
