//! The arithmetic of a benchmark, as pure functions: rates from receiver timestamps, bandwidth,
//! medians over repeats, latency percentiles, and a rate written with an SI suffix.

use serde::{Deserialize, Serialize};
use sluice_graph::LatencyHistogram;

const NS_PER_SEC: f64 = 1e9;

/// Tuples per second at the receiver, from the arrival time of the first and the last tuple
/// of a window and the number of tuples in it (both ends included): `tuples` arrivals span
/// `tuples - 1` intervals. Zero when the window holds fewer than two tuples or no time.
pub fn tuples_per_sec(first_ns: u64, last_ns: u64, tuples: u64) -> f64 {
    if tuples < 2 || last_ns <= first_ns {
        return 0.0;
    }
    (tuples - 1) as f64 / ((last_ns - first_ns) as f64 / NS_PER_SEC)
}

/// Payload bandwidth in Gbit/s (10^9 bits) of `tuples_per_sec` tuples of `tuple_size` bytes.
pub fn gbit_per_sec(tuples_per_sec: f64, tuple_size: usize) -> f64 {
    tuples_per_sec * tuple_size as f64 * 8.0 / 1e9
}

/// The median of `values` (the mean of the middle two for an even count); 0 when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The `q`-quantile of `values` (0 < q <= 1) by nearest rank: the smallest value with at
/// least a fraction `q` of the values at or below it (the largest for `q` = 1; with five
/// values, p90 is the largest too); 0 when empty.
pub fn nearest_rank(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted
        .get(rank.clamp(1, sorted.len().max(1)) - 1)
        .copied()
        .unwrap_or(0.0)
}

/// One-way latency percentiles in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Mean.
    pub mean: f64,
    /// Largest sample.
    pub max: f64,
    /// How many samples.
    pub samples: u64,
}

impl LatencySummary {
    /// The percentiles of `histogram`; `None` if it is empty. Percentiles are exact up to the
    /// histogram's precision (3 significant digits).
    pub fn from_histogram(histogram: &LatencyHistogram) -> Option<Self> {
        if histogram.is_empty() {
            return None;
        }
        Some(Self {
            p50: histogram.value_at_quantile(0.5) as f64,
            p99: histogram.value_at_quantile(0.99) as f64,
            p999: histogram.value_at_quantile(0.999) as f64,
            mean: histogram.mean(),
            max: histogram.max() as f64,
            samples: histogram.len(),
        })
    }

    /// The one-way figures of round trips: each figure halved (a percentile of half the
    /// round trips is half their percentile), the sample count kept.
    pub fn half(&self) -> Self {
        Self {
            p50: self.p50 / 2.0,
            p99: self.p99 / 2.0,
            p999: self.p999 / 2.0,
            mean: self.mean / 2.0,
            max: self.max / 2.0,
            samples: self.samples,
        }
    }

    /// The same figure `ns` for every percentile, the mean and the maximum (a measurement
    /// that gives only a mean, like the cache-line ping-pong).
    pub fn flat(ns: f64, samples: u64) -> Self {
        Self {
            p50: ns,
            p99: ns,
            p999: ns,
            mean: ns,
            max: ns,
            samples,
        }
    }

    /// The median of each figure over `runs` (taken figure by figure); `None` if there are none.
    pub fn median_of(runs: &[LatencySummary]) -> Option<Self> {
        if runs.is_empty() {
            return None;
        }
        let of = |f: fn(&LatencySummary) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
        Some(Self {
            p50: of(|r| r.p50),
            p99: of(|r| r.p99),
            p999: of(|r| r.p999),
            mean: of(|r| r.mean),
            max: of(|r| r.max),
            samples: of(|r| r.samples as f64).round() as u64,
        })
    }
}

/// `numerator / denominator`, or `None` when the denominator is not positive.
pub fn ratio(numerator: f64, denominator: f64) -> Option<f64> {
    (denominator > 0.0).then(|| numerator / denominator)
}

/// A rate with an SI suffix: `12.35 M`, `980.0 k`.
pub(crate) fn si(value: f64) -> String {
    let (scaled, unit) = if value >= 1e9 {
        (value / 1e9, " G")
    } else if value >= 1e6 {
        (value / 1e6, " M")
    } else if value >= 1e3 {
        (value / 1e3, " k")
    } else {
        (value, "")
    };
    format!("{scaled:.2}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn si_suffixes() {
        assert_eq!(si(12_345_678.0), "12.35 M");
        assert_eq!(si(980.0), "980.00");
        assert_eq!(si(1_500.0), "1.50 k");
        assert_eq!(si(2.5e9), "2.50 G");
    }

    #[test]
    fn nearest_rank_gives_a_value_of_the_set() {
        let values = [5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(nearest_rank(&values, 0.5), 3.0);
        assert_eq!(nearest_rank(&values, 0.9), 5.0);
        assert_eq!(nearest_rank(&values, 0.2), 1.0);
        assert_eq!(nearest_rank(&values, 0.21), 2.0);
        assert_eq!(nearest_rank(&values, 1.0), 5.0);
        let many: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(nearest_rank(&many, 0.9), 18.0);
        assert_eq!(nearest_rank(&[], 0.9), 0.0);
    }

    #[test]
    fn rate_counts_intervals_between_first_and_last_arrival() {
        // 1001 tuples, one every microsecond: the last arrives 1 ms after the first.
        assert_eq!(tuples_per_sec(5_000, 5_000 + 1_000_000, 1001), 1_000_000.0);
        // 3 tuples over 2 s.
        assert_eq!(tuples_per_sec(1_000_000_000, 3_000_000_000, 3), 1.0);
    }

    #[test]
    fn rate_of_an_empty_or_instant_window_is_zero() {
        assert_eq!(tuples_per_sec(10, 20, 0), 0.0);
        assert_eq!(tuples_per_sec(10, 20, 1), 0.0);
        assert_eq!(tuples_per_sec(10, 10, 50), 0.0);
        assert_eq!(tuples_per_sec(20, 10, 50), 0.0);
    }

    #[test]
    fn bandwidth_is_bits_of_payload() {
        assert_eq!(gbit_per_sec(1e6, 125), 1.0);
        assert_eq!(gbit_per_sec(10e6, 64), 5.12);
        assert_eq!(gbit_per_sec(0.0, 64), 0.0);
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[7.0]), 7.0);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn percentiles_of_synthetic_latencies() {
        // Arrival minus send timestamps of 1000 tuples: 1..=1000 ns.
        let mut h = sluice_graph::latency_histogram();
        for (sent, arrived) in (0..1000u64).map(|i| (1_000_000 + i * 7, 1_000_000 + i * 7 + i + 1))
        {
            h.record(arrived - sent).unwrap();
        }
        let s = LatencySummary::from_histogram(&h).unwrap();
        assert_eq!((s.p50, s.p99, s.p999, s.max), (500.0, 990.0, 999.0, 1000.0));
        assert_eq!(s.mean, 500.5);
        assert_eq!(s.samples, 1000);
        assert!(LatencySummary::from_histogram(&sluice_graph::latency_histogram()).is_none());
    }

    #[test]
    fn one_way_is_half_the_round_trip_of_synthetic_timestamps() {
        // 1000 tuples sent every 10 us; tuple i comes back from the reflector 2 * (i + 1) ns
        // after it was sent: one way takes i + 1 ns.
        let mut h = sluice_graph::latency_histogram();
        for i in 0..1000u64 {
            let sent = 5_000_000 + i * 10_000;
            let back = sent + 2 * (i + 1);
            h.record(back - sent).unwrap();
        }
        let round_trip = LatencySummary::from_histogram(&h).unwrap();
        assert_eq!(
            (round_trip.p50, round_trip.p99, round_trip.max),
            (1000.0, 1980.0, 2000.0)
        );
        let one_way = round_trip.half();
        assert_eq!(
            (one_way.p50, one_way.p99, one_way.p999, one_way.max),
            (500.0, 990.0, 999.0, 1000.0)
        );
        assert_eq!(one_way.mean, 500.5);
        assert_eq!(one_way.samples, 1000);
        assert_eq!(LatencySummary::flat(7.0, 3).p999, 7.0);
    }

    #[test]
    fn median_of_summaries_is_taken_per_figure() {
        let run = |p50, p99| LatencySummary {
            p50,
            p99,
            p999: p99 * 2.0,
            mean: p50,
            max: 1e6,
            samples: 10,
        };
        let m =
            LatencySummary::median_of(&[run(100.0, 900.0), run(300.0, 100.0), run(200.0, 500.0)])
                .unwrap();
        assert_eq!(
            (m.p50, m.p99, m.p999, m.samples),
            (200.0, 500.0, 1000.0, 10)
        );
        assert!(LatencySummary::median_of(&[]).is_none());
    }

    #[test]
    fn ratio_refuses_a_zero_denominator() {
        assert_eq!(ratio(1.0, 4.0), Some(0.25));
        assert_eq!(ratio(1.0, 0.0), None);
    }
}
