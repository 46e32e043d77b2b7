//! The `pipeline` experiment's jobs: `sluice bench pipeline APP --json` for the compression or
//! the encryption pipeline at each parallelism, as a child process (whose PEs, under a plan of
//! processes, re-execute it). Each line of its JSON is a record.

use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::{json, Value};

/// Seconds a parallelism costs beyond its runs: the child, building the job, start-up.
const POINT_START_S: f64 = 0.3;

/// Each pipeline's serial speed on this kind of machine, MB/s of input (release build): the
/// time estimate's yardstick.
fn serial_mb_per_sec(app: &str) -> f64 {
    if app == "compress" {
        40.0
    } else {
        400.0
    }
}

/// One `sluice bench pipeline` of the suite.
#[derive(Debug, Clone)]
pub(crate) struct PipelineJob {
    app: &'static str,
    parallelism: &'static [&'static str],
    size: u64,
    repeat: usize,
}

impl PipelineJob {
    /// `app` over `size` bytes at each of `parallelism`, `repeat` runs each.
    pub(crate) fn new(
        app: &'static str,
        parallelism: &'static [&'static str],
        size: u64,
        repeat: usize,
    ) -> Self {
        Self {
            app,
            parallelism,
            size,
            repeat,
        }
    }

    /// How long it should take: at each parallelism, the serial program and the pipeline
    /// (taken as no faster) over the input, `repeat` times.
    pub(crate) fn estimate(&self) -> Duration {
        let run = self.size as f64 / 1e6 / serial_mb_per_sec(self.app);
        let point = 2.0 * run * self.repeat as f64 + POINT_START_S;
        Duration::from_secs_f64(self.parallelism.len() as f64 * point)
    }

    /// A short description for the progress bar.
    pub(crate) fn label(&self) -> String {
        format!(
            "{} over {} MB at parallelism {}",
            self.app,
            self.size / 1_000_000,
            self.parallelism.join(",")
        )
    }

    /// The command line after `sluice`.
    fn args(&self) -> Vec<String> {
        let mut args: Vec<String> = ["bench", "pipeline", self.app, "--json"]
            .map(String::from)
            .to_vec();
        for (option, value) in [
            ("--parallelism", self.parallelism.join(",")),
            ("--size", self.size.to_string()),
            ("--repeat", self.repeat.to_string()),
        ] {
            args.extend([option.to_string(), value]);
        }
        args
    }

    /// Measures: a record per parallelism, or one skipped record with the reason.
    pub(crate) fn run(&self) -> Vec<Value> {
        self.measure().unwrap_or_else(|e| {
            vec![json!({
                "bench": "pipeline",
                "app": self.app,
                "skipped": true,
                "reason": format!("{e:#}"),
            })]
        })
    }

    fn measure(&self) -> anyhow::Result<Vec<Value>> {
        let exe = std::env::current_exe().context("find the sluice binary")?;
        let output = Command::new(exe)
            .args(self.args())
            .output()
            .context("start sluice bench pipeline")?;
        if !output.status.success() {
            let err = String::from_utf8_lossy(&output.stderr);
            bail!(
                "sluice bench pipeline failed ({}): {}",
                output.status,
                err.trim()
            );
        }
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|line| serde_json::from_str(line).context("read sluice bench pipeline's JSON"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_asks_for_json_at_every_parallelism() {
        let job = PipelineJob::new("compress", &["1", "2"], 64 << 20, 3);
        assert_eq!(
            job.args().join(" "),
            "bench pipeline compress --json --parallelism 1,2 --size 67108864 --repeat 3"
        );
        assert_eq!(job.label(), "compress over 67 MB at parallelism 1,2");
        // 67 MB at 40 MB/s, twice a run, three runs, two parallelisms: about 20 s.
        let estimate = job.estimate().as_secs_f64();
        assert!((18.0..24.0).contains(&estimate), "{estimate}");
    }
}
