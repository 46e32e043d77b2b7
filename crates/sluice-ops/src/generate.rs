//! A source that makes its tuples with a closure of the sequence number, as fast as it can or
//! at a fixed rate, for a given count or until the closure says it is done.
//!
//! It resumes where it stopped after a redeploy ([`Source::snapshot`] keeps the next sequence
//! number), as long as the closure depends on the sequence number alone.
//!
//! Paced by a [`Pacer`]: each `produce` emits only what is due now, at most
//! [`PACED_BATCH`] tuples, and says `Idle` when nothing is due, so the stream never runs
//! ahead of its schedule and a late source catches up a small batch at a time.

use sluice_graph::{OperatorError, Output, Produced, Snapshot, Source};
use sluice_types::Tuple;

use crate::pace::Pacer;
use crate::sources::SOURCE_BATCH;

/// Tuples a paced generator emits per `produce` call at most.
pub const PACED_BATCH: usize = 32;

/// A source emitting `make(0)`, `make(1)`, … on port 0 until `make` returns `None` or the
/// count is reached, as fast as possible or at a rate in tuples per second.
pub struct Generator<T, F> {
    make: F,
    next: u64,
    count: Option<u64>,
    pacer: Pacer,
    made_all: bool,
    /// Tuples a call emits at most when not paced.
    most: usize,
    batch: Vec<T>,
}

impl<T, F> Generator<T, F>
where
    F: FnMut(u64) -> Option<T>,
{
    /// A generator calling `make` with 0, 1, 2, …, as fast as possible, with no count.
    pub fn new(make: F) -> Self {
        Self {
            make,
            next: 0,
            count: None,
            pacer: Pacer::new(None),
            made_all: false,
            most: SOURCE_BATCH,
            batch: Vec::with_capacity(SOURCE_BATCH),
        }
    }

    /// Emits `tuples_per_second` tuples a second (0: as fast as possible).
    pub fn rate(mut self, tuples_per_second: u64) -> Self {
        self.pacer = Pacer::new(Some(tuples_per_second));
        self
    }

    /// Emits up to `tuples` (at least 1) a call when not paced, instead of [`SOURCE_BATCH`]:
    /// larger batches spread the cost of each call over more tuples downstream, where a
    /// stream is split many ways.
    pub fn batch(mut self, tuples: usize) -> Self {
        self.most = tuples.max(1);
        self
    }

    /// Ends after `count` tuples.
    pub fn count(mut self, count: u64) -> Self {
        self.count = Some(count);
        self
    }
}

impl<T, F> Source for Generator<T, F>
where
    T: Tuple,
    F: FnMut(u64) -> Option<T> + Send,
{
    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let left = self.count.map_or(u64::MAX, |c| c.saturating_sub(self.next));
        if self.made_all || left == 0 {
            return Ok(Produced::Exhausted);
        }
        let most = if self.pacer.is_paced() {
            PACED_BATCH
        } else {
            self.most
        };
        let due = self
            .pacer
            .allowance(most)
            .min(usize::try_from(left).unwrap_or(usize::MAX));
        if due == 0 {
            return Ok(Produced::Idle);
        }
        for _ in 0..due {
            match (self.make)(self.next) {
                Some(tuple) => self.batch.push(tuple),
                None => {
                    self.made_all = true;
                    break;
                }
            }
            self.next += 1;
        }
        let emitted = self.batch.len();
        self.pacer.emitted(emitted);
        out.emit_batch(0, &mut self.batch)?;
        Ok(if emitted == 0 {
            Produced::Exhausted
        } else {
            Produced::Emitted(emitted)
        })
    }

    fn resumable(&self) -> bool {
        true
    }

    /// The next sequence number and whether `make` said it was done.
    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Snapshot::whole(&(self.next, self.made_all))
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        (self.next, self.made_all) = snapshot.decode_whole()?;
        Ok(())
    }
}
