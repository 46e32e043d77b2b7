//! Pacing a source at a fixed rate: how many tuples are due now.
//!
//! A [`Pacer`] compares what a source has emitted with what `rate` tuples per second allow
//! since its first call, so a source that falls behind catches up (a call at a time, each
//! bounded by the caller) and one ahead of time waits: it never runs ahead of the schedule.

use sluice_types::monotonic_ns;

/// Tracks a source's emissions against `rate` tuples per second from its start; unlimited
/// when the rate is `None`.
#[derive(Debug, Clone)]
pub struct Pacer {
    rate: Option<u64>,
    started_ns: u64,
    emitted: u64,
}

impl Pacer {
    /// A pacer allowing `rate` tuples per second, or any number when `rate` is `None` (a rate
    /// of 0 counts as none).
    pub fn new(rate: Option<u64>) -> Self {
        Self {
            rate: rate.filter(|r| *r > 0),
            started_ns: 0,
            emitted: 0,
        }
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
        match self.rate {
            None => most,
            Some(rate) => {
                let elapsed = monotonic_ns().saturating_sub(self.started_ns) as u128;
                let due = (elapsed * rate as u128 / 1_000_000_000).min(u64::MAX as u128) as u64;
                due.saturating_sub(self.emitted).min(most as u64) as usize
            }
        }
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
        assert!(!Pacer::new(Some(0)).is_paced());
    }

    #[test]
    fn a_slow_pacer_allows_nothing_at_first_and_never_more_than_asked() {
        let mut pacer = Pacer::new(Some(1));
        assert!(pacer.is_paced());
        assert_eq!(pacer.allowance(64), 0, "nothing is due at the start");
        let mut fast = Pacer::new(Some(u64::MAX));
        fast.allowance(1);
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(fast.allowance(8), 8);
        fast.emitted(8);
        assert_eq!(fast.allowance(8), 8);
    }
}
