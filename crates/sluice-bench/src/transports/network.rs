//! The `tcp` benchmarks' two sides, and their baseline: raw TCP on loopback.
//!
//! Sluice: the receiving process binds a `tcp` receiver to `127.0.0.1:0`, prints
//! `listening ADDR` as its first line, and polls like any receiver; the benchmark process
//! connects a `tcp` sender with the secret it gave the receiver and floods or paces it. Both
//! use the profile `--transport` names, with the tuple's encoded size as the largest tuple.
//!
//! Raw TCP, measured in the same run between the same two cores: the writer sends each tuple's
//! bytes with one blocking `write` on a `TCP_NODELAY` socket (no framing: every message has
//! the benchmark's fixed size), and the reader reads whatever has arrived into a 256 KiB
//! buffer with non-blocking reads, idling with the same strategy as Sluice's receiver
//! (blocking reads under `park`), and cuts it into tuples of that size. That is what a hand-written sender and receiver without
//! batching do, as in the IBM report's "tcp" column.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};

use anyhow::Context;
use sluice_sync::IdleStrategy;
use sluice_transport::tcp::{
    bind_receiver, connect_sender, BatchProfile, JobSecret, TcpParams, TcpReceiver,
};

use crate::foundation::args::Settings;
use crate::foundation::load::{Generator, Load, Span};
use crate::foundation::payload::Payload;
use crate::foundation::record::{Recorder, RunFigures};
use crate::transports::endpoints::{
    all_figures, announce, encoded_size, pin, send, send_pinned, PeerProcess, SECRET_ENV,
};
use sluice_transport::{TransportError, TupleSender};

/// Bytes the raw reader reads into.
const RAW_BUFFER: usize = 256 << 10;

/// Port 0 on 127.0.0.1: the system chooses the port.
pub(crate) fn loopback() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

/// The benchmark edge's parameters: the profile's defaults, with the tuple as the largest.
pub(crate) fn params(profile: BatchProfile, tuple_bytes: usize) -> TcpParams {
    TcpParams {
        max_tuple_bytes: tuple_bytes,
        ..TcpParams::with_profile(profile)
    }
}

/// The job's secret the benchmark process handed a receiving process in its environment.
pub(crate) fn secret_from_env() -> anyhow::Result<JobSecret> {
    let secret = std::env::var(SECRET_ENV).context("no job secret in the environment")?;
    Ok(JobSecret::from_hex(&secret)?)
}

/// The receiving process's end: binds on loopback with the secret from the environment and
/// announces its address.
pub(crate) fn bind<P: Payload>(
    profile: BatchProfile,
    tuple_bytes: usize,
) -> anyhow::Result<TcpReceiver<P>> {
    let secret = secret_from_env()?;
    let (rx, addr) = bind_receiver::<P>(loopback(), &secret, 1, &params(profile, tuple_bytes))?;
    announce(addr);
    Ok(rx)
}

/// One Sluice run: a receiving process, and a `tcp` sender on core 0.
pub(crate) fn run_tcp<P: Payload>(
    s: &Settings,
    template: P,
    load: Load,
    profile: BatchProfile,
) -> anyhow::Result<RunFigures> {
    run_sluice(s, template, load, |addr, secret, tuple_bytes| {
        connect_sender::<P>(addr, secret, 0, &params(profile, tuple_bytes))
    })
}

/// One Sluice run of a network transport: a receiving process per receiver announcing its
/// address, and a sender `connect` opens to each with the secret the receivers were handed
/// (and the encoded tuple size), driven on core 0; dropped before the receivers' figures are
/// read.
pub(crate) fn run_sluice<P: Payload, S: TupleSender<P>>(
    s: &Settings,
    template: P,
    load: Load,
    connect: impl Fn(SocketAddr, &JobSecret, usize) -> Result<S, TransportError>,
) -> anyhow::Result<RunFigures> {
    let tuple_bytes = encoded_size(&template)?;
    let secret = JobSecret::random()?;
    let mut peers = (0..s.receivers)
        .map(|_| PeerProcess::spawn(s, false, "", tuple_bytes, Some(&secret)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut txs = peers
        .iter_mut()
        .map(|peer| Ok(connect(peer.listening()?, &secret, tuple_bytes)?))
        .collect::<anyhow::Result<Vec<_>>>()?;
    send_pinned(s, |idle| send(&mut txs, template, load, s.span(), idle, 0))?;
    drop(txs);
    all_figures(peers, s.size)
}

/// A baseline's (or a peer library's) hand-written sender.
pub(crate) trait RawWriter {
    /// Sends one tuple's bytes.
    fn write(&mut self, tuple: &[u8]) -> anyhow::Result<()>;
    /// Tells the reader the run is over.
    fn finish(&mut self) -> anyhow::Result<()>;
}

/// One blocking `write` per tuple on a `TCP_NODELAY` socket; the end is the stream's end.
struct TcpWriter(TcpStream);

impl RawWriter for TcpWriter {
    fn write(&mut self, tuple: &[u8]) -> anyhow::Result<()> {
        Ok(self.0.write_all(tuple)?)
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        Ok(self.0.shutdown(Shutdown::Write)?)
    }
}

/// One baseline run: a raw reading process, and a raw writer on core 0.
pub(crate) fn run_raw<P: Payload>(
    s: &Settings,
    template: P,
    load: Load,
) -> anyhow::Result<RunFigures> {
    run_baseline(s, template, load, |addr| {
        let stream = TcpStream::connect(addr).context("connect to the raw reader")?;
        stream.set_nodelay(true)?;
        Ok(TcpWriter(stream))
    })
}

/// One baseline run: a raw reading process per receiver announcing its address, and the
/// writer `open` makes for each, fed every tuple's encoding on core 0.
pub(crate) fn run_baseline<P: Payload, W: RawWriter + Send>(
    s: &Settings,
    template: P,
    load: Load,
    open: impl Fn(SocketAddr) -> anyhow::Result<W>,
) -> anyhow::Result<RunFigures> {
    let tuple_bytes = encoded_size(&template)?;
    let mut peers = (0..s.receivers)
        .map(|_| PeerProcess::spawn(s, true, "", tuple_bytes, None))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut writers = peers
        .iter_mut()
        .map(|peer| open(peer.listening()?))
        .collect::<anyhow::Result<Vec<W>>>()?;
    let idle = s.process_idle();
    send_pinned(s, |_| {
        write_all(&mut writers, template, load, s.span(), idle)
    })?;
    all_figures(peers, s.size)
}

/// A fan-out of hand-written senders: each tuple to each, in turn.
impl<W: RawWriter> RawWriter for Vec<W> {
    fn write(&mut self, tuple: &[u8]) -> anyhow::Result<()> {
        self.iter_mut().try_for_each(|w| w.write(tuple))
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        self.iter_mut().try_for_each(RawWriter::finish)
    }
}

/// Feeds `writer` every tuple's encoding for `span` on core 0 (the caller's thread), then
/// finishes it; idles with `idle` when nothing is due.
pub(crate) fn write_all<P: Payload, W: RawWriter + ?Sized>(
    writer: &mut W,
    template: P,
    load: Load,
    span: Span,
    idle: IdleStrategy,
) -> anyhow::Result<()> {
    let _pinned = pin(0);
    let mut generator = Generator::new(template, load, span);
    let mut idle = idle.waiter();
    let mut bytes = Vec::new();
    while !generator.done() {
        let sent = generator.fill(|tuple| -> anyhow::Result<()> {
            bytes.clear();
            tuple.encode(&mut bytes)?;
            writer.write(&bytes)
        })?;
        idle.after(sent);
    }
    writer.finish()
}

/// The raw reader: accepts one connection on loopback (announcing its address), reads until
/// the writer closes, and records each `tuple_bytes` bytes as a tuple.
pub(crate) fn raw_receive<P: Payload, R: Recorder>(
    recorder: &mut R,
    tuple_bytes: usize,
    idle: IdleStrategy,
) -> anyhow::Result<()> {
    let listener = TcpListener::bind(loopback())?;
    announce(listener.local_addr()?);
    let (mut stream, _) = listener.accept()?;
    stream.set_nodelay(true)?;
    // Under `park` a hand-written reader blocks in its read, as Sluice's receiver sleeps in
    // poll(2); the other strategies read without blocking and idle between reads.
    stream.set_nonblocking(idle != IdleStrategy::Park)?;
    let mut buffer = vec![0u8; RAW_BUFFER.max(2 * tuple_bytes)];
    let mut filled = 0;
    let mut idle = idle.waiter();
    loop {
        let got = match stream.read(&mut buffer[filled..]) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => 0,
            Err(e) => return Err(e).context("raw read"),
        };
        filled += got;
        let whole = filled - filled % tuple_bytes;
        for bytes in buffer[..whole].chunks_exact(tuple_bytes) {
            recorder.record(&P::decode(bytes)?);
        }
        buffer.copy_within(whole..filled, 0);
        filled -= whole;
        idle.after(got);
    }
}
