//! Reading one sender's stream of frames (drawn in [`crate::tcp`]): a buffer sized once from
//! this end's own limits, which reads fill, and a decoder that checks every length a peer
//! sends against the frame and those limits before it uses it.
//!
//! A peer can make [`FrameReader::decode`] return a [`FrameFault`] (what it sent, and the
//! limit or rule it broke, for the error naming it), never read, write or allocate outside
//! the buffer: a frame length of 4 GiB is refused when its four bytes arrive.

use sluice_types::{Message, Punctuation, Tuple};

use super::wire::{
    Framing, FRAME_HEADER, LEN_PREFIX, PART_HEADER, PUNCTUATION_RECORD, RUN_HEADER, TAG_DATA,
    TAG_END, TAG_LAST, TAG_PART, TAG_PUNCTUATION,
};
use crate::parts::{Reassembly, MAX_TUPLE_BYTES};
use crate::wire_fields::get_u32;

/// The least bytes a sender's read buffer holds (one read can take many frames).
const MIN_READ_BUFFER: usize = 256 << 10;

/// What a sender sent that no sender sends: the decoder's refusal, worded for the error that
/// names the peer ("the sender at ... sent {fault}").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FrameFault {
    /// A frame length of zero.
    #[error("an empty frame")]
    EmptyFrame,
    /// A frame length over the frame limit.
    #[error("a frame of {len} bytes, over the limit of {limit}")]
    FrameTooLong {
        /// The length it sent.
        len: u32,
        /// This end's frame limit.
        limit: usize,
    },
    /// A record that does not fit what is left of its frame.
    #[error("a record cut by the end of its frame")]
    RecordCut,
    /// A run of data tuples that holds none, or more than its frame can.
    #[error("a run of {count} tuples, which its frame of {left} bytes left cannot hold")]
    BadRun {
        /// The tuple count it sent.
        count: u32,
        /// The bytes left in its frame after the run's header.
        left: usize,
    },
    /// A normal tuple's length over the largest tuple.
    #[error("a tuple of {len} bytes, over the limit of {limit}")]
    TupleTooLong {
        /// The length it sent.
        len: u32,
        /// This end's largest tuple.
        limit: usize,
    },
    /// A part of a tuple that is empty or longer than the largest tuple, or on an edge of
    /// fixed-size tuples, which never come in parts.
    #[error("a part of {len} bytes, where parts are 1 to {limit} bytes of a variable-size tuple")]
    BadPart {
        /// The length it sent.
        len: u32,
        /// This end's largest tuple (0 on an edge of fixed-size tuples).
        limit: usize,
    },
    /// Parts adding up to more than any tuple.
    #[error("parts of a tuple over {MAX_TUPLE_BYTES} bytes")]
    PartsTooLong,
    /// Another record between the parts of a tuple.
    #[error("a record of tag {0:#04x} between the parts of a tuple")]
    InsideParts(u8),
    /// A tuple whose bytes do not decode as the edge's tuple type.
    #[error("a tuple that does not decode: {0}")]
    Undecodable(String),
    /// A punctuation whose kind or value is not one.
    #[error("a punctuation that does not decode: {0}")]
    BadPunctuation(String),
    /// A record tag no sender writes.
    #[error("a record of unknown tag {0:#04x}")]
    UnknownTag(u8),
    /// The end of the stream with more of its frame after it.
    #[error("an end of stream inside its frame")]
    EndInsideFrame,
    /// Bytes after the end of the stream.
    #[error("bytes after the end of its stream")]
    AfterEnd,
}

/// One sender's received bytes and where decoding is in its stream.
#[derive(Debug)]
pub(crate) struct FrameReader {
    buffer: Box<[u8]>,
    /// Received bytes not decoded yet are `buffer[start..end]`.
    start: usize,
    end: usize,
    /// Body bytes of the current frame not decoded yet; 0 between frames.
    frame_left: usize,
    /// Tuples of the current run not decoded yet.
    run_left: u32,
    ended: bool,
    /// The parts of a tuple larger than `max_tuple`, received so far.
    parts: Reassembly,
}

/// What one step of [`FrameReader::decode`] read: its bytes, and whether they completed a
/// message.
#[derive(Debug, Clone, Copy)]
struct Read {
    bytes: usize,
    completed: bool,
}

impl Read {
    /// A header or a part: bytes taken, no message yet.
    fn header(bytes: usize) -> Self {
        Self {
            bytes,
            completed: false,
        }
    }

    /// A record that completed a message.
    fn message(bytes: usize) -> Self {
        Self {
            bytes,
            completed: true,
        }
    }
}

impl FrameReader {
    /// A reader for frames of `framing`, its buffer sized from it (holding two of the largest
    /// items, so moving undecoded bytes to the front always frees half of it).
    pub(crate) fn new(framing: &Framing) -> Self {
        let largest_item = LEN_PREFIX + framing.max_tuple;
        Self {
            buffer: vec![0; MIN_READ_BUFFER.max(2 * largest_item)].into_boxed_slice(),
            start: 0,
            end: 0,
            frame_left: 0,
            run_left: 0,
            ended: false,
            parts: Reassembly::default(),
        }
    }

    /// Bytes the buffer holds, received or not: fixed at creation.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn capacity(&self) -> usize {
        self.buffer.len()
    }

    /// Whether the end of the stream was decoded.
    pub(crate) fn ended(&self) -> bool {
        self.ended
    }

    /// Whether every received byte was decoded.
    pub(crate) fn drained(&self) -> bool {
        self.start == self.end
    }

    /// The free end of the buffer for the next read, after moving undecoded bytes to its
    /// front if the free end might not hold the next item; never empty.
    pub(crate) fn free(&mut self) -> &mut [u8] {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.buffer.len() - self.end < self.buffer.len() / 2 {
            // Undecoded bytes are less than one item (decode stopped for want of bytes), and
            // the buffer holds two of the largest items, so half of it is then free.
            self.buffer.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.buffer[self.end..]
    }

    /// Takes `n` bytes a read put at the start of [`FrameReader::free`].
    pub(crate) fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buffer.len());
    }

    /// Decodes up to `max` messages from the received bytes into `out`; stops at the first
    /// incomplete item. Every length is checked against the frame and `framing` first.
    pub(crate) fn decode<T: Tuple>(
        &mut self,
        framing: &Framing,
        max: usize,
        out: &mut Vec<Message<T>>,
    ) -> Result<usize, FrameFault> {
        let mut decoded = 0;
        while decoded < max {
            if self.ended {
                // Nothing may follow the end of the stream.
                return if self.drained() {
                    Ok(decoded)
                } else {
                    Err(FrameFault::AfterEnd)
                };
            }
            let read = if self.run_left > 0 {
                self.run_tuple(framing, out)?
            } else if self.frame_left == 0 {
                self.frame_header(framing)?
            } else {
                self.record(framing, out)?
            };
            // `None`: the rest of the item has not arrived yet.
            let Some(read) = read else { break };
            decoded += usize::from(read.completed);
            self.start += read.bytes;
            self.frame_left -= read.bytes;
        }
        Ok(decoded)
    }

    /// The received bytes not decoded yet.
    fn available(&self) -> &[u8] {
        &self.buffer[self.start..self.end]
    }

    /// The next tuple of a run of data records: fixed-size under a facade framing, else
    /// after its length prefix.
    fn run_tuple<T: Tuple>(
        &mut self,
        framing: &Framing,
        out: &mut Vec<Message<T>>,
    ) -> Result<Option<Read>, FrameFault> {
        let available = &self.buffer[self.start..self.end];
        let (prefix, len) = match framing.facade {
            Some(size) => (0, size),
            None => {
                if self.frame_left < LEN_PREFIX {
                    return Err(FrameFault::RecordCut);
                }
                if available.len() < LEN_PREFIX {
                    return Ok(None);
                }
                let len = get_u32(available, 0);
                if len as usize > framing.max_tuple {
                    return Err(FrameFault::TupleTooLong {
                        len,
                        limit: framing.max_tuple,
                    });
                }
                (LEN_PREFIX, len as usize)
            }
        };
        let item = prefix + len;
        if item > self.frame_left {
            return Err(FrameFault::RecordCut);
        }
        if available.len() < item {
            return Ok(None);
        }
        let tuple = T::decode(&available[prefix..item])
            .map_err(|e| FrameFault::Undecodable(e.to_string()))?;
        out.push(Message::Data(tuple));
        self.run_left -= 1;
        Ok(Some(Read::message(item)))
    }

    /// A frame's header: its length, checked, starts the frame.
    fn frame_header(&mut self, framing: &Framing) -> Result<Option<Read>, FrameFault> {
        let available = self.available();
        if available.len() < FRAME_HEADER {
            return Ok(None);
        }
        let len = get_u32(available, 0);
        if len == 0 {
            return Err(FrameFault::EmptyFrame);
        }
        if len as usize > framing.frame_limit {
            return Err(FrameFault::FrameTooLong {
                len,
                limit: framing.frame_limit,
            });
        }
        self.frame_left = len as usize + FRAME_HEADER;
        Ok(Some(Read::header(FRAME_HEADER)))
    }

    /// The record that starts with the next tag inside a frame.
    fn record<T: Tuple>(
        &mut self,
        framing: &Framing,
        out: &mut Vec<Message<T>>,
    ) -> Result<Option<Read>, FrameFault> {
        let Some(&tag) = self.available().first() else {
            return Ok(None);
        };
        if !self.parts.is_empty() && tag != TAG_PART && tag != TAG_LAST {
            return Err(FrameFault::InsideParts(tag));
        }
        match tag {
            TAG_PART | TAG_LAST => self.part(tag, framing, out),
            TAG_DATA => self.run_header(framing),
            TAG_PUNCTUATION => {
                if self.frame_left < PUNCTUATION_RECORD {
                    return Err(FrameFault::RecordCut);
                }
                let Some(wire) = self.available().get(1..PUNCTUATION_RECORD) else {
                    return Ok(None);
                };
                let punctuation = Punctuation::from_wire(wire)
                    .map_err(|e| FrameFault::BadPunctuation(e.to_string()))?;
                out.push(Message::Punctuation(punctuation));
                Ok(Some(Read::message(PUNCTUATION_RECORD)))
            }
            TAG_END => {
                if self.frame_left != 1 {
                    return Err(FrameFault::EndInsideFrame);
                }
                out.push(Message::EndOfStream);
                self.ended = true;
                Ok(Some(Read::message(1)))
            }
            _ => Err(FrameFault::UnknownTag(tag)),
        }
    }

    /// A part of a tuple longer than a frame (`TAG_PART`), or its last part (`TAG_LAST`),
    /// which completes the tuple.
    fn part<T: Tuple>(
        &mut self,
        tag: u8,
        framing: &Framing,
        out: &mut Vec<Message<T>>,
    ) -> Result<Option<Read>, FrameFault> {
        if self.frame_left < PART_HEADER {
            return Err(FrameFault::RecordCut);
        }
        let available = &self.buffer[self.start..self.end];
        if available.len() < PART_HEADER {
            return Ok(None);
        }
        let len = get_u32(available, 1);
        let limit = if framing.facade.is_some() {
            0
        } else {
            framing.max_tuple
        };
        if len == 0 || len as usize > limit {
            return Err(FrameFault::BadPart { len, limit });
        }
        let item = PART_HEADER + len as usize;
        if item > self.frame_left {
            return Err(FrameFault::RecordCut);
        }
        if available.len() < item {
            return Ok(None);
        }
        let part = &available[PART_HEADER..item];
        if tag == TAG_PART {
            if !self.parts.push(part, MAX_TUPLE_BYTES) {
                return Err(FrameFault::PartsTooLong);
            }
            return Ok(Some(Read::header(item)));
        }
        let tuple = self
            .parts
            .finish(part, MAX_TUPLE_BYTES, T::decode)
            .ok_or(FrameFault::PartsTooLong)?
            .map_err(|e| FrameFault::Undecodable(e.to_string()))?;
        out.push(Message::Data(tuple));
        Ok(Some(Read::message(item)))
    }

    /// The header of a run of data records: how many tuples follow, checked against what is
    /// left of the frame.
    fn run_header(&mut self, framing: &Framing) -> Result<Option<Read>, FrameFault> {
        if self.frame_left < RUN_HEADER {
            return Err(FrameFault::RecordCut);
        }
        let available = self.available();
        if available.len() < RUN_HEADER {
            return Ok(None);
        }
        let count = get_u32(available, 1);
        let left = self.frame_left - RUN_HEADER;
        let least_per_tuple = framing.facade.unwrap_or(LEN_PREFIX);
        let least = (count as usize).checked_mul(least_per_tuple);
        if count == 0 || least.is_none_or(|l| l > left) {
            return Err(FrameFault::BadRun { count, left });
        }
        self.run_left = count;
        Ok(Some(Read::header(RUN_HEADER)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::TcpParams;

    fn framing() -> Framing {
        Framing::new::<u64>(&TcpParams {
            batch_bytes: 64,
            max_tuple_bytes: 16,
            ..TcpParams::default()
        })
        .unwrap()
    }

    /// Feeds `bytes` to a fresh reader and decodes everything.
    fn decode_all(bytes: &[u8]) -> Result<Vec<Message<u64>>, FrameFault> {
        decode_all_as(&framing(), bytes)
    }

    /// [`decode_all`] for tuples of type `T` framed as `f` says.
    fn decode_all_as<T: Tuple>(f: &Framing, bytes: &[u8]) -> Result<Vec<Message<T>>, FrameFault> {
        let f = *f;
        let mut reader = FrameReader::new(&f);
        reader.free()[..bytes.len()].copy_from_slice(bytes);
        reader.filled(bytes.len());
        let mut out = Vec::new();
        reader.decode(&f, usize::MAX, &mut out)?;
        Ok(out)
    }

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut bytes = (body.len() as u32).to_le_bytes().to_vec();
        bytes.extend_from_slice(body);
        bytes
    }

    #[test]
    fn a_frame_decodes_and_an_incomplete_one_waits() {
        let mut body = vec![TAG_DATA, 2, 0, 0, 0];
        body.extend_from_slice(&7u64.to_le_bytes());
        body.extend_from_slice(&8u64.to_le_bytes());
        let mut bytes = frame(&body);
        bytes.extend(frame(&[TAG_END]));
        assert_eq!(
            decode_all(&bytes),
            Ok(vec![
                Message::Data(7),
                Message::Data(8),
                Message::EndOfStream
            ])
        );
        assert_eq!(
            decode_all(&bytes[..bytes.len() - 1]),
            Ok(vec![Message::Data(7), Message::Data(8)])
        );
    }

    #[test]
    fn each_fault_says_what_was_sent() {
        let limit = framing().frame_limit;
        let cases: [(Vec<u8>, FrameFault, &str); 6] = [
            (
                u32::MAX.to_le_bytes().to_vec(),
                FrameFault::FrameTooLong {
                    len: u32::MAX,
                    limit,
                },
                "a frame of 4294967295 bytes, over the limit of 64",
            ),
            (vec![0; 4], FrameFault::EmptyFrame, "an empty frame"),
            (
                frame(&[9]),
                FrameFault::UnknownTag(9),
                "a record of unknown tag 0x09",
            ),
            (
                frame(&[TAG_DATA, 9, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]),
                FrameFault::BadRun { count: 9, left: 8 },
                "a run of 9 tuples, which its frame of 8 bytes left cannot hold",
            ),
            (
                frame(&[TAG_END, TAG_END]),
                FrameFault::EndInsideFrame,
                "an end of stream inside its frame",
            ),
            (
                [frame(&[TAG_END]), vec![1]].concat(),
                FrameFault::AfterEnd,
                "bytes after the end of its stream",
            ),
        ];
        for (bytes, fault, text) in cases {
            assert_eq!(decode_all(&bytes), Err(fault.clone()), "{bytes:?}");
            assert_eq!(fault.to_string(), text);
        }
    }

    #[test]
    fn parts_make_one_tuple_and_nothing_may_come_between_them() {
        use sluice_types::BytesTuple;
        let bytes_framing = Framing::new::<BytesTuple>(&TcpParams {
            batch_bytes: 64,
            max_tuple_bytes: 16,
            ..TcpParams::default()
        })
        .unwrap();
        let part = |tag: u8, bytes: &[u8]| {
            let mut record = vec![tag];
            record.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            record.extend_from_slice(bytes);
            record
        };
        let whole = [
            frame(&part(TAG_PART, b"abc")),
            frame(&[part(TAG_PART, b"de"), part(TAG_LAST, b"f")].concat()),
        ]
        .concat();
        assert_eq!(
            decode_all_as(&bytes_framing, &whole),
            Ok(vec![Message::Data(BytesTuple(b"abcdef".to_vec()))])
        );
        let faults = [
            (
                frame(&part(TAG_PART, &[0; 17])),
                FrameFault::BadPart { len: 17, limit: 16 },
            ),
            (
                frame(&part(TAG_LAST, &[])),
                FrameFault::BadPart { len: 0, limit: 16 },
            ),
            (
                frame(&[part(TAG_PART, b"ab"), vec![TAG_END]].concat()),
                FrameFault::InsideParts(TAG_END),
            ),
        ];
        for (bytes, fault) in faults {
            assert_eq!(
                decode_all_as::<BytesTuple>(&bytes_framing, &bytes),
                Err(fault)
            );
        }
        // Fixed-size tuples never come in parts.
        assert_eq!(
            decode_all(&frame(&part(TAG_LAST, &[1; 8]))),
            Err(FrameFault::BadPart { len: 8, limit: 0 })
        );
    }
}
