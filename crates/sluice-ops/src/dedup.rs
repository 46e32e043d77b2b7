//! Dropping repeats of a key: [`Deduplicate`] passes a tuple on unless a tuple of its key
//! passed within the window before it ([`Dedup`]: the last `n` tuples, or a span of
//! processing or event time), as IBM Streams' `DeDuplicate` and Flink's keep-first-row do.
//!
//! Each key's state is when it last passed: the sequence number of the tuple among those this
//! instance received, or its time in nanoseconds. A tuple is a duplicate when that is at most
//! the window away from its own (before or after it, for event time out of order). With
//! [`Dedup::reset_on_duplicate`] a duplicate also moves its key's time on, so a key that keeps
//! coming never passes again until it pauses for a window.
//!
//! State does not outlive its use: as this instance's clock moves on (its tuple count, the
//! processing time, or by event time its watermark), every window or so it forgets the keys
//! that last passed more than a window ago, which could not hold a tuple back any more. So it
//! holds at most the keys of about two windows. By event time that needs watermarks upstream
//! ([`crate::Stream::watermarks`]); a tuple later than the watermark may find its key
//! forgotten and pass. The state is snapshotted per key, like the other keyed operators'.

use std::time::Duration;

use sluice_graph::{Operator, OperatorContext, OperatorError, OperatorReport, Output, Snapshot};
use sluice_types::{monotonic_ns, BatchRef, Tuple, TupleRef};

use crate::counters::counter_report;
use crate::keyed::{Key, KeyedState};
use crate::transforms::{each_tuple, one_tuple};
use crate::window::{nanos, TimeDomain};

/// How far back a tuple's key is looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Within {
    /// The tuples this instance received before it.
    Tuples(u64),
    /// A span of time.
    Time(Duration),
}

/// A deduplication window: by count of tuples, or by processing or event time.
pub struct Dedup<T> {
    within: Within,
    time: TimeDomain<T>,
    reset_on_duplicate: bool,
}

impl<T> Clone for Dedup<T> {
    fn clone(&self) -> Self {
        Self {
            within: self.within,
            time: self.time.clone(),
            reset_on_duplicate: self.reset_on_duplicate,
        }
    }
}

impl<T> Dedup<T> {
    fn of(within: Within) -> Self {
        Self {
            within,
            time: TimeDomain::Processing,
            reset_on_duplicate: false,
        }
    }

    /// Drops a tuple whose key passed at most `window` before it, by processing time unless
    /// [`Dedup::event_time`].
    pub fn within(window: Duration) -> Self {
        Self::of(Within::Time(window))
    }

    /// Drops a tuple whose key passed among the `tuples` tuples before it (those this
    /// instance received: under parallelism, of the keys routed to it).
    pub fn within_count(tuples: u64) -> Self {
        Self::of(Within::Tuples(tuples))
    }

    /// Measures a time window by the event time `time` reads from each tuple (nanoseconds).
    pub fn event_time(mut self, time: impl Fn(&T) -> u64 + Send + Sync + 'static) -> Self {
        self.time = TimeDomain::Event(std::sync::Arc::new(time));
        self
    }

    /// A duplicate restarts its key's window too, as if it had passed.
    pub fn reset_on_duplicate(mut self) -> Self {
        self.reset_on_duplicate = true;
        self
    }

    /// Why the window cannot work, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        match (self.within, &self.time) {
            (Within::Tuples(0), _) => Err("a dedup window needs at least 1 tuple".into()),
            (Within::Tuples(_), TimeDomain::Event(_)) => {
                Err("event time applies to a dedup window of time, not of tuples".into())
            }
            (Within::Time(window), _) if window.is_zero() => {
                Err("a dedup window needs a time above 0".into())
            }
            _ => Ok(()),
        }
    }

    /// The window in its clock's unit: tuples or nanoseconds.
    fn span(&self) -> u64 {
        match self.within {
            Within::Tuples(n) => n,
            Within::Time(window) => nanos(window),
        }
    }
}

/// Passes on the tuples whose key did not pass within the window before them.
pub struct Deduplicate<T, K, F> {
    key: F,
    dedup: Dedup<T>,
    span: u64,
    /// Each key's clock reading when it last passed (or, resetting, last came).
    state: KeyedState<K, u64>,
    /// Tuples received: the clock of a window by count.
    received: u64,
    /// The clock reading at which to forget old keys next.
    next_sweep: u64,
    passed: Vec<T>,
    duplicates: u64,
}

impl<T, K: Key, F: Fn(&T) -> &K> Deduplicate<T, K, F> {
    /// Drops the repeats within `dedup` of the keys `key` reads.
    pub fn new(key: F, dedup: Dedup<T>) -> Self {
        Self {
            key,
            span: dedup.span(),
            dedup,
            state: KeyedState::new(),
            received: 0,
            next_sweep: 0,
            passed: Vec::new(),
            duplicates: 0,
        }
    }

    /// The processing time to stamp a batch with, if the window is by processing time.
    fn arrival(&self) -> u64 {
        match (self.dedup.within, &self.dedup.time) {
            (Within::Time(_), TimeDomain::Processing) => monotonic_ns(),
            _ => 0,
        }
    }

    fn take(&mut self, tuple: &T, arrival: u64)
    where
        T: Clone,
    {
        let at = match (self.dedup.within, &self.dedup.time) {
            (Within::Tuples(_), _) => self.received,
            (Within::Time(_), TimeDomain::Processing) => arrival,
            (Within::Time(_), TimeDomain::Event(time)) => time(tuple),
        };
        self.received += 1;
        let key = (self.key)(tuple);
        let passes = match self.state.get_mut(key) {
            Some(last) => {
                let passes = at.abs_diff(*last) > self.span;
                if passes || self.dedup.reset_on_duplicate {
                    *last = (*last).max(at);
                }
                passes
            }
            None => {
                self.state.update(key, || at, |_| ());
                true
            }
        };
        if passes {
            self.passed.push(tuple.clone());
        } else {
            self.duplicates += 1;
        }
    }

    /// The clock reached `now`: forgets the keys that passed more than a window ago, once a
    /// window.
    fn advance(&mut self, now: u64) {
        if now < self.next_sweep {
            return;
        }
        let span = self.span;
        self.state
            .retain(|_, last| now.saturating_sub(*last) <= span);
        self.next_sweep = now.saturating_add(span);
    }

    /// Emits what passed and moves the clock on (by event time, the watermark moves it).
    fn pass_on(&mut self, arrival: u64, out: &mut Output<'_>) -> Result<(), OperatorError>
    where
        T: Tuple,
    {
        match (self.dedup.within, &self.dedup.time) {
            (Within::Tuples(_), _) => self.advance(self.received),
            (Within::Time(_), TimeDomain::Processing) => self.advance(arrival),
            (Within::Time(_), TimeDomain::Event(_)) => {}
        }
        out.emit_batch(0, &mut self.passed)
    }
}

impl<T, K, F> Operator for Deduplicate<T, K, F>
where
    T: Tuple,
    K: Key,
    F: Fn(&T) -> &K + Send,
{
    fn start(&mut self, _ctx: &OperatorContext) -> Result<(), OperatorError> {
        self.dedup.check().map_err(OperatorError::Failed)
    }

    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.process_batch(port, BatchRef::new(&one_tuple::<T>(port, tuple)?), out)
    }

    fn process_batch(
        &mut self,
        port: usize,
        batch: BatchRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let arrival = self.arrival();
        each_tuple(port, batch, |t| self.take(t, arrival))?;
        self.pass_on(arrival, out)
    }

    fn watermark(&mut self, watermark: u64, out: &mut Output<'_>) -> Result<(), OperatorError> {
        if matches!(self.dedup.time, TimeDomain::Event(_)) {
            self.advance(watermark);
        }
        out.watermark(watermark)
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        Ok(counter_report(&[("duplicate_tuples", self.duplicates)]))
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Ok(Snapshot {
            operator: Vec::new(),
            keyed: self.state.snapshot()?,
        })
    }

    /// Takes back the keys; a window by count goes on counting after the latest of them.
    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        self.state.restore(&snapshot.keyed)?;
        if let Within::Tuples(_) = self.dedup.within {
            let after = self.state.iter().map(|(_, last)| last + 1).max();
            self.received = self.received.max(after.unwrap_or(0));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_graph::{OutputSink, OwnedTuple, Timer};

    /// An output sink that keeps nothing: the tests read the operator's state.
    struct Nowhere;

    impl OutputSink for Nowhere {
        fn emit(&mut self, _: usize, _: &mut dyn OwnedTuple) -> Result<(), OperatorError> {
            Ok(())
        }
        fn punctuate(&mut self, _: usize) -> Result<(), OperatorError> {
            Ok(())
        }
        fn watermark(&mut self, _: u64) -> Result<(), OperatorError> {
            Ok(())
        }
        fn set_timer(&mut self, _: Timer) {}
    }

    /// Runs `f` with an output of pairs that goes nowhere.
    fn nowhere<R>(f: impl FnOnce(&mut Output<'_>) -> R) -> R {
        let schemas = [<Pair as Tuple>::schema()];
        f(&mut Output::new(&schemas, &mut Nowhere))
    }

    type Pair = (u64, u64);

    fn first(t: &Pair) -> &u64 {
        &t.0
    }

    /// Feeds `tuples` one at a time; returns those that passed.
    fn feed(op: &mut Deduplicate<Pair, u64, fn(&Pair) -> &u64>, tuples: &[Pair]) -> Vec<Pair> {
        let mut passed = Vec::new();
        for t in tuples {
            let arrival = op.arrival();
            op.take(t, arrival);
            passed.append(&mut op.passed);
            nowhere(|out| op.pass_on(arrival, out)).unwrap();
        }
        passed
    }

    #[test]
    fn by_count_a_key_passes_again_once_its_window_is_behind_it() {
        let mut op = Deduplicate::new(first as fn(&Pair) -> &u64, Dedup::within_count(2));
        let got = feed(&mut op, &[(1, 0), (1, 1), (2, 2), (1, 3), (1, 4), (1, 5)]);
        assert_eq!(got, vec![(1, 0), (2, 2), (1, 3)]);
        let mut reset = Deduplicate::new(
            first as fn(&Pair) -> &u64,
            Dedup::within_count(2).reset_on_duplicate(),
        );
        let got = feed(
            &mut reset,
            &[(1, 0), (1, 1), (2, 2), (1, 3), (2, 4), (2, 5), (1, 6)],
        );
        assert_eq!(got, vec![(1, 0), (2, 2), (1, 6)]);
    }

    #[test]
    fn by_count_old_keys_are_forgotten() {
        let mut op = Deduplicate::new(first as fn(&Pair) -> &u64, Dedup::within_count(10));
        let distinct: Vec<Pair> = (0..10_000).map(|k| (k, 0)).collect();
        assert_eq!(feed(&mut op, &distinct).len(), 10_000);
        assert!(op.state.len() <= 21, "{} keys kept", op.state.len());
    }

    #[test]
    fn by_event_time_the_watermark_forgets_keys() {
        let dedup = Dedup::within(Duration::from_nanos(10)).event_time(|t: &Pair| t.1);
        let mut op = Deduplicate::new(first as fn(&Pair) -> &u64, dedup);
        let got = feed(
            &mut op,
            &[(1, 100), (1, 105), (1, 95), (1, 111), (2, 111), (1, 120)],
        );
        assert_eq!(got, vec![(1, 100), (1, 111), (2, 111)]);
        nowhere(|out| op.watermark(200, out)).unwrap();
        assert!(op.state.is_empty());
    }

    #[test]
    fn a_restored_count_window_goes_on_after_its_keys() {
        let mut op = Deduplicate::new(first as fn(&Pair) -> &u64, Dedup::within_count(3));
        feed(&mut op, &[(1, 0), (2, 0), (3, 0)]);
        let mut restored = Deduplicate::new(first as fn(&Pair) -> &u64, Dedup::within_count(3));
        restored.restore(op.snapshot().unwrap()).unwrap();
        assert_eq!(restored.received, 3);
        assert_eq!(feed(&mut restored, &[(3, 1), (1, 1)]), vec![(1, 1)]);
    }

    #[test]
    fn windows_that_cannot_work_are_refused() {
        let zero = Dedup::<Pair>::within(Duration::ZERO).check().unwrap_err();
        assert!(zero.contains("above 0"), "{zero}");
        assert!(Dedup::<Pair>::within_count(0).check().is_err());
        let by_count_in_event_time = Dedup::within_count(3).event_time(|t: &Pair| t.1);
        assert!(by_count_in_event_time.check().is_err());
        assert!(Dedup::<Pair>::within_count(1).check().is_ok());
    }
}
