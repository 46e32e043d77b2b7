//! The built-in applications `sluice run` knows by name, and what each needs from the command
//! line ([`AppConfig`]).
//!
//! An application is a function from its configuration to a validated graph plus a function
//! that turns the job's report into the summary printed at the end. Every process of a job
//! calls the same function, so the graph can be rebuilt anywhere from the application's name
//! and configuration.
#![forbid(unsafe_code)]

mod config;
pub mod omdp;
#[macro_use]
pub mod storm;
pub mod pipeline;
mod random;
pub mod relay;
pub mod sol;
mod summary;
pub mod throughput_test;
pub mod vwap;
pub mod wordcount;

pub use config::{AppConfig, AppError, Settings};

/// The README's Rust blocks, compiled and run as doc tests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The book's chapters (`docs/src`, an mdBook), each a doc comment here so that `cargo test`
/// compiles and runs their Rust blocks with the workspace's crates (`mdbook test` would need
/// every crate's rlib on its command line). Every chapter is listed, whether it has Rust
/// blocks or not, so that one added later is tested: `tests/book.rs` checks the list against
/// the book's summary.
#[cfg(doctest)]
pub mod book {
    /// One doc-tested struct per chapter: `Name = "path under docs/src"`.
    macro_rules! chapters {
        ($($name:ident = $path:literal),* $(,)?) => {$(
            #[doc = include_str!(concat!("../../../docs/src/", $path))]
            pub struct $name;
        )*};
    }

    chapters! {
        Introduction = "introduction.md",
        GettingStarted = "getting-started.md",
        Concepts = "concepts.md",
        RustApi = "rust-api.md",
        Operators = "operators.md",
        OwnOperators = "own-operators.md",
        Python = "python.md",
        Connectors = "connectors.md",
        Scsql = "scsql.md",
        Plans = "plans.md",
        Optimizers = "optimizers.md",
        Operating = "operating/README.md",
        Watching = "operating/watching.md",
        Ui = "operating/ui.md",
        Checkpoints = "operating/checkpoints.md",
        Configuration = "operating/configuration.md",
        Failures = "operating/failures.md",
        Hosts = "hosts.md",
        Applications = "applications.md",
        Omdp = "omdp.md",
        Limits = "limits.md",
        Benchmarks = "benchmarks.md",
        Measuring = "measuring.md",
        Architecture = "contributing/architecture.md",
        Crates = "contributing/crates.md",
        Adding = "contributing/adding.md",
    }
}
pub use summary::{latency_line, throughput_line};

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sluice_graph::Graph;
use sluice_plan::{PlanChoiceError, PlanFile, PlanRequest};
use sluice_runtime::JobReport;

/// A built application: its graph, how to summarise a finished run, and the processes it
/// needs outside the job.
pub struct App {
    /// The validated graph.
    pub graph: Graph,
    /// Turns the job's report into the lines printed after the run.
    pub summarize: Summarize<String>,
    /// Processes that run beside the job, outside it (OMDP's feed senders).
    pub companions: Vec<Companion>,
    /// Turns the job's report into one JSON object (`sluice run --json`), if the application
    /// has one.
    pub json: Option<Summarize<serde_json::Value>>,
    /// Whether its generated input has an end of its own (`--set records=N`, a pipeline's
    /// `--set size`), and if so, what of it a run did not use ([`App::with_finite_input`]).
    pub finite_input: Option<FiniteInput>,
}

/// A generated input with an end of its own: `total` tuples from the source `source`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FiniteInput {
    /// The source that generates it.
    pub source: &'static str,
    /// The tuples it generates before it ends.
    pub total: u64,
    /// What a tuple is, for messages (`records`, `packets`).
    pub unit: &'static str,
}

impl FiniteInput {
    /// What of the input the run `report` did not generate, e.g. `1785856 of 2000000 records`;
    /// `None` when the source generated all of it.
    pub fn left_in(&self, report: &JobReport) -> Option<String> {
        let done = report.tuples_out(self.source);
        (done < self.total).then(|| format!("{done} of {} {}", self.total, self.unit))
    }
}

/// A function from a finished job's report to its summary.
pub type Summarize<T> = Box<dyn Fn(&JobReport) -> T + Send + Sync>;

impl App {
    /// An application with no companions and no JSON summary.
    pub fn new(graph: Graph, summarize: Summarize<String>) -> Self {
        Self {
            graph,
            summarize,
            companions: Vec::new(),
            json: None,
            finite_input: None,
        }
    }

    /// This application, its source `source` generating `total` tuples (`unit`, for messages)
    /// when `total` is given, then ending; so a run that `--duration` cuts short is said to be
    /// partial, as one reading a file is.
    pub fn with_finite_input(
        mut self,
        source: &'static str,
        total: Option<u64>,
        unit: &'static str,
    ) -> Self {
        self.finite_input = total.map(|total| FiniteInput {
            source,
            total,
            unit,
        });
        self
    }
}

/// A process an application runs beside its job and outside it, as the paper's feed senders
/// run outside the measured application: the `sluice` binary with `args`, started once the
/// job's sources run and stopped when the job ends. Only the process that launched the job
/// starts them, never a PE. When the job ends, a companion still running is asked to stop
/// (SIGTERM) and given [`COMPANION_STOP_TIMEOUT`] to say what it did before it is killed.
#[derive(Debug, Clone)]
pub struct Companion {
    /// What it is, for messages.
    pub name: String,
    /// Its arguments after the `sluice` binary.
    pub args: Vec<String>,
    /// Where the launcher puts what it printed on standard output once it ended, for the
    /// application's summary to read (OMDP's feed sender's counts); `None`: not kept.
    pub output: Option<Arc<OnceLock<String>>>,
    /// Whether its end ends the job's input: once every such companion has exited well and
    /// [`COMPANION_DRAIN`] has passed (for the job to take what is still on its way), the job
    /// is stopped, as a source that ended stops it. OMDP's sender is the feed.
    pub feeds_the_job: bool,
}

/// How long a companion asked to stop has to end before it is killed.
pub const COMPANION_STOP_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the job goes on taking its input after the companions that feed it ended.
pub const COMPANION_DRAIN: Duration = Duration::from_millis(300);

/// A plan an application ships for this kind of machine, chosen with `--plan NAME`.
pub struct NamedPlan {
    /// Its name on the command line.
    pub name: &'static str,
    /// One line on what it does.
    pub about: &'static str,
    /// The plan file (TOML), as `--plan FILE` would read it.
    pub toml: &'static str,
    /// Settings the plan runs with, as `--set KEY=VALUE` would give them (a plan that needs
    /// the graph shaped for it: OMDP's `paper-fused`).
    pub settings: &'static [(&'static str, &'static str)],
}

/// An application in the registry.
pub struct AppSpec {
    /// Its name on the command line.
    pub name: &'static str,
    /// One line on what it does.
    pub about: &'static str,
    /// The `--set` keys it accepts, each with a one-line description.
    pub settings: &'static [(&'static str, &'static str)],
    /// Builds it.
    pub build: fn(&AppConfig) -> Result<App, AppError>,
    /// The plans it ships beside `fused`, `threaded` and `processes`.
    pub plans: &'static [NamedPlan],
}

/// Every built-in application.
pub fn registry() -> &'static [AppSpec] {
    &[
        wordcount::SPEC,
        relay::SPEC,
        sol::SPEC,
        throughput_test::SPEC,
        vwap::SPEC,
        omdp::SPEC,
        pipeline::COMPRESS,
        pipeline::ENCRYPT,
    ]
}

/// The application called `name`, or an error listing the ones there are.
pub fn find(name: &str) -> Result<&'static AppSpec, AppError> {
    registry()
        .iter()
        .find(|a| a.name == name)
        .ok_or_else(|| AppError::UnknownApp {
            name: name.to_string(),
            known: registry()
                .iter()
                .map(|a| a.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Builds the application `name` with `config`, checking its `--set` keys first.
pub fn build(name: &str, config: &AppConfig) -> Result<App, AppError> {
    let spec = find(name)?;
    config.settings.check_keys(spec)?;
    (spec.build)(config)
}

/// Adds to `settings` those the plan `choice` of the application `name` runs with, when it is
/// one the application ships ([`NamedPlan::settings`]); a setting given with another value is
/// refused, naming the plan.
pub fn add_plan_settings(
    name: &str,
    choice: &str,
    settings: &mut Settings,
) -> Result<(), AppError> {
    let spec = find(name)?;
    let Some(plan) = spec.plans.iter().find(|p| p.name == choice) else {
        return Ok(());
    };
    for (key, value) in plan.settings {
        settings.imply(key, value, || format!("{}'s plan {}", spec.name, plan.name))?;
    }
    Ok(())
}

/// The plan `choice` names for the application `name`: one of the plans it ships
/// ([`AppSpec::plans`]), else `fused`, `threaded`, `processes` or a plan file's path as
/// [`PlanRequest::from_choice`] reads it.
pub fn plan_request(name: &str, choice: &str) -> Result<PlanRequest, AppError> {
    let spec = find(name)?;
    if let Some(shipped) = spec.plans.iter().find(|p| p.name == choice) {
        let file = PlanFile::parse(shipped.toml).map_err(|e| AppError::ShippedPlan {
            app: spec.name,
            plan: shipped.name,
            reason: e.message().trim().to_string(),
        })?;
        return Ok(PlanRequest::File(format!("{name}'s plan {choice}"), file));
    }
    PlanRequest::from_choice(choice).map_err(|error| match error {
        PlanChoiceError::Unknown(_) if !spec.plans.is_empty() => AppError::UnknownPlan {
            choice: choice.to_string(),
            app: spec.name,
            known: spec
                .plans
                .iter()
                .map(|p| p.name)
                .collect::<Vec<_>>()
                .join(", "),
        },
        other => AppError::Plan(other),
    })
}
