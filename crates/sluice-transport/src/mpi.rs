//! The `mpi` transport: batches of tuples as MPI point-to-point messages between the PEs of a
//! job launched by `mpirun` (`--launcher mpi`, where rank i is PE i), as the Vega and SCSQ
//! papers tried, but with a receive that never blocks: the Vega paper found that a PE waiting
//! in `MPI_Recv` cannot be interrupted to stop, so this receiver only ever asks
//! `MPI_Improbe` whether a batch has arrived and receives a batch that has (`MPI_Mrecv` of
//! the matched message), and its thread goes on to see stops and aborts like any other.
//!
//! Built only with the Cargo feature `mpi` (Open MPI's `libopenmpi-dev` and, for bindgen,
//! `libclang-dev`); without it, the parameters ([`MpiParams`]) still parse in plans, and
//! building an endpoint fails saying which feature is missing.
//!
//! # Messages
//!
//! A channel's batches go to the receiver's rank with the channel's *data tag*; the receiver
//! probes any source with that tag, so many senders (in any PEs) feed one receiver, and MPI's
//! non-overtaking rule keeps each sender's batches in order. Each sender has a *credit tag*
//! on which the receiver returns one empty message per batch it took. Tags (Open MPI's
//! `MPI_TAG_UB` is 2^31 - 1):
//!
//! ```text
//!  data tag:   channel << 12               (channel < 2^18)
//!  credit tag: channel << 12 | (1 + sender) (sender < 4095)
//! ```
//!
//! A batch is one MPI message of bytes, all integers little-endian:
//!
//! ```text
//!  batch:   +--------------------+----------------------------------------+
//!           | sender index u32   | records (1 ..= the framing's limit)    |
//!           +--------------------+----------------------------------------+
//!  records: +------+---------------+---------+---------+-----+
//!           | 0x01 | count u32 >= 1| tuple 1 | tuple 2 | ... |    a run of data tuples
//!           +------+---------------+---------+---------+-----+
//!           | 0x02 | punctuation: kind u8, value u64, from u32 (13 bytes) |    a punctuation
//!           +------+-------------------------------------------+
//!           | 0x03 |                                             the end of the stream
//!           | 0x04 |                                             dropped without an end
//!           +------+---------------------------+------------+
//!           | 0x05 | len u32 <= max tuple, > 0 | len bytes  |   a part of a tuple, more follow
//!           +------+---------------------------+------------+
//!           | 0x06 | len u32 <= max tuple, > 0 | len bytes  |   the last part of a tuple
//!           +------+---------------------------+------------+
//!  tuple:   facade: its size in bytes; normal: len u32 <= max tuple, then len bytes
//! ```
//!
//! An end (0x03) or abandon (0x04) record is the batch's last byte and the sender's last
//! batch.
//!
//! # Tuples of any size
//!
//! A normal tuple whose encoding is longer than `max_tuple_bytes` is sent as part records of
//! that size (the last one shorter), in as many batches as it takes ([`crate::parts`]): a
//! part record goes in the current batch if it fits `batch_bytes`, else in a batch of its
//! own, which always fits the receiver's limit. The parts of a tuple are consecutive in
//! their sender's stream, nothing else between them but an abandon record (a sender dropped
//! mid-tuple: its parts are dropped with it); the receiver reassembles them per sender,
//! across batches, as they arrive, up to [`MAX_TUPLE_BYTES`](crate::MAX_TUPLE_BYTES): an
//! `mpi` edge carries any tuple up to that, whatever its parameters, and refuses a longer
//! one at the sender as [`SendError::TooLarge`] naming both sizes. Fixed-size tuples never
//! come in parts (one larger than `max_tuple_bytes` is refused as too large). Any other
//! record between one sender's parts, an empty part or one longer than `max_tuple_bytes`, a
//! part on an edge of fixed-size tuples, or parts adding up to more than
//! [`MAX_TUPLE_BYTES`](crate::MAX_TUPLE_BYTES) is [`RecvError::Malformed`]. The batches of
//! a tuple in parts take credits like any other, so a large tuple never puts more than
//! `credit` batches in flight: while its parts wait for credits, the sender refuses other
//! offers as [`SendError::Full`] and reports itself [`pending`](crate::TupleSender::pending)
//! until a flush gets the last part into a batch.
//!
//! # Limits
//!
//! The receiver checks the length of a probed batch against its limit before it
//! receives it (a longer one is never received, and poisons the edge), then the sender index
//! (below the channel's senders, from the same rank as before, not ended), then every count
//! and length against what remains of the batch before reading, and every punctuation's kind
//! as `Punctuation::from_wire` does: nothing a peer sends makes a PE read out of bounds
//! ([`RecvError::Malformed`] instead). A punctuation's 13 bytes are its wire encoding, the one
//! every transport uses (drawn in `sluice_types::Punctuation`'s module). The receiver holds
//! one batch of at most `4 + max(batch_bytes, max_tuple_bytes + 9)` bytes at a time, and per
//! sender the parts of a tuple received so far, which grow only as parts arrive (never ahead
//! of them) and never past [`MAX_TUPLE_BYTES`](crate::MAX_TUPLE_BYTES).
//!
//! The batch layout has no version field: every rank of an `mpirun` job runs the same
//! `sluice` binary. Part records (0x05, 0x06) are new with tuples of any size; an older
//! receiver would refuse them as malformed.
//!
//! # Backpressure and sending
//!
//! A sender fills a batch up to `batch_bytes` and sends it with `MPI_Isend` when it is full or
//! flushed, if it holds a credit: it starts with `credit` credits and gets one back per batch
//! the receiver takes, so at most `credit` batches per sender wait at the receiver (MPI
//! buffers unexpected messages without limit; the credits are what bounds them). With no
//! credit, a full batch makes `offer` refuse with [`SendError::Full`]. A receiver dropped
//! while senders stream sends each a one-byte closing notice on its credit tag; their next
//! offer is refused as [`SendError::Closed`].
//!
//! # MPI's lifetime
//!
//! `session::initialize` initialises MPI once per PE process with `MPI_THREAD_MULTIPLE`
//! (refusing a lower level, or a process `mpirun` did not start), and
//! `session::finalize` ends it; the runtime calls both in every PE of a job with an `mpi`
//! edge. The buffers of sends in flight are owned by the sender (`request`, the one module
//! with `unsafe`).

mod params;
#[cfg(feature = "mpi")]
mod receiver;
#[cfg(feature = "mpi")]
mod request;
#[cfg(feature = "mpi")]
mod sender;
#[cfg(feature = "mpi")]
pub mod session;
// Pure decoding and encoding: built without MPI too, for its tests and for fuzzing.
#[cfg(any(feature = "mpi", test, fuzzing))]
pub(crate) mod wire;

pub use params::{
    MpiParams, DEFAULT_BATCH_BYTES, DEFAULT_CREDIT, DEFAULT_MAX_TUPLE_BYTES, MAX_BYTES_PARAMETER,
    MAX_CREDIT,
};
#[cfg(feature = "mpi")]
pub use receiver::{bind_receiver, MpiReceiver};
#[cfg(feature = "mpi")]
pub use sender::{open_sender, MpiSender, DROP_DRAIN};

use crate::TransportError;
#[cfg(doc)]
use crate::{RecvError, SendError};

/// Bits of a tag below the channel.
const CHANNEL_SHIFT: u32 = 12;
/// The most channels of a job the tags tell apart.
pub const MAX_CHANNELS: u32 = 1 << 18;
/// The most senders of one channel the tags tell apart.
pub const MAX_SENDERS: u32 = (1 << CHANNEL_SHIFT) - 1;
const _: () = assert!((MAX_CHANNELS as u64) << CHANNEL_SHIFT <= 1 << 30);

/// Where one sender's batches of a channel go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The receiving PE's rank.
    pub receiver: i32,
    /// The channel's id in the plan.
    pub channel: u32,
    /// The sender's index among the channel's senders.
    pub sender: u32,
}

impl Route {
    /// Checks that the route's tags and rank exist.
    pub fn check(&self) -> Result<(), TransportError> {
        let invalid = |parameter, reason: String| {
            Err(TransportError::InvalidParameter {
                transport: "mpi",
                parameter,
                reason,
            })
        };
        if self.channel >= MAX_CHANNELS {
            return invalid(
                "channel",
                format!("must be below {MAX_CHANNELS}, got {}", self.channel),
            );
        }
        if self.sender >= MAX_SENDERS {
            return invalid(
                "senders",
                format!(
                    "a channel takes at most {MAX_SENDERS}, got sender {}",
                    self.sender
                ),
            );
        }
        #[cfg(feature = "mpi")]
        {
            let ranks = request::world_size();
            if !(0..ranks).contains(&self.receiver) {
                return invalid(
                    "receiver rank",
                    format!(
                        "the job has ranks 0..{ranks}, the receiver is rank {}",
                        self.receiver
                    ),
                );
            }
        }
        Ok(())
    }

    /// The tag of the channel's batches.
    pub fn data_tag(&self) -> i32 {
        (self.channel << CHANNEL_SHIFT) as i32
    }

    /// The tag of this sender's credits.
    pub fn credit_tag(&self) -> i32 {
        (self.channel << CHANNEL_SHIFT | (1 + self.sender)) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_of_channels_and_senders_never_meet() {
        let route = |channel, sender| Route {
            receiver: 0,
            channel,
            sender,
        };
        let mut tags = std::collections::BTreeSet::new();
        for channel in [0, 1, MAX_CHANNELS - 1] {
            assert!(tags.insert(route(channel, 0).data_tag()));
            for sender in [0, 1, MAX_SENDERS - 1] {
                assert!(tags.insert(route(channel, sender).credit_tag()));
            }
        }
        assert!(tags.iter().all(|&t| (0..1 << 30).contains(&t)));
        assert!(route(MAX_CHANNELS, 0).check().is_err());
        assert!(route(0, MAX_SENDERS).check().is_err());
    }
}
