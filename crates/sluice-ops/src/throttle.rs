//! [`Throttle`]: passes tuples on at most a given rate, delaying them (never dropping them).
//!
//! A throttle waits on its own thread: while it sleeps until the next tuple is due, the tuples
//! behind it wait in their queue and backpressure holds back what feeds it (in a fused plan,
//! the whole thread waits with it). Watermarks, punctuations and latency markers wait with the
//! tuples before them. After a pause in its input it lets at most [`BURST`] worth of its rate
//! through at once, then keeps to the rate again.

use std::time::Duration;

use sluice_graph::{expect_tuple, Operator, OperatorError, Output};
use sluice_types::{BatchRef, Tuple, TupleRef};

use crate::pace::Pacer;
use crate::transforms::EMIT_RUN;

/// The longest stretch of the rate a throttle lets through at once after a pause (at least
/// one tuple): enough to absorb the coarseness of sleeping, short enough to keep to the rate.
pub const BURST: Duration = Duration::from_millis(10);

/// Passes every tuple on, in order, at most `rate` tuples per second.
pub struct Throttle<T> {
    pacer: Pacer,
    results: Vec<T>,
}

impl<T> Throttle<T> {
    /// A throttle passing at most `tuples_per_second` tuples a second (fractions too). A rate
    /// that is not positive and finite passes everything at once; [`crate::Stream::throttle`]
    /// refuses one.
    pub fn new(tuples_per_second: f64) -> Self {
        let burst = (tuples_per_second * BURST.as_secs_f64()).max(1.0) as u64;
        Self {
            pacer: Pacer::per_second(tuples_per_second).with_most_behind(burst),
            results: Vec::new(),
        }
    }

    /// Why `tuples_per_second` cannot work as a rate, if it cannot.
    pub fn check(tuples_per_second: f64) -> Result<(), String> {
        if tuples_per_second > 0.0 && tuples_per_second.is_finite() {
            Ok(())
        } else {
            Err(format!(
                "a throttle needs a rate above 0 tuples per second, not {tuples_per_second}"
            ))
        }
    }
}

impl<T: Tuple> Throttle<T> {
    /// Emits `tuples` in runs of what is due, sleeping until each run is.
    fn pass<'a>(
        &mut self,
        tuples: impl Iterator<Item = &'a T>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let mut tuples = tuples.peekable();
        while tuples.peek().is_some() {
            let due = self.pacer.allowance(EMIT_RUN);
            if due == 0 {
                std::thread::sleep(self.pacer.until_due());
                continue;
            }
            self.results.extend(tuples.by_ref().take(due).cloned());
            self.pacer.emitted(self.results.len());
            out.emit_batch(0, &mut self.results)?;
        }
        Ok(())
    }
}

impl<T: Tuple> Operator for Throttle<T> {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.pass(std::iter::once(expect_tuple::<T>(port, tuple)?), out)
    }

    fn process_batch(
        &mut self,
        port: usize,
        batch: BatchRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        match batch.as_slice::<T>() {
            Some(tuples) => self.pass(tuples.iter(), out),
            None => batch
                .iter()
                .try_for_each(|tuple| self.process(port, tuple, out)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_positive_finite_rates_pass_the_check() {
        assert!(Throttle::<u64>::check(0.5).is_ok());
        for bad in [0.0, -3.0, f64::NAN, f64::INFINITY] {
            let reason = Throttle::<u64>::check(bad).unwrap_err();
            assert!(reason.contains("above 0"), "{reason}");
        }
    }
}
