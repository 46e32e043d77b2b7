//! The [`Tuple`] trait and its two encodings.
//!
//! A stream is typed: every port declares the Rust type of its tuples, and the graph refuses to
//! connect ports of different types. Crossing a process or host boundary needs bytes, so every
//! tuple type also says how it is encoded:
//!
//! | encoding | types | encode | decode |
//! |---|---|---|---|
//! | facade | `bytemuck::Pod`, fixed size | copy of its bytes | cast in place ([`FacadeTuple::view`]) or copy |
//! | normal | `serde` types | `postcard` | `postcard` |

use std::any::TypeId;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// How a tuple type is laid out when it leaves its process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Encoding {
    /// Fixed-size plain data, read in place; the size in bytes.
    Facade {
        /// Size of one tuple in bytes.
        size: usize,
    },
    /// Serialized, variable size.
    Normal,
}

/// Why bytes could not be turned back into a tuple.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    /// A facade tuple arrived with the wrong number of bytes.
    #[error("facade tuple {type_name} is {expected} bytes, got {actual}")]
    WrongSize {
        /// The tuple type.
        type_name: &'static str,
        /// Its fixed size.
        expected: usize,
        /// The length of the bytes given.
        actual: usize,
    },
    /// A facade tuple's bytes are not aligned for an in-place read.
    #[error("facade tuple {type_name} needs {align}-byte alignment for an in-place read")]
    Misaligned {
        /// The tuple type.
        type_name: &'static str,
        /// The alignment it needs.
        align: usize,
    },
    /// A normal tuple's bytes do not deserialize.
    #[error("normal tuple {type_name} does not deserialize: {reason}")]
    Malformed {
        /// The tuple type.
        type_name: &'static str,
        /// What the codec said.
        reason: String,
    },
}

/// Why a tuple could not be encoded (only normal tuples can fail: serde types the codec
/// cannot express, such as sequences of unknown length).
#[derive(Debug, Error, PartialEq, Eq)]
#[error("tuple {type_name} cannot be encoded: {reason}")]
pub struct EncodeError {
    /// The tuple type.
    pub type_name: &'static str,
    /// What the codec said.
    pub reason: String,
}

/// The description of a tuple type that ports carry and the graph compares.
#[derive(Debug, Clone, Copy)]
pub struct TupleSchema {
    /// The Rust type name, for messages and plans.
    pub type_name: &'static str,
    /// How the tuple is encoded across boundaries.
    pub encoding: Encoding,
    /// Identity of the Rust type, for exact comparison.
    pub type_id: TypeId,
}

impl PartialEq for TupleSchema {
    fn eq(&self, other: &Self) -> bool {
        self.type_id == other.type_id
    }
}

impl Eq for TupleSchema {}

/// A value that can travel along a stream.
///
/// Implement it with [`facade_tuple!`](crate::facade_tuple) for `bytemuck::Pod` types or with
/// [`normal_tuple!`](crate::normal_tuple) for `serde` types.
pub trait Tuple: Clone + Send + 'static {
    /// How this type is encoded.
    const ENCODING: Encoding;

    /// Appends the encoded bytes of `self` to `out`.
    fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError>;

    /// Rebuilds a tuple from bytes made by [`Tuple::encode`].
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError>;

    /// The encoding itself, borrowed, when this type's bytes are its encoding (facade
    /// tuples): a transport then copies them straight into a slot of shared memory, with no
    /// intermediate buffer and with a copy of its own choosing. `None` (what types whose
    /// encoding must be made keep) means: use [`Tuple::encode`].
    #[inline]
    fn wire_bytes(&self) -> Option<&[u8]> {
        None
    }

    /// The schema ports of this type carry.
    fn schema() -> TupleSchema {
        TupleSchema {
            type_name: std::any::type_name::<Self>(),
            encoding: Self::ENCODING,
            type_id: TypeId::of::<Self>(),
        }
    }
}

/// A facade tuple: its bytes are its wire form, so it can be read in place.
pub trait FacadeTuple: Tuple + bytemuck::Pod {
    /// Borrows a tuple directly from `bytes`, without copying.
    fn view(bytes: &[u8]) -> Result<&Self, DecodeError> {
        let expected = std::mem::size_of::<Self>();
        if bytes.len() != expected {
            return Err(DecodeError::WrongSize {
                type_name: std::any::type_name::<Self>(),
                expected,
                actual: bytes.len(),
            });
        }
        bytemuck::try_from_bytes(bytes).map_err(|_| DecodeError::Misaligned {
            type_name: std::any::type_name::<Self>(),
            align: std::mem::align_of::<Self>(),
        })
    }
}

/// Decodes a facade tuple by copying its bytes (alignment does not matter).
#[doc(hidden)]
pub fn decode_facade<T: bytemuck::Pod>(bytes: &[u8]) -> Result<T, DecodeError> {
    let expected = std::mem::size_of::<T>();
    if bytes.len() != expected {
        return Err(DecodeError::WrongSize {
            type_name: std::any::type_name::<T>(),
            expected,
            actual: bytes.len(),
        });
    }
    Ok(bytemuck::pod_read_unaligned(bytes))
}

/// Decodes a normal tuple with the `postcard` codec.
#[doc(hidden)]
pub fn decode_normal<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, DecodeError> {
    postcard::from_bytes(bytes).map_err(|e| DecodeError::Malformed {
        type_name: std::any::type_name::<T>(),
        reason: e.to_string(),
    })
}

/// Encodes a normal tuple with the `postcard` codec, appending to `out`; on failure `out`
/// keeps what it held before.
#[doc(hidden)]
pub fn encode_normal<T: Serialize>(value: &T, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    /// Appends to a borrowed vector, so the codec writes in place.
    struct Append<'a>(&'a mut Vec<u8>);
    impl Extend<u8> for Append<'_> {
        fn extend<I: IntoIterator<Item = u8>>(&mut self, bytes: I) {
            self.0.extend(bytes);
        }
    }
    let before = out.len();
    postcard::to_extend(value, Append(out))
        .map(|_| ())
        .map_err(|e| {
            out.truncate(before);
            EncodeError {
                type_name: std::any::type_name::<T>(),
                reason: e.to_string(),
            }
        })
}

/// Implements [`Tuple`] and [`FacadeTuple`] for `bytemuck::Pod` types.
#[macro_export]
macro_rules! facade_tuple {
    ($($t:ty),+ $(,)?) => {$(
        impl $crate::Tuple for $t {
            const ENCODING: $crate::Encoding =
                $crate::Encoding::Facade { size: ::std::mem::size_of::<$t>() };
            fn encode(&self, out: &mut Vec<u8>) -> Result<(), $crate::EncodeError> {
                out.extend_from_slice($crate::__private::bytemuck::bytes_of(self));
                Ok(())
            }
            #[inline]
            fn wire_bytes(&self) -> Option<&[u8]> {
                Some($crate::__private::bytemuck::bytes_of(self))
            }
            fn decode(bytes: &[u8]) -> Result<Self, $crate::DecodeError> {
                $crate::tuple_codec::decode_facade(bytes)
            }
        }
        impl $crate::FacadeTuple for $t {}
    )+};
}

/// Implements [`Tuple`] for `serde` types, encoded with `postcard`.
#[macro_export]
macro_rules! normal_tuple {
    ($($t:ty),+ $(,)?) => {$(
        impl $crate::Tuple for $t {
            const ENCODING: $crate::Encoding = $crate::Encoding::Normal;
            fn encode(&self, out: &mut Vec<u8>) -> Result<(), $crate::EncodeError> {
                $crate::tuple_codec::encode_normal(self, out)
            }
            fn decode(bytes: &[u8]) -> Result<Self, $crate::DecodeError> {
                $crate::tuple_codec::decode_normal(bytes)
            }
        }
    )+};
}

facade_tuple!((), u8, u16, u32, u64, i32, i64, f32, f64);
normal_tuple!(String, compact_str::CompactString);

/// Implements [`Tuple`] for tuples of `serde` values, encoded with `postcard`, so that
/// `(word, count)` or `(symbol, price, volume)` can travel without a struct of their own.
macro_rules! serde_product_tuple {
    ($($name:ident),+) => {
        impl<$($name),+> Tuple for ($($name,)+)
        where
            $($name: Serialize + serde::de::DeserializeOwned + Clone + Send + 'static),+
        {
            const ENCODING: Encoding = Encoding::Normal;
            fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
                encode_normal(self, out)
            }
            fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
                decode_normal(bytes)
            }
        }
    };
}

serde_product_tuple!(A, B);
serde_product_tuple!(A, B, C);
serde_product_tuple!(A, B, C, D);

/// A facade tuple of exactly `N` bytes; the benchmarks' payload.
///
/// The first eight bytes (when `N >= 8`) can hold a timestamp for latency measurement.
pub type FixedBytes<const N: usize> = [u8; N];

impl<const N: usize> Tuple for [u8; N] {
    const ENCODING: Encoding = Encoding::Facade { size: N };
    fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        out.extend_from_slice(self);
        Ok(())
    }
    #[inline]
    fn wire_bytes(&self) -> Option<&[u8]> {
        Some(self)
    }
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        decode_facade(bytes)
    }
}

impl<const N: usize> FacadeTuple for [u8; N] {}

/// A normal tuple of any number of bytes, encoded as the bytes themselves.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BytesTuple(pub Vec<u8>);

impl Tuple for BytesTuple {
    const ENCODING: Encoding = Encoding::Normal;
    fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        out.extend_from_slice(&self.0);
        Ok(())
    }
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        Ok(Self(bytes.to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
    #[repr(C)]
    struct Quote {
        price: f64,
        size: u32,
        venue: u32,
    }
    crate::facade_tuple!(Quote);

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Trade {
        symbol: String,
        volume: u64,
    }
    crate::normal_tuple!(Trade);

    #[test]
    fn facade_round_trips_and_reads_in_place() {
        let q = Quote {
            price: 1.5,
            size: 7,
            venue: 3,
        };
        let mut bytes = Vec::new();
        q.encode(&mut bytes).unwrap();
        assert_eq!(bytes.len(), 16);
        assert_eq!(Quote::decode(&bytes).unwrap(), q);
        let aligned: Vec<u64> = bytes
            .chunks(8)
            .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        let view = Quote::view(bytemuck::cast_slice(&aligned)).unwrap();
        assert_eq!(*view, q);
        assert_eq!(Quote::ENCODING, Encoding::Facade { size: 16 });
    }

    #[test]
    fn facade_tuples_lend_their_encoding_and_others_decline() {
        let q = Quote {
            price: 2.5,
            size: 1,
            venue: 9,
        };
        let mut encoded = Vec::new();
        q.encode(&mut encoded).unwrap();
        assert_eq!(q.wire_bytes(), Some(&encoded[..]));
        assert_eq!(Quote::decode(q.wire_bytes().unwrap()).unwrap(), q);
        assert_eq!([7u8; 3].wire_bytes(), Some(&[7u8, 7, 7][..]));
        let t = Trade {
            symbol: "IBM".into(),
            volume: 1,
        };
        assert_eq!(t.wire_bytes(), None);
        assert_eq!(BytesTuple(vec![1]).wire_bytes(), None);
    }

    #[test]
    fn facade_refuses_wrong_size() {
        let err = Quote::decode(&[0u8; 15]).unwrap_err();
        assert!(err.to_string().contains("16 bytes, got 15"), "{err}");
    }

    #[test]
    fn normal_round_trips_and_reports_garbage() {
        let t = Trade {
            symbol: "IBM".into(),
            volume: 300,
        };
        let mut bytes = vec![9u8];
        t.encode(&mut bytes).unwrap();
        assert_eq!(Trade::decode(&bytes[1..]).unwrap(), t);
        assert!(matches!(
            Trade::decode(&[0xff]),
            Err(DecodeError::Malformed { .. })
        ));
    }

    #[test]
    fn pairs_and_compact_strings_round_trip() {
        let pair = (compact_str::CompactString::from("word"), 7u64);
        let mut bytes = Vec::new();
        pair.encode(&mut bytes).unwrap();
        assert_eq!(
            <(compact_str::CompactString, u64)>::decode(&bytes).unwrap(),
            pair
        );
        let triple = ("IBM".to_string(), 1.5f64, 3u32);
        bytes.clear();
        triple.encode(&mut bytes).unwrap();
        assert_eq!(<(String, f64, u32)>::decode(&bytes).unwrap(), triple);
    }

    #[test]
    fn schemas_compare_by_type() {
        assert_eq!(u64::schema(), u64::schema());
        assert_ne!(u64::schema(), i64::schema());
        assert_eq!(<[u8; 64]>::schema().encoding, Encoding::Facade { size: 64 });
        assert_eq!(String::schema().encoding, Encoding::Normal);
    }
}
