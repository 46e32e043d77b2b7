//! Sources.

use sluice_graph::{OperatorError, Output, Produced, Source};
use sluice_types::Tuple;

/// Tuples emitted per `produce` call, so a thread publishes in batches yet stays responsive.
pub const SOURCE_BATCH: usize = 256;

/// A source that emits the items of an iterator on port 0, then ends.
pub struct IterSource<I> {
    items: I,
}

impl<I> IterSource<I> {
    /// A source over `items`.
    pub fn new(items: I) -> Self {
        Self { items }
    }
}

impl<I> Source for IterSource<I>
where
    I: Iterator + Send,
    I::Item: Tuple,
{
    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let mut emitted = 0;
        for item in self.items.by_ref().take(SOURCE_BATCH) {
            out.emit(0, item)?;
            emitted += 1;
        }
        Ok(if emitted == 0 {
            Produced::Exhausted
        } else {
            Produced::Emitted(emitted)
        })
    }
}
