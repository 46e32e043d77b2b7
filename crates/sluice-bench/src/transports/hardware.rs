//! `sluice bench baseline`: what the hardware itself can do, the yardstick every transport
//! figure is compared with.
//!
//! - **Cache-line ping-pong**: two threads pinned to cores 0 and 1 take turns incrementing one
//!   counter on its own cache line; each turn moves the line from one core to the other, so
//!   the one-way time is the round trip over two. Nothing between two cores can be faster.
//! - **Two-line hand-off**: the same turns, but each thread writes a line of its own and polls
//!   the other's, as every single-producer queue does (the sender writes the slot, the
//!   receiver only reads it). Each turn then costs two transfers where the ping-pong costs
//!   one: the writer must first take the line back from the poller's cache, then the poller
//!   misses on it. In the ping-pong the writer got the line for writing with the read that
//!   ended its own wait. On the development VM's near placement this reads 1.6-2x the
//!   ping-pong, on a far one about 1.1x.
//! - **Clock-stamped one-way through one line**: core 0 stamps a counter with the monotonic
//!   clock every few microseconds and stores both on one line; core 1 polls the line and reads
//!   the clock when the counter moves. The median of arrival minus stamp is the least a
//!   latency benchmark that stamps tuples (`--method one-way-clock`) can report between these
//!   cores: one line crossing from a standing start, plus two clock reads. It sits well above
//!   the ping-pong's one-way time, whose threads read no clock and keep the line moving.
//! - **memcpy bandwidth of one core**: `copy_from_slice` between two buffers, in cache (16 KiB,
//!   the largest tuple the papers use) and from memory (64 MiB). A shared-memory throughput
//!   run's baseline copies the tuple size, and also copies it into the successive places of a
//!   region the ring's size: one core doing a sender's writes through the same footprint, with
//!   no second core reading them.
//!
//! Each figure is the median of `--repeat` runs, after a warm-up run.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use clap::Args;
use serde::Serialize;
use sluice_sync::CachePadded;
use sluice_types::monotonic_ns;

use crate::foundation::args::{checked_repeat, Bench, Settings};
use crate::foundation::machine::{commit, cores, cpu};
use crate::foundation::record::RunFigures;
use crate::foundation::stats::{gbit_per_sec, median, LatencySummary};
use crate::foundation::warnings::{self, Warning};

/// Options of `sluice bench baseline`.
#[derive(Debug, Clone, Args)]
pub struct BaselineArgs {
    /// Runs of each measurement; the result is the median.
    #[arg(long, value_name = "R", default_value_t = 5)]
    pub repeat: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The hardware's figures.
#[derive(Debug, Clone, Serialize)]
pub struct HardwareResult {
    /// Always `baseline`.
    pub bench: &'static str,
    /// One-way cache-line transfer between cores 0 and 1 in ns (median), or `None` on a
    /// single-core machine.
    pub cacheline_oneway_ns: Option<f64>,
    /// One-way time of the two-line hand-off between cores 0 and 1 in ns (median), or `None`
    /// on a single-core machine.
    pub handoff_oneway_ns: Option<f64>,
    /// Clock-stamped one-way time through one line between cores 0 and 1 in ns (median of the
    /// runs' medians), or `None` on a single-core machine.
    pub stamped_oneway_ns: Option<f64>,
    /// Whether the ping-pong threads were pinned to two distinct cores.
    pub pinned: bool,
    /// memcpy bandwidth of one core.
    pub memcpy: Vec<MemcpyFigure>,
    /// Figures that cannot be true as printed (the hand-off below the ping-pong, repeats that
    /// disagree), each with the rule it broke; empty when none.
    pub warnings: Vec<Warning>,
    /// The commit built.
    pub commit: &'static str,
    /// The CPU model.
    pub cpu: String,
    /// Cores available.
    pub cores: usize,
}

/// memcpy bandwidth for one buffer size.
#[derive(Debug, Clone, Serialize)]
pub struct MemcpyFigure {
    /// Bytes per copy.
    pub bytes: usize,
    /// Median Gbit/s over the runs.
    pub gbit_per_sec: f64,
}

const ROUND_TRIPS: u64 = 200_000;
const MEMCPY_SIZES: [usize; 2] = [16 << 10, 64 << 20];
/// Bytes each memcpy measurement moves in total.
const MEMCPY_VOLUME: usize = 2 << 30;

/// Measures and prints the hardware baseline.
pub fn main(args: &BaselineArgs) -> anyhow::Result<()> {
    let result = measure(checked_repeat(args.repeat)?, ROUND_TRIPS, MEMCPY_VOLUME);
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&result)?)?;
    } else {
        match result.cacheline_oneway_ns {
            Some(ns) => writeln!(
                out,
                "cache-line one-way, cores 0 -> 1{}: {ns:.1} ns",
                if result.pinned { "" } else { " (unpinned)" }
            )?,
            None => writeln!(out, "cache-line one-way: needs two cores")?,
        }
        if let Some(ns) = result.handoff_oneway_ns {
            writeln!(
                out,
                "two lines, one writer each (a queue's hand-off), cores 0 -> 1: {ns:.1} ns"
            )?;
        }
        if let Some(ns) = result.stamped_oneway_ns {
            writeln!(
                out,
                "one line, clock-stamped one-way, cores 0 -> 1: {ns:.1} ns"
            )?;
        }
        for m in &result.memcpy {
            writeln!(
                out,
                "memcpy, one core, {} KiB: {:.1} Gbit/s",
                m.bytes >> 10,
                m.gbit_per_sec
            )?;
        }
        writeln!(
            out,
            "commit {}, {}, {} core(s)",
            result.commit, result.cpu, result.cores
        )?;
        write!(out, "{}", warnings::lines(&result.warnings))?;
    }
    Ok(())
}

/// Measures everything `repeat` times (plus a warm-up) with the given amounts of work.
pub fn measure(repeat: usize, round_trips: u64, memcpy_volume: usize) -> HardwareResult {
    let pinned = cores() >= 2;
    // Every run of each, for the medians and the spread between them.
    let bounced = |bounce: fn(u64) -> f64| {
        pinned.then(|| {
            bounce(round_trips / 10);
            (0..repeat).map(|_| bounce(round_trips)).collect::<Vec<_>>()
        })
    };
    let (cacheline_runs, handoff_runs) = (bounced(ping_pong), bounced(handoff));
    let cacheline_oneway_ns = cacheline_runs.as_deref().map(median);
    let handoff_oneway_ns = handoff_runs.as_deref().map(median);
    let floor = handoff_oneway_ns
        .zip(cacheline_oneway_ns)
        .and_then(|(handoff, floor)| {
            warnings::below_floor(
                ("the two-line hand-off", handoff, "ns"),
                ("the one-line ping-pong", floor, "ns"),
                "moves one line where the hand-off moves two",
            )
        });
    let spreads = [
        ("the one-line ping-pong", &cacheline_runs),
        ("the two-line hand-off", &handoff_runs),
    ]
    .map(|(what, runs)| {
        runs.as_deref()
            .and_then(|runs| warnings::wide_spread(what, runs, "ns"))
    });
    let stamped_oneway_ns = pinned.then(|| {
        let messages = round_trips / 10;
        median(
            &(0..repeat)
                .map(|_| stamped_one_way(messages))
                .collect::<Vec<_>>(),
        )
    });
    let memcpy = MEMCPY_SIZES
        .iter()
        .map(|&bytes| {
            memcpy_gbit(bytes, memcpy_volume / 10);
            MemcpyFigure {
                bytes,
                gbit_per_sec: median(
                    &(0..repeat)
                        .map(|_| memcpy_gbit(bytes, memcpy_volume))
                        .collect::<Vec<_>>(),
                ),
            }
        })
        .collect();
    HardwareResult {
        bench: "baseline",
        cacheline_oneway_ns,
        handoff_oneway_ns,
        stamped_oneway_ns,
        pinned,
        memcpy,
        warnings: [floor].into_iter().chain(spreads).flatten().collect(),
        commit: commit(),
        cpu: cpu(),
        cores: cores(),
    }
}

/// One-way ns of a cache line bounced `round_trips` times between cores 0 and 1.
pub(crate) fn ping_pong(round_trips: u64) -> f64 {
    let line = CachePadded::new(AtomicU64::new(0));
    turns(round_trips, &line, &line)
}

/// One-way ns of the two-line hand-off, `round_trips` times between cores 0 and 1.
pub(crate) fn handoff(round_trips: u64) -> f64 {
    let there = CachePadded::new(AtomicU64::new(0));
    let back = CachePadded::new(AtomicU64::new(0));
    turns(round_trips, &there, &back)
}

/// One-way ns of `round_trips` turns between cores 0 and 1: core 0 stores an odd count to
/// `there` and waits for the next even count in `back`, which core 1 stores when it sees the
/// odd one (`there` and `back` may be one line).
fn turns(round_trips: u64, there: &AtomicU64, back: &AtomicU64) -> f64 {
    let pin = |core| core_affinity::set_for_current(core_affinity::CoreId { id: core });
    std::thread::scope(|s| {
        s.spawn(|| {
            pin(1);
            for i in 0..round_trips {
                // SYNC: Acquire/Release with the other thread's store: each turn hands the line
                // over; the ordering is what a real hand-off of a tuple would need.
                while there.load(Ordering::Acquire) != 2 * i + 1 {
                    std::hint::spin_loop();
                }
                back.store(2 * i + 2, Ordering::Release);
            }
        });
        // The timing side runs in its own thread too, so the caller's affinity is untouched.
        let timer = s.spawn(|| {
            pin(0);
            let start = Instant::now();
            for i in 0..round_trips {
                // SYNC: pairs with the other thread's Release store of the even value.
                there.store(2 * i + 1, Ordering::Release);
                while back.load(Ordering::Acquire) != 2 * i + 2 {
                    std::hint::spin_loop();
                }
            }
            start.elapsed().as_nanos() as f64 / (2 * round_trips) as f64
        });
        timer.join().unwrap_or(f64::NAN)
    })
}

/// How long core 0 waits between two stamped messages, so each one starts from a quiet line.
const STAMP_GAP_NS: u64 = 5_000;

/// A counter and the clock reading it was sent at, on one line.
#[derive(Default)]
struct StampedLine {
    sent: AtomicU64,
    stamp_ns: AtomicU64,
}

/// Median ns from core 0's clock reading to core 1's, for `messages` messages through one line.
pub(crate) fn stamped_one_way(messages: u64) -> f64 {
    let line = CachePadded::new(StampedLine::default());
    let pin = |core| core_affinity::set_for_current(core_affinity::CoreId { id: core });
    std::thread::scope(|s| {
        let receiver = s.spawn(|| {
            pin(1);
            let mut delays = Vec::with_capacity(messages as usize);
            let mut seen = 0;
            while seen < messages {
                // SYNC: pairs with the sender's Release store of `sent`: its stamp is visible.
                let sent = line.sent.load(Ordering::Acquire);
                if sent == seen {
                    std::hint::spin_loop();
                    continue;
                }
                let now = monotonic_ns();
                // SYNC: ordered by the Acquire load above.
                delays.push(now.saturating_sub(line.stamp_ns.load(Ordering::Relaxed)) as f64);
                seen = sent;
            }
            median(&delays)
        });
        s.spawn(|| {
            pin(0);
            for i in 1..=messages {
                let due = monotonic_ns() + STAMP_GAP_NS;
                while monotonic_ns() < due {
                    std::hint::spin_loop();
                }
                // SYNC: published by the Release store of `sent` below.
                line.stamp_ns.store(monotonic_ns(), Ordering::Relaxed);
                // SYNC: pairs with the receiver's Acquire load.
                line.sent.store(i, Ordering::Release);
            }
        });
        receiver.join().unwrap_or(f64::NAN)
    })
}

/// The destination starts this far past a page boundary relative to the source: on some CPUs
/// (seen on AMD EPYC under KVM) `rep movsb` between buffers at the same offset within a 4 KiB
/// page runs twenty times slower, which would make a meaningless yardstick.
const DESTINATION_SKEW: usize = 64;

/// Gbit/s of copying `bytes`-sized buffers until `volume` bytes moved.
pub(crate) fn memcpy_gbit(bytes: usize, volume: usize) -> f64 {
    memcpy_through_gbit(bytes, bytes, volume)
}

/// Gbit/s of copying one `bytes`-sized buffer into the successive `bytes`-sized places of a
/// `region`-byte destination (wrapping round, as a sender fills a ring) until `volume` bytes
/// moved.
pub(crate) fn memcpy_through_gbit(bytes: usize, region: usize, volume: usize) -> f64 {
    let from = vec![0x5au8; bytes];
    let places = (region / bytes.max(1)).max(1);
    let mut to = vec![0u8; places * bytes + DESTINATION_SKEW];
    let to = &mut to[DESTINATION_SKEW..];
    let copies = (volume / bytes.max(1)).max(1);
    let start = Instant::now();
    for i in 0..copies {
        let at = i % places * bytes;
        let place = &mut to[at..at + bytes];
        place.copy_from_slice(std::hint::black_box(&from));
        std::hint::black_box(place);
    }
    (copies * bytes * 8) as f64 / start.elapsed().as_secs_f64() / 1e9
}

/// Round trips of the short ping-pong that records where the host put the two cores during a
/// throughput run's memcpy baseline: a few milliseconds.
const PLACEMENT_TRIPS: u64 = 20_000;

/// The most copies (a power of two) of the memcpy through a region the ring's size: with tiny
/// tuples, a gibibyte of copies would take a second per baseline run.
const RING_MEMCPY_COPIES_LOG2: u32 = 24;

/// Messages of the clock-stamped one-line baseline of a latency run: a tenth of a second.
const STAMPED_MESSAGES: u64 = 20_000;

/// The hardware baseline of a shared-memory run: the cache-line transfer (its one-way time,
/// and twice that as the round trip when latency is measured through a reflector) or the
/// memcpy rate.
pub(crate) fn hardware_run(s: &Settings) -> RunFigures {
    let two_cores = cores() >= 2;
    match s.bench {
        Bench::Latency { .. } => {
            const TRIPS: u64 = 200_000;
            let ns = ping_pong(TRIPS);
            let reflected = s.method.reflects();
            RunFigures {
                tuples: 0,
                window_s: 0.0,
                tuples_per_sec: 0.0,
                gbit_per_sec: 0.0,
                latency_ns: Some(LatencySummary::flat(ns, TRIPS)),
                round_trip_ns: reflected.then(|| LatencySummary::flat(2.0 * ns, TRIPS)),
                loss: None,
                cacheline_ns: None,
                handoff_ns: two_cores.then(|| handoff(TRIPS)),
                ring_memcpy_gbit: None,
                stamped_ns: (!reflected && two_cores).then(|| stamped_one_way(STAMPED_MESSAGES)),
            }
        }
        Bench::Throughput => {
            let gbit = memcpy_gbit(s.size, 1 << 30);
            let rate = gbit * 1e9 / 8.0 / s.size as f64;
            RunFigures {
                tuples: 0,
                window_s: 0.0,
                tuples_per_sec: rate,
                gbit_per_sec: gbit_per_sec(rate, s.size),
                latency_ns: None,
                round_trip_ns: None,
                loss: None,
                cacheline_ns: two_cores.then(|| ping_pong(PLACEMENT_TRIPS)),
                handoff_ns: None,
                ring_memcpy_gbit: Some(memcpy_through_gbit(
                    s.size,
                    s.ring_bytes,
                    (1 << 30).min(s.size << RING_MEMCPY_COPIES_LOG2),
                )),
                stamped_ns: None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_measurement_gives_every_figure() {
        let r = measure(1, 1_000, 1 << 20);
        assert_eq!(r.memcpy.len(), 2);
        assert!(r.memcpy.iter().all(|m| m.gbit_per_sec > 0.0));
        if cores() >= 2 {
            assert!(r.cacheline_oneway_ns.is_some_and(|ns| ns > 0.0));
            assert!(r.handoff_oneway_ns.is_some_and(|ns| ns > 0.0));
            assert!(r.stamped_oneway_ns.is_some_and(|ns| ns > 0.0));
        }
        // Through a region: whole places only, and at least one however small the region.
        for region in [8 << 10, 5000, 100] {
            assert!(memcpy_through_gbit(1024, region, 1 << 20) > 0.0, "{region}");
        }
        let json = serde_json::to_value(&r).unwrap();
        for key in [
            "bench",
            "cacheline_oneway_ns",
            "handoff_oneway_ns",
            "stamped_oneway_ns",
            "memcpy",
            "commit",
            "cpu",
            "cores",
        ] {
            assert!(json.get(key).is_some(), "{key}");
        }
    }
}
