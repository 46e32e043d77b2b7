//! Pacing tuples at a fixed rate: how many are due now, and how long until the next one is.
//!
//! A [`Pacer`] compares what has been emitted with what `rate` tuples per second allow since
//! its first call, so a source that falls behind catches up (a call at a time, each bounded by
//! the caller) and one ahead of time waits: it never runs ahead of the schedule. A pacer made
//! [`Pacer::with_most_behind`] forgets a backlog beyond that many tuples, so after a pause it
//! lets only a small burst through at once (the throttle operator's use).

use std::time::Duration;

use sluice_types::monotonic_ns;

const NANOS_PER_SECOND: f64 = 1e9;

/// Tracks emissions against `rate` tuples per second from the first call; unlimited when it
/// has no rate.
#[derive(Debug, Clone)]
pub struct Pacer {
    rate: Option<f64>,
    started_ns: u64,
    /// Tuples the schedule has accounted for: those emitted, plus any backlog forgotten.
    emitted: u64,
    most_behind: Option<u64>,
}

impl Pacer {
    /// A pacer allowing `rate` tuples per second, or any number when `rate` is `None` (a rate
    /// of 0 counts as none).
    pub fn new(rate: Option<u64>) -> Self {
        Self::per_second(rate.map_or(0.0, |r| r as f64))
    }

    /// A pacer allowing `rate` tuples per second, fractions too (0.5: one tuple every two
    /// seconds); a rate that is not positive and finite counts as none.
    pub fn per_second(rate: f64) -> Self {
        Self {
            rate: (rate > 0.0 && rate.is_finite()).then_some(rate),
            started_ns: 0,
            emitted: 0,
            most_behind: None,
        }
    }

    /// Never lets more than `most` tuples be due at once: a backlog beyond that (after a
    /// pause) is forgotten instead of caught up.
    pub fn with_most_behind(mut self, most: u64) -> Self {
        self.most_behind = Some(most);
        self
    }

    /// Whether this pacer limits the rate at all.
    pub fn is_paced(&self) -> bool {
        self.rate.is_some()
    }

    /// Starts the clock (at the first `allowance`, so a slow job start does not make a burst).
    fn start_once(&mut self) {
        if self.started_ns == 0 {
            self.started_ns = monotonic_ns().max(1);
        }
    }

    /// How many tuples may be emitted now, at most `most`.
    pub fn allowance(&mut self, most: usize) -> usize {
        self.start_once();
        let Some(rate) = self.rate else {
            return most;
        };
        let elapsed = monotonic_ns().saturating_sub(self.started_ns) as f64;
        // `as` saturates: a huge rate allows everything asked.
        let due = (elapsed * rate / NANOS_PER_SECOND) as u64;
        if let Some(limit) = self.most_behind {
            self.emitted = self.emitted.max(due.saturating_sub(limit));
        }
        due.saturating_sub(self.emitted).min(most as u64) as usize
    }

    /// How long until one more tuple is due (zero if one is due now, or if unpaced).
    pub fn until_due(&self) -> Duration {
        let Some(rate) = self.rate else {
            return Duration::ZERO;
        };
        let next = (self.emitted + 1) as f64 * NANOS_PER_SECOND / rate;
        let due_ns = self.started_ns.saturating_add(next.ceil() as u64);
        Duration::from_nanos(due_ns.saturating_sub(monotonic_ns()))
    }

    /// Records `n` emissions.
    pub fn emitted(&mut self, n: usize) {
        self.emitted += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unpaced_pacer_allows_the_most_asked() {
        let mut pacer = Pacer::new(None);
        assert!(!pacer.is_paced());
        assert_eq!(pacer.allowance(64), 64);
        assert_eq!(pacer.until_due(), Duration::ZERO);
        assert!(!Pacer::new(Some(0)).is_paced());
        assert!(!Pacer::per_second(f64::NAN).is_paced());
        assert!(!Pacer::per_second(-1.0).is_paced());
    }

    #[test]
    fn a_slow_pacer_allows_nothing_at_first_and_never_more_than_asked() {
        let mut pacer = Pacer::new(Some(1));
        assert!(pacer.is_paced());
        assert_eq!(pacer.allowance(64), 0, "nothing is due at the start");
        assert!(pacer.until_due() > Duration::ZERO);
        assert!(pacer.until_due() <= Duration::from_secs(1));
        let mut fast = Pacer::new(Some(u64::MAX));
        fast.allowance(1);
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(fast.allowance(8), 8);
        fast.emitted(8);
        assert_eq!(fast.allowance(8), 8);
    }

    #[test]
    fn a_pacer_with_a_backlog_limit_forgets_the_rest() {
        let mut pacer = Pacer::per_second(1e6).with_most_behind(3);
        pacer.allowance(1);
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(
            pacer.allowance(1000),
            3,
            "2 ms at 1e6/s is 2,000 due, 3 of them kept"
        );
        let mut unlimited = Pacer::per_second(1e6);
        unlimited.allowance(1);
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(unlimited.allowance(1000), 1000);
    }
}
