//! What makes a built-in application benchable: the operator whose tuples in are its
//! throughput, and the hand-written programs (yardsticks) it is measured against.

use sluice_apps::Settings;
use sluice_runtime::JobReport;

/// A hand-written single-threaded program doing an application's computation. It generates
/// its input in the same loop as it processes it, as the application's source does, so the two
/// do the same work from the same input.
pub(crate) trait Yardstick {
    /// Generates and processes `n` inputs (tuples of the application's source); returns the
    /// units of throughput they made (words, for WordCount).
    fn steps(&mut self, n: usize) -> u64;
}

/// A yardstick of an application.
pub(crate) struct YardstickSpec {
    /// Its name in results (`naive`, `tuned`).
    pub(crate) name: &'static str,
    /// What it does, in a line.
    pub(crate) about: &'static str,
    /// The yardstick (of the same application) this one is a tuned version of, which it
    /// should never be slower than: a result where it is gets a warning.
    pub(crate) tunes: Option<&'static str>,
    /// Makes one for the input the application's `--set` values describe.
    pub(crate) make: fn(&Settings) -> anyhow::Result<Box<dyn Yardstick>>,
}

/// A built-in application `sluice bench app` measures.
pub(crate) struct Benchable {
    /// Its name among `sluice_apps::registry()`.
    pub(crate) name: &'static str,
    /// What its source emits, plural: what `--rate` counts.
    pub(crate) input: &'static str,
    /// The operator whose tuples in are the throughput figure.
    pub(crate) counted: &'static str,
    /// What those tuples are, plural.
    pub(crate) unit: &'static str,
    /// The input rate a run reached (its source's tuples per second while it sent), when the
    /// application reports it.
    pub(crate) input_rate: Option<fn(&JobReport) -> f64>,
    /// The programs it is measured against.
    pub(crate) yardsticks: &'static [YardstickSpec],
}
