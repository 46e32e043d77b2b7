//! Planner tests on a small WordCount-shaped graph: source -> split -> sum (x2, key-by) -> sink.

mod common;

use common::{graph, graph_with_sum, Nothing, Pass};
use sluice_graph::{Graph, GraphBuilder, Placement, Ports};
use sluice_plan::{plan, PhysicalPlan, PlanError, PlanFile, PlanOptions, PlanRequest};
use sluice_transport::TransportSpec;

fn options() -> PlanOptions {
    PlanOptions {
        cores: 2,
        queue_capacity: 64,
        ..PlanOptions::default()
    }
}

fn file(text: &str) -> PlanRequest {
    PlanRequest::File("test.toml".into(), PlanFile::parse(text).unwrap())
}

#[test]
fn fused_plan_is_one_thread_of_direct_calls() {
    let p = plan(&graph(), &PlanRequest::Fused, &options()).unwrap();
    assert_eq!(p.threads().count(), 1);
    assert_eq!(p.instances.len(), 5);
    // split -> sum[0], split -> sum[1], sum[0] -> sink, sum[1] -> sink, source -> split
    assert_eq!(p.edges.len(), 5);
    assert!(p.edges.iter().all(|e| e.transport == TransportSpec::Fused));
    assert_eq!(p.fan_in(p.instances[4].id, 0), 2);
}

#[test]
fn threaded_plan_puts_queues_on_every_edge_and_pins_only_when_cores_suffice() {
    let p = plan(&graph(), &PlanRequest::Threaded, &options()).unwrap();
    assert_eq!(p.threads().count(), 5);
    assert!(p
        .edges
        .iter()
        .all(|e| e.transport == TransportSpec::Threaded { capacity: 64 }));
    assert!(
        p.threads().all(|t| t.core.is_none()),
        "5 threads on 2 cores stay unpinned"
    );
    let text = p.to_string();
    assert!(
        text.contains("split.out[0] -> sum[1].in[0]  key-by  via threaded(capacity=64)"),
        "{text}"
    );
}

#[test]
fn plan_file_places_instances_and_mixes_transports() {
    let p = plan(
        &graph(),
        &file(
            r#"
            queue_capacity = 128
            [[thread]]
            name = "ingest"
            operators = ["split", "source"]
            [[thread]]
            name = "count"
            operators = ["sum", "sink"]
            "#,
        ),
        &options(),
    )
    .unwrap();
    assert_eq!(p.threads().count(), 2);
    let transports: Vec<_> = p.edges.iter().map(|e| e.transport.name()).collect();
    assert_eq!(
        transports,
        vec!["fused", "threaded", "threaded", "fused", "fused"]
    );
    assert_eq!(
        p.threads().map(|t| t.core).collect::<Vec<_>>(),
        vec![Some(0), Some(1)]
    );
    let json = serde_json::to_string(&p).unwrap();
    let back: PhysicalPlan = serde_json::from_str(&json).unwrap();
    assert_eq!(back, p);
    assert!(p.to_dot().contains("label=\"key-by / threaded\""));
}

#[test]
fn plan_file_errors_are_clear() {
    let err = |text: &str| plan(&graph(), &file(text), &options()).unwrap_err();
    let e = err("[[thread]]\nname='a'\noperators=['source','split','sum','sinkk']\n");
    assert!(matches!(e, PlanError::UnknownOperator { .. }));
    assert!(e.to_string().contains("'sinkk'"), "{e}");
    let e = err("[[thread]]\nname='a'\noperators=['source','split','sum[2]','sink']\n");
    assert!(
        matches!(e, PlanError::NoSuchInstance { parallelism: 2, .. }),
        "{e}"
    );
    let e = err("[[thread]]\nname='a'\noperators=['source','split','sum']\n");
    assert_eq!(
        e.to_string(),
        "test.toml: instance 'sink' is not placed in any thread"
    );
    let e = err("[[thread]]\nname='a'\noperators=['source','split','sum','sink','sum[0]']\n");
    assert!(matches!(e, PlanError::PlacedTwice { .. }), "{e}");
    let e = err("[[thread]]\nname='a'\noperators=['source','split','sum','sink']\ncore=7\n");
    assert!(matches!(e, PlanError::NoSuchCore { core: 7, .. }), "{e}");
}

#[test]
fn threads_that_feed_each_other_are_refused() {
    let e = plan(
        &graph(),
        &file("[[thread]]\nname='a'\noperators=['source','sum']\n[[thread]]\nname='b'\noperators=['split','sink']\n"),
        &options(),
    )
    .unwrap_err();
    assert!(matches!(e, PlanError::ThreadCycle(_)), "{e}");
}

#[test]
fn plan_file_syntax_errors_carry_a_line() {
    let e = PlanFile::parse("[[thread]]\nname = 'a'\noperators = [\n").unwrap_err();
    assert!(e.to_string().contains("line"), "{e}");
    let e = PlanFile::parse("[[thread]]\nname='a'\noperators=[]\ncolour='red'\n").unwrap_err();
    assert!(e.to_string().contains("colour"), "{e}");
}

#[test]
fn processes_plan_inserts_a_sender_and_a_receiver_on_every_edge() {
    let p = plan(&graph(), &PlanRequest::Processes, &options()).unwrap();
    assert_eq!(p.pes.len(), 5, "one PE per instance");
    assert!(p.pes.iter().all(|pe| pe.threads.len() == 1));
    // source -> split, split -> sum[0], split -> sum[1]: strings, which vary in size, so one
    // OSR ring each; sum[0] and sum[1] -> sink share one OSR ring, so one receiver polls both.
    assert_eq!(p.channels.len(), 4);
    for e in &p.edges {
        let c = &p.channels[e.channel.expect("every edge has a channel")];
        assert!(p.crosses_pes(c));
        assert_eq!(c.to, e.to);
        assert_eq!(e.transport, TransportSpec::shm_osr());
        if p.instance(e.to.instance).name == "sink" {
            assert_eq!(c.senders.len(), 2);
        } else {
            assert_eq!(c.senders, vec![e.from.instance]);
        }
    }
    let text = p.to_string();
    assert!(text.contains("PE 1 'split' on localhost"), "{text}");
    assert!(
        text.contains("+ send c1 (shm-osr) to sum[0]")
            && text.contains("+ receive c1 (shm-osr) from split")
            && text.contains("+ receive c3 (shm-osr) from sum[0], sum[1]"),
        "{text}"
    );
    let dot = p.to_dot();
    assert!(dot.contains("subgraph \"cluster_pe4\""), "{dot}");
    assert!(
        dot.contains("s1_1 -> r1 [style=dashed, label=\"shm-osr\"]"),
        "{dot}"
    );
    let back: PhysicalPlan = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
    assert_eq!(back, p);
}

#[test]
fn a_fixed_size_stream_between_two_pes_rides_a_vega_ring_of_its_size() {
    let p = plan(&graph_with_sum(1), &PlanRequest::Processes, &options()).unwrap();
    let to_sink = p
        .edges
        .iter()
        .find(|e| p.instance(e.to.instance).name == "sink")
        .unwrap();
    assert_eq!(
        to_sink.transport,
        TransportSpec::ShmVega {
            slot_bytes: 8,
            slots: 1024
        }
    );
}

#[test]
fn plan_file_places_threads_in_pes_and_pins_transports() {
    let p = plan(
        &graph(),
        &file(
            r#"
            [[thread]]
            name = "ingest"
            pe = "left"
            operators = ["source", "split"]
            [[thread]]
            name = "count0"
            pe = "right"
            operators = ["sum[0]"]
            [[thread]]
            name = "count1"
            pe = "right"
            operators = ["sum[1]", "sink"]
            [[edge]]
            from = "split"
            to = "sum"
            transport = { kind = "shm-vega", slot_bytes = 64, slots = 16 }
            "#,
        ),
        &options(),
    )
    .unwrap();
    assert_eq!(
        p.pes.iter().map(|pe| pe.name.as_str()).collect::<Vec<_>>(),
        vec!["left", "right"]
    );
    let transports: Vec<String> = p.edges.iter().map(|e| e.transport.to_string()).collect();
    assert_eq!(
        transports,
        vec![
            "fused",
            "shm-vega(slot_bytes=64, slots=16)",
            "shm-vega(slot_bytes=64, slots=16)",
            "threaded(capacity=64)",
            "fused"
        ]
    );
    let crossing = p.channels.iter().filter(|c| p.crosses_pes(c)).count();
    assert_eq!(crossing, 2);
}

#[test]
fn pinned_transports_that_cannot_work_are_refused() {
    let e = plan(
        &graph(),
        &file(
            "[[thread]]\nname='a'\noperators=['source','split','sum','sink']\n\
             [[edge]]\nfrom='split'\nto='sum'\ntransport={kind='threaded', capacity=8}\n",
        ),
        &options(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("both ends run in one thread"), "{e}");
    let e = plan(
        &graph(),
        &file(
            "[[thread]]\nname='a'\npe='x'\noperators=['source','split']\n\
             [[thread]]\nname='b'\npe='y'\noperators=['sum','sink']\n\
             [[edge]]\nfrom='split'\nto='sum'\ntransport={kind='threaded', capacity=8}\n",
        ),
        &options(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("different PEs"), "{e}");
    let e = plan(
        &graph(),
        &file(
            "[[thread]]\nname='a'\noperators=['source','split','sum','sink']\n\
             [[edge]]\nfrom='sum'\nto='split'\ntransport={kind='fused'}\n",
        ),
        &options(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "test.toml: [[edge]] sum -> split is not an edge of wc"
    );
}

#[test]
fn an_edge_between_pes_may_be_pinned_to_mpi_and_shares_one_receiver() {
    let e = plan(
        &graph(),
        &file(
            "[[thread]]\nname='a'\noperators=['source','split']\n\
             [[thread]]\nname='b'\noperators=['sum','sink']\n\
             [[edge]]\nfrom='split'\nto='sum'\ntransport={kind='mpi'}\n",
        ),
        &options(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("both ends run in one PE"), "{e}");
    let four_pes = "[[thread]]\nname='a'\npe='x'\noperators=['source','split']\n\
                   [[thread]]\nname='b'\npe='y'\noperators=['sum[0]']\n\
                   [[thread]]\nname='c'\npe='z'\noperators=['sum[1]']\n\
                   [[thread]]\nname='d'\npe='w'\noperators=['sink']\n\
                   [[edge]]\nfrom='sum'\nto='sink'\n";
    let planned = plan(
        &graph(),
        &file(&format!("{four_pes}transport={{kind='mpi'}}\n")),
        &options(),
    );
    let mpi_built = TransportSpec::Mpi(Default::default()).validate(1).is_ok();
    if !mpi_built {
        // Refused up front, with the runtime's message, where this program lacks mpi.
        assert_eq!(
            planned.unwrap_err().to_string(),
            "edge sum[0], sum[1] -> sink: the mpi transport: this program was built without \
             the mpi feature (rebuild with --features mpi)"
        );
        return;
    }
    let p = planned.unwrap();
    let mpi: Vec<_> = p
        .channels
        .iter()
        .filter(|c| c.transport.name() == "mpi")
        .collect();
    // sum[0] (PE y) and sum[1] (PE z) feed the sink (PE w): one channel, one receiver.
    assert_eq!(mpi.len(), 1);
    assert_eq!(mpi[0].senders.len(), 2);
    assert_eq!(
        mpi[0].transport.to_string(),
        "mpi(batch_bytes=16384, credit=8, max_tuple_bytes=65536)"
    );
    let p = plan(
        &graph(),
        &file(&format!("{four_pes}transport={{kind='mpi', credit=2}}\n")),
        &options(),
    )
    .unwrap();
    assert!(p
        .channels
        .iter()
        .any(|c| c.transport.to_string().contains("credit=2")));
}

#[test]
fn a_pinned_tcp_edge_needs_only_the_parameters_it_changes() {
    let two_pes = "[[thread]]\nname='a'\npe='x'\noperators=['source','split']\n\
                   [[thread]]\nname='b'\npe='y'\noperators=['sum','sink']\n\
                   [[edge]]\nfrom='split'\nto='sum'\n";
    for (pin, shown) in [
        (
            "{kind='tcp'}",
            "profile=adaptive, min_batch_us=0, max_batch_us=200",
        ),
        (
            "{kind='tcp', max_batch_us=50}",
            "profile=adaptive, min_batch_us=0, max_batch_us=50",
        ),
    ] {
        let p = plan(
            &graph(),
            &file(&format!("{two_pes}transport={pin}\n")),
            &options(),
        )
        .unwrap();
        let tcp = p.channels.iter().find(|c| c.transport.name() == "tcp");
        let shown_as = tcp.map(|c| c.transport.to_string()).unwrap_or_default();
        assert!(shown_as.contains(shown), "{pin}: {shown_as}");
    }
}

const HOSTS: &str = r#"
[[host]]
name = "a"
address = "10.0.0.1"
cores = 2
groups = ["left"]
[[host]]
name = "b"
address = "10.0.0.2"
cores = 2
groups = ["right"]
"#;

fn with_hosts() -> PlanOptions {
    PlanOptions {
        hosts: Some(sluice_plan::HostsFile::parse(HOSTS).unwrap()),
        ..options()
    }
}

/// source -> split -> sink, unbuilt, with the three handles.
fn three_in_a_row() -> (GraphBuilder, [sluice_graph::OperatorHandle; 3]) {
    let mut g = GraphBuilder::new("wc");
    let src = g.source("source", Ports::new().output::<String>(), |_| Nothing);
    let split = g.operator(
        "split",
        Ports::new().input::<String>().output::<String>(),
        |_| Pass,
    );
    let sink = g.operator("sink", Ports::new().input::<String>(), |_| Pass);
    g.connect(src.out(0), split.input(0)).unwrap();
    g.connect(split.out(0), sink.input(0)).unwrap();
    (g, [src, split, sink])
}

/// The WordCount-shaped graph with placement constraints on two operators.
fn placed(constraints: &[(&str, Placement)]) -> Graph {
    let (mut g, [src, split, sink]) = three_in_a_row();
    for (name, p) in constraints {
        let handle = match *name {
            "source" => src,
            "split" => split,
            _ => sink,
        };
        g.place(handle, p.clone()).unwrap();
    }
    g.build().unwrap()
}

#[test]
fn hosts_files_are_checked() {
    use sluice_plan::HostsFile;
    assert!(HostsFile::parse(HOSTS).is_ok());
    let e = HostsFile::parse("[[host]]\nname='a'\naddress='x'\n").unwrap_err();
    assert!(e.to_string().contains("line 3"), "{e}");
    let e = HostsFile::parse(
        "[[host]]\nname='a'\naddress='1.2.3.4'\n[[host]]\nname='a'\naddress='1.2.3.5'\n",
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "host 'a' is listed twice");
    assert!(HostsFile::parse("").is_err());
    let e = HostsFile::parse(&format!("{HOSTS}[launcher]\nadress = '10.0.0.9'\n")).unwrap_err();
    assert!(e.to_string().contains("unknown field `adress`"), "{e}");
}

#[test]
fn the_launcher_address_reaches_the_plan_only_with_a_hosts_file() {
    let g = placed(&[]);
    let local = plan(&g, &PlanRequest::Processes, &options()).unwrap();
    assert_eq!(local.launcher, None);
    assert_eq!(
        plan(&g, &PlanRequest::Processes, &with_hosts())
            .unwrap()
            .launcher,
        Some(sluice_plan::LauncherSpec { address: None })
    );
    let file = format!("{HOSTS}[launcher]\naddress = '10.0.0.254'\n");
    let options = PlanOptions {
        hosts: Some(sluice_plan::HostsFile::parse(&file).unwrap()),
        ..options()
    };
    let p = plan(&g, &PlanRequest::Processes, &options).unwrap();
    assert_eq!(
        p.launcher.and_then(|l| l.address).map(|a| a.to_string()),
        Some("10.0.0.254".to_string())
    );
}

#[test]
fn colocated_operators_share_a_host_and_pins_follow_it() {
    let g = placed(&[
        ("source", Placement::Host("b".into())),
        ("split", Placement::ColocateWith("source".into())),
        ("sink", Placement::ColocateWith("split".into())),
    ]);
    let p = plan(&g, &PlanRequest::Processes, &with_hosts()).unwrap();
    assert!(p.pes.iter().all(|pe| pe.host == "b"), "{p}");
    assert_eq!(
        p.host_of(&p.pes[0]).unwrap().address.to_string(),
        "10.0.0.2"
    );
    // Three threads on a 2-core host stay unpinned.
    assert!(p.threads().all(|t| t.core.is_none()));
}

#[test]
fn placement_constraints_that_cannot_be_met_are_named() {
    let err = |constraints: &[(&str, Placement)], request: &PlanRequest| {
        plan(&placed(constraints), request, &with_hosts())
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err(
            &[("split", Placement::Host("c".into()))],
            &PlanRequest::Processes
        ),
        "operator 'split' must run on host 'c', but no host meets it together with its other \
         constraints (hosts: a (groups left); b (groups right))"
    );
    let e = err(
        &[
            ("split", Placement::Group("left".into())),
            ("sink", Placement::Group("left".into())),
            ("sink", Placement::ExlocateFrom("split".into())),
        ],
        &PlanRequest::Processes,
    );
    assert!(
        e.contains("never on the same host as 'split'") && e.contains("cannot keep"),
        "{e}"
    );
    let e = err(
        &[
            ("sink", Placement::ColocateWith("split".into())),
            ("sink", Placement::ExlocateFrom("split".into())),
        ],
        &PlanRequest::Processes,
    );
    assert!(e.contains("must share its host"), "{e}");
    let e = err(&[("split", Placement::Isolated)], &PlanRequest::Fused);
    assert!(
        e.starts_with("operator 'split' must run alone in its own PE, but its PE 'main' also runs"),
        "{e}"
    );
    // Isolation holds under one PE per instance; exlocation without a second host does not.
    assert!(plan(
        &placed(&[("split", Placement::Isolated)]),
        &PlanRequest::Processes,
        &options()
    )
    .is_ok());
    let e = plan(
        &placed(&[("sink", Placement::ExlocateFrom("source".into()))]),
        &PlanRequest::Processes,
        &options(),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("never on the same host as 'source'"),
        "{e}"
    );
}

#[test]
fn a_shared_receiver_takes_one_sender_per_thread() {
    // sum[0] and sum[1] share a thread, sum[2] has its own PE: an OSR ring may not take two
    // senders of one thread (one could wait for room behind the other's open record).
    let p = plan(
        &graph_with_sum(3),
        &file(
            "[[thread]]\nname='a'\npe='x'\noperators=['source','split']\n\
             [[thread]]\nname='b'\npe='y'\noperators=['sum[0]','sum[1]']\n\
             [[thread]]\nname='c'\npe='z'\noperators=['sum[2]']\n\
             [[thread]]\nname='d'\npe='w'\noperators=['sink']\n",
        ),
        &options(),
    )
    .unwrap();
    let into_sink: Vec<&sluice_plan::ChannelPlan> = p
        .channels
        .iter()
        .filter(|c| p.instance(c.to.instance).name == "sink")
        .collect();
    assert_eq!(into_sink.len(), 2, "{p}");
    for c in into_sink {
        assert_eq!(c.transport, TransportSpec::shm_osr());
        let threads: Vec<usize> = c.senders.iter().map(|s| p.instance(*s).thread).collect();
        let mut distinct = threads.clone();
        distinct.dedup();
        assert_eq!(threads, distinct, "{p}");
    }
}

/// A plan file of two PEs, `x` (source, split) and `y` (sum, sink), with `extra` appended.
fn two_pes(extra: &str) -> PlanRequest {
    file(&format!(
        "[[thread]]\nname='a'\npe='x'\noperators=['source','split']\n\
         [[thread]]\nname='b'\npe='y'\noperators=['sum','sink']\n{extra}"
    ))
}

/// The message of the plan `request` refused.
fn refusal(graph: &Graph, request: &PlanRequest) -> String {
    plan(graph, request, &options())
        .expect_err("the plan is refused")
        .to_string()
}

#[test]
fn what_the_runtime_would_refuse_the_planner_refuses_with_its_message() {
    let pinned = |transport: &str| {
        two_pes(&format!(
            "[[edge]]\nfrom='split'\nto='sum'\ntransport={transport}\n"
        ))
    };
    let g = graph();
    // A channel of more than three senders is labelled by its first and last.
    let mut wide = plan(&graph_with_sum(5), &PlanRequest::Processes, &options()).unwrap();
    let shared = wide.channels.iter_mut().find(|c| c.senders.len() == 5);
    shared.unwrap().transport = TransportSpec::ShmOsr {
        capacity_bytes: 1 << 20,
        batch_bytes: 0,
    };
    assert_eq!(
        wide.check().unwrap_err().to_string(),
        "edge sum[0] ... sum[4] (5 senders) -> sink: transport shm-osr: batch_bytes must be at \
         least 1"
    );
    assert_eq!(
        refusal(&g, &pinned("{kind='shm-vega', slot_bytes=0, slots=16}")),
        "edge split -> sum[0]: transport shm-vega: slot_bytes must be at least 1, got 0"
    );
    assert!(refusal(
        &g,
        &pinned("{kind='shm-vega', slot_bytes=4294967296, slots=16}")
    )
    .starts_with("edge split -> sum[0]: transport shm-vega: slot_bytes/slots a slot of 4294967297 bytes is above the limit"));
    assert_eq!(
        refusal(&g, &pinned("{kind='shm-vega', slot_bytes=64, slots=0}")),
        "edge split -> sum[0]: transport shm-vega: slot_bytes/slots a Vega ring needs at least one slot"
    );
    assert!(refusal(&g, &pinned("{kind='shm-osr', capacity_bytes=100}"))
        .starts_with("edge split -> sum[0]: transport shm-osr: capacity_bytes "));
    assert!(refusal(&g, &pinned("{kind='tcp', batch_bytes=0}"))
        .starts_with("edge split -> sum[0]: transport tcp: batch_bytes must be between 1 and"));
    assert!(refusal(&g, &pinned("{kind='udp-mq', queues=0}"))
        .starts_with("edge split -> sum[0]: transport udp-mq: queues must be between 1 and"));
}

#[test]
fn a_fixed_size_stream_pinned_to_a_transport_too_small_for_its_tuples_is_refused() {
    // sum -> sink carries u64, 8-byte facade tuples.
    let file = |transport: &str| {
        file(&format!(
            "[[thread]]\nname='a'\npe='x'\noperators=['source','split','sum']\n\
             [[thread]]\nname='b'\npe='y'\noperators=['sink']\n\
             [[edge]]\nfrom='sum'\nto='sink'\ntransport={transport}\n"
        ))
    };
    assert_eq!(
        refusal(&graph(), &file("{kind='tcp', max_tuple_bytes=4}")),
        "edge sum[0] -> sink is pinned to tcp(profile=adaptive, min_batch_us=0, \
         max_batch_us=200, batch_bytes=65536, max_tuple_bytes=4), but its tuples are 8 bytes \
         each and the transport carries at most 4"
    );
    plan(
        &graph(),
        &file("{kind='tcp', max_tuple_bytes=8}"),
        &options(),
    )
    .unwrap();
}

#[test]
fn a_plan_file_says_each_thing_once() {
    let g = graph();
    let e = plan(
        &g,
        &file(
            "[[thread]]\nname='a'\noperators=['source','split']\n\
             [[thread]]\nname='a'\noperators=['sum','sink']\n",
        ),
        &options(),
    )
    .unwrap_err();
    assert_eq!(e, PlanError::DuplicateThread("a".into()));
    assert_eq!(
        e.to_string(),
        "two threads are named 'a'; every thread needs a name of its own"
    );
    let pin = "[[edge]]\nfrom='split'\nto='sum'\ntransport={kind='tcp'}\n";
    assert_eq!(
        refusal(&g, &two_pes(&format!("{pin}{pin}"))),
        "test.toml: [[edge]] split -> sum is pinned twice"
    );
    let e = plan(
        &g,
        &file(
            "[[thread]]\nname=\"a\\u0000b\"\noperators=['source','split']\n\
             [[thread]]\nname='c'\noperators=['sum','sink']\n",
        ),
        &options(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "thread name 'a\\0b' is empty or holds a NUL byte"
    );
}

#[test]
fn an_unknown_transport_parameter_is_a_syntax_error_with_its_place() {
    let text = "[[thread]]\nname='a'\npe='x'\noperators=['source','split']\n\
                [[thread]]\nname='b'\npe='y'\noperators=['sum','sink']\n\
                [[edge]]\nfrom='split'\nto='sum'\n\
                transport={kind='shm-vega', slot_bytes=64, slots=16, slot=3}\n";
    let e = PlanFile::parse(text).unwrap_err();
    assert!(e.message().contains("unknown field `slot`"), "{e}");
    let error = sluice_plan::TomlSyntaxError::new("plan file", "p.toml".as_ref(), text, &e);
    assert_eq!((error.line, error.what), (12, "plan file"));
}

#[test]
fn queue_capacities_are_bounded_and_the_setting_named() {
    let g = graph();
    let huge = PlanOptions {
        queue_capacity: 1 << 32,
        ..options()
    };
    assert_eq!(
        plan(&g, &PlanRequest::Threaded, &huge)
            .unwrap_err()
            .to_string(),
        "queue_capacity 4294967296 is out of range: a threaded port holds 1 to 16777216 messages"
    );
    let zero = PlanOptions {
        queue_capacity: 0,
        ..options()
    };
    assert!(plan(&g, &PlanRequest::Fused, &zero).is_err());
    assert_eq!(
        refusal(
            &g,
            &file(
                "queue_capacity = 16777217\n[[thread]]\nname='a'\n\
                 operators=['source','split','sum','sink']\n"
            )
        ),
        "test.toml: queue_capacity 16777217 is out of range: a threaded port holds 1 to \
         16777216 messages"
    );
    let pinned = two_pes(
        "[[edge]]\nfrom='split'\nto='sum'\ntransport={kind='threaded', capacity=99999999999}\n",
    );
    // A threaded port between PEs is refused first for crossing PEs; inside a PE its capacity
    // is checked like any other parameter.
    assert!(refusal(&g, &pinned).contains("different PEs"));
    let one_pe = file(
        "[[thread]]\nname='a'\noperators=['source','split']\n\
         [[thread]]\nname='b'\noperators=['sum','sink']\n\
         [[edge]]\nfrom='split'\nto='sum'\ntransport={kind='threaded', capacity=99999999999}\n",
    );
    assert_eq!(
        refusal(&g, &one_pe),
        "edge split -> sum[0]: transport threaded: capacity must be between 1 and 16777216, got \
         99999999999"
    );
}

#[test]
fn a_plan_handed_over_is_checked_like_a_planned_one() {
    let mut p = plan(&graph(), &PlanRequest::Processes, &options()).unwrap();
    p.check().unwrap();
    p.channels[0].transport = TransportSpec::ShmVega {
        slot_bytes: 0,
        slots: 8,
    };
    assert!(matches!(p.check(), Err(PlanError::Transport { .. })));
    let mut p = plan(&graph(), &PlanRequest::Threaded, &options()).unwrap();
    let first = p.pes[0].threads[0].name.clone();
    p.pes[0].threads[1].name = first.clone();
    assert_eq!(p.check(), Err(PlanError::DuplicateThread(first)));
}

#[test]
fn host_names_and_launch_words_that_would_break_a_command_are_refused() {
    use sluice_plan::HostsFile;
    let host = |name: &str, launch: &str| {
        HostsFile::parse(&format!(
            "[[host]]\nname=\"{name}\"\naddress='10.0.0.1'\nlaunch={launch}\n"
        ))
        .map(drop)
        .map_err(|e| e.to_string())
    };
    assert!(host("a", "['ssh', 'a']").is_ok());
    assert!(host("", "[]")
        .unwrap_err()
        .contains("host name '' is empty"));
    assert!(host("a b", "[]").unwrap_err().contains("holds a space"));
    assert!(host("a\\nslots=99", "[]")
        .unwrap_err()
        .contains("host name 'a\\nslots=99'"));
    assert_eq!(
        host("a", "['ssh', \"a\\u0000\"]").unwrap_err(),
        "host 'a': launch word 'a\\0' is empty or holds a NUL byte (it is an argument of a \
         command)"
    );
}

/// Two parallel chains source[i] -> work[i] (forward) -> sink[i]: the chains never talk to
/// each other, so two hosts can split them with no traffic between hosts.
fn two_chains() -> Graph {
    let mut g = GraphBuilder::new("chains");
    let src = g.source("source", Ports::new().output::<String>(), |_| Nothing);
    let work = g.operator(
        "work",
        Ports::new().input::<String>().output::<String>(),
        |_| Pass,
    );
    let sink = g.operator("sink", Ports::new().input::<String>(), |_| Pass);
    for op in [src, work, sink] {
        g.set_parallelism(op, 2).unwrap();
    }
    g.connect(src.out(0), work.input(0)).unwrap();
    g.connect(work.out(0), sink.input(0)).unwrap();
    g.build().unwrap()
}

#[test]
fn the_placement_optimizer_keeps_each_chain_on_one_host() {
    use sluice_plan::traffic_placement::{compare, plan_file, task_graph, Scheduler};
    let graph = two_chains();
    let options = with_hosts();
    let processes = plan(&graph, &PlanRequest::Processes, &options).unwrap();
    let tasks = task_graph(&processes, |_| 1.0);
    let host_of = Scheduler::Consolidated.assign(&tasks, &[2, 2]);
    let file = plan_file(&processes, &processes.hosts, &host_of);
    let placed = plan(
        &graph,
        &PlanRequest::File("optimized".into(), file.clone()),
        &options,
    )
    .unwrap();
    // Every instance runs where the optimizer put it, and no edge crosses hosts.
    for instance in &placed.instances {
        let host = &placed.pes[instance.pe].host;
        assert_eq!(*host, processes.hosts[host_of[instance.id.0]].name);
    }
    assert_eq!(placed.instance_hosts(), host_of);
    assert_eq!(
        plan(&graph, &PlanRequest::Fused, &PlanOptions::default())
            .unwrap()
            .instance_hosts(),
        vec![0; processes.instances.len()]
    );
    for edge in &placed.edges {
        let host = |i: sluice_plan::InstanceId| &placed.pes[placed.instances[i.0].pe].host;
        assert_eq!(host(edge.from.instance), host(edge.to.instance));
    }
    let figures = compare(&tasks, &[2, 2]);
    assert_eq!(figures[2].0, Scheduler::Consolidated);
    assert_eq!(figures[2].1.cross_host_traffic, 0.0);
    assert_eq!(figures[2].1.imbalance, 1.0);
    // On three hosts of two slots round robin in topological order puts each chain's three
    // tasks on three hosts, so all traffic crosses; balanced, two tasks a host, each chain
    // must be cut once at least, and the scheduler cuts no more: two edges of four.
    let figures = compare(&tasks, &[2, 2, 2]);
    assert_eq!(figures[0].0, Scheduler::RoundRobin);
    assert_eq!(figures[0].1.cross_host_traffic, 1.0);
    assert_eq!(figures[2].1.cross_host_traffic, 0.5);
    assert_eq!(figures[2].1.imbalance, 1.0);
    // The plan file round-trips through TOML.
    let text = toml::to_string(&file).unwrap();
    assert_eq!(PlanFile::parse(&text).unwrap(), file);
}

#[test]
fn measured_traffic_pairs_a_source_with_the_instance_its_skewed_keys_favour() {
    use sluice_plan::consolidate::PlacementQuality;
    use sluice_plan::fusion::{EdgeProfile, InstanceProfile, Profile};
    use sluice_plan::traffic_placement::{
        measured_task_graph, profiled_task_graph, task_graph, Scheduler,
    };
    // source -> work[0], work[1] (key-by): as declared, each gets half the source's tuples.
    let mut g = GraphBuilder::new("skew");
    let src = g.source("source", Ports::new().output::<String>(), |_| Nothing);
    let work = g.operator("work", Ports::new().input::<String>(), |_| Pass);
    g.set_parallelism(work, 2).unwrap();
    g.connect_with(
        src.out(0),
        work.input(0),
        sluice_graph::Partitioning::key_by(|s: &String| s.len()),
    )
    .unwrap();
    let graph = g.build().unwrap();
    let processes = plan(&graph, &PlanRequest::Processes, &options()).unwrap();
    let id = |name: &str| processes.instances.iter().position(|i| i.name == name);
    let (s, w0, w1) = (
        id("source").unwrap(),
        id("work[0]").unwrap(),
        id("work[1]").unwrap(),
    );
    let declared = task_graph(&processes, |_| 1.0);
    assert_eq!(declared.cut(&[0, 0, 1]), declared.cut(&[0, 1, 0]));
    // As measured over two seconds: 1800 tuples to work[1], 200 to work[0]; a core each.
    let edge = |to: &str, tuples| EdgeProfile {
        from: "source".into(),
        to: to.into(),
        tuples,
        bytes: 0,
    };
    let busy = |tuples_in, tuples_out| InstanceProfile {
        tuples_in,
        tuples_out,
        cpu_ns: 2_000_000_000,
    };
    let mut profile = Profile {
        job: "skew".into(),
        seconds: 2.0,
        instances: [
            ("source".to_string(), busy(0, 2000)),
            ("work[0]".to_string(), busy(200, 0)),
            ("work[1]".to_string(), busy(1800, 0)),
        ]
        .into_iter()
        .collect(),
        edges: vec![edge("work[0]", 200), edge("work[1]", 1800)],
    };
    let tasks = profiled_task_graph(&processes, &profile);
    assert_eq!(tasks.weight(s), 1.0);
    assert_eq!(tasks.total_traffic(), 1000.0);
    // Two hosts of one slot: the source shares a host with work[1], and only work[0]'s
    // tenth of the traffic crosses.
    let host_of = Scheduler::Consolidated.assign(&tasks, &[1, 1]);
    assert_eq!(host_of[s], host_of[w1]);
    assert_ne!(host_of[s], host_of[w0]);
    let quality = PlacementQuality::of(&tasks, &host_of, &[1, 1]);
    assert!(
        (quality.cross_host_traffic - 0.1).abs() < 1e-9,
        "{quality:?}"
    );
    // Without CPU time, the tuples each handled weigh instead.
    for figures in profile.instances.values_mut() {
        figures.cpu_ns = 0;
    }
    let tasks = profiled_task_graph(&processes, &profile);
    assert_eq!(
        (tasks.weight(s), tasks.weight(w0), tasks.weight(w1)),
        (1000.0, 100.0, 900.0)
    );
    // Figures naming no instance of the plan are left out.
    let tasks = measured_task_graph(&processes, &[1.0], [(s, w0, 5.0), (s, 99, 7.0)]);
    assert_eq!((tasks.len(), tasks.weight(w1)), (3, 0.0));
    assert_eq!(tasks.total_traffic(), 5.0);
}

#[test]
fn rebalancing_moves_only_a_placement_the_threshold_says_is_worth_it() {
    use sluice_plan::traffic_placement::{rebalance, task_graph, Scheduler};
    let graph = two_chains();
    let processes = plan(&graph, &PlanRequest::Processes, &with_hosts()).unwrap();
    let tasks = task_graph(&processes, |_| 1.0);
    // Round robin over three hosts cuts every edge; the scheduler half of them.
    let round_robin = Scheduler::RoundRobin.assign(&tasks, &[2, 2, 2]);
    let better = rebalance(&tasks, &round_robin, &[2, 2, 2], 0.1).unwrap();
    assert_eq!(better.now.cross_host_traffic, 1.0);
    assert_eq!(better.proposed.cross_host_traffic, 0.5);
    assert_eq!(
        better.host_of,
        Scheduler::Consolidated.assign(&tasks, &[2, 2, 2])
    );
    // A gain below the threshold, or a placement already as good, moves nothing.
    assert_eq!(rebalance(&tasks, &round_robin, &[2, 2, 2], 0.5), None);
    assert_eq!(rebalance(&tasks, &better.host_of, &[2, 2, 2], 0.0), None);
    // Without traffic there is nothing to judge by.
    let idle = task_graph(&processes, |_| 0.0);
    assert_eq!(rebalance(&idle, &round_robin, &[2, 2, 2], 0.0), None);
}

#[test]
fn a_plan_file_host_must_exist_and_agree_within_a_pe() {
    let graph = two_chains();
    let mut file = PlanFile::parse(
        "[[thread]]\nname='t'\noperators=['source','work','sink']\npe='p'\nhost='c'\n",
    )
    .unwrap();
    let request = |f: &PlanFile| PlanRequest::File("f.toml".into(), f.clone());
    let e = plan(&graph, &request(&file), &with_hosts()).unwrap_err();
    assert!(e.to_string().contains("names host 'c'"), "{e}");
    assert!(e.to_string().contains("hosts: a, b"), "{e}");
    file = PlanFile::parse(
        "[[thread]]\nname='t'\noperators=['source']\npe='p'\nhost='a'\n\
         [[thread]]\nname='u'\noperators=['work','sink']\npe='p'\nhost='b'\n",
    )
    .unwrap();
    let e = plan(&graph, &request(&file), &with_hosts()).unwrap_err();
    assert!(
        e.to_string()
            .contains("PE 'p' has threads on host 'a' and on host 'b'"),
        "{e}"
    );
}

/// A profile of `plan`'s instances: each costs `cost` cores over one second, and each edge
/// carries `rate` tuples/s.
fn uniform_profile(plan: &PhysicalPlan, cost: f64, rate: u64) -> sluice_plan::fusion::Profile {
    use sluice_plan::fusion::{EdgeProfile, InstanceProfile, Profile};
    Profile {
        job: plan.job.clone(),
        seconds: 1.0,
        instances: plan
            .instances
            .iter()
            .map(|i| {
                let figures = InstanceProfile {
                    cpu_ns: (cost * 1e9) as u64,
                    ..InstanceProfile::default()
                };
                (i.name.clone(), figures)
            })
            .collect(),
        edges: plan
            .edges
            .iter()
            .map(|e| EdgeProfile {
                from: plan.instances[e.from.instance.0].name.clone(),
                to: plan.instances[e.to.instance.0].name.clone(),
                tuples: rate,
                bytes: 0,
            })
            .collect(),
    }
}

#[test]
fn fusion_cuts_an_expensive_chain_and_keeps_a_chatty_one_fused() {
    use sluice_plan::fusion::{FusionChoice, DEFAULT_HOP_NS};
    let processes = plan(&graph(), &PlanRequest::Processes, &options()).unwrap();
    // Five instances of 0.3 cores each, little traffic: two threads of 0.6 and 0.9 at most.
    let cheap_edges = uniform_profile(&processes, 0.3, 1_000);
    let choice = FusionChoice::new(&processes, &cheap_edges, 2, DEFAULT_HOP_NS);
    assert_eq!(choice.threads.len(), 2);
    assert!(choice.bottleneck() < 1.0, "{choice:?}");
    // The same cost, but 20 M tuples/s on every edge: a cut costs more than it saves.
    let chatty = uniform_profile(&processes, 0.3, 20_000_000);
    let choice = FusionChoice::new(&processes, &chatty, 2, DEFAULT_HOP_NS);
    assert_eq!(choice.threads.len(), 1, "{choice:?}");
    // One core: always fused.
    let choice = FusionChoice::new(&processes, &cheap_edges, 1, DEFAULT_HOP_NS);
    assert_eq!(choice.threads.len(), 1);
}

#[test]
fn fusion_splits_parallel_chains_between_them_and_the_plan_runs_as_written() {
    use sluice_plan::fusion::{FusionChoice, DEFAULT_HOP_NS};
    let graph = two_chains();
    let processes = plan(&graph, &PlanRequest::Processes, &options()).unwrap();
    let profile = uniform_profile(&processes, 0.3, 1_000_000);
    let choice = FusionChoice::new(&processes, &profile, 2, DEFAULT_HOP_NS);
    assert_eq!(choice.threads.len(), 2);
    // Each thread holds one whole chain, so no tuple crosses: 0.9 cores each.
    assert!((choice.bottleneck() - 0.9).abs() < 1e-9, "{choice:?}");
    let file = choice.plan_file(&processes);
    let fused = plan(
        &graph,
        &PlanRequest::File("fusion".into(), file),
        &options(),
    )
    .unwrap();
    assert_eq!(fused.threads().count(), 2);
}

proptest::proptest! {
    /// Whatever the profile, the threads fusion chooses make a plan the planner accepts
    /// (every instance placed once, no cycle between threads), and never more than the cores.
    #[test]
    fn every_fusion_choice_is_a_valid_plan(
        costs in proptest::collection::vec(0u64..2_000_000_000, 7),
        rates in proptest::collection::vec(0u64..50_000_000, 12),
        cores in 1usize..5,
    ) {
        use sluice_plan::fusion::{FusionChoice, DEFAULT_HOP_NS};
        let graph = graph_with_sum(3);
        let processes = plan(&graph, &PlanRequest::Processes, &options()).unwrap();
        let mut profile = uniform_profile(&processes, 0.0, 0);
        for (figures, cost) in profile.instances.values_mut().zip(&costs) {
            figures.cpu_ns = *cost;
        }
        for (edge, rate) in profile.edges.iter_mut().zip(&rates) {
            edge.tuples = *rate;
        }
        let choice = FusionChoice::new(&processes, &profile, cores, DEFAULT_HOP_NS);
        proptest::prop_assert!(choice.threads.len() <= cores);
        let file = choice.plan_file(&processes);
        let fused = plan(&graph, &PlanRequest::File("fusion".into(), file), &options());
        proptest::prop_assert!(fused.is_ok(), "{:?}", fused.err());
    }
}

#[test]
fn a_plan_file_replicates_only_through_the_graph_it_makes() {
    use sluice_graph::Partitioning;
    let (mut g, [_, split, _]) = three_in_a_row();
    g.replicable(split, Partitioning::RoundRobin).unwrap();
    let graph = g.build().unwrap();
    let request = file(
        "[[replicate]]\noperator = 'split'\nparallelism = 3\n\
         [[thread]]\nname = 'all'\noperators = ['source', 'split', 'sink']\n",
    );
    let e = plan(&graph, &request, &options()).unwrap_err();
    assert!(
        matches!(
            e,
            PlanError::Unreplicated {
                wanted: 3,
                has: 1,
                ..
            }
        ),
        "{e}"
    );
    let wide = sluice_plan::replicated_graph(&graph, &request).unwrap();
    let p = plan(&wide, &request, &options()).unwrap();
    assert_eq!(p.instances.len(), 5);
    assert!(p.edges.iter().any(|e| e.partitioning == "round-robin"));
    let refused = file("[[replicate]]\noperator = 'sink'\nparallelism = 2\n");
    let e = sluice_plan::replicated_graph(&graph, &refused).unwrap_err();
    assert!(e.to_string().contains("'sink' keeps state"), "{e}");
}

#[test]
fn replication_shares_the_measured_traffic_of_the_operator_among_its_instances() {
    use sluice_graph::Partitioning;
    use sluice_plan::fusion::{EdgeProfile, InstanceProfile, Profile};
    use sluice_plan::replication::ReplicationChoice;
    let (mut g, [_, split, _]) = three_in_a_row();
    g.replicable(split, Partitioning::RoundRobin).unwrap();
    let graph = g.build().unwrap();
    let processes = plan(&graph, &PlanRequest::Processes, &options()).unwrap();
    let figures = |tuples_in, tuples_out, cores: f64| InstanceProfile {
        tuples_in,
        tuples_out,
        cpu_ns: (cores * 1e9) as u64,
    };
    let edge = |from: &str, to: &str, tuples| EdgeProfile {
        from: from.into(),
        to: to.into(),
        tuples,
        bytes: 0,
    };
    // Split takes 2 of the job's 4 cores' worth: on 6 cores it gets 3 instances.
    let profile = Profile {
        job: "wc".into(),
        seconds: 1.0,
        instances: [
            ("source".to_string(), figures(0, 900, 1.0)),
            ("split".to_string(), figures(900, 2700, 2.0)),
            ("sink".to_string(), figures(2700, 0, 1.0)),
        ]
        .into_iter()
        .collect(),
        edges: vec![edge("source", "split", 900), edge("split", "sink", 2700)],
    };
    let choice = ReplicationChoice::new(&graph, &processes, &profile, 6).unwrap();
    assert_eq!((choice.operator.as_str(), choice.parallelism), ("split", 3));
    let request = file("[[replicate]]\noperator = 'split'\nparallelism = 3\n");
    let wide = sluice_plan::replicated_graph(&graph, &request).unwrap();
    let wide_plan = plan(&wide, &PlanRequest::Processes, &options()).unwrap();
    let spread = choice.spread(&processes, &profile, &wide_plan);
    let tuples = |from: &str, to: &str| {
        let found = spread.edges.iter().find(|e| e.from == from && e.to == to);
        found.map(|e| e.tuples)
    };
    for k in 0..3 {
        let split = format!("split[{k}]");
        assert_eq!(tuples("source", &split), Some(300), "{spread:?}");
        assert_eq!(tuples(&split, "sink"), Some(900), "{spread:?}");
        assert_eq!(spread.instances[&split], figures(300, 900, 2.0 / 3.0));
    }
    assert_eq!(spread.instances["sink"], profile.instances["sink"]);
    assert_eq!(spread.edges.len(), 6);
}

/// The sink's shared channel when every sum instance runs in its own PE.
fn fan_in(sums: usize) -> Vec<(TransportSpec, usize)> {
    let plan = plan(&graph_with_sum(sums), &PlanRequest::Processes, &options()).unwrap();
    let sink = plan
        .instances
        .iter()
        .position(|i| i.name == "sink")
        .unwrap();
    plan.channels
        .iter()
        .filter(|c| c.to.instance.0 == sink)
        .map(|c| (c.transport.clone(), c.senders.len()))
        .collect()
}

#[test]
fn a_fan_in_past_sixteen_processes_is_one_ring_and_past_the_ring_several() {
    // 20 upstream processes (the Vega paper's feed handlers into one engine) share one ring,
    // where 16 was the limit.
    assert_eq!(fan_in(20), vec![(TransportSpec::shm_osr(), 20)]);
    // Beyond the producer table the planner opens a second ring rather than refusing.
    let most = sluice_transport::shm_osr::MAX_SENDERS;
    assert_eq!(
        fan_in(most + 3),
        vec![
            (TransportSpec::shm_osr(), most),
            (TransportSpec::shm_osr(), 3)
        ]
    );
}

#[test]
fn auto_never_plans_more_threads_than_cores_and_places_every_instance_once() {
    for cores in 1..=8 {
        for parallelism in 1..=6 {
            for source_rate in [None, Some(1_000), Some(100_000_000)] {
                let graph = graph_with_sum(parallelism);
                let options = PlanOptions {
                    cores,
                    source_rate,
                    ..options()
                };
                let p = plan(&graph, &PlanRequest::Auto, &options).unwrap();
                let threads = p.threads().count();
                assert!((1..=cores).contains(&threads), "{cores} cores\n{p}");
                let mut placed: Vec<usize> = p
                    .threads()
                    .flat_map(|t| t.instances.iter().map(|i| i.0))
                    .collect();
                placed.sort_unstable();
                assert_eq!(placed, (0..p.instances.len()).collect::<Vec<_>>(), "{p}");
                assert_eq!(p.pes.len(), 1);
                let why = sluice_plan::AutoChoice::new(&graph, &options)
                    .unwrap()
                    .reason;
                assert!(
                    why.starts_with(&format!("auto: {threads} thread(s) for {cores} core(s)")),
                    "{why}"
                );
            }
        }
    }
}

/// Each thread of `p` by its instances' names.
fn thread_names(p: &PhysicalPlan) -> Vec<Vec<String>> {
    p.threads()
        .map(|t| {
            t.instances
                .iter()
                .map(|i| p.instance(*i).name.clone())
                .collect()
        })
        .collect()
}

#[test]
fn auto_is_fused_where_one_core_carries_the_rate_and_split_where_it_does_not() {
    // Four undeclared operators at 100 ns a tuple: 400 ns a source tuple fused.
    let at = |source_rate| {
        let options = PlanOptions {
            source_rate,
            ..options()
        };
        let p = plan(&graph_with_sum(1), &PlanRequest::Auto, &options).unwrap();
        assert_eq!(p.strategy, "auto");
        let why = sluice_plan::AutoChoice::new(&graph_with_sum(1), &options)
            .unwrap()
            .reason;
        let pinned = p.threads().all(|t| t.core.is_some());
        (thread_names(&p), pinned, why)
    };
    let fused = vec![vec!["source", "split", "sum", "sink"]];
    let split = vec![vec!["source", "split"], vec!["sum", "sink"]];
    // 1 M tuples/s keeps a core 0.4 busy: within the headroom of half a core.
    let (threads, _, why) = at(Some(1_000_000));
    assert_eq!(threads, fused);
    assert!(
        why.contains("fused: at the asked 1000000 tuples/s"),
        "{why}"
    );
    assert!(why.contains("0.40 of its time"), "{why}");
    // 1.5 M: 0.6 of a core, over it.
    let (threads, pinned, why) = at(Some(1_500_000));
    assert_eq!(threads, split);
    assert!(pinned, "two threads on two cores are pinned");
    assert!(why.starts_with("auto: 2 thread(s) for 2 core(s)"), "{why}");
    assert!(
        why.contains("split: at the asked 1500000 tuples/s"),
        "{why}"
    );
    // No rate asked: as fast as it goes, which the split does.
    let (threads, _, why) = at(None);
    assert_eq!(threads, split);
    assert!(why.contains("split: no rate asked"), "{why}");
}

#[test]
fn auto_cuts_where_the_declared_costs_balance_the_threads() {
    // source -> map -> sink, the sink declared to cost `sink_ns` a tuple.
    let chain = |sink_ns: f64| {
        let mut g = GraphBuilder::new("chain");
        let src = g.source("source", Ports::new().output::<String>(), |_| Nothing);
        let map = g.operator(
            "map",
            Ports::new().input::<String>().output::<String>(),
            |_| Pass,
        );
        let sink = g.operator("sink", Ports::new().input::<String>(), |_| Pass);
        g.connect(src.out(0), map.input(0)).unwrap();
        g.connect(map.out(0), sink.input(0)).unwrap();
        let cost = sluice_graph::DeclaredCost {
            ns_per_tuple: sink_ns,
            outputs_per_input: 0.0,
        };
        g.declare_cost(sink, cost).unwrap();
        let p = plan(&g.build().unwrap(), &PlanRequest::Auto, &options()).unwrap();
        thread_names(&p)
    };
    // A sink ten times dearer than the rest gets a thread of its own...
    assert_eq!(chain(1_000.0), [vec!["source", "map"], vec!["sink"]]);
    // ...where with every cost alike the first even cut is taken.
    assert_eq!(chain(100.0), [vec!["source"], vec!["map", "sink"]]);
}
