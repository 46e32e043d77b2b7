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
use sluice_sync::IdleStrategy;

use crate::network::RawWriter;
use crate::processes::PATIENCE;
use crate::reflect::RawEcho;

/// How long the sender's socket may hold unsent messages when it closes, in ms.
const LINGER_MS: i32 = 10_000;
/// How long one blocking receive waits, in ms.
const BLOCK_MS: i32 = 100;
/// Empty non-blocking polls before the receiver blocks.
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
    let socket = context.socket(zmq::PULL)?;
    socket
        .bind(endpoint)
        .with_context(|| format!("bind {endpoint}"))?;
    let bound = socket
        .get_last_endpoint()?
        .map_err(|raw| anyhow::anyhow!("a bound endpoint that is not UTF-8: {raw:?}"))?;
    announce(&bound);
    socket.set_rcvtimeo(BLOCK_MS)?;
    let mut buffer = vec![0u8; size + 1];
    let mut idle = idle.waiter();
    let mut heard = Instant::now();
    let mut empty_polls = 0u32;
    loop {
        // Poll as the idle strategy says for a while, then block in ZeroMQ itself, so its I/O
        // thread (on this core) gets the CPU.
        let flags = if empty_polls < POLLS_BEFORE_BLOCKING {
            zmq::DONTWAIT
        } else {
            0
        };
        match socket.recv_into(&mut buffer, flags) {
            Ok(0) => break,
            Ok(n) if n == size => {
                record(&buffer[..n])?;
                heard = Instant::now();
                empty_polls = 0;
                idle.after(1);
            }
            Ok(n) => {
                bail!("a ZeroMQ message of {n} bytes is neither a tuple of {size} nor the end")
            }
            Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => {
                if heard.elapsed() > PATIENCE {
                    bail!("nothing from the ZeroMQ sender for {PATIENCE:?}");
                }
                empty_polls = empty_polls.saturating_add(1);
                idle.after(0);
            }
            Err(e) => return Err(e).context("ZeroMQ receive"),
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
/// got, and sends every message back (polling as `idle` says) until the empty end, which it
/// sends back too.
pub(super) fn reflect(
    endpoint: &str,
    size: usize,
    idle: IdleStrategy,
    announce: impl Fn(&str),
) -> anyhow::Result<()> {
    let context = zmq::Context::new();
    let socket = context.socket(zmq::PAIR)?;
    socket.set_linger(LINGER_MS)?;
    socket.set_sndtimeo(PATIENCE.as_millis() as i32)?;
    socket
        .bind(endpoint)
        .with_context(|| format!("bind {endpoint}"))?;
    let bound = socket
        .get_last_endpoint()?
        .map_err(|raw| anyhow::anyhow!("a bound endpoint that is not UTF-8: {raw:?}"))?;
    announce(&bound);
    let mut buffer = vec![0u8; size + 1];
    let mut idle = idle.waiter();
    let mut heard = Instant::now();
    loop {
        match socket.recv_into(&mut buffer, zmq::DONTWAIT) {
            Ok(n) if n <= size => {
                socket.send(&buffer[..n], 0).context("ZeroMQ send back")?;
                if n == 0 {
                    return Ok(());
                }
                heard = Instant::now();
                idle.after(1);
            }
            Ok(n) => bail!("a ZeroMQ message of {n} bytes is longer than a tuple of {size}"),
            Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => {
                if heard.elapsed() > PATIENCE {
                    bail!("nothing from the ZeroMQ sender for {PATIENCE:?}");
                }
                idle.after(0);
            }
            Err(e) => return Err(e).context("ZeroMQ receive"),
        }
    }
}
