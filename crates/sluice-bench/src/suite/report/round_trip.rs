//! The round-trip section: tuples through a reflector and back at a fixed rate (the IBM latency test), and the ping-pong with one tuple in flight beside the cache-line hand-offs.

use super::{ratio, sorted_unique, times, us, Section, Table};
use crate::suite::rows::{Row, ORDER};

/// The round-trip table (the IBM latency test): every Sluice measurement and peer that timed
/// round trips through a reflector, by rate, transport and size.
pub(crate) fn round_trip_table(rows: &[Row]) -> Table {
    let mut t = Table::new(
        "Round trip through a reflector (IBM latency test)",
        "The sender stamps each tuple and sends it at a fixed rate to a reflector process on the other core, which sends it back over the same kind of transport; the sender, also the receiver, reads the same clock when it comes back. Raw TCP is tcp's baseline (one write per tuple, the reflector writing back what it reads); the hardware's round trip is twice the cache-line transfer. Microseconds.",
        &[
            "transport",
            "tuple bytes",
            "tuples/s",
            "p50 us",
            "p99 us",
            "p99.9 us",
            "max us",
            "baseline p50 us",
            "baseline p99 us",
            "x baseline p50",
        ],
    );
    let trips = |r: &Row| !r.skipped && r.round_trip_ns.is_some() && !r.ping_pong();
    for rate in sorted_unique(
        rows.iter()
            .filter(|r| trips(r))
            .filter_map(|r| r.target_rate),
    ) {
        let mut seen = std::collections::HashSet::new();
        let names = ORDER.iter().map(|t| t.to_string()).chain(
            rows.iter()
                .filter(|r| trips(r))
                .filter_map(|r| r.peer.clone()),
        );
        for name in names {
            let mut mine: Vec<&Row> = rows
                .iter()
                .filter(|r| {
                    trips(r)
                        && r.target_rate == Some(rate)
                        && r.peer.as_deref().unwrap_or(r.transport()) == name
                })
                .collect();
            mine.sort_by_key(|r| r.size());
            for r in mine {
                if !seen.insert((name.clone(), r.size())) {
                    continue;
                }
                let Some(l) = r.round_trip_ns else { continue };
                let b = r.baseline.clone().unwrap_or_default();
                let bl = b.round_trip_ns;
                t.rows.push(vec![
                    name.clone(),
                    r.size().to_string(),
                    rate.to_string(),
                    us(l.p50),
                    us(l.p99),
                    us(l.p999),
                    us(l.max),
                    bl.map_or("-".into(), |x| format!("{} {}", b.name, us(x.p50))),
                    bl.map_or("-".into(), |x| us(x.p99)),
                    times(bl.and_then(|b| ratio(l.p50, b.p50))),
                ]);
            }
        }
    }
    t
}

/// The ping-pong table: the rings' one-way latency with one tuple in flight, back to back,
/// beside the cache-line ping-pong and the two-line hand-off of the same runs.
pub(super) fn ping_pong_table(rows: &[Row]) -> Table {
    let mut t = Table::new(
        "Ping-pong through a reflector (one tuple in flight)",
        "As the round trip above, but the sender sends the next tuple as soon as the previous one is back, the shape of the cache-line ping-pong (one line both cores write) and of the two-line hand-off (each core writes a line of its own and polls the other's, as in every single-producer queue), both measured at each baseline run. One way = half the round trip. Nanoseconds.",
        &[
            "transport",
            "tuple bytes",
            "p50 ns",
            "p99 ns",
            "cache line ns",
            "x cache line",
            "x hand-off",
        ],
    );
    for name in ORDER {
        for r in rows
            .iter()
            .filter(|r| !r.skipped && r.ping_pong() && r.transport() == name)
        {
            let Some(l) = r.latency_ns else { continue };
            let line = r.baseline.as_ref().and_then(|b| b.latency_ns);
            t.rows.push(vec![
                name.to_string(),
                r.size().to_string(),
                format!("{:.0}", l.p50),
                format!("{:.0}", l.p99),
                line.map_or("-".into(), |b| format!("{:.1}", b.p50)),
                times(line.and_then(|b| ratio(l.p50, b.p50))),
                times(r.p50_ratio_to_handoff),
            ]);
        }
    }
    t
}

pub(super) fn round_trip_section(rows: &[Row]) -> Section {
    Section {
        title: "Round trip",
        tables: vec![round_trip_table(rows), ping_pong_table(rows)],
        plots: vec![],
    }
}
