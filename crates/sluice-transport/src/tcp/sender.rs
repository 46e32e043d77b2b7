//! The sending end of a `tcp` edge: encodes messages into frames in one buffer and writes
//! them to a non-blocking socket when its [`BatchProfile`] says so.
//!
//! The buffer holds, in order, bytes already written (dropped when the closed frames are all
//! out), closed frames not yet written, and the open frame being filled:
//!
//! ```text
//!  0            written              closed_end (= open frame's start)       len
//!  +------------+--------------------+--------------------------------------+
//!  | written    | closed, unwritten  | open frame: header, runs, records... |
//!  +------------+--------------------+--------------------------------------+
//! ```
//!
//! `offer` refuses with [`SendError::Full`] once the unwritten bytes reach one frame limit and
//! the socket will not take any; so the sender holds at most about one frame more than the
//! kernel's send buffer.

use std::io::{ErrorKind, Read, Write};
use std::marker::PhantomData;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use sluice_types::{Message, Tuple};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::params::{BatchProfile, TcpParams};
use super::readiness::{wait_until, Ready};
use super::secret::JobSecret;
use super::wire::{
    Framing, FRAME_HEADER, LEN_PREFIX, PART_HEADER, RUN_HEADER, TAG_DATA, TAG_END, TAG_LAST,
    TAG_PART, TAG_PUNCTUATION,
};
use crate::parts::{check_len, MAX_TUPLE_BYTES};
use crate::wire_fields::put_u32;
use crate::{Refused, SendError, TransportError, TupleSender};

/// How long [`connect_sender`] keeps trying to reach a receiver that is not listening yet.
pub const CONNECT_PATIENCE: Duration = Duration::from_secs(20);
/// How long a dropped sender waits for the kernel to take what it still holds.
pub const DROP_DRAIN: Duration = Duration::from_secs(2);
/// The longest pause between two connection attempts.
const RETRY_PAUSE_MAX: Duration = Duration::from_millis(100);
/// The longest single connection attempt.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(1);
/// An empty buffer checks whether the receiver is gone on every this many new batches.
const LIVENESS_EVERY: u32 = 64;
/// The smallest non-zero hold of an adaptive batch.
const HOLD_STEP: Duration = Duration::from_micros(10);
/// The longest a latency-profile sender holds the rest of a burst before writing it without
/// waiting for the flush: the top of IBM LLM's latency configuration (25-50 us). Measured on
/// the 2-vCPU machine (loaded by others), `sluice bench throughput --transport tcp --size
/// 108 --receivers 6 --duration 0.6 --warmup 0.2 --repeat 3`: 0.35 Gbit/s with a 10 us
/// hold, 0.55 with 50 us (the burst of one tuple to each of six senders in turn outlasts
/// 10 us, so every socket got a write and a receiver wake-up per few tuples); one receiver
/// 1.26 and 1.29.
const BURST_HOLD: Duration = Duration::from_micros(50);

/// The frame being filled.
#[derive(Debug, Clone, Copy)]
struct OpenFrame {
    /// Offset of its length prefix in the buffer.
    start: usize,
    /// Offset of the open run's count and the tuples in it so far.
    run: Option<(usize, u32)>,
    /// When its first message was offered (for the batching hold).
    opened: Instant,
    /// Whether it holds the end of the stream.
    ends: bool,
}

/// Where a sender is in its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    /// The end of the stream was offered; nothing more may be.
    Ended,
    /// The connection is lost.
    Closed,
}

/// The sending end of a `tcp` edge.
pub struct TcpSender<T> {
    stream: TcpStream,
    framing: Framing,
    profile: BatchProfile,
    min_hold: Duration,
    max_hold: Duration,
    /// How long `flush` holds a batch back now.
    hold: Duration,
    batch_bytes: usize,
    buffer: Vec<u8>,
    written: usize,
    open: Option<OpenFrame>,
    /// A normal tuple's encoding, before its length is known.
    scratch: Vec<u8>,
    state: State,
    batches: u32,
    /// Latency profile: a message went out at once since the last flush, so the rest of
    /// this burst waits for the flush (or [`BURST_HOLD`]) and goes out in one write.
    burst: bool,
    _tuples: PhantomData<fn(T)>,
}

/// Connects to the receiver at `addr` as sender number `index` of the edge, presenting
/// `secret`. A receiver that is not listening yet is retried for [`CONNECT_PATIENCE`]. The
/// receiver checks the hello when it next polls: a sender it refuses finds its connection
/// closed ([`SendError::Closed`]).
pub fn connect_sender<T: Tuple>(
    addr: SocketAddr,
    secret: &JobSecret,
    index: u32,
    params: &TcpParams,
) -> Result<TcpSender<T>, TransportError> {
    let framing = Framing::new::<T>(params)?;
    let setup =
        |what: &str, e: std::io::Error| TransportError::Setup(format!("{what} {addr}: {e}"));
    let deadline = Instant::now() + CONNECT_PATIENCE;
    let mut pause = Duration::from_millis(1);
    let mut stream = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match open_socket(addr, params, left.min(ATTEMPT_TIMEOUT)) {
            Ok(stream) => break stream,
            Err(e) if retryable(&e) && !left.is_zero() => {
                std::thread::sleep(pause.min(left));
                pause = (pause * 2).min(RETRY_PAUSE_MAX);
            }
            Err(e) => return Err(setup("connect to", e)),
        }
    };
    // The hello fits any socket buffer: a blocking write of it returns at once.
    stream
        .set_write_timeout(Some(ATTEMPT_TIMEOUT))
        .and_then(|()| stream.write_all(&framing.hello(secret, index)))
        .and_then(|()| stream.set_nonblocking(true))
        .map_err(|e| setup("greet", e))?;
    let hold = match params.profile {
        BatchProfile::Latency => Duration::ZERO,
        BatchProfile::Throughput => params.max_hold(),
        BatchProfile::Adaptive => params.min_hold(),
    };
    Ok(TcpSender {
        stream,
        framing,
        profile: params.profile,
        min_hold: params.min_hold(),
        max_hold: params.max_hold(),
        hold,
        batch_bytes: params.batch_bytes,
        buffer: Vec::with_capacity(2 * framing.frame_limit + FRAME_HEADER),
        written: 0,
        open: None,
        scratch: Vec::new(),
        state: State::Open,
        batches: 0,
        burst: false,
        _tuples: PhantomData,
    })
}

/// Connection errors worth another attempt: the receiver is not listening yet or is busy.
fn retryable(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::ConnectionRefused
            | ErrorKind::TimedOut
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::Interrupted
            | ErrorKind::WouldBlock
    )
}

fn open_socket(
    addr: SocketAddr,
    params: &TcpParams,
    timeout: Duration,
) -> std::io::Result<TcpStream> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if let Some(bytes) = params.socket_buffer_bytes {
        socket.set_send_buffer_size(bytes)?;
        socket.set_recv_buffer_size(bytes)?;
    }
    socket.set_tcp_nodelay(true)?;
    socket.connect_timeout(&SockAddr::from(addr), timeout.max(Duration::from_millis(1)))?;
    let stream = TcpStream::from(socket);
    if stream.local_addr()? == addr {
        // Retrying a local port nobody listens on can pick that very port as the source and
        // connect the socket to itself (TCP simultaneous open); that is nobody listening.
        return Err(ErrorKind::ConnectionRefused.into());
    }
    Ok(stream)
}

impl<T> TcpSender<T> {
    /// The receiver's address.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.stream.peer_addr().ok()
    }

    fn unwritten(&self) -> usize {
        self.buffer.len() - self.written
    }

    fn closed_end(&self) -> usize {
        self.open.as_ref().map_or(self.buffer.len(), |o| o.start)
    }

    fn open_body(&self) -> usize {
        self.open
            .as_ref()
            .map_or(0, |o| self.buffer.len() - o.start - FRAME_HEADER)
    }

    /// Starts a frame at the end of the buffer.
    fn open_frame(&mut self) {
        let start = self.buffer.len();
        self.buffer.extend_from_slice(&[0; FRAME_HEADER]);
        self.open = Some(OpenFrame {
            start,
            run: None,
            opened: Instant::now(),
            ends: false,
        });
    }

    /// Writes the open run's tuple count into its header.
    fn finish_run(&mut self) {
        if let Some((at, count)) = self.open.as_mut().and_then(|o| o.run.take()) {
            put_u32(&mut self.buffer, at, count);
        }
    }

    /// Closes the open frame: its records are final and it may be written.
    fn close_open(&mut self) {
        self.finish_run();
        if let Some(open) = self.open.take() {
            let body = self.buffer.len() - open.start - FRAME_HEADER;
            if body == 0 {
                self.buffer.truncate(open.start);
            } else {
                // Frame bodies are at most the frame limit, which fits a u32 (params.rs).
                put_u32(&mut self.buffer, open.start, body as u32);
            }
        }
    }

    /// Makes the open frame ready to take a record of up to `bytes` bytes: a frame that would
    /// grow past the frame limit is closed and another opened.
    fn make_room(&mut self, bytes: usize) {
        let body = self.open_body();
        if self.open.is_some() && body > 0 && body + bytes > self.framing.frame_limit {
            self.close_open();
        }
        if self.open.is_none() {
            self.open_frame();
        }
    }

    /// Appends the record of one tuple whose encoding is `len` bytes, written by `encode`.
    fn append_tuple(&mut self, len: usize, encode: impl FnOnce(&mut Vec<u8>)) {
        let prefix = if self.framing.facade.is_some() {
            0
        } else {
            LEN_PREFIX
        };
        self.make_room(RUN_HEADER + prefix + len);
        let Some(open) = self.open.as_mut() else {
            return;
        };
        match &mut open.run {
            Some((_, count)) => *count += 1,
            None => {
                self.buffer.push(TAG_DATA);
                open.run = Some((self.buffer.len(), 1));
                self.buffer.extend_from_slice(&[0; 4]);
            }
        }
        if prefix > 0 {
            // A tuple is at most max_tuple_bytes, which fits a u32 (params.rs).
            self.buffer.extend_from_slice(&(len as u32).to_le_bytes());
        }
        encode(&mut self.buffer);
    }

    /// Appends a normal tuple's `encoding`, longer than the largest tuple, as part records of
    /// up to that size each, the last tagged as such.
    fn append_parts(&mut self, encoding: &[u8]) {
        self.finish_run();
        let mut parts = encoding.chunks(self.framing.max_tuple).peekable();
        while let Some(part) = parts.next() {
            let tag = if parts.peek().is_some() {
                TAG_PART
            } else {
                TAG_LAST
            };
            self.make_room(PART_HEADER + part.len());
            self.buffer.push(tag);
            // A part is at most max_tuple_bytes, which fits a u32 (params.rs).
            self.buffer
                .extend_from_slice(&(part.len() as u32).to_le_bytes());
            self.buffer.extend_from_slice(part);
        }
    }

    /// Appends a record that is not data: `tag`, then `payload`.
    fn append_control(&mut self, tag: u8, payload: &[u8]) {
        self.finish_run();
        self.make_room(1 + payload.len());
        self.buffer.push(tag);
        self.buffer.extend_from_slice(payload);
        if let (TAG_END, Some(open)) = (tag, self.open.as_mut()) {
            open.ends = true;
        }
    }

    /// Writes closed frames until they are all out or the socket pushes back; returns
    /// whether it pushed back. A lost connection closes the sender.
    fn push(&mut self) -> Result<bool, SendError> {
        let end = self.closed_end();
        let mut pushed_back = false;
        while self.written < end {
            match self.stream.write(&self.buffer[self.written..end]) {
                Ok(0) => return self.lost(),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    pushed_back = true;
                    break;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return self.lost(),
            }
        }
        if self.written == end && end > 0 {
            // Everything closed is out: keep only the open frame, at the front.
            self.buffer.drain(..end);
            self.written = 0;
            if let Some(open) = self.open.as_mut() {
                open.start -= end;
                if let Some((at, _)) = open.run.as_mut() {
                    *at -= end;
                }
            }
        }
        Ok(pushed_back)
    }

    /// Writes what is closed and moves the adaptive hold: longer when the socket pushed back,
    /// shorter when everything went.
    fn push_and_adapt(&mut self) -> Result<(), SendError> {
        if self.written == self.closed_end() {
            return Ok(());
        }
        let pushed_back = self.push()?;
        if self.profile == BatchProfile::Adaptive {
            self.hold = if pushed_back {
                (self.hold * 2).max(HOLD_STEP).min(self.max_hold)
            } else if self.hold / 2 < HOLD_STEP {
                self.min_hold
            } else {
                (self.hold / 2).max(self.min_hold)
            };
        }
        Ok(())
    }

    fn lost<R>(&mut self) -> Result<R, SendError> {
        self.state = State::Closed;
        Err(SendError::Closed)
    }

    /// Whether the receiver has closed the connection. It never writes to us, so a readable
    /// socket means end of file or a reset.
    fn receiver_gone(&mut self) -> bool {
        let mut byte = [0u8; 1];
        match self.stream.read(&mut byte) {
            Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted),
            // End of file (0), or bytes a receiver never sends.
            Ok(0 | 1..) => true,
        }
    }

    /// Whether a latency-profile sender writes the message just appended at once: the first
    /// of a burst (offered while nothing of ours waited) goes at once; the rest coalesce
    /// until the flush, or until they are [`BURST_HOLD`] old while the socket takes bytes. So
    /// a lone message is never held, and a burst (what one round of the sending thread
    /// emitted) costs two writes rather than one per message, on each socket of a fan-out.
    fn write_at_once(&mut self, idle: bool) -> bool {
        if self.profile != BatchProfile::Latency {
            return false;
        }
        let at_once = if self.burst {
            self.written == self.closed_end()
                && self
                    .open
                    .is_some_and(|open| open.opened.elapsed() >= BURST_HOLD)
        } else {
            idle
        };
        self.burst |= at_once;
        at_once
    }

    /// Refuses offers when the sender cannot take them now; the checks before anything is
    /// appended.
    fn admit(&mut self) -> Result<(), SendError> {
        match self.state {
            State::Open => {}
            State::Ended | State::Closed => return Err(SendError::Closed),
        }
        if self.unwritten() >= self.framing.frame_limit {
            self.close_open();
            self.push_and_adapt()?;
            if self.unwritten() >= self.framing.frame_limit {
                return Err(SendError::Full);
            }
        }
        if self.unwritten() == 0 {
            self.batches = self.batches.wrapping_add(1);
            if self.batches % LIVENESS_EVERY == 1 && self.receiver_gone() {
                return self.lost();
            }
        }
        Ok(())
    }
}

impl<T: Tuple> TcpSender<T> {
    /// Appends a data message, or says why it cannot be sent.
    fn append_data(&mut self, tuple: &T) -> Result<(), SendError> {
        let too_large = |tuple: usize, slot: usize| SendError::TooLarge { tuple, slot };
        let unencodable = SendError::Unencodable {
            type_name: std::any::type_name::<T>(),
        };
        match self.framing.facade {
            Some(size) => {
                if size > self.framing.max_tuple {
                    return Err(too_large(size, self.framing.max_tuple));
                }
                let (len_before, open_before) = (self.buffer.len(), self.open);
                let mut failed = false;
                self.append_tuple(size, |out| {
                    let before = out.len();
                    failed = tuple.encode(out).is_err() || out.len() != before + size;
                });
                if failed {
                    // Take the record back out; a frame closed to make room for it stays a
                    // valid frame.
                    match (open_before, self.open) {
                        (Some(old), Some(new)) if old.start == new.start => {
                            self.buffer.truncate(len_before);
                            self.open = open_before;
                        }
                        (_, new) => {
                            self.buffer.truncate(new.map_or(len_before, |n| n.start));
                            self.open = None;
                        }
                    }
                    return Err(unencodable);
                }
            }
            None => {
                let mut scratch = std::mem::take(&mut self.scratch);
                scratch.clear();
                let encoded = tuple.encode(&mut scratch);
                let len = scratch.len();
                let outcome = match encoded {
                    Err(_) => Err(unencodable),
                    Ok(()) if len > self.framing.max_tuple => {
                        check_len(len, MAX_TUPLE_BYTES).map(|()| self.append_parts(&scratch))
                    }
                    Ok(()) => {
                        self.append_tuple(len, |out| out.extend_from_slice(&scratch));
                        Ok(())
                    }
                };
                self.scratch = scratch;
                outcome?;
            }
        }
        Ok(())
    }
}

impl<T: Tuple> TcpSender<T> {
    /// Appends one message with `append` (after checking the connection), then writes at once
    /// if a frame filled up or the stream was idle.
    fn offer_with(
        &mut self,
        append: impl FnOnce(&mut Self) -> Result<(), SendError>,
    ) -> Result<(), SendError> {
        self.admit()?;
        let idle = self.unwritten() == 0;
        let closed_before = self.closed_end();
        append(self)?;
        // A frame filled up (closed to make room, or at the byte budget) goes at once.
        let write_now = self.write_at_once(idle)
            || self.closed_end() > closed_before
            || self.open_body() >= self.batch_bytes;
        if write_now {
            self.close_open();
            // The message is ours now: a lost connection is reported by the next call.
            let _ = self.push_and_adapt();
        }
        Ok(())
    }
}

impl<T: Tuple> TupleSender<T> for TcpSender<T> {
    fn offer(&mut self, message: Message<T>) -> Result<(), Refused<T>> {
        self.offer_with(|me| match &message {
            Message::Data(tuple) => me.append_data(tuple),
            Message::Punctuation(punctuation) => {
                me.append_control(TAG_PUNCTUATION, &punctuation.to_wire());
                Ok(())
            }
            Message::EndOfStream => {
                me.append_control(TAG_END, &[]);
                me.state = State::Ended;
                Ok(())
            }
        })
        .map_err(|error| Refused { error, message })
    }

    fn offer_copy(&mut self, tuple: &T) -> Result<(), SendError> {
        self.offer_with(|me| me.append_data(tuple))
    }

    fn flush(&mut self) {
        self.burst = false;
        if self.state == State::Closed {
            return;
        }
        let due = self.open.as_ref().is_some_and(|open| {
            self.profile == BatchProfile::Latency
                || open.ends
                || self.hold.is_zero()
                || open.opened.elapsed() >= self.hold
        });
        if due {
            self.close_open();
        }
        let _ = self.push_and_adapt();
    }

    fn room(&mut self) -> usize {
        let Some(size) = self.framing.facade else {
            return 0;
        };
        let unwritten = self.unwritten();
        let limit = self.framing.frame_limit;
        if self.state != State::Open || size > self.framing.max_tuple || unwritten >= limit {
            return 0;
        }
        // Each offer adds at most a frame header, a run header and the tuple, and is accepted
        // while fewer than `limit` bytes are unwritten.
        (limit - unwritten).div_ceil(size + RUN_HEADER + FRAME_HEADER)
    }

    fn pending(&self) -> bool {
        self.state != State::Closed && self.unwritten() > 0
    }

    /// Flushes, then sleeps until the socket takes bytes again if it pushed back, or until
    /// the batch held back is due, at most `timeout`.
    fn park(&mut self, timeout: Duration) -> bool {
        self.flush();
        if self.state == State::Closed {
            return true;
        }
        if self.written < self.closed_end() {
            wait_until(&[self.stream.as_fd()], Ready::Writable, timeout);
        } else if let Some(open) = &self.open {
            let due = self.hold.saturating_sub(open.opened.elapsed());
            std::thread::sleep(due.min(timeout));
        }
        true
    }
}

impl<T> Drop for TcpSender<T> {
    fn drop(&mut self) {
        if self.state == State::Closed {
            return;
        }
        self.close_open();
        let deadline = Instant::now() + DROP_DRAIN;
        if self.stream.set_nonblocking(false).is_ok() {
            while self.written < self.buffer.len() {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() || self.stream.set_write_timeout(Some(left)).is_err() {
                    break;
                }
                match self.stream.write(&self.buffer[self.written..]) {
                    Ok(0) => break,
                    Ok(n) => self.written += n,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TupleReceiver;

    #[test]
    fn the_adaptive_hold_grows_under_pushback_and_shrinks_when_writes_go_through() {
        let params = TcpParams {
            profile: BatchProfile::Adaptive,
            min_batch_us: 0,
            max_batch_us: 500,
            batch_bytes: 256,
            max_tuple_bytes: 64,
            socket_buffer_bytes: Some(4096),
        };
        let (mut tx, mut rx) = super::super::connect::<u64>(&params).unwrap();
        assert_eq!(tx.hold, Duration::ZERO);
        // Nobody reads: the socket fills and pushes back.
        loop {
            match tx.offer(Message::Data(1)) {
                Ok(()) => tx.flush(),
                Err(refused) => {
                    assert_eq!(refused.error, SendError::Full);
                    break;
                }
            }
        }
        assert!(tx.hold > Duration::ZERO, "{:?}", tx.hold);
        assert!(tx.hold <= Duration::from_micros(500), "{:?}", tx.hold);
        // The receiver catches up: whole writes bring the hold back to the minimum.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut out = Vec::new();
        while tx.hold > Duration::ZERO {
            assert!(
                Instant::now() < deadline,
                "the hold stayed at {:?}",
                tx.hold
            );
            while rx.poll(4096, &mut out).unwrap() > 0 {
                out.clear();
            }
            if !tx.pending() {
                tx.offer(Message::Data(2)).unwrap();
            }
            tx.flush();
        }
    }

    #[test]
    fn room_is_a_promise() {
        let params = TcpParams {
            batch_bytes: 100,
            max_tuple_bytes: 8,
            socket_buffer_bytes: Some(4096),
            ..TcpParams::with_profile(BatchProfile::Throughput)
        };
        let (mut tx, _rx) = super::super::connect::<u64>(&params).unwrap();
        let mut offered = 0u64;
        loop {
            let room = tx.room();
            if room == 0 {
                break;
            }
            for _ in 0..room {
                tx.offer(Message::Data(offered)).expect("room promised it");
                offered += 1;
            }
            assert!(offered < 1_000_000, "room never ran out");
        }
        assert!(offered > 0);
    }
}
