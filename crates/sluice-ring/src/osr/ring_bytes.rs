//! Access to the OSR ring's byte area: status words as atomics, payload bytes as plain memory.
//!
//! Normal builds read and write the ring's memory directly: a status word is an `AtomicU64`
//! laid over 8 aligned bytes, a payload is a `memcpy`, freeing is a `memset`. The same bytes
//! serve as a status word in one lap and as payload in another; the protocol (module doc of
//! [`super`], "who touches which word") keeps every plain access ordered by happens-before
//! with every other access to those bytes, so mixing the two kinds is sound.
//!
//! Under `cfg(loom)` each 8-byte word is a `loom` atomic (for its status-word role) *and* a
//! `loom` `UnsafeCell` (for its payload role). Every atomic access first registers a read of
//! the cell, and every plain write (payload, zeroing) goes through the cell, so `loom` checks
//! exactly what the real code relies on: no plain write to a word is concurrent with any other
//! access to it. Zeroing also stores 0 into the atomic, which is what a plain write of zeros
//! does to the real word.

#[cfg(not(loom))]
pub(crate) use direct::RingBytes;
#[cfg(loom)]
pub(crate) use model::RingBytes;

#[cfg(not(loom))]
mod direct {
    use std::marker::PhantomData;
    use std::ptr::NonNull;

    use sluice_sync::atomic::AtomicU64;

    /// A view of the ring's data area inside its memory, borrowed from the ring's handle.
    pub(crate) struct RingBytes<'a> {
        base: NonNull<u8>,
        len: usize,
        _memory: PhantomData<&'a [u8]>,
    }

    impl<'a> RingBytes<'a> {
        /// Wraps the `len` bytes at `base`.
        ///
        /// # Safety
        /// `base` is aligned to 8, `len` is a power of two of at least 8, and the bytes stay
        /// valid, readable and writable (through `UnsafeCell` or shared memory) for `'a`;
        /// everybody else touches them only through the OSR protocol.
        #[inline(always)]
        pub(crate) unsafe fn new(base: NonNull<u8>, len: usize) -> Self {
            debug_assert!(len.is_power_of_two() && len >= 8);
            debug_assert_eq!(base.as_ptr() as usize & 7, 0);
            Self {
                base,
                len,
                _memory: PhantomData,
            }
        }

        /// The status word at ring offset `off` (taken modulo the ring and rounded down to a
        /// word, so it is always in bounds).
        #[inline(always)]
        pub(crate) fn word(&self, off: u64) -> &'a AtomicU64 {
            let off = (off as usize) & (self.len - 1) & !7;
            // SAFETY: `off + 8 <= len` by the mask, and `base + off` is 8-aligned (base is
            // 8-aligned, `off` a multiple of 8), which `AtomicU64` needs; the bytes live for `'a`
            // (contract of `new`); `AtomicU64` has the size of `u64` and every bit
            // pattern is a valid value; the protocol never lets a plain write to these bytes
            // run concurrently with this atomic access.
            unsafe { &*(self.base.as_ptr().add(off) as *const AtomicU64) }
        }

        /// Panics unless `off..off + len` lies inside the ring: the one check that turns any
        /// length read from (untrusted) memory into a refusal instead of an out-of-bounds
        /// access.
        #[inline(always)]
        fn check(&self, off: u64, len: usize) -> usize {
            let off = usize::try_from(off).unwrap_or(usize::MAX);
            assert!(
                off <= self.len && len <= self.len - off,
                "OSR ring access {off}+{len} outside {} bytes",
                self.len
            );
            off
        }

        /// Copies `src` to ring offset `off`.
        ///
        /// # Safety
        /// The caller has claimed `off..off + src.len()` (see the module doc of [`super`]):
        /// nobody else accesses those bytes until the caller publishes them.
        #[inline(always)]
        pub(crate) unsafe fn write(&self, off: u64, src: &[u8]) {
            let off = self.check(off, src.len());
            // SAFETY: in bounds (checked); exclusive by the caller's contract; `src` is a
            // separate borrow, so the ranges do not overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), self.base.as_ptr().add(off), src.len())
            }
        }

        /// Gives `f` the `len` bytes at ring offset `off` to write in place.
        ///
        /// # Safety
        /// As for [`RingBytes::write`]: the caller has claimed the bytes.
        #[inline(always)]
        pub(crate) unsafe fn write_with<R>(
            &self,
            off: u64,
            len: usize,
            f: impl FnOnce(&mut [u8]) -> R,
        ) -> R {
            let off = self.check(off, len);
            // SAFETY: in bounds (checked), initialised, and exclusive for as long as the slice
            // lives (contract).
            f(unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(off), len) })
        }

        /// Gives `f` the `len` bytes at ring offset `off`.
        ///
        /// # Safety
        /// Nobody writes those bytes while `f` runs (the record is published `Ready` and its
        /// producer is done with it).
        #[inline(always)]
        pub(crate) unsafe fn read<R>(&self, off: u64, len: usize, f: impl FnOnce(&[u8]) -> R) -> R {
            let off = self.check(off, len);
            // SAFETY: in bounds (checked), initialised (the memory is zeroed at creation and
            // only ever written with bytes), and not written while the slice lives (contract).
            f(unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(off), len) })
        }

        /// Zeroes the `len` bytes at ring offset `off`.
        ///
        /// # Safety
        /// Nobody else accesses those bytes until the consumer publishes its new read position
        /// (they are consumed and not yet handed back to producers).
        #[inline(always)]
        pub(crate) unsafe fn zero(&self, off: u64, len: usize) {
            let off = self.check(off, len);
            // SAFETY: in bounds (checked) and exclusive (contract).
            unsafe { std::ptr::write_bytes(self.base.as_ptr().add(off), 0, len) }
        }
    }
}

#[cfg(loom)]
mod model {
    use sluice_sync::atomic::{AtomicU64, Ordering};
    use sluice_sync::cell::UnsafeCell;

    /// One ring word in the model: its status-word role and its payload role.
    struct ModelWord {
        atomic: AtomicU64,
        cell: UnsafeCell<[u8; 8]>,
    }

    /// The model's data area.
    pub(crate) struct RingBytes {
        words: Box<[ModelWord]>,
        len: usize,
    }

    impl RingBytes {
        /// A zeroed area of `len` bytes.
        pub(crate) fn new_for_model(len: usize) -> Self {
            assert!(len.is_power_of_two() && len >= 8);
            Self {
                words: (0..len / 8)
                    .map(|_| ModelWord {
                        atomic: AtomicU64::new(0),
                        cell: UnsafeCell::new([0; 8]),
                    })
                    .collect(),
                len,
            }
        }

        pub(crate) fn word(&self, off: u64) -> &AtomicU64 {
            let w = &self.words[((off as usize) & (self.len - 1)) / 8];
            // A status-word access reads the word: register it so loom flags a concurrent
            // plain write.
            w.cell.with(|_| ());
            &w.atomic
        }

        fn check(&self, off: u64, len: usize) -> usize {
            let off = off as usize;
            assert!(off <= self.len && len <= self.len - off);
            off
        }

        /// # Safety
        /// As for the normal build: the caller has claimed the bytes.
        pub(crate) unsafe fn write(&self, off: u64, src: &[u8]) {
            let off = self.check(off, src.len());
            for (i, b) in src.iter().enumerate() {
                let at = off + i;
                // SAFETY: loom checks the claim: a concurrent access to this word panics.
                self.words[at / 8]
                    .cell
                    .with_mut(|p| unsafe { (*p)[at % 8] = *b });
            }
        }

        /// # Safety
        /// As for the normal build: the caller has claimed the bytes.
        pub(crate) unsafe fn write_with<R>(
            &self,
            off: u64,
            len: usize,
            f: impl FnOnce(&mut [u8]) -> R,
        ) -> R {
            // SAFETY: the caller's claim covers both the read-back and the write.
            let mut copy = unsafe { self.read(off, len, |b| b.to_vec()) };
            let r = f(&mut copy);
            // SAFETY: as above.
            unsafe { self.write(off, &copy) };
            r
        }

        /// # Safety
        /// As for the normal build: the bytes are published and not written meanwhile.
        pub(crate) unsafe fn read<R>(&self, off: u64, len: usize, f: impl FnOnce(&[u8]) -> R) -> R {
            let off = self.check(off, len);
            let mut copy = Vec::with_capacity(len);
            for at in off..off + len {
                // SAFETY: loom checks that no write is concurrent with this read.
                copy.push(self.words[at / 8].cell.with(|p| unsafe { (*p)[at % 8] }));
            }
            f(&copy)
        }

        /// # Safety
        /// As for the normal build: the bytes are consumed and not yet handed back.
        pub(crate) unsafe fn zero(&self, off: u64, len: usize) {
            let off = self.check(off, len);
            debug_assert!((off | len) & 7 == 0);
            for w in &self.words[off / 8..(off + len) / 8] {
                // SAFETY: loom checks exclusivity.
                w.cell.with_mut(|p| unsafe { *p = [0; 8] });
                // The real code's plain write of zeros also sets the status-word view to 0.
                // SYNC: published by the consumer's Release store of `read_pos`, like the
                // plain write it models.
                w.atomic.store(0, Ordering::Relaxed);
            }
        }
    }
}
