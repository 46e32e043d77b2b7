//! Tuples larger than one slot of a shared-memory ring, carried in parts.
//!
//! A ring's slot (`shm-vega`) or record (`shm-osr`) has a fixed largest size, but a user's data
//! decides how long a tuple's encoding is: one line of a file may be 50 MB. A sender whose
//! tuple does not fit one slot writes it as consecutive *parts*, each a slot of its own, and
//! the receiver appends them until the last one, then decodes the whole:
//!
//! ```text
//!  encoding:  |<----------------------- n bytes, n > slot ------------------------>|
//!             +------------------+------------------+-------------------+-----------+
//!             | part             | part             | ...               | last part |
//!             +------------------+------------------+-------------------+-----------+
//!  ring:      [ slot: part, tag ][ slot: part, tag ]  ...               [ slot: last, tag ]
//!                   (a "more" tag on every part but the last, whose tag says "data")
//! ```
//!
//! Each transport's module doc gives its tags. The parts of one tuple are consecutive in
//! their sender's stream: a sender writes nothing else until its last part is in (an offer
//! meanwhile is refused as `Full`, the backpressure of any full ring), so a receiver keeps one
//! reassembly buffer per sender.
//!
//! # Why parts and not an overflow segment
//! The other way to carry a large tuple is to write it to a shared segment of its own and put
//! only its name in the ring. Parts won, measured side by side on this machine (2 vCPUs, two
//! runs, `cargo run --release -p sluice-transport --example large_tuples`; tuples per second,
//! sender and receiver in two threads):
//!
//! | tuple  | parts, shm-vega 1 KiB slots | parts, shm-osr 1 MiB ring | a segment per tuple |
//! |--------|-----------------------------|---------------------------|---------------------|
//! | 4 KiB  | 1.0-1.7 M/s (4-7 GB/s)      | 0.49-0.58 M/s             | 11-12 k/s           |
//! | 64 KiB | 35-38 k/s (2.3-2.5 GB/s)    | 25-27 k/s                 | 5.1-5.4 k/s         |
//! | 1 MiB  | 4.6-11 k/s                  | 1.5 k/s (1.6 GB/s)        | 1.0 k/s (1.0 GB/s)  |
//! | 16 MiB | 45-47/s (0.8 GB/s)          | 75-79/s (1.3 GB/s)        | 57-58/s (1.0 GB/s)  |
//!
//! A segment costs a create, a map, page faults on both sides and an unlink before a byte
//! moves (about 80 us here), so it loses by 5 to 100 times up to a megabyte and wins only over
//! 1 KiB slots at 16 MiB, where the OSR ring, which carries the serialized tuples between PEs,
//! is faster still. It would also need clean-up of its own when a process dies between create
//! and unlink; parts reuse ring slots already mapped and warm, keep sender and receiver
//! copying in parallel, and leave nothing behind.
//!
//! # Limits
//! A tuple's encoding may be up to [`MAX_TUPLE_BYTES`]; a longer one is refused at the sender
//! with `SendError::TooLarge` naming both sizes. A receiver buffers at most that much for a
//! sender: a stream of parts that would exceed it is malformed, so no sender can make a
//! receiver allocate without bound. The buffer grows as parts arrive, never ahead of them.

use crate::SendError;

/// The longest tuple encoding any transport carries (shm-vega, shm-osr, tcp and mpi, in parts): 1 GiB.
pub const MAX_TUPLE_BYTES: usize = 1 << 30;

/// A reassembly buffer that grew beyond this is freed once its tuple is decoded, so one huge
/// tuple does not pin its memory for the life of the edge.
const RETAINED_BYTES: usize = 1 << 20;

/// Refuses an encoding of `len` bytes if it is longer than `limit`.
pub(crate) fn check_len(len: usize, limit: usize) -> Result<(), SendError> {
    if len > limit {
        return Err(SendError::TooLarge {
            tuple: len,
            slot: limit,
        });
    }
    Ok(())
}

/// A tuple's encoding being written in parts, and how far the writing got.
pub(crate) struct Outgoing {
    bytes: Vec<u8>,
    written: usize,
}

impl Outgoing {
    /// Starts writing `bytes`.
    pub(crate) fn new(bytes: Vec<u8>) -> Self {
        Self { bytes, written: 0 }
    }

    /// Writes parts with `write_part` until the whole encoding is in or the transport is full.
    /// `write_part` is given everything not yet written, writes a part from its front (the
    /// last part when it takes all of it) and returns how many bytes it took. Returns whether
    /// the encoding is all written; `Full` from `write_part` stops the writing with `Ok(false)`,
    /// any other refusal is returned.
    pub(crate) fn write(
        &mut self,
        mut write_part: impl FnMut(&[u8]) -> Result<usize, SendError>,
    ) -> Result<bool, SendError> {
        while self.written < self.bytes.len() {
            match write_part(&self.bytes[self.written..]) {
                Ok(taken) => self.written += taken,
                Err(SendError::Full) => return Ok(false),
                Err(error) => return Err(error),
            }
        }
        Ok(true)
    }

    /// The buffer, for the sender's next encoding.
    pub(crate) fn into_buffer(self) -> Vec<u8> {
        self.bytes
    }
}

/// A sender that writes a tuple too long for one slot or record as parts, one [`Outgoing`] at
/// a time, refusing everything else until its last part is written.
pub(crate) trait SendsInParts {
    /// The tuple going out in parts, if any.
    fn outgoing(&mut self) -> &mut Option<Outgoing>;

    /// Where the buffer of a tuple all written goes, for the sender's next encoding.
    fn spare(&mut self) -> &mut Vec<u8>;

    /// Writes a part from the front of `rest` (the last part if it takes all of it); returns
    /// how many bytes it took, or `Full` if the transport has no room for it now.
    fn write_part(&mut self, rest: &[u8]) -> Result<usize, SendError>;

    /// Writes what is left of the tuple going out in parts, if any; `Full` while some of it
    /// is still left. Any other refusal is returned and drops the tuple. Called before every
    /// offer, so the common case, nothing going out, is an inlined check.
    #[inline(always)]
    fn finish_outgoing(&mut self) -> Result<(), SendError> {
        if self.outgoing().is_none() {
            return Ok(());
        }
        self.write_outgoing()
    }

    /// The rest of [`SendsInParts::finish_outgoing`], out of the offer's hot path.
    #[cold]
    #[inline(never)]
    fn write_outgoing(&mut self) -> Result<(), SendError> {
        let Some(mut outgoing) = self.outgoing().take() else {
            return Ok(());
        };
        match outgoing.write(|rest| self.write_part(rest)) {
            Ok(true) => {
                *self.spare() = outgoing.into_buffer();
                Ok(())
            }
            Ok(false) => {
                *self.outgoing() = Some(outgoing);
                Err(SendError::Full)
            }
            Err(error) => Err(error),
        }
    }
}

/// The parts of one sender's tuple received so far.
#[derive(Default)]
pub(crate) struct Reassembly {
    bytes: Vec<u8>,
}

impl std::fmt::Debug for Reassembly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Reassembly({} bytes)", self.bytes.len())
    }
}

impl Reassembly {
    /// Whether no tuple is being reassembled.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Appends a part that is not the last; false if the tuple would exceed `limit` bytes.
    pub(crate) fn push(&mut self, part: &[u8], limit: usize) -> bool {
        if part.len() > limit.saturating_sub(self.bytes.len()) {
            return false;
        }
        self.bytes.extend_from_slice(part);
        true
    }

    /// Appends the last part and hands the whole encoding to `decode`; then starts over.
    /// `None` if the tuple would exceed `limit` bytes.
    pub(crate) fn finish<R>(
        &mut self,
        last: &[u8],
        limit: usize,
        decode: impl FnOnce(&[u8]) -> R,
    ) -> Option<R> {
        let whole = self.push(last, limit).then(|| decode(&self.bytes));
        self.bytes.clear();
        if self.bytes.capacity() > RETAINED_BYTES {
            self.bytes = Vec::new();
        }
        whole
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Writes `bytes` in parts of at most `part` bytes into a "ring" that takes `room` parts
    /// per round, reassembling on the other side; returns the reassembled encoding and how
    /// many rounds it took.
    fn carry(bytes: &[u8], part: usize, room: usize) -> (Vec<u8>, usize) {
        let mut outgoing = Outgoing::new(bytes.to_vec());
        let mut reassembly = Reassembly::default();
        let mut whole = None;
        let mut rounds = 0;
        loop {
            rounds += 1;
            let mut free = room;
            let done = outgoing
                .write(|rest| {
                    if free == 0 {
                        return Err(SendError::Full);
                    }
                    free -= 1;
                    let n = rest.len().min(part);
                    if n == rest.len() {
                        whole = reassembly.finish(&rest[..n], usize::MAX, <[u8]>::to_vec);
                    } else {
                        assert!(reassembly.push(&rest[..n], usize::MAX));
                    }
                    Ok(n)
                })
                .unwrap();
            if done {
                return (whole.unwrap(), rounds);
            }
        }
    }

    proptest! {
        #[test]
        fn any_encoding_arrives_whole(
            bytes in proptest::collection::vec(any::<u8>(), 1..4096),
            part in 1usize..300,
            room in 1usize..8,
        ) {
            let (whole, rounds) = carry(&bytes, part, room);
            prop_assert_eq!(whole, bytes.clone());
            prop_assert_eq!(rounds, bytes.len().div_ceil(part).div_ceil(room));
        }
    }

    #[test]
    fn a_refusal_other_than_full_is_returned() {
        let mut outgoing = Outgoing::new(vec![1; 10]);
        assert_eq!(
            outgoing.write(|_| Err(SendError::Closed)),
            Err(SendError::Closed)
        );
    }

    #[test]
    fn a_tuple_beyond_the_limit_is_refused_on_both_sides() {
        assert_eq!(
            check_len(11, 10),
            Err(SendError::TooLarge {
                tuple: 11,
                slot: 10
            })
        );
        assert_eq!(check_len(10, 10), Ok(()));

        let mut reassembly = Reassembly::default();
        assert!(reassembly.push(&[0; 6], 10));
        assert!(!reassembly.push(&[0; 5], 10));
        assert_eq!(reassembly.finish(&[0; 5], 10, |b| b.len()), None);
        assert!(reassembly.is_empty(), "a refused tuple is forgotten");
        assert!(reassembly.push(&[0; 6], 10));
        assert_eq!(reassembly.finish(&[0; 4], 10, |b| b.len()), Some(10));
    }

    #[test]
    fn a_huge_buffer_is_freed_after_its_tuple() {
        let mut reassembly = Reassembly::default();
        assert!(reassembly.push(&vec![0; RETAINED_BYTES + 1], usize::MAX));
        reassembly.finish(&[1], usize::MAX, |_| ());
        assert_eq!(reassembly.bytes.capacity(), 0);
        assert!(reassembly.push(&[0; 64], usize::MAX));
        reassembly.finish(&[1], usize::MAX, |_| ());
        assert!(reassembly.bytes.capacity() >= 65, "a small buffer is kept");
    }
}
