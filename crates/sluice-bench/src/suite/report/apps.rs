//! The applications section: each application under each plan beside its hand-written yardsticks, with its latency at the rate.

use super::{sorted_unique, times, us, Section, Table, PLAN_ORDER};
use crate::foundation::stats::si;
use crate::suite::rows::Row;

/// A table per application: a row per plan with its throughput as fast as possible beside
/// each yardstick's and the ratio to it, and its end-to-end latency at the paced run's rate.
pub(super) fn apps_section(rows: &[Row]) -> Section {
    let measured: Vec<&Row> = rows.iter().filter(|r| r.experiment == "apps").collect();
    let mut tables = Vec::new();
    for app in sorted_unique(measured.iter().filter_map(|r| r.app.clone())) {
        let of_app: Vec<&Row> = measured
            .iter()
            .copied()
            .filter(|r| r.app.as_ref() == Some(&app))
            .collect();
        let unit = of_app
            .iter()
            .find_map(|r| r.unit.clone())
            .unwrap_or_default();
        let input = of_app
            .iter()
            .find_map(|r| r.input.clone())
            .unwrap_or_default();
        let rate = of_app.iter().find_map(|r| r.target_rate);
        let yardsticks: Vec<String> = of_app
            .iter()
            .find(|r| !r.yardsticks.is_empty())
            .map(|r| r.yardsticks.iter().map(|y| y.name.clone()).collect())
            .unwrap_or_default();
        let mut header = vec!["plan".to_string(), format!("{app} {unit}/s")];
        for y in &yardsticks {
            header.extend([format!("{y} {unit}/s"), format!("{app} / {y}")]);
        }
        header.extend(["p50 us".to_string(), "p99 us".to_string()]);
        let rate_note = rate.map_or_else(String::new, |r| format!(" at {r} {input}/s"));
        let mut t = Table::new(
            app.clone(),
            format!(
                "Throughput in {unit}/s as fast as possible, the application under each plan beside single-threaded hand-written programs doing the same computation on the same input (ratio below 1: the application is slower); end-to-end latency{rate_note}."
            ),
            &header.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        let mut plans = sorted_unique(of_app.iter().filter_map(|r| r.plan.clone()));
        plans.sort_by_key(|p| {
            PLAN_ORDER
                .iter()
                .position(|o| o == p)
                .unwrap_or(PLAN_ORDER.len())
        });
        for plan in plans {
            let run = |paced: bool| {
                of_app
                    .iter()
                    .find(|r| r.plan.as_ref() == Some(&plan) && r.target_rate.is_some() == paced)
            };
            let mut cells = vec![plan.clone()];
            match run(false) {
                Some(r) if r.skipped => {
                    cells.push(format!("skipped: {}", r.reason.clone().unwrap_or_default()));
                    cells.extend(
                        yardsticks
                            .iter()
                            .flat_map(|_| ["-".to_string(), "-".to_string()]),
                    );
                }
                flooded => {
                    cells.push(flooded.and_then(|r| r.per_sec).map_or("-".into(), si));
                    for y in &yardsticks {
                        let theirs =
                            flooded.and_then(|r| r.yardsticks.iter().find(|t| &t.name == y));
                        cells.push(theirs.map_or("-".into(), |t| si(t.per_sec)));
                        cells.push(times(theirs.and_then(|t| t.ratio)));
                    }
                }
            }
            let latency = run(true).and_then(|r| r.latency_ns);
            cells.push(latency.map_or("-".into(), |l| us(l.p50)));
            cells.push(latency.map_or("-".into(), |l| us(l.p99)));
            t.rows.push(cells);
        }
        tables.push(t);
    }
    Section {
        title: "Applications",
        tables,
        plots: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::rows::rows;
    use serde_json::json;

    #[test]
    fn an_application_stands_beside_its_yardsticks_with_its_latency_at_the_rate() {
        let app = |plan: &str, rate: Option<u64>, per_sec: f64| {
            json!({
                "experiment": "apps", "bench": "app", "app": "wordcount", "plan": plan,
                "unit": "words", "input": "sentences", "target_rate": rate, "per_sec": per_sec,
                "latency_ns": rate.map(|_| json!({"p50": 12_000.0, "p99": 48_000.0, "p999": 0.0,
                    "mean": 0.0, "max": 0.0, "samples": 9})),
                "yardsticks": [
                    {"name": "naive", "per_sec": per_sec * 4.0, "ratio": 0.25},
                    {"name": "tuned", "per_sec": per_sec * 10.0, "ratio": 0.1},
                ],
                "skipped": false,
            })
        };
        let records = vec![
            app("processes", None, 1e6),
            app("fused", None, 2.5e6),
            app("fused", Some(40_000), 4e5),
            json!({"experiment": "apps", "bench": "app", "app": "wordcount", "plan": "threaded",
                "skipped": true, "reason": "no cores"}),
        ];
        let section = apps_section(&rows(&records));
        let t = &section.tables[0];
        assert_eq!(
            t.header,
            [
                "plan",
                "wordcount words/s",
                "naive words/s",
                "wordcount / naive",
                "tuned words/s",
                "wordcount / tuned",
                "p50 us",
                "p99 us"
            ]
        );
        assert!(
            t.note.ends_with("latency at 40000 sentences/s."),
            "{}",
            t.note
        );
        assert_eq!(
            t.rows[0],
            ["fused", "2.50 M", "10.00 M", "0.25", "25.00 M", "0.10", "12.00", "48.00"]
        );
        assert_eq!(
            t.rows[1],
            [
                "threaded",
                "skipped: no cores",
                "-",
                "-",
                "-",
                "-",
                "-",
                "-"
            ]
        );
        assert_eq!(
            t.rows[2],
            [
                "processes",
                "1.00 M",
                "4.00 M",
                "0.25",
                "10.00 M",
                "0.10",
                "-",
                "-"
            ]
        );
    }
}
