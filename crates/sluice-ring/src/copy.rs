//! Copying a tuple's bytes into or out of a slot without falling into the C library's slow
//! case for large copies.
//!
//! glibc copies blocks of a few KiB and more with `rep movsb`, and `rep movsb` crawls when the
//! destination lies a few bytes past the source modulo 4 KiB: its stores and the loads that
//! follow them share their low twelve address bits, and the core stalls each load behind a
//! store it does not really depend on (4K aliasing). Measured on the development machine
//! (glibc 2.36; a Xeon and an AMD EPYC alike), a 16 KiB `memcpy` ran at 16-23 Gbit/s with
//! the destination 8 to 24 bytes past the source, against 300-500 Gbit/s elsewhere; a plain
//! loop of 16-byte vector loads and stores ran at 200-290 Gbit/s at those distances.
//!
//! A ring picks neither address: the source is wherever the caller keeps its tuple and the
//! slot moves on with every tuple, so with 16 KiB tuples a run of the benchmark met the slow
//! distance in a couple of slots of every 64 (each costing as much as 25 fast ones).
//! [`copy_bytes`] therefore checks the distance of every large copy and takes the vector
//! loop in the slow band, `memcpy` everywhere else. It is hand-written because the fix is
//! exactly the choice of instructions that `copy_from_slice` hides.

/// Copies shorter than this never reach `rep movsb` (glibc's threshold is 2 KiB or more).
const LARGE_COPY_BYTES: usize = 1024;
/// The aliasing window: the distance from source to destination is taken modulo this.
const PAGE_BYTES: usize = 4096;
/// Distances (destination past source, modulo [`PAGE_BYTES`]) from 1 up to this are slow.
const SLOW_DISTANCE_BYTES: usize = 64;

/// Copies `src` into `dst` (of the same length), avoiding `memcpy`'s 4K-aliasing slow case.
///
/// # Panics
/// If the lengths differ, as `copy_from_slice` does.
#[inline]
pub fn copy_bytes(dst: &mut [u8], src: &[u8]) {
    if src.len() >= LARGE_COPY_BYTES && slow_for_memcpy(dst.as_ptr().addr(), src.as_ptr().addr()) {
        copy_in_vectors(dst, src);
    } else {
        dst.copy_from_slice(src);
    }
}

/// Whether the address `dst` lies just past `src` modulo a page: `memcpy`'s slow band.
#[inline]
fn slow_for_memcpy(dst: usize, src: usize) -> bool {
    let distance = dst.wrapping_sub(src) % PAGE_BYTES;
    (1..=SLOW_DISTANCE_BYTES).contains(&distance)
}

/// Copies forward in 64-byte blocks of four 16-byte loads then four stores, then the tail.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
fn copy_in_vectors(dst: &mut [u8], src: &[u8]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128};

    assert_eq!(dst.len(), src.len(), "copy_bytes: lengths differ");
    let mut to = dst.chunks_exact_mut(64);
    let mut from = src.chunks_exact(64);
    for (to, from) in (&mut to).zip(&mut from) {
        let (load, store) = (
            from.as_ptr().cast::<__m128i>(),
            to.as_mut_ptr().cast::<__m128i>(),
        );
        // SAFETY: `from` and `to` are 64 bytes each (chunks_exact), so the four 16-byte
        // reads at `load.add(0..4)` stay within `from` and the four writes at
        // `store.add(0..4)` within `to`; the unaligned forms need no alignment; SSE2 is part
        // of every x86_64 CPU; `to` is a unique borrow, so nothing else reads or writes it.
        unsafe {
            let a = _mm_loadu_si128(load);
            let b = _mm_loadu_si128(load.add(1));
            let c = _mm_loadu_si128(load.add(2));
            let d = _mm_loadu_si128(load.add(3));
            _mm_storeu_si128(store, a);
            _mm_storeu_si128(store.add(1), b);
            _mm_storeu_si128(store.add(2), c);
            _mm_storeu_si128(store.add(3), d);
        }
    }
    to.into_remainder().copy_from_slice(from.remainder());
}

/// Elsewhere the C library's copy has its own strategy; use it.
#[cfg(not(target_arch = "x86_64"))]
fn copy_in_vectors(dst: &mut [u8], src: &[u8]) {
    dst.copy_from_slice(src);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_slow_band_is_just_past_the_source_modulo_a_page() {
        let base = 0x10_0000usize;
        let slow = |d: usize| slow_for_memcpy(base.wrapping_add(d), base);
        assert!(!slow(0));
        assert!(slow(8) && slow(24) && slow(64));
        assert!(!slow(65) && !slow(4095));
        assert!(slow(4096 + 16), "modulo a page");
        assert!(!slow(0usize.wrapping_sub(8)), "before the source is fine");
    }

    proptest! {
        // Small enough for Miri, large enough to take the vector loop with a tail.
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 8 } else { 256 }))]

        #[test]
        fn copies_exactly_at_every_distance(
            len in 0usize..3000,
            src_at in 0usize..128,
            dst_at in 0usize..128,
            seed in any::<u8>(),
        ) {
            let src: Vec<u8> = (0..len + src_at).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect();
            let mut dst = vec![0xAAu8; len + dst_at + 16];
            copy_bytes(&mut dst[dst_at..dst_at + len], &src[src_at..]);
            prop_assert_eq!(&dst[dst_at..dst_at + len], &src[src_at..]);
            prop_assert!(dst[..dst_at].iter().all(|&b| b == 0xAA), "nothing before");
            prop_assert!(dst[dst_at + len..].iter().all(|&b| b == 0xAA), "nothing after");
        }
    }

    #[test]
    fn the_vector_loop_copies_blocks_and_a_tail() {
        let src: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let mut dst = vec![0u8; 1000];
        copy_in_vectors(&mut dst, &src);
        assert_eq!(dst, src);
    }
}
