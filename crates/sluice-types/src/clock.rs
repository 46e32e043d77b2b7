//! The clock tuples carry for latency measurement.
//!
//! `CLOCK_MONOTONIC` is one clock for every process on a host, so a timestamp written by a
//! source in one process can be compared with the arrival time read by a sink in another
//! (the Vega and IBM latency tests do exactly this; between hosts they measure a round trip so
//! both readings come from the same clock).
//!
//! Processing time, the time a person reads in a window's start and end, is the wall clock
//! instead: UTC nanoseconds since the Unix epoch ([`WallClock`]), printed by [`utc_text`].

use std::time::{Duration, Instant, SystemTime};

/// Nanoseconds on the host's monotonic clock, comparable across processes on one host.
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    // tv_sec and tv_nsec of CLOCK_MONOTONIC are never negative.
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// Processing time as a person reads it: UTC nanoseconds since the Unix epoch.
///
/// The wall clock (`CLOCK_REALTIME`) is read once, when the clock is made, and advanced by
/// `CLOCK_MONOTONIC` from then on: times follow the calendar, yet never jump back or forward
/// when NTP or an administrator steps the system clock, and convert exactly to and from the
/// monotonic times processing-time timers are set in ([`WallClock::to_monotonic`],
/// [`WallClock::from_monotonic`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WallClock {
    /// UTC minus monotonic, in nanoseconds (wrapping, so every conversion is exact).
    offset: u64,
}

impl WallClock {
    /// Reads the wall clock and the monotonic clock now.
    pub fn new() -> Self {
        let monotonic = monotonic_ns();
        let ts = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
        // A clock set before 1970 reads as 1970.
        let utc = (ts.tv_sec.max(0) as u64) * 1_000_000_000 + ts.tv_nsec as u64;
        Self {
            offset: utc.wrapping_sub(monotonic),
        }
    }

    /// The time now, UTC nanoseconds since the epoch.
    pub fn now(&self) -> u64 {
        self.from_monotonic(monotonic_ns())
    }

    /// The UTC time of the monotonic time `monotonic`.
    pub fn from_monotonic(&self, monotonic: u64) -> u64 {
        monotonic.wrapping_add(self.offset)
    }

    /// The monotonic time of the UTC time `utc`: when a processing-time timer for `utc` is due.
    pub fn to_monotonic(&self, utc: u64) -> u64 {
        utc.wrapping_sub(self.offset)
    }
}

impl Default for WallClock {
    fn default() -> Self {
        Self::new()
    }
}

/// `utc`, UTC nanoseconds since the Unix epoch, as RFC 3339 text with nanoseconds:
/// `2026-11-27T22:31:05.000000000Z`.
pub fn utc_text(utc: u64) -> String {
    let at = SystemTime::UNIX_EPOCH + Duration::from_nanos(utc);
    humantime::format_rfc3339_nanos(at).to_string()
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
    fn wall_clock_times_are_utc_since_the_epoch() {
        let clock = WallClock::new();
        let system = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let now = clock.now();
        // Both read the wall clock: they agree to within a minute (a step of the system clock
        // between the two readings aside), and neither reads CLOCK_MONOTONIC's small values.
        assert!(
            now.abs_diff(system) < 60_000_000_000,
            "{now} against {system}"
        );
        assert!(now > monotonic_ns());
    }

    #[test]
    fn wall_clock_converts_exactly_to_and_from_monotonic_times() {
        let clock = WallClock::new();
        for utc in [0, 1, clock.now(), u64::MAX] {
            assert_eq!(clock.from_monotonic(clock.to_monotonic(utc)), utc);
        }
        let later = clock.to_monotonic(clock.now() + 1_000_000_000);
        assert!(later > monotonic_ns());
    }

    #[test]
    fn utc_text_is_rfc_3339_with_nanoseconds() {
        assert_eq!(utc_text(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            utc_text(1_795_818_665_123_456_789),
            "2026-11-27T22:31:05.123456789Z"
        );
    }

    #[test]
    fn monotonic_clock_never_goes_back() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a);
        assert!(a > 0);
    }
}
