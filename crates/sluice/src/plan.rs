//! `sluice plan`: print the physical plan of an application.

use std::io::Write;

use clap::Args;
use sluice_apps::AppConfig;

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
    #[command(flatten)]
    optimize: crate::optimize::OptimizeArgs,
}

pub(crate) fn plan(args: PlanArgs) -> anyhow::Result<()> {
    if args.optimize.optimizer.is_some() {
        return crate::optimize::optimize(&args.app, &args.optimize);
    }
    let (_, plan) = args.app.build(AppConfig::default())?;
    let mut out = std::io::stdout().lock();
    if args.dot {
        write!(out, "{}", plan.to_dot())?;
    } else if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&plan)?)?;
    } else {
        write!(out, "{plan}")?;
    }
    Ok(())
}
