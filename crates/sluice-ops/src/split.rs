//! [`Split`]: one stream onto several output ports, each tuple to the port a function picks
//! (IBM Streams' `Split`) or to every port.
//!
//! A tuple for which the function returns a port the operator lacks (an index of `n` or more
//! for `n` ports) is dropped and counted (`unrouted_tuples` in the operator's report): that is
//! how a split function leaves a tuple out. Each port's tuples keep their order, and each
//! port's share of a batch leaves as one batch.

use sluice_graph::{Operator, OperatorError, OperatorReport, Output};
use sluice_types::{BatchRef, Tuple, TupleRef};

use crate::counters::counter_report;
use crate::transforms::{each_tuple, one_tuple};

/// Where a split sends each tuple.
enum Route<F> {
    /// To the port the function returns.
    By(F),
    /// To every port.
    All,
}

/// Sends each tuple to one of its output ports, chosen by a function, or to all of them.
pub struct Split<T, F> {
    route: Route<F>,
    /// Per output port, the tuples of this batch bound for it.
    results: Vec<Vec<T>>,
    unrouted: u64,
}

impl<T, F: FnMut(&T) -> usize> Split<T, F> {
    /// A split over `ports` output ports, sending each tuple to port `pick(tuple)`; a tuple
    /// for which `pick` returns `ports` or more is dropped and counted.
    pub fn by(ports: usize, pick: F) -> Self {
        Self::with_route(ports, Route::By(pick))
    }

    fn with_route(ports: usize, route: Route<F>) -> Self {
        Self {
            route,
            results: (0..ports).map(|_| Vec::new()).collect(),
            unrouted: 0,
        }
    }
}

impl<T> Split<T, fn(&T) -> usize> {
    /// A split over `ports` output ports sending every tuple to each of them.
    pub fn to_all(ports: usize) -> Self {
        Self::with_route(ports, Route::All)
    }
}

impl<T: Tuple, F: FnMut(&T) -> usize> Split<T, F> {
    fn take(&mut self, tuple: &T) {
        match &mut self.route {
            Route::By(pick) => match self.results.get_mut(pick(tuple)) {
                Some(port) => port.push(tuple.clone()),
                None => self.unrouted += 1,
            },
            Route::All => self
                .results
                .iter_mut()
                .for_each(|port| port.push(tuple.clone())),
        }
    }

    fn emit(&mut self, out: &mut Output<'_>) -> Result<(), OperatorError> {
        for (port, tuples) in self.results.iter_mut().enumerate() {
            out.emit_batch(port, tuples)?;
        }
        Ok(())
    }
}

impl<T: Tuple, F: FnMut(&T) -> usize + Send> Operator for Split<T, F> {
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
        each_tuple(port, batch, |t| self.take(t))?;
        self.emit(out)
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        Ok(counter_report(&[("unrouted_tuples", self.unrouted)]))
    }
}
