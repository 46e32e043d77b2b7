//! Checkpoints and recovery on the real `sluice` binary (the chaos test of issue 27): WordCount
//! on a file, one PE per operator, a checkpoint every 200 ms, its PEs SIGKILLed at random
//! moments; the job restarts from its last complete checkpoint each time, ends with exit
//! status 0, and its output is byte for byte a direct count of the file's words. The same with
//! two instances of each operator and unaligned checkpoints, and over two hosts on loopback
//! TCP; and a launcher SIGKILLed, then `sluice run --from` its last
//! checkpoint, with the same output.
//!
//! Bounded: each job has a watchdog, and the input takes a few seconds to count.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;
use common::{direct_counts, kill_job, pes_of, signal, write_wordcount_input};

/// Longest a job of these tests may take before the test calls it a hang.
const WATCHDOG: Duration = Duration::from_secs(150);
/// Lines of input: about a million words.
const LINES: u64 = 200_000;
/// Lines a second the source reads (`--rate` with `--throttle-input`): the job runs about
/// eight seconds whatever the machine, its source to the end, so kills find a whole job.
const RATE: &str = "25000";
/// PEs killed in the chaos runs.
const KILLS: usize = 5;

/// The output WordCount writes for `input`, computed directly.
fn expected_output(input: &Path) -> String {
    direct_counts(&std::fs::read_to_string(input).unwrap())
        .iter()
        .map(|(word, count)| format!("{word}\t{count}\n"))
        .collect()
}

/// A `sluice run wordcount` under test, its standard error gathered as it comes.
struct Run {
    child: Child,
    stderr: Arc<Mutex<String>>,
    started: Instant,
}

impl Run {
    /// Starts `sluice run wordcount --plan processes ARGS` with `TMPDIR` set to `tmp`.
    fn start(tmp: &Path, args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["run", "wordcount", "--plan", "processes"])
            .args(args)
            .env("TMPDIR", tmp)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (pipe, into) = (child.stderr.take().unwrap(), stderr.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut text = into.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
        Self {
            child,
            stderr,
            started: Instant::now(),
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Whether the job is still running.
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

    /// Waits until the job's sources run.
    fn wait_started(&mut self) {
        while !self.stderr().contains("\nstarted: ") {
            assert!(self.running(), "the job ended early:\n{}", self.stderr());
            self.watch();
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the job to end; its exit status and standard output.
    fn finish(mut self) -> (std::process::ExitStatus, String, String) {
        while self.running() {
            self.watch();
            std::thread::sleep(Duration::from_millis(20));
        }
        let status = self.child.wait().unwrap();
        let mut stdout = String::new();
        if let Some(mut out) = self.child.stdout.take() {
            std::io::Read::read_to_string(&mut out, &mut stdout).unwrap();
        }
        // The reader has seen the end of the pipe once the process and its PEs are gone.
        let deadline = Instant::now() + Duration::from_secs(10);
        while Arc::strong_count(&self.stderr) > 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let stderr = self.stderr();
        (status, stdout, stderr)
    }
}

/// An input of [`LINES`] lines, its expected output, and where the run writes its output and
/// checkpoints.
struct Files {
    dir: tempfile::TempDir,
    input: PathBuf,
    output: PathBuf,
    checkpoints: PathBuf,
    expected: String,
}

fn files() -> Files {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.txt");
    write_wordcount_input(&input, LINES);
    Files {
        output: dir.path().join("counts.tsv"),
        checkpoints: dir.path().join("checkpoints"),
        expected: expected_output(&input),
        input,
        dir,
    }
}

impl Files {
    /// The arguments of a checkpointed run over these files, with `extra`.
    fn args<'a>(&'a self, extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec![
            "--input",
            self.input.to_str().unwrap(),
            "--output",
            self.output.to_str().unwrap(),
            "--checkpoint-every",
            "200ms",
            "--checkpoint-dir",
            self.checkpoints.to_str().unwrap(),
            "--rate",
            RATE,
            "--throttle-input",
        ];
        args.extend_from_slice(extra);
        args
    }
}

/// A pseudo-random number below `n` from `state` (xorshift), seeded per test and printed.
fn below(state: &mut u64, n: u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state % n
}

/// Runs WordCount checkpointed with `extra` arguments and SIGKILLs one of its PEs at a random
/// moment, [`KILLS`] times while it runs: it must end with status 0 and the output of a run
/// without faults, having restarted once per kill that found it running.
fn survives_killed_pes(extra: &[&str]) {
    let files = files();
    let mut args = files.args(&["--restarts", "20", "--restart-delay", "50ms"]);
    args.extend_from_slice(extra);
    let mut run = Run::start(files.dir.path(), &args);
    run.wait_started();
    let mut seed = Instant::now().elapsed().as_nanos() as u64 | 1;
    seed ^= u64::from(std::process::id()) << 20;
    eprintln!("kill moments seeded with {seed}");
    let mut killed = 0;
    while killed < KILLS && run.running() {
        let pause = Duration::from_millis(300 + below(&mut seed, 900));
        let until = Instant::now() + pause;
        while Instant::now() < until && run.running() {
            run.watch();
            std::thread::sleep(Duration::from_millis(10));
        }
        let pes = pes_of(run.child.id());
        if pes.is_empty() || !run.running() {
            continue;
        }
        let victim = &pes[below(&mut seed, pes.len() as u64) as usize];
        signal(victim.pid, "KILL");
        killed += 1;
        // The next kill waits for the restart, so that each finds a whole job.
        while run.running() && run.stderr().matches("restarting the job").count() < killed {
            run.watch();
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let (status, stdout, stderr) = run.finish();
    eprintln!("{killed} PE(s) killed\n{stdout}");
    assert!(status.success(), "{stderr}");
    let restarts = stderr.matches("restarting the job").count();
    assert!(killed >= 1, "no PE was killed while the job ran:\n{stderr}");
    assert_eq!(restarts, killed, "one restart per PE killed:\n{stderr}");
    assert!(
        stdout.contains("checkpoints: ") && stdout.contains("restarted at "),
        "the summary tells the checkpoints and restarts:\n{stdout}"
    );
    // Counts go on from the checkpoint: the summary's are a run's without faults.
    assert!(
        stdout.contains(&format!("sentences: {LINES} in ")),
        "the summary counts every sentence once:\n{stdout}"
    );
    let output = std::fs::read_to_string(&files.output).unwrap();
    assert!(
        output == files.expected,
        "after {killed} PE(s) killed the output differs from a direct count:\n{stderr}"
    );
}

#[test]
fn wordcount_under_processes_survives_killed_pes_with_the_output_of_a_run_without_faults() {
    survives_killed_pes(&[]);
}

#[test]
fn a_shuffled_wordcount_with_unaligned_checkpoints_survives_killed_pes() {
    // Two instances of split and of sum: every sum and the counts have two upstream
    // instances, whose barriers the unaligned checkpoints do not wait to align.
    survives_killed_pes(&["--set", "parallelism=2", "--checkpoint-mode", "unaligned"]);
}

#[test]
fn wordcount_over_two_hosts_on_loopback_tcp_survives_killed_pes() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts.toml");
    std::fs::write(
        &hosts,
        "[[host]]\nname = \"a\"\naddress = \"127.0.0.1\"\ncores = 2\n\n\
         [[host]]\nname = \"b\"\naddress = \"127.0.0.1\"\ncores = 2\n",
    )
    .unwrap();
    survives_killed_pes(&["--hosts", hosts.to_str().unwrap()]);
}

#[test]
fn a_pe_killed_while_the_job_restarts_is_followed_by_another_restart() {
    let files = files();
    let args = files.args(&["--restarts", "5", "--restart-delay", "50ms"]);
    let mut run = Run::start(files.dir.path(), &args);
    run.wait_started();
    let first = pes_of(run.child.id());
    signal(first[0].pid, "KILL");
    // The first PE of the restart is killed as soon as it exists: during the job's start-up.
    let mut victim = None;
    while victim.is_none() {
        assert!(run.running(), "the job ended:\n{}", run.stderr());
        run.watch();
        victim = pes_of(run.child.id())
            .into_iter()
            .find(|pe| first.iter().all(|old| old.pid != pe.pid));
        std::thread::sleep(Duration::from_millis(1));
    }
    signal(victim.unwrap().pid, "KILL");
    let (status, _, stderr) = run.finish();
    assert!(status.success(), "{stderr}");
    assert_eq!(
        stderr.matches("restarting the job").count(),
        2,
        "one restart per PE killed:\n{stderr}"
    );
    let output = std::fs::read_to_string(&files.output).unwrap();
    assert!(
        output == files.expected,
        "after a PE killed during a restart, the output differs from a direct count:\n{stderr}"
    );
}

#[test]
fn a_killed_launcher_is_resumed_from_its_last_checkpoint_with_the_same_output() {
    let files = files();
    let mut run = Run::start(files.dir.path(), &files.args(&[]));
    run.wait_started();
    // Once a checkpoint is complete, the launcher dies; its PEs leave on their own.
    let complete = || {
        sluice_checkpoint::list(&files.checkpoints).is_ok_and(|list| {
            list.iter()
                .any(|c| c.status == sluice_checkpoint::CheckpointStatus::Complete)
        })
    };
    while !complete() {
        assert!(
            run.running(),
            "the job ended before a checkpoint:\n{}",
            run.stderr()
        );
        run.watch();
        std::thread::sleep(Duration::from_millis(20));
    }
    let pes = pes_of(run.child.id());
    signal(run.child.id(), "KILL");
    let (status, _, _) = run.finish();
    assert!(!status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while pes
        .iter()
        .any(|pe| Path::new(&format!("/proc/{}", pe.pid)).exists())
    {
        assert!(Instant::now() < deadline, "the PEs outlived their launcher");
        std::thread::sleep(Duration::from_millis(20));
    }
    let from = files.checkpoints.to_str().unwrap();
    let resumed = Run::start(
        files.dir.path(),
        &[
            "--input",
            files.input.to_str().unwrap(),
            "--output",
            files.output.to_str().unwrap(),
            "--from",
            from,
        ],
    );
    let (status, _, stderr) = resumed.finish();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("starting from checkpoint "), "{stderr}");
    let output = std::fs::read_to_string(&files.output).unwrap();
    assert!(
        output == files.expected,
        "resumed from the killed launcher's checkpoint, the output differs from a direct \
         count:\n{stderr}"
    );
}
