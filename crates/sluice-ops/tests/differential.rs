//! Differential property test of the runtime: random small graphs of map / filter / pass-through
//! stages joined by forward, round-robin, key-by and broadcast edges (a chain, or a fan-out to
//! two branches that merge into one input port of the sink) must give the same output when run
//! fused (one thread), threaded (one thread per instance), one PE per instance (every edge a
//! shared-memory transport; the PEs run as threads of the test process), the same planned for
//! a checkpointed job (a channel per upstream instance, no receiver shared) and under a random
//! plan file that spreads the instances over 2-3 threads in two PEs, and under the plans the
//! optimizers make of it (fusion from a profile of random costs, TurboStream's placement on two
//! hosts of this machine joined by TCP), and that output must match a plain-Rust reference.
//!
//! The engine promises order only along one physical edge, so outputs are compared as multisets
//! unless a model of the graph shows that a sink instance's exact sequence (or its exact
//! multiset) is fixed whatever the plan; key-by sinks must also keep each key on one instance.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

use proptest::prelude::*;
use sluice_graph::{Graph, GraphBuilder, Partitioning, Ports};
use sluice_ops::{Collect, Collected, Filter, IterSource, Map};
use sluice_plan::fusion::{FusionChoice, InstanceProfile, Profile, DEFAULT_HOP_NS};
use sluice_plan::traffic_placement::{plan_file, task_graph, Scheduler};
use sluice_plan::{plan, HostsFile, PlanFile, PlanOptions, PlanRequest};
use sluice_runtime::{start, Launcher, RunOptions};

/// The partitioning of an edge, as generated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edge {
    Forward,
    RoundRobin,
    KeyBy,
    Broadcast,
}

impl Edge {
    fn partitioning(self) -> Partitioning {
        match self {
            Edge::Forward => Partitioning::Forward,
            Edge::RoundRobin => Partitioning::RoundRobin,
            Edge::KeyBy => Partitioning::key_by(|x: &u64| x % 7),
            Edge::Broadcast => Partitioning::Broadcast,
        }
    }
}

/// What a stage does to each tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Map { k: u64, c: u64 },
    Filter { m: u64, r: u64 },
    Pass,
}

impl Op {
    fn apply(self, x: u64) -> Option<u64> {
        match self {
            Op::Map { k, c } => Some(x.wrapping_mul(k).wrapping_add(c)),
            Op::Filter { m, r } => (x % m != r).then_some(x),
            Op::Pass => Some(x),
        }
    }
}

/// One generated stage: its operator, its parallelism and the partitioning of its input edge.
#[derive(Debug, Clone)]
struct Stage {
    op: Op,
    parallelism: usize,
    input: Edge,
}

/// One generated test case.
#[derive(Debug, Clone)]
struct Case {
    input: Vec<u64>,
    trunk: Vec<Stage>,
    /// Two branches after the trunk, both feeding input port 0 of the sink.
    branches: Option<(Vec<Stage>, Vec<Stage>)>,
    sink_parallelism: usize,
    /// The sink's input edge(s): the second is used only with branches.
    sink_edges: (Edge, Edge),
    /// Plan file: thread count, a thread pick per instance, an optional queue capacity.
    threads: usize,
    picks: Vec<usize>,
    file_capacity: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Source,
    Stage(Op),
    Sink,
}

/// A node of the graph under test, in topological order (source first, sink last).
#[derive(Debug, Clone)]
struct Node {
    name: String,
    kind: Kind,
    parallelism: usize,
    inputs: Vec<(usize, Edge)>,
}

/// The largest number of copies of a source tuple that broadcasts may make on any path.
const MAX_COPIES: usize = 9;

fn nodes_of(case: &Case) -> Vec<Node> {
    let mut nodes = vec![Node {
        name: "src".into(),
        kind: Kind::Source,
        parallelism: 1,
        inputs: Vec::new(),
    }];
    let chain = |nodes: &mut Vec<Node>, stages: &[Stage], mut up: usize| {
        for s in stages {
            let label = match s.op {
                Op::Map { .. } => "map",
                Op::Filter { .. } => "filter",
                Op::Pass => "pass",
            };
            nodes.push(Node {
                name: format!("{label}{}", nodes.len()),
                kind: Kind::Stage(s.op),
                parallelism: s.parallelism,
                inputs: vec![(up, s.input)],
            });
            up = nodes.len() - 1;
        }
        up
    };
    let end = chain(&mut nodes, &case.trunk, 0);
    let sink_inputs = match &case.branches {
        None => vec![(end, case.sink_edges.0)],
        Some((a, b)) => {
            let a = chain(&mut nodes, a, end);
            let b = chain(&mut nodes, b, end);
            vec![(a, case.sink_edges.0), (b, case.sink_edges.1)]
        }
    };
    nodes.push(Node {
        name: "sink".into(),
        kind: Kind::Sink,
        parallelism: case.sink_parallelism,
        inputs: sink_inputs,
    });
    normalize(&mut nodes);
    nodes
}

/// Makes a generated graph one the engine can run and the test can afford:
///
/// * a forward edge never widens (no more downstream instances than upstream ones): the extra
///   instances would have no physical input edge, so no end-of-stream ever reaches them, the
///   runtime never finishes them and the job hangs, even after a stop (a known engine bug
///   this test steers around rather than hangs on);
/// * broadcasts stop multiplying once a path would copy a tuple more than [`MAX_COPIES`] times.
fn normalize(nodes: &mut [Node]) {
    let mut copies = vec![1usize; nodes.len()];
    for k in 1..nodes.len() {
        let mut p = nodes[k].parallelism;
        for &(up, e) in &nodes[k].inputs {
            if e == Edge::Forward {
                p = p.min(nodes[up].parallelism);
            }
        }
        nodes[k].parallelism = p;
        let mut most = 1;
        for (up, e) in nodes[k].inputs.iter_mut() {
            if *e == Edge::Broadcast && copies[*up] * p > MAX_COPIES {
                *e = Edge::KeyBy;
            }
            let factor = if *e == Edge::Broadcast { p } else { 1 };
            most = most.max(copies[*up] * factor);
        }
        copies[k] = most;
    }
}

fn instance_name(node: &Node, j: usize) -> String {
    if node.parallelism == 1 {
        node.name.clone()
    } else {
        format!("{}[{j}]", node.name)
    }
}

/// The upstream instances that send to instance `j` of a node with `n` instances over an edge
/// from a node with `m` instances.
fn senders(edge: Edge, m: usize, n: usize, j: usize) -> Vec<usize> {
    match edge {
        Edge::Forward => (0..m).filter(|i| i % n == j).collect(),
        _ => (0..m).collect(),
    }
}

fn build(nodes: &[Node], input: &[u64], into: &Collected<u64>) -> Graph {
    let mut g = GraphBuilder::new("differential");
    let mut handles = Vec::with_capacity(nodes.len());
    let io = || Ports::new().input::<u64>().output::<u64>();
    for node in nodes {
        let name = node.name.as_str();
        let h = match node.kind {
            Kind::Source => {
                let items = input.to_vec();
                g.source(name, Ports::new().output::<u64>(), move |_| {
                    IterSource::new(items.clone().into_iter())
                })
            }
            Kind::Stage(op @ Op::Filter { .. }) => g.operator(name, io(), move |_| {
                Filter::new(move |x: &u64| op.apply(*x).is_some())
            }),
            Kind::Stage(op) => g.operator(name, io(), move |_| {
                Map::new(move |x: &u64| op.apply(*x).unwrap_or(*x))
            }),
            Kind::Sink => {
                let into = into.clone();
                g.operator(name, Ports::new().input::<u64>(), move |_| {
                    Collect::new(into.clone())
                })
            }
        };
        g.set_parallelism(h, node.parallelism).unwrap();
        for &(up, edge) in &node.inputs {
            let from: sluice_graph::OperatorHandle = handles[up];
            g.connect_with(from.out(0), h.input(0), edge.partitioning())
                .unwrap();
        }
        handles.push(h);
    }
    g.build().unwrap()
}

/// How much of an instance's input is the same whatever the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fixed {
    /// Nothing: which tuples it gets depends on interleavings.
    Nothing,
    /// Its multiset of tuples.
    Bag,
    /// Its exact sequence of tuples.
    Order,
}

/// The reference model of one instance.
#[derive(Debug, Clone)]
struct InstanceModel {
    fixed: Fixed,
    /// Its exact output sequence, when the reference can compute it.
    seq: Option<Vec<u64>>,
    /// Its output multiset (unsorted), when the reference can compute it.
    bag: Option<Vec<u64>>,
}

/// The reference model of one node: everything its instances receive and emit, and each
/// instance's share where it can be known.
#[derive(Debug, Clone)]
struct NodeModel {
    total_in: Vec<u64>,
    total_out: Vec<u64>,
    instances: Vec<InstanceModel>,
}

fn concat(parts: impl IntoIterator<Item = Option<Vec<u64>>>) -> Option<Vec<u64>> {
    let mut all = Vec::new();
    for part in parts {
        all.extend(part?);
    }
    Some(all)
}

/// Runs the graph in plain Rust, tracking what is fixed per instance.
fn reference(nodes: &[Node], input: &[u64]) -> Vec<NodeModel> {
    let mut models: Vec<NodeModel> = Vec::with_capacity(nodes.len());
    for node in nodes {
        let apply = |items: Vec<u64>| -> Vec<u64> {
            match node.kind {
                Kind::Stage(op) => items.into_iter().filter_map(|x| op.apply(x)).collect(),
                Kind::Source | Kind::Sink => items,
            }
        };
        if node.kind == Kind::Source {
            models.push(NodeModel {
                total_in: Vec::new(),
                total_out: input.to_vec(),
                instances: vec![InstanceModel {
                    fixed: Fixed::Order,
                    seq: Some(input.to_vec()),
                    bag: Some(input.to_vec()),
                }],
            });
            continue;
        }
        let n = node.parallelism;
        let mut total_in = Vec::new();
        for &(up, e) in &node.inputs {
            let copies = if e == Edge::Broadcast { n } else { 1 };
            for _ in 0..copies {
                total_in.extend(&models[up].total_out);
            }
        }
        let mut instances = Vec::with_capacity(n);
        for j in 0..n {
            // Per logical input edge: what is fixed, the reference sequence and multiset.
            let mut parts = Vec::new();
            for &(up, e) in &node.inputs {
                let upm = &models[up].instances;
                let from = senders(e, upm.len(), n, j);
                // Round-robin and key-by hand this instance a share the model does not compute
                // (which share depends on dealing order or on the hash function).
                let shared = n > 1 && matches!(e, Edge::RoundRobin | Edge::KeyBy);
                let level = |i: usize| {
                    let f = upm[i].fixed;
                    if n > 1 && e == Edge::RoundRobin && f != Fixed::Order {
                        Fixed::Nothing
                    } else {
                        f
                    }
                };
                let fixed = if from.len() == 1 {
                    level(from[0])
                } else if matches!(e, Edge::Broadcast | Edge::KeyBy)
                    || from.iter().all(|&i| level(i) >= Fixed::Bag)
                {
                    // Everything upstream, or everything with this instance's keys.
                    Fixed::Bag
                } else {
                    Fixed::Nothing
                };
                let seq = match from.as_slice() {
                    [i] if !shared => upm[*i].seq.clone(),
                    _ => None,
                };
                let bag = if shared {
                    None
                } else {
                    concat(from.iter().map(|&i| upm[i].bag.clone()))
                };
                parts.push((fixed, seq, bag));
            }
            let (mut fixed, seq) = if parts.len() == 1 {
                (parts[0].0, parts[0].1.clone())
            } else {
                let least = parts.iter().map(|p| p.0).min().unwrap_or(Fixed::Bag);
                (least.min(Fixed::Bag), None)
            };
            let mut bag = concat(parts.into_iter().map(|p| p.2));
            if n == 1 {
                // A single instance gets everything the operator gets.
                fixed = fixed.max(Fixed::Bag);
                bag = Some(total_in.clone());
            }
            assert!(seq.is_none() || fixed == Fixed::Order, "model: {node:?}");
            instances.push(InstanceModel {
                fixed,
                seq: seq.map(apply),
                bag: bag.map(apply),
            });
        }
        models.push(NodeModel {
            total_out: apply(total_in.clone()),
            total_in,
            instances,
        });
    }
    models
}

/// Assigns each instance a thread so that no edge goes to a lower thread (so the threads form
/// a pipeline, never a cycle), with at least two threads used; returns the plan file's text.
fn plan_file_text(case: &Case, nodes: &[Node]) -> String {
    let threads = case.threads;
    let mut labels: Vec<Vec<usize>> = Vec::with_capacity(nodes.len());
    let mut pick = case.picks.iter().cycle();
    for node in nodes {
        let mut mine = Vec::with_capacity(node.parallelism);
        for j in 0..node.parallelism {
            let mut t = pick.next().copied().unwrap_or(0) % threads;
            for &(up, e) in &node.inputs {
                for i in senders(e, labels[up].len(), node.parallelism, j) {
                    t = t.max(labels[up][i]);
                }
            }
            mine.push(t);
        }
        labels.push(mine);
    }
    let first = labels[0][0];
    if labels.iter().flatten().all(|&t| t == first) {
        if first > 0 {
            labels[0][0] = 0; // the source feeds everything; a lower thread keeps edges forward
        } else if let Some(last) = labels.last_mut().and_then(|l| l.last_mut()) {
            *last = threads - 1; // a sink instance feeds nothing
        }
    }
    let mut text = String::new();
    if let Some(capacity) = case.file_capacity {
        text.push_str(&format!("queue_capacity = {capacity}\n"));
    }
    for t in 0..threads {
        let members: Vec<String> = nodes
            .iter()
            .zip(&labels)
            .flat_map(|(node, l)| {
                (0..node.parallelism)
                    .filter(move |&j| l[j] == t)
                    .map(move |j| format!("'{}'", instance_name(node, j)))
            })
            .collect();
        if !members.is_empty() {
            text.push_str(&format!(
                "[[thread]]\nname = 't{t}'\npe = 'pe{}'\noperators = [{}]\n",
                t % 2,
                members.join(", ")
            ));
        }
    }
    text
}

/// What one run produced.
#[derive(Debug)]
struct Outcome {
    /// Per sink instance, what it collected in arrival order.
    sinks: Vec<Vec<u64>>,
    /// Per instance name, tuples in and out.
    counts: BTreeMap<String, (u64, u64)>,
    /// Per operator name, tuples in and out.
    totals: BTreeMap<String, (u64, u64)>,
}

/// Longest a run may take before the test reports it as hung.
const WATCHDOG: Duration = Duration::from_secs(10);

/// This machine alone, two cores, small queues (so backpressure is exercised).
fn on_this_machine() -> PlanOptions {
    PlanOptions {
        cores: 2,
        queue_capacity: 8,
        ..PlanOptions::default()
    }
}

/// This machine, planned for a checkpointed job: every channel has one sender.
fn checkpointed() -> PlanOptions {
    PlanOptions {
        checkpointed: true,
        ..on_this_machine()
    }
}

/// Two hosts of this machine, at two loopback addresses: edges between them are TCP.
fn on_two_hosts() -> PlanOptions {
    let hosts = "[[host]]\nname = 'a'\naddress = '127.0.0.1'\ncores = 2\n\
                 [[host]]\nname = 'b'\naddress = '127.0.0.2'\ncores = 2\n";
    PlanOptions {
        hosts: Some(HostsFile::parse(hosts).expect("a valid hosts file")),
        ..on_this_machine()
    }
}

/// The plans the optimizers make of the graph: fusion from a profile whose instances cost
/// what `case.picks` say (at one tuple per edge), and the scheduler's placement of its
/// instances on two hosts.
fn optimized(nodes: &[Node], case: &Case) -> Result<[(PlanRequest, PlanOptions); 2], String> {
    let graph = build(nodes, &case.input, &Collected::default());
    let processes = plan(&graph, &PlanRequest::Processes, &on_this_machine())
        .map_err(|e| format!("plan: {e}"))?;
    let cost = |name: &str| {
        let k = processes.instances.iter().position(|i| i.name == name)?;
        let pick = case.picks.get(k % case.picks.len().max(1)).copied()?;
        Some(InstanceProfile {
            tuples_in: 1,
            tuples_out: 1,
            cpu_ns: (pick as u64 + 1) * 1_000_000,
        })
    };
    let profile = Profile::measured(&processes, 1.0, cost, |_, _| 1);
    let fused = FusionChoice::new(&processes, &profile, 2, DEFAULT_HOP_NS).plan_file(&processes);
    let spread =
        plan(&graph, &PlanRequest::Processes, &on_two_hosts()).map_err(|e| format!("plan: {e}"))?;
    let host_of = Scheduler::Consolidated.assign(&task_graph(&spread, |_| 1.0), &[2, 2]);
    let placed = plan_file(&spread, &spread.hosts, &host_of);
    Ok([
        (PlanRequest::File("fusion".into(), fused), on_this_machine()),
        (
            PlanRequest::File("placement".into(), placed),
            on_two_hosts(),
        ),
    ])
}

fn execute(nodes: &[Node], input: &[u64], request: &PlanRequest) -> Result<Outcome, String> {
    execute_on(nodes, input, request, &on_this_machine())
}

fn execute_on(
    nodes: &[Node],
    input: &[u64],
    request: &PlanRequest,
    options: &PlanOptions,
) -> Result<Outcome, String> {
    execute_on_workers(nodes, input, request, options, None)
}

/// As [`execute_on`], with at most `workers` polling workers per process (`None`: its cores).
fn execute_on_workers(
    nodes: &[Node],
    input: &[u64],
    request: &PlanRequest,
    options: &PlanOptions,
    workers: Option<usize>,
) -> Result<Outcome, String> {
    let into: Collected<u64> = Default::default();
    let graph = build(nodes, input, &into);
    let physical = plan(&graph, request, options).map_err(|e| format!("plan: {e}"))?;
    let run = RunOptions {
        launcher: Launcher::InProcess,
        workers,
        ..RunOptions::default()
    };
    let job = start(&graph, &physical, &run).map_err(|e| e.to_string())?;
    let stop = job.stop_handle();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(job.wait());
    });
    let report = match rx.recv_timeout(WATCHDOG) {
        Ok(result) => result.map_err(|e| format!("run: {e}"))?,
        Err(_) => {
            stop.stop();
            return Err(format!(
                "the job did not end within {WATCHDOG:?}\n{physical}"
            ));
        }
    };
    let sink = nodes.last().expect("a sink");
    let mut sinks = vec![None; sink.parallelism];
    for (instance, items) in into.lock().unwrap().drain(..) {
        let slot = sinks
            .get_mut(instance)
            .ok_or_else(|| format!("sink instance {instance} reported"))?;
        if slot.replace(items).is_some() {
            return Err(format!("sink instance {instance} reported twice"));
        }
    }
    let sinks = sinks
        .into_iter()
        .enumerate()
        .map(|(j, s)| s.ok_or_else(|| format!("sink instance {j} never reported")))
        .collect::<Result<_, _>>()?;
    let counts = report
        .instances
        .iter()
        .map(|i| (i.instance.clone(), (i.tuples_in, i.tuples_out)))
        .collect();
    let totals = nodes
        .iter()
        .map(|n| {
            let counts = (report.tuples_in(&n.name), report.tuples_out(&n.name));
            (n.name.clone(), counts)
        })
        .collect();
    Ok(Outcome {
        sinks,
        counts,
        totals,
    })
}

fn sorted(items: &[u64]) -> Vec<u64> {
    let mut v = items.to_vec();
    v.sort_unstable();
    v
}

/// Checks one run against the reference model.
fn check_reference(
    nodes: &[Node],
    models: &[NodeModel],
    got: &Outcome,
    what: &str,
) -> Result<(), TestCaseError> {
    let sink = nodes.last().unwrap();
    let model = models.last().unwrap();
    let all: Vec<u64> = got.sinks.iter().flatten().copied().collect();
    prop_assert_eq!(
        sorted(&all),
        sorted(&model.total_out),
        "{}: sink multiset",
        what
    );
    for (j, (items, m)) in got.sinks.iter().zip(&model.instances).enumerate() {
        if let Some(seq) = &m.seq {
            prop_assert_eq!(items, seq, "{}: exact sequence of sink[{}]", what, j);
        } else if let Some(bag) = &m.bag {
            prop_assert_eq!(
                sorted(items),
                sorted(bag),
                "{}: multiset of sink[{}]",
                what,
                j
            );
        }
    }
    if sink.parallelism > 1 && sink.inputs.iter().all(|&(_, e)| e == Edge::KeyBy) {
        let mut owner = BTreeMap::new();
        for (j, items) in got.sinks.iter().enumerate() {
            for x in items {
                let first = *owner.entry(x % 7).or_insert(j);
                prop_assert_eq!(first, j, "{}: key {} on two sink instances", what, x % 7);
            }
        }
    }
    for (node, m) in nodes.iter().zip(models) {
        let expected_out = if node.kind == Kind::Sink {
            0
        } else {
            m.total_out.len() as u64
        };
        let expected = (m.total_in.len() as u64, expected_out);
        prop_assert_eq!(
            got.totals[&node.name],
            expected,
            "{}: counts of {}",
            what,
            &node.name
        );
    }
    Ok(())
}

/// Checks that `got` agrees with `base` wherever the model says the plan cannot matter.
fn check_same(
    nodes: &[Node],
    models: &[NodeModel],
    base: &Outcome,
    got: &Outcome,
    what: &str,
) -> Result<(), TestCaseError> {
    let model = models.last().unwrap();
    for (j, m) in model.instances.iter().enumerate() {
        let (a, b) = (&base.sinks[j], &got.sinks[j]);
        match m.fixed {
            Fixed::Order => {
                prop_assert_eq!(a, b, "{}: sink[{}] sequence differs from fused", what, j)
            }
            Fixed::Bag => prop_assert_eq!(
                sorted(a),
                sorted(b),
                "{}: sink[{}] multiset differs from fused",
                what,
                j
            ),
            Fixed::Nothing => {}
        }
    }
    for (node, m) in nodes.iter().zip(models) {
        for (j, instance) in m.instances.iter().enumerate() {
            if instance.fixed >= Fixed::Bag {
                let name = instance_name(node, j);
                prop_assert_eq!(
                    base.counts.get(&name),
                    got.counts.get(&name),
                    "{}: counts of {} differ from fused",
                    what,
                    &name
                );
            }
        }
    }
    Ok(())
}

fn edge() -> impl Strategy<Value = Edge> {
    prop_oneof![
        2 => Just(Edge::Forward),
        1 => Just(Edge::RoundRobin),
        2 => Just(Edge::KeyBy),
        1 => Just(Edge::Broadcast),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u64..1000, 0u64..1000).prop_map(|(k, c)| Op::Map { k, c }),
        (2u64..6)
            .prop_flat_map(|m| (Just(m), 0..m))
            .prop_map(|(m, r)| Op::Filter { m, r }),
        Just(Op::Pass),
    ]
}

/// Mostly one instance, so that pure forward chains (exact order) come up often.
fn parallelism() -> impl Strategy<Value = usize> {
    prop_oneof![3 => Just(1usize), 1 => Just(2usize), 1 => Just(3usize)]
}

fn stage() -> impl Strategy<Value = Stage> {
    (op(), parallelism(), edge()).prop_map(|(op, parallelism, input)| Stage {
        op,
        parallelism,
        input,
    })
}

fn case() -> impl Strategy<Value = Case> {
    let shape = prop_oneof![
        prop::collection::vec(stage(), 1..=5).prop_map(|trunk| (trunk, None)),
        (
            prop::collection::vec(stage(), 0..=3),
            prop::collection::vec(stage(), 1..=2),
            prop::collection::vec(stage(), 1..=2),
        )
            .prop_map(|(mut trunk, a, b)| {
                trunk.truncate(5 - a.len() - b.len());
                (trunk, Some((a, b)))
            }),
    ];
    (
        prop::collection::vec(0u64..1000, 0..300),
        shape,
        parallelism(),
        (edge(), edge()),
        2usize..=3,
        prop::collection::vec(0usize..3, 24),
        prop::option::of(1usize..=8),
    )
        .prop_map(
            |(
                input,
                (trunk, branches),
                sink_parallelism,
                sink_edges,
                threads,
                picks,
                file_capacity,
            )| {
                Case {
                    input,
                    trunk,
                    branches,
                    sink_parallelism,
                    sink_edges,
                    threads,
                    picks,
                    file_capacity,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn fused_threaded_processes_and_plan_file_runs_agree(case in case()) {
        let nodes = nodes_of(&case);
        let models = reference(&nodes, &case.input);
        let text = plan_file_text(&case, &nodes);
        let file = PlanFile::parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let what = |name: &str| format!("{name} run of {nodes:?}");

        let fused = execute(&nodes, &case.input, &PlanRequest::Fused).map_err(TestCaseError::fail)?;
        check_reference(&nodes, &models, &fused, &what("fused"))?;

        let threaded = execute(&nodes, &case.input, &PlanRequest::Threaded).map_err(TestCaseError::fail)?;
        check_reference(&nodes, &models, &threaded, &what("threaded"))?;
        check_same(&nodes, &models, &fused, &threaded, &what("threaded"))?;

        // More instances than workers: they share the workers' cores as tasks.
        for workers in [1, 2] {
            let shared = execute_on_workers(
                &nodes, &case.input, &PlanRequest::Threaded, &on_this_machine(), Some(workers),
            )
            .map_err(TestCaseError::fail)?;
            let what = what(&format!("threaded on {workers} worker(s)"));
            check_reference(&nodes, &models, &shared, &what)?;
            check_same(&nodes, &models, &fused, &shared, &what)?;
        }

        let processes = execute(&nodes, &case.input, &PlanRequest::Processes).map_err(TestCaseError::fail)?;
        check_reference(&nodes, &models, &processes, &what("processes"))?;
        check_same(&nodes, &models, &fused, &processes, &what("processes"))?;

        let apart = execute_on(&nodes, &case.input, &PlanRequest::Processes, &checkpointed())
            .map_err(TestCaseError::fail)?;
        check_reference(&nodes, &models, &apart, &what("checkpointed processes"))?;
        check_same(&nodes, &models, &fused, &apart, &what("checkpointed processes"))?;

        let request = PlanRequest::File("random.toml".into(), file);
        let filed = execute(&nodes, &case.input, &request)
            .map_err(|e| TestCaseError::fail(format!("{e}\nplan file:\n{text}")))?;
        let what_file = format!("{} with plan file\n{text}", what("plan-file"));
        check_reference(&nodes, &models, &filed, &what_file)?;
        check_same(&nodes, &models, &fused, &filed, &what_file)?;

        for (request, options) in optimized(&nodes, &case).map_err(TestCaseError::fail)? {
            let PlanRequest::File(optimizer, file) = &request else { unreachable!() };
            let what = format!("{} with the {optimizer} optimizer's plan\n{file:?}", what(optimizer));
            let run = execute_on(&nodes, &case.input, &request, &options)
                .map_err(|e| TestCaseError::fail(format!("{e}\n{what}")))?;
            check_reference(&nodes, &models, &run, &what)?;
            check_same(&nodes, &models, &fused, &run, &what)?;
        }
    }
}
