//! A source that makes its tuples with a closure of the sequence number, as fast as it can or
//! at a fixed rate, for a given count or until the closure says it is done.
//!
//! It resumes where it stopped after a redeploy or a failure ([`Source::snapshot`] keeps the
//! next sequence number): a closure of the sequence number alone ([`Generator::new`]) needs
//! nothing more; one that keeps state of its own between calls (a random walk) keeps it in a
//! value of its own, which the snapshot holds too ([`Generator::with_state`]).
//!
//! Paced by a [`Pacer`]: each `produce` emits only what is due now, at most
//! [`PACED_BATCH`] tuples, and says `Idle` when nothing is due, so the stream never runs
//! ahead of its schedule and a late source catches up a small batch at a time.

use serde::de::DeserializeOwned;
use serde::Serialize;
use sluice_graph::{OperatorError, Output, Produced, Snapshot, Source};
use sluice_types::Tuple;

use crate::pace::Pacer;
use crate::sources::SOURCE_BATCH;

/// Tuples a paced generator emits per `produce` call at most.
pub const PACED_BATCH: usize = 32;

/// What makes a [`Generator`]'s tuples, from their sequence numbers.
pub trait MakeTuples<T>: Send {
    /// The tuple of sequence number `seq`, or `None` when there are no more.
    fn make(&mut self, seq: u64) -> Option<T>;
    /// What it keeps between calls, for a snapshot.
    fn state(&self) -> Result<Vec<u8>, OperatorError>;
    /// Takes back what [`MakeTuples::state`] returned.
    fn restore(&mut self, state: &[u8]) -> Result<(), OperatorError>;
}

/// A closure of the sequence number alone: it keeps nothing between calls.
pub struct OfSeq<F>(F);

impl<T, F: FnMut(u64) -> Option<T> + Send> MakeTuples<T> for OfSeq<F> {
    fn make(&mut self, seq: u64) -> Option<T> {
        (self.0)(seq)
    }

    fn state(&self) -> Result<Vec<u8>, OperatorError> {
        Ok(Vec::new())
    }

    fn restore(&mut self, _state: &[u8]) -> Result<(), OperatorError> {
        Ok(())
    }
}

/// A closure of its own state and the sequence number: the state is kept in snapshots.
pub struct WithState<S, F> {
    state: S,
    make: F,
}

impl<T, S, F> MakeTuples<T> for WithState<S, F>
where
    S: Serialize + DeserializeOwned + Send,
    F: FnMut(&mut S, u64) -> Option<T> + Send,
{
    fn make(&mut self, seq: u64) -> Option<T> {
        (self.make)(&mut self.state, seq)
    }

    fn state(&self) -> Result<Vec<u8>, OperatorError> {
        postcard::to_allocvec(&self.state)
            .map_err(|e| OperatorError::Failed(format!("generator state does not encode: {e}")))
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), OperatorError> {
        self.state = postcard::from_bytes(state)
            .map_err(|e| OperatorError::Failed(format!("generator state does not decode: {e}")))?;
        Ok(())
    }
}

/// A source emitting `make(0)`, `make(1)`, … on port 0 until `make` returns `None` or the
/// count is reached, as fast as possible or at a rate in tuples per second.
pub struct Generator<T, M> {
    make: M,
    next: u64,
    count: Option<u64>,
    pacer: Pacer,
    made_all: bool,
    /// Tuples a call emits at most when not paced.
    most: usize,
    batch: Vec<T>,
}

impl<T, F> Generator<T, OfSeq<F>>
where
    F: FnMut(u64) -> Option<T> + Send,
{
    /// A generator calling `make` with 0, 1, 2, …, as fast as possible, with no count.
    pub fn new(make: F) -> Self {
        Generator::of(OfSeq(make))
    }
}

impl<T, S, F> Generator<T, WithState<S, F>>
where
    S: Serialize + DeserializeOwned + Send,
    F: FnMut(&mut S, u64) -> Option<T> + Send,
{
    /// A generator calling `make` with its state, first `state`, and 0, 1, 2, …; the state
    /// is kept in its snapshots, so that it resumes with the tuples it would have made.
    pub fn with_state(state: S, make: F) -> Self {
        Generator::of(WithState { state, make })
    }
}

impl<T, M: MakeTuples<T>> Generator<T, M> {
    fn of(make: M) -> Self {
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

impl<T, M> Source for Generator<T, M>
where
    T: Tuple,
    M: MakeTuples<T>,
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
            match self.make.make(self.next) {
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

    /// The next sequence number, whether `make` said it was done, and `make`'s own state.
    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Snapshot::whole(&(self.next, self.made_all, self.make.state()?))
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        let state: Vec<u8>;
        (self.next, self.made_all, state) = snapshot.decode_whole()?;
        self.make.restore(&state)
    }
}
