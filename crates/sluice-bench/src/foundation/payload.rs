//! The tuples a benchmark sends: facade `[u8; N]` for a fixed list of sizes, chosen at run time
//! by dispatching to a const-generic instantiation, or a normal [`BytesTuple`] of any size.
//!
//! A latency tuple carries its send time (nanoseconds of `CLOCK_MONOTONIC`) in its first eight
//! bytes, little-endian.

use std::hint::black_box;

use sluice_types::{BytesTuple, Tuple};

/// The bytes of a latency timestamp at the start of a tuple.
pub const TIMESTAMP_BYTES: usize = 8;

/// A benchmark tuple type.
pub(crate) trait Payload: Tuple + Sync {
    /// A tuple of `size` bytes (facade types have their own size and ignore it).
    fn template(size: usize) -> Self;
    /// Writes `ns` into the first eight bytes; a tuple shorter than that is left alone.
    fn stamp(&mut self, ns: u64);
    /// The timestamp in the first eight bytes; 0 if the tuple is shorter than that.
    fn stamp_of(&self) -> u64;
    /// Reads the tuple so the receiving side cannot be optimised away.
    fn touch(&self);
}

fn pattern(size: usize) -> impl Iterator<Item = u8> {
    (0..size).map(|i| (i % 251) as u8)
}

fn read_stamp(bytes: &[u8]) -> u64 {
    bytes
        .get(..TIMESTAMP_BYTES)
        .and_then(|head| head.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

fn write_stamp(bytes: &mut [u8], ns: u64) {
    if let Some(head) = bytes.get_mut(..TIMESTAMP_BYTES) {
        head.copy_from_slice(&ns.to_le_bytes());
    }
}

impl<const N: usize> Payload for [u8; N] {
    fn template(_size: usize) -> Self {
        let mut t = [0u8; N];
        t.iter_mut().zip(pattern(N)).for_each(|(b, p)| *b = p);
        t
    }

    #[inline]
    fn stamp(&mut self, ns: u64) {
        write_stamp(self, ns);
    }

    #[inline]
    fn stamp_of(&self) -> u64 {
        read_stamp(self)
    }

    #[inline]
    fn touch(&self) {
        black_box(self.last());
    }
}

impl Payload for BytesTuple {
    fn template(size: usize) -> Self {
        BytesTuple(pattern(size).collect())
    }

    #[inline]
    fn stamp(&mut self, ns: u64) {
        write_stamp(&mut self.0, ns);
    }

    #[inline]
    fn stamp_of(&self) -> u64 {
        read_stamp(&self.0)
    }

    #[inline]
    fn touch(&self) {
        black_box((self.0.len(), self.0.last()));
    }
}

/// Something to do with the payload type a size and encoding select.
pub(crate) trait PayloadVisitor {
    /// What the visit returns.
    type Output;
    /// Runs with `P`, whose tuples are `size` bytes.
    fn visit<P: Payload>(self, size: usize) -> Self::Output;
}

macro_rules! facade_sizes {
    ($($n:literal),+ $(,)?) => {
        /// The sizes in bytes a facade benchmark tuple can have.
        pub const SUPPORTED_FACADE_SIZES: &[usize] = &[$($n),+];

        /// Visits `[u8; size]`, or returns the visitor back if `size` is not supported.
        fn visit_facade<V: PayloadVisitor>(size: usize, visitor: V) -> Result<V::Output, V> {
            match size {
                $($n => Ok(visitor.visit::<[u8; $n]>(size)),)+
                _ => Err(visitor),
            }
        }
    };
}

facade_sizes!(4, 8, 16, 22, 32, 64, 108, 128, 256, 512, 1004, 1024, 2048, 4096, 8192, 16384);

/// Whether facade tuples of `size` bytes are supported.
pub fn facade_size_supported(size: usize) -> bool {
    SUPPORTED_FACADE_SIZES.contains(&size)
}

/// The message for an unsupported facade size.
pub(crate) fn unsupported_facade_size(size: usize) -> String {
    let list: Vec<String> = SUPPORTED_FACADE_SIZES
        .iter()
        .map(usize::to_string)
        .collect();
    format!(
        "facade tuples of {size} bytes are not supported; supported sizes: {} (or use --encoding normal for any size)",
        list.join(", ")
    )
}

/// Visits the payload type for `size` bytes: `[u8; size]` when `facade`, else [`BytesTuple`].
pub(crate) fn dispatch<V: PayloadVisitor>(
    facade: bool,
    size: usize,
    visitor: V,
) -> anyhow::Result<V::Output> {
    if !facade {
        return Ok(visitor.visit::<BytesTuple>(size));
    }
    visit_facade(size, visitor).map_err(|_| anyhow::anyhow!(unsupported_facade_size(size)))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct SizeOf;
    impl PayloadVisitor for SizeOf {
        type Output = usize;
        fn visit<P: Payload>(self, size: usize) -> usize {
            let mut t = P::template(size);
            t.stamp(0x0102_0304_0506_0708);
            assert_eq!(t.stamp_of(), 0x0102_0304_0506_0708);
            t.touch();
            let mut bytes = Vec::new();
            t.encode(&mut bytes).unwrap();
            bytes.len()
        }
    }

    #[test]
    fn every_supported_size_dispatches_to_a_tuple_of_that_size() {
        for &size in SUPPORTED_FACADE_SIZES.iter().filter(|&&s| s >= 8) {
            assert_eq!(dispatch(true, size, SizeOf).unwrap(), size);
        }
        assert_eq!(dispatch(false, 100, SizeOf).unwrap(), 100);
        assert_eq!(dispatch(false, 8, SizeOf).unwrap(), 8);
    }

    #[test]
    fn an_unsupported_size_lists_the_supported_ones() {
        let err = dispatch(true, 100, SizeOf).unwrap_err().to_string();
        assert!(err.contains("100 bytes are not supported"), "{err}");
        assert!(err.contains("4, 8, 16, 22, 32, 64, 108"), "{err}");
        assert!(err.contains("16384"), "{err}");
    }

    #[test]
    fn short_tuples_have_no_timestamp_and_do_not_panic() {
        let mut t = <[u8; 4]>::template(4);
        t.stamp(99);
        assert_eq!(t.stamp_of(), 0);
        let mut b = BytesTuple::template(3);
        b.stamp(99);
        assert_eq!(b.stamp_of(), 0);
        assert_eq!(b.0, vec![0, 1, 2]);
    }

    #[test]
    fn the_timestamp_is_little_endian_in_the_first_eight_bytes() {
        let mut t = <[u8; 16]>::template(16);
        t.stamp(1);
        assert_eq!(&t[..8], &[1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(t[8..], [8, 9, 10, 11, 12, 13, 14, 15]);
    }
}
