//! The report's first section, the machine: where and what (CPU, cores, kernel, memory, commit), how many measurements were made, and the ones skipped here with why.

use super::{Section, Table};
use crate::suite::rows::Row;

pub(super) fn machine_section(rows: &[Row]) -> Section {
    let mut t = Table::new("Where and what", "", &["", ""]);
    if let Some(m) = rows.iter().find_map(|r| r.machine.clone()) {
        t.rows.push(vec!["CPU".into(), m.cpu]);
        t.rows.push(vec!["cores".into(), m.cores.to_string()]);
        t.rows.push(vec!["kernel".into(), m.kernel]);
        t.rows
            .push(vec!["memory".into(), format!("{} GiB", m.memory_gib)]);
    }
    if let Some(c) = rows.iter().find_map(|r| r.commit.clone()) {
        t.rows.push(vec!["commit".into(), c]);
    }
    let skipped = rows.iter().filter(|r| r.skipped).count();
    t.rows.push(vec![
        "measurements".into(),
        format!("{} ({skipped} skipped)", rows.len()),
    ]);
    let mut skips = Table::new(
        "Skipped",
        "Measurements that could not be made here, and why.",
        &["experiment", "what", "reason"],
    );
    for r in rows.iter().filter(|r| r.skipped) {
        let what = format!(
            "{} {} {} B{}",
            r.bench.as_deref().unwrap_or(""),
            r.peer.as_deref().unwrap_or(r.transport()),
            r.size(),
            r.target_rate
                .map_or(String::new(), |n| format!(" at {n}/s"))
        );
        skips.rows.push(vec![
            r.experiment.clone(),
            what,
            r.reason.clone().unwrap_or_default(),
        ]);
    }
    let mut tables = vec![t];
    if !skips.rows.is_empty() {
        tables.push(skips);
    }
    Section {
        title: "Machine",
        tables,
        plots: vec![],
    }
}
