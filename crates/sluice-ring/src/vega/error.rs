//! The Vega ring's errors, one enum per operation. (`Display` and `Error` are written out by
//! hand: `sluice-ring` has no dependency on `thiserror`.)

use std::fmt;

/// Why a [`super::VegaLayout`] was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VegaLayoutError {
    /// `slot_bytes` was 0.
    ZeroSlotBytes,
    /// `slots` was 0.
    ZeroSlots,
    /// `slot_bytes` is above [`super::VegaLayout::MAX_SLOT_BYTES`].
    SlotTooLarge {
        /// The requested slot size.
        slot_bytes: usize,
        /// The largest allowed.
        max: usize,
    },
    /// `slots` is above [`super::VegaLayout::MAX_SLOTS`].
    TooManySlots {
        /// The requested slot count.
        slots: usize,
        /// The largest allowed.
        max: usize,
    },
    /// The ring would not fit in the address space.
    Overflow {
        /// The requested slot size.
        slot_bytes: usize,
        /// The requested slot count.
        slots: usize,
    },
}

impl fmt::Display for VegaLayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroSlotBytes => write!(f, "a Vega slot must hold at least one byte"),
            Self::ZeroSlots => write!(f, "a Vega ring needs at least one slot"),
            Self::SlotTooLarge { slot_bytes, max } => {
                write!(
                    f,
                    "a slot of {slot_bytes} bytes is above the limit of {max}"
                )
            }
            Self::TooManySlots { slots, max } => {
                write!(f, "{slots} slots are above the limit of {max}")
            }
            Self::Overflow { slot_bytes, slots } => {
                write!(
                    f,
                    "{slots} slots of {slot_bytes} bytes do not fit in memory"
                )
            }
        }
    }
}

impl std::error::Error for VegaLayoutError {}

/// One end of a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VegaRole {
    /// The sending end.
    Producer,
    /// The receiving end.
    Consumer,
}

impl fmt::Display for VegaRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Producer => "producer",
            Self::Consumer => "consumer",
        })
    }
}

/// Why a ring could not be created in, or opened from, a block of memory, or an end could not
/// be attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VegaOpenError {
    /// The layout (given, or read from the header) is not valid.
    Layout(VegaLayoutError),
    /// The memory is smaller than the layout needs.
    MemoryTooSmall {
        /// Bytes the layout needs.
        needed: usize,
        /// Bytes the memory has.
        len: usize,
    },
    /// The memory does not start on a cache line.
    Misaligned,
    /// `create` found a ring already initialised in the memory.
    AlreadyInitialised,
    /// `open` found no ring yet (its creator may not have finished; retry).
    NotInitialised,
    /// `open` found something that is not a Vega ring.
    BadMagic {
        /// The first word of the memory.
        found: u64,
    },
    /// `open` found a Vega ring of another layout version.
    Version {
        /// The version in the memory.
        found: u64,
        /// The version this code reads.
        expected: u64,
    },
    /// The role was already taken: a ring has one producer and one consumer, ever.
    RoleTaken(VegaRole),
}

impl fmt::Display for VegaOpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Layout(e) => write!(f, "invalid Vega layout: {e}"),
            Self::MemoryTooSmall { needed, len } => {
                write!(f, "the ring needs {needed} bytes, the memory has {len}")
            }
            Self::Misaligned => write!(f, "the ring's memory is not cache-line aligned"),
            Self::AlreadyInitialised => write!(f, "the memory already holds a Vega ring"),
            Self::NotInitialised => write!(f, "the memory holds no Vega ring yet"),
            Self::BadMagic { found } => {
                write!(f, "the memory is not a Vega ring (magic {found:#018x})")
            }
            Self::Version { found, expected } => {
                write!(
                    f,
                    "Vega layout version {found}, this build reads {expected}"
                )
            }
            Self::RoleTaken(role) => write!(f, "the ring already has a {role}"),
        }
    }
}

impl std::error::Error for VegaOpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Layout(e) => Some(e),
            _ => None,
        }
    }
}

impl From<VegaLayoutError> for VegaOpenError {
    fn from(e: VegaLayoutError) -> Self {
        Self::Layout(e)
    }
}

/// Why a ring was marked unusable (the header's `poison` word).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoisonReason {
    /// An end (or a liveness checker holding one) called `poison`: the peer is dead or the
    /// run is being torn down.
    Requested,
    /// A shared index was outside what the protocol allows (memory corrupted or a peer
    /// broke the protocol).
    BadIndex,
    /// A slot's length word was larger than `slot_bytes`.
    BadLength,
    /// A poison code this build does not know.
    Unknown(u64),
}

impl PoisonReason {
    pub(crate) fn code(self) -> u64 {
        match self {
            Self::Requested => 1,
            Self::BadIndex => 2,
            Self::BadLength => 3,
            Self::Unknown(code) => code,
        }
    }

    /// `None` for 0 (healthy).
    pub(crate) fn from_code(code: u64) -> Option<Self> {
        match code {
            0 => None,
            1 => Some(Self::Requested),
            2 => Some(Self::BadIndex),
            3 => Some(Self::BadLength),
            other => Some(Self::Unknown(other)),
        }
    }
}

impl fmt::Display for PoisonReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Requested => write!(f, "poisoned on request"),
            Self::BadIndex => write!(f, "a shared index was out of range"),
            Self::BadLength => write!(f, "a slot length was larger than the slot"),
            Self::Unknown(code) => write!(f, "unknown poison code {code}"),
        }
    }
}

/// Why a tuple was not sent (or a slot not claimed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VegaSendError {
    /// No free slot now: the consumer is behind; retry later.
    Full,
    /// The consumer is gone; nothing sent would be read.
    Closed,
    /// The tuple is larger than a slot; it never fits, whatever the ring's state.
    TooLarge {
        /// The tuple's size in bytes.
        tuple: usize,
        /// The ring's `slot_bytes`.
        slot: usize,
    },
    /// The ring was poisoned.
    Poisoned(PoisonReason),
}

impl fmt::Display for VegaSendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full => write!(f, "the Vega ring is full"),
            Self::Closed => write!(f, "the Vega ring's consumer is gone"),
            Self::TooLarge { tuple, slot } => {
                write!(
                    f,
                    "a tuple of {tuple} bytes does not fit a slot of {slot} bytes"
                )
            }
            Self::Poisoned(reason) => write!(f, "the Vega ring is unusable: {reason}"),
        }
    }
}

impl std::error::Error for VegaSendError {}

/// Why nothing could be received; `Ok(None)` / an empty batch means "empty for now".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VegaRecvError {
    /// The producer is gone and every tuple it published has been received.
    Closed,
    /// The ring was poisoned.
    Poisoned(PoisonReason),
}

impl fmt::Display for VegaRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed => write!(
                f,
                "the Vega ring's producer is gone and the ring is drained"
            ),
            Self::Poisoned(reason) => write!(f, "the Vega ring is unusable: {reason}"),
        }
    }
}

impl std::error::Error for VegaRecvError {}
