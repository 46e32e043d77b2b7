//! How fast the feed is: nanoseconds per message to generate, encode and decode packets, and
//! the rate the sender achieves against the rate asked, to a local UDP socket.
//!
//! ```sh
//! cargo run --release -p sluice-feed --example feed_speed [-- MULTIPLE ...]
//! ```
//!
//! Without arguments the sender is measured at 1, 25 and 100 x the February 2008 OPRA rate, a
//! second each. Times are the thread's CPU time, so that other work on a busy machine does not
//! count; the sender's includes the kernel's work in its system calls.

use std::net::UdpSocket;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use sluice_feed::{
    decode_packet, encode_packet, fast::declared_count, send, Destinations, Feed, FeedConfig,
    SendOptions,
};

const PACKETS: usize = 200_000;
/// Packets of the decode and encode working set.
const HOT_PACKETS: usize = 4_096;
/// Times the working set is decoded and encoded.
const ROUNDS: usize = 50;

/// The CPU time this thread has used.
fn cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn main() {
    let config = FeedConfig::default();
    let mut feed = Feed::new(&config).expect("the default config is valid");
    let mut packets = vec![Vec::new(); PACKETS];
    let started = cpu_time();
    let mut messages = 0;
    for (n, packet) in packets.iter_mut().enumerate() {
        messages += feed.next_packet(n % config.channels, 0, packet);
    }
    let generate = cpu_time() - started;
    let bytes: usize = packets.iter().map(Vec::len).sum();
    println!(
        "{PACKETS} packets, {messages} messages ({:.2} per packet), {:.1} bytes per message \
         with the header, {:.1} bytes per packet",
        messages as f64 / PACKETS as f64,
        bytes as f64 / messages as f64,
        bytes as f64 / PACKETS as f64
    );
    let per_message = |d: Duration| d.as_nanos() as f64 / messages as f64;
    println!(
        "generate and encode: {:.1} ns per message",
        per_message(generate)
    );

    // Decode and encode a working set that stays in cache, as a feed handler's buffers do,
    // ROUNDS times over.
    let hot = &packets[..HOT_PACKETS];
    let hot_messages: usize = hot.iter().map(|p| usize::from(declared_count(p))).sum();
    let per_hot_message = |d: Duration| d.as_nanos() as f64 / (hot_messages * ROUNDS) as f64;
    let mut decoded = Vec::with_capacity(64);
    let started = cpu_time();
    for _ in 0..ROUNDS {
        for packet in hot {
            decode_packet(packet, &mut decoded).expect("a generated packet decodes");
        }
    }
    println!(
        "decode: {:.1} ns per message",
        per_hot_message(cpu_time() - started)
    );

    let decoded: Vec<_> = hot
        .iter()
        .map(|packet| {
            let mut messages = Vec::new();
            let header = decode_packet(packet, &mut messages).expect("it decodes");
            (header, messages)
        })
        .collect();
    let mut encoded = Vec::with_capacity(2048);
    let started = cpu_time();
    for _ in 0..ROUNDS {
        for (header, messages) in &decoded {
            encode_packet(header, messages, &mut encoded);
        }
    }
    println!(
        "encode: {:.1} ns per message",
        per_hot_message(cpu_time() - started)
    );

    let multiples: Vec<f64> = match std::env::args().skip(1).map(|a| a.parse()).collect() {
        Ok(m) if !Vec::is_empty(&m) => m,
        Ok(_) => vec![1.0, 25.0, 100.0],
        Err(e) => {
            eprintln!("usage: feed_speed [MULTIPLE ...]: {e}");
            std::process::exit(1);
        }
    };
    // Sockets nobody reads: the kernel drops what overflows them, as it would for a slow reader.
    let sinks: Vec<UdpSocket> = (0..config.channels)
        .map(|_| UdpSocket::bind("127.0.0.1:0").expect("a local socket"))
        .collect();
    let addresses: Vec<_> = sinks.iter().map(|s| s.local_addr().unwrap()).collect();
    for multiple in multiples {
        let options = SendOptions {
            duration: Some(Duration::from_secs(1)),
            ..SendOptions::new(
                config.clone(),
                Destinations::Unicast(addresses.clone()),
                multiple,
            )
        };
        let cpu_before = cpu_time();
        match send(&options, &AtomicBool::new(false)) {
            Ok(report) => {
                let cpu = cpu_time() - cpu_before;
                println!(
                    "send at {multiple} x: {:.0} packets/s of {:.0} asked, {} sendmmsg calls, at \
                     worst {:.0} us behind; {:.0}% of a core, {:.2} us a packet (the kernel's \
                     loopback delivery included)",
                    report.achieved_packets_per_sec,
                    report.target_packets_per_sec.unwrap_or(0.0),
                    report.system_calls,
                    report.max_lag.as_secs_f64() * 1e6,
                    100.0 * cpu.as_secs_f64() / report.elapsed.as_secs_f64(),
                    cpu.as_secs_f64() * 1e6 / report.packets.max(1) as f64
                )
            }
            Err(e) => eprintln!("send at {multiple} x: {e}"),
        }
    }
}
