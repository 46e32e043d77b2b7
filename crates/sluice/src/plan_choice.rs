//! The `--plan` option shared by `run` and `plan`, and building an application with it.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use sluice_apps::{AppConfig, Settings};
use sluice_plan::{HostsFile, PhysicalPlan, PlanOptions, PlanRequest};
use sluice_transport::MAX_QUEUE_CAPACITY;

/// The plan `--plan` names without being given.
pub(crate) const DEFAULT_PLAN: &str = "auto";

/// Options that choose the application and its plan.
#[derive(Args, Debug, Clone)]
pub(crate) struct AppArgs {
    /// The application (see `sluice apps`).
    pub app: String,
    /// The job takes checkpoints: every channel gets one sender (`sluice run` sets it from
    /// its checkpoint flags).
    #[arg(skip)]
    pub checkpointed: bool,
    /// `auto` (the plan for this machine: fused when one core carries the sources' rate with
    /// headroom, else the operators split over at most as many threads as cores, by their
    /// declared costs; `sluice plan APP` says why), `fused` (one thread), `threaded` (a thread
    /// per operator instance), `processes` (a process per operator instance, joined by shared
    /// memory), a plan the application ships (see `sluice apps`), or a plan file (TOML) that
    /// places operators in threads and processes and pins transports.
    #[arg(long, default_value = DEFAULT_PLAN)]
    pub plan: String,
    /// A hosts file (TOML): the machines the job's PEs may run on.
    #[arg(long)]
    pub hosts: Option<PathBuf>,
    /// Messages each threaded port holds (1 to 16777216).
    #[arg(long)]
    pub queue_capacity: Option<usize>,
    /// Application setting, `key=value`; repeatable (see `sluice apps`).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub settings: Vec<String>,
}

impl AppArgs {
    /// Parses the plan choice.
    pub fn request(&self) -> anyhow::Result<PlanRequest> {
        Ok(sluice_apps::plan_request(&self.app, &self.plan)?)
    }

    /// Builds the application with `config` (whose settings this fills in) and plans it at
    /// `config`'s rate.
    pub fn build(&self, mut config: AppConfig) -> anyhow::Result<(sluice_apps::App, PhysicalPlan)> {
        if self.app.contains('/') {
            // No application's name holds a slash: a path names a program of the user's own.
            anyhow::bail!(
                "'{0}' is a program, not one of sluice's applications (see `sluice apps`): a \
                 program built on the Sluice library is its own launcher (it starts its PEs by \
                 running itself again), so run it as it is: `{0}`",
                self.app
            );
        }
        config.settings = Settings::parse(self.settings.iter().map(String::as_str))?;
        sluice_apps::add_plan_settings(&self.app, &self.plan, &mut config.settings)?;
        let mut app = sluice_apps::build(&self.app, &config)?;
        let options = self.options_at(config.rate)?;
        let request = self.request()?;
        app.graph = sluice_plan::replicated_graph(&app.graph, &request)?;
        let plan = sluice_plan::plan(&app.graph, &request, &options)?;
        Ok((app, plan))
    }

    /// What the planner is told for sources asked for `rate` tuples a second (0 or `None`:
    /// as fast as they go), which `--plan auto` plans for.
    pub fn options_at(&self, rate: Option<u64>) -> anyhow::Result<PlanOptions> {
        Ok(PlanOptions {
            source_rate: rate.filter(|&rate| rate > 0),
            ..self.plan_options()?
        })
    }

    /// What the planner is told: the queue capacity and the hosts file, if given.
    pub fn plan_options(&self) -> anyhow::Result<PlanOptions> {
        let mut options = PlanOptions {
            checkpointed: self.checkpointed,
            ..PlanOptions::default()
        };
        if let Some(capacity) = self.queue_capacity {
            if !(1..=MAX_QUEUE_CAPACITY).contains(&capacity) {
                anyhow::bail!(
                    "--queue-capacity {capacity} is out of range: a threaded port holds 1 to \
                     {MAX_QUEUE_CAPACITY} messages"
                );
            }
            options.queue_capacity = capacity;
        }
        if let Some(path) = &self.hosts {
            let text = sluice_plan::read_text_file(path)
                .with_context(|| format!("cannot read hosts file {}", path.display()))?;
            options.hosts = Some(HostsFile::read(path, &text)?);
        }
        Ok(options)
    }
}

/// A duration in seconds, such as `5` or `0.5`, as a program's configuration reads it.
pub(crate) use sluice_runtime::configuration::parse_seconds;
