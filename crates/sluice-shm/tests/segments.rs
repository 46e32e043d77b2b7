//! Segments through the public API, each test in its own temporary directory (on `/dev/shm`
//! when there is one, so that tmpfs itself is exercised): create and open, every refusal of
//! `open`, the errors of `create`, stale removal, and who removes what when.

use sluice_shm::header::{
    CAPACITIES_OFFSET, CREATOR_PID_OFFSET, DATA_ALIGN, DATA_OFFSET, HEADER_LEN,
    HEADER_VERSION_OFFSET, KIND_OFFSET, LAYOUT_VERSION_OFFSET, MAGIC_OFFSET,
};
use sluice_shm::{
    remove_stale, CreateError, JobSegments, OpenError, RemoveError, Segment, SegmentKind,
    SegmentName, SegmentSpec, StaleSegment,
};
use std::fs::{self, OpenOptions, Permissions};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use tempfile::TempDir;

fn test_dir() -> TempDir {
    let builder = tempfile::Builder::new()
        .prefix("sluice-shm-test.")
        .tempdir_in("/dev/shm");
    match builder.or_else(|_| tempfile::tempdir()) {
        Ok(dir) => dir,
        Err(e) => panic!("no temporary directory: {e}"),
    }
}

fn spec() -> SegmentSpec {
    SegmentSpec {
        kind: SegmentKind::new(*b"testring"),
        layout_version: 3,
        capacities: [16, 64],
        data_len: 16 * 64,
    }
}

fn name(dir: &TempDir, edge: &str) -> SegmentName {
    match SegmentName::in_dir(dir.path(), "job", edge) {
        Ok(name) => name,
        Err(e) => panic!("{e}"),
    }
}

fn create(name: &SegmentName) -> Segment {
    match Segment::create(name, &spec()) {
        Ok(segment) => segment,
        Err(e) => panic!("{e}"),
    }
}

fn open_error(name: &SegmentName, expected: &SegmentSpec) -> OpenError {
    match Segment::open(name, expected) {
        Ok(_) => panic!("{name} opened"),
        Err(e) => e,
    }
}

fn create_error(name: &SegmentName, spec: &SegmentSpec) -> CreateError {
    match Segment::create(name, spec) {
        Ok(_) => panic!("{name} created"),
        Err(e) => e,
    }
}

/// Overwrites bytes of a segment file, as a stray writer or a bug would.
fn patch(path: &Path, offset: usize, bytes: &[u8]) {
    let file = OpenOptions::new().write(true).open(path);
    let written = file.and_then(|f| f.write_all_at(bytes, offset as u64));
    assert!(written.is_ok(), "patching {}: {written:?}", path.display());
}

fn files_in(dir: &TempDir) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir.path())
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A pid that belonged to a process which has exited and been reaped.
fn dead_pid() -> u32 {
    let child = std::process::Command::new("true").spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => panic!("spawning `true`: {e}"),
    };
    let pid = child.id();
    assert!(child.wait().is_ok_and(|status| status.success()));
    pid
}

#[test]
fn create_then_open_shares_the_data_area() {
    let dir = test_dir();
    let name = name(&dir, "a-to-b");
    let created = create(&name);
    assert_eq!(created.len(), spec().data_len);
    assert_eq!(created.base().as_ptr() as usize % DATA_ALIGN, 0);
    assert_eq!(created.spec(), spec());
    assert_eq!(created.creator_pid(), std::process::id());
    assert!(created.is_creator() && created.creator_is_running());
    assert_eq!(created.path(), name.path());
    let file_len = fs::metadata(name.path()).map(|m| m.len()).ok();
    assert_eq!(file_len, Some((HEADER_LEN + spec().data_len) as u64));

    // SAFETY: the data area is `len` bytes, valid while `created` lives, and nothing else
    // touches it during this test.
    let data = unsafe { std::slice::from_raw_parts_mut(created.as_ptr(), created.len()) };
    assert!(data.iter().all(|b| *b == 0), "a new segment is zeroed");
    data[0] = 0xab;
    data[spec().data_len - 1] = 0xcd;

    let opened = match Segment::open(&name, &spec()) {
        Ok(segment) => segment,
        Err(e) => panic!("{e}"),
    };
    assert!(!opened.is_creator());
    assert_eq!(opened.spec(), spec());
    assert_eq!(opened.creator_pid(), std::process::id());
    assert_eq!(opened.base().as_ptr() as usize % DATA_ALIGN, 0);
    // SAFETY: as above, for the opener's mapping of the same bytes.
    let seen = unsafe { std::slice::from_raw_parts(opened.as_ptr(), opened.len()) };
    assert_eq!((seen[0], seen[spec().data_len - 1]), (0xab, 0xcd));

    // A write through one mapping is visible through the other.
    // SAFETY: as above; the two pointers alias the same file pages.
    unsafe { opened.as_ptr().add(7).write(0x77) };
    // SAFETY: as above.
    assert_eq!(unsafe { created.as_ptr().add(7).read() }, 0x77);
}

#[test]
fn open_refuses_a_segment_made_for_something_else() {
    let dir = test_dir();
    let name = name(&dir, "e");
    let _created = create(&name);

    let other_kind = SegmentSpec {
        kind: SegmentKind::new(*b"other\0\0\0"),
        ..spec()
    };
    let e = open_error(&name, &other_kind);
    assert!(
        matches!(&e, OpenError::KindMismatch { expected, found, .. }
            if *expected == other_kind.kind && *found == spec().kind),
        "{e:?}"
    );
    assert_eq!(e.path(), name.path());
    let message = e.to_string();
    assert!(
        message.contains("`testring`") && message.contains("`other`"),
        "{message}"
    );

    let newer = SegmentSpec {
        layout_version: 4,
        ..spec()
    };
    let e = open_error(&name, &newer);
    assert!(
        matches!(
            e,
            OpenError::LayoutVersionMismatch {
                expected: 4,
                found: 3,
                ..
            }
        ),
        "{e:?}"
    );

    let bigger = SegmentSpec {
        capacities: [16, 128],
        ..spec()
    };
    let e = open_error(&name, &bigger);
    assert!(
        matches!(
            e,
            OpenError::CapacityMismatch {
                index: 1,
                expected: 128,
                found: 64,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("capacity[1] = 64, expected 128"),
        "{e}"
    );

    let longer = SegmentSpec {
        data_len: 2048,
        ..spec()
    };
    let e = open_error(&name, &longer);
    assert!(
        matches!(
            e,
            OpenError::DataLenMismatch {
                expected: 2048,
                found: 1024,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn open_refuses_a_corrupt_header_or_file() {
    let dir = test_dir();
    let name = name(&dir, "e");
    let mut created = create(&name);
    created.keep_on_drop();
    let path = name.path();

    patch(&path, MAGIC_OFFSET, b"NOTSLUIC");
    let e = open_error(&name, &spec());
    assert!(
        matches!(e, OpenError::BadMagic { found, .. } if found == u64::from_ne_bytes(*b"NOTSLUIC")),
        "{e:?}"
    );
    assert!(e.to_string().contains("not a Sluice segment"), "{e}");
    patch(&path, MAGIC_OFFSET, b"SLUICESG");
    assert!(Segment::open(&name, &spec()).is_ok());

    patch(&path, HEADER_VERSION_OFFSET, &99u32.to_ne_bytes());
    let e = open_error(&name, &spec());
    assert!(
        matches!(e, OpenError::HeaderVersionMismatch { found: 99, .. }),
        "{e:?}"
    );
    patch(&path, HEADER_VERSION_OFFSET, &1u32.to_ne_bytes());

    patch(&path, LAYOUT_VERSION_OFFSET, &2u32.to_ne_bytes());
    let e = open_error(&name, &spec());
    assert!(
        matches!(
            e,
            OpenError::LayoutVersionMismatch {
                expected: 3,
                found: 2,
                ..
            }
        ),
        "{e:?}"
    );
    patch(&path, LAYOUT_VERSION_OFFSET, &3u32.to_ne_bytes());

    patch(&path, KIND_OFFSET, b"x");
    let e = open_error(&name, &spec());
    assert!(matches!(e, OpenError::KindMismatch { .. }), "{e:?}");
    patch(&path, KIND_OFFSET, b"t");

    patch(&path, CAPACITIES_OFFSET, &17u64.to_ne_bytes());
    let e = open_error(&name, &spec());
    assert!(
        matches!(
            e,
            OpenError::CapacityMismatch {
                index: 0,
                expected: 16,
                found: 17,
                ..
            }
        ),
        "{e:?}"
    );
    patch(&path, CAPACITIES_OFFSET, &16u64.to_ne_bytes());
    assert!(Segment::open(&name, &spec()).is_ok());

    // Extended and truncated files.
    let file = OpenOptions::new().write(true).open(&path);
    let grow = file.and_then(|f| f.set_len((DATA_OFFSET + spec().data_len + 1) as u64));
    assert!(grow.is_ok());
    let e = open_error(&name, &spec());
    assert!(
        matches!(
            e,
            OpenError::FileSizeMismatch {
                expected: 1088,
                found: 1089,
                ..
            }
        ),
        "{e:?}"
    );
    let file = OpenOptions::new().write(true).open(&path);
    assert!(file.and_then(|f| f.set_len(10)).is_ok());
    let e = open_error(&name, &spec());
    assert!(matches!(e, OpenError::TooShort { found: 10, .. }), "{e:?}");

    assert!(created.remove().is_ok());
}

#[test]
fn segments_are_mode_0600_and_open_refuses_any_other_mode() {
    let dir = test_dir();
    let name = name(&dir, "e");
    let _created = create(&name);
    let mode = fs::metadata(name.path()).map(|m| m.permissions().mode() & 0o7777);
    assert_eq!(mode.ok(), Some(0o600));

    assert!(fs::set_permissions(name.path(), Permissions::from_mode(0o644)).is_ok());
    let e = open_error(&name, &spec());
    assert!(
        matches!(e, OpenError::ModeMismatch { found: 0o644, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("mode 0644, expected 0600"), "{e}");
}

#[test]
fn open_refuses_missing_names_links_and_directories() {
    let dir = test_dir();
    let missing = name(&dir, "missing");
    let e = open_error(&missing, &spec());
    assert!(matches!(e, OpenError::NotFound { .. }), "{e:?}");
    assert!(e
        .to_string()
        .contains(&missing.path().display().to_string()));

    let target = name(&dir, "target");
    let _created = create(&target);
    let link = name(&dir, "link");
    assert!(std::os::unix::fs::symlink(target.path(), link.path()).is_ok());
    let e = open_error(&link, &spec());
    assert!(matches!(e, OpenError::NotARegularFile { .. }), "{e:?}");

    let directory = name(&dir, "directory");
    assert!(fs::create_dir(directory.path()).is_ok());
    let e = open_error(&directory, &spec());
    assert!(matches!(e, OpenError::NotARegularFile { .. }), "{e:?}");
}

#[test]
fn create_refuses_an_existing_name() {
    let dir = test_dir();
    let name = name(&dir, "e");
    let first = create(&name);
    let e = create_error(&name, &spec());
    assert!(
        matches!(e, CreateError::AlreadyExists { creator_pid: Some(pid), .. }
            if pid == std::process::id()),
        "{e:?}"
    );
    assert!(e.to_string().contains("still running"), "{e}");
    // The failed attempt left nothing behind, and the first segment is untouched.
    assert_eq!(files_in(&dir), vec!["sluice-job-e".to_owned()]);
    assert!(Segment::open(&name, &spec()).is_ok());
    drop(first);
}

#[test]
fn create_errors_name_the_path_and_the_size() {
    let dir = test_dir();
    let size = (HEADER_LEN + spec().data_len).to_string();

    let missing_dir = dir.path().join("no-such-directory");
    let in_missing = SegmentName::in_dir(&missing_dir, "job", "e");
    let in_missing = in_missing.unwrap_or_else(|e| panic!("{e}"));
    let e = create_error(&in_missing, &spec());
    assert!(matches!(e, CreateError::Io { .. }), "{e:?}");
    let message = e.to_string();
    assert!(
        message.contains(&in_missing.path().display().to_string()) && message.contains(&size),
        "{message}"
    );

    let not_a_dir = dir.path().join("plain-file");
    assert!(fs::write(&not_a_dir, b"").is_ok());
    let under_file = SegmentName::in_dir(&not_a_dir, "job", "e").unwrap_or_else(|e| panic!("{e}"));
    let e = create_error(&under_file, &spec());
    assert!(e.to_string().contains(&size), "{e}");
    assert_eq!(e.path(), under_file.path());

    // Permissions do not stop root, so this part only runs for other users.
    if rustix::process::geteuid().as_raw() != 0 {
        let read_only = dir.path().join("read-only");
        assert!(fs::create_dir(&read_only).is_ok());
        assert!(fs::set_permissions(&read_only, Permissions::from_mode(0o500)).is_ok());
        let denied = SegmentName::in_dir(&read_only, "job", "e").unwrap_or_else(|e| panic!("{e}"));
        let e = create_error(&denied, &spec());
        assert!(matches!(e, CreateError::Io { .. }), "{e:?}");
        assert!(e.to_string().contains("Permission denied"), "{e}");
        assert!(e.to_string().contains(&size), "{e}");
    }
}

#[test]
fn create_reports_a_segment_too_large_for_the_file_system_and_leaves_nothing() {
    let dir = test_dir();
    let name = name(&dir, "huge");
    // A pebibyte: more than any test machine's tmpfs (ENOSPC) or disk file system allows
    // for one file (EFBIG); both are refused up front, before any page is allocated.
    let huge = SegmentSpec {
        data_len: 1 << 50,
        ..spec()
    };
    let e = create_error(&name, &huge);
    assert!(
        matches!(
            e,
            CreateError::NoSpace { .. } | CreateError::TooLarge { .. }
        ),
        "{e:?}"
    );
    assert_eq!(e.size(), (1u64 << 50) + HEADER_LEN as u64);
    let message = e.to_string();
    assert!(
        message.contains(&name.path().display().to_string())
            && message.contains(&e.size().to_string()),
        "{message}"
    );
    assert!(files_in(&dir).is_empty(), "{:?}", files_in(&dir));

    let absurd = SegmentSpec {
        data_len: usize::MAX,
        ..spec()
    };
    let e = create_error(&name, &absurd);
    assert!(matches!(e, CreateError::TooLarge { .. }), "{e:?}");
}

#[test]
fn remove_stale_removes_segments_of_dead_creators_and_keeps_live_ones() {
    let dir = test_dir();
    let dead = dead_pid();

    let live = name(&dir, "live");
    let _live = create(&live);

    let crashed = name(&dir, "crashed");
    let mut crashed_segment = create(&crashed);
    crashed_segment.keep_on_drop();
    drop(crashed_segment);
    patch(&crashed.path(), CREATOR_PID_OFFSET, &dead.to_ne_bytes());

    // A creator that died half-way through `create` leaves its temporary file.
    let half_built = dir.path().join(format!("sluice-job-half-{dead}.creating"));
    assert!(fs::write(&half_built, b"").is_ok());
    // Files that are no segments are never touched.
    let unrelated = dir.path().join(format!("sluice-job-x-{dead}.creating.bak"));
    assert!(fs::write(&unrelated, b"").is_ok());
    let not_ours = dir.path().join("sluice-other-thing");
    assert!(fs::write(&not_ours, b"not a segment").is_ok());

    // Another job's filter does not reach this job.
    assert_eq!(remove_stale(dir.path(), Some("jo")).ok(), Some(vec![]));

    let removed = remove_stale(dir.path(), Some("job"));
    let mut removed = removed.unwrap_or_else(|e| panic!("{e}"));
    removed.sort_by(|a, b| a.path.cmp(&b.path));
    assert_eq!(
        removed,
        vec![
            StaleSegment {
                path: crashed.path(),
                creator_pid: dead
            },
            StaleSegment {
                path: half_built,
                creator_pid: dead
            },
        ]
    );
    let left = files_in(&dir);
    assert_eq!(
        left,
        vec![
            "sluice-job-live".to_owned(),
            format!("sluice-job-x-{dead}.creating.bak"),
            "sluice-other-thing".to_owned(),
        ]
    );
    assert!(Segment::open(&live, &spec()).is_ok());
    assert!(matches!(
        Segment::open(&crashed, &spec()),
        Err(OpenError::NotFound { .. })
    ));
}

#[test]
fn the_creator_removes_the_file_on_drop_and_openers_do_not() {
    let dir = test_dir();
    let name = name(&dir, "e");
    let created = create(&name);
    let opened = Segment::open(&name, &spec()).unwrap_or_else(|e| panic!("{e}"));
    drop(opened);
    assert!(name.path().exists(), "an opener's drop keeps the file");
    drop(created);
    assert!(!name.path().exists(), "the creator's drop removes the file");

    let mut kept = create(&name);
    kept.keep_on_drop();
    drop(kept);
    assert!(name.path().exists());
    let opened = Segment::open(&name, &spec()).unwrap_or_else(|e| panic!("{e}"));
    assert!(opened.remove().is_ok());
    assert!(!name.path().exists());
}

#[test]
fn a_creator_never_removes_a_newer_segment_of_the_same_name() {
    let dir = test_dir();
    let name = name(&dir, "e");
    let old = create(&name);
    assert!(fs::remove_file(name.path()).is_ok());
    let new = create(&name);
    drop(old);
    assert!(
        name.path().exists(),
        "the old creator left the new segment alone"
    );
    let opened = Segment::open(&name, &spec()).unwrap_or_else(|e| panic!("{e}"));
    drop(new);
    assert!(matches!(
        opened.remove(),
        Err(RemoveError::AlreadyRemoved { .. })
    ));
}

#[test]
fn a_job_removes_stale_segments_when_it_begins_and_its_own_when_it_ends() {
    let dir = test_dir();
    let dead = dead_pid();
    let crashed = SegmentName::in_dir(dir.path(), "earlier-run", "e");
    let crashed = crashed.unwrap_or_else(|e| panic!("{e}"));
    create(&crashed).keep_on_drop();
    patch(&crashed.path(), CREATOR_PID_OFFSET, &dead.to_ne_bytes());
    let neighbour = SegmentName::in_dir(dir.path(), "neighbour", "e");
    let neighbour = neighbour.unwrap_or_else(|e| panic!("{e}"));
    let _neighbour = create(&neighbour);

    let job = JobSegments::begin_in(dir.path(), "job").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        job.stale_removed(),
        &[StaleSegment {
            path: crashed.path(),
            creator_pid: dead
        }]
    );
    let a = job.name("a").unwrap_or_else(|e| panic!("{e}"));
    let b = job.name("b").unwrap_or_else(|e| panic!("{e}"));
    create(&a).keep_on_drop();
    create(&b).keep_on_drop();
    assert_eq!(
        files_in(&dir),
        vec!["sluice-job-a", "sluice-job-b", "sluice-neighbour-e"]
    );
    let mut removed = job.end().unwrap_or_else(|e| panic!("{e}"));
    removed.sort();
    assert_eq!(removed, vec![a.path(), b.path()]);
    assert_eq!(files_in(&dir), vec!["sluice-neighbour-e"]);

    // Dropping the guard (a job that ends by unwinding, say) removes them too.
    let job = JobSegments::begin_in(dir.path(), "job").unwrap_or_else(|e| panic!("{e}"));
    create(&a).keep_on_drop();
    drop(job);
    assert_eq!(files_in(&dir), vec!["sluice-neighbour-e"]);
}

#[test]
fn names_are_unique_per_job_and_edge() {
    let dir = test_dir();
    let paths: Vec<PathBuf> = [("j", "a-b"), ("j-a", "b"), ("j", "a"), ("k", "a")]
        .iter()
        .map(|(job, edge)| SegmentName::in_dir(dir.path(), job, edge).map(|n| n.path()))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{e}"));
    let unique: std::collections::HashSet<&PathBuf> = paths.iter().collect();
    assert_eq!(unique.len(), paths.len());
}

/// Set for the child process of [`a_killed_creator_is_reported_and_its_segment_removed`].
const CREATOR_CHILD_DIR: &str = "SLUICE_SHM_TEST_CREATOR_DIR";

/// Not a test of its own: run as a child process by
/// [`a_killed_creator_is_reported_and_its_segment_removed`], it creates a segment and waits to
/// be killed. Run as a normal test (without the variable), it does nothing.
#[test]
fn creator_child() {
    let Some(dir) = std::env::var_os(CREATOR_CHILD_DIR) else {
        return;
    };
    let name = SegmentName::in_dir(PathBuf::from(dir), "job", "e");
    let _segment = create(&name.unwrap_or_else(|e| panic!("{e}")));
    // Watchdog: should the parent fail to kill us, exit (and remove the segment) by ourselves.
    std::thread::sleep(std::time::Duration::from_secs(20));
}

#[test]
fn a_killed_creator_is_reported_and_its_segment_removed() {
    let dir = test_dir();
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
    let child = std::process::Command::new(exe)
        .args(["--exact", "creator_child", "--test-threads=1", "--quiet"])
        .env(CREATOR_CHILD_DIR, dir.path())
        .stdout(std::process::Stdio::null())
        .spawn();
    let mut child = child.unwrap_or_else(|e| panic!("{e}"));
    let name = name(&dir, "e");

    // Wait for the child's segment to be published (watchdog: 10 s).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !name.path().exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let opened = Segment::open(&name, &spec());
    let opened = opened.unwrap_or_else(|e| panic!("the child's segment: {e}"));
    assert_eq!(opened.creator_pid(), child.id());
    assert!(opened.creator_is_running());

    assert!(child.kill().is_ok());
    assert!(child.wait().is_ok());
    assert!(
        !opened.creator_is_running(),
        "the opener sees its creator die"
    );
    assert!(
        name.path().exists(),
        "a killed creator cannot remove its segment"
    );

    let job = JobSegments::begin_in(dir.path(), "another-job").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        job.stale_removed(),
        &[StaleSegment {
            path: name.path(),
            creator_pid: child.id()
        }]
    );
    assert!(files_in(&dir).is_empty());
    // The opener's mapping outlives the name.
    // SAFETY: the data area is `len` bytes, valid while `opened` lives, and nothing else
    // touches it now.
    unsafe { opened.as_ptr().write(1) };
}

/// A stranger's file under the name an edge's segment once had (its job id holds a pid, which
/// anyone can predict) stopped the job: it refused to create the segment. A unique name goes
/// around it and leaves it alone; the job still removes its own segments when it ends.
#[test]
fn a_file_under_the_predictable_name_does_not_stop_a_unique_segment() {
    let dir = test_dir();
    let job = JobSegments::begin_in(dir.path(), "job").unwrap_or_else(|e| panic!("{e}"));
    let base = name(&dir, "edge");
    fs::write(base.path(), b"not yours").unwrap();
    // Another user's, where we may give it away (as root).
    let strangers = std::os::unix::fs::chown(base.path(), Some(65534), Some(65534)).is_ok();
    assert!(matches!(
        create_error(&base, &spec()),
        CreateError::AlreadyExists { .. }
    ));
    if strangers {
        // And what is not ours is still never opened.
        assert!(matches!(
            open_error(&base, &spec()),
            OpenError::OwnerMismatch { found: 65534, .. }
        ));
    }
    let segment = Segment::create_unique(&base, &spec()).unwrap_or_else(|e| panic!("{e}"));
    let file_name = segment.name().file_name().to_owned();
    assert!(file_name.starts_with("sluice-job-edge-"), "{file_name}");
    assert_eq!(file_name.len(), "sluice-job-edge-".len() + 16);
    let opened = Segment::open(segment.name(), &spec()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(opened.creator_pid(), std::process::id());
    let other = Segment::create_unique(&base, &spec()).unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(other.name(), segment.name());
    // The job's end removes both, whoever created them.
    let mut ours = vec![segment.path().to_owned(), other.path().to_owned()];
    let mut removed = job.end().unwrap_or_else(|e| panic!("{e}"));
    if !strangers {
        // The "stranger" is us: the job removes that file too.
        ours.push(base.path());
    }
    ours.sort();
    removed.sort();
    assert_eq!(removed, ours);
    assert_eq!(
        fs::read(base.path()).ok(),
        strangers.then(|| b"not yours".to_vec())
    );
}
