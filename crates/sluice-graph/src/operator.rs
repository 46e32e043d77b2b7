//! The operator API: what a user implements, and the [`Output`] an operator emits through.
//!
//! Every hook but the one that does the work has a default. Hooks return
//! `Result<_, OperatorError>`; an error (or a panic) stops the job with a message naming the
//! operator.
//!
//! Life of an operator instance: `start` once; then `process` / `process_batch` for each tuple
//! on each input port, `punctuation` for window markers, `port_ended` when every upstream of a
//! port has finished; `finish` when all input ports have ended (the last chance to emit); then
//! `stop`, which returns the instance's report. A [`Source`] instead has `produce` called in a
//! loop until it is exhausted or the job is asked to stop, then `finish` and `stop`.
//!
//! Time: an instance's *event time* is the least watermark of all its upstream instances
//! (watermarks travel in order with the data, as punctuations). When it advances, the runtime
//! calls `timer` for each event-time [`Timer`] the instance set at or below it, then
//! `watermark` (whose default passes the watermark on). A processing-time timer is called when
//! `CLOCK_MONOTONIC` reaches it. Both are called on the instance's own thread, between tuples.

use std::any::Any;
use std::collections::BTreeMap;

use sluice_types::{BatchRef, Tuple, TupleRef, TupleSchema};
use thiserror::Error;

use crate::{CheckpointState, Snapshot};

/// Latency recorded by an operator, in nanoseconds.
pub type LatencyHistogram = hdrhistogram::Histogram<u64>;

/// The longest latency a histogram tracks: an hour, in nanoseconds.
const LONGEST_LATENCY_NS: u64 = 3_600_000_000_000;

/// A histogram for latencies from 1 ns to an hour at 3 significant digits; record with
/// `saturating_record` so an outlier beyond an hour counts as an hour.
pub fn latency_histogram() -> LatencyHistogram {
    LatencyHistogram::new_with_bounds(1, LONGEST_LATENCY_NS, 3)
        .expect("constant histogram bounds are valid")
}

/// Why an operator failed.
#[derive(Debug, Error)]
pub enum OperatorError {
    /// A tuple was emitted on a port that does not exist.
    #[error("emitted on output port {port}, but the operator has {count} output port(s)")]
    NoSuchPort {
        /// The port used.
        port: usize,
        /// How many there are.
        count: usize,
    },
    /// A tuple of the wrong type was emitted or read.
    #[error("port {port} carries {expected}, not {actual}")]
    WrongType {
        /// The port.
        port: usize,
        /// The port's tuple type.
        expected: &'static str,
        /// The type used.
        actual: &'static str,
    },
    /// Reading or writing a file or socket failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, e.g. the path.
        context: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The operator's own failure.
    #[error("{0}")]
    Failed(String),
    /// The operator panicked.
    #[error("panicked: {0}")]
    Panicked(String),
    /// The job is being torn down because of another failure.
    #[error("the job is aborting")]
    Aborted,
}

impl OperatorError {
    /// An I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}

/// What an instance knows about where it runs.
#[derive(Debug, Clone)]
pub struct OperatorContext {
    /// The operator's name in the graph.
    pub name: String,
    /// This instance's index among the operator's parallel instances.
    pub instance: usize,
    /// How many instances the operator has.
    pub parallelism: usize,
}

impl OperatorContext {
    /// The instance's name in messages and metrics: `sum[1]`, or `sum` when it has one
    /// instance.
    pub fn instance_name(&self) -> String {
        if self.parallelism == 1 {
            self.name.clone()
        } else {
            format!("{}[{}]", self.name, self.instance)
        }
    }
}

/// What a source did in one call of [`Source::produce`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Produced {
    /// It emitted this many tuples (0 is allowed: it did other work).
    Emitted(usize),
    /// Nothing to emit now (e.g. rate-limited); the runtime may idle before calling again.
    Idle,
    /// It will never emit again.
    Exhausted,
}

/// Counters and latency an instance reports when it stops; the runtime merges the reports of
/// all instances of an operator into the job summary.
#[derive(Debug, Default, Clone)]
pub struct OperatorReport {
    /// Named counters, summed across instances.
    pub counters: BTreeMap<String, u64>,
    /// End-to-end latency observed by this instance, merged across instances.
    pub latency: Option<LatencyHistogram>,
}

impl OperatorReport {
    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &OperatorReport) {
        for (name, value) in &other.counters {
            *self.counters.entry(name.clone()).or_default() += value;
        }
        if let Some(theirs) = &other.latency {
            match &mut self.latency {
                Some(ours) => {
                    // Adding fails only if a value exceeds our bounds; both histograms come
                    // from `latency_histogram` (saturating at an hour), so none does.
                    let _ = ours.add(theirs);
                }
                None => self.latency = Some(theirs.clone()),
            }
        }
    }
}

/// A call an operator asked for with [`Output::set_timer`].
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum Timer {
    /// When the instance's event time (its input watermark) reaches this value.
    Event(u64),
    /// When `CLOCK_MONOTONIC` ([`sluice_types::monotonic_ns`]) reaches this value.
    Processing(u64),
}

/// A stream operator: N input ports, M output ports.
pub trait Operator: Send {
    /// Called once before any tuple arrives.
    fn start(&mut self, _ctx: &OperatorContext) -> Result<(), OperatorError> {
        Ok(())
    }

    /// Processes one tuple that arrived on input `port`.
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError>;

    /// Processes consecutive tuples that arrived together on input `port`. The default calls
    /// [`Operator::process`] for each; override it to amortise per-call work.
    fn process_batch(
        &mut self,
        port: usize,
        batch: BatchRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        for tuple in batch.iter() {
            self.process(port, tuple, out)?;
        }
        Ok(())
    }

    /// A punctuation arrived on `port`. The default forwards it on every output port.
    fn punctuation(&mut self, _port: usize, out: &mut Output<'_>) -> Result<(), OperatorError> {
        out.punctuate_all()
    }

    /// The instance's event time advanced to `watermark` (every upstream has passed it), after
    /// the event-time timers it reached were called. The default passes it on downstream; an
    /// operator that makes its own watermarks overrides it to keep upstream's to itself.
    fn watermark(&mut self, watermark: u64, out: &mut Output<'_>) -> Result<(), OperatorError> {
        out.watermark(watermark)
    }

    /// A timer the instance set with [`Output::set_timer`] is due.
    fn timer(&mut self, _timer: Timer, _out: &mut Output<'_>) -> Result<(), OperatorError> {
        Ok(())
    }

    /// The instance's state, to restore later with [`Operator::restore`] (perhaps in another
    /// process, or split over another number of instances). Stateless operators keep the
    /// default, which has none.
    ///
    /// A job suspended to be redeployed calls it instead of `port_ended`, `finish` and `stop`
    /// once every input has drained, and gives it to the instance that takes its place, so
    /// whatever the instance will report from `stop` (its counters, its latency) belongs in
    /// it too. The runtime keeps the instance's pending timers beside it; an instance that
    /// takes the keys of several may get a timer another of them set, so `timer` must
    /// tolerate one with nothing due.
    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Ok(Snapshot::default())
    }

    /// Takes back state made by [`Operator::snapshot`] of this operator, before `start` (which
    /// then opens what it needs knowing that it resumes: a file sink appends where it was). The default refuses any state, as it keeps none.
    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        if snapshot.is_empty() {
            Ok(())
        } else {
            Err(OperatorError::Failed(
                "this operator keeps no state, so it cannot restore any".into(),
            ))
        }
    }

    /// Checkpoint `checkpoint` reached the instance: every tuple sent before its barriers is
    /// in, none sent after. Returns the state to keep in the checkpoint, as
    /// [`Operator::snapshot`] does (the default calls it). It runs on the data path, between
    /// tuples: an operator with a large state returns a cheap copy of it as a
    /// [`CheckpointState::Later`], whose encoding runs on the runtime's writer thread with
    /// the disk's I/O. A sink that publishes its output with checkpoints (two-phase commit)
    /// closes here what it wrote since the last one (its pre-commit), keeps it pending in
    /// the state, and publishes it in [`Operator::checkpoint_complete`].
    fn checkpoint(&mut self, checkpoint: u64) -> Result<CheckpointState, OperatorError> {
        let _ = checkpoint;
        self.snapshot().map(CheckpointState::Now)
    }

    /// Checkpoint `checkpoint` is complete: every instance's part of it is stored, so the job
    /// will never be rolled back past it. A two-phase sink publishes what it closed in
    /// [`Operator::checkpoint`] for it and before (its commit). Called between tuples, at most
    /// once per checkpoint and never for one that failed. A job recovering from a checkpoint
    /// gives the instance that checkpoint's state in [`Operator::restore`] whether or not its
    /// completion was told before the failure: `restore` publishes what the state holds
    /// pending and discards anything written after it.
    fn checkpoint_complete(&mut self, checkpoint: u64) -> Result<(), OperatorError> {
        let _ = checkpoint;
        Ok(())
    }

    /// Every upstream of input `port` has finished.
    fn port_ended(&mut self, _port: usize, _out: &mut Output<'_>) -> Result<(), OperatorError> {
        Ok(())
    }

    /// Every input port has ended: emit any final results now.
    fn finish(&mut self, _out: &mut Output<'_>) -> Result<(), OperatorError> {
        Ok(())
    }

    /// Called once at the end; returns what the instance wants in the job summary.
    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        Ok(OperatorReport::default())
    }
}

/// An operator with no input ports that produces tuples.
pub trait Source: Send {
    /// Called once before the first `produce`.
    fn start(&mut self, _ctx: &OperatorContext) -> Result<(), OperatorError> {
        Ok(())
    }

    /// Emits the next tuples. Emit a bounded number per call (a few hundred at most): the
    /// runtime publishes to other threads, checks for a stop request and runs other work
    /// between calls.
    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError>;

    /// The source is exhausted or the job is stopping: emit any final tuples now.
    fn finish(&mut self, _out: &mut Output<'_>) -> Result<(), OperatorError> {
        Ok(())
    }

    /// Whether the source can be suspended and resumed where it stopped
    /// ([`Source::snapshot`] and [`Source::restore`] keep its position), which redeploying a
    /// running job on another plan needs: a source that cannot would emit its tuples again,
    /// or skip some. The default says it cannot.
    fn resumable(&self) -> bool {
        false
    }

    /// The source's position (and any other state), so that a source made anew and given it
    /// by [`Source::restore`] emits exactly what this one would have emitted next. The
    /// default refuses: see [`Source::resumable`].
    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Err(OperatorError::Failed(
            "this source cannot be suspended: it keeps no position to resume from".into(),
        ))
    }

    /// Checkpoint `checkpoint` begins at this source: its barrier follows, on every output
    /// edge, everything it emitted so far. Returns its position as [`Source::snapshot`] does
    /// (the default calls it); it runs on the data path, so keep it cheap.
    fn checkpoint(&mut self, checkpoint: u64) -> Result<Snapshot, OperatorError> {
        let _ = checkpoint;
        self.snapshot()
    }

    /// Checkpoint `checkpoint` is complete: the job will never rewind this source past the
    /// position it took for it (a source reading from a broker may commit that position back
    /// to it, for monitoring). Called between `produce` calls, never for a failed checkpoint.
    fn checkpoint_complete(&mut self, checkpoint: u64) -> Result<(), OperatorError> {
        let _ = checkpoint;
        Ok(())
    }

    /// Takes back a position made by [`Source::snapshot`], before `start` (which then opens
    /// its input at that position). The default refuses any state.
    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        if snapshot.is_empty() {
            Ok(())
        } else {
            Err(OperatorError::Failed(
                "this source cannot resume from a snapshot".into(),
            ))
        }
    }

    /// Called once at the end; returns what the instance wants in the job summary.
    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        Ok(OperatorReport::default())
    }
}

/// A tuple owned by the emitter, offered to the runtime: it can be read in place (for
/// operators fused downstream) and taken (by a queue, as the last consumer).
pub trait OwnedTuple {
    /// The tuple, borrowed.
    fn tuple(&self) -> TupleRef<'_>;
    /// The `Option<T>` holding the tuple, for a transport to take it from.
    fn slot(&mut self) -> &mut dyn Any;
}

impl<T: Tuple> OwnedTuple for Option<T> {
    #[inline]
    fn tuple(&self) -> TupleRef<'_> {
        match self {
            Some(t) => TupleRef::new(t),
            None => TupleRef::new(&()),
        }
    }

    #[inline]
    fn slot(&mut self) -> &mut dyn Any {
        self
    }
}

/// Tuples owned by the emitter, offered together: readable in place as a batch, or handed out
/// one by one to be moved.
pub trait OwnedBatch {
    /// The tuples, borrowed.
    fn batch(&self) -> BatchRef<'_>;
    /// Hands each tuple in order to `f`, then leaves the batch empty.
    fn drain_each(
        &mut self,
        f: &mut dyn FnMut(&mut dyn OwnedTuple) -> Result<(), OperatorError>,
    ) -> Result<(), OperatorError>;
    /// Drops every tuple.
    fn clear(&mut self);
    /// The `Vec<T>` holding the tuples, for a transport to move them from.
    fn slot(&mut self) -> &mut dyn Any;
}

impl<T: Tuple> OwnedBatch for Vec<T> {
    fn batch(&self) -> BatchRef<'_> {
        BatchRef::from_vec(self)
    }

    fn drain_each(
        &mut self,
        f: &mut dyn FnMut(&mut dyn OwnedTuple) -> Result<(), OperatorError>,
    ) -> Result<(), OperatorError> {
        self.drain(..).try_for_each(|tuple| f(&mut Some(tuple)))
    }

    fn clear(&mut self) {
        Vec::clear(self)
    }

    fn slot(&mut self) -> &mut dyn Any {
        self
    }
}

/// Where an [`Output`] sends what it is given; implemented by the runtime.
pub trait OutputSink {
    /// Delivers a tuple already checked to match the port's type.
    fn emit(&mut self, port: usize, tuple: &mut dyn OwnedTuple) -> Result<(), OperatorError>;
    /// Delivers tuples already checked to match the port's type, leaving `batch` empty. The
    /// default delivers them one by one.
    fn emit_batch(&mut self, port: usize, batch: &mut dyn OwnedBatch) -> Result<(), OperatorError> {
        batch.drain_each(&mut |tuple| self.emit(port, tuple))
    }
    /// Delivers a punctuation on `port`.
    fn punctuate(&mut self, port: usize) -> Result<(), OperatorError>;
    /// Delivers a watermark on every output port.
    fn watermark(&mut self, watermark: u64) -> Result<(), OperatorError>;
    /// Asks for a call of the running instance's [`Operator::timer`] at `timer`.
    fn set_timer(&mut self, timer: Timer);
}

/// The output ports of one operator instance, as the operator sees them.
pub struct Output<'a> {
    ports: &'a [TupleSchema],
    sink: &'a mut dyn OutputSink,
}

impl<'a> Output<'a> {
    /// An output over `ports` (their schemas) delivering to `sink`.
    pub fn new(ports: &'a [TupleSchema], sink: &'a mut dyn OutputSink) -> Self {
        Self { ports, sink }
    }

    /// How many output ports there are.
    pub fn ports(&self) -> usize {
        self.ports.len()
    }

    #[inline]
    fn check<T: Tuple>(&self, port: usize) -> Result<(), OperatorError> {
        let schema = self.ports.get(port).ok_or(OperatorError::NoSuchPort {
            port,
            count: self.ports.len(),
        })?;
        if schema.type_id != std::any::TypeId::of::<T>() {
            return Err(OperatorError::WrongType {
                port,
                expected: schema.type_name,
                actual: std::any::type_name::<T>(),
            });
        }
        Ok(())
    }

    /// Emits `tuple` on output `port`.
    #[inline]
    pub fn emit<T: Tuple>(&mut self, port: usize, tuple: T) -> Result<(), OperatorError> {
        self.check::<T>(port)?;
        self.sink.emit(port, &mut Some(tuple))
    }

    /// Emits every tuple of `batch` on output `port`, in order, leaving `batch` empty (its
    /// capacity is kept for reuse). A downstream operator fused on a forward edge receives the
    /// whole batch in one `process_batch` call and can read it as a slice.
    #[inline]
    pub fn emit_batch<T: Tuple>(
        &mut self,
        port: usize,
        batch: &mut Vec<T>,
    ) -> Result<(), OperatorError> {
        if batch.is_empty() {
            return Ok(());
        }
        self.check::<T>(port)?;
        self.sink.emit_batch(port, batch)
    }

    /// Emits a punctuation on output `port`.
    pub fn punctuate(&mut self, port: usize) -> Result<(), OperatorError> {
        if port >= self.ports.len() {
            return Err(OperatorError::NoSuchPort {
                port,
                count: self.ports.len(),
            });
        }
        self.sink.punctuate(port)
    }

    /// Emits a punctuation on every output port.
    pub fn punctuate_all(&mut self) -> Result<(), OperatorError> {
        (0..self.ports.len()).try_for_each(|port| self.sink.punctuate(port))
    }

    /// Emits a watermark on every output port: no tuple with an event time below `watermark`
    /// will follow from this instance.
    pub fn watermark(&mut self, watermark: u64) -> Result<(), OperatorError> {
        self.sink.watermark(watermark)
    }

    /// Asks for a call of [`Operator::timer`] at `timer` (once, however often it is set).
    pub fn set_timer(&mut self, timer: Timer) {
        self.sink.set_timer(timer)
    }
}

/// Reads the tuple on `port` as `T`, or reports which type the port carries.
pub fn expect_tuple<'t, T: Tuple>(
    port: usize,
    tuple: TupleRef<'t>,
) -> Result<&'t T, OperatorError> {
    tuple.get::<T>().ok_or(OperatorError::WrongType {
        port,
        expected: "the port's declared type",
        actual: std::any::type_name::<T>(),
    })
}
