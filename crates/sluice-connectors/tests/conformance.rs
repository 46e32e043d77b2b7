//! One conformance suite for every connector of the registry (`registry::CONNECTORS`): each
//! check runs over the whole list, and a connector without a peer here (the real other end
//! its source reads from or its sink writes to) fails every check, so a new connector cannot
//! skip the suite.
//!
//! Sources: every line arrives, in order; a source that promises an end of input ends the job
//! by itself; a record that does not decode is counted, the others still arrive; a source that
//! promises to resume, suspended mid-input and resumed, emits every line exactly once.
//! Sinks: every line is written, in order, and is all there when the job has ended (flushed
//! at the end of the stream). Every sink the registry lists as exactly once
//! (`Connector::exactly_once_sink`) pre-commits at a barrier (a recovery from that checkpoint
//! publishes what came before it), publishes nothing before the checkpoint completes and
//! everything it holds once it does, and recovered from a checkpoint drops what was written
//! after it. (`exactly_once.rs`, `exactly_once_job.rs` and `kafka.rs` check the file and Kafka
//! sinks further, under crashes at every step and in whole jobs.)

// This binary uses a part of the test broker module.
#[allow(dead_code)]
#[path = "kafka/broker.rs"]
mod broker;
#[path = "../../sluice-ops/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::ClientConfig;
use sluice_connectors::registry::{resolve, Connector, CONNECTORS};
use sluice_graph::{Operator, OperatorContext, OperatorKind, Output, Snapshot};
use sluice_ops::{Dataflow, Stream};
use sluice_plan::{plan, PlanOptions, PlanRequest};
use sluice_runtime::{resume_with, start, JobReport, Launcher, RunOptions, StopHandle};
use sluice_types::{Tuple, TupleRef};

use common::{counter, wait_for, Gather, Watchdog};

/// Lines each check sends through a connector.
const LINES: usize = 400;

/// The longest a check of one connector may take before the test process ends.
const CHECK_WATCHDOG: Duration = Duration::from_secs(120);

/// Lines of the resumption check: ten times what a job can take in between its source and
/// the throttle (a source's batch of 256, a queue of 64), so that the suspension finds the
/// source mid-input however fast it reads (a Kafka source reads 400 lines in two polls).
const RESUMED_LINES: usize = 4000;

fn lines() -> Vec<String> {
    lines_of(LINES)
}

fn lines_of(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("line {i}")).collect()
}

/// The other end of a connector: what its source reads from, what its sink writes to.
trait Peer {
    /// Serves `records` (each without a line end) for the source to read; the address it
    /// reads them at.
    fn serve(&mut self, records: Vec<Vec<u8>>) -> String;
    /// Makes the served records arrive (a datagram peer sends them now, once the source is
    /// listening); the others served them already.
    fn send(&mut self) {}
    /// A record the connector's source cannot decode, and the counter that counts it.
    fn bad_record(&self) -> (Vec<u8>, &'static str);
    /// Writes `lines` through `connector`'s sink in a job and returns what arrived.
    fn write(&mut self, connector: &Connector, lines: &[String]) -> Vec<String>;
    /// A fresh address for an exactly-once sink to write to, for a peer whose connector has
    /// one.
    fn output(&mut self) -> String {
        panic!("this connector claims an exactly-once sink: its peer must give an output")
    }
    /// What a reader of `address` sees published now (Kafka: a `read_committed` read), in
    /// order.
    fn published(&mut self, address: &str) -> Vec<String> {
        panic!("this connector claims an exactly-once sink: its peer must read {address}")
    }
}

/// The peer of the connector with `scheme`; a connector without one fails the suite. `None`
/// only for Kafka when the test broker cannot start outside CI (under `CI=true` that fails).
fn peer(scheme: &str) -> Option<Box<dyn Peer>> {
    Some(match scheme {
        "file" => Box::new(FilePeer(tempfile::tempdir().unwrap())),
        "tcp" => Box::new(TcpPeer::default()),
        "udp" => Box::new(UdpPeer::default()),
        "stdout" => Box::new(StdoutPeer),
        "kafka" => Box::new(KafkaPeer(broker::broker()?)),
        other => {
            panic!("connector {other}:// has no conformance peer: add one to tests/conformance.rs")
        }
    })
}

/// A job reading `address` through the registry into a gathering sink, throttled when
/// `slow` so that it can be suspended mid-input.
fn reading(address: &str, gathered: &Arc<Mutex<Vec<String>>>, slow: bool) -> sluice_graph::Graph {
    let (connector, target) = resolve(address, &[]).unwrap();
    let flow = Dataflow::new("conformance");
    let mut lines: Stream<String> = connector.read_lines(&flow, "source", &target).unwrap();
    if slow {
        // 2 s for the resumption's lines: the suspension lands mid-input however loaded the
        // machine.
        lines = lines.throttle("slow", 2000.0);
    }
    let into = gathered.clone();
    lines.sink("gather", move |_| Gather(into.clone()));
    flow.build().unwrap()
}

/// Jobs run in this process; `suspendable` for the ones that are suspended and resumed.
fn options(suspendable: bool) -> RunOptions {
    RunOptions {
        launcher: Launcher::InProcess,
        suspendable,
        ..RunOptions::default()
    }
}

fn small() -> PlanOptions {
    PlanOptions {
        cores: 2,
        queue_capacity: 64,
        ..PlanOptions::default()
    }
}

/// Runs a job reading `records` from `connector`'s source until the last line arrived (and,
/// for a source that promises it, until the job ends by itself); what arrived (but the
/// [`READY`] lines of a datagram peer) and the job's report.
fn read_through(
    connector: &Connector,
    peer: &mut dyn Peer,
    records: Vec<Vec<u8>>,
) -> (Vec<String>, JobReport) {
    let address = peer.serve(records);
    let gathered = Arc::new(Mutex::new(Vec::new()));
    let graph = reading(&address, &gathered, false);
    let physical = plan(&graph, &PlanRequest::Threaded, &small()).unwrap();
    let job = start(&graph, &physical, &options(false)).unwrap();
    let stop = job.stop_handle();
    peer.send();
    if !connector.promises.ends {
        // The source does not end: stop the job once the last line is in.
        let last = lines().pop();
        let deadline = Instant::now() + Duration::from_secs(60);
        while gathered.lock().unwrap().last() != last.as_ref() {
            assert!(
                Instant::now() < deadline,
                "{}: {} lines arrived, not the last",
                connector.scheme,
                gathered.lock().unwrap().len()
            );
            thread::sleep(Duration::from_millis(5));
        }
        stop.stop();
    }
    let report = job.wait().unwrap();
    let got = gathered
        .lock()
        .unwrap()
        .iter()
        .filter(|l| *l != READY)
        .cloned()
        .collect();
    (got, report)
}

fn sources() -> impl Iterator<Item = &'static Connector> {
    CONNECTORS.iter().filter(|c| c.source.is_some())
}

#[test]
fn every_source_delivers_every_line_in_order() {
    for connector in sources() {
        let _watchdog = Watchdog::arm("a source's lines", CHECK_WATCHDOG);
        let Some(mut peer) = peer(connector.scheme) else {
            continue;
        };
        let records = lines().into_iter().map(String::into_bytes).collect();
        let (got, _) = read_through(connector, peer.as_mut(), records);
        assert_eq!(got, lines(), "{}", connector.scheme);
    }
}

#[test]
fn every_source_counts_a_bad_record_and_goes_on() {
    for connector in sources() {
        let _watchdog = Watchdog::arm("a source's bad record", CHECK_WATCHDOG);
        let Some(mut peer) = peer(connector.scheme) else {
            continue;
        };
        let (bad, counter_name) = peer.bad_record();
        let mut records: Vec<Vec<u8>> = lines().into_iter().map(String::into_bytes).collect();
        records.insert(LINES / 2, bad);
        let (got, report) = read_through(connector, peer.as_mut(), records);
        // A source may pass the bad record on mended (U+FFFD in place of bad bytes).
        let good: Vec<String> = got
            .into_iter()
            .filter(|l| !l.contains('\u{FFFD}'))
            .collect();
        assert_eq!(good, lines(), "{}", connector.scheme);
        assert_eq!(
            counter(&report, "source", counter_name),
            1,
            "{}: {counter_name}",
            connector.scheme
        );
    }
}

#[test]
fn every_resumable_source_resumes_where_it_was_suspended() {
    for connector in sources().filter(|c| c.promises.resumes) {
        let _watchdog = Watchdog::arm("a source's resumption", CHECK_WATCHDOG);
        let Some(mut peer) = peer(connector.scheme) else {
            continue;
        };
        let input = lines_of(RESUMED_LINES);
        let address = peer.serve(input.iter().cloned().map(String::into_bytes).collect());
        let gathered = Arc::new(Mutex::new(Vec::new()));
        let graph = reading(&address, &gathered, true);
        let physical = plan(&graph, &PlanRequest::Threaded, &small()).unwrap();
        let job = start(&graph, &physical, &options(true)).unwrap();
        let stop = job.stop_handle();
        assert!(wait_for(&gathered, 10, Duration::from_secs(60)));
        stop.suspend();
        let first = job.wait().unwrap();
        assert!(
            first.tuples_out("source") < RESUMED_LINES as u64,
            "{}: suspended after the source ended",
            connector.scheme
        );
        let state = first.state().expect("a suspended job leaves its state");
        let resumed = resume_with(
            &graph,
            &physical,
            &options(true),
            &StopHandle::new(),
            &state,
        )
        .unwrap();
        resumed.wait().unwrap();
        assert!(
            *gathered.lock().unwrap() == input,
            "{}: the lines read across the suspension are not the input, once each, in order",
            connector.scheme
        );
    }
}

#[test]
fn every_sink_writes_every_line_in_order() {
    for connector in CONNECTORS.iter().filter(|c| c.sink.is_some()) {
        let _watchdog = Watchdog::arm("a sink's lines", CHECK_WATCHDOG);
        let Some(mut peer) = peer(connector.scheme) else {
            continue;
        };
        let got = peer.write(connector, &lines());
        assert_eq!(got, lines(), "{}", connector.scheme);
    }
}

/// Writes `lines` through `connector`'s sink at `address` in a job run to its end.
fn run_sink(connector: &Connector, address: &str, lines: &[String]) -> JobReport {
    let (_, target) = resolve(address, &[]).unwrap();
    let flow = Dataflow::new("conformance");
    let items = lines.to_vec();
    let stream = flow.source("lines", move |_| {
        sluice_ops::IterSource::new(items.clone().into_iter())
    });
    connector.write_lines(&stream, "sink", &target).unwrap();
    common::run_flow(&flow, &PlanRequest::Threaded)
}

/// An instance of `connector`'s exactly-once sink writing to `address`, as its job's graph
/// makes it.
fn exactly_once_instance(connector: &Connector, address: &str) -> Box<dyn Operator> {
    let (_, target) = resolve(address, &[]).unwrap();
    let flow = Dataflow::new("conformance");
    let stream = flow.source("lines", |_| {
        sluice_ops::IterSource::new(Vec::<String>::new().into_iter())
    });
    let make = connector.exactly_once_sink.expect("an exactly-once sink");
    make(&stream, "sink", &target).unwrap();
    let graph = flow.build().unwrap();
    let sink = graph.operators().iter().find(|op| op.name == "sink");
    match sink.map(|op| &op.kind) {
        Some(OperatorKind::Operator(factory)) => factory(&OperatorContext {
            name: "sink".into(),
            instance: 0,
            parallelism: 1,
        }),
        _ => panic!(
            "{}: the sink is not the operator named sink",
            connector.scheme
        ),
    }
}

/// Hands `lines` to `sink`, then takes checkpoint `checkpoint` (its barrier): the state kept.
fn write_then_checkpoint(sink: &mut dyn Operator, lines: &[String], checkpoint: u64) -> Snapshot {
    let mut nowhere = common::NoOutputs;
    let mut out = Output::new(&[], &mut nowhere);
    for line in lines {
        sink.process(0, TupleRef::new(line), &mut out).unwrap();
    }
    sink.checkpoint(checkpoint).unwrap().make().unwrap()
}

/// An instance of the exactly-once sink, restored from `state` (a recovery) if given,
/// started.
fn recovered(connector: &Connector, address: &str, state: Option<Snapshot>) -> Box<dyn Operator> {
    let mut sink = exactly_once_instance(connector, address);
    if let Some(state) = state {
        sink.restore(state).unwrap();
    }
    sink.start(&OperatorContext {
        name: "sink".into(),
        instance: 0,
        parallelism: 1,
    })
    .unwrap();
    sink
}

#[test]
fn every_exactly_once_sink_commits_in_two_phases_with_the_checkpoints() {
    for connector in CONNECTORS.iter().filter(|c| c.exactly_once_sink.is_some()) {
        let _watchdog = Watchdog::arm("an exactly-once sink", CHECK_WATCHDOG);
        let Some(mut peer) = peer(connector.scheme) else {
            continue;
        };
        let scheme = connector.scheme;
        let all = lines_of(40);
        let part = |i: usize| &all[i * 10..(i + 1) * 10];
        let address = peer.output();
        // The first instance writes part 0 and takes checkpoint 1, then crashes before its
        // completion is told: nothing is published yet.
        let mut first = recovered(connector, &address, None);
        let state1 = write_then_checkpoint(first.as_mut(), part(0), 1);
        assert_eq!(peer.published(&address), Vec::<String>::new(), "{scheme}");
        std::mem::forget(first);
        // Recovered from checkpoint 1 (complete, not told), it publishes what the barrier
        // pre-committed.
        let mut second = recovered(connector, &address, Some(state1));
        assert_eq!(peer.published(&address), part(0), "{scheme}");
        let state2 = write_then_checkpoint(second.as_mut(), part(1), 2);
        assert_eq!(peer.published(&address), part(0), "{scheme}");
        second.checkpoint_complete(2).unwrap();
        assert_eq!(
            peer.published(&address),
            part(0).iter().chain(part(1)).cloned().collect::<Vec<_>>(),
            "{scheme}"
        );
        // Part 2 is pre-committed for checkpoint 3, which never completes: the recovery
        // from checkpoint 2 drops it.
        write_then_checkpoint(second.as_mut(), part(2), 3);
        std::mem::forget(second);
        let mut third = recovered(connector, &address, Some(state2));
        write_then_checkpoint(third.as_mut(), part(3), 4);
        third.checkpoint_complete(4).unwrap();
        let expected: Vec<String> = [part(0), part(1), part(3)].concat();
        assert_eq!(peer.published(&address), expected, "{scheme}");
        third.stop().unwrap();
    }
}

/// Files: a file of lines; a file written.
struct FilePeer(tempfile::TempDir);

impl FilePeer {
    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
}

impl Peer for FilePeer {
    fn serve(&mut self, records: Vec<Vec<u8>>) -> String {
        let path = self.path("in.txt");
        let mut bytes = records.join(&b'\n');
        bytes.push(b'\n');
        std::fs::write(&path, bytes).unwrap();
        format!("file://{}", path.display())
    }

    fn bad_record(&self) -> (Vec<u8>, &'static str) {
        (b"not \xff UTF-8".to_vec(), "invalid_utf8_lines")
    }

    fn write(&mut self, connector: &Connector, lines: &[String]) -> Vec<String> {
        let path = self.path("out.txt");
        run_sink(connector, path.to_str().unwrap(), lines);
        self.published(path.to_str().unwrap())
    }

    fn output(&mut self) -> String {
        self.path("published.txt").to_str().unwrap().to_owned()
    }

    fn published(&mut self, address: &str) -> Vec<String> {
        match std::fs::read_to_string(address) {
            Ok(text) => text.lines().map(str::to_owned).collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => panic!("{address}: {e}"),
        }
    }
}

/// TCP: a server that sends the lines to the source that connects, then closes; a server
/// that keeps what the sink sends.
#[derive(Default)]
struct TcpPeer {
    server: Option<JoinHandle<()>>,
}

impl Peer for TcpPeer {
    fn serve(&mut self, records: Vec<Vec<u8>>) -> String {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let address = listener.local_addr().unwrap();
        self.server = Some(thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            for record in records {
                stream.write_all(&record).unwrap();
                stream.write_all(b"\n").unwrap();
            }
        }));
        format!("tcp://{address}")
    }

    fn bad_record(&self) -> (Vec<u8>, &'static str) {
        (b"not \xff UTF-8".to_vec(), "invalid_utf8_lines")
    }

    fn write(&mut self, connector: &Connector, lines: &[String]) -> Vec<String> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let address = listener.local_addr().unwrap();
        let server = thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            BufReader::new(stream).lines().map(Result::unwrap).collect()
        });
        run_sink(connector, &format!("tcp://{address}"), lines);
        server.join().unwrap()
    }
}

/// UDP: datagrams sent to the address the source receives on, once it is bound (after a
/// first datagram reached it); a socket receiving what the sink sends.
#[derive(Default)]
struct UdpPeer {
    to: Option<SocketAddr>,
    records: Vec<Vec<u8>>,
}

/// The first datagram, sent until the source has bound its address, and not counted.
const READY: &str = "ready";

impl Peer for UdpPeer {
    fn serve(&mut self, records: Vec<Vec<u8>>) -> String {
        // A free port: bound, then released for the source.
        let to = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap()
            .local_addr()
            .unwrap();
        self.to = Some(to);
        self.records = records;
        format!("udp://{to}")
    }

    fn send(&mut self) {
        let to = self.to.unwrap();
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        // Datagrams sent before the source binds are lost; a connected socket learns that
        // nobody listens (ECONNREFUSED on the next send), so "ready" is sent until it is not.
        socket.connect(to).unwrap();
        let ready = datagram(READY.as_bytes());
        loop {
            socket.send(&ready).unwrap_or(0);
            thread::sleep(Duration::from_millis(20));
            if socket.send(&ready).is_ok() {
                break;
            }
        }
        for record in &self.records {
            let payload = match std::str::from_utf8(record) {
                Ok(line) => datagram(line.as_bytes()),
                Err(_) => record.clone(),
            };
            socket.send(&payload).unwrap();
            // Loopback drops what a full receive buffer cannot take; pace the burst.
            thread::sleep(Duration::from_micros(200));
        }
    }

    fn bad_record(&self) -> (Vec<u8>, &'static str) {
        // A string's encoding of length 3 whose bytes are not UTF-8.
        (vec![3, 0xff, 0xfe, 0xfd], "undecodable_datagrams")
    }

    fn write(&mut self, connector: &Connector, lines: &[String]) -> Vec<String> {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        // The sink sends in a burst; a receive buffer of the default size (about 200 KiB of
        // kernel accounting, under 300 small datagrams) would drop the end of it.
        socket2::SockRef::from(&socket)
            .set_recv_buffer_size(4 << 20)
            .unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let address = socket.local_addr().unwrap();
        let expected = lines.len();
        let receiver = thread::spawn(move || {
            let mut got = Vec::new();
            let mut buffer = vec![0; 65_536];
            while got.len() < expected {
                let Ok(n) = socket.recv(&mut buffer) else {
                    break;
                };
                got.push(String::decode(&buffer[..n]).unwrap());
            }
            got
        });
        run_sink(connector, &format!("udp://{address}"), lines);
        receiver.join().unwrap()
    }
}

/// A line's datagram: its tuple encoding.
fn datagram(line: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::new();
    String::from_utf8(line.to_vec())
        .unwrap()
        .encode(&mut bytes)
        .unwrap();
    bytes
}

/// Standard output: the job runs in a child process (this test binary, told by
/// [`STDOUT_CHILD`]) whose output is read.
struct StdoutPeer;

/// Set in the child that writes the lines to its standard output.
const STDOUT_CHILD: &str = "SLUICE_TEST_CONFORMANCE_STDOUT";

impl Peer for StdoutPeer {
    fn serve(&mut self, _: Vec<Vec<u8>>) -> String {
        unreachable!("stdout has no source")
    }

    fn bad_record(&self) -> (Vec<u8>, &'static str) {
        unreachable!("stdout has no source")
    }

    fn write(&mut self, _: &Connector, lines: &[String]) -> Vec<String> {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "stdout_child", "--nocapture", "--quiet"])
            .env(STDOUT_CHILD, lines.len().to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert!(child.wait().unwrap().success());
        out.lines()
            .filter(|l| l.starts_with("line "))
            .map(str::to_owned)
            .collect()
    }
}

/// The child of [`StdoutPeer`]: writes the suite's lines through the stdout connector (a
/// test that does nothing unless started as that child).
#[test]
fn stdout_child() {
    if std::env::var_os(STDOUT_CHILD).is_none() {
        return;
    }
    let (connector, _) = resolve("stdout", &[]).unwrap();
    run_sink(connector, "stdout", &lines());
}

/// Kafka: a topic of the test broker (one per check), filled by a producer; the sink's topic
/// read back through the registry's Kafka source.
struct KafkaPeer(&'static broker::Broker);

/// Topics made so far by this test process, for unique names.
static TOPICS: AtomicUsize = AtomicUsize::new(0);

impl KafkaPeer {
    fn topic(&self) -> (String, String) {
        let topic = format!("conformance-{}", TOPICS.fetch_add(1, Ordering::Relaxed));
        broker::create_topic(self.0, &topic, 1);
        let address = format!("kafka://{}/{topic}", self.0.address);
        (topic, address)
    }
}

impl Peer for KafkaPeer {
    fn serve(&mut self, records: Vec<Vec<u8>>) -> String {
        let (topic, address) = self.topic();
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", &self.0.address)
            .create()
            .expect("a producer");
        for record in &records {
            producer
                .send(BaseRecord::<(), [u8]>::to(&topic).payload(record.as_slice()))
                .map_err(|(e, _)| e)
                .expect("a record queued");
        }
        producer
            .flush(Duration::from_secs(30))
            .expect("records delivered");
        address
    }

    fn bad_record(&self) -> (Vec<u8>, &'static str) {
        (b"not \xff UTF-8".to_vec(), "bad_records")
    }

    fn write(&mut self, connector: &Connector, lines: &[String]) -> Vec<String> {
        let (_, address) = self.topic();
        run_sink(connector, &address, lines);
        self.published(&address)
    }

    fn output(&mut self) -> String {
        self.topic().1
    }

    /// The registry's Kafka source reads `read_committed`, up to the end offsets now.
    fn published(&mut self, address: &str) -> Vec<String> {
        let gathered = Arc::new(Mutex::new(Vec::new()));
        let graph = reading(address, &gathered, false);
        common::run_under(&graph, &PlanRequest::Threaded).unwrap();
        let got = gathered.lock().unwrap().clone();
        got
    }
}
