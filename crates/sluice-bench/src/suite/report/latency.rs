//! The latency section: one-way latency percentiles of each transport at a fixed rate, beside its baseline and the peers (Vega Figure 7a, the IBM latency test).

use super::{peer_cells, ratio, sorted_unique, times, us, Section, Table};
use crate::foundation::stats::LatencySummary;
use crate::suite::plots;
use crate::suite::rows::{Row, ORDER};

pub(super) fn latency_section(rows: &[Row]) -> Section {
    let mut t = Table::new(
        "Latency (Vega Figure 7a, IBM latency test)",
        "One-way latency. In process and over shared memory (method \"one way\"): the receiver subtracts the CLOCK_MONOTONIC send time carried in the tuple (Vega Figure 7a). Over the network (method \"RTT/2\"): half the round trip from the sender through a reflector process on the other core and back over the same kind of transport (Vega V.A.1), the raw-TCP baseline and ZeroMQ over tcp:// the same way. Microseconds; x = Sluice p50 / other p50 (below 1: Sluice is faster).",
        &[
            "transport",
            "method",
            "tuple bytes",
            "tuples/s",
            "p50 us",
            "p99 us",
            "p99.9 us",
            "max us",
            "baseline p50 us",
            "x baseline",
            "peers p50",
        ],
    );
    for rate in sorted_unique(
        rows.iter()
            .filter(|r| r.is("latency"))
            .filter_map(|r| r.target_rate),
    ) {
        for tr in ORDER {
            for r in rows.iter().filter(|r| {
                r.is("latency")
                    && r.peer.is_none()
                    && r.transport() == tr
                    && r.target_rate == Some(rate)
            }) {
                let l = r.latency_ns.unwrap_or(LatencySummary {
                    p50: 0.0,
                    p99: 0.0,
                    p999: 0.0,
                    mean: 0.0,
                    max: 0.0,
                    samples: 0,
                });
                let b = r.baseline.clone().unwrap_or_default();
                let bl = b.latency_ns.map(|x| x.p50);
                t.rows.push(vec![
                    tr.to_string(),
                    r.method().to_string(),
                    r.size().to_string(),
                    rate.to_string(),
                    us(l.p50),
                    us(l.p99),
                    us(l.p999),
                    us(l.max),
                    format!("{} {}", b.name, bl.map_or("-".into(), us)),
                    times(bl.and_then(|b| ratio(l.p50, b))),
                    peer_cells(rows, r),
                ]);
            }
        }
    }
    Section {
        title: "Latency",
        tables: vec![t],
        plots: vec![plots::LATENCY],
    }
}
