//! What the sending side does: flood (as fast as the receiver takes them) or send at a fixed
//! rate paced by the monotonic clock. The engine's source and the baselines' senders share this
//! code, so they differ only in how a tuple reaches the receiver.

use sluice_types::monotonic_ns;

use crate::payload::Payload;

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

/// Makes the tuples of one sender.
pub(crate) struct Generator<P> {
    template: P,
    load: Load,
}

impl<P: Payload> Generator<P> {
    /// Sends copies of `template` as `load` says.
    pub(crate) fn new(template: P, load: Load) -> Self {
        Self { template, load }
    }

    /// Hands the tuples due now (at most [`BATCH`]) to `send`; returns how many, 0 when none
    /// is due (the caller may idle).
    #[inline]
    pub(crate) fn fill<E>(&mut self, mut send: impl FnMut(P) -> Result<(), E>) -> Result<usize, E> {
        match &mut self.load {
            Load::Flood => {
                for _ in 0..BATCH {
                    send(self.template.clone())?;
                }
                Ok(BATCH)
            }
            Load::Paced(pacer) => {
                let due = pacer.due(monotonic_ns()).min(BATCH as u64);
                for _ in 0..due {
                    let mut tuple = self.template.clone();
                    tuple.stamp(monotonic_ns());
                    pacer.sent(1);
                    send(tuple)?;
                }
                Ok(due as usize)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut flood = Generator::new([7u8; 16], Load::Flood);
        let mut n = 0;
        let count = |_| {
            n += 1;
            Ok::<_, ()>(())
        };
        assert_eq!(flood.fill(count), Ok(BATCH));
        assert_eq!(n, BATCH);

        let mut paced = Generator::new([0u8; 16], Load::Paced(Pacer::new(1)));
        let before = monotonic_ns();
        let mut stamps = Vec::new();
        let keep = |t: [u8; 16]| {
            stamps.push(t.stamp_of());
            Ok::<_, ()>(())
        };
        assert_eq!(paced.fill(keep), Ok(1));
        assert!(stamps[0] >= before);
        assert_eq!(paced.fill(|_| Err("nothing is due")), Ok(0));
    }
}
