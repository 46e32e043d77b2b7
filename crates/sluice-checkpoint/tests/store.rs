//! The checkpoint store on real files: round trips, crashes between parts and manifest,
//! every kind of damage refused naming the file with a fall back to the checkpoint before,
//! retention, savepoints, part names, concurrent writers and the directory's ownership.

#[allow(dead_code)] // each test file uses its own share of the fixture
mod fixture;

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fixture::{flip, overwrite, payloads, take, truncate};
use sluice_checkpoint::{
    list, load, read_part, CheckpointKind, CheckpointStatus, CheckpointStore, StoreError,
    MANIFEST_FILE, PART_FORMAT, PART_HEADER_LEN,
};

fn store() -> (tempfile::TempDir, CheckpointStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(&dir.path().join("job")).unwrap();
    (dir, store)
}

fn expected_parts(n: u64) -> BTreeMap<String, Vec<u8>> {
    payloads(n).into_iter().collect()
}

#[test]
fn parts_and_manifest_round_trip() {
    let (_dir, store) = store();
    assert_eq!(store.latest().unwrap(), None);
    let manifest = take(&store, 1);
    let loaded = store.latest().unwrap().unwrap();
    assert_eq!(loaded.n, 1);
    assert_eq!(loaded.manifest, manifest);
    assert_eq!(loaded.parts, expected_parts(1));
    assert!(loaded.skipped.is_empty());
    assert_eq!(loaded.dir, store.checkpoint_dir(1));
    // `--from DIR`: the job's directory (its latest) or the checkpoint's own.
    assert_eq!(load(store.dir()).unwrap(), loaded);
    assert_eq!(load(&store.checkpoint_dir(1)).unwrap(), loaded);
}

#[test]
fn the_part_info_describes_the_file() {
    let (_dir, store) = store();
    let info = store.write_part(1, "sum[1]", b"twelve bytes").unwrap();
    assert_eq!(info.entry.name, "sum[1]");
    assert_eq!(info.entry.file, "sum[1].part");
    assert_eq!(info.entry.bytes, (PART_HEADER_LEN + 12) as u64);
    assert_eq!(info.entry.crc32, crc32fast::hash(b"twelve bytes"));
    let on_disk = std::fs::metadata(store.checkpoint_dir(1).join("sum[1].part")).unwrap();
    assert_eq!(on_disk.len(), info.entry.bytes);
    assert_eq!(on_disk.mode() & 0o777, 0o600);
}

#[test]
fn parts_without_a_manifest_are_not_a_checkpoint() {
    let (_dir, store) = store();
    // A crash after the parts of checkpoint 1, before its manifest.
    for (name, payload) in payloads(1) {
        store.write_part(1, &name, &payload).unwrap();
    }
    assert_eq!(store.latest().unwrap(), None);
    assert!(matches!(
        load(store.dir()),
        Err(StoreError::NothingToLoad { .. })
    ));
    // With a complete one before it, that one is the latest.
    let (_dir, store) = self::store();
    take(&store, 1);
    for (name, payload) in payloads(2) {
        store.write_part(2, &name, &payload).unwrap();
    }
    assert_eq!(store.latest().unwrap().unwrap().n, 1);
    let listed = list(store.dir()).unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[1].n, Some(2));
    assert_eq!(listed[1].status, CheckpointStatus::Partial);
}

/// Damages a file of checkpoint 2 with `damage`, and checks `latest` falls back to
/// checkpoint 1 naming that file with a reason holding `reason`.
fn refused_with_fallback(file: &str, damage: impl Fn(&Path), reason: &str) {
    let (_dir, store) = store();
    take(&store, 1);
    take(&store, 2);
    let path = store.checkpoint_dir(2).join(file);
    damage(&path);
    let loaded = store.latest().unwrap().unwrap();
    assert_eq!(loaded.n, 1, "{file}");
    assert_eq!(loaded.parts, expected_parts(1));
    assert_eq!(loaded.skipped.len(), 1, "{:?}", loaded.skipped);
    let skipped = &loaded.skipped[0];
    assert_eq!(skipped.path, path);
    assert!(skipped.reason.contains(reason), "{skipped}");
    // Asked for by its own directory, it is refused outright, naming the file.
    let error = load(&store.checkpoint_dir(2)).unwrap_err();
    assert!(matches!(error, StoreError::Corrupt { .. }), "{error}");
    assert!(
        error.to_string().contains(&path.display().to_string()),
        "{error}"
    );
    // And listed as corrupt.
    let listed = list(store.dir()).unwrap();
    assert_eq!(listed[0].status, CheckpointStatus::Complete);
    assert!(matches!(&listed[1].status, CheckpointStatus::Corrupt(files) if files[0].path == path));
}

#[test]
fn a_truncated_part_is_refused() {
    refused_with_fallback("sum[0].part", |p| truncate(p, 500), "truncated");
    refused_with_fallback(
        "sum[1].part",
        |p| truncate(p, 10),
        "shorter than the 32-byte header",
    );
}

#[test]
fn a_part_grown_longer_is_refused() {
    refused_with_fallback(
        "sum[1].part",
        |p| overwrite(p, PART_HEADER_LEN as u64, b"x"),
        "too long",
    );
}

#[test]
fn a_flipped_payload_byte_is_refused() {
    refused_with_fallback("sum[0].part", |p| flip(p, 600, 0x10), "payload is damaged");
}

/// What a restart starts from at once: the manifest and the parts' headers and lengths are
/// checked, the payloads are not read; the PE reading a damaged payload refuses it naming the
/// file, and a full verification then falls back to the checkpoint before.
#[test]
fn the_latest_complete_checkpoint_leaves_payload_checksums_to_their_reader() {
    let (_dir, store) = store();
    take(&store, 1);
    take(&store, 2);
    let damaged = store.checkpoint_dir(2).join("sum[0].part");
    flip(&damaged, 600, 0x10);
    let found = store.latest_complete().unwrap().unwrap();
    assert_eq!(found.n, 2);
    let entry = found
        .manifest
        .parts
        .iter()
        .find(|e| e.name == "sum[0]")
        .unwrap();
    let refused = read_part(&found.dir, entry).unwrap_err();
    assert!(
        refused.to_string().contains(&damaged.display().to_string())
            && refused.to_string().contains("payload is damaged"),
        "{refused}"
    );
    assert_eq!(store.latest_verified().unwrap().unwrap().n, 1);
    // A damaged header or length is still found at once.
    truncate(&damaged, 500);
    assert_eq!(store.latest_complete().unwrap().unwrap().n, 1);
}

#[test]
fn a_flipped_header_byte_is_refused() {
    refused_with_fallback("source[0].part", |p| flip(p, 17, 0x01), "header is damaged");
}

#[test]
fn a_bad_magic_is_refused() {
    refused_with_fallback("sum[0].part", |p| overwrite(p, 0, b"PNG"), "bad magic");
}

/// Makes the part at `path` a genuine header of format `version`: its own checksum matches.
fn of_format(path: &Path, version: u32) {
    overwrite(path, 8, &version.to_le_bytes());
    let header = std::fs::read(path).unwrap();
    overwrite(path, 28, &crc32fast::hash(&header[..28]).to_le_bytes());
}

#[test]
fn a_later_part_format_is_refused_naming_the_version() {
    let later = format!("format version {}", PART_FORMAT + 1);
    refused_with_fallback("sum[0].part", |p| of_format(p, PART_FORMAT + 1), &later);
}

/// Format 2's keyed state carried no table seed: its payload would not decode, so the part is
/// refused by its version, named.
#[test]
fn a_part_of_format_2_is_refused_naming_its_version() {
    refused_with_fallback("sum[0].part", |p| of_format(p, 2), "format version 2");
}

#[test]
fn a_corrupt_manifest_is_refused() {
    refused_with_fallback(MANIFEST_FILE, |p| flip(p, 40, 0x04), "");
    refused_with_fallback(MANIFEST_FILE, |p| truncate(p, 100), "damaged or cut off");
    refused_with_fallback(
        MANIFEST_FILE,
        |p| {
            let text = std::fs::read_to_string(p).unwrap();
            std::fs::write(
                p,
                text.replacen("\"alignment_ms\": 2", "\"alignment_ms\": 3", 1),
            )
            .unwrap();
        },
        "changed since it was written",
    );
}

#[test]
fn a_part_swapped_with_another_valid_part_is_refused() {
    let swap = |path: &Path| {
        let other = path.parent().unwrap().join("source[0].part");
        std::fs::copy(other, path).unwrap();
    };
    refused_with_fallback("sum[1].part", swap, "the manifest says");
}

#[test]
fn a_missing_part_is_refused() {
    refused_with_fallback(
        "sum[0].part",
        |p| std::fs::remove_file(p).unwrap(),
        "cannot read",
    );
}

#[test]
fn all_corrupt_is_an_error_naming_every_file() {
    let (_dir, store) = store();
    take(&store, 1);
    take(&store, 2);
    let bad_manifest = store.checkpoint_dir(1).join(MANIFEST_FILE);
    let bad_part = store.checkpoint_dir(2).join("sum[0].part");
    truncate(&bad_manifest, 3);
    flip(&bad_part, 100, 0xff);
    let error = store.latest().unwrap_err();
    let StoreError::NoneVerifies { dir, refused } = &error else {
        panic!("{error}");
    };
    assert_eq!(dir, store.dir());
    let paths: Vec<&PathBuf> = refused.iter().map(|r| &r.path).collect();
    assert_eq!(paths, [&bad_part, &bad_manifest]);
    let message = error.to_string();
    for path in [&bad_part, &bad_manifest] {
        assert!(message.contains(&path.display().to_string()), "{message}");
    }
    assert!(matches!(
        load(store.dir()),
        Err(StoreError::NoneVerifies { .. })
    ));
}

#[test]
fn retention_keeps_exactly_k_and_every_savepoint() {
    let (dir, store) = store();
    let store = store.with_retained(NonZeroUsize::new(2).unwrap());
    take(&store, 1);
    let savepoint = store
        .save_as(1, &store.dir().join("before-upgrade"))
        .unwrap();
    let elsewhere = store
        .save_as(1, &dir.path().join("kept/elsewhere"))
        .unwrap();
    take(&store, 2);
    // Checkpoint 3 never completes; 5 is still being written when 4 completes.
    store.write_part(3, "sum[0]", b"abandoned").unwrap();
    store.write_part(5, "sum[0]", b"in progress").unwrap();
    take(&store, 4);
    let listed: Vec<(Option<u64>, Option<CheckpointKind>, CheckpointStatus)> = list(store.dir())
        .unwrap()
        .into_iter()
        .map(|c| (c.n, c.kind, c.status))
        .collect();
    use CheckpointKind::{Checkpoint, Savepoint};
    use CheckpointStatus::{Complete, Partial};
    assert_eq!(
        listed,
        [
            (Some(1), Some(Savepoint), Complete),
            (Some(2), Some(Checkpoint), Complete),
            (Some(4), Some(Checkpoint), Complete),
            (Some(5), Some(Checkpoint), Partial),
        ]
    );
    take(&store, 6);
    let kept: Vec<Option<u64>> = list(store.dir()).unwrap().iter().map(|c| c.n).collect();
    assert_eq!(kept, [Some(1), Some(4), Some(6)]);
    // The savepoints load, their parts intact though the checkpoint they came from is gone.
    for path in [savepoint, elsewhere] {
        let loaded = load(&path).unwrap();
        assert_eq!((loaded.n, loaded.manifest.kind), (1, Savepoint));
        assert_eq!(loaded.parts, expected_parts(1));
    }
    // Nothing else is left in the directory: no removal half done, no temporary file.
    let mut names: Vec<String> = std::fs::read_dir(store.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["before-upgrade", "chk-4", "chk-6"]);
}

#[test]
fn a_savepoint_target_is_checked() {
    let (dir, store) = store();
    take(&store, 1);
    let refused = |target: &Path| store.save_as(1, target).unwrap_err();
    let existing = dir.path().join("existing");
    std::fs::create_dir(&existing).unwrap();
    assert!(refused(&existing).to_string().contains("exists already"));
    assert!(refused(&dir.path().join("chk-9"))
        .to_string()
        .contains("retention"));
    assert!(matches!(
        store.save_as(2, &dir.path().join("sp")),
        Err(StoreError::NotComplete { n: 2, .. })
    ));
    // A corrupt checkpoint is not saved.
    flip(&store.checkpoint_dir(1).join("sum[0].part"), 40, 1);
    let target = dir.path().join("sp");
    assert!(matches!(
        store.save_as(1, &target),
        Err(StoreError::Corrupt { .. })
    ));
    assert!(!target.exists());
}

#[test]
fn part_names_cannot_reach_outside_the_checkpoint() {
    let (dir, store) = store();
    for name in ["../escaped", "a/b", "..", ".", "", "/etc/x", "nul\0byte"] {
        let error = store.write_part(1, name, b"x").unwrap_err();
        assert!(
            matches!(error, StoreError::PartName { .. }),
            "{name:?}: {error}"
        );
    }
    assert!(!dir.path().join("escaped").exists());
    assert!(!dir.path().join("escaped.part").exists());
    // Other names are made safe and round-trip.
    let names = [
        "sum [1]",
        ".hidden",
        "..dots",
        "über",
        "a%2Fb",
        "back\\slash",
    ];
    let written: Vec<_> = names
        .iter()
        .map(|name| store.write_part(1, name, name.as_bytes()).unwrap())
        .collect();
    for info in &written {
        assert!(!info.entry.file.contains('/') && !info.entry.file.starts_with('.'));
    }
    store.complete(1, &fixture::manifest(1, &written)).unwrap();
    let loaded = store.latest().unwrap().unwrap();
    let got: Vec<(&str, &[u8])> = loaded
        .parts
        .iter()
        .map(|(name, payload)| (name.as_str(), payload.as_slice()))
        .collect();
    let mut want: Vec<(&str, &[u8])> = names.iter().map(|n| (*n, n.as_bytes())).collect();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn writer_threads_write_parts_of_one_checkpoint_at_once() {
    let (_dir, store) = store();
    let store = Arc::new(store);
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                store
                    .write_part(1, &format!("count[{i}]"), &vec![i as u8; 10_000 * i])
                    .unwrap()
            })
        })
        .collect();
    let written: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    store.complete(1, &fixture::manifest(1, &written)).unwrap();
    let loaded = store.latest().unwrap().unwrap();
    assert_eq!(loaded.parts.len(), 8);
    for i in 0..8 {
        assert_eq!(
            loaded.parts[&format!("count[{i}]")],
            vec![i as u8; 10_000 * i]
        );
    }
}

#[test]
fn complete_checks_every_part_is_there_with_its_size() {
    let (_dir, store) = store();
    let written: Vec<_> = payloads(1)
        .iter()
        .map(|(name, payload)| store.write_part(1, name, payload).unwrap())
        .collect();
    let part = store.checkpoint_dir(1).join("sum[0].part");
    truncate(&part, 100);
    let error = store
        .complete(1, &fixture::manifest(1, &written))
        .unwrap_err();
    assert!(
        matches!(error, StoreError::Incomplete { n: 1, .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains(&part.display().to_string()),
        "{error}"
    );
    std::fs::remove_file(&part).unwrap();
    let error = store
        .complete(1, &fixture::manifest(1, &written))
        .unwrap_err();
    assert!(error.to_string().contains("is missing"), "{error}");
    assert!(
        error.to_string().contains(&part.display().to_string()),
        "{error}"
    );
    assert!(!store.checkpoint_dir(1).join(MANIFEST_FILE).exists());
    // A manifest of another checkpoint is refused too.
    let error = store
        .complete(2, &fixture::manifest(1, &written))
        .unwrap_err();
    assert!(
        error.to_string().contains("describes checkpoint 1"),
        "{error}"
    );
}

#[test]
fn a_complete_checkpoint_cannot_change_or_be_aborted() {
    let (_dir, store) = store();
    take(&store, 1);
    assert!(matches!(
        store.write_part(1, "sum[0]", b"late"),
        Err(StoreError::AlreadyComplete { n: 1, .. })
    ));
    assert!(matches!(
        store.complete(1, &fixture::manifest(1, &[])),
        Err(StoreError::AlreadyComplete { n: 1, .. })
    ));
    assert!(matches!(
        store.abort(1),
        Err(StoreError::AlreadyComplete { n: 1, .. })
    ));
    assert_eq!(store.latest().unwrap().unwrap().parts, expected_parts(1));
}

#[test]
fn abort_removes_what_a_failed_checkpoint_wrote() {
    let (_dir, store) = store();
    take(&store, 1);
    store.write_part(2, "sum[0]", b"half").unwrap();
    store.abort(2).unwrap();
    assert!(!store.checkpoint_dir(2).exists());
    // Aborting what never wrote anything is fine.
    store.abort(3).unwrap();
    let names: Vec<_> = std::fs::read_dir(store.dir()).unwrap().collect();
    assert_eq!(names.len(), 1);
}

#[test]
fn open_makes_a_private_directory() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("a/b/job");
    CheckpointStore::open(&job).unwrap();
    for d in [dir.path().join("a"), dir.path().join("a/b"), job] {
        assert_eq!(
            std::fs::metadata(&d).unwrap().mode() & 0o777,
            0o700,
            "{}",
            d.display()
        );
    }
}

#[test]
fn open_refuses_a_directory_others_can_write() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job");
    std::fs::create_dir(&job).unwrap();
    std::fs::set_permissions(&job, std::fs::Permissions::from_mode(0o777)).unwrap();
    let error = CheckpointStore::open(&job).unwrap_err();
    assert!(
        matches!(&error, StoreError::NotPrivate { dir, .. } if dir == &job),
        "{error}"
    );
    assert!(error.to_string().contains("0777"), "{error}");
    // Readable by others is fine (a shared mount is often 0755).
    std::fs::set_permissions(&job, std::fs::Permissions::from_mode(0o755)).unwrap();
    CheckpointStore::open(&job).unwrap();
}

#[test]
fn open_refuses_a_directory_of_another_user() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job");
    std::fs::create_dir(&job).unwrap();
    let me = rustix::process::geteuid().as_raw();
    let other = me + 1;
    if let Err(e) = std::os::unix::fs::chown(&job, Some(other), None) {
        // Giving a file away takes root (CAP_CHOWN).
        sluice_skip::skip(format!("cannot give a directory to uid {other}: {e}"));
        return;
    }
    let error = CheckpointStore::open(&job).unwrap_err();
    assert!(
        matches!(&error, StoreError::NotPrivate { dir, .. } if dir == &job),
        "{error}"
    );
    assert!(
        error.to_string().contains(&format!("uid {other}")),
        "{error}"
    );
}

#[test]
fn list_gives_each_checkpoint_its_figures() {
    let (_dir, store) = store();
    let manifest = take(&store, 3);
    let listed = list(store.dir()).unwrap();
    assert_eq!(listed.len(), 1);
    let info = &listed[0];
    assert_eq!(info.n, Some(3));
    assert_eq!(info.kind, Some(CheckpointKind::Checkpoint));
    assert_eq!(info.created_unix_ms, Some(manifest.created_unix_ms));
    assert_eq!(info.duration_ms, Some(manifest.duration_ms));
    assert_eq!(info.alignment_ms, Some(manifest.alignment_ms));
    let manifest_bytes = std::fs::metadata(store.checkpoint_dir(3).join(MANIFEST_FILE))
        .unwrap()
        .len();
    let parts: u64 = manifest.parts.iter().map(|p| p.bytes).sum();
    assert_eq!(info.bytes, parts + manifest_bytes);
    // The directory of one checkpoint lists that one.
    assert_eq!(list(&store.checkpoint_dir(3)).unwrap(), listed);
}

#[test]
fn a_checkpoint_of_no_parts_completes() {
    let (_dir, store) = store();
    store.complete(1, &fixture::manifest(1, &[])).unwrap();
    let loaded = store.latest().unwrap().unwrap();
    assert_eq!((loaded.n, loaded.parts.len()), (1, 0));
}

#[test]
fn a_removal_cut_short_is_not_a_checkpoint_and_is_finished_later() {
    let (_dir, store) = store();
    take(&store, 1);
    // A crash after retention renamed checkpoint 1 for removal, before it was deleted.
    let doomed = store.dir().join(".removing-chk-1-0123456789abcdef");
    std::fs::rename(store.checkpoint_dir(1), &doomed).unwrap();
    assert_eq!(store.latest().unwrap(), None);
    assert!(list(store.dir()).unwrap().is_empty());
    take(&store, 2);
    assert!(!doomed.exists());
    assert_eq!(store.latest().unwrap().unwrap().n, 2);
}

#[test]
fn a_pe_reads_its_own_part_verified() {
    let (_dir, store) = store();
    let manifest = take(&store, 1);
    let dir = store.checkpoint_dir(1);
    for entry in &manifest.parts {
        assert_eq!(
            read_part(&dir, entry).unwrap(),
            expected_parts(1)[&entry.name]
        );
    }
    let entry = &manifest.parts[1];
    let path = dir.join(&entry.file);
    flip(&path, 50, 0x08);
    let error = read_part(&dir, entry).unwrap_err();
    assert!(
        matches!(&error, StoreError::Corrupt { refused, .. } if refused[0].path == path),
        "{error}"
    );
    // An entry naming a file other than its part's is refused before any file is opened.
    let mut tricked = manifest.parts[0].clone();
    tricked.file = "../chk-1/sum[0].part".into();
    let error = read_part(&dir, &tricked).unwrap_err();
    assert!(
        error.to_string().contains("is listed in the file"),
        "{error}"
    );
}

#[test]
fn the_next_number_overwrites_no_checkpoint() {
    let (_dir, store) = store();
    assert_eq!(store.next_number().unwrap(), 1);
    take(&store, 1);
    store.write_part(7, "sum[0]", b"partial").unwrap();
    assert_eq!(store.next_number().unwrap(), 8);
}
