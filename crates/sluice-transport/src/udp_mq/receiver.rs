//! The receiving end of a `udp-mq` edge: `queues` sockets bound to one address with
//! `SO_REUSEPORT`, each with a ring of received datagrams ([`ReceiveRing`]) read by
//! Algorithm 2, and the bookkeeping that turns datagrams from several senders and queues back
//! into one stream: per sender and queue, the next sequence number (gaps are losses, older
//! numbers are late and dropped) and the punctuations it has passed; per sender, the queues
//! still open and the values of the punctuations not every queue has passed yet.
//!
//! A datagram is checked whole before any of it is delivered: the header against this end's
//! own parameters, every record length against the bytes received, every tuple by decoding
//! it. One that fails is dropped and counted (as foreign or malformed); it never poisons the
//! edge, since on UDP anybody can send one.

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use sluice_types::{Message, Punctuation, Tuple};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::params::UdpMqParams;
use super::wire::{job_tag, Header, Record, Records, Rejection};
use crate::datagram::ReceiveRing;
use crate::tcp::JobSecret;
use crate::{ReceiverStats, RecvError, TransportError, TupleReceiver};

/// The most senders one receiver takes.
pub const MAX_SENDERS: usize = 1024;
/// The most punctuations one record may show a queue to have passed beyond what it had
/// shown: a bound on the work one datagram can cause. A queue that lost more in a row catches
/// up over its next datagrams.
pub const MAX_PUNCTUATION_STEP: u64 = 4096;
/// The most punctuations of one sender whose values the receiver holds while some of the
/// sender's queues have not passed them: a bound on the memory a sender can make it use. A
/// copy further ahead of the next punctuation to deliver is dropped; a punctuation no copy of
/// which arrived within that distance is counted lost ([`UdpMqStats::lost_punctuations`]) once
/// every queue has passed it.
pub const MAX_PUNCTUATIONS_AWAITING: usize = 1 << 14;

/// What a receiver has counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpMqStats {
    /// Datagrams accepted (heartbeats and repeats of a last datagram included).
    pub datagrams: u64,
    /// Tuples delivered.
    pub tuples: u64,
    /// Datagrams that never arrived: the gaps in the sequence numbers of every sender's
    /// queues.
    pub lost_datagrams: u64,
    /// Tuples those datagrams carried.
    pub lost_tuples: u64,
    /// Punctuations every queue of their sender passed but whose value no datagram brought
    /// (every copy was lost): they are not delivered.
    pub lost_punctuations: u64,
    /// Datagrams that arrived after a later one of their queue, and were dropped.
    pub late: u64,
    /// Datagrams of this job that were not well formed, dropped.
    pub malformed: u64,
    /// Datagrams of another job or no job at all (another magic, version or job tag),
    /// dropped.
    pub foreign: u64,
    /// `recvmmsg` calls made.
    pub system_calls: u64,
}

/// The receiving end of a `udp-mq` edge with one or several senders.
pub struct UdpMqReceiver<T> {
    rings: Vec<ReceiveRing>,
    local_addr: SocketAddr,
    threshold: usize,
    /// The queue read first next time (the paper's `f(n)`, round robin).
    next: usize,
    intake: Intake<T>,
}

/// Everything but the sockets: the state that datagrams update.
pub(crate) struct Intake<T> {
    job: u64,
    queues: usize,
    datagram_bytes: usize,
    /// Per sender and queue, at `sender * queues + queue`.
    flows: Vec<Flow>,
    senders: Vec<Peer>,
    /// Messages of checked datagrams, not handed out yet.
    staged: VecDeque<Message<T>>,
    /// The records of the datagram being checked.
    incoming: Vec<Incoming<T>>,
    stats: UdpMqStats,
    idle_limit: Option<Duration>,
    /// A sender is gone: report it once what came before is delivered.
    disconnected: bool,
    _tuples: PhantomData<fn() -> T>,
}

/// One queue of one sender.
#[derive(Debug, Default, Clone)]
struct Flow {
    next_sequence: u64,
    next_tuple: u64,
    /// Punctuations this queue has passed.
    punctuations: u64,
    closed: bool,
}

/// One sender.
#[derive(Debug, Clone)]
struct Peer {
    open_flows: usize,
    /// Punctuations delivered or counted lost.
    punctuations_delivered: u64,
    /// The values of the next punctuations to deliver, from `punctuations_delivered` on, as
    /// far as a copy arrived.
    awaiting: VecDeque<Option<Punctuation>>,
    last_heard: Instant,
    gone: bool,
}

/// A checked record, before the datagram is accepted.
enum Incoming<T> {
    Data(T),
    Punctuation {
        index: u64,
        punctuation: Punctuation,
    },
    End(u64),
    Gone,
}

/// Binds a receiver for `senders` senders of the job of `secret` to exactly `addr`: its
/// `queues` sockets all bind that address with `SO_REUSEPORT`, and the kernel spreads the
/// senders' sockets over them by a hash of their addresses, as a NIC's RSS spreads flows over
/// its queues. With port 0, the system chooses the first socket's port and the others bind the
/// same one. Returns the receiver and the address it is bound to.
///
/// `SO_REUSEPORT` lets only sockets of the same user join the group, so another user cannot
/// take a share of the datagrams; a process of the same user binding the same port could.
pub fn bind_receiver<T: Tuple>(
    addr: SocketAddr,
    secret: &JobSecret,
    senders: usize,
    params: &UdpMqParams,
) -> Result<(UdpMqReceiver<T>, SocketAddr), TransportError> {
    params.validate()?;
    if !(1..=MAX_SENDERS).contains(&senders) {
        return Err(TransportError::InvalidParameter {
            transport: "udp-mq",
            parameter: "senders",
            reason: format!("must be between 1 and {MAX_SENDERS}, got {senders}"),
        });
    }
    let setup = |e: std::io::Error| TransportError::Setup(format!("bind {addr}: {e}"));
    let first = bind_one(addr, params).map_err(setup)?;
    let local_addr = first.local_addr().map_err(setup)?;
    let mut sockets = vec![first];
    for _ in 1..params.queues {
        sockets.push(bind_one(local_addr, params).map_err(setup)?);
    }
    let receiver = UdpMqReceiver {
        rings: sockets
            .into_iter()
            .map(|s| ReceiveRing::new(s, params.batch, params.datagram_bytes))
            .collect(),
        local_addr,
        threshold: params.recv_threshold,
        next: 0,
        intake: Intake::new(job_tag(secret), senders, params),
    };
    Ok((receiver, local_addr))
}

fn bind_one(addr: SocketAddr, params: &UdpMqParams) -> std::io::Result<UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_reuse_port(true)?;
    if let Some(bytes) = params.socket_buffer_bytes {
        socket.set_recv_buffer_size(bytes)?;
    }
    socket.bind(&SockAddr::from(addr))?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

impl<T> UdpMqReceiver<T> {
    /// The address the receiver is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// What the receiver has counted so far.
    pub fn stats(&self) -> UdpMqStats {
        UdpMqStats {
            system_calls: self.rings.iter().map(ReceiveRing::system_calls).sum(),
            ..self.intake.stats
        }
    }

    /// Datagrams lost so far (gaps in the sequence numbers).
    pub fn lost_datagrams(&self) -> u64 {
        self.intake.stats.lost_datagrams
    }

    /// Tuples those lost datagrams carried.
    pub fn lost_tuples(&self) -> u64 {
        self.intake.stats.lost_tuples
    }

    /// Malformed datagrams dropped so far.
    pub fn malformed(&self) -> u64 {
        self.intake.stats.malformed
    }
}

impl<T: Tuple> Intake<T> {
    /// The state of an edge of job `job` from `senders` senders under `params`, before any
    /// datagram.
    pub(crate) fn new(job: u64, senders: usize, params: &UdpMqParams) -> Self {
        let now = Instant::now();
        Self {
            job,
            queues: params.queues,
            datagram_bytes: params.datagram_bytes,
            flows: vec![Flow::default(); senders * params.queues],
            senders: vec![
                Peer {
                    open_flows: params.queues,
                    punctuations_delivered: 0,
                    awaiting: VecDeque::new(),
                    last_heard: now,
                    gone: false,
                };
                senders
            ],
            staged: VecDeque::new(),
            incoming: Vec::new(),
            stats: UdpMqStats::default(),
            idle_limit: params.idle_limit(),
            disconnected: false,
            _tuples: PhantomData,
        }
    }

    /// Checks one datagram and, if it is good, stages its messages; counts it either way.
    pub(crate) fn accept(&mut self, datagram: &[u8]) {
        match self.check(datagram) {
            Ok(()) => {}
            Err(Rejection::Foreign) => self.stats.foreign += 1,
            Err(Rejection::Malformed) => self.stats.malformed += 1,
        }
    }

    fn check(&mut self, datagram: &[u8]) -> Result<(), Rejection> {
        let header = Header::read(datagram, self.job)?;
        let sender = header.sender as usize;
        let queue = usize::from(header.queue);
        if datagram.len() > self.datagram_bytes
            || usize::from(header.queues) != self.queues
            || queue >= self.queues
            || sender >= self.senders.len()
        {
            return Err(Rejection::Malformed);
        }
        let flow = &self.flows[sender * self.queues + queue];
        if flow.closed {
            // A repeat of the queue's last datagram.
            return Ok(());
        }
        if header.sequence < flow.next_sequence {
            self.stats.late += 1;
            return Ok(());
        }
        if header.first_tuple < flow.next_tuple
            || (header.sequence == flow.next_sequence && header.first_tuple != flow.next_tuple)
        {
            return Err(Rejection::Malformed);
        }
        self.incoming.clear();
        for record in Records::of(datagram, header.count) {
            self.incoming.push(match record? {
                Record::Data(bytes) => {
                    Incoming::Data(T::decode(bytes).map_err(|_| Rejection::Malformed)?)
                }
                Record::Punctuation { index, punctuation } => {
                    Incoming::Punctuation { index, punctuation }
                }
                Record::End(total) => Incoming::End(total),
                Record::Gone => Incoming::Gone,
            });
        }
        let tuples = self
            .incoming
            .iter()
            .filter(|i| matches!(i, Incoming::Data(_)))
            .count() as u64;
        let next_tuple = header
            .first_tuple
            .checked_add(tuples)
            .ok_or(Rejection::Malformed)?;
        let next_sequence = header.sequence.checked_add(1).ok_or(Rejection::Malformed)?;
        self.commit(sender, queue, &header, next_sequence, next_tuple);
        Ok(())
    }

    /// Counts what the datagram shows was lost and stages its messages.
    fn commit(
        &mut self,
        sender: usize,
        queue: usize,
        header: &Header,
        next_sequence: u64,
        next_tuple: u64,
    ) {
        let at = sender * self.queues + queue;
        let flow = &mut self.flows[at];
        self.stats.datagrams += 1;
        self.stats.lost_datagrams += header.sequence - flow.next_sequence;
        self.stats.lost_tuples += header.first_tuple - flow.next_tuple;
        flow.next_sequence = next_sequence;
        flow.next_tuple = next_tuple;
        self.senders[sender].last_heard = Instant::now();
        let mut incoming = std::mem::take(&mut self.incoming);
        for record in incoming.drain(..) {
            match record {
                Incoming::Data(tuple) => {
                    self.stats.tuples += 1;
                    self.staged.push_back(Message::Data(tuple));
                }
                Incoming::Punctuation { index, punctuation } => {
                    self.pass_punctuations(at, index.saturating_add(1));
                    self.remember_punctuation(sender, index, punctuation);
                    self.deliver_punctuations(sender);
                }
                Incoming::End(total) => {
                    self.pass_punctuations(at, total);
                    self.close_flow(sender, at, false);
                }
                Incoming::Gone => self.close_flow(sender, at, true),
            }
        }
        self.incoming = incoming;
    }

    /// Records that flow `at` has passed `passed` punctuations (by at most
    /// [`MAX_PUNCTUATION_STEP`] more than before).
    fn pass_punctuations(&mut self, at: usize, passed: u64) {
        let flow = &mut self.flows[at];
        let most = flow.punctuations.saturating_add(MAX_PUNCTUATION_STEP);
        flow.punctuations = flow.punctuations.max(passed.min(most));
    }

    /// Keeps the value of punctuation number `index` of `sender` until every queue has
    /// passed it: the first copy that arrives, unless it was delivered already or is more
    /// than [`MAX_PUNCTUATIONS_AWAITING`] ahead.
    fn remember_punctuation(&mut self, sender: usize, index: u64, punctuation: Punctuation) {
        let peer = &mut self.senders[sender];
        let Some(ahead) = index.checked_sub(peer.punctuations_delivered) else {
            return;
        };
        let Some(ahead) = usize::try_from(ahead)
            .ok()
            .filter(|&ahead| ahead < MAX_PUNCTUATIONS_AWAITING)
        else {
            return;
        };
        if peer.awaiting.len() <= ahead {
            peer.awaiting.resize(ahead + 1, None);
        }
        peer.awaiting[ahead].get_or_insert(punctuation);
    }

    /// Stages the punctuations every queue of `sender` has passed: a punctuation follows
    /// everything the sender offered before it, on every queue. One whose value never
    /// arrived is counted lost.
    fn deliver_punctuations(&mut self, sender: usize) {
        let flows = &self.flows[sender * self.queues..(sender + 1) * self.queues];
        let passed = flows.iter().map(|f| f.punctuations).min().unwrap_or(0);
        let peer = &mut self.senders[sender];
        while peer.punctuations_delivered < passed {
            peer.punctuations_delivered += 1;
            match peer.awaiting.pop_front().flatten() {
                Some(punctuation) => self.staged.push_back(Message::Punctuation(punctuation)),
                None => self.stats.lost_punctuations += 1,
            }
        }
    }

    /// Closes flow `at` of `sender` (after its end of stream, or its gone record); once every
    /// queue of the sender is closed, stages its end of stream or reports it gone.
    fn close_flow(&mut self, sender: usize, at: usize, gone: bool) {
        self.flows[at].closed = true;
        let peer = &mut self.senders[sender];
        peer.open_flows -= 1;
        peer.gone |= gone;
        if peer.open_flows > 0 {
            return;
        }
        if peer.gone {
            self.disconnected = true;
        } else {
            self.deliver_punctuations(sender);
            self.staged.push_back(Message::EndOfStream);
        }
    }

    /// Whether a sender that has not ended has been silent for longer than the idle limit.
    fn a_sender_vanished(&self) -> bool {
        let Some(limit) = self.idle_limit else {
            return false;
        };
        let now = Instant::now();
        self.senders
            .iter()
            .any(|peer| peer.open_flows > 0 && now.duration_since(peer.last_heard) > limit)
    }
}

/// What the fuzzing entry points look at after feeding datagrams to an intake.
#[cfg(any(test, fuzzing))]
impl<T> Intake<T> {
    /// Takes the messages staged so far.
    pub(crate) fn take_staged(&mut self) -> VecDeque<Message<T>> {
        std::mem::take(&mut self.staged)
    }

    /// The most punctuation values any sender has waiting.
    pub(crate) fn most_awaiting(&self) -> usize {
        self.senders
            .iter()
            .map(|p| p.awaiting.len())
            .max()
            .unwrap_or(0)
    }

    /// What it has counted.
    pub(crate) fn stats(&self) -> UdpMqStats {
        self.stats
    }
}

impl<T: Tuple> TupleReceiver<T> for UdpMqReceiver<T> {
    fn poll(&mut self, max: usize, out: &mut Vec<Message<T>>) -> Result<usize, RecvError> {
        let queues = self.rings.len();
        // Queues found empty in this call are not asked again (one system call each).
        let mut dry = 0u64;
        let mut received = 0;
        while received < max {
            if let Some(message) = self.intake.staged.pop_front() {
                out.push(message);
                received += 1;
                continue;
            }
            if self.intake.disconnected {
                break;
            }
            let mut got = false;
            for step in 0..queues {
                let queue = (self.next + step) % queues;
                if dry & (1 << queue) != 0 {
                    continue;
                }
                match self.rings[queue].next(self.threshold) {
                    Ok(Some(datagram)) => {
                        self.intake.accept(datagram);
                        self.next = (queue + 1) % queues;
                        got = true;
                        break;
                    }
                    // Nothing there, or a socket error, which UDP sockets report for datagrams
                    // that never arrive anyway: try again next call.
                    Ok(None) | Err(_) => dry |= 1 << queue,
                }
            }
            if !got {
                break;
            }
        }
        if received > 0 {
            return Ok(received);
        }
        if self.intake.disconnected || self.intake.a_sender_vanished() {
            self.intake.disconnected = true;
            return Err(RecvError::Disconnected);
        }
        Ok(0)
    }

    fn stats(&mut self) -> ReceiverStats {
        ReceiverStats {
            lost: self.intake.stats.lost_tuples,
            ..ReceiverStats::default()
        }
    }
}
