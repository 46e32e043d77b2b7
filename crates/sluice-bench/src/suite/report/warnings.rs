//! The warnings section, listed first: every warning of every record, with its measurement and the rule it broke.

use super::{Section, Table};
use crate::suite::rows::Row;

/// Every figure a benchmark doubted, with the rule it broke: first, so that nobody reads a
/// table below without knowing which of its figures the run itself could not believe.
pub(crate) fn warnings_table(rows: &[Row]) -> Table {
    let mut t = Table::new(
        "Figures in doubt",
        "Figures that cannot be true as measured: a floor beaten (below-floor), a rate not reached (rate-not-reached), repeats that disagree (wide-spread). On a loaded machine, measure these again.",
        &["experiment", "measurement", "rule", "what was seen"],
    );
    for r in rows {
        for w in &r.warnings {
            let rule = serde_json::to_value(w.check)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            t.rows.push(vec![
                r.experiment.clone(),
                r.label(),
                rule,
                w.detail.clone(),
            ]);
        }
    }
    t
}

pub(super) fn warnings_section(rows: &[Row]) -> Section {
    Section {
        title: "Warnings",
        tables: vec![warnings_table(rows)],
        plots: vec![],
    }
}
