//! One-in, one-out transformations driven by closures.

use std::marker::PhantomData;

use sluice_graph::{expect_tuple, Operator, OperatorError, Output};
use sluice_types::{Tuple, TupleRef};

/// Emits `f(tuple)` for every tuple.
pub struct Map<I, O, F> {
    f: F,
    types: PhantomData<fn(I) -> O>,
}

impl<I, O, F> Map<I, O, F> {
    /// A map applying `f`.
    pub fn new(f: F) -> Self {
        Self {
            f,
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
}

/// Forwards the tuples for which `f` is true.
pub struct Filter<T, F> {
    f: F,
    types: PhantomData<fn(T)>,
}

impl<T, F> Filter<T, F> {
    /// A filter keeping tuples where `f` holds.
    pub fn new(f: F) -> Self {
        Self {
            f,
            types: PhantomData,
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
}

/// Emits every item of `f(tuple)`.
pub struct FlatMap<I, O, F> {
    f: F,
    types: PhantomData<fn(I) -> O>,
}

impl<I, O, F> FlatMap<I, O, F> {
    /// A flat-map applying `f`.
    pub fn new(f: F) -> Self {
        Self {
            f,
            types: PhantomData,
        }
    }
}

impl<I, O, F, It> Operator for FlatMap<I, O, F>
where
    I: Tuple,
    O: Tuple,
    It: IntoIterator<Item = O>,
    F: FnMut(&I) -> It + Send,
{
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        for value in (self.f)(expect_tuple::<I>(port, tuple)?) {
            out.emit(0, value)?;
        }
        Ok(())
    }
}
