//! `sluice checkpoints JOB-ID|DIR` on a real checkpoint directory: complete, partial and
//! corrupt checkpoints and a savepoint in one table, the corrupt file named; a job found by its
//! id in the default directory; a missing directory or unknown id is a one-line error.

mod common;

use common::{sluice, stderr, stdout};
use sluice_checkpoint::{CheckpointKind, CheckpointStore, Manifest, PartInfo};

/// Takes checkpoint `n` in `store` with two parts, triggered at 1.8e12 ms + `n` seconds.
fn take(store: &CheckpointStore, n: u64) {
    let written: Vec<PartInfo> = [("count[0]", vec![1u8; 2000]), ("count[1]", vec![2u8; 100])]
        .iter()
        .map(|(name, payload)| store.write_part(n, name, payload).unwrap())
        .collect();
    let manifest = Manifest {
        job: "wordcount-7".into(),
        application: "wordcount".into(),
        kind: CheckpointKind::Checkpoint,
        n,
        created_unix_ms: 1_800_000_000_000 + n * 1000,
        duration_ms: 40 + n,
        alignment_ms: 3,
        plan: "processes".into(),
        parts: written.into_iter().map(|p| p.entry).collect(),
    };
    store.complete(n, &manifest).unwrap();
}

#[test]
fn checkpoints_lists_every_checkpoint_and_savepoint() {
    let dir = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(&dir.path().join("job")).unwrap();
    take(&store, 1);
    take(&store, 2);
    store
        .save_as(2, &store.dir().join("before-upgrade"))
        .unwrap();
    store.write_part(3, "count[0]", b"half").unwrap();
    let damaged = store.checkpoint_dir(1).join("count[0].part");
    let mut bytes = std::fs::read(&damaged).unwrap();
    bytes[1000] ^= 0x40;
    std::fs::write(&damaged, bytes).unwrap();

    let o = sluice(&["checkpoints", store.dir().to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        [
            "N",
            "KIND",
            "TAKEN",
            "(UTC)",
            "SIZE",
            "DURATION",
            "ALIGNMENT",
            "STATUS"
        ],
        "{out}"
    );
    assert_eq!(
        lines[1][..8],
        [
            "1",
            "checkpoint",
            "2027-01-15T08:00:01Z",
            "2.6",
            "KiB",
            "41",
            "ms",
            "3"
        ],
        "{out}"
    );
    assert_eq!(lines[1][9..], ["corrupt", "(files", "below)"], "{out}");
    assert_eq!(
        lines[2][..3],
        ["2", "checkpoint", "2027-01-15T08:00:02Z"],
        "{out}"
    );
    assert_eq!(lines[2].last(), Some(&"complete"), "{out}");
    assert_eq!(
        lines[3][..3],
        ["2", "savepoint", "2027-01-15T08:00:02Z"],
        "{out}"
    );
    assert_eq!(lines[3].last(), Some(&"complete"), "{out}");
    assert_eq!(lines[4][..3], ["3", "checkpoint", "-"], "{out}");
    assert!(lines[4].contains(&"partial"), "{out}");
    let named = format!(
        "{} is corrupt: {}:",
        store.checkpoint_dir(1).display(),
        damaged.display()
    );
    assert!(out.lines().nth(5).unwrap().starts_with(&named), "{out}");
    assert_eq!(out.lines().count(), 6, "{out}");
}

/// Runs `sluice checkpoints ARG` with `$XDG_STATE_HOME` at `state`.
fn checkpoints_with_state(state: &std::path::Path, arg: &str) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["checkpoints", arg])
        .env("XDG_STATE_HOME", state)
        .output()
        .expect("sluice runs")
}

#[test]
fn checkpoints_finds_a_job_by_its_id() {
    let state = tempfile::tempdir().unwrap();
    let root = state.path().join("sluice/checkpoints");
    let store = CheckpointStore::open(&root.join("wordcount-4242")).unwrap();
    take(&store, 5);
    let o = checkpoints_with_state(state.path(), "wordcount-4242");
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(
        out.lines().nth(1).unwrap().starts_with("5  checkpoint"),
        "{out}"
    );
}

#[test]
fn checkpoints_of_a_missing_directory_or_job_is_one_line_naming_it() {
    let state = tempfile::tempdir().unwrap();
    let root = state.path().join("sluice/checkpoints");
    let missing = state.path().join("nowhere");
    for arg in [missing.to_str().unwrap(), "wordcount-1"] {
        let o = checkpoints_with_state(state.path(), arg);
        assert_eq!(o.status.code(), Some(1));
        let err = stderr(&o);
        assert!(
            err.starts_with(&format!("error: {arg} is neither a directory")),
            "{err}"
        );
        assert!(err.contains(&root.display().to_string()), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}
