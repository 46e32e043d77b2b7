//! The `shm-vega` transport: an edge between two processes (or two threads) of one host over
//! a Vega ring in a shared segment.
//!
//! Each message takes one slot: its payload, then one trailing tag byte. The tag trails so the
//! payload starts at the slot's 8-byte aligned start:
//!
//! ```text
//!  slot:  +-------------------------------------------+-----+
//!         | payload (the frame's length less the tag) | tag |
//!         +-------------------------------------------+-----+
//!  tag 0  data         the tuple's encoding (facade: its bytes; normal: postcard)
//!  tag 1  punctuation  its wire encoding (sluice_types::Punctuation::WIRE_BYTES bytes)
//!  tag 2  end          no payload
//!  tag 3  part         a part of a tuple's encoding, not the last; the next slot continues it
//! ```
//!
//! A transport of `slot_bytes` lays its ring out with slots of `slot_bytes + 1` bytes, at
//! least `WIRE_BYTES + 1` (room for a punctuation and its tag). A tuple whose encoding is
//! longer than `slot_bytes` travels in parts ([`crate::parts`]): `slot_bytes` of it per slot
//! tagged 3, the rest in a last slot tagged 0; up to [`MAX_TUPLE_BYTES`] in all, a longer one is
//! refused naming both sizes. While a tuple's parts are going out, the sender refuses other
//! offers as `Full` and reports itself [`TupleSender::pending`] until a flush gets the last part
//! in. The receiver reads a punctuation with `Punctuation::from_wire`: a payload of another
//! length or an unknown kind, like an unknown tag, a tuple that does not decode, a message other
//! than a part or the last part while a tuple is being reassembled, or parts beyond
//! [`MAX_TUPLE_BYTES`], is [`RecvError::Malformed`] and poisons the ring.
//!
//! The sender stages messages and publishes them on `flush` (one store per batch), or by itself
//! once a quarter of the ring is staged. A fixed-size (facade) tuple is encoded straight into
//! its claimed slot ([`Tuple::wire_bytes`]): one copy from the tuple to the shared memory;
//! other tuples go through a frame buffer. The receiver reads a batch in place, decodes it and
//! frees its slots with one store. A receiver whose sender process has died (its pid is gone)
//! or closed without an end of stream reports [`RecvError::Disconnected`].
//!
//! Either end may park on the ring's doorbells (shared futexes in the segment): the receiver
//! until something is published, the sender until room is freed.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sluice_ring::copy::copy_bytes;
use sluice_ring::vega::{
    VegaConsumer, VegaLayout, VegaProducer, VegaRecvError, VegaRing, VegaSendError,
};
use sluice_shm::{process_is_running, CreateError, Segment, SegmentKind, SegmentName, SegmentSpec};
use sluice_types::{Encoding, Message, Punctuation, Tuple};

use crate::parts::{check_len, Outgoing, Reassembly, SendsInParts, MAX_TUPLE_BYTES};
use crate::{
    ReceiverStats, RecvError, Refused, SendError, TransportError, TupleReceiver, TupleSender,
};

const TAG_DATA: u8 = 0;
const TAG_PUNCTUATION: u8 = 1;
const TAG_END: u8 = 2;
const TAG_PART: u8 = 3;

/// The segment kind of a Vega ring.
const KIND: SegmentKind = SegmentKind::new(*b"VEGA\0\0\0\0");
/// Bumped whenever the ring's layout or the framing above changes.
const LAYOUT_VERSION: u32 = 5;
/// How often an idle receiver checks that its sender's process is alive.
const LIVENESS_PERIOD: Duration = Duration::from_millis(100);
/// An idle receiver reads the clock for the liveness check once per this many empty polls
/// (and after every park): a spinning receiver then spends its time on the next slot's mark, not
/// on clock reads that delay noticing a tuple.
const LIVENESS_POLLS: u32 = 256;

/// The ring layout and segment spec of a transport with these parameters.
pub(crate) fn layout(
    slot_bytes: usize,
    slots: usize,
) -> Result<(VegaLayout, SegmentSpec), TransportError> {
    let invalid = |reason: String| TransportError::InvalidParameter {
        transport: "shm-vega",
        parameter: "slot_bytes/slots",
        reason,
    };
    let ring_slot = slot_bytes
        .max(Punctuation::WIRE_BYTES)
        .checked_add(1)
        .ok_or_else(|| invalid(format!("slot_bytes {slot_bytes} is too large")))?;
    let layout = VegaLayout::new(ring_slot, slots).map_err(|e| invalid(e.to_string()))?;
    let spec = SegmentSpec {
        kind: KIND,
        layout_version: LAYOUT_VERSION,
        capacities: [slot_bytes as u64, slots as u64],
        data_len: layout.bytes_needed(),
    };
    Ok((layout, spec))
}

/// The sending end of a `shm-vega` edge.
pub struct ShmVegaSender<T> {
    producer: VegaProducer<Segment>,
    slot_bytes: usize,
    frame: Vec<u8>,
    /// A tuple too large for one slot whose last part is not yet written.
    outgoing: Option<Outgoing>,
    publish_every: usize,
    _tuples: PhantomData<fn(T)>,
}

/// The receiving end of a `shm-vega` edge.
pub struct ShmVegaReceiver<T> {
    consumer: VegaConsumer<Segment>,
    /// The most messages one poll takes: [`POLL_BYTES`] of slots, at least one.
    most_per_poll: usize,
    ended: bool,
    /// The parts of a tuple too large for one slot, received so far.
    parts: Reassembly,
    /// Empty polls since the clock was last read for the liveness check.
    empty_polls: u32,
    last_liveness_check: Instant,
    _tuples: PhantomData<fn() -> T>,
}

/// Turns a setup failure of the segment or the ring into the transport's error.
fn setup(error: impl std::fmt::Display) -> TransportError {
    TransportError::Setup(error.to_string())
}

/// Creates a segment with `create` holding a fresh ring; returns the ring and the segment's
/// name.
fn create_ring(
    create: impl FnOnce(&SegmentSpec) -> Result<Segment, CreateError>,
    slot_bytes: usize,
    slots: usize,
) -> Result<(VegaRing<Segment>, SegmentName), TransportError> {
    let (layout, spec) = layout(slot_bytes, slots)?;
    let segment = create(&spec).map_err(setup)?;
    let name = segment.name().clone();
    Ok((VegaRing::create(segment, layout).map_err(setup)?, name))
}

/// Creates the segment `name` holding a fresh ring and returns its sending end.
pub fn create_sender<T: Tuple>(
    name: &SegmentName,
    slot_bytes: usize,
    slots: usize,
) -> Result<ShmVegaSender<T>, TransportError> {
    let (ring, _) = create_ring(|spec| Segment::create(name, spec), slot_bytes, slots)?;
    Ok(ShmVegaSender::new(
        ring.producer().map_err(setup)?,
        slot_bytes,
    ))
}

/// Opens the segment `name`, made by [`create_sender`] with the same parameters, and returns
/// its receiving end.
pub fn open_receiver<T: Tuple>(
    name: &SegmentName,
    slot_bytes: usize,
    slots: usize,
) -> Result<ShmVegaReceiver<T>, TransportError> {
    let ring = open_ring(name, slot_bytes, slots)?;
    Ok(ShmVegaReceiver::new(ring.consumer().map_err(setup)?))
}

/// Opens the ring in the segment `name`, checking it was made with these parameters.
fn open_ring(
    name: &SegmentName,
    slot_bytes: usize,
    slots: usize,
) -> Result<VegaRing<Segment>, TransportError> {
    let (_, spec) = layout(slot_bytes, slots)?;
    let segment = Segment::open(name, &spec).map_err(setup)?;
    VegaRing::open(segment).map_err(setup)
}

/// Creates the segment `name` holding a fresh ring and returns its receiving end: the way a PE
/// binds the receiver of a channel before the PEs upstream open their senders.
pub fn create_receiver<T: Tuple>(
    name: &SegmentName,
    slot_bytes: usize,
    slots: usize,
) -> Result<ShmVegaReceiver<T>, TransportError> {
    let (ring, _) = create_ring(|spec| Segment::create(name, spec), slot_bytes, slots)?;
    Ok(ShmVegaReceiver::new(ring.consumer().map_err(setup)?))
}

/// As [`create_receiver`], under a name nobody can guess: `base` with a random nonce
/// ([`Segment::create_unique`]), returned for the sender to open. A file someone made under a
/// predictable name cannot keep the receiver from binding.
pub fn bind_receiver<T: Tuple>(
    base: &SegmentName,
    slot_bytes: usize,
    slots: usize,
) -> Result<(ShmVegaReceiver<T>, SegmentName), TransportError> {
    let (ring, name) = create_ring(|spec| Segment::create_unique(base, spec), slot_bytes, slots)?;
    Ok((ShmVegaReceiver::new(ring.consumer().map_err(setup)?), name))
}

/// Opens the segment `name`, made by [`create_receiver`] with the same parameters, and returns
/// its sending end.
pub fn open_sender<T: Tuple>(
    name: &SegmentName,
    slot_bytes: usize,
    slots: usize,
) -> Result<ShmVegaSender<T>, TransportError> {
    let ring = open_ring(name, slot_bytes, slots)?;
    Ok(ShmVegaSender::new(
        ring.producer().map_err(setup)?,
        slot_bytes,
    ))
}

/// Both ends of a fresh ring in a segment unique to this process (its name has a random
/// nonce), for an edge between two threads; the segment is removed when both ends are gone.
pub fn connect<T: Tuple>(
    slot_bytes: usize,
    slots: usize,
) -> Result<(ShmVegaSender<T>, ShmVegaReceiver<T>), TransportError> {
    static EDGES: AtomicUsize = AtomicUsize::new(0);
    let edge = format!("vega{}", EDGES.fetch_add(1, Ordering::Relaxed));
    let name = SegmentName::new(&format!("p{}", std::process::id()), &edge).map_err(setup)?;
    let (ring, _) = create_ring(
        |spec| Segment::create_unique(&name, spec),
        slot_bytes,
        slots,
    )?;
    Ok((
        ShmVegaSender::new(ring.producer().map_err(setup)?, slot_bytes),
        ShmVegaReceiver::new(ring.consumer().map_err(setup)?),
    ))
}

impl<T> ShmVegaSender<T> {
    fn new(producer: VegaProducer<Segment>, slot_bytes: usize) -> Self {
        let publish_every = (producer.slots() / 4).max(1);
        Self {
            producer,
            slot_bytes,
            frame: Vec::with_capacity(slot_bytes + 1),
            outgoing: None,
            publish_every,
            _tuples: PhantomData,
        }
    }
}

impl<T> ShmVegaReceiver<T> {
    fn new(consumer: VegaConsumer<Segment>) -> Self {
        Self {
            most_per_poll: (POLL_BYTES / consumer.slot_bytes().max(1)).max(1),
            consumer,
            ended: false,
            parts: Reassembly::default(),
            empty_polls: 0,
            last_liveness_check: Instant::now(),
            _tuples: PhantomData,
        }
    }
}

impl<T: Tuple> ShmVegaSender<T> {
    /// Writes `message` into the next slot, staged (published by the next publish).
    #[inline]
    fn write(&mut self, message: &Message<T>) -> Result<(), SendError> {
        self.finish_outgoing()?;
        match message {
            Message::Data(tuple) => self.write_data(tuple),
            Message::Punctuation(punctuation) => {
                let mut frame = [TAG_PUNCTUATION; Punctuation::WIRE_BYTES + 1];
                frame[..Punctuation::WIRE_BYTES].copy_from_slice(&punctuation.to_wire());
                self.write_frame(&frame)
            }
            Message::EndOfStream => self.write_frame(&[TAG_END]),
        }
    }

    /// Writes `tuple` into the next slot, staged, or its first parts if it needs several.
    #[inline]
    fn write_data(&mut self, tuple: &T) -> Result<(), SendError> {
        match T::ENCODING {
            Encoding::Facade { size } if size <= self.slot_bytes => {
                self.write_in_place(tuple, size)
            }
            _ => self.write_encoded(tuple),
        }
    }

    /// Publishes after a write when a batch is due, or when the ring refused the write (the
    /// receiver may be waiting for what is staged).
    #[inline]
    fn after_write(&mut self, written: Result<(), SendError>) -> Result<(), SendError> {
        match written {
            Ok(()) if self.producer.staged() >= self.publish_every => self.producer.publish(),
            Ok(()) => {}
            Err(SendError::Full) => self.producer.publish(),
            Err(_) => {}
        }
        written
    }

    /// Copies a facade tuple's bytes straight into a claimed slot: one copy, from the tuple to
    /// the shared memory ([`copy_bytes`], clear of `memcpy`'s slow case). Falls back to
    /// [`Self::write_encoded`] if the type lends no bytes of that size.
    #[inline]
    fn write_in_place(&mut self, tuple: &T, size: usize) -> Result<(), SendError> {
        let Some(bytes) = tuple.wire_bytes().filter(|b| b.len() == size) else {
            return self.write_encoded(tuple);
        };
        let mut claim = self.producer.claim(size + 1).map_err(send_error)?;
        copy_bytes(&mut claim[..size], bytes);
        claim[size] = TAG_DATA;
        claim.stage();
        Ok(())
    }

    /// Encodes `tuple` into the frame buffer, then copies the frame into the next slot, or
    /// starts writing it in parts if it is longer than a slot.
    fn write_encoded(&mut self, tuple: &T) -> Result<(), SendError> {
        let mut frame = std::mem::take(&mut self.frame);
        frame.clear();
        if tuple.encode(&mut frame).is_err() {
            self.frame = frame;
            return Err(SendError::Unencodable {
                type_name: std::any::type_name::<T>(),
            });
        }
        if frame.len() <= self.slot_bytes {
            frame.push(TAG_DATA);
            let written = self.write_frame(&frame);
            self.frame = frame;
            return written;
        }
        if let Err(error) = check_len(frame.len(), MAX_TUPLE_BYTES) {
            self.frame = frame;
            return Err(error);
        }
        self.outgoing = Some(Outgoing::new(frame));
        // The tuple is taken: what does not fit now follows on later offers and flushes.
        match self.finish_outgoing() {
            Ok(()) | Err(SendError::Full) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Copies a whole frame (payload and tag) into the next slot.
    #[inline]
    fn write_frame(&mut self, frame: &[u8]) -> Result<(), SendError> {
        self.producer.write(frame).map_err(send_error)
    }
}

impl<T: Tuple> SendsInParts for ShmVegaSender<T> {
    fn outgoing(&mut self) -> &mut Option<Outgoing> {
        &mut self.outgoing
    }

    fn spare(&mut self) -> &mut Vec<u8> {
        &mut self.frame
    }

    /// Writes a slot of up to `slot_bytes` from the front of `rest`, staged, and publishes
    /// every `publish_every` slots so the receiver copies one part while the next is written.
    fn write_part(&mut self, rest: &[u8]) -> Result<usize, SendError> {
        let n = rest.len().min(self.slot_bytes);
        let mut claim = self.producer.claim(n + 1).map_err(send_error)?;
        copy_bytes(&mut claim[..n], &rest[..n]);
        claim[n] = if n == rest.len() { TAG_DATA } else { TAG_PART };
        claim.stage();
        if self.producer.staged() >= self.publish_every {
            self.producer.publish();
        }
        Ok(n)
    }
}

/// The transport's error for a refusal of the ring's producer.
fn send_error(error: VegaSendError) -> SendError {
    match error {
        VegaSendError::Full => SendError::Full,
        VegaSendError::TooLarge { tuple, slot } => SendError::TooLarge {
            // The ring's slot holds the tag byte too.
            tuple: tuple.saturating_sub(1),
            slot: slot.saturating_sub(1),
        },
        VegaSendError::Closed | VegaSendError::Poisoned(_) => SendError::Closed,
    }
}

impl<T: Tuple> TupleSender<T> for ShmVegaSender<T> {
    fn offer(&mut self, message: Message<T>) -> Result<(), Refused<T>> {
        let written = self.write(&message);
        self.after_write(written)
            .map_err(|error| Refused { error, message })
    }

    #[inline]
    fn offer_copy(&mut self, tuple: &T) -> Result<(), SendError> {
        let written = self.finish_outgoing().and_then(|()| self.write_data(tuple));
        self.after_write(written)
    }

    fn flush(&mut self) {
        // A refusal here is the next offer's to report.
        let _ = self.finish_outgoing();
        self.producer.publish();
    }

    fn pending(&self) -> bool {
        self.outgoing.is_some()
    }

    fn room(&mut self) -> usize {
        if self.outgoing.is_some() {
            return 0;
        }
        self.producer.free()
    }

    fn park(&mut self, timeout: Duration) -> bool {
        let _ = self.finish_outgoing();
        // Publishes what is staged first, so the receiver is not left waiting for it.
        self.producer.park(timeout);
        true
    }
}

impl<T> ShmVegaReceiver<T> {
    /// Called after an empty poll: whether it is time to check the sender's pid.
    #[inline]
    fn liveness_check_due(&mut self) -> bool {
        self.empty_polls += 1;
        if self.empty_polls < LIVENESS_POLLS {
            return false;
        }
        self.empty_polls = 0;
        if self.last_liveness_check.elapsed() < LIVENESS_PERIOD {
            return false;
        }
        self.last_liveness_check = Instant::now();
        true
    }
}

/// The most bytes of slots one poll decodes: large tuples come a few at a time, so the
/// decoded batch stays in the receiver's cache and their slots go back to the sender soon.
const POLL_BYTES: usize = 64 * 1024;

/// Fixed-size tuples from this size on are decoded out of line ([`push_decoded_out_of_line`]).
const OUT_OF_LINE_DECODE_BYTES: usize = 256;

/// Decodes a data frame's `payload` onto `out`; false if it is malformed.
#[inline(always)]
fn push_data<T: Tuple>(out: &mut Vec<Message<T>>, payload: &[u8]) -> bool {
    match T::ENCODING {
        Encoding::Facade { size } if size >= OUT_OF_LINE_DECODE_BYTES => {
            push_decoded_out_of_line(out, payload)
        }
        _ => push_decoded(out, payload),
    }
}

#[inline(always)]
fn push_decoded<T: Tuple>(out: &mut Vec<Message<T>>, payload: &[u8]) -> bool {
    match T::decode(payload) {
        Ok(tuple) => {
            out.push(Message::Data(tuple));
            true
        }
        Err(_) => false,
    }
}

/// [`push_decoded`] in a function of its own. There the compiler copies the decoded tuple
/// from the slot straight into `out`; inlined into the batch loop it goes through a
/// temporary, a second copy (callgrind on 16 KiB tuples: 2 memcpy calls per tuple inlined,
/// 1 out of line). For small tuples the call would cost more than the copy it saves.
#[inline(never)]
fn push_decoded_out_of_line<T: Tuple>(out: &mut Vec<Message<T>>, payload: &[u8]) -> bool {
    push_decoded(out, payload)
}

/// What reading one frame gave.
enum Read {
    /// A message, pushed onto the output.
    Message,
    /// A part of a tuple, kept for its reassembly.
    Part,
    /// Something no sender writes.
    Malformed,
}

/// Reads a frame that is not a whole tuple arriving while nothing is being reassembled: a part,
/// the last part, a punctuation or the end of the stream. Anything but a part or the last part
/// while a tuple is being reassembled is malformed.
#[inline(never)]
fn read_other<T: Tuple>(
    frame: &[u8],
    parts: &mut Reassembly,
    ended: &mut bool,
    out: &mut Vec<Message<T>>,
) -> Read {
    let message = |ok: bool| if ok { Read::Message } else { Read::Malformed };
    match frame.split_last() {
        Some((&TAG_DATA, last)) => message(
            parts
                .finish(last, MAX_TUPLE_BYTES, |bytes| push_decoded(out, bytes))
                .unwrap_or(false),
        ),
        Some((&TAG_PART, part)) if parts.push(part, MAX_TUPLE_BYTES) => Read::Part,
        _ if !parts.is_empty() => Read::Malformed,
        Some((&TAG_PUNCTUATION, wire)) => match Punctuation::from_wire(wire) {
            Ok(punctuation) => {
                out.push(Message::Punctuation(punctuation));
                Read::Message
            }
            Err(_) => Read::Malformed,
        },
        Some((&TAG_END, _)) => {
            *ended = true;
            out.push(Message::EndOfStream);
            Read::Message
        }
        _ => Read::Malformed,
    }
}

impl<T: Tuple> TupleReceiver<T> for ShmVegaReceiver<T> {
    fn poll(&mut self, max: usize, out: &mut Vec<Message<T>>) -> Result<usize, RecvError> {
        let max = max.min(self.most_per_poll);
        let batch = match self.consumer.get_batch(max) {
            Ok(batch) => batch,
            Err(VegaRecvError::Closed) if self.ended => return Ok(0),
            Err(_) => return Err(RecvError::Disconnected),
        };
        let mut received = 0;
        let mut failure = None;
        // A local, so the common case, a whole tuple while nothing is being reassembled,
        // costs one register test per frame.
        let mut reassembling = !self.parts.is_empty();
        for frame in batch {
            let read = match frame.split_last() {
                Some((&TAG_DATA, payload)) if !reassembling => {
                    if push_data(out, payload) {
                        Read::Message
                    } else {
                        Read::Malformed
                    }
                }
                _ => {
                    let read = read_other(frame, &mut self.parts, &mut self.ended, out);
                    reassembling = !self.parts.is_empty();
                    read
                }
            };
            match read {
                Read::Message => received += 1,
                Read::Part => {}
                Read::Malformed => {
                    failure = Some(RecvError::Malformed);
                    break;
                }
            }
        }
        self.consumer.release();
        if let Some(error) = failure {
            self.consumer.poison();
            return Err(error);
        }
        if received == 0 && !self.ended && self.liveness_check_due() {
            if let Some(pid) = self.consumer.producer_pid() {
                if !process_is_running(pid) {
                    self.consumer.poison();
                    return Err(RecvError::Disconnected);
                }
            }
        }
        Ok(received)
    }

    fn park(&mut self, timeout: Duration) -> bool {
        self.empty_polls = LIVENESS_POLLS - 1;
        // A sender that dies without ringing costs one timeout; the next poll's liveness
        // check reports it.
        self.consumer.park(timeout);
        true
    }

    fn stats(&mut self) -> ReceiverStats {
        let slots = self.consumer.slots() as u64;
        ReceiverStats {
            queued: Some((self.consumer.backlog() as u64, slots)),
            ..ReceiverStats::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `tuples` and the end of the stream through a fresh ring of `N`-byte slots and
    /// returns what arrives.
    fn round_trip<const N: usize>(tuples: &[[u8; N]]) -> Vec<Message<[u8; N]>> {
        let (mut tx, mut rx) = connect::<[u8; N]>(N, 8).unwrap();
        for t in tuples {
            tx.offer(Message::Data(*t)).unwrap();
        }
        tx.offer(Message::EndOfStream).unwrap();
        tx.flush();
        let mut out = Vec::new();
        while rx.poll(16, &mut out).unwrap() > 0 {}
        out
    }

    #[test]
    fn a_punctuation_of_another_length_or_an_unknown_kind_or_inside_a_tuple_is_malformed() {
        let with_tag = |payload: &[u8]| [payload, &[TAG_PUNCTUATION]].concat();
        let wire = Punctuation::Watermark { time: 7, from: 0 }.to_wire();
        let mut unknown_kind = wire;
        unknown_kind[0] = 9;
        let part = vec![5, TAG_PART];
        let bad_runs = [
            vec![part.clone(), with_tag(&wire)],
            vec![part, vec![TAG_END]],
            vec![with_tag(&[])],
            vec![with_tag(&wire[..Punctuation::WIRE_BYTES - 1])],
            vec![with_tag(&[&wire[..], &[0]].concat())],
            vec![with_tag(&unknown_kind)],
        ];
        for (i, frames) in bad_runs.iter().enumerate() {
            let pid = std::process::id();
            let name = SegmentName::new(&format!("t{pid}"), &format!("bad{i}")).unwrap();
            let (ring, _) = create_ring(|spec| Segment::create_unique(&name, spec), 16, 4).unwrap();
            let mut producer = ring.producer().unwrap();
            for frame in frames {
                producer.write(frame).unwrap();
            }
            producer.publish();
            let mut rx = ShmVegaReceiver::<u64>::new(ring.consumer().unwrap());
            assert_eq!(
                rx.poll(4, &mut Vec::new()),
                Err(RecvError::Malformed),
                "{frames:?}"
            );
        }
    }

    #[test]
    fn a_punctuation_fits_slots_smaller_than_its_encoding() {
        let (mut tx, mut rx) = connect::<[u8; 2]>(2, 4).unwrap();
        let sent = [
            Message::Data([1, 2]),
            Message::Punctuation(Punctuation::Latency(u64::MAX)),
            Message::EndOfStream,
        ];
        for m in sent.clone() {
            tx.offer(m).unwrap();
        }
        tx.flush();
        let mut out = Vec::new();
        while rx.poll(4, &mut out).unwrap() > 0 {}
        assert_eq!(out, sent);
    }

    #[test]
    fn fixed_size_tuples_small_and_large_arrive_intact() {
        let small = [[1u8; 8], [2u8; 8]];
        let mut expected: Vec<_> = small.iter().map(|t| Message::Data(*t)).collect();
        expected.push(Message::EndOfStream);
        assert_eq!(round_trip(&small), expected);

        // At least OUT_OF_LINE_DECODE_BYTES: decoded out of line.
        let mut large = [[0u8; 4096]; 3];
        for (i, t) in large.iter_mut().enumerate() {
            t.iter_mut()
                .enumerate()
                .for_each(|(j, b)| *b = (i * 7 + j) as u8);
        }
        let mut expected: Vec<_> = large.iter().map(|t| Message::Data(*t)).collect();
        expected.push(Message::EndOfStream);
        assert_eq!(round_trip(&large), expected);
    }
}
