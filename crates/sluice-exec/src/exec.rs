//! One thread's executor: its fused instances, the routes between them, its receivers, and
//! the work loop.
//!
//! Instances live in `RefCell`s indexed by their position in the thread. Emitting calls the
//! downstream instance's hook directly while the upstream one is still borrowed; the plan's
//! instances form a DAG (the graph refuses cycles), so no instance is ever borrowed twice.

use std::cell::RefCell;
use std::ops::ControlFlow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use sluice_graph::{
    latency_histogram, CheckpointState, KeyFn, LatencyHistogram, LaterSnapshot, Operator,
    OperatorContext, OperatorError, OperatorReport, Output, OutputSink, OwnedBatch, OwnedTuple,
    Produced, Snapshot, Source, Timer,
};
use sluice_sync::IdleStrategy;
use sluice_transport::{Delivery, ErasedReceiver, ErasedSender, RecvError, SendError, StreamType};
use sluice_types::{monotonic_ns, pick_instance, BatchRef, Punctuation, TupleRef, TupleSchema};

use crate::checkpoint::{Alignment, CheckpointPart, Release};
use crate::clock::{EventClock, Timers};
use crate::control::JobControl;
use crate::metrics::ThreadPublisher;
use crate::report::per_destination;
use crate::state::{Counted, InstanceState};
use crate::watch::Progress;
use crate::{InstanceReport, RunError, LOST_TUPLES_COUNTER};

/// What a node is.
pub(crate) enum Body {
    Source(Box<dyn Source>),
    Operator(Box<dyn Operator>),
}

/// Where one physical edge leads.
pub(crate) enum Target {
    /// An instance in this thread: a direct call.
    Fused { node: usize, port: usize },
    /// An instance in another thread: a transport.
    Remote(Box<dyn ErasedSender>),
}

/// How a fan picks among its targets.
pub(crate) enum Picker {
    Forward,
    RoundRobin { next: usize },
    Key(KeyFn),
    Broadcast,
}

/// The physical edges of one logical edge leaving one instance's output port.
pub(crate) struct Fan {
    pub(crate) picker: Picker,
    /// One per downstream instance reached, in instance order.
    pub(crate) targets: Vec<Target>,
    /// The plan's id (`PhysicalPlan::instances` index) of each target's instance.
    to: Vec<usize>,
    /// Tuples delivered to each target so far: the measured traffic of each physical edge.
    sent: Vec<u64>,
}

impl Fan {
    /// A fan picking among `targets`, each with its instance's id in the plan.
    pub(crate) fn new(picker: Picker, targets: Vec<(usize, Target)>) -> Self {
        let (to, targets): (Vec<usize>, Vec<Target>) = targets.into_iter().unzip();
        Self {
            picker,
            sent: vec![0; targets.len()],
            targets,
            to,
        }
    }

    /// Each target's instance id with the tuples delivered to it so far.
    pub(crate) fn deliveries(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.to.iter().copied().zip(self.sent.iter().copied())
    }

    /// The single target for `tuple`, or `None` when every target gets it. A fan of one
    /// target never reads the tuple (no key is hashed).
    #[inline]
    fn pick(&mut self, tuple: TupleRef<'_>) -> Option<usize> {
        let n = self.targets.len();
        if n == 1 {
            return Some(0);
        }
        match &mut self.picker {
            Picker::Forward => Some(0),
            Picker::RoundRobin { next } => {
                let at = *next % n;
                *next = at + 1;
                Some(at)
            }
            Picker::Key(key) => Some(pick_instance(key.hash(tuple), n)),
            Picker::Broadcast => None,
        }
    }
}

/// One operator instance in a thread.
pub(crate) struct Node {
    /// The instance's id in the plan, which its watermarks carry.
    pub(crate) id: u32,
    pub(crate) operator: String,
    pub(crate) ctx: OperatorContext,
    pub(crate) body: Body,
    pub(crate) outputs: Vec<TupleSchema>,
    /// The stream type of each input port, to hold its tuples while aligning a checkpoint.
    pub(crate) inputs: Vec<StreamType>,
    /// Per output port, one fan per logical edge leaving it.
    pub(crate) routes: Vec<Vec<Fan>>,
    /// Per input port, how many upstream edges have not ended yet.
    pub(crate) open_inputs: Vec<usize>,
    /// Input ports not yet ended.
    pub(crate) open_ports: usize,
    /// Input ports whose `port_ended` it was given (in this run or before it was resumed).
    pub(crate) ended_ports: Vec<usize>,
    /// It will never be called again: it finished, was suspended, or resumed finished.
    pub(crate) finished: bool,
    /// The state it resumes from, until its thread restores it.
    pub(crate) resume: Option<InstanceState>,
    /// It resumed finished: it takes no call in this run and reports nothing of its own.
    pub(crate) resumed_finished: bool,
    /// Its state, once it was suspended.
    pub(crate) suspended: Option<InstanceState>,
    pub(crate) tuples_in: u64,
    pub(crate) tuples_out: u64,
    /// Its event time: the watermarks of its upstream instances.
    pub(crate) clock: EventClock,
    /// The timers it has set.
    pub(crate) timers: Timers,
    /// How long latency markers took from their source to this instance.
    pub(crate) arrival_latency: Option<LatencyHistogram>,
    /// Its CPU nanoseconds as the CPU sampler estimates them ([`CpuSampler`]).
    pub(crate) sampled_ns: u64,
    /// Wall nanoseconds its hooks took in the timed round under way, less what they spent in
    /// the instances they called (fused downstream) and waiting on full queues.
    pub(crate) round_ns: u64,
    /// The same since the thread last published its metrics (when they are on).
    pub(crate) latency_window: Option<LatencyHistogram>,
    /// For a source: tuples still to emit before the next latency marker.
    pub(crate) until_marker: u64,
    /// The checkpoint whose barriers it is aligning, with what it holds back meanwhile.
    pub(crate) aligning: Option<Alignment>,
    /// The last checkpoint it took its part of, or acknowledged as finished.
    pub(crate) checkpointed: u64,
    /// The last complete checkpoint it was told of.
    pub(crate) told_complete: u64,
    /// Tuples in flight to it when the unaligned checkpoint it resumes from was taken, by
    /// port: processed before anything else.
    pub(crate) replay: Vec<(usize, Box<dyn sluice_transport::TupleLog>)>,
}

/// A receiver feeding an input port of an instance in this thread.
pub(crate) struct Inbound {
    pub(crate) receiver: Box<dyn ErasedReceiver>,
    pub(crate) node: usize,
    pub(crate) port: usize,
    pub(crate) edge: String,
    /// The plan id of its upstream instance, when it has one sender (always, in a
    /// checkpointed job): what it delivers after that instance's barrier is held back.
    pub(crate) from: Option<u32>,
    /// Its transport's name, for the live metrics.
    pub(crate) transport: String,
    /// Senders that have not ended their stream yet.
    pub(crate) open: usize,
    /// Tuples received from it.
    pub(crate) tuples: u64,
}

/// Everything one thread runs.
pub(crate) struct ThreadExec {
    pub(crate) name: String,
    pub(crate) core: Option<usize>,
    pub(crate) nodes: Vec<RefCell<Node>>,
    pub(crate) inbound: Vec<Inbound>,
}

/// What every call in a thread needs from the job.
pub(crate) struct Env<'a> {
    pub(crate) control: &'a JobControl,
    pub(crate) idle: IdleStrategy,
    pub(crate) poll_batch: usize,
    /// A source sends a latency marker after this many tuples (0: never).
    pub(crate) latency_every: u64,
    /// The thread's progress, which the job's watch reads ([`crate::watch`]).
    pub(crate) progress: &'a Progress,
    /// Where the thread publishes its live metrics, unless they are off.
    pub(crate) metrics: Option<&'a ThreadPublisher>,
    /// Times a sample of the rounds when the job is profiled (`RunOptions::profile_cpu`).
    pub(crate) cpu: Option<CpuSampler>,
    /// Every source must be able to resume ([`crate::RunOptions::suspendable`]).
    pub(crate) suspendable: bool,
    /// The job takes checkpoints: instances align barriers and hand their parts to the
    /// control's [`crate::checkpoint::CheckpointSink`].
    pub(crate) checkpointed: bool,
    /// Its checkpoints are unaligned ([`crate::checkpoint`]).
    pub(crate) unaligned: bool,
    /// Tuples an instance may hold back while it aligns before its checkpoint goes unaligned
    /// ([`crate::CheckpointOptions::align_limit`]).
    pub(crate) align_limit: u64,
}

/// One round in this many, on average, is timed when profiling, among short rounds.
const TIMED_ROUND_ONE_IN: u64 = 16;
/// A round that follows one this long (in nanoseconds) is always timed: timing costs well
/// under a microsecond a round, nothing beside rounds this long, and a thread whose rounds
/// are few and heavy (a compressor taking 16 KiB packets) would otherwise have none timed.
const LONG_ROUND_NS: u64 = 50_000;

/// Estimates each instance's CPU time, cheaply: the work loop times one round in
/// [`TIMED_ROUND_ONE_IN`] (chosen pseudo-randomly, so no periodic pattern of the work aliases
/// with it), and every round after a long one ([`LONG_ROUND_NS`]). In a timed round every hook call is timed on the monotonic clock with what it
/// spent in nested calls (the instances fused downstream, which the router calls from inside
/// it) and waiting on full queues subtracted, so each instance is charged its own time; at
/// the round's end the thread's CPU clock says how much of that wall time the thread really
/// ran (not preempted, not parked), and each instance's share is scaled by it. Each timed
/// round's charge is weighted by the inverse of the chance it had to be timed (1, or
/// [`TIMED_ROUND_ONE_IN`]), which makes the sum an unbiased estimate of the whole run's. Untimed rounds
/// cost one flag test per call; a timed one two reads of the thread's CPU clock (a system
/// call each) and a pass over the thread's instances.
pub(crate) struct CpuSampler {
    timing: std::cell::Cell<bool>,
    /// Nanoseconds the calls nested in the current one took (or it waited on a full queue).
    nested_ns: std::cell::Cell<u64>,
    /// When the round under way began, on the monotonic clock.
    round_began_ns: std::cell::Cell<u64>,
    /// The inverse of the chance the round under way had to be timed.
    weight: std::cell::Cell<u64>,
    /// The thread's CPU clock when the timed round under way began.
    round_cpu_ns: std::cell::Cell<u64>,
    /// Wall nanoseconds charged to instances in the timed round under way.
    round_wall_ns: std::cell::Cell<u64>,
    /// xorshift64 state picking the timed rounds.
    state: std::cell::Cell<u64>,
}

impl CpuSampler {
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            timing: std::cell::Cell::new(false),
            nested_ns: std::cell::Cell::new(0),
            round_began_ns: std::cell::Cell::new(0),
            weight: std::cell::Cell::new(1),
            round_cpu_ns: std::cell::Cell::new(0),
            round_wall_ns: std::cell::Cell::new(0),
            state: std::cell::Cell::new(seed | 1),
        }
    }

    /// A round of the work loop begins: decides whether to time it.
    fn begin_round(&self) {
        let mut x = self.state.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state.set(x);
        let now = monotonic_ns();
        let long = now.saturating_sub(self.round_began_ns.replace(now)) >= LONG_ROUND_NS;
        let timed = long || x.is_multiple_of(TIMED_ROUND_ONE_IN);
        self.timing.set(timed);
        if timed {
            self.weight.set(if long { 1 } else { TIMED_ROUND_ONE_IN });
            self.round_cpu_ns.set(thread_cpu_ns());
            self.round_wall_ns.set(0);
        }
    }

    /// The round's work is done (before the thread idles): charges each instance its share
    /// of the CPU the thread used in a timed round.
    fn end_round(&self, nodes: &[RefCell<Node>]) {
        if !self.timing.replace(false) {
            return;
        }
        let wall = self.round_wall_ns.get();
        let used = thread_cpu_ns().saturating_sub(self.round_cpu_ns.get());
        let ran = if wall == 0 {
            0.0
        } else {
            (used as f64 / wall as f64).min(1.0) * self.weight.get() as f64
        };
        for cell in nodes {
            if let Ok(mut node) = cell.try_borrow_mut() {
                node.sampled_ns += (node.round_ns as f64 * ran) as u64;
                node.round_ns = 0;
            }
        }
    }

    /// In a timed round, `took` nanoseconds of the current call are not its own work.
    fn not_own(&self, took: u64) {
        if self.timing.get() {
            self.nested_ns.set(self.nested_ns.get() + took);
        }
    }
}

/// This thread's CPU time, in nanoseconds (0 if the clock cannot be read).
fn thread_cpu_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).map_or(0, |t| {
        (t.tv_sec() as u64).saturating_mul(1_000_000_000) + t.tv_nsec() as u64
    })
}

/// The `OutputSink` of the instance currently running: routes its emissions.
struct Router<'a> {
    nodes: &'a [RefCell<Node>],
    /// The running instance's id, for the watermarks it emits.
    from: u32,
    routes: &'a mut [Vec<Fan>],
    tuples_out: &'a mut u64,
    timers: &'a mut Timers,
    env: &'a Env<'a>,
}

impl Router<'_> {
    #[inline]
    fn route(&mut self, port: usize, tuple: &mut dyn OwnedTuple) -> Result<(), OperatorError> {
        let Some(fans) = self.routes.get_mut(port) else {
            return Ok(());
        };
        let last_fan = fans.len().saturating_sub(1);
        for (k, fan) in fans.iter_mut().enumerate() {
            // Only the very last delivery of a tuple may move it into a queue.
            let movable = k == last_fan;
            match fan.pick(tuple.tuple()) {
                Some(j) => {
                    fan.sent[j] += 1;
                    let target = &mut fan.targets[j];
                    deliver(self.nodes, self.from, target, tuple, movable, self.env)?
                }
                None => {
                    let last = fan.targets.len().saturating_sub(1);
                    let each = fan.targets.iter_mut().zip(&mut fan.sent);
                    for (j, (target, sent)) in each.enumerate() {
                        *sent += 1;
                        let movable = movable && j == last;
                        deliver(self.nodes, self.from, target, tuple, movable, self.env)?;
                    }
                }
            }
        }
        Ok(())
    }
}

impl OutputSink for Router<'_> {
    #[inline]
    fn emit(&mut self, port: usize, tuple: &mut dyn OwnedTuple) -> Result<(), OperatorError> {
        *self.tuples_out += 1;
        self.route(port, tuple)
    }

    fn emit_batch(&mut self, port: usize, batch: &mut dyn OwnedBatch) -> Result<(), OperatorError> {
        let items = batch.batch();
        if items.is_empty() {
            return Ok(());
        }
        // An operator that paces its output (sleeping between batches) is making progress.
        self.env.progress.beat();
        let count = items.len() as u64;
        *self.tuples_out += count;
        // The common cases: one edge to one instance in this thread gets the whole batch in
        // one call; one edge to one instance in another thread takes it in one offer.
        if let Some([fan]) = self.routes.get_mut(port).map(Vec::as_mut_slice) {
            match fan.targets.as_mut_slice() {
                [Target::Fused { node, port }] => {
                    fan.sent[0] += count;
                    let (node, port) = (*node, *port);
                    if holding(self.nodes, node, port, self.from, self.env) {
                        hold(self.nodes, node, self.env, |a, s| {
                            a.hold_batch(port, self.from, &s[port], items)
                        })?;
                    } else {
                        record(self.nodes, node, port, self.from, self.env, |a, s| {
                            a.record_batch(port, s, items)
                        });
                        process_batch(self.nodes, node, port, items, self.env)?;
                    }
                    batch.clear();
                    return Ok(());
                }
                [Target::Remote(sender)] => {
                    fan.sent[0] += count;
                    return send(self.env, sender, |s| s.offer_batch(batch.slot()));
                }
                _ => {}
            }
        }
        batch.drain_each(&mut |tuple| self.route(port, tuple))
    }

    fn punctuate(&mut self, port: usize) -> Result<(), OperatorError> {
        let Some(fans) = self.routes.get_mut(port) else {
            return Ok(());
        };
        for target in fans.iter_mut().flat_map(|f| f.targets.iter_mut()) {
            match target {
                Target::Fused { node, port } => punctuation_arrived(
                    self.nodes,
                    *node,
                    *port,
                    self.from,
                    Punctuation::WindowMarker,
                    self.env,
                )?,
                Target::Remote(sender) => send(self.env, sender, |s| {
                    s.offer_punctuation(Punctuation::WindowMarker)
                })?,
            }
        }
        Ok(())
    }

    fn watermark(&mut self, time: u64) -> Result<(), OperatorError> {
        let from = self.from;
        for target in self
            .routes
            .iter_mut()
            .flatten()
            .flat_map(|f| f.targets.iter_mut())
        {
            match target {
                Target::Fused { node, port } => punctuation_arrived(
                    self.nodes,
                    *node,
                    *port,
                    from,
                    Punctuation::Watermark { time, from },
                    self.env,
                )?,
                Target::Remote(sender) => send(self.env, sender, |s| {
                    s.offer_punctuation(Punctuation::Watermark { time, from })
                })?,
            }
        }
        Ok(())
    }

    fn set_timer(&mut self, timer: Timer) {
        self.timers.set(timer);
    }
}

#[inline]
fn deliver(
    nodes: &[RefCell<Node>],
    from: u32,
    target: &mut Target,
    tuple: &mut dyn OwnedTuple,
    movable: bool,
    env: &Env<'_>,
) -> Result<(), OperatorError> {
    match target {
        Target::Fused { node, port } => {
            let (node, port, tuple) = (*node, *port, tuple.tuple());
            if holding(nodes, node, port, from, env) {
                return hold(nodes, node, env, |a, s| {
                    a.hold_tuple(port, from, &s[port], tuple)
                });
            }
            record(nodes, node, port, from, env, |a, s| {
                a.record_tuple(port, s, tuple)
            });
            with_node(nodes, node, env, 1, |body, out| match body {
                Body::Operator(op) => op.process(port, tuple, out),
                Body::Source(_) => Ok(()),
            })
        }
        Target::Remote(sender) if movable => send(env, sender, |s| s.offer_tuple(tuple.slot())),
        Target::Remote(sender) => send(env, sender, |s| s.offer_copy(tuple.tuple())),
    }
}

/// Offers to `sender` until it accepts, idling while it is full (backpressure; `park` sleeps
/// on the transport's doorbell until the receiver frees room); gives up if the job aborts or
/// the receiver is gone.
#[inline]
fn send(
    env: &Env<'_>,
    sender: &mut Box<dyn ErasedSender>,
    mut offer: impl FnMut(&mut dyn ErasedSender) -> Result<(), SendError>,
) -> Result<(), OperatorError> {
    let mut idle = env.idle.waiter();
    // When the first refusal came, if the live metrics or the CPU sampler time the wait.
    let mut blocked_since = None;
    loop {
        match offer(sender.as_mut()) {
            Ok(()) => {
                if let Some(began) = blocked_since {
                    let now = monotonic_ns();
                    if let Some(metrics) = env.metrics {
                        metrics.blocked(began, now);
                    }
                    if let Some(cpu) = &env.cpu {
                        cpu.not_own(now.saturating_sub(began));
                    }
                }
                return Ok(());
            }
            Err(SendError::Full) if !env.control.aborting() => {
                // Backpressure is no stall of this thread's.
                env.progress.beat();
                if env.metrics.is_some() || env.cpu.is_some() {
                    let now = monotonic_ns();
                    let began = *blocked_since.get_or_insert(now);
                    if let Some(metrics) = env.metrics {
                        metrics.blocking(began, now);
                    }
                }
                idle.wait_or_park(|timeout| sender.park(timeout))
            }
            // Once the job aborts, a receiver gone is the echo of its cause.
            Err(SendError::Full | SendError::Closed) if env.control.aborting() => {
                return Err(OperatorError::Aborted)
            }
            Err(SendError::Full) => return Err(OperatorError::Aborted),
            Err(SendError::Closed) => {
                return Err(OperatorError::Failed(crate::error::DOWNSTREAM_GONE.into()))
            }
            Err(other) => return Err(OperatorError::Failed(other.to_string())),
        }
    }
}

/// Runs `f` on node `index` with an `Output` routing its emissions. An error or panic in `f`
/// is recorded against the instance and turned into `Aborted` for the callers upstream.
fn with_node<R>(
    nodes: &[RefCell<Node>],
    index: usize,
    env: &Env<'_>,
    tuples_in: u64,
    f: impl FnOnce(&mut Body, &mut Output<'_>) -> Result<R, OperatorError>,
) -> Result<R, OperatorError> {
    let Ok(mut guard) = nodes[index].try_borrow_mut() else {
        return Err(OperatorError::Failed(
            "an instance was re-entered; the fused graph has a cycle".into(),
        ));
    };
    let node = &mut *guard;
    node.tuples_in += tuples_in;
    let mut router = Router {
        nodes,
        from: node.id,
        routes: &mut node.routes,
        tuples_out: &mut node.tuples_out,
        timers: &mut node.timers,
        env,
    };
    let mut out = Output::new(&node.outputs, &mut router);
    let body = &mut node.body;
    let cpu = env.cpu.as_ref().filter(|c| c.timing.get());
    let started = cpu.map(|c| (monotonic_ns(), c.nested_ns.replace(0)));
    let result = catch_unwind(AssertUnwindSafe(|| f(body, &mut out)));
    if let (Some(c), Some((began, outer_nested))) = (cpu, started) {
        let took = monotonic_ns().saturating_sub(began);
        let own = took.saturating_sub(c.nested_ns.get());
        node.round_ns += own;
        c.round_wall_ns.set(c.round_wall_ns.get() + own);
        c.nested_ns.set(outer_nested + took);
    }
    match result {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => {
            env.control.fail(node.ctx.name_of_instance(), error);
            Err(OperatorError::Aborted)
        }
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            env.control.fail(
                node.ctx.name_of_instance(),
                OperatorError::Panicked(message),
            );
            Err(OperatorError::Aborted)
        }
    }
}

fn with_operator(
    nodes: &[RefCell<Node>],
    index: usize,
    env: &Env<'_>,
    f: impl FnOnce(&mut dyn Operator, &mut Output<'_>) -> Result<(), OperatorError>,
) -> Result<(), OperatorError> {
    with_node(nodes, index, env, 0, |body, out| match body {
        Body::Operator(op) => f(op.as_mut(), out),
        Body::Source(_) => Ok(()),
    })
}

/// One upstream edge of `port` on node `index` has ended, the one from upstream instance
/// `from` when known. Once the job is suspending, an end is a suspension: the instance gets
/// no `port_ended` and, when every input has ended, is suspended rather than finished.
fn end_input(
    nodes: &[RefCell<Node>],
    index: usize,
    port: usize,
    from: Option<u32>,
    env: &Env<'_>,
) -> Result<(), OperatorError> {
    let suspending = env.control.suspending();
    let (port_done, all_done) = {
        let Ok(mut node) = nodes[index].try_borrow_mut() else {
            return Err(OperatorError::Failed("an instance was re-entered".into()));
        };
        // The ends its upstreams send when they resume finished (so is it).
        if node.finished {
            return Ok(());
        }
        // An unaligned checkpoint does not hold an input back past its barrier, so its end can
        // come before the other inputs' barriers: it leaves the inputs the alignment counts.
        if let (Some(from), Some(alignment)) = (from, node.aligning.as_mut()) {
            alignment.depart(port, from);
        }
        let open = &mut node.open_inputs[port];
        *open = open.saturating_sub(1);
        let port_done = *open == 0;
        if port_done {
            node.open_ports = node.open_ports.saturating_sub(1);
        }
        let all_done = port_done && node.open_ports == 0;
        // A port ended before the instance resumed is not ended again.
        let tell = port_done && !suspending && !node.ended_ports.contains(&port);
        if tell {
            node.ended_ports.push(port);
        }
        (tell, all_done)
    };
    if port_done {
        with_operator(nodes, index, env, |op, out| op.port_ended(port, out))?;
    }
    // An input that ended before its barrier no longer holds up the checkpoint.
    if env.checkpointed && aligned(&nodes[index].borrow()) {
        take_part(nodes, index, env)?;
    }
    match (all_done, suspending) {
        (true, false) => finish_node(nodes, index, env),
        (true, true) => suspend_node(nodes, index, env),
        (false, _) => Ok(()),
    }
}

/// Calls `finish` on node `index`, then closes it ([`close_node`]).
fn finish_node(nodes: &[RefCell<Node>], index: usize, env: &Env<'_>) -> Result<(), OperatorError> {
    with_node(nodes, index, env, 0, |body, out| match body {
        Body::Source(source) => source.finish(out),
        Body::Operator(op) => op.finish(out),
    })?;
    close_node(nodes, index, env, false)
}

/// Takes node `index`'s snapshot (every tuple it was sent has been processed), keeps it for
/// the report, and closes it as suspended ([`close_node`]).
fn suspend_node(nodes: &[RefCell<Node>], index: usize, env: &Env<'_>) -> Result<(), OperatorError> {
    let snapshot = with_node(nodes, index, env, 0, |body, _| match body {
        Body::Source(source) => source.snapshot(),
        Body::Operator(op) => op.snapshot(),
    })?;
    {
        let Ok(mut node) = nodes[index].try_borrow_mut() else {
            return Err(OperatorError::Failed("an instance was re-entered".into()));
        };
        node.suspended = Some(InstanceState {
            snapshot,
            finished: false,
            ended_ports: node.ended_ports.clone(),
            timers: node.timers.pending(),
            in_flight: Vec::new(),
            counted: Counted::default(),
        });
    }
    close_node(nodes, index, env, true)
}

/// Marks node `index` finished and ends every stream it feeds. A finished node first passes
/// the end of event time downstream (so every window and event-time timer downstream fires,
/// and a drain loses nothing); a suspended one passes nothing on but its suspension, which
/// precedes its end on every edge to another thread so that a receiver in another process
/// knows that end for a suspension before its launcher says so.
fn close_node(
    nodes: &[RefCell<Node>],
    index: usize,
    env: &Env<'_>,
    suspended: bool,
) -> Result<(), OperatorError> {
    if !suspended {
        with_node(nodes, index, env, 0, |_, out| out.watermark(u64::MAX))?;
    }
    let Ok(mut node) = nodes[index].try_borrow_mut() else {
        return Err(OperatorError::Failed("an instance was re-entered".into()));
    };
    node.finished = true;
    if !suspended {
        announce_finished(&node, env);
    }
    let from = node.id;
    for target in node
        .routes
        .iter_mut()
        .flatten()
        .flat_map(|f| f.targets.iter_mut())
    {
        match target {
            Target::Fused { node, port } => {
                let (node, port) = (*node, *port);
                if holding(nodes, node, port, from, env) {
                    hold(nodes, node, env, |a, _| a.hold_end(port, from))?;
                } else {
                    end_input(nodes, node, port, Some(from), env)?;
                }
            }
            Target::Remote(sender) => {
                if suspended {
                    send(env, sender, |s| s.offer_punctuation(Punctuation::Suspend))?;
                }
                send(env, sender, |s| s.offer_end())?;
                sender.flush();
            }
        }
    }
    Ok(())
}

impl Node {
    /// The tuples it took in and sent out so far.
    fn counted(&self) -> Counted {
        Counted {
            tuples_in: self.tuples_in,
            tuples_out: self.tuples_out,
        }
    }

    /// Each of its edges' downstream instance id with the tuples delivered on it so far, in
    /// the order of its ports and fans (an instance may appear more than once).
    pub(crate) fn deliveries(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.routes.iter().flatten().flat_map(Fan::deliveries)
    }
}

/// An instance's name in messages: `sum[1]`, or `sum` when it has one instance.
pub(crate) trait InstanceName {
    fn name_of_instance(&self) -> String;
}

impl InstanceName for OperatorContext {
    fn name_of_instance(&self) -> String {
        self.instance_name()
    }
}

impl ThreadExec {
    /// Runs the thread: start hooks, wait for every thread to be ready, the work loop, then
    /// the stop hooks. Returns the instances' reports (empty if the job aborted).
    pub(crate) fn run(self, env: &Env<'_>, ready: &std::sync::Barrier) -> Vec<InstanceReport> {
        env.progress.record_thread();
        if let Some(core) = self.core {
            core_affinity::set_for_current(core_affinity::CoreId { id: core });
        }
        let mut running = self.start(env);
        ready.wait();
        wait_for_go(env);
        running.begin(env);
        let mut idle = env.idle.waiter();
        while let RoundDone::Worked(work) = running.round(env) {
            idle.after_or_park(work, |timeout| running.park(timeout));
        }
        running.reports(env)
    }

    /// Gives every instance the state it resumes from and calls its start hook (an error is
    /// the job's: it aborts); what runs the work loop from then on.
    pub(crate) fn start(self, env: &Env<'_>) -> Running {
        let ThreadExec { nodes, inbound, .. } = self;
        for index in 0..nodes.len() {
            let ctx = nodes[index].borrow().ctx.clone();
            let _ = resume(&nodes, index, env).and_then(|()| {
                if nodes[index].borrow().resumed_finished {
                    return Ok(());
                }
                with_node(&nodes, index, env, 0, |body, _| match body {
                    Body::Source(s) => s.start(&ctx),
                    Body::Operator(o) => o.start(&ctx),
                })
            });
        }
        let sources = (0..nodes.len())
            .filter(|&i| matches!(nodes[i].borrow().body, Body::Source(_)))
            .collect();
        Running {
            nodes,
            inbound,
            sources,
            park_next: 0,
            rounds: CheckpointRounds::default(),
        }
    }
}

/// Waits until the job may go (every PE started) or aborts.
pub(crate) fn wait_for_go(env: &Env<'_>) {
    while !env.control.may_go() && !env.control.aborting() {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// How a round of a thread's work loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RoundDone {
    /// It did this many units of work (0: none); the loop goes on.
    Worked(usize),
    /// Every instance has finished.
    Finished,
    /// The job aborts.
    Aborted,
}

/// One thread's instances once started: the work loop's state, one round at a time.
pub(crate) struct Running {
    nodes: Vec<RefCell<Node>>,
    inbound: Vec<Inbound>,
    /// The nodes that are sources.
    sources: Vec<usize>,
    /// The receiver a `park` wait sleeps on next, when the thread has several.
    park_next: usize,
    rounds: CheckpointRounds,
}

impl Running {
    /// After the go, before the first round: the tuples an unaligned checkpoint kept in flight
    /// go first, then the instances that resumed finished end their streams at once, as they
    /// did before. An error aborts the job, which the next round sees.
    pub(crate) fn begin(&mut self, env: &Env<'_>) {
        let nodes = &self.nodes;
        for index in 0..nodes.len() {
            let replay = std::mem::take(&mut nodes[index].borrow_mut().replay);
            for (port, log) in replay {
                if process_batch(nodes, index, port, log.batch(), env).is_err() {
                    break;
                }
            }
        }
        for index in 0..nodes.len() {
            if nodes[index].borrow().resumed_finished
                && close_node(nodes, index, env, false).is_err()
            {
                break;
            }
        }
    }

    /// One round of the work loop: checkpoints, each source's `produce`, a poll of each open
    /// receiver (at most `poll_batch` messages), the due timers, the senders' flush, the live
    /// metrics when asked. It never waits, but where a sender waits for room in a full queue
    /// (unless the sender holds when full: [`ErasedSender::hold_when_full`]).
    pub(crate) fn round(&mut self, env: &Env<'_>) -> RoundDone {
        let nodes = &self.nodes;
        env.progress.beat();
        if env.control.aborting() {
            return RoundDone::Aborted;
        }
        if let Some(cpu) = &env.cpu {
            cpu.begin_round();
        }
        let mut work = 0usize;
        if env.checkpointed {
            match checkpoint_round(nodes, &self.sources, &mut self.rounds, env) {
                Ok(n) => work += n,
                Err(_) => return RoundDone::Aborted,
            }
        }
        for &index in &self.sources {
            if nodes[index].borrow().finished {
                continue;
            }
            let step = if env.control.stop_requested() {
                if env.control.suspending() {
                    suspend_node(nodes, index, env).map(|()| 1)
                } else {
                    finish_node(nodes, index, env).map(|()| 1)
                }
            } else {
                produce(nodes, index, env)
            };
            match step {
                Ok(done) => work += done,
                Err(_) => return RoundDone::Aborted,
            }
        }
        for input in self.inbound.iter_mut().filter(|i| i.open > 0) {
            match poll_input(nodes, input, env) {
                Ok(n) => work += n,
                Err(()) => return RoundDone::Aborted,
            }
        }
        match fire_processing_timers(nodes, env) {
            Ok(n) => work += n,
            Err(_) => return RoundDone::Aborted,
        }
        // After work, publish what the senders staged; when idle, finish what an earlier
        // flush left behind (a TCP frame held for batching, a socket that was full).
        flush(nodes, work == 0);
        if let Some(metrics) = env.metrics.filter(|m| m.asked()) {
            publish(nodes, &mut self.inbound, metrics);
        }
        if let Some(cpu) = &env.cpu {
            cpu.end_round(nodes);
        }
        // A thread leaves once its instances finished and its inputs ended. An instance
        // finishes after its inputs end, except one that resumed finished: its upstreams
        // resumed finished too and send their ends now, which must find it still here.
        let ended = self.inbound.iter().all(|i| i.open == 0);
        if ended && nodes.iter().all(|n| n.borrow().finished) {
            return RoundDone::Finished;
        }
        RoundDone::Worked(work)
    }

    /// Whether a round may find work now, as far as a cheap look tells: a source not
    /// finished, an open receiver that may have input ([`ErasedReceiver::may_have_input`]), or
    /// a processing timer set. False means a round would find nothing to do but what the job's
    /// control may ask (a stop, a checkpoint's completion, the live metrics), which a worker
    /// picks up on its full turns ([`crate::scheduler`]).
    pub(crate) fn has_work(&mut self) -> bool {
        let nodes = &self.nodes;
        self.sources.iter().any(|&i| !nodes[i].borrow().finished)
            || self
                .inbound
                .iter_mut()
                .any(|i| i.open > 0 && i.receiver.may_have_input())
            || nodes.iter().any(|n| n.borrow().timers.has_processing())
    }

    /// Sleeps on the doorbell of one open receiver until its sender publishes, at most
    /// `timeout` (`IdleStrategy::Park`); false if there is none to park on. A thread with
    /// several receivers parks on each in turn: data arriving on another waits at most one
    /// timeout, and every receiver is polled after each wait anyway.
    pub(crate) fn park(&mut self, timeout: Duration) -> bool {
        let count = self.inbound.len();
        for k in 0..count {
            let at = (self.park_next + k) % count;
            if self.inbound[at].open > 0 {
                self.park_next = at + 1;
                return self.inbound[at].receiver.park(timeout);
            }
        }
        false
    }

    /// Makes every sender to another thread hold what finds its queue full rather than wait
    /// for room ([`ErasedSender::hold_when_full`]).
    pub(crate) fn hold_when_full(&mut self) {
        for sender in self.senders() {
            sender.hold_when_full();
        }
    }

    /// Flushes every sender; whether one still holds messages its queue had no room for.
    pub(crate) fn flush_held(&mut self) -> bool {
        self.senders().for_each(|sender| sender.flush());
        self.holds()
    }

    /// Whether a sender holds messages its queue had no room for (or a flush left behind).
    pub(crate) fn holds(&mut self) -> bool {
        self.senders().any(|sender| sender.pending())
    }

    /// Flushes and sleeps on the first sender that holds messages until its receiver makes
    /// room, at most `timeout`; false if none holds any or its transport cannot park.
    pub(crate) fn park_held(&mut self, timeout: Duration) -> bool {
        self.senders()
            .find(|sender| sender.pending())
            .is_some_and(|sender| sender.park(timeout))
    }

    /// The sender of every edge to another thread, of every instance.
    fn senders(&mut self) -> impl Iterator<Item = &mut Box<dyn ErasedSender>> {
        self.nodes.iter_mut().flat_map(|cell| {
            let targets = cell.get_mut().routes.iter_mut().flatten();
            targets
                .flat_map(|f| f.targets.iter_mut())
                .filter_map(|target| match target {
                    Target::Remote(sender) => Some(sender),
                    Target::Fused { .. } => None,
                })
        })
    }

    /// After the loop: the live metrics a last time, then the instances' stop hooks and their
    /// reports (none if the job aborted).
    pub(crate) fn reports(self, env: &Env<'_>) -> Vec<InstanceReport> {
        let Running {
            nodes, mut inbound, ..
        } = self;
        if let Some(metrics) = env.metrics {
            publish(&nodes, &mut inbound, metrics);
        }
        if env.control.aborting() {
            return Vec::new();
        }
        let suspended = env.control.suspending();
        let mut reports = Vec::with_capacity(nodes.len());
        for (index, cell) in nodes.iter().enumerate() {
            env.progress.beat();
            let mut node = cell.borrow_mut();
            // A suspended job's instances each leave their state: what they snapshotted, or
            // that they had finished (which they reported then, or do now).
            let state = suspended.then(|| {
                node.suspended.take().unwrap_or_else(|| InstanceState {
                    finished: true,
                    ended_ports: node.ended_ports.clone(),
                    ..InstanceState::default()
                })
            });
            // An instance is stopped once in a job's life: when it finished, or at the end.
            let stop = !node.resumed_finished && state.as_ref().is_none_or(|s| s.finished);
            let stopped = match &mut node.body {
                _ if !stop => Ok(Ok(OperatorReport::default())),
                Body::Source(s) => catch_unwind(AssertUnwindSafe(|| s.stop())),
                Body::Operator(o) => catch_unwind(AssertUnwindSafe(|| o.stop())),
            };
            let mut report = match stopped {
                Ok(Ok(report)) => report,
                Ok(Err(error)) => {
                    env.control.fail(node.ctx.name_of_instance(), error);
                    OperatorReport::default()
                }
                Err(_) => {
                    env.control.fail(
                        node.ctx.name_of_instance(),
                        OperatorError::Panicked("in stop".into()),
                    );
                    OperatorReport::default()
                }
            };
            for input in inbound.iter_mut().filter(|input| input.node == index) {
                let lost = input.receiver.stats().lost;
                if lost > 0 {
                    let name = format!("{LOST_TUPLES_COUNTER}{}", input.edge);
                    *report.counters.entry(name).or_insert(0) += lost;
                }
            }
            reports.push(InstanceReport {
                operator: node.operator.clone(),
                instance: node.ctx.name_of_instance(),
                index: node.ctx.instance,
                tuples_in: node.tuples_in,
                tuples_out: node.tuples_out,
                cpu_ns: node.sampled_ns,
                sent: per_destination(node.deliveries()),
                report,
                arrival_latency: node.arrival_latency.take(),
                sink: node.outputs.is_empty(),
                state,
            });
        }
        reports
    }
}

/// Gives node `index` the state it resumes from, if any (before its `start`, so that it
/// opens what it holds knowing it resumes): its snapshot, its timers, the ports already
/// ended; one that had finished stays finished, and is not started. Refuses a
/// source that cannot resume in a job that must be able to suspend.
fn resume(nodes: &[RefCell<Node>], index: usize, env: &Env<'_>) -> Result<(), OperatorError> {
    let (state, unresumable) = {
        let mut node = nodes[index].borrow_mut();
        let unresumable = matches!(&node.body, Body::Source(s) if !s.resumable());
        (node.resume.take(), unresumable)
    };
    let needs = if env.checkpointed {
        Some("replaying it after a failure (checkpoints)")
    } else {
        env.suspendable
            .then_some("redeploying the job on another plan")
    };
    if let Some(needs) = needs.filter(|_| unresumable) {
        env.control.fail_with(RunError::Unresumable {
            instance: nodes[index].borrow().ctx.name_of_instance(),
            needs,
        });
        return Err(OperatorError::Aborted);
    }
    let Some(state) = state else {
        return Ok(());
    };
    if state.finished {
        let mut node = nodes[index].borrow_mut();
        node.finished = true;
        node.resumed_finished = true;
        return Ok(());
    }
    with_node(nodes, index, env, 0, |body, _| match body {
        Body::Source(s) => s.restore(state.snapshot),
        Body::Operator(o) => o.restore(state.snapshot),
    })?;
    let mut node = nodes[index].borrow_mut();
    for kept in state.in_flight {
        let log = node
            .inputs
            .get(kept.port)
            .ok_or_else(|| format!("it has no input port {}", kept.port))
            .and_then(|stream| stream.decode_log(&kept.tuples))
            .map_err(|e| {
                OperatorError::Failed(format!(
                    "the tuples in flight its checkpoint kept do not decode: {e}"
                ))
            })?;
        node.replay.push((kept.port, log));
    }
    for timer in state.timers {
        node.timers.set(timer);
    }
    node.tuples_in = state.counted.tuples_in;
    node.tuples_out = state.counted.tuples_out;
    node.ended_ports = state.ended_ports;
    Ok(())
}

fn poll_input(nodes: &[RefCell<Node>], input: &mut Inbound, env: &Env<'_>) -> Result<usize, ()> {
    let (node, port) = (input.node, input.port);
    let mut failed = false;
    let mut ended = 0;
    let mut tuples = 0;
    let from = input.from;
    let polled = input.receiver.poll(env.poll_batch, &mut |delivery| {
        let held = from.filter(|&f| holding(nodes, node, port, f, env));
        let result = match (delivery, held) {
            (Delivery::Batch(batch), None) => {
                tuples += batch.len() as u64;
                if let Some(from) = from {
                    record(nodes, node, port, from, env, |a, s| {
                        a.record_batch(port, s, batch)
                    });
                }
                process_batch(nodes, node, port, batch, env)
            }
            (Delivery::Batch(batch), Some(from)) => {
                tuples += batch.len() as u64;
                hold(nodes, node, env, |a, s| {
                    a.hold_batch(port, from, &s[port], batch)
                })
            }
            (Delivery::Punctuation(p), _) => match from {
                Some(from) => punctuation_arrived(nodes, node, port, from, p, env),
                None => apply_punctuation(nodes, node, port, p, env),
            },
            (Delivery::EndOfStream, None) => {
                ended += 1;
                end_input(nodes, node, port, from, env)
            }
            (Delivery::EndOfStream, Some(from)) => {
                ended += 1;
                hold(nodes, node, env, |a, _| a.hold_end(port, from))
            }
        };
        if result.is_err() {
            failed = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    input.open = input.open.saturating_sub(ended);
    input.tuples += tuples;
    match polled {
        Ok(_) if failed => Err(()),
        Ok(n) => Ok(n),
        Err(error) => {
            if !env.control.aborting() {
                let edge = input.edge.clone();
                env.control.fail_with(match error {
                    RecvError::Disconnected => RunError::Disconnected { edge },
                    error => RunError::Received { edge, error },
                });
            }
            Err(())
        }
    }
}

#[inline]
fn process_batch(
    nodes: &[RefCell<Node>],
    index: usize,
    port: usize,
    batch: BatchRef<'_>,
    env: &Env<'_>,
) -> Result<(), OperatorError> {
    with_node(
        nodes,
        index,
        env,
        batch.len() as u64,
        |body, out| match body {
            Body::Operator(op) => op.process_batch(port, batch, out),
            Body::Source(_) => Ok(()),
        },
    )
}

/// Publishes the thread's live metrics: every instance's counts, tuples delivered per edge,
/// CPU estimate and latency window, every inbound edge's tuples and what its receiver knows,
/// the time blocked.
fn publish(nodes: &[RefCell<Node>], inbound: &mut [Inbound], metrics: &ThreadPublisher) {
    for (index, cell) in nodes.iter().enumerate() {
        // Not re-entered: the loop holds no borrow here.
        if let Ok(mut node) = cell.try_borrow_mut() {
            let node = &mut *node;
            metrics.instance(
                index,
                node.tuples_in,
                node.tuples_out,
                node.latency_window.as_mut(),
            );
            metrics.traffic(index, node.sampled_ns, node.deliveries());
        }
    }
    for (index, input) in inbound.iter_mut().enumerate() {
        metrics.input(index, input.tuples, input.receiver.stats());
    }
    metrics.done(monotonic_ns());
}

/// Publishes everything this thread's senders hold (only those with something pending when
/// `pending_only`).
fn flush(nodes: &[RefCell<Node>], pending_only: bool) {
    for cell in nodes {
        let mut node = cell.borrow_mut();
        for target in node
            .routes
            .iter_mut()
            .flatten()
            .flat_map(|f| f.targets.iter_mut())
        {
            if let Target::Remote(sender) = target {
                if !pending_only || sender.pending() {
                    sender.flush();
                }
            }
        }
    }
}

/// Calls `produce` on source `index`. When a latency marker is due, reads the clock before
/// and sends the marker after what the call emitted, so the marker's latency covers the
/// whole batch.
fn produce(nodes: &[RefCell<Node>], index: usize, env: &Env<'_>) -> Result<usize, OperatorError> {
    let marker_due = env.latency_every > 0 && nodes[index].borrow().until_marker == 0;
    let stamp = marker_due.then(monotonic_ns);
    let produced = with_node(nodes, index, env, 0, |body, out| match body {
        Body::Source(s) => s.produce(out),
        Body::Operator(_) => Ok(Produced::Exhausted),
    })?;
    match produced {
        Produced::Emitted(n) => {
            match stamp {
                Some(stamp) if n > 0 => {
                    nodes[index].borrow_mut().until_marker = env.latency_every;
                    pass_marker(nodes, index, stamp, env)?;
                }
                _ => {
                    let mut node = nodes[index].borrow_mut();
                    node.until_marker = node.until_marker.saturating_sub(n as u64);
                }
            }
            Ok(n.max(1))
        }
        Produced::Idle => Ok(0),
        Produced::Exhausted => finish_node(nodes, index, env).map(|()| 1),
    }
}

/// A latency marker stamped at `stamp` reached node `index`: records how long it took (at
/// every instance but its source) and passes it on along every logical edge: to one of the
/// fan's targets (drawn from the stamp's low bits), or to each on a broadcast edge, whose
/// tuples go to each. Passing it to every target would multiply it at every fan-out that a
/// fan-in follows: a chain of L shuffled operators of P instances each would deliver P^L
/// copies of one marker to its sinks (3,125 for SOL's five bolts of five tasks, 50 markers a
/// tuple at one marker every 64 tuples).
fn pass_marker(
    nodes: &[RefCell<Node>],
    index: usize,
    stamp: u64,
    env: &Env<'_>,
) -> Result<(), OperatorError> {
    let Ok(mut guard) = nodes[index].try_borrow_mut() else {
        return Err(OperatorError::Failed("an instance was re-entered".into()));
    };
    let node = &mut *guard;
    if !matches!(node.body, Body::Source(_)) {
        let took = monotonic_ns().saturating_sub(stamp);
        node.arrival_latency
            .get_or_insert_with(latency_histogram)
            .saturating_record(took);
        if env.metrics.is_some() {
            node.latency_window
                .get_or_insert_with(latency_histogram)
                .saturating_record(took);
        }
    }
    for fan in node.routes.iter_mut().flatten() {
        let n = fan.targets.len();
        let targets = match fan.picker {
            Picker::Broadcast => &mut fan.targets[..],
            _ if n == 0 => &mut [],
            _ => {
                let one = (stamp % n as u64) as usize;
                &mut fan.targets[one..=one]
            }
        };
        for target in targets {
            match target {
                Target::Fused { node, .. } => pass_marker(nodes, *node, stamp, env)?,
                Target::Remote(sender) => send(env, sender, |s| {
                    s.offer_punctuation(Punctuation::Latency(stamp))
                })?,
            }
        }
    }
    Ok(())
}

/// Upstream instance `from` passed event time `time` into node `index`: if that advances the
/// node's event time, calls its due event-time timers, then its `watermark` hook.
fn advance_event_time(
    nodes: &[RefCell<Node>],
    index: usize,
    from: u32,
    time: u64,
    env: &Env<'_>,
) -> Result<(), OperatorError> {
    let advanced = {
        let Ok(mut node) = nodes[index].try_borrow_mut() else {
            return Err(OperatorError::Failed("an instance was re-entered".into()));
        };
        node.clock.observe(from, time)
    };
    let Some(now) = advanced else {
        return Ok(());
    };
    fire_due(nodes, index, env, |timers| timers.next_event(now))?;
    with_operator(nodes, index, env, |op, out| op.watermark(now, out))
}

/// Calls node `index`'s timer hook for every timer `next` pops, in order.
fn fire_due(
    nodes: &[RefCell<Node>],
    index: usize,
    env: &Env<'_>,
    mut next: impl FnMut(&mut Timers) -> Option<Timer>,
) -> Result<usize, OperatorError> {
    let mut fired = 0;
    loop {
        let due = {
            let Ok(mut node) = nodes[index].try_borrow_mut() else {
                return Err(OperatorError::Failed("an instance was re-entered".into()));
            };
            next(&mut node.timers)
        };
        let Some(timer) = due else {
            return Ok(fired);
        };
        with_operator(nodes, index, env, |op, out| op.timer(timer, out))?;
        fired += 1;
    }
}

/// Calls the processing-time timers that are due in this thread; reads the clock only when
/// some instance has one set.
fn fire_processing_timers(nodes: &[RefCell<Node>], env: &Env<'_>) -> Result<usize, OperatorError> {
    let mut now = None;
    let mut fired = 0;
    for index in 0..nodes.len() {
        if !nodes[index].borrow().timers.has_processing() {
            continue;
        }
        let now = *now.get_or_insert_with(monotonic_ns);
        fired += fire_due(nodes, index, env, |timers| timers.next_processing(now))?;
    }
    Ok(fired)
}

/// What a thread's work loop knows of checkpoints: which ask and which completion it has
/// seen through, so that a round with nothing new costs two loads.
#[derive(Default)]
struct CheckpointRounds {
    /// Every instance of the thread took its part of checkpoints up to this one.
    taken: u64,
    /// Every instance of the thread was told of completions up to this one.
    told: u64,
}

/// At the top of a round of a checkpointed thread: every running source of a checkpoint asked
/// for takes its position and sends the barrier; every finished instance acknowledges it as
/// finished; every instance that took its part of a checkpoint now complete is told.
fn checkpoint_round(
    nodes: &[RefCell<Node>],
    sources: &[usize],
    rounds: &mut CheckpointRounds,
    env: &Env<'_>,
) -> Result<usize, OperatorError> {
    let mut work = 0;
    let asked = env.control.checkpoint_asked();
    if asked > rounds.taken {
        let mut taken = asked;
        for index in 0..nodes.len() {
            let (finished, checkpointed) = {
                let node = nodes[index].borrow();
                (node.finished, node.checkpointed)
            };
            if checkpointed >= asked {
                continue;
            }
            if finished {
                // It said so as it finished ([`close_node`]).
                continue;
            }
            if sources.contains(&index) {
                nodes[index].borrow_mut().aligning = Some(Alignment::new(asked, false));
                take_part(nodes, index, env)?;
                work += 1;
            } else {
                taken = taken.min(checkpointed);
            }
        }
        rounds.taken = taken;
    }
    let complete = env.control.checkpoint_complete();
    if complete > rounds.told {
        for index in 0..nodes.len() {
            let tell = {
                let node = nodes[index].borrow();
                !node.finished && node.checkpointed >= complete && node.told_complete < complete
            };
            if tell {
                with_node(nodes, index, env, 0, |body, _| match body {
                    Body::Source(s) => s.checkpoint_complete(complete),
                    Body::Operator(o) => o.checkpoint_complete(complete),
                })?;
                nodes[index].borrow_mut().told_complete = complete;
                work += 1;
            }
        }
        rounds.told = complete;
    }
    Ok(work)
}

/// Node `index` finished without taking its part of the checkpoints after the last it took:
/// for each of them (whether asked yet or not) its part is that it finished.
fn announce_finished(node: &Node, env: &Env<'_>) {
    let Some(sink) = env.control.checkpoint_sink() else {
        return;
    };
    sink.part(CheckpointPart {
        n: node.checkpointed + 1,
        operator: node.operator.clone(),
        instance: node.ctx.instance,
        state: InstanceState {
            finished: true,
            ended_ports: node.ended_ports.clone(),
            ..InstanceState::default()
        },
        later: None,
        alignment: Duration::ZERO,
        held: 0,
    });
}

/// Whether node `index` holds back what arrives from `from` on `port`: it is aligning a
/// checkpoint whose barrier from there already arrived.
#[inline]
fn holding(nodes: &[RefCell<Node>], index: usize, port: usize, from: u32, env: &Env<'_>) -> bool {
    env.checkpointed
        && nodes[index]
            .try_borrow()
            .is_ok_and(|n| n.aligning.as_ref().is_some_and(|a| a.holds(port, from)))
}

/// Holds something back at node `index` (which is aligning), given the streams of its inputs;
/// past the job's limit on what an alignment holds, the node's checkpoint goes unaligned.
fn hold(
    nodes: &[RefCell<Node>],
    index: usize,
    env: &Env<'_>,
    f: impl FnOnce(&mut Alignment, &[StreamType]),
) -> Result<(), OperatorError> {
    let over_limit = {
        let Ok(mut guard) = nodes[index].try_borrow_mut() else {
            return Err(OperatorError::Failed("an instance was re-entered".into()));
        };
        let node = &mut *guard;
        node.aligning.as_mut().is_some_and(|alignment| {
            f(alignment, &node.inputs);
            alignment.held_tuples() > env.align_limit
        })
    };
    if over_limit {
        go_unaligned(nodes, index, env)?;
    }
    Ok(())
}

/// Node `index` held back more than the job's limit while it aligned: it takes its state now,
/// sends its barrier on, and processes what it held (all of it after the barriers that
/// arrived, so none of it is in the state); from now on it keeps a copy of what still comes
/// on the inputs whose barrier has not, as an unaligned checkpoint does.
fn go_unaligned(nodes: &[RefCell<Node>], index: usize, env: &Env<'_>) -> Result<(), OperatorError> {
    let released = {
        let mut node = nodes[index].borrow_mut();
        let instance = node.ctx.name_of_instance();
        let Some(alignment) = node.aligning.as_mut() else {
            return Ok(());
        };
        tracing::info!(
            %instance,
            checkpoint = alignment.n,
            held = alignment.held_tuples(),
            limit = env.align_limit,
            "an aligned checkpoint went unaligned: it held more tuples than --checkpoint-align-limit"
        );
        alignment.unalign()
    };
    take_state_early(nodes, index, env)?;
    release(nodes, index, released, env)
}

/// Whether node `index` has the barrier of every input still open.
fn aligned(node: &Node) -> bool {
    let open: usize = node.open_inputs.iter().sum();
    node.aligning
        .as_ref()
        .is_some_and(|a| a.arrived_open() >= open)
}

/// A punctuation from `from` arrived on `port` of node `index`: held back if the node holds
/// that input, else applied.
fn punctuation_arrived(
    nodes: &[RefCell<Node>],
    index: usize,
    port: usize,
    from: u32,
    punctuation: Punctuation,
    env: &Env<'_>,
) -> Result<(), OperatorError> {
    let held = !matches!(
        punctuation,
        Punctuation::Checkpoint { .. } | Punctuation::Latency(_)
    ) && holding(nodes, index, port, from, env);
    if held {
        hold(nodes, index, env, |a, _| {
            a.hold_punctuation(port, punctuation)
        })
    } else {
        apply_punctuation(nodes, index, port, punctuation, env)
    }
}

/// Applies a punctuation that arrived on `port` of node `index`.
fn apply_punctuation(
    nodes: &[RefCell<Node>],
    index: usize,
    port: usize,
    punctuation: Punctuation,
    env: &Env<'_>,
) -> Result<(), OperatorError> {
    // What its upstreams send as they resume finished (so is it): the end of event time
    // before their ends, not to be passed on to downstream threads that may have left.
    if nodes[index].try_borrow().is_ok_and(|node| node.finished) {
        return Ok(());
    }
    match punctuation {
        Punctuation::WindowMarker => {
            with_operator(nodes, index, env, |op, out| op.punctuation(port, out))
        }
        Punctuation::Watermark { time, from } => advance_event_time(nodes, index, from, time, env),
        Punctuation::Latency(stamp) => pass_marker(nodes, index, stamp, env),
        // An upstream in another process was suspended: so is this job, whether or not this
        // process's launcher has said so yet.
        Punctuation::Suspend => {
            env.control.request_suspend();
            Ok(())
        }
        Punctuation::Checkpoint { n, from } => barrier(nodes, index, port, from, n, env),
    }
}

/// The barrier of checkpoint `n` from `from` arrived on `port` of node `index`: from now on
/// that input is held back; once every open input's barrier is in, the node takes its part.
fn barrier(
    nodes: &[RefCell<Node>],
    index: usize,
    port: usize,
    from: u32,
    n: u64,
    env: &Env<'_>,
) -> Result<(), OperatorError> {
    if !env.checkpointed {
        return Ok(());
    }
    let complete = {
        let Ok(mut guard) = nodes[index].try_borrow_mut() else {
            return Err(OperatorError::Failed("an instance was re-entered".into()));
        };
        let node = &mut *guard;
        // A barrier of a checkpoint already taken (one delivered twice) changes nothing.
        if node.finished || n <= node.checkpointed {
            return Ok(());
        }
        let alignment = node
            .aligning
            .get_or_insert_with(|| Alignment::new(n, env.unaligned));
        alignment.arrive(port, from);
        let first = alignment.arrived() == 1 && alignment.is_unaligned();
        (aligned(node), first)
    };
    match complete {
        (true, _) => take_part(nodes, index, env),
        // Unaligned: the state now, the barrier on at once, the rest recorded.
        (false, true) => take_state_early(nodes, index, env),
        (false, false) => Ok(()),
    }
}

/// Node `index`, at the first barrier of an unaligned checkpoint, takes its state and sends
/// its barrier on every output edge; its part is handed over once every barrier is in.
fn take_state_early(
    nodes: &[RefCell<Node>],
    index: usize,
    env: &Env<'_>,
) -> Result<(), OperatorError> {
    let n = match &nodes[index].borrow().aligning {
        Some(alignment) => alignment.n,
        None => return Ok(()),
    };
    let state = take_state(nodes, index, n, env)?;
    let Ok(mut guard) = nodes[index].try_borrow_mut() else {
        return Err(OperatorError::Failed("an instance was re-entered".into()));
    };
    let node = &mut *guard;
    if let Some(alignment) = node.aligning.as_mut() {
        alignment.taken = Some(state);
    }
    forward_barrier(nodes, node, n, env)
}

/// Node `index`'s state for checkpoint `n`: what its `checkpoint` hook returns, with its
/// ended ports, timers and counts; and the snapshot to make off the data path, if the hook
/// left it for later (the state's `snapshot` is empty then).
fn take_state(
    nodes: &[RefCell<Node>],
    index: usize,
    n: u64,
    env: &Env<'_>,
) -> Result<(InstanceState, Option<LaterSnapshot>), OperatorError> {
    let taken = with_node(nodes, index, env, 0, |body, _| match body {
        Body::Source(source) => source.checkpoint(n).map(CheckpointState::Now),
        Body::Operator(op) => op.checkpoint(n),
    })?;
    let (snapshot, later) = match taken {
        CheckpointState::Now(snapshot) => (snapshot, None),
        CheckpointState::Later(later) => (Snapshot::default(), Some(later)),
    };
    let node = nodes[index].borrow();
    let state = InstanceState {
        snapshot,
        finished: false,
        ended_ports: node.ended_ports.clone(),
        timers: node.timers.pending(),
        in_flight: Vec::new(),
        counted: node.counted(),
    };
    Ok((state, later))
}

/// Sends node `node`'s barrier of checkpoint `n` on every output edge.
fn forward_barrier(
    nodes: &[RefCell<Node>],
    node: &mut Node,
    n: u64,
    env: &Env<'_>,
) -> Result<(), OperatorError> {
    let from = node.id;
    for target in node
        .routes
        .iter_mut()
        .flatten()
        .flat_map(|f| f.targets.iter_mut())
    {
        match target {
            Target::Fused { node, port } => barrier(nodes, *node, *port, from, n, env)?,
            Target::Remote(sender) => send(env, sender, |s| {
                s.offer_punctuation(Punctuation::Checkpoint { n, from })
            })?,
        }
    }
    Ok(())
}

/// Keeps a copy of what arrives from `from` on `port` of node `index` when an unaligned
/// checkpoint took the node's state before that input's barrier.
#[inline]
fn record(
    nodes: &[RefCell<Node>],
    index: usize,
    port: usize,
    from: u32,
    env: &Env<'_>,
    f: impl FnOnce(&mut Alignment, &StreamType),
) {
    // An aligned checkpoint can go unaligned at an instance ([`go_unaligned`]).
    if !env.checkpointed {
        return;
    }
    if let Ok(mut guard) = nodes[index].try_borrow_mut() {
        let node = &mut *guard;
        if let Some(alignment) = node.aligning.as_mut().filter(|a| a.records(port, from)) {
            f(alignment, &node.inputs[port]);
        }
    }
}

/// Node `index` takes its part of the checkpoint it aligned (a source: the one asked for):
/// its state, handed to the checkpoint sink; then its barrier on every output edge; then what
/// it held back, in order.
fn take_part(nodes: &[RefCell<Node>], index: usize, env: &Env<'_>) -> Result<(), OperatorError> {
    let Some(mut alignment) = nodes[index].borrow_mut().aligning.take() else {
        return Ok(());
    };
    let n = alignment.n;
    let early = alignment.taken.is_some();
    let (state, later) = match alignment.taken.take() {
        Some((taken, later)) => {
            let state = InstanceState {
                in_flight: alignment.in_flight().map_err(OperatorError::Failed)?,
                ..taken
            };
            (state, later)
        }
        None => take_state(nodes, index, n, env)?,
    };
    let (alignment, held, released) = alignment.finish();
    {
        let Ok(mut guard) = nodes[index].try_borrow_mut() else {
            return Err(OperatorError::Failed("an instance was re-entered".into()));
        };
        let node = &mut *guard;
        node.checkpointed = n;
        let part = CheckpointPart {
            n,
            operator: node.operator.clone(),
            instance: node.ctx.instance,
            state,
            later,
            alignment,
            held,
        };
        if let Some(sink) = env.control.checkpoint_sink() {
            sink.part(part);
        }
        // An unaligned checkpoint sent the barrier on when it took the state.
        if !early {
            forward_barrier(nodes, node, n, env)?;
        }
    }
    release(nodes, index, released, env)
}

/// Node `index` processes what it held back while it aligned, in order.
fn release(
    nodes: &[RefCell<Node>],
    index: usize,
    released: Vec<Release>,
    env: &Env<'_>,
) -> Result<(), OperatorError> {
    for release in released {
        match release {
            Release::Tuples { port, log } => process_batch(nodes, index, port, log.batch(), env)?,
            Release::Punctuation { port, punctuation } => {
                apply_punctuation(nodes, index, port, punctuation, env)?
            }
            Release::End { port, from } => end_input(nodes, index, port, Some(from), env)?,
        }
    }
    Ok(())
}
