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
//!
//! This file holds the builder and the plain [`Stream`] (transformations, routing, sinks);
//! the keyed stream's operators are in `keyed_stream.rs`, the windows' in
//! `windowed_stream.rs`, and the one-call I/O of files, sockets and Kafka in
//! `sluice_connectors::fluent` (extension traits, since the connectors build on this crate).

use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use sluice_graph::{
    DeclaredCost, EdgeId, Graph, GraphBuilder, GraphError, Operator, OperatorContext,
    OperatorHandle, Partitioning, Ports, Source,
};
use sluice_types::{partition_hash, Tuple};

use crate::keyed::Key;
use crate::keyed_stream::KeyedStream;
use crate::sinks::{Collect, CollectInlet, Collected};
use crate::split::Split;
use crate::throttle::Throttle;
use crate::transforms::{Filter, FlatMap, Map};
use crate::watermarks::WatermarkAssigner;

/// A source whose tuples are all of one type, so the builder knows its stream's type.
pub trait TypedSource: Source {
    /// The type of the tuples it emits on port 0.
    type Out: Tuple;
}

/// An application being built; cheap to clone (every clone builds the same graph). It and
/// its streams may be sent to and dropped on other threads (a Python job's objects are freed
/// on whichever thread the interpreter collects them).
#[derive(Clone)]
pub struct Dataflow {
    inner: Arc<Mutex<Building>>,
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
            inner: Arc::new(Mutex::new(Building {
                builder: GraphBuilder::new(name),
                first_error: None,
                automatic: Vec::new(),
            })),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Building) -> R) -> R {
        f(&mut self.building())
    }

    /// The builder's state. A panic while it was held (a user's closure, say) leaves it as
    /// far as it got, which the graph's validation still checks.
    fn building(&self) -> MutexGuard<'_, Building> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
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

    /// Adds an operator with `ports` and nothing connected yet (one of several inputs, say);
    /// feed it with [`Stream::connect_to`] and take its streams with [`Dataflow::stream`].
    pub fn operator<Op, F>(&self, name: &str, ports: Ports, factory: F) -> OperatorHandle
    where
        Op: Operator + 'static,
        F: Fn(&OperatorContext) -> Op + Send + Sync + 'static,
    {
        self.with(|b| b.builder.operator(name, ports, factory))
    }

    /// Constrains where the instances of `operator` run (noting an error for `build`).
    pub fn place(&self, operator: OperatorHandle, placement: sluice_graph::Placement) {
        let result = self.with(|b| b.builder.place(operator, placement));
        self.note(result);
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
    pub(crate) fn refuse_unless(&self, operator: OperatorHandle, check: Result<(), String>) {
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

    /// Declares what a tuple costs `op`, noting an error for `build`.
    fn set_cost(&self, op: OperatorHandle, cost: DeclaredCost) {
        let result = self.with(|b| b.builder.declare_cost(op, cost));
        self.note(result);
    }

    fn note(&self, result: Result<(), GraphError>) {
        if let Err(error) = result {
            self.with(|b| {
                b.first_error.get_or_insert(error);
            });
        }
    }

    /// Validates and returns the graph built so far. The builder hands its graph over: a
    /// second `build` is refused ([`GraphError::AlreadyBuilt`]).
    pub fn build(&self) -> Result<Graph, GraphError> {
        let mut b = self.building();
        if let Some(error) = b.first_error.clone() {
            return Err(error);
        }
        let Building {
            builder,
            automatic,
            first_error,
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
        let built = std::mem::replace(builder, GraphBuilder::new("")).build();
        *first_error = Some(match &built {
            Ok(graph) => GraphError::AlreadyBuilt(graph.name().to_string()),
            Err(error) => error.clone(),
        });
        built
    }
}

/// A stream of tuples of type `T`: one output port of an operator of a [`Dataflow`].
pub struct Stream<T> {
    pub(crate) flow: Dataflow,
    pub(crate) op: OperatorHandle,
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

    /// Declares what a tuple costs the operator producing this stream, for `--plan auto`:
    /// see `GraphBuilder::declare_cost`.
    pub fn cost(self, cost: DeclaredCost) -> Self {
        self.flow.set_cost(self.op, cost);
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

    pub(crate) fn partitioned(&self, partitioning: Partitioning) -> Self {
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
    ///
    /// Under every plan: an instance running in a PE process sends what it collected back to
    /// the launching process over its control link ([`sluice_graph::ResultOutlet`]).
    pub fn collect(&self, name: &str) -> Collected<T> {
        self.collect_in(name, 1)
    }

    /// As [`Stream::collect`], the sink running as `parallelism` instances (each keeps what
    /// reached it; [`collected`](crate::collected) lists them instance by instance): after an
    /// operator of as many instances, each instance collects what its upstream instance
    /// emits, in the same thread, and under the processes plan sends it from that process.
    pub fn collect_in(&self, name: &str, parallelism: usize) -> Collected<T> {
        let into = Collected::default();
        let sink_into = into.clone();
        let sink = self
            .sink(name, move |_| Collect::new(sink_into.clone()))
            .parallelism(parallelism);
        let inlet = Arc::new(CollectInlet::new(into.clone()));
        let returned = self
            .flow
            .with(|b| b.builder.returns_results(sink.op, inlet));
        self.flow.note(returned);
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
        KeyedStream::new(
            self.partitioned(Partitioning::by_hash(move |t: &T| partition_hash(hash(t)))),
            key,
        )
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

    /// Declares what a tuple costs the sink, as [`Stream::cost`] does an operator.
    pub fn cost(self, cost: DeclaredCost) -> Self {
        self.flow.set_cost(self.op, cost);
        self
    }
}
