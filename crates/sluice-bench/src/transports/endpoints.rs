//! The two ends of a benchmark across processes, shared by every transport that crosses
//! them: the receiving process (`sluice bench peer`, [`PeerArgs`]) started, announcing its
//! address and read back ([`PeerProcess`]), a thread pinned to a core for as long as it needs
//! ([`pin`]), and the loops that send ([`send`]) and record ([`record`]) through any
//! transport's sender and receiver.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
use sluice_shm::SegmentName;
use sluice_sync::IdleStrategy;
use sluice_transport::tcp::JobSecret;
use sluice_transport::{SendError, TupleReceiver, TupleSender};
use sluice_types::Message;

use crate::foundation::args::{Bench, Settings, Transport, TupleEncoding};
use crate::foundation::load::{Generator, Load, Span};
use crate::foundation::payload::Payload;
use crate::foundation::record::{Recorder, RunFigures};

/// The most slots in the benchmark's Vega ring.
const MAX_SLOTS: usize = 4096;
/// The fewest slots in the benchmark's Vega ring, whatever the tuple size.
const MIN_SLOTS: usize = 16;
/// Slots of the benchmark's Vega ring for a slot of `slot_bytes` bytes: `ring_bytes` worth
/// (`--ring-bytes`, by default the `shm-osr` transport's ring, so the two rings are compared
/// at the same footprint), from [`MIN_SLOTS`] to [`MAX_SLOTS`]. Sender and receiver compute
/// it alike. With a fixed slot count large tuples made a ring far past the caches (4096
/// slots of 16 KiB are 64 MiB), and every tuple went through memory.
pub(crate) fn vega_slots(slot_bytes: usize, ring_bytes: usize) -> usize {
    (ring_bytes / slot_bytes.max(1)).clamp(MIN_SLOTS, MAX_SLOTS)
}
/// How long the receiver waits for the sender's segment, and the sender for the receiver's
/// figures after the end of the run.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);
/// The environment variable carrying the job's secret to a tcp receiving process.
pub(crate) const SECRET_ENV: &str = "SLUICE_BENCH_SECRET";

/// How a receiving process's first line starts.
const LISTENING: &str = "listening ";

/// Prints the address a receiving process listens on, for the benchmark process.
pub(crate) fn announce(addr: SocketAddr) {
    println!("{LISTENING}{addr}");
}

/// The address in a receiving process's first line.
pub(crate) fn announced(line: &str) -> Option<SocketAddr> {
    line.trim().strip_prefix(LISTENING)?.parse().ok()
}

/// Options of the hidden `sluice bench peer` (the receiving process).
#[derive(Debug, Clone, Args)]
pub struct PeerArgs {
    /// The transport to receive from.
    #[arg(long, value_enum)]
    pub transport: Transport,
    /// Receive the transport's baseline instead (raw TCP, for the tcp transports).
    #[arg(long)]
    pub baseline: bool,
    /// The job name of the shm-vega segment to open.
    #[arg(long, default_value = "")]
    pub job: String,
    /// Tuple size in bytes.
    #[arg(long)]
    pub size: usize,
    /// Tuple encoding.
    #[arg(long, value_enum)]
    pub encoding: TupleEncoding,
    /// The encoded tuple size: the ring's slot, the tcp edge's largest tuple.
    #[arg(long)]
    pub slot_bytes: usize,
    /// Record latency instead of counting.
    #[arg(long)]
    pub latency: bool,
    /// Nanoseconds of warm-up not measured.
    #[arg(long)]
    pub warmup_ns: u64,
    /// How the receiver waits when idle.
    #[arg(long, value_parser = IdleStrategy::parse, default_value = "yield")]
    pub idle: IdleStrategy,
    /// Sockets of a `udp-mq` receiver.
    #[arg(long, default_value_t = sluice_transport::udp_mq::DEFAULT_QUEUES)]
    pub queues: usize,
    /// Reflect: send every tuple back over the same kind of transport instead of recording it
    /// (module `reflect`).
    #[arg(long)]
    pub reflect: bool,
    /// Where a reflecting tcp or udp-mq process sends back to.
    #[arg(long)]
    pub back: Option<SocketAddr>,
    /// Bytes of the `shm-osr` or `shm-vega` rings (the sender's and a reflector's).
    #[arg(long, default_value_t = sluice_transport::shm_osr::DEFAULT_CAPACITY_BYTES)]
    pub ring_bytes: usize,
}
/// The segment of the benchmark run `job`.
pub(crate) fn segment(job: &str) -> anyhow::Result<SegmentName> {
    Ok(SegmentName::new(job, "tuples")?)
}

/// The calling thread pinned to one core; dropping it gives the thread back the cores it had.
///
/// A benchmark loop often runs on the caller's own thread, and a process spawned later
/// inherits that thread's cores: without the restore, every peer process of the runs after the
/// first would start on core 0 alone, fail to move to core 1 (it would see one core) and share
/// core 0 with the benchmark.
#[must_use = "the thread is unpinned when the guard drops"]
pub(crate) struct Pinned {
    before: Option<CpuSet>,
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Some(before) = &self.before {
            // Failing to widen again leaves the thread on its core, which is what it had.
            let _ = sched_setaffinity(None, before);
        }
    }
}

/// Pins the calling thread to `core` while the returned guard lives, when the thread may run
/// there and on another core too (on one core there is nothing to choose).
pub(crate) fn pin(core: usize) -> Pinned {
    let before = sched_getaffinity(None).ok();
    let pinned = before.as_ref().is_some_and(|cores| {
        cores.count() >= 2 && cores.is_set(core) && {
            let mut only = CpuSet::new();
            only.set(core);
            sched_setaffinity(None, &only).is_ok()
        }
    });
    Pinned {
        before: before.filter(|_| pinned),
    }
}
/// Receives until `ends` ends of stream have arrived, recording every tuple; gives up at
/// `deadline` (checked when idle).
pub(crate) fn record<P: Payload, R: Recorder>(
    rx: &mut impl TupleReceiver<P>,
    recorder: &mut R,
    idle: IdleStrategy,
    ends: usize,
    deadline: Option<Instant>,
) -> anyhow::Result<()> {
    let mut idle = idle.waiter();
    let mut messages = Vec::with_capacity(256);
    let mut ended = 0;
    while ended < ends {
        messages.clear();
        let n = rx.poll(256, &mut messages).context("receive")?;
        for message in &messages {
            match message {
                Message::Data(tuple) => recorder.record(tuple),
                Message::EndOfStream => ended += 1,
                Message::Punctuation(_) => {}
            }
        }
        if n == 0 && deadline.is_some_and(|d| Instant::now() > d) {
            bail!("the senders stopped before ending their streams ({ended} of {ends} ended)");
        }
        idle.after_or_park(n, |timeout| rx.park(timeout));
    }
    Ok(())
}
/// The receiving process; killed if the run ends early.
pub(crate) struct PeerProcess {
    child: Child,
    stdout: BufReader<ChildStdout>,
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl PeerProcess {
    /// Starts `sluice bench peer` for the receiving side of `s`; `secret` goes in its
    /// environment.
    pub(crate) fn spawn(
        s: &Settings,
        baseline: bool,
        job: &str,
        slot_bytes: usize,
        secret: Option<&JobSecret>,
    ) -> anyhow::Result<Self> {
        Self::start(Self::command(s, baseline, job, slot_bytes, secret)?)
    }

    /// The command line of `sluice bench peer` for the receiving side of `s`; `secret` goes
    /// in its environment.
    pub(crate) fn command(
        s: &Settings,
        baseline: bool,
        job: &str,
        slot_bytes: usize,
        secret: Option<&JobSecret>,
    ) -> anyhow::Result<Command> {
        let mut command = Command::new(std::env::current_exe().context("find the sluice binary")?);
        command
            .args(["bench", "peer", "--transport", s.transport.name()])
            .args(["--job", job])
            .args(["--size", &s.size.to_string()])
            .args(["--slot-bytes", &slot_bytes.to_string()])
            .args(["--warmup-ns", &s.warmup.as_nanos().to_string()])
            .args(["--encoding", encoding_name(s.encoding)])
            .args(["--idle", s.process_idle().name()])
            .args(["--queues", &s.queues.to_string()])
            .args(["--ring-bytes", &s.ring_bytes.to_string()]);
        if matches!(s.bench, Bench::Latency { .. }) {
            command.arg("--latency");
        }
        if baseline {
            command.arg("--baseline");
        }
        if let Some(secret) = secret {
            command.env(SECRET_ENV, secret.to_hex());
        }
        Ok(command)
    }

    /// Starts `command` (a re-execution of this binary) with its output piped to us.
    pub(crate) fn start(mut command: Command) -> anyhow::Result<Self> {
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .context("start the receiving process")?;
        let stdout = child
            .stdout
            .take()
            .context("the receiving process has no output")?;
        Ok(Self {
            child,
            stdout: BufReader::new(stdout),
        })
    }

    /// The first line the receiving process printed.
    pub(crate) fn first_line(&mut self) -> anyhow::Result<String> {
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        Ok(line)
    }

    /// The address a tcp receiving process announced on its first line.
    pub(crate) fn listening(&mut self) -> anyhow::Result<SocketAddr> {
        let line = self.first_line()?;
        announced(&line)
            .with_context(|| format!("the receiving process announced no address: {line:?}"))
    }

    /// Waits for the process to exit, successfully.
    pub(crate) fn finish(mut self) -> anyhow::Result<()> {
        let mut output = String::new();
        self.stdout.read_to_string(&mut output)?;
        let status = self.child.wait()?;
        if !status.success() {
            bail!("the reflecting process failed ({status})");
        }
        Ok(())
    }

    /// Waits for the receiving process and reads its figures.
    pub(crate) fn figures(mut self) -> anyhow::Result<RunFigures> {
        let mut output = String::new();
        self.stdout.read_to_string(&mut output)?;
        let status = self.child.wait()?;
        if !status.success() {
            bail!("the receiving process failed ({status})");
        }
        serde_json::from_str(output.trim()).context("read the receiver's figures")
    }
}
/// The encoded size of the benchmark's tuples.
pub(crate) fn encoded_size<P: Payload>(template: &P) -> anyhow::Result<usize> {
    let mut encoded = Vec::new();
    template.encode(&mut encoded)?;
    Ok(encoded.len().max(1))
}
/// The figures of every receiving process, summed over them.
pub(crate) fn all_figures(peers: Vec<PeerProcess>, size: usize) -> anyhow::Result<RunFigures> {
    let figures = peers
        .into_iter()
        .map(PeerProcess::figures)
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(RunFigures::sum(&figures, size))
}

/// Runs `send` on a thread of its own (so the caller's affinity is untouched) with the
/// benchmark's idle strategy ([`Settings::process_idle`]).
pub(crate) fn send_pinned(
    s: &Settings,
    send: impl FnOnce(IdleStrategy) -> anyhow::Result<()> + Send,
) -> anyhow::Result<()> {
    let idle = s.process_idle();
    std::thread::scope(|scope| {
        scope
            .spawn(|| send(idle))
            .join()
            .unwrap_or_else(|_| bail!("the sending thread panicked"))
    })
}

/// Offers to every sender of `txs` in turn with `offer`, waiting on one while it is full
/// until `stalled`. `offer` sends a copy, so a refusal leaves nothing to hand back.
#[inline(always)]
fn offer_each<P, S: TupleSender<P>>(
    txs: &mut [S],
    idle: IdleStrategy,
    stalled: impl Fn() -> bool,
    offer: impl Fn(&mut S) -> Result<(), SendError>,
) -> anyhow::Result<()> {
    for tx in txs {
        if let Err(error) = offer(tx) {
            retry_until_taken(tx, error, idle, &stalled, &offer)?;
        }
    }
    Ok(())
}

/// The slow path of [`offer_each`]: waits while `tx` is full and offers again.
#[cold]
#[inline(never)]
fn retry_until_taken<P, S: TupleSender<P>>(
    tx: &mut S,
    mut error: SendError,
    idle: IdleStrategy,
    stalled: &impl Fn() -> bool,
    offer: &impl Fn(&mut S) -> Result<(), SendError>,
) -> anyhow::Result<()> {
    let mut wait = idle.waiter();
    loop {
        match error {
            SendError::Full if stalled() => bail!("the receiver stopped taking tuples"),
            SendError::Full => wait.wait_or_park(|timeout| tx.park(timeout)),
            error => bail!("send: {error}"),
        }
        match offer(tx) {
            Ok(()) => return Ok(()),
            Err(again) => error = again,
        }
    }
}

/// The `--encoding` value naming `encoding`.
pub(crate) fn encoding_name(encoding: TupleEncoding) -> &'static str {
    match encoding {
        TupleEncoding::Facade => "facade",
        TupleEncoding::Normal => "normal",
    }
}

/// Sends for `span` on `core` to every sender of `txs` (each tuple to each: a broadcast,
/// held back by the slowest), then the end of the stream, and flushes until the transports
/// hold nothing.
pub(crate) fn send<P: Payload, S: TupleSender<P>>(
    txs: &mut [S],
    template: P,
    load: Load,
    span: Span,
    idle: IdleStrategy,
    core: usize,
) -> anyhow::Result<()> {
    let _pinned = pin(core);
    let started = Instant::now();
    let mut generator = Generator::new(template, load, span);
    let mut waiter = idle.waiter();
    let stalled = || started.elapsed() > span.longest() + PATIENCE;
    while !generator.done() {
        let sent =
            generator.fill(|tuple| offer_each(txs, idle, stalled, |tx| tx.offer_copy(tuple)))?;
        txs.iter_mut().for_each(|tx| tx.flush());
        waiter.after(sent);
    }
    offer_each(txs, idle, stalled, |tx| {
        tx.offer(Message::EndOfStream)
            .map_err(|refused| refused.error)
    })?;
    let mut wait = idle.waiter();
    for tx in txs.iter_mut() {
        tx.flush();
        while tx.pending() {
            if stalled() {
                bail!("the receiver stopped taking tuples");
            }
            wait.wait();
            tx.flush();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_thread_gets_its_cores_back() {
        std::thread::spawn(|| {
            let cores = || sched_getaffinity(None).expect("read the thread's cores");
            let before = cores();
            let first = (0..CpuSet::MAX_CPU).find(|&c| before.is_set(c)).unwrap();
            {
                let _pinned = pin(first);
                let during = cores();
                if before.count() >= 2 {
                    assert_eq!(during.count(), 1);
                    assert!(during.is_set(first));
                } else {
                    assert_eq!(during, before, "one core: nothing to pin");
                }
            }
            assert_eq!(cores(), before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn an_announced_address_reads_back() {
        let addr: SocketAddr = "127.0.0.1:4567".parse().unwrap();
        assert_eq!(announced(&format!("{LISTENING}{addr}\n")), Some(addr));
        assert_eq!(announced("garbage"), None);
        assert_eq!(announced(""), None);
    }
}
