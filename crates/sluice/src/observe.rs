//! What `sluice run` does beside a running job so it can be watched: the live metrics'
//! options (`--metrics`, `--latency-every`, `--metrics-addr`, whose Prometheus endpoint
//! [`sluice_web::job_server`] serves), and the summary's warning when the sources fell short
//! of `--rate`. The job's entry in the job registry and its progress line are the runtime's,
//! as for every program ([`sluice_runtime::registry`], [`sluice_runtime::progress`]); this
//! only says which progress (none with `--quiet`, the rate asked). Only the launching process
//! does any of it; its PEs send their figures to it.

use std::net::SocketAddr;

use clap::Args;
use sluice_runtime::progress::Asked;
use sluice_runtime::{JobReport, MetricsSnapshot, RunOptions, RunningJob};

/// The options of `sluice run` for watching a job.
#[derive(Args, Debug)]
pub(crate) struct ObserveArgs {
    /// Live metrics in every PE: `on`, or `off` (no figures for `sluice top`, `sluice jobs`,
    /// the progress line or --metrics-addr).
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    metrics: String,
    /// Serve the live metrics at http://ADDRESS:PORT/metrics in the Prometheus text format
    /// while the job runs (binds only this address, e.g. 127.0.0.1:9464).
    #[arg(long, value_name = "ADDRESS:PORT")]
    metrics_addr: Option<SocketAddr>,
    /// A source sends a latency marker after this many tuples (0: none; default 64): the
    /// sampling of the per-hop latency figures.
    #[arg(long, value_name = "N")]
    latency_every: Option<u64>,
}

impl ObserveArgs {
    /// Where the Prometheus endpoint is to be served, if anywhere.
    pub(crate) fn metrics_address(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Sets the run options these options say, before the job starts, its sources asked for
    /// the rate `asked`; refuses options that contradict each other.
    pub(crate) fn prepare(
        &self,
        options: &mut RunOptions,
        asked: Option<Asked>,
    ) -> anyhow::Result<Prepared> {
        options.metrics = self.metrics == "on";
        // --quiet: no progress line either.
        options.progress = !crate::logs::is_quiet();
        options.asked_rate = asked.map(|a| a.rate);
        if !options.metrics && self.metrics_addr.is_some() {
            anyhow::bail!("--metrics-addr serves the live metrics, which --metrics off turns off");
        }
        if let Some(every) = self.latency_every {
            options.latency_every = every;
        }
        Ok(Prepared {
            asked: asked.filter(|_| options.metrics),
        })
    }
}

/// What is ready to watch a job before it starts.
pub(crate) struct Prepared {
    /// The sources' rate asked, when the figures to check it are on.
    asked: Option<Asked>,
}

/// What watches a running job; [`Observers::finish`] ends it.
pub(crate) struct Observers {
    metrics: sluice_runtime::MetricsHandle,
    asked: Option<Asked>,
}

impl Prepared {
    /// Starts watching `job`, for the sources' rate asked.
    pub(crate) fn start(self, job: &RunningJob) -> Observers {
        Observers {
            metrics: job.metrics_handle(),
            asked: self.asked,
        }
    }
}

impl Observers {
    /// After a run that ended with `report`, warns if its sources fell short of the rate
    /// asked.
    pub(crate) fn finish(self, report: Option<&JobReport>) {
        let (Some(asked), Some(report)) = (self.asked, report) else {
            return;
        };
        if let Some(reached) = source_rate(&self.metrics.snapshot(), report) {
            if let Some(warning) = asked.summary(reached) {
                crate::logs::warn_line(&warning);
            }
        }
    }
}

/// The rate the sources reached over the whole run: their tuples (from the report, the
/// sources named by the live metrics) over its time.
fn source_rate(snapshot: &MetricsSnapshot, report: &JobReport) -> Option<f64> {
    let mut sources: Vec<&str> = snapshot
        .instances()
        .filter(|i| i.source)
        .map(|i| i.operator.as_str())
        .collect();
    sources.sort_unstable();
    sources.dedup();
    let seconds = report.elapsed.as_secs_f64();
    if sources.is_empty() || seconds <= 0.0 {
        return None;
    }
    let tuples: u64 = sources.iter().map(|s| report.tuples_out(s)).sum();
    Some(tuples as f64 / seconds)
}
