//! What is kept of a job once it ended, so that it is still listed after its process is gone
//! (`sluice ui`'s job list and REST API): its registry entry, its plan, how it ended (its
//! error, if it failed), its last metrics and what its checkpoints did. Every registered job
//! ([`crate::registry`]) keeps its summary as it ends, before its registry entry goes, as
//! `ID.json` in `ended` beside the registry's directory (`$XDG_RUNTIME_DIR/sluice/ended`, or
//! `/tmp/sluice-UID/ended`; mode 0700, each file 0600, written whole then renamed); the
//! [`MAX_SUMMARIES`] most recent are kept, older ones removed as a new one is written. A later
//! job with the same ID (its pid reused) replaces the summary of the earlier one.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sluice_plan::PhysicalPlan;

use crate::checkpoint_figures::CheckpointFigures;
use crate::registry::{registry_dir, write_whole, JobEntry, RegistryError};
use crate::MetricsSnapshot;

/// The most summaries of ended jobs kept; the oldest go first.
pub const MAX_SUMMARIES: usize = 64;

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Outcome {
    /// Its sources ended (or its duration passed) and it drained.
    Finished,
    /// It was asked to stop (`sluice stop`, Ctrl-C, `POST /jobs/ID/stop`) and drained.
    Stopped,
    /// It failed.
    Failed,
}

/// What is kept of an ended job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSummary {
    /// Its entry in the registry while it ran.
    pub entry: JobEntry,
    /// When it ended, in seconds since the Unix epoch.
    pub ended: u64,
    /// How it ended.
    pub outcome: Outcome,
    /// Why it failed; `None` unless it did.
    pub error: Option<String>,
    /// The plan it ran.
    pub plan: PhysicalPlan,
    /// Its last metrics.
    pub metrics: MetricsSnapshot,
    /// What its checkpoints and restarts did; `None`: it took none.
    pub checkpoints: Option<CheckpointFigures>,
}

/// The directory of the summaries, made private: `ended` beside the registry's (its parent
/// is private too), so the registry's own holds the running jobs' entries only.
fn summaries_dir() -> Result<PathBuf, RegistryError> {
    let registry = registry_dir()?;
    let dir = registry
        .parent()
        .unwrap_or(registry.as_path())
        .join("ended");
    crate::registry::make_private_dir(&dir)?;
    Ok(dir)
}

/// Seconds since the Unix epoch now.
pub(crate) fn epoch_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Keeps `summary`, and removes the oldest summaries beyond [`MAX_SUMMARIES`].
pub(crate) fn keep(summary: &JobSummary) -> Result<(), RegistryError> {
    keep_in(&summaries_dir()?, summary)
}

/// Keeps `summary` in `dir`, and removes the oldest there beyond [`MAX_SUMMARIES`].
fn keep_in(dir: &Path, summary: &JobSummary) -> Result<(), RegistryError> {
    let id = &summary.entry.id;
    let path = dir.join(format!("{id}.json"));
    let partial = dir.join(format!(".{id}.json.partial"));
    let io = |source| RegistryError::Io {
        what: format!("keep the summary of job '{id}' in {}", dir.display()),
        source,
    };
    let bytes = serde_json::to_vec(summary)?;
    write_whole(&partial, &path, &bytes).map_err(io)?;
    let mut kept = read_all(dir);
    if kept.len() > MAX_SUMMARIES {
        // Newest first: the ones past the bound go.
        for (path, _) in kept.drain(MAX_SUMMARIES..) {
            let _ = std::fs::remove_file(path);
        }
    }
    Ok(())
}

/// Every summary in `dir` with its file, newest first; a file that is no summary is skipped.
fn read_all(dir: &Path) -> Vec<(PathBuf, JobSummary)> {
    let Ok(files) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut summaries: Vec<(PathBuf, JobSummary)> = files
        .flatten()
        .map(|f| f.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter_map(|path| {
            let summary = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
            Some((path, summary))
        })
        .collect();
    summaries.sort_by(|a, b| {
        (b.1.ended, &b.1.entry.started, &b.1.entry.id).cmp(&(
            a.1.ended,
            &a.1.entry.started,
            &a.1.entry.id,
        ))
    });
    summaries
}

/// The summaries of the ended jobs kept, newest first.
pub fn ended() -> Result<Vec<JobSummary>, RegistryError> {
    Ok(read_all(&summaries_dir()?)
        .into_iter()
        .map(|(_, s)| s)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary of job `id`, which ended at `ended`.
    fn summary(id: &str, ended: u64) -> JobSummary {
        JobSummary {
            entry: JobEntry {
                id: id.into(),
                app: "app".into(),
                plan: "fused".into(),
                pes: 1,
                started: ended - 1,
                pid: 1,
                socket: PathBuf::from("/nowhere"),
                checkpoints: None,
            },
            ended,
            outcome: Outcome::Finished,
            error: None,
            plan: PhysicalPlan {
                job: "app".into(),
                strategy: "fused".into(),
                pes: Vec::new(),
                instances: Vec::new(),
                edges: Vec::new(),
                channels: Vec::new(),
                hosts: Vec::new(),
                launcher: None,
            },
            metrics: MetricsSnapshot::default(),
            checkpoints: None,
        }
    }

    #[test]
    fn the_most_recent_summaries_are_kept_and_older_ones_removed() {
        let dir = tempfile::tempdir().unwrap();
        let extra = 3;
        for n in 0..MAX_SUMMARIES + extra {
            keep_in(dir.path(), &summary(&format!("app-{n}"), 1_000 + n as u64)).unwrap();
        }
        let kept = read_all(dir.path());
        assert_eq!(kept.len(), MAX_SUMMARIES);
        // Newest first; the first `extra` ended are gone, files and all.
        assert_eq!(
            kept[0].1.entry.id,
            format!("app-{}", MAX_SUMMARIES + extra - 1)
        );
        assert_eq!(kept[MAX_SUMMARIES - 1].1.entry.id, format!("app-{extra}"));
        let files = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(files, MAX_SUMMARIES);
        // A later job with an ID kept replaces its summary.
        keep_in(dir.path(), &summary(&format!("app-{extra}"), 5_000)).unwrap();
        let kept = read_all(dir.path());
        assert_eq!(kept.len(), MAX_SUMMARIES);
        assert_eq!(kept[0].1.ended, 5_000);
    }
}
