//! How to carry a tuple larger than a ring's slot between two threads of one host: the two
//! designs the `parts` module chose between, measured side by side on the same tuples.
//!
//! - **parts**: the `shm-osr` and `shm-vega` transports as they are, the tuple written in
//!   slot-sized parts and reassembled (`sluice_transport::parts`);
//! - **overflow segment**: the sender creates a shared segment per tuple and copies the tuple
//!   into it, hands its name over a channel, and the receiver opens the segment, decodes the
//!   tuple out of it and removes it: what an overflow region costs before any bookkeeping.
//!
//! `cargo run --release -p sluice-transport --example large_tuples` prints, for each tuple
//! size, the median over 5 runs of the tuples per second each design sustains.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use sluice_shm::{Segment, SegmentKind, SegmentName, SegmentSpec};
use sluice_transport::TransportSpec;
use sluice_types::{BytesTuple, Message, Tuple};

/// How long each run sends.
const RUN: Duration = Duration::from_millis(400);
/// Runs per design and size; the median is printed.
const RUNS: usize = 5;

/// Tuples per second through `spec`, sender and receiver in two threads.
fn parts(spec: &TransportSpec, len: usize) -> f64 {
    let (mut tx, mut rx) = spec.connect_typed::<BytesTuple>().unwrap();
    let tuple = BytesTuple(vec![7; len]);
    let sender = std::thread::spawn(move || {
        let start = Instant::now();
        let mut sent = 0u64;
        while start.elapsed() < RUN {
            let mut message = Message::Data(tuple.clone());
            while let Err(refused) = tx.offer(message) {
                message = refused.message;
                tx.flush();
            }
            sent += 1;
        }
        let mut end = Message::EndOfStream;
        while let Err(refused) = tx.offer(end) {
            end = refused.message;
            tx.flush();
        }
        while tx.pending() {
            tx.flush();
        }
        tx.flush();
        sent
    });
    let start = Instant::now();
    let mut out = Vec::new();
    let mut received = 0u64;
    loop {
        out.clear();
        rx.poll(16, &mut out).unwrap();
        for message in &out {
            match message {
                Message::Data(t) => received += u64::from(t.0.len() == len),
                Message::EndOfStream => {
                    let elapsed = start.elapsed().as_secs_f64();
                    assert_eq!(sender.join().unwrap(), received, "every tuple arrives");
                    return received as f64 / elapsed;
                }
                Message::Punctuation(_) => {}
            }
        }
    }
}

/// Tuples per second through a segment per tuple, sender and receiver in two threads.
fn overflow_segments(len: usize) -> f64 {
    const KIND: SegmentKind = SegmentKind::new(*b"OVERFLOW");
    let spec = SegmentSpec {
        kind: KIND,
        layout_version: 1,
        capacities: [len as u64, 0],
        data_len: len,
    };
    let (names, arrivals) = mpsc::sync_channel::<SegmentName>(4);
    let job = format!("x{}", std::process::id());
    let tuple = BytesTuple(vec![7; len]);
    let sender = std::thread::spawn(move || {
        let start = Instant::now();
        let mut sent = 0u64;
        let mut encoded = Vec::with_capacity(len + 8);
        while start.elapsed() < RUN {
            encoded.clear();
            tuple.encode(&mut encoded).unwrap();
            let name = SegmentName::new(&job, &format!("t{sent}")).unwrap();
            let mut segment = Segment::create(&name, &spec).unwrap();
            let n = encoded.len().min(segment.len());
            // SAFETY: the data area is valid for `segment.len()` bytes of writes while
            // `segment` lives, no other handle to it exists yet, and `n` is within it.
            unsafe { std::ptr::copy_nonoverlapping(encoded.as_ptr(), segment.as_ptr(), n) };
            segment.keep_on_drop();
            drop(segment);
            names.send(name).unwrap();
            sent += 1;
        }
        sent
    });
    let start = Instant::now();
    let mut received = 0u64;
    for name in arrivals {
        let segment = Segment::open(&name, &spec).unwrap();
        // SAFETY: the data area is valid for `segment.len()` bytes of reads while `segment`
        // lives, and the sender finished writing before it sent the name.
        let bytes = unsafe { std::slice::from_raw_parts(segment.as_ptr(), segment.len()) };
        let decoded = BytesTuple::decode(bytes).unwrap();
        received += u64::from(decoded.0.len() == len);
        segment.remove().unwrap();
    }
    let elapsed = start.elapsed().as_secs_f64();
    assert_eq!(sender.join().unwrap(), received, "every tuple arrives");
    received as f64 / elapsed
}

fn median(mut runs: Vec<f64>) -> f64 {
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

fn main() {
    let vega = TransportSpec::ShmVega {
        slot_bytes: 1024,
        slots: 1024,
    };
    let osr = TransportSpec::ShmOsr {
        capacity_bytes: 1 << 20,
        batch_bytes: 16 << 10,
    };
    println!(
        "{:>10}  {:>22}  {:>22}  {:>22}",
        "tuple", "parts shm-vega (1 KiB)", "parts shm-osr (1 MiB)", "segment per tuple"
    );
    for len in [4 << 10, 64 << 10, 1 << 20, 16 << 20] {
        let rate = |f: &dyn Fn() -> f64| median((0..RUNS).map(|_| f()).collect());
        let vega = rate(&|| parts(&vega, len));
        let osr = rate(&|| parts(&osr, len));
        let segments = rate(&|| overflow_segments(len));
        let cell = |r: f64| format!("{r:>9.0}/s {:>6.2} GB/s", r * len as f64 / 1e9);
        println!(
            "{:>7} KiB  {:>22}  {:>22}  {:>22}",
            len >> 10,
            cell(vega),
            cell(osr),
            cell(segments)
        );
    }
}
