//! The OMDP section: the market-data pipeline's stages' latencies against the feed rate under each plan, and the highest multiple of the feed's rate each plan sustained.

use super::{Section, Table, PLAN_ORDER};
use crate::foundation::stats::si;
use crate::suite::plots;
use crate::suite::rows::Row;

/// OMDP's latency breakdown against the feed rate under each plan, and the highest multiple
/// each plan sustained.
pub(super) fn omdp_section(rows: &[Row]) -> Section {
    let mut runs: Vec<&Row> = rows.iter().filter(|r| r.experiment == "omdp").collect();
    runs.sort_by(|a, b| {
        let order = |r: &Row| {
            let plan = r.plan.as_deref().unwrap_or("");
            PLAN_ORDER
                .iter()
                .position(|o| *o == plan)
                .unwrap_or(PLAN_ORDER.len())
        };
        (order(a), &a.plan).cmp(&(order(b), &b.plan)).then(
            a.rate_multiple
                .unwrap_or(0.0)
                .total_cmp(&b.rate_multiple.unwrap_or(0.0)),
        )
    });
    let mut t = Table::new(
        "OMDP",
        "The Vega paper's options market-data application over the shared-memory feed (sluice run omdp --set feed=shm --json): mean microseconds in each hop of the messages timed through (1 in 1,600), over the middle two thirds of the samples; received: the feed's rate at the handlers; sustained: the rate reached and at most 0.01% of messages missed (the paper's rule). The paper: under 20 us on average at 25x over shared memory on 32 cores, Fused slower than Vega above 120,000 packets/s.",
        &["plan", "x OPRA", "packets/s", "received/s", "missed %", "FH", "To DE", "DE", "To MC", "end to end", "e2e p99", "sustained"],
    );
    let mut highest: Vec<(String, f64)> = Vec::new();
    for r in runs {
        let plan = r.plan.clone().unwrap_or_default();
        let multiple = r.rate_multiple.unwrap_or(0.0);
        let mut cells = vec![plan.clone(), format!("{multiple}")];
        if r.skipped {
            cells.push(format!("skipped: {}", r.reason.clone().unwrap_or_default()));
            cells.extend(["-"; 9].map(String::from));
        } else {
            let hop = |h: &str| {
                r.latency_us
                    .get(h)
                    .map_or("-".into(), |l| format!("{:.2}", l.mean))
            };
            cells.push(si(r.target_rate.unwrap_or(0) as f64));
            cells.push(si(r.input_per_sec.unwrap_or(0.0)));
            cells.push(format!("{:.4}", 100.0 * r.missed_fraction.unwrap_or(0.0)));
            for h in ["fh", "to_de", "de", "to_mc", "end_to_end"] {
                cells.push(hop(h));
            }
            cells.push(
                r.latency_us
                    .get("end_to_end")
                    .map_or("-".into(), |l| format!("{:.2}", l.p99)),
            );
            let sustained = r.sustained == Some(true);
            cells.push(if sustained { "yes" } else { "no" }.into());
            if sustained {
                match highest.iter_mut().find(|(p, _)| *p == plan) {
                    Some((_, best)) => *best = best.max(multiple),
                    None => highest.push((plan, multiple)),
                }
            }
        }
        t.rows.push(cells);
    }
    let mut best = Table::new(
        "OMDP: the highest multiple sustained",
        "Per plan, the highest rate multiple of the February 2008 OPRA rate (24,000 packets/s) sustained in this run.",
        &["plan", "highest sustained x OPRA"],
    );
    best.rows = highest
        .into_iter()
        .map(|(plan, m)| vec![plan, format!("{m}")])
        .collect();
    Section {
        title: "OMDP: latency against the feed rate",
        tables: if t.rows.is_empty() {
            vec![]
        } else {
            vec![t, best]
        },
        plots: vec![plots::OMDP],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::rows::rows;
    use serde_json::json;

    #[test]
    fn the_omdp_section_gives_the_breakdown_and_the_highest_multiple_sustained() {
        let record = |plan: &str, multiple: f64, sustained: bool| {
            json!({"experiment": "omdp", "app": "omdp", "plan": plan, "rate_multiple": multiple,
                   "target_rate": (multiple * 24_000.0) as u64, "input_per_sec": multiple * 24_000.0,
                   "missed_fraction": 0.0, "sustained": sustained,
                   "latency_us": {"fh": {"mean": 1.5, "p99": 3.0},
                                  "end_to_end": {"mean": 4.25, "p99": 9.0}}})
        };
        let records = [
            record("fused", 1.0, true),
            record("fused", 25.0, true),
            record("fused", 50.0, false),
            record("two-processes", 1.0, false),
        ];
        let section = omdp_section(&rows(&records));
        let (table, best) = (&section.tables[0], &section.tables[1]);
        assert_eq!(table.rows.len(), 4);
        assert_eq!(table.rows[1][..3], ["fused", "25", "600.00 k"]);
        assert_eq!(table.rows[1][5], "1.50");
        assert_eq!(table.rows[1][9..], ["4.25", "9.00", "yes"]);
        assert_eq!(best.rows, [["fused", "25"]]);
        assert!(omdp_section(&[]).tables.is_empty());
    }
}
