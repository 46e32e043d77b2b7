//! The 64-bit status word at the start of every record (and of every marker) in the OSR ring.
//!
//! One word holds everything the consumer needs to know about a record, so a record's header
//! is written by *one* atomic operation (the claim), finished by *one* more (the commit), and
//! read by one Acquire load:
//!
//! ```text
//!  63                              32 31                     8 7   5  4  3    0
//! +----------------------------------+------------------------+-----+---+------+
//! |          target task (u32)       |  extent in words (24)  |tail |bat|status|
//! +----------------------------------+------------------------+-----+---+------+
//! ```
//! - `status` ([`Status`]): what the record is (4 bits).
//! - `bat`: the payload is a batch of tuples, each behind an 8-byte inner header.
//! - `tail`: how many bytes of the last payload word are padding (0..=7), so the payload length
//!   is `extent - 8 - tail`.
//! - `extent in words`: the whole record, status word included, in 8-byte words.
//! - `target task`: the paper's `target_task`, carried for the consumer's dispatch.
//!
//! Markers use the same word with only some fields: an all-zero word is [`Status::Empty`]
//! (free or not yet claimed), [`StatusWord::SKIP_MARK`] is exactly `5`, a flush/pad record and
//! an acknowledgement carry only their extent.

/// Bits of the status field.
const STATUS_MASK: u64 = 0xF;
/// The batch flag.
const BATCH_BIT: u64 = 1 << 4;
/// Where the tail-padding count starts.
const TAIL_SHIFT: u32 = 5;
/// The tail-padding count's width (3 bits).
const TAIL_MASK: u64 = 0x7;
/// Where the extent (in words) starts.
const WORDS_SHIFT: u32 = 8;
/// The largest extent a status word can describe, in words (24 bits).
pub(crate) const MAX_WORDS: u64 = 0xFF_FFFF;
/// Where the target task starts.
const TARGET_SHIFT: u32 = 32;

/// The bytes a record's status word takes.
pub(crate) const HEADER_BYTES: u64 = 8;

/// What a word at a record boundary says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// Zero: nothing written here (free space, or reserved and not yet claimed).
    Empty = 0,
    /// Claimed by a producer that is still writing the payload (the paper's `isWriting`).
    Writing = 1,
    /// Complete; the consumer may read it (`isReady`).
    Ready = 2,
    /// Delivered early by the right side of the consumer's window (`hasRead`).
    Read = 3,
    /// Padding the consumer jumps over: the end of a lap, space before a hole, or an aborted
    /// record (`flush`).
    Flush = 4,
    /// The consumer gave up on this record or span after the window (written by the consumer).
    Skipped = 5,
    /// The producer of a skipped record acknowledged it and will never touch it again.
    Acked = 6,
}

/// One decoded (or to-be-stored) status word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StatusWord(pub(crate) u64);

impl StatusWord {
    /// The word of free, unclaimed space.
    pub(crate) const EMPTY: Self = Self(0);
    /// The consumer's mark on a skipped record or on every word of a skipped span.
    pub(crate) const SKIP_MARK: Self = Self(Status::Skipped as u64);

    /// A claimed record (`Writing`) with `payload_len` bytes for `target`.
    ///
    /// The caller has checked `record_extent(payload_len)` against the ring's maximum, which
    /// keeps the extent within 24 bits.
    pub(crate) fn writing(payload_len: usize, target: u32, batch: bool) -> Self {
        let extent = record_extent(payload_len);
        let tail = extent - HEADER_BYTES - payload_len as u64;
        debug_assert!(extent / 8 <= MAX_WORDS && tail <= TAIL_MASK);
        Self(
            Status::Writing as u64
                | if batch { BATCH_BIT } else { 0 }
                | (tail << TAIL_SHIFT)
                | ((extent / 8) << WORDS_SHIFT)
                | (u64::from(target) << TARGET_SHIFT),
        )
    }

    /// A pad of `words` words.
    pub(crate) fn flush(words: u64) -> Self {
        debug_assert!((1..=MAX_WORDS).contains(&words));
        Self(Status::Flush as u64 | (words << WORDS_SHIFT))
    }

    /// A producer's acknowledgement of its skipped record of `words` words.
    pub(crate) fn acked(words: u64) -> Self {
        debug_assert!((1..=MAX_WORDS).contains(&words));
        Self(Status::Acked as u64 | (words << WORDS_SHIFT))
    }

    /// The status field, or `None` for a code no writer uses (corruption).
    pub(crate) fn status(self) -> Option<Status> {
        Some(match self.0 & STATUS_MASK {
            0 => Status::Empty,
            1 => Status::Writing,
            2 => Status::Ready,
            3 => Status::Read,
            4 => Status::Flush,
            5 => Status::Skipped,
            6 => Status::Acked,
            _ => return None,
        })
    }

    /// The same word with another status.
    pub(crate) fn with_status(self, status: Status) -> Self {
        Self((self.0 & !STATUS_MASK) | status as u64)
    }

    /// The extent in words.
    pub(crate) fn words(self) -> u64 {
        (self.0 >> WORDS_SHIFT) & MAX_WORDS
    }

    /// The extent in bytes.
    pub(crate) fn extent(self) -> u64 {
        self.words() * 8
    }

    /// The payload length, or `None` when the padding count does not fit the extent.
    pub(crate) fn payload_len(self) -> Option<usize> {
        let tail = (self.0 >> TAIL_SHIFT) & TAIL_MASK;
        let len = self.extent().checked_sub(HEADER_BYTES + tail)?;
        usize::try_from(len).ok()
    }

    /// The target task.
    pub(crate) fn target(self) -> u32 {
        (self.0 >> TARGET_SHIFT) as u32
    }

    /// Whether the payload is a batch.
    pub(crate) fn is_batch(self) -> bool {
        self.0 & BATCH_BIT != 0
    }
}

/// The bytes a record with `payload_len` payload bytes takes: its status word plus the
/// payload rounded up to whole words, so every record starts 8-byte aligned.
pub(crate) fn record_extent(payload_len: usize) -> u64 {
    HEADER_BYTES + (payload_len as u64).div_ceil(8) * 8
}

/// The bytes one tuple takes inside a batch record: an 8-byte inner header (the tuple's length
/// as a little-endian `u32`, then four zero bytes) and the tuple rounded up to whole words.
pub(crate) fn batch_item_extent(tuple_len: usize) -> u64 {
    8 + (tuple_len as u64).div_ceil(8) * 8
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_record_word_round_trips_every_field() {
        let w = StatusWord::writing(13, 0xDEAD_BEEF, true);
        assert_eq!(w.status(), Some(Status::Writing));
        assert_eq!(w.extent(), 24);
        assert_eq!(w.payload_len(), Some(13));
        assert_eq!(w.target(), 0xDEAD_BEEF);
        assert!(w.is_batch());
        let r = w.with_status(Status::Ready);
        assert_eq!(r.status(), Some(Status::Ready));
        assert_eq!(r.payload_len(), Some(13));
        assert_eq!(StatusWord::writing(0, 1, false).extent(), 8);
        assert_eq!(StatusWord::writing(8, 1, false).payload_len(), Some(8));
    }

    #[test]
    fn markers_are_distinct_from_records_and_from_empty() {
        assert_eq!(StatusWord::EMPTY.status(), Some(Status::Empty));
        assert_eq!(StatusWord::SKIP_MARK.status(), Some(Status::Skipped));
        assert_eq!(StatusWord::flush(3).extent(), 24);
        assert_eq!(StatusWord::acked(2).status(), Some(Status::Acked));
        assert_eq!(StatusWord(0xF).status(), None);
        // A flush word's padding count is zero, so its "payload" is its extent minus the header.
        assert_eq!(StatusWord::flush(1).payload_len(), Some(0));
    }
}
