//! The fault suite's process and signal cases, on the real `sluice` binary running WordCount
//! with one PE per operator: a PE killed (source, middle, sink) at a random moment, the
//! launcher killed, a PE stopped, a source stuck in a read, a launch command that never starts
//! its PE, interrupts during start-up and during a drain, a drain past its deadline, SIGTERM,
//! an output file system full, `/dev/shm` full, a slow sink, random bytes as input, and the
//! control directory's mode.
//!
//! Every test has a watchdog; every failed job must exit non-zero with its cause on the first
//! error line; every job must leave no process, no segment of its own in `/dev/shm` and no
//! directory in its temporary directory (each job gets a `TMPDIR` of its own, so tests running
//! in parallel cannot mix up their directories); a job that drains must count out every word
//! it counted in.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

mod common;
use common::{children_of, pes_of, signal, sluice_through, stderr, stdout, Pe};

/// Longest any job of this suite may take before the test calls it a hang.
const WATCHDOG: Duration = Duration::from_secs(60);

/// A `sluice run` under test, with a private temporary directory.
struct Job {
    child: Child,
    /// Its standard error so far, read as it comes.
    stderr: Arc<Mutex<String>>,
    tmp: tempfile::TempDir,
    started: Instant,
}

impl Job {
    /// Starts `sluice run wordcount ARGS` (`--plan processes` unless `args` has a plan).
    fn start(args: &[&str]) -> Self {
        Self::start_through(None, args)
    }

    /// As [`Job::start`], through `sh -c SCRIPT` (which must `exec "$@"`) when given.
    fn start_through(script: Option<&str>, args: &[&str]) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let mut command = sluice_through(script);
        command.args(["run", "wordcount"]);
        if !args.contains(&"--plan") {
            command.args(["--plan", "processes"]);
        }
        let mut child = command
            .args(args)
            .env("TMPDIR", tmp.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (pipe, into) = (child.stderr.take().unwrap(), stderr.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                let mut text = into.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
        Self {
            child,
            stderr,
            tmp,
            started: Instant::now(),
        }
    }

    fn launcher(&self) -> u32 {
        self.child.id()
    }

    /// Waits (within the watchdog) until the job's `n` PEs have started and its sources run.
    fn running_pes(&self, n: usize) -> Vec<Pe> {
        loop {
            let started = self.stderr.lock().unwrap().contains("\nstarted: ");
            let pes = pes_of(self.launcher());
            if started && pes.len() == n {
                return pes;
            }
            self.watch("the PEs to start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Fails the test (killing the job) once the watchdog has passed.
    fn watch(&self, what: &str) {
        if self.started.elapsed() > WATCHDOG {
            kill_tree(self.launcher());
            panic!("waited {WATCHDOG:?} for {what}");
        }
    }

    /// Waits for the job to end, within the watchdog; the job's output, after checking it left
    /// no segment and no directory behind, and that none of `pes` still runs.
    fn finish(self, pes: &[u32]) -> Output {
        let Job {
            child,
            stderr,
            tmp,
            started,
        } = self;
        // The job's id, which names its segments.
        let (launcher, id) = (child.id(), format!("wordcount-{}-0", child.id()));
        let (sent, received) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = sent.send(child.wait_with_output());
        });
        let mut output = match received.recv_timeout(WATCHDOG.saturating_sub(started.elapsed())) {
            Ok(output) => output.unwrap(),
            Err(_) => {
                kill_tree(launcher);
                panic!("the job did not end within {WATCHDOG:?}");
            }
        };
        // The reader has seen the end of the pipe once the process is gone and its PEs with it.
        let deadline = Instant::now() + Duration::from_secs(10);
        while Arc::strong_count(&stderr) > 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        output.stderr = std::mem::take(&mut *stderr.lock().unwrap()).into_bytes();
        assert_clean(&id, tmp.path(), pes, &output);
        output
    }
}

/// Asserts that the job `id` left nothing: no PE of `pes` running, no segment, nothing in its
/// temporary directory.
fn assert_clean(id: &str, tmp: &Path, pes: &[u32], output: &Output) {
    let err = stderr(output);
    // A PE ends as soon as it sees its launcher gone; allow it the moment that takes.
    let deadline = Instant::now() + Duration::from_secs(10);
    while pes.iter().any(|&pid| runs(pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &pid in pes {
        assert!(!runs(pid), "process {pid} was left behind\n{err}");
    }
    assert_eq!(segments_of(id), Vec::<String>::new(), "{err}");
    let left: Vec<PathBuf> = std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(left, Vec::<PathBuf>::new(), "{err}");
}

/// Whether `pid` runs (a zombie does not).
fn runs(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, s)| !s.starts_with(" Z"))
    })
}

/// Kills `pid` and its descendants (a watchdog's last resort).
fn kill_tree(pid: u32) {
    for child in children_of(pid) {
        kill_tree(child);
    }
    signal(pid, "KILL");
}

/// The segments of job `id` in `/dev/shm` (a job id's `-` is `_2d` in a segment's name).
fn segments_of(id: &str) -> Vec<String> {
    let prefix = format!("sluice-{}-", id.replace('-', "_2d"));
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// The first `error:` line of the job's output, with the lines that follow it.
fn error_of(o: &Output) -> String {
    let err = stderr(o);
    assert!(!err.contains("panicked"), "{err}");
    err.find("error: ")
        .map(|at| err[at..].to_string())
        .unwrap_or_else(|| panic!("no error in:\n{err}"))
}

fn pids(pes: &[Pe]) -> Vec<u32> {
    pes.iter().map(|p| p.pid).collect()
}

/// A delay between 0 and 800 ms that differs from run to run, printed so a failure can be
/// replayed by hand.
fn random_moment() -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let delay = Duration::from_millis(u64::from(nanos % 800));
    println!("the fault comes {delay:?} after the PEs started");
    delay
}

/// The `N` of the summary line `NAME: N ...`.
fn summary_count(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {name} line in:\n{text}"))
}

/// Asserts that a drained job counted out every word it counted in: ten words a generated
/// sentence, and the output's counts adding up to the words.
fn assert_every_word_counted(o: &Output, output: &Path) {
    assert!(o.status.success(), "{}", stderr(o));
    let text = stdout(o);
    let words = summary_count(&text, "words");
    assert!(words > 0, "{text}");
    assert_eq!(words, summary_count(&text, "sentences") * 10, "{text}");
    let counted: u64 = std::fs::read_to_string(output)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').nth(1).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(counted, words);
}

/// A job generating 20,000 sentences a second for a minute (it ends by a fault long before),
/// with `extra` arguments.
fn generating_job(extra: &[&str]) -> Job {
    let mut args = vec!["--rate", "20000", "--duration", "60"];
    args.extend(extra);
    Job::start(&args)
}

/// Asserts that the job exited with `code`, and its error begins with `cause`; returns the
/// error with what followed it.
fn assert_failed(o: &Output, code: i32, cause: &str) -> String {
    assert_eq!(o.status.code(), Some(code), "{}", stderr(o));
    let error = error_of(o);
    assert!(error.starts_with(&format!("error: {cause}")), "{error}");
    error
}

/// Kills PE `index` (named `name`) at a random moment of a running job.
fn a_killed_pe_fails_the_job_naming_it(index: usize, name: &str) {
    let job = generating_job(&[]);
    let pes = job.running_pes(4);
    std::thread::sleep(random_moment());
    signal(pes[index].pid, "KILL");
    let o = job.finish(&pids(&pes));
    let cause = format!(
        "PE '{name}' (operators: {name}) was killed by signal 9 (SIGKILL); the job was stopped"
    );
    assert_failed(&o, 1, &cause);
}

#[test]
fn a_killed_source_pe_fails_the_job_naming_it() {
    a_killed_pe_fails_the_job_naming_it(0, "sentences");
}

#[test]
fn a_killed_middle_pe_fails_the_job_naming_it() {
    a_killed_pe_fails_the_job_naming_it(1, "split");
}

#[test]
fn a_killed_sink_pe_fails_the_job_naming_it() {
    a_killed_pe_fails_the_job_naming_it(3, "counts");
}

#[test]
fn a_killed_launcher_takes_its_pes_segments_and_directory_with_it() {
    let job = generating_job(&[]);
    let pes = job.running_pes(4);
    std::thread::sleep(random_moment());
    signal(job.launcher(), "KILL");
    let o = job.finish(&pids(&pes));
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&o.status),
        Some(9)
    );
}

#[test]
fn a_killed_launcher_over_tcp_control_links_leaves_no_job_directory() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = hosts_file(dir.path(), &["sh", "-c", "exec \"$@\"", "sh"]);
    let job = generating_job(&["--hosts", hosts.to_str().unwrap()]);
    let pes = job.running_pes(4);
    signal(job.launcher(), "KILL");
    // `finish` checks the job's temporary directory is empty.
    job.finish(&pids(&pes));
}

#[test]
fn a_launcher_killed_in_its_first_moments_leaves_nothing_once_the_next_job_ran() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = env!("CARGO_BIN_EXE_sluice");
    let run = || {
        let mut command = Command::new(exe);
        command
            .args(["run", "wordcount", "--plan", "processes", "--duration", "1"])
            .env("TMPDIR", tmp.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command
    };
    // Killed at moments spread over its first 100 ms: before, while and after it starts its
    // PEs.
    for moment in (0..100).step_by(5) {
        let mut launcher = run().spawn().unwrap();
        std::thread::sleep(Duration::from_millis(moment));
        launcher.kill().unwrap();
        launcher.wait().unwrap();
    }
    // A launcher killed before it started a PE leaves its directory to the next one.
    let o = run().output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // PEs of the killed launchers leave as soon as they find it gone.
    let began = Instant::now();
    let left = loop {
        let left: Vec<PathBuf> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        if left.is_empty() || began.elapsed() > WATCHDOG {
            break left;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(left, Vec::<PathBuf>::new());
}

#[test]
fn a_launcher_out_of_descriptors_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = hosts_file(dir.path(), &["sh", "-c", "exec \"$@\"", "sh"]);
    // Enough descriptors to start the PEs, too few to take all their control connections.
    let job = Job::start_through(
        Some("ulimit -n 20; exec \"$0\" \"$@\""),
        &["--hosts", hosts.to_str().unwrap(), "--duration", "60"],
    );
    let o = job.finish(&[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    // The launcher's own error (its PEs' lines, forwarded, come before it).
    let cause = err
        .lines()
        .find(|l| l.starts_with("error: launching the job: "));
    assert!(
        cause.is_some_and(|l| l.ends_with(
            "Too many open files (os error 24) (this process may have 20 open files, its \
             `ulimit -n`: raise it)"
        )),
        "{err}"
    );
}

#[test]
fn a_stopped_pe_is_named_within_the_stall_timeout() {
    let job = generating_job(&["--stall-timeout", "2"]);
    let pes = job.running_pes(4);
    signal(pes[1].pid, "STOP");
    let o = job.finish(&pids(&pes));
    assert_failed(
        &o,
        1,
        "PE 'split' (operators: split) sent no heartbeat for 2 s: its process is stopped \
         (SIGSTOP?); the job was stopped",
    );
}

/// Stops the launcher of a running job of four PEs (started through `launch` when given):
/// every PE must leave and the job's segments must be gone while the launcher is still
/// stopped, the PEs that noticed its silence (2 s, the stall timeout) saying why; continued,
/// the launcher fails the job with their reason.
fn a_stopped_launcher_is_left_by_its_pes(launch: Option<&[&str]>) {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "--rate",
        "20000",
        "--duration",
        "60",
        "--stall-timeout",
        "2",
    ];
    let hosts = launch.map(|launch| hosts_file(dir.path(), launch));
    if let Some(hosts) = &hosts {
        args.extend(["--hosts", hosts.to_str().unwrap()]);
    }
    let job = Job::start(&args);
    let pes = job.running_pes(4);
    let id = format!("wordcount-{}-0", job.launcher());
    signal(job.launcher(), "STOP");
    // A PE that left is a zombie of the stopped launcher, which cannot reap it yet.
    while pes.iter().any(|pe| runs(pe.pid)) || !segments_of(&id).is_empty() {
        job.watch("the PEs to leave their stopped launcher");
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(job.launcher(), "CONT");
    let o = job.finish(&pids(&pes));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let why = "the launcher is gone: it sent no heartbeat for 2 s, the stall timeout: its \
               process is stopped or starved, or its host is cut off";
    // A PE that noticed the silence said why as it left (on a loaded machine one may leave
    // first and its neighbours fail on its departure before their own patience runs out,
    // which the launcher hears as consequences), and the launcher, continued, names it.
    let noticed = ["sentences", "split", "sum", "counts"]
        .iter()
        .filter(|pe| err.contains(&format!("[{pe}] error: the launcher is gone (")))
        .count();
    assert!(noticed >= 1, "{err}");
    let cause = err.lines().find(|l| l.starts_with("error: PE '"));
    assert!(cause.is_some_and(|l| l.ends_with(why)), "{err}");
}

#[test]
fn a_stopped_launcher_is_left_by_its_pes_which_remove_the_segments_and_say_why() {
    a_stopped_launcher_is_left_by_its_pes(None);
}

#[test]
fn a_stopped_launcher_is_left_by_its_pes_over_tcp_control_links() {
    // A hosts file: the PEs reach the launcher over TCP, as from other hosts.
    a_stopped_launcher_is_left_by_its_pes(Some(&["sh", "-c", "exec \"$@\"", "sh"]));
}

#[test]
fn a_source_stuck_in_a_read_is_named_within_the_stall_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("never-written");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // Held open for writing, never written: every read of it waits for ever.
    let _writer = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    let job = Job::start(&["--input", fifo.to_str().unwrap(), "--stall-timeout", "2"]);
    let pes = job.running_pes(4);
    let o = job.finish(&pids(&pes));
    assert_failed(
        &o,
        1,
        "PE 'sentences': thread 'sentences' (operators: sentences) made no progress for 2 s: \
         an operator is stuck in a call",
    );
}

/// A hosts file of one host, this machine, whose PEs start through `launch`.
fn hosts_file(dir: &Path, launch: &[&str]) -> PathBuf {
    let path = dir.join("hosts.toml");
    std::fs::write(
        &path,
        format!(
            "[[host]]\nname = \"here\"\naddress = \"127.0.0.1\"\ncores = 2\nlaunch = {launch:?}\n"
        ),
    )
    .unwrap();
    path
}

/// Waits until the launch commands of `job`'s four PEs run, each a shell with one child;
/// returns their pids.
fn launch_commands(job: &Job) -> Vec<u32> {
    loop {
        let launched: Vec<u32> = children_of(job.launcher())
            .into_iter()
            .flat_map(|pid| std::iter::once(pid).chain(children_of(pid)))
            .collect();
        if launched.len() == 8 {
            return launched;
        }
        job.watch("the launch commands to start");
    }
}

#[test]
fn a_launch_command_that_never_starts_its_pe_fails_naming_the_host() {
    let dir = tempfile::tempdir().unwrap();
    // Two commands, so the shell forks `sleep` rather than becoming it.
    let hosts = hosts_file(dir.path(), &["sh", "-c", "sleep 60; exit 1", "sh"]);
    // Room for the shells to start, on a loaded machine, before the timeout kills them.
    let job = Job::start(&["--hosts", hosts.to_str().unwrap(), "--start-timeout", "3"]);
    let launched = launch_commands(&job);
    let o = job.finish(&launched);
    let error = assert_failed(
        &o,
        1,
        "launching the job: PE 'sentences' on host 'here' (launched with `sh -c sleep 60; \
         exit 1 sh`)",
    );
    assert!(
        error.contains("did not reach the launcher within 3 s (the start timeout)"),
        "{error}"
    );
}

#[test]
fn an_interrupt_during_start_up_aborts_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // Each PE starts ten seconds late: the interrupt comes while the launcher waits for them.
    let hosts = hosts_file(dir.path(), &["sh", "-c", "sleep 10; exec \"$@\"", "sh"]);
    let job = Job::start(&["--hosts", hosts.to_str().unwrap(), "--duration", "60"]);
    let launched = launch_commands(&job);
    signal(job.launcher(), "INT");
    let o = job.finish(&launched);
    assert_failed(&o, 130, "interrupted during start-up; the job was aborted");
}

#[test]
fn a_second_interrupt_during_a_drain_aborts_and_leaves_nothing() {
    let job = generating_job(&["--stall-timeout", "60"]);
    let pes = job.running_pes(4);
    // A stopped sink: the drain cannot end.
    signal(pes[3].pid, "STOP");
    signal(job.launcher(), "INT");
    std::thread::sleep(Duration::from_millis(300));
    signal(job.launcher(), "INT");
    let o = job.finish(&pids(&pes));
    assert_failed(
        &o,
        130,
        "interrupted again during the drain; the job was aborted",
    );
}

/// A job generating sentences at `rate` for `duration` seconds and writing its counts to a
/// file, with `extra` arguments: the directory holding the file, its path, the job.
fn counting_job(rate: &str, duration: &str, extra: &[&str]) -> (tempfile::TempDir, PathBuf, Job) {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("counts.tsv");
    let mut args = vec![
        "--rate",
        rate,
        "--duration",
        duration,
        "--output",
        output.to_str().unwrap(),
    ];
    args.extend(extra);
    let job = Job::start(&args);
    (dir, output, job)
}

#[test]
fn a_drain_past_its_deadline_aborts_and_leaves_nothing() {
    let job = generating_job(&["--stall-timeout", "60", "--drain-timeout", "1"]);
    let pes = job.running_pes(4);
    signal(pes[3].pid, "STOP");
    signal(job.launcher(), "INT");
    let o = job.finish(&pids(&pes));
    let error = assert_failed(
        &o,
        1,
        "the drain did not end within 1 s of the stop (still draining: ",
    );
    assert!(
        error.contains("PE 'counts'") && error.contains("; the job was aborted"),
        "{error}"
    );
}

#[test]
fn sigterm_drains_and_counts_every_word() {
    let (_dir, output, job) = counting_job("20000", "60", &[]);
    let pes = job.running_pes(4);
    std::thread::sleep(random_moment());
    signal(job.launcher(), "TERM");
    let o = job.finish(&pids(&pes));
    assert_every_word_counted(&o, &output);
}

#[test]
fn an_output_file_system_full_at_the_end_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "to be or not to be\n".repeat(1000)).unwrap();
    let job = Job::start(&["--input", input.to_str().unwrap(), "--output", "/dev/full"]);
    let o = job.finish(&[]);
    assert_failed(
        &o,
        1,
        "PE 'counts': operator 'counts' failed: write /dev/full: No space left on device (os \
         error 28)",
    );
}

#[test]
fn a_full_dev_shm_when_a_segment_is_made_is_named() {
    if !is_root() {
        sluice_skip::skip("mounting a small /dev/shm needs root");
        return;
    }
    // A private mount namespace with a 64 KiB tmpfs on /dev/shm, too small for a segment: the
    // segment code always uses /dev/shm, so the test changes what /dev/shm is.
    let probe = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "true"])
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        sluice_skip::skip("cannot make a mount namespace here (unshare --mount failed)");
        return;
    }
    let job = Job::start_through(
        Some("exec unshare --mount --propagation private sh -c 'mount -t tmpfs -o size=64k sluice-faults /dev/shm && exec \"$0\" \"$@\"' \"$0\" \"$@\""),
        &["--rate", "20000", "--duration", "60"],
    );
    let o = job.finish(&[]);
    let error = assert_failed(&o, 1, "PE '");
    assert!(
        error.contains("cannot create shared segment /dev/shm/sluice-")
            && error.contains("no space left on its file system"),
        "{error}"
    );
}

/// Whether a private mount namespace can be made here (root, and `unshare --mount` works).
fn can_mount() -> bool {
    is_root()
        && Command::new("unshare")
            .args(["--mount", "--propagation", "private", "true"])
            .status()
            .is_ok_and(|s| s.success())
}

#[test]
fn an_output_directory_that_cannot_be_written_fails_before_the_input_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.tsv");
    let out = out.to_str().unwrap();
    // Root ignores mode bits: a read-only tmpfs over the directory, in a private mount
    // namespace; another user gets a directory without write permission.
    let script = if can_mount() {
        Some(format!(
            "exec unshare --mount --propagation private sh -c 'mount -t tmpfs -o ro \
             sluice-faults {0} && exec \"$0\" \"$@\"' \"$0\" \"$@\"",
            dir.path().display()
        ))
    } else {
        use std::os::unix::fs::PermissionsExt;
        let readonly = std::fs::Permissions::from_mode(0o555);
        std::fs::set_permissions(dir.path(), readonly).unwrap();
        None
    };
    let job = Job::start_through(
        script.as_deref(),
        &["--set", "sentences=20000", "--output", out],
    );
    let o = job.finish(&[]);
    let error = assert_failed(&o, 1, &format!("{out}: cannot write output: "));
    assert!(
        !stderr(&o).contains("started:"),
        "the job started before it found its output unwritable: {}",
        stderr(&o)
    );
    assert!(
        error.contains("Read-only file system") || error.contains("Permission denied"),
        "{error}"
    );
}

#[test]
fn a_full_output_file_system_leaves_no_partial_file() {
    if !can_mount() {
        sluice_skip::skip("mounting a small file system needs root and unshare --mount");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.tsv");
    // About 100,000 distinct words, over a megabyte of counts, into 64 KiB; the directory is
    // listed inside the namespace, where the small file system is.
    let script = format!(
        "exec unshare --mount --propagation private sh -c 'mount -t tmpfs -o size=64k \
         sluice-faults {0} && \"$0\" \"$@\"; status=$?; ls -A {0}; exit $status' \"$0\" \"$@\"",
        dir.path().display()
    );
    let job = Job::start_through(
        Some(&script),
        &[
            "--plan",
            "fused",
            "--set",
            "sentences=20000",
            "--set",
            "vocabulary=100000",
            "--output",
            out.to_str().unwrap(),
        ],
    );
    let o = job.finish(&[]);
    let error = assert_failed(&o, 1, "operator 'counts' failed: write ");
    assert!(error.contains("No space left on device"), "{error}");
    let left = stdout(&o);
    assert!(
        left.trim().is_empty(),
        "the full file system kept a partial output: {left}"
    );
}

/// Whether this process runs as root, from `/proc/self/status` (no extra dependency).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1))
            == Some("0")
    })
}

/// The resident memory of `pid` in KiB, from `/proc/PID/status`.
fn rss_kib(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// The CPU time process `pid` has used, from `/proc/PID/stat` (in clock ticks, `getconf
/// CLK_TCK` a second).
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    // utime and stime are the 14th and 15th fields, the 12th and 13th after the name.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    let hz: u64 = stdout(&Command::new("getconf").arg("CLK_TCK").output().unwrap())
        .trim()
        .parse()
        .unwrap();
    Duration::from_millis(ticks * 1000 / hz)
}

/// What one PE of a debug build holds at most: the program, its threads' stacks, its mapped
/// segments (1 MiB a channel) and bounded queues. A queue that grew without bound would pass
/// it within the test's seconds at full rate.
const RSS_BOUND_KIB: u64 = 64 * 1024;

#[test]
fn a_slow_sink_holds_the_source_back_with_bounded_memory_and_loses_nothing() {
    // The source runs as fast as it can: only backpressure holds it back. Idle threads park,
    // so a source held back uses little CPU.
    let (_dir, output, job) = counting_job("0", "5", &["--idle", "park"]);
    let pes = job.running_pes(4);
    let sink = pes[3].pid;
    let mut highest = 0;
    // The sink works a quarter of the time: stopped 150 ms, running 50 ms, for two seconds.
    let slow_until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < slow_until {
        signal(sink, "STOP");
        std::thread::sleep(Duration::from_millis(150));
        for pe in &pes {
            let rss = rss_kib(pe.pid).unwrap_or(0);
            assert!(
                rss < RSS_BOUND_KIB,
                "PE {} holds {rss} KiB, over {RSS_BOUND_KIB}",
                pe.index
            );
            highest = highest.max(rss);
        }
        signal(sink, "CONT");
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("the largest PE held {highest} KiB");
    // Then the sink stops for longer: once the queues are full, the source waits.
    signal(sink, "STOP");
    std::thread::sleep(Duration::from_millis(300));
    let before = cpu_time(pes[0].pid);
    let window = Duration::from_millis(500);
    std::thread::sleep(window);
    let used = cpu_time(pes[0].pid) - before;
    signal(sink, "CONT");
    println!("the source used {used:?} of CPU in {window:?} with the sink stopped");
    assert!(
        used < window / 2,
        "the source ran on: {used:?} of {window:?}"
    );
    let o = job.finish(&pids(&pes));
    // Bounded memory and every word counted: the source was held back, nothing dropped.
    assert_every_word_counted(&o, &output);
}

#[test]
fn random_bytes_as_input_name_the_source_first_then_what_followed() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("random.bin");
    let bytes: Vec<u8> = (0..2_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    std::fs::write(&input, bytes).unwrap();
    let job = Job::start(&["--input", input.to_str().unwrap()]);
    let o = job.finish(&[]);
    // The first line holds the first bytes that are not UTF-8: the second byte is 0x9e.
    let cause = format!(
        "PE 'sentences': operator 'sentences' failed: {}: line 1 is not valid UTF-8 at byte \
         offset 1 of the file (offset 1 in the line)",
        input.display()
    );
    let error = assert_failed(&o, 1, &cause);
    for line in error.lines().skip(1) {
        assert!(line.starts_with("  followed by: PE '"), "{error}");
    }
}

#[test]
fn the_control_directory_is_private_under_any_umask() {
    for umask in ["000", "277"] {
        let job = Job::start_through(
            Some(&format!("umask {umask}; exec \"$0\" \"$@\"")),
            &["--rate", "1000", "--duration", "3"],
        );
        let pes = job.running_pes(4);
        let dirs: Vec<PathBuf> = std::fs::read_dir(job.tmp.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&dirs[0]).unwrap().permissions(),
        );
        assert_eq!(mode & 0o7777, 0o700, "under umask {umask}");
        let o = job.finish(&pids(&pes));
        assert!(o.status.success(), "{}", stderr(&o));
    }
}

/// Any local user could keep a job from starting: its segments were named after the job's id
/// (which holds the launcher's pid, and pids are sequential) and the channel, so a file made
/// under such a name first failed the job with "cannot create shared segment ... it already
/// exists". Each receiver now binds under a name with a random nonce.
#[test]
fn files_under_the_predictable_segment_names_do_not_stop_the_job() {
    // After `exec` the shell's pid is the launcher's, so its job id is `wordcount-$$-0`.
    let script = "for c in 0 1 2 3 4 5 6 7; do : > /dev/shm/sluice-wordcount_2d$$_2d0-c$c; done; \
                  exec \"$0\" \"$@\"";
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("counts.tsv");
    let job = Job::start_through(
        Some(script),
        &[
            "--set",
            "sentences=2000",
            "--output",
            output.to_str().unwrap(),
        ],
    );
    let taken = format!("/dev/shm/sluice-wordcount_2d{}_2d0-c1", job.launcher());
    let o = job.finish(&[]);
    assert_every_word_counted(&o, &output);
    // The files were ours (the test's), so the job's end removed them with its segments.
    assert!(!Path::new(&taken).exists());
}
