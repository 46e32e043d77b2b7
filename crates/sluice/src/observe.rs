//! What `sluice run` does beside a running job so it can be watched: the live metrics'
//! options (`--metrics`, `--latency-every`, `--metrics-addr`, whose Prometheus endpoint
//! [`sluice_web::job_server`] serves) and the progress line ([`crate::progress`]). The job's
//! entry in the job registry is the runtime's, as for every program
//! ([`sluice_runtime::registry`]). Only the launching process does any of it; its PEs send
//! their figures to it.

use std::net::SocketAddr;

use clap::Args;
use sluice_runtime::{JobReport, MetricsSnapshot, RunOptions, RunningJob};

use crate::progress::{Asked, Progress};

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

    /// Sets the run options these options say, before the job starts; refuses options that
    /// contradict each other.
    pub(crate) fn prepare(&self, options: &mut RunOptions) -> anyhow::Result<Prepared> {
        options.metrics = self.metrics == "on";
        if !options.metrics && self.metrics_addr.is_some() {
            anyhow::bail!("--metrics-addr serves the live metrics, which --metrics off turns off");
        }
        if let Some(every) = self.latency_every {
            options.latency_every = every;
        }
        Ok(Prepared {
            metrics: options.metrics,
        })
    }
}

/// What is ready to watch a job before it starts.
pub(crate) struct Prepared {
    metrics: bool,
}

/// What watches a running job; [`Observers::finish`] ends it.
pub(crate) struct Observers {
    metrics: sluice_runtime::MetricsHandle,
    progress: Option<Progress>,
    asked: Option<Asked>,
}

impl Prepared {
    /// Starts watching `job`: its progress line, and for the sources' rate asked, the
    /// warnings when they fall short.
    pub(crate) fn start(self, job: &RunningJob, asked: Option<Asked>) -> Observers {
        let metrics = job.metrics_handle();
        let on = self.metrics;
        Observers {
            // --quiet: no progress line either.
            progress: (on && !crate::logs::is_quiet())
                .then(|| Progress::start(metrics.clone(), asked)),
            metrics,
            asked: asked.filter(|_| on),
        }
    }
}

impl Observers {
    /// Stops watching; after a run that ended with `report`, warns if its sources fell
    /// short of the rate asked.
    pub(crate) fn finish(self, report: Option<&JobReport>) {
        if let Some(progress) = self.progress {
            progress.finish();
        }
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
