//! The baselines section: the hardware's own figures (`sluice bench baseline`: what nothing between two cores can beat) and raw TCP on loopback, one write per tuple.

use super::{Section, Table};
use crate::foundation::stats::si;
use crate::suite::rows::Row;

pub(super) fn hardware_section(rows: &[Row]) -> Section {
    let mut tables = Vec::new();
    if let Some(h) = rows.iter().find(|r| r.is("hardware")) {
        let mut t = Table::new(
            "The hardware",
            "`sluice bench baseline`: what nothing between two cores can beat.",
            &["measure", "figure"],
        );
        t.rows.push(vec![
            "cache line one way, core 0 -> 1".into(),
            h.cacheline_oneway_ns
                .map_or("- (one core)".into(), |ns| format!("{ns:.1} ns")),
        ]);
        for (what, figure) in [
            (
                "two lines, one writer each (a queue's hand-off), one way",
                h.handoff_oneway_ns,
            ),
            (
                "one line, clock-stamped one-way (the least a stamped latency can show)",
                h.stamped_oneway_ns,
            ),
        ] {
            if let Some(ns) = figure {
                t.rows.push(vec![what.into(), format!("{ns:.1} ns")]);
            }
        }
        for m in &h.memcpy {
            t.rows.push(vec![
                format!("memcpy, one core, {} KiB", m.bytes >> 10),
                format!("{:.1} Gbit/s", m.gbit_per_sec),
            ]);
        }
        tables.push(t);
    }
    let mut raw = Table::new(
        "Raw TCP on loopback",
        "One blocking write() per tuple on a TCP_NODELAY socket, measured beside the tcp throughput runs (the IBM report's \"tcp\" column).",
        &["tuple bytes", "tuples/s", "Gbit/s"],
    );
    for r in rows
        .iter()
        .filter(|r| r.is("throughput") && r.transport() == "tcp")
    {
        if let Some(b) = &r.baseline {
            raw.rows.push(vec![
                r.size().to_string(),
                si(b.tuples_per_sec),
                format!("{:.3}", b.gbit_per_sec),
            ]);
        }
    }
    if !raw.rows.is_empty() {
        tables.push(raw);
    }
    Section {
        title: "Baselines",
        tables,
        plots: vec![],
    }
}
