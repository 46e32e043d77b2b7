//! The data plane on its own, without the control plane: a small graph assembled on threads of
//! this process (every PE of its plan, [`Scope::All`]), its flags set as a launcher would set
//! them. A stop drains every tuple already emitted; a suspension keeps every source's position
//! and every instance's state, and the job resumed from it loses and repeats nothing.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_exec::assemble::{self, Scope, Sites, Watched};
use sluice_exec::control::JobControl;
use sluice_exec::watch::wait_threads;
use sluice_exec::{JobReport, JobState, RunError, RunOptions};
use sluice_graph::{
    expect_tuple, Graph, GraphBuilder, Operator, OperatorError, Output, Ports, Produced, Snapshot,
    Source,
};
use sluice_plan::{plan, PhysicalPlan, PlanOptions, PlanRequest};
use sluice_transport::tcp::JobSecret;
use sluice_types::TupleRef;

/// The longest any job of these tests may run before the test gives up on it.
const WATCHDOG: Duration = Duration::from_secs(60);

/// Counts up from where it is, 64 numbers a call, until `limit` (never, if `None`); keeps its
/// position across a suspension.
struct Counter {
    next: u64,
    limit: Option<u64>,
    /// How many it emitted in all when it finished.
    emitted: Arc<Mutex<Option<u64>>>,
}

impl Source for Counter {
    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        if self.limit.is_some_and(|limit| self.next >= limit) {
            return Ok(Produced::Exhausted);
        }
        for _ in 0..64 {
            out.emit(0, self.next)?;
            self.next += 1;
        }
        Ok(Produced::Emitted(64))
    }

    fn finish(&mut self, _: &mut Output<'_>) -> Result<(), OperatorError> {
        *self.emitted.lock().unwrap() = Some(self.next);
        Ok(())
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

/// Keeps every number it receives, in order, in a list shared with the test.
struct Keep(Arc<Mutex<Vec<u64>>>);

impl Operator for Keep {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.0
            .lock()
            .unwrap()
            .push(*expect_tuple::<u64>(port, tuple)?);
        Ok(())
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        // What it received lives in the test's list; its state is empty but it resumes.
        Ok(Snapshot::default())
    }
}

/// Adds one: an operator between the source and the sink, on a thread of its own under the
/// threaded plan.
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

/// counter -> add one -> keep, and what the counter emitted and the sink kept.
struct Counting {
    graph: Graph,
    emitted: Arc<Mutex<Option<u64>>>,
    kept: Arc<Mutex<Vec<u64>>>,
}

fn counting(limit: Option<u64>) -> Counting {
    let emitted = Arc::new(Mutex::new(None));
    let kept = Arc::new(Mutex::new(Vec::new()));
    let mut g = GraphBuilder::new("counting");
    let counter_emitted = emitted.clone();
    let source = g.source("counter", Ports::new().output::<u64>(), move |_| Counter {
        next: 0,
        limit,
        emitted: counter_emitted.clone(),
    });
    let add = g.operator(
        "add-one",
        Ports::new().input::<u64>().output::<u64>(),
        |_| AddOne,
    );
    let sink_kept = kept.clone();
    let sink = g.operator("keep", Ports::new().input::<u64>(), move |_| {
        Keep(sink_kept.clone())
    });
    g.connect(source.out(0), add.input(0)).unwrap();
    g.connect(add.out(0), sink.input(0)).unwrap();
    Counting {
        graph: g.build().unwrap(),
        emitted,
        kept,
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

/// A job's threads, started: what the control plane does for a job run in process.
struct Started {
    control: Arc<JobControl>,
    workers: Vec<sluice_exec::watch::Worker>,
    began: Instant,
}

fn start(graph: &Graph, plan: &PhysicalPlan, resume: Option<&JobState>) -> Started {
    let options = RunOptions {
        suspendable: true,
        ..RunOptions::default()
    };
    let sites = Sites::new(
        format!("exec-threads-{}", std::process::id()),
        JobSecret::random().unwrap(),
    );
    let bound = assemble::bind(graph, plan, Scope::All, &sites).unwrap();
    let control = Arc::new(JobControl::new(true));
    // Each instance takes its state out of the job's: the caller's stays as it was.
    let mut resume = resume.cloned();
    let watched = Watched {
        control: &control,
        metrics: None,
        resume: resume.as_mut(),
    };
    let workers =
        assemble::start(graph, plan, Scope::All, &sites, bound, &options, watched).unwrap();
    Started {
        control,
        workers,
        began: Instant::now(),
    }
}

impl Started {
    /// Waits for the threads to end; `tick` runs every round of the wait (it may stop or
    /// suspend the job). The watchdog aborts a job that runs too long.
    fn wait(self, mut tick: impl FnMut(&JobControl)) -> Result<JobReport, RunError> {
        let Self {
            control,
            workers,
            began,
        } = self;
        let options = RunOptions::default();
        let instances = wait_threads(workers, &control, &options, || {
            tick(&control);
            if began.elapsed() > WATCHDOG {
                control.abort();
            }
        });
        assert!(began.elapsed() <= WATCHDOG, "the watchdog ended the job");
        match control.take_error() {
            Some(error) => Err(error),
            None => Ok(JobReport::new(began.elapsed(), instances)),
        }
    }
}

/// Once the sink has kept at least `enough` numbers, `act` on the job's control, once.
fn when_kept(
    kept: &Arc<Mutex<Vec<u64>>>,
    enough: usize,
    act: fn(&JobControl),
) -> impl FnMut(&JobControl) {
    let kept = kept.clone();
    let mut done = false;
    move |control| {
        if !done && kept.lock().unwrap().len() >= enough {
            act(control);
            done = true;
        }
    }
}

fn suspend(control: &JobControl) {
    control.request_suspend();
    control.request_stop();
}

#[test]
fn a_stop_drains_every_emitted_tuple() {
    for request in [PlanRequest::Fused, PlanRequest::Threaded] {
        let job = counting(None);
        let p = planned(&job.graph, &request);
        let report = start(&job.graph, &p, None)
            .wait(when_kept(&job.kept, 10_000, JobControl::request_stop))
            .unwrap();
        let emitted = job.emitted.lock().unwrap().expect("the source finished");
        let kept = job.kept.lock().unwrap().clone();
        assert!(emitted >= 10_000, "{request:?}: stopped before it began");
        assert!(
            kept.iter().copied().eq(1..=emitted),
            "{request:?}: every emitted tuple arrived, in order: {} of {emitted}",
            kept.len()
        );
        assert_eq!(report.tuples_in("keep"), emitted, "{request:?}");
        assert!(
            report.state().is_none(),
            "{request:?}: a stop keeps no state"
        );
    }
}

#[test]
fn a_suspended_job_resumed_on_another_plan_loses_and_repeats_nothing() {
    const LIMIT: u64 = 200_000;
    for (first, second) in [
        (PlanRequest::Threaded, PlanRequest::Fused),
        (PlanRequest::Fused, PlanRequest::Threaded),
    ] {
        let job = counting(Some(LIMIT));
        let before = start(&job.graph, &planned(&job.graph, &first), None)
            .wait(when_kept(&job.kept, 1_000, suspend))
            .unwrap();
        let state = before.state().expect("a suspended job leaves its state");
        let kept_before = job.kept.lock().unwrap().len() as u64;
        assert!(
            job.emitted.lock().unwrap().is_none(),
            "{first:?}: a suspended source does not finish"
        );
        assert!(
            kept_before < LIMIT,
            "{first:?}: suspended before the source ended"
        );
        start(&job.graph, &planned(&job.graph, &second), Some(&state))
            .wait(|_| {})
            .unwrap();
        let kept = job.kept.lock().unwrap().clone();
        assert!(
            kept.iter().copied().eq(1..=LIMIT),
            "{first:?} then {second:?}: every number once, in order ({} kept)",
            kept.len()
        );
        assert_eq!(job.emitted.lock().unwrap().as_ref(), Some(&LIMIT));
    }
}

#[test]
fn a_plan_with_more_threads_than_cores_runs_on_a_polling_worker_a_core_by_default() {
    // A multiple of the 64 numbers the counter emits a call.
    const LIMIT: u64 = 64 * 800;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // counter -> add-one x cores -> keep: two threads more than cores under `threaded`.
    let emitted = Arc::new(Mutex::new(None));
    let kept = Arc::new(Mutex::new(Vec::new()));
    let mut g = GraphBuilder::new("chain");
    let counter_emitted = emitted.clone();
    let mut last = g
        .source("counter", Ports::new().output::<u64>(), move |_| Counter {
            next: 0,
            limit: Some(LIMIT),
            emitted: counter_emitted.clone(),
        })
        .out(0);
    for i in 0..cores {
        let add = g.operator(
            &format!("add-{i}"),
            Ports::new().input::<u64>().output::<u64>(),
            |_| AddOne,
        );
        g.connect(last, add.input(0)).unwrap();
        last = add.out(0);
    }
    let sink_kept = kept.clone();
    let sink = g.operator("keep", Ports::new().input::<u64>(), move |_| {
        Keep(sink_kept.clone())
    });
    g.connect(last, sink.input(0)).unwrap();
    let graph = g.build().unwrap();
    let p = planned(&graph, &PlanRequest::Threaded);
    assert_eq!(p.threads().count(), cores + 2);
    let job = start(&graph, &p, None);
    assert_eq!(job.workers.len(), cores, "one polling worker a core");
    job.wait(|_| {}).unwrap();
    let shift = cores as u64;
    assert!(
        kept.lock()
            .unwrap()
            .iter()
            .copied()
            .eq(shift..LIMIT + shift),
        "every number once, in order, each added one to {cores} times"
    );
    assert_eq!(emitted.lock().unwrap().as_ref(), Some(&LIMIT));
}
