//! The header at the start of every shared segment: its byte layout, drawn here, with every
//! offset a named constant checked against the `#[repr(C)]` struct at compile time.
//!
//! ```text
//!  0               8       12      16              24      28      32
//!  +---------------+-------+-------+---------------+-------+-------+
//!  | magic         | hdr   | layout| kind          | pid   | rsvd  |
//!  | "SLUICESG"    | ver   | ver   | 8 bytes, NUL- | of the| zero  |
//!  |               | u32   | u32   | padded ASCII  |creator|       |
//!  +---------------+-------+-------+---------------+-------+-------+
//!  32              40              48              56              64
//!  +---------------+---------------+---------------+---------------+
//!  | capacity[0]   | capacity[1]   | data_offset   | data_len      |
//!  | u64           | u64           | u64 (= 64)    | u64           |
//!  +---------------+---------------+---------------+---------------+
//!  64                                                64 + data_len
//!  +--------------------------------------------------+
//!  | data area: data_len bytes, 64-byte aligned,      |
//!  | zero-filled at creation, laid out by its owner   |
//!  +--------------------------------------------------+
//! ```
//!
//! | offset | size | field            | meaning                                                 |
//! |-------:|-----:|------------------|---------------------------------------------------------|
//! |      0 |    8 | `magic`          | [`MAGIC`]: this file is a Sluice segment                 |
//! |      8 |    4 | `header_version` | [`HEADER_VERSION`]: the layout of these 64 bytes         |
//! |     12 |    4 | `layout_version` | the owner's version of the data area's layout           |
//! |     16 |    8 | `kind`           | what the data area holds, e.g. `vegaspsc`               |
//! |     24 |    4 | `creator_pid`    | the process that created the segment (for stale removal) |
//! |     28 |    4 | `reserved`       | zero                                                    |
//! |     32 |   16 | `capacities`     | two capacities the owner defines (e.g. slots, slot size) |
//! |     48 |    8 | `data_offset`    | [`DATA_OFFSET`]: where the data area starts              |
//! |     56 |    8 | `data_len`       | how many bytes the data area has                        |
//!
//! Integers are in the host's byte order: a segment never leaves the machine that made it.
//! The magic and the header version sit at fixed offsets in every header version, so a reader
//! can always tell a segment of another version from a file that is no segment at all.
//!
//! The header is written once, before the segment gets its public name, and never changes:
//! it needs no atomics.

use bytemuck::{Pod, Zeroable};
use std::mem::{align_of, offset_of, size_of};

/// The first 8 bytes of every segment: `"SLUICESG"` as a little-endian `u64`, so the file
/// starts with those letters on the usual (little-endian) hosts.
pub const MAGIC: u64 = u64::from_le_bytes(*b"SLUICESG");
/// The version of this header's layout; bumped whenever a field moves or changes meaning.
pub const HEADER_VERSION: u32 = 1;

/// The length of the header, a whole number of cache lines.
pub const HEADER_LEN: usize = 64;
/// Where the data area starts in the file (and in every mapping of it).
pub const DATA_OFFSET: usize = HEADER_LEN;
/// The alignment the data area is guaranteed to have in every mapping.
pub const DATA_ALIGN: usize = 64;
/// How many owner-defined capacities the header records.
pub const CAPACITY_COUNT: usize = 2;
/// How many bytes the kind tag has.
pub const KIND_LEN: usize = 8;

/// Offset of `magic` (`u64`).
pub const MAGIC_OFFSET: usize = 0;
/// Offset of `header_version` (`u32`).
pub const HEADER_VERSION_OFFSET: usize = 8;
/// Offset of `layout_version` (`u32`).
pub const LAYOUT_VERSION_OFFSET: usize = 12;
/// Offset of `kind` (`[u8; 8]`).
pub const KIND_OFFSET: usize = 16;
/// Offset of `creator_pid` (`u32`).
pub const CREATOR_PID_OFFSET: usize = 24;
/// Offset of `reserved` (`u32`, zero).
pub const RESERVED_OFFSET: usize = 28;
/// Offset of `capacities` (`[u64; 2]`).
pub const CAPACITIES_OFFSET: usize = 32;
/// Offset of `data_offset` (`u64`).
pub const DATA_OFFSET_FIELD_OFFSET: usize = 48;
/// Offset of `data_len` (`u64`).
pub const DATA_LEN_OFFSET: usize = 56;

/// The header as it lies in the file. Read and written whole, with `pread`/`pwrite`, as plain
/// old data: no field is ever accessed through the mapping.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct SegmentHeader {
    pub(crate) magic: u64,
    pub(crate) header_version: u32,
    pub(crate) layout_version: u32,
    pub(crate) kind: [u8; KIND_LEN],
    pub(crate) creator_pid: u32,
    pub(crate) reserved: u32,
    pub(crate) capacities: [u64; CAPACITY_COUNT],
    pub(crate) data_offset: u64,
    pub(crate) data_len: u64,
}

const _: () = assert!(size_of::<SegmentHeader>() == HEADER_LEN);
const _: () = assert!(DATA_ALIGN.is_power_of_two());
const _: () = assert!(HEADER_LEN & (DATA_ALIGN - 1) == 0);
const _: () = assert!(DATA_OFFSET & (DATA_ALIGN - 1) == 0);
// Mappings start on a page boundary, which is a multiple of `DATA_ALIGN`; the struct itself
// is read by value, so it needs no alignment beyond its fields'.
const _: () = assert!(4096 & (DATA_ALIGN - 1) == 0);
const _: () = assert!(align_of::<SegmentHeader>() <= DATA_ALIGN);
const _: () = assert!(offset_of!(SegmentHeader, magic) == MAGIC_OFFSET);
const _: () = assert!(offset_of!(SegmentHeader, header_version) == HEADER_VERSION_OFFSET);
const _: () = assert!(offset_of!(SegmentHeader, layout_version) == LAYOUT_VERSION_OFFSET);
const _: () = assert!(offset_of!(SegmentHeader, kind) == KIND_OFFSET);
const _: () = assert!(offset_of!(SegmentHeader, creator_pid) == CREATOR_PID_OFFSET);
const _: () = assert!(offset_of!(SegmentHeader, reserved) == RESERVED_OFFSET);
const _: () = assert!(offset_of!(SegmentHeader, capacities) == CAPACITIES_OFFSET);
const _: () = assert!(offset_of!(SegmentHeader, data_offset) == DATA_OFFSET_FIELD_OFFSET);
const _: () = assert!(offset_of!(SegmentHeader, data_len) == DATA_LEN_OFFSET);
const _: () = assert!(DATA_LEN_OFFSET + size_of::<u64>() == HEADER_LEN);

impl SegmentHeader {
    /// The header bytes, ready to be written at offset 0.
    pub(crate) fn to_bytes(self) -> [u8; HEADER_LEN] {
        bytemuck::cast(self)
    }

    /// A header from the first [`HEADER_LEN`] bytes of a file; any bytes make a value, which
    /// the caller then checks field by field.
    pub(crate) fn from_bytes(bytes: [u8; HEADER_LEN]) -> Self {
        bytemuck::cast(bytes)
    }

    /// Whether the magic and header version say this is a header of the layout drawn above.
    pub(crate) fn is_current(&self) -> bool {
        self.magic == MAGIC && self.header_version == HEADER_VERSION
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_and_put_each_field_at_its_offset() {
        let header = SegmentHeader {
            magic: MAGIC,
            header_version: HEADER_VERSION,
            layout_version: 7,
            kind: *b"vegaspsc",
            creator_pid: 4242,
            reserved: 0,
            capacities: [1024, 64],
            data_offset: DATA_OFFSET as u64,
            data_len: 65536,
        };
        let bytes = header.to_bytes();
        assert_eq!(bytes[MAGIC_OFFSET..MAGIC_OFFSET + 8], MAGIC.to_ne_bytes());
        if cfg!(target_endian = "little") {
            assert_eq!(&bytes[MAGIC_OFFSET..MAGIC_OFFSET + 8], b"SLUICESG");
        }
        assert_eq!(&bytes[KIND_OFFSET..KIND_OFFSET + KIND_LEN], b"vegaspsc");
        assert_eq!(
            bytes[CREATOR_PID_OFFSET..CREATOR_PID_OFFSET + 4],
            4242u32.to_ne_bytes()
        );
        assert_eq!(
            bytes[CAPACITIES_OFFSET + 8..CAPACITIES_OFFSET + 16],
            64u64.to_ne_bytes()
        );
        assert_eq!(SegmentHeader::from_bytes(bytes), header);
        assert!(header.is_current());
    }
}
