//! Joins: a windowed equi-join of two keyed streams (IBM Streams' Join), and a stream-table
//! join that enriches a stream from a table a second stream keeps up to date.
//!
//! Both have two input ports, each partitioned by its side's key with the same partition
//! hash, so tuples with equal keys meet in the same instance.
//!
//! [`WindowJoin`]: each side keeps, per key, the tuples of its window: the last `n` tuples of
//! the key, or those that arrived within a duration. A tuple arriving on one side is matched
//! against the other side's window of its key, every match emits `f(left, right)`, then it
//! joins its own side's window. By event time it is an interval join: a pair matches when
//! the two times are within the duration of each other, whatever order the tuples arrive in,
//! and a tuple is kept until the watermark has passed its time by the duration; with no late
//! tuple the pairs are then the same under every plan.
//!
//! [`TableJoin`]: port 1 carries `(key, value)` updates that replace the key's row; each
//! tuple on port 0 looks up its key and emits `f(tuple, row)` (`row` is `None` for a key
//! never updated: return `None` to drop it, an inner join). The two ports are not ordered
//! with each other: a tuple sees the updates that arrived before it.

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::time::Duration;

use sluice_graph::{
    expect_tuple, KeyedEntries, Operator, OperatorError, OperatorReport, Output, Snapshot,
};
use sluice_types::{monotonic_ns, BatchRef, Tuple, TupleRef};

use crate::aggregate::Value;
use crate::keyed::{Key, KeyedState};

/// How much of each side a [`WindowJoin`] keeps per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinWindow {
    /// The last `n` tuples of the key.
    Count(usize),
    /// The tuples that arrived within this long (processing time).
    Arrival(Duration),
    /// By event time (Flink's interval join): a left and a right tuple pair up when their
    /// times are at most this far apart. A tuple is kept until the watermark passes its time
    /// by the duration; a tuple older than the watermark is late, dropped and counted
    /// (`late_tuples`). Each side's time is read by its [`crate::KeyedStream::event_time`].
    EventTime(Duration),
}

impl JoinWindow {
    /// Why the window cannot work, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        match self {
            Self::Count(0) => Err("a join window needs at least 1 tuple".into()),
            Self::Arrival(d) | Self::EventTime(d) if d.is_zero() => {
                Err("a join window needs a duration above 0".into())
            }
            _ => Ok(()),
        }
    }

    fn nanos(d: &Duration) -> u64 {
        u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whether tuples at `left` and `right` (their times) pair up: within the duration of
    /// each other by event time; always by count and arrival, whose kept tuples are all in
    /// the window.
    fn pairs(&self, left: u64, right: u64) -> bool {
        match self {
            Self::EventTime(d) => left.abs_diff(right) <= Self::nanos(d),
            Self::Count(_) | Self::Arrival(_) => true,
        }
    }
}

/// The functions reading each side's event time, for [`JoinWindow::EventTime`].
pub type JoinEventTimes<L, R> = (fn(&L) -> u64, fn(&R) -> u64);

/// One side of a join: its key function, event-time function and kept tuples per key.
struct Side<T, K, F> {
    key: F,
    time: Option<fn(&T) -> u64>,
    kept: KeyedState<K, VecDeque<(u64, T)>>,
}

/// The windowed equi-join; see the module documentation.
pub struct WindowJoin<L, R, K, FL, FR, O, J> {
    window: JoinWindow,
    left: Side<L, K, FL>,
    right: Side<R, K, FR>,
    join: J,
    results: Vec<O>,
    /// The instance's event time.
    now: u64,
    /// Tuples dropped for coming after the watermark had passed their time.
    late: u64,
}

impl<L, R, K, FL, FR, O, J> WindowJoin<L, R, K, FL, FR, O, J>
where
    L: Value,
    R: Value,
    K: Key,
    FL: Fn(&L) -> &K,
    FR: Fn(&R) -> &K,
    J: FnMut(&L, &R) -> O,
{
    /// Joins left tuples (keyed by `left_key`) with right ones (keyed by `right_key`) within
    /// `window`, emitting `join(left, right)`; `event_time` reads each side's event time when
    /// the window is [`JoinWindow::EventTime`].
    pub fn new(
        window: JoinWindow,
        left_key: FL,
        right_key: FR,
        event_time: Option<JoinEventTimes<L, R>>,
        join: J,
    ) -> Self {
        Self {
            window,
            left: Side {
                key: left_key,
                time: event_time.map(|t| t.0),
                kept: KeyedState::new(),
            },
            right: Side {
                key: right_key,
                time: event_time.map(|t| t.1),
                kept: KeyedState::new(),
            },
            join,
            results: Vec::new(),
            now: 0,
            late: 0,
        }
    }

    /// Whether a tuple at `at` is later than the event time allows (always false for the
    /// windows that are not by event time); such a tuple is dropped and counted.
    fn is_late(&mut self, at: u64) -> bool {
        let late = matches!(self.window, JoinWindow::EventTime(_)) && at < self.now;
        self.late += u64::from(late);
        late
    }

    fn take_left(&mut self, tuple: &L) {
        let key = (self.left.key)(tuple);
        let at = stamp(self.left.time, tuple);
        if self.is_late(at) {
            return;
        }
        if let Some(matches) = self.right.kept.get(key) {
            for (_, right) in matches.iter().filter(|(t, _)| self.window.pairs(at, *t)) {
                self.results.push((self.join)(tuple, right));
            }
        }
        keep(&mut self.left.kept, self.window, key, at, tuple);
    }

    fn take_right(&mut self, tuple: &R) {
        let key = (self.right.key)(tuple);
        let at = stamp(self.right.time, tuple);
        if self.is_late(at) {
            return;
        }
        if let Some(matches) = self.left.kept.get(key) {
            for (_, left) in matches.iter().filter(|(t, _)| self.window.pairs(*t, at)) {
                self.results.push((self.join)(left, tuple));
            }
        }
        keep(&mut self.right.kept, self.window, key, at, tuple);
    }
}

/// A tuple's time: its event time if the side has a function for it, else now.
fn stamp<T>(time: Option<fn(&T) -> u64>, tuple: &T) -> u64 {
    time.map_or_else(monotonic_ns, |f| f(tuple))
}

/// Adds `tuple` (at time `at`) to its key's kept tuples and evicts what the window no longer
/// holds (by count or arrival; event time is evicted by the watermark).
fn keep<K: Key, T: Value>(
    kept: &mut KeyedState<K, VecDeque<(u64, T)>>,
    window: JoinWindow,
    key: &K,
    at: u64,
    tuple: &T,
) {
    kept.update(key, VecDeque::new, |tuples| {
        tuples.push_back((at, tuple.clone()));
        match window {
            JoinWindow::Count(n) => {
                while tuples.len() > n {
                    tuples.pop_front();
                }
            }
            JoinWindow::Arrival(d) => {
                let oldest = at.saturating_sub(JoinWindow::nanos(&d));
                while tuples.front().is_some_and(|(t, _)| *t < oldest) {
                    tuples.pop_front();
                }
            }
            JoinWindow::EventTime(_) => {}
        }
    });
}

/// Drops the tuples older than `oldest` from every key.
fn evict_before<K: Key, T: Value>(kept: &mut KeyedState<K, VecDeque<(u64, T)>>, oldest: u64) {
    kept.retain(|_, tuples| {
        tuples.retain(|(t, _)| *t >= oldest);
        !tuples.is_empty()
    });
}

/// An operator of two input ports, a left (port 0) and a right (port 1), that takes one tuple
/// at a time and gathers what it emits: its `process` and `process_batch` are
/// [`TwoInputs::take_one`] and [`TwoInputs::take_batch`].
pub(crate) trait TwoInputs {
    /// Port 0's tuples.
    type Left: Tuple;
    /// Port 1's tuples.
    type Right: Tuple;
    /// What it emits on port 0.
    type Out: Tuple;
    /// Takes a tuple of port 0.
    fn left(&mut self, tuple: &Self::Left);
    /// Takes a tuple of port 1.
    fn right(&mut self, tuple: &Self::Right);
    /// What it has to emit.
    fn results(&mut self) -> &mut Vec<Self::Out>;

    /// Takes `tuple` from `port`.
    fn take(&mut self, port: usize, tuple: TupleRef<'_>) -> Result<(), OperatorError> {
        match port {
            0 => self.left(expect_tuple::<Self::Left>(port, tuple)?),
            _ => self.right(expect_tuple::<Self::Right>(port, tuple)?),
        }
        Ok(())
    }

    /// Takes `tuple` from `port`, then emits the results.
    fn take_one(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.take(port, tuple)?;
        out.emit_batch(0, self.results())
    }

    /// Takes every tuple of `batch` from `port`, then emits the results.
    fn take_batch(
        &mut self,
        port: usize,
        batch: BatchRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        for tuple in batch.iter() {
            self.take(port, tuple)?;
        }
        out.emit_batch(0, self.results())
    }
}

impl<L, R, K, FL, FR, O, J> TwoInputs for WindowJoin<L, R, K, FL, FR, O, J>
where
    L: Value + Tuple,
    R: Value + Tuple,
    K: Key,
    O: Tuple,
    FL: Fn(&L) -> &K,
    FR: Fn(&R) -> &K,
    J: FnMut(&L, &R) -> O,
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

impl<L, R, K, FL, FR, O, J> Operator for WindowJoin<L, R, K, FL, FR, O, J>
where
    L: Value + Tuple,
    R: Value + Tuple,
    K: Key,
    O: Tuple,
    FL: Fn(&L) -> &K + Send,
    FR: Fn(&R) -> &K + Send,
    J: FnMut(&L, &R) -> O + Send,
{
    fn start(&mut self, _ctx: &sluice_graph::OperatorContext) -> Result<(), OperatorError> {
        self.window.check().map_err(OperatorError::Failed)
    }

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
        self.now = self.now.max(watermark);
        if let JoinWindow::EventTime(d) = self.window {
            let oldest = self.now.saturating_sub(JoinWindow::nanos(&d));
            evict_before(&mut self.left.kept, oldest);
            evict_before(&mut self.right.kept, oldest);
        }
        out.watermark(watermark)
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        let mut report = OperatorReport::default();
        report.counters.insert("late_tuples".into(), self.late);
        Ok(report)
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        // Each side's entries are told apart by their state's first byte.
        let mut keyed = KeyedEntries::default();
        let mut state = Vec::new();
        for (side, entries) in [
            (0, self.left.kept.snapshot()?),
            (1, self.right.kept.snapshot()?),
        ] {
            for entry in entries.iter() {
                state.clear();
                state.push(side);
                state.extend_from_slice(entry.state);
                keyed.push(entry.hash, entry.key, &state);
            }
        }
        Ok(Snapshot {
            operator: self.now.to_le_bytes().to_vec(),
            keyed,
        })
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        if let Ok(now) = <[u8; 8]>::try_from(snapshot.operator.as_slice()) {
            self.now = u64::from_le_bytes(now);
        }
        let (mut left, mut right) = (KeyedEntries::default(), KeyedEntries::default());
        for entry in snapshot.keyed.iter() {
            let side = match entry.state.split_first() {
                Some((0, state)) => (&mut left, state),
                Some((1, state)) => (&mut right, state),
                _ => {
                    return Err(OperatorError::Failed(
                        "a join snapshot entry has no side".into(),
                    ))
                }
            };
            side.0.push(entry.hash, entry.key, side.1);
        }
        self.left.kept.restore(&left)?;
        self.right.kept.restore(&right)
    }
}

/// The stream-table join; see the module documentation.
pub struct TableJoin<T, K, V, F, O, J> {
    key: F,
    table: KeyedState<K, V>,
    join: J,
    results: Vec<O>,
    types: PhantomData<fn(&T)>,
}

impl<T, K, V, F, O, J> TableJoin<T, K, V, F, O, J>
where
    K: Key,
    V: Value,
    F: Fn(&T) -> &K,
    J: FnMut(&T, Option<&V>) -> Option<O>,
{
    /// Looks up the key `key` reads from each stream tuple in the table, emitting
    /// `join(tuple, row)` where it is `Some`.
    pub fn new(key: F, join: J) -> Self {
        Self {
            key,
            table: KeyedState::new(),
            join,
            results: Vec::new(),
            types: PhantomData,
        }
    }

    fn take(&mut self, tuple: &T) {
        let row = self.table.get((self.key)(tuple));
        self.results.extend((self.join)(tuple, row));
    }

    fn update(&mut self, (key, value): &(K, V)) {
        self.table
            .update(key, || value.clone(), |row| *row = value.clone());
    }
}

impl<T, K, V, F, O, J> TwoInputs for TableJoin<T, K, V, F, O, J>
where
    T: Tuple,
    K: Key,
    V: Value,
    (K, V): Tuple,
    O: Tuple,
    F: Fn(&T) -> &K,
    J: FnMut(&T, Option<&V>) -> Option<O>,
{
    type Left = T;
    type Right = (K, V);
    type Out = O;
    fn left(&mut self, tuple: &T) {
        self.take(tuple);
    }
    fn right(&mut self, tuple: &(K, V)) {
        self.update(tuple);
    }
    fn results(&mut self) -> &mut Vec<O> {
        &mut self.results
    }
}

impl<T, K, V, F, O, J> Operator for TableJoin<T, K, V, F, O, J>
where
    T: Tuple,
    K: Key,
    V: Value,
    (K, V): Tuple,
    O: Tuple,
    F: Fn(&T) -> &K + Send,
    J: FnMut(&T, Option<&V>) -> Option<O> + Send,
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

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Ok(Snapshot {
            operator: Vec::new(),
            keyed: self.table.snapshot()?,
        })
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        self.table.restore(&snapshot.keyed)
    }
}
