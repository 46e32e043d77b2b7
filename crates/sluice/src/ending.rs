//! How a run ended, and whether its output is therefore partial.
//!
//! A job's sources end in one of three ways, told apart after the job has drained:
//!
//! - **on their own** (a file read to its end, `--set sentences=N` generated): no stop was
//!   ever requested, and the output is complete;
//! - **by `--duration`**: the stop was requested (by the runtime) once the duration had
//!   passed. A generated source without an end of its own is complete by design: the
//!   duration is how long the user asked it to run. A file source stopped so had not reached
//!   the end of its file (or did just as the duration ran out, while the job drained, which
//!   is reported as partial too, to be safe), and its output is partial; so is the output of
//!   a generated source with an end of its own (`--set records=N`, a pipeline's input,
//!   [`sluice_apps::FiniteInput`]) that had not generated all of it, and of a job fed by
//!   companions (OMDP's feed sender) whose feed had not ended;
//! - **by the user**: Ctrl-C or SIGTERM (caught by `sluice run`'s handler), or `sluice stop`
//!   (a stop through the job registry), before the duration passed or with none: partial.
//!
//! A partial run says so on standard error (a warning) and in its summary on standard output
//! (a `partial output: ...` line; `"partial": true` in `--json`), and still exits with 0: the
//! job drained and what it wrote is consistent, only not all of its input.

use std::time::Duration;

/// What stopped the job's sources, as far as the output is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ending {
    /// Whether a stop was requested before the sources ended (`StopHandle::is_stopping`).
    pub stopped: bool,
    /// Whether Ctrl-C or SIGTERM asked for it.
    pub interrupted: bool,
    /// The run's `--duration`, if it had one.
    pub duration: Option<Duration>,
    /// How long the job ran, drain included.
    pub elapsed: Duration,
    /// Whether the sources read a file (`--input`), which has an end of its own.
    pub reads_file: bool,
    /// What of a generated input with an end of its own the sources did not generate
    /// ([`sluice_apps::FiniteInput::left_in`]), if any.
    pub generated_left: Option<String>,
    /// Whether companions feed the job (OMDP's feed sender): their end is the input's end, so
    /// a job stopped by its duration while they still sent (a replayed recording longer than
    /// the duration allows) did not take all of its input.
    pub fed: bool,
}

impl Ending {
    /// Why the output is partial, or `None` when it is complete.
    pub(crate) fn partial(&self) -> Option<String> {
        if !self.stopped {
            return None;
        }
        if self.interrupted {
            return Some(
                "the job was stopped by Ctrl-C or SIGTERM before its sources ended".into(),
            );
        }
        let duration_passed = self.duration.is_some_and(|d| self.elapsed >= d);
        match (duration_passed, self.reads_file, &self.generated_left) {
            (true, _, _) if self.fed => Some(
                "--duration ended the job before the feed that drives it ended (its sender was \
                 still sending)"
                    .into(),
            ),
            (true, true, _) => {
                Some("--duration ended the job before its input file was read to the end".into())
            }
            (true, false, Some(left)) => Some(format!(
                "--duration ended the job before its generated input was used up ({left} \
                 generated)"
            )),
            (true, false, None) => None,
            (false, _, _) => {
                Some("the job was stopped (sluice stop) before its sources ended".into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ending(stopped: bool, interrupted: bool, elapsed: f64, reads_file: bool) -> Ending {
        Ending {
            stopped,
            interrupted,
            duration: Some(Duration::from_secs(2)),
            elapsed: Duration::from_secs_f64(elapsed),
            reads_file,
            generated_left: None,
            fed: false,
        }
    }

    #[test]
    fn sources_that_ended_on_their_own_give_complete_output() {
        assert_eq!(ending(false, false, 0.5, true).partial(), None);
        assert_eq!(ending(false, false, 0.5, false).partial(), None);
    }

    #[test]
    fn a_duration_completes_a_generated_run_and_cuts_a_file_short() {
        assert_eq!(ending(true, false, 2.1, false).partial(), None);
        assert!(ending(true, false, 2.1, true)
            .partial()
            .is_some_and(|why| why.starts_with("--duration")));
    }

    #[test]
    fn a_duration_cuts_a_finite_generated_input_short_unless_it_was_all_generated() {
        let cut = Ending {
            generated_left: Some("1785856 of 2000000 records".into()),
            ..ending(true, false, 2.1, false)
        };
        assert_eq!(
            cut.partial().as_deref(),
            Some(
                "--duration ended the job before its generated input was used up (1785856 of \
                 2000000 records generated)"
            )
        );
        // All generated as the duration ran out: complete.
        assert_eq!(ending(true, false, 2.1, false).partial(), None);
    }

    #[test]
    fn a_duration_that_ends_a_fed_job_before_its_feed_ended_cuts_it_short() {
        // OMDP replaying a recording longer than the duration allows: the job's own duration
        // stopped it while the sender still sent (had the sender ended, no stop would count).
        let cut = Ending {
            fed: true,
            ..ending(true, false, 12.1, false)
        };
        assert!(cut
            .partial()
            .is_some_and(|why| why.contains("before the feed that drives it ended")));
        let ended = Ending {
            fed: true,
            ..ending(false, false, 3.0, false)
        };
        assert_eq!(ended.partial(), None);
    }

    #[test]
    fn a_stop_by_the_user_makes_any_output_partial() {
        for reads_file in [false, true] {
            assert!(ending(true, true, 2.5, reads_file)
                .partial()
                .is_some_and(|why| why.contains("Ctrl-C")));
            assert!(ending(true, false, 1.0, reads_file)
                .partial()
                .is_some_and(|why| why.contains("sluice stop")));
        }
        let no_duration = Ending {
            duration: None,
            ..ending(true, false, 100.0, false)
        };
        assert!(no_duration.partial().is_some());
    }
}
