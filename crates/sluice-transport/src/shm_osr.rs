//! The `shm-osr` transport: many senders (threads or processes of one host) into one receiver
//! over an OSR ring (`sluice_ring::osr`, TurboStream's `OSRBuffer`) in a shared segment.
//!
//! # Shape
//! The receiver creates the segment ([`create_receiver`], mode `0600`) and is told how many
//! senders the edge has; each sender opens it ([`open_sender`], every header field checked)
//! and *joins* the ring's producer table, which records its process id. Its slot index is its
//! sender id, carried in the `target` field of every record it writes. [`connect`] builds the
//! same in one process.
//!
//! # Framing
//! Data travels in *batch records*: a sender keeps one batch record open, reserved at
//! `batch_bytes` (or at the tuple's size if larger), encodes each tuple into a scratch buffer
//! and appends it (the ring's batch framing: an 8-byte inner header with the length, the tuple
//! from an 8-byte aligned offset); it commits the record, shrunk to what it holds, when the
//! next tuple does not fit, on [`TupleSender::flush`], before a punctuation or end of stream,
//! and when it drops. Three atomic operations per record, none per tuple. A record reserved
//! after a flush is sized at twice what the flushed one held (at least [`MIN_RECORD_BYTES`]),
//! so a sender that flushes after every tuple does not make the receiver zero `batch_bytes` per
//! tuple; one that fills its records reserves `batch_bytes` again.
//!
//! While a record is open the receiver's window waits on it: other senders' records behind it
//! are delivered (the window's right side), but the ring space after it is freed only once it
//! is committed. So a sender flushes after each unit of work, as the runtime does.
//!
//! A punctuation or end of stream is a record of its own, not a batch: a tag byte, and for a
//! punctuation its wire encoding (`sluice_types::Punctuation`, drawn there):
//!
//! ```text
//!  punctuation:  +---------------------+--------------------------------------+
//!                | TAG_PUNCTUATION (1) | punctuation (WIRE_BYTES = 13 bytes)  |
//!                +---------------------+--------------------------------------+
//!  end:          +---------------------+
//!                | TAG_END (2)         |
//!                +---------------------+
//! ```
//!
//! A tuple whose encoding is longer than [`slot_bytes`]`(capacity_bytes)` (the ring's largest
//! payload, half the ring less the record header, less the batch's inner header, rounded down
//! to 8 bytes) does not fit a batch record: it travels in parts ([`crate::parts`]), each a
//! record of its own, after the sender commits its open batch:
//!
//! ```text
//!  part:       +---------------+-------------------------------------------------+
//!              | TAG_PART (3)  | up to PART_BYTES of the encoding                |
//!              +---------------+-------------------------------------------------+
//!  last part:  +---------------+-------------------------------------------------+
//!              | TAG_LAST (4)  | the rest of the encoding                        |
//!              +---------------+-------------------------------------------------+
//! ```
//!
//! Records of different senders interleave, so the receiver reassembles each sender's parts
//! apart; a sender writes nothing else between a tuple's first and last part (other offers are
//! refused as `Full`, and [`TupleSender::pending`] holds until a flush gets the last part in).
//! A tuple's encoding may be up to [`MAX_TUPLE_BYTES`]; a longer one is refused with
//! [`SendError::TooLarge`] naming both sizes.
//!
//! # Ends of stream and liveness
//! Each sender's end of stream arrives as its own [`Message::EndOfStream`]; once as many have
//! arrived as the receiver was told senders exist, it reports `Ok(0)` for ever.
//!
//! The receiver never skips a record by the ring's window (it creates the ring with a window of
//! `u64::MAX` polls): a live sender never loses one, however long it is descheduled. Instead,
//! whenever a poll finds nothing or ends waiting on an unfinished record, it checks the senders
//! that have not ended: one whose handle was dropped (the producer table marks it *left*) is
//! *gone*; and every [`LIVENESS_PERIOD`], busy or not, so is one whose process is gone. It then skips what holds its
//! window: that sender's unfinished record (lost: counted in [`ShmOsrReceiver::lost_records`])
//! or an unclaimed reservation (which costs a live sender only a retry), delivers everything
//! reserved before the departure was seen, and reports [`RecvError::Disconnected`] from then on.
//! A sender facing a full ring checks as often whether the receiver's process is alive, and
//! reports [`SendError::Closed`] if not.
//!
//! Malformed records — a tag no sender writes, anything but a part from a sender whose tuple
//! is half reassembled, parts beyond [`MAX_TUPLE_BYTES`], a punctuation of another length or kind than
//! `Punctuation::from_wire` reads, a tuple that does not decode, a sender id beyond the count,
//! anything after a sender's end of stream, batch framing the ring rejects — poison the ring
//! and are reported as [`RecvError::Malformed`]; the ring bounds-checks every length it reads,
//! so nothing a peer writes makes the receiver read out of bounds.

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sluice_ring::osr::{
    batch_item_bytes, CommitError, OsrConsumer, OsrLayout, OsrProducer, OsrRecord, OsrRing,
    OsrStall, PushError, ReserveError, PRODUCER_SLOTS,
};
use sluice_shm::{process_is_running, CreateError, Segment, SegmentKind, SegmentName, SegmentSpec};
use sluice_types::{Encoding, Message, Punctuation, Tuple};

use crate::parts::{check_len, Outgoing, Reassembly, SendsInParts, MAX_TUPLE_BYTES};
use crate::{
    ReceiverStats, RecvError, Refused, SendError, TransportError, TupleReceiver, TupleSender,
};

/// The tag byte of a punctuation record.
pub const TAG_PUNCTUATION: u8 = 1;
/// The tag byte of an end-of-stream record.
pub const TAG_END: u8 = 2;
/// The tag byte of a record holding a part of a tuple's encoding, not the last.
pub const TAG_PART: u8 = 3;
/// The tag byte of a record holding the last part of a tuple's encoding.
pub const TAG_LAST: u8 = 4;
/// The most bytes of a tuple's encoding one part record carries (less on a small ring): large
/// enough that the three atomic operations of a record are spread over many bytes, small
/// enough that a few parts are in the ring at once, the receiver copying one while the sender
/// writes the next.
pub const PART_BYTES: usize = 64 << 10;
/// Bytes of a punctuation record: its tag, then its wire encoding.
const PUNCTUATION_RECORD: usize = 1 + Punctuation::WIRE_BYTES;

/// The most senders one receiver takes: the OSR ring's producer table (1024).
pub const MAX_SENDERS: usize = PRODUCER_SLOTS;
/// The default ring size: 1 MiB, room for 64 full batch records.
pub const DEFAULT_CAPACITY_BYTES: usize = 1 << 20;
/// The default payload a sender reserves for a batch record when its stream is busy: 16 KiB,
/// a few hundred small tuples per record (three atomic operations spread over them), small
/// enough that a record stays in the caches between sender and receiver.
pub const DEFAULT_BATCH_BYTES: usize = 16 << 10;
/// The smallest batch record a sender reserves.
pub const MIN_RECORD_BYTES: usize = 256;
/// How often a waiting side checks that its peers' processes are alive.
pub const LIVENESS_PERIOD: Duration = Duration::from_millis(100);
/// The receiver looks at the clock every this many polls, busy or idle, to check its senders'
/// processes every [`LIVENESS_PERIOD`]: a busy one all the same (one sender may die while the
/// others keep it busy), an idle one without a clock read on every empty poll, which would
/// delay noticing the next tuple by as much.
const CLOCK_POLLS: u32 = 64;

/// The segment kind of an OSR ring.
const KIND: SegmentKind = SegmentKind::new(*b"OSR\0\0\0\0\0");
/// Bumped whenever the framing above changes (the ring checks its own layout version).
const LAYOUT_VERSION: u32 = 3;
/// The ring never skips by itself: the receiver decides (module doc).
const WINDOW: u64 = u64::MAX;

/// The ring layout and segment spec for a ring of `capacity_bytes`.
fn layout(capacity_bytes: usize) -> Result<(OsrLayout, SegmentSpec), TransportError> {
    let layout =
        OsrLayout::new(capacity_bytes, WINDOW).map_err(|e| TransportError::InvalidParameter {
            transport: "shm-osr",
            parameter: "capacity_bytes",
            reason: e.to_string(),
        })?;
    let spec = SegmentSpec {
        kind: KIND,
        layout_version: LAYOUT_VERSION,
        capacities: [capacity_bytes as u64, 0],
        data_len: layout.bytes_needed(),
    };
    Ok((layout, spec))
}

/// The largest encoded tuple a `shm-osr` edge of `capacity_bytes` carries.
pub fn slot_bytes(capacity_bytes: usize) -> Result<usize, TransportError> {
    let (layout, _) = layout(capacity_bytes)?;
    Ok(slot_of(&layout))
}

fn slot_of(layout: &OsrLayout) -> usize {
    (layout.max_payload() - batch_item_bytes(0)) & !7
}

/// Refuses a batch record size of 0 (a larger one than a record holds is capped to it).
pub(crate) fn check_batch_bytes(batch_bytes: usize) -> Result<(), TransportError> {
    if batch_bytes == 0 {
        return Err(TransportError::InvalidParameter {
            transport: "shm-osr",
            parameter: "batch_bytes",
            reason: "must be at least 1".into(),
        });
    }
    Ok(())
}

/// Turns a setup failure of the segment or the ring into the transport's error.
fn setup(error: impl std::fmt::Display) -> TransportError {
    TransportError::Setup(error.to_string())
}

/// The sending end of a `shm-osr` edge.
pub struct ShmOsrSender<T> {
    producer: OsrProducer<Segment>,
    /// This sender's slot in the producer table: the `target` of its records.
    id: u32,
    /// The largest encoded tuple.
    slot: usize,
    /// The largest record payload.
    max_payload: usize,
    /// The payload to reserve for a batch record when the stream is busy.
    batch_bytes: usize,
    /// The payload reserved for the open batch record, or to reserve for the next one.
    next_record: usize,
    /// One tuple's encoding, before it is appended.
    scratch: Vec<u8>,
    /// A tuple too large for a batch record whose last part is not yet written.
    outgoing: Option<Outgoing>,
    /// When the receiver's process was last checked while the ring was full.
    last_liveness_check: Instant,
    _tuples: PhantomData<fn(T)>,
}

/// What the receiver knows of one sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SenderState {
    /// Sending (or not yet joined).
    Open,
    /// Its end of stream arrived.
    Ended,
    /// Its handle or process is gone, and its end of stream has not arrived (yet: it may be
    /// in the ring still).
    Gone,
}

/// The receiving end of a `shm-osr` edge.
pub struct ShmOsrReceiver<T> {
    consumer: OsrConsumer<Segment>,
    senders: Vec<SenderState>,
    /// Each sender's tuple being reassembled from parts.
    parts: Vec<Reassembly>,
    ends: usize,
    /// Decoded messages of a record beyond what the caller asked for.
    pending: VecDeque<Message<T>>,
    /// `corrupt_records` of the ring as last seen.
    corrupt_seen: u64,
    /// The write position when a sender was first found gone: once the window passes it,
    /// everything that sender wrote is delivered or lost.
    gone_at: Option<u64>,
    /// The error reported for ever once something went wrong.
    failure: Option<RecvError>,
    last_liveness_check: Instant,
    /// Polls since the senders' processes were last checked.
    polls_since_check: u32,
    _tuples: PhantomData<fn() -> T>,
}

/// Creates a segment with `create` holding a fresh ring of `capacity_bytes` for `senders`
/// senders, and returns the ring with its receiving end and the segment's name.
fn create_ring<T: Tuple>(
    create: impl FnOnce(&SegmentSpec) -> Result<Segment, CreateError>,
    capacity_bytes: usize,
    senders: usize,
) -> Result<(OsrRing<Segment>, ShmOsrReceiver<T>, SegmentName), TransportError> {
    if !(1..=MAX_SENDERS).contains(&senders) {
        return Err(TransportError::InvalidParameter {
            transport: "shm-osr",
            parameter: "senders",
            reason: format!("must be between 1 and {MAX_SENDERS}, got {senders}"),
        });
    }
    let (layout, spec) = layout(capacity_bytes)?;
    let segment = create(&spec).map_err(setup)?;
    let name = segment.name().clone();
    let ring = OsrRing::create(segment, layout).map_err(setup)?;
    let consumer = ring.consumer().map_err(setup)?;
    Ok((ring, ShmOsrReceiver::new(consumer, senders), name))
}

/// Creates the segment `name` (mode `0600`) holding a fresh ring of `capacity_bytes` (a power
/// of two from 64 bytes to 64 MiB) and returns its receiving end, which expects `senders`
/// senders (1 to [`MAX_SENDERS`]) to open it with [`open_sender`].
pub fn create_receiver<T: Tuple>(
    name: &SegmentName,
    capacity_bytes: usize,
    senders: usize,
) -> Result<ShmOsrReceiver<T>, TransportError> {
    create_ring(|spec| Segment::create(name, spec), capacity_bytes, senders)
        .map(|(_, receiver, _)| receiver)
}

/// As [`create_receiver`], under a name nobody can guess: `base` with a random nonce
/// ([`Segment::create_unique`]), returned for the senders to open. A file someone made under
/// a predictable name cannot keep the receiver from binding.
pub fn bind_receiver<T: Tuple>(
    base: &SegmentName,
    capacity_bytes: usize,
    senders: usize,
) -> Result<(ShmOsrReceiver<T>, SegmentName), TransportError> {
    let (_, receiver, name) = create_ring(
        |spec| Segment::create_unique(base, spec),
        capacity_bytes,
        senders,
    )?;
    Ok((receiver, name))
}

/// Opens the segment `name`, made by [`create_receiver`] with the same `capacity_bytes`,
/// checking its header and ring, and joins it as a sender that reserves batch records of
/// `batch_bytes` payload. Fails while the receiver is still initialising the ring (retry), and
/// when all [`MAX_SENDERS`] sender slots are taken.
pub fn open_sender<T: Tuple>(
    name: &SegmentName,
    capacity_bytes: usize,
    batch_bytes: usize,
) -> Result<ShmOsrSender<T>, TransportError> {
    let (layout, spec) = layout(capacity_bytes)?;
    let segment = Segment::open(name, &spec).map_err(setup)?;
    let ring = OsrRing::open(segment).map_err(setup)?;
    if ring.layout() != layout {
        return Err(TransportError::Setup(format!(
            "the OSR ring in {} is {:?}, expected {layout:?}",
            name.path().display(),
            ring.layout()
        )));
    }
    ShmOsrSender::join(&ring, batch_bytes)
}

/// A receiver and `senders` senders on a fresh ring in a segment unique to this process (its
/// name has a random nonce), for an edge between threads; the segment is removed when every
/// end is gone.
pub fn connect<T: Tuple>(
    capacity_bytes: usize,
    batch_bytes: usize,
    senders: usize,
) -> Result<(Vec<ShmOsrSender<T>>, ShmOsrReceiver<T>), TransportError> {
    static EDGES: AtomicUsize = AtomicUsize::new(0);
    let edge = format!("osr{}", EDGES.fetch_add(1, Ordering::Relaxed));
    let name = SegmentName::new(&format!("p{}", std::process::id()), &edge).map_err(setup)?;
    let (ring, receiver, _) = create_ring(
        |spec| Segment::create_unique(&name, spec),
        capacity_bytes,
        senders,
    )?;
    let senders = (0..senders)
        .map(|_| ShmOsrSender::join(&ring, batch_bytes))
        .collect::<Result<_, _>>()?;
    Ok((senders, receiver))
}

impl<T: Tuple> ShmOsrSender<T> {
    fn join(ring: &OsrRing<Segment>, batch_bytes: usize) -> Result<Self, TransportError> {
        check_batch_bytes(batch_bytes)?;
        let layout = ring.layout();
        let producer = ring.join().map_err(setup)?;
        let id = producer.id().unwrap_or(0);
        let max_payload = layout.max_payload();
        let batch_bytes = batch_bytes.next_multiple_of(8).min(max_payload);
        Ok(Self {
            producer,
            id,
            slot: slot_of(&layout),
            max_payload,
            batch_bytes,
            next_record: batch_bytes,
            scratch: Vec::new(),
            outgoing: None,
            last_liveness_check: Instant::now(),
            _tuples: PhantomData,
        })
    }

    /// This sender's id: its slot in the ring's producer table.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The largest encoded tuple this edge carries.
    pub fn slot_bytes(&self) -> usize {
        self.slot
    }

    /// Commits the open batch record, if any, and sizes the next one after it: `filled` says
    /// the record is committed because a tuple did not fit (the stream is busy), otherwise it
    /// is flushed early and the next is sized after what it held.
    fn commit(&mut self, filled: bool) -> Result<(), SendError> {
        let Some(room) = self.producer.batch_room() else {
            return Ok(());
        };
        let held = self.next_record - room;
        self.next_record = if filled {
            self.batch_bytes
        } else {
            (2 * held).clamp(MIN_RECORD_BYTES.min(self.batch_bytes), self.batch_bytes)
        };
        match self.producer.commit_batch() {
            Ok(_) => Ok(()),
            // The receiver skipped the record: it believes this sender gone and reports its
            // edge disconnected, so nothing more from here will be read.
            Err(CommitError::Lost | CommitError::Poisoned) => Err(SendError::Closed),
        }
    }

    /// Opens a batch record with room for at least a tuple of `tuple` bytes.
    fn open(&mut self, tuple: usize) -> Result<(), SendError> {
        let item = batch_item_bytes(tuple);
        let mut capacity = self.next_record.max(item).min(self.max_payload);
        self.next_record = capacity;
        loop {
            return match self.producer.try_open_batch(self.id, capacity) {
                Ok(()) => Ok(()),
                Err(ReserveError::Full) => Err(self.full()),
                Err(ReserveError::Closed | ReserveError::Poisoned) => Err(SendError::Closed),
                // Holes left by dead senders split the ring: fit what fits.
                Err(ReserveError::TooLarge { max, .. }) if max >= item && max < capacity => {
                    capacity = max & !7;
                    self.next_record = capacity;
                    continue;
                }
                Err(ReserveError::TooLarge { max, .. }) => Err(SendError::TooLarge {
                    tuple,
                    slot: max.saturating_sub(batch_item_bytes(0)) & !7,
                }),
            };
        }
    }

    /// `Full`, or `Closed` when the receiver's process is gone (checked now and then).
    fn full(&mut self) -> SendError {
        if self.last_liveness_check.elapsed() >= LIVENESS_PERIOD {
            self.last_liveness_check = Instant::now();
            if let Some(pid) = self.producer.consumer_pid() {
                if !process_is_running(pid) {
                    return SendError::Closed;
                }
            }
        }
        SendError::Full
    }

    /// Sends a punctuation or end-of-stream record (`record`, its tag first) after the data
    /// before it.
    fn control(&mut self, record: &[u8]) -> Result<(), SendError> {
        self.finish_outgoing()?;
        self.commit(false)?;
        self.producer
            .try_push(self.id, record)
            .map_err(|e| match e {
                PushError::Full => self.full(),
                _ => SendError::Closed,
            })
    }

    /// Appends the tuple in `scratch` to the open batch record, opening one if needed; commits
    /// the record at once when another tuple of this size would not fit, so a full record
    /// never waits for the next offer (or holds the receiver's window while this sender is
    /// descheduled).
    fn append_scratch(&mut self) -> Result<(), SendError> {
        if !self.producer.append_to_batch(&self.scratch) {
            self.commit(true)?;
            self.open(self.scratch.len())?;
            if !self.producer.append_to_batch(&self.scratch) {
                // `open` reserved room for this item, so this is unreachable; refuse rather
                // than lose the tuple.
                return Err(SendError::Full);
            }
        }
        let item = batch_item_bytes(self.scratch.len());
        if self.producer.batch_room().is_some_and(|room| room < item) {
            // Committed or not, the tuple is in: a lost record means the edge is closed,
            // which the next offer reports.
            let _ = self.commit(true);
        }
        Ok(())
    }
}

impl<T: Tuple> SendsInParts for ShmOsrSender<T> {
    fn outgoing(&mut self) -> &mut Option<Outgoing> {
        &mut self.outgoing
    }

    fn spare(&mut self) -> &mut Vec<u8> {
        &mut self.scratch
    }

    /// Writes a part record from the front of `rest` (the last part if it takes all of it);
    /// returns how many bytes it took.
    fn write_part(&mut self, rest: &[u8]) -> Result<usize, SendError> {
        let mut n = rest.len().min(PART_BYTES).min(self.max_payload - 1);
        loop {
            let tag = if n == rest.len() { TAG_LAST } else { TAG_PART };
            let refused = match self.producer.try_reserve(self.id, n + 1) {
                Ok(mut record) => {
                    record.write_at(0, &[tag]);
                    record.write_at(1, &rest[..n]);
                    return match record.commit() {
                        Ok(()) => Ok(n),
                        Err(CommitError::Lost | CommitError::Poisoned) => Err(SendError::Closed),
                    };
                }
                Err(refused) => refused,
            };
            match refused {
                ReserveError::Full => return Err(self.full()),
                // Holes left by dead senders split the ring: a smaller part fits.
                ReserveError::TooLarge { max, .. } if max > 1 && max <= n => n = max - 1,
                _ => return Err(SendError::Closed),
            }
        }
    }
}

impl<T: Tuple> TupleSender<T> for ShmOsrSender<T> {
    fn offer(&mut self, message: Message<T>) -> Result<(), Refused<T>> {
        let outcome = match &message {
            Message::Data(tuple) => self.offer_copy(tuple),
            Message::Punctuation(punctuation) => {
                let mut record = [TAG_PUNCTUATION; PUNCTUATION_RECORD];
                record[1..].copy_from_slice(&punctuation.to_wire());
                self.control(&record)
            }
            Message::EndOfStream => self.control(&[TAG_END]),
        };
        outcome.map_err(|error| Refused { error, message })
    }

    fn offer_copy(&mut self, tuple: &T) -> Result<(), SendError> {
        self.finish_outgoing()?;
        self.scratch.clear();
        if tuple.encode(&mut self.scratch).is_err() {
            return Err(SendError::Unencodable {
                type_name: std::any::type_name::<T>(),
            });
        }
        if self.scratch.len() <= self.slot {
            return self.append_scratch();
        }
        check_len(self.scratch.len(), MAX_TUPLE_BYTES)?;
        self.commit(false)?;
        self.outgoing = Some(Outgoing::new(std::mem::take(&mut self.scratch)));
        // The tuple is taken: what does not fit now follows on later offers and flushes.
        match self.finish_outgoing() {
            Ok(()) | Err(SendError::Full) => Ok(()),
            Err(error) => Err(error),
        }
    }

    fn flush(&mut self) {
        // A lost record means the receiver reports this edge disconnected; the next offer is
        // refused as closed.
        if self.finish_outgoing().is_ok() {
            let _ = self.commit(false);
        }
    }

    fn pending(&self) -> bool {
        self.outgoing.is_some()
    }

    fn room(&mut self) -> usize {
        // Only fixed-size tuples have a size known before they are encoded.
        let Encoding::Facade { size } = T::ENCODING else {
            return 0;
        };
        let item = batch_item_bytes(size);
        if size > self.slot || self.outgoing.is_some() {
            return 0;
        }
        if self.producer.batch_room().is_none_or(|room| room < item)
            && (self.commit(true).is_err() || self.open(size).is_err())
        {
            return 0;
        }
        self.producer.batch_room().map_or(0, |room| room / item)
    }
}

impl<T> Drop for ShmOsrSender<T> {
    fn drop(&mut self) {
        // What was offered is delivered, as after a flush; then the producer handle marks this
        // sender as left (after the commit).
        let _ = self.producer.commit_batch();
    }
}

impl<T: Tuple> ShmOsrReceiver<T> {
    fn new(consumer: OsrConsumer<Segment>, senders: usize) -> Self {
        Self {
            consumer,
            senders: vec![SenderState::Open; senders],
            parts: (0..senders).map(|_| Reassembly::default()).collect(),
            ends: 0,
            pending: VecDeque::new(),
            corrupt_seen: 0,
            gone_at: None,
            failure: None,
            last_liveness_check: Instant::now(),
            polls_since_check: 0,
            _tuples: PhantomData,
        }
    }

    /// How many senders the receiver expects.
    pub fn senders(&self) -> usize {
        self.senders.len()
    }

    /// Records of gone senders that were skipped unfinished: their tuples are lost.
    pub fn lost_records(&self) -> u64 {
        self.consumer.stats().skipped_records
    }

    /// Fails the edge for good with `error`, poisoning the ring so senders stop too.
    fn fail(&mut self, error: RecvError) -> RecvError {
        if error == RecvError::Malformed {
            self.consumer.poison();
        }
        self.failure = Some(error.clone());
        error
    }

    /// Finds senders that are gone without their end of stream; once the window has passed
    /// everything reserved before that was seen, the edge is disconnected. The table is read
    /// when the receiver is `idle` (found nothing, or waits on an unfinished record); process
    /// ids are checked every [`LIVENESS_PERIOD`], the clock read every [`CLOCK_POLLS`] polls.
    fn check_senders(&mut self, idle: bool) -> Result<(), RecvError> {
        let check_pids = self.polls_since_check.is_multiple_of(CLOCK_POLLS)
            && self.last_liveness_check.elapsed() >= LIVENESS_PERIOD;
        if check_pids {
            self.last_liveness_check = Instant::now();
            self.polls_since_check = 0;
        } else if !idle {
            return Ok(());
        }
        for (id, state) in self.senders.iter_mut().enumerate() {
            if *state != SenderState::Open {
                continue;
            }
            let Some(entry) = self.consumer.producer(id as u32) else {
                continue; // not joined yet
            };
            if entry.left || (check_pids && !process_is_running(entry.pid)) {
                *state = SenderState::Gone;
                if self.gone_at.is_none() {
                    self.gone_at = Some(self.consumer.write_position());
                }
            }
        }
        let Some(gone_at) = self.gone_at else {
            return Ok(());
        };
        let skip = match self.consumer.stall() {
            Some(OsrStall::Writing { target }) => {
                self.senders.get(target as usize) == Some(&SenderState::Gone)
            }
            Some(OsrStall::Unclaimed) => true,
            None => false,
        };
        if skip {
            self.consumer
                .skip_stall()
                .map_err(|_| self.fail(RecvError::Malformed))?;
        }
        if self.consumer.read_position() >= gone_at {
            // Everything the gone senders wrote has been read: those whose end of stream was
            // among it merely left early.
            if self.senders.contains(&SenderState::Gone) {
                return Err(self.fail(RecvError::Disconnected));
            }
            self.gone_at = None;
        }
        Ok(())
    }
}

/// Turns one record into messages: into `out` while it holds fewer than `max`, the rest into
/// `pending`. Returns false if the record is malformed.
fn decode_record<T: Tuple>(
    record: OsrRecord<'_>,
    senders: &mut [SenderState],
    parts: &mut [Reassembly],
    ends: &mut usize,
    max: usize,
    out: &mut Vec<Message<T>>,
    pending: &mut VecDeque<Message<T>>,
) -> bool {
    let target = record.target() as usize;
    let (Some(state), Some(parts)) = (senders.get_mut(target), parts.get_mut(target)) else {
        return false;
    };
    if *state == SenderState::Ended {
        return false;
    }
    let mut emit = |message| {
        if out.len() < max {
            out.push(message);
        } else {
            pending.push_back(message);
        }
    };
    match (record.is_batch(), record.bytes()) {
        (false, [TAG_PART, part @ ..]) => return parts.push(part, MAX_TUPLE_BYTES),
        (false, [TAG_LAST, last @ ..]) => {
            return match parts.finish(last, MAX_TUPLE_BYTES, T::decode) {
                Some(Ok(tuple)) => {
                    emit(Message::Data(tuple));
                    true
                }
                _ => false,
            }
        }
        _ if !parts.is_empty() => return false,
        _ => {}
    }
    if record.is_batch() {
        for bytes in record.tuples() {
            match T::decode(bytes) {
                Ok(tuple) => emit(Message::Data(tuple)),
                Err(_) => return false,
            }
        }
        return true;
    }
    match record.bytes() {
        [TAG_PUNCTUATION, wire @ ..] => match Punctuation::from_wire(wire) {
            Ok(punctuation) => emit(Message::Punctuation(punctuation)),
            Err(_) => return false,
        },
        [TAG_END] => {
            *state = SenderState::Ended;
            *ends += 1;
            emit(Message::EndOfStream);
        }
        _ => return false,
    }
    true
}

impl<T: Tuple> TupleReceiver<T> for ShmOsrReceiver<T> {
    fn poll(&mut self, max: usize, out: &mut Vec<Message<T>>) -> Result<usize, RecvError> {
        if let Some(error) = &self.failure {
            return Err(error.clone());
        }
        let start = out.len();
        let limit = start.saturating_add(max);
        while out.len() < limit {
            let Some(message) = self.pending.pop_front() else {
                break;
            };
            out.push(message);
        }
        if self.ends == self.senders.len() {
            return Ok(out.len() - start);
        }
        let mut well_formed = true;
        while well_formed && out.len() < limit && self.pending.is_empty() {
            let Self {
                consumer,
                senders,
                parts,
                ends,
                pending,
                ..
            } = self;
            let polled = consumer.poll(1, |record| {
                well_formed = decode_record(record, senders, parts, ends, limit, out, pending);
            });
            match polled {
                Ok(0) => break,
                Ok(_) => {}
                // Poisoned (by a sender that found corruption) or corrupt here.
                Err(_) => well_formed = false,
            }
        }
        let corrupt = self.consumer.stats().corrupt_records;
        if !well_formed || corrupt != self.corrupt_seen {
            self.corrupt_seen = corrupt;
            return Err(self.fail(RecvError::Malformed));
        }
        let received = out.len() - start;
        self.polls_since_check = self.polls_since_check.wrapping_add(1);
        let idle = received == 0 || self.consumer.stall().is_some();
        if (idle || self.polls_since_check.is_multiple_of(CLOCK_POLLS))
            && self.ends < self.senders.len()
        {
            self.check_senders(idle)?;
        }
        Ok(received)
    }

    fn stats(&mut self) -> ReceiverStats {
        let read = self.consumer.read_position();
        let written = self.consumer.write_position();
        ReceiverStats {
            queued: Some((written.saturating_sub(read), self.consumer.capacity())),
            queued_in_bytes: true,
            bytes: Some(read),
            lost: self.lost_records(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A receiver for `senders` senders and the raw ring, to write what no sender would.
    fn raw(senders: usize) -> (OsrRing<Segment>, ShmOsrReceiver<u64>) {
        static EDGES: AtomicUsize = AtomicUsize::new(0);
        let edge = format!("raw{}", EDGES.fetch_add(1, Ordering::Relaxed));
        let name = SegmentName::new(&format!("t{}", std::process::id()), &edge).unwrap();
        let (ring, receiver, _) =
            create_ring(|spec| Segment::create_unique(&name, spec), 1024, senders).unwrap();
        (ring, receiver)
    }

    #[test]
    fn a_receiver_binds_past_a_file_under_its_predictable_name_and_senders_open_what_it_bound() {
        let base = SegmentName::new(&format!("t{}", std::process::id()), "taken").unwrap();
        std::fs::write(base.path(), b"someone else's").unwrap();
        let bound = bind_receiver::<u64>(&base, 1024, 1);
        let _ = std::fs::remove_file(base.path());
        let (mut rx, name) = bound.unwrap();
        assert_ne!(name, base);
        assert_eq!(name, base.with_nonce(name.nonce().unwrap()));
        let mut tx = open_sender::<u64>(&name, 1024, 64).unwrap();
        tx.offer(Message::Data(7)).unwrap();
        tx.offer(Message::EndOfStream).unwrap();
        drop(tx);
        assert_eq!(
            poll_all(&mut rx),
            Ok(vec![Message::Data(7), Message::EndOfStream])
        );
    }

    fn poll_all(rx: &mut ShmOsrReceiver<u64>) -> Result<Vec<Message<u64>>, RecvError> {
        let mut out = Vec::new();
        while rx.poll(64, &mut out)? > 0 {}
        Ok(out)
    }

    #[test]
    fn records_no_sender_writes_are_malformed_and_poison_the_ring() {
        let punctuation = |kind: u8, value: u64, extra: &[u8]| {
            let mut record = vec![TAG_PUNCTUATION, kind];
            record.extend_from_slice(&value.to_le_bytes());
            record.extend_from_slice(extra);
            record
        };
        let mut cut_value = punctuation(2, 7, &[]);
        cut_value.pop();
        let bad_records: [(u32, &[u8], bool); 10] = [
            (0, &[9], false),                     // an unknown tag
            (0, &[TAG_END, 0], false),            // a tag with trailing bytes
            (1, &[TAG_END], false),               // a sender id beyond the count
            (0, &[1, 2, 3], true),                // a 3-byte u64
            (0, &[200, 0, 0, 0], false),          // bytes that are not a record of ours
            (0, &[TAG_PUNCTUATION], false),       // a punctuation without its encoding
            (0, &cut_value, false),               // a punctuation's value cut short
            (0, &punctuation(2, 7, &[0]), false), // a punctuation with a trailing byte
            (0, &punctuation(4, 7, &[]), false),  // a punctuation of an unknown kind
            (0, &punctuation(1, 7, &[]), false),  // a window marker with a value
        ];
        for (target, bytes, batch) in bad_records {
            let (ring, mut rx) = raw(1);
            let mut p = ring.join().unwrap();
            if batch {
                p.try_push_batch(target, [bytes]).unwrap();
            } else {
                p.try_push(target, bytes).unwrap();
            }
            assert_eq!(poll_all(&mut rx), Err(RecvError::Malformed), "{bytes:?}");
            assert_eq!(
                poll_all(&mut rx),
                Err(RecvError::Malformed),
                "it stays failed"
            );
            assert!(p.is_closed(), "the ring is poisoned for senders");
        }
    }

    #[test]
    fn anything_but_a_part_inside_a_senders_tuple_is_malformed() {
        let mut marker = vec![TAG_PUNCTUATION];
        marker.extend_from_slice(&Punctuation::WindowMarker.to_wire());
        let part = [TAG_PART, 1, 0, 0, 0];
        let followers: [(&[u8], bool); 3] =
            [(&marker, false), (&[TAG_END], false), (&[0; 8], true)];
        for (record, batch) in followers {
            let (ring, mut rx) = raw(2);
            let mut p = ring.join().unwrap();
            p.try_push(0, &part).unwrap();
            // Another sender's records between the parts are fine.
            p.try_push_batch(1, [&7u64.to_le_bytes()[..]]).unwrap();
            if batch {
                p.try_push_batch(0, [record]).unwrap();
            } else {
                p.try_push(0, record).unwrap();
            }
            let mut out = Vec::new();
            assert_eq!(
                rx.poll(8, &mut out),
                Err(RecvError::Malformed),
                "{record:?}"
            );
            assert_eq!(out, vec![Message::Data(7)]);
        }
        let (ring, mut rx) = raw(1);
        let mut p = ring.join().unwrap();
        p.try_push(0, &part).unwrap();
        p.try_push(0, &[TAG_LAST, 2, 0, 0, 0]).unwrap();
        assert_eq!(poll_all(&mut rx), Ok(vec![Message::Data(2 << 32 | 1)]));
    }

    #[test]
    fn anything_after_a_senders_end_is_malformed() {
        let (ring, mut rx) = raw(2);
        let mut p = ring.join().unwrap();
        p.try_push(0, &[TAG_END]).unwrap();
        let mut marker = vec![TAG_PUNCTUATION];
        marker.extend_from_slice(&Punctuation::WindowMarker.to_wire());
        p.try_push(0, &marker).unwrap();
        let mut out = Vec::new();
        assert_eq!(rx.poll(1, &mut out), Ok(1));
        assert_eq!(out, vec![Message::EndOfStream]);
        assert_eq!(rx.poll(1, &mut out), Err(RecvError::Malformed));
    }

    #[test]
    fn a_record_larger_than_the_callers_limit_is_handed_out_over_several_polls() {
        let (mut senders, mut rx) = connect::<u64>(1024, 512, 1).unwrap();
        let tx = &mut senders[0];
        for i in 0..10 {
            tx.offer(Message::Data(i)).unwrap();
        }
        tx.offer(Message::EndOfStream).unwrap();
        let mut out = Vec::new();
        for n in [3, 3, 3, 2] {
            assert_eq!(rx.poll(3, &mut out), Ok(n));
        }
        assert_eq!(rx.poll(3, &mut out), Ok(0), "all senders ended");
        let mut want: Vec<_> = (0..10).map(Message::Data).collect();
        want.push(Message::EndOfStream);
        assert_eq!(out, want);
    }

    #[test]
    fn bad_parameters_are_refused_with_their_name() {
        let error = |r: Result<(Vec<ShmOsrSender<u64>>, ShmOsrReceiver<u64>), TransportError>| {
            r.err().map(|e| e.to_string()).unwrap_or_default()
        };
        assert!(error(connect(1000, 64, 1)).contains("capacity_bytes"));
        assert!(error(connect(1024, 0, 1)).contains("batch_bytes"));
        assert!(error(connect(1024, 64, 0)).contains("senders"));
        assert!(error(connect(1024, 64, MAX_SENDERS + 1)).contains("between 1 and 1024, got 1025"));
        assert!(slot_bytes(100).is_err());
        assert_eq!(slot_bytes(64).unwrap(), 16);
    }

    #[test]
    fn records_shrink_to_what_a_flush_brings_and_grow_back_when_busy() {
        let (mut senders, mut rx) = connect::<u64>(1 << 16, 4096, 1).unwrap();
        let tx = &mut senders[0];
        tx.offer(Message::Data(1)).unwrap();
        assert_eq!(tx.next_record, 4096);
        tx.flush();
        assert_eq!(
            tx.next_record, MIN_RECORD_BYTES,
            "16 bytes held, at least the minimum"
        );
        for i in 0..1000 {
            tx.offer(Message::Data(i)).unwrap();
            if i % 100 == 0 {
                let _ = poll_all(&mut rx);
            }
        }
        assert_eq!(
            tx.next_record, 4096,
            "filled records reserve the full batch again"
        );
    }
}
