//! Punctuations: the control items that travel along an edge in order with its tuples, and
//! the one wire encoding every transport gives them.
//!
//! A punctuation is a window marker (IBM Streams' punctuation), an event-time watermark, a
//! latency marker (Flink's), a suspension marker (the end-of-stream that follows is a
//! suspension, not the end: the job is being redeployed) or a checkpoint barrier (everything
//! before it on its edge is in checkpoint `n`, nothing after it is). Watermarks, latency
//! markers and barriers carry a `u64`; watermarks and barriers also the plan id of the
//! instance that sent them (one receiver may be fed by several senders, and an instance's
//! event time is the least over all of them; an instance aligns the barriers of each of its
//! upstream instances). Whatever a transport's framing around it, a
//! punctuation crosses a process boundary as the same [`Punctuation::WIRE_BYTES`] bytes, all
//! integers little-endian:
//!
//! ```text
//!  0      1                                         9                  13
//!  +------+-----------------------------------------+------------------+
//!  | kind | value u64                               | from u32         |
//!  +------+-----------------------------------------+------------------+
//!  kind 1  window marker    value 0                                    from 0
//!  kind 2  watermark        event time, nanoseconds on the app's clock from: sender's id
//!  kind 3  latency marker   CLOCK_MONOTONIC ns when a source read it   from 0
//!  kind 4  suspension       value 0                                    from 0
//!  kind 5  barrier          checkpoint number                          from: sender's id
//! ```
//!
//! [`Punctuation::from_wire`] reads bytes from a peer that may be broken or hostile: it
//! refuses a wrong length, an unknown kind and a window marker with a value, and never
//! panics.

use thiserror::Error;

/// A control item travelling along an edge in order with the tuples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Punctuation {
    /// IBM Streams' window marker: the upstream closed a window.
    WindowMarker,
    /// Event time (nanoseconds, the application's clock): no tuple with a smaller timestamp
    /// follows from the instance `from` on this edge.
    Watermark {
        /// The event time.
        time: u64,
        /// The plan id of the instance that sent it.
        from: u32,
    },
    /// A latency marker: a source read `CLOCK_MONOTONIC` ([`crate::monotonic_ns`]) at this
    /// value.
    Latency(u64),
    /// The job is suspending ([`Punctuation::Suspend`] precedes the end-of-stream of a
    /// sender whose instance was suspended, so a receiver in another process knows that end
    /// is no end before its own launcher tells it).
    Suspend,
    /// A checkpoint barrier: the instance `from` took its part of checkpoint `n` after
    /// sending everything before this barrier on this edge and before anything after it.
    Checkpoint {
        /// The checkpoint's number (the first is 1).
        n: u64,
        /// The plan id of the instance that sent it.
        from: u32,
    },
}

/// Offset of the kind byte.
const KIND_AT: usize = 0;
/// Offset of the value.
const VALUE_AT: usize = 1;
/// Bytes of the value.
const VALUE_BYTES: usize = 8;
/// Offset of the sender's id.
const FROM_AT: usize = VALUE_AT + VALUE_BYTES;
/// Bytes of the sender's id.
const FROM_BYTES: usize = 4;

/// The kind byte of a window marker.
const KIND_WINDOW_MARKER: u8 = 1;
/// The kind byte of a watermark.
const KIND_WATERMARK: u8 = 2;
/// The kind byte of a latency marker.
const KIND_LATENCY: u8 = 3;
/// The kind byte of a suspension marker.
const KIND_SUSPEND: u8 = 4;
/// The kind byte of a checkpoint barrier.
const KIND_CHECKPOINT: u8 = 5;

const _: () = assert!(KIND_AT + 1 == VALUE_AT);
const _: () = assert!(Punctuation::WIRE_BYTES == 13);

/// Why bytes are not a punctuation's wire encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum PunctuationWireError {
    /// The encoding is always [`Punctuation::WIRE_BYTES`] long.
    #[error("a punctuation is {expected} bytes, got {actual}")]
    WrongLength {
        /// [`Punctuation::WIRE_BYTES`].
        expected: usize,
        /// The length of the bytes given.
        actual: usize,
    },
    /// The kind byte names no punctuation.
    #[error("no punctuation has kind {0}")]
    UnknownKind(u8),
    /// A window marker carries no value and only a watermark names its sender, so those
    /// bytes are zero.
    #[error("a punctuation of kind {kind} carries a stray value {value} or sender {from}")]
    StrayValue {
        /// The kind byte.
        kind: u8,
        /// The value bytes read.
        value: u64,
        /// The sender bytes read.
        from: u32,
    },
}

impl Punctuation {
    /// Bytes of the wire encoding: the kind, the value, the sender.
    pub const WIRE_BYTES: usize = FROM_AT + FROM_BYTES;

    /// The wire encoding (drawn in the module doc).
    pub fn to_wire(&self) -> [u8; Self::WIRE_BYTES] {
        let (kind, value, from) = match *self {
            Self::WindowMarker => (KIND_WINDOW_MARKER, 0, 0),
            Self::Watermark { time, from } => (KIND_WATERMARK, time, from),
            Self::Latency(time) => (KIND_LATENCY, time, 0),
            Self::Suspend => (KIND_SUSPEND, 0, 0),
            Self::Checkpoint { n, from } => (KIND_CHECKPOINT, n, from),
        };
        let mut wire = [0u8; Self::WIRE_BYTES];
        wire[KIND_AT] = kind;
        wire[VALUE_AT..FROM_AT].copy_from_slice(&value.to_le_bytes());
        wire[FROM_AT..].copy_from_slice(&from.to_le_bytes());
        wire
    }

    /// Reads a wire encoding, refusing anything [`Punctuation::to_wire`] never writes.
    pub fn from_wire(bytes: &[u8]) -> Result<Self, PunctuationWireError> {
        let wire: &[u8; Self::WIRE_BYTES] =
            bytes
                .try_into()
                .map_err(|_| PunctuationWireError::WrongLength {
                    expected: Self::WIRE_BYTES,
                    actual: bytes.len(),
                })?;
        let mut value = [0u8; VALUE_BYTES];
        value.copy_from_slice(&wire[VALUE_AT..FROM_AT]);
        let value = u64::from_le_bytes(value);
        let mut from = [0u8; FROM_BYTES];
        from.copy_from_slice(&wire[FROM_AT..]);
        let from = u32::from_le_bytes(from);
        let kind = wire[KIND_AT];
        match kind {
            KIND_WINDOW_MARKER if value == 0 && from == 0 => Ok(Self::WindowMarker),
            KIND_WATERMARK => Ok(Self::Watermark { time: value, from }),
            KIND_CHECKPOINT => Ok(Self::Checkpoint { n: value, from }),
            KIND_LATENCY if from == 0 => Ok(Self::Latency(value)),
            KIND_SUSPEND if value == 0 && from == 0 => Ok(Self::Suspend),
            KIND_WINDOW_MARKER | KIND_LATENCY | KIND_SUSPEND => {
                Err(PunctuationWireError::StrayValue { kind, value, from })
            }
            kind => Err(PunctuationWireError::UnknownKind(kind)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVERY_KIND: [Punctuation; 7] = [
        Punctuation::WindowMarker,
        Punctuation::Watermark { time: 0, from: 0 },
        Punctuation::Watermark {
            time: 0x0102_0304_0506_0708,
            from: 7,
        },
        Punctuation::Latency(u64::MAX),
        Punctuation::Latency(1),
        Punctuation::Suspend,
        Punctuation::Checkpoint { n: 3, from: 9 },
    ];

    #[test]
    fn every_kind_round_trips_with_its_value() {
        for p in EVERY_KIND {
            assert_eq!(Punctuation::from_wire(&p.to_wire()), Ok(p));
        }
    }

    #[test]
    fn the_layout_is_the_drawn_one() {
        let wire = Punctuation::Watermark {
            time: 0x0102_0304_0506_0708,
            from: 0x0a0b_0c0d,
        }
        .to_wire();
        assert_eq!(wire, [2, 8, 7, 6, 5, 4, 3, 2, 1, 0xd, 0xc, 0xb, 0xa]);
        assert_eq!(
            Punctuation::WindowMarker.to_wire(),
            [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(Punctuation::Latency(5).to_wire()[KIND_AT], 3);
    }

    #[test]
    fn wrong_lengths_unknown_kinds_and_stray_values_are_refused() {
        let wire = Punctuation::Latency(9).to_wire();
        for len in [0, 1, Punctuation::WIRE_BYTES - 1] {
            assert_eq!(
                Punctuation::from_wire(&wire[..len]),
                Err(PunctuationWireError::WrongLength {
                    expected: 13,
                    actual: len
                })
            );
        }
        let mut long = wire.to_vec();
        long.push(0);
        assert_eq!(
            Punctuation::from_wire(&long),
            Err(PunctuationWireError::WrongLength {
                expected: 13,
                actual: 14
            })
        );
        for kind in [0, 6, 255] {
            let mut bad = wire;
            bad[KIND_AT] = kind;
            assert_eq!(
                Punctuation::from_wire(&bad),
                Err(PunctuationWireError::UnknownKind(kind))
            );
        }
        let mut stray = Punctuation::WindowMarker.to_wire();
        stray[FROM_AT - 1] = 1;
        assert_eq!(
            Punctuation::from_wire(&stray),
            Err(PunctuationWireError::StrayValue {
                kind: 1,
                value: 1 << 56,
                from: 0
            })
        );
        let mut stray = Punctuation::Suspend.to_wire();
        stray[VALUE_AT] = 1;
        assert!(matches!(
            Punctuation::from_wire(&stray),
            Err(PunctuationWireError::StrayValue { kind: 4, .. })
        ));
        let mut stray = Punctuation::Latency(3).to_wire();
        stray[FROM_AT] = 2;
        assert_eq!(
            Punctuation::from_wire(&stray),
            Err(PunctuationWireError::StrayValue {
                kind: 3,
                value: 3,
                from: 2
            })
        );
    }

    #[test]
    fn every_byte_string_of_the_right_length_is_read_or_refused_without_a_panic() {
        for kind in 0..=u8::MAX {
            for value in [0u64, 1, u64::MAX] {
                let mut wire = [kind; Punctuation::WIRE_BYTES];
                wire[VALUE_AT..FROM_AT].copy_from_slice(&value.to_le_bytes());
                if let Ok(p) = Punctuation::from_wire(&wire) {
                    assert_eq!(p.to_wire(), wire, "only canonical encodings are read");
                }
            }
        }
    }
}
