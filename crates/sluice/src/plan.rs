//! `sluice plan`: print the physical plan of an application.

use std::io::Write;
use std::path::PathBuf;

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
    /// Compute a plan instead of printing one: `placement` puts the instances on the hosts of
    /// `--hosts` so as to cut the traffic between hosts (TurboStream's scheduler).
    #[arg(long, value_parser = crate::optimize::OPTIMIZERS, conflicts_with_all = ["dot", "json"])]
    optimize: Option<String>,
    /// Where `--optimize` writes its plan file (standard output without it).
    #[arg(long, requires = "optimize")]
    output: Option<PathBuf>,
}

pub(crate) fn plan(args: PlanArgs) -> anyhow::Result<()> {
    if args.optimize.is_some() {
        return crate::optimize::placement(&args.app, args.output.as_deref());
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
