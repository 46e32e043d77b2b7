//! Punctuations: the control items that travel along an edge in order with its tuples, and
//! the one wire encoding every transport gives them.
//!
//! A punctuation is a window marker (IBM Streams' punctuation), an event-time watermark or a
//! latency marker (Flink's); the last two carry a `u64`. Whatever a transport's framing
//! around it, a punctuation crosses a process boundary as the same [`Punctuation::WIRE_BYTES`]
//! bytes, all integers little-endian:
//!
//! ```text
//!  0      1                                         9
//!  +------+-----------------------------------------+
//!  | kind | value u64                               |
//!  +------+-----------------------------------------+
//!  kind 1  window marker    value 0
//!  kind 2  watermark        event time, nanoseconds on the application's clock
//!  kind 3  latency marker   CLOCK_MONOTONIC nanoseconds when a source read it
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
    /// follows on this edge.
    Watermark(u64),
    /// A latency marker: a source read `CLOCK_MONOTONIC` ([`crate::monotonic_ns`]) at this
    /// value.
    Latency(u64),
}

/// Offset of the kind byte.
const KIND_AT: usize = 0;
/// Offset of the value.
const VALUE_AT: usize = 1;
/// Bytes of the value.
const VALUE_BYTES: usize = 8;

/// The kind byte of a window marker.
const KIND_WINDOW_MARKER: u8 = 1;
/// The kind byte of a watermark.
const KIND_WATERMARK: u8 = 2;
/// The kind byte of a latency marker.
const KIND_LATENCY: u8 = 3;

const _: () = assert!(KIND_AT + 1 == VALUE_AT);
const _: () = assert!(Punctuation::WIRE_BYTES == 9);

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
    /// A window marker carries no value, so its value bytes are zero.
    #[error("a window marker carries no value, got {0}")]
    StrayValue(u64),
}

impl Punctuation {
    /// Bytes of the wire encoding: the kind, then the value.
    pub const WIRE_BYTES: usize = VALUE_AT + VALUE_BYTES;

    /// The wire encoding (drawn in the module doc).
    pub fn to_wire(&self) -> [u8; Self::WIRE_BYTES] {
        let (kind, value) = match *self {
            Self::WindowMarker => (KIND_WINDOW_MARKER, 0),
            Self::Watermark(time) => (KIND_WATERMARK, time),
            Self::Latency(time) => (KIND_LATENCY, time),
        };
        let mut wire = [0u8; Self::WIRE_BYTES];
        wire[KIND_AT] = kind;
        wire[VALUE_AT..].copy_from_slice(&value.to_le_bytes());
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
        value.copy_from_slice(&wire[VALUE_AT..]);
        let value = u64::from_le_bytes(value);
        match wire[KIND_AT] {
            KIND_WINDOW_MARKER if value == 0 => Ok(Self::WindowMarker),
            KIND_WINDOW_MARKER => Err(PunctuationWireError::StrayValue(value)),
            KIND_WATERMARK => Ok(Self::Watermark(value)),
            KIND_LATENCY => Ok(Self::Latency(value)),
            kind => Err(PunctuationWireError::UnknownKind(kind)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVERY_KIND: [Punctuation; 5] = [
        Punctuation::WindowMarker,
        Punctuation::Watermark(0),
        Punctuation::Watermark(0x0102_0304_0506_0708),
        Punctuation::Latency(u64::MAX),
        Punctuation::Latency(1),
    ];

    #[test]
    fn every_kind_round_trips_with_its_value() {
        for p in EVERY_KIND {
            assert_eq!(Punctuation::from_wire(&p.to_wire()), Ok(p));
        }
    }

    #[test]
    fn the_layout_is_the_drawn_one() {
        let wire = Punctuation::Watermark(0x0102_0304_0506_0708).to_wire();
        assert_eq!(wire, [2, 8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(
            Punctuation::WindowMarker.to_wire(),
            [1, 0, 0, 0, 0, 0, 0, 0, 0]
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
                    expected: 9,
                    actual: len
                })
            );
        }
        let mut long = wire.to_vec();
        long.push(0);
        assert_eq!(
            Punctuation::from_wire(&long),
            Err(PunctuationWireError::WrongLength {
                expected: 9,
                actual: 10
            })
        );
        for kind in [0, 4, 255] {
            let mut bad = wire;
            bad[KIND_AT] = kind;
            assert_eq!(
                Punctuation::from_wire(&bad),
                Err(PunctuationWireError::UnknownKind(kind))
            );
        }
        let mut stray = Punctuation::WindowMarker.to_wire();
        stray[Punctuation::WIRE_BYTES - 1] = 1;
        assert_eq!(
            Punctuation::from_wire(&stray),
            Err(PunctuationWireError::StrayValue(1 << 56))
        );
    }

    #[test]
    fn every_byte_string_of_the_right_length_is_read_or_refused_without_a_panic() {
        for kind in 0..=u8::MAX {
            for value in [0u64, 1, u64::MAX] {
                let mut wire = [kind; Punctuation::WIRE_BYTES];
                wire[VALUE_AT..].copy_from_slice(&value.to_le_bytes());
                if let Ok(p) = Punctuation::from_wire(&wire) {
                    assert_eq!(p.to_wire(), wire, "only canonical encodings are read");
                }
            }
        }
    }
}
