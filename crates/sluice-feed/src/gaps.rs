//! Counting missed messages from sequence numbers, one channel at a time, as the paper's
//! ingest metrics collector does (a rate with more than 0.01% missed is not sustained).
//!
//! A channel's messages are numbered 1, 2, 3, ... and a packet's header gives its first
//! message's number and its count, so a gap between the end of one packet and the start of the
//! next is that many messages lost (in the network, or in a socket buffer that overflowed). A
//! packet that starts before the end of what was seen is late (reordered, or a copy): it is
//! counted apart and adds nothing to what was received, and the caller should drop it.
//! Messages lost after the last packet seen show only against the sender's own count
//! ([`SequenceGaps::expect_through`]).

use crate::PacketHeader;

/// What [`SequenceGaps::observe`] made of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observed {
    /// The packet follows the one before it (or is the first).
    InOrder,
    /// This many messages are missing before it.
    Gap(u64),
    /// It starts before the end of what was seen: drop it.
    Late,
}

/// One channel's received, missed and late counts (kept in a checkpoint of its handler).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SequenceGaps {
    /// The seq expected next; `None` until the first packet (with [`SequenceGaps::default`]).
    next_seq: Option<u64>,
    received: u64,
    missed: u64,
    late: u64,
}

impl SequenceGaps {
    /// Counts from message `seq` on: messages before the first packet seen, from `seq`, are
    /// missed (1 for a feed whose receiver starts before its sender).
    /// [`SequenceGaps::default`] instead starts from the first packet seen.
    pub fn from_seq(seq: u64) -> Self {
        Self {
            next_seq: Some(seq),
            ..Self::default()
        }
    }

    /// Takes the header of a packet of the channel (decoded: its count is its messages').
    pub fn observe(&mut self, header: &PacketHeader) -> Observed {
        let expected = self.next_seq.unwrap_or(header.first_seq);
        if header.first_seq < expected {
            self.late += 1;
            return Observed::Late;
        }
        let gap = header.first_seq - expected;
        self.missed += gap;
        self.received += u64::from(header.count);
        self.next_seq = Some(header.first_seq.saturating_add(header.count.into()));
        if gap == 0 {
            Observed::InOrder
        } else {
            Observed::Gap(gap)
        }
    }

    /// Counts as missed the messages up to `last_seq` (the sender's last) not seen yet.
    pub fn expect_through(&mut self, last_seq: u64) {
        let next = self.next_seq.unwrap_or(1);
        if last_seq >= next {
            self.missed += last_seq - next + 1;
            self.next_seq = Some(last_seq + 1);
        }
    }

    /// Messages received in packets that were not late.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Messages missing.
    pub fn missed(&self) -> u64 {
        self.missed
    }

    /// Late packets (dropped).
    pub fn late_packets(&self) -> u64 {
        self.late
    }

    /// Missed over missed plus received (0 when nothing was expected).
    pub fn missed_fraction(&self) -> f64 {
        let expected = self.missed + self.received;
        if expected == 0 {
            0.0
        } else {
            self.missed as f64 / expected as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(first_seq: u64, count: u16) -> PacketHeader {
        PacketHeader {
            first_seq,
            count,
            ..PacketHeader::default()
        }
    }

    #[test]
    fn gaps_are_missed_and_packets_from_the_past_are_late() {
        let mut gaps = SequenceGaps::from_seq(1);
        assert_eq!(gaps.observe(&packet(1, 4)), Observed::InOrder);
        assert_eq!(gaps.observe(&packet(5, 2)), Observed::InOrder);
        assert_eq!(gaps.observe(&packet(10, 3)), Observed::Gap(3));
        assert_eq!(gaps.observe(&packet(7, 3)), Observed::Late);
        assert_eq!(gaps.observe(&packet(13, 1)), Observed::InOrder);
        gaps.expect_through(20);
        assert_eq!(
            (gaps.received(), gaps.missed(), gaps.late_packets()),
            (10, 3 + 7, 1)
        );
        assert!((gaps.missed_fraction() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn by_default_counting_starts_at_the_first_packet_seen() {
        let mut gaps = SequenceGaps::default();
        assert_eq!(gaps.missed_fraction(), 0.0);
        assert_eq!(gaps.observe(&packet(100, 5)), Observed::InOrder);
        assert_eq!(gaps.missed(), 0);
        let mut from_one = SequenceGaps::from_seq(1);
        assert_eq!(from_one.observe(&packet(100, 5)), Observed::Gap(99));
    }
}
