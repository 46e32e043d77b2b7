//! Time inside an operator instance: its event time, made from the watermarks its upstream
//! instances send, and the timers it has set.
//!
//! Watermarks travel as punctuations in order with the data, each naming the instance that
//! sent it, because one receiver may be fed by several senders (a many-producer ring carries
//! them interleaved). An instance's event time is the least watermark over all the upstream
//! instances that feed it; an upstream that ends sends the greatest watermark first, so it
//! never holds the others back.

use std::collections::BTreeSet;

use sluice_graph::Timer;

/// The watermarks an instance has seen from each of its upstream instances.
#[derive(Debug, Clone, Default)]
pub(crate) struct EventClock {
    /// Per upstream instance (by plan id), the greatest watermark it has sent.
    upstream: Vec<(u32, u64)>,
    /// The least of them: the instance's event time.
    now: u64,
}

impl EventClock {
    /// A clock fed by the instances `upstream` (repeats are fine).
    pub(crate) fn new(upstream: impl IntoIterator<Item = u32>) -> Self {
        let mut ids: Vec<u32> = upstream.into_iter().collect();
        ids.sort_unstable();
        ids.dedup();
        Self {
            upstream: ids.into_iter().map(|id| (id, 0)).collect(),
            now: 0,
        }
    }

    /// Takes `time` from upstream instance `from`; returns the new event time if it advanced.
    /// A watermark from an instance that does not feed this one is ignored.
    pub(crate) fn observe(&mut self, from: u32, time: u64) -> Option<u64> {
        let at = self.upstream.binary_search_by_key(&from, |u| u.0).ok()?;
        let seen = &mut self.upstream[at].1;
        *seen = (*seen).max(time);
        let least = self.upstream.iter().map(|u| u.1).min()?;
        (least > self.now).then(|| {
            self.now = least;
            least
        })
    }
}

/// The timers one instance has set, each kind in time order, each time once.
#[derive(Debug, Clone, Default)]
pub(crate) struct Timers {
    event: BTreeSet<u64>,
    processing: BTreeSet<u64>,
}

impl Timers {
    /// Sets `timer` (setting it again changes nothing).
    pub(crate) fn set(&mut self, timer: Timer) {
        match timer {
            Timer::Event(at) => self.event.insert(at),
            Timer::Processing(at) => self.processing.insert(at),
        };
    }

    /// Every timer set and not yet due, event-time ones first, each kind in time order.
    pub(crate) fn pending(&self) -> Vec<Timer> {
        let event = self.event.iter().map(|&at| Timer::Event(at));
        event
            .chain(self.processing.iter().map(|&at| Timer::Processing(at)))
            .collect()
    }

    /// Whether a processing-time timer is set.
    pub(crate) fn has_processing(&self) -> bool {
        !self.processing.is_empty()
    }

    /// Removes and returns the earliest event-time timer at or before `now`.
    pub(crate) fn next_event(&mut self, now: u64) -> Option<Timer> {
        pop_due(&mut self.event, now).map(Timer::Event)
    }

    /// Removes and returns the earliest processing-time timer at or before `now`.
    pub(crate) fn next_processing(&mut self, now: u64) -> Option<Timer> {
        pop_due(&mut self.processing, now).map(Timer::Processing)
    }
}

fn pop_due(set: &mut BTreeSet<u64>, now: u64) -> Option<u64> {
    let first = *set.first()?;
    (first <= now).then(|| {
        set.remove(&first);
        first
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_time_is_the_least_upstream_watermark() {
        let mut clock = EventClock::new([3, 7, 3]);
        assert_eq!(clock.observe(3, 10), None);
        assert_eq!(clock.observe(9, 50), None, "not an upstream");
        assert_eq!(clock.observe(7, 20), Some(10));
        assert_eq!(clock.observe(7, 5), None, "watermarks never go back");
        assert_eq!(clock.observe(3, u64::MAX), Some(20));
    }

    #[test]
    fn timers_pop_in_order_once_due() {
        let mut timers = Timers::default();
        for at in [30, 10, 20, 10] {
            timers.set(Timer::Event(at));
        }
        timers.set(Timer::Processing(5));
        assert_eq!(timers.next_event(15), Some(Timer::Event(10)));
        assert_eq!(timers.next_event(15), None);
        assert_eq!(timers.next_event(100), Some(Timer::Event(20)));
        assert!(timers.has_processing());
        assert_eq!(timers.next_processing(4), None);
        assert_eq!(timers.next_processing(5), Some(Timer::Processing(5)));
        assert!(!timers.has_processing());
        timers.set(Timer::Processing(9));
        assert_eq!(
            timers.pending(),
            vec![Timer::Event(30), Timer::Processing(9)]
        );
    }
}
