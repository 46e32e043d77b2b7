//! `sluice bench checkpoint`: what checkpoints cost a running job and what they buy, on
//! WordCount driven through `sluice run` itself (this program re-run as a child, so every
//! figure is that of the command a user runs):
//!
//! 1. **Overhead.** Under each plan (`two-threads`, WordCount's shipped two-core plan, and
//!    `processes`), rounds of four runs each, interleaved: as fast as the job goes without
//!    checkpoints and with `--checkpoint-every 1s`, its words per second; then at `--rate`
//!    sentences per second (ten words each: 40,000 sentences/s is 400 k words/s) without and
//!    with, its end-to-end latency p99. The result: the medians over the rounds of each
//!    figure and of the rounds' ratios (with / without).
//! 2. **Recovery.** For each vocabulary (the distinct words the generator draws from, hence
//!    the keyed state of the count and of the table sink), a job under `processes`, with a
//!    checkpoint every second and the live metrics served (`--metrics-addr`), runs until its
//!    state has grown and a checkpoint is complete; its rate (the count's words in) over a
//!    second is the pre-kill rate; then the PE holding the count is `kill -9`ed and the time
//!    split: *detection*, from the kill to the launcher's `restarting the job from checkpoint
//!    N` line (the runtime finds the checkpoint, its manifest and its parts' headers, before
//!    it prints it); *restart*, from that line until every PE of the plan is a new process;
//!    *restore*, from then until the launcher's `the job runs again` line (every new PE has
//!    read, verified and decoded its parts and restored its instances); *replay*, from then
//!    until the start of the first 500 ms window over which the count's rate is back to 90%
//!    of the pre-kill rate (the live metrics are sampled every 250 ms, so that is known to
//!    within about a quarter of a second): the tuples since the checkpoint processed again,
//!    and the job catching up.
//! 3. **Checkpoint duration and size.** For each vocabulary, a job under `processes` with a
//!    checkpoint every second runs `--state-run` seconds; the largest of the two complete
//!    checkpoints it keeps gives the duration and the bytes (from `sluice_checkpoint::list`);
//!    beside them, the disk's own rate: the same bytes written to a file in the same
//!    directory and fsynced.
//!
//! `--quick` makes every run short and the vocabulary small: a smoke test of the whole
//! benchmark, not figures.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;
use sluice_apps::AppConfig;
use sluice_checkpoint::{CheckpointInfo, CheckpointStatus};
use sluice_plan::{PlanOptions, PlanRequest};

use crate::foundation::args::checked_repeat;
use crate::foundation::machine;
use crate::foundation::stats::median;

/// Arguments of `sluice bench checkpoint`.
#[derive(Debug, Clone, Args)]
pub struct CheckpointBenchArgs {
    /// Rounds of the overhead runs (each plan with and without checkpoints, interleaved) and
    /// repetitions of each recovery and checkpoint-size measurement.
    #[arg(long, value_name = "R", default_value_t = 3)]
    repeat: usize,
    /// Seconds of each overhead run.
    #[arg(long, value_name = "S", default_value_t = 5.0)]
    duration: f64,
    /// Sentences per second of the latency runs (ten words each).
    #[arg(long, value_name = "N", default_value_t = 40_000)]
    rate: u64,
    /// Plans of the overhead runs, comma-separated.
    #[arg(long, default_value = "two-threads,processes", value_delimiter = ',')]
    plans: Vec<String>,
    /// Vocabularies (distinct words) of the recovery runs, comma-separated. A word costs
    /// about 47 bytes of checkpoint (its count in the sum and in the table sink): 20,000 words
    /// make about 1 MB, 1,000,000 about 47 MB, 2,100,000 about 100 MB once all are drawn.
    #[arg(long, default_value = "20000,2100000", value_delimiter = ',')]
    recovery_vocabularies: Vec<usize>,
    /// Vocabularies of the checkpoint duration and size runs, comma-separated (6,400,000:
    /// about 300 MB; the most WordCount takes, 16,777,216, would make some 790 MB).
    #[arg(long, default_value = "20000,2100000,6400000", value_delimiter = ',')]
    state_vocabularies: Vec<usize>,
    /// Pads every word of the recovery and checkpoint-size runs to at least this many bytes
    /// (`--set word-bytes`): each word then costs about 2 x (its bytes + 13) + 21 bytes of
    /// checkpoint instead of 47, so 2,100,000 words of 220 bytes make about 1 GB.
    #[arg(long, value_name = "B", default_value_t = 1)]
    word_bytes: usize,
    /// Seconds a job runs before its PE is killed, or before it ends for its checkpoint's
    /// size; the state grows meanwhile.
    #[arg(long, value_name = "S", default_value_t = 15.0)]
    state_run: f64,
    /// Short runs, a small vocabulary, one repetition: a smoke test, not figures.
    #[arg(long)]
    quick: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// How long a job may take to say it started, restarted or ran back at its rate.
const PATIENCE: Duration = Duration::from_secs(60);

/// The share of the pre-kill rate at which a recovered job counts as running at full rate.
const FULL_RATE: f64 = 0.9;

/// The window a rate is measured over, from the live metrics: two of their samples (they are
/// taken every 250 ms, `sluice_exec::metrics::SAMPLE_PERIOD`), so a recovery's end is known
/// to within that.
const RATE_WINDOW: Duration = Duration::from_millis(500);

/// The settings after `--quick`.
struct Plan {
    repeat: usize,
    duration: f64,
    state_run: f64,
    recovery: Vec<usize>,
    state: Vec<usize>,
    word_bytes: usize,
}

impl CheckpointBenchArgs {
    fn plan(&self) -> anyhow::Result<Plan> {
        let repeat = checked_repeat(self.repeat)?;
        anyhow::ensure!(self.rate > 0, "--rate takes sentences per second above 0");
        for (option, value) in [
            ("--duration", self.duration),
            ("--state-run", self.state_run),
        ] {
            anyhow::ensure!(
                (0.5..=3600.0).contains(&value),
                "{option} takes 0.5 to 3600 seconds, got {value}"
            );
        }
        Ok(if self.quick {
            Plan {
                repeat: 1,
                duration: 1.0,
                state_run: 2.5,
                recovery: vec![1000],
                state: vec![1000],
                word_bytes: 1,
            }
        } else {
            Plan {
                repeat,
                duration: self.duration,
                state_run: self.state_run,
                recovery: self.recovery_vocabularies.clone(),
                state: self.state_vocabularies.clone(),
                word_bytes: self.word_bytes,
            }
        })
    }
}

/// One plan's overhead: medians over the rounds.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Overhead {
    plan: String,
    /// Words per second as fast as the job goes, without and with checkpoints.
    words_per_s: [f64; 2],
    /// Median of the rounds' ratios, with / without.
    throughput_ratio: f64,
    /// p99 end-to-end latency at the latency rate, microseconds, without and with.
    p99_us: [f64; 2],
    /// Median of the rounds' ratios, with / without.
    p99_ratio: f64,
    /// Every round: words/s without, with; p99 without, with.
    rounds: Vec<[f64; 4]>,
}

/// One recovery from a `kill -9`, seconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Recovery {
    detection_s: f64,
    restart_s: f64,
    restore_s: f64,
    replay_s: f64,
    total_s: f64,
    /// Words per second before the kill.
    rate_before: f64,
    /// Bytes of the checkpoint restored from.
    state_bytes: u64,
}

/// One vocabulary's recoveries, medians.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RecoveryResult {
    vocabulary: usize,
    median: Recovery,
    runs: Vec<Recovery>,
}

/// One checkpoint's duration and size beside the disk writing the same bytes.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct StateRun {
    bytes: u64,
    checkpoint_s: f64,
    disk_s: f64,
}

/// One vocabulary's checkpoints, medians.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StateResult {
    vocabulary: usize,
    median: StateRun,
    /// Checkpoint MB/s over the disk's MB/s (write and fsync of the same bytes).
    checkpoint_over_disk: f64,
    runs: Vec<StateRun>,
}

/// The whole benchmark's result.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CheckpointResult {
    bench: &'static str,
    rate: u64,
    duration_s: f64,
    repeat: usize,
    overhead: Vec<Overhead>,
    recovery: Vec<RecoveryResult>,
    state: Vec<StateResult>,
    load_average: Option<f64>,
    commit: &'static str,
    cpu: String,
    cores: usize,
}

/// Runs the benchmark and prints its table (or one JSON line).
pub(crate) fn main(args: &CheckpointBenchArgs) -> anyhow::Result<()> {
    let result = measure(args)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&result)?)?;
    } else {
        out.write_all(table(&result).as_bytes())?;
    }
    Ok(())
}

fn measure(args: &CheckpointBenchArgs) -> anyhow::Result<CheckpointResult> {
    let plan = args.plan()?;
    let dir = tempfile::tempdir().context("cannot make a directory for the checkpoints")?;
    let mut overhead = Vec::new();
    for name in &args.plans {
        let mut rounds = Vec::with_capacity(plan.repeat);
        for round in 1..=plan.repeat {
            let mut figures = [0.0; 4];
            for (i, checkpointed) in [false, true].into_iter().enumerate() {
                let ckpt = checkpointed.then(|| dir.path().join(format!("o-{name}-{round}")));
                let fast =
                    run_wordcount(name, None, plan.duration, ckpt.as_deref(), DEFAULT_WORDS)?;
                figures[i] = field(&fast, "words: ", "= ", "/s")?;
                let ckpt = checkpointed.then(|| dir.path().join(format!("l-{name}-{round}")));
                let paced = run_wordcount(
                    name,
                    Some(args.rate),
                    plan.duration,
                    ckpt.as_deref(),
                    DEFAULT_WORDS,
                )?;
                figures[2 + i] = field(&paced, "end-to-end latency", "p99 ", " ")?;
            }
            eprintln!(
                "overhead {name} round {round}: {:.0} / {:.0} words/s, p99 {:.0} / {:.0} us \
                 (without / with checkpoints)",
                figures[0], figures[1], figures[2], figures[3]
            );
            rounds.push(figures);
        }
        let of = |i: usize| median(&rounds.iter().map(|r| r[i]).collect::<Vec<_>>());
        let ratio =
            |a: usize, b: usize| median(&rounds.iter().map(|r| r[b] / r[a]).collect::<Vec<_>>());
        overhead.push(Overhead {
            plan: name.clone(),
            words_per_s: [of(0), of(1)],
            throughput_ratio: ratio(0, 1),
            p99_us: [of(2), of(3)],
            p99_ratio: ratio(2, 3),
            rounds,
        });
    }
    let mut recovery = Vec::new();
    for &vocabulary in &plan.recovery {
        let runs = (1..=plan.repeat)
            .map(|round| {
                let at = dir.path().join(format!("r-{vocabulary}-{round}"));
                let words = Words {
                    vocabulary,
                    bytes: plan.word_bytes,
                };
                let run = recover(words, plan.state_run, &at)
                    .with_context(|| format!("recovery, {vocabulary} words, round {round}"))?;
                eprintln!("recovery {vocabulary} words round {round}: {run:?}");
                std::fs::remove_dir_all(&at).ok();
                Ok(run)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let of = |f: fn(&Recovery) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
        let median = Recovery {
            detection_s: of(|r| r.detection_s),
            restart_s: of(|r| r.restart_s),
            restore_s: of(|r| r.restore_s),
            replay_s: of(|r| r.replay_s),
            total_s: of(|r| r.total_s),
            rate_before: of(|r| r.rate_before),
            state_bytes: of(|r| r.state_bytes as f64) as u64,
        };
        recovery.push(RecoveryResult {
            vocabulary,
            median,
            runs,
        });
    }
    let mut state = Vec::new();
    for &vocabulary in &plan.state {
        let runs = (1..=plan.repeat)
            .map(|round| {
                let at = dir.path().join(format!("s-{vocabulary}-{round}"));
                let words = Words {
                    vocabulary,
                    bytes: plan.word_bytes,
                };
                let run = checkpoint_size(words, plan.state_run, &at).with_context(|| {
                    format!("checkpoint size, {vocabulary} words, round {round}")
                })?;
                eprintln!("checkpoint {vocabulary} words round {round}: {run:?}");
                std::fs::remove_dir_all(&at).ok();
                Ok(run)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let of = |f: fn(&StateRun) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
        state.push(StateResult {
            vocabulary,
            median: StateRun {
                bytes: of(|r| r.bytes as f64) as u64,
                checkpoint_s: of(|r| r.checkpoint_s),
                disk_s: of(|r| r.disk_s),
            },
            checkpoint_over_disk: of(|r| r.disk_s / r.checkpoint_s),
            runs,
        });
    }
    Ok(CheckpointResult {
        bench: "checkpoint",
        rate: args.rate,
        duration_s: plan.duration,
        repeat: plan.repeat,
        overhead,
        recovery,
        state,
        load_average: machine::load_average(),
        commit: machine::commit(),
        cpu: machine::cpu(),
        cores: machine::cores(),
    })
}

/// The words a job draws: how many distinct ones (0: WordCount's default) and the bytes each
/// is padded to.
#[derive(Debug, Clone, Copy)]
struct Words {
    vocabulary: usize,
    bytes: usize,
}

/// WordCount's own words.
const DEFAULT_WORDS: Words = Words {
    vocabulary: 0,
    bytes: 1,
};

/// `sluice run wordcount` as this program's child: under `plan`, at `rate` sentences per
/// second (as fast as it goes without), for `duration` seconds, with a checkpoint every second
/// into `checkpoints` when given, drawing `words`.
fn wordcount_command(
    plan: &str,
    rate: Option<u64>,
    duration: f64,
    checkpoints: Option<&Path>,
    words: Words,
) -> anyhow::Result<Command> {
    let Words { vocabulary, bytes } = words;
    let mut command = Command::new(std::env::current_exe().context("cannot find this program")?);
    command.args(["run", "wordcount", "--quiet", "--plan", plan, "--duration"]);
    command.arg(duration.to_string());
    command.args(["--rate", &rate.unwrap_or(0).to_string()]);
    if vocabulary > 0 {
        command.args(["--set", &format!("vocabulary={vocabulary}")]);
    }
    if bytes > 1 {
        command.args(["--set", &format!("word-bytes={bytes}")]);
    }
    if let Some(dir) = checkpoints {
        command.args(["--checkpoint-every", "1s", "--checkpoint-dir"]);
        command.arg(dir);
        if vocabulary > 0 {
            // Two complete checkpoints kept, not three (a large state's three would not fit
            // every disk): the size run measures the larger ([`measured_checkpoint`]).
            command.args(["--checkpoints-retained", "2"]);
        }
    }
    Ok(command)
}

/// Runs `wordcount_command(...)` to its end; its standard output, the summary.
fn run_wordcount(
    plan: &str,
    rate: Option<u64>,
    duration: f64,
    checkpoints: Option<&Path>,
    words: Words,
) -> anyhow::Result<String> {
    let output = wordcount_command(plan, rate, duration, checkpoints, words)?
        .output()
        .context("cannot run sluice run wordcount")?;
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        bail!(
            "sluice run wordcount --plan {plan} failed: {}{out}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(out)
}

/// The number in `text`'s line starting `line`, between `after` and `before`.
fn field(text: &str, line: &str, after: &str, before: &str) -> anyhow::Result<f64> {
    let found = text
        .lines()
        .find(|l| l.starts_with(line))
        .with_context(|| format!("no '{line}' line in the summary:\n{text}"))?;
    let rest = found
        .split_once(after)
        .map(|(_, rest)| rest)
        .with_context(|| format!("no '{after}' in '{found}'"))?;
    let number = rest.split(before).next().unwrap_or(rest).trim();
    number
        .parse()
        .with_context(|| format!("'{number}' in '{found}' is not a number"))
}

/// Bytes of the newest complete checkpoint in `dir`: its highest-numbered directory `chk-N`
/// with a manifest (one still being written is left out).
fn newest_checkpoint_bytes(dir: &Path) -> anyhow::Result<u64> {
    let newest = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name();
            let number: u64 = name.to_str()?.strip_prefix("chk-")?.parse().ok()?;
            e.path()
                .join(sluice_checkpoint::MANIFEST_FILE)
                .exists()
                .then(|| (number, e.path()))
        })
        .max_by_key(|(number, _)| *number)
        .with_context(|| format!("no checkpoint in {}", dir.display()))?;
    tree_bytes(&newest.1)
}

fn tree_bytes(path: &Path) -> anyhow::Result<u64> {
    let mut bytes = 0;
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        bytes += if meta.is_dir() {
            tree_bytes(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(bytes)
}

/// The seconds `bytes` bytes take to be written to a new file in `dir` and fsynced.
fn disk_write(dir: &Path, bytes: u64) -> anyhow::Result<f64> {
    let path = dir.join("disk-rate");
    let chunk = vec![0x5a_u8; 1 << 20];
    let started = Instant::now();
    let mut file = std::fs::File::create(&path)?;
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        file.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    file.sync_all()?;
    let seconds = started.elapsed().as_secs_f64();
    std::fs::remove_file(&path)?;
    Ok(seconds)
}

/// A checkpointed job under `processes` drawing `words` run `seconds`: the duration and
/// bytes of its [`measured_checkpoint`] beside the disk's time for the same bytes.
fn checkpoint_size(words: Words, seconds: f64, dir: &Path) -> anyhow::Result<StateRun> {
    run_wordcount("processes", None, seconds, Some(dir), words)?;
    let kept = sluice_checkpoint::list(dir)
        .with_context(|| format!("cannot list the checkpoints in {}", dir.display()))?;
    let measured = measured_checkpoint(kept)
        .with_context(|| format!("no complete checkpoint in {}", dir.display()))?;
    let bytes = measured.bytes;
    let checkpoint_s = measured.duration_ms.unwrap_or(0) as f64 / 1e3;
    let disk_s = disk_write(dir, bytes)?;
    Ok(StateRun {
        bytes,
        checkpoint_s,
        disk_s,
    })
}

/// The checkpoint a size run measures among those it kept: the largest complete one with a
/// duration. The last checkpoint of a run that ends at its `--duration` may be taken as the
/// job drains, once the keyed instances have finished, and hold none of their state (a
/// manifest and the sources' parts: under 1 KB); the newest would then measure that.
fn measured_checkpoint(kept: Vec<CheckpointInfo>) -> Option<CheckpointInfo> {
    kept.into_iter()
        .filter(|c| c.status == CheckpointStatus::Complete && c.duration_ms.is_some())
        .max_by_key(|c| c.bytes)
}

/// The count's words in so far, from the job's `/metrics` at `address`.
fn words_counted(address: &str) -> anyhow::Result<u64> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(stream, "GET /metrics HTTP/1.0\r\nHost: {address}\r\n\r\n")?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    text.lines()
        .filter(|l| l.starts_with("sluice_tuples_in_total{") && l.contains("operator=\"sum\""))
        .map(|l| l.rsplit(' ').next().unwrap_or("").parse::<u64>())
        .sum::<Result<u64, _>>()
        .context("a garbled metrics line")
}

/// A free port on 127.0.0.1.
fn free_address() -> anyhow::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.to_string())
}

/// The index of the PE holding WordCount's count under `processes`.
fn count_pe() -> anyhow::Result<usize> {
    let app = sluice_apps::build("wordcount", &AppConfig::default())?;
    let plan = sluice_plan::plan(&app.graph, &PlanRequest::Processes, &PlanOptions::default())?;
    plan.instances
        .iter()
        .find(|i| i.name == "sum")
        .map(|i| i.pe)
        .context("WordCount's plan has no 'sum'")
}

/// The PEs `launcher` started, by their environment (`SLUICE_PE`): (index, pid).
fn pes_of(launcher: u32) -> Vec<(usize, u32)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{launcher}/task")) else {
        return Vec::new();
    };
    let children = tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        });
    children
        .filter_map(|pid| {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            let index = environ
                .split(|&b| b == 0)
                .find_map(|v| v.strip_prefix(b"SLUICE_PE="))
                .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())?;
            Some((index, pid))
        })
        .collect()
}

/// A job started as a child, its standard error read line by line with the time of each.
struct Watched {
    child: Child,
    lines: Receiver<(Instant, String)>,
}

impl Watched {
    fn start(mut command: Command) -> anyhow::Result<Self> {
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot start sluice run wordcount")?;
        let stderr = child.stderr.take().context("no standard error")?;
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if send.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        Ok(Self { child, lines })
    }

    /// The time of the first line starting `start` (at most [`PATIENCE`]).
    fn line(&self, start: &str) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok((at, line)) if line.starts_with(start) => return Ok(at),
                Ok(_) => {}
                Err(_) => bail!("the job printed no '{start}' line"),
            }
        }
    }
}

impl Drop for Watched {
    /// Stops the job as Ctrl-C would (its PEs end with it) and waits for it.
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let _ = self.child.wait();
    }
}

/// The words per second the count took over `window`, from two readings of the metrics.
fn rate_over(address: &str, window: Duration) -> anyhow::Result<f64> {
    let (first, at) = (words_counted(address)?, Instant::now());
    std::thread::sleep(window);
    let last = words_counted(address)?;
    Ok(last.saturating_sub(first) as f64 / at.elapsed().as_secs_f64())
}

/// The start of the first window of [`RATE_WINDOW`] over which the count took `rate` words
/// per second or more, reading the live metrics every 20 ms from now (a window ends at
/// each reading, starting at the latest earlier reading far enough back).
fn back_to_rate(address: &str, rate: f64, deadline: Instant) -> anyhow::Result<Instant> {
    let mut readings: Vec<(Instant, u64)> = Vec::new();
    loop {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the job did not get back to its rate"
        );
        // A reading of 0 is a job whose restarted PEs have not reported yet; the first that
        // have start from the checkpoint's counts, which are no rate.
        if let Ok(counted @ 1..) = words_counted(address) {
            let now = Instant::now();
            let start = readings
                .iter()
                .rev()
                .find(|(at, _)| now - *at >= RATE_WINDOW);
            if let Some(&(at, first)) = start {
                let window = (now - at).as_secs_f64();
                if counted.saturating_sub(first) as f64 / window >= rate {
                    return Ok(at);
                }
            }
            readings.push((now, counted));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One `kill -9` of the count's PE in a job drawing `words` that ran `seconds`.
fn recover(words: Words, seconds: f64, dir: &Path) -> anyhow::Result<Recovery> {
    let address = free_address()?;
    // The job runs long enough to be killed and to recover; it is stopped at the end.
    let mut command = wordcount_command("processes", None, seconds + 60.0, Some(dir), words)?;
    command.args(["--metrics-addr", &address, "--restarts", "1"]);
    // `--quiet` keeps the restart line: the runtime prints it, not the log.
    let job = Watched::start(command)?;
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let rate_before = rate_over(&address, Duration::from_secs(1))?;
    let launcher = job.child.id();
    let victim_index = count_pe()?;
    let before = pes_of(launcher);
    let (_, victim) = *before
        .iter()
        .find(|(index, _)| *index == victim_index)
        .context("the count's PE is not running")?;
    let killed = Instant::now();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(victim as i32).context("a PE's pid is 0")?,
        rustix::process::Signal::KILL,
    )
    .context("cannot kill the count's PE")?;
    let restart_line = job.line("restarting the job from checkpoint")?;
    // The checkpoint restored from, before the restarted job completes one of its own.
    let state_bytes = newest_checkpoint_bytes(dir)?;
    let deadline = Instant::now() + PATIENCE;
    let restarted = loop {
        let now = pes_of(launcher);
        if now.len() == before.len() && now.iter().all(|pe| !before.contains(pe)) {
            break Instant::now();
        }
        anyhow::ensure!(Instant::now() < deadline, "the new PEs did not all start");
        std::thread::sleep(Duration::from_millis(5));
    };
    // Its time is when it was printed, whenever it is read.
    let restored = job.line("the job runs again from checkpoint")?;
    let recovered = back_to_rate(&address, FULL_RATE * rate_before, deadline)?;
    drop(job);
    Ok(Recovery {
        detection_s: (restart_line - killed).as_secs_f64(),
        restart_s: (restarted - restart_line).as_secs_f64(),
        restore_s: (restored - restarted).as_secs_f64(),
        replay_s: (recovered - restored).as_secs_f64(),
        total_s: (recovered - killed).as_secs_f64(),
        rate_before,
        state_bytes,
    })
}

/// Bytes as MB (10^6) with one decimal.
fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// The result in markdown.
pub(crate) fn table(r: &CheckpointResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "sluice bench checkpoint: WordCount through `sluice run`, a checkpoint every second, \
         medians of {} round(s); commit {}, {}, {} cores, load average {}\n",
        r.repeat,
        r.commit,
        r.cpu,
        r.cores,
        r.load_average.map_or("-".into(), |l| format!("{l:.2}"))
    );
    out.push_str(
        "| plan | words/s without | with | ratio | p99 without | with | ratio |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
    );
    for o in &r.overhead {
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.0} | {:.3}x | {:.0} us | {:.0} us | {:.2}x |",
            o.plan,
            o.words_per_s[0],
            o.words_per_s[1],
            o.throughput_ratio,
            o.p99_us[0],
            o.p99_us[1],
            o.p99_ratio
        );
    }
    let _ = writeln!(
        out,
        "\n(p99 at {} sentences/s, {} words/s)\n",
        r.rate,
        r.rate * 10
    );
    out.push_str(
        "| vocabulary | checkpoint | words/s before | detection | restart | restore | replay | total |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for v in &r.recovery {
        let m = &v.median;
        let _ = writeln!(
            out,
            "| {} | {} | {:.0} | {:.0} ms | {:.0} ms | {:.0} ms | {:.0} ms | {:.0} ms |",
            v.vocabulary,
            mb(m.state_bytes),
            m.rate_before,
            m.detection_s * 1e3,
            m.restart_s * 1e3,
            m.restore_s * 1e3,
            m.replay_s * 1e3,
            m.total_s * 1e3
        );
    }
    out.push_str(
        "\n| vocabulary | checkpoint | duration | MB/s | disk write+fsync | disk MB/s | checkpoint / disk |\n\
         |---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for s in &r.state {
        let m = &s.median;
        let _ = writeln!(
            out,
            "| {} | {} | {:.0} ms | {:.0} | {:.0} ms | {:.0} | {:.2}x |",
            s.vocabulary,
            mb(m.bytes),
            m.checkpoint_s * 1e3,
            m.bytes as f64 / 1e6 / m.checkpoint_s,
            m.disk_s * 1e3,
            m.bytes as f64 / 1e6 / m.disk_s,
            s.checkpoint_over_disk
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_figures_are_read_from_their_lines() {
        let summary = "words: 528640 in 3.038 s = 174037/s\n\
                       end-to-end latency (us): p50 14860.3  p99 61210.6  p99.9 1.0\n\
                       checkpoints: 3 complete, 0 failed; the last (3) took 0.012 s, 1.2 KiB, x";
        assert_eq!(field(summary, "words: ", "= ", "/s").unwrap(), 174037.0);
        assert_eq!(
            field(summary, "end-to-end latency", "p99 ", " ").unwrap(),
            61210.6
        );
        assert_eq!(
            field(summary, "checkpoints: ", "took ", " s").unwrap(),
            0.012
        );
        let missing = field("words: none", "sentences: ", "= ", "/s").unwrap_err();
        assert!(
            missing.to_string().contains("no 'sentences: ' line"),
            "{missing}"
        );
        assert!(field("words: x = many/s", "words: ", "= ", "/s").is_err());
    }

    /// A run's last checkpoint, taken as it drained and holding no keyed state, is not the
    /// one measured: the largest complete one is (one still being written left out).
    #[test]
    fn the_size_run_measures_the_largest_complete_checkpoint() {
        let info = |n: u64, bytes, status| CheckpointInfo {
            dir: format!("chk-{n}").into(),
            n: Some(n),
            kind: Some(sluice_checkpoint::CheckpointKind::Checkpoint),
            created_unix_ms: Some(n * 1000),
            bytes,
            duration_ms: Some(n * 100),
            alignment_ms: Some(0),
            status,
        };
        let kept = vec![
            info(5, 98_362_510, CheckpointStatus::Complete),
            info(6, 995, CheckpointStatus::Complete),
            info(7, 120_000_000, CheckpointStatus::Partial),
        ];
        let measured = measured_checkpoint(kept).unwrap();
        assert_eq!((measured.n, measured.bytes), (Some(5), 98_362_510));
        assert!(measured_checkpoint(Vec::new()).is_none());
    }

    #[test]
    fn the_count_runs_in_a_pe_of_its_own() {
        assert!(count_pe().is_ok());
    }
}
