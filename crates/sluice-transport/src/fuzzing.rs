//! Entry points for fuzzing the decoders of what peers send: the `tcp` hello and frames, the
//! `udp-mq` datagram and the `mpi` batch. The `cargo fuzz` targets in `fuzz/` at the
//! workspace root call them (cargo fuzz builds with `--cfg fuzzing`, which compiles this
//! module; see `fuzz/README.md`), and the proptests below run the same checks in the normal
//! test suite, on random bytes and on mutated valid input, offline and in seconds.
//!
//! Each entry point takes any bytes and panics only where a decoder breaks its promise: a
//! panic of its own, or more messages, or larger tuples, than the input and the receiver's
//! own limits allow. The receivers' buffers are sized from their parameters once
//! ([`FrameReader::capacity`] is checked unchanged), so nothing a peer sends makes them
//! allocate beyond that.

use sluice_types::{BytesTuple, Message, Tuple};

use crate::mpi::wire as mpi_wire;
use crate::mpi::MpiParams;
use crate::parts::Reassembly;
use crate::tcp::frames::FrameReader;
use crate::tcp::wire::{may_be_hello, Framing, HELLO_LEN, SECRET_AT};
use crate::tcp::{JobSecret, TcpParams, SECRET_LEN};
use crate::udp_mq::receiver::Intake;
use crate::udp_mq::{job_tag, UdpMqParams, MAX_PUNCTUATIONS_AWAITING};

/// The secret the entry points' receivers hold.
pub const SECRET: [u8; SECRET_LEN] = [0x5a; SECRET_LEN];
/// The largest tuple of the entry points' edges: small, so that lengths over it are easy to
/// reach.
pub const MAX_TUPLE: usize = 16;
/// The batch budget of the entry points' edges.
pub const BATCH_BYTES: usize = 64;
/// The senders of the entry points' edges.
pub const SENDERS: usize = 2;
/// The queues of the entry points' `udp-mq` edge.
pub const UDP_QUEUES: usize = 2;
/// The largest datagram of the entry points' `udp-mq` edge.
pub const UDP_DATAGRAM_BYTES: usize = 256;

/// The parameters of the entry points' `tcp` edges.
pub fn tcp_params() -> TcpParams {
    TcpParams {
        batch_bytes: BATCH_BYTES,
        max_tuple_bytes: MAX_TUPLE,
        ..TcpParams::default()
    }
}

/// The parameters of the entry points' `udp-mq` edge.
pub fn udp_params() -> UdpMqParams {
    UdpMqParams {
        queues: UDP_QUEUES,
        datagram_bytes: UDP_DATAGRAM_BYTES,
        ..UdpMqParams::default()
    }
}

/// The parameters of the entry points' `mpi` edges.
pub fn mpi_params() -> MpiParams {
    MpiParams {
        batch_bytes: BATCH_BYTES,
        credit: 1,
        max_tuple_bytes: MAX_TUPLE,
    }
}

/// Checks the first [`HELLO_LEN`] bytes of `bytes` as the hello of a connection to a `tcp`
/// receiver of `u64` and of byte tuples: an accepted hello presents the secret and an index
/// in range, and a hello is refused early only if it is not one.
pub fn tcp_hello(bytes: &[u8]) {
    let Some(hello) = bytes.first_chunk::<HELLO_LEN>() else {
        return;
    };
    let secret = JobSecret::from_bytes(SECRET);
    for framing in [framing::<u64>(), framing::<BytesTuple>()] {
        if let Ok(index) = framing.accepts(hello, &secret, SENDERS) {
            assert!(index < SENDERS);
            assert_eq!(hello[SECRET_AT..], SECRET);
            assert!((1..=HELLO_LEN).all(|n| may_be_hello(&hello[..n])));
        }
    }
}

fn framing<T: Tuple>() -> Framing {
    Framing::new::<T>(&tcp_params()).expect("the entry points' parameters are valid")
}

/// Feeds `bytes[1..]`, as the stream of an admitted sender, to the frame decoders of a `tcp`
/// edge of `u64` and one of byte tuples, in reads of `bytes[0]` bytes (at least 1), decoding
/// at most 7 messages at a time.
pub fn tcp_stream(bytes: &[u8]) {
    let Some((&read, stream)) = bytes.split_first() else {
        return;
    };
    tcp_stream_of::<u64>(stream, usize::from(read.max(1)));
    let tuples = tcp_stream_of::<BytesTuple>(stream, usize::from(read.max(1)));
    // A tuple in one record is at most MAX_TUPLE; one sent in parts is no longer than the
    // bytes that carried it.
    assert!(tuples.iter().all(|m| match m {
        Message::Data(t) => t.0.len() <= MAX_TUPLE.max(stream.len()),
        _ => true,
    }));
}

fn tcp_stream_of<T: Tuple>(stream: &[u8], read: usize) -> Vec<Message<T>> {
    let framing = framing::<T>();
    let mut reader = FrameReader::new(&framing);
    let capacity = reader.capacity();
    let mut out = Vec::new();
    let mut rest = stream;
    loop {
        match reader.decode(&framing, 7, &mut out) {
            Err(_) => break,
            Ok(0) if rest.is_empty() => break,
            Ok(0) => {
                let free = reader.free();
                let n = read.min(free.len()).min(rest.len());
                free[..n].copy_from_slice(&rest[..n]);
                reader.filled(n);
                rest = &rest[n..];
            }
            Ok(_) => {}
        }
        assert_eq!(reader.capacity(), capacity, "the buffer never grows");
    }
    // Every message takes at least one byte of the stream.
    assert!(out.len() <= stream.len());
    out
}

/// Feeds the datagrams `bytes` holds, each a length byte and that many bytes, to the intake
/// of a `udp-mq` receiver of byte tuples from [`SENDERS`] senders of the job of [`SECRET`].
pub fn udp_mq_datagrams(bytes: &[u8]) {
    let mut intake = Intake::<BytesTuple>::new(
        job_tag(&JobSecret::from_bytes(SECRET)),
        SENDERS,
        &udp_params(),
    );
    let mut rest = bytes;
    let mut datagrams = 0u64;
    let mut staged = 0;
    while let Some((&len, tail)) = rest.split_first() {
        let (datagram, tail) = tail.split_at(usize::from(len).min(tail.len()));
        rest = tail;
        intake.accept(datagram);
        datagrams += 1;
        for message in intake.take_staged() {
            staged += 1;
            if let Message::Data(tuple) = message {
                assert!(tuple.0.len() <= datagram.len());
            }
        }
        assert!(intake.most_awaiting() <= MAX_PUNCTUATIONS_AWAITING);
    }
    let stats = intake.stats();
    assert!(stats.datagrams + stats.malformed + stats.foreign + stats.late <= datagrams);
    // Every message but an end of stream (one per sender) takes a record of 3 bytes or more.
    assert!(staged <= bytes.len() / 3 + SENDERS);
}

/// Decodes `bytes` as one `mpi` batch of a `u64` edge and of a byte-tuple edge of
/// [`SENDERS`] senders (the receiver refuses a longer message before it reads it), from a
/// sender with no tuple in parts so far; if the batch leaves the stream open, decodes it
/// again as that sender's next batch, so a tuple in parts carries over. A tuple made of
/// parts is at most as long as the batches that carried it.
pub fn mpi_batch(bytes: &[u8]) {
    mpi_batch_of::<u64>(bytes);
    let tuples = mpi_batch_of::<BytesTuple>(bytes);
    assert!(tuples.iter().all(|m| match m {
        Message::Data(t) => t.0.len() <= 2 * bytes.len(),
        _ => true,
    }));
}

fn mpi_batch_of<T: Tuple>(bytes: &[u8]) -> Vec<Message<T>> {
    let framing =
        mpi_wire::Framing::new::<T>(&mpi_params()).expect("the entry points' parameters are valid");
    let mut out = Vec::new();
    if bytes.len() > framing.message_limit() || mpi_wire::sender_of(bytes, SENDERS).is_err() {
        return out;
    }
    let mut parts = Reassembly::default();
    if mpi_wire::decode(&framing, bytes, &mut parts, &mut out) == Ok(mpi_wire::Ending::Open) {
        let _ = mpi_wire::decode(&framing, bytes, &mut parts, &mut out);
    }
    // Every message takes at least one byte of the batches.
    assert!(out.len() <= 2 * bytes.len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sluice_types::Punctuation;

    use crate::tcp::wire::{LEN_PREFIX, RUN_HEADER, TAG_DATA, TAG_END, TAG_PUNCTUATION};
    use crate::udp_mq::wire::{self as udp_wire, Header, TAG_DATA as UDP_DATA, TAG_END as UDP_END};

    fn arb_punctuation() -> impl Strategy<Value = Punctuation> {
        prop_oneof![
            Just(Punctuation::WindowMarker),
            any::<(u64, u32)>().prop_map(|(time, from)| Punctuation::Watermark { time, from }),
            any::<u64>().prop_map(Punctuation::Latency),
            Just(Punctuation::Suspend),
            any::<(u64, u32)>().prop_map(|(n, from)| Punctuation::Checkpoint { n, from }),
        ]
    }

    /// Messages of byte tuples no longer than [`MAX_TUPLE`], without an end of stream.
    fn arb_messages() -> impl Strategy<Value = Vec<Message<BytesTuple>>> {
        let message = prop_oneof![
            4 => prop::collection::vec(any::<u8>(), 0..=MAX_TUPLE)
                .prop_map(|b| Message::Data(BytesTuple(b))),
            1 => arb_punctuation().prop_map(Message::Punctuation),
        ];
        prop::collection::vec(message, 0..12)
    }

    /// One way to spoil valid bytes: change a byte, cut them, or insert a byte.
    #[derive(Debug, Clone)]
    enum Mutation {
        Set(usize, u8),
        Cut(usize),
        Insert(usize, u8),
    }

    fn arb_mutations() -> impl Strategy<Value = Vec<Mutation>> {
        let one = prop_oneof![
            any::<(usize, u8)>().prop_map(|(at, b)| Mutation::Set(at, b)),
            any::<usize>().prop_map(Mutation::Cut),
            any::<(usize, u8)>().prop_map(|(at, b)| Mutation::Insert(at, b)),
        ];
        prop::collection::vec(one, 1..4)
    }

    fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
        for m in mutations {
            let len = bytes.len();
            match *m {
                Mutation::Set(at, b) if len > 0 => bytes[at % len] = b,
                Mutation::Cut(at) => bytes.truncate(at % (len + 1)),
                Mutation::Insert(at, b) => bytes.insert(at % (len + 1), b),
                Mutation::Set(..) => {}
            }
        }
        bytes
    }

    /// The frames a `tcp` sender writes for `messages` and the end of the stream, one frame
    /// per message, laid out from the module's diagram.
    fn tcp_frames(messages: &[Message<BytesTuple>]) -> Vec<u8> {
        let mut stream = Vec::new();
        for m in messages.iter().chain([&Message::EndOfStream]) {
            let mut body = Vec::new();
            match m {
                Message::Data(t) => {
                    body.push(TAG_DATA);
                    body.extend_from_slice(&1u32.to_le_bytes());
                    body.extend_from_slice(&(t.0.len() as u32).to_le_bytes());
                    body.extend_from_slice(&t.0);
                    assert_eq!(body.len(), RUN_HEADER + LEN_PREFIX + t.0.len());
                }
                Message::Punctuation(p) => {
                    body.push(TAG_PUNCTUATION);
                    body.extend_from_slice(&p.to_wire());
                }
                Message::EndOfStream => body.push(TAG_END),
            }
            stream.extend_from_slice(&(body.len() as u32).to_le_bytes());
            stream.extend(body);
        }
        stream
    }

    /// The datagrams (each behind its length byte) sender 0 of a `udp-mq` edge writes for
    /// `tuples`, one per datagram on queue 0, then the end of its stream on every queue.
    fn udp_datagrams(tuples: &[Vec<u8>]) -> Vec<u8> {
        let job = job_tag(&JobSecret::from_bytes(SECRET));
        let data = tuples
            .iter()
            .enumerate()
            .map(|(i, t)| (0, i, i, UDP_DATA, t.clone()));
        let n = tuples.len();
        let ends = (0..UDP_QUEUES).map(|q| {
            let (sequence, first) = if q == 0 { (n, n) } else { (0, 0) };
            (
                q,
                sequence,
                first,
                UDP_END,
                udp_wire::end_payload(0).to_vec(),
            )
        });
        let mut out = Vec::new();
        for (queue, sequence, first_tuple, tag, payload) in data.chain(ends) {
            let mut d = vec![0; udp_wire::HEADER_LEN];
            Header {
                queue: queue as u16,
                queues: UDP_QUEUES as u16,
                count: 1,
                sender: 0,
                job,
                sequence: sequence as u64,
                first_tuple: first_tuple as u64,
            }
            .write(&mut d);
            udp_wire::put_record_header(&mut d, tag, payload.len() as u16);
            d.extend_from_slice(&payload);
            out.push(d.len() as u8);
            out.extend(d);
        }
        out
    }

    /// The batch an `mpi` sender writes for as many of `messages` as fit one with its last
    /// record, which says the stream ended (or, if `abandoned`, that the sender went away);
    /// and the messages it holds.
    fn mpi_bytes(
        messages: &[Message<BytesTuple>],
        abandoned: bool,
    ) -> (Vec<u8>, Vec<Message<BytesTuple>>) {
        let framing = mpi_wire::Framing::new::<BytesTuple>(&mpi_params()).unwrap();
        // One byte of the budget is kept for the last record.
        let mut writer = mpi_wire::BatchWriter::new(1, BATCH_BYTES - 1);
        let mut scratch = Vec::new();
        let mut held = Vec::new();
        for m in messages {
            match m {
                Message::Data(t) => {
                    mpi_wire::encode(&framing, t, &mut scratch).unwrap();
                    if !writer.fits_tuple(&framing, scratch.len()) {
                        break;
                    }
                    writer.push_tuple(&framing, &scratch);
                }
                Message::Punctuation(p) if writer.fits_control() => {
                    writer.push_control(mpi_wire::Control::Punctuation(*p));
                }
                _ => break,
            }
            held.push(m.clone());
        }
        if abandoned {
            writer.push_control(mpi_wire::Control::Abandoned);
        } else {
            writer.push_control(mpi_wire::Control::End);
            held.push(Message::EndOfStream);
        }
        (writer.take(Vec::new()), held)
    }

    fn with_end(messages: &[Message<BytesTuple>]) -> Vec<Message<BytesTuple>> {
        let mut all = messages.to_vec();
        all.push(Message::EndOfStream);
        all
    }

    #[test]
    fn valid_input_decodes_to_what_was_sent() {
        let sent = vec![
            Message::Data(BytesTuple(b"ab".to_vec())),
            Message::Punctuation(Punctuation::Latency(9)),
            Message::Data(BytesTuple(Vec::new())),
        ];
        assert_eq!(
            tcp_stream_of::<BytesTuple>(&tcp_frames(&sent), 5),
            with_end(&sent)
        );
        let (bytes, held) = mpi_bytes(&sent, false);
        assert_eq!(held, with_end(&sent));
        assert_eq!(mpi_batch_of::<BytesTuple>(&bytes), held);
        let mut intake = Intake::<BytesTuple>::new(
            job_tag(&JobSecret::from_bytes(SECRET)),
            SENDERS,
            &udp_params(),
        );
        let datagrams = udp_datagrams(&[b"xy".to_vec()]);
        let mut rest = &datagrams[..];
        while let Some((&len, tail)) = rest.split_first() {
            intake.accept(&tail[..usize::from(len)]);
            rest = &tail[usize::from(len)..];
        }
        assert_eq!(
            Vec::from(intake.take_staged()),
            vec![
                Message::Data(BytesTuple(b"xy".to_vec())),
                Message::EndOfStream
            ]
        );
        let mut hello = framing::<u64>()
            .hello(&JobSecret::from_bytes(SECRET), 1)
            .to_vec();
        hello.extend_from_slice(b"rest");
        tcp_hello(&hello);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_bytes_break_no_decoder(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
            tcp_hello(&bytes);
            tcp_stream(&bytes);
            udp_mq_datagrams(&bytes);
            mpi_batch(&bytes);
        }

        #[test]
        fn mutated_tcp_streams_break_no_decoder(
            messages in arb_messages(),
            read in 1u8..=255,
            mutations in arb_mutations(),
        ) {
            let stream = tcp_frames(&messages);
            prop_assert_eq!(
                tcp_stream_of::<BytesTuple>(&stream, usize::from(read)),
                with_end(&messages)
            );
            tcp_stream(&[[read].as_slice(), &mutate(stream, &mutations)].concat());
        }

        #[test]
        fn mutated_tcp_hellos_break_no_check(index in 0u32..4, mutations in arb_mutations()) {
            let hello = framing::<BytesTuple>().hello(&JobSecret::from_bytes(SECRET), index);
            tcp_hello(&mutate(hello.to_vec(), &mutations));
        }

        #[test]
        fn mutated_udp_datagrams_break_no_decoder(
            tuples in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..6),
            mutations in arb_mutations(),
        ) {
            udp_mq_datagrams(&mutate(udp_datagrams(&tuples), &mutations));
        }

        #[test]
        fn mutated_mpi_batches_break_no_decoder(
            messages in arb_messages(),
            abandoned in any::<bool>(),
            mutations in arb_mutations(),
        ) {
            let (bytes, held) = mpi_bytes(&messages, abandoned);
            prop_assert_eq!(mpi_batch_of::<BytesTuple>(&bytes), held);
            mpi_batch(&mutate(bytes, &mutations));
        }
    }
}
