//! The as-of join by event time (kdb+'s `aj`, Flink's event-time temporal join): each tuple of
//! the left stream is joined with the latest tuple of the right stream of its key whose event
//! time is before its own, the right tuple that was current when the left one happened.
//!
//! Port 0 carries the left tuples, port 1 the right ones, each partitioned by its side's key.
//! A left tuple at time `t` is held until the operator's event time (the least watermark of its
//! upstream instances) reaches `t`: by then every right tuple before `t` has arrived, whatever
//! the plan and however the two inputs interleave, so the result is the same under every plan.
//! It then emits `join(left, right)`, `right` being `None` when the key had no right tuple
//! before `t`; a `None` from `join` emits nothing.
//!
//! Per key the operator keeps the right tuples at or after the event time and the last one
//! before it (older ones can no longer be any left tuple's match), and the left tuples not yet
//! resolved, in time order. A tuple of either side older than the event time comes after the
//! watermark said none would and is dropped and counted (`late_tuples`). At the end of the
//! stream (the runtime's last watermark) every held left tuple is resolved.
//!
//! The times are whatever the sides' event-time functions read (a sequence number works as
//! well as nanoseconds), on the same scale as the watermarks.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use sluice_graph::{Operator, OperatorError, OperatorReport, Output, Snapshot};
use sluice_types::{BatchRef, Tuple, TupleRef};

use crate::aggregate::Value;
use crate::join::{JoinEventTimes, TwoInputs};
use crate::keyed::{Key, KeyedState};

/// The as-of join; see the module documentation.
pub struct AsOfJoin<L, R, K, FL, FR, O, J> {
    left_key: FL,
    right_key: FR,
    left_time: fn(&L) -> u64,
    right_time: fn(&R) -> u64,
    join: J,
    /// Per key, right tuples and their times, in time order.
    history: KeyedState<K, VecDeque<(u64, R)>>,
    /// Left tuples waiting for the event time to reach theirs, in time order.
    pending: VecDeque<(u64, L)>,
    /// The instance's event time.
    now: u64,
    results: Vec<O>,
    late: u64,
}

/// What a snapshot keeps beside the keyed history.
#[derive(Serialize, Deserialize)]
struct Held<L> {
    now: u64,
    pending: Vec<(u64, L)>,
}

impl<L, R, K, FL, FR, O, J> AsOfJoin<L, R, K, FL, FR, O, J>
where
    L: Value,
    R: Value,
    K: Key,
    FL: Fn(&L) -> &K,
    FR: Fn(&R) -> &K,
    J: FnMut(&L, Option<&R>) -> Option<O>,
{
    /// Joins left tuples (keyed by `left_key`, at the time `left_time` reads) with the latest
    /// right tuple of their key before them (keyed by `right_key`, at `right_time`), emitting
    /// what `join` returns.
    pub fn new(
        left_key: FL,
        right_key: FR,
        (left_time, right_time): JoinEventTimes<L, R>,
        join: J,
    ) -> Self {
        Self {
            left_key,
            right_key,
            left_time,
            right_time,
            join,
            history: KeyedState::new(),
            pending: VecDeque::new(),
            now: 0,
            results: Vec::new(),
            late: 0,
        }
    }

    /// Whether a tuple at `at` comes after the event time has passed it; such a tuple is
    /// dropped and counted.
    fn is_late(&mut self, at: u64) -> bool {
        let late = at < self.now;
        self.late += u64::from(late);
        late
    }

    fn take_left(&mut self, tuple: &L) {
        let at = (self.left_time)(tuple);
        if self.is_late(at) {
            return;
        }
        if at == self.now {
            self.resolve(at, tuple);
        } else {
            insert_in_time_order(&mut self.pending, at, tuple);
        }
    }

    fn take_right(&mut self, tuple: &R) {
        let at = (self.right_time)(tuple);
        if self.is_late(at) {
            return;
        }
        let now = self.now;
        self.history.update(
            (self.right_key)(tuple),
            VecDeque::new,
            |kept: &mut VecDeque<(u64, R)>| {
                // The last tuple before the event time stays: it is the match of a left tuple
                // at the event time.
                let before_now = kept.partition_point(|(t, _)| *t < now);
                kept.drain(..before_now.saturating_sub(1));
                insert_in_time_order(kept, at, tuple);
            },
        );
    }

    /// Emits the join of `tuple` (at `at`) with its key's latest right tuple before `at`.
    fn resolve(&mut self, at: u64, tuple: &L) {
        let latest = self.history.get((self.left_key)(tuple)).and_then(|kept| {
            let before = kept.partition_point(|(t, _)| *t < at);
            before.checked_sub(1).map(|i| &kept[i].1)
        });
        self.results.extend((self.join)(tuple, latest));
    }

    /// The event time reached `now`: resolves the held left tuples at or before it.
    fn advance(&mut self, now: u64) {
        self.now = self.now.max(now);
        while let Some((at, _)) = self.pending.front() {
            if *at > self.now {
                break;
            }
            if let Some((at, tuple)) = self.pending.pop_front() {
                self.resolve(at, &tuple);
            }
        }
    }
}

/// Inserts `tuple` at `at` into `queue`, kept in time order (after the tuples of the same
/// time); tuples that come in time order are pushed at the back.
fn insert_in_time_order<T: Clone>(queue: &mut VecDeque<(u64, T)>, at: u64, tuple: &T) {
    if queue.back().is_none_or(|(t, _)| *t <= at) {
        queue.push_back((at, tuple.clone()));
    } else {
        let i = queue.partition_point(|(t, _)| *t <= at);
        queue.insert(i, (at, tuple.clone()));
    }
}

impl<L, R, K, FL, FR, O, J> TwoInputs for AsOfJoin<L, R, K, FL, FR, O, J>
where
    L: Value + Tuple,
    R: Value + Tuple,
    K: Key,
    O: Tuple,
    FL: Fn(&L) -> &K,
    FR: Fn(&R) -> &K,
    J: FnMut(&L, Option<&R>) -> Option<O>,
{
    type Left = L;
    type Right = R;
    type Out = O;
    fn left(&mut self, tuple: &L) {
        self.take_left(tuple);
    }
    fn right(&mut self, tuple: &R) {
        self.take_right(tuple);
    }
    fn results(&mut self) -> &mut Vec<O> {
        &mut self.results
    }
}

impl<L, R, K, FL, FR, O, J> Operator for AsOfJoin<L, R, K, FL, FR, O, J>
where
    L: Value + Tuple,
    R: Value + Tuple,
    K: Key,
    O: Tuple,
    FL: Fn(&L) -> &K + Send,
    FR: Fn(&R) -> &K + Send,
    J: FnMut(&L, Option<&R>) -> Option<O> + Send,
{
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.take_one(port, tuple, out)
    }

    fn process_batch(
        &mut self,
        port: usize,
        batch: BatchRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.take_batch(port, batch, out)
    }

    fn watermark(&mut self, watermark: u64, out: &mut Output<'_>) -> Result<(), OperatorError> {
        self.advance(watermark);
        out.emit_batch(0, &mut self.results)?;
        out.watermark(watermark)
    }

    fn finish(&mut self, out: &mut Output<'_>) -> Result<(), OperatorError> {
        self.advance(u64::MAX);
        out.emit_batch(0, &mut self.results)
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        let mut report = OperatorReport::default();
        report.counters.insert("late_tuples".into(), self.late);
        Ok(report)
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        let held = Held {
            now: self.now,
            pending: self.pending.iter().cloned().collect(),
        };
        let operator = postcard::to_allocvec(&held)
            .map_err(|e| OperatorError::Failed(format!("snapshot of the held left tuples: {e}")))?;
        Ok(Snapshot {
            operator,
            keyed: self.history.snapshot()?,
        })
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        if !snapshot.operator.is_empty() {
            let held: Held<L> = postcard::from_bytes(&snapshot.operator)
                .map_err(|e| OperatorError::Failed(format!("restore the held left tuples: {e}")))?;
            self.now = held.now;
            self.pending = held.pending.into();
        }
        self.history.restore(&snapshot.keyed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(key, time, value)`.
    type Row = (u32, u64, i64);

    fn key(row: &Row) -> &u32 {
        &row.0
    }

    fn time(row: &Row) -> u64 {
        row.1
    }

    type Join = AsOfJoin<Row, Row, u32, fn(&Row) -> &u32, fn(&Row) -> &u32, (u64, i64), JoinFn>;
    type JoinFn = fn(&Row, Option<&Row>) -> Option<(u64, i64)>;

    /// Left `(k, t, _)` joined with the value of the right it matched (-1: none).
    fn join() -> Join {
        AsOfJoin::new(key, key, (time, time), |l, r| {
            Some((l.1, r.map_or(-1, |r| r.2)))
        })
    }

    #[test]
    fn a_left_tuple_waits_for_the_event_time_and_takes_the_latest_right_before_it() {
        let mut j = join();
        j.take_right(&(1, 10, 100));
        j.take_left(&(1, 15, 0));
        j.take_left(&(2, 16, 0));
        assert!(j.results.is_empty(), "held until the event time reaches 15");
        // A right tuple arriving after the left one but before it in time is its match.
        j.take_right(&(1, 12, 120));
        j.take_right(&(1, 15, 150));
        j.advance(15);
        assert_eq!(
            j.results,
            vec![(15, 120)],
            "strictly before: not the one at 15"
        );
        j.advance(20);
        assert_eq!(j.results, vec![(15, 120), (16, -1)], "key 2 has none");
    }

    #[test]
    fn old_right_tuples_go_but_the_last_before_the_event_time_stays() {
        let mut j = join();
        for t in [1, 2, 3] {
            j.take_right(&(1, t, t as i64));
        }
        j.advance(10);
        j.take_right(&(1, 11, 11));
        assert_eq!(j.history.get(&1).unwrap().len(), 2, "3 and 11 kept");
        j.take_left(&(1, 10, 0));
        assert_eq!(
            j.results,
            vec![(10, 3)],
            "resolved at once: at the event time"
        );
        j.take_right(&(1, 9, 9));
        j.take_left(&(1, 9, 0));
        assert_eq!(j.late, 2, "before the event time");
        j.take_left(&(1, 30, 0));
        j.advance(u64::MAX);
        assert_eq!(j.results, vec![(10, 3), (30, 11)]);
    }

    #[test]
    fn held_left_tuples_resolve_in_time_order_and_survive_a_snapshot() {
        let mut j = join();
        j.take_left(&(1, 9, 0));
        j.take_left(&(1, 5, 0));
        j.take_right(&(1, 4, 4));
        let snapshot = j.snapshot().unwrap();
        let mut restored = join();
        restored.restore(snapshot).unwrap();
        restored.take_right(&(1, 7, 7));
        restored.advance(9);
        assert_eq!(restored.results, vec![(5, 4), (9, 7)]);
    }
}
