//! An application benchmark's result: the application's median throughput and latency, each
//! yardstick's median throughput and the application's ratio to it, every run's figures and
//! where they were measured; as one line of JSON or as a table.

use std::fmt::Write as _;

use serde::Serialize;

use crate::foundation::report::runs_line;
use crate::foundation::stats::si;
use crate::foundation::stats::LatencySummary;
use crate::foundation::warnings::{self, Warning};

/// One run of the application.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AppRun {
    /// Tuples into the counted operator (words, for WordCount).
    pub(crate) units: u64,
    /// Seconds the job ran, start-up and drain included.
    pub(crate) elapsed_s: f64,
    /// `units / elapsed_s`.
    pub(crate) per_sec: f64,
    /// The input rate the source reached while it sent, when the application reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) input_per_sec: Option<f64>,
    /// End-to-end latency (with a rate only).
    pub(crate) latency_ns: Option<LatencySummary>,
}

/// One run of a yardstick.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct YardstickRun {
    /// Units it made (words, for WordCount).
    pub(crate) units: u64,
    /// Seconds measured.
    pub(crate) elapsed_s: f64,
    /// `units / elapsed_s`.
    pub(crate) per_sec: f64,
}

/// A yardstick's side of a result.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct YardstickResult {
    /// Its name (`naive`, `tuned`).
    pub(crate) name: &'static str,
    /// What it does.
    pub(crate) description: &'static str,
    /// The yardstick this one is a tuned version of, which it should not be slower than.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tunes: Option<&'static str>,
    /// Median units per second.
    pub(crate) per_sec: f64,
    /// The application's median throughput over this one's (below 1: the application is
    /// slower).
    pub(crate) ratio: Option<f64>,
    /// Every run.
    pub(crate) runs: Vec<YardstickRun>,
}

/// The result of one application benchmark.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AppResult {
    /// `app`.
    pub(crate) bench: &'static str,
    /// The application.
    pub(crate) app: &'static str,
    /// The plan, as named on the command line.
    pub(crate) plan: String,
    /// What the throughput counts (`words`).
    pub(crate) unit: &'static str,
    /// The operator whose tuples in are the throughput.
    pub(crate) counted_operator: &'static str,
    /// What the source emits, which `target_rate` counts (`sentences`).
    pub(crate) input: &'static str,
    /// Source tuples per second asked for; absent when as fast as possible.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) target_rate: Option<u64>,
    /// The application's median units per second.
    pub(crate) per_sec: f64,
    /// The median input rate its source reached while it sent (source tuples per second),
    /// when the application reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) input_per_sec: Option<f64>,
    /// The median of each end-to-end latency figure over the runs (with a rate only).
    pub(crate) latency_ns: Option<LatencySummary>,
    /// Every run of the application.
    pub(crate) runs: Vec<AppRun>,
    /// The yardsticks, measured in the same invocation.
    pub(crate) yardsticks: Vec<YardstickResult>,
    /// Seconds measured per run.
    pub(crate) duration_s: f64,
    /// Seconds of warm-up per run.
    pub(crate) warmup_s: f64,
    /// Figures that cannot be true as printed (a tuned yardstick slower than the one it
    /// tunes, the rate asked not reached, repeats that disagree), each with the rule it
    /// broke; empty when none.
    pub(crate) warnings: Vec<Warning>,
    /// The core the yardsticks were pinned to: the plan's core for the counted operator's
    /// thread; absent when it pins none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) yardstick_core: Option<usize>,
    /// The commit built, or `unknown`.
    pub(crate) commit: &'static str,
    /// The CPU model, or `unknown`.
    pub(crate) cpu: String,
    /// Cores available to the process.
    pub(crate) cores: usize,
}

impl AppResult {
    /// What in this result cannot be true as printed: a tuned yardstick slower than the one
    /// it tunes, a source short of the rate asked, the application's or a yardstick's repeats
    /// disagreeing.
    pub(crate) fn doubts(&self) -> Vec<Warning> {
        let unit = format!("{}/s", self.unit);
        let tuned = self.yardsticks.iter().filter_map(|y| {
            let plain = self.yardsticks.iter().find(|p| Some(p.name) == y.tunes)?;
            warnings::below_floor(
                (&format!("the {} yardstick", y.name), y.per_sec, &unit),
                (
                    &format!("the {} yardstick", plain.name),
                    plain.per_sec,
                    &unit,
                ),
                "it is a tuned version of and should never lose to",
            )
        });
        let rate = self
            .target_rate
            .zip(self.input_per_sec)
            .and_then(|(asked, reached)| {
                warnings::rate_not_reached(
                    &format!("the source of {}", self.input),
                    reached,
                    asked as f64,
                )
            });
        let ours: Vec<f64> = self.runs.iter().map(|r| r.per_sec).collect();
        let spreads = std::iter::once(warnings::wide_spread(self.app, &ours, &unit)).chain(
            self.yardsticks.iter().map(|y| {
                let theirs: Vec<f64> = y.runs.iter().map(|r| r.per_sec).collect();
                warnings::wide_spread(&format!("the {} yardstick", y.name), &theirs, &unit)
            }),
        );
        tuned
            .map(Some)
            .chain([rate])
            .chain(spreads)
            .flatten()
            .collect()
    }

    /// One line: `wordcount fused: 2.50 M words/s; naive 13.10 M (ratio 0.19); ...;
    /// latency p50 .. us, p99 .. us, p99.9 .. us`.
    pub(crate) fn summary(&self) -> String {
        let mut line = format!(
            "{} {}: {} {}/s",
            self.app,
            self.plan,
            si(self.per_sec),
            self.unit
        );
        for y in &self.yardsticks {
            let ratio = y
                .ratio
                .map_or_else(|| "-".to_string(), |r| format!("{r:.2}"));
            let _ = write!(line, "; {} {} (ratio {ratio})", y.name, si(y.per_sec));
        }
        if let (Some(reached), Some(_)) = (self.input_per_sec, self.target_rate) {
            let _ = write!(line, "; {} reached {}/s", self.input, si(reached));
        }
        if let Some(l) = self.latency_ns {
            let _ = write!(
                line,
                "; latency p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us",
                l.p50 / 1e3,
                l.p99 / 1e3,
                l.p999 / 1e3
            );
        }
        line
    }

    /// As one line of JSON.
    pub(crate) fn json(&self) -> String {
        // Serializing plain structs of numbers and strings cannot fail.
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// As a readable table: every run of each side, the medians, the summary line.
    pub(crate) fn table(&self) -> String {
        let mut out = format!("sluice bench app {}: {} plan, ", self.app, self.plan);
        match self.target_rate {
            Some(rate) => {
                let _ = write!(out, "{rate} {}/s", self.input);
            }
            None => {
                let _ = write!(out, "{} as fast as possible", self.input);
            }
        }
        let pinned = self.yardstick_core.map_or_else(
            || "not pinned".to_string(),
            |c| format!("pinned to core {c}"),
        );
        let runs = runs_line(
            self.runs.len(),
            (self.duration_s, self.warmup_s),
            self.commit,
            &self.cpu,
            self.cores,
        );
        let _ = writeln!(out, "\n{runs}; yardsticks {pinned}");
        for y in &self.yardsticks {
            let _ = writeln!(out, "{}: {}", y.name, y.description);
        }
        let _ = write!(out, "\n{:>6} {:>12}", "run", self.app);
        for y in &self.yardsticks {
            let _ = write!(out, " {:>12}", y.name);
        }
        let _ = writeln!(out, "  {}/s", self.unit);
        for (i, run) in self.runs.iter().enumerate() {
            let _ = write!(out, "{:>6} {:>12}", i + 1, si(run.per_sec));
            for y in &self.yardsticks {
                let theirs = y.runs.get(i).map_or(0.0, |r| r.per_sec);
                let _ = write!(out, " {:>12}", si(theirs));
            }
            out.push('\n');
        }
        let _ = write!(out, "{:>6} {:>12}", "median", si(self.per_sec));
        for y in &self.yardsticks {
            let _ = write!(out, " {:>12}", si(y.per_sec));
        }
        let _ = writeln!(out, "\n\n{}", self.summary());
        out.push_str(&warnings::lines(&self.warnings));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::foundation::warnings::Check;

    fn yardstick(
        name: &'static str,
        tunes: Option<&'static str>,
        rates: &[f64],
    ) -> YardstickResult {
        YardstickResult {
            name,
            description: "",
            tunes,
            per_sec: crate::foundation::stats::median(rates),
            ratio: None,
            runs: rates
                .iter()
                .map(|&per_sec| YardstickRun {
                    units: 0,
                    elapsed_s: 1.0,
                    per_sec,
                })
                .collect(),
        }
    }

    /// WordCount at `rates` per run, asked for 100 k sentences/s and reaching `reached`,
    /// beside its naive and tuned yardsticks.
    fn wordcount(rates: &[f64], reached: f64, naive: f64, tuned: f64) -> AppResult {
        AppResult {
            bench: "app",
            app: "wordcount",
            plan: "threaded".into(),
            unit: "words",
            counted_operator: "sum",
            input: "sentences",
            target_rate: Some(100_000),
            per_sec: crate::foundation::stats::median(rates),
            input_per_sec: Some(reached),
            latency_ns: None,
            runs: rates
                .iter()
                .map(|&per_sec| AppRun {
                    units: 0,
                    elapsed_s: 1.0,
                    per_sec,
                    input_per_sec: Some(reached),
                    latency_ns: None,
                })
                .collect(),
            yardsticks: vec![
                yardstick("naive", None, &[naive, naive]),
                yardstick("tuned", Some("naive"), &[tuned, tuned]),
            ],
            warnings: Vec::new(),
            duration_s: 1.0,
            warmup_s: 0.0,
            yardstick_core: None,
            commit: "test",
            cpu: "test".into(),
            cores: 2,
        }
    }

    #[test]
    fn a_tuned_yardstick_below_the_naive_one_a_short_rate_and_a_wide_spread_are_doubted() {
        let doubted = wordcount(&[1e6, 3e6], 27_000.0, 14e6, 11e6).doubts();
        let checks: Vec<Check> = doubted.iter().map(|w| w.check).collect();
        assert_eq!(
            checks,
            [Check::BelowFloor, Check::RateNotReached, Check::WideSpread],
            "{doubted:?}"
        );
        assert!(
            doubted[0].detail.starts_with(
                "the tuned yardstick 11.00 M words/s is below the naive yardstick 14.00 M words/s"
            ),
            "{}",
            doubted[0].detail
        );
        assert!(doubted[1]
            .detail
            .starts_with("the source of sentences reached 27.00 k/s"));
        assert!(doubted[2].detail.starts_with("wordcount ranged from"));
        assert!(wordcount(&[2e6, 2.1e6], 99_000.0, 11e6, 14e6)
            .doubts()
            .is_empty());
    }
}
