//! Operator reports made of named counters, the way operators (and the connectors of
//! `sluice-connectors`) report what they counted (unrouted tuples, duplicates, malformed
//! records, oversized frames, bytes written, …).

use sluice_graph::OperatorReport;

/// Sets each `(name, value)` of `counters` in `report`.
pub fn add_counters(report: &mut OperatorReport, counters: &[(&str, u64)]) {
    for &(name, value) in counters {
        report.counters.insert(name.to_string(), value);
    }
}

/// A report of `counters`, for any operator that reports what it counted.
pub fn counter_report(counters: &[(&str, u64)]) -> OperatorReport {
    let mut report = OperatorReport::default();
    add_counters(&mut report, counters);
    report
}
