//! Why a job failed, its root cause first.
//!
//! A failure in one place makes others elsewhere: a PE whose source fails drops its senders,
//! and its downstream PE then finds its edge `lost its sender without an end of stream`; a PE
//! whose receiver is gone finds `the downstream thread stopped receiving`. Those are
//! consequences ([`RunError::is_consequence`]). Every failure of a job is collected
//! ([`root_cause`]): the error reported is the first failure of its own accord (an operator's
//! error or panic, an errno with its path, a PE killed by a signal, a stalled thread or PE, a
//! peer's bad frame), and every other failure follows it, original ones first, as `followed
//! by:` lines.

use std::time::Duration;

use sluice_graph::OperatorError;
use sluice_transport::{RecvError, TransportError};
use thiserror::Error;

/// A job that did not complete.
#[derive(Debug, Error)]
pub enum RunError {
    /// An operator instance failed or panicked.
    #[error("operator '{instance}' failed: {error}")]
    Operator {
        /// The instance, e.g. `sum[1]`.
        instance: String,
        /// What went wrong.
        error: OperatorError,
    },
    /// A transport could not be built.
    #[error("edge {edge}: {error}")]
    Transport {
        /// The edge, as `from -> to`.
        edge: String,
        /// What went wrong.
        error: TransportError,
    },
    /// The plan cannot run whatever the graph: the planner's own check refuses it.
    #[error(transparent)]
    Plan(#[from] sluice_plan::PlanError),
    /// The plan does not fit the graph it is run with.
    #[error("the plan does not match the graph: {0}")]
    PlanMismatch(String),
    /// An upstream thread vanished without ending its stream.
    #[error("the edge {edge} lost its sender without an end of stream")]
    Disconnected {
        /// The edge, as `from -> to`.
        edge: String,
    },
    /// What arrived on an edge is not what its sender sends: the sender (a peer, where the
    /// transport names it) is broken or hostile.
    #[error("the edge {edge} failed: {error}")]
    Received {
        /// The edge, as `from -> to`.
        edge: String,
        /// What arrived, and from whom.
        error: RecvError,
    },
    /// A thread could not be started.
    #[error("cannot start thread '{thread}': {source}")]
    Spawn {
        /// The thread's name.
        thread: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The launcher could not start or reach the job's PEs.
    #[error("launching the job: {0}")]
    Launch(String),
    /// A PE reported a failure.
    #[error("PE '{pe}': {error}")]
    PeFailed {
        /// The PE's name.
        pe: String,
        /// Its error.
        error: String,
        /// It failed because of a failure elsewhere (a neighbour that stopped sending or
        /// receiving).
        consequence: bool,
        /// Its failure would recur on a restart ([`RunError::is_permanent`]).
        permanent: bool,
    },
    /// A source of a job that must be able to replay or resume it cannot.
    #[error(
        "operator '{instance}' failed: this source cannot resume where it stopped \
         (Source::resumable), which {needs} needs"
    )]
    Unresumable {
        /// The source's instance.
        instance: String,
        /// What needs it: checkpoints, or a redeploy.
        needs: &'static str,
    },
    /// A PE process ended without reporting: it crashed or was killed.
    #[error("PE '{pe}' (operators: {operators}) {how}; the job was stopped")]
    PeDied {
        /// The PE's name.
        pe: String,
        /// The instances it ran.
        operators: String,
        /// How it ended, e.g. `was killed by signal 9`.
        how: String,
    },
    /// A PE lost its stream to the launcher: the launcher is gone.
    #[error("the launcher is gone: {0}")]
    LauncherLost(String),
    /// A thread made no progress (its work loop, or a wait on a full queue, did not come
    /// round) for the run's stall timeout: an operator is stuck in a call.
    #[error(
        "thread '{thread}' (operators: {operators}) made no progress for {} s: an operator is \
         stuck in a call (an endless loop, or a wait that never ends); the job was stopped",
        seconds(*stalled_for)
    )]
    Stalled {
        /// The thread's name.
        thread: String,
        /// The instances it runs.
        operators: String,
        /// How long it was seen making no progress.
        stalled_for: Duration,
    },
    /// A PE's heartbeat stopped for the run's stall timeout.
    #[error(
        "PE '{pe}' (operators: {operators}) sent no heartbeat for {} s{state}; the job was \
         stopped",
        seconds(*silent_for)
    )]
    Silent {
        /// The PE's name.
        pe: String,
        /// The instances it ran.
        operators: String,
        /// How long it was silent.
        silent_for: Duration,
        /// What its process's state says, e.g. `: its process is stopped (SIGSTOP)`.
        state: String,
    },
    /// A drain (after Ctrl-C, SIGTERM or the duration) did not end in time.
    #[error(
        "the drain did not end within {} s of the stop{waiting}; the job was aborted",
        seconds(*limit)
    )]
    DrainTimeout {
        /// The drain timeout.
        limit: Duration,
        /// What had not finished, e.g. ` (still draining: PE 'sum')`.
        waiting: String,
    },
    /// The user interrupted the job (a second Ctrl-C, or one during start-up).
    #[error("interrupted {0}; the job was aborted")]
    Interrupted(&'static str),
    /// A failure and the failures that followed it.
    #[error("{cause}{}", followed_by(consequences))]
    Followed {
        /// The root cause.
        cause: Box<RunError>,
        /// What followed, original failures first.
        consequences: Vec<RunError>,
    },
    /// The sinks' results returned from PE processes outgrew [`crate::RunOptions::collect_limit`].
    #[error(
        "the results the sink '{sink}' returns to this process reached {size} bytes, past the \
         limit of {limit} bytes on a job's results from its PE processes \
         (RunOptions::collect_limit, or collect-limit: SLUICE_COLLECT_LIMIT, the configuration \
         file, --collect-limit); the job was stopped"
    )]
    ResultsTooLarge {
        /// The sink whose batch crossed the limit.
        sink: String,
        /// The bytes returned with that batch, every sink's together.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The job aborted without a recorded cause.
    #[error("the job aborted")]
    Aborted,
}

/// A duration in seconds, as messages show it.
fn seconds(duration: Duration) -> String {
    let secs = duration.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{secs:.0}")
    } else {
        format!("{secs:.1}")
    }
}

/// The lines listing what followed a failure.
fn followed_by(consequences: &[RunError]) -> String {
    consequences
        .iter()
        .map(|c| format!("\n  followed by: {c}"))
        .collect()
}

/// The most failures of one job kept for its report; the rest add nothing.
pub const MAX_FAILURES: usize = 16;

/// The job's error from every failure recorded, in the order they were seen: the first
/// original failure (else the first consequence) as the cause, followed by the other original
/// ones, then the consequences. `None` when there is none.
pub fn root_cause(failures: Vec<RunError>) -> Option<RunError> {
    let (mut ordered, consequences): (Vec<RunError>, Vec<RunError>) =
        failures.into_iter().partition(|f| !f.is_consequence());
    ordered.extend(consequences);
    let mut ordered = ordered.into_iter();
    let cause = ordered.next()?;
    let consequences: Vec<RunError> = ordered.collect();
    Some(if consequences.is_empty() {
        cause
    } else {
        RunError::Followed {
            cause: Box::new(cause),
            consequences,
        }
    })
}

/// Why an instance could not send: the thread (or PE) downstream of it stopped receiving,
/// which it does only when it failed itself or the job aborts.
pub(crate) const DOWNSTREAM_GONE: &str = "the downstream thread stopped receiving";

impl RunError {
    /// Whether this failure follows from another one elsewhere in the job (a neighbour that
    /// stopped receiving or sending) rather than being a cause of its own.
    pub fn is_consequence(&self) -> bool {
        match self {
            Self::Disconnected { .. } | Self::Aborted => true,
            Self::PeFailed { consequence, .. } => *consequence,
            Self::Followed { cause, .. } => cause.is_consequence(),
            Self::Operator {
                error: OperatorError::Failed(why),
                ..
            } => why == DOWNSTREAM_GONE,
            _ => false,
        }
    }

    /// Whether the failure would recur if the job were restarted as it is: the job or its plan
    /// cannot run (a source that cannot replay, a plan that does not fit), so restarting it
    /// from a checkpoint is no use.
    pub fn is_permanent(&self) -> bool {
        match self {
            Self::Unresumable { .. }
            | Self::Plan(_)
            | Self::PlanMismatch(_)
            | Self::ResultsTooLarge { .. } => true,
            Self::PeFailed { permanent, .. } => *permanent,
            Self::Followed { cause, .. } => cause.is_permanent(),
            _ => false,
        }
    }

    /// Whether the user interrupted the job (a shell reports that as exit status 130).
    pub fn is_interrupt(&self) -> bool {
        match self {
            Self::Interrupted(_) => true,
            Self::Followed { cause, .. } => cause.is_interrupt(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disconnected(edge: &str) -> RunError {
        RunError::Disconnected { edge: edge.into() }
    }

    #[test]
    fn the_first_original_failure_is_the_cause_and_the_rest_follow_it() {
        let failures = vec![
            disconnected("sentences -> split"),
            RunError::PeDied {
                pe: "sentences".into(),
                operators: "sentences".into(),
                how: "was killed by signal 9 (SIGKILL)".into(),
            },
            RunError::PeFailed {
                pe: "sum".into(),
                error: DOWNSTREAM_GONE.into(),
                consequence: true,
                permanent: false,
            },
            RunError::Operator {
                instance: "counts".into(),
                error: OperatorError::Panicked("boom".into()),
            },
        ];
        let error = root_cause(failures).unwrap();
        assert!(!error.is_consequence());
        assert_eq!(
            error.to_string(),
            "PE 'sentences' (operators: sentences) was killed by signal 9 (SIGKILL); the job \
             was stopped\n  followed by: operator 'counts' failed: panicked: boom\n  followed \
             by: the edge sentences -> split lost its sender without an end of stream\n  \
             followed by: PE 'sum': the downstream thread stopped receiving"
        );
    }

    #[test]
    fn a_malformed_message_is_a_cause_and_a_lost_sender_a_consequence() {
        let received = RunError::Received {
            edge: "split -> sum".into(),
            error: sluice_transport::RecvError::Malformed,
        };
        assert!(!received.is_consequence());
        assert!(disconnected("split -> sum").is_consequence());
        let error = root_cause(vec![disconnected("sum -> counts"), received]).unwrap();
        assert!(
            error
                .to_string()
                .starts_with("the edge split -> sum failed: a malformed message arrived"),
            "{error}"
        );
    }

    #[test]
    fn consequences_alone_name_the_first_as_the_cause() {
        let error = root_cause(vec![disconnected("a -> b"), disconnected("b -> c")]).unwrap();
        assert!(error.is_consequence());
        assert!(error
            .to_string()
            .starts_with("the edge a -> b lost its sender"));
        assert!(root_cause(Vec::new()).is_none());
        let alone = root_cause(vec![RunError::Interrupted("during start-up")]).unwrap();
        assert!(alone.is_interrupt());
        assert_eq!(
            alone.to_string(),
            "interrupted during start-up; the job was aborted"
        );
    }
}
