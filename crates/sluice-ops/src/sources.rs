//! Sources.

use sluice_graph::{OperatorError, Output, Produced, Source};
use sluice_types::Tuple;

/// Tuples emitted per `produce` call, so a thread publishes in batches yet stays responsive.
pub const SOURCE_BATCH: usize = 256;

/// A source that emits the items of an iterator on port 0, in batches of up to
/// [`SOURCE_BATCH`], then ends.
pub struct IterSource<I: Iterator> {
    items: I,
    batch: Vec<I::Item>,
}

impl<I: Iterator> IterSource<I> {
    /// A source over `items`.
    pub fn new(items: I) -> Self {
        Self {
            items,
            batch: Vec::with_capacity(SOURCE_BATCH),
        }
    }
}

impl<I> crate::TypedSource for IterSource<I>
where
    I: Iterator + Send,
    I::Item: Tuple,
{
    type Out = I::Item;
}

impl<I> Source for IterSource<I>
where
    I: Iterator + Send,
    I::Item: Tuple,
{
    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        self.batch.extend(self.items.by_ref().take(SOURCE_BATCH));
        let emitted = self.batch.len();
        out.emit_batch(0, &mut self.batch)?;
        Ok(if emitted == 0 {
            Produced::Exhausted
        } else {
            Produced::Emitted(emitted)
        })
    }
}
