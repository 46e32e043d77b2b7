//! The runtime end to end with the standard operators: every plan gives the same result,
//! partitioning routes as promised, failures name the operator. (That a stop drains, and a
//! suspension loses nothing, is the data plane's own test: sluice-exec's `tests/threads.rs`.)

use std::sync::Arc;
use std::time::Duration;

use sluice_graph::{
    Graph, GraphBuilder, Operator, OperatorError, Output, Partitioning, Ports, Produced, Source,
};
use sluice_ops::{Collect, Collected, Filter, IterSource, Map};
use sluice_plan::{plan, PhysicalPlan, PlanFile, PlanOptions, PlanRequest};
use sluice_runtime::{run, start, RunError, RunOptions};
use sluice_types::{partition_hash, pick_instance, TupleRef};

fn requests() -> Vec<PlanRequest> {
    vec![PlanRequest::Fused, PlanRequest::Threaded]
}

fn run_graph(graph: &Graph, request: &PlanRequest) -> Result<sluice_runtime::JobReport, RunError> {
    let p = plan(
        graph,
        request,
        &PlanOptions {
            cores: 2,
            queue_capacity: 16,
            ..PlanOptions::default()
        },
    )
    .unwrap();
    run(graph, &p, &RunOptions::default())
}

/// numbers 0..n -> x3 -> keep even -> sink (parallelism `sinks`, partitioned by `partitioning`).
fn pipeline(n: u64, sinks: usize, partitioning: Partitioning, into: Collected<u64>) -> Graph {
    let mut g = GraphBuilder::new("pipeline");
    let src = g.source("numbers", Ports::new().output::<u64>(), move |_| {
        IterSource::new(0..n)
    });
    let triple = g.operator(
        "triple",
        Ports::new().input::<u64>().output::<u64>(),
        |_| Map::new(|x: &u64| x * 3),
    );
    let even = g.operator("even", Ports::new().input::<u64>().output::<u64>(), |_| {
        Filter::new(|x: &u64| x.is_multiple_of(2))
    });
    let sink = g.operator("sink", Ports::new().input::<u64>(), move |_| {
        Collect::new(into.clone())
    });
    g.set_parallelism(sink, sinks).unwrap();
    g.connect(src.out(0), triple.input(0)).unwrap();
    g.connect(triple.out(0), even.input(0)).unwrap();
    g.connect_with(even.out(0), sink.input(0), partitioning)
        .unwrap();
    g.build().unwrap()
}

fn collected(into: &Collected<u64>) -> Vec<(usize, Vec<u64>)> {
    let mut v = into.lock().unwrap().clone();
    v.sort();
    v
}

#[test]
fn every_plan_gives_the_same_ordered_output() {
    for request in requests() {
        let into: Collected<u64> = Default::default();
        let report = run_graph(
            &pipeline(50_000, 1, Partitioning::Forward, into.clone()),
            &request,
        )
        .unwrap();
        let got = collected(&into);
        let expected: Vec<u64> = (0..50_000u64)
            .map(|x| x * 3)
            .filter(|x| x.is_multiple_of(2))
            .collect();
        assert_eq!(got, vec![(0, expected)], "{request:?}");
        assert_eq!(report.tuples_in("triple"), 50_000);
        assert_eq!(report.tuples_out("even"), 25_000);
    }
}

#[test]
fn key_partitioning_keeps_each_key_on_one_instance() {
    for request in requests() {
        let into: Collected<u64> = Default::default();
        let key = Partitioning::key_by(|x: &u64| x % 10);
        run_graph(&pipeline(10_000, 3, key, into.clone()), &request).unwrap();
        let parts = collected(&into);
        assert_eq!(parts.len(), 3);
        let mut owner = std::collections::HashMap::new();
        let mut total = 0;
        for (instance, items) in &parts {
            total += items.len();
            assert!(
                items.windows(2).all(|w| w[0] < w[1]),
                "order kept per instance"
            );
            for x in items {
                assert_eq!(
                    *owner.entry(x % 10).or_insert(*instance),
                    *instance,
                    "{request:?}"
                );
            }
        }
        assert_eq!(total, 5_000);
    }
}

#[test]
fn each_edge_counts_the_tuples_it_delivers_even_with_skewed_keys() {
    // Four tuples in five go to one key; the others spread over the rest.
    let key = |x: &u64| if x.is_multiple_of(5) { *x } else { 1 };
    for request in requests() {
        let into: Collected<u64> = Default::default();
        let graph = pipeline(30_000, 3, Partitioning::key_by(key), into.clone());
        let p = plan(&graph, &request, &PlanOptions::default()).unwrap();
        let report = run(&graph, &p, &RunOptions::default()).unwrap();
        let id = |name: &str| p.instances.iter().position(|i| i.name == name).unwrap();
        let sent = |name: &str| {
            &report
                .instances
                .iter()
                .find(|i| i.instance == name)
                .unwrap()
                .sent
        };
        // Each sink's count is what it received and what the keys' hashes say it gets.
        let evens: Vec<u64> = (0..30_000u64)
            .map(|x| x * 3)
            .filter(|x| x.is_multiple_of(2))
            .collect();
        let received = collected(&into);
        let expected: Vec<(usize, u64)> = (0..3)
            .map(|k| {
                let by_key = evens
                    .iter()
                    .filter(|x| pick_instance(partition_hash(&key(x)), 3) == k)
                    .count();
                let got = received
                    .iter()
                    .find(|(i, _)| *i == k)
                    .map_or(0, |(_, v)| v.len());
                assert_eq!(by_key, got, "{request:?}");
                (id(&format!("sink[{k}]")), by_key as u64)
            })
            .collect();
        assert_eq!(*sent("even"), expected, "{request:?}");
        let total: u64 = expected.iter().map(|(_, n)| n).sum();
        assert_eq!(total, report.tuples_out("even"));
        let heaviest = expected.iter().map(|(_, n)| *n).max().unwrap();
        assert!(heaviest > total / 2, "the keys are skewed: {expected:?}");
        // A forward edge delivers everything; a sink delivers nothing.
        assert_eq!(*sent("numbers"), [(id("triple"), 30_000)]);
        assert!(sent("sink[0]").is_empty());

        // On a broadcast edge every target counts every tuple.
        let into: Collected<u64> = Default::default();
        let graph = pipeline(300, 3, Partitioning::Broadcast, into);
        let p = plan(&graph, &request, &PlanOptions::default()).unwrap();
        let report = run(&graph, &p, &RunOptions::default()).unwrap();
        let even = report
            .instances
            .iter()
            .find(|i| i.instance == "even")
            .unwrap();
        assert_eq!(even.sent.len(), 3);
        assert!(even.sent.iter().all(|&(_, n)| n == 150), "{:?}", even.sent);
    }
}

#[test]
fn broadcast_reaches_every_instance_and_round_robin_deals_evenly() {
    for request in requests() {
        let into: Collected<u64> = Default::default();
        run_graph(
            &pipeline(300, 3, Partitioning::Broadcast, into.clone()),
            &request,
        )
        .unwrap();
        assert!(collected(&into).iter().all(|(_, items)| items.len() == 150));

        let into: Collected<u64> = Default::default();
        run_graph(
            &pipeline(300, 3, Partitioning::RoundRobin, into.clone()),
            &request,
        )
        .unwrap();
        assert!(collected(&into).iter().all(|(_, items)| items.len() == 50));
    }
}

#[test]
fn a_plan_file_mixing_fused_and_threaded_edges_gives_the_same_output() {
    let into: Collected<u64> = Default::default();
    let graph = pipeline(20_000, 2, Partitioning::key_by(|x: &u64| *x), into.clone());
    let file = PlanFile::parse(
        "[[thread]]\nname='a'\noperators=['numbers','triple']\n[[thread]]\nname='b'\noperators=['even','sink[0]']\n[[thread]]\nname='c'\noperators=['sink[1]']\n",
    )
    .unwrap();
    run_graph(&graph, &PlanRequest::File("mixed.toml".into(), file)).unwrap();
    let mut all: Vec<u64> = collected(&into).into_iter().flat_map(|(_, v)| v).collect();
    all.sort();
    let expected: Vec<u64> = (0..20_000u64)
        .map(|x| x * 3)
        .filter(|x| x.is_multiple_of(2))
        .collect();
    assert_eq!(all, expected);
}

struct Explode(u64);
impl Operator for Explode {
    fn process(
        &mut self,
        _: usize,
        t: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let x = *t.get::<u64>().unwrap();
        if x == self.0 {
            panic!("tuple {x} is cursed");
        }
        out.emit(0, x)
    }
}

struct Refuse;
impl Operator for Refuse {
    fn process(
        &mut self,
        _: usize,
        _: TupleRef<'_>,
        _: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        Err(OperatorError::Failed("no thanks".into()))
    }
}

fn failing_graph(panics: bool) -> Graph {
    let mut g = GraphBuilder::new("failing");
    let src = g.source("numbers", Ports::new().output::<u64>(), |_| {
        IterSource::new(0..1_000_000u64)
    });
    let bad = if panics {
        g.operator(
            "explode",
            Ports::new().input::<u64>().output::<u64>(),
            |_| Explode(5_000),
        )
    } else {
        g.operator(
            "refuse",
            Ports::new().input::<u64>().output::<u64>(),
            |_| Refuse,
        )
    };
    let sink = g.operator("sink", Ports::new().input::<u64>(), |_| {
        Collect::<u64>::new(Default::default())
    });
    g.connect(src.out(0), bad.input(0)).unwrap();
    g.connect(bad.out(0), sink.input(0)).unwrap();
    g.build().unwrap()
}

#[test]
fn a_panicking_operator_stops_the_job_with_its_name() {
    for request in requests() {
        let err = run_graph(&failing_graph(true), &request).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("'explode'"), "{msg}");
        assert!(msg.contains("tuple 5000 is cursed"), "{msg}");
    }
}

#[test]
fn a_failing_operator_stops_the_job_with_its_error() {
    for request in requests() {
        let err = run_graph(&failing_graph(false), &request).unwrap_err();
        assert_eq!(err.to_string(), "operator 'refuse' failed: no thanks");
    }
}

#[test]
fn an_operator_in_an_endless_loop_fails_the_job_naming_its_thread() {
    let release = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut g = GraphBuilder::new("stuck");
    let src = g.source("numbers", Ports::new().output::<u64>(), |_| {
        IterSource::new(0..1_000u64)
    });
    let spin = release.clone();
    // Stuck in an endless loop on its first tuple, until released.
    let stuck = g.operator(
        "spin",
        Ports::new().input::<u64>().output::<u64>(),
        move |_| {
            let spin = spin.clone();
            Map::new(move |x: &u64| {
                while !spin.load(std::sync::atomic::Ordering::Relaxed) {
                    // Kind to the other tests' cores.
                    std::thread::sleep(Duration::from_millis(1));
                }
                *x
            })
        },
    );
    let sink = g.operator("sink", Ports::new().input::<u64>(), |_| {
        Collect::<u64>::new(Default::default())
    });
    g.connect(src.out(0), stuck.input(0)).unwrap();
    g.connect(stuck.out(0), sink.input(0)).unwrap();
    let graph = g.build().unwrap();
    for request in requests() {
        let p = plan(&graph, &request, &PlanOptions::default()).unwrap();
        let options = RunOptions {
            stall_timeout: Duration::from_millis(300),
            ..RunOptions::default()
        };
        // The watch, not this test, ends the job: a hang would be the test binary's timeout.
        let message = run(&graph, &p, &options).unwrap_err().to_string();
        assert!(
            message.contains("spin") && message.contains("made no progress for 0.3 s"),
            "{request:?}: {message}"
        );
    }
    release.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// A source that never ends by itself.
struct Endless {
    next: u64,
}
impl Source for Endless {
    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        for _ in 0..64 {
            out.emit(0, self.next)?;
            self.next += 1;
        }
        Ok(Produced::Emitted(64))
    }
}

/// An endless source into a sink that keeps nothing, a thread each.
fn endless_job() -> (Graph, PhysicalPlan) {
    let mut g = GraphBuilder::new("endless");
    let src = g.source("endless", Ports::new().output::<u64>(), |_| Endless {
        next: 0,
    });
    let sink = g.operator("sink", Ports::new().input::<u64>(), |_| {
        Filter::new(|_: &u64| false)
    });
    g.connect(src.out(0), sink.input(0)).unwrap();
    let graph = g.build().unwrap();
    let p = plan(&graph, &PlanRequest::Threaded, &PlanOptions::default()).unwrap();
    (graph, p)
}

#[test]
fn a_run_duration_stops_an_endless_job() {
    let (graph, p) = endless_job();
    let options = RunOptions {
        duration: Some(Duration::from_millis(100)),
        ..RunOptions::default()
    };
    let report = run(&graph, &p, &options).unwrap();
    assert_eq!(report.tuples_in("sink"), report.tuples_out("endless"));
}

#[test]
fn a_running_job_in_process_shows_its_live_metrics() {
    let (graph, p) = endless_job();
    let options = RunOptions {
        latency_every: 16,
        profile_cpu: true,
        ..RunOptions::default()
    };
    let job = start(&graph, &p, &options).unwrap();
    let metrics = job.metrics_handle();
    // Rates need two samples; a watchdog against a hang.
    let began = std::time::Instant::now();
    let snapshot = loop {
        let snapshot = metrics.snapshot();
        let edge_seen = snapshot.edges().any(|e| e.rate > 0.0);
        let marked = snapshot.instances().any(|i| i.sink && i.latency.is_some());
        let timed = snapshot.instances().any(|i| i.cpu_ns > 0);
        if snapshot.source_rate() > 0.0 && edge_seen && marked && timed {
            break snapshot;
        }
        assert!(began.elapsed() < Duration::from_secs(30), "{snapshot:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    job.stop_handle().stop();
    let report = job.wait().unwrap();
    assert_eq!(snapshot.job, "endless");
    let edge = snapshot.edges().next().unwrap();
    assert_eq!(
        (edge.transport.as_str(), edge.operator.as_str()),
        ("threaded", "sink")
    );
    assert!(edge.fill().is_some(), "{edge:?}");
    let operators = snapshot.operators();
    assert_eq!(operators[0].operator, "endless");
    assert!(operators[0].source);
    assert!(snapshot.source_tuples() <= report.tuples_out("endless"));
    // The source's tuples to the sink so far, by their ids in the plan.
    let traffic: Vec<_> = snapshot.traffic().collect();
    let id = |name: &str| p.instances.iter().position(|i| i.name == name).unwrap();
    assert!(
        matches!(traffic[..], [(from, to, n)] if from == id("endless") && to == id("sink") && n > 0),
        "{traffic:?}"
    );
}

#[test]
fn collect_in_keeps_what_each_upstream_instance_emits_in_its_own_instance() {
    for request in requests() {
        let flow = sluice_ops::Dataflow::new("collect-in");
        let into = flow
            .source("numbers", |ctx| {
                let instance = ctx.instance as u64;
                IterSource::new((0..100u64).map(move |k| (instance, k)))
            })
            .parallelism(2)
            .collect_in("out", 2);
        run_graph(&flow.build().unwrap(), &request).unwrap();
        let mut parts = into.lock().unwrap().clone();
        parts.sort();
        let made = |i: u64| (0..100u64).map(|k| (i, k)).collect::<Vec<_>>();
        assert_eq!(parts, vec![(0, made(0)), (1, made(1))], "{request:?}");
    }
}
