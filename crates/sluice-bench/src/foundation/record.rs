//! What the receiving side records: the measured window (arrival time of its first and last
//! tuple and how many arrived) and, for latency, a histogram of arrival minus send time. The
//! engine's sink and the baselines' receivers share this code; a benchmark keeps the figures
//! of every run of both sides ([`Measured`]).
//!
//! Tuples arriving before the end of the warm-up are counted but not measured. A throughput
//! receiver reads the clock only every [`SAMPLE_EVERY`] tuples (a clock read costs more than a
//! fused hop), so its window runs from the first sampled tuple after the warm-up to the last
//! sampled one; over a run of seconds the tuples left outside are negligible.

use serde::{Deserialize, Serialize};
use sluice_graph::{latency_histogram, LatencyHistogram, OperatorReport};
use sluice_types::monotonic_ns;

use crate::foundation::payload::Payload;
use crate::foundation::stats::{gbit_per_sec, tuples_per_sec, LatencySummary};

/// A throughput receiver reads the clock once per this many tuples (a power of two).
pub(crate) const SAMPLE_EVERY: u64 = 1024;

const FIRST_NS: &str = "window_first_ns";
const LAST_NS: &str = "window_last_ns";
const TUPLES: &str = "window_tuples";
/// The report counter of every tuple that arrived, warm-up included.
pub(crate) const RECEIVED: &str = "received";

/// The measured window of one receiver.
#[derive(Debug, Clone)]
pub(crate) struct Meter {
    measure_from_ns: u64,
    received: u64,
    /// (clock, received) at the first measured tuple.
    first: Option<(u64, u64)>,
    /// (clock, received) at the last measured tuple.
    last: (u64, u64),
}

impl Meter {
    /// A meter that measures tuples arriving at or after `measure_from_ns`.
    pub(crate) fn new(measure_from_ns: u64) -> Self {
        Self {
            measure_from_ns,
            received: 0,
            first: None,
            last: (0, 0),
        }
    }

    /// One tuple arrived; the clock is read every [`SAMPLE_EVERY`] tuples.
    #[inline]
    pub(crate) fn tick(&mut self) {
        self.received += 1;
        if self.received & (SAMPLE_EVERY - 1) == 0 {
            self.observe(monotonic_ns());
        }
    }

    /// One tuple arrived at `now_ns`; returns whether it is measured (past the warm-up).
    #[inline]
    pub(crate) fn arrive(&mut self, now_ns: u64) -> bool {
        self.received += 1;
        self.observe(now_ns)
    }

    #[inline]
    fn observe(&mut self, now_ns: u64) -> bool {
        if now_ns < self.measure_from_ns {
            return false;
        }
        let here = (now_ns, self.received);
        self.first.get_or_insert(here);
        self.last = here;
        true
    }

    /// The window as report counters.
    fn counters(&self, report: &mut OperatorReport) {
        let (first_ns, first_count) = self.first.unwrap_or((0, 0));
        let tuples = self.first.map_or(0, |_| self.last.1 - first_count + 1);
        for (name, value) in [
            (FIRST_NS, first_ns),
            (LAST_NS, self.last.0),
            (TUPLES, tuples),
            (RECEIVED, self.received),
        ] {
            report.counters.insert(name.to_string(), value);
        }
    }
}

/// A receiver's bookkeeping, returned through [`OperatorReport`] like any operator's figures.
pub(crate) trait Recorder: Send + 'static {
    /// A recorder measuring tuples that arrive at or after `measure_from_ns`.
    fn new(measure_from_ns: u64) -> Self;
    /// One tuple arrived.
    fn record<P: Payload>(&mut self, tuple: &P);
    /// The figures so far.
    fn report(&self) -> OperatorReport;
}

/// Counts tuples for throughput.
pub(crate) struct Counting(Meter);

impl Recorder for Counting {
    fn new(measure_from_ns: u64) -> Self {
        Self(Meter::new(measure_from_ns))
    }

    #[inline]
    fn record<P: Payload>(&mut self, tuple: &P) {
        tuple.touch();
        self.0.tick();
    }

    fn report(&self) -> OperatorReport {
        let mut report = OperatorReport::default();
        self.0.counters(&mut report);
        report
    }
}

/// Reads the clock at every arrival and records arrival minus the tuple's timestamp.
pub(crate) struct Timing {
    meter: Meter,
    histogram: LatencyHistogram,
}

impl Recorder for Timing {
    fn new(measure_from_ns: u64) -> Self {
        Self {
            meter: Meter::new(measure_from_ns),
            // 1 ns to an hour at 3 significant digits, the engine's latency histogram.
            histogram: latency_histogram(),
        }
    }

    #[inline]
    fn record<P: Payload>(&mut self, tuple: &P) {
        let now = monotonic_ns();
        if self.meter.arrive(now) {
            // Beyond the histogram's hour an outlier counts as an hour.
            self.histogram
                .saturating_record(now.saturating_sub(tuple.stamp_of()));
        }
    }

    fn report(&self) -> OperatorReport {
        let mut report = OperatorReport::default();
        self.meter.counters(&mut report);
        report.latency = Some(self.histogram.clone());
        report
    }
}

/// The figures of one run of one side (sluice or baseline).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunFigures {
    /// Tuples in the measured window.
    pub tuples: u64,
    /// Seconds between the first and the last tuple of the window.
    pub window_s: f64,
    /// Tuples per second at the receiver.
    pub tuples_per_sec: f64,
    /// Payload Gbit/s at the receiver.
    pub gbit_per_sec: f64,
    /// One-way latency, for a latency benchmark (half the round trip when it was measured
    /// through a reflector).
    pub latency_ns: Option<LatencySummary>,
    /// The round trip through a reflector, when latency was measured that way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_trip_ns: Option<LatencySummary>,
    /// What a lossy transport lost over the whole run (warm-up included); `None` where
    /// nothing can be lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<Loss>,
    /// The cache-line one-way time between cores 0 and 1, measured with a shared-memory
    /// throughput run's memcpy baseline: where the host had put the two cores at the time
    /// (a VM's vCPUs move, and large tuples cross between them at very different speeds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cacheline_ns: Option<f64>,
    /// The one-way time of the two-line hand-off between cores 0 and 1 (each core writes a line
    /// of its own, as in every single-producer queue), measured with a shared-memory latency
    /// run's baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff_ns: Option<f64>,
    /// One core's memcpy of the tuple size into the successive places of a region the ring's
    /// size, in Gbit/s, measured with a shared-memory throughput run's baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring_memcpy_gbit: Option<f64>,
    /// The clock-stamped one-way time through one line between cores 0 and 1, measured with
    /// a shared-memory latency run's baseline (`--method one-way-clock`): the least a stamped
    /// latency can show on the cores of the moment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stamped_ns: Option<f64>,
}

/// Tuples a lossy transport delivered and lost in one run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Loss {
    /// Tuples that arrived.
    pub delivered: u64,
    /// Tuples sent that never arrived.
    pub lost: u64,
}

impl Loss {
    /// The share of the tuples sent that were lost, from 0 to 1.
    pub fn fraction(&self) -> f64 {
        let sent = self.delivered + self.lost;
        if sent == 0 {
            0.0
        } else {
            self.lost as f64 / sent as f64
        }
    }
}

impl RunFigures {
    /// The figures of several receivers of one sender taken together: tuples and rates
    /// summed, the longest window, latencies left out.
    pub(crate) fn sum(parts: &[RunFigures], tuple_size: usize) -> Self {
        if let [one] = parts {
            return one.clone();
        }
        let rate = parts.iter().map(|p| p.tuples_per_sec).sum();
        Self {
            tuples: parts.iter().map(|p| p.tuples).sum(),
            window_s: parts.iter().map(|p| p.window_s).fold(0.0, f64::max),
            tuples_per_sec: rate,
            gbit_per_sec: gbit_per_sec(rate, tuple_size),
            latency_ns: None,
            round_trip_ns: None,
            loss: None,
            cacheline_ns: None,
            handoff_ns: None,
            ring_memcpy_gbit: None,
            stamped_ns: None,
        }
    }

    /// The figures in a receiver's report, for tuples of `tuple_size` bytes.
    pub(crate) fn from_report(report: &OperatorReport, tuple_size: usize) -> anyhow::Result<Self> {
        let counter = |name: &str| report.counters.get(name).copied().unwrap_or(0);
        let (first_ns, last_ns, tuples) = (counter(FIRST_NS), counter(LAST_NS), counter(TUPLES));
        if tuples == 0 {
            anyhow::bail!(
                "no tuple arrived after the warm-up ({} before it); try a longer --duration",
                counter(RECEIVED)
            );
        }
        let window_ns = last_ns.saturating_sub(first_ns);
        if tuples < 2 || window_ns == 0 {
            anyhow::bail!(
                "the measured window holds {tuples} tuple(s) over {window_ns} ns ({} received in all): no rate can be computed from it",
                counter(RECEIVED)
            );
        }
        let rate = tuples_per_sec(first_ns, last_ns, tuples);
        Ok(Self {
            tuples,
            window_s: window_ns as f64 / 1e9,
            tuples_per_sec: rate,
            gbit_per_sec: gbit_per_sec(rate, tuple_size),
            latency_ns: report
                .latency
                .as_ref()
                .and_then(LatencySummary::from_histogram),
            round_trip_ns: None,
            loss: None,
            cacheline_ns: None,
            handoff_ns: None,
            ring_memcpy_gbit: None,
            stamped_ns: None,
        })
    }

    /// The figures in the report of a sender that timed round trips through a reflector
    /// (arrival back minus send time): the round trip kept as such, the one-way latency half
    /// of it (Vega V.A.1).
    pub(crate) fn from_round_trips(
        report: &OperatorReport,
        tuple_size: usize,
    ) -> anyhow::Result<Self> {
        let figures = Self::from_report(report, tuple_size)?;
        Ok(Self {
            latency_ns: figures.latency_ns.map(|l| l.half()),
            round_trip_ns: figures.latency_ns,
            ..figures
        })
    }
}

/// Every run of both sides.
pub(crate) struct Measured {
    /// Sluice's runs.
    pub(crate) sluice: Vec<RunFigures>,
    /// The baseline's runs that could be measured.
    pub(crate) baseline: Vec<RunFigures>,
    /// Why a baseline run could not be measured (the first such run).
    pub(crate) baseline_failure: Option<String>,
    /// Whether Sluice's threads (or processes) were pinned to cores.
    pub(crate) pinned: bool,
    /// Whether the baseline's were.
    pub(crate) baseline_pinned: bool,
}

impl Measured {
    /// Nothing measured yet, room for `repeat` runs a side.
    pub(crate) fn new(repeat: usize, pinned: bool) -> Self {
        Self {
            sluice: Vec::with_capacity(repeat),
            baseline: Vec::with_capacity(repeat),
            baseline_failure: None,
            pinned,
            baseline_pinned: pinned,
        }
    }

    /// Keeps baseline run `i`, or why it failed: a baseline that cannot be measured leaves
    /// Sluice's figures standing, without a ratio.
    pub(crate) fn baseline_run(&mut self, i: usize, run: anyhow::Result<RunFigures>) {
        match run {
            Ok(figures) => self.baseline.push(figures),
            Err(e) => {
                self.baseline_failure
                    .get_or_insert_with(|| format!("baseline run {i}: {e:#}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_starts_after_the_warm_up() {
        let mut m = Meter::new(1_000);
        assert!(!m.arrive(10));
        assert!(!m.arrive(999));
        assert!(m.arrive(1_000));
        assert!(m.arrive(1_500));
        assert!(m.arrive(3_000));
        let mut report = OperatorReport::default();
        m.counters(&mut report);
        assert_eq!(report.counters[FIRST_NS], 1_000);
        assert_eq!(report.counters[LAST_NS], 3_000);
        assert_eq!(report.counters[TUPLES], 3);
        assert_eq!(report.counters[RECEIVED], 5);
        let figures = RunFigures::from_report(&report, 100).unwrap();
        assert_eq!(figures.tuples_per_sec, 1e6); // 2 intervals in 2 us
        assert_eq!(figures.gbit_per_sec, 0.8);
        assert!(figures.latency_ns.is_none());
    }

    #[test]
    fn ticking_samples_the_clock_every_so_many_tuples() {
        let mut c = Counting::new(0);
        for _ in 0..(3 * SAMPLE_EVERY + 5) {
            c.record(&[1u8; 4]);
        }
        let report = c.report();
        assert_eq!(report.counters[TUPLES], 2 * SAMPLE_EVERY + 1);
        assert_eq!(report.counters[RECEIVED], 3 * SAMPLE_EVERY + 5);
        assert!(report.counters[LAST_NS] >= report.counters[FIRST_NS]);
    }

    #[test]
    fn timing_records_arrival_minus_timestamp() {
        let mut t = Timing::new(0);
        let mut tuple = [0u8; 8];
        tuple.stamp(monotonic_ns());
        t.record(&tuple);
        t.record(&tuple);
        let report = t.report();
        let latency = report.latency.as_ref().unwrap();
        assert_eq!(latency.len(), 2);
        assert!(latency.max() < 10_000_000_000, "a sane latency");
    }

    #[test]
    fn timing_keeps_latencies_beyond_the_histograms_first_range() {
        let mut t = Timing::new(0);
        for ago in [5_000_000u64, 40_000, 3_000] {
            let mut tuple = [0u8; 8];
            tuple.stamp(monotonic_ns() - ago);
            t.record(&tuple);
        }
        let report = t.report();
        let summary = LatencySummary::from_histogram(report.latency.as_ref().unwrap()).unwrap();
        assert!(summary.p50 >= 40_000.0, "{summary:?}");
        assert!(summary.max >= 5_000_000.0, "{summary:?}");
    }

    #[test]
    fn receivers_of_one_sender_add_up() {
        // Two receivers of synthetic windows: 1001 tuples over 1 ms, and 501 over 1 ms.
        let figures = |first: u64, tuples: u64| {
            let mut report = OperatorReport::default();
            for (name, value) in [
                (FIRST_NS, first),
                (LAST_NS, first + 1_000_000),
                (TUPLES, tuples),
                (RECEIVED, tuples),
            ] {
                report.counters.insert(name.to_string(), value);
            }
            RunFigures::from_report(&report, 125).unwrap()
        };
        let (a, b) = (figures(0, 1001), figures(500, 501));
        assert_eq!(a.tuples_per_sec, 1e6);
        assert_eq!(b.tuples_per_sec, 5e5);
        let sum = RunFigures::sum(&[a.clone(), b], 125);
        assert_eq!(sum.tuples, 1502);
        assert_eq!(sum.tuples_per_sec, 1.5e6);
        assert_eq!(sum.gbit_per_sec, 1.5);
        assert_eq!(sum.window_s, 0.001);
        assert_eq!(
            RunFigures::sum(std::slice::from_ref(&a), 125).tuples,
            a.tuples
        );
    }

    #[test]
    fn round_trips_give_half_as_one_way() {
        // Synthetic send and return timestamps: tuple i sent at 1 ms + 10 us * i, back 2 (i + 1)
        // ns later.
        let mut report = OperatorReport::default();
        let mut histogram = latency_histogram();
        let mut meter = Meter::new(0);
        for i in 0..100u64 {
            let sent = 1_000_000 + 10_000 * i;
            let back = sent + 2 * (i + 1);
            meter.arrive(back);
            histogram.record(back - sent).unwrap();
        }
        meter.counters(&mut report);
        report.latency = Some(histogram);
        let f = RunFigures::from_round_trips(&report, 64).unwrap();
        let (rtt, one_way) = (f.round_trip_ns.unwrap(), f.latency_ns.unwrap());
        assert_eq!((rtt.p50, rtt.max, rtt.samples), (100.0, 200.0, 100));
        assert_eq!(
            (one_way.p50, one_way.max, one_way.samples),
            (50.0, 100.0, 100)
        );
        assert_eq!(one_way.mean, rtt.mean / 2.0);
        assert_eq!(f.tuples, 100);
        let json = serde_json::to_value(&f).unwrap();
        assert_eq!(json["round_trip_ns"]["p50"], 100.0);
        let one_way_only = RunFigures::from_report(&report, 64).unwrap();
        assert!(serde_json::to_value(&one_way_only)
            .unwrap()
            .get("round_trip_ns")
            .is_none());
    }

    #[test]
    fn a_window_of_one_reading_has_no_rate() {
        let mut c = Counting::new(0);
        for _ in 0..(SAMPLE_EVERY + 5) {
            c.record(&[1u8; 4]);
        }
        let err = RunFigures::from_report(&c.report(), 4)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "the measured window holds 1 tuple(s) over 0 ns (1029 received in all)"
            ),
            "{err}"
        );
    }

    #[test]
    fn nothing_after_the_warm_up_is_an_error() {
        let mut t = Timing::new(u64::MAX);
        t.record(&[0u8; 8]);
        let err = RunFigures::from_report(&t.report(), 8)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "no tuple arrived after the warm-up (1 before it); try a longer --duration"
        );
    }
}
