//! `sluice jobs` and `sluice stop`, clients of the job registry
//! ([`sluice_runtime::registry`]), in which every job registers its launching process while
//! it runs: a built-in application `sluice run` started, or a program of the user's own that
//! calls the runtime. `sluice top` and `sluice savepoint` find their job here ([`pick`]).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use clap::Args;
use sluice_runtime::registry::{alive, running, stop_job};
use sluice_runtime::MetricsSnapshot;

pub(crate) use sluice_runtime::registry::{
    checkpoint_dir_of, checkpoints_of, metrics_of, savepoint_of, silence, JobEntry,
};

/// The running job `id`, or the only one when `id` is `None` (asking which one on a terminal
/// when there are several).
pub(crate) fn pick(id: Option<&str>) -> anyhow::Result<JobEntry> {
    let jobs = running()?;
    if let Some(id) = id {
        return jobs
            .into_iter()
            .map(|(entry, _)| entry)
            .find(|e| e.id == id)
            .with_context(|| format!("no running job '{id}' (see `sluice jobs`)"));
    }
    match jobs.len() {
        0 => bail!("no job is running (start one with `sluice run`)"),
        1 => Ok(jobs.into_iter().next().map(|(e, _)| e).context("no job")?),
        _ => {
            let mut out = std::io::stdout().lock();
            write_table(&mut out, &jobs)?;
            if !std::io::stdin().is_terminal() {
                bail!("several jobs are running: name one by its ID");
            }
            write!(out, "which job (ID)? ")?;
            out.flush()?;
            let mut answer = String::new();
            std::io::stdin().read_line(&mut answer)?;
            let answer = answer.trim();
            jobs.into_iter()
                .map(|(entry, _)| entry)
                .find(|e| e.id == answer)
                .with_context(|| format!("no running job '{answer}'"))
        }
    }
}

/// Writes the table `sluice jobs` prints.
fn write_table(
    out: &mut impl Write,
    jobs: &[(JobEntry, Option<MetricsSnapshot>)],
) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<24} {:<14} {:<14} {:>4} {:>10} {:>16}",
        "ID", "APPLICATION", "PLAN", "PES", "UPTIME", "SOURCES (/s)"
    )?;
    for (job, metrics) in jobs {
        let (uptime, sources) = match metrics {
            Some(m) => (m.uptime_secs, with_commas(m.source_rate().round() as u64)),
            None => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                (
                    now.saturating_sub(job.started) as f64,
                    "not answering".into(),
                )
            }
        };
        writeln!(
            out,
            "{:<24} {:<14} {:<14} {:>4} {:>10} {:>16}",
            job.id,
            job.app,
            job.plan,
            job.pes,
            format!("{uptime:.1} s"),
            sources
        )?;
    }
    Ok(())
}

/// `n` with thousands separated by commas, as the progress line writes it.
pub(crate) use sluice_runtime::progress::with_commas;

/// `sluice jobs`: lists the running jobs of this user on this host.
pub(crate) fn list() -> anyhow::Result<()> {
    let jobs = running()?;
    let mut out = std::io::stdout().lock();
    if jobs.is_empty() {
        writeln!(out, "no job is running")?;
        return Ok(());
    }
    write_table(&mut out, &jobs)?;
    Ok(())
}

/// Arguments of `sluice stop`.
#[derive(Args, Debug)]
pub(crate) struct StopArgs {
    /// The job's ID, as `sluice jobs` lists it.
    id: String,
    /// Return once the job was asked, without waiting for it to drain and end.
    #[arg(long)]
    no_wait: bool,
    /// How long to wait for it to end, in seconds (default 60).
    #[arg(long, value_parser = crate::plan_choice::parse_seconds)]
    timeout: Option<Duration>,
}

/// `sluice stop ID`: asks the job to drain and stop, and waits until it has ended.
pub(crate) fn stop(args: StopArgs) -> anyhow::Result<()> {
    let job = pick(Some(&args.id))?;
    stop_job(&job.socket).with_context(|| {
        format!(
            "job '{}' (pid {}) does not answer: {}; its entry is kept",
            job.id,
            job.pid,
            silence(job.pid)
        )
    })?;
    let mut out = std::io::stdout().lock();
    if args.no_wait {
        writeln!(out, "asked job '{}' to stop", job.id)?;
        return Ok(());
    }
    let timeout = args.timeout.unwrap_or(Duration::from_secs(60));
    let began = Instant::now();
    while alive(job.pid) && job.socket.exists() {
        if began.elapsed() >= timeout {
            bail!(
                "job '{}' was asked to stop but has not ended after {:.0} s",
                job.id,
                timeout.as_secs_f64()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    writeln!(out, "stopped job '{}'", job.id)?;
    Ok(())
}
