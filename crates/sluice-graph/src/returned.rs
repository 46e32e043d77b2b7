//! Results a sink returns to the program that launched its job, wherever the sink runs.
//!
//! A sink such as `sluice_ops::Collect` keeps what it receives for the program that started
//! the job. When its instance runs in the launching process (a fused or threaded plan) it
//! hands the tuples over in memory. When it runs in a PE process (a processes plan, a PE on
//! another host) they must travel: the runtime installs a [`ResultOutlet`] in every PE
//! process (it sends them over the PE's control link), the sink encodes its tuples
//! ([`Tuple::encode`](sluice_types::Tuple::encode)) and sends them through it in batches of
//! at most [`RESULT_BATCH_BYTES`], and the launcher hands each batch to the [`ResultInlet`]
//! the graph carries for that sink ([`GraphBuilder::returns_results`](crate::GraphBuilder)),
//! which decodes them into the program's own collection.
//!
//! The outlet is the process's, not an instance's: a PE process serves one PE of one job and
//! exits, and the sink finds the outlet without the data plane knowing of it.

use std::sync::{Arc, OnceLock};

use sluice_types::DecodeError;

/// The most encoded bytes a sink sends in one batch (one message on the control link); a
/// single tuple larger than this goes alone.
pub const RESULT_BATCH_BYTES: usize = 1 << 20;

/// The largest tuple a sink sends back to the launching process: a batch is one line of the
/// control link, which holds 64 MiB.
pub const MAX_RESULT_TUPLE_BYTES: usize = 16 << 20;

/// Where the sinks of a PE process send the results they return (the runtime's PE entry
/// installs one, [`install_result_outlet`]).
pub trait ResultOutlet: Send + Sync {
    /// Sends `tuples`, each encoded by `Tuple::encode`, which instance `instance` of the sink
    /// `sink` returns; the error says why they could not be sent.
    fn send(&self, sink: &str, instance: usize, tuples: Vec<Vec<u8>>) -> Result<(), String>;
}

/// Where the launching process takes in the results one sink's instances returned from PE
/// processes: decodes them into the program's collection.
pub trait ResultInlet: Send + Sync {
    /// Takes in `tuples`, encoded as the sink's [`ResultOutlet::send`] was given them, from
    /// instance `instance`.
    fn deliver(&self, instance: usize, tuples: &[Vec<u8>]) -> Result<(), DecodeError>;
}

/// The outlet of this process, once installed.
static OUTLET: OnceLock<Arc<dyn ResultOutlet>> = OnceLock::new();

/// Makes `outlet` where this process's sinks send their results: a process serving a PE of a
/// job. The first one installed stays (a PE process serves one PE and exits).
pub fn install_result_outlet(outlet: Arc<dyn ResultOutlet>) {
    let _ = OUTLET.set(outlet);
}

/// Where this process's sinks send their results; `None` in the launching process itself,
/// whose sinks hand them over in memory.
pub fn result_outlet() -> Option<Arc<dyn ResultOutlet>> {
    OUTLET.get().cloned()
}
