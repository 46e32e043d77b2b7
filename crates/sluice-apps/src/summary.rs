//! Lines shared by the applications' summaries.

use std::time::Duration;

use sluice_graph::LatencyHistogram;

/// `label: N tuples in S s = R tuples/s`.
pub fn throughput_line(label: &str, tuples: u64, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64().max(1e-9);
    format!(
        "{label}: {tuples} in {secs:.3} s = {:.0}/s",
        tuples as f64 / secs
    )
}

/// `latency (us): p50 .. p99 .. p99.9 .. max ..` from a histogram in nanoseconds.
pub fn latency_line(histogram: Option<&LatencyHistogram>) -> String {
    match histogram {
        Some(h) if !h.is_empty() => {
            let us = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
            format!(
                "end-to-end latency (us): p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}  ({} samples)",
                us(0.5),
                us(0.99),
                us(0.999),
                h.max() as f64 / 1000.0,
                h.len()
            )
        }
        _ => "end-to-end latency: no samples".to_string(),
    }
}
