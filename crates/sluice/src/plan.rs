//! `sluice plan`: print the physical plan of an application.

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
}

pub(crate) fn plan(args: PlanArgs) -> anyhow::Result<()> {
    let (_, plan) = args.app.build(AppConfig::default())?;
    if args.dot {
        print!("{}", plan.to_dot());
    } else if args.json {
        println!("{}", serde_json_string(&plan)?);
    } else {
        print!("{plan}");
    }
    Ok(())
}

fn serde_json_string(plan: &sluice_plan::PhysicalPlan) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(plan)?)
}
