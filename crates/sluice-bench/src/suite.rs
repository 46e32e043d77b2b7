//! `sluice bench suite`: every experiment of the papers, beside the hardware and the peer
//! libraries, in one run.
//!
//! The suite walks a matrix of measurements (module `matrix`: throughput by tuple size and
//! transport, latency, facade against normal tuples, fan-out, large messages, the hardware
//! baseline, the applications, the pipelines and the peers), each one a call of the same
//! functions `sluice bench throughput`, `latency` and `baseline` use (or a child `sluice bench
//! app`, module `app_job`, or `sluice bench pipeline`, module `pipeline_job`), with a progress
//! bar and an estimate of the time left. Each measurement becomes one line of `results.jsonl`
//! as soon as it is done (module `output`), so a run cut short keeps what it measured. At the
//! end the directory gets `report.md` and a self-contained `report.html` (module `report`,
//! which reads the records as `rows`) and the plots as SVG and PNG (module `plots`); `--docs
//! FILE` also writes the page that sets our figures beside the papers' (module `papers`).
//! `--from results.jsonl` rebuilds all of that from an earlier run without measuring again.
//!
//! `sluice bench topology` (module `topology`) lives here too: it sweeps one topology's input
//! rate under each plan with the jobs the suite's `topology` experiment runs, and prints the
//! report's table of them.
//!
//! A measurement that fails does not stop the suite: its line says `"skipped": true` with the
//! reason, as does a peer library this binary was built without.

mod app_job;
mod matrix;
mod output;
mod papers;
mod peers;
mod pipeline_job;
mod plots;
mod report;
mod rows;
mod topology;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

pub use matrix::Experiment;
pub(crate) use peers::peer_receiver;
pub use peers::PeerReceiverArgs;
pub(crate) use topology::main as topology;
pub use topology::TopologyArgs;

use matrix::Level;

/// Options of `sluice bench suite`.
#[derive(Debug, Clone, Args)]
pub struct SuiteArgs {
    /// About a minute and a half: a handful of sizes, short runs, one repeat.
    #[arg(long, conflicts_with = "smoke")]
    pub quick: bool,
    /// A few seconds: one size per experiment and the shortest runs that still measure; for
    /// tests of the suite itself, the figures mean little.
    #[arg(long)]
    pub smoke: bool,
    /// The directory to write to (default `bench-results/<date>-<commit>/`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Also write the page that sets the figures beside the papers' (e.g.
    /// `docs/benchmarks.md`).
    #[arg(long, value_name = "FILE")]
    pub docs: Option<PathBuf>,
    /// Run only these experiments (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "EXPERIMENTS")]
    pub only: Vec<Experiment>,
    /// Measure nothing: rebuild the report, plots and `--docs` from the `results.jsonl` of an
    /// earlier run.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["quick", "smoke", "only"])]
    pub from: Option<PathBuf>,
}

/// Runs the suite `args` asks for and writes its files.
pub(crate) fn main(args: &SuiteArgs) -> anyhow::Result<()> {
    let level = if args.smoke {
        Level::Smoke
    } else if args.quick {
        Level::Quick
    } else {
        Level::Full
    };
    let (dir, records) = match &args.from {
        Some(file) => {
            let records = output::read_records(file)?;
            let dir = args.out.clone().unwrap_or_else(|| {
                file.parent()
                    .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
            });
            (dir, records)
        }
        None => {
            let dir = args.out.clone().unwrap_or_else(output::default_dir);
            let records = measure(level, &args.only, &dir)?;
            (dir, records)
        }
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let written = report::write(&dir, &records)?;
    for path in &written {
        eprintln!("wrote {}", path.display());
    }
    if let Some(docs) = &args.docs {
        papers::write_docs(docs, &records)?;
        eprintln!("wrote {}", docs.display());
    }
    let skipped = records.iter().filter(|r| output::is_skipped(r)).count();
    let doubted = output::warnings(&records);
    writeln!(
        std::io::stdout(),
        "{} measurements ({skipped} skipped, {doubted} warning(s): see the report's Warnings) in {}",
        records.len(),
        dir.display()
    )?;
    Ok(())
}

/// Runs every measurement of `level` (of the `only` experiments, or all), appending each to
/// `dir/results.jsonl` as it completes; returns the records.
fn measure(
    level: Level,
    only: &[Experiment],
    dir: &Path,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let jobs = matrix::jobs(level, only);
    let estimate: Duration = jobs.iter().map(matrix::Job::estimate).sum();
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let mut results = output::ResultsFile::create(&dir.join(output::RESULTS))?;
    eprintln!(
        "sluice bench suite ({}): {} measurements, about {} min; writing to {}",
        level.name(),
        jobs.len(),
        (estimate.as_secs_f64() / 60.0).ceil(),
        dir.display()
    );
    let bar = ProgressBar::new(estimate.as_millis() as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {percent:>3}% about {eta} left: {msg}",
        )
        .context("the progress bar's template")?
        .progress_chars("=> "),
    );
    let machine = output::Machine::here();
    let mut records = Vec::new();
    let started = Instant::now();
    for job in &jobs {
        bar.set_message(job.label());
        for mut record in job.run() {
            output::stamp(&mut record, &machine, records.len(), job.experiment);
            results.append(&record)?;
            records.push(record);
        }
        bar.inc(job.estimate().as_millis() as u64);
    }
    bar.finish_and_clear();
    eprintln!(
        "measured in {:.1} min (estimated {:.1})",
        started.elapsed().as_secs_f64() / 60.0,
        estimate.as_secs_f64() / 60.0
    );
    Ok(records)
}
