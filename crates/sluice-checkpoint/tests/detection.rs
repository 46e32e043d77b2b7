//! Any flipped byte or cut of any file of a checkpoint is detected: the checkpoint is refused
//! naming that file, and `latest` falls back to the checkpoint before.

#[allow(dead_code)] // each test file uses its own share of the fixture
mod fixture;

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use sluice_checkpoint::{load, CheckpointStore, StoreError, MANIFEST_FILE};

/// What is done to a file.
#[derive(Debug, Clone)]
enum Damage {
    /// The bits `mask` (not 0) of the byte at `at` (modulo the length) flip.
    Flip { at: u64, mask: u8 },
    /// The file is cut to `at` (modulo the length) bytes.
    Truncate { at: u64 },
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<u64>(), 1..=255u8).prop_map(|(at, mask)| Damage::Flip { at, mask }),
        any::<u64>().prop_map(|at| Damage::Truncate { at }),
    ]
}

/// Copies the directory `from` (files and directories in it) to `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn any_flip_or_cut_of_any_file_is_detected() {
    // Checkpoints 1 and 2 are taken once; each case damages a copy of them.
    let template = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(&template.path().join("job")).unwrap();
    fixture::take(&store, 1);
    let manifest = fixture::take(&store, 2);
    let files: Vec<String> = manifest
        .parts
        .iter()
        .map(|part| part.file.clone())
        .chain([MANIFEST_FILE.to_string()])
        .collect();
    let mut runner = TestRunner::new(ProptestConfig::with_cases(256));
    let cases = (proptest::sample::select(files), damage());
    runner
        .run(&cases, |(file, damage)| {
            let dir = tempfile::tempdir().unwrap();
            copy_dir(store.dir(), &dir.path().join("job"));
            let store = CheckpointStore::open(&dir.path().join("job")).unwrap();
            let path = store.checkpoint_dir(2).join(file);
            let len = std::fs::metadata(&path).unwrap().len();
            match damage {
                Damage::Flip { at, mask } => fixture::flip(&path, at % len, mask),
                Damage::Truncate { at } => fixture::truncate(&path, at % len),
            }
            let error = load(&store.checkpoint_dir(2)).unwrap_err();
            let StoreError::Corrupt { refused, .. } = &error else {
                panic!("{error}");
            };
            prop_assert_eq!(refused.len(), 1, "{}", error);
            prop_assert_eq!(&refused[0].path, &path);
            let loaded = store.latest().unwrap().unwrap();
            prop_assert_eq!(loaded.n, 1);
            prop_assert_eq!(&loaded.skipped, refused);
            Ok(())
        })
        .unwrap();
}
