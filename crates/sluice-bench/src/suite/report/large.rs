//! The large-messages section: normal tuples of 10 KB to 320 KB at a fixed rate (TurboStream Figure 8a, 8b), and the OSR ring's size swept.

use super::{sorted_unique, us, Section, Table};
use crate::suite::plots;
use crate::suite::rows::Row;

pub(super) fn large_section(rows: &[Row]) -> Section {
    let sweep_ring = |r: &Row| {
        r.transport() == "shm-osr" && r.ring_bytes != Some(crate::suite::matrix::LARGE_RING_BYTES)
    };
    let mut t = Table::new(
        "Large messages (TurboStream Figure 8a, 8b)",
        format!(
            "Normal tuples of 10 KB to 320 KB at a fixed rate; shm-osr with a {} MiB ring (TurboStream's 2 MB OSRBuffer), tcp with the latency profile. Microseconds, one way.",
            crate::suite::matrix::LARGE_RING_BYTES >> 20
        ),
        &[
            "transport",
            "message bytes",
            "messages/s",
            "mean us",
            "p50 us",
            "p99 us",
            "max us",
            "baseline",
            "baseline mean us",
        ],
    );
    // A run may measure one configuration twice (the sweep's message in the experiment's own
    // ring); the first one stands.
    let mut seen = std::collections::HashSet::new();
    for rate in sorted_unique(
        rows.iter()
            .filter(|r| r.is("large"))
            .filter_map(|r| r.target_rate),
    ) {
        for r in rows.iter().filter(|r| {
            r.is("large")
                && r.target_rate == Some(rate)
                && !sweep_ring(r)
                && seen.insert((r.transport().to_string(), r.size(), rate))
        }) {
            let l = r.latency_ns;
            let b = r.baseline.clone().unwrap_or_default();
            t.rows.push(vec![
                r.transport().to_string(),
                r.size().to_string(),
                rate.to_string(),
                l.map_or("-".into(), |l| us(l.mean)),
                l.map_or("-".into(), |l| us(l.p50)),
                l.map_or("-".into(), |l| us(l.p99)),
                l.map_or("-".into(), |l| us(l.max)),
                b.name.clone(),
                b.latency_ns.map_or("-".into(), |l| us(l.mean)),
            ]);
        }
    }
    let mut ring = Table::new(
        "The ring size large messages need (TurboStream Figure 8c)",
        format!(
            "shm-osr, {} KiB messages at {} messages/s, by ring size (TurboStream found 50 to 100 times the message best).",
            crate::suite::matrix::RING_SWEEP_SIZE >> 10,
            crate::suite::matrix::RING_SWEEP_RATE
        ),
        &["ring bytes", "ring / message", "mean us", "p99 us", "max us"],
    );
    for r in rows.iter().filter(|r| {
        r.is("large")
            && r.transport() == "shm-osr"
            && r.size() == crate::suite::matrix::RING_SWEEP_SIZE
            && r.target_rate == Some(crate::suite::matrix::RING_SWEEP_RATE)
    }) {
        let bytes = r.ring_bytes.unwrap_or(0);
        let l = r.latency_ns;
        ring.rows.push(vec![
            bytes.to_string(),
            format!("{:.1}", bytes as f64 / r.size().max(1) as f64),
            l.map_or("-".into(), |l| us(l.mean)),
            l.map_or("-".into(), |l| us(l.p99)),
            l.map_or("-".into(), |l| us(l.max)),
        ]);
    }
    ring.rows
        .sort_by_key(|row| row[0].parse::<usize>().unwrap_or(0));
    ring.rows.dedup_by(|a, b| a[0] == b[0]);
    Section {
        title: "Large messages",
        tables: vec![t, ring],
        plots: vec![plots::LARGE],
    }
}
