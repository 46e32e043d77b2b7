//! The manifest: what a complete checkpoint holds, as JSON a person can read, checksummed.
//!
//! `MANIFEST.json` is the [`Manifest`] wrapped with its file format and a checksum:
//!
//! ```text
//! {
//!   "format": 1,                  MANIFEST_FORMAT: a reader refuses any other
//!   "crc32": 2876123456,          CRC-32 of the manifest serialized compactly (serde_json::to_vec)
//!   "manifest": {
//!     "job": "wordcount-4242", "application": "wordcount", "kind": "checkpoint", "n": 7,
//!     "created_unix_ms": ..., "duration_ms": ..., "alignment_ms": ...,
//!     "plan": "...",
//!     "parts": [ { "name": "sum[1]", "file": "sum[1].part", "bytes": 4128, "crc32": ... }, ... ]
//!   }
//! }
//! ```
//!
//! The file is written pretty-printed and read back only if it is byte for byte what this
//! build writes for the manifest it holds, and the checksum matches: a flipped byte anywhere
//! (even in white space) or a cut-off file is refused, naming the file.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::durable::write_durably;
use crate::error::{RefusedFile, StoreError};

/// The manifest's file name in a checkpoint's directory.
pub const MANIFEST_FILE: &str = "MANIFEST.json";
/// The manifest file format this build writes and reads.
pub const MANIFEST_FORMAT: u32 = 1;
/// The largest manifest read, in bytes (a part takes about 100 bytes of it).
pub const MAX_MANIFEST_BYTES: u64 = 64 << 20;

/// Whether a checkpoint is the coordinator's (retention deletes it in time) or a savepoint
/// (kept until a person deletes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckpointKind {
    /// Taken periodically; the last `retained` complete ones are kept.
    Checkpoint,
    /// Taken on demand and kept forever.
    Savepoint,
}

impl std::fmt::Display for CheckpointKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CheckpointKind::Checkpoint => "checkpoint",
            CheckpointKind::Savepoint => "savepoint",
        })
    }
}

/// One part of a checkpoint as its manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartEntry {
    /// The part's name: the instance whose state it is (`sum[1]`).
    pub name: String,
    /// Its file in the checkpoint's directory ([`crate::part_file_name`] of the name).
    pub file: String,
    /// The file's length, header included.
    pub bytes: u64,
    /// The CRC-32 of its payload.
    pub crc32: u32,
}

/// What a complete checkpoint holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The job's id (`APP-PID`).
    pub job: String,
    /// The application it runs.
    pub application: String,
    /// Checkpoint or savepoint.
    pub kind: CheckpointKind,
    /// The checkpoint's number.
    pub n: u64,
    /// When the checkpoint was triggered, in milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
    /// From the trigger to the last part written, in milliseconds.
    pub duration_ms: u64,
    /// The longest time any instance held an input for alignment, in milliseconds.
    pub alignment_ms: u64,
    /// A summary of the plan the job ran (for messages: a restore on another plan says so).
    pub plan: String,
    /// Every part, one per instance.
    pub parts: Vec<PartEntry>,
}

/// The file: a manifest with its format and checksum.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile<M> {
    format: u32,
    crc32: u32,
    manifest: M,
}

/// The first field of every manifest file, whatever its format.
#[derive(Deserialize)]
struct FormatProbe {
    format: u32,
}

/// The bytes of the manifest file holding `manifest`.
fn render(manifest: &Manifest) -> serde_json::Result<Vec<u8>> {
    let crc32 = crc32fast::hash(&serde_json::to_vec(manifest)?);
    let mut text = serde_json::to_vec_pretty(&ManifestFile {
        format: MANIFEST_FORMAT,
        crc32,
        manifest,
    })?;
    text.push(b'\n');
    Ok(text)
}

/// Writes `manifest` durably as the manifest of the checkpoint in `dir`.
pub(crate) fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), StoreError> {
    write_durably(dir, MANIFEST_FILE, |file| {
        file.write_all(&render(manifest).map_err(std::io::Error::other)?)
    })
}

/// Reads and verifies the manifest of the checkpoint in `dir`, or says why it is refused.
pub(crate) fn read_manifest(dir: &Path) -> Result<Manifest, RefusedFile> {
    let path = dir.join(MANIFEST_FILE);
    let mut text = Vec::new();
    File::open(&path)
        .and_then(|file| file.take(MAX_MANIFEST_BYTES + 1).read_to_end(&mut text))
        .map_err(|e| format!("cannot read it: {e}"))
        .and_then(|_| parse(&text))
        .map_err(|reason| RefusedFile::new(&path, reason))
}

/// The manifest a manifest file's bytes `text` hold, or why they are refused.
fn parse(text: &[u8]) -> Result<Manifest, String> {
    if text.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(format!(
            "longer than the limit of {MAX_MANIFEST_BYTES} bytes (MAX_MANIFEST_BYTES)"
        ));
    }
    let probe: FormatProbe = serde_json::from_slice(text)
        .map_err(|e| format!("not a manifest (damaged or cut off): {e}"))?;
    if probe.format != MANIFEST_FORMAT {
        return Err(format!(
            "format version {}; this build reads version {MANIFEST_FORMAT}",
            probe.format
        ));
    }
    let file: ManifestFile<Manifest> = serde_json::from_slice(text)
        .map_err(|e| format!("not a manifest of format {MANIFEST_FORMAT}: {e}"))?;
    let crc32 = crc32fast::hash(&serde_json::to_vec(&file.manifest).map_err(|e| e.to_string())?);
    if crc32 != file.crc32 {
        return Err(format!(
            "its content has crc32 {crc32}, the file says {}: changed since it was written",
            file.crc32
        ));
    }
    if render(&file.manifest).map_err(|e| e.to_string())? != text {
        return Err("not byte for byte as written (its text was altered)".into());
    }
    Ok(file.manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest {
            job: "wordcount-1".into(),
            application: "wordcount".into(),
            kind: CheckpointKind::Checkpoint,
            n: 3,
            created_unix_ms: 1_800_000_000_000,
            duration_ms: 12,
            alignment_ms: 2,
            plan: "processes: 3 PEs".into(),
            parts: vec![PartEntry {
                name: "sum[0]".into(),
                file: "sum[0].part".into(),
                bytes: 40,
                crc32: 7,
            }],
        }
    }

    #[test]
    fn a_manifest_reads_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        write_manifest(dir.path(), &manifest()).unwrap();
        assert_eq!(read_manifest(dir.path()).unwrap(), manifest());
        let text = std::fs::read_to_string(dir.path().join(MANIFEST_FILE)).unwrap();
        assert!(text.starts_with("{\n  \"format\": 1,"), "{text}");
    }

    #[test]
    fn a_later_format_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        write_manifest(dir.path(), &manifest()).unwrap();
        let path = dir.path().join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replacen("\"format\": 1", "\"format\": 2", 1)).unwrap();
        let refused = read_manifest(dir.path()).unwrap_err();
        assert_eq!(refused.path, path);
        assert!(refused.reason.contains("format version 2"), "{refused}");
    }

    #[test]
    fn a_changed_value_with_valid_json_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        write_manifest(dir.path(), &manifest()).unwrap();
        let path = dir.path().join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replacen("\"bytes\": 40", "\"bytes\": 41", 1)).unwrap();
        let refused = read_manifest(dir.path()).unwrap_err();
        assert!(refused.reason.contains("crc32"), "{refused}");
    }

    #[test]
    fn every_flipped_byte_and_every_cut_is_refused() {
        let text = render(&manifest()).unwrap();
        assert_eq!(parse(&text), Ok(manifest()));
        let mut damaged = text.clone();
        for at in 0..text.len() {
            for mask in 1..=255u8 {
                damaged[at] ^= mask;
                assert!(parse(&damaged).is_err(), "byte {at} ^ {mask:#04x}");
                damaged[at] ^= mask;
            }
            assert!(parse(&text[..at]).is_err(), "cut to {at} bytes");
        }
    }

    #[test]
    fn changed_white_space_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        write_manifest(dir.path(), &manifest()).unwrap();
        let path = dir.path().join(MANIFEST_FILE);
        let mut text = std::fs::read(&path).unwrap();
        *text.last_mut().unwrap() = b' ';
        std::fs::write(&path, text).unwrap();
        let refused = read_manifest(dir.path()).unwrap_err();
        assert!(refused.reason.contains("altered"), "{refused}");
    }
}
