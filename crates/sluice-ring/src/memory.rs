//! Where a ring's bytes live: on the heap (tests, threads of one process, Miri) or in a shared
//! segment mapped by several processes (`sluice-shm`). A ring is written once, generic over
//! [`RingMemory`], so the code the tests check is the code processes run.
//!
//! Layout conventions every ring follows: a `#[repr(C)]` header of atomics at offset 0, each
//! side's fields on their own cache line, then the ring's data area, all offsets multiples of
//! [`CACHE_LINE`]. The header never holds pointers: another process maps the same bytes at
//! another address.

use std::ptr::NonNull;

/// The cache-line size every layout aligns to.
pub const CACHE_LINE: usize = 64;

/// A block of bytes a ring is laid out in.
///
/// # Safety
/// Implementors guarantee that [`RingMemory::base`] points to [`RingMemory::len`] bytes that
/// are aligned to [`CACHE_LINE`], readable and writable, never moved or unmapped while the
/// value lives, and zero-filled when the block is new. Other users of the same bytes (other
/// threads or processes) touch them only through the ring protocols.
pub unsafe trait RingMemory: Send + Sync {
    /// The first byte.
    fn base(&self) -> NonNull<u8>;
    /// How many bytes there are.
    fn len(&self) -> usize;
    /// Whether the block is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One cache line of heap memory; the unit [`HeapMemory`] is allocated in, so the block is
/// aligned.
#[repr(C, align(64))]
struct Line(std::cell::UnsafeCell<[u8; CACHE_LINE]>);

const _: () = assert!(std::mem::size_of::<Line>() == CACHE_LINE);
const _: () = assert!(std::mem::align_of::<Line>() == CACHE_LINE);

/// Zeroed, cache-line aligned heap memory.
pub struct HeapMemory {
    lines: Box<[Line]>,
}

// SAFETY: the bytes are only reached through raw pointers handed to ring code, which
// synchronises every access by its protocol (the same argument as for shared memory between
// processes); the box itself is never reallocated.
unsafe impl Send for HeapMemory {}
// SAFETY: as above.
unsafe impl Sync for HeapMemory {}

impl HeapMemory {
    /// At least `len` zeroed bytes (rounded up to whole cache lines).
    pub fn zeroed(len: usize) -> Self {
        let lines = len.div_ceil(CACHE_LINE);
        Self {
            lines: (0..lines)
                .map(|_| Line(std::cell::UnsafeCell::new([0; CACHE_LINE])))
                .collect(),
        }
    }
}

// SAFETY: the boxed slice of `Line`s is aligned to 64, zeroed at creation, lives and stays in
// place as long as `self`, and `UnsafeCell` makes writes through the pointer legal.
unsafe impl RingMemory for HeapMemory {
    fn base(&self) -> NonNull<u8> {
        let ptr = self.lines.as_ptr() as *mut u8;
        NonNull::new(ptr).unwrap_or(NonNull::dangling())
    }

    fn len(&self) -> usize {
        self.lines.len() * CACHE_LINE
    }
}

// SAFETY: a `Segment`'s data area starts 64 bytes into a page-aligned mapping (so it is
// aligned to `CACHE_LINE`), spans `len()` bytes, is zero-filled when the segment is created,
// and stays mapped at the same address until the `Segment` is dropped; `Segment` is
// `Send + Sync` and hands out only raw pointers, so every access goes through the rings'
// protocols, the same as for another process mapping the file.
unsafe impl RingMemory for sluice_shm::Segment {
    fn base(&self) -> NonNull<u8> {
        sluice_shm::Segment::base(self)
    }

    fn len(&self) -> usize {
        sluice_shm::Segment::len(self)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn heap_memory_is_aligned_zeroed_and_rounded_up() {
        let m = HeapMemory::zeroed(100);
        assert_eq!(m.len(), 128);
        assert_eq!(m.base().as_ptr() as usize % CACHE_LINE, 0);
        // SAFETY: `base` points to `len` initialised bytes we own exclusively here.
        let bytes = unsafe { std::slice::from_raw_parts(m.base().as_ptr(), m.len()) };
        assert!(bytes.iter().all(|b| *b == 0));
    }
}
