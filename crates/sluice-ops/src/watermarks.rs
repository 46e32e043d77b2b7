//! Event time from the data: [`WatermarkAssigner`] passes tuples through and, after each
//! batch, emits a watermark that trails the greatest event time seen by a bound on how far out
//! of order the tuples come (Flink's bounded out-of-orderness).

use std::time::Duration;

use sluice_graph::{expect_tuple, Operator, OperatorError, Output};
use sluice_types::{BatchRef, Tuple, TupleRef};

/// Passes tuples through and emits watermarks `max_seen - max_delay`.
pub struct WatermarkAssigner<T, F> {
    time: F,
    max_delay: u64,
    greatest: Option<u64>,
    emitted: u64,
    through: Vec<T>,
}

impl<T, F: Fn(&T) -> u64> WatermarkAssigner<T, F> {
    /// Reads each tuple's event time with `time`; tuples arrive at most `max_delay` after a
    /// later one.
    pub fn new(time: F, max_delay: Duration) -> Self {
        Self {
            time,
            max_delay: u64::try_from(max_delay.as_nanos()).unwrap_or(u64::MAX),
            greatest: None,
            emitted: 0,
            through: Vec::new(),
        }
    }

    fn see(&mut self, tuple: &T)
    where
        T: Clone,
    {
        let at = (self.time)(tuple);
        self.greatest = Some(self.greatest.map_or(at, |g| g.max(at)));
        self.through.push(tuple.clone());
    }

    fn pass_on(&mut self, out: &mut Output<'_>) -> Result<(), OperatorError>
    where
        T: Tuple,
    {
        out.emit_batch(0, &mut self.through)?;
        let watermark = self
            .greatest
            .map_or(0, |g| g.saturating_sub(self.max_delay));
        if watermark > self.emitted {
            self.emitted = watermark;
            out.watermark(watermark)?;
        }
        Ok(())
    }
}

impl<T: Tuple, F: Fn(&T) -> u64 + Send> Operator for WatermarkAssigner<T, F> {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.see(expect_tuple::<T>(port, tuple)?);
        self.pass_on(out)
    }

    fn process_batch(
        &mut self,
        port: usize,
        batch: BatchRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        for tuple in batch.iter() {
            self.see(expect_tuple::<T>(port, tuple)?);
        }
        self.pass_on(out)
    }

    /// Upstream's watermarks stop here: this operator makes its own (the end of the stream
    /// still passes, as the runtime sends it when the operator finishes).
    fn watermark(&mut self, _watermark: u64, _out: &mut Output<'_>) -> Result<(), OperatorError> {
        Ok(())
    }
}
