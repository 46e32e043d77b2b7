//! Checkpoints in the data plane: what an instance hands over when it takes its part of a
//! checkpoint ([`CheckpointPart`]), where it hands it ([`CheckpointSink`], which the control
//! plane implements: a writer thread that stores the part and acknowledges it), and how an
//! instance with several upstream instances aligns their barriers ([`Alignment`]).
//!
//! A checkpoint is Flink's asynchronous barrier snapshot (Carbone et al., 2015), itself a
//! Chandy-Lamport snapshot for a graph whose sources can replay. The control plane asks for
//! checkpoint `n` ([`crate::control::JobControl::trigger_checkpoint`]); each thread sees it at
//! the top of its next round and every running source there takes its position
//! ([`Source::checkpoint`](sluice_graph::Source::checkpoint)) and sends the barrier
//! `Punctuation::Checkpoint { n, from }` on every output edge, in band with its tuples. An
//! instance fed by several upstream instances holds back whatever arrives from one of them
//! after its barrier (tuples, punctuations, its end) in an [`Alignment`], while the others'
//! tuples are processed; once the barrier of every upstream instance still open has arrived it
//! takes its state ([`Operator::checkpoint`](sluice_graph::Operator::checkpoint)), sends its
//! own barrier on every output edge, and processes what it held, in order. An instance that
//! finishes says so once, which is its part of every later checkpoint: a thread (or a PE)
//! whose instances all finished has left and answers nothing.
//!
//! Holding rather than not polling: an input is held by copying what arrives on it, not by
//! leaving it unread. Leaving a receiver unread would stop its sender's thread on a full
//! queue in the middle of a call, and that thread may be the one that must still forward
//! another input's barrier to this instance (two instances of one thread feeding it), which
//! would then never come. Holding costs memory for as long as the alignment lasts; the number
//! of tuples held is reported with the checkpoint, and it is bounded: an instance that would
//! hold more than `--checkpoint-align-limit` tuples (`CheckpointOptions::align_limit`) goes
//! unaligned for that checkpoint (as Flink's aligned-checkpoint timeout does): it takes its
//! state there, sends its barrier on, processes what it held (all of it after the barriers in,
//! so none of it belongs in the state) and goes on as below.
//!
//! Unaligned (`--checkpoint-mode unaligned`, for jobs under backpressure, where a barrier
//! waits behind full queues): the instance takes its state and forwards its barrier at the
//! first barrier, then keeps a copy of every tuple that arrives on an input whose barrier has
//! not (they were sent before the checkpoint, so its state does not hold them) and processes
//! it as usual; its part, handed over once every barrier is in, is its state with those
//! tuples, which a resumed instance processes first (Chandy and Lamport's channel state).
//!
//! Off the data path: an operator with a large state hands over a copy of it
//! ([`CheckpointState::Later`](sluice_graph::CheckpointState::Later): a clone of its map, no
//! encoding), which the sink's thread makes into the snapshot ([`CheckpointPart::into_state`])
//! before encoding and writing it; the data path stalls for the clone only.
//!
//! Each instance must know which upstream instance a tuple came from: a checkpointed job's
//! plan gives every channel a single sender, since a receiver that merges several senders'
//! streams cannot say which of its tuples follow which sender's barrier.

use std::time::{Duration, Instant};

use sluice_graph::{LaterSnapshot, OperatorError};
use sluice_transport::{StreamType, TupleLog};
use sluice_types::{BatchRef, Punctuation, TupleRef};

use crate::state::{InFlightTuples, InstanceState};

/// One instance's part of a checkpoint, handed to the [`CheckpointSink`].
#[derive(Debug)]
pub struct CheckpointPart {
    /// The checkpoint's number.
    pub n: u64,
    /// The instance's operator.
    pub operator: String,
    /// The instance's index among its operator's.
    pub instance: usize,
    /// Its state: what its `checkpoint` returned, its timers and ended ports. When
    /// `state.finished`, the instance finished before checkpoint `n` reached it: that is its
    /// part of `n` and of every checkpoint after.
    pub state: InstanceState,
    /// Its snapshot, when its operator left it to be made off the data path
    /// ([`CheckpointState::Later`]): the sink's thread makes it into `state.snapshot`
    /// ([`CheckpointPart::into_state`]).
    pub later: Option<LaterSnapshot>,
    /// From its first barrier to its last (zero for a source, or an instance of one input).
    pub alignment: Duration,
    /// Tuples it held back while it aligned.
    pub held: u64,
}

impl CheckpointPart {
    /// Its whole state, its snapshot made now if it was left for later.
    pub fn into_state(self) -> Result<InstanceState, OperatorError> {
        let mut state = self.state;
        if let Some(later) = self.later {
            state.snapshot = later.make()?;
        }
        Ok(state)
    }
}

/// Where instances hand their parts of checkpoints. It is called on the data path, so it must
/// only pass the part on (to a writer thread that stores it and acknowledges it).
pub trait CheckpointSink: Send + Sync {
    /// Takes one instance's part of a checkpoint.
    fn part(&self, part: CheckpointPart);
}

/// One item held back from an input past its barrier, in arrival order.
enum Held {
    /// Tuples that arrived on `port` (consecutive ones share one log).
    Tuples {
        port: usize,
        from: u32,
        log: Box<dyn TupleLog>,
    },
    /// A punctuation that arrived on `port`.
    Punctuation {
        port: usize,
        punctuation: Punctuation,
    },
    /// The end of the stream from `from` on `port`.
    End { port: usize, from: u32 },
}

/// What an instance held back and must now process, in order.
pub(crate) enum Release {
    Tuples {
        port: usize,
        log: Box<dyn TupleLog>,
    },
    Punctuation {
        port: usize,
        punctuation: Punctuation,
    },
    End {
        port: usize,
        from: u32,
    },
}

/// An instance aligning the barriers of checkpoint `n` from its upstream instances.
pub(crate) struct Alignment {
    /// The checkpoint.
    pub(crate) n: u64,
    /// Unaligned: the instance took its state and forwarded its barrier at the first barrier
    /// (`taken`), and keeps a copy of what arrives on the inputs whose barrier has not
    /// (`recorded`, by port), which it processes too; nothing is held back.
    unaligned: bool,
    /// Its state, once taken at the first barrier of an unaligned checkpoint.
    pub(crate) taken: Option<(InstanceState, Option<LaterSnapshot>)>,
    /// Copies of the tuples in flight on the inputs not yet past their barrier, by port.
    recorded: Vec<(usize, Box<dyn TupleLog>)>,
    /// When its first barrier arrived.
    began: Instant,
    /// The inputs whose barrier arrived: (port, upstream instance id).
    arrived: Vec<(usize, u32)>,
    /// How many of those have ended since (unaligned only: an aligned checkpoint holds their
    /// end back).
    departed: usize,
    /// What arrived on those inputs since, in order.
    held: Vec<Held>,
    /// Tuples held so far.
    held_tuples: u64,
}

impl Alignment {
    /// The first barrier of checkpoint `n` arrived (`unaligned`: see [`Alignment`]).
    pub(crate) fn new(n: u64, unaligned: bool) -> Self {
        Self {
            n,
            unaligned,
            taken: None,
            recorded: Vec::new(),
            began: Instant::now(),
            arrived: Vec::new(),
            departed: 0,
            held: Vec::new(),
            held_tuples: 0,
        }
    }

    /// The barrier from `from` on `port` arrived.
    pub(crate) fn arrive(&mut self, port: usize, from: u32) {
        self.arrived.push((port, from));
    }

    /// How many inputs' barriers arrived.
    pub(crate) fn arrived(&self) -> usize {
        self.arrived.len()
    }

    /// How many inputs whose barrier arrived are still open: those the instance compares with
    /// its open inputs to know whether every barrier is in. One that ended after its barrier
    /// no longer counts, or an instance with two inputs, one past its barrier and ended,
    /// would count itself aligned while the other's barrier is still on its way (and its
    /// part would miss the tuples that other input still had in flight).
    pub(crate) fn arrived_open(&self) -> usize {
        self.arrived.len() - self.departed
    }

    /// The input from `from` on `port` ended.
    pub(crate) fn depart(&mut self, port: usize, from: u32) {
        if self.arrived.contains(&(port, from)) {
            self.departed += 1;
        }
    }

    /// Whether what comes from `from` on `port` is held back.
    #[inline]
    pub(crate) fn holds(&self, port: usize, from: u32) -> bool {
        !self.unaligned && self.arrived.contains(&(port, from))
    }

    /// Whether the state was taken early and the tuples from `from` on `port`, still before
    /// their barrier, are kept with it.
    #[inline]
    pub(crate) fn records(&self, port: usize, from: u32) -> bool {
        self.taken.is_some() && !self.arrived.contains(&(port, from))
    }

    /// Whether this alignment takes the state at its first barrier.
    pub(crate) fn is_unaligned(&self) -> bool {
        self.unaligned
    }

    /// Keeps a copy of `batch`, in flight to `port`.
    pub(crate) fn record_batch(&mut self, port: usize, stream: &StreamType, batch: BatchRef<'_>) {
        self.log_of(port, stream).push_batch(batch);
        self.held_tuples += batch.len() as u64;
    }

    /// Keeps a copy of `tuple`, in flight to `port`.
    pub(crate) fn record_tuple(&mut self, port: usize, stream: &StreamType, tuple: TupleRef<'_>) {
        self.log_of(port, stream).push(tuple);
        self.held_tuples += 1;
    }

    fn log_of(&mut self, port: usize, stream: &StreamType) -> &mut dyn TupleLog {
        let at = match self.recorded.iter().position(|(p, _)| *p == port) {
            Some(at) => at,
            None => {
                self.recorded.push((port, stream.tuple_log()));
                self.recorded.len() - 1
            }
        };
        self.recorded[at].1.as_mut()
    }

    /// The tuples recorded, encoded per port, for the state of an unaligned checkpoint.
    pub(crate) fn in_flight(&self) -> Result<Vec<InFlightTuples>, String> {
        self.recorded
            .iter()
            .map(|(port, log)| {
                let mut tuples = Vec::new();
                log.encode(&mut tuples)?;
                Ok(InFlightTuples {
                    port: *port,
                    tuples,
                })
            })
            .collect()
    }

    /// Holds a copy of `tuple` from `from` on `port`, whose stream is `stream`.
    pub(crate) fn hold_tuple(
        &mut self,
        port: usize,
        from: u32,
        stream: &StreamType,
        tuple: TupleRef<'_>,
    ) {
        self.hold_with(port, from, stream, |log| log.push(tuple));
        self.held_tuples += 1;
    }

    /// Holds copies of the tuples of `batch` from `from` on `port`.
    pub(crate) fn hold_batch(
        &mut self,
        port: usize,
        from: u32,
        stream: &StreamType,
        batch: BatchRef<'_>,
    ) {
        self.hold_with(port, from, stream, |log| log.push_batch(batch));
        self.held_tuples += batch.len() as u64;
    }

    /// Holds a punctuation that arrived on `port`.
    pub(crate) fn hold_punctuation(&mut self, port: usize, punctuation: Punctuation) {
        self.held.push(Held::Punctuation { port, punctuation });
    }

    /// Holds the end of the stream from `from` on `port`.
    pub(crate) fn hold_end(&mut self, port: usize, from: u32) {
        self.held.push(Held::End { port, from });
    }

    /// Tuples held back so far.
    pub(crate) fn held_tuples(&self) -> u64 {
        self.held_tuples
    }

    /// Goes unaligned midway (the instance held too much): nothing is held back from now on,
    /// and what was held is handed back to be processed, in order; the caller takes the
    /// state and sends the barrier on ([`Alignment::taken`]) before it processes any of it.
    pub(crate) fn unalign(&mut self) -> Vec<Release> {
        self.unaligned = true;
        std::mem::take(&mut self.held)
            .into_iter()
            .map(Held::release)
            .collect()
    }

    /// Puts tuples from `from` on `port` in the last log when it is theirs, else in a new one.
    fn hold_with(
        &mut self,
        port: usize,
        from: u32,
        stream: &StreamType,
        fill: impl FnOnce(&mut dyn TupleLog),
    ) {
        match self.held.last_mut() {
            Some(Held::Tuples {
                port: p,
                from: f,
                log,
            }) if *p == port && *f == from => fill(log.as_mut()),
            _ => {
                let mut log = stream.tuple_log();
                fill(log.as_mut());
                self.held.push(Held::Tuples { port, from, log });
            }
        }
    }

    /// The alignment is over: how long it took, the tuples held, and what was held, in order.
    pub(crate) fn finish(self) -> (Duration, u64, Vec<Release>) {
        let released = self.held.into_iter().map(Held::release).collect();
        (self.began.elapsed(), self.held_tuples, released)
    }
}

impl Held {
    /// What was held, to be processed.
    fn release(self) -> Release {
        match self {
            Held::Tuples { port, log, .. } => Release::Tuples { port, log },
            Held::Punctuation { port, punctuation } => Release::Punctuation { port, punctuation },
            Held::End { port, from } => Release::End { port, from },
        }
    }
}
