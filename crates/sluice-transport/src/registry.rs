//! The transport registry: which transports exist, their parameters, and how to build them.
//!
//! A [`TransportSpec`] is what the physical plan stores for an edge (it is serde-serializable,
//! so later a PE in another process rebuilds the same endpoint from the plan). Adding a
//! transport is adding a variant here and its endpoints in a module of this crate.

use serde::{Deserialize, Serialize};
use sluice_types::Tuple;
use thiserror::Error;

use crate::threaded::threaded_port;
use crate::{TupleReceiver, TupleSender};

/// The default number of messages a threaded port holds.
pub const DEFAULT_QUEUE_CAPACITY: usize = 4096;

/// A connected pair of typed endpoints.
pub type TypedPair<T> = (Box<dyn TupleSender<T>>, Box<dyn TupleReceiver<T>>);

/// A transport and its parameters, as chosen for one edge of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TransportSpec {
    /// Both ends in one thread: the upstream operator calls the downstream one directly.
    Fused,
    /// Two threads of one process joined by a bounded SPSC queue.
    Threaded {
        /// Messages the queue holds (rounded up to a power of two).
        capacity: usize,
    },
    /// A Vega ring in a shared segment: between processes of one host (or threads).
    ShmVega {
        /// The largest encoded tuple a slot holds.
        slot_bytes: usize,
        /// Slots in the ring.
        slots: usize,
    },
}

/// Why a transport could not be built.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum TransportError {
    /// The fused transport is a function call and has no endpoints.
    #[error("the fused transport is a direct call and has no sender or receiver")]
    NoEndpoints,
    /// The shared segment or ring could not be set up.
    #[error("{0}")]
    Setup(String),
    /// A parameter is out of range.
    #[error("transport {transport}: {parameter} {reason}")]
    InvalidParameter {
        /// The transport's name.
        transport: &'static str,
        /// The parameter's name.
        parameter: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

impl TransportSpec {
    /// A threaded port with the default capacity.
    pub fn threaded() -> Self {
        Self::Threaded {
            capacity: DEFAULT_QUEUE_CAPACITY,
        }
    }

    /// The transport's name, as used on the command line and in plans.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Fused => "fused",
            Self::Threaded { .. } => "threaded",
            Self::ShmVega { .. } => "shm-vega",
        }
    }

    /// Builds a connected pair of typed endpoints.
    pub fn connect_typed<T: Tuple>(&self) -> Result<TypedPair<T>, TransportError> {
        match *self {
            Self::Fused => Err(TransportError::NoEndpoints),
            Self::Threaded { capacity } => {
                let (tx, rx) =
                    threaded_port::<T>(capacity).ok_or(TransportError::InvalidParameter {
                        transport: "threaded",
                        parameter: "capacity",
                        reason: format!("must be between 1 and 2^62, got {capacity}"),
                    })?;
                Ok((Box::new(tx), Box::new(rx)))
            }
            Self::ShmVega { slot_bytes, slots } => {
                let (tx, rx) = crate::shm_vega::connect::<T>(slot_bytes, slots)?;
                Ok((Box::new(tx), Box::new(rx)))
            }
        }
    }
}

impl std::fmt::Display for TransportSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Fused => f.write_str("fused"),
            Self::Threaded { capacity } => write!(f, "threaded(capacity={capacity})"),
            Self::ShmVega { slot_bytes, slots } => {
                write!(f, "shm-vega(slot_bytes={slot_bytes}, slots={slots})")
            }
        }
    }
}
