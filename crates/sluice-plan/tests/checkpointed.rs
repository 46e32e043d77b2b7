//! Plans of checkpointed jobs (`PlanOptions::checkpointed`): every channel carries the stream
//! of one upstream instance, so an instance can align the barriers of each upstream instance;
//! the plan is otherwise the one an unchecked job gets; a transport that loses tuples is
//! refused, and so is a plan handed over with a channel that merges several senders.

mod common;

use common::{graph, Nothing, Pass};
use sluice_graph::{Graph, GraphBuilder, Partitioning, Ports};
use sluice_plan::{plan, PhysicalPlan, PlanError, PlanFile, PlanOptions, PlanRequest};
use sluice_types::Tuple;

fn options(checkpointed: bool) -> PlanOptions {
    PlanOptions {
        cores: 2,
        queue_capacity: 64,
        checkpointed,
        ..PlanOptions::default()
    }
}

fn file(text: &str) -> PlanRequest {
    PlanRequest::File("test.toml".into(), PlanFile::parse(text).unwrap())
}

/// source -> up (x2, round robin) -> down (x2, key-by) -> sink, every stream of `T`: a 2x2
/// shuffle.
fn shuffle<T: Tuple + Clone + std::hash::Hash>() -> Graph {
    let mut g = GraphBuilder::new("shuffle");
    let src = g.source("source", Ports::new().output::<T>(), |_| Nothing);
    let up = g.operator("up", Ports::new().input::<T>().output::<T>(), |_| Pass);
    let down = g.operator("down", Ports::new().input::<T>().output::<T>(), |_| Pass);
    let sink = g.operator("sink", Ports::new().input::<T>(), |_| Pass);
    g.set_parallelism(up, 2).unwrap();
    g.set_parallelism(down, 2).unwrap();
    g.connect_with(src.out(0), up.input(0), Partitioning::RoundRobin)
        .unwrap();
    g.connect_with(
        up.out(0),
        down.input(0),
        Partitioning::key_by(|t: &T| t.clone()),
    )
    .unwrap();
    g.connect(down.out(0), sink.input(0)).unwrap();
    g.build().unwrap()
}

/// The 2x2 shuffle's up and down instances in four PEs, source and sink in two more.
const FOUR_PES: &str = "[[thread]]\nname='a'\npe='u0'\noperators=['up[0]']\n\
                        [[thread]]\nname='b'\npe='u1'\noperators=['up[1]']\n\
                        [[thread]]\nname='c'\npe='d0'\noperators=['down[0]']\n\
                        [[thread]]\nname='d'\npe='d1'\noperators=['down[1]']\n\
                        [[thread]]\nname='e'\npe='in'\noperators=['source']\n\
                        [[thread]]\nname='f'\npe='out'\noperators=['sink']\n";

/// The channels into the shuffle's down instances: (transport name, senders' names).
fn shuffle_channels(p: &PhysicalPlan) -> Vec<(&'static str, Vec<String>)> {
    p.channels
        .iter()
        .filter(|c| p.instance(c.to.instance).name.starts_with("down"))
        .map(|c| {
            let senders = c.senders.iter().map(|s| p.instance(*s).name.clone());
            (c.transport.name(), senders.collect())
        })
        .collect()
}

/// What a plan is apart from its channels: its PEs, instances and edges with their ends.
fn without_channels(p: &PhysicalPlan) -> impl PartialEq + std::fmt::Debug + '_ {
    let edges: Vec<_> = p
        .edges
        .iter()
        .map(|e| (e.logical, e.from, e.to, e.partitioning.as_str()))
        .collect();
    (&p.pes, &p.instances, edges, &p.hosts, &p.strategy)
}

#[test]
fn a_checkpointed_2x2_shuffle_across_four_pes_has_four_channels_of_one_sender_each() {
    let up = |i: usize| vec![format!("up[{i}]")];
    // Strings vary in size: shm-osr, whose receiver takes many senders.
    let g = shuffle::<String>();
    let merged = plan(&g, &file(FOUR_PES), &options(false)).unwrap();
    assert_eq!(
        shuffle_channels(&merged),
        vec![
            ("shm-osr", vec!["up[0]".to_string(), "up[1]".to_string()]),
            ("shm-osr", vec!["up[0]".to_string(), "up[1]".to_string()]),
        ]
    );
    let apart = plan(&g, &file(FOUR_PES), &options(true)).unwrap();
    assert_eq!(
        shuffle_channels(&apart),
        vec![
            ("shm-osr", up(0)),
            ("shm-osr", up(0)),
            ("shm-osr", up(1)),
            ("shm-osr", up(1)),
        ]
    );
    assert_eq!(without_channels(&apart), without_channels(&merged));
    apart.check().unwrap();
    // Fixed-size tuples go over shm-vega, one producer each, unless several instances feed
    // one port: unchecked, those become one shm-osr ring; checkpointed, they stay apart.
    let g = shuffle::<u64>();
    let merged = plan(&g, &file(FOUR_PES), &options(false)).unwrap();
    assert_eq!(
        shuffle_channels(&merged)
            .iter()
            .map(|(t, s)| (*t, s.len()))
            .collect::<Vec<_>>(),
        vec![("shm-osr", 2), ("shm-osr", 2)]
    );
    let apart = plan(&g, &file(FOUR_PES), &options(true)).unwrap();
    assert_eq!(
        shuffle_channels(&apart),
        vec![
            ("shm-vega", up(0)),
            ("shm-vega", up(0)),
            ("shm-vega", up(1)),
            ("shm-vega", up(1)),
        ]
    );
    assert_eq!(without_channels(&apart), without_channels(&merged));
    // The renderers draw every channel of the plan: the text its receiver, DOT its receiver
    // node, the SVG the edge it carries.
    let (text, dot, svg) = (apart.to_string(), apart.to_dot(), apart.to_svg());
    for c in apart.channels.iter().filter(|c| apart.crosses_pes(c)) {
        let from = &apart.instance(c.senders[0]).name;
        let receive = format!(
            "+ receive {} ({}) from {from}",
            c.name(),
            c.transport.name()
        );
        assert!(text.contains(&receive), "{receive} in {text}");
        assert!(dot.contains(&format!(" r{} [", c.id)), "r{} in {dot}", c.id);
        assert!(
            svg.contains(&format!("data-channel=\"{}\"", c.name())),
            "{svg}"
        );
    }
}

#[test]
fn every_plan_of_a_checkpointed_job_has_one_sender_per_channel() {
    for request in [
        PlanRequest::Fused,
        PlanRequest::Threaded,
        PlanRequest::Processes,
    ] {
        let g = shuffle::<String>();
        let p = plan(&g, &request, &options(true)).unwrap();
        assert!(p.channels.iter().all(|c| c.senders.len() == 1), "{p}");
        // Every edge that is not fused has a channel of its own.
        let mut channels: Vec<_> = p.edges.iter().filter_map(|e| e.channel).collect();
        let carried = channels.len();
        channels.dedup();
        assert_eq!(channels.len(), carried, "{p}");
        assert_eq!(carried, p.channels.len(), "{p}");
        p.check_checkpointed().unwrap();
    }
}

/// source and split in one PE, each sum in one of its own, the sink in a fourth, sum -> sink
/// pinned to `transport`.
fn sums_apart(transport: &str) -> PlanRequest {
    file(&format!(
        "[[thread]]\nname='a'\npe='x'\noperators=['source','split']\n\
         [[thread]]\nname='b'\npe='y'\noperators=['sum[0]']\n\
         [[thread]]\nname='c'\npe='z'\noperators=['sum[1]']\n\
         [[thread]]\nname='d'\npe='w'\noperators=['sink']\n\
         [[edge]]\nfrom='sum'\nto='sink'\ntransport={transport}\n"
    ))
}

#[test]
fn a_plan_file_pinning_a_many_sender_transport_gets_a_channel_per_sender() {
    let request = sums_apart("{kind='tcp'}");
    let into_sink = |p: &PhysicalPlan| -> Vec<Vec<String>> {
        p.channels
            .iter()
            .filter(|c| p.instance(c.to.instance).name == "sink")
            .inspect(|c| assert_eq!(c.transport.name(), "tcp"))
            .map(|c| {
                c.senders
                    .iter()
                    .map(|s| p.instance(*s).name.clone())
                    .collect()
            })
            .collect()
    };
    let merged = plan(&graph(), &request, &options(false)).unwrap();
    assert_eq!(into_sink(&merged), vec![vec!["sum[0]", "sum[1]"]]);
    let apart = plan(&graph(), &request, &options(true)).unwrap();
    assert_eq!(into_sink(&apart), vec![vec!["sum[0]"], vec!["sum[1]"]]);
}

#[test]
fn a_checkpointed_job_refuses_udp_mq_naming_the_edge() {
    let request = sums_apart("{kind='udp-mq'}");
    assert!(plan(&graph(), &request, &options(false)).is_ok());
    let refused = plan(&graph(), &request, &options(true)).unwrap_err();
    assert_eq!(
        refused,
        PlanError::LosesTuples {
            edge: "sum[0] -> sink".into(),
            transport: "udp-mq",
        }
    );
    assert_eq!(
        refused.to_string(),
        "edge sum[0] -> sink: udp-mq is at most once (it drops datagrams it has no room for), \
         so a checkpoint cannot cover the tuples it loses; pin another transport or run \
         without checkpoints"
    );
}

#[test]
fn a_plan_handed_over_with_a_shared_channel_is_refused_for_a_checkpointed_job() {
    let merged = plan(&graph(), &sums_apart("{kind='tcp'}"), &options(false)).unwrap();
    merged.check().unwrap();
    assert_eq!(
        merged.check_checkpointed().unwrap_err().to_string(),
        "edge sum[0], sum[1] -> sink: a checkpointed job needs one upstream instance per \
         channel (barriers are aligned per upstream instance, and one receiver merging 2 \
         senders cannot tell which tuples follow which sender's barrier)"
    );
}
