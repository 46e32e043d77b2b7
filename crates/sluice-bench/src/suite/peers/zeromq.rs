//! ZeroMQ as a peer: a PUSH socket on the sender's side, a PULL socket bound by the receiving
//! process, over `ipc://` or `tcp://127.0.0.1`; one ZeroMQ message per tuple, which ZeroMQ
//! batches on its I/O thread as it sees fit. The PUSH socket blocks at its high-water mark, so
//! nothing is lost. The end is an empty message.
//!
//! Latency over `tcp://` is measured as half the round trip, like Sluice's tcp
//! (module `reflect`): a PAIR socket each side, the reflecting process sending every message
//! back.

use std::time::Instant;

use anyhow::{bail, Context};
use sluice_sync::{Idle, IdleStrategy};

use crate::transports::endpoints::PATIENCE;
use crate::transports::network::RawWriter;
use crate::transports::reflect::RawEcho;

/// How long the sender's socket may hold unsent messages when it closes, in ms.
const LINGER_MS: i32 = 10_000;
/// How long one blocking receive waits, in ms.
const BLOCK_MS: i32 = 100;
/// Empty non-blocking polls before a receiving process blocks.
const POLLS_BEFORE_BLOCKING: u32 = 1_000;

/// The sender: a connected PUSH socket.
pub(super) struct ZmqWriter {
    socket: zmq::Socket,
    // Dropped after the socket.
    _context: zmq::Context,
}

impl ZmqWriter {
    /// A PUSH socket connected to `endpoint`.
    pub(super) fn connect(endpoint: &str) -> anyhow::Result<Self> {
        let context = zmq::Context::new();
        let socket = context.socket(zmq::PUSH)?;
        socket.set_linger(LINGER_MS)?;
        // Queue only to a completed connection, so nothing sent can be left behind in the
        // pipe of a connection that never completed; a send waits for the connection (at
        // most the receiver's patience).
        socket.set_immediate(true)?;
        socket.set_sndtimeo(PATIENCE.as_millis() as i32)?;
        socket
            .connect(endpoint)
            .with_context(|| format!("connect to {endpoint}"))?;
        Ok(Self {
            socket,
            _context: context,
        })
    }
}

impl RawWriter for ZmqWriter {
    fn write(&mut self, tuple: &[u8]) -> anyhow::Result<()> {
        Ok(self.socket.send(tuple, 0)?)
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        Ok(self.socket.send(&[][..], 0)?)
    }
}

/// The receiving process's loop: binds a PULL socket to `endpoint`, announces the endpoint it
/// got, and hands every message of `size` bytes to `record` until an empty one arrives.
pub(super) fn receive(
    endpoint: &str,
    size: usize,
    idle: IdleStrategy,
    announce: impl Fn(&str),
    record: &mut impl FnMut(&[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let context = zmq::Context::new();
    let (socket, bound) = bind_announced(&context, zmq::PULL, endpoint, announce)?;
    let mut buffer = vec![0u8; size + 1];
    let mut wait = Waiting::new(&socket, idle)?;
    loop {
        match wait.next(&socket, &mut buffer)? {
            0 => break,
            n if n == size => record(&buffer[..n])?,
            n => bail!("a ZeroMQ message of {n} bytes is neither a tuple of {size} nor the end"),
        }
    }
    if let Some(path) = bound.strip_prefix("ipc://") {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Round trips through a ZeroMQ reflector: a PAIR socket connected to the reflector's, one
/// message per tuple each way; the end is an empty message, sent back by the reflector.
pub(super) struct ZmqEcho {
    socket: zmq::Socket,
    buffer: Vec<u8>,
    ended: bool,
    // Dropped after the socket.
    _context: zmq::Context,
}

impl ZmqEcho {
    /// A PAIR socket connected to the reflector at `endpoint`, for tuples of `size` bytes.
    pub(super) fn connect(endpoint: &str, size: usize) -> anyhow::Result<Self> {
        let context = zmq::Context::new();
        let socket = context.socket(zmq::PAIR)?;
        socket.set_linger(LINGER_MS)?;
        socket.set_sndtimeo(PATIENCE.as_millis() as i32)?;
        socket
            .connect(endpoint)
            .with_context(|| format!("connect to {endpoint}"))?;
        Ok(Self {
            socket,
            buffer: vec![0; size + 1],
            ended: false,
            _context: context,
        })
    }
}

impl RawEcho for ZmqEcho {
    fn send(&mut self, tuple: &[u8], _back: &mut dyn FnMut(&[u8])) -> anyhow::Result<()> {
        Ok(self.socket.send(tuple, 0)?)
    }

    fn receive(&mut self, back: &mut dyn FnMut(&[u8])) -> anyhow::Result<usize> {
        let mut got = 0;
        loop {
            match self.socket.recv_into(&mut self.buffer, zmq::DONTWAIT) {
                Ok(0) => {
                    self.ended = true;
                    return Ok(got);
                }
                Ok(n) if n < self.buffer.len() => {
                    back(&self.buffer[..n]);
                    got += 1;
                }
                Ok(n) => bail!("a ZeroMQ message of {n} bytes came back, longer than a tuple"),
                Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => return Ok(got),
                Err(e) => return Err(e).context("ZeroMQ receive"),
            }
        }
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        Ok(self.socket.send(&[][..], 0)?)
    }

    fn ended(&self) -> bool {
        self.ended
    }
}

/// The reflecting process's loop: binds a PAIR socket to `endpoint`, announces the endpoint it
/// got, and sends every message back (waiting as the receiver does) until the empty end, which
/// it sends back too.
pub(super) fn reflect(
    endpoint: &str,
    size: usize,
    idle: IdleStrategy,
    announce: impl Fn(&str),
) -> anyhow::Result<()> {
    let context = zmq::Context::new();
    let (socket, _) = bind_announced(&context, zmq::PAIR, endpoint, announce)?;
    socket.set_linger(LINGER_MS)?;
    socket.set_sndtimeo(PATIENCE.as_millis() as i32)?;
    let mut buffer = vec![0u8; size + 1];
    let mut wait = Waiting::new(&socket, idle)?;
    loop {
        let n = wait.next(&socket, &mut buffer)?;
        if n > size {
            bail!("a ZeroMQ message of {n} bytes is longer than a tuple of {size}");
        }
        socket.send(&buffer[..n], 0).context("ZeroMQ send back")?;
        if n == 0 {
            return Ok(());
        }
    }
}

/// A socket of `kind` bound to `endpoint`, and the endpoint it got (a port or path the system
/// chose), which `announce` has been told.
fn bind_announced(
    context: &zmq::Context,
    kind: zmq::SocketType,
    endpoint: &str,
    announce: impl Fn(&str),
) -> anyhow::Result<(zmq::Socket, String)> {
    let socket = context.socket(kind)?;
    socket
        .bind(endpoint)
        .with_context(|| format!("bind {endpoint}"))?;
    let bound = socket
        .get_last_endpoint()?
        .map_err(|raw| anyhow::anyhow!("a bound endpoint that is not UTF-8: {raw:?}"))?;
    announce(&bound);
    Ok((socket, bound))
}

/// How a receiving process waits for the next message: non-blocking polls as its idle
/// strategy says while messages keep coming, then, after [`POLLS_BEFORE_BLOCKING`] empty
/// polls, blocking in ZeroMQ itself so that its I/O thread (on the same core) gets the CPU.
struct Waiting {
    idle: Idle,
    heard: Instant,
    empty_polls: u32,
}

impl Waiting {
    /// Starts waiting on `socket`, whose blocking receives now time out after [`BLOCK_MS`].
    fn new(socket: &zmq::Socket, idle: IdleStrategy) -> anyhow::Result<Self> {
        socket.set_rcvtimeo(BLOCK_MS)?;
        Ok(Self {
            idle: idle.waiter(),
            heard: Instant::now(),
            empty_polls: 0,
        })
    }

    /// Receives the next message into `buffer` and returns its length; an error after
    /// [`PATIENCE`] without one.
    fn next(&mut self, socket: &zmq::Socket, buffer: &mut [u8]) -> anyhow::Result<usize> {
        loop {
            let flags = if self.empty_polls < POLLS_BEFORE_BLOCKING {
                zmq::DONTWAIT
            } else {
                0
            };
            match socket.recv_into(buffer, flags) {
                Ok(n) => {
                    self.heard = Instant::now();
                    self.empty_polls = 0;
                    self.idle.after(1);
                    return Ok(n);
                }
                Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => {
                    if self.heard.elapsed() > PATIENCE {
                        bail!("nothing from the ZeroMQ sender for {PATIENCE:?}");
                    }
                    self.empty_polls = self.empty_polls.saturating_add(1);
                    self.idle.after(0);
                }
                Err(e) => return Err(e).context("ZeroMQ receive"),
            }
        }
    }
}
