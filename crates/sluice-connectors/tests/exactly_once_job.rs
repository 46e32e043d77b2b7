//! Exactly-once file output in a running job (the data plane's checkpoints, their flags set as
//! the control plane's coordinator sets them): a generator into each file sink, checkpoints
//! taken while it runs; then, after that run published its whole file, the job resumed from a
//! checkpoint taken in mid-stream, as after a failure past the end of the input. The file
//! equals that of a run without checkpoints, every time.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_connectors::{ByteTarget, CsvFormat, CsvSink, StreamSink, TableSink};
use sluice_exec::assemble::{self, Scope, Sites, Watched};
use sluice_exec::checkpoint::{CheckpointPart, CheckpointSink};
use sluice_exec::control::JobControl;
use sluice_exec::watch::wait_threads;
use sluice_exec::{InstanceState, JobState, RunOptions};
use sluice_graph::{Graph, GraphBuilder, Operator, Ports};
use sluice_ops::Generator;
use sluice_plan::{plan, PhysicalPlan, PlanOptions, PlanRequest};
use sluice_transport::tcp::JobSecret;
use sluice_types::{CompactString, Tuple};

/// The longest any job of these tests may run before the test gives up on it.
const WATCHDOG: Duration = Duration::from_secs(60);
/// Tuples the generator makes.
const TUPLES: u64 = 200_000;

/// generate -> sink, the sink made by `sink` writing to `path`.
fn graph<T: Tuple, O: Operator + 'static>(
    path: &Path,
    make: fn(u64) -> T,
    sink: fn(&Path) -> O,
) -> Graph {
    let mut g = GraphBuilder::new("exactly-once");
    let source = g.source("generate", Ports::new().output::<T>(), move |_| {
        Generator::new(move |i| Some(make(i))).count(TUPLES)
    });
    let path = path.to_path_buf();
    let sink = g.operator("sink", Ports::new().input::<T>(), move |_| sink(&path));
    g.connect(source.out(0), sink.input(0)).unwrap();
    g.build().unwrap()
}

/// The instances' parts of one checkpoint, by (operator, instance).
type PartsOf = BTreeMap<(String, usize), InstanceState>;

/// The parts handed over, by checkpoint; a finished instance's part stands for its checkpoint
/// and every later one.
#[derive(Default)]
struct Parts(Mutex<BTreeMap<u64, PartsOf>>);

impl CheckpointSink for Parts {
    fn part(&self, part: CheckpointPart) {
        let (n, key) = (part.n, (part.operator.clone(), part.instance));
        let state = part.into_state().unwrap();
        self.0
            .lock()
            .unwrap()
            .entry(n)
            .or_default()
            .insert(key, state);
    }
}

impl Parts {
    /// Checkpoint `n`'s state, if every one of `instances` has its part in it.
    fn complete(&self, n: u64, instances: usize) -> Option<JobState> {
        let parts = self.0.lock().unwrap();
        let mut state = PartsOf::new();
        for (_, taken) in parts.range(..n) {
            let finished = taken.iter().filter(|(_, s)| s.finished);
            state.extend(finished.map(|(k, s)| (k.clone(), s.clone())));
        }
        state.extend(parts.get(&n)?.clone());
        (state.len() == instances).then(|| {
            let mut job = JobState::default();
            for ((operator, _), instance) in state {
                job.operators.entry(operator).or_default().push(instance);
            }
            job
        })
    }
}

/// Runs the job on `plan`, from `resume` if given; with `parts`, takes a checkpoint whenever
/// the last one is complete, as the coordinator does.
fn run(graph: &Graph, plan: &PhysicalPlan, resume: Option<&JobState>, parts: Option<Arc<Parts>>) {
    let options = RunOptions::default();
    // A name of its own for each job: the tests run at once, in one process.
    static JOBS: AtomicUsize = AtomicUsize::new(0);
    // SYNC: Relaxed, no partner: the count only makes names unique.
    let job = JOBS.fetch_add(1, Ordering::Relaxed);
    let sites = Sites::new(
        format!("ops-exactly-once-{}-{job}", std::process::id()),
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
    let workers = assemble::start(graph, plan, Scope::All, &sites, bound, &options, watched);
    let began = Instant::now();
    let mut asked = 0;
    wait_threads(workers.unwrap(), &control, &options, || {
        if let Some(parts) = &parts {
            if asked == 0 || parts.complete(asked, plan.instances.len()).is_some() {
                control.complete_checkpoint(asked);
                asked += 1;
                control.trigger_checkpoint(asked);
            }
        }
        if began.elapsed() > WATCHDOG {
            control.abort();
        }
    });
    if let Some(error) = control.take_error() {
        panic!("the job failed: {error}");
    }
}

/// Checks that the file `sink` writes is the same with checkpoints, and resumed from the
/// first or the last checkpoint taken in mid-stream after the whole file was published (a
/// run each: a job recovers from its last complete checkpoint, never from one before it).
fn check<T: Tuple, O: Operator + 'static>(make: fn(u64) -> T, sink: fn(&Path) -> O) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.txt");
    let graph = graph(&path, make, sink);
    let options = PlanOptions {
        cores: 2,
        queue_capacity: 64,
        ..PlanOptions::default()
    };
    let fused = plan(&graph, &PlanRequest::Fused, &options).unwrap();
    run(&graph, &fused, None, None);
    let expected = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();

    let threaded = plan(&graph, &PlanRequest::Threaded, &options).unwrap();
    for last in [false, true] {
        let parts = Arc::new(Parts::default());
        run(&graph, &threaded, None, Some(parts.clone()));
        assert!(
            std::fs::read(&path).unwrap() == expected,
            "with checkpoints"
        );
        let taken = parts.0.lock().unwrap().keys().max().copied().unwrap_or(0);
        let mut mid_stream = (1..=taken)
            .filter_map(|n| Some(n).zip(parts.complete(n, threaded.instances.len())))
            .filter(|(_, state)| !state.operators["sink"][0].finished);
        let picked = if last {
            mid_stream.next_back()
        } else {
            mid_stream.next()
        };
        let (n, state) = picked.expect("a checkpoint in mid-stream");
        run(&graph, &fused, Some(&state), None);
        assert!(
            std::fs::read(&path).unwrap() == expected,
            "resumed from checkpoint {n}"
        );
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no part file is left");
    }
}

#[test]
fn lines_are_exactly_once() {
    check(
        |i| i,
        |path| StreamSink::<u64, _>::lines(ByteTarget::file(path)),
    );
}

#[test]
fn csv_records_are_exactly_once() {
    check(
        |i| (i, i * 3),
        |path| {
            CsvSink::<(u64, u64)>::csv(
                ByteTarget::file(path),
                CsvFormat {
                    has_headers: false,
                    delimiter: b';',
                },
            )
        },
    );
}

#[test]
fn the_table_is_exactly_once() {
    check(
        |i| (CompactString::from(format!("k{}", i % 1000)), i),
        |path| TableSink::<CompactString, u64>::new(Some(path.to_path_buf())),
    );
}
