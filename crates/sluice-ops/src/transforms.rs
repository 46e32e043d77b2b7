//! One-in transformations driven by closures: [`Map`], [`Filter`] and [`FlatMap`].
//!
//! Each reads a batch as a slice when it can and emits its results as one batch (in runs of at
//! most [`EMIT_RUN`] tuples), so a fused chain of them makes one call per batch between
//! operators rather than one per tuple, and the results' vector is reused, never reallocated.

use std::marker::PhantomData;

use sluice_graph::{expect_tuple, Operator, OperatorError, Output};
use sluice_types::{BatchRef, Tuple, TupleRef, TupleSlice};

/// The most tuples a transformation gathers before it emits them: enough to amortise a call
/// downstream, few enough to stay in the cache.
pub const EMIT_RUN: usize = 1024;

/// Runs `step` on every tuple of `batch` (as `I` from input `port`), emitting what it leaves in
/// `results` whenever a run is full, and the rest at the end.
fn for_each_in<I: Tuple, O: Tuple>(
    port: usize,
    batch: BatchRef<'_>,
    results: &mut Vec<O>,
    out: &mut Output<'_>,
    mut step: impl FnMut(&I, &mut Vec<O>),
) -> Result<(), OperatorError> {
    let mut take = |tuple: &I, out: &mut Output<'_>| {
        step(tuple, results);
        if results.len() >= EMIT_RUN {
            out.emit_batch(0, results)?;
        }
        Ok(())
    };
    match batch.as_slice::<I>() {
        Some(tuples) => tuples.iter().try_for_each(|t| take(t, out))?,
        None => batch
            .iter()
            .try_for_each(|t| take(expect_tuple::<I>(port, t)?, out))?,
    }
    out.emit_batch(0, results)
}

/// Runs `f` on every tuple of `batch` (as `T` from input `port`), reading the batch as a slice
/// when it can.
pub(crate) fn each_tuple<'b, T: Tuple>(
    port: usize,
    batch: BatchRef<'b>,
    mut f: impl FnMut(&'b T),
) -> Result<(), OperatorError> {
    match batch.as_slice::<T>() {
        Some(tuples) => tuples.iter().for_each(f),
        None => {
            for tuple in batch.iter() {
                f(expect_tuple::<T>(port, tuple)?);
            }
        }
    }
    Ok(())
}

/// `tuple` (as `T` from input `port`) as a batch of one, for an operator whose
/// `process_batch` does its work: `self.process_batch(port, BatchRef::new(&one_tuple(..)?), out)`.
pub(crate) fn one_tuple<'a, T: Tuple>(
    port: usize,
    tuple: TupleRef<'a>,
) -> Result<TupleSlice<'a, T>, OperatorError> {
    Ok(TupleSlice(std::slice::from_ref(expect_tuple::<T>(
        port, tuple,
    )?)))
}

/// Emits `f(tuple)` for every tuple.
pub struct Map<I, O, F> {
    f: F,
    results: Vec<O>,
    types: PhantomData<fn(I)>,
}

impl<I, O, F> Map<I, O, F> {
    /// A map applying `f`.
    pub fn new(f: F) -> Self {
        Self {
            f,
            results: Vec::new(),
            types: PhantomData,
        }
    }
}

impl<I: Tuple, O: Tuple, F: FnMut(&I) -> O + Send> Operator for Map<I, O, F> {
    #[inline]
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let value = (self.f)(expect_tuple::<I>(port, tuple)?);
        out.emit(0, value)
    }

    fn process_batch(
        &mut self,
        port: usize,
        batch: BatchRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let f = &mut self.f;
        for_each_in(port, batch, &mut self.results, out, |t, results| {
            results.push(f(t))
        })
    }
}

/// Forwards the tuples for which `f` is true.
pub struct Filter<T, F> {
    f: F,
    results: Vec<T>,
}

impl<T, F> Filter<T, F> {
    /// A filter keeping tuples where `f` holds.
    pub fn new(f: F) -> Self {
        Self {
            f,
            results: Vec::new(),
        }
    }
}

impl<T: Tuple, F: FnMut(&T) -> bool + Send> Operator for Filter<T, F> {
    #[inline]
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let t = expect_tuple::<T>(port, tuple)?;
        if (self.f)(t) {
            out.emit(0, t.clone())?;
        }
        Ok(())
    }

    fn process_batch(
        &mut self,
        port: usize,
        batch: BatchRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let f = &mut self.f;
        for_each_in(port, batch, &mut self.results, out, |t: &T, results| {
            if f(t) {
                results.push(t.clone());
            }
        })
    }
}

/// Emits every tuple `f` pushes for each input tuple. `f` pushes straight into the operator's
/// run of results, so it can emit items that borrow from its input (the words of a line)
/// without collecting them into a vector of its own first.
pub struct FlatMap<I, O, F> {
    f: F,
    results: Vec<O>,
    types: PhantomData<fn(I)>,
}

impl<I, O, F: FnMut(&I, &mut Vec<O>)> FlatMap<I, O, F> {
    /// A flat-map in which `f(tuple, results)` pushes the results of `tuple`.
    pub fn new(f: F) -> Self {
        Self {
            f,
            results: Vec::new(),
            types: PhantomData,
        }
    }
}

impl<I, O, F> Operator for FlatMap<I, O, F>
where
    I: Tuple,
    O: Tuple,
    F: FnMut(&I, &mut Vec<O>) + Send,
{
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        (self.f)(expect_tuple::<I>(port, tuple)?, &mut self.results);
        out.emit_batch(0, &mut self.results)
    }

    fn process_batch(
        &mut self,
        port: usize,
        batch: BatchRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        for_each_in(port, batch, &mut self.results, out, &mut self.f)
    }
}
