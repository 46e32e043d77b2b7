//! `sluice checkpoints JOB-ID|DIR`: the checkpoints and savepoints in a job's checkpoint
//! directory (or one checkpoint's or savepoint's own directory), each verified, as a table:
//! number, kind, when taken, size, duration, alignment and whether it would load; then every
//! file a corrupt one has refused, named. A job id (`APP-PID`) names the checkpoint directory
//! the job registry holds for it while it runs (its `--checkpoint-dir` too), else its default
//! checkpoint directory (`checkpointing::default_root`), which outlives it; a job that ran
//! with `--checkpoint-dir DIR` and has ended is found by that DIR.

use std::io::Write;
use std::path::PathBuf;

use anyhow::bail;
use std::time::{Duration, UNIX_EPOCH};

use clap::Args;
use sluice_checkpoint::{CheckpointInfo, CheckpointStatus};

/// Arguments of `sluice checkpoints`.
#[derive(Args, Debug)]
pub(crate) struct CheckpointsArgs {
    /// A job's id (`APP-PID`: a running job's checkpoint directory, or an ended job's in the
    /// default place), its checkpoint directory (`--checkpoint-dir`), or the directory of
    /// one checkpoint or savepoint.
    #[arg(value_name = "JOB-ID|DIR")]
    job: PathBuf,
}

impl CheckpointsArgs {
    /// The directory the argument names: a directory as given, else the running job's with
    /// that id, else the job id's default checkpoint directory.
    fn dir(&self) -> anyhow::Result<PathBuf> {
        if self.job.exists() {
            return Ok(self.job.clone());
        }
        let root = crate::checkpointing::default_root();
        let single_name = self.job.components().count() == 1;
        if let Some(running) = self
            .job
            .to_str()
            .filter(|_| single_name)
            .map(crate::jobs::checkpoint_dir_of)
            .transpose()?
            .flatten()
        {
            return Ok(running);
        }
        let by_id = root.join(&self.job);
        if single_name && by_id.is_dir() {
            return Ok(by_id);
        }
        bail!(
            "{} is neither a directory nor the id of a running job with checkpoints nor of one \
             with checkpoints in {} (a job that ran with --checkpoint-dir DIR: give that DIR)",
            self.job.display(),
            root.display()
        )
    }
}

/// The table's columns.
const HEADINGS: [&str; 7] = [
    "N",
    "KIND",
    "TAKEN (UTC)",
    "SIZE",
    "DURATION",
    "ALIGNMENT",
    "STATUS",
];

pub(crate) fn checkpoints(args: CheckpointsArgs) -> anyhow::Result<()> {
    let dir = args.dir()?;
    let found = sluice_checkpoint::list(&dir)?;
    let mut out = std::io::stdout().lock();
    if found.is_empty() {
        writeln!(out, "no checkpoint or savepoint in {}", dir.display())?;
        return Ok(());
    }
    let rows: Vec<[String; 7]> = found.iter().map(row).collect();
    let mut widths = HEADINGS.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    for cells in std::iter::once(HEADINGS.map(String::from)).chain(rows) {
        let line: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        writeln!(out, "{}", line.join("  ").trim_end())?;
    }
    for info in &found {
        if let CheckpointStatus::Corrupt(refused) = &info.status {
            for file in refused {
                writeln!(out, "{} is corrupt: {file}", info.dir.display())?;
            }
        }
    }
    Ok(())
}

/// The table's row of one checkpoint or savepoint.
fn row(info: &CheckpointInfo) -> [String; 7] {
    let or_unknown = |value: Option<String>| value.unwrap_or_else(|| "-".into());
    let ms = |ms: Option<u64>| or_unknown(ms.map(|ms| format!("{ms} ms")));
    [
        or_unknown(info.n.map(|n| n.to_string())),
        or_unknown(info.kind.map(|kind| kind.to_string())),
        or_unknown(info.created_unix_ms.map(|ms| {
            humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
        })),
        size(info.bytes),
        ms(info.duration_ms),
        ms(info.alignment_ms),
        match info.status {
            CheckpointStatus::Complete => "complete",
            CheckpointStatus::Partial => "partial (being written or abandoned)",
            CheckpointStatus::Corrupt(_) => "corrupt (files below)",
        }
        .to_string(),
    ]
}

/// `bytes` as people read it: B, KiB, MiB or GiB with one decimal.
pub(crate) fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_read_them() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(100 << 20), "100.0 MiB");
        assert_eq!(size(3 << 40), "3072.0 GiB");
    }
}
