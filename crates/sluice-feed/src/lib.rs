//! A synthetic options market-data feed in the shape of OPRA's, for the OMDP application (the
//! Vega paper, sections V.A.2 and V.C.2) and anything else that wants a realistic, skewed,
//! packetised feed.
//!
//! - [`fast`]: the FAST-style codec: packets of a fixed header then several messages, each
//!   with a presence map, a template id and stop-bit integers under copy, increment and delta
//!   operators, the dictionary reset at every packet so a packet decodes on its own.
//! - [`config`]: the shape of the feed ([`FeedConfig`]): channels, underlyings, series,
//!   popularity, packet sizes, seed; which channel carries an underlying.
//! - [`generator`]: [`Feed`], a deterministic generator of quotes and trades with Zipf
//!   popularity over underlyings and prices moving by small steps per series.
//! - [`gaps`]: [`SequenceGaps`], missed messages counted from a channel's sequence numbers.
//! - [`router`]: [`Router`], which decision engine each underlying goes to, balanced from the
//!   popularity weights.
//! - [`record`]: [`Recorder`] and [`Replay`], a feed to and from a file.
//! - [`mod@send`]: [`send()`], the paced UDP sender (multicast on loopback, or unicast), in `sendmmsg`
//!   batches.
//! - `fuzzing` (under test and `--cfg fuzzing`): the decoder's fuzzing entry point.
//!
//! Rates are multiples of [`OPRA_FEB_2008_PACKETS_PER_SEC`], the February 2008 OPRA rate the
//! paper measures against (its 30x is 720,000 packets/s in aggregate).
//!
//! A feed handler's loop, in short:
//!
//! ```
//! use sluice_feed::{decode_packet, Feed, FeedConfig, Router, SequenceGaps};
//!
//! let config = FeedConfig::default();
//! let mut feed = Feed::new(&config)?;
//! let router = Router::new(&config, 4);
//! let mut gaps = SequenceGaps::from_seq(1);
//! let (mut packet, mut messages) = (Vec::new(), Vec::new());
//! feed.next_packet(0, sluice_types::monotonic_ns(), &mut packet); // what a sender sends
//! let header = decode_packet(&packet, &mut messages)?; // what a handler receives
//! gaps.observe(&header);
//! for message in &messages {
//!     assert_eq!(config.channel_of(message.underlying), 0);
//!     let _engine = router.engine_of(message.underlying); // where it goes
//! }
//! assert_eq!(gaps.missed(), 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod config;
pub mod fast;
#[cfg(any(test, fuzzing))]
pub mod fuzzing;
pub mod gaps;
pub mod generator;
pub mod record;
pub mod router;
pub mod send;
pub mod shm;

use std::path::PathBuf;

pub use config::FeedConfig;
pub use fast::{
    decode_packet, encode_packet, stamp_sent_ns, DecodeError, DecodeProblem, Message, MessageKind,
    PacketHeader,
};
pub use gaps::{Observed, SequenceGaps};
pub use generator::Feed;
pub use record::{record_generated, Recorder, Replay, ReplayedPacket};
pub use router::Router;
pub use send::{send, Destinations, Pacing, PacketSource, SendOptions, SendReport};

/// The reference rate: 1x is the February 2008 OPRA rate, 24,000 packets/s in aggregate over
/// all channels (the paper's 30x is 720,000 packets/s).
pub const OPRA_FEB_2008_PACKETS_PER_SEC: u64 = 24_000;

/// What went wrong in the feed: a setting, a file, a socket.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    /// A setting out of range; the text names it and says what it must be.
    #[error("invalid feed setting: {0}")]
    Config(String),
    /// A file or socket operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done (names the file or address).
        context: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// A file that is not a recorded feed, or a damaged one.
    #[error("{path}: {reason}")]
    Recording {
        /// The file.
        path: PathBuf,
        /// What is wrong with it, and where.
        reason: String,
    },
}

impl FeedError {
    /// An I/O error with what was being done.
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}
