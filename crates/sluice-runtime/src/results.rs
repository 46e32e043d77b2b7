//! Results brought back to the launching process: what the sinks of a job's PE processes
//! return (`collect()`, see [`sluice_graph::ResultOutlet`]) travels over each PE's control
//! link as [`FromPe::Results`] messages, and the launcher hands it to the graph's inlet for
//! that sink, within [`RunOptions::collect_limit`](crate::RunOptions::collect_limit).
//!
//! ```text
//!  PE process                                  launching process
//!  Collect sink ── ResultOutlet (LinkOutlet) ─▶ Children::record ─▶ ResultsInbox::take
//!    encodes its tuples, batches of          counts the bytes against the limit, then the
//!    at most RESULT_BATCH_BYTES               graph's ResultInlet decodes them into the
//!                                             program's collection
//! ```
//! A batch is one frame of the control protocol (a line naming the sink and the length, the
//! bytes raw after it, [`crate::wire::Frame`]): the tuples' encodings as a postcard
//! `Vec<Vec<u8>>`, at most [`MAX_FRAME`] bytes. A PE sends its results before its `Done` on the same link, so
//! once every PE has reported, every result is in. The limit counts every sink's encoded
//! bytes together, over the job's whole life (restarts too): the job fails with
//! [`RunError::ResultsTooLarge`] at the batch that crosses it, and what came before it stays
//! delivered.

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_graph::{ResultInlet, ResultOutlet};

use crate::link::SharedLink;
use crate::wire::{Frame, FromPe, MAX_FRAME};
use crate::RunError;

/// The outlet of a PE process: sends each batch to the launcher on the PE's control link.
pub(crate) struct LinkOutlet {
    link: SharedLink,
}

impl LinkOutlet {
    pub(crate) fn new(link: SharedLink) -> Self {
        Self { link }
    }
}

impl ResultOutlet for LinkOutlet {
    fn send(&self, sink: &str, instance: usize, tuples: Vec<Vec<u8>>) -> Result<(), String> {
        let packed = postcard::to_allocvec(&tuples).map_err(|e| e.to_string())?;
        if packed.len() > MAX_FRAME {
            return Err(format!(
                "a batch of results of sink '{sink}' is {} bytes, over the {MAX_FRAME} bytes \
                 (MAX_FRAME) one frame to the launching process carries: a tuple that large \
                 cannot be collected from a PE process",
                packed.len()
            ));
        }
        let message = FromPe::Results {
            sink: sink.to_string(),
            instance,
            tuples: Frame::new(packed),
        };
        self.link.send(&message).map_err(|e| {
            format!("cannot send the results of sink '{sink}' to the launching process: {e}")
        })
    }
}

/// What the launcher takes in of the results its PEs return, within the job's limit.
pub(crate) struct ResultsInbox {
    /// The graph's inlets, by sink ([`sluice_graph::Graph::result_inlets`]).
    inlets: BTreeMap<String, Arc<dyn ResultInlet>>,
    /// Encoded bytes taken in so far.
    taken: u64,
    limit: u64,
    /// The limit was crossed: nothing more is taken in.
    full: bool,
}

impl ResultsInbox {
    pub(crate) fn new(inlets: BTreeMap<String, Arc<dyn ResultInlet>>, limit: u64) -> Self {
        Self {
            inlets,
            taken: 0,
            limit,
            full: false,
        }
    }

    /// Takes in a batch PE `pe` sent for instance `instance` of sink `sink`: `tuples` as
    /// [`LinkOutlet`] packed them. An error fails the job: past the limit (once), a sink the
    /// graph returns nothing from, or a batch that does not decode.
    pub(crate) fn take(
        &mut self,
        pe: &str,
        (sink, instance, packed): (&str, usize, &[u8]),
    ) -> Result<(), RunError> {
        if self.full {
            return Ok(());
        }
        let broken = |why: String| RunError::PeFailed {
            pe: pe.to_string(),
            error: format!("its results for sink '{sink}' {why}"),
            consequence: false,
            permanent: true,
        };
        let inlet = self
            .inlets
            .get(sink)
            .ok_or_else(|| broken("name a sink that returns none in this graph".into()))?;
        let tuples: Vec<Vec<u8>> = postcard::from_bytes(packed)
            .map_err(|e| broken(format!("are not a batch of tuples: {e}")))?;
        let size = self.taken + tuples.iter().map(|t| t.len() as u64).sum::<u64>();
        if size > self.limit {
            self.full = true;
            return Err(RunError::ResultsTooLarge {
                sink: sink.to_string(),
                size,
                limit: self.limit,
            });
        }
        self.taken = size;
        inlet
            .deliver(instance, &tuples)
            .map_err(|e| broken(format!("do not decode: {e}")))
    }
}
