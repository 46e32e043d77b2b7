//! The feed over shared memory, for rates a UDP socket cannot carry on a small host: each
//! channel is a Vega ring (`sluice_transport::shm_vega`) in a segment named after the feed and
//! the channel, one packet a message ([`BytesTuple`]).
//!
//! The receiving side (a feed handler) creates its channel's segment, mode 0600, first; the
//! sender opens it by name, so a sender started before its handler fails with the segment's
//! path. Like a UDP feed, the sender never waits for a handler that is behind: a packet that
//! finds the ring full is dropped, and the handler counts the gap in the channel's sequence
//! numbers as missed messages. The handler's segment is removed when it stops; one left by a
//! handler that crashed is removed by the next handler of the same feed and channel.
//!
//! On loopback UDP the kernel spends about 3.7 us of the sender's core per packet (measured
//! at 5x here, delivery included), so one sender thread tops out near 10x the February 2008
//! OPRA rate on this project's two cores; a ring costs a copy and a cache-line hand-off.

use sluice_shm::SegmentName;
use sluice_transport::shm_vega::{self, ShmVegaReceiver, ShmVegaSender};
use sluice_types::BytesTuple;

use crate::fast::MTU_PAYLOAD_BYTES;
use crate::FeedError;

/// The largest encoded packet a ring slot holds: an MTU's payload and its length prefix.
pub const SHM_SLOT_BYTES: usize = MTU_PAYLOAD_BYTES + 16;
/// Packets a channel's ring holds: about 27 ms at 25x the OPRA rate over two channels (12 MiB
/// a channel), so that a handler descheduled for a few scheduler slices loses nothing.
pub const SHM_SLOTS: usize = 8192;

/// The segment of `feed`'s channel `channel`.
pub fn segment_name(feed: &str, channel: usize) -> Result<SegmentName, FeedError> {
    SegmentName::new(&format!("feed-{feed}"), &format!("channel{channel}"))
        .map_err(|e| FeedError::Config(format!("shared-memory feed '{feed}': {e}")))
}

/// Creates channel `channel`'s ring of `feed` and returns its receiving end, after removing
/// the segment a crashed handler of the same feed left.
pub fn create_receiver(
    feed: &str,
    channel: usize,
) -> Result<ShmVegaReceiver<BytesTuple>, FeedError> {
    let name = segment_name(feed, channel)?;
    let _ = sluice_shm::remove_stale(name.dir(), Some(&format!("feed-{feed}")));
    shm_vega::create_receiver(&name, SHM_SLOT_BYTES, SHM_SLOTS).map_err(|e| {
        FeedError::Config(format!(
            "create the ring of channel {channel} at {}: {e}",
            name.path().display()
        ))
    })
}

/// Opens channel `channel`'s ring of `feed`, made by its handler, and returns its sending end.
pub(crate) fn open_sender(
    feed: &str,
    channel: usize,
) -> Result<ShmVegaSender<BytesTuple>, FeedError> {
    let name = segment_name(feed, channel)?;
    shm_vega::open_sender(&name, SHM_SLOT_BYTES, SHM_SLOTS).map_err(|e| {
        FeedError::Config(format!(
            "open the ring of channel {channel} at {} (is its feed handler running?): {e}",
            name.path().display()
        ))
    })
}
