//! A part file: one instance's state in one checkpoint, behind a fixed header.
//!
//! ```text
//! offset  size  field (integers little-endian)
//!      0     8  magic           b"SLUICEPT"
//!      8     4  format version  3 (PART_FORMAT)
//!     12     4  reserved        0
//!     16     8  payload length  bytes after the header
//!     24     4  payload crc32   CRC-32 (IEEE) of the payload
//!     28     4  header crc32    CRC-32 of bytes 0..28
//!     32     …  payload         the operator's snapshot, opaque to the store
//! ```
//!
//! The header's own checksum tells a damaged header (a flipped length or version) from a
//! genuine file of a later format; the file's length must be exactly the header's plus the
//! payload length, so a truncated or extended file is refused before its payload is read; and
//! the manifest records each part's length and payload crc32 too, so a part file swapped with
//! another valid one is refused as well.
//!
//! A part's file name is its name (an instance name such as `sum[1]`) with `.part` added and
//! every byte other than an ASCII letter, digit, `_`, `-`, `.`, `[` or `]` written as `%XX`
//! (a leading `.` too, so no part file is hidden): distinct names get distinct files, and no
//! name reaches outside the checkpoint's directory. A name that is empty, `.` or `..`, holds a
//! `/` or a NUL byte, or whose file name would pass [`MAX_PART_FILE_NAME`] bytes is refused.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use crate::error::{RefusedFile, StoreError};
use crate::manifest::PartEntry;

/// The first bytes of every part file.
pub const PART_MAGIC: [u8; 8] = *b"SLUICEPT";
/// The part file format this build writes and reads. The store does not read payloads, but
/// their encoding is versioned here too: 2 since an instance's keyed state is one buffer of
/// keys and states (`sluice_graph::KeyedEntries`) instead of two buffers per key (1), 3 since
/// the keyed state carries the seed of the table it was taken from; so a part of an earlier
/// format is refused naming its version rather than failing to decode.
pub const PART_FORMAT: u32 = 3;
/// The length of a part file's header.
pub const PART_HEADER_LEN: usize = 32;
/// The longest part file name, in bytes: a file name of most file systems holds 255, and the
/// temporary name adds 22.
pub const MAX_PART_FILE_NAME: usize = 200;
/// What a part's file name ends with.
pub const PART_SUFFIX: &str = ".part";

const MAGIC_AT: usize = 0;
const VERSION_AT: usize = 8;
const RESERVED_AT: usize = 12;
const LENGTH_AT: usize = 16;
const PAYLOAD_CRC_AT: usize = 24;
const HEADER_CRC_AT: usize = 28;
const _: () = assert!(HEADER_CRC_AT + 4 == PART_HEADER_LEN);
const _: () = assert!(MAGIC_AT + PART_MAGIC.len() == VERSION_AT);
const _: () = assert!(VERSION_AT + 4 == RESERVED_AT && RESERVED_AT + 4 == LENGTH_AT);
const _: () = assert!(LENGTH_AT + 8 == PAYLOAD_CRC_AT && PAYLOAD_CRC_AT + 4 == HEADER_CRC_AT);

/// How many bytes of a payload are checked at a time when it is verified without being kept.
const VERIFY_CHUNK: usize = 1 << 20;

/// The file name of the part `name`, or why the name is refused.
pub fn part_file_name(name: &str) -> Result<String, StoreError> {
    let refuse = |why: String| StoreError::PartName {
        name: name.to_string(),
        why,
    };
    if name.is_empty() || name == "." || name == ".." {
        return Err(refuse(
            "a part needs a name other than '', '.' or '..'".into(),
        ));
    }
    if name.contains('/') || name.contains('\0') {
        return Err(refuse("it holds a '/' or a NUL byte".into()));
    }
    let mut file = String::with_capacity(name.len() + PART_SUFFIX.len());
    for (i, byte) in name.bytes().enumerate() {
        let kept =
            byte.is_ascii_alphanumeric() || b"_-[]".contains(&byte) || (byte == b'.' && i > 0);
        if kept {
            file.push(char::from(byte));
        } else {
            file.push_str(&format!("%{byte:02X}"));
        }
    }
    file.push_str(PART_SUFFIX);
    if file.len() > MAX_PART_FILE_NAME {
        return Err(refuse(format!(
            "its file name would be {} bytes, over the limit of {MAX_PART_FILE_NAME} (MAX_PART_FILE_NAME)",
            file.len()
        )));
    }
    Ok(file)
}

/// The header of a part file holding `payload`, and the payload's crc32.
pub(crate) fn header(payload: &[u8]) -> ([u8; PART_HEADER_LEN], u32) {
    let crc = crc32fast::hash(payload);
    let mut header = [0u8; PART_HEADER_LEN];
    header[MAGIC_AT..VERSION_AT].copy_from_slice(&PART_MAGIC);
    header[VERSION_AT..RESERVED_AT].copy_from_slice(&PART_FORMAT.to_le_bytes());
    header[LENGTH_AT..PAYLOAD_CRC_AT].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    header[PAYLOAD_CRC_AT..HEADER_CRC_AT].copy_from_slice(&crc.to_le_bytes());
    let header_crc = crc32fast::hash(&header[..HEADER_CRC_AT]);
    header[HEADER_CRC_AT..].copy_from_slice(&header_crc.to_le_bytes());
    (header, crc)
}

/// The little-endian `u32` at `at`.
fn u32_at(bytes: &[u8; PART_HEADER_LEN], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// How much of a part file is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// The header, the length, and the payload read, checksummed and kept.
    Payload,
    /// The header, the length, and the payload read and checksummed, not kept.
    Checksum,
    /// The header and the length only: the payload is not read. Whoever reads the payload
    /// later checksums it then ([`crate::read_part`]).
    Header,
}

/// Reads and verifies the part file at `path` against its manifest `entry`: header, format,
/// length, and as `check` says the payload's checksum. Returns its payload if `check` is
/// [`Check::Payload`], or why the file is refused.
pub(crate) fn verify_part(
    path: &Path,
    entry: &PartEntry,
    check: Check,
) -> Result<Option<Vec<u8>>, RefusedFile> {
    let refuse = |reason: String| RefusedFile::new(path, reason);
    let read_error = |e: io::Error| refuse(format!("cannot read it: {e}"));
    let mut file = File::open(path).map_err(read_error)?;
    let len = file.metadata().map_err(read_error)?.len();
    if len < PART_HEADER_LEN as u64 {
        return Err(refuse(format!(
            "truncated: {len} bytes, shorter than the {PART_HEADER_LEN}-byte header"
        )));
    }
    let mut bytes = [0u8; PART_HEADER_LEN];
    file.read_exact(&mut bytes).map_err(read_error)?;
    if bytes[MAGIC_AT..VERSION_AT] != PART_MAGIC {
        return Err(refuse(format!(
            "bad magic {:?}: not a Sluice checkpoint part",
            String::from_utf8_lossy(&bytes[MAGIC_AT..VERSION_AT])
        )));
    }
    let header_crc = crc32fast::hash(&bytes[..HEADER_CRC_AT]);
    if header_crc != u32_at(&bytes, HEADER_CRC_AT) {
        return Err(refuse(format!(
            "the header is damaged (its crc32 is {header_crc:08x}, it says {:08x})",
            u32_at(&bytes, HEADER_CRC_AT)
        )));
    }
    let version = u32_at(&bytes, VERSION_AT);
    if version != PART_FORMAT {
        return Err(refuse(format!(
            "format version {version}; this build reads version {PART_FORMAT}"
        )));
    }
    let mut length = [0u8; 8];
    length.copy_from_slice(&bytes[LENGTH_AT..PAYLOAD_CRC_AT]);
    let payload_len = u64::from_le_bytes(length);
    let expected_len = payload_len.checked_add(PART_HEADER_LEN as u64);
    if expected_len != Some(len) {
        let what = if expected_len.is_some_and(|e| len < e) {
            "truncated"
        } else {
            "too long"
        };
        return Err(refuse(format!(
            "{what}: {len} bytes, its header says {PART_HEADER_LEN} + {payload_len}"
        )));
    }
    let payload_crc = u32_at(&bytes, PAYLOAD_CRC_AT);
    if len != entry.bytes || payload_crc != entry.crc32 {
        return Err(refuse(format!(
            "{len} bytes with crc32 {payload_crc:08x}, the manifest says {} bytes with crc32 {:08x}",
            entry.bytes, entry.crc32
        )));
    }
    let mut hasher = crc32fast::Hasher::new();
    let payload = match check {
        Check::Header => return Ok(None),
        Check::Payload => {
            // The length was checked against the file's size: this allocates what is on disk.
            let mut payload = Vec::with_capacity(payload_len as usize);
            file.read_to_end(&mut payload).map_err(read_error)?;
            hasher.update(&payload);
            Some(payload)
        }
        Check::Checksum => {
            let mut chunk = vec![0u8; VERIFY_CHUNK];
            loop {
                let got = file.read(&mut chunk).map_err(read_error)?;
                if got == 0 {
                    break;
                }
                hasher.update(&chunk[..got]);
            }
            None
        }
    };
    let crc = hasher.finalize();
    if crc != payload_crc {
        return Err(refuse(format!(
            "the payload is damaged (its crc32 is {crc:08x}, the header says {payload_crc:08x})"
        )));
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_names_stay_readable() {
        assert_eq!(part_file_name("sum[1]").unwrap(), "sum[1].part");
        assert_eq!(
            part_file_name("word-count.v2").unwrap(),
            "word-count.v2.part"
        );
    }

    #[test]
    fn other_bytes_are_escaped_so_names_do_not_collide() {
        assert_eq!(part_file_name("a b").unwrap(), "a%20b.part");
        assert_eq!(part_file_name("a%20b").unwrap(), "a%2520b.part");
        assert_eq!(part_file_name(".hidden").unwrap(), "%2Ehidden.part");
        assert_eq!(part_file_name("..x").unwrap(), "%2E.x.part");
        assert_eq!(part_file_name("a\\b").unwrap(), "a%5Cb.part");
    }

    #[test]
    fn path_tricks_are_refused() {
        for name in ["", ".", "..", "../x", "a/b", "/etc/passwd", "a\0b"] {
            let error = part_file_name(name).unwrap_err();
            assert!(
                matches!(&error, StoreError::PartName { name: n, .. } if n == name),
                "{name:?}: {error}"
            );
        }
    }

    #[test]
    fn a_name_too_long_is_refused_naming_the_limit() {
        let error = part_file_name(&"x".repeat(MAX_PART_FILE_NAME)).unwrap_err();
        assert!(error.to_string().contains("MAX_PART_FILE_NAME"), "{error}");
        assert!(part_file_name(&"x".repeat(MAX_PART_FILE_NAME - PART_SUFFIX.len())).is_ok());
    }

    #[test]
    fn the_header_checks_itself() {
        let (header, crc) = header(b"state");
        assert_eq!(crc, crc32fast::hash(b"state"));
        assert_eq!(header[..8], PART_MAGIC);
        assert_eq!(
            u32_at(&header, HEADER_CRC_AT),
            crc32fast::hash(&header[..HEADER_CRC_AT])
        );
    }
}
