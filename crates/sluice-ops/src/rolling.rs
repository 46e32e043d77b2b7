//! Rolling aggregates per key.
//!
//! [`RollingAggregate`] is Flink's `keyBy(..).sum(..)`: for every tuple it folds the tuple into
//! its key's accumulator and emits `(key, result)` at once. It reads a batch as a slice and
//! emits its results as one batch, so a fused chain pays one call per batch, not per tuple.
//! Made with [`RollingAggregate::at_end`] it emits each key's result once instead, when its
//! input ends (Bytewax's `count_final`): a bounded job that wants only the totals does not
//! carry a result per tuple.

use std::marker::PhantomData;

use sluice_graph::{expect_tuple, CheckpointState, Operator, OperatorError, Output, Snapshot};
use sluice_types::{BatchRef, Tuple, TupleRef};

use crate::aggregate::Aggregate;
use crate::keyed::{Key, KeyedState};

/// Folds each tuple into its key's accumulator and emits `(key, result)`.
pub struct RollingAggregate<T, K, F, A: Aggregate<T>> {
    key: F,
    aggregate: A,
    state: KeyedState<K, A::Acc>,
    results: Vec<(K, A::Out)>,
    /// Emits the results when the input ends rather than one per tuple.
    at_end: bool,
    types: PhantomData<fn(&T)>,
}

impl<T, K, F, A> RollingAggregate<T, K, F, A>
where
    K: Key,
    A: Aggregate<T>,
    F: Fn(&T) -> &K,
{
    /// Aggregates with `aggregate` per key that `key` reads.
    pub fn new(key: F, aggregate: A) -> Self {
        Self {
            key,
            aggregate,
            state: KeyedState::new(),
            results: Vec::new(),
            at_end: false,
            types: PhantomData,
        }
    }

    /// The same aggregate emitting each key's result once, when the input ends.
    pub fn at_end(self) -> Self {
        Self {
            at_end: true,
            ..self
        }
    }

    #[inline]
    fn fold(&mut self, tuple: &T) {
        let key = (self.key)(tuple);
        let aggregate = &self.aggregate;
        if self.at_end {
            self.state
                .update(key, || aggregate.init(), |acc| aggregate.add(acc, tuple));
            return;
        }
        let result = self.state.update(
            key,
            || aggregate.init(),
            |acc| {
                aggregate.add(acc, tuple);
                aggregate.result(acc)
            },
        );
        self.results.push((key.clone(), result));
    }
}

impl<T, K, F, A> Operator for RollingAggregate<T, K, F, A>
where
    T: Tuple,
    K: Key,
    A: Aggregate<T>,
    (K, A::Out): Tuple,
    F: Fn(&T) -> &K + Send,
{
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.fold(expect_tuple::<T>(port, tuple)?);
        out.emit_batch(0, &mut self.results)
    }

    fn process_batch(
        &mut self,
        port: usize,
        batch: BatchRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        match batch.as_slice::<T>() {
            Some(tuples) => tuples.iter().for_each(|t| self.fold(t)),
            None => {
                for tuple in batch.iter() {
                    self.fold(expect_tuple::<T>(port, tuple)?);
                }
            }
        }
        out.emit_batch(0, &mut self.results)
    }

    /// Emits every key's result when made [`RollingAggregate::at_end`].
    fn finish(&mut self, out: &mut Output<'_>) -> Result<(), OperatorError> {
        if self.at_end {
            let aggregate = &self.aggregate;
            self.results.extend(
                self.state
                    .iter()
                    .map(|(key, acc)| (key.clone(), aggregate.result(acc))),
            );
        }
        out.emit_batch(0, &mut self.results)
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Ok(Snapshot {
            operator: Vec::new(),
            keyed: self.state.snapshot()?,
        })
    }

    fn checkpoint(&mut self, _: u64) -> Result<CheckpointState, OperatorError> {
        Ok(CheckpointState::Later(self.state.snapshot_later()))
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        self.state.restore(&snapshot.keyed)
    }
}
