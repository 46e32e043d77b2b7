//! Pacing a generating source at a fixed rate: how many tuples are due now.

use sluice_types::monotonic_ns;

/// Tracks a source's emissions against `rate` tuples per second from its start; unlimited
/// when the rate is `None`.
#[derive(Debug, Clone)]
pub(crate) struct Pacer {
    rate: Option<u64>,
    started_ns: u64,
    emitted: u64,
}

impl Pacer {
    pub(crate) fn new(rate: Option<u64>) -> Self {
        Self {
            rate: rate.filter(|r| *r > 0),
            started_ns: 0,
            emitted: 0,
        }
    }

    /// Starts the clock (at the first `produce`, so a slow job start does not make a burst).
    fn start_once(&mut self) {
        if self.started_ns == 0 {
            self.started_ns = monotonic_ns().max(1);
        }
    }

    /// How many tuples may be emitted now, at most `most`.
    pub(crate) fn allowance(&mut self, most: usize) -> usize {
        self.start_once();
        match self.rate {
            None => most,
            Some(rate) => {
                let elapsed = monotonic_ns().saturating_sub(self.started_ns) as u128;
                let due = (elapsed * rate as u128 / 1_000_000_000) as u64;
                due.saturating_sub(self.emitted).min(most as u64) as usize
            }
        }
    }

    /// Records `n` emissions.
    pub(crate) fn emitted(&mut self, n: usize) {
        self.emitted += n as u64;
    }
}
