//! Savepoints and the checkpoints' figures of a running job, on the real `sluice` binary:
//! `sluice savepoint JOB-ID DIR` keeps a savepoint that `sluice checkpoints DIR` lists as
//! complete and from which `sluice run wordcount --from DIR` ends with a direct count's
//! output; the job registry holds a job's `--checkpoint-dir`, so `sluice checkpoints JOB-ID`
//! finds it; `/metrics` and `/snapshot.json` show the checkpoint counters growing; a job that
//! takes no checkpoints refuses a savepoint, naming `--checkpoint-every`; savepoints past
//! `MAX_SAVEPOINTS_WAITING` are refused, naming it, and those waiting are each kept.
//!
//! Every test has its own job registry (`XDG_RUNTIME_DIR`) and state directory
//! (`XDG_STATE_HOME`); every job and command has a watchdog ([`PATIENCE`]).

mod common;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use common::{direct_counts, http_get, pes_of, read_counts, signal, write_wordcount_input};

/// Longest a job or a command may take before the test calls it a hang.
const PATIENCE: Duration = Duration::from_secs(120);
/// Lines of input: read at [`RATE`], about ten seconds of job whatever the machine.
const LINES: u64 = 200_000;
/// Lines a second the source reads (`--rate` with `--throttle-input`).
const RATE: &str = "20000";
/// The most savepoints a job waits for at once (`jobs::MAX_SAVEPOINTS_WAITING`).
const MAX_SAVEPOINTS_WAITING: usize = 4;

/// A test's own directory: registry, state, input and outputs.
struct Place(tempfile::TempDir);

impl Place {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for private in ["runtime", "state"] {
            let path = dir.path().join(private);
            std::fs::create_dir(&path).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        Self(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }

    /// `sluice ARGS` in this place.
    fn sluice(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
        command
            .args(args)
            .env("XDG_RUNTIME_DIR", self.path("runtime"))
            .env("XDG_STATE_HOME", self.path("state"))
            .env("TMPDIR", self.0.path());
        command
    }

    /// Runs `sluice ARGS` to its end, killing it past [`PATIENCE`].
    fn run(&self, args: &[&str]) -> Output {
        let child = self
            .sluice(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let (ended, watched) = mpsc::channel::<()>();
        let watchdog = std::thread::spawn(move || {
            let hung = watched.recv_timeout(PATIENCE).is_err();
            if hung {
                signal(pid, "KILL");
            }
            hung
        });
        let output = child.wait_with_output().unwrap();
        let _ = ended.send(());
        assert!(!watchdog.join().unwrap(), "sluice {args:?} hung");
        output
    }

    /// Starts WordCount under `plan` on an input of [`LINES`] lines (`input.txt`) read at
    /// [`RATE`], writing `counts.tsv`, a checkpoint every 200 ms into `checkpoints/`, with
    /// `extra` arguments; the job and its id.
    fn start_checkpointed(&self, plan: &str, extra: &[&str]) -> (Job, String) {
        let input = self.path("input.txt");
        write_wordcount_input(&input, LINES);
        let (output, checkpoints) = (self.path("counts.tsv"), self.path("checkpoints"));
        let mut args = vec![
            "wordcount",
            "--plan",
            plan,
            "--input",
            input.to_str().unwrap(),
            "--output",
            output.to_str().unwrap(),
            "--rate",
            RATE,
            "--throttle-input",
            "--checkpoint-every",
            "200ms",
            "--checkpoint-dir",
            checkpoints.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        self.start(&args)
    }

    /// Stops `job` (`id`) with `sluice stop` and waits for it to end well; its standard
    /// output.
    fn stop(&self, job: Job, id: &str) -> String {
        let o = self.run(&["stop", id]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let (status, stdout) = job.finish();
        assert!(status.success(), "{stdout}");
        stdout
    }

    /// Starts `sluice run ARGS` in the background and waits until the registry holds it;
    /// the job and its id.
    fn start(&self, args: &[&str]) -> (Job, String) {
        let mut child = self
            .sluice(&["run"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (pipe, into) = (child.stderr.take().unwrap(), log.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                eprintln!("{line}");
                let mut log = into.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let mut job = Job {
            child,
            log,
            started: Instant::now(),
        };
        let id = format!("{}-{}", args[0], job.child.id());
        let entry = self.path("runtime/sluice/jobs").join(format!("{id}.json"));
        job.wait_for("the job in the registry", || entry.exists().then_some(()));
        (job, id)
    }
}

/// A running `sluice run`, its standard error gathered as it comes; killed with its PEs if
/// the test ends first or it outlives [`PATIENCE`].
struct Job {
    child: Child,
    log: Arc<Mutex<String>>,
    started: Instant,
}

impl Job {
    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Calls `f` until it gives something, while the job runs and at most until the watchdog.
    fn wait_for<T>(&mut self, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        loop {
            if let Some(value) = f() {
                return value;
            }
            assert!(
                matches!(self.child.try_wait(), Ok(None)),
                "the job ended before {what}:\n{}",
                self.log()
            );
            assert!(
                self.started.elapsed() < PATIENCE,
                "gave up waiting for {what}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the job to end; its exit status and standard output.
    fn finish(mut self) -> (std::process::ExitStatus, String) {
        while matches!(self.child.try_wait(), Ok(None)) {
            assert!(
                self.started.elapsed() < PATIENCE,
                "the job did not end:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let status = self.child.wait().unwrap();
        let mut stdout = String::new();
        if let Some(mut out) = self.child.stdout.take() {
            out.read_to_string(&mut stdout).unwrap();
        }
        (status, stdout)
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            for pe in pes_of(self.child.id()) {
                signal(pe.pid, "KILL");
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The rows of a `sluice checkpoints` table, each split into its words, without the header.
fn rows(listing: &str) -> Vec<Vec<String>> {
    listing
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

/// Whether a row is of a complete savepoint.
fn complete_savepoint(row: &[String]) -> bool {
    row.get(1).is_some_and(|kind| kind == "savepoint")
        && row.last().is_some_and(|s| s == "complete")
}

#[test]
fn a_savepoint_is_listed_complete_and_a_run_from_it_counts_as_a_direct_count() {
    let place = Place::new();
    let (mut job, id) = place.start_checkpointed(
        "processes",
        // None removed while this test lists them.
        &["--checkpoints-retained", "1000"],
    );
    let (input, checkpoints) = (place.path("input.txt"), place.path("checkpoints"));

    // Given a directory, relative to this process's: kept there, its path printed.
    let kept = place.path("kept");
    let o = place.run(&["savepoint", &id, kept.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), format!("{}\n", kept.display()));
    // Without one: a new directory in the job's checkpoint directory.
    let o = place.run(&["savepoint", &id]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let default = PathBuf::from(text(&o.stdout).trim_end());
    assert_eq!(default.parent(), Some(checkpoints.as_path()), "{default:?}");
    assert!(default
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("savepoint-"));

    // The registry holds the job's --checkpoint-dir: its id finds its checkpoints and the
    // savepoint kept among them. A checkpoint being written can vanish under a listing
    // (its temporary files renamed), which then fails: it is asked again.
    let listing = job.wait_for("a listing of the job's checkpoints", || {
        let o = place.run(&["checkpoints", &id]);
        o.status.success().then(|| text(&o.stdout))
    });
    assert!(
        rows(&listing).iter().any(|r| complete_savepoint(r)),
        "{listing}"
    );
    assert!(
        rows(&listing)
            .iter()
            .any(|r| r[1] == "checkpoint" && r.last().unwrap() == "complete"),
        "{listing}"
    );

    let stdout = place.stop(job, &id);
    assert!(stdout.contains("checkpoints: "), "{stdout}");

    // The savepoint alone: one complete savepoint.
    let o = place.run(&["checkpoints", kept.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let listing = text(&o.stdout);
    assert_eq!(rows(&listing).len(), 1, "{listing}");
    assert!(complete_savepoint(&rows(&listing)[0]), "{listing}");

    // A run from it reads the rest of the input: the counts of the whole of it.
    let resumed = place.path("resumed.tsv");
    let o = place.run(&[
        "run",
        "wordcount",
        "--input",
        input.to_str().unwrap(),
        "--output",
        resumed.to_str().unwrap(),
        "--from",
        kept.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("starting from checkpoint "),
        "{}",
        text(&o.stderr)
    );
    let counts = read_counts(&resumed);
    assert!(
        counts == direct_counts(&std::fs::read_to_string(&input).unwrap()),
        "the run from the savepoint counted otherwise than a direct count"
    );
}

/// The value of the series `name{job="wordcount"}` in a scrape.
fn series(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}{{job=\"wordcount\"}} ")))
        .and_then(|v| v.parse().ok())
}

#[test]
fn metrics_and_the_page_show_the_checkpoint_counters_growing() {
    let place = Place::new();
    let (mut job, id) = place.start_checkpointed(
        "threaded",
        &["--metrics-addr", "127.0.0.1:0", "--ui", "127.0.0.1:0"],
    );
    // The addresses bound are on standard error.
    let log = job.log.clone();
    let bound = |prefix: &str, suffix: &str| {
        let log = log.lock().unwrap();
        log.lines()
            .find_map(|l| Some(l.strip_prefix(prefix)?.strip_suffix(suffix)?.to_string()))
    };
    let metrics = job.wait_for("the metrics address", || {
        bound("metrics: http://", "/metrics")
    });
    let page = job.wait_for("the page's address", || bound("ui: http://", "/"));
    let completed = |body: &str| series(body, "sluice_checkpoints_completed_total");
    let (status, body) = http_get(&metrics, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert_eq!(
        series(&body, "sluice_job_restarts_total"),
        Some(0.0),
        "{body}"
    );
    assert_eq!(
        series(&body, "sluice_checkpoints_failed_total"),
        Some(0.0),
        "{body}"
    );
    let (before, body) = job.wait_for("a complete checkpoint in /metrics", || {
        let (_, body) = http_get(&metrics, "/metrics");
        completed(&body).filter(|&n| n >= 1.0).map(|n| (n, body))
    });
    assert!(
        series(&body, "sluice_checkpoint_last_complete").is_some_and(|n| n >= 1.0),
        "{body}"
    );
    assert!(
        series(&body, "sluice_checkpoint_last_bytes").is_some_and(|n| n > 0.0),
        "{body}"
    );
    for gauge in [
        "sluice_checkpoint_last_duration_seconds",
        "sluice_checkpoint_last_alignment_seconds",
    ] {
        assert!(series(&body, gauge).is_some(), "{gauge}: {body}");
    }
    job.wait_for("the count of checkpoints to grow", || {
        let (_, body) = http_get(&metrics, "/metrics");
        completed(&body).filter(|&n| n > before)
    });
    // The page's figures have them too.
    let (_, json) = http_get(&page, "/snapshot.json");
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(
        json["checkpoints"]["completed"]
            .as_u64()
            .is_some_and(|n| n >= before as u64),
        "{json}"
    );
    assert_eq!(
        json["checkpoints"]["restarts"],
        serde_json::json!([]),
        "{json}"
    );

    let stdout = place.stop(job, &id);
    assert!(stdout.contains("checkpoints: "), "{stdout}");
}

#[test]
fn a_job_without_checkpoints_refuses_a_savepoint_naming_the_flag() {
    let place = Place::new();
    let (job, id) = place.start(&[
        "wordcount",
        "--plan",
        "threaded",
        "--rate",
        "2000",
        "--duration",
        "120",
    ]);
    let kept = place.path("kept");
    let o = place.run(&["savepoint", &id, kept.to_str().unwrap()]);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "error: job '{id}' kept no savepoint: it takes no checkpoints"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("--checkpoint-every"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!kept.exists());
    let stdout = place.stop(job, &id);
    assert!(!stdout.contains("checkpoints: "), "{stdout}");
}

#[test]
fn savepoints_past_the_bound_are_refused_and_those_waiting_are_all_kept() {
    let place = Place::new();
    // Its PEs are stopped a while: no stall for it.
    let (mut job, id) = place.start_checkpointed("processes", &["--stall-timeout", "600"]);
    let launcher = job.child.id();
    let pes = job.wait_for("the PEs", || {
        Some(pes_of(launcher)).filter(|p| !p.is_empty())
    });
    // No checkpoint completes while the PEs are stopped: every savepoint asked waits.
    for pe in &pes {
        signal(pe.pid, "STOP");
    }
    let asked = MAX_SAVEPOINTS_WAITING + 2;
    let mut clients: Vec<Child> = (0..asked)
        .map(|_| {
            place
                .sluice(&["savepoint", &id, "--timeout", "100"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Those past the bound are refused at once.
    let mut answered = Vec::new();
    job.wait_for("the refusals", || {
        let ended = clients
            .iter_mut()
            .position(|c| matches!(c.try_wait(), Ok(Some(_))));
        if let Some(ended) = ended {
            answered.push(clients.swap_remove(ended).wait_with_output().unwrap());
        }
        (answered.len() == asked - MAX_SAVEPOINTS_WAITING).then_some(())
    });
    for refused in &answered {
        let stderr = text(&refused.stderr);
        assert_eq!(refused.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "savepoints are being taken already (MAX_SAVEPOINTS_WAITING is \
                 {MAX_SAVEPOINTS_WAITING})"
            )),
            "{stderr}"
        );
    }
    for pe in &pes {
        signal(pe.pid, "CONT");
    }
    // Those waiting are kept, each in a directory of its own.
    let mut kept: Vec<PathBuf> = clients
        .into_iter()
        .map(|client| {
            let o = client.wait_with_output().unwrap();
            assert!(o.status.success(), "{}", text(&o.stderr));
            PathBuf::from(text(&o.stdout).trim_end())
        })
        .collect();
    kept.sort();
    kept.dedup();
    assert_eq!(kept.len(), MAX_SAVEPOINTS_WAITING, "{kept:?}");
    for dir in &kept {
        let o = place.run(&["checkpoints", dir.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(complete_savepoint(&rows(&text(&o.stdout))[0]), "{dir:?}");
    }
    place.stop(job, &id);
}
