//! Sinks: [`Collect`], which hands what it received back to the caller.

use std::sync::{Arc, Mutex};

use sluice_graph::{expect_tuple, Operator, OperatorContext, OperatorError, Output, Snapshot};
use sluice_types::{Tuple, TupleRef};

/// Where [`Collect`] instances put what they received: one vector per instance, filled when
/// each instance finishes, and one more each time it is suspended before.
pub type Collected<T> = Arc<Mutex<Vec<(usize, Vec<T>)>>>;

/// Every tuple the instances of a [`Collect`] sink handed to `into`, instance by instance,
/// each instance's in the order they arrived.
pub fn collected<T: Clone>(into: &Collected<T>) -> Vec<T> {
    let mut parts = into
        .lock()
        .map_or_else(|e| e.into_inner().clone(), |p| p.clone());
    parts.sort_by_key(|(instance, _)| *instance);
    parts.into_iter().flat_map(|(_, items)| items).collect()
}

/// A sink that keeps every tuple it receives and hands them over when it stops.
///
/// Through checkpoints it is at least once: a checkpoint hands over what it collected so far
/// (as a suspension does), so a job recovered from an earlier checkpoint hands the tuples
/// after it over again.
pub struct Collect<T> {
    into: Collected<T>,
    instance: usize,
    items: Vec<T>,
}

impl<T> Collect<T> {
    /// A sink handing its tuples to `into`.
    pub fn new(into: Collected<T>) -> Self {
        Self {
            into,
            instance: 0,
            items: Vec::new(),
        }
    }
}

impl<T: Tuple> Operator for Collect<T> {
    fn start(&mut self, ctx: &OperatorContext) -> Result<(), OperatorError> {
        self.instance = ctx.instance;
        Ok(())
    }

    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.items.push(expect_tuple::<T>(port, tuple)?.clone());
        Ok(())
    }

    fn finish(&mut self, _out: &mut Output<'_>) -> Result<(), OperatorError> {
        self.hand_over()
    }

    /// Hands over what it collected so far, as it would at the end: what a sink delivered is
    /// out of the job, so a suspended job resumed elsewhere goes on from there. It keeps no
    /// state.
    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        self.hand_over()?;
        Ok(Snapshot::default())
    }
}

impl<T> Collect<T> {
    /// Adds the tuples collected since the last time to `into`, as one more
    /// `(instance, tuples)` entry.
    fn hand_over(&mut self) -> Result<(), OperatorError> {
        let items = std::mem::take(&mut self.items);
        self.into
            .lock()
            .map_err(|_| OperatorError::Failed("another sink instance panicked".into()))?
            .push((self.instance, items));
        Ok(())
    }
}
