//! Framing: how a byte stream (a file, a TCP connection) is cut into tuples, and how tuples
//! are written into one. Both directions of each wire format live here.
//!
//! **Lines**: each tuple is a `String`, one per line, ended by `\n`; a `\r` before it is
//! stripped too, and a last line without an ending is still a line. Bytes that are not UTF-8
//! are replaced by U+FFFD and the line counted (`invalid_utf8_lines`). Written, a tuple is its
//! `Display` (or a formatter's output) and a `\n`.
//!
//! **Length-prefixed frames**: each tuple is its encoding ([`Tuple::encode`]) after its length:
//!
//! ```text
//!  0                 4
//!  +-----------------+--------------------------------------+
//!  | length: u32     | the tuple's encoding, `length` bytes |
//!  | big-endian      | (`Tuple::encode` / `Tuple::decode`)  |
//!  +-----------------+--------------------------------------+
//! ```
//!
//! A length read from a peer is never trusted: a frame (or a line) longer than the decoder's
//! maximum ([`DEFAULT_MAX_FRAME`] unless set) is reported as oversized before anything is
//! allocated for it, and the buffer grows only with bytes that have arrived. A stream that
//! ends inside a frame is counted (`truncated_frames`); a frame whose bytes do not decode is
//! counted (`undecodable_frames`) and skipped.
//!
//! The sources buffer each stream and cut it with a [`FrameDecoder`] (one of these, or the
//! user's own), reading at most once per call, so a source over a non-blocking socket returns
//! promptly.

use std::fmt::{self, Display, Write as _};
use std::io::{self, Read};
use std::marker::PhantomData;

use sluice_graph::{OperatorError, OperatorReport};
use sluice_types::Tuple;

use crate::stream_sink::TupleEncoder;
use sluice_ops::add_counters;

/// Bytes of a frame's length prefix.
pub const LENGTH_BYTES: usize = 4;

/// The longest frame (or line) a decoder accepts unless told otherwise: 16 MiB.
pub const DEFAULT_MAX_FRAME: usize = 16 << 20;

/// Bytes a [`FrameReader`] starts with, and reads at most per call while frames are short.
const READ_CHUNK: usize = 64 << 10;

const _: () = assert!(DEFAULT_MAX_FRAME <= u32::MAX as usize);

/// What decoders counted while cutting streams.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameCounters {
    /// Lines holding bytes that are not UTF-8 (emitted with U+FFFD in their place).
    pub invalid_utf8_lines: u64,
    /// Frames or lines longer than the maximum.
    pub oversized_frames: u64,
    /// Streams that ended inside a frame.
    pub truncated_frames: u64,
    /// Frames whose bytes did not decode into a tuple (skipped).
    pub undecodable_frames: u64,
}

/// What a decoder found at the front of the bytes it was given.
#[derive(Debug, PartialEq, Eq)]
pub enum Cut<T> {
    /// A whole frame of `consumed` bytes: its tuple, or `None` when it did not decode (the
    /// decoder counted it).
    Frame {
        /// Bytes the frame took, its framing included: at least 1, at most the bytes given.
        consumed: usize,
        /// The tuple it held.
        tuple: Option<T>,
    },
    /// Not a whole frame yet.
    Incomplete,
    /// The frame is longer than the decoder accepts.
    Oversized {
        /// Its length as claimed (length-prefixed) or as far as it has arrived (lines).
        length: usize,
    },
}

/// Cuts a byte stream into tuples. One value per stream: it may keep state between calls.
pub trait FrameDecoder: Clone + Send {
    /// The tuples it makes.
    type Tuple: Tuple;

    /// The longest frame it accepts, in bytes.
    fn max_frame(&self) -> usize;

    /// Looks for a frame at the front of `bytes`, the stream's bytes not cut yet; the next
    /// call gives the same bytes minus the frame, or the same bytes with more after them.
    fn cut(&mut self, bytes: &[u8], counters: &mut FrameCounters) -> Cut<Self::Tuple>;

    /// The stream ended with `rest` (not empty) left over: the last tuple, if it makes one.
    fn end(&mut self, rest: &[u8], counters: &mut FrameCounters) -> Option<Self::Tuple>;

    /// Writes the counters this framing keeps into `report`.
    fn report(counters: &FrameCounters, report: &mut OperatorReport);
}

/// Cuts a stream into `String` lines (see the module doc).
#[derive(Debug, Clone)]
pub struct LineDecoder {
    max_line: usize,
    /// Bytes at the front already searched for a `\n` without finding one.
    searched: usize,
}

impl LineDecoder {
    /// Lines of at most `max_line` bytes (their ending not counted).
    pub fn new(max_line: usize) -> Self {
        Self {
            max_line,
            searched: 0,
        }
    }

    /// `bytes` as a string, U+FFFD in place of what is not UTF-8 (counted).
    fn line(bytes: &[u8], counters: &mut FrameCounters) -> String {
        match std::str::from_utf8(bytes) {
            Ok(line) => line.to_owned(),
            Err(_) => {
                counters.invalid_utf8_lines += 1;
                String::from_utf8_lossy(bytes).into_owned()
            }
        }
    }
}

impl Default for LineDecoder {
    /// Lines of at most [`DEFAULT_MAX_FRAME`] bytes.
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME)
    }
}

impl FrameDecoder for LineDecoder {
    type Tuple = String;

    fn max_frame(&self) -> usize {
        self.max_line
    }

    fn cut(&mut self, bytes: &[u8], counters: &mut FrameCounters) -> Cut<String> {
        let from = self.searched.min(bytes.len());
        let Some(newline) = bytes[from..].iter().position(|&b| b == b'\n') else {
            self.searched = bytes.len();
            // The line can still end with "\r\n" and be no longer than allowed.
            return if bytes.len() > self.max_line.saturating_add(1) {
                Cut::Oversized {
                    length: bytes.len(),
                }
            } else {
                Cut::Incomplete
            };
        };
        self.searched = 0;
        let end = from + newline;
        let line = bytes[..end].strip_suffix(b"\r").unwrap_or(&bytes[..end]);
        if line.len() > self.max_line {
            return Cut::Oversized { length: line.len() };
        }
        Cut::Frame {
            consumed: end + 1,
            tuple: Some(Self::line(line, counters)),
        }
    }

    fn end(&mut self, rest: &[u8], counters: &mut FrameCounters) -> Option<String> {
        self.searched = 0;
        Some(Self::line(rest, counters))
    }

    fn report(counters: &FrameCounters, report: &mut OperatorReport) {
        add_counters(
            report,
            &[
                ("invalid_utf8_lines", counters.invalid_utf8_lines),
                ("oversized_lines", counters.oversized_frames),
            ],
        );
    }
}

/// Cuts a stream into length-prefixed frames, each decoded with `T::decode` (see the module
/// doc).
#[derive(Debug)]
pub struct LengthDecoder<T> {
    max_frame: usize,
    tuples: PhantomData<fn() -> T>,
}

impl<T> LengthDecoder<T> {
    /// Frames of at most `max_frame` bytes (the prefix not counted; at most `u32::MAX`).
    pub fn new(max_frame: usize) -> Self {
        Self {
            max_frame: max_frame.min(u32::MAX as usize),
            tuples: PhantomData,
        }
    }
}

impl<T> Default for LengthDecoder<T> {
    /// Frames of at most [`DEFAULT_MAX_FRAME`] bytes.
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME)
    }
}

impl<T> Clone for LengthDecoder<T> {
    fn clone(&self) -> Self {
        Self::new(self.max_frame)
    }
}

impl<T: Tuple> FrameDecoder for LengthDecoder<T> {
    type Tuple = T;

    fn max_frame(&self) -> usize {
        self.max_frame
    }

    fn cut(&mut self, bytes: &[u8], counters: &mut FrameCounters) -> Cut<T> {
        let Some((prefix, body)) = bytes.split_first_chunk::<LENGTH_BYTES>() else {
            return Cut::Incomplete;
        };
        let length = u32::from_be_bytes(*prefix) as usize;
        if length > self.max_frame {
            return Cut::Oversized { length };
        }
        let Some(body) = body.get(..length) else {
            return Cut::Incomplete;
        };
        let tuple = T::decode(body).ok();
        if tuple.is_none() {
            counters.undecodable_frames += 1;
        }
        Cut::Frame {
            consumed: LENGTH_BYTES + length,
            tuple,
        }
    }

    fn end(&mut self, _rest: &[u8], counters: &mut FrameCounters) -> Option<T> {
        counters.truncated_frames += 1;
        None
    }

    fn report(counters: &FrameCounters, report: &mut OperatorReport) {
        add_counters(
            report,
            &[
                ("oversized_frames", counters.oversized_frames),
                ("truncated_frames", counters.truncated_frames),
                ("undecodable_frames", counters.undecodable_frames),
            ],
        );
    }
}

/// What one [`FrameReader::pull`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pulled {
    /// The stream is still open; `arrived` says whether bytes came in this call.
    Open {
        /// Whether the read brought bytes.
        arrived: bool,
    },
    /// The stream ended (its last tuple, if any, is in the batch).
    Ended,
    /// A frame longer than the decoder's maximum: the stream cannot be read further.
    Oversized {
        /// The frame's length, as far as it is known.
        length: usize,
    },
}

/// One stream, buffered and cut into tuples by a decoder.
pub(crate) struct FrameReader<R, D> {
    stream: R,
    decoder: D,
    /// Bytes read; those not cut yet are `start..end`.
    buffer: Vec<u8>,
    start: usize,
    end: usize,
}

impl<R: Read, D: FrameDecoder> FrameReader<R, D> {
    /// A reader of `stream` cut by `decoder`.
    pub(crate) fn new(stream: R, decoder: D) -> Self {
        Self {
            stream,
            decoder,
            buffer: vec![0; READ_CHUNK],
            start: 0,
            end: 0,
        }
    }

    /// Cuts tuples into `batch` until it holds `most`, reading from the stream at most once
    /// (when the buffered bytes hold no whole frame). An error is the stream's.
    pub(crate) fn pull(
        &mut self,
        batch: &mut Vec<D::Tuple>,
        most: usize,
        counters: &mut FrameCounters,
    ) -> io::Result<Pulled> {
        let mut arrived = false;
        loop {
            while batch.len() < most {
                let bytes = &self.buffer[self.start..self.end];
                match self.decoder.cut(bytes, counters) {
                    Cut::Frame { consumed, tuple } => {
                        if consumed == 0 || consumed > bytes.len() {
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!(
                                    "the decoder cut a frame of {consumed} bytes from {}",
                                    bytes.len()
                                ),
                            ));
                        }
                        self.start += consumed;
                        batch.extend(tuple);
                    }
                    Cut::Incomplete => break,
                    Cut::Oversized { length } => {
                        counters.oversized_frames += 1;
                        return Ok(Pulled::Oversized { length });
                    }
                }
            }
            if batch.len() >= most || arrived {
                return Ok(Pulled::Open { arrived });
            }
            match self.fill()? {
                None => return Ok(Pulled::Open { arrived: false }),
                Some(0) => {
                    if self.start < self.end {
                        let rest = &self.buffer[self.start..self.end];
                        batch.extend(self.decoder.end(rest, counters));
                        self.start = self.end;
                    }
                    return Ok(Pulled::Ended);
                }
                Some(_) => arrived = true,
            }
        }
    }

    /// Reads once into the free end of the buffer, making room first: `Some(0)` at the end of
    /// the stream, `None` if a non-blocking stream has nothing now.
    fn fill(&mut self) -> io::Result<Option<usize>> {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        } else if self.start > 0 && self.start >= self.buffer.len() / 2 {
            self.buffer.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
        }
        if self.end == self.buffer.len() {
            if self.start > 0 {
                self.buffer.copy_within(self.start..self.end, 0);
                (self.start, self.end) = (0, self.end - self.start);
            } else {
                // A frame longer than the buffer: grow, never past what the decoder allows.
                let most = self.decoder.max_frame().saturating_add(LENGTH_BYTES + 2);
                let grown = self.end.saturating_mul(2).min(most).max(self.end + 1);
                self.buffer.resize(grown, 0);
            }
        }
        loop {
            match self.stream.read(&mut self.buffer[self.end..]) {
                Ok(n) => {
                    self.end += n;
                    return Ok(Some(n));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }
}

/// The formatter of [`LineEncoder::display`].
pub type DisplayLine<T> = fn(&T, &mut String) -> fmt::Result;

/// Writes each tuple as one line: what `format` appends to an empty string, then `\n`. A
/// tuple whose text holds a `\n` makes more than one line.
#[derive(Debug, Clone)]
pub struct LineEncoder<F> {
    format: F,
    line: String,
}

impl<F> LineEncoder<F> {
    /// Lines made by `format(tuple, line)`, e.g. `|t, line| write!(line, "{}\t{}", t.0, t.1)`.
    pub fn new(format: F) -> Self {
        Self {
            format,
            line: String::new(),
        }
    }
}

impl<T: Display> LineEncoder<DisplayLine<T>> {
    /// Lines made by the tuple's `Display`.
    pub fn display() -> Self {
        Self::new(|tuple, line| write!(line, "{tuple}"))
    }
}

impl<T, F> TupleEncoder<T> for LineEncoder<F>
where
    F: FnMut(&T, &mut String) -> fmt::Result + Send,
{
    fn encode(&mut self, tuple: &T, out: &mut Vec<u8>) -> Result<(), OperatorError> {
        self.line.clear();
        (self.format)(tuple, &mut self.line)
            .map_err(|_| OperatorError::Failed("formatting a tuple as a line failed".into()))?;
        out.extend_from_slice(self.line.as_bytes());
        out.push(b'\n');
        Ok(())
    }
}

/// Writes each tuple as a length-prefixed frame (see the module doc).
#[derive(Debug, Clone, Copy)]
pub struct LengthEncoder {
    max_frame: usize,
}

impl LengthEncoder {
    /// Frames of at most `max_frame` bytes (at most `u32::MAX`): a longer tuple is an error,
    /// as the reader would refuse it.
    pub fn new(max_frame: usize) -> Self {
        Self {
            max_frame: max_frame.min(u32::MAX as usize),
        }
    }
}

impl Default for LengthEncoder {
    /// Frames of at most [`DEFAULT_MAX_FRAME`] bytes.
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME)
    }
}

impl<T: Tuple> TupleEncoder<T> for LengthEncoder {
    fn encode(&mut self, tuple: &T, out: &mut Vec<u8>) -> Result<(), OperatorError> {
        let at = out.len();
        out.extend_from_slice(&[0; LENGTH_BYTES]);
        if let Err(e) = tuple.encode(out) {
            out.truncate(at);
            return Err(OperatorError::Failed(e.to_string()));
        }
        let length = out.len() - at - LENGTH_BYTES;
        if length > self.max_frame {
            out.truncate(at);
            return Err(OperatorError::Failed(format!(
                "a tuple of {length} bytes does not fit in a frame of at most {} bytes",
                self.max_frame
            )));
        }
        // `length <= max_frame <= u32::MAX`, so the cast keeps every bit.
        out[at..at + LENGTH_BYTES].copy_from_slice(&(length as u32).to_be_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream handing out its bytes a few at a time, with a "would block" between reads.
    struct Trickle {
        bytes: Vec<u8>,
        at: usize,
        step: usize,
        blocked: bool,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.blocked = !self.blocked;
            if self.blocked {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = self.step.min(buf.len()).min(self.bytes.len() - self.at);
            buf[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    /// Everything `decoder` cuts from `bytes` arriving `step` bytes at a time, and why the
    /// stream stopped.
    fn read_all<D: FrameDecoder>(
        bytes: &[u8],
        step: usize,
        decoder: D,
    ) -> (Vec<D::Tuple>, Pulled, FrameCounters) {
        let trickle = Trickle {
            bytes: bytes.to_vec(),
            at: 0,
            step,
            blocked: false,
        };
        let mut reader = FrameReader::new(trickle, decoder);
        let (mut tuples, mut batch) = (Vec::new(), Vec::new());
        let mut counters = FrameCounters::default();
        loop {
            let pulled = reader.pull(&mut batch, 3, &mut counters).unwrap();
            tuples.append(&mut batch);
            if !matches!(pulled, Pulled::Open { .. }) {
                return (tuples, pulled, counters);
            }
        }
    }

    #[test]
    fn lines_lose_their_endings_and_invalid_utf8_is_replaced_and_counted() {
        let text = b"one\r\ntwo\n\nf\xffour\nlast\r";
        for step in [1, 2, 5, 100] {
            let (lines, end, counters) = read_all(text, step, LineDecoder::default());
            assert_eq!(
                lines,
                ["one", "two", "", "f\u{fffd}our", "last\r"],
                "{step}"
            );
            assert_eq!(end, Pulled::Ended);
            assert_eq!(counters.invalid_utf8_lines, 1);
        }
    }

    #[test]
    fn a_line_longer_than_the_maximum_is_oversized() {
        let (lines, end, counters) = read_all(b"abc\r\nabcd\nxy", 2, LineDecoder::new(3));
        assert_eq!(lines, ["abc"]);
        assert_eq!(end, Pulled::Oversized { length: 4 });
        assert_eq!(counters.oversized_frames, 1);
        let (_, end, _) = read_all(&[b'a'; 100], 7, LineDecoder::new(10));
        assert!(matches!(end, Pulled::Oversized { length } if length > 10));
    }

    fn frames(tuples: &[String]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for t in tuples {
            LengthEncoder::default().encode(t, &mut bytes).unwrap();
        }
        bytes
    }

    #[test]
    fn frames_round_trip_across_reads() {
        let tuples: Vec<String> = (0..10).map(|i| "x".repeat(i * 30)).collect();
        let bytes = frames(&tuples);
        assert_eq!(
            &bytes[..LENGTH_BYTES],
            &[0, 0, 0, 1],
            "the empty string's encoding"
        );
        for step in [1, 3, 64, 10_000] {
            let (got, end, counters) = read_all(&bytes, step, LengthDecoder::<String>::default());
            assert_eq!((got, end), (tuples.clone(), Pulled::Ended), "{step}");
            assert_eq!(counters, FrameCounters::default());
        }
    }

    #[test]
    fn a_huge_length_is_refused_before_any_allocation() {
        let mut bytes = frames(&["ok".into()]);
        bytes.extend_from_slice(&u32::MAX.to_be_bytes());
        let (got, end, counters) = read_all(&bytes, 100, LengthDecoder::<String>::new(1024));
        assert_eq!(got, ["ok"]);
        assert_eq!(
            end,
            Pulled::Oversized {
                length: u32::MAX as usize
            }
        );
        assert_eq!(counters.oversized_frames, 1);
    }

    #[test]
    fn truncated_and_undecodable_frames_are_counted() {
        let mut bytes = frames(&["a".into()]);
        bytes.extend_from_slice(&[0, 0, 0, 1, 0xff]); // a string of a bad length
        bytes.extend(frames(&["b".into()]));
        bytes.extend_from_slice(&[0, 0, 0, 9, 1, 2]);
        let (got, end, counters) = read_all(&bytes, 4, LengthDecoder::<String>::default());
        assert_eq!(
            (got, end),
            (vec!["a".to_string(), "b".into()], Pulled::Ended)
        );
        assert_eq!(
            (counters.undecodable_frames, counters.truncated_frames),
            (1, 1)
        );
    }

    #[test]
    fn encoders_write_lines_and_refuse_oversized_frames() {
        let mut out = Vec::new();
        LineEncoder::display().encode(&1.5f64, &mut out).unwrap();
        let mut tabbed =
            LineEncoder::new(|t: &(u32, u32), line: &mut String| write!(line, "{}\t{}", t.0, t.1));
        tabbed.encode(&(1, 2), &mut out).unwrap();
        assert_eq!(out, b"1.5\n1\t2\n");
        let err = LengthEncoder::new(4)
            .encode(&"hello".to_string(), &mut out)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "a tuple of 6 bytes does not fit in a frame of at most 4 bytes"
        );
        assert_eq!(out, b"1.5\n1\t2\n", "nothing of the refused tuple is left");
    }
}
