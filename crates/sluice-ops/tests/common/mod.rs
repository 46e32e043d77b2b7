//! What the sources', sinks' and operators' tests share: running a graph under a plan (in this
//! process or with the plan's PEs as threads, behind a watchdog), running a one-source graph
//! into a sink, collecting what arrived, and a watchdog for the tests that could hang.

#![allow(dead_code)] // each test binary uses its own part of this module

use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_graph::{
    expect_tuple, Graph, GraphBuilder, Operator, OperatorError, Output, OutputSink, OwnedTuple,
    Ports, Source, Timer,
};
use sluice_ops::{Collect, Collected, Dataflow};
use sluice_plan::{plan, PlanOptions, PlanRequest};
use sluice_runtime::{run, start, JobReport, Launcher, RunError, RunOptions};
use sluice_types::{Tuple, TupleRef};

/// The outputs of a sink driven by hand: it has none, so anything emitted is an error.
pub struct NoOutputs;

impl OutputSink for NoOutputs {
    fn emit(&mut self, port: usize, _: &mut dyn OwnedTuple) -> Result<(), OperatorError> {
        Err(OperatorError::NoSuchPort { port, count: 0 })
    }
    fn punctuate(&mut self, port: usize) -> Result<(), OperatorError> {
        Err(OperatorError::NoSuchPort { port, count: 0 })
    }
    fn watermark(&mut self, _: u64) -> Result<(), OperatorError> {
        Ok(())
    }
    fn set_timer(&mut self, _: Timer) {}
}

/// Two cores and small queues, so tests see backpressure.
fn small() -> PlanOptions {
    PlanOptions {
        cores: 2,
        queue_capacity: 64,
        ..PlanOptions::default()
    }
}

/// Runs `graph` under `request` on two cores with small queues.
pub fn run_under(graph: &Graph, request: &PlanRequest) -> Result<JobReport, RunError> {
    let p = plan(graph, request, &small()).expect("plan");
    run(graph, &p, &RunOptions::default())
}

/// The fused, threaded and processes plans.
pub fn every_plan() -> [PlanRequest; 3] {
    [
        PlanRequest::Fused,
        PlanRequest::Threaded,
        PlanRequest::Processes,
    ]
}

/// Longest a job run by [`run_in_process`] may take before the test reports it as hung.
pub const JOB_WATCHDOG: Duration = Duration::from_secs(60);

/// Runs `graph` under `request` with every PE as threads of this process (edges between PEs
/// still go through shared memory); stops the job and fails the test if it has not ended
/// within [`JOB_WATCHDOG`].
pub fn run_in_process(graph: &Graph, request: &PlanRequest) -> Result<JobReport, RunError> {
    run_planned(graph, request, &PlanOptions::default())
}

/// Builds `flow` and runs it as [`run_in_process`] does, with two cores and small queues;
/// fails the test if the job fails.
pub fn run_flow(flow: &Dataflow, request: &PlanRequest) -> JobReport {
    let graph = flow.build().expect("a valid dataflow");
    run_planned(&graph, request, &small()).unwrap_or_else(|e| panic!("{request:?}: {e}"))
}

fn run_planned(
    graph: &Graph,
    request: &PlanRequest,
    options: &PlanOptions,
) -> Result<JobReport, RunError> {
    let physical = plan(graph, request, options).expect("plan");
    let options = RunOptions {
        launcher: Launcher::InProcess,
        ..RunOptions::default()
    };
    let job = start(graph, &physical, &options)?;
    let stop = job.stop_handle();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(job.wait());
    });
    rx.recv_timeout(JOB_WATCHDOG).unwrap_or_else(|_| {
        stop.stop();
        panic!("the job did not end within {JOB_WATCHDOG:?} under {request:?}")
    })
}

/// Every tuple `into` holds, taking them out, instance by instance.
pub fn drain<T>(into: &Collected<T>) -> Vec<T> {
    into.lock()
        .expect("sink lock")
        .drain(..)
        .flat_map(|(_, v)| v)
        .collect()
}

/// `source` (named "source") feeding `sink` (named "sink"), both with parallelism 1.
pub fn source_into<T, S, K>(
    source: impl Fn() -> S + Send + Sync + 'static,
    sink: impl Fn() -> K + Send + Sync + 'static,
) -> Graph
where
    T: Tuple,
    S: Source + 'static,
    K: Operator + 'static,
{
    let mut g = GraphBuilder::new("io");
    let src = g.source("source", Ports::new().output::<T>(), move |_| source());
    let snk = g.operator("sink", Ports::new().input::<T>(), move |_| sink());
    g.connect(src.out(0), snk.input(0)).expect("connect");
    g.build().expect("a valid graph")
}

/// Runs `source` into a [`Collect`] sink under `request`: what arrived, and the report.
pub fn collect<T, S>(
    source: impl Fn() -> S + Send + Sync + 'static,
    request: &PlanRequest,
) -> Result<(Vec<T>, JobReport), RunError>
where
    T: Tuple,
    S: Source + 'static,
{
    let into: Collected<T> = Default::default();
    let sink_into = into.clone();
    let graph = source_into::<T, _, _>(source, move || Collect::new(sink_into.clone()));
    let report = run_under(&graph, request)?;
    Ok((drain(&into), report))
}

/// The counter `name` of operator `operator` in `report` (0 when absent).
pub fn counter(report: &JobReport, operator: &str, name: &str) -> u64 {
    report
        .operator_report(operator)
        .counters
        .get(name)
        .copied()
        .unwrap_or(0)
}

/// Ends the test process with a message if it is still running after `limit`; disarmed when
/// dropped.
pub struct Watchdog(mpsc::Sender<()>);

impl Watchdog {
    /// Arms a watchdog for the test `name`.
    pub fn arm(name: &'static str, limit: Duration) -> Self {
        let (disarm, disarmed) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = disarmed.recv_timeout(limit) {
                eprintln!("watchdog: {name} still running after {limit:?}");
                std::process::exit(2);
            }
        });
        Self(disarm)
    }
}

/// A sink pushing each tuple into a vector the test reads while the job runs.
pub struct Gather<T>(pub Arc<Mutex<Vec<T>>>);

impl<T: Tuple> Operator for Gather<T> {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let tuple = expect_tuple::<T>(port, tuple)?.clone();
        self.0.lock().expect("gathered lock").push(tuple);
        Ok(())
    }
}

/// Waits until `gathered` holds `n` tuples (false if it does not within `limit`).
pub fn wait_for<T>(gathered: &Mutex<Vec<T>>, n: usize, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while gathered.lock().expect("gathered lock").len() < n {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}
