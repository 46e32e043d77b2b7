//! A checkpointed job's figures ([`CheckpointFigures`], which its control socket answers
//! with) on one line, as `sluice top` shows them.

use sluice_runtime::CheckpointFigures;

/// The figures on one line, as `sluice top` shows them: `checkpoints: 12 complete, 0
/// failed; the last (12) took 15 ms, 4.2 KiB, alignment 0.3 ms; 1 restart, the last at
/// 3.2 s from checkpoint 4 after: ...`.
pub(crate) fn line(figures: &CheckpointFigures) -> String {
    let mut line = format!(
        "checkpoints: {} complete, {} failed",
        figures.completed, figures.failed
    );
    if let Some(last) = figures.last_complete {
        line.push_str(&format!(
            "; the last ({last}) took {:.0} ms, {}, alignment {:.1} ms",
            figures.last_duration_secs * 1e3,
            crate::checkpoints::size(figures.last_bytes),
            figures.last_alignment_secs * 1e3
        ));
    }
    match figures.restarts.last() {
        None => line.push_str("; no restart"),
        Some(restart) => {
            let from = restart
                .from
                .map_or("the start".to_string(), |n| format!("checkpoint {n}"));
            line.push_str(&format!(
                "; {} restart(s), the last at {:.1} s from {from} after: {}",
                figures.restarts.len(),
                restart.at_secs,
                restart.cause
            ));
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sluice_runtime::{CheckpointSummary, Restart};

    use super::*;

    #[test]
    fn the_line_says_the_last_checkpoint_and_restart() {
        let mut summary = CheckpointSummary {
            completed: 12,
            failed: 1,
            ..CheckpointSummary::default()
        };
        assert_eq!(
            line(&CheckpointFigures::from(&summary)),
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
            line(&CheckpointFigures::from(&summary)),
            "checkpoints: 12 complete, 1 failed; the last (12) took 15 ms, 4.2 KiB, alignment \
             0.3 ms; 1 restart(s), the last at 3.2 s from checkpoint 4 after: PE 1 died"
        );
    }
}
