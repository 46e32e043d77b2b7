//! What a checkpointed job's checkpoints and restarts did so far, as the observers of a
//! running job show it: `sluice top` (one line, asked over the job's control socket,
//! [`crate::jobs`]), the web page's `/snapshot.json` ([`crate::ui`]) and `/metrics`
//! ([`crate::prometheus`]). It is the runtime's [`CheckpointSummary`] in seconds and bytes,
//! serializable so that it crosses the socket and reads plainly in JSON.

use serde::{Deserialize, Serialize};
use sluice_runtime::CheckpointSummary;

/// A checkpointed job's checkpoints and restarts so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct CheckpointFigures {
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
pub(crate) struct RestartFigures {
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

impl CheckpointFigures {
    /// The figures on one line, as `sluice top` shows them: `checkpoints: 12 complete, 0
    /// failed; the last (12) took 15 ms, 4.2 KiB, alignment 0.3 ms; 1 restart, the last at
    /// 3.2 s from checkpoint 4 after: ...`.
    pub(crate) fn line(&self) -> String {
        let mut line = format!(
            "checkpoints: {} complete, {} failed",
            self.completed, self.failed
        );
        if let Some(last) = self.last_complete {
            line.push_str(&format!(
                "; the last ({last}) took {:.0} ms, {}, alignment {:.1} ms",
                self.last_duration_secs * 1e3,
                crate::checkpoints::size(self.last_bytes),
                self.last_alignment_secs * 1e3
            ));
        }
        match self.restarts.last() {
            None => line.push_str("; no restart"),
            Some(restart) => {
                let from = restart
                    .from
                    .map_or("the start".to_string(), |n| format!("checkpoint {n}"));
                line.push_str(&format!(
                    "; {} restart(s), the last at {:.1} s from {from} after: {}",
                    self.restarts.len(),
                    restart.at_secs,
                    restart.cause
                ));
            }
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sluice_runtime::Restart;

    use super::*;

    #[test]
    fn the_line_says_the_last_checkpoint_and_restart() {
        let mut summary = CheckpointSummary {
            completed: 12,
            failed: 1,
            ..CheckpointSummary::default()
        };
        assert_eq!(
            CheckpointFigures::from(&summary).line(),
            "checkpoints: 12 complete, 1 failed; no restart"
        );
        summary.last = Some(12);
        summary.last_duration = Duration::from_millis(15);
        summary.last_bytes = 4300;
        summary.last_alignment = Duration::from_micros(300);
        summary.restarts.push(Restart {
            at: Duration::from_millis(3200),
            from: Some(4),
            cause: "PE 1 died".into(),
        });
        assert_eq!(
            CheckpointFigures::from(&summary).line(),
            "checkpoints: 12 complete, 1 failed; the last (12) took 15 ms, 4.2 KiB, alignment \
             0.3 ms; 1 restart(s), the last at 3.2 s from checkpoint 4 after: PE 1 died"
        );
    }
}
