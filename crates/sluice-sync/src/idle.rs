//! What a polling loop does when a poll finds no work.
//!
//! Handing a tuple to a spinning thread on another core costs a cache-line transfer (about
//! 110 ns on the development machine); waking a blocked thread costs 50-100 us. Hot hand-offs
//! therefore spin, but a machine with fewer cores than spinning threads must not be starved,
//! so the default backs off from spinning to yielding to short sleeps, and resets on work.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How a loop waits when it found nothing to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdleStrategy {
    /// Spin on the CPU forever: lowest latency, one core per polling thread.
    BusySpin,
    /// Spin briefly, then `sched_yield` forever: good when threads do not outnumber cores.
    Yield,
    /// Spin, then yield, then sleep with a growing period up to a cap: the choice when threads
    /// outnumber cores or the stream is idle for long stretches.
    Backoff,
}

impl IdleStrategy {
    /// The default for `threads` polling threads on a machine with `cores` cores.
    pub fn default_for(threads: usize, cores: usize) -> Self {
        if threads <= cores {
            Self::Yield
        } else {
            Self::Backoff
        }
    }

    /// Parses `busy-spin`, `yield` or `backoff`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "busy-spin" | "spin" => Some(Self::BusySpin),
            "yield" => Some(Self::Yield),
            "backoff" => Some(Self::Backoff),
            _ => None,
        }
    }

    /// A fresh waiter following this strategy.
    pub fn waiter(self) -> Idle {
        Idle {
            strategy: self,
            idle_rounds: 0,
        }
    }
}

/// The state of one loop's idling: how long it has found no work.
#[derive(Debug, Clone)]
pub struct Idle {
    strategy: IdleStrategy,
    idle_rounds: u32,
}

/// Rounds `Yield` spins before its first `sched_yield`: about 25 us. Measured on the 2-core
/// development machine, 64 rounds made the shm-vega benchmark's two processes take turns
/// yielding (12.7 M tuples/s at 32 bytes); 1024 rounds gave 49 M/s, and the threaded port at
/// 64 bytes went from 25 to 52 M/s.
const SPIN_ROUNDS: u32 = 1024;
/// `Backoff` runs where threads outnumber cores, so it spins briefly before yielding.
const BACKOFF_SPIN_ROUNDS: u32 = 64;
const YIELD_ROUNDS: u32 = BACKOFF_SPIN_ROUNDS + 64;
const MIN_SLEEP: Duration = Duration::from_micros(20);
const MAX_SLEEP: Duration = Duration::from_millis(1);

impl Idle {
    /// Call after a poll that did `work` units of work: resets on work, waits otherwise.
    #[inline]
    pub fn after(&mut self, work: usize) {
        if work > 0 {
            self.idle_rounds = 0;
        } else {
            self.wait();
        }
    }

    /// Waits once, longer the longer the loop has been idle.
    pub fn wait(&mut self) {
        self.idle_rounds = self.idle_rounds.saturating_add(1);
        match self.strategy {
            IdleStrategy::BusySpin => crate::spin_hint(),
            IdleStrategy::Yield => {
                if self.idle_rounds < SPIN_ROUNDS {
                    crate::spin_hint()
                } else {
                    std::thread::yield_now()
                }
            }
            IdleStrategy::Backoff => {
                if self.idle_rounds < BACKOFF_SPIN_ROUNDS {
                    crate::spin_hint()
                } else if self.idle_rounds < YIELD_ROUNDS {
                    std::thread::yield_now()
                } else {
                    let doublings = (self.idle_rounds - YIELD_ROUNDS).min(6);
                    std::thread::sleep((MIN_SLEEP * (1 << doublings)).min(MAX_SLEEP));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_depends_on_oversubscription() {
        assert_eq!(IdleStrategy::default_for(2, 2), IdleStrategy::Yield);
        assert_eq!(IdleStrategy::default_for(3, 2), IdleStrategy::Backoff);
    }

    #[test]
    fn parses_names() {
        assert_eq!(IdleStrategy::parse("spin"), Some(IdleStrategy::BusySpin));
        assert_eq!(IdleStrategy::parse("backoff"), Some(IdleStrategy::Backoff));
        assert_eq!(IdleStrategy::parse("nap"), None);
    }

    #[test]
    fn work_resets_the_backoff() {
        let mut idle = IdleStrategy::Backoff.waiter();
        for _ in 0..(YIELD_ROUNDS + 2) {
            idle.wait();
        }
        assert!(idle.idle_rounds > YIELD_ROUNDS);
        idle.after(1);
        assert_eq!(idle.idle_rounds, 0);
    }
}
