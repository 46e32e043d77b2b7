//! The byte layout of a `udp-mq` datagram (drawn in [`crate::udp_mq`]): the header's offsets,
//! the record tags, and the checked reading of both.

use sluice_types::Punctuation;

use crate::tcp::JobSecret;
use crate::wire_fields::{get_u16, get_u32, get_u64, put, Preamble};

/// The first bytes of every datagram.
pub const MAGIC: [u8; 4] = *b"SLUQ";
/// The wire format's version; bumped whenever anything drawn in [`crate::udp_mq`] changes.
pub const VERSION: u8 = 2;
/// Bytes in a datagram's header.
pub const HEADER_LEN: usize = FIRST_TUPLE_AT + 8;
/// Bytes in a record's header: its tag and its length.
pub const RECORD_HEADER: usize = 3;

/// A datagram's first bytes: magic and version.
const PREAMBLE: Preamble<4, 1> = Preamble {
    magic: MAGIC,
    version: [VERSION],
};
const RESERVED_AT: usize = 5;
const QUEUE_AT: usize = 6;
const QUEUES_AT: usize = 8;
const COUNT_AT: usize = 10;
const SENDER_AT: usize = 12;
const JOB_AT: usize = 16;
const SEQUENCE_AT: usize = 24;
const FIRST_TUPLE_AT: usize = 32;
const _: () = assert!(Preamble::<4, 1>::LEN == RESERVED_AT);
const _: () = assert!(HEADER_LEN == 40);

/// A data record: a tuple's encoding.
pub(crate) const TAG_DATA: u8 = 1;
/// A punctuation record: the punctuation's index in the sender's stream, then the
/// punctuation's wire encoding.
pub(crate) const TAG_PUNCTUATION: u8 = 2;
/// The end of the sender's stream: how many punctuations it sent.
pub(crate) const TAG_END: u8 = 3;
/// The sender was dropped without ending its stream.
pub(crate) const TAG_GONE: u8 = 4;
/// The payload of an end record, and the start of a punctuation record's: a count.
const COUNTER_LEN: usize = 8;
/// The payload of a punctuation record: its index, then its wire encoding; the longest
/// payload of a record that is not data.
pub(crate) const PUNCTUATION_LEN: usize = COUNTER_LEN + Punctuation::WIRE_BYTES;

/// A datagram's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    /// The sender's queue (socket) the datagram left from.
    pub(crate) queue: u16,
    /// The sender's number of queues.
    pub(crate) queues: u16,
    /// Records in the datagram (0 for a heartbeat).
    pub(crate) count: u16,
    /// The sender's index among the edge's senders.
    pub(crate) sender: u32,
    /// The job's tag.
    pub(crate) job: u64,
    /// The datagram's number on its queue, from 0.
    pub(crate) sequence: u64,
    /// Tuples the sender sent on this queue before this datagram.
    pub(crate) first_tuple: u64,
}

/// Why a datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rejection {
    /// Not ours: another magic, version or job.
    Foreign,
    /// Ours in appearance, but not well formed.
    Malformed,
}

impl Header {
    /// Writes the header into the first [`HEADER_LEN`] bytes of `datagram`.
    pub(crate) fn write(&self, datagram: &mut [u8]) {
        PREAMBLE.write(datagram);
        datagram[RESERVED_AT] = 0;
        put(datagram, QUEUE_AT, &self.queue.to_le_bytes());
        put(datagram, QUEUES_AT, &self.queues.to_le_bytes());
        put(datagram, COUNT_AT, &self.count.to_le_bytes());
        put(datagram, SENDER_AT, &self.sender.to_le_bytes());
        put(datagram, JOB_AT, &self.job.to_le_bytes());
        put(datagram, SEQUENCE_AT, &self.sequence.to_le_bytes());
        put(datagram, FIRST_TUPLE_AT, &self.first_tuple.to_le_bytes());
    }

    /// Reads the header of `datagram` if it is one of job `job`'s.
    pub(crate) fn read(datagram: &[u8], job: u64) -> Result<Self, Rejection> {
        let Some(header) = datagram.get(..HEADER_LEN) else {
            return Err(Rejection::Foreign);
        };
        if !PREAMBLE.begins(header) || get_u64(header, JOB_AT) != job {
            return Err(Rejection::Foreign);
        }
        if header[RESERVED_AT] != 0 {
            return Err(Rejection::Malformed);
        }
        Ok(Self {
            queue: get_u16(header, QUEUE_AT),
            queues: get_u16(header, QUEUES_AT),
            count: get_u16(header, COUNT_AT),
            sender: get_u32(header, SENDER_AT),
            job,
            sequence: get_u64(header, SEQUENCE_AT),
            first_tuple: get_u64(header, FIRST_TUPLE_AT),
        })
    }
}

/// One record of a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record<'a> {
    /// A tuple's encoding.
    Data(&'a [u8]),
    /// A punctuation and its index in the sender's stream.
    Punctuation {
        /// Its index: punctuations the sender sent before it.
        index: u64,
        /// The punctuation.
        punctuation: Punctuation,
    },
    /// The end of the sender's stream and how many punctuations it sent.
    End(u64),
    /// The sender was dropped without ending its stream.
    Gone,
}

/// The records of a datagram's body, checked one by one: every length within the bytes
/// left, exactly `count` records, nothing after the last one, and an end or gone record
/// only last.
pub(crate) struct Records<'a> {
    rest: &'a [u8],
    left: u16,
}

impl<'a> Records<'a> {
    /// The records of `datagram`, whose header says it holds `count`.
    pub(crate) fn of(datagram: &'a [u8], count: u16) -> Self {
        Self {
            rest: datagram.get(HEADER_LEN..).unwrap_or_default(),
            left: count,
        }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, Rejection>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            // Trailing bytes make the datagram malformed; report it once.
            return (!std::mem::take(&mut self.rest).is_empty())
                .then_some(Err(Rejection::Malformed));
        }
        self.left -= 1;
        let record = self.read_one();
        if record.is_err() {
            self.left = 0;
            self.rest = &[];
        }
        Some(record)
    }
}

impl<'a> Records<'a> {
    fn read_one(&mut self) -> Result<Record<'a>, Rejection> {
        let malformed = Err(Rejection::Malformed);
        let Some(head) = self.rest.get(..RECORD_HEADER) else {
            return malformed;
        };
        let (tag, len) = (head[0], usize::from(get_u16(head, 1)));
        let Some(payload) = self.rest.get(RECORD_HEADER..RECORD_HEADER + len) else {
            return malformed;
        };
        self.rest = &self.rest[RECORD_HEADER + len..];
        let last = self.left == 0;
        match (tag, len) {
            (TAG_DATA, _) => Ok(Record::Data(payload)),
            (TAG_PUNCTUATION, PUNCTUATION_LEN) => {
                match Punctuation::from_wire(&payload[COUNTER_LEN..]) {
                    Ok(punctuation) => Ok(Record::Punctuation {
                        index: get_u64(payload, 0),
                        punctuation,
                    }),
                    Err(_) => malformed,
                }
            }
            (TAG_END, COUNTER_LEN) if last => Ok(Record::End(get_u64(payload, 0))),
            (TAG_GONE, 0) if last => Ok(Record::Gone),
            _ => malformed,
        }
    }
}

/// The payload of the punctuation record of `punctuation`, the sender's punctuation number
/// `index`.
pub(crate) fn punctuation_payload(index: u64, punctuation: Punctuation) -> [u8; PUNCTUATION_LEN] {
    let mut payload = [0u8; PUNCTUATION_LEN];
    put(&mut payload, 0, &index.to_le_bytes());
    put(&mut payload, COUNTER_LEN, &punctuation.to_wire());
    payload
}

/// The payload of an end record: how many punctuations the sender sent.
pub(crate) fn end_payload(punctuations: u64) -> [u8; COUNTER_LEN] {
    punctuations.to_le_bytes()
}

/// Appends a record's header to `datagram`; the caller appends its `len` payload bytes.
pub(crate) fn put_record_header(datagram: &mut Vec<u8>, tag: u8, len: u16) {
    datagram.push(tag);
    datagram.extend_from_slice(&len.to_le_bytes());
}

/// The job tag of `secret`: its four 8-byte words folded by exclusive or.
///
/// It is a tag, not a MAC: it keeps other jobs' and stray datagrams out, not an attacker who
/// can read the job's traffic (who could read `tcp`'s hello, which carries the secret, too).
pub fn job_tag(secret: &JobSecret) -> u64 {
    secret
        .bytes()
        .chunks_exact(8)
        .fold(0, |tag, word| tag ^ get_u64(word, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOB: u64 = 0x0123_4567_89ab_cdef;

    fn header(count: u16) -> Header {
        Header {
            queue: 2,
            queues: 4,
            count,
            sender: 7,
            job: JOB,
            sequence: 99,
            first_tuple: 1234,
        }
    }

    fn datagram(count: u16, body: &[u8]) -> Vec<u8> {
        let mut d = vec![0; HEADER_LEN];
        header(count).write(&mut d);
        d.extend_from_slice(body);
        d
    }

    fn records(d: &[u8]) -> Result<Vec<Record<'_>>, Rejection> {
        let h = Header::read(d, JOB)?;
        Records::of(d, h.count).collect()
    }

    #[test]
    fn a_header_round_trips_at_its_drawn_offsets() {
        let d = datagram(3, &[]);
        assert_eq!(&d[..4], b"SLUQ");
        assert_eq!(d[4], VERSION);
        assert_eq!(d[12], 7, "sender");
        assert_eq!(d[24], 99, "sequence");
        assert_eq!(Header::read(&d, JOB), Ok(header(3)));
        assert_eq!(Header::read(&d, JOB + 1), Err(Rejection::Foreign));
        assert_eq!(Header::read(&d[..39], JOB), Err(Rejection::Foreign));
        let mut bad = d.clone();
        bad[RESERVED_AT] = 1;
        assert_eq!(Header::read(&bad, JOB), Err(Rejection::Malformed));
    }

    #[test]
    fn records_are_read_in_order_and_every_length_is_checked() {
        let mut body = Vec::new();
        put_record_header(&mut body, TAG_DATA, 2);
        body.extend_from_slice(b"hi");
        // A watermark, laid out by hand from the diagram: index, kind, value.
        put_record_header(&mut body, TAG_PUNCTUATION, 17);
        body.extend_from_slice(&5u64.to_le_bytes());
        body.push(2);
        body.extend_from_slice(&0x0102_0304_0506_0708u64.to_le_bytes());
        put_record_header(&mut body, TAG_END, 8);
        body.extend_from_slice(&6u64.to_le_bytes());
        let d = datagram(3, &body);
        assert_eq!(
            records(&d),
            Ok(vec![
                Record::Data(b"hi"),
                Record::Punctuation {
                    index: 5,
                    punctuation: Punctuation::Watermark(0x0102_0304_0506_0708)
                },
                Record::End(6)
            ])
        );
        let malformed = Err(Rejection::Malformed);
        assert_eq!(records(&datagram(2, &body)), malformed, "count too small");
        assert_eq!(records(&datagram(4, &body)), malformed, "count too large");
        let mut trailing = d.clone();
        trailing.push(0);
        assert_eq!(records(&trailing), malformed, "a trailing byte");
        assert_eq!(
            records(&d[..d.len() - 1]),
            malformed,
            "a cut record ({} bytes)",
            d.len() - 1
        );
        let mut long = body.clone();
        long[1] = 200;
        assert_eq!(records(&datagram(3, &long)), malformed, "a length too long");
    }

    #[test]
    fn an_end_or_gone_only_last_and_control_records_have_exact_lengths() {
        let mut end_first = Vec::new();
        put_record_header(&mut end_first, TAG_END, 8);
        end_first.extend_from_slice(&[0; 8]);
        put_record_header(&mut end_first, TAG_DATA, 0);
        assert_eq!(records(&datagram(2, &end_first)), Err(Rejection::Malformed));
        let mut gone = Vec::new();
        put_record_header(&mut gone, TAG_GONE, 0);
        assert_eq!(records(&datagram(1, &gone)), Ok(vec![Record::Gone]));
        let mut short = Vec::new();
        put_record_header(&mut short, TAG_PUNCTUATION, 4);
        short.extend_from_slice(&[0; 4]);
        assert_eq!(records(&datagram(1, &short)), Err(Rejection::Malformed));
        let unknown = [9, 0, 0];
        assert_eq!(records(&datagram(1, &unknown)), Err(Rejection::Malformed));
        assert_eq!(records(&datagram(0, &[])), Ok(vec![]), "a heartbeat");
    }

    /// A datagram of one punctuation record whose payload is `payload`.
    fn punctuation_datagram(payload: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        put_record_header(&mut body, TAG_PUNCTUATION, payload.len() as u16);
        body.extend_from_slice(payload);
        datagram(1, &body)
    }

    #[test]
    fn a_punctuation_record_is_read_only_with_its_exact_length_and_a_known_kind() {
        for punctuation in [
            Punctuation::WindowMarker,
            Punctuation::Watermark(u64::MAX),
            Punctuation::Latency(3),
        ] {
            let d = punctuation_datagram(&punctuation_payload(9, punctuation));
            assert_eq!(
                records(&d),
                Ok(vec![Record::Punctuation {
                    index: 9,
                    punctuation
                }])
            );
        }
        let good = punctuation_payload(9, Punctuation::Latency(3));
        let mut long = good.to_vec();
        long.push(0);
        let mut unknown_kind = good;
        unknown_kind[COUNTER_LEN] = 0;
        let mut stray_value = punctuation_payload(9, Punctuation::WindowMarker);
        stray_value[PUNCTUATION_LEN - 1] = 1;
        let cases: [(&str, &[u8]); 5] = [
            ("the index alone (version 1)", &good[..COUNTER_LEN]),
            ("one byte short", &good[..PUNCTUATION_LEN - 1]),
            ("one byte long", &long),
            ("an unknown kind", &unknown_kind),
            ("a window marker with a value", &stray_value),
        ];
        for (what, payload) in cases {
            assert_eq!(
                records(&punctuation_datagram(payload)),
                Err(Rejection::Malformed),
                "{what}"
            );
        }
    }

    #[test]
    fn the_job_tag_folds_the_whole_secret() {
        let a = JobSecret::from_bytes([1; 32]);
        let mut other = [1; 32];
        other[31] = 2;
        let b = JobSecret::from_bytes(other);
        assert_eq!(job_tag(&a), 0);
        assert_ne!(job_tag(&a), job_tag(&b));
    }
}
