//! The byte layout of the `tcp` transport (drawn in [`crate::tcp`]): the hello's offsets, the
//! record tags and the frame limits both ends derive from their parameters.

use sluice_types::{Encoding, Punctuation, Tuple};

use super::params::TcpParams;
use super::secret::{JobSecret, SECRET_LEN};
use crate::wire_fields::{get_u32, put, put_u32, Preamble};
use crate::TransportError;

/// The first bytes of every connection.
pub const MAGIC: [u8; 8] = *b"SLUICETP";
/// The wire format's version; bumped whenever anything drawn in [`crate::tcp`] changes.
pub const VERSION: u16 = 3;
/// Bytes in the hello.
pub const HELLO_LEN: usize = SECRET_AT + SECRET_LEN;

/// The hello's first bytes: magic and version.
const PREAMBLE: Preamble<8, 2> = Preamble {
    magic: MAGIC,
    version: VERSION.to_le_bytes(),
};
const RESERVED_AT: usize = 10;
const SENDER_AT: usize = 12;
const ENCODING_AT: usize = 16;
const TUPLE_SIZE_AT: usize = 20;
const FRAME_LIMIT_AT: usize = 24;
pub(crate) const SECRET_AT: usize = 28;
const _: () = assert!(Preamble::<8, 2>::LEN == RESERVED_AT);
const _: () = assert!(HELLO_LEN == 60);

/// The `encoding` field of the hello.
const ENCODING_NORMAL: u32 = 0;
const ENCODING_FACADE: u32 = 1;

/// Bytes of a frame's length prefix.
pub(crate) const FRAME_HEADER: usize = 4;
/// Bytes of a data run's tag and tuple count.
pub(crate) const RUN_HEADER: usize = 5;
/// Bytes of a normal tuple's length prefix.
pub(crate) const LEN_PREFIX: usize = 4;
/// A run of data tuples.
pub(crate) const TAG_DATA: u8 = 1;
/// A punctuation, followed by its wire encoding.
pub(crate) const TAG_PUNCTUATION: u8 = 2;
/// Bytes of a punctuation record: its tag and its wire encoding.
pub(crate) const PUNCTUATION_RECORD: usize = 1 + Punctuation::WIRE_BYTES;
/// The end of the stream.
pub(crate) const TAG_END: u8 = 3;
/// A part of a normal tuple's encoding that is not the last, followed by its length and bytes.
pub(crate) const TAG_PART: u8 = 4;
/// The last part of a normal tuple's encoding, followed by its length and bytes.
pub(crate) const TAG_LAST: u8 = 5;
/// Bytes of a part record's tag and length.
pub(crate) const PART_HEADER: usize = 5;

/// What both ends derive from the tuple type and the parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Framing {
    /// The size of a facade tuple; `None` for normal tuples, which carry their length.
    pub(crate) facade: Option<usize>,
    /// The largest encoded tuple.
    pub(crate) max_tuple: usize,
    /// The largest frame body.
    pub(crate) frame_limit: usize,
}

impl Framing {
    /// The framing of tuples `T` under `params`, which are checked.
    pub(crate) fn new<T: Tuple>(params: &TcpParams) -> Result<Self, TransportError> {
        params.validate()?;
        let facade = match T::ENCODING {
            Encoding::Facade { size: 0 } => {
                // A run of empty tuples would let a few bytes stand for any number of tuples.
                return Err(TransportError::InvalidParameter {
                    transport: "tcp",
                    parameter: "tuple type",
                    reason: format!("{} has no bytes to send", std::any::type_name::<T>()),
                });
            }
            Encoding::Facade { size } => Some(size),
            Encoding::Normal => None,
        };
        // Both are at most MAX_BYTES_PARAMETER (64 MiB), so the sum fits a u32 frame length.
        // A frame holds a run of the largest tuple, and a punctuation record.
        let frame_limit = params
            .batch_bytes
            .max(RUN_HEADER + LEN_PREFIX + params.max_tuple_bytes)
            .max(PUNCTUATION_RECORD);
        Ok(Self {
            facade,
            max_tuple: params.max_tuple_bytes,
            frame_limit,
        })
    }

    /// The hello a sender with this framing writes.
    pub(crate) fn hello(&self, secret: &JobSecret, sender: u32) -> [u8; HELLO_LEN] {
        let mut hello = [0u8; HELLO_LEN];
        PREAMBLE.write(&mut hello);
        put_u32(&mut hello, SENDER_AT, sender);
        let (encoding, size) = self.encoding_fields();
        put_u32(&mut hello, ENCODING_AT, encoding);
        put_u32(&mut hello, TUPLE_SIZE_AT, size);
        put_u32(&mut hello, FRAME_LIMIT_AT, saturating_u32(self.frame_limit));
        put(&mut hello, SECRET_AT, secret.bytes());
        hello
    }

    /// The sender index a hello presents, if a receiver with this framing, `secret` and
    /// `senders` senders may accept it (whether the index is already taken is the receiver's
    /// to check); else why not.
    pub(crate) fn accepts(
        &self,
        hello: &[u8; HELLO_LEN],
        secret: &JobSecret,
        senders: usize,
    ) -> Result<usize, HelloFault> {
        // The secret is checked whatever else is wrong, so the time taken tells nothing (and
        // the peer learns nothing of the fault: it finds its connection closed either way).
        let secret_ok = secret.matches(&hello[SECRET_AT..]);
        if !PREAMBLE.begins(hello) || hello[RESERVED_AT..SENDER_AT] != [0, 0] {
            return Err(HelloFault::NotAHello);
        }
        if !secret_ok {
            return Err(HelloFault::WrongSecret);
        }
        let framing_ok = (get_u32(hello, ENCODING_AT), get_u32(hello, TUPLE_SIZE_AT))
            == self.encoding_fields()
            && get_u32(hello, FRAME_LIMIT_AT) <= saturating_u32(self.frame_limit);
        if !framing_ok {
            return Err(HelloFault::OtherFraming);
        }
        let index = get_u32(hello, SENDER_AT);
        usize::try_from(index)
            .ok()
            .filter(|&i| i < senders)
            .ok_or(HelloFault::NoSuchSender { index, senders })
    }

    fn encoding_fields(&self) -> (u32, u32) {
        match self.facade {
            Some(size) => (ENCODING_FACADE, saturating_u32(size)),
            None => (ENCODING_NORMAL, 0),
        }
    }
}

/// Why a hello was refused; the peer is never told (it finds its connection closed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HelloFault {
    /// Another magic, version or reserved field: not a `tcp` hello of this version.
    #[error("it did not open with a sluice tcp hello of version {VERSION}")]
    NotAHello,
    /// The job's secret was not presented.
    #[error("it did not present the job's secret")]
    WrongSecret,
    /// The secret was right, the tuple encoding or frame limit is not this edge's.
    #[error("its tuple encoding or frame limit is not this edge's")]
    OtherFraming,
    /// The secret was right, the sender index out of range.
    #[error("it claimed sender {index} of an edge of {senders}")]
    NoSuchSender {
        /// The index it presented.
        index: u32,
        /// The edge's senders.
        senders: usize,
    },
}

/// Whether `start`, the first bytes of a connection, may begin a hello: its magic, version
/// and reserved field so far are right.
pub(crate) fn may_be_hello(start: &[u8]) -> bool {
    let mut expected = [0u8; SENDER_AT];
    PREAMBLE.write(&mut expected);
    let n = start.len().min(SENDER_AT);
    start[..n] == expected[..n]
}

fn saturating_u32(value: usize) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_types::BytesTuple;

    fn framing<T: Tuple>() -> Framing {
        Framing::new::<T>(&TcpParams::default()).unwrap()
    }

    #[test]
    fn a_hello_is_accepted_only_with_everything_right() {
        let secret = JobSecret::from_bytes([3; SECRET_LEN]);
        let f = framing::<u64>();
        let hello = f.hello(&secret, 2);
        assert_eq!(&hello[..8], b"SLUICETP");
        assert_eq!(f.accepts(&hello, &secret, 3), Ok(2));
        assert_eq!(
            f.accepts(&hello, &secret, 2),
            Err(HelloFault::NoSuchSender {
                index: 2,
                senders: 2
            })
        );
        let wrong = JobSecret::from_bytes([4; SECRET_LEN]);
        assert_eq!(f.accepts(&hello, &wrong, 3), Err(HelloFault::WrongSecret));
        assert_eq!(
            framing::<BytesTuple>().accepts(&hello, &secret, 3),
            Err(HelloFault::OtherFraming),
            "another encoding"
        );
        assert_eq!(
            framing::<u32>().accepts(&hello, &secret, 3),
            Err(HelloFault::OtherFraming),
            "another tuple size"
        );
        for (at, fault) in [
            (0, HelloFault::NotAHello),
            (Preamble::<8, 2>::LEN - 1, HelloFault::NotAHello),
            (RESERVED_AT, HelloFault::NotAHello),
            (FRAME_LIMIT_AT + 3, HelloFault::OtherFraming),
            (SECRET_AT + 5, HelloFault::WrongSecret),
        ] {
            let mut bad = hello;
            bad[at] ^= 0x40;
            assert_eq!(f.accepts(&bad, &secret, 3), Err(fault), "byte {at} changed");
        }
        assert_eq!(
            HelloFault::NoSuchSender {
                index: 7,
                senders: 2
            }
            .to_string(),
            "it claimed sender 7 of an edge of 2"
        );
    }

    #[test]
    fn the_frame_limit_holds_a_batch_and_the_largest_tuple() {
        let params = TcpParams {
            batch_bytes: 100,
            max_tuple_bytes: 1000,
            ..TcpParams::default()
        };
        let f = Framing::new::<u64>(&params).unwrap();
        assert_eq!(f.frame_limit, 1000 + RUN_HEADER + LEN_PREFIX);
        assert_eq!(f.facade, Some(8));
        let bigger = TcpParams {
            batch_bytes: 5000,
            ..params
        };
        assert_eq!(Framing::new::<u64>(&bigger).unwrap().frame_limit, 5000);
    }
}
