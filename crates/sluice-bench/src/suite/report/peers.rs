//! The peers section: what a user would pick instead (ZeroMQ, iceoryx2, ...), measured in the same run by the same sender and receiver code.

use super::{us, Section, Table};
use crate::foundation::stats::si;
use crate::suite::rows::Row;

pub(super) fn peers_section(rows: &[Row]) -> Section {
    let mut t = Table::new(
        "The peers",
        "What a user would pick instead, measured in the same run by the same sender and receiver code. Latency one way: from the shared clock, or half the round trip through a reflector for zmq-tcp (as for Sluice's tcp).",
        &["peer", "bench", "tuple bytes", "tuples/s", "Gbit/s", "p50 us", "p99 us", "compared with"],
    );
    for r in rows.iter().filter(|r| r.peer.is_some()) {
        let (tps, gbit, p50, p99) = if r.skipped {
            let reason = format!("skipped: {}", r.reason.clone().unwrap_or_default());
            (reason, "-".into(), "-".into(), "-".into())
        } else {
            (
                si(r.tps()),
                format!("{:.3}", r.gbit_per_sec.unwrap_or(0.0)),
                r.latency_ns.map_or("-".into(), |l| us(l.p50)),
                r.latency_ns.map_or("-".into(), |l| us(l.p99)),
            )
        };
        let bench = match r.target_rate {
            Some(rate) => format!("latency at {rate}/s"),
            None => r.bench.clone().unwrap_or_default(),
        };
        t.rows.push(vec![
            r.peer.clone().unwrap_or_default(),
            bench,
            r.size().to_string(),
            tps,
            gbit,
            p50,
            p99,
            r.compared_with.join(", "),
        ]);
    }
    Section {
        title: "Peers",
        tables: vec![t],
        plots: vec![],
    }
}
