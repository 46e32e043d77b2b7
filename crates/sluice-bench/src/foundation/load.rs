//! What the sending side does: flood (as fast as the receiver takes them) or send at a fixed
//! rate paced by the monotonic clock. The engine's source and the baselines' senders share this
//! code, so they differ only in how a tuple reaches the receiver.

use std::time::Duration;

use sluice_types::monotonic_ns;

use crate::foundation::payload::Payload;
use crate::foundation::record::SAMPLE_EVERY;

/// The most tuples one call of [`Generator::fill`] sends.
pub(crate) const BATCH: usize = 256;

/// Paces sending to `rate` tuples per second from the first call: tuple `i` is due at
/// `start + i / rate`. A sender that falls behind catches up in bursts of at most [`BATCH`];
/// each tuple is stamped when it is actually sent, so the latency measured is that of the
/// transport, not of the sender's backlog.
#[derive(Debug, Clone)]
pub(crate) struct Pacer {
    rate: u64,
    start_ns: Option<u64>,
    sent: u64,
}

impl Pacer {
    /// A pacer for `rate` tuples per second (at least 1).
    pub(crate) fn new(rate: u64) -> Self {
        Self {
            rate: rate.max(1),
            start_ns: None,
            sent: 0,
        }
    }

    /// How many tuples are due at `now_ns` and not yet sent; the first call starts the clock.
    pub(crate) fn due(&mut self, now_ns: u64) -> u64 {
        let start = *self.start_ns.get_or_insert(now_ns);
        let elapsed = u128::from(now_ns.saturating_sub(start));
        let due_by_now = elapsed * u128::from(self.rate) / 1_000_000_000 + 1;
        u64::try_from(due_by_now)
            .unwrap_or(u64::MAX)
            .saturating_sub(self.sent)
    }

    /// Records that `n` more tuples were sent.
    pub(crate) fn sent(&mut self, n: u64) {
        self.sent += n;
    }
}

/// How the sender sends.
#[derive(Debug, Clone)]
pub(crate) enum Load {
    /// [`BATCH`] tuples per call, as fast as they are taken; no timestamps.
    Flood,
    /// Timestamped tuples at a fixed rate.
    Paced(Pacer),
}

/// The fewest tuples a flooding sender sends after its warm-up: a receiver reading the clock
/// every [`SAMPLE_EVERY`] tuples then sees several readings in its window, however short the
/// duration asked for and however loaded the machine.
pub(crate) const LEAST_FLOODED: u64 = 8 * SAMPLE_EVERY;
/// The fewest tuples a paced sender sends after its warm-up.
pub(crate) const LEAST_PACED: u64 = 20;
/// How long past its duration a sender goes on to reach its least; a window still short of it
/// then is reported as such by the receiver.
pub(crate) const MOST_EXTRA: Duration = Duration::from_secs(5);

/// How long a sender sends: a warm-up, then the measured duration, then on until it has sent
/// its least since the warm-up (at most [`MOST_EXTRA`] more).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    /// Sent but not measured.
    pub(crate) warmup: Duration,
    /// Measured.
    pub(crate) duration: Duration,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Span {
    /// The warm-up in nanoseconds.
    pub(crate) fn warmup_ns(&self) -> u64 {
        nanos(self.warmup)
    }

    /// Whether a sender `elapsed_ns` after its start, having sent `measured` tuples since its
    /// warm-up and needing `least`, is done.
    pub(crate) fn over(&self, elapsed_ns: u64, measured: u64, least: u64) -> bool {
        let end = nanos(self.warmup + self.duration);
        elapsed_ns >= end
            && (measured >= least || elapsed_ns >= end.saturating_add(nanos(MOST_EXTRA)))
    }

    /// The longest a sender may send.
    pub(crate) fn longest(&self) -> Duration {
        self.warmup + self.duration + MOST_EXTRA
    }
}

/// Makes the tuples of one sender, and says when it is done.
pub(crate) struct Generator<P> {
    template: P,
    load: Load,
    span: Span,
    /// The first call's clock reading.
    start_ns: Option<u64>,
    /// Tuples sent since the warm-up.
    measured: u64,
}

impl<P: Payload> Generator<P> {
    /// Sends copies of `template` as `load` says, for `span`.
    pub(crate) fn new(template: P, load: Load, span: Span) -> Self {
        Self {
            template,
            load,
            span,
            start_ns: None,
            measured: 0,
        }
    }

    /// Whether the span is over (never before the first [`fill`](Self::fill)).
    pub(crate) fn done(&self) -> bool {
        let least = match self.load {
            Load::Flood => LEAST_FLOODED,
            Load::Paced(_) => LEAST_PACED,
        };
        self.start_ns.is_some_and(|start| {
            self.span
                .over(monotonic_ns().saturating_sub(start), self.measured, least)
        })
    }

    /// Hands the tuples due now (at most [`BATCH`]) to `send`, by reference: a sender that
    /// encodes copies the tuple once, straight to its transport, and one that needs it owned
    /// clones it. Returns how many, 0 when none is due (the caller may idle).
    #[inline]
    pub(crate) fn fill<E>(&mut self, send: impl FnMut(&P) -> Result<(), E>) -> Result<usize, E> {
        self.fill_at_most(BATCH, send)
    }

    /// [`fill`](Self::fill), sending at most `most` tuples.
    #[inline]
    pub(crate) fn fill_at_most<E>(
        &mut self,
        most: usize,
        mut send: impl FnMut(&P) -> Result<(), E>,
    ) -> Result<usize, E> {
        let now = monotonic_ns();
        let start = *self.start_ns.get_or_insert(now);
        let measuring = now.saturating_sub(start) >= self.span.warmup_ns();
        let sent = self.send_due(now, most, &mut send)?;
        if measuring {
            self.measured += sent as u64;
        }
        Ok(sent)
    }

    #[inline]
    fn send_due<E>(
        &mut self,
        now: u64,
        most: usize,
        send: &mut impl FnMut(&P) -> Result<(), E>,
    ) -> Result<usize, E> {
        match &mut self.load {
            Load::Flood => {
                for _ in 0..most {
                    send(&self.template)?;
                }
                Ok(most)
            }
            Load::Paced(pacer) => {
                let due = pacer.due(now).min(most as u64);
                for _ in 0..due {
                    self.template.stamp(monotonic_ns());
                    pacer.sent(1);
                    send(&self.template)?;
                }
                Ok(due as usize)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPAN: Span = Span {
        warmup: Duration::from_millis(10),
        duration: Duration::from_millis(50),
    };

    #[test]
    fn a_span_ends_after_its_duration_and_its_least() {
        let ms = 1_000_000;
        assert!(
            !SPAN.over(59 * ms, 1_000_000, 100),
            "not before warm-up + duration"
        );
        assert!(SPAN.over(60 * ms, 100, 100));
        assert!(
            !SPAN.over(60 * ms, 1, 100),
            "a window holding one tuple goes on"
        );
        let most = 60 * ms + nanos(MOST_EXTRA);
        assert!(!SPAN.over(most - 1, 1, 100));
        assert!(SPAN.over(most, 1, 100), "but not for ever");
        assert_eq!(SPAN.longest(), Duration::from_millis(60) + MOST_EXTRA);
    }

    #[test]
    fn a_generator_counts_what_it_sends_after_the_warm_up() {
        let span = Span {
            warmup: Duration::ZERO,
            duration: Duration::ZERO,
        };
        let mut flood = Generator::new([7u8; 16], Load::Flood, span);
        assert!(!flood.done(), "not done before it starts");
        let mut batches = 0;
        while !flood.done() {
            flood.fill(|_| Ok::<_, ()>(())).unwrap();
            batches += 1;
        }
        assert_eq!(batches as u64 * BATCH as u64, LEAST_FLOODED);
    }

    #[test]
    fn a_pacer_releases_tuples_on_schedule() {
        let mut p = Pacer::new(1000); // one per millisecond
        assert_eq!(p.due(5_000_000), 1, "the first tuple is due at once");
        p.sent(1);
        assert_eq!(p.due(5_999_999), 0);
        assert_eq!(p.due(6_000_000), 1);
        assert_eq!(p.due(8_500_000), 3, "a late sender catches up");
        p.sent(3);
        assert_eq!(p.due(8_900_000), 0);
        assert_eq!(p.due(9_000_000), 1);
    }

    #[test]
    fn a_pacer_survives_extreme_rates_and_clock_readings() {
        let mut p = Pacer::new(u64::MAX);
        assert_eq!(p.due(0), 1);
        assert_eq!(p.due(u64::MAX), u64::MAX);
        let mut slow = Pacer::new(0);
        assert_eq!(slow.due(10), 1);
        slow.sent(1);
        assert_eq!(
            slow.due(5),
            0,
            "a clock reading before the start is no time at all"
        );
    }

    #[test]
    fn flooding_sends_a_full_batch_and_pacing_stamps() {
        let mut flood = Generator::new([7u8; 16], Load::Flood, SPAN);
        let mut n = 0;
        let count = |_: &[u8; 16]| {
            n += 1;
            Ok::<_, ()>(())
        };
        assert_eq!(flood.fill(count), Ok(BATCH));
        assert_eq!(n, BATCH);

        let mut paced = Generator::new([0u8; 16], Load::Paced(Pacer::new(1)), SPAN);
        let before = monotonic_ns();
        let mut stamps = Vec::new();
        let keep = |t: &[u8; 16]| {
            stamps.push(t.stamp_of());
            Ok::<_, ()>(())
        };
        assert_eq!(paced.fill(keep), Ok(1));
        assert!(stamps[0] >= before);
        assert_eq!(paced.fill(|_| Err("nothing is due")), Ok(0));
    }
}
