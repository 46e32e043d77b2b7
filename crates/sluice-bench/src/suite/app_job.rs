//! The `apps` and `topology` experiments' jobs (and `sluice bench topology`'s):
//! `sluice bench app NAME --json` for a benchable application under one plan, as fast as
//! possible or at a rate, with or without its yardsticks. Each runs as a child process of its own,
//! because the `processes` plan re-executes the command that runs it once per PE, and that
//! command must be `sluice bench app`, not the suite. Its line of JSON is the record.

use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::{json, Value};

use crate::apps::Benchable;

/// Seconds a run of an application costs beyond its duration: building it, starting its
/// threads (or processes) and draining.
const JOB_START_S: f64 = 0.2;

/// One `sluice bench app` of the suite.
#[derive(Debug, Clone)]
pub(crate) struct AppJob {
    app: &'static str,
    /// How many yardsticks run beside it.
    yardsticks: usize,
    plan: String,
    rate: Option<u64>,
    /// Duration, warm-up and repeats.
    timing: (Duration, Duration, usize),
    /// `--set` values.
    settings: Vec<String>,
}

impl AppJob {
    /// `bench` under `plan`, at `rate` source tuples per second (as fast as possible when
    /// `None`), with the suite's `timing` (duration, warm-up, repeats).
    pub(crate) fn new(
        bench: &Benchable,
        plan: impl Into<String>,
        rate: Option<u64>,
        timing: (Duration, Duration, usize),
    ) -> Self {
        Self {
            app: bench.name,
            yardsticks: bench.yardsticks.len(),
            plan: plan.into(),
            rate,
            timing,
            settings: Vec::new(),
        }
    }

    /// The same job without the yardsticks (`--no-yardsticks`), with the application's
    /// `settings` (`key=value`, each passed as `--set`).
    pub(crate) fn app_only(mut self, settings: &[String]) -> Self {
        self.yardsticks = 0;
        self.settings = settings.to_vec();
        self
    }

    /// How long it should take: each round runs the application twice (a warm-up run) and
    /// each yardstick for the warm-up and the duration.
    pub(crate) fn estimate(&self) -> Duration {
        let (duration, warmup, repeat) = self.timing;
        let run = (duration + warmup).as_secs_f64();
        let app = run + 2.0 * JOB_START_S;
        Duration::from_secs_f64(repeat as f64 * (app + self.yardsticks as f64 * run))
    }

    /// A short description for the progress bar.
    pub(crate) fn label(&self) -> String {
        let pace = self.rate.map_or_else(
            || "as fast as possible".to_string(),
            |r| format!("at {r}/s"),
        );
        format!("{} {} {pace}", self.app, self.plan)
    }

    /// The command line after `sluice`.
    fn args(&self) -> Vec<String> {
        let (duration, warmup, repeat) = self.timing;
        let mut args: Vec<String> = ["bench", "app", self.app, "--plan", &self.plan, "--json"]
            .map(String::from)
            .to_vec();
        for (option, value) in [
            ("--duration", duration.as_secs_f64().to_string()),
            ("--warmup", warmup.as_secs_f64().to_string()),
            ("--repeat", repeat.to_string()),
            ("--rate", self.rate.unwrap_or(0).to_string()),
        ] {
            args.extend([option.to_string(), value]);
        }
        if self.yardsticks == 0 {
            args.push("--no-yardsticks".into());
        }
        for setting in &self.settings {
            args.extend(["--set".to_string(), setting.clone()]);
        }
        args
    }

    /// Measures: the result's JSON, or a skipped record with the reason.
    pub(crate) fn run(&self) -> Value {
        self.measure().unwrap_or_else(|e| {
            json!({
                "bench": "app",
                "app": self.app,
                "plan": self.plan,
                "target_rate": self.rate,
                "skipped": true,
                "reason": format!("{e:#}"),
            })
        })
    }

    fn measure(&self) -> anyhow::Result<Value> {
        let exe = std::env::current_exe().context("find the sluice binary")?;
        let output = Command::new(exe)
            .args(self.args())
            .output()
            .context("start sluice bench app")?;
        if !output.status.success() {
            let err = String::from_utf8_lossy(&output.stderr);
            bail!(
                "sluice bench app failed ({}): {}",
                output.status,
                err.trim()
            );
        }
        let text = String::from_utf8_lossy(&output.stdout);
        serde_json::from_str(text.trim()).context("read sluice bench app's JSON")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_asks_for_json_at_the_rate() {
        let bench = crate::apps::BENCHABLE
            .first()
            .expect("a benchable application");
        let timing = (Duration::from_millis(300), Duration::from_millis(100), 2);
        let job = AppJob::new(bench, "processes", Some(40_000), timing);
        let args = job.args().join(" ");
        assert_eq!(
            args,
            format!(
                "bench app {} --plan processes --json --duration 0.3 --warmup 0.1 --repeat 2 --rate 40000",
                bench.name
            )
        );
        let flat = AppJob::new(bench, "fused", None, timing);
        assert!(flat.args().join(" ").ends_with("--rate 0"));
        assert!(flat.label().ends_with("fused as fast as possible"));
        assert!(job.estimate() > Duration::from_millis(2 * 400 * 3));
        let sweep = job.clone().app_only(&["size=8".to_string()]);
        assert!(sweep
            .args()
            .join(" ")
            .ends_with("--rate 40000 --no-yardsticks --set size=8"));
        assert!(sweep.estimate() < job.estimate());
    }
}
