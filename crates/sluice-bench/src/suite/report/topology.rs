//! The Storm-topologies section: each topology's end-to-end latency against the input rate under each plan, a spout held back by backpressure marked.

use super::{sorted_unique, us, Section, Table, PLAN_ORDER};
use crate::foundation::stats::si;
use crate::foundation::stats::LatencySummary;
use crate::suite::plots;
use crate::suite::rows::Row;

/// The share of the asked rate below which a topology's spout counts as held back.
pub(crate) const REACHED_SHARE: f64 = 0.95;

/// The table of `sluice bench topology APP` (and of the suite's `topology` experiment): a row
/// per plan and rate of `runs` (the application's records), with the rate the spout reached,
/// marked when full queues held it back, and the end-to-end latency.
pub(crate) fn topology_table(app: &str, runs: &[&Row]) -> Table {
    let mut t = Table::new(
        app,
        format!(
            "End-to-end latency of each tuple from the spout's send time to the terminal bolt, at each input rate under each plan; reached: the rate the spout sent at while it sent. A reached rate marked * is below {:.0}% of the rate asked: the topology could not keep up, its bounded queues filled and held the spout back (backpressure) instead of growing.",
            REACHED_SHARE * 100.0
        ),
        &["plan", "rate/s", "reached/s", "mean us", "p50 us", "p99 us", "p99.9 us"],
    );
    let mut runs = runs.to_vec();
    runs.sort_by_key(|r| {
        let plan = r.plan.as_deref().unwrap_or("");
        let order = PLAN_ORDER.iter().position(|o| *o == plan);
        (
            order.unwrap_or(PLAN_ORDER.len()),
            plan.to_string(),
            r.target_rate,
        )
    });
    for r in runs {
        let rate = r.target_rate.unwrap_or(0);
        let mut cells = vec![r.plan.clone().unwrap_or_default(), rate.to_string()];
        if r.skipped {
            cells.push(format!("skipped: {}", r.reason.clone().unwrap_or_default()));
            cells.extend(["-"; 4].map(String::from));
        } else {
            let reached = r.input_per_sec.unwrap_or(0.0);
            let held_back = reached < REACHED_SHARE * rate as f64;
            cells.push(format!(
                "{}{}",
                si(reached),
                if held_back { " *" } else { "" }
            ));
            let l = r.latency_ns;
            for pick in [
                (|l: LatencySummary| l.mean) as fn(LatencySummary) -> f64,
                |l| l.p50,
                |l| l.p99,
                |l| l.p999,
            ] {
                cells.push(l.map_or("-".into(), |l| us(pick(l))));
            }
        }
        t.rows.push(cells);
    }
    t
}

/// A table and a plot per Storm topology.
pub(super) fn topology_section(rows: &[Row]) -> Section {
    let measured: Vec<&Row> = rows.iter().filter(|r| r.experiment == "topology").collect();
    let tables = sorted_unique(measured.iter().filter_map(|r| r.app.clone()))
        .into_iter()
        .map(|app| {
            let runs: Vec<&Row> = measured
                .iter()
                .copied()
                .filter(|r| r.app.as_ref() == Some(&app))
                .collect();
            topology_table(&app, &runs)
        })
        .collect();
    Section {
        title: "Storm topologies: latency against input rate",
        tables,
        plots: plots::TOPOLOGY.iter().map(|(_, plot)| *plot).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::rows::rows;
    use serde_json::json;

    #[test]
    fn a_topology_table_marks_a_spout_held_back_and_lists_plans_in_order() {
        let point = |plan: &str, rate: u64, reached: f64| {
            json!({"experiment": "topology", "bench": "app", "app": "sol", "plan": plan,
                "target_rate": rate, "input_per_sec": reached, "skipped": false,
                "latency_ns": {"p50": 2000.0, "p99": 9000.0, "p999": 20000.0, "mean": 3000.0,
                    "max": 1e5, "samples": 10}})
        };
        let records = vec![
            point("processes", 1000, 1000.0),
            point("fused", 80000, 60000.0),
            point("fused", 1000, 999.0),
            json!({"experiment": "topology", "bench": "app", "app": "sol", "plan": "threaded",
                "target_rate": 1000, "skipped": true, "reason": "no core"}),
        ];
        let section = topology_section(&rows(&records));
        let md = section.tables[0].markdown();
        let lines: Vec<&str> = md.lines().filter(|l| l.starts_with("| ")).collect();
        assert_eq!(
            lines[2], "| fused | 1000 | 999.00 | 3.00 | 2.00 | 9.00 | 20.00 |",
            "{md}"
        );
        assert_eq!(
            lines[3], "| fused | 80000 | 60.00 k * | 3.00 | 2.00 | 9.00 | 20.00 |",
            "{md}"
        );
        assert_eq!(
            lines[4], "| threaded | 1000 | skipped: no core | - | - | - | - |",
            "{md}"
        );
        assert!(
            lines[5].starts_with("| processes | 1000 | 1.00 k |"),
            "{md}"
        );
        assert!(section.plots.contains(&"topology-sol"));
    }
}
