//! The Vega ring's bytes: every offset as a named constant, the header as a `#[repr(C)]` struct
//! of atomics whose field offsets are checked against those constants at compile time, and
//! [`VegaLayout`], the two sizes a ring is configured with and the byte count they need.
//!
//! The diagram is in the parent module's doc ([`crate::vega`]); this file is its source of
//! truth.

use sluice_sync::atomic::AtomicU64;
use sluice_sync::Doorbell;

use crate::memory::CACHE_LINE;

use super::error::VegaLayoutError;

/// The first word of an initialised ring: `"SLCVEGA1"` read as a little-endian `u64`.
pub const VEGA_MAGIC: u64 = u64::from_le_bytes(*b"SLCVEGA1");
/// The layout version written at offset [`VERSION_OFFSET`]; bumped on any layout change.
pub const VEGA_VERSION: u64 = 3;

/// Start of the layout line (written once by `VegaRing::create`, read-only afterwards).
pub const LAYOUT_LINE: usize = 0;
/// `magic: u64`, [`VEGA_MAGIC`] once the ring is initialised, 0 before.
pub const MAGIC_OFFSET: usize = LAYOUT_LINE;
/// `version: u64`, [`VEGA_VERSION`].
pub const VERSION_OFFSET: usize = LAYOUT_LINE + 8;
/// `slot_bytes: u64`, the largest tuple a slot holds.
pub const SLOT_BYTES_OFFSET: usize = LAYOUT_LINE + 16;
/// `slots: u64`, the number of slots.
pub const SLOT_COUNT_OFFSET: usize = LAYOUT_LINE + 24;

/// Start of the producer's line: written only by the producer.
pub const PRODUCER_LINE: usize = CACHE_LINE;
/// `head: u64`, the published position: slots of positions `tail..head` hold tuples.
pub const HEAD_OFFSET: usize = PRODUCER_LINE;

/// Start of the consumer's line: written only by the consumer.
pub const CONSUMER_LINE: usize = 2 * CACHE_LINE;
/// `tail: u64`, the released position: slots of positions before it are free.
pub const TAIL_OFFSET: usize = CONSUMER_LINE;

/// Start of the flags line: written rarely (attach, close, poison).
pub const FLAGS_LINE: usize = 3 * CACHE_LINE;
/// `producer_state: u64`, one of [`ROLE_VACANT`], [`ROLE_ATTACHED`], [`ROLE_GONE`].
pub const PRODUCER_STATE_OFFSET: usize = FLAGS_LINE;
/// `consumer_state: u64`, one of [`ROLE_VACANT`], [`ROLE_ATTACHED`], [`ROLE_GONE`].
pub const CONSUMER_STATE_OFFSET: usize = FLAGS_LINE + 8;
/// `poison: u64`, 0 while the ring is healthy, else a [`super::PoisonReason`] code.
pub const POISON_OFFSET: usize = FLAGS_LINE + 16;
/// `producer_pid: u64`, the producer's process id once attached (for a liveness check).
pub const PRODUCER_PID_OFFSET: usize = FLAGS_LINE + 24;
/// `consumer_pid: u64`, the consumer's process id once attached.
pub const CONSUMER_PID_OFFSET: usize = FLAGS_LINE + 32;

/// Start of the consumer's doorbell line: the consumer parks here, the producer rings.
pub const CONSUMER_BELL_LINE: usize = 4 * CACHE_LINE;
/// `consumer_bell: u32`, a [`Doorbell`] word: the consumer's announcement and the epoch.
pub const CONSUMER_BELL_OFFSET: usize = CONSUMER_BELL_LINE;

/// Start of the producer's doorbell line: the producer parks here, the consumer rings.
pub const PRODUCER_BELL_LINE: usize = 5 * CACHE_LINE;
/// `producer_bell: u32`, a [`Doorbell`] word.
pub const PRODUCER_BELL_OFFSET: usize = PRODUCER_BELL_LINE;

/// Bytes before the first slot: six cache lines.
pub const HEADER_BYTES: usize = 6 * CACHE_LINE;
/// Offset of slot 0; slot `i` starts at `SLOTS_OFFSET + i * slot_stride`.
pub const SLOTS_OFFSET: usize = HEADER_BYTES;

/// Within a slot: `mark: u64`, the paper's begin marker and size in one word. Its low 32 bits
/// are the tuple's size in bytes; its high 32 bits are the slot's *tag*, which says whether the
/// slot holds position `p`: `published_mark` of `p` once the tuple at `p` is published,
/// anything else before (see `staged_mark`).
pub const SLOT_MARK_OFFSET: usize = 0;
/// Within a slot: the first payload byte. Payloads are [`SLOT_ALIGN`]-aligned.
pub const SLOT_PAYLOAD_OFFSET: usize = 8;
/// Slots start on multiples of this, so `len` is an aligned `u64` and payloads are 8-aligned.
pub const SLOT_ALIGN: usize = 8;

/// The low bits of a slot mark: the tuple's size.
const MARK_LEN_BITS: u64 = u32::MAX as u64;

/// The tag of position `p`: the low 32 bits of `p + 1`. Slot `p mod slots` held position
/// `p - slots` before (tag `p + 1 - slots`, never equal since `0 < slots < 2^32`) or nothing
/// (a zero word, and `p + 1` has non-zero low bits while `p < slots`).
#[inline(always)]
const fn tag(position: u64) -> u64 {
    position.wrapping_add(1) << 32
}

/// What the tag grows by from one position to the next.
pub(crate) const TAG_STEP: u64 = 1 << 32;

/// The mark of a published tuple of `len` bytes at `position`.
#[inline(always)]
pub(crate) const fn published_mark(position: u64, len: usize) -> u64 {
    tag(position) | (len as u64 & MARK_LEN_BITS)
}

/// The mark of a tuple of `len` bytes written at `position` but not yet published: its tag
/// inverted, which no published position's tag of this slot equals.
#[inline(always)]
pub(crate) const fn staged_mark(position: u64, len: usize) -> u64 {
    !tag(position) & !MARK_LEN_BITS | (len as u64 & MARK_LEN_BITS)
}

/// Whether `mark` says the slot holds the published tuple of `position`.
#[inline(always)]
pub(crate) const fn is_published(mark: u64, position: u64) -> bool {
    mark & !MARK_LEN_BITS == tag(position)
}

/// The size a mark gives (untrusted: checked against `slot_bytes` by the reader).
#[inline(always)]
pub(crate) const fn mark_len(mark: u64) -> u64 {
    mark & MARK_LEN_BITS
}

/// A role word before anyone took the role.
pub const ROLE_VACANT: u64 = 0;
/// A role word while its holder is live.
pub const ROLE_ATTACHED: u64 = 1;
/// A role word after its holder dropped its end; never goes back.
pub const ROLE_GONE: u64 = 2;

/// The layout line.
#[repr(C, align(64))]
pub(crate) struct LayoutLine {
    pub(crate) magic: AtomicU64,
    pub(crate) version: AtomicU64,
    pub(crate) slot_bytes: AtomicU64,
    pub(crate) slots: AtomicU64,
}

/// The producer's line.
#[repr(C, align(64))]
pub(crate) struct ProducerLine {
    pub(crate) head: AtomicU64,
}

/// The consumer's line.
#[repr(C, align(64))]
pub(crate) struct ConsumerLine {
    pub(crate) tail: AtomicU64,
}

/// The flags line.
#[repr(C, align(64))]
pub(crate) struct FlagsLine {
    pub(crate) producer_state: AtomicU64,
    pub(crate) consumer_state: AtomicU64,
    pub(crate) poison: AtomicU64,
    pub(crate) producer_pid: AtomicU64,
    pub(crate) consumer_pid: AtomicU64,
}

/// A doorbell on a line of its own.
#[repr(C, align(64))]
pub(crate) struct BellLine {
    pub(crate) bell: Doorbell,
}

/// The six header lines at offset 0 of the ring's memory.
///
/// In normal builds this is a view of the memory itself (`std`'s atomics have the size and
/// alignment of `u64`, and every bit pattern is a valid value). Under `cfg(loom)` it is a
/// separate heap object of `loom`'s atomics, which cannot be cast from raw bytes.
#[repr(C)]
pub(crate) struct VegaHeader {
    pub(crate) layout: LayoutLine,
    pub(crate) producer: ProducerLine,
    pub(crate) consumer: ConsumerLine,
    pub(crate) flags: FlagsLine,
    pub(crate) consumer_bell: BellLine,
    pub(crate) producer_bell: BellLine,
}

#[cfg(loom)]
impl VegaHeader {
    /// An all-zero header, as fresh memory would hold.
    pub(crate) fn zeroed() -> Self {
        let z = || AtomicU64::new(0);
        Self {
            layout: LayoutLine {
                magic: z(),
                version: z(),
                slot_bytes: z(),
                slots: z(),
            },
            producer: ProducerLine { head: z() },
            consumer: ConsumerLine { tail: z() },
            flags: FlagsLine {
                producer_state: z(),
                consumer_state: z(),
                poison: z(),
                producer_pid: z(),
                consumer_pid: z(),
            },
            consumer_bell: BellLine {
                bell: Doorbell::new(),
            },
            producer_bell: BellLine {
                bell: Doorbell::new(),
            },
        }
    }
}

// The struct above is the diagram: check every field lands on its named offset.
#[cfg(not(loom))]
const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<AtomicU64>() == 8 && align_of::<AtomicU64>() == 8);
    assert!(size_of::<VegaHeader>() == HEADER_BYTES);
    assert!(align_of::<VegaHeader>() == CACHE_LINE);
    assert!(offset_of!(VegaHeader, layout) + offset_of!(LayoutLine, magic) == MAGIC_OFFSET);
    assert!(offset_of!(VegaHeader, layout) + offset_of!(LayoutLine, version) == VERSION_OFFSET);
    assert!(
        offset_of!(VegaHeader, layout) + offset_of!(LayoutLine, slot_bytes) == SLOT_BYTES_OFFSET
    );
    assert!(offset_of!(VegaHeader, layout) + offset_of!(LayoutLine, slots) == SLOT_COUNT_OFFSET);
    assert!(offset_of!(VegaHeader, producer) + offset_of!(ProducerLine, head) == HEAD_OFFSET);
    assert!(offset_of!(VegaHeader, consumer) + offset_of!(ConsumerLine, tail) == TAIL_OFFSET);
    assert!(
        offset_of!(VegaHeader, flags) + offset_of!(FlagsLine, producer_state)
            == PRODUCER_STATE_OFFSET
    );
    assert!(
        offset_of!(VegaHeader, flags) + offset_of!(FlagsLine, consumer_state)
            == CONSUMER_STATE_OFFSET
    );
    assert!(offset_of!(VegaHeader, flags) + offset_of!(FlagsLine, poison) == POISON_OFFSET);
    assert!(
        offset_of!(VegaHeader, flags) + offset_of!(FlagsLine, producer_pid) == PRODUCER_PID_OFFSET
    );
    assert!(
        offset_of!(VegaHeader, flags) + offset_of!(FlagsLine, consumer_pid) == CONSUMER_PID_OFFSET
    );
    assert!(
        offset_of!(VegaHeader, consumer_bell) + offset_of!(BellLine, bell) == CONSUMER_BELL_OFFSET
    );
    assert!(
        offset_of!(VegaHeader, producer_bell) + offset_of!(BellLine, bell) == PRODUCER_BELL_OFFSET
    );
    assert!(size_of::<Doorbell>() == 4 && align_of::<Doorbell>() == 4);
};

// Lines are whole cache lines and the slot area starts on one.
const _: () =
    assert!(PRODUCER_LINE.is_multiple_of(CACHE_LINE) && CONSUMER_LINE.is_multiple_of(CACHE_LINE));
const _: () =
    assert!(FLAGS_LINE.is_multiple_of(CACHE_LINE) && SLOTS_OFFSET.is_multiple_of(CACHE_LINE));
const _: () = assert!(
    CONSUMER_BELL_LINE.is_multiple_of(CACHE_LINE) && PRODUCER_BELL_LINE.is_multiple_of(CACHE_LINE)
);
const _: () = assert!(CONSUMER_PID_OFFSET + 8 <= FLAGS_LINE + CACHE_LINE);
const _: () = assert!(SLOT_MARK_OFFSET + 8 <= SLOT_PAYLOAD_OFFSET);
const _: () = assert!(
    SLOT_PAYLOAD_OFFSET.is_multiple_of(SLOT_ALIGN) && SLOTS_OFFSET.is_multiple_of(SLOT_ALIGN)
);

/// The two sizes a Vega ring is configured with, validated: `slots` slots of `slot_bytes`
/// payload bytes each, allocated up front.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VegaLayout {
    slot_bytes: usize,
    slots: usize,
}

impl VegaLayout {
    /// The largest `slot_bytes` accepted (4 GiB - 1): a slot is a unit of transfer, not a
    /// segment.
    pub const MAX_SLOT_BYTES: usize = u32::MAX as usize;

    /// A layout of `slots` slots holding tuples of up to `slot_bytes` bytes. Both must be at
    /// least 1, and the whole ring must fit in `isize::MAX` bytes.
    pub const fn new(slot_bytes: usize, slots: usize) -> Result<Self, VegaLayoutError> {
        if slot_bytes == 0 {
            return Err(VegaLayoutError::ZeroSlotBytes);
        }
        if slots == 0 {
            return Err(VegaLayoutError::ZeroSlots);
        }
        if slot_bytes > Self::MAX_SLOT_BYTES {
            return Err(VegaLayoutError::SlotTooLarge {
                slot_bytes,
                max: Self::MAX_SLOT_BYTES,
            });
        }
        if slots > Self::MAX_SLOTS {
            return Err(VegaLayoutError::TooManySlots {
                slots,
                max: Self::MAX_SLOTS,
            });
        }
        let stride = stride_of(slot_bytes);
        let overflow = Err(VegaLayoutError::Overflow { slot_bytes, slots });
        let Some(data) = stride.checked_mul(slots) else {
            return overflow;
        };
        let Some(total) = data.checked_add(SLOTS_OFFSET) else {
            return overflow;
        };
        if total > isize::MAX as usize {
            return overflow;
        }
        Ok(Self { slot_bytes, slots })
    }

    /// The most slots accepted (2^32 - 1): a slot's tag tells two laps apart only while
    /// `slots < 2^32`.
    pub const MAX_SLOTS: usize = u32::MAX as usize;

    /// The largest tuple a slot holds, in bytes.
    pub const fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// The number of slots.
    pub const fn slots(&self) -> usize {
        self.slots
    }

    /// The distance between two slots: the mark word plus `slot_bytes`, rounded up to
    /// [`SLOT_ALIGN`].
    pub const fn slot_stride(&self) -> usize {
        stride_of(self.slot_bytes)
    }

    /// The bytes a memory block needs to hold this ring (header and slots); a shared segment
    /// of at least this size can hold it.
    pub const fn bytes_needed(&self) -> usize {
        // Cannot overflow: checked in `new`.
        SLOTS_OFFSET + self.slots * self.slot_stride()
    }
}

/// `SLOT_PAYLOAD_OFFSET + slot_bytes` rounded up to `SLOT_ALIGN`; no overflow for
/// `slot_bytes <= MAX_SLOT_BYTES`.
const fn stride_of(slot_bytes: usize) -> usize {
    (SLOT_PAYLOAD_OFFSET + slot_bytes).div_ceil(SLOT_ALIGN) * SLOT_ALIGN
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn stride_and_size_follow_the_diagram() {
        let l = VegaLayout::new(32, 4).unwrap();
        assert_eq!(l.slot_stride(), 40);
        assert_eq!(l.bytes_needed(), 384 + 4 * 40);
        let l = VegaLayout::new(61, 1).unwrap();
        assert_eq!(l.slot_stride(), 72);
        assert_eq!(l.bytes_needed(), 384 + 72);
    }

    proptest::proptest! {
        #[test]
        fn a_mark_says_published_only_for_its_own_position(
            position in 0u64..u64::MAX / 2,
            slots in 1u64..=VegaLayout::MAX_SLOTS as u64,
            len in 0usize..=VegaLayout::MAX_SLOT_BYTES,
        ) {
            let published = published_mark(position, len);
            proptest::prop_assert!(is_published(published, position));
            proptest::prop_assert_eq!(mark_len(published), len as u64);
            let staged = staged_mark(position, len);
            proptest::prop_assert!(!is_published(staged, position));
            proptest::prop_assert_eq!(mark_len(staged), len as u64);
            // What the slot held before: the previous lap's tuple, or nothing at all.
            let before = match position.checked_sub(slots) {
                Some(previous) => published_mark(previous, len),
                None => 0,
            };
            proptest::prop_assert!(!is_published(before, position));
            // The next lap's consumer does not take this lap's tuple.
            proptest::prop_assert!(!is_published(published, position + slots));
        }
    }

    #[test]
    fn degenerate_and_oversized_layouts_are_refused() {
        assert_eq!(VegaLayout::new(0, 4), Err(VegaLayoutError::ZeroSlotBytes));
        assert_eq!(VegaLayout::new(8, 0), Err(VegaLayoutError::ZeroSlots));
        assert!(matches!(
            VegaLayout::new(usize::MAX, 1),
            Err(VegaLayoutError::SlotTooLarge { .. })
        ));
        assert!(matches!(
            VegaLayout::new(1 << 20, VegaLayout::MAX_SLOTS + 1),
            Err(VegaLayoutError::TooManySlots { .. })
        ));
        assert!(matches!(
            VegaLayout::new(VegaLayout::MAX_SLOT_BYTES, VegaLayout::MAX_SLOTS),
            Err(VegaLayoutError::Overflow { .. })
        ));
    }
}
