//! Suspending a running job and resuming it on another plan (the redeploy of on-line
//! placement): no tuple lost or repeated, every key's state carried to where the key now
//! lives, between threads and between PEs joined by shared memory, with the same or another
//! parallelism.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_connectors::{ByteTarget, StreamSink};
use sluice_graph::{Graph, GraphBuilder, Partitioning, Ports};
use sluice_ops::{collected, Collect, Collected, Generator, RollingAggregate, Sum};
use sluice_plan::{plan, PhysicalPlan, PlanOptions, PlanRequest};
use sluice_runtime::{resume_with, start, JobReport, Launcher, RunError, RunOptions, StopHandle};
use sluice_types::partition_hash;

/// Numbers 0..N as (key, n) with key n mod KEYS.
const N: u64 = 60_000;
const KEYS: u64 = 7;

/// numbers -> key-by -> running sum per key (`sums` instances) -> one collecting sink.
fn job(sums: usize, into: &Collected<(u64, u64)>) -> Graph {
    let mut g = GraphBuilder::new("sums");
    let numbers = g.source("numbers", Ports::new().output::<(u64, u64)>(), |_| {
        Generator::new(|n| Some((n % KEYS, n)))
            .count(N)
            .rate(100_000)
    });
    let sum = g.operator(
        "sum",
        Ports::new().input::<(u64, u64)>().output::<(u64, u64)>(),
        |_| RollingAggregate::new(|t: &(u64, u64)| &t.0, Sum::new(|t: &(u64, u64)| t.1)),
    );
    g.set_parallelism(sum, sums).unwrap();
    let into = into.clone();
    let sink = g.operator("sink", Ports::new().input::<(u64, u64)>(), move |_| {
        Collect::new(into.clone())
    });
    g.connect_with(
        numbers.out(0),
        sum.input(0),
        Partitioning::by_hash(|t: &(u64, u64)| partition_hash(&t.0)),
    )
    .unwrap();
    g.connect(sum.out(0), sink.input(0)).unwrap();
    g.build().unwrap()
}

fn planned(graph: &Graph, request: PlanRequest) -> PhysicalPlan {
    let options = PlanOptions {
        cores: 2,
        queue_capacity: 64,
        ..PlanOptions::default()
    };
    plan(graph, &request, &options).unwrap()
}

fn options(launcher: Launcher) -> RunOptions {
    RunOptions {
        launcher,
        suspendable: true,
        ..RunOptions::default()
    }
}

/// Runs `first` for a while, suspends it, and resumes it on `second` to the end; returns
/// both runs' reports merged and whether the suspension came before the end.
fn suspend_and_resume(
    (first, first_plan): (&Graph, &PhysicalPlan),
    (second, second_plan): (&Graph, &PhysicalPlan),
    launcher: Launcher,
) -> JobReport {
    let job = start(first, first_plan, &options(launcher)).unwrap();
    std::thread::sleep(Duration::from_millis(150));
    job.stop_handle().suspend();
    let mut report = job.wait().unwrap();
    let state = report.state().expect("a suspended job leaves its state");
    assert!(
        report.tuples_out("numbers") < N,
        "suspended before the source ended"
    );
    let resumed = resume_with(
        second,
        second_plan,
        &options(launcher),
        &StopHandle::new(),
        &state,
    )
    .unwrap();
    report.absorb(resumed.wait().unwrap());
    report
}

/// Every key's running sums, in order, exactly once each.
fn check_sums(into: &Collected<(u64, u64)>, report: &JobReport) {
    let mut per_key: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (key, sum) in collected(into) {
        per_key.entry(key).or_default().push(sum);
    }
    for key in 0..KEYS {
        let mut running = 0;
        let expected: Vec<u64> = (key..N)
            .step_by(KEYS as usize)
            .map(|n| {
                running += n;
                running
            })
            .collect();
        assert_eq!(per_key.get(&key), Some(&expected), "key {key}");
    }
    assert_eq!(report.tuples_out("numbers"), N);
    assert_eq!(report.tuples_in("sink"), N);
    assert!(report.state().is_none(), "the resumed run ended");
}

#[test]
fn a_job_resumed_on_another_plan_loses_and_repeats_nothing() {
    let into = Collected::default();
    let graph = job(2, &into);
    let threaded = planned(&graph, PlanRequest::Threaded);
    let fused = planned(&graph, PlanRequest::Fused);
    let report = suspend_and_resume((&graph, &threaded), (&graph, &fused), Launcher::InProcess);
    check_sums(&into, &report);
}

#[test]
fn a_job_of_pes_joined_by_shared_memory_resumes_with_its_keys_dealt_anew() {
    let into = Collected::default();
    let two = job(2, &into);
    let three = job(3, &into);
    let report = suspend_and_resume(
        (&two, &planned(&two, PlanRequest::Processes)),
        (&three, &planned(&three, PlanRequest::Threaded)),
        Launcher::InProcess,
    );
    check_sums(&into, &report);
}

#[test]
fn a_file_sink_resumed_appends_where_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.txt");
    let mut g = GraphBuilder::new("lines");
    let numbers = g.source("numbers", Ports::new().output::<u64>(), |_| {
        Generator::new(Some).count(N).rate(100_000)
    });
    let target = ByteTarget::file(&path);
    let sink = g.operator("sink", Ports::new().input::<u64>(), move |_| {
        StreamSink::<u64, _>::lines(target.clone())
    });
    g.connect(numbers.out(0), sink.input(0)).unwrap();
    let graph = g.build().unwrap();
    let report = suspend_and_resume(
        (&graph, &planned(&graph, PlanRequest::Threaded)),
        (&graph, &planned(&graph, PlanRequest::Fused)),
        Launcher::InProcess,
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.lines().map(|l| l.parse::<u64>().unwrap()).eq(0..N));
    let written = report.operator_report("sink").counters["bytes_written"];
    assert_eq!(written, text.len() as u64);
    // The temporary file the suspended sink kept became the output.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["out.txt"]);
}

#[test]
fn a_source_that_cannot_resume_fails_a_suspendable_job_at_its_start() {
    let mut g = GraphBuilder::new("once");
    let numbers = g.source("numbers", Ports::new().output::<u64>(), |_| {
        sluice_ops::IterSource::new(0..10u64)
    });
    let sink = g.operator("sink", Ports::new().input::<u64>(), |_| {
        sluice_ops::Filter::new(|_: &u64| false)
    });
    g.connect(numbers.out(0), sink.input(0)).unwrap();
    let graph = g.build().unwrap();
    let p = planned(&graph, PlanRequest::Threaded);
    let error = start(&graph, &p, &options(Launcher::InProcess))
        .and_then(|job| job.wait())
        .unwrap_err();
    assert!(
        matches!(&error, RunError::Unresumable { instance, .. } if instance == "numbers"),
        "{error}"
    );
    assert!(error.to_string().contains("cannot resume"), "{error}");
}
