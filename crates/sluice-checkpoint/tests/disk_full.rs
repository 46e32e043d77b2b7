//! A full disk during a checkpoint, on a file system that really fills: a 64 KiB tmpfs mounted
//! in a mount namespace of the test's own thread (root only; the namespace, and the mount with
//! it, goes when the thread ends, and the host never sees the mount). Under `CI=true` the test
//! fails rather than skips where it cannot mount.

#[allow(dead_code)] // each test file uses its own share of the fixture
mod fixture;

use std::io::Write;
use std::path::Path;

use rustix::mount::{mount, mount_change, MountFlags, MountPropagationFlags};
use rustix::thread::{unshare_unsafe, UnshareFlags};
use sluice_checkpoint::{list, CheckpointStatus, CheckpointStore, StoreError, MANIFEST_FILE};

/// Mounts a 64 KiB tmpfs on `dir`, seen by the calling thread only.
fn mount_small_tmpfs(dir: &Path) -> rustix::io::Result<()> {
    // SAFETY: only the mount namespace is unshared (it takes the thread's cwd and root with
    // it, never the file descriptor table), so no thread loses a descriptor another made.
    unsafe { unshare_unsafe(UnshareFlags::NEWNS) }?;
    // Mounts made from here on stay in this namespace, whatever / propagates to.
    mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )?;
    mount(
        "tmpfs",
        dir,
        "tmpfs",
        MountFlags::empty(),
        c"size=64k,mode=0700",
    )
}

/// The files in `dir` whose names start with `.` (temporary files left behind).
fn hidden_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with('.'))
        .collect()
}

/// Fills the file system of `dir` with a file `filler`, to the last byte it takes.
fn fill(dir: &Path) {
    let mut filler = std::fs::File::create(dir.join("filler")).unwrap();
    let page = [0u8; 4096];
    loop {
        match filler.write(&page) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
            Err(e) => panic!("filling {}: {e}", dir.display()),
        }
    }
}

/// The checkpoints on a full disk: write_part and complete fail as [`StoreError::DiskFull`],
/// leave no temporary file and no manifest, the checkpoint before still loads, and once
/// there is room again the next checkpoint completes.
fn checkpoints_on_a_small_disk(disk: &Path) {
    let store = CheckpointStore::open(&disk.join("job")).unwrap();
    fixture::take(&store, 1);

    let error = store
        .write_part(2, "sum[0]", &vec![7u8; 100_000])
        .unwrap_err();
    assert!(error.is_disk_full(), "{error}");
    let StoreError::DiskFull { path, .. } = &error else {
        unreachable!()
    };
    assert!(path.starts_with(store.checkpoint_dir(2)), "{error}");
    assert!(hidden_files(&store.checkpoint_dir(2)).is_empty());
    assert_eq!(store.latest().unwrap().unwrap().n, 1);
    store.abort(2).unwrap();

    let written: Vec<_> = fixture::payloads(3)
        .iter()
        .map(|(name, payload)| store.write_part(3, name, payload).unwrap())
        .collect();
    fill(disk);
    let error = store
        .complete(3, &fixture::manifest(3, &written))
        .unwrap_err();
    assert!(error.is_disk_full(), "{error}");
    assert!(error.to_string().contains(MANIFEST_FILE), "{error}");
    assert!(!store.checkpoint_dir(3).join(MANIFEST_FILE).exists());
    assert!(hidden_files(&store.checkpoint_dir(3)).is_empty());
    let loaded = store.latest().unwrap().unwrap();
    assert_eq!(loaded.n, 1);
    assert_eq!(loaded.parts, fixture::payloads(1).into_iter().collect());
    let statuses: Vec<_> = list(store.dir())
        .unwrap()
        .into_iter()
        .map(|c| c.status)
        .collect();
    assert_eq!(
        statuses,
        [CheckpointStatus::Complete, CheckpointStatus::Partial]
    );

    // Room again: the job goes on checkpointing.
    std::fs::remove_file(disk.join("filler")).unwrap();
    store.complete(3, &fixture::manifest(3, &written)).unwrap();
    assert_eq!(store.latest().unwrap().unwrap().n, 3);
}

#[test]
fn a_full_disk_fails_the_checkpoint_and_keeps_the_one_before() {
    let dir = tempfile::tempdir().unwrap();
    let disk = dir.path().join("small-disk");
    std::fs::create_dir(&disk).unwrap();
    // A thread of its own: the mount namespace ends with it.
    let outcome = std::thread::spawn(move || match mount_small_tmpfs(&disk) {
        Ok(()) => {
            checkpoints_on_a_small_disk(&disk);
            Ok(())
        }
        Err(e) => Err(e),
    })
    .join()
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    if let Err(e) = outcome {
        sluice_skip::skip(format!(
            "cannot mount a small tmpfs in a mount namespace (needs root): {e}"
        ));
    }
}
