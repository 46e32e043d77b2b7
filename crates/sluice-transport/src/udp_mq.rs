//! The `udp-mq` transport: tuples packed into UDP datagrams, sent and received in batches
//! over a set of sockets that stand in for a NIC's hardware queues (Muralidharan, Casey and
//! Gregg, "A parallel runtime framework for communication intensive stream applications",
//! section V.A).
//!
//! - **Queues.** The receiver binds `queues` sockets to one address with `SO_REUSEPORT`; each
//!   sender connects `queues` sockets to it. The kernel steers each sender socket's datagrams
//!   to one receiving socket by a hash of the addresses (as RSS steers a flow to one hardware
//!   queue), so what one sender socket sends arrives in one receiving socket, in order. A
//!   sender picks the queue of each tuple by [`QueueChoice`]: at random per datagram (the
//!   paper's choice), or by a hash of the tuple's flow key, so one flow always takes the same
//!   queue and keeps its order (flow affinity).
//! - **Batched system calls.** Each socket has a ring of datagrams ([`crate::datagram`]): a
//!   sender's ring goes to the kernel in one `sendmmsg` when it is full or on `flush`
//!   (Algorithm 1), a receiver's ring is refilled with one `recvmmsg` when fewer than
//!   `recv_threshold` datagrams are left in it (Algorithm 2). Many tuples share a datagram.
//! - **Loss is counted, never hidden.** Each sender numbers the datagrams of each queue and
//!   says how many tuples it sent on the queue before each one; the receiver counts the gaps
//!   ([`UdpMqReceiver::stats`]: lost datagrams and the tuples they carried) and drops a
//!   datagram older than one it already took (late), so each flow's order holds.
//!
//! UDP has no flow control: a sender that outruns its receiver (or the network) loses
//! datagrams in the receiver's socket buffer. `udp-mq` is **at-most-once**: nothing is
//! delivered twice or out of order within a flow, but tuples may be lost, and every loss is
//! counted. `offer` refuses with [`SendError::Full`] only when a queue's ring is full and its
//! socket would block (the local device is busy), never because the receiver is behind.
//!
//! # Wire format
//!
//! All integers are little-endian. Every datagram is a header of [`HEADER_LEN`] bytes and
//! then `count` records:
//!
//! ```text
//!  0      4     5     6       8        10      12        16         24          32            40
//!  +------+-----+-----+-------+--------+-------+---------+----------+-----------+-------------+
//!  | magic| ver | rsv | queue | queues | count | sender  | job tag  | sequence  | first tuple |
//!  | SLUQ | u8=2| u8=0| u16   | u16    | u16   | u32     | u64      | u64       | u64         |
//!  +------+-----+-----+-------+--------+-------+---------+----------+-----------+-------------+
//!
//!  record:  +-----+----------+---------------------+
//!           | tag | len u16  | len bytes           |
//!           +-----+----------+---------------------+
//!   tag 1  data         the tuple's encoding (facade: its bytes; normal: postcard)
//!   tag 2  punctuation  len 21: see below
//!   tag 3  end          len 8: u64 punctuations the sender sent in all; last record only
//!   tag 4  gone         len 0: the sender was dropped without ending; last record only
//!
//!  punctuation payload:
//!   0                     8        9                            17           21
//!   +---------------------+--------+----------------------------+------------+
//!   | index u64           | kind u8| value u64                  | from u32   |
//!   +---------------------+--------+----------------------------+------------+
//!   index: punctuations the sender sent before this one; kind, value and from: the
//!   punctuation's wire encoding, the one every transport uses (sluice_types::Punctuation)
//! ```
//!
//! `queue` is the sender's socket the datagram left from, `queues` the sender's number of
//! them (it must equal the receiver's), `sender` the sender's index among the edge's senders,
//! `sequence` the datagram's number on its queue (from 0) and `first tuple` how many tuples
//! the sender sent on that queue before this datagram. A datagram of no records is a
//! heartbeat. The job tag is [`job_tag`] of the job's secret: a datagram with another magic,
//! version or tag is foreign and dropped.
//!
//! The receiver checks every datagram whole before it delivers any of it: its length against
//! the largest datagram, `queues`, `queue` and `sender` against its own parameters, every
//! record length against the bytes left, the count against the records found (no byte may
//! follow the last), every punctuation's kind and value as `Punctuation::from_wire` does, and
//! every tuple by decoding it. A datagram that fails is dropped and counted as malformed; the
//! edge goes on. A tuple whose encoding does not fit one datagram (more than
//! `datagram_bytes - 43` bytes) is refused by the sender as too large.
//!
//! # Punctuations and the end of the stream
//!
//! A punctuation or an end of stream is sent on every queue of its sender. The receiver
//! delivers a punctuation once every queue of the sender has passed it (a later punctuation
//! or the end on a queue shows that queue passed the ones before, even if their datagrams were
//! lost), so it follows everything its sender offered before it; its value is the one the
//! first of its copies to arrive carried. A punctuation whose copies were all lost has no
//! value to deliver: it is passed, and counted ([`UdpMqStats::lost_punctuations`]). With more
//! than one queue, tuples offered after a punctuation may overtake it (their queue passed it
//! while another had not yet): where a punctuation must also precede what follows it, use one
//! queue. The receiver delivers one `EndOfStream` per sender, once every queue of that sender
//! has brought its end.
//!
//! A dropped sender sends each queue's last datagram [`END_REPEATS`] more times, spaced out
//! (UDP may lose any one copy; the receiver ignores the repeats); a busy one,
//! [`BUSY_END_REPEATS`] times over a second, so a receiver it flooded can drain its buffers
//! first. A sender dropped without
//! ending its stream sends a gone record instead, and the receiver reports
//! [`RecvError::Disconnected`] once every queue of that sender has brought it. A sender that
//! dies without a word is reported as disconnected after the idle limit
//! ([`UdpMqParams::idle_limit_ms`]) of silence; off by default, because a sender that is only
//! quiet looks the same unless its caller flushes it at least every quarter of the limit (a
//! flush then sends a heartbeat). Without an idle limit, an end of stream whose copies were all
//! lost leaves the receiver waiting.

mod params;
pub(crate) mod receiver;
mod sender;
pub(crate) mod wire;

pub use params::{
    QueueChoice, UdpMqParams, DEFAULT_BATCH, DEFAULT_DATAGRAM_BYTES, DEFAULT_QUEUES,
    MAX_IDLE_LIMIT_MS, MAX_QUEUES, MAX_SOCKET_BUFFER, MIN_DATAGRAM_BYTES, MIN_SOCKET_BUFFER,
};
pub use receiver::{
    bind_receiver, UdpMqReceiver, UdpMqStats, MAX_PUNCTUATIONS_AWAITING, MAX_PUNCTUATION_STEP,
    MAX_SENDERS,
};
pub use sender::{
    connect_sender, FlowKey, UdpMqSender, BUSY_DATAGRAMS, BUSY_END_REPEATS, BUSY_WINDOW,
    DROP_DRAIN, END_REPEATS, FIRST_REPEAT_GAP,
};
pub use wire::{job_tag, HEADER_LEN, MAGIC, RECORD_HEADER, VERSION};

use std::net::{Ipv4Addr, SocketAddr};

use sluice_types::Tuple;

use crate::tcp::JobSecret;
use crate::TransportError;
#[cfg(doc)]
use crate::{RecvError, SendError};

/// Both ends of one edge over loopback, for two threads of one process: a receiver on
/// `127.0.0.1` at a port the system picks, a fresh random secret, and one sender.
pub fn connect<T: Tuple>(
    params: &UdpMqParams,
) -> Result<(UdpMqSender<T>, UdpMqReceiver<T>), TransportError> {
    let secret = JobSecret::random()?;
    let (receiver, addr) = bind_receiver::<T>(
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        &secret,
        1,
        params,
    )?;
    let sender = connect_sender::<T>(addr, &secret, 0, params)?;
    Ok((sender, receiver))
}
