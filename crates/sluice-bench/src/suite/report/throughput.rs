//! The throughput section: each transport's rate by tuple size (the grid the plots draw too), and each rate beside its baseline and the peers compared with it.

use super::{peer_cells, ratio, sorted_unique, times, Section, Table};
use crate::foundation::stats::si;
use crate::suite::plots;
use crate::suite::rows::{Row, ORDER};

/// Gbit/s and tuples/s by size (rows) and transport (columns), the papers' layout.
pub(crate) fn throughput_grid(rows: &[Row], experiment: &str, gbit: bool) -> Table {
    let picked: Vec<&Row> = rows
        .iter()
        .filter(|r| r.is(experiment) && r.peer.is_none() && !r.normal())
        .collect();
    let transports: Vec<&str> = ORDER
        .iter()
        .copied()
        .filter(|t| picked.iter().any(|r| r.transport() == *t))
        .collect();
    let (title, unit) = if gbit {
        ("Throughput, Gbit/s (IBM Tables 1 and 5)", "Gbit/s")
    } else {
        ("Throughput, tuples/s (Vega Figure 7b)", "tuples/s")
    };
    let mut header = vec!["tuple bytes"];
    header.extend(transports.iter().copied());
    let mut t = Table::new(
        title,
        format!("Sender -> receiver, facade tuples, {unit} at the receiver (median of the runs)."),
        &header,
    );
    for size in sorted_unique(picked.iter().map(|r| r.size())) {
        let mut row = vec![size.to_string()];
        for tr in &transports {
            let cell = picked
                .iter()
                .find(|r| r.size() == size && r.transport() == *tr)
                .map_or("-".to_string(), |r| {
                    if gbit {
                        format!("{:.3}", r.gbit_per_sec.unwrap_or(0.0))
                    } else {
                        si(r.tps())
                    }
                });
            row.push(cell);
        }
        t.rows.push(row);
    }
    t
}

pub(super) fn throughput_section(rows: &[Row]) -> Section {
    let mut detail = Table::new(
        "Throughput against the baselines and the peers",
        "x = Sluice / other (above 1: Sluice is faster).",
        &[
            "transport",
            "tuple bytes",
            "tuples/s",
            "Gbit/s",
            "baseline",
            "baseline tuples/s",
            "x baseline",
            "peers",
        ],
    );
    for tr in ORDER {
        for r in rows
            .iter()
            .filter(|r| r.is("throughput") && r.transport() == tr && r.peer.is_none())
        {
            let b = r.baseline.clone().unwrap_or_default();
            detail.rows.push(vec![
                tr.to_string(),
                r.size().to_string(),
                si(r.tps()),
                format!("{:.3}", r.gbit_per_sec.unwrap_or(0.0)),
                b.name.clone(),
                si(b.tuples_per_sec),
                times(ratio(r.tps(), b.tuples_per_sec)),
                peer_cells(rows, r),
            ]);
        }
    }
    Section {
        title: "Throughput",
        tables: vec![
            throughput_grid(rows, "throughput", false),
            throughput_grid(rows, "throughput", true),
            detail,
        ],
        plots: vec![plots::THROUGHPUT, plots::THROUGHPUT_GBIT],
    }
}
