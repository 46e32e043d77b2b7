//! Sinks: [`Collect`], which hands what it received back to the caller, in memory when it
//! runs in the launching process and over the PE's control link when it runs in a PE process
//! (see [`sluice_graph::ResultOutlet`]); [`CollectInlet`] takes them in there.

use std::sync::{Arc, Mutex};

use sluice_graph::{
    expect_tuple, result_outlet, Operator, OperatorContext, OperatorError, Output, ResultInlet,
    ResultOutlet, Snapshot, MAX_RESULT_TUPLE_BYTES, RESULT_BATCH_BYTES,
};
use sluice_types::{BatchRef, DecodeError, Tuple, TupleRef};

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
/// In a PE process it sends them to the launching process instead, where the graph's
/// [`CollectInlet`] for it puts them in `into` (the launching process's own).
///
/// Through checkpoints it is at least once: a checkpoint hands over what it collected so far
/// (as a suspension does), so a job recovered from an earlier checkpoint hands the tuples
/// after it over again.
pub struct Collect<T> {
    into: Collected<T>,
    /// Where it sends its tuples, when it runs in a PE process.
    outlet: Option<Arc<dyn ResultOutlet>>,
    name: String,
    instance: usize,
    items: Vec<T>,
}

impl<T> Collect<T> {
    /// A sink handing its tuples to `into`.
    pub fn new(into: Collected<T>) -> Self {
        Self {
            into,
            outlet: None,
            name: String::new(),
            instance: 0,
            items: Vec::new(),
        }
    }
}

impl<T: Tuple> Operator for Collect<T> {
    fn start(&mut self, ctx: &OperatorContext) -> Result<(), OperatorError> {
        self.instance = ctx.instance;
        self.name.clone_from(&ctx.name);
        self.outlet = result_outlet();
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

    /// Copies a batch at once where it is a slice (a fused chain's batches are).
    fn process_batch(
        &mut self,
        port: usize,
        batch: BatchRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        match batch.as_slice::<T>() {
            Some(tuples) => {
                self.items.extend_from_slice(tuples);
                Ok(())
            }
            None => batch
                .iter()
                .try_for_each(|tuple| self.process(port, tuple, out)),
        }
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

impl<T: Tuple> Collect<T> {
    /// Adds the tuples collected since the last time to `into`, as one more
    /// `(instance, tuples)` entry; in a PE process, sends them to the launching process.
    fn hand_over(&mut self) -> Result<(), OperatorError> {
        let items = std::mem::take(&mut self.items);
        if let Some(outlet) = &self.outlet {
            return self.send(&**outlet, &items);
        }
        self.into
            .lock()
            .map_err(|_| OperatorError::Failed("another sink instance panicked".into()))?
            .push((self.instance, items));
        Ok(())
    }
}

impl<T: Tuple> Collect<T> {
    /// Sends `items` through `outlet`, encoded, in batches of at most [`RESULT_BATCH_BYTES`]
    /// (an empty hand-over sends nothing).
    fn send(&self, outlet: &dyn ResultOutlet, items: &[T]) -> Result<(), OperatorError> {
        let mut batch: Vec<Vec<u8>> = Vec::new();
        let mut bytes = 0;
        for item in items {
            let mut encoded = Vec::new();
            item.encode(&mut encoded)
                .map_err(|e| OperatorError::Failed(format!("cannot encode a result: {e}")))?;
            if encoded.len() > MAX_RESULT_TUPLE_BYTES {
                return Err(OperatorError::Failed(format!(
                    "a result of {} bytes is larger than the {MAX_RESULT_TUPLE_BYTES} bytes \
                     (MAX_RESULT_TUPLE_BYTES) a sink returns from a PE process in one tuple",
                    encoded.len()
                )));
            }
            if bytes + encoded.len() > RESULT_BATCH_BYTES && !batch.is_empty() {
                outlet
                    .send(&self.name, self.instance, std::mem::take(&mut batch))
                    .map_err(OperatorError::Failed)?;
                bytes = 0;
            }
            bytes += encoded.len();
            batch.push(encoded);
        }
        if batch.is_empty() {
            return Ok(());
        }
        outlet
            .send(&self.name, self.instance, batch)
            .map_err(OperatorError::Failed)
    }
}

/// Takes in, in the launching process, what the instances of a [`Collect`] sink sent from PE
/// processes: decodes each batch into one more `(instance, tuples)` entry of `into`.
pub struct CollectInlet<T> {
    into: Collected<T>,
}

impl<T> CollectInlet<T> {
    /// An inlet filling `into`, the launching process's collection of the sink.
    pub fn new(into: Collected<T>) -> Self {
        Self { into }
    }
}

impl<T: Tuple> ResultInlet for CollectInlet<T> {
    fn deliver(&self, instance: usize, tuples: &[Vec<u8>]) -> Result<(), DecodeError> {
        let items = tuples
            .iter()
            .map(|bytes| T::decode(bytes))
            .collect::<Result<Vec<T>, _>>()?;
        self.into
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((instance, items));
        Ok(())
    }
}
