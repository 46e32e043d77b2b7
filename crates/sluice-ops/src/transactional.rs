//! Exactly-once output for a user's sink: implement [`TransactionalSink`] (write, pre-commit,
//! commit, abort) and run it as an [`ExactlyOnce`] operator, which commits with the job's
//! checkpoints (two-phase commit, as Flink's `TwoPhaseCommitSinkFunction`).
//!
//! - Tuples are written into the open transaction ([`TransactionalSink::write`]).
//! - When checkpoint `n` reaches the instance, the open transaction is closed
//!   ([`TransactionalSink::pre_commit`] with `n`: made durable, not yet visible) and what
//!   describes it (its `Pending`) kept in the instance's state for the checkpoint.
//! - When checkpoint `n` is complete, the transactions closed at `n` and before are committed
//!   (made visible), oldest first.
//! - A job recovering from checkpoint `n` gives a new instance that checkpoint's state: its
//!   transactions are committed again (they may have been before the failure: a commit must
//!   be idempotent), after [`TransactionalSink::start`] has discarded what the failed
//!   attempt did after `n`.
//! - At the end of the input, the pending transactions are committed, and the rest is closed
//!   as transaction [`FINAL_TRANSACTION`] and committed.
//!
//! A sink that cannot take back what it wrote (standard output, a socket) cannot be made
//! exactly once this way; it is at least once through a recovery.

use serde::de::DeserializeOwned;
use serde::Serialize;
use sluice_graph::{
    expect_tuple, CheckpointState, Operator, OperatorContext, OperatorError, Output, Snapshot,
};
use sluice_types::{Tuple, TupleRef};

/// The number of the transaction closed at the end of the input (the others carry the number
/// of the checkpoint that closed them).
pub const FINAL_TRANSACTION: u64 = u64::MAX;

/// A sink that writes in transactions committed with the job's checkpoints; run it as an
/// [`ExactlyOnce`] operator (see the module doc).
pub trait TransactionalSink: Send {
    /// The tuples it writes.
    type Tuple: Tuple;
    /// What describes a closed transaction, to commit or abort it later, perhaps in another
    /// process after a failure (say, the path of a staged file).
    type Pending: Serialize + DeserializeOwned + Send;

    /// Called once before any other call. `recovered` is the checkpoint the job recovers
    /// from (its transactions are committed again after this call), `None` for a start
    /// afresh: discard what a failed earlier attempt did after it (None: all it did), the
    /// transactions it closed with a greater number and those it committed at the end of its
    /// input, had it reached it. The default does nothing, which is exactly once unless an
    /// instance fails after its end of input and before the job ends.
    fn start(
        &mut self,
        _ctx: &OperatorContext,
        _recovered: Option<u64>,
    ) -> Result<(), OperatorError> {
        Ok(())
    }

    /// Writes `tuple` into the open transaction.
    fn write(&mut self, tuple: &Self::Tuple) -> Result<(), OperatorError>;

    /// Closes the open transaction as number `transaction` (a checkpoint's number, or
    /// [`FINAL_TRANSACTION`]): makes it durable, not yet visible, and opens the next.
    fn pre_commit(&mut self, transaction: u64) -> Result<Self::Pending, OperatorError>;

    /// Makes a closed transaction visible. It may be called again for a transaction committed
    /// before a failure (a recovered job commits its checkpoint's transactions again): it
    /// must then change nothing.
    fn commit(&mut self, pending: Self::Pending) -> Result<(), OperatorError>;

    /// Discards a closed transaction that will never be committed (the checkpoint that closed
    /// it could not be taken).
    fn abort(&mut self, pending: Self::Pending) -> Result<(), OperatorError>;
}

/// The operator running a [`TransactionalSink`] exactly once (see the module doc).
pub struct ExactlyOnce<S: TransactionalSink> {
    sink: S,
    /// Transactions closed at a checkpoint and not yet committed, oldest first.
    pending: Vec<(u64, S::Pending)>,
    /// The checkpoint it was restored from.
    recovered: Option<u64>,
    /// The end of the input was reached and everything committed.
    finished: bool,
}

impl<S: TransactionalSink> ExactlyOnce<S> {
    /// Runs `sink`.
    pub fn new(sink: S) -> Self {
        Self {
            sink,
            pending: Vec::new(),
            recovered: None,
            finished: false,
        }
    }

    /// Commits the pending transactions closed at `checkpoint` and before.
    fn commit_through(&mut self, checkpoint: u64) -> Result<(), OperatorError> {
        let due = self.pending.partition_point(|(n, _)| *n <= checkpoint);
        for (_, pending) in self.pending.drain(..due) {
            self.sink.commit(pending)?;
        }
        Ok(())
    }
}

impl<S: TransactionalSink> Operator for ExactlyOnce<S> {
    fn start(&mut self, ctx: &OperatorContext) -> Result<(), OperatorError> {
        self.sink.start(ctx, self.recovered)?;
        self.commit_through(u64::MAX)
    }

    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.sink.write(expect_tuple::<S::Tuple>(port, tuple)?)
    }

    /// Closes the open transaction; the state is the checkpoint's number and every
    /// transaction not yet committed. After the end of the input, everything is committed,
    /// the final transaction too: the state says so, so that a recovery from it keeps it.
    fn checkpoint(&mut self, checkpoint: u64) -> Result<CheckpointState, OperatorError> {
        if self.finished {
            return Snapshot::whole(&(FINAL_TRANSACTION, &self.pending)).map(CheckpointState::Now);
        }
        let pending = self.sink.pre_commit(checkpoint)?;
        self.pending.push((checkpoint, pending));
        match Snapshot::whole(&(checkpoint, &self.pending)) {
            Ok(state) => Ok(CheckpointState::Now(state)),
            Err(e) => {
                if let Some((_, pending)) = self.pending.pop() {
                    self.sink.abort(pending)?;
                }
                Err(e)
            }
        }
    }

    fn checkpoint_complete(&mut self, checkpoint: u64) -> Result<(), OperatorError> {
        self.commit_through(checkpoint)
    }

    /// Takes back a checkpoint's transactions, which `start` commits.
    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        let (checkpoint, pending) = snapshot.decode_whole()?;
        self.recovered = Some(checkpoint);
        self.pending = pending;
        Ok(())
    }

    /// Refused: a transaction closed for a suspension would carry no checkpoint's number, so
    /// a job with an exactly-once sink is not redeployed by a suspension.
    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Err(OperatorError::Failed(
            "an exactly-once sink commits with checkpoints: it cannot be suspended to be redeployed"
                .into(),
        ))
    }

    /// Commits the pending transactions, then closes and commits the rest.
    fn finish(&mut self, _out: &mut Output<'_>) -> Result<(), OperatorError> {
        self.commit_through(u64::MAX)?;
        let rest = self.sink.pre_commit(FINAL_TRANSACTION)?;
        self.sink.commit(rest)?;
        self.finished = true;
        Ok(())
    }
}
