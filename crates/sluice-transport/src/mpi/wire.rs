//! The byte layout of one batch of the `mpi` transport (drawn in [`crate::mpi`]): the writer a
//! sender fills and the reader that checks every length before it reads.
//!
//! Built without the `mpi` feature too, for its tests and for fuzzing (`crate::fuzzing`),
//! which reads batches only: the writing half is unused there.
#![cfg_attr(all(fuzzing, not(feature = "mpi")), allow(dead_code))]

use sluice_types::{Encoding, Message, Punctuation, Tuple};

use super::params::MpiParams;
use crate::parts::{check_len, Reassembly, MAX_TUPLE_BYTES};
use crate::wire_fields::{get_u32, put_u32};
use crate::{RecvError, SendError, TransportError};

/// Bytes of a batch's header: the sender's index.
pub(crate) const HEADER: usize = 4;
/// Bytes of a data run's tag and tuple count.
pub(crate) const RUN_HEADER: usize = 5;
/// Bytes of a normal tuple's length prefix.
pub(crate) const LEN_PREFIX: usize = 4;
/// A run of data tuples.
const TAG_DATA: u8 = 1;
/// A punctuation, followed by its wire encoding.
const TAG_PUNCTUATION: u8 = 2;
/// Bytes of a punctuation record: its tag and its wire encoding; the longest record that is
/// not data.
const PUNCTUATION_RECORD: usize = 1 + Punctuation::WIRE_BYTES;
/// The end of the sender's stream; the last byte of its last batch.
const TAG_END: u8 = 3;
/// The sender went away without ending its stream; the last byte of its last batch.
const TAG_ABANDONED: u8 = 4;
/// A part of a normal tuple's encoding that is not the last, followed by its length and bytes.
const TAG_PART: u8 = 5;
/// The last part of a normal tuple's encoding, followed by its length and bytes.
const TAG_LAST: u8 = 6;
/// Bytes of a part record's tag and length.
const PART_HEADER: usize = 5;

/// What both ends derive from the tuple type and the parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Framing {
    /// The size of a facade tuple; `None` for normal tuples, which carry their length.
    pub(crate) facade: Option<usize>,
    /// The largest encoded tuple one record carries, and the largest part of a longer one.
    pub(crate) max_tuple: usize,
    /// The longest normal tuple, carried in parts: [`MAX_TUPLE_BYTES`] (less in tests).
    pub(crate) most_in_parts: usize,
    /// The most record bytes in one batch.
    pub(crate) records_limit: usize,
}

impl Framing {
    /// The framing of tuples `T` under `params`, which are checked.
    pub(crate) fn new<T: Tuple>(params: &MpiParams) -> Result<Self, TransportError> {
        params.validate()?;
        let facade = match T::ENCODING {
            Encoding::Facade { size: 0 } => {
                // A run of empty tuples would let a few bytes stand for any number of tuples.
                return Err(TransportError::InvalidParameter {
                    transport: "mpi",
                    parameter: "tuple type",
                    reason: format!("{} has no bytes to send", std::any::type_name::<T>()),
                });
            }
            Encoding::Facade { size } => Some(size),
            Encoding::Normal => None,
        };
        Ok(Self {
            facade,
            max_tuple: params.max_tuple_bytes,
            most_in_parts: MAX_TUPLE_BYTES,
            // Both are at most 64 MiB, so a batch's length fits MPI's `int` count.
            records_limit: params
                .batch_bytes
                .max(RUN_HEADER + LEN_PREFIX + params.max_tuple_bytes),
        })
    }

    /// The most bytes in one batch, header included.
    pub(crate) fn message_limit(&self) -> usize {
        HEADER + self.records_limit
    }

    /// Whether a tuple of `len` encoded bytes goes in parts (only a normal one can be longer
    /// than the largest tuple, see [`encode`]).
    pub(crate) fn in_parts(&self, len: usize) -> bool {
        len > self.max_tuple
    }

    /// The length of the next part of an encoding of which `rest` bytes are not sent yet.
    pub(crate) fn part_len(&self, rest: usize) -> usize {
        rest.min(self.max_tuple)
    }
}

/// A batch being filled by a sender.
#[derive(Debug)]
pub(crate) struct BatchWriter {
    /// The header and the records so far.
    bytes: Vec<u8>,
    /// Where the open data run's header is, if the last record is a data run.
    run_at: Option<usize>,
    /// The sender's index, written first in every batch.
    sender: u32,
    /// Appending stops once the batch holds this many record bytes.
    batch_bytes: usize,
}

impl BatchWriter {
    /// An empty batch of sender `sender`, filled up to `batch_bytes` of records.
    pub(crate) fn new(sender: u32, batch_bytes: usize) -> Self {
        let mut writer = Self {
            bytes: Vec::new(),
            run_at: None,
            sender,
            batch_bytes,
        };
        writer.reset(Vec::new());
        writer
    }

    fn reset(&mut self, mut bytes: Vec<u8>) {
        bytes.clear();
        bytes.extend_from_slice(&self.sender.to_le_bytes());
        self.bytes = bytes;
        self.run_at = None;
    }

    /// Whether the batch holds no record.
    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.len() == HEADER
    }

    /// Whether a record of `bytes` more fits; a record always fits an empty batch.
    fn fits(&self, bytes: usize) -> bool {
        self.is_empty() || self.bytes.len() - HEADER + bytes <= self.batch_bytes
    }

    /// Whether a data tuple of `len` encoded bytes fits now.
    pub(crate) fn fits_tuple(&self, framing: &Framing, len: usize) -> bool {
        let prefix = if framing.facade.is_some() {
            0
        } else {
            LEN_PREFIX
        };
        let run = if self.run_at.is_some() { 0 } else { RUN_HEADER };
        self.fits(run + prefix + len)
    }

    /// Whether a part record of `len` bytes fits now.
    pub(crate) fn fits_part(&self, len: usize) -> bool {
        self.fits(PART_HEADER + len)
    }

    /// Whether any record that is not data (punctuation, end) fits now.
    pub(crate) fn fits_control(&self) -> bool {
        self.fits(PUNCTUATION_RECORD)
    }

    /// Appends `tuple`, already encoded (`encoded`), to the batch; the caller checked that it
    /// fits and is no longer than the largest tuple.
    pub(crate) fn push_tuple(&mut self, framing: &Framing, encoded: &[u8]) {
        match self.run_at {
            Some(at) => {
                let count = get_u32(&self.bytes, at + 1) + 1;
                put_u32(&mut self.bytes, at + 1, count);
            }
            None => {
                self.run_at = Some(self.bytes.len());
                self.bytes.push(TAG_DATA);
                self.bytes.extend_from_slice(&1u32.to_le_bytes());
            }
        }
        if framing.facade.is_none() {
            // The caller checked the length against the largest tuple (at most 64 MiB).
            self.bytes
                .extend_from_slice(&(encoded.len() as u32).to_le_bytes());
        }
        self.bytes.extend_from_slice(encoded);
    }

    /// Appends a part of a normal tuple's encoding, `last` if it ends the tuple; the caller
    /// checked that it fits and is [`Framing::part_len`] long.
    pub(crate) fn push_part(&mut self, part: &[u8], last: bool) {
        self.run_at = None;
        self.bytes.push(if last { TAG_LAST } else { TAG_PART });
        // A part is at most the largest tuple (at most 64 MiB).
        self.bytes
            .extend_from_slice(&(part.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(part);
    }

    /// Appends a record that is not data; the caller checked that it fits.
    pub(crate) fn push_control(&mut self, message: Control) {
        self.run_at = None;
        match message {
            Control::Punctuation(punctuation) => {
                self.bytes.push(TAG_PUNCTUATION);
                self.bytes.extend_from_slice(&punctuation.to_wire());
            }
            Control::End => self.bytes.push(TAG_END),
            Control::Abandoned => self.bytes.push(TAG_ABANDONED),
        }
    }

    /// Hands the batch over to be sent and starts an empty one in `spare`.
    pub(crate) fn take(&mut self, spare: Vec<u8>) -> Vec<u8> {
        let full = std::mem::take(&mut self.bytes);
        self.reset(spare);
        full
    }
}

/// A record that is not a tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Control {
    /// A punctuation.
    Punctuation(Punctuation),
    /// The end of the stream.
    End,
    /// The sender went away without ending its stream.
    Abandoned,
}

/// How a decoded batch ends its sender's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The stream goes on.
    Open,
    /// The batch ended with the end of the stream.
    Ended,
    /// The batch says the sender went away without ending its stream.
    Abandoned,
}

/// The sender index a batch names, checked to be below `senders`.
pub(crate) fn sender_of(bytes: &[u8], senders: usize) -> Result<usize, RecvError> {
    if bytes.len() <= HEADER {
        return Err(RecvError::Malformed);
    }
    let sender = get_u32(bytes, 0) as usize;
    if sender >= senders {
        return Err(RecvError::Malformed);
    }
    Ok(sender)
}

/// Decodes the records of a whole batch (`bytes`, header included, at most the framing's
/// message limit) into `out`; every length is checked against the batch and the framing
/// before anything is read. An end or abandon record must be the batch's last byte. `parts`
/// is the batch's sender's tuple being reassembled, carried from its earlier batches: while
/// one is, only its next part or an abandon record may follow.
pub(crate) fn decode<T: Tuple>(
    framing: &Framing,
    bytes: &[u8],
    parts: &mut Reassembly,
    out: &mut Vec<Message<T>>,
) -> Result<Ending, RecvError> {
    use RecvError::Malformed;
    let mut at = HEADER;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let tag = rest[0];
        if !parts.is_empty() && !matches!(tag, TAG_PART | TAG_LAST | TAG_ABANDONED) {
            return Err(Malformed);
        }
        match tag {
            TAG_PART | TAG_LAST => {
                if rest.len() < PART_HEADER {
                    return Err(Malformed);
                }
                let len = get_u32(rest, 1) as usize;
                // Fixed-size tuples never come in parts.
                let limit = if framing.facade.is_some() {
                    0
                } else {
                    framing.max_tuple
                };
                if len == 0 || len > limit || len > rest.len() - PART_HEADER {
                    return Err(Malformed);
                }
                let part = &rest[PART_HEADER..PART_HEADER + len];
                if tag == TAG_PART {
                    if !parts.push(part, framing.most_in_parts) {
                        return Err(Malformed);
                    }
                } else {
                    let tuple = parts
                        .finish(part, framing.most_in_parts, T::decode)
                        .ok_or(Malformed)?
                        .map_err(|_| Malformed)?;
                    out.push(Message::Data(tuple));
                }
                at += PART_HEADER + len;
            }
            TAG_DATA => {
                if rest.len() < RUN_HEADER {
                    return Err(Malformed);
                }
                let count = get_u32(rest, 1) as usize;
                let least = count.checked_mul(framing.facade.unwrap_or(LEN_PREFIX));
                if count == 0 || least.is_none_or(|l| l > rest.len() - RUN_HEADER) {
                    return Err(Malformed);
                }
                at += RUN_HEADER;
                for _ in 0..count {
                    let rest = &bytes[at..];
                    let (prefix, len) = match framing.facade {
                        Some(size) => (0, size),
                        None => {
                            if rest.len() < LEN_PREFIX {
                                return Err(Malformed);
                            }
                            (LEN_PREFIX, get_u32(rest, 0) as usize)
                        }
                    };
                    if len > framing.max_tuple || prefix + len > rest.len() {
                        return Err(Malformed);
                    }
                    let tuple = T::decode(&rest[prefix..prefix + len]).map_err(|_| Malformed)?;
                    out.push(Message::Data(tuple));
                    at += prefix + len;
                }
            }
            TAG_PUNCTUATION => {
                let wire = rest.get(1..PUNCTUATION_RECORD).ok_or(Malformed)?;
                let punctuation = Punctuation::from_wire(wire).map_err(|_| Malformed)?;
                out.push(Message::Punctuation(punctuation));
                at += PUNCTUATION_RECORD;
            }
            TAG_END | TAG_ABANDONED if rest.len() != 1 => return Err(Malformed),
            TAG_END => {
                out.push(Message::EndOfStream);
                return Ok(Ending::Ended);
            }
            TAG_ABANDONED => {
                // A tuple cut short by its sender's going away is dropped with it.
                *parts = Reassembly::default();
                return Ok(Ending::Abandoned);
            }
            _ => return Err(Malformed),
        }
    }
    Ok(Ending::Open)
}

/// Encodes `tuple` into `scratch` (cleared first) and checks it against the framing: a
/// fixed-size tuple fits one record; a normal one may be up to [`Framing::most_in_parts`]
/// bytes, in parts if it is longer than the largest tuple ([`Framing::in_parts`]).
pub(crate) fn encode<T: Tuple>(
    framing: &Framing,
    tuple: &T,
    scratch: &mut Vec<u8>,
) -> Result<(), SendError> {
    scratch.clear();
    let unencodable = SendError::Unencodable {
        type_name: std::any::type_name::<T>(),
    };
    tuple.encode(scratch).map_err(|_| unencodable)?;
    if framing.facade.is_some_and(|size| size != scratch.len()) {
        return Err(unencodable);
    }
    let limit = match framing.facade {
        Some(_) => framing.max_tuple,
        None => framing.most_in_parts,
    };
    check_len(scratch.len(), limit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_types::BytesTuple;

    fn framing<T: Tuple>(batch_bytes: usize) -> Framing {
        Framing::new::<T>(&MpiParams {
            batch_bytes,
            credit: 1,
            max_tuple_bytes: 16,
        })
        .unwrap()
    }

    /// Decodes a batch of a sender with no tuple in parts so far.
    fn decode_alone<T: Tuple>(
        framing: &Framing,
        bytes: &[u8],
        out: &mut Vec<Message<T>>,
    ) -> Result<Ending, RecvError> {
        decode(framing, bytes, &mut Reassembly::default(), out)
    }

    fn written<T: Tuple>(framing: &Framing, messages: Vec<Message<T>>) -> Vec<u8> {
        let mut writer = BatchWriter::new(3, framing.records_limit);
        let mut scratch = Vec::new();
        for m in messages {
            match m {
                Message::Data(t) => {
                    encode(framing, &t, &mut scratch).unwrap();
                    assert!(writer.fits_tuple(framing, scratch.len()));
                    writer.push_tuple(framing, &scratch);
                }
                Message::Punctuation(p) => writer.push_control(Control::Punctuation(p)),
                Message::EndOfStream => writer.push_control(Control::End),
            }
        }
        writer.take(Vec::new())
    }

    #[test]
    fn a_batch_reads_back_as_written() {
        let f = framing::<u64>(256);
        let sent = vec![
            Message::Data(1u64),
            Message::Data(2),
            Message::Punctuation(Punctuation::Watermark {
                time: 0x0102_0304_0506_0708,
                from: 0,
            }),
            Message::Punctuation(Punctuation::WindowMarker),
            Message::Data(3),
            Message::Punctuation(Punctuation::Latency(u64::MAX)),
            Message::EndOfStream,
        ];
        let bytes = written(&f, sent.clone());
        assert_eq!(sender_of(&bytes, 4), Ok(3));
        assert_eq!(sender_of(&bytes, 3), Err(RecvError::Malformed));
        let mut out = Vec::new();
        assert_eq!(decode_alone(&f, &bytes, &mut out), Ok(Ending::Ended));
        assert_eq!(out, sent);

        let f = framing::<String>(256);
        let sent = vec![
            Message::Data("ab".to_string()),
            Message::Data(String::new()),
        ];
        let mut out = Vec::new();
        assert_eq!(
            decode_alone(&f, &written(&f, sent.clone()), &mut out),
            Ok(Ending::Open)
        );
        assert_eq!(out, sent);
    }

    #[test]
    fn every_length_is_checked_before_it_is_read() {
        let f = framing::<u64>(256);
        let good = written(&f, vec![Message::Data(7u64), Message::Data(8)]);
        // Every truncation, and every count or tag byte made wrong, is refused, never read
        // past the end.
        for cut in HEADER + 1..good.len() {
            let mut out = Vec::<Message<u64>>::new();
            assert_eq!(
                decode_alone(&f, &good[..cut], &mut out),
                Err(RecvError::Malformed)
            );
        }
        for (at, value) in [
            (HEADER, 9u8),
            (HEADER + 1, 3),
            (HEADER + 1, 0),
            (HEADER + 4, 0xff),
        ] {
            let mut bad = good.clone();
            bad[at] = value;
            let mut out = Vec::<Message<u64>>::new();
            assert_eq!(
                decode_alone(&f, &bad, &mut out),
                Err(RecvError::Malformed),
                "{at}"
            );
        }
        // A normal tuple longer than the largest, and bytes after the end, are refused.
        let f = framing::<String>(256);
        let mut bad = written(&f, vec![Message::Data("x".to_string())]);
        bad[HEADER + RUN_HEADER..HEADER + RUN_HEADER + 4].copy_from_slice(&17u32.to_le_bytes());
        assert_eq!(
            decode_alone(&f, &bad, &mut Vec::<Message<String>>::new()),
            Err(RecvError::Malformed)
        );
        let mut bad = written::<String>(&f, vec![Message::EndOfStream]);
        bad.push(TAG_PUNCTUATION);
        assert_eq!(
            decode_alone(&f, &bad, &mut Vec::<Message<String>>::new()),
            Err(RecvError::Malformed)
        );
    }

    #[test]
    fn a_punctuation_cut_short_or_of_an_unknown_kind_is_malformed() {
        let f = framing::<u64>(256);
        let marker = Message::Punctuation(Punctuation::Latency(5));
        let good = written(&f, vec![marker.clone(), Message::Data(7u64)]);
        let mut out = Vec::new();
        assert_eq!(decode_alone(&f, &good, &mut out), Ok(Ending::Open));
        assert_eq!(out, vec![marker, Message::Data(7)]);
        let kind_at = HEADER + 1;
        let mut unknown_kind = good.clone();
        unknown_kind[kind_at] = 0;
        let mut stray_value =
            written::<u64>(&f, vec![Message::Punctuation(Punctuation::WindowMarker)]);
        stray_value[kind_at + 1] = 1;
        let cases = [
            (
                "cut in its value",
                good[..HEADER + PUNCTUATION_RECORD - 1].to_vec(),
            ),
            ("only its tag", good[..HEADER + 1].to_vec()),
            ("an unknown kind", unknown_kind),
            ("a window marker with a value", stray_value),
        ];
        for (what, bad) in cases {
            assert_eq!(
                decode_alone(&f, &bad, &mut Vec::<Message<u64>>::new()),
                Err(RecvError::Malformed),
                "{what}"
            );
        }
    }

    #[test]
    fn a_batch_fills_up_to_its_budget_and_a_tuple_always_fits_an_empty_one() {
        let f = framing::<[u8; 16]>(36);
        let mut writer = BatchWriter::new(0, 36);
        assert!(writer.fits_tuple(&f, 16));
        writer.push_tuple(&f, &[0; 16]);
        // 21 bytes so far: one more tuple makes 37 > 36, a punctuation record 35.
        assert!(!writer.fits_tuple(&f, 16));
        assert!(writer.fits_control());
        writer.push_control(Control::Punctuation(Punctuation::Latency(1)));
        assert!(!writer.fits_control(), "49 > 36");
        let bytes = writer.take(Vec::new());
        assert_eq!(bytes.len(), HEADER + RUN_HEADER + 16 + PUNCTUATION_RECORD);
        assert!(writer.is_empty() && writer.fits_tuple(&f, 16));
    }

    /// The batches a sender writes for `messages`, a tuple longer than the largest one in
    /// parts, as the sender does: a batch goes when the next record does not fit it.
    fn batches(framing: &Framing, messages: &[Message<BytesTuple>]) -> Vec<Vec<u8>> {
        let mut writer = BatchWriter::new(0, 64);
        let mut out = Vec::new();
        let mut ship = |fits: bool, writer: &mut BatchWriter| {
            if !fits {
                out.push(writer.take(Vec::new()));
            }
        };
        let mut scratch = Vec::new();
        for m in messages {
            match m {
                Message::Data(t) => {
                    encode(framing, t, &mut scratch).unwrap();
                    if framing.in_parts(scratch.len()) {
                        let mut rest = &scratch[..];
                        while !rest.is_empty() {
                            let len = framing.part_len(rest.len());
                            ship(writer.fits_part(len), &mut writer);
                            writer.push_part(&rest[..len], len == rest.len());
                            rest = &rest[len..];
                        }
                    } else {
                        ship(writer.fits_tuple(framing, scratch.len()), &mut writer);
                        writer.push_tuple(framing, &scratch);
                    }
                }
                Message::Punctuation(p) => {
                    ship(writer.fits_control(), &mut writer);
                    writer.push_control(Control::Punctuation(*p));
                }
                Message::EndOfStream => {
                    ship(writer.fits_control(), &mut writer);
                    writer.push_control(Control::End);
                }
            }
        }
        out.push(writer.take(Vec::new()));
        out
    }

    /// Decodes `batches` of one sender in order, the first error ending it.
    fn decode_batches<T: Tuple>(
        framing: &Framing,
        batches: &[Vec<u8>],
    ) -> Result<Vec<Message<T>>, RecvError> {
        let mut parts = Reassembly::default();
        let mut out = Vec::new();
        for batch in batches {
            decode(framing, batch, &mut parts, &mut out)?;
        }
        Ok(out)
    }

    /// A part record: `tag`, the length of `bytes`, `bytes`.
    fn part(tag: u8, bytes: &[u8]) -> Vec<u8> {
        let mut record = vec![tag];
        record.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        record.extend_from_slice(bytes);
        record
    }

    /// A batch of sender 0 holding `records`.
    fn batch(records: &[&[u8]]) -> Vec<u8> {
        [&[0u8; HEADER][..]]
            .iter()
            .chain(records)
            .copied()
            .collect::<Vec<_>>()
            .concat()
    }

    #[test]
    fn a_tuple_longer_than_the_largest_arrives_whole_across_batches() {
        let f = framing::<BytesTuple>(64);
        let tuple = |len: usize| Message::Data(BytesTuple((0..len).map(|i| i as u8).collect()));
        let sent = vec![
            tuple(3),
            tuple(17),
            Message::Punctuation(Punctuation::Latency(4)),
            tuple(16),
            tuple(200),
            tuple(33),
            tuple(0),
            Message::EndOfStream,
        ];
        let written = batches(&f, &sent);
        assert!(written.len() > 4, "the parts span batches");
        assert!(written.iter().all(|b| b.len() <= f.message_limit()));
        assert_eq!(decode_batches(&f, &written), Ok(sent));
    }

    #[test]
    fn a_part_out_of_place_or_of_a_wrong_length_is_malformed() {
        let f = framing::<BytesTuple>(64);
        let data = [TAG_DATA, 1, 0, 0, 0, 1, 0, 0, 0, b'x'];
        let punctuation = [&[TAG_PUNCTUATION][..], &Punctuation::Latency(1).to_wire()].concat();
        let cases: [(&str, Vec<Vec<u8>>); 10] = [
            (
                "a data run between parts",
                vec![batch(&[&part(TAG_PART, b"ab"), &data])],
            ),
            (
                "a data run in the batch after a part",
                vec![batch(&[&part(TAG_PART, b"ab")]), batch(&[&data])],
            ),
            (
                "a punctuation between parts",
                vec![batch(&[&part(TAG_PART, b"ab"), &punctuation])],
            ),
            (
                "an end between parts",
                vec![batch(&[&part(TAG_PART, b"ab"), &[TAG_END]])],
            ),
            ("an empty part", vec![batch(&[&part(TAG_PART, &[])])]),
            ("an empty last part", vec![batch(&[&part(TAG_LAST, &[])])]),
            (
                "a part longer than the largest tuple",
                vec![batch(&[&part(TAG_PART, &[1; 17])])],
            ),
            (
                "a part cut short",
                vec![batch(&[&part(TAG_LAST, b"abcdef")[..PART_HEADER + 3]])],
            ),
            (
                "a part's length cut short",
                vec![batch(&[&part(TAG_LAST, b"a")[..3]])],
            ),
            (
                "parts longer than the longest tuple",
                vec![
                    batch(&[&part(TAG_PART, &[1; 16])]),
                    batch(&[&part(TAG_PART, &[1; 16])]),
                    batch(&[&part(TAG_LAST, &[1; 9])]),
                ],
            ),
        ];
        let f_short = Framing {
            most_in_parts: 40,
            ..f
        };
        for (what, batches) in cases {
            assert_eq!(
                decode_batches::<BytesTuple>(&f_short, &batches),
                Err(RecvError::Malformed),
                "{what}"
            );
        }
        // The same parts within the longest tuple make one.
        let within = [
            batch(&[&part(TAG_PART, &[1; 16])]),
            batch(&[&part(TAG_PART, &[1; 16]), &part(TAG_LAST, &[1; 8])]),
        ];
        assert_eq!(
            decode_batches(&f_short, &within),
            Ok(vec![Message::Data(BytesTuple(vec![1; 40]))])
        );
        // Fixed-size tuples never come in parts, and parts must decode as the edge's type.
        let fixed = framing::<u64>(64);
        assert_eq!(
            decode_batches::<u64>(&fixed, &[batch(&[&part(TAG_LAST, &[1; 8])])]),
            Err(RecvError::Malformed)
        );
        let strings = framing::<String>(64);
        assert_eq!(
            decode_batches::<String>(&strings, &[batch(&[&part(TAG_LAST, &[2, 0xff, 0xfe])])]),
            Err(RecvError::Malformed)
        );
    }

    #[test]
    fn a_sender_gone_between_parts_abandons_its_tuple() {
        let f = framing::<BytesTuple>(64);
        let mut parts = Reassembly::default();
        let mut out = Vec::<Message<BytesTuple>>::new();
        let first = batch(&[&part(TAG_PART, b"abc")]);
        assert_eq!(decode(&f, &first, &mut parts, &mut out), Ok(Ending::Open));
        assert!(!parts.is_empty());
        let last = batch(&[&part(TAG_PART, b"de"), &[TAG_ABANDONED]]);
        assert_eq!(
            decode(&f, &last, &mut parts, &mut out),
            Ok(Ending::Abandoned)
        );
        assert!(parts.is_empty() && out.is_empty());
    }

    #[test]
    fn a_fixed_size_tuple_larger_than_the_largest_is_refused_and_a_normal_one_only_past_the_longest(
    ) {
        let fixed = Framing {
            max_tuple: 4,
            ..framing::<u64>(64)
        };
        assert_eq!(
            encode(&fixed, &7u64, &mut Vec::new()),
            Err(SendError::TooLarge { tuple: 8, slot: 4 })
        );
        let f = Framing {
            most_in_parts: 40,
            ..framing::<BytesTuple>(64)
        };
        assert_eq!(
            encode(&f, &BytesTuple(vec![0; 40]), &mut Vec::new()),
            Ok(())
        );
        assert_eq!(
            encode(&f, &BytesTuple(vec![0; 41]), &mut Vec::new()),
            Err(SendError::TooLarge {
                tuple: 41,
                slot: 40
            })
        );
    }
}
