//! The fluent builder: an application as a chain of library operators, as a Flink or Streams
//! user writes it.
//!
//! ```
//! use sluice_ops::{text, Dataflow, IterSource};
//!
//! let flow = Dataflow::new("wordcount");
//! flow.source("lines", |_| IterSource::new(vec!["a b".to_string(), "b".to_string()].into_iter()))
//!     .flat_map_into("split", |line: &String, words| words.extend(text::words(line)))
//!     .key_by(|word| word)
//!     .count("sum")
//!     .collect("counts");
//! let graph = flow.build().unwrap();
//! assert_eq!(graph.operators().len(), 4);
//! ```
//!
//! A [`Stream`] is a handle to one output port; each method adds an operator reading it and
//! returns a handle to the new operator's output, so one stream can feed several operators.
//! Every operator is named (the name appears in plans, plan files and reports). An edge is
//! forward when both ends have the same parallelism and round-robin otherwise, unless the
//! stream was keyed ([`Stream::key_by`]), [`Stream::broadcast`] or [`Stream::rebalance`]d.
//! Mistakes (a duplicate name, a parameter that cannot work) are reported by
//! [`Dataflow::build`], naming the operator.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;

use sluice_graph::{
    EdgeId, Graph, GraphBuilder, GraphError, Operator, OperatorContext, OperatorHandle,
    Partitioning, Ports, Source,
};
use sluice_types::{partition_hash, Tuple};

use crate::aggregate::{Aggregate, Apply, Count, Max, Mean, Min, Reduce, SortBy, Sum, TopK, Value};
use crate::asof::AsOfJoin;
use crate::dedup::{Dedup, Deduplicate};
use crate::join::{JoinEventTimes, JoinWindow, TableJoin, WindowJoin};
use crate::keyed::Key;
use crate::rolling::RollingAggregate;
use crate::sinks::{Collect, Collected};
use crate::split::Split;
use crate::throttle::Throttle;
use crate::transforms::{Filter, FlatMap, Map};
use crate::watermarks::WatermarkAssigner;
use crate::window::{WindowOperator, Windowed, Windows};

/// A source whose tuples are all of one type, so the builder knows its stream's type.
pub trait TypedSource: Source {
    /// The type of the tuples it emits on port 0.
    type Out: Tuple;
}

/// An application being built; cheap to clone (every clone builds the same graph).
#[derive(Clone)]
pub struct Dataflow {
    inner: Rc<RefCell<Building>>,
}

struct Building {
    builder: GraphBuilder,
    first_error: Option<GraphError>,
    /// Edges whose partitioning is decided when the graph is built: forward between equal
    /// parallelisms, round-robin otherwise.
    automatic: Vec<EdgeId>,
}

impl Dataflow {
    /// A new application called `name`.
    pub fn new(name: &str) -> Self {
        Self {
            inner: Rc::new(RefCell::new(Building {
                builder: GraphBuilder::new(name),
                first_error: None,
                automatic: Vec::new(),
            })),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Building) -> R) -> R {
        f(&mut self.inner.borrow_mut())
    }

    /// Adds a library source (its tuple type is known); `factory` makes each instance.
    pub fn source<S, F>(&self, name: &str, factory: F) -> Stream<S::Out>
    where
        S: TypedSource + 'static,
        F: Fn(&OperatorContext) -> S + Send + Sync + 'static,
    {
        self.source_of::<S::Out, S, F>(name, factory)
    }

    /// Adds a source emitting tuples of type `T` on port 0.
    pub fn source_of<T, S, F>(&self, name: &str, factory: F) -> Stream<T>
    where
        T: Tuple,
        S: Source + 'static,
        F: Fn(&OperatorContext) -> S + Send + Sync + 'static,
    {
        let op = self.with(|b| b.builder.source(name, Ports::new().output::<T>(), factory));
        Stream::new(self.clone(), op, 0)
    }

    /// Adds a source with the output ports `ports` (a source with a side output, say);
    /// take its streams with [`Dataflow::stream`].
    pub fn source_with_ports<S, F>(&self, name: &str, ports: Ports, factory: F) -> OperatorHandle
    where
        S: Source + 'static,
        F: Fn(&OperatorContext) -> S + Send + Sync + 'static,
    {
        self.with(|b| b.builder.source(name, ports, factory))
    }

    /// The stream of output `port` of `operator`, of tuples of type `T` (a type other than
    /// the port's is refused by [`Dataflow::build`] when the stream is connected).
    pub fn stream<T: Tuple>(&self, operator: OperatorHandle, port: usize) -> Stream<T> {
        Stream::new(self.clone(), operator, port)
    }

    /// Records that `operator`'s parameters cannot work (reported by [`Dataflow::build`]).
    pub fn refuse(&self, operator: OperatorHandle, reason: impl Into<String>) {
        self.with(|b| b.builder.refuse(operator, reason));
    }

    /// Refuses `operator` with the reason `check` gives, if it gives one.
    fn refuse_unless(&self, operator: OperatorHandle, check: Result<(), String>) {
        if let Err(reason) = check {
            self.refuse(operator, reason);
        }
    }

    /// Sets `op`'s parallelism, noting an error for `build`.
    fn set_parallelism(&self, op: OperatorHandle, n: usize) {
        let result = self.with(|b| b.builder.set_parallelism(op, n));
        self.note(result);
    }

    /// Declares `op` replicable, noting an error for `build`.
    fn set_replicable(&self, op: OperatorHandle, input: Partitioning) {
        let result = self.with(|b| b.builder.replicable(op, input));
        self.note(result);
    }

    fn note(&self, result: Result<(), GraphError>) {
        if let Err(error) = result {
            self.with(|b| {
                b.first_error.get_or_insert(error);
            });
        }
    }

    /// Validates and returns the graph built so far.
    pub fn build(&self) -> Result<Graph, GraphError> {
        let mut b = self.inner.borrow_mut();
        if let Some(error) = b.first_error.clone() {
            return Err(error);
        }
        let Building {
            builder, automatic, ..
        } = &mut *b;
        for &edge in automatic.iter() {
            let e = &builder.edges()[edge.0];
            let (up, down) = (e.from.operator.into(), e.to.operator.into());
            let partitioning = if builder.parallelism(up)? == builder.parallelism(down)? {
                Partitioning::Forward
            } else {
                Partitioning::RoundRobin
            };
            builder.set_partitioning(edge, partitioning)?;
        }
        std::mem::replace(builder, GraphBuilder::new("")).build()
    }
}

/// A stream of tuples of type `T`: one output port of an operator of a [`Dataflow`].
pub struct Stream<T> {
    flow: Dataflow,
    op: OperatorHandle,
    port: usize,
    /// How the next operator's edge from this stream is partitioned; `None`: automatic.
    partitioning: Option<Partitioning>,
    types: PhantomData<fn() -> T>,
}

impl<T> Clone for Stream<T> {
    fn clone(&self) -> Self {
        Self {
            flow: self.flow.clone(),
            op: self.op,
            port: self.port,
            partitioning: self.partitioning.clone(),
            types: PhantomData,
        }
    }
}

impl<T: Tuple> Stream<T> {
    pub(crate) fn new(flow: Dataflow, op: OperatorHandle, port: usize) -> Self {
        Self {
            flow,
            op,
            port,
            partitioning: None,
            types: PhantomData,
        }
    }

    /// The application this stream belongs to.
    pub fn dataflow(&self) -> &Dataflow {
        &self.flow
    }

    /// The operator whose output this is.
    pub fn operator(&self) -> OperatorHandle {
        self.op
    }

    /// Runs the operator that produces this stream as `n` parallel instances.
    pub fn parallelism(self, n: usize) -> Self {
        self.flow.set_parallelism(self.op, n);
        self
    }

    /// Declares that the operator producing this stream may be given more instances by a
    /// replication optimizer, its input then spread by `input` (round robin when it keeps no
    /// state, key-by when its state is per key): see `GraphBuilder::replicable`.
    pub fn replicable(self, input: Partitioning) -> Self {
        self.flow.set_replicable(self.op, input);
        self
    }

    /// The next operator gets this stream's tuples dealt round-robin over its instances.
    pub fn rebalance(&self) -> Self {
        self.partitioned(Partitioning::RoundRobin)
    }

    /// Every instance of the next operator gets every tuple.
    pub fn broadcast(&self) -> Self {
        self.partitioned(Partitioning::Broadcast)
    }

    fn partitioned(&self, partitioning: Partitioning) -> Self {
        let mut s = self.clone();
        s.partitioning = Some(partitioning);
        s
    }

    /// Connects this stream to input `port` of `to`, with its partitioning.
    pub fn connect_to(&self, to: OperatorHandle, port: usize) {
        let partitioning = self.partitioning.clone();
        let result = self.flow.with(|b| {
            let edge = b.builder.connect_with(
                self.op.out(self.port),
                to.input(port),
                partitioning.clone().unwrap_or(Partitioning::Forward),
            )?;
            if partitioning.is_none() {
                b.automatic.push(edge);
            }
            Ok(())
        });
        self.flow.note(result);
    }

    /// Adds an operator with `ports`, fed by this stream on its input 0, made by `factory`.
    pub fn apply<Op, F>(&self, name: &str, ports: Ports, factory: F) -> OperatorHandle
    where
        Op: Operator + 'static,
        F: Fn(&OperatorContext) -> Op + Send + Sync + 'static,
    {
        let op = self.flow.with(|b| b.builder.operator(name, ports, factory));
        self.connect_to(op, 0);
        op
    }

    /// Adds a one-in, one-out operator emitting tuples of type `O`.
    pub fn process<O, Op, F>(&self, name: &str, factory: F) -> Stream<O>
    where
        O: Tuple,
        Op: Operator + 'static,
        F: Fn(&OperatorContext) -> Op + Send + Sync + 'static,
    {
        let ports = Ports::new().input::<T>().output::<O>();
        Stream::new(self.flow.clone(), self.apply(name, ports, factory), 0)
    }

    /// Emits `f(tuple)` for every tuple.
    pub fn map<O, F>(&self, name: &str, f: F) -> Stream<O>
    where
        O: Tuple,
        F: Fn(&T) -> O + Clone + Send + Sync + 'static,
    {
        self.process(name, move |_| Map::new(f.clone()))
    }

    /// Keeps the tuples for which `f` holds.
    pub fn filter<F>(&self, name: &str, f: F) -> Stream<T>
    where
        F: Fn(&T) -> bool + Clone + Send + Sync + 'static,
    {
        self.process(name, move |_| Filter::new(f.clone()))
    }

    /// Emits every item of `f(tuple)`.
    pub fn flat_map<O, It, F>(&self, name: &str, f: F) -> Stream<O>
    where
        O: Tuple,
        It: IntoIterator<Item = O>,
        F: Fn(&T) -> It + Clone + Send + Sync + 'static,
    {
        self.flat_map_into(name, move |tuple: &T, results: &mut Vec<O>| {
            results.extend(f(tuple))
        })
    }

    /// Emits every tuple `f(tuple, results)` pushes into `results`, Flink's `flatMap` with a
    /// collector: `f` can push items that borrow from the tuple (`results.extend(words(line))`)
    /// without collecting them first, which [`Stream::flat_map`] needs.
    pub fn flat_map_into<O, F>(&self, name: &str, f: F) -> Stream<O>
    where
        O: Tuple,
        F: Fn(&T, &mut Vec<O>) + Clone + Send + Sync + 'static,
    {
        self.process(name, move |_| FlatMap::new(f.clone()))
    }

    /// Adds an operator reading this stream and writing `n` streams of its type, one per
    /// output port; `n` of 0 is refused by [`Dataflow::build`].
    fn fan_out<Op, G>(&self, name: &str, n: usize, factory: G) -> Vec<Stream<T>>
    where
        Op: Operator + 'static,
        G: Fn(&OperatorContext) -> Op + Send + Sync + 'static,
    {
        let ports = (0..n).fold(Ports::new().input::<T>(), |ports, _| ports.output::<T>());
        let op = self.apply(name, ports, factory);
        if n == 0 {
            self.flow
                .refuse(op, "a split needs at least 1 output stream");
        }
        (0..n)
            .map(|port| Stream::new(self.flow.clone(), op, port))
            .collect()
    }

    /// Splits the stream in `n`: each tuple goes to the stream `pick(tuple)` (IBM Streams'
    /// `Split`); a tuple for which `pick` returns `n` or more goes nowhere and is counted
    /// (`unrouted_tuples`). See [`Split`].
    pub fn split<G>(&self, name: &str, n: usize, pick: G) -> Vec<Stream<T>>
    where
        G: Fn(&T) -> usize + Clone + Send + Sync + 'static,
    {
        self.fan_out(name, n, move |_| Split::by(n, pick.clone()))
    }

    /// `n` copies of the stream: every tuple goes to each.
    pub fn duplicate(&self, name: &str, n: usize) -> Vec<Stream<T>> {
        self.fan_out(name, n, move |_| Split::<T, _>::to_all(n))
    }

    /// This stream and `others` merged into one, each stream's tuples in their order; the
    /// operator's event time is the least watermark of every instance feeding it. The streams
    /// may come from operators of any parallelism.
    pub fn union(&self, name: &str, others: &[&Stream<T>]) -> Stream<T> {
        let merged = self.filter(name, |_| true);
        for other in others {
            other.connect_to(merged.op, 0);
        }
        merged
    }

    /// Passes every tuple on, in order, at most `tuples_per_second` a second, delaying (never
    /// dropping) them; see [`Throttle`] for how it waits. A rate that is not above 0 and
    /// finite is refused by [`Dataflow::build`].
    pub fn throttle(&self, name: &str, tuples_per_second: f64) -> Stream<T> {
        let throttled = self.process(name, move |_| Throttle::<T>::new(tuples_per_second));
        self.flow
            .refuse_unless(throttled.op, Throttle::<T>::check(tuples_per_second));
        throttled
    }

    /// Ends the stream in a sink (an operator without outputs) made by `factory`.
    pub fn sink<Op, F>(&self, name: &str, factory: F) -> Sink
    where
        Op: Operator + 'static,
        F: Fn(&OperatorContext) -> Op + Send + Sync + 'static,
    {
        let op = self.apply(name, Ports::new().input::<T>(), factory);
        Sink {
            flow: self.flow.clone(),
            op,
        }
    }

    /// Ends the stream in a [`Collect`] sink; read what it received with
    /// [`collected`](crate::collected) once the job has run.
    pub fn collect(&self, name: &str) -> Collected<T> {
        let into = Collected::default();
        let sink_into = into.clone();
        self.sink(name, move |_| Collect::new(sink_into.clone()));
        into
    }

    /// Event time: passes the tuples on, with watermarks trailing the greatest time `time`
    /// reads by `max_delay` (how far out of order tuples may come).
    pub fn watermarks<G>(&self, name: &str, time: G, max_delay: std::time::Duration) -> Stream<T>
    where
        G: Fn(&T) -> u64 + Clone + Send + Sync + 'static,
    {
        self.process(name, move |_| {
            WatermarkAssigner::new(time.clone(), max_delay)
        })
    }

    /// The stream keyed by what `key` reads from each tuple: the next operator's instances
    /// each get all the tuples of the keys routed to them, and keyed operators keep state per
    /// key.
    pub fn key_by<K, F>(&self, key: F) -> KeyedStream<T, K, F>
    where
        K: Key,
        F: Fn(&T) -> &K + Clone + Send + Sync + 'static,
    {
        let hash = key.clone();
        KeyedStream {
            stream: self.partitioned(Partitioning::by_hash(move |t: &T| partition_hash(hash(t)))),
            key,
            time: None,
            types: PhantomData,
        }
    }
}

/// A stream partitioned by a key; see [`Stream::key_by`].
pub struct KeyedStream<T, K, F> {
    stream: Stream<T>,
    key: F,
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
        let key = self.key.clone();
        self.stream.process(name, move |_| {
            RollingAggregate::new(key.clone(), aggregate.clone())
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
    /// tuples, or processing or event time); a window of 0 is refused by [`Dataflow::build`].
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
    /// a slide longer than its window) is refused by [`Dataflow::build`], naming the operator.
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

/// A keyed stream cut into windows; see [`KeyedStream::window`].
pub struct WindowedStream<T, K, F> {
    keyed: KeyedStream<T, K, F>,
    windows: Windows<T>,
}

impl<T, K, F> WindowedStream<T, K, F>
where
    T: Tuple,
    K: Key,
    F: Fn(&T) -> &K + Clone + Send + Sync + 'static,
{
    /// Adds the window operator, with a second output port for late tuples when the
    /// windows' late policy asks for one or `late_port` (the caller takes the late stream).
    fn add<A>(&self, name: &str, aggregate: A, late_port: bool) -> OperatorHandle
    where
        A: Aggregate<T>,
        Windowed<K, A::Out>: Tuple,
    {
        let mut ports = Ports::new().input::<T>().output::<Windowed<K, A::Out>>();
        if late_port || self.windows.has_late_port() {
            ports = ports.output::<T>();
        }
        let (key, windows) = (self.keyed.key.clone(), self.windows.clone());
        let op = self.keyed.stream.apply(name, ports, move |_| {
            WindowOperator::new(key.clone(), windows.clone(), aggregate.clone())
        });
        self.keyed
            .stream
            .flow
            .refuse_unless(op, self.windows.check());
        op
    }

    /// Each window's tuples folded by `aggregate`, one result per key and window.
    pub fn aggregate<A>(&self, name: &str, aggregate: A) -> Stream<Windowed<K, A::Out>>
    where
        A: Aggregate<T>,
        Windowed<K, A::Out>: Tuple,
    {
        let op = self.add(name, aggregate, false);
        Stream::new(self.keyed.stream.flow.clone(), op, 0)
    }

    /// As [`WindowedStream::aggregate`], with the late tuples' stream (the windows' late
    /// policy must be [`LatePolicy::Port`](crate::LatePolicy::Port)).
    pub fn aggregate_with_late<A>(
        &self,
        name: &str,
        aggregate: A,
    ) -> (Stream<Windowed<K, A::Out>>, Stream<T>)
    where
        A: Aggregate<T>,
        Windowed<K, A::Out>: Tuple,
    {
        // The port exists either way, so that connecting the late stream cannot hide the
        // reason the operator is refused.
        let op = self.add(name, aggregate, true);
        if !self.windows.has_late_port() {
            self.keyed
                .stream
                .flow
                .refuse(op, "a late stream needs the late policy LatePolicy::Port");
        }
        let flow = &self.keyed.stream.flow;
        (
            Stream::new(flow.clone(), op, 0),
            Stream::new(flow.clone(), op, 1),
        )
    }

    /// How many tuples each window holds.
    pub fn count(&self, name: &str) -> Stream<Windowed<K, u64>> {
        self.aggregate(name, Count)
    }

    /// A user function over each window's tuples (it keeps them all).
    pub fn apply<O, G>(&self, name: &str, f: G) -> Stream<Windowed<K, O>>
    where
        T: Value,
        O: Value,
        G: Fn(&[T]) -> O + Clone + Send + Sync + 'static,
    {
        self.aggregate(name, Apply::new(f))
    }

    /// Each window's tuples sorted by `by`.
    pub fn sort_by<V, G>(&self, name: &str, by: G) -> Stream<Windowed<K, Vec<T>>>
    where
        T: Value,
        V: Ord + 'static,
        G: Fn(&T) -> V + Clone + Send + Sync + 'static,
    {
        self.aggregate(name, SortBy::new(by))
    }

    /// Each window's `k` tuples with the greatest `by`, greatest first; a `k` of 0 is refused
    /// by [`Dataflow::build`].
    pub fn top_k<V, G>(&self, name: &str, k: usize, by: G) -> Stream<Windowed<K, Vec<T>>>
    where
        T: Value,
        V: Ord + 'static,
        G: Fn(&T) -> V + Clone + Send + Sync + 'static,
    {
        let best = self.aggregate(name, TopK::new(k, by));
        if k == 0 {
            best.flow.refuse(best.op, "a top-k needs k of at least 1");
        }
        best
    }
}

/// The end of a stream; see [`Stream::sink`].
pub struct Sink {
    flow: Dataflow,
    op: OperatorHandle,
}

impl Sink {
    /// Runs the sink as `n` parallel instances.
    pub fn parallelism(self, n: usize) -> Self {
        self.flow.set_parallelism(self.op, n);
        self
    }

    /// Declares the sink replicable, as [`Stream::replicable`] does an operator.
    pub fn replicable(self, input: Partitioning) -> Self {
        self.flow.set_replicable(self.op, input);
        self
    }
}
