//! What the tests that run jobs of processes share: killing a PE of a running job, inputs for
//! WordCount, and running it to compare its counts with a direct count; the job registry of a
//! test's own (`sluice jobs`, `sluice stop`); the watchers of a job (`sluice ui`, `sluice top`:
//! [`watch`]).
// Each test binary includes this module and uses a part of it.
#![allow(dead_code)]

pub mod watch;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// SIGKILLs `victim`, a PE of the job `launcher` runs, and waits for the job to end (at most
/// 100 s from `started`, which would be a hang); returns the launcher's output, after checking
/// that it failed.
pub fn kill_pe_and_wait(launcher: Child, victim: u32, started: Instant) -> Output {
    assert!(Command::new("kill")
        .args(["-KILL", &victim.to_string()])
        .status()
        .unwrap()
        .success());
    let o = launcher.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(100), "no hang");
    assert!(!o.status.success());
    o
}

/// Writes `lines` lines of 0 to 10 words, drawn from 211 (`w0` to `w210`), for WordCount.
pub fn write_wordcount_input(path: &Path, lines: u64) {
    let mut text = String::new();
    for i in 0..lines {
        let words: Vec<String> = (0..(i % 11))
            .map(|k| format!("w{}", (i * 13 + k * 17) % 211))
            .collect();
        text.push_str(&words.join(" "));
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

/// A line of about `len` bytes: words of one letter `a`-`j` repeated `1..=longest` times, drawn
/// from a fixed pseudo-random sequence seeded by `seed`, separated by single spaces.
pub fn line(len: usize, longest: u64, seed: u64) -> String {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut line = String::with_capacity(len + 8);
    while line.len() < len {
        if !line.is_empty() {
            line.push(' ');
        }
        let letter = (b'a' + (next() % 10) as u8) as char;
        line.extend(std::iter::repeat_n(letter, 1 + (next() % longest) as usize));
    }
    line
}

/// The counts of the words of `text`, computed directly.
pub fn direct_counts(text: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for word in text.split_ascii_whitespace() {
        *counts.entry(word.to_owned()).or_insert(0) += 1;
    }
    counts
}

/// Runs WordCount on `input` under `plan` (with `extra` arguments) and returns the counts it
/// wrote.
pub fn wordcount(dir: &Path, input: &Path, plan: &str, extra: &[&str]) -> BTreeMap<String, u64> {
    wordcount_logged(dir, input, plan, extra).0
}

/// As [`wordcount`], with what the run logged on standard error.
pub fn wordcount_logged(
    dir: &Path,
    input: &Path,
    plan: &str,
    extra: &[&str],
) -> (BTreeMap<String, u64>, String) {
    let name = Path::new(plan).file_name().expect("a plan's name or file");
    let output = dir.join(name).with_extension("tsv");
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "wordcount", "--plan", plan, "--input"])
        .arg(input)
        .arg("--output")
        .arg(&output)
        .args(extra)
        .output()
        .expect("sluice runs");
    assert!(
        o.status.success(),
        "{plan}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    (
        read_counts(&output),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The counts WordCount wrote to `output`: a word, a tab and its count a line.
pub fn read_counts(output: &Path) -> BTreeMap<String, u64> {
    std::fs::read_to_string(output)
        .unwrap()
        .lines()
        .map(|l| {
            let (word, count) = l.split_once('\t').expect("word<TAB>count");
            (word.to_owned(), count.parse().expect("a count"))
        })
        .collect()
}

/// `GET path` from the HTTP server at `address` (a `sluice run --ui` or `--metrics-addr`):
/// the status line and the body.
pub fn http_get(address: &str, path: &str) -> (String, String) {
    let (status, _, body) = http(address, "GET", path, &[], "");
    (status, body)
}

/// `METHOD path` with `headers` (`Name: value` each) and `body` to the HTTP server at
/// `address`: the status line, the whole head, and the body.
pub fn http(
    address: &str,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &str,
) -> (String, String, String) {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {address}\r\n");
    for header in headers {
        request.push_str(&format!("{header}\r\n"));
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (
        head.lines().next().unwrap().to_string(),
        head.to_string(),
        body.to_string(),
    )
}

/// A PE of a running job, as its process's environment describes it.
#[derive(Debug, Clone)]
pub struct Pe {
    pub pid: u32,
    /// Its index in the plan.
    pub index: usize,
}

/// Sends the signal `name` (`STOP`, `KILL`, ...) to `pid`.
pub fn signal(pid: u32, name: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status();
}

/// The pids of `parent`'s children, from each of its threads' `/proc/PID/task/TID/children`.
pub fn children_of(parent: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{parent}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// The PEs the launcher `launcher` started directly, by their environment.
pub fn pes_of(launcher: u32) -> Vec<Pe> {
    let mut pes: Vec<Pe> = children_of(launcher)
        .into_iter()
        .filter_map(|pid| {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            let index = environ
                .split(|&b| b == 0)
                .find_map(|v| v.strip_prefix(b"SLUICE_PE="))
                .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())?;
            Some(Pe { pid, index })
        })
        .collect();
    pes.sort_by_key(|p| p.index);
    pes
}

/// A command running the `sluice` binary, through `sh -c SCRIPT` when `script` is given (the
/// script runs it as `"$0" "$@"`).
pub fn sluice_through(script: Option<&str>) -> Command {
    let exe = env!("CARGO_BIN_EXE_sluice");
    match script {
        Some(script) => {
            let mut c = Command::new("sh");
            c.args(["-c", script, exe]);
            c
        }
        None => Command::new(exe),
    }
}

/// SIGKILLs the PEs of the job `launcher` runs, then the launcher itself (a watchdog's end).
pub fn kill_job(launcher: &mut Child) {
    for pe in pes_of(launcher.id()) {
        signal(pe.pid, "KILL");
    }
    let _ = launcher.kill();
}

/// Runs the `sluice` binary with `args` to the end.
pub fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("sluice runs")
}

/// Runs the `sluice` binary with `args` to the end, killing it (and failing the test) once it
/// has run for `watchdog`, which would be a hang.
pub fn sluice_within(args: &[&str], watchdog: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sluice runs");
    let started = Instant::now();
    while child.try_wait().expect("sluice is waited for").is_none() {
        if started.elapsed() > watchdog {
            let _ = child.kill();
            panic!("sluice {args:?} ran past {watchdog:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("sluice's output")
}

/// A run's standard output, as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A run's standard error, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Spawns `command` (a `sluice run`) with its output piped and waits until its sources run
/// (its `started:` line; at most 60 s). Its standard error goes on to this test's.
pub fn start_and_wait(mut command: Command) -> Child {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (started, wait) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.starts_with("started:") {
                let _ = started.send(());
            }
            eprintln!("{line}");
        }
    });
    wait.recv_timeout(Duration::from_secs(60))
        .expect("the job started");
    child
}

/// How long a registry test waits for a job to end (a hang, not a slow machine, trips it).
const JOB_PATIENCE: Duration = Duration::from_secs(60);

/// A command running the `sluice` binary with its job registry in `registry` (as
/// `XDG_RUNTIME_DIR`, a test's own, mode 0700).
pub fn sluice_in(registry: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command.env("XDG_RUNTIME_DIR", registry);
    command
}

/// What `sluice jobs` lists in `registry`.
pub fn jobs_in(registry: &Path) -> String {
    let o = sluice_in(registry).arg("jobs").output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    String::from_utf8(o.stdout).unwrap()
}

/// `sluice stop ID` in `registry`, checking that it says it stopped the job.
pub fn stop_in(registry: &Path, id: &str) {
    let stopped = sluice_in(registry).args(["stop", id]).output().unwrap();
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    assert_eq!(stdout(&stopped), format!("stopped job '{id}'\n"));
}

/// The pid of the program a test binary's watchdog kills before it ends the binary (0: none
/// yet); its PEs leave with it.
// SYNC: a pid only, no data behind it; Relaxed.
pub static WATCHED: AtomicU32 = AtomicU32::new(0);

/// Ends this test binary (one without the harness) with status 2 once `limit` has passed,
/// killing the program in [`WATCHED`] first: a hang, not a slow machine, should trip it.
pub fn watchdog(limit: Duration, test: &'static str) {
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        eprintln!("the test {test} hung for {limit:?}");
        // SYNC: see `WATCHED`.
        match WATCHED.load(Ordering::Relaxed) {
            0 => {}
            pid => signal(pid, "KILL"),
        }
        std::process::exit(2);
    });
}

/// A program a test started and waits on: killed if the test fails first (a job's endless or
/// paced source would run on after it).
pub struct Program(pub Option<Child>);

impl Drop for Program {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits for `child` to end, killing it after a minute.
pub fn finish(mut child: Child) -> Output {
    let began = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if began.elapsed() > JOB_PATIENCE {
            let _ = child.kill();
            panic!("the job did not end: {:?}", child.wait_with_output());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// Where Chromium is, if it is installed.
pub fn chromium() -> Option<String> {
    ["chromium", "chromium-browser"]
        .into_iter()
        .find_map(|name| {
            let found = Command::new("which").arg(name).output().ok()?;
            found
                .status
                .success()
                .then(|| String::from_utf8_lossy(&found.stdout).trim().to_string())
        })
}

/// Headless Chromium on `url` with `what` (`--dump-dom`, `--screenshot=FILE`), its profile in
/// `profile`, after letting the page's script run for a few seconds of virtual time.
pub fn browse(browser: &str, profile: &Path, url: &str, what: &str) -> String {
    let o = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args([
            "--window-size=1280,900",
            "--virtual-time-budget=4000",
            what,
            url,
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
}
