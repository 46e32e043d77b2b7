//! The `udp-mq` benchmark's two sides, and its baseline: raw UDP on loopback.
//!
//! Sluice: the receiving process binds a `udp-mq` receiver of `--queues` sockets to
//! `127.0.0.1:0`, prints `listening ADDR` as its first line (module `network`), and polls like
//! any receiver; the benchmark process connects a sender of as many sockets with the secret it
//! gave the receiver and floods or paces it. Datagrams fill an Ethernet frame (or hold one
//! tuple, if that is larger), each goes to a random queue, and each side's socket buffers are
//! 4 MiB. UDP does not hold a sender back: whatever the receiver cannot take in time is lost.
//! The receiver reports the tuples delivered and lost (from the sequence numbers) beside its
//! rate.
//!
//! Raw UDP, measured in the same run between the same two cores: the writer sends each tuple
//! as one datagram with one `send` on a connected socket, the reader takes one datagram per
//! non-blocking `recv`, idling with the same strategy: per-packet system calls, what the paper
//! measures its batching against. The writer ends with a datagram 8 bytes longer than a tuple
//! holding how many it sent (repeated, as `udp-mq` repeats its end), so the reader knows how
//! many were lost.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use sluice_sync::IdleStrategy;
use sluice_transport::udp_mq::{
    bind_receiver, connect_sender, QueueChoice, UdpMqParams, UdpMqReceiver, BUSY_END_REPEATS,
    DEFAULT_DATAGRAM_BYTES, FIRST_REPEAT_GAP, HEADER_LEN, RECORD_HEADER,
};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::foundation::args::Settings;
use crate::foundation::load::Load;
use crate::foundation::payload::Payload;
use crate::foundation::record::{Loss, Recorder, RunFigures};
use crate::transports::endpoints::{announce, encoded_size, PATIENCE};
use crate::transports::network::{run_baseline, run_sluice, secret_from_env, RawWriter};

/// Each socket's kernel buffer, both sides.
const SOCKET_BUFFER: usize = 4 << 20;
/// How long the receivers wait for the end once the sender has gone quiet.
const IDLE_LIMIT: Duration = Duration::from_secs(5);

fn loopback() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

/// The benchmark edge's parameters.
pub(crate) fn params(queues: usize, tuple_bytes: usize) -> UdpMqParams {
    UdpMqParams {
        queues,
        datagram_bytes: DEFAULT_DATAGRAM_BYTES.max(HEADER_LEN + RECORD_HEADER + tuple_bytes),
        queue_choice: QueueChoice::Random,
        idle_limit_ms: Some(IDLE_LIMIT.as_millis() as u64),
        socket_buffer_bytes: Some(SOCKET_BUFFER),
        ..UdpMqParams::default()
    }
}

/// The receiving process's end: binds on loopback with the secret from the environment and
/// announces its address.
pub(crate) fn bind<P: Payload>(
    queues: usize,
    tuple_bytes: usize,
) -> anyhow::Result<UdpMqReceiver<P>> {
    let secret = secret_from_env()?;
    let (rx, addr) = bind_receiver::<P>(loopback(), &secret, 1, &params(queues, tuple_bytes))?;
    announce(addr);
    Ok(rx)
}

/// What a receiver lost, from its counters.
pub(crate) fn loss<P>(rx: &UdpMqReceiver<P>) -> Loss {
    let stats = rx.stats();
    Loss {
        delivered: stats.tuples,
        lost: stats.lost_tuples,
    }
}

/// One Sluice run: a receiving process, and a `udp-mq` sender on core 0 (dropping it repeats
/// its end of stream).
pub(crate) fn run_udp_mq<P: Payload>(
    s: &Settings,
    template: P,
    load: Load,
) -> anyhow::Result<RunFigures> {
    run_sluice(s, template, load, |addr, secret, tuple_bytes| {
        connect_sender::<P>(addr, secret, 0, &params(s.queues, tuple_bytes))
    })
}

/// One `send` per tuple on a connected socket; the end is a datagram 8 bytes longer than a
/// tuple holding how many were sent, repeated as a busy `udp-mq` sender repeats its end.
struct UdpWriter {
    socket: UdpSocket,
    sent: u64,
    tuple_bytes: usize,
}

impl RawWriter for UdpWriter {
    fn write(&mut self, tuple: &[u8]) -> anyhow::Result<()> {
        // A datagram the kernel could not queue is as lost as one the reader's buffer had no
        // room for.
        let _ = self.socket.send(tuple);
        self.sent += 1;
        Ok(())
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        let mut end = self.sent.to_le_bytes().to_vec();
        end.resize(self.tuple_bytes + 8, 0);
        let mut gap = FIRST_REPEAT_GAP;
        for _ in 0..=BUSY_END_REPEATS {
            let _ = self.socket.send(&end);
            std::thread::sleep(gap);
            gap *= 2;
        }
        Ok(())
    }
}

/// One baseline run: a raw reading process, and a raw writer on core 0.
pub(crate) fn run_raw<P: Payload>(
    s: &Settings,
    template: P,
    load: Load,
) -> anyhow::Result<RunFigures> {
    let tuple_bytes = encoded_size(&template)?;
    run_baseline(s, template, load, |addr| {
        let socket = raw_socket(loopback())?;
        socket.connect(addr)?;
        Ok(UdpWriter {
            socket,
            sent: 0,
            tuple_bytes,
        })
    })
}

/// A UDP socket bound to `addr` with the benchmark's buffers.
pub(crate) fn raw_socket(addr: SocketAddr) -> anyhow::Result<UdpSocket> {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_recv_buffer_size(SOCKET_BUFFER)?;
    socket.set_send_buffer_size(SOCKET_BUFFER)?;
    socket.bind(&SockAddr::from(addr))?;
    Ok(socket.into())
}

/// The raw reader: binds on loopback (announcing its address), records each datagram of
/// `tuple_bytes` as a tuple until the writer's end arrives, and returns what was lost.
pub(crate) fn raw_receive<P: Payload, R: Recorder>(
    recorder: &mut R,
    tuple_bytes: usize,
    idle: IdleStrategy,
) -> anyhow::Result<Loss> {
    let socket = raw_socket(loopback())?;
    socket.set_nonblocking(true)?;
    announce(socket.local_addr()?);
    let mut buffer = vec![0u8; tuple_bytes + 9];
    let mut delivered = 0u64;
    let mut idle = idle.waiter();
    let mut heard = Instant::now();
    loop {
        match socket.recv(&mut buffer) {
            Ok(n) if n == tuple_bytes => {
                recorder.record(&P::decode(&buffer[..n])?);
                delivered += 1;
                heard = Instant::now();
                idle.after(1);
            }
            Ok(n) if n == tuple_bytes + 8 => {
                let mut sent = [0u8; 8];
                sent.copy_from_slice(&buffer[..8]);
                let sent = u64::from_le_bytes(sent);
                return Ok(Loss {
                    delivered,
                    lost: sent.saturating_sub(delivered),
                });
            }
            Ok(n) => bail!("a datagram of {n} bytes is neither a tuple nor the end"),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if heard.elapsed() > PATIENCE {
                    bail!("the raw writer's end never came");
                }
                idle.after(0);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e).context("raw receive"),
        }
    }
}
