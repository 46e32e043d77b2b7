//! The fault suite's network cases: strangers at a PE's `tcp` receiver while its job starts.
//!
//! Two hosts on 127.0.0.1 in a hosts file: WordCount's `sentences` and `sum` run on host `a`,
//! `split` and `counts` on host `b`, whose launch prefix waits for a gate file the test makes.
//! So the test reaches the receiver `sum` listens on for `split` before `split` connects: it
//! finds the port among the listening sockets of the `sum` PE, attacks it, then opens the gate.
//!
//! Strangers that connect and say nothing (more than the old limit of 16 pending handshakes),
//! send garbage, a cut hello or a frame length of 4 GiB are refused, each named in a warning,
//! the receiving PE's memory stays small, and the job gives the counts one thread gives. A peer
//! that holds the job's secret and sends a frame length of 4 GiB fails the job, named with what
//! it sent as the cause. Every test has a watchdog and checks that the job leaves no process,
//! shared segment or job directory behind.

mod common;

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use sluice_transport::tcp::{MAGIC, VERSION};

/// The longest any step may take: only a hang takes this long.
const WATCHDOG: Duration = Duration::from_secs(90);
/// A receiving PE's virtual memory stays under this (a debug PE maps about 230 MiB; one
/// allocation of a 4 GiB frame would not fit).
const MEMORY_BOUND_KIB: u64 = 1 << 20;
/// The frame limit of WordCount's `tcp` edges (default parameters).
const FRAME_LIMIT: u32 = (64 << 10) + 9;

/// A WordCount job across the two hosts, started, its host `b` held at the gate.
struct Job {
    launcher: Child,
    dir: tempfile::TempDir,
    gate: PathBuf,
    started: Instant,
}

/// What a job left: its exit, its standard error, its output.
struct Ended {
    status: ExitStatus,
    stderr: String,
    output: String,
}

impl Job {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let gate = dir.path().join("gate");
        let (input, hosts) = (dir.path().join("in.txt"), dir.path().join("hosts.toml"));
        common::write_wordcount_input(&input, 20_000);
        // The wait ends, and the PE is not started, if the launcher is gone.
        let wait = format!(
            "while [ ! -e '{}' ]; do kill -0 $PPID || exit 1; sleep 0.01; done; exec \"$@\"",
            gate.display()
        );
        std::fs::write(
            &hosts,
            format!(
                "[[host]]\nname = \"a\"\naddress = \"127.0.0.1\"\ncores = 2\n\n\
                 [[host]]\nname = \"b\"\naddress = \"127.0.0.1\"\ncores = 2\nlaunch = {:?}\n",
                ["sh", "-c", &wait, "sh"]
            ),
        )
        .unwrap();
        let tmp = dir.path().join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        let launcher = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["run", "wordcount", "--plan", "processes", "--hosts"])
            .arg(&hosts)
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(dir.path().join("out.tsv"))
            .env("TMPDIR", &tmp)
            .stdout(Stdio::null())
            .stderr(File::create(dir.path().join("stderr.txt")).unwrap())
            .spawn()
            .unwrap();
        Job {
            launcher,
            dir,
            gate,
            started: Instant::now(),
        }
    }

    /// The PE of `sum` and the port of its receiver, once it listens.
    fn sum_receiver(&mut self) -> (u32, u16) {
        loop {
            let found = self.local_pes().into_iter().find_map(|pe| {
                let ports = listening_ports(pe);
                (ports.len() == 1).then(|| (pe, ports[0]))
            });
            if let Some(found) = found {
                return found;
            }
            self.check_watchdog("the receiver of sum never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The port of the launcher's control listener, once it listens.
    fn control_port(&mut self) -> u16 {
        loop {
            if let [port] = listening_ports(self.launcher.id())[..] {
                return port;
            }
            self.check_watchdog("the launcher never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The PEs of this job on host `a` (children of the launcher without a launch prefix).
    fn local_pes(&self) -> Vec<u32> {
        let parent = format!("SLUICE_LAUNCHER_PID={}\0", self.launcher.id());
        processes_whose_environment_has(&parent)
    }

    fn check_watchdog(&mut self, what: &str) {
        if self.started.elapsed() > WATCHDOG {
            let _ = self.launcher.kill();
            let _ = self.launcher.wait();
            panic!("watchdog: {what}");
        }
    }

    fn open_gate(&self) {
        std::fs::write(&self.gate, "").unwrap();
    }

    /// Waits for the job to end, sampling the virtual memory of `watched` meanwhile; checks
    /// that it left nothing behind.
    fn wait(mut self, watched: u32) -> (Ended, Vec<u64>) {
        let mut samples = Vec::new();
        let status = loop {
            if let Some(status) = self.launcher.try_wait().unwrap() {
                break status;
            }
            samples.extend(peak_virtual_kib(watched));
            self.check_watchdog("the job never ended");
            std::thread::sleep(Duration::from_millis(10));
        };
        let pid = self.launcher.id();
        let job = format!("SLUICE_JOB_ID=wordcount-{pid}-");
        let left = processes_whose_environment_has(&job);
        assert!(left.is_empty(), "processes of the job left: {left:?}");
        let marker = format!("_2d{pid}_2d");
        let segments: Vec<_> = std::fs::read_dir("/dev/shm")
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(&marker))
            .collect();
        assert!(segments.is_empty(), "segments left: {segments:?}");
        let dirs = std::fs::read_dir(self.dir.path().join("tmp"))
            .unwrap()
            .count();
        assert_eq!(dirs, 0, "the job's directory was left");
        let read = |name: &str| std::fs::read_to_string(self.dir.path().join(name));
        let ended = Ended {
            status,
            stderr: read("stderr.txt").unwrap(),
            output: read("out.tsv").unwrap_or_default(),
        };
        (ended, samples)
    }

    /// What one thread counts over the same input.
    fn fused_output(&self) -> String {
        let output = self.dir.path().join("fused.tsv");
        let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["run", "wordcount", "--input"])
            .arg(self.dir.path().join("in.txt"))
            .arg("--output")
            .arg(&output)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read_to_string(output).unwrap()
    }
}

impl Drop for Job {
    /// Stops a job a failed test left running.
    fn drop(&mut self) {
        if matches!(self.launcher.try_wait(), Ok(None)) {
            let _ = self.launcher.kill();
            let _ = self.launcher.wait();
        }
    }
}

/// The processes whose environment holds `entry` (`KEY=VALUE`, or a prefix of one).
fn processes_whose_environment_has(entry: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.windows(entry.len()).any(|w| w == entry.as_bytes()))
        })
        .collect()
}

/// The IPv4 ports process `pid` listens on.
fn listening_ports(pid: u32) -> Vec<u16> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    let inodes: Vec<String> = fds
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|link| {
            let link = link.to_string_lossy().into_owned();
            Some(
                link.strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_string(),
            )
        })
        .collect();
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
            let port = u16::from_str_radix(local.split(':').nth(1)?, 16).ok()?;
            (*state == "0A" && inodes.iter().any(|i| i == inode)).then_some(port)
        })
        .collect()
}

/// The peak virtual memory of `pid`, if it still runs.
fn peak_virtual_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmPeak:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Where strangers connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// The receiver `sum` listens on for `split`.
    SumReceiver,
    /// The launcher's control listener, which `split` and `counts` have not reached yet.
    Launcher,
}

/// Runs the job with strangers made by `attack` at `target` before `split` connects, and
/// checks that the job went on to the counts of one thread and that the receiving PE's
/// memory stayed bounded; returns the job's standard error, the strangers' addresses and the
/// target's, for the caller to check each stranger was named.
fn strangers_are_refused_and_the_job_goes_on(
    target: Target,
    attack: impl FnOnce(SocketAddr) -> Vec<TcpStream>,
) -> (String, Vec<SocketAddr>, SocketAddr) {
    let mut job = Job::start();
    let (pe, port) = job.sum_receiver();
    let port = match target {
        Target::SumReceiver => port,
        Target::Launcher => job.control_port(),
    };
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let strangers = attack(address);
    let named: Vec<SocketAddr> = strangers.iter().map(|s| s.local_addr().unwrap()).collect();
    // One sample with the strangers connected, before the gate opens: a job that ends before
    // `wait` first looks would otherwise leave none.
    let attacked = peak_virtual_kib(pe);
    job.open_gate();
    let fused = job.fused_output();
    let (ended, mut samples) = job.wait(pe);
    samples.extend(attacked);
    drop(strangers);
    assert!(ended.status.success(), "{}", ended.stderr);
    assert_eq!(ended.output, fused, "the counts of one thread");
    assert_eq!(ended.output.lines().count(), 211);
    assert!(!samples.is_empty(), "the receiving PE was never seen");
    assert!(
        samples.iter().all(|&kib| kib < MEMORY_BOUND_KIB),
        "{samples:?}"
    );
    (ended.stderr, named, address)
}

/// The warning about refusing `stranger` at `receiver`.
fn warning(receiver: SocketAddr, stranger: SocketAddr) -> String {
    format!("[sum] warning: the tcp receiver at {receiver} refused a connection from {stranger}: ")
}

fn connect_and_send(to: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(to).unwrap();
    s.write_all(bytes).unwrap();
    s
}

#[test]
fn many_connections_that_say_nothing_cannot_stop_the_job() {
    // More than the old limit of 16 pending handshakes, which made the job fail.
    let (stderr, strangers, receiver) =
        strangers_are_refused_and_the_job_goes_on(Target::SumReceiver, |to| {
            (0..40).map(|_| TcpStream::connect(to).unwrap()).collect()
        });
    // The first to connect are pushed out first; after eight, refusals of one address are
    // counted rather than shown.
    let first = warning(receiver, strangers[0]);
    assert!(
        stderr.contains(&format!(
            "{first}8 connections from its address were waiting for their hello"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("(further refusals of 127.0.0.1 are counted, not shown)"),
        "{stderr}"
    );
}

#[test]
fn a_stranger_sending_garbage_is_refused_and_named() {
    let (stderr, strangers, receiver) =
        strangers_are_refused_and_the_job_goes_on(Target::SumReceiver, |to| {
            vec![connect_and_send(
                to,
                b"GET / HTTP/1.1\r\nHost: sluice\r\n\r\n",
            )]
        });
    let expected = format!(
        "{}it did not open with a sluice tcp hello of version {VERSION} \
         (it sent 474554202f20485454502f312e310d0a)",
        warning(receiver, strangers[0])
    );
    assert!(stderr.contains(&expected), "{stderr}");
}

#[test]
fn a_stranger_sending_a_frame_length_of_4_gib_is_refused_and_named() {
    let (stderr, strangers, receiver) =
        strangers_are_refused_and_the_job_goes_on(Target::SumReceiver, |to| {
            vec![connect_and_send(to, &u32::MAX.to_le_bytes())]
        });
    let expected = format!(
        "{}it did not open with a sluice tcp hello of version {VERSION} (it sent ffffffff)",
        warning(receiver, strangers[0])
    );
    assert!(stderr.contains(&expected), "{stderr}");
}

#[test]
fn a_stranger_sending_a_cut_hello_is_refused_and_named() {
    let (stderr, strangers, receiver) =
        strangers_are_refused_and_the_job_goes_on(Target::SumReceiver, |to| {
            // The hello's magic and version, then the stranger goes away.
            let s = connect_and_send(to, &[&MAGIC[..], &VERSION.to_le_bytes()].concat());
            s.shutdown(std::net::Shutdown::Write).unwrap();
            vec![s]
        });
    let expected = format!(
        "{}it closed its connection after 10 of the hello's 60 bytes",
        warning(receiver, strangers[0])
    );
    assert!(stderr.contains(&expected), "{stderr}");
}

/// A hello of sender 0 of an edge of normal tuples, presenting `secret` (hex).
fn hello(secret: &str) -> Vec<u8> {
    let mut h = [&MAGIC[..], &VERSION.to_le_bytes(), &[0, 0]].concat();
    h.extend_from_slice(&0u32.to_le_bytes()); // sender 0
    h.extend_from_slice(&0u32.to_le_bytes()); // normal tuples
    h.extend_from_slice(&0u32.to_le_bytes()); // of no fixed size
    h.extend_from_slice(&FRAME_LIMIT.to_le_bytes());
    for pair in secret.as_bytes().chunks(2) {
        let pair = std::str::from_utf8(pair).unwrap();
        h.push(u8::from_str_radix(pair, 16).unwrap());
    }
    assert_eq!(h.len(), 60);
    h
}

/// The job's secret, from the environment of its PE `pid` (this test runs as its user).
fn secret_of(pid: u32) -> String {
    let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    env.split(|&b| b == 0)
        .find_map(|entry| entry.strip_prefix(b"SLUICE_SECRET="))
        .map(|hex| String::from_utf8(hex.to_vec()).unwrap())
        .expect("a local PE has the secret in its environment")
}

#[test]
fn a_peer_with_the_secret_sending_a_frame_of_4_gib_fails_the_job_naming_it() {
    let mut job = Job::start();
    let (pe, port) = job.sum_receiver();
    let receiver = SocketAddr::from(([127, 0, 0, 1], port));
    let mut bytes = hello(&secret_of(pe));
    bytes.extend_from_slice(&u32::MAX.to_le_bytes());
    let mut peer = connect_and_send(receiver, &bytes);
    let named = peer.local_addr().unwrap();
    job.open_gate();
    let (ended, samples) = job.wait(pe);
    // The receiver closed the connection once it failed.
    peer.set_read_timeout(Some(WATCHDOG)).unwrap();
    assert!(matches!(peer.read(&mut [0; 1]), Ok(0) | Err(_)));
    assert!(!ended.status.success(), "{}", ended.stderr);
    let cause = format!(
        "error: PE 'sum': the edge split -> sum failed: the sender at {named} sent a frame of \
         4294967295 bytes, over the limit of {FRAME_LIMIT}; the edge is poisoned"
    );
    assert!(ended.stderr.contains(&cause), "{}", ended.stderr);
    assert!(
        samples.iter().all(|&kib| kib < MEMORY_BOUND_KIB),
        "{samples:?}"
    );
}

#[test]
fn many_connections_that_say_nothing_to_the_launcher_cannot_stop_the_job() {
    // Three times as many as the launcher checks at once (which refused the PEs that came
    // after them, failing the job).
    let (stderr, strangers, _) =
        strangers_are_refused_and_the_job_goes_on(Target::Launcher, |to| {
            (0..192).map(|_| TcpStream::connect(to).unwrap()).collect()
        });
    // The warnings name the strangers refused, up to the per-address limit (which of them
    // the launcher took first depends on the order it accepted them in).
    let named = |stranger: &SocketAddr| {
        stderr.contains(&format!(
            "warning: refused a control connection from {stranger}: it had waited longest for \
             its hello when more connections came"
        ))
    };
    assert!(strangers.iter().any(named), "{stderr}");
}
