//! The `tcp` transport: framed, batched tuples over one TCP connection per sender, for edges
//! between processes and (later) between hosts.
//!
//! The receiver binds a listener to exactly the address it is given and accepts a fixed number
//! of senders (fan-in); each sender connects, proves it belongs to the job by presenting the
//! job's secret, and then streams frames of messages. Nothing flows back except TCP's own
//! acknowledgements and window updates: backpressure is TCP's flow control, seen by the sender
//! as a socket that would block.
//!
//! # Wire format
//!
//! All integers are little-endian. A sender first writes one hello of [`HELLO_LEN`] bytes:
//!
//! ```text
//!  0          8        10        12          16         20           24            28                60
//!  +----------+--------+---------+-----------+----------+------------+-------------+-----------------+
//!  | magic    | version| reserved| sender    | encoding | tuple size | frame limit | job secret      |
//!  | SLUICETP | u16 = 3| u16 = 0 | index u32 | u32 0|1  | u32        | u32         | 32 bytes        |
//!  +----------+--------+---------+-----------+----------+------------+-------------+-----------------+
//! ```
//!
//! `encoding` is 0 for normal tuples (tuple size 0) and 1 for facade tuples of `tuple size`
//! bytes; `frame limit` is the largest frame body the sender will write. The receiver drops
//! the connection (and counts it as refused) unless the magic, version and reserved field are
//! exact, the secret matches (compared in constant time), the index is below the number of
//! senders and not taken, the encoding matches its own tuple type and the frame limit is no
//! larger than its own. A refused sender finds its connection closed ([`SendError::Closed`]);
//! a refusal never poisons the edge, so a stranger cannot break a job by connecting to it
//! (see [Limits](#limits-what-a-peer-can-make-a-receiver-do)).
//!
//! Then frames, each a length and a body of whole records:
//!
//! ```text
//!  frame:   +---------------+-----------------------------------------------+
//!           | body len u32  | records (1 ..= frame limit bytes)             |
//!           +---------------+-----------------------------------------------+
//!  records: +------+---------------+---------+---------+-----+
//!           | 0x01 | count u32 >= 1| tuple 1 | tuple 2 | ... |      a run of data tuples
//!           +------+---------------+---------+---------+-----+
//!           | 0x02 | punctuation: kind u8, value u64, from u32 (13 bytes) |      a punctuation
//!           +------+-------------------------------------------+
//!           | 0x03 |                                               the end of the stream
//!           +------+---------------------------+------------+
//!           | 0x04 | len u32 <= max tuple, > 0 | len bytes  |   a part of a tuple, more follow
//!           +------+---------------------------+------------+
//!           | 0x05 | len u32 <= max tuple, > 0 | len bytes  |   the last part of a tuple
//!           +------+---------------------------+------------+
//!  tuple:   facade: its `tuple size` bytes
//!           normal: +-------------------------+---------------+
//!                   | len u32 <= max tuple    | len bytes     |
//!                   +-------------------------+---------------+
//! ```
//!
//! A normal tuple whose encoding is longer than `max_tuple_bytes` is sent as part records of
//! up to that size, consecutive in the stream (nothing else between them), and reassembled by
//! the receiver ([`crate::parts`]): a transport carries any tuple up to
//! [`MAX_TUPLE_BYTES`](crate::MAX_TUPLE_BYTES), whatever its parameters. Fixed-size tuples
//! never come in parts.
//!
//! A record never spans two frames, and nothing follows the end of the stream. The receiver
//! checks every length against its own limits before it reads or copies anything: a frame
//! longer than its frame limit, a run of zero tuples or more tuples than the frame holds, a
//! tuple longer than its maximum, an unknown tag, a punctuation cut by its frame or of a kind
//! `Punctuation::from_wire` refuses, a tuple that does not decode, or a byte after the end of
//! the stream poison the edge with [`RecvError::Misbehaved`], which names the sender's
//! address and what it sent. Its buffers are sized from its own parameters once, so nothing a
//! peer sends makes it allocate.
//!
//! A punctuation's 9 bytes are its wire encoding, the one every transport uses (drawn in
//! `sluice_types::Punctuation`'s module).
//!
//! # Limits: what a peer can make a receiver do
//!
//! A receiver listens until all its senders are in, and anybody who can reach its address may
//! connect meanwhile. What a connection can cost it is bounded:
//!
//! - **Handshakes.** A connection's hello is read as soon as the connection is accepted, and
//!   one whose first bytes cannot begin a hello (garbage, a frame length) is refused as soon as
//!   they arrive. A hello not whole within [`HANDSHAKE_TIMEOUT`] (5 s) is dropped. At most
//!   [`MAX_PENDING_PER_ADDRESS`] (8) connections from one IP address, and [`MAX_PENDING`]
//!   (64) in all, wait for their hello at once; one more pushes out the one that has waited
//!   longest from its address (or from all). A sender writes its hello right after it
//!   connects, so it is judged at once: connections that say nothing, however many, cannot
//!   keep it out, and a stranger connecting over and over pushes out only its own. At most
//!   [`MAX_PENDING`] connections are accepted per poll, so a flood cannot hold the receiving
//!   thread. At most [`MAX_SENDERS`] (1024) senders per receiver.
//! - **Warnings.** Every refused connection is named on standard error (a PE's lines reach the
//!   launcher's, prefixed by the PE's name): `warning: the tcp receiver at ADDRESS refused a
//!   connection from PEER: WHY`, where WHY is a hello too slow (and how much of it came),
//!   pushed out, cut short, not a hello (its first 16 bytes in hex: never the secret, which
//!   starts at byte 28), without the job's secret, of another tuple encoding or frame limit, or
//!   for a sender index out of range or taken. After [`WARNINGS_PER_ADDRESS`] (8) warnings
//!   about one IP address, and for addresses beyond the first [`MAX_WARNED_ADDRESSES`] (256),
//!   refusals are only counted ([`TcpReceiver::refused`]), so a flood cannot flood the log.
//! - **Frames.** A frame body is at most the frame limit, `max(batch_bytes, max_tuple_bytes +
//!   9)`: 65,545 bytes by default, at most 64 MiB + 9 (both parameters are at most 64 MiB).
//!   A longer length, up to the 4 GiB a `u32` can say, is
//!   refused when its four bytes arrive, before anything is read or allocated for it. Each
//!   admitted sender has one read buffer of `max(256 KiB, 2 × (max_tuple_bytes + 4))` bytes,
//!   allocated when it is admitted (after it presented the secret), never grown. The only
//!   other memory a peer's bytes take is the reassembly of a tuple sent in parts, which grows
//!   as the parts arrive (never ahead of them) and is refused past
//!   [`MAX_TUPLE_BYTES`](crate::MAX_TUPLE_BYTES).
//! - **An admitted peer that breaks the format** fails the edge with
//!   [`RecvError::Misbehaved`], e.g. `the sender at 10.0.0.2:41234 sent a frame of 4294967295
//!   bytes, over the limit of 65545; the edge is poisoned`, and the job stops with that as
//!   its cause (it holds the job's secret: it is one of the job's PEs, broken, or the secret
//!   leaked). One that closes in the middle of a frame is reported as disconnected.
//!
//! # Batching
//!
//! Messages are appended to the current frame in the sender's buffer and written with one
//! `write` per batch of frames (the socket has `TCP_NODELAY`: the batching is ours, so the
//! kernel sends at once what it is given). When a frame is written depends on the
//! [`BatchProfile`]:
//!
//! - **latency**: a message offered while the socket is idle (nothing of ours waits in the
//!   buffer) is written at once; the rest of that burst (what the sending thread offers before
//!   its next `flush`, such as the batch one round emitted) coalesces and goes out at the
//!   flush, or as soon as it is 50 us old; while the socket pushes back, messages coalesce
//!   until the next `flush`. So a lone message is never held, and a burst costs two writes
//!   rather than one per message (a fan-out of small tuples to several receiving processes on
//!   one host otherwise spends its sender on a write and a wake-up per tuple and receiver).
//! - **throughput**: messages coalesce into one frame up to `batch_bytes`, and `flush` holds a
//!   frame back until its first message is `max_batch_us` old, so several units of work share
//!   one system call (IBM LLM's `MaxBatchingMicro`).
//! - **adaptive** (the default): like throughput, but the hold moves between `min_batch_us`
//!   and `max_batch_us`: it doubles whenever the socket pushes back (the receiver is behind,
//!   so waiting costs nothing) and halves whenever a write goes through whole.
//!
//! A frame reaching `batch_bytes` is written at once, and an end of stream is written by the
//! next `flush` whatever the profile. A sender holding messages back says so through
//! [`TupleSender::pending`]: its caller must call `flush` again, even without new offers.
//!
//! # What "sent" means
//!
//! `offer` returning `Ok` means the sender holds the message; once `flush` leaves nothing
//! [`pending`](TupleSender::pending), the kernel holds it. From there TCP delivers a prefix of
//! the byte stream, in order and without duplicates. If the connection is lost, messages in
//! flight may be lost, but never silently: the receiver reports [`RecvError::Disconnected`]
//! instead of an end of stream (it delivers `EndOfStream` only when everything before it
//! arrived), and the sender's next `offer` returns [`SendError::Closed`]. Dropping a sender
//! writes what it still holds (waiting at most [`DROP_DRAIN`]) and closes the connection; a
//! sender dropped without offering the end of stream is reported as disconnected.

mod admission;
pub(crate) mod frames;
mod params;
mod readiness;
mod receiver;
mod secret;
mod sender;
pub(crate) mod wire;

pub use admission::{
    WarningLimit, HANDSHAKE_TIMEOUT, MAX_PENDING, MAX_PENDING_PER_ADDRESS, MAX_WARNED_ADDRESSES,
    WARNINGS_PER_ADDRESS,
};
pub use params::{BatchProfile, TcpParams, MIN_SOCKET_BUFFER};
pub use receiver::{bind_receiver, TcpReceiver, MAX_SENDERS};
pub use secret::{InvalidSecret, JobSecret, SECRET_LEN};
pub use sender::{connect_sender, TcpSender, CONNECT_PATIENCE, DROP_DRAIN};
pub use wire::{HELLO_LEN, MAGIC, VERSION};

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use sluice_types::Tuple;

use crate::TransportError;
#[cfg(doc)]
use crate::{RecvError, SendError, TupleSender};

/// How long the in-process [`connect`] waits for its receiver to accept its sender.
const ACCEPT_PATIENCE: Duration = Duration::from_secs(10);

/// The hello sender number `sender` of an edge of tuples `T` under `params` opens its
/// connection with, for another connection of a job that must prove it belongs to the job
/// the same way (the launcher's control channel).
pub fn hello<T: Tuple>(
    secret: &JobSecret,
    sender: u32,
    params: &TcpParams,
) -> Result<[u8; HELLO_LEN], TransportError> {
    Ok(wire::Framing::new::<T>(params)?.hello(secret, sender))
}

/// The sender index `hello` presents if a receiver of `senders` senders of tuples `T` under
/// `params`, holding `secret`, accepts it: the check a [`TcpReceiver`] makes (the secret
/// compared in constant time), for another listener of the job.
pub fn accepted_sender<T: Tuple>(
    hello: &[u8; HELLO_LEN],
    secret: &JobSecret,
    senders: usize,
    params: &TcpParams,
) -> Result<Option<usize>, TransportError> {
    Ok(wire::Framing::new::<T>(params)?
        .accepts(hello, secret, senders)
        .ok())
}

/// Both ends of one edge over loopback, for two threads of one process: a receiver on
/// `127.0.0.1` at a port the system picks, a fresh random secret, and one sender already
/// accepted.
pub fn connect<T: Tuple>(
    params: &TcpParams,
) -> Result<(TcpSender<T>, TcpReceiver<T>), TransportError> {
    let secret = JobSecret::random()?;
    let (mut receiver, addr) = bind_receiver::<T>(
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        &secret,
        1,
        params,
    )?;
    let sender = connect_sender::<T>(addr, &secret, 0, params)?;
    receiver.wait_for_senders(ACCEPT_PATIENCE)?;
    Ok((sender, receiver))
}
