//! The windowed stream of the fluent builder ([`KeyedStream::window`]): a keyed stream cut
//! into windows, each folded by an aggregate.

use sluice_graph::{OperatorHandle, Ports};
use sluice_types::Tuple;

use crate::aggregate::{Aggregate, Apply, Count, SortBy, TopK, Value};
use crate::dataflow::Stream;
use crate::keyed::Key;
use crate::keyed_stream::KeyedStream;
use crate::window::{WindowOperator, Windowed, Windows};

/// A keyed stream cut into windows; see [`KeyedStream::window`].
pub struct WindowedStream<T, K, F> {
    pub(crate) keyed: KeyedStream<T, K, F>,
    pub(crate) windows: Windows<T>,
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
    /// by [`Dataflow::build`](crate::Dataflow::build).
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
