//! Checkpoints in the data plane alone: a job of two sources joined by a stateful operator
//! takes checkpoints while it runs (its flags set as the control plane's coordinator sets
//! them), and the job resumed from any complete checkpoint, on any plan, ends with exactly the
//! output of a run without one: barriers aligned, nothing lost, nothing counted twice. Then
//! the same over random graphs (sources, maps, keyed counters and joins, from small parts),
//! random plans and random source batches (so the tuples of a join's two inputs interleave
//! differently each run), resumed from a random complete checkpoint (a random kill point) on
//! another plan.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proptest::prelude::*;

use sluice_exec::assemble::{self, Scope, Sites, Watched};
use sluice_exec::checkpoint::{CheckpointPart, CheckpointSink};
use sluice_exec::control::JobControl;
use sluice_exec::watch::wait_threads;
use sluice_exec::{
    CheckpointOptions, InstanceState, JobState, RunError, RunOptions, DEFAULT_ALIGN_LIMIT,
};
use sluice_graph::{
    expect_tuple, Graph, GraphBuilder, Operator, OperatorError, Output, Ports, Produced, Snapshot,
    Source,
};
use sluice_plan::{plan, PhysicalPlan, PlanOptions, PlanRequest};
use sluice_transport::tcp::JobSecret;
use sluice_types::TupleRef;

/// The longest any job of these tests may run before the test gives up on it.
const WATCHDOG: Duration = Duration::from_secs(60);
/// Numbers each source emits.
const LIMIT: u64 = 400_000;
/// Keys the tally counts.
const KEYS: u64 = 97;
/// Runs of a job that must take a checkpoint holding tuples in flight before the test fails:
/// whether one does is the scheduler's timing.
const IN_FLIGHT_ATTEMPTS: usize = 5;

/// Emits `first`, `first + step`, ... below `limit`, `batch` a call, pausing `pause` after
/// each call; keeps its position.
struct Stride {
    next: u64,
    step: u64,
    limit: u64,
    batch: usize,
    pause: Duration,
}

impl Stride {
    /// From `first` by `step` below [`LIMIT`], 32 a call, without pauses.
    fn below_limit(first: u64, step: u64) -> Self {
        Self {
            next: first,
            step,
            limit: LIMIT,
            batch: 32,
            pause: Duration::ZERO,
        }
    }
}

impl Source for Stride {
    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let mut n = 0;
        while n < self.batch && self.next < self.limit {
            out.emit(0, self.next)?;
            self.next += self.step;
            n += 1;
        }
        std::thread::sleep(self.pause);
        Ok(if n == 0 {
            Produced::Exhausted
        } else {
            Produced::Emitted(n)
        })
    }

    fn resumable(&self) -> bool {
        true
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Snapshot::whole(&self.next)
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        self.next = snapshot.decode_whole()?;
        Ok(())
    }
}

/// Counts each number's key (the number modulo `keys`) per input port; at the end emits one
/// number per (port, key): `port * 10^12 + key * 10^6 + count`.
struct Tally {
    keys: u64,
    counts: BTreeMap<(usize, u64), u64>,
}

impl Tally {
    fn new(keys: u64) -> Self {
        Self {
            keys,
            counts: BTreeMap::new(),
        }
    }
}

impl Operator for Tally {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let n = *expect_tuple::<u64>(port, tuple)?;
        *self.counts.entry((port, n % self.keys)).or_default() += 1;
        Ok(())
    }

    fn finish(&mut self, out: &mut Output<'_>) -> Result<(), OperatorError> {
        for (&(port, key), &count) in &self.counts {
            out.emit(0, port as u64 * 1_000_000_000_000 + key * 1_000_000 + count)?;
        }
        Ok(())
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Snapshot::whole(&self.counts)
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        self.counts = snapshot.decode_whole()?;
        Ok(())
    }
}

/// What the sinks of a job received: (sink, number).
type Kept = Arc<Mutex<Vec<(usize, u64)>>>;

/// Keeps what it receives, tagged with its own number, and publishes it into a list shared
/// with the test when its input ends: what it holds is its state, so a job resumed from a
/// checkpoint publishes each number once (a two-phase sink in miniature).
struct Keep {
    published: Kept,
    tag: usize,
    received: Vec<u64>,
}

impl Keep {
    fn new(published: &Kept, tag: usize) -> Self {
        Self {
            published: published.clone(),
            tag,
            received: Vec::new(),
        }
    }
}

impl Operator for Keep {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.received.push(*expect_tuple::<u64>(port, tuple)?);
        Ok(())
    }

    fn finish(&mut self, _: &mut Output<'_>) -> Result<(), OperatorError> {
        let tag = self.tag;
        let mut published = self.published.lock().unwrap();
        published.extend(self.received.drain(..).map(|n| (tag, n)));
        Ok(())
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Snapshot::whole(&self.received)
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        self.received = snapshot.decode_whole()?;
        Ok(())
    }
}

/// evens and odds (two sources) -> add one (on the odds) -> tally (two ports) -> keep.
fn joined(kept: &Kept) -> Graph {
    joined_from(
        kept,
        || Stride::below_limit(0, 2),
        || Stride::below_limit(1, 2),
    )
}

/// [`joined`] with the sources `evens` and `odds` make.
fn joined_from(kept: &Kept, evens: fn() -> Stride, odds: fn() -> Stride) -> Graph {
    let mut g = GraphBuilder::new("joined");
    let evens = g.source("evens", Ports::new().output::<u64>(), move |_| evens());
    let odds = g.source("odds", Ports::new().output::<u64>(), move |_| odds());
    let add = g.operator(
        "add-one",
        Ports::new().input::<u64>().output::<u64>(),
        |_| Times(1),
    );
    let tally = g.operator(
        "tally",
        Ports::new().input::<u64>().input::<u64>().output::<u64>(),
        |_| Tally::new(KEYS),
    );
    let kept = kept.clone();
    let keep = g.operator("keep", Ports::new().input::<u64>(), move |_| {
        Keep::new(&kept, 0)
    });
    g.connect(evens.out(0), tally.input(0)).unwrap();
    g.connect(odds.out(0), add.input(0)).unwrap();
    g.connect(add.out(0), tally.input(1)).unwrap();
    g.connect(tally.out(0), keep.input(0)).unwrap();
    g.build().unwrap()
}

/// Multiplies by its factor and adds one.
struct Times(u64);

impl Operator for Times {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let n = *expect_tuple::<u64>(port, tuple)?;
        out.emit(0, n.wrapping_mul(self.0).wrapping_add(1))
    }
}

fn planned(graph: &Graph, request: &PlanRequest) -> PhysicalPlan {
    let options = PlanOptions {
        cores: 2,
        queue_capacity: 64,
        checkpointed: true,
        ..PlanOptions::default()
    };
    plan(graph, request, &options).unwrap()
}

/// One checkpoint's parts, by (operator, instance).
type PartsOf = BTreeMap<(String, usize), InstanceState>;

/// A finished instance's part: from which checkpoint on, the instance, its state.
type FinishedPart = (u64, (String, usize), InstanceState);

/// The parts handed over: per checkpoint, each instance's state by (operator, instance);
/// and the instances that finished, from which checkpoint on.
#[derive(Default)]
struct Parts {
    taken: Mutex<BTreeMap<u64, PartsOf>>,
    finished: Mutex<Vec<FinishedPart>>,
}

impl CheckpointSink for Parts {
    fn part(&self, part: CheckpointPart) {
        let (n, key) = (part.n, (part.operator.clone(), part.instance));
        // A snapshot left for later is made here, as the runtime's writer thread makes it.
        let state = part.into_state().unwrap();
        if state.finished {
            self.finished.lock().unwrap().push((n, key, state));
            return;
        }
        self.taken
            .lock()
            .unwrap()
            .entry(n)
            .or_default()
            .insert(key, state);
    }
}

impl Parts {
    /// Every complete checkpoint of a job of `instances` instances, in order, with its state.
    fn every_complete(&self, instances: usize) -> Vec<(u64, JobState)> {
        let last = self
            .taken
            .lock()
            .unwrap()
            .keys()
            .max()
            .copied()
            .unwrap_or(0);
        (1..=last)
            .filter_map(|n| self.complete(n, instances).map(|state| (n, state)))
            .collect()
    }

    /// The state checkpoint `n` holds if every one of `instances` has its part in it: the
    /// state it took, or that it finished before.
    fn complete(&self, n: u64, instances: usize) -> Option<JobState> {
        let mut parts = self
            .taken
            .lock()
            .unwrap()
            .get(&n)
            .cloned()
            .unwrap_or_default();
        for (_, key, state) in self.finished.lock().unwrap().iter().filter(|p| p.0 <= n) {
            parts.insert(key.clone(), state.clone());
        }
        (parts.len() == instances).then(|| {
            let mut state = JobState::default();
            for ((operator, instance), taken) in parts {
                let states = state.operators.entry(operator).or_default();
                states.resize_with(states.len().max(instance + 1), Default::default);
                states[instance] = taken;
            }
            state
        })
    }
}

/// Runs the job on `plan`, from `resume` if given; when `parts` is given, takes a checkpoint
/// whenever the last one is complete (every instance handed its part), as a coordinator would.
fn run(
    graph: &Graph,
    plan: &PhysicalPlan,
    resume: Option<&JobState>,
    parts: Option<Arc<Parts>>,
    unaligned: bool,
) -> Result<(), RunError> {
    run_holding(graph, plan, resume, parts, unaligned, DEFAULT_ALIGN_LIMIT)
}

/// [`run`], an aligned checkpoint going unaligned at an instance past `align_limit` tuples held.
fn run_holding(
    graph: &Graph,
    plan: &PhysicalPlan,
    resume: Option<&JobState>,
    parts: Option<Arc<Parts>>,
    unaligned: bool,
    align_limit: u64,
) -> Result<(), RunError> {
    // The directory is the control plane's; the data plane reads the mode alone.
    let dir: &'static std::path::Path = Box::leak(std::env::temp_dir().into_boxed_path());
    let options = RunOptions {
        checkpoints: Some(CheckpointOptions {
            unaligned,
            align_limit,
            ..CheckpointOptions::new(Duration::from_millis(1), dir)
        }),
        // A threaded plan's instances share two workers whatever the machine's cores.
        workers: Some(2),
        ..RunOptions::default()
    };
    let sites = Sites::new(
        format!("exec-checkpoints-{}", std::process::id()),
        JobSecret::random().unwrap(),
    );
    let bound = assemble::bind(graph, plan, Scope::All, &sites).unwrap();
    let control = Arc::new(JobControl::new(true));
    if let Some(parts) = &parts {
        control.set_checkpoint_sink(parts.clone());
    }
    // Each instance takes its state out of the job's: the caller's stays as it was.
    let mut resume = resume.cloned();
    let watched = Watched {
        control: &control,
        metrics: None,
        resume: resume.as_mut(),
    };
    let workers = assemble::start(graph, plan, Scope::All, &sites, bound, &options, watched)?;
    let began = Instant::now();
    let instances = plan.instances.len();
    let mut asked = 0;
    wait_threads(workers, &control, &options, || {
        if let Some(parts) = &parts {
            if asked == 0 || parts.complete(asked, instances).is_some() {
                control.complete_checkpoint(asked);
                asked += 1;
                control.trigger_checkpoint(asked);
            }
        }
        if began.elapsed() > WATCHDOG {
            control.abort();
        }
    });
    match control.take_error() {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// What `graph`'s sinks publish (into `kept`) in a run on one thread, without checkpoints.
fn fused_output(graph: &Graph, kept: &Kept) -> Vec<(usize, u64)> {
    run(
        graph,
        &planned(graph, &PlanRequest::Fused),
        None,
        None,
        false,
    )
    .unwrap();
    sorted(kept)
}

fn sorted(kept: &Kept) -> Vec<(usize, u64)> {
    let mut v = std::mem::take(&mut *kept.lock().unwrap());
    v.sort_unstable();
    v
}

#[test]
fn a_job_resumed_from_any_aligned_checkpoint_ends_as_one_never_interrupted() {
    resumed_from_any_checkpoint(false, DEFAULT_ALIGN_LIMIT);
}

#[test]
fn a_job_resumed_from_any_unaligned_checkpoint_ends_as_one_never_interrupted() {
    resumed_from_any_checkpoint(true, DEFAULT_ALIGN_LIMIT);
}

/// Aligned, with room for a few tuples only: an instance's checkpoint goes unaligned once it
/// holds more, and the job resumed from any checkpoint still ends as one never interrupted.
#[test]
fn a_job_resumed_from_checkpoints_that_outgrew_their_alignment_ends_as_one_never_interrupted() {
    resumed_from_any_checkpoint(false, 8);
}

/// Runs the job on two plans taking checkpoints (`unaligned` or not), and resumes it from
/// several of them on the other plan: each ends with the output of a run without any.
fn resumed_from_any_checkpoint(unaligned: bool, align_limit: u64) {
    let kept = Arc::new(Mutex::new(Vec::new()));
    let graph = joined(&kept);
    let expected = fused_output(&graph, &kept);
    assert_eq!(expected.len() as u64, 2 * KEYS, "every key of both ports");

    for (request, again) in [
        (PlanRequest::Threaded, PlanRequest::Fused),
        (PlanRequest::Fused, PlanRequest::Threaded),
    ] {
        // The tally's inputs come from two threads under Threaded: their barriers arrive
        // apart, and what came between them is kept with its state (an aligned checkpoint
        // holds it back, until it holds too much and goes unaligned). How much comes between
        // is up to the scheduler: a run where none did is run again, a few times at most.
        let must_keep_in_flight =
            (unaligned || align_limit < DEFAULT_ALIGN_LIMIT) && request == PlanRequest::Threaded;
        let mut mid_stream = Vec::new();
        for _ in 0..IN_FLIGHT_ATTEMPTS {
            mid_stream =
                mid_stream_checkpoints(&graph, &kept, &expected, &request, unaligned, align_limit);
            let kept_in_flight = mid_stream
                .iter()
                .any(|(_, s)| s.operators["tally"].iter().any(|i| !i.in_flight.is_empty()));
            if kept_in_flight || !must_keep_in_flight {
                break;
            }
            mid_stream.clear();
        }
        assert!(
            !mid_stream.is_empty(),
            "{request:?}: no run of {IN_FLIGHT_ATTEMPTS} took a checkpoint that kept tuples in flight"
        );
        // The first, the middle and the last of them, and the first that kept tuples in flight.
        let holding = mid_stream
            .iter()
            .position(|(_, s)| s.operators["tally"].iter().any(|i| !i.in_flight.is_empty()));
        let picks = [0, mid_stream.len() / 2, mid_stream.len() - 1];
        for (n, state) in picks.iter().chain(&holding).map(|&i| &mid_stream[i]) {
            run(&graph, &planned(&graph, &again), Some(state), None, false).unwrap();
            assert_eq!(
                sorted(&kept),
                expected,
                "{request:?}, resumed from checkpoint {n} on {again:?}"
            );
        }
    }
}

/// Runs the job on `request` taking checkpoints, checks its output is `expected`, and returns
/// its complete checkpoints taken before the tally finished.
fn mid_stream_checkpoints(
    graph: &Graph,
    kept: &Kept,
    expected: &[(usize, u64)],
    request: &PlanRequest,
    unaligned: bool,
    align_limit: u64,
) -> Vec<(u64, JobState)> {
    let parts = Arc::new(Parts::default());
    run_holding(
        graph,
        &planned(graph, request),
        None,
        Some(parts.clone()),
        unaligned,
        align_limit,
    )
    .unwrap();
    assert_eq!(
        sorted(kept),
        expected,
        "{request:?}: checkpoints change no output"
    );
    let instances = planned(graph, request).instances.len();
    let complete = parts.every_complete(instances);
    assert!(
        complete.len() >= 2,
        "{request:?}: checkpoints were taken while it ran ({})",
        complete.len()
    );
    // Once the tally finished, its output was the first run's: resume from before.
    let mid_stream: Vec<(u64, JobState)> = complete
        .into_iter()
        .filter(|(_, s)| s.operators["tally"].iter().all(|i| !i.finished))
        .collect();
    assert!(
        !mid_stream.is_empty(),
        "{request:?}: a checkpoint in mid-stream"
    );
    mid_stream
}

/// An input that ends long before the other: its source and the map after it finish while
/// the other source runs on, slowly.
/// - Threaded, resumed from a checkpoint taken after that: the short source and the map both
///   resume finished, each in a thread of its own, and the map's thread must still be there
///   to take the end the source sends at once (it left at once, and the source failed on a
///   receiver gone).
/// - Unaligned, with the short input and the tally in one thread and the slow source in
///   another: the short input's barrier and then its end reach the tally while the slow
///   source's barrier is still on its way behind tuples sent before it. The tally's part must
///   wait for that barrier and keep those tuples (the end once completed the alignment, and a
///   resume lost them).
#[test]
fn an_input_that_finished_early_resumes_finished_and_loses_nothing() {
    let short = || Stride {
        limit: 1 + 2 * 300,
        batch: 8,
        pause: Duration::from_millis(1),
        ..Stride::below_limit(1, 2)
    };
    let slow = || Stride {
        limit: 2 * 400,
        batch: 8,
        pause: Duration::from_millis(10),
        ..Stride::below_limit(0, 2)
    };
    let kept = Arc::new(Mutex::new(Vec::new()));
    let graph = joined_from(&kept, slow, short);
    let expected = fused_output(&graph, &kept);
    let threaded = planned(&graph, &PlanRequest::Threaded);
    let file = sluice_plan::PlanFile::parse(
        "[[thread]]\nname = \"short\"\noperators = [\"odds\", \"add-one\", \"tally\", \"keep\"]\n\
         [[thread]]\nname = \"slow\"\noperators = [\"evens\"]\n",
    )
    .unwrap();
    let apart = planned(&graph, &PlanRequest::File("apart".into(), file));
    for (plan, unaligned) in [(&threaded, false), (&threaded, true), (&apart, true)] {
        let parts = Arc::new(Parts::default());
        run(&graph, plan, None, Some(parts.clone()), unaligned).unwrap();
        assert_eq!(sorted(&kept), expected, "checkpoints change no output");
        let mid_stream: Vec<(u64, JobState)> = parts
            .every_complete(plan.instances.len())
            .into_iter()
            .filter(|(_, s)| !s.operators["tally"][0].finished)
            .collect();
        let ended = mid_stream
            .iter()
            .position(|(_, s)| s.operators["odds"][0].finished)
            .expect("a checkpoint after the short input ended, before the tally finished");
        // The checkpoints around the short input's end, on both sides.
        let around = &mid_stream[ended.saturating_sub(3)..mid_stream.len().min(ended + 5)];
        for (n, state) in around {
            let what = format!(
                "{}: resumed from {n} (unaligned: {unaligned})",
                plan.strategy
            );
            run(&graph, &threaded, Some(state), None, false)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(sorted(&kept), expected, "{what}");
        }
    }
}

/// One part of a random graph; a part's inputs are indices into the parts before it (taken
/// modulo their number).
#[derive(Debug, Clone)]
enum Part {
    /// [`Stride`] from `first` by `step`, `count` numbers, `batch` a call (a millisecond's
    /// pause after each, so that checkpoints fall in mid-stream).
    Source {
        first: u64,
        step: u64,
        count: u64,
        batch: usize,
    },
    /// [`Times`] on the stream of `input`.
    Map { input: usize, factor: u64 },
    /// [`Tally`] of `input`'s numbers by key.
    Count { input: usize, keys: u64 },
    /// [`Tally`] of two streams, one a port: their tuples interleave as the threads run.
    Join {
        left: usize,
        right: usize,
        keys: u64,
    },
}

/// One to three sources, then up to five maps, counters and joins over what comes before.
fn random_parts() -> impl Strategy<Value = Vec<Part>> {
    let source =
        (0..100u64, 1..5u64, 300..1500u64, 4..16usize).prop_map(|(first, step, count, batch)| {
            Part::Source {
                first,
                step,
                count,
                batch,
            }
        });
    let other = prop_oneof![
        (any::<usize>(), 1..7u64).prop_map(|(input, factor)| Part::Map { input, factor }),
        (any::<usize>(), 2..40u64).prop_map(|(input, keys)| Part::Count { input, keys }),
        (any::<usize>(), any::<usize>(), 2..40u64).prop_map(|(left, right, keys)| Part::Join {
            left,
            right,
            keys
        }),
    ];
    (
        prop::collection::vec(source, 1..=3),
        prop::collection::vec(other, 0..=5),
    )
        .prop_map(|(mut sources, others)| {
            sources.extend(others);
            sources
        })
}

/// The graph of `parts`, a [`Keep`] sink (into `kept`) after every part nothing else reads.
fn random_graph(parts: &[Part], kept: &Kept) -> Graph {
    let mut g = GraphBuilder::new("random");
    let one = || Ports::new().input::<u64>().output::<u64>();
    let mut handles = Vec::new();
    let mut read = vec![false; parts.len()];
    for (i, part) in parts.iter().enumerate() {
        let name = format!("p{i}");
        let mut upstream = |input: usize| {
            let from = input % i.max(1);
            read[from] = true;
            from
        };
        let (handle, inputs) = match *part {
            Part::Source {
                first,
                step,
                count,
                batch,
            } => {
                let source = g.source(&name, Ports::new().output::<u64>(), move |_| Stride {
                    next: first,
                    step,
                    limit: first + step * count,
                    batch,
                    pause: Duration::from_millis(1),
                });
                (source, vec![])
            }
            Part::Map { input, factor } => {
                let map = g.operator(&name, one(), move |_| Times(factor));
                (map, vec![upstream(input)])
            }
            Part::Count { input, keys } => {
                let count = g.operator(&name, one(), move |_| Tally::new(keys));
                (count, vec![upstream(input)])
            }
            Part::Join { left, right, keys } => {
                let ports = Ports::new().input::<u64>().input::<u64>().output::<u64>();
                let join = g.operator(&name, ports, move |_| Tally::new(keys));
                (join, vec![upstream(left), upstream(right)])
            }
        };
        for (port, from) in inputs.into_iter().enumerate() {
            let from: sluice_graph::OperatorHandle = handles[from];
            g.connect(from.out(0), handle.input(port)).unwrap();
        }
        handles.push(handle);
    }
    for (i, handle) in handles.iter().enumerate().filter(|&(i, _)| !read[i]) {
        let kept = kept.clone();
        let keep = g.operator(
            &format!("keep{i}"),
            Ports::new().input::<u64>(),
            move |_| Keep::new(&kept, i),
        );
        g.connect(handle.out(0), keep.input(0)).unwrap();
    }
    g.build().unwrap()
}

/// Whether no sink had finished at the checkpoint whose state is `state`: a sink that did
/// published its output in the run that took it (and resumes finished, publishing nothing),
/// which the test, starting each run with an empty list, does not keep.
fn sinks_running(state: &JobState) -> bool {
    state
        .operators
        .iter()
        .filter(|(name, _)| name.starts_with("keep"))
        .all(|(_, instances)| instances.iter().all(|i| !i.finished))
}

/// The plan `threaded` names: a thread per instance, or one thread for all.
fn fused_or_threaded(threaded: bool) -> PlanRequest {
    if threaded {
        PlanRequest::Threaded
    } else {
        PlanRequest::Fused
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// A random graph on a random plan takes checkpoints (aligned or not) while it runs;
    /// resumed on a random plan from a random complete checkpoint taken while its sinks ran
    /// (the moment a failure would have rolled it back to), it ends with the output of a run
    /// never interrupted.
    #[test]
    fn a_random_graph_resumed_from_a_random_checkpoint_ends_as_one_never_interrupted(
        parts in random_parts(),
        first_threaded in any::<bool>(),
        again_threaded in any::<bool>(),
        unaligned in any::<bool>(),
        pick in any::<prop::sample::Index>(),
    ) {
        let kept = Arc::new(Mutex::new(Vec::new()));
        let graph = random_graph(&parts, &kept);
        let expected = fused_output(&graph, &kept);

        let request = fused_or_threaded(first_threaded);
        let plan = planned(&graph, &request);
        let parts_taken = Arc::new(Parts::default());
        run(&graph, &plan, None, Some(parts_taken.clone()), unaligned).unwrap();
        prop_assert_eq!(&sorted(&kept), &expected, "checkpoints change no output");

        let mid_stream: Vec<(u64, JobState)> = parts_taken
            .every_complete(plan.instances.len())
            .into_iter()
            .filter(|(_, s)| sinks_running(s))
            .collect();
        prop_assume!(!mid_stream.is_empty(), "no checkpoint completed with every sink running");
        let (n, state) = pick.get(&mid_stream);
        let again = fused_or_threaded(again_threaded);
        run(&graph, &planned(&graph, &again), Some(state), None, false).unwrap();
        prop_assert_eq!(
            &sorted(&kept),
            &expected,
            "{:?} (unaligned: {}) resumed from checkpoint {} on {:?}",
            request,
            unaligned,
            n,
            again
        );
    }
}
