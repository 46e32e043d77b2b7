//! Latency as half the round trip through a reflector: `--method half-round-trip`, the default
//! across the network transports.
//!
//! The Vega paper (section V.A.1) measures latency across a network with a
//! sender -> reflector -> receiver application: sender and receiver on one node, the reflector
//! on another, "the receiver calculates the round-trip time for each tuple, and we report the
//! one-way latency as half the round-trip time"; the IBM Streams report's latency test does the
//! same (source -> relay -> sink, the source and the sink reading the very same clock). Here the
//! benchmark process is both the sender and the receiver, in one thread on core 0: it sends
//! each tuple when due, stamped with `CLOCK_MONOTONIC`, and between sends polls the way back
//! and records arrival minus stamp, the round trip. The reflector is a second process on
//! core 1 (`sluice bench peer --reflect`) that receives every tuple and offers it back over a
//! second edge of the same kind of transport, the end of the stream included. The result keeps
//! the round trip (`round_trip_ns`) and gives half of it as the one-way latency (`latency_ns`,
//! `"latency_method": "half-round-trip"`).
//!
//! `--method ping-pong` runs the same loop with one tuple in flight: the next tuple goes once
//! the previous one is back (and due at the rate), and the sender polls the way back without
//! reading the clock until it is. Above the rate a round trip allows, tuples go back to back:
//! the shape of the cache-line ping-pong the rings are compared with, and of iceoryx2's
//! published latency benchmark.
//!
//! | transport | the way there | the way back |
//! |---|---|---|
//! | tcp profiles | a `tcp` edge to the reflector's receiver | a `tcp` edge to the benchmark's receiver |
//! | udp-mq | a `udp-mq` edge | a `udp-mq` edge |
//! | shm-vega | a Vega ring the benchmark creates | a second Vega ring the benchmark creates |
//! | shm-osr | an OSR ring the reflector creates (it receives) | an OSR ring the benchmark creates |
//!
//! The baselines go the same way: raw TCP (one blocking `write` per tuple on a `TCP_NODELAY`
//! socket; the reflector writes back whatever it reads on the same connection), raw UDP (one
//! datagram per tuple, echoed to its sender), the hardware for the rings (twice the one-way
//! cache-line transfer). A hand-written round trip (a baseline, a peer library) implements
//! [`RawEcho`] and shares the benchmark's loop, [`raw_round_trips`].

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use sluice_shm::SegmentName;
use sluice_sync::{Idle, IdleStrategy};
use sluice_transport::{shm_osr, shm_vega, tcp, udp_mq};
use sluice_transport::{SendError, TupleReceiver, TupleSender};
use sluice_types::{monotonic_ns, Message};

use crate::foundation::args::{LatencyMethod, Settings, Transport};
use crate::foundation::load::{Generator, Load, Pacer, Span, BATCH};
use crate::foundation::payload::{Payload, PayloadVisitor};
use crate::foundation::record::{Loss, Recorder, RunFigures, Timing, RECEIVED};
use crate::transports::endpoints::{
    announce, encoded_size, pin, segment, vega_slots, PeerArgs, PeerProcess, PATIENCE,
};
use crate::transports::network::{loopback, params as tcp_params, secret_from_env};
use crate::transports::udp::{params as udp_params, raw_socket};

/// What a shared-memory reflector prints when its rings are ready.
const READY: &str = "ready";
/// Messages one poll takes.
const POLL: usize = 256;

/// The segment of the way back of the run `job`.
fn back_segment(job: &str) -> anyhow::Result<SegmentName> {
    Ok(SegmentName::new(job, "back")?)
}

/// A job name unique to this run.
fn job() -> String {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    format!(
        "rtt{}r{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    )
}

/// Starts the reflecting process of `s`, sending back to `back` (tcp, udp-mq) or through the
/// run `job`'s rings, and reads its first line.
fn spawn(
    s: &Settings,
    baseline: bool,
    job: &str,
    tuple_bytes: usize,
    secret: Option<&tcp::JobSecret>,
    back: Option<SocketAddr>,
) -> anyhow::Result<(PeerProcess, String)> {
    let mut command = PeerProcess::command(s, baseline, job, tuple_bytes, secret)?;
    command.arg("--reflect");
    if let Some(back) = back {
        command.args(["--back", &back.to_string()]);
    }
    let mut reflector = PeerProcess::start(command)?;
    let line = reflector.first_line()?;
    Ok((reflector, line))
}

/// The address a network reflector announced on its first line.
fn listening(line: &str) -> anyhow::Result<SocketAddr> {
    crate::transports::endpoints::announced(line)
        .with_context(|| format!("the reflector announced no address: {line:?}"))
}

/// One Sluice run of `s` through a reflector at `rate` tuples per second.
pub(crate) fn run<P: Payload>(s: &Settings, template: P, rate: u64) -> anyhow::Result<RunFigures> {
    let tuple_bytes = encoded_size(&template)?;
    let load = Load::Paced(Pacer::new(rate));
    let idle = s.process_idle();
    let span = s.span();
    let in_flight = InFlight::of(s.method);
    let report = if let Some(profile) = s.transport.tcp_profile() {
        let secret = tcp::JobSecret::random()?;
        let params = tcp_params(profile, tuple_bytes);
        let (mut rx, back) = tcp::bind_receiver::<P>(loopback(), &secret, 1, &params)?;
        let (reflector, line) = spawn(s, false, "", tuple_bytes, Some(&secret), Some(back))?;
        let mut tx = tcp::connect_sender::<P>(listening(&line)?, &secret, 0, &params)?;
        let report = round_trips(&mut tx, &mut rx, template, load, span, idle, in_flight)?;
        drop(tx);
        reflector.finish()?;
        report
    } else if s.transport == Transport::UdpMq {
        let secret = tcp::JobSecret::random()?;
        let params = udp_params(s.queues, tuple_bytes);
        let (mut rx, back) = udp_mq::bind_receiver::<P>(loopback(), &secret, 1, &params)?;
        let (reflector, line) = spawn(s, false, "", tuple_bytes, Some(&secret), Some(back))?;
        let mut tx = udp_mq::connect_sender::<P>(listening(&line)?, &secret, 0, &params)?;
        let report = round_trips(&mut tx, &mut rx, template, load, span, idle, in_flight)?;
        drop(tx);
        reflector.finish()?;
        report
    } else if s.transport == Transport::ShmVega {
        let job = job();
        let slots = vega_slots(tuple_bytes, s.ring_bytes);
        let mut tx = shm_vega::create_sender::<P>(&segment(&job)?, tuple_bytes, slots)?;
        let mut rx = shm_vega::create_receiver::<P>(&back_segment(&job)?, tuple_bytes, slots)?;
        let (reflector, _) = spawn(s, false, &job, tuple_bytes, None, None)?;
        let report = round_trips(&mut tx, &mut rx, template, load, span, idle, in_flight)?;
        reflector.finish()?;
        report
    } else if s.transport == Transport::ShmOsr {
        let job = job();
        let mut rx = shm_osr::create_receiver::<P>(&back_segment(&job)?, s.ring_bytes, 1)?;
        let (reflector, line) = spawn(s, false, &job, tuple_bytes, None, None)?;
        if line.trim() != READY {
            bail!("the reflector's rings are not ready: {line:?}");
        }
        let batch = shm_osr::DEFAULT_BATCH_BYTES;
        let mut tx = shm_osr::open_sender::<P>(&segment(&job)?, s.ring_bytes, batch)?;
        let report = round_trips(&mut tx, &mut rx, template, load, span, idle, in_flight)?;
        reflector.finish()?;
        report
    } else {
        bail!(
            "{} has no reflector (sender and receiver share a process)",
            s.transport.name()
        )
    };
    report.figures(s.size, s.transport == Transport::UdpMq)
}

/// The way back of the benchmark process: polls, records each tuple's round trip, notes the
/// end.
struct WayBack<'a, P, Rx> {
    rx: &'a mut Rx,
    recorder: Timing,
    messages: Vec<Message<P>>,
    ended: bool,
}

impl<P: Payload, Rx: TupleReceiver<P>> WayBack<'_, P, Rx> {
    /// Takes what has come back; returns how many messages.
    fn drain(&mut self) -> anyhow::Result<usize> {
        self.messages.clear();
        let n = self
            .rx
            .poll(POLL, &mut self.messages)
            .context("receive from the reflector")?;
        for message in &self.messages {
            match message {
                Message::Data(tuple) => self.recorder.record(tuple),
                Message::EndOfStream => self.ended = true,
                Message::Punctuation(_) => {}
            }
        }
        Ok(n)
    }
}

/// Sends to `tx` with `send` (which takes nothing when refused) until it is taken, taking what
/// comes back meanwhile when it is full (the reflector may be waiting for room on the way
/// back).
fn offer<P: Payload, S: TupleSender<P>, Rx: TupleReceiver<P>>(
    tx: &mut S,
    mut send: impl FnMut(&mut S) -> Result<(), SendError>,
    back: &mut WayBack<'_, P, Rx>,
    give_up: Instant,
) -> anyhow::Result<()> {
    loop {
        match send(tx) {
            Ok(()) => return Ok(()),
            Err(SendError::Full) => {
                tx.flush();
                if back.drain()? == 0 {
                    if Instant::now() > give_up {
                        bail!("the reflector stopped taking tuples");
                    }
                    std::thread::yield_now();
                }
            }
            Err(error) => bail!("send to the reflector: {error}"),
        }
    }
}

/// What the benchmark's side of a reflected run saw.
pub(crate) struct Trips {
    /// The recorder's report: the round trips.
    report: sluice_graph::OperatorReport,
    /// Tuples sent.
    sent: u64,
}

impl Trips {
    /// The run's figures for tuples of `tuple_size` bytes; with what was lost both ways when
    /// the transport can lose (`lossy`).
    pub(crate) fn figures(&self, tuple_size: usize, lossy: bool) -> anyhow::Result<RunFigures> {
        let figures = RunFigures::from_round_trips(&self.report, tuple_size)?;
        let delivered = self.report.counters.get(RECEIVED).copied().unwrap_or(0);
        Ok(RunFigures {
            loss: lossy.then(|| Loss {
                delivered,
                lost: self.sent.saturating_sub(delivered),
            }),
            ..figures
        })
    }
}

/// How many tuples the benchmark's side of a reflected run keeps in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InFlight {
    /// As many as are due (`--method half-round-trip`).
    AsDue,
    /// One: the next goes once the previous one is back (`--method ping-pong`).
    One,
}

impl InFlight {
    /// What `method` keeps in flight.
    pub(crate) fn of(method: LatencyMethod) -> Self {
        if method == LatencyMethod::PingPong {
            Self::One
        } else {
            Self::AsDue
        }
    }

    /// The most tuples one fill of the generator sends.
    fn most(self) -> usize {
        match self {
            Self::AsDue => BATCH,
            Self::One => 1,
        }
    }

    /// Takes what has come back with `poll` after `sent` tuples went, and returns what `poll`
    /// returned: one poll, or with one tuple out, polls until it is back, idling as `waiter`
    /// says between empty polls and reading the clock only every [`GIVE_UP_POLLS`] of them, to
    /// give up after `give_up`.
    fn take_back(
        self,
        sent: usize,
        mut poll: impl FnMut() -> anyhow::Result<usize>,
        waiter: &mut Idle,
        give_up: Instant,
    ) -> anyhow::Result<usize> {
        if self == Self::AsDue || sent == 0 {
            return poll();
        }
        let mut empty = 0u32;
        loop {
            let got = poll()?;
            if got > 0 {
                return Ok(got);
            }
            waiter.after(0);
            empty = empty.wrapping_add(1);
            if empty.is_multiple_of(GIVE_UP_POLLS) && Instant::now() > give_up {
                bail!("the tuple in flight never came back from the reflector");
            }
        }
    }
}

/// Empty polls of [`InFlight::take_back`] between two looks at the clock.
const GIVE_UP_POLLS: u32 = 4096;

/// The benchmark process's loop, on core 0: sends as `load` says for `span`, stamped, keeping
/// `in_flight`, and records every tuple's round trip as it comes back; then ends the stream and
/// waits for the end to come back.
pub(crate) fn round_trips<P: Payload, S: TupleSender<P>, Rx: TupleReceiver<P>>(
    tx: &mut S,
    rx: &mut Rx,
    template: P,
    load: Load,
    span: Span,
    idle: IdleStrategy,
    in_flight: InFlight,
) -> anyhow::Result<Trips> {
    let _pinned = pin(0);
    let give_up = Instant::now() + span.longest() + PATIENCE;
    let mut sent_in_all = 0u64;
    let mut back = WayBack {
        rx,
        recorder: Timing::new(monotonic_ns().saturating_add(span.warmup_ns())),
        messages: Vec::with_capacity(POLL),
        ended: false,
    };
    let mut generator = Generator::new(template, load, span);
    let mut waiter = idle.waiter();
    while !generator.done() {
        let sent = generator.fill_at_most(in_flight.most(), |tuple| {
            offer(tx, |tx| tx.offer_copy(tuple), &mut back, give_up)
        })?;
        sent_in_all += sent as u64;
        tx.flush();
        let got = in_flight.take_back(sent, || back.drain(), &mut waiter, give_up)?;
        waiter.after(sent + got);
    }
    let end = |tx: &mut S| {
        tx.offer(Message::EndOfStream)
            .map_err(|refused| refused.error)
    };
    offer(tx, end, &mut back, give_up)?;
    while !back.ended {
        tx.flush();
        let got = back.drain()?;
        if got == 0 && Instant::now() > give_up {
            bail!("the end of the stream never came back from the reflector");
        }
        waiter.after(got);
    }
    Ok(Trips {
        report: back.recorder.report(),
        sent: sent_in_all,
    })
}

/// The reflecting process (`sluice bench peer --reflect`), with the tuple type of its size.
pub(crate) struct Reflector<'a>(pub(crate) &'a PeerArgs);

impl PayloadVisitor for Reflector<'_> {
    type Output = anyhow::Result<()>;

    fn visit<P: Payload>(self, _size: usize) -> Self::Output {
        let args = self.0;
        let _pinned = pin(1);
        let back = || args.back.context("a network reflector needs --back");
        if args.baseline {
            return match args.transport {
                Transport::UdpMq => raw_udp_reflector(args.slot_bytes, args.idle),
                _ => raw_tcp_reflector(args.idle),
            };
        }
        if let Some(profile) = args.transport.tcp_profile() {
            let params = tcp_params(profile, args.slot_bytes);
            let mut rx = crate::transports::network::bind::<P>(profile, args.slot_bytes)?;
            let mut tx = tcp::connect_sender::<P>(back()?, &secret_from_env()?, 0, &params)?;
            reflect(&mut rx, &mut tx, args.idle)
        } else if args.transport == Transport::UdpMq {
            let params = udp_params(args.queues, args.slot_bytes);
            let mut rx = crate::transports::udp::bind::<P>(args.queues, args.slot_bytes)?;
            let mut tx = udp_mq::connect_sender::<P>(back()?, &secret_from_env()?, 0, &params)?;
            reflect(&mut rx, &mut tx, args.idle)
        } else if args.transport == Transport::ShmVega {
            let (slot, job) = (args.slot_bytes, &args.job);
            let slots = vega_slots(slot, args.ring_bytes);
            let mut rx = shm_vega::open_receiver::<P>(&segment(job)?, slot, slots)?;
            let mut tx = shm_vega::open_sender::<P>(&back_segment(job)?, slot, slots)?;
            println!("{READY}");
            reflect(&mut rx, &mut tx, args.idle)
        } else if args.transport == Transport::ShmOsr {
            let (ring, job) = (args.ring_bytes, &args.job);
            let mut rx = shm_osr::create_receiver::<P>(&segment(job)?, ring, 1)?;
            let batch = shm_osr::DEFAULT_BATCH_BYTES;
            let mut tx = shm_osr::open_sender::<P>(&back_segment(job)?, ring, batch)?;
            println!("{READY}");
            reflect(&mut rx, &mut tx, args.idle)
        } else {
            bail!("{} has no reflector", args.transport.name())
        }
    }
}

/// Sends back everything `rx` receives, the end of the stream included, then returns.
fn reflect<P: Payload>(
    rx: &mut impl TupleReceiver<P>,
    tx: &mut impl TupleSender<P>,
    idle: IdleStrategy,
) -> anyhow::Result<()> {
    let mut waiter = idle.waiter();
    let mut messages = Vec::with_capacity(POLL);
    let mut heard = Instant::now();
    let mut ended = false;
    while !ended {
        messages.clear();
        let n = rx.poll(POLL, &mut messages).context("receive")?;
        for mut message in messages.drain(..) {
            ended |= matches!(message, Message::EndOfStream);
            let mut wait = idle.waiter();
            loop {
                match tx.offer(message) {
                    Ok(()) => break,
                    Err(refused) if refused.error == SendError::Full => {
                        if heard.elapsed() > PATIENCE {
                            bail!("the benchmark stopped taking tuples back");
                        }
                        message = refused.message;
                        tx.flush();
                        wait.wait();
                    }
                    Err(refused) => bail!("send back: {}", refused.error),
                }
            }
        }
        tx.flush();
        if n > 0 {
            heard = Instant::now();
        } else if heard.elapsed() > PATIENCE {
            bail!("nothing from the benchmark for {PATIENCE:?}");
        }
        waiter.after(n);
    }
    while tx.pending() {
        if heard.elapsed() > PATIENCE {
            bail!("the benchmark stopped taking tuples back");
        }
        std::thread::yield_now();
        tx.flush();
    }
    Ok(())
}

/// A hand-written round trip (a baseline's or a peer library's): tuples' bytes out to a
/// reflector and back.
pub(crate) trait RawEcho {
    /// Sends one tuple's bytes; tuples that come back meanwhile go to `back`.
    fn send(&mut self, tuple: &[u8], back: &mut dyn FnMut(&[u8])) -> anyhow::Result<()>;
    /// Hands every tuple that has come back to `back`; returns how many.
    fn receive(&mut self, back: &mut dyn FnMut(&[u8])) -> anyhow::Result<usize>;
    /// Tells the reflector the run is over.
    fn finish(&mut self) -> anyhow::Result<()>;
    /// Whether the end has come back.
    fn ended(&self) -> bool;
}

/// [`round_trips`] for a hand-written round trip: sends as `load` says for `span` on core 0,
/// keeping `in_flight`, records every round trip, finishes and waits for the end to come back.
pub(crate) fn raw_round_trips<P: Payload, E: RawEcho + ?Sized>(
    echo: &mut E,
    template: P,
    load: Load,
    span: Span,
    idle: IdleStrategy,
    in_flight: InFlight,
) -> anyhow::Result<Trips> {
    let _pinned = pin(0);
    let give_up = Instant::now() + span.longest() + PATIENCE;
    let mut sent_in_all = 0u64;
    let mut recorder = Timing::new(monotonic_ns().saturating_add(span.warmup_ns()));
    let mut failure = None;
    let mut record = |bytes: &[u8]| match P::decode(bytes) {
        Ok(tuple) => recorder.record(&tuple),
        Err(e) => {
            failure.get_or_insert(e);
        }
    };
    let mut generator = Generator::new(template, load, span);
    let mut waiter = idle.waiter();
    let mut bytes = Vec::new();
    while !generator.done() {
        let sent = generator.fill_at_most(in_flight.most(), |tuple| -> anyhow::Result<()> {
            bytes.clear();
            tuple.encode(&mut bytes)?;
            echo.send(&bytes, &mut record)
        })?;
        sent_in_all += sent as u64;
        let got = in_flight.take_back(sent, || echo.receive(&mut record), &mut waiter, give_up)?;
        waiter.after(sent + got);
    }
    echo.finish()?;
    while !echo.ended() {
        let got = echo.receive(&mut record)?;
        if got == 0 && Instant::now() > give_up {
            bail!("the end of the stream never came back from the reflector");
        }
        waiter.after(got);
    }
    if let Some(e) = failure {
        return Err(e).context("decode a tuple that came back");
    }
    Ok(Trips {
        report: recorder.report(),
        sent: sent_in_all,
    })
}

/// One baseline run of `s` through a reflector at `rate`: raw TCP for the tcp profiles, raw
/// UDP for udp-mq, the hardware for the rings.
pub(crate) fn run_baseline<P: Payload>(
    s: &Settings,
    template: P,
    rate: u64,
) -> anyhow::Result<RunFigures> {
    if !s.transport.is_network() {
        return Ok(crate::transports::hardware::hardware_run(s));
    }
    let tuple_bytes = encoded_size(&template)?;
    let (reflector, line) = spawn(s, true, "", tuple_bytes, None, None)?;
    let addr = listening(&line)?;
    let load = Load::Paced(Pacer::new(rate));
    let idle = s.process_idle();
    let in_flight = InFlight::of(s.method);
    let report = if s.transport == Transport::UdpMq {
        let mut echo = RawUdpEcho::connect(addr, tuple_bytes)?;
        raw_round_trips(&mut echo, template, load, s.span(), idle, in_flight)?
    } else {
        let mut echo = RawTcpEcho::connect(addr, tuple_bytes)?;
        raw_round_trips(&mut echo, template, load, s.span(), idle, in_flight)?
    };
    reflector.finish()?;
    report.figures(s.size, s.transport == Transport::UdpMq)
}

/// Raw TCP both ways on one `TCP_NODELAY` connection: one `write` per tuple (non-blocking, so
/// the way back is read while the way there is full), the way back read into a buffer and cut
/// into tuples of the fixed size.
struct RawTcpEcho {
    stream: TcpStream,
    tuple_bytes: usize,
    buffer: Vec<u8>,
    filled: usize,
    ended: bool,
}

impl RawTcpEcho {
    fn connect(addr: SocketAddr, tuple_bytes: usize) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(addr).context("connect to the raw reflector")?;
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        Ok(Self {
            stream,
            tuple_bytes,
            buffer: vec![0; (64 << 10).max(2 * tuple_bytes)],
            filled: 0,
            ended: false,
        })
    }
}

impl RawEcho for RawTcpEcho {
    fn send(&mut self, tuple: &[u8], back: &mut dyn FnMut(&[u8])) -> anyhow::Result<()> {
        let mut written = 0;
        while written < tuple.len() {
            match self.stream.write(&tuple[written..]) {
                Ok(n) => written += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                    if self.receive(back)? == 0 {
                        std::thread::yield_now();
                    }
                }
                Err(e) => return Err(e).context("raw write"),
            }
        }
        Ok(())
    }

    fn receive(&mut self, back: &mut dyn FnMut(&[u8])) -> anyhow::Result<usize> {
        let got = match self.stream.read(&mut self.buffer[self.filled..]) {
            Ok(0) => {
                self.ended = true;
                0
            }
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => 0,
            Err(e) => return Err(e).context("raw read"),
        };
        self.filled += got;
        let whole = self.filled - self.filled % self.tuple_bytes;
        self.buffer[..whole]
            .chunks_exact(self.tuple_bytes)
            .for_each(&mut *back);
        self.buffer.copy_within(whole..self.filled, 0);
        self.filled -= whole;
        Ok(whole / self.tuple_bytes)
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        Ok(self.stream.shutdown(Shutdown::Write)?)
    }

    fn ended(&self) -> bool {
        self.ended
    }
}

/// The raw TCP reflector: accepts one connection (announcing its address) and writes back
/// whatever it reads, until the benchmark closes its side. It waits for bytes as Sluice's
/// reflector does: non-blocking reads and `idle` (blocking reads under `park`).
fn raw_tcp_reflector(idle: IdleStrategy) -> anyhow::Result<()> {
    let listener = TcpListener::bind(loopback())?;
    announce(listener.local_addr()?);
    let (mut stream, _) = listener.accept()?;
    stream.set_nodelay(true)?;
    stream.set_nonblocking(idle != IdleStrategy::Park)?;
    let mut waiter = idle.waiter();
    let mut buffer = vec![0u8; 64 << 10];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                write_back(&mut stream, &buffer[..n])?;
                waiter.after(n);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                waiter.after(0);
            }
            Err(e) => return Err(e).context("raw read"),
        }
    }
    Ok(stream.shutdown(Shutdown::Write)?)
}

/// Writes all of `bytes` to a stream that may be non-blocking.
fn write_back(stream: &mut TcpStream, mut bytes: &[u8]) -> anyhow::Result<()> {
    while !bytes.is_empty() {
        match stream.write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                std::thread::yield_now();
            }
            Err(e) => return Err(e).context("raw write back"),
        }
    }
    Ok(())
}

/// Raw UDP both ways: one datagram per tuple on a connected socket, echoed by the reflector;
/// the end is a datagram 8 bytes longer than a tuple, sent again every [`END_REPEAT`] until it
/// comes back (UDP may lose it).
struct RawUdpEcho {
    socket: UdpSocket,
    tuple_bytes: usize,
    buffer: Vec<u8>,
    end_sent: Option<Instant>,
    ended: bool,
}

/// How often the raw UDP end is sent again until it comes back.
const END_REPEAT: Duration = Duration::from_millis(50);

impl RawUdpEcho {
    fn connect(addr: SocketAddr, tuple_bytes: usize) -> anyhow::Result<Self> {
        let socket = raw_socket(loopback())?;
        socket.connect(addr)?;
        socket.set_nonblocking(true)?;
        Ok(Self {
            socket,
            tuple_bytes,
            buffer: vec![0; tuple_bytes + 9],
            end_sent: None,
            ended: false,
        })
    }

    fn send_end(&mut self) {
        let end = vec![0u8; self.tuple_bytes + 8];
        // A lost end is sent again.
        let _ = self.socket.send(&end);
        self.end_sent = Some(Instant::now());
    }
}

impl RawEcho for RawUdpEcho {
    fn send(&mut self, tuple: &[u8], _back: &mut dyn FnMut(&[u8])) -> anyhow::Result<()> {
        // A datagram the kernel could not queue is lost, as on the way back.
        let _ = self.socket.send(tuple);
        Ok(())
    }

    fn receive(&mut self, back: &mut dyn FnMut(&[u8])) -> anyhow::Result<usize> {
        let mut got = 0;
        loop {
            match self.socket.recv(&mut self.buffer) {
                Ok(n) if n == self.tuple_bytes => {
                    back(&self.buffer[..n]);
                    got += 1;
                }
                Ok(n) if n == self.tuple_bytes + 8 => self.ended = true,
                Ok(n) => bail!("a datagram of {n} bytes is neither a tuple nor the end"),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e).context("raw receive"),
            }
        }
        if !self.ended && self.end_sent.is_some_and(|at| at.elapsed() > END_REPEAT) {
            self.send_end();
        }
        Ok(got)
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        self.send_end();
        Ok(())
    }

    fn ended(&self) -> bool {
        self.ended
    }
}

/// The raw UDP reflector: binds on loopback (announcing its address) and sends every datagram
/// back to where it came from, until the end (a datagram 8 bytes longer than a tuple) has been
/// sent back. It waits as Sluice's reflector does: non-blocking receives and `idle`.
fn raw_udp_reflector(tuple_bytes: usize, idle: IdleStrategy) -> anyhow::Result<()> {
    let socket = raw_socket(loopback())?;
    socket.set_nonblocking(true)?;
    announce(socket.local_addr()?);
    let mut buffer = vec![0u8; tuple_bytes + 9];
    let mut waiter = idle.waiter();
    let mut heard = Instant::now();
    loop {
        match socket.recv_from(&mut buffer) {
            Ok((n, from)) => {
                // A datagram the kernel could not queue is lost, as on the way there.
                let _ = socket.send_to(&buffer[..n], from);
                if n == tuple_bytes + 8 {
                    return Ok(());
                }
                heard = Instant::now();
                waiter.after(1);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                if heard.elapsed() > PATIENCE {
                    bail!("nothing from the raw UDP sender for {PATIENCE:?}");
                }
                waiter.after(0);
            }
            Err(e) => return Err(e).context("raw receive"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    use super::*;

    /// Tuples sent and come back so far, and the most ever in flight at once.
    #[derive(Default)]
    struct Flight {
        sent: AtomicU64,
        back: AtomicU64,
        most: AtomicU64,
    }

    impl Flight {
        fn get(counter: &AtomicU64) -> u64 {
            counter.load(Ordering::Relaxed)
        }
    }

    /// A sender or receiver that keeps [`Flight`] up to date.
    struct Counted<X> {
        inner: X,
        flight: Arc<Flight>,
    }

    impl<P: Payload, X: TupleSender<P>> TupleSender<P> for Counted<X> {
        fn offer(&mut self, message: Message<P>) -> Result<(), sluice_transport::Refused<P>> {
            self.inner.offer(message)
        }

        fn offer_copy(&mut self, tuple: &P) -> Result<(), SendError> {
            self.inner.offer_copy(tuple)?;
            // One thread sends and takes back: Relaxed counters suffice.
            let f = &self.flight;
            let sent = f.sent.fetch_add(1, Ordering::Relaxed) + 1;
            f.most
                .fetch_max(sent - Flight::get(&f.back), Ordering::Relaxed);
            Ok(())
        }

        fn flush(&mut self) {
            self.inner.flush();
        }
    }

    impl<P: Payload, X: TupleReceiver<P>> TupleReceiver<P> for Counted<X> {
        fn poll(
            &mut self,
            max: usize,
            out: &mut Vec<Message<P>>,
        ) -> Result<usize, sluice_transport::RecvError> {
            let before = out.len();
            let n = self.inner.poll(max, out)?;
            let data = out[before..]
                .iter()
                .filter(|m| matches!(m, Message::Data(_)))
                .count();
            self.flight.back.fetch_add(data as u64, Ordering::Relaxed);
            Ok(n)
        }
    }

    /// The benchmark's loop against a reflector thread over two in-process Vega rings; returns
    /// the round trips' figures and the flight's counts.
    fn reflect_through_threads(load: Load, in_flight: InFlight) -> (RunFigures, Arc<Flight>) {
        let (there_tx, mut there_rx) = shm_vega::connect::<[u8; 64]>(64, 64).unwrap();
        let (mut back_tx, back_rx) = shm_vega::connect::<[u8; 64]>(64, 64).unwrap();
        let flight = Arc::new(Flight::default());
        let mut there_tx = Counted {
            inner: there_tx,
            flight: flight.clone(),
        };
        let mut back_rx = Counted {
            inner: back_rx,
            flight: flight.clone(),
        };
        let span = Span {
            warmup: Duration::ZERO,
            duration: Duration::from_millis(20),
        };
        let reflector =
            std::thread::spawn(move || reflect(&mut there_rx, &mut back_tx, IdleStrategy::Yield));
        let trips = round_trips(
            &mut there_tx,
            &mut back_rx,
            [0u8; 64],
            load,
            span,
            IdleStrategy::Yield,
            in_flight,
        )
        .unwrap();
        reflector.join().unwrap().unwrap();
        (trips.figures(64, false).unwrap(), flight)
    }

    #[test]
    fn a_ring_pair_reflects_through_threads() {
        let (f, _) = reflect_through_threads(Load::Paced(Pacer::new(2_000)), InFlight::AsDue);
        let (rtt, one_way) = (f.round_trip_ns.unwrap(), f.latency_ns.unwrap());
        assert!(
            rtt.samples >= crate::foundation::load::LEAST_PACED,
            "{rtt:?}"
        );
        assert_eq!(one_way.p50, rtt.p50 / 2.0);
    }

    #[test]
    fn a_ping_pong_keeps_one_tuple_in_flight() {
        // Far above the rate round trips between two threads allow: without the ping-pong the
        // loop sends bursts, with it every tuple is back before the next goes.
        let flat_out = || Load::Paced(Pacer::new(1_000_000_000));
        let (_, bursts) = reflect_through_threads(flat_out(), InFlight::AsDue);
        assert!(
            Flight::get(&bursts.most) > 1,
            "bursts keep several in flight"
        );
        let (f, flight) = reflect_through_threads(flat_out(), InFlight::One);
        let sent = Flight::get(&flight.sent);
        assert_eq!(Flight::get(&flight.most), 1);
        let rtt = f.round_trip_ns.unwrap();
        assert_eq!(rtt.samples, sent, "every tuple timed (no warm-up)");
        assert_eq!(Flight::get(&flight.back), sent);
    }
}
