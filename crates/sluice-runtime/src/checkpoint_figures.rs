//! What a checkpointed job's checkpoints and restarts did so far, as the observers of a
//! running job show it: `sluice top` (asked over the job's control socket,
//! [`crate::registry`]), the web page's `/snapshot.json` and `/metrics`. It is the
//! runtime's [`CheckpointSummary`] in seconds and bytes, serializable so that it crosses the
//! socket and reads plainly in JSON.

use crate::CheckpointSummary;
use serde::{Deserialize, Serialize};

/// A checkpointed job's checkpoints and restarts so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckpointFigures {
    /// Checkpoints complete.
    pub completed: u64,
    /// Checkpoints that failed (a part not written, the timeout, the job failing first).
    pub failed: u64,
    /// The last complete checkpoint's number.
    pub last_complete: Option<u64>,
    /// How long the last complete one took, from its ask to its manifest.
    pub last_duration_secs: f64,
    /// Bytes of its parts.
    pub last_bytes: u64,
    /// The longest alignment of an instance in it.
    pub last_alignment_secs: f64,
    /// Why the last failed one failed.
    pub last_failure: Option<String>,
    /// Every restart after a failure, in order.
    pub restarts: Vec<RestartFigures>,
}

/// One restart of the job after a failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestartFigures {
    /// When, in seconds from the job's start.
    pub at_secs: f64,
    /// The checkpoint it restarted from; `None`: from the start, none being complete.
    pub from: Option<u64>,
    /// The failure, its first line.
    pub cause: String,
}

impl From<&CheckpointSummary> for CheckpointFigures {
    fn from(summary: &CheckpointSummary) -> Self {
        Self {
            completed: summary.completed,
            failed: summary.failed,
            last_complete: summary.last,
            last_duration_secs: summary.last_duration.as_secs_f64(),
            last_bytes: summary.last_bytes,
            last_alignment_secs: summary.last_alignment.as_secs_f64(),
            last_failure: summary.last_failure.clone(),
            restarts: summary
                .restarts
                .iter()
                .map(|r| RestartFigures {
                    at_secs: r.at.as_secs_f64(),
                    from: r.from,
                    cause: r.cause.clone(),
                })
                .collect(),
        }
    }
}
