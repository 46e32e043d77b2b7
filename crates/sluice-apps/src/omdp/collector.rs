//! The two collectors of the third ply: the metrics collector, which turns the stamps a
//! sampled message carries into the per-hop latency breakdown, and the ingest metrics
//! collector, which totals what the feed handlers received and missed.
//!
//! As in the paper, the metrics collector keeps the first [`PAPER_SAMPLES`] samples (a setting)
//! and reports over the middle two thirds of them (the paper's middle 100,000 of 150,000), so
//! the start-up and the drain at the end are left out. Each hop's mean, p50 and p99 go into
//! the collector's report as counters in nanoseconds (`fh_mean_ns`, `to_de_p99_ns`, ...), from
//! which the summary prints microseconds.

use std::collections::BTreeMap;

use sluice_graph::{expect_tuple, Operator, OperatorError, OperatorReport, Output, Snapshot};
use sluice_types::{monotonic_ns, TupleRef};

use super::tick::{IngestTick, Tick};

/// Samples the paper collected per run.
pub const PAPER_SAMPLES: usize = 150_000;

/// The hops of the breakdown, in the order a message takes them, then end to end.
pub const HOPS: [&str; 6] = ["feed", "fh", "to_de", "de", "to_mc", "end_to_end"];

/// One sampled message's time in each hop of [`HOPS`], in nanoseconds. `feed` (sender to
/// handler, across the UDP socket) is outside the application and outside `end_to_end`, which
/// runs from the handler's receipt to the collector's, as in the paper.
fn hops(tick: &Tick, mc_in_ns: u64) -> [u64; 6] {
    let d = |later: u64, earlier: u64| later.saturating_sub(earlier);
    [
        d(tick.fh_in_ns, tick.sent_ns),
        d(tick.fh_out_ns, tick.fh_in_ns),
        d(tick.de_in_ns, tick.fh_out_ns),
        d(tick.de_out_ns, tick.de_in_ns),
        d(mc_in_ns, tick.de_out_ns),
        d(mc_in_ns, tick.fh_in_ns),
    ]
}

/// The metrics collector.
pub struct MetricsCollector {
    keep: usize,
    samples: Vec<[u64; 6]>,
    received: u64,
}

impl MetricsCollector {
    /// A collector keeping the first `keep` samples.
    pub fn new(keep: usize) -> Self {
        Self {
            keep,
            samples: Vec::with_capacity(keep.min(PAPER_SAMPLES)),
            received: 0,
        }
    }
}

/// The middle two thirds of `samples`: a sixth left out at each end.
fn middle<T>(samples: &[T]) -> &[T] {
    let cut = samples.len() / 6;
    &samples[cut..samples.len() - cut]
}

/// Mean, p50, p99, p99.9 and max of each hop over `samples`, as counters named
/// `HOP_mean_ns` etc.
fn breakdown(samples: &[[u64; 6]]) -> BTreeMap<String, u64> {
    let mut counters = BTreeMap::new();
    if samples.is_empty() {
        return counters;
    }
    let mut column = Vec::with_capacity(samples.len());
    for (hop, name) in HOPS.iter().enumerate() {
        column.clear();
        column.extend(samples.iter().map(|s| s[hop]));
        column.sort_unstable();
        let mean = column.iter().map(|&v| u128::from(v)).sum::<u128>() / column.len() as u128;
        let at = |q: f64| column[((column.len() - 1) as f64 * q).round() as usize];
        counters.insert(format!("{name}_mean_ns"), mean as u64);
        counters.insert(format!("{name}_p50_ns"), at(0.5));
        counters.insert(format!("{name}_p99_ns"), at(0.99));
        counters.insert(format!("{name}_p999_ns"), at(0.999));
        counters.insert(format!("{name}_max_ns"), at(1.0));
    }
    counters
}

impl Operator for MetricsCollector {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let arrived = monotonic_ns();
        let tick = expect_tuple::<Tick>(port, tuple)?;
        self.received += 1;
        if self.samples.len() < self.keep {
            self.samples.push(hops(tick, arrived));
        }
        Ok(())
    }

    /// The samples kept and the count received.
    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Snapshot::whole(&(&self.samples, self.received))
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        if !snapshot.is_empty() {
            (self.samples, self.received) = snapshot.decode_whole()?;
        }
        Ok(())
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        let used = middle(&self.samples);
        let mut counters = breakdown(used);
        counters.insert("samples_received".into(), self.received);
        counters.insert("samples_used".into(), used.len() as u64);
        Ok(OperatorReport {
            counters,
            ..OperatorReport::default()
        })
    }
}

/// The ingest metrics collector: the latest counts of every feed handler.
#[derive(Default)]
pub struct IngestCollector {
    channels: BTreeMap<u64, IngestTick>,
}

impl Operator for IngestCollector {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let counts = *expect_tuple::<IngestTick>(port, tuple)?;
        let latest = self.channels.entry(counts.channel).or_default();
        if counts.packets + counts.malformed + counts.late
            >= latest.packets + latest.malformed + latest.late
        {
            *latest = counts;
        }
        Ok(())
    }

    /// Each channel's latest counts, as their words.
    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        let latest: Vec<[u64; 6]> = self.channels.values().map(|c| bytemuck::cast(*c)).collect();
        Snapshot::whole(&latest)
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        if snapshot.is_empty() {
            return Ok(());
        }
        let latest: Vec<[u64; 6]> = snapshot.decode_whole()?;
        self.channels = latest
            .into_iter()
            .map(|words| {
                let counts: IngestTick = bytemuck::cast(words);
                (counts.channel, counts)
            })
            .collect();
        Ok(())
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        let total = |f: fn(&IngestTick) -> u64| self.channels.values().map(f).sum::<u64>();
        Ok(sluice_ops::counter_report(&[
            ("channels", self.channels.len() as u64),
            ("packets", total(|c| c.packets)),
            ("messages", total(|c| c.messages)),
            ("missed_messages", total(|c| c.missed)),
            ("malformed_packets", total(|c| c.malformed)),
            ("late_packets", total(|c| c.late)),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_breakdown_uses_the_middle_two_thirds() {
        let samples: Vec<[u64; 6]> = (0..600u64).map(|i| [i; 6]).collect();
        let used = middle(&samples);
        assert_eq!((used.len(), used[0][0], used[399][0]), (400, 100, 499));
        let counters = breakdown(used);
        assert_eq!(counters["fh_mean_ns"], 299);
        assert_eq!(counters["end_to_end_p50_ns"], 300);
        assert_eq!(counters["de_p99_ns"], 495);
        assert!(breakdown(&[]).is_empty());
    }

    #[test]
    fn a_sample_splits_into_hops_that_add_up_to_end_to_end() {
        let tick = Tick {
            sent_ns: 100,
            fh_in_ns: 150,
            fh_out_ns: 170,
            de_in_ns: 200,
            de_out_ns: 230,
            ..bytemuck::Zeroable::zeroed()
        };
        let h = hops(&tick, 260);
        assert_eq!(h, [50, 20, 30, 30, 30, 110]);
        assert_eq!(h[1..5].iter().sum::<u64>(), h[5]);
    }
}
