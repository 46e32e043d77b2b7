//! The keyed stream of the fluent builder ([`Stream::key_by`]): rolling aggregates per key,
//! joins (windowed, as-of, with a table), dedup, and the way into windows.

use std::marker::PhantomData;

use sluice_graph::{Operator, OperatorHandle, Partitioning, Ports};
use sluice_types::{partition_hash, Tuple};

use crate::aggregate::{Aggregate, Count, Max, Mean, Min, Reduce, Sum, Value};
use crate::asof::AsOfJoin;
use crate::dataflow::Stream;
use crate::dedup::{Dedup, Deduplicate};
use crate::join::{JoinEventTimes, JoinWindow, TableJoin, WindowJoin};
use crate::keyed::Key;
use crate::rolling::RollingAggregate;
use crate::window::Windows;
use crate::windowed_stream::WindowedStream;

/// A stream partitioned by a key; see [`Stream::key_by`].
pub struct KeyedStream<T, K, F> {
    pub(crate) stream: Stream<T>,
    pub(crate) key: F,
    /// The tuples' event time, for a join by event time ([`KeyedStream::event_time`]).
    time: Option<fn(&T) -> u64>,
    types: PhantomData<fn() -> K>,
}

impl<T, K, F> KeyedStream<T, K, F>
where
    T: Tuple,
    K: Key,
    F: Fn(&T) -> &K + Clone + Send + Sync + 'static,
{
    /// `stream` (already partitioned by the key) keyed by `key`.
    pub(crate) fn new(stream: Stream<T>, key: F) -> Self {
        Self {
            stream,
            key,
            time: None,
            types: PhantomData,
        }
    }

    /// The keyed stream itself, for an operator of one's own ([`Stream::process`]); its edge
    /// is partitioned by the key.
    pub fn stream(&self) -> &Stream<T> {
        &self.stream
    }

    /// The key function.
    pub fn key(&self) -> &F {
        &self.key
    }

    /// For every tuple, folds it into its key's `aggregate` and emits `(key, result)`.
    pub fn aggregate<A>(&self, name: &str, aggregate: A) -> Stream<(K, A::Out)>
    where
        A: Aggregate<T>,
        (K, A::Out): Tuple,
    {
        self.rolling(name, aggregate, false)
    }

    /// Folds every tuple into its key's `aggregate` and emits each key's `(key, result)`
    /// once, when the input ends (for a bounded stream that wants only the totals).
    pub fn aggregate_at_end<A>(&self, name: &str, aggregate: A) -> Stream<(K, A::Out)>
    where
        A: Aggregate<T>,
        (K, A::Out): Tuple,
    {
        self.rolling(name, aggregate, true)
    }

    /// A [`RollingAggregate`] of `aggregate`, emitting its results only at the end when
    /// `at_end`.
    fn rolling<A>(&self, name: &str, aggregate: A, at_end: bool) -> Stream<(K, A::Out)>
    where
        A: Aggregate<T>,
        (K, A::Out): Tuple,
    {
        let key = self.key.clone();
        self.stream.process(name, move |_| {
            let rolling = RollingAggregate::new(key.clone(), aggregate.clone());
            if at_end {
                rolling.at_end()
            } else {
                rolling
            }
        })
    }

    /// The running count of each key.
    pub fn count(&self, name: &str) -> Stream<(K, u64)> {
        self.aggregate(name, Count)
    }

    /// The running sum of `field` per key.
    pub fn sum<V, G>(&self, name: &str, field: G) -> Stream<(K, V)>
    where
        V: Value + Default + std::ops::Add<Output = V> + Copy,
        G: Fn(&T) -> V + Clone + Send + Sync + 'static,
    {
        self.aggregate(name, Sum::new(field))
    }

    /// The least `field` so far per key.
    pub fn min<V, G>(&self, name: &str, field: G) -> Stream<(K, V)>
    where
        V: Value + Default + PartialOrd + Copy,
        G: Fn(&T) -> V + Clone + Send + Sync + 'static,
    {
        self.aggregate(name, Min::new(field))
    }

    /// The greatest `field` so far per key.
    pub fn max<V, G>(&self, name: &str, field: G) -> Stream<(K, V)>
    where
        V: Value + Default + PartialOrd + Copy,
        G: Fn(&T) -> V + Clone + Send + Sync + 'static,
    {
        self.aggregate(name, Max::new(field))
    }

    /// The mean of `field` so far per key.
    pub fn mean<V, G>(&self, name: &str, field: G) -> Stream<(K, f64)>
    where
        V: Into<f64> + 'static,
        G: Fn(&T) -> V + Clone + Send + Sync + 'static,
    {
        self.aggregate(name, Mean::new(field))
    }

    /// Each key's tuples reduced with `f(earlier, later)` so far.
    pub fn reduce<G>(&self, name: &str, f: G) -> Stream<(K, T)>
    where
        T: Value + Default,
        (K, T): Tuple,
        G: Fn(&T, &T) -> T + Clone + Send + Sync + 'static,
    {
        self.aggregate(name, Reduce::new(f))
    }
}

impl<T, K, F> KeyedStream<T, K, F>
where
    T: Tuple,
    K: Key,
    F: Fn(&T) -> &K + Clone + Send + Sync + 'static,
{
    /// The keyed stream whose tuples' event time `time` reads, for a join by event time.
    pub fn event_time(mut self, time: fn(&T) -> u64) -> Self {
        self.time = Some(time);
        self
    }

    /// Adds a two-input operator reading this stream on port 0 and `right` on port 1, made by
    /// `make` from both sides' key functions and event times (when both sides have them);
    /// returns it and those times.
    fn joined<R, FR, O, Op, M>(
        &self,
        name: &str,
        right: &KeyedStream<R, K, FR>,
        make: M,
    ) -> (OperatorHandle, Option<JoinEventTimes<T, R>>)
    where
        R: Tuple,
        O: Tuple,
        FR: Fn(&R) -> &K + Clone + Send + Sync + 'static,
        Op: Operator + 'static,
        M: Fn(F, FR, Option<JoinEventTimes<T, R>>) -> Op + Send + Sync + 'static,
    {
        let (kl, kr) = (self.key.clone(), right.key.clone());
        let times = self.time.zip(right.time);
        let ports = Ports::new().input::<T>().input::<R>().output::<O>();
        let op = self
            .stream
            .apply(name, ports, move |_| make(kl.clone(), kr.clone(), times));
        right.stream.connect_to(op, 1);
        (op, times)
    }

    /// Joins this stream (left, port 0) with `right` (port 1) on equal keys within `window`,
    /// emitting `join(left, right)` for every pair; see [`WindowJoin`]. By
    /// [`JoinWindow::EventTime`] both sides need their [`KeyedStream::event_time`]: a pair
    /// then joins when its times are at most the window apart (Flink's interval join).
    pub fn join<R, FR, O, J>(
        &self,
        name: &str,
        right: &KeyedStream<R, K, FR>,
        window: JoinWindow,
        join: J,
    ) -> Stream<O>
    where
        T: Value,
        R: Tuple + Value,
        O: Tuple,
        FR: Fn(&R) -> &K + Clone + Send + Sync + 'static,
        J: Fn(&T, &R) -> O + Clone + Send + Sync + 'static,
    {
        let (op, times) = self.joined::<R, FR, O, _, _>(name, right, move |kl, kr, times| {
            WindowJoin::new(window, kl, kr, times, join.clone())
        });
        let by_event_time = matches!(window, JoinWindow::EventTime(_));
        let check = match window.check() {
            Ok(()) if by_event_time && times.is_none() => {
                Err("a join by event time needs both sides' times: key_by(..).event_time(f)".into())
            }
            checked => checked,
        };
        self.stream.flow.refuse_unless(op, check);
        Stream::new(self.stream.flow.clone(), op, 0)
    }

    /// Joins each tuple of this stream (left, port 0) with the latest tuple of `right`
    /// (port 1) of its key before it in event time, emitting `join(left, right)` where it
    /// returns `Some` (`right` is `None` when the key had none before); see [`AsOfJoin`].
    /// Both sides need their [`KeyedStream::event_time`] and watermarks upstream.
    pub fn as_of<R, FR, O, J>(
        &self,
        name: &str,
        right: &KeyedStream<R, K, FR>,
        join: J,
    ) -> Stream<O>
    where
        T: Value,
        R: Tuple + Value,
        O: Tuple,
        FR: Fn(&R) -> &K + Clone + Send + Sync + 'static,
        J: Fn(&T, Option<&R>) -> Option<O> + Clone + Send + Sync + 'static,
    {
        let (op, times) = self.joined::<R, FR, O, _, _>(name, right, move |kl, kr, times| {
            AsOfJoin::new(kl, kr, times.unwrap_or((|_| 0, |_| 0)), join.clone())
        });
        if times.is_none() {
            self.stream.flow.refuse(
                op,
                "an as-of join needs both sides' times: key_by(..).event_time(f)",
            );
        }
        Stream::new(self.stream.flow.clone(), op, 0)
    }

    /// Enriches each tuple from `table`, a stream of `(key, row)` updates: emits
    /// `join(tuple, row)` where it returns `Some` (`row` is `None` for a key never updated);
    /// see [`TableJoin`].
    pub fn lookup<V, O, J>(&self, name: &str, table: &Stream<(K, V)>, join: J) -> Stream<O>
    where
        V: Value,
        (K, V): Tuple,
        O: Tuple,
        J: Fn(&T, Option<&V>) -> Option<O> + Clone + Send + Sync + 'static,
    {
        let key = self.key.clone();
        let ports = Ports::new().input::<T>().input::<(K, V)>().output::<O>();
        let op = self.stream.apply(name, ports, move |_| {
            TableJoin::new(key.clone(), join.clone())
        });
        table
            .partitioned(Partitioning::by_hash(|row: &(K, V)| partition_hash(&row.0)))
            .connect_to(op, 1);
        Stream::new(self.stream.flow.clone(), op, 0)
    }

    /// Drops each tuple whose key passed within `dedup`'s window before it (a count of
    /// tuples, or processing or event time); a window of 0 is refused by [`Dataflow::build`](crate::Dataflow::build).
    /// See [`Deduplicate`].
    pub fn dedup(&self, name: &str, dedup: Dedup<T>) -> Stream<T> {
        let check = dedup.check();
        let key = self.key.clone();
        let deduped = self
            .stream
            .process(name, move |_| Deduplicate::new(key.clone(), dedup.clone()));
        self.stream.flow.refuse_unless(deduped.op, check);
        deduped
    }

    /// The keyed stream cut into `windows`; a specification that cannot work (a window of 0,
    /// a slide longer than its window) is refused by [`Dataflow::build`](crate::Dataflow::build), naming the operator.
    pub fn window(&self, windows: Windows<T>) -> WindowedStream<T, K, F> {
        WindowedStream {
            keyed: KeyedStream {
                stream: self.stream.clone(),
                key: self.key.clone(),
                time: self.time,
                types: PhantomData,
            },
            windows,
        }
    }
}
