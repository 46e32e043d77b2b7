//! The clock tuples carry for latency measurement.
//!
//! `CLOCK_MONOTONIC` is one clock for every process on a host, so a timestamp written by a
//! source in one process can be compared with the arrival time read by a sink in another
//! (the Vega and IBM latency tests do exactly this; between hosts they measure a round trip so
//! both readings come from the same clock).

use std::time::Instant;

/// Nanoseconds on the host's monotonic clock, comparable across processes on one host.
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    // tv_sec and tv_nsec of CLOCK_MONOTONIC are never negative.
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// Elapsed wall time since creation, for rate control and throughput windows.
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch {
    start: Instant,
}

impl Stopwatch {
    /// Starts a stopwatch now.
    pub fn start() -> Self {
        Self {
            start: Instant::now(),
        }
    }

    /// Seconds elapsed since the start, as a float.
    pub fn elapsed_secs(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Nanoseconds elapsed since the start.
    pub fn elapsed_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_clock_never_goes_back() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a);
        assert!(a > 0);
    }
}
