//! The fan-out section: one sender to several receivers, aggregate Gbit/s beside raw TCP (IBM Table 6), and each receiver's share against the hand-written baseline.

use super::{ratio, sorted_unique, times, Section, Table};
use crate::foundation::stats::si;
use crate::suite::plots;
use crate::suite::rows::{Row, ORDER};

/// The transport whose fan-out baseline (raw TCP, one writer to every socket) the fan-out
/// grid shows as a column of its own.
pub(super) const RAW_TCP_OF: &str = "tcp";

/// Aggregate Gbit/s by receivers (rows) and transport x size (columns), IBM Table 6's layout,
/// with raw TCP (the baseline of `tcp`, measured in the same run) beside the transports.
pub(crate) fn fanout_grid(rows: &[Row]) -> Table {
    let picked: Vec<&Row> = rows.iter().filter(|r| r.is("fanout")).collect();
    // (transport, size, whether the column is that transport's baseline)
    let columns: Vec<(String, usize, bool)> = sorted_unique(picked.iter().map(|r| r.size()))
        .into_iter()
        .flat_map(|size| {
            ORDER
                .iter()
                .filter(|t| {
                    picked
                        .iter()
                        .any(|r| r.transport() == **t && r.size() == size)
                })
                .flat_map(move |t| {
                    let raw = (*t == RAW_TCP_OF).then(|| (t.to_string(), size, true));
                    std::iter::once((t.to_string(), size, false)).chain(raw)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let header: Vec<String> = std::iter::once("receivers".to_string())
        .chain(columns.iter().map(|(t, s, raw)| {
            if *raw {
                format!("raw TCP {s} B")
            } else {
                format!("{t} {s} B")
            }
        }))
        .collect();
    let mut t = Table {
        title: "Fan-out, aggregate Gbit/s (IBM Table 6)".into(),
        note: "One sender sends every tuple to each receiver on the same host; the figure is the sum over the receivers (each receiver's mean rate is in the next table). Raw TCP is one hand-written writer sending each tuple to every socket with a write each (IBM's plain TCP), measured in the same run as tcp.".into(),
        header,
        rows: Vec::new(),
    };
    for n in sorted_unique(picked.iter().filter_map(|r| r.receivers)) {
        let mut row = vec![n.to_string()];
        for (tr, size, raw) in &columns {
            let figure = picked
                .iter()
                .find(|r| r.transport() == tr && r.size() == *size && r.receivers == Some(n))
                .map(|r| {
                    if *raw {
                        r.baseline.as_ref().map_or(0.0, |b| b.gbit_per_sec)
                    } else {
                        r.gbit_per_sec.unwrap_or(0.0)
                    }
                });
            row.push(figure.map_or("-".into(), |g| format!("{g:.3}")));
        }
        t.rows.push(row);
    }
    t
}

pub(super) fn fanout_section(rows: &[Row]) -> Section {
    let mut per = Table::new(
        "Fan-out, per receiver and against the baselines",
        "Tuples/s each receiver gets (mean), the sum, the baseline's sum (same fan-out, hand-written) and x = Sluice / baseline.",
        &[
            "transport",
            "tuple bytes",
            "receivers",
            "per receiver tuples/s",
            "sum tuples/s",
            "baseline",
            "baseline sum tuples/s",
            "x baseline",
        ],
    );
    for tr in ORDER {
        for r in rows
            .iter()
            .filter(|r| r.is("fanout") && r.transport() == tr)
        {
            let n = r.receivers.unwrap_or(1);
            let b = r.baseline.clone().unwrap_or_default();
            per.rows.push(vec![
                tr.to_string(),
                r.size().to_string(),
                n.to_string(),
                si(r.per_receiver_tuples_per_sec.unwrap_or(r.tps() / n as f64)),
                si(r.tps()),
                b.name.clone(),
                si(b.tuples_per_sec),
                times(ratio(r.tps(), b.tuples_per_sec)),
            ]);
        }
    }
    Section {
        title: "Fan-out",
        tables: vec![fanout_grid(rows), per],
        plots: vec![plots::FANOUT],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::rows::rows;
    use serde_json::json;

    #[test]
    fn the_fan_out_grid_sets_raw_tcp_beside_the_transports() {
        let fanout = |transport: &str, receivers: usize, gbit: f64, raw: f64| {
            json!({
                "experiment": "fanout", "bench": "throughput", "transport": transport,
                "tuple_size": 22, "receivers": receivers, "gbit_per_sec": gbit,
                "baseline": {"name": "raw-tcp", "tuples_per_sec": 1.0, "gbit_per_sec": raw},
                "skipped": false,
            })
        };
        let records = vec![
            fanout("tcp", 1, 0.5, 0.02),
            fanout("tcp", 2, 0.4, 0.01),
            fanout("tcp-batched", 1, 1.5, 0.03),
            fanout("shm-vega", 2, 3.0, 9.0),
        ];
        let t = fanout_grid(&rows(&records));
        assert_eq!(
            t.header,
            [
                "receivers",
                "shm-vega 22 B",
                "tcp 22 B",
                "raw TCP 22 B",
                "tcp-batched 22 B"
            ]
        );
        assert_eq!(t.rows[0], ["1", "-", "0.500", "0.020", "1.500"]);
        assert_eq!(t.rows[1], ["2", "3.000", "0.400", "0.010", "-"]);
    }
}
