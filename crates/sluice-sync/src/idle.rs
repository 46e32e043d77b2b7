//! What a polling loop does when a poll finds no work.
//!
//! Handing a tuple to a spinning thread on another core costs a cache-line transfer (about
//! 110 ns on the development machine); waking a blocked thread costs 50-100 us. Hot hand-offs
//! therefore spin, but a machine with fewer cores than spinning threads must not be starved:
//! there the default is [`IdleStrategy::Park`], which spins briefly, yields briefly, then
//! sleeps on the doorbell of the queue it waits for ([`crate::Doorbell`]) until the peer
//! publishes (or frees room), at most [`PARK_TIMEOUT`].
//!
//! # Choosing the default (measured)
//! On the 2-vCPU development machine, shared at the time with a benchmark suite pinned to both
//! cores, `sluice run wordcount --plan threaded --idle X --duration 2` (4 threads on 2 cores,
//! sentences generated at 100 000/s) gave, sentences/s and end-to-end p99 over 2-3 runs:
//!
//! | `--idle` | sentences/s | p99 |
//! |---|---|---|
//! | busy-spin | 4 957 | 1.74 s |
//! | yield | 66 625, 83 872, 76 349 | 186, 98, 314 ms |
//! | backoff | 62 419, 92 196, 99 753 | 234, 124, 77 ms |
//! | park | 99 765, 99 759, 93 811 | 156, 53, 61 ms |
//!
//! and `sluice bench latency --transport threaded --size 64 --rate 100000 --repeat 3
//! --duration 1` (medians): yield p50 567 us / p99 19.8 ms, backoff 241 us / 14.6 ms, park
//! 54 us / 1.2 ms (busy-spin did not finish its runs). Park keeps up with the offered rate and
//! has the lowest tail, so it is the default when threads outnumber cores. With a core per
//! thread the default stays `Yield`, whose long spin keeps a hand-off at cache-line cost.

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
    /// Spin, then yield, then sleep with a growing period up to a cap: for loops with nothing
    /// to park on that are idle for long stretches.
    Backoff,
    /// Spin, then yield, as `Backoff`; then sleep on the doorbell of what the loop waits for
    /// (a receiver's queue, a full sender's queue), woken by the peer's publish or release, or
    /// after [`PARK_TIMEOUT`] to poll again. A loop with nothing to park on sleeps as `Backoff`.
    Park,
}

/// The longest a `Park` waiter sleeps on a doorbell before it polls again, so that a thread
/// polling several receivers, or a source, or its stop flag, comes back to them.
pub const PARK_TIMEOUT: Duration = Duration::from_millis(1);

/// A name `--idle` does not know; its message lists the names it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownIdleStrategy(pub String);

impl std::fmt::Display for UnknownIdleStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown idle strategy `{}`: expected one of {}",
            self.0,
            IdleStrategy::NAMES.join(", ")
        )
    }
}

impl std::error::Error for UnknownIdleStrategy {}

impl IdleStrategy {
    /// The default for `threads` polling threads on a machine with `cores` cores.
    pub fn default_for(threads: usize, cores: usize) -> Self {
        if threads <= cores {
            Self::Yield
        } else {
            Self::Park
        }
    }

    /// Every strategy's name, as [`IdleStrategy::parse`] takes them.
    pub const NAMES: [&'static str; 4] = ["busy-spin", "yield", "backoff", "park"];

    /// Parses one of [`IdleStrategy::NAMES`] (or `spin` for `busy-spin`).
    pub fn parse(text: &str) -> Result<Self, UnknownIdleStrategy> {
        match text {
            "busy-spin" | "spin" => Ok(Self::BusySpin),
            "yield" => Ok(Self::Yield),
            "backoff" => Ok(Self::Backoff),
            "park" => Ok(Self::Park),
            _ => Err(UnknownIdleStrategy(text.to_string())),
        }
    }

    /// The strategy's name, as [`IdleStrategy::parse`] takes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::BusySpin => "busy-spin",
            Self::Yield => "yield",
            Self::Backoff => "backoff",
            Self::Park => "park",
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
/// `Backoff` and `Park` run where threads outnumber cores, so they spin briefly before
/// yielding.
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

    /// As [`Idle::after`], with a doorbell to park on (see [`Idle::wait_or_park`]).
    #[inline]
    pub fn after_or_park(&mut self, work: usize, park: impl FnOnce(Duration) -> bool) {
        if work > 0 {
            self.idle_rounds = 0;
        } else {
            self.wait_or_park(park);
        }
    }

    /// Waits once, longer the longer the loop has been idle.
    pub fn wait(&mut self) {
        self.wait_or_park(|_| false);
    }

    /// Waits once, longer the longer the loop has been idle. Where `Park` would sleep it calls
    /// `park(timeout)` instead, which should block until the awaited peer rings a doorbell or
    /// `timeout` passes, and return false if there is nothing to park on (then it sleeps as
    /// `Backoff`). Other strategies never call `park`.
    pub fn wait_or_park(&mut self, park: impl FnOnce(Duration) -> bool) {
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
            IdleStrategy::Backoff | IdleStrategy::Park => {
                if self.idle_rounds < BACKOFF_SPIN_ROUNDS {
                    crate::spin_hint()
                } else if self.idle_rounds < YIELD_ROUNDS {
                    std::thread::yield_now()
                } else if self.strategy == IdleStrategy::Backoff || !park(PARK_TIMEOUT) {
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
        assert_eq!(IdleStrategy::default_for(3, 2), IdleStrategy::Park);
    }

    #[test]
    fn parses_names() {
        for name in IdleStrategy::NAMES {
            assert_eq!(IdleStrategy::parse(name).map(IdleStrategy::name), Ok(name));
        }
        assert_eq!(IdleStrategy::parse("spin"), Ok(IdleStrategy::BusySpin));
        let error = IdleStrategy::parse("nap").unwrap_err().to_string();
        assert_eq!(
            error,
            "unknown idle strategy `nap`: expected one of busy-spin, yield, backoff, park"
        );
    }

    #[test]
    fn park_parks_only_after_spinning_and_yielding() {
        let mut idle = IdleStrategy::Park.waiter();
        let mut parked = 0;
        for _ in 0..YIELD_ROUNDS + 2 {
            idle.wait_or_park(|timeout| {
                assert_eq!(timeout, PARK_TIMEOUT);
                parked += 1;
                true
            });
        }
        assert_eq!(parked, 3);
        idle.after_or_park(1, |_| unreachable!("work resets without parking"));
        assert_eq!(idle.idle_rounds, 0);
    }

    #[test]
    fn other_strategies_never_park() {
        for strategy in [
            IdleStrategy::BusySpin,
            IdleStrategy::Yield,
            IdleStrategy::Backoff,
        ] {
            let mut idle = strategy.waiter();
            for _ in 0..YIELD_ROUNDS + 2 {
                idle.wait_or_park(|_| unreachable!("{strategy:?} parked"));
            }
        }
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
