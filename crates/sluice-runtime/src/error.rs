//! Why a job failed.

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
    /// The job aborted without a recorded cause.
    #[error("the job aborted")]
    Aborted,
}

/// Why an instance could not send: the thread (or PE) downstream of it stopped receiving,
/// which it does only when it failed itself or the job aborts.
pub(crate) const DOWNSTREAM_GONE: &str = "the downstream thread stopped receiving";

impl RunError {
    /// Whether this failure follows from another one elsewhere in the job (a neighbour that
    /// stopped receiving or sending) rather than being a cause of its own.
    pub(crate) fn is_consequence(&self) -> bool {
        match self {
            Self::Disconnected { .. } | Self::Aborted => true,
            Self::Operator {
                error: OperatorError::Failed(why),
                ..
            } => why == DOWNSTREAM_GONE,
            _ => false,
        }
    }
}
