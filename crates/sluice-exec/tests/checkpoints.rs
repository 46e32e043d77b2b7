//! Checkpoints in the data plane alone: a job of two sources joined by a stateful operator
//! takes checkpoints while it runs (its flags set as the control plane's coordinator sets
//! them), and the job resumed from any complete checkpoint, on any plan, ends with exactly the
//! output of a run without one: barriers aligned, nothing lost, nothing counted twice.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_exec::assemble::{self, Scope, Sites, Watched};
use sluice_exec::checkpoint::{CheckpointPart, CheckpointSink};
use sluice_exec::control::JobControl;
use sluice_exec::watch::wait_threads;
use sluice_exec::{CheckpointOptions, JobState, RunError, RunOptions};
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

/// Emits `first`, `first + step`, ... below `LIMIT`, 32 a call; keeps its position.
struct Stride {
    next: u64,
    step: u64,
}

impl Source for Stride {
    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let mut n = 0;
        while n < 32 && self.next < LIMIT {
            out.emit(0, self.next)?;
            self.next += self.step;
            n += 1;
        }
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

/// Counts each number's key per input port; at the end emits one number per (port, key):
/// `port * 10^12 + key * 10^6 + count`.
#[derive(Default)]
struct Tally {
    counts: BTreeMap<(usize, u64), u64>,
}

impl Operator for Tally {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let n = *expect_tuple::<u64>(port, tuple)?;
        *self.counts.entry((port, n % KEYS)).or_default() += 1;
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

/// Keeps what it receives in a list shared with the test.
struct Keep(Arc<Mutex<Vec<u64>>>);

impl Operator for Keep {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let n = *expect_tuple::<u64>(port, tuple)?;
        self.0.lock().unwrap().push(n);
        Ok(())
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Ok(Snapshot::default())
    }
}

/// evens and odds (two sources) -> add one (on the odds) -> tally (two ports) -> keep.
fn joined(kept: &Arc<Mutex<Vec<u64>>>) -> Graph {
    let mut g = GraphBuilder::new("joined");
    let evens = g.source("evens", Ports::new().output::<u64>(), |_| Stride {
        next: 0,
        step: 2,
    });
    let odds = g.source("odds", Ports::new().output::<u64>(), |_| Stride {
        next: 1,
        step: 2,
    });
    let add = g.operator(
        "add-one",
        Ports::new().input::<u64>().output::<u64>(),
        |_| AddOne,
    );
    let tally = g.operator(
        "tally",
        Ports::new().input::<u64>().input::<u64>().output::<u64>(),
        |_| Tally::default(),
    );
    let kept = kept.clone();
    let keep = g.operator("keep", Ports::new().input::<u64>(), move |_| {
        Keep(kept.clone())
    });
    g.connect(evens.out(0), tally.input(0)).unwrap();
    g.connect(odds.out(0), add.input(0)).unwrap();
    g.connect(add.out(0), tally.input(1)).unwrap();
    g.connect(tally.out(0), keep.input(0)).unwrap();
    g.build().unwrap()
}

/// Adds one.
struct AddOne;

impl Operator for AddOne {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        out.emit(0, expect_tuple::<u64>(port, tuple)? + 1)
    }
}

fn planned(graph: &Graph, request: &PlanRequest) -> PhysicalPlan {
    let options = PlanOptions {
        cores: 2,
        queue_capacity: 64,
        ..PlanOptions::default()
    };
    plan(graph, request, &options).unwrap()
}

/// One checkpoint's parts, by (operator, instance).
type PartsOf = BTreeMap<(String, usize), CheckpointPart>;

/// The parts handed over: per checkpoint, each instance's state by (operator, instance);
/// and the instances that finished, from which checkpoint on.
#[derive(Default)]
struct Parts {
    taken: Mutex<BTreeMap<u64, PartsOf>>,
    finished: Mutex<Vec<CheckpointPart>>,
}

impl CheckpointSink for Parts {
    fn part(&self, part: CheckpointPart) {
        if part.state.finished {
            self.finished.lock().unwrap().push(part);
            return;
        }
        let key = (part.operator.clone(), part.instance);
        self.taken
            .lock()
            .unwrap()
            .entry(part.n)
            .or_default()
            .insert(key, part);
    }
}

impl Parts {
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
        for part in self.finished.lock().unwrap().iter().filter(|p| p.n <= n) {
            parts.insert((part.operator.clone(), part.instance), part.clone());
        }
        (parts.len() == instances).then(|| {
            let mut state = JobState::default();
            for ((operator, instance), part) in parts {
                let states = state.operators.entry(operator).or_default();
                states.resize_with(states.len().max(instance + 1), Default::default);
                states[instance] = part.state;
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
    // The directory is the control plane's; the data plane reads the mode alone.
    let dir: &'static std::path::Path = Box::leak(std::env::temp_dir().into_boxed_path());
    let options = RunOptions {
        checkpoints: Some(CheckpointOptions {
            unaligned,
            ..CheckpointOptions::new(Duration::from_millis(1), dir)
        }),
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
    let watched = Watched {
        control: &control,
        metrics: None,
        resume,
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

fn sorted(kept: &Arc<Mutex<Vec<u64>>>) -> Vec<u64> {
    let mut v = std::mem::take(&mut *kept.lock().unwrap());
    v.sort_unstable();
    v
}

#[test]
fn a_job_resumed_from_any_aligned_checkpoint_ends_as_one_never_interrupted() {
    resumed_from_any_checkpoint(false);
}

#[test]
fn a_job_resumed_from_any_unaligned_checkpoint_ends_as_one_never_interrupted() {
    resumed_from_any_checkpoint(true);
}

/// Runs the job on two plans taking checkpoints (`unaligned` or not), and resumes it from
/// several of them on the other plan: each ends with the output of a run without any.
fn resumed_from_any_checkpoint(unaligned: bool) {
    let kept = Arc::new(Mutex::new(Vec::new()));
    let graph = joined(&kept);
    run(
        &graph,
        &planned(&graph, &PlanRequest::Fused),
        None,
        None,
        false,
    )
    .unwrap();
    let expected = sorted(&kept);
    assert_eq!(expected.len() as u64, 2 * KEYS, "every key of both ports");

    for (request, again) in [
        (PlanRequest::Threaded, PlanRequest::Fused),
        (PlanRequest::Fused, PlanRequest::Threaded),
    ] {
        let parts = Arc::new(Parts::default());
        run(
            &graph,
            &planned(&graph, &request),
            None,
            Some(parts.clone()),
            unaligned,
        )
        .unwrap();
        assert_eq!(
            sorted(&kept),
            expected,
            "{request:?}: checkpoints change no output"
        );
        let instances = planned(&graph, &request).instances.len();
        let last = parts
            .taken
            .lock()
            .unwrap()
            .keys()
            .max()
            .copied()
            .unwrap_or(0);
        let complete: Vec<(u64, JobState)> = (1..=last)
            .filter_map(|n| parts.complete(n, instances).map(|state| (n, state)))
            .collect();
        assert!(
            complete.len() >= 2,
            "{request:?}: checkpoints were taken while it ran ({})",
            complete.len()
        );
        // Once the tally finished, its output was the first run's: resume from before.
        let mid_stream: Vec<&(u64, JobState)> = complete
            .iter()
            .filter(|(_, s)| s.operators["tally"].iter().all(|i| !i.finished))
            .collect();
        assert!(
            !mid_stream.is_empty(),
            "{request:?}: a checkpoint in mid-stream"
        );
        if unaligned && request == PlanRequest::Threaded {
            // The tally's inputs come from two threads: their barriers arrive apart, and
            // what came between them is kept with its state.
            let kept_in_flight = mid_stream
                .iter()
                .any(|(_, s)| s.operators["tally"].iter().any(|i| !i.in_flight.is_empty()));
            assert!(
                kept_in_flight,
                "an unaligned checkpoint kept tuples in flight"
            );
        }
        // The first, the middle and the last of them.
        let picks = [0, mid_stream.len() / 2, mid_stream.len() - 1];
        for (n, state) in picks.iter().map(|&i| mid_stream[i]) {
            run(&graph, &planned(&graph, &again), Some(state), None, false).unwrap();
            assert_eq!(
                sorted(&kept),
                expected,
                "{request:?}, resumed from checkpoint {n} on {again:?}"
            );
        }
    }
}
