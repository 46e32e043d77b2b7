//! Every built-in application and SCSQL under checkpoints, on the real `sluice` binary (issue
//! 27, item 8): each one whose sources can replay runs with a checkpoint every 200 ms under
//! its multi-PE plan (a query: a PE per stream process), one of its PEs is SIGKILLed at a
//! random moment after a checkpoint is complete, and what it reports (or writes, or prints)
//! equals a run without faults nor checkpoints (OMDP reading its recording itself: its
//! counts). Those whose sources cannot replay (relay's pinger, OMDP's feed handlers on a live
//! feed, a query reading standard input) refuse
//! `--checkpoint-every` before they start, naming the source. Then the checkpoint files
//! themselves: a corrupt newest checkpoint is skipped for the one before (the log names the
//! file), every checkpoint corrupt is a clear error, and a checkpoint directory on a full file
//! system fails the checkpoints while the job goes on to the right output.
//!
//! Bounded: every job has a watchdog; the generated inputs take a few seconds each.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{direct_counts, kill_job, pes_of, signal, sluice_through, write_wordcount_input};
use sluice_checkpoint::CheckpointStatus;

/// Longest a job of these tests may take before the test calls it a hang.
const WATCHDOG: Duration = Duration::from_secs(120);

/// A `sluice run` under test, its standard output and error going to files.
struct Job {
    child: Child,
    dir: tempfile::TempDir,
    started: Instant,
}

/// How a finished job ended.
struct Ended {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Job {
    /// Starts `sluice ARGS`, through the shell `script` if given (which runs `"$0" "$@"`).
    fn start_through(script: Option<&str>, args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let child = sluice_through(script)
            .args(args)
            .env("TMPDIR", dir.path())
            .stdout(std::fs::File::create(dir.path().join("stdout")).unwrap())
            .stderr(std::fs::File::create(dir.path().join("stderr")).unwrap())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        Self {
            child,
            dir,
            started: Instant::now(),
        }
    }

    fn start(args: &[&str]) -> Self {
        Self::start_through(None, args)
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }

    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Kills the job's process tree and fails the test once the watchdog has passed.
    fn watch(&mut self) {
        if self.started.elapsed() > WATCHDOG {
            kill_job(&mut self.child);
            panic!("the job ran past {WATCHDOG:?}:\n{}", self.stderr());
        }
    }

    /// Waits until `done` holds, failing if the job ends first.
    fn wait_for(&mut self, what: &str, mut done: impl FnMut() -> bool) {
        while !done() {
            assert!(
                self.running(),
                "the job ended before {what}:\n{}",
                self.stderr()
            );
            self.watch();
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILLs a PE chosen by `seed`.
    fn kill_a_pe(&mut self, seed: &mut u64) {
        let pes = pes_of(self.child.id());
        assert!(!pes.is_empty(), "no PE to kill:\n{}", self.stderr());
        let victim = &pes[below(seed, pes.len() as u64) as usize];
        eprintln!("killing PE {} (pid {})", victim.index, victim.pid);
        signal(victim.pid, "KILL");
    }

    fn finish(mut self) -> Ended {
        while self.running() {
            self.watch();
            std::thread::sleep(Duration::from_millis(20));
        }
        let status = self.child.wait().unwrap();
        Ended {
            status,
            stdout: std::fs::read_to_string(self.dir.path().join("stdout")).unwrap(),
            stderr: self.stderr(),
        }
    }
}

/// A pseudo-random number below `n` from `state` (xorshift).
fn below(state: &mut u64, n: u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state % n
}

/// A seed from the clock, printed so that a failure can be told apart.
fn seed() -> u64 {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("seeded with {seed}");
    seed
}

/// Whether the checkpoint directory `dir` holds a complete checkpoint.
fn has_complete_checkpoint(dir: &Path) -> bool {
    complete_checkpoints(dir).next().is_some()
}

/// The directories of the complete checkpoints in `dir`, oldest first.
fn complete_checkpoints(dir: &Path) -> impl Iterator<Item = PathBuf> {
    sluice_checkpoint::list(dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.status == CheckpointStatus::Complete)
        .map(|c| c.dir)
}

/// Runs `sluice run ARGS` without checkpoints to its end (status 0); its standard output.
fn fault_free(args: &[&str]) -> String {
    fault_free_command("run", args)
}

/// Runs `sluice COMMAND ARGS` without checkpoints to its end (status 0); its standard output.
fn fault_free_command(command: &str, args: &[&str]) -> String {
    let clean = Job::start(&[&[command], args].concat()).finish();
    assert!(clean.status.success(), "{}", clean.stderr);
    clean.stdout
}

/// Runs `sluice run ARGS` with a checkpoint every 200 ms and SIGKILLs one of its PEs at a
/// random moment after the first complete checkpoint: it must end with status 0, having
/// restarted from a checkpoint. Returns its standard output.
fn killed_once(args: &[&str]) -> String {
    killed_once_command("run", args, Path::new(""))
}

/// [`killed_once`] for `sluice COMMAND ARGS`, whose checkpoints are in `within` under its
/// checkpoint directory.
fn killed_once_command(command: &str, args: &[&str], within: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    let checkpoints = dir.path().join("checkpoints");
    let checkpointed = [
        "--checkpoint-every",
        "200ms",
        "--checkpoint-dir",
        checkpoints.to_str().unwrap(),
        "--restarts",
        "5",
        "--restart-delay",
        "50ms",
    ];
    let mut job = Job::start(&[&[command], args, &checkpointed].concat());
    job.wait_for("a checkpoint completed", || {
        has_complete_checkpoint(&checkpoints.join(within))
    });
    let mut seed = seed();
    std::thread::sleep(Duration::from_millis(below(&mut seed, 500)));
    job.kill_a_pe(&mut seed);
    let killed = job.finish();
    assert!(killed.status.success(), "{}", killed.stderr);
    assert!(
        killed
            .stderr
            .contains("restarting the job from checkpoint "),
        "the kill found the job running and it restarted from a checkpoint:\n{}",
        killed.stderr
    );
    killed.stdout
}

/// The lines of `text` that start with one of `prefixes`.
fn lines_starting(text: &str, prefixes: &[&str]) -> Vec<String> {
    text.lines()
        .filter(|l| prefixes.iter().any(|p| l.starts_with(p)))
        .map(str::to_string)
        .collect()
}

/// A Storm topology's integrity line (and `extra` lines) after a kill equal a clean run's,
/// every tuple arrived once.
fn storm_topology_recovers(app: &str, extra: &[&str]) {
    let args = [
        app,
        "--plan",
        "processes",
        "--set",
        "parallelism=2",
        "--set",
        "tuples=100000",
        "--rate",
        "25000",
        "--duration",
        "100",
    ];
    let (clean, killed) = (fault_free(&args), killed_once(&args));
    let prefixes = [&["integrity: "], extra].concat();
    let want = lines_starting(&clean, &prefixes);
    assert!(want[0].starts_with("integrity: ok"), "{clean}");
    assert_eq!(lines_starting(&killed, &prefixes), want, "{killed}");
}

#[test]
fn sol_recovers_a_killed_pe_with_every_tuple_once() {
    storm_topology_recovers("sol", &[]);
}

#[test]
fn the_throughput_test_recovers_a_killed_pe_with_the_same_counts() {
    storm_topology_recovers("throughput-test", &["ids counted: "]);
}

#[test]
fn vwap_recovers_a_killed_pe_with_the_same_bargains() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("bargains.tsv");
    let args = [
        "vwap",
        "--plan",
        "processes",
        "--set",
        "groups=2",
        "--set",
        "records=60000",
        "--rate",
        "20000",
        "--duration",
        "100",
        "--output",
        output.to_str().unwrap(),
    ];
    let sorted =
        || sluice_apps::vwap::sink::in_feed_order(&std::fs::read_to_string(&output).unwrap());
    fault_free(&args);
    let want = sorted();
    assert!(!want.is_empty(), "the feed has bargains");
    killed_once(&args);
    assert!(sorted() == want, "after a kill the bargains differ");
}

/// A pipeline verifies the whole input once after a kill, and counts the same bytes on the
/// wire.
fn pipeline_recovers(app: &str) {
    let args = [
        app,
        "--plan",
        "processes",
        "--set",
        "size=16000000",
        "--set",
        "senders=2",
        "--set",
        "receivers=2",
        "--rate",
        "300",
        "--duration",
        "100",
    ];
    let (clean, killed) = (fault_free(&args), killed_once(&args));
    let prefixes = ["verified byte for byte: ", "on the wire: "];
    let want = lines_starting(&clean, &prefixes);
    assert!(want[0].contains("(the whole input)"), "{clean}");
    assert_eq!(lines_starting(&killed, &prefixes), want, "{killed}");
}

#[test]
fn compress_recovers_a_killed_pe_verifying_the_whole_input_once() {
    pipeline_recovers("compress");
}

#[test]
fn encrypt_recovers_a_killed_pe_verifying_the_whole_input_once() {
    pipeline_recovers("encrypt");
}

/// `sluice run ARGS --checkpoint-every 200ms` fails before it starts, naming `source`.
fn refuses_checkpoints(args: &[&str], source: &str) {
    refuses_checkpoints_command(&["run"], args, args[0], source);
}

/// `sluice COMMAND ARGS --checkpoint-every 200ms` fails before it starts, saying that `job`
/// cannot take checkpoints and naming `source`.
fn refuses_checkpoints_command(command: &[&str], args: &[&str], job: &str, source: &str) {
    let dir = tempfile::tempdir().unwrap();
    let checkpoints = dir.path().join("checkpoints");
    let o = Job::start(
        &[
            command,
            args,
            &[
                "--checkpoint-every",
                "200ms",
                "--checkpoint-dir",
                checkpoints.to_str().unwrap(),
            ],
        ]
        .concat(),
    )
    .finish();
    assert_eq!(o.status.code(), Some(1), "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "{job} cannot take checkpoints (--checkpoint-every): its source(s) '{source}' \
             cannot replay their input"
        )) && o.stderr.contains("needs replayable input"),
        "{}",
        o.stderr
    );
    assert!(!o.stderr.contains("started: "), "{}", o.stderr);
}

#[test]
fn relay_refuses_checkpoints_naming_its_pinger() {
    refuses_checkpoints(&["relay", "--plan", "processes"], "pinger");
}

#[test]
fn omdp_from_a_recording_recovers_a_killed_pe_with_every_message_once() {
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("feed.rec");
    let recorded = Job::start(&[
        "feed",
        "record",
        recording.to_str().unwrap(),
        "--packets",
        "50000",
    ])
    .finish();
    assert!(recorded.status.success(), "{}", recorded.stderr);
    let replay = format!("replay={}", recording.display());
    // Half the OPRA rate: the recording takes about four seconds.
    let args = [
        "omdp",
        "--plan",
        "two-processes",
        "--set",
        &replay,
        "--set",
        "feed=recording",
        "--rate-multiple",
        "0.5",
        "--duration",
        "100",
    ];
    // The counts, not the verdict on the rate nor the latencies, which vary run to run.
    let counts = |summary: &str| -> Vec<String> {
        lines_starting(summary, &["messages: ", "latency (us) over "])
            .into_iter()
            .map(|l| l.split(" malformed packets").next().unwrap().to_string())
            .collect()
    };
    let (clean, killed) = (fault_free(&args), killed_once(&args));
    let want = counts(&clean);
    assert!(want.len() == 2 && want[0].contains(", 0 missed"), "{clean}");
    assert_eq!(counts(&killed), want, "{killed}");
}

#[test]
fn omdp_refuses_checkpoints_naming_its_feed_handlers() {
    refuses_checkpoints(&["omdp", "--plan", "two-processes"], "fh");
}

/// A query of three stream processes (a generator, a window summing each 50,000 of its
/// numbers, and the client) whose results are in a fixed order.
const WINDOWED_QUERY: &str = "select extract(b) from sp a, sp b \
     where b=sp(winagg(extract(a), 50000, 50000, 'sum')) and a=sp(iota(1, 1000000));";

#[test]
fn a_query_recovers_a_killed_pe_with_each_result_once() {
    let args = ["-e", WINDOWED_QUERY];
    let clean = fault_free_command("query", &args);
    assert_eq!(clean.lines().count(), 20, "{clean}");
    // The query's first job keeps its checkpoints in query-1.
    let killed = killed_once_command("query", &args, Path::new("query-1"));
    assert_eq!(killed, clean, "after a kill the results differ");
}

#[test]
fn a_query_reading_a_pipe_refuses_checkpoints_naming_its_stream_process() {
    // Standard input is not a regular file: its lines come once.
    let text = "select extract(a) from sp a where a=sp(grep('x', '/dev/stdin'));";
    refuses_checkpoints_command(
        &["query"],
        &["-e", text],
        "the query",
        "sp0 = grep('x', '/dev/stdin')",
    );
}

/// A WordCount input of `lines` lines in `dir`, and its expected output.
fn wordcount_input(dir: &Path, lines: u64) -> (PathBuf, String) {
    let input = dir.join("input.txt");
    write_wordcount_input(&input, lines);
    let expected = direct_counts(&std::fs::read_to_string(&input).unwrap())
        .iter()
        .map(|(word, count)| format!("{word}\t{count}\n"))
        .collect();
    (input, expected)
}

/// Flips a byte in every part file of the checkpoint in `dir`; returns one of them.
fn corrupt(dir: &Path) -> PathBuf {
    let mut flipped = None;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "part") {
            let mut bytes = std::fs::read(&path).unwrap();
            let at = bytes.len() - 1;
            bytes[at] ^= 0x40;
            std::fs::write(&path, bytes).unwrap();
            flipped = Some(path);
        }
    }
    flipped.expect("a checkpoint has part files")
}

/// WordCount under processes from a throttled file, a checkpoint every `every` into
/// `checkpoints`, its output into `dir`; through the shell `script` if given.
fn throttled_wordcount(
    script: Option<&str>,
    dir: &Path,
    input: &Path,
    every: &str,
    checkpoints: &Path,
) -> (Job, PathBuf) {
    let output = dir.join("counts.tsv");
    let job = Job::start_through(
        script,
        &[
            "run",
            "wordcount",
            "--plan",
            "processes",
            "--input",
            input.to_str().unwrap(),
            "--output",
            output.to_str().unwrap(),
            "--rate",
            "10000",
            "--throttle-input",
            "--checkpoint-every",
            every,
            "--checkpoint-dir",
            checkpoints.to_str().unwrap(),
            "--restart-delay",
            "50ms",
        ],
    );
    (job, output)
}

#[test]
fn a_corrupt_newest_checkpoint_is_skipped_for_the_one_before_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let (input, expected) = wordcount_input(dir.path(), 60_000);
    let checkpoints = dir.path().join("checkpoints");
    let (mut job, output) = throttled_wordcount(None, dir.path(), &input, "1s", &checkpoints);
    // Right after the second checkpoint completes (the next is a second away), its files
    // are damaged and a PE dies: the job goes back to the first.
    job.wait_for("two checkpoints completed", || {
        complete_checkpoints(&checkpoints).count() >= 2
    });
    let newest = complete_checkpoints(&checkpoints).last().unwrap();
    let damaged = corrupt(&newest);
    job.kill_a_pe(&mut seed());
    let ended = job.finish();
    assert!(ended.status.success(), "{}", ended.stderr);
    let name = damaged.file_name().unwrap().to_str().unwrap();
    assert!(
        ended.stderr.contains("skipped: ")
            && ended.stderr.contains(name)
            && ended.stderr.contains("falling back to the one before"),
        "the log names the refused file {name}:\n{}",
        ended.stderr
    );
    assert!(
        std::fs::read_to_string(&output).unwrap() == expected,
        "recovered from the checkpoint before the corrupt one, the output differs from a \
         direct count:\n{}",
        ended.stderr
    );
}

#[test]
fn every_checkpoint_corrupt_is_a_clear_error_naming_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let (input, _) = wordcount_input(dir.path(), 60_000);
    let checkpoints = dir.path().join("checkpoints");
    let (mut job, _) = throttled_wordcount(None, dir.path(), &input, "1s", &checkpoints);
    job.wait_for("two checkpoints completed", || {
        complete_checkpoints(&checkpoints).count() >= 2
    });
    let damaged: Vec<PathBuf> = complete_checkpoints(&checkpoints)
        .map(|c| corrupt(&c))
        .collect();
    job.kill_a_pe(&mut seed());
    let ended = job.finish();
    assert_eq!(ended.status.code(), Some(1), "{}", ended.stderr);
    assert!(
        ended
            .stderr
            .contains("cannot recover: no complete checkpoint in ")
            && ended.stderr.contains("verifies; refused:"),
        "{}",
        ended.stderr
    );
    for file in damaged {
        let name = file.display().to_string();
        assert!(ended.stderr.contains(&name), "{name}:\n{}", ended.stderr);
    }
}

/// Whether this process may mount a small file system in a mount namespace of its own.
fn can_mount() -> bool {
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1))
            == Some("0")
    });
    root && Command::new("unshare")
        .args(["--mount", "--propagation", "private", "true"])
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn checkpoints_on_a_full_file_system_fail_and_the_job_goes_on() {
    if !can_mount() {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "CI must run this test as root with unshare --mount"
        );
        println!("skipped: mounting a small file system needs root and unshare --mount");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (input, expected) = wordcount_input(dir.path(), 30_000);
    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    // A 64 KiB file system filled up before the job starts: every checkpoint file fails.
    let script = format!(
        "exec unshare --mount --propagation private sh -c 'mount -t tmpfs -o size=64k \
         sluice-ckpt {0} && {{ cat /dev/zero > {0}/fill 2>/dev/null; exec \"$0\" \"$@\"; }}' \
         \"$0\" \"$@\"",
        full.display()
    );
    let checkpoints = full.join("checkpoints");
    let (job, output) =
        throttled_wordcount(Some(&script), dir.path(), &input, "200ms", &checkpoints);
    let ended = job.finish();
    assert!(ended.status.success(), "{}", ended.stderr);
    let summary = ended
        .stdout
        .lines()
        .find(|l| l.starts_with("checkpoints: "))
        .unwrap_or_else(|| panic!("a checkpoints line:\n{}", ended.stdout));
    assert!(
        summary.starts_with("checkpoints: 0 complete, ") && !summary.contains(" 0 failed"),
        "{summary}"
    );
    assert!(
        std::fs::read_to_string(&output).unwrap() == expected,
        "with its checkpoints failing, the output differs from a direct count:\n{}",
        ended.stderr
    );
}
