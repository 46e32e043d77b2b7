//! `sluice run wordcount --input kafka://HOST:PORT/TOPIC` (and `--output kafka://...`) against
//! a real Kafka broker (the connectors' test broker: KRaft, started once for this binary), and
//! under faults: PEs SIGKILLed and the broker restarted, each such test with a broker of its
//! own.

// This binary uses a part of the connectors' test broker module.
#[allow(dead_code)]
#[path = "../../sluice-connectors/tests/kafka/broker.rs"]
mod broker;
mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sluice_connectors::{
    Csv, Delivery, EndAt, Format, KafkaRecord, KafkaSink, KafkaSinkConfig, KafkaSource,
    KafkaSourceConfig, Lines,
};
use sluice_graph::{
    Operator, OperatorContext, OperatorError, Output, OutputSink, OwnedTuple, Produced, Source,
    Timer,
};
use sluice_types::{Tuple, TupleRef};

/// What a source emitted: the values of its records (a sink's output, which gets nothing,
/// too).
struct Collected(Vec<(String, u64)>);

impl OutputSink for Collected {
    fn emit(&mut self, _: usize, tuple: &mut dyn OwnedTuple) -> Result<(), OperatorError> {
        let record = tuple
            .slot()
            .downcast_mut::<Option<KafkaRecord<(String, u64)>>>()
            .and_then(Option::take);
        self.0.extend(record.map(|r| r.value));
        Ok(())
    }
    fn punctuate(&mut self, _: usize) -> Result<(), OperatorError> {
        Ok(())
    }
    fn watermark(&mut self, _: u64) -> Result<(), OperatorError> {
        Ok(())
    }
    fn set_timer(&mut self, _: Timer) {}
}

fn ctx() -> OperatorContext {
    OperatorContext {
        name: "kafka".into(),
        instance: 0,
        parallelism: 1,
    }
}

/// Writes 500 lines of words to `topic` (made with 3 partitions); returns each word's count.
fn write_lines(broker: &broker::Broker, topic: &str) -> BTreeMap<String, u64> {
    write_many_lines(broker, topic, 500)
}

/// Writes `count` lines of words to `topic` (made with 3 partitions); returns each word's
/// count.
fn write_many_lines(broker: &broker::Broker, topic: &str, count: usize) -> BTreeMap<String, u64> {
    broker::create_topic(broker, topic, 3);
    let lines: Vec<String> = (0..count)
        .map(|i| format!("the quick w{} fox w{}", i % 7, i % 11))
        .collect();
    produce(broker, topic, Lines, &lines);
    let mut counts = BTreeMap::new();
    for word in lines.iter().flat_map(|line| line.split(' ')) {
        *counts.entry(word.to_owned()).or_default() += 1;
    }
    counts
}

/// Writes `records` to `topic` at least once, unkeyed, in `format`.
fn produce<T: Tuple, F: Format<T>>(broker: &broker::Broker, topic: &str, format: F, records: &[T]) {
    let config = KafkaSinkConfig::new(&broker.address, topic, Delivery::AtLeastOnce);
    let mut sink = KafkaSink::new(config, format, (|_| None) as fn(&T) -> Option<Vec<u8>>);
    sink.start(&ctx()).unwrap();
    let mut nowhere = Collected(Vec::new());
    let mut out = Output::new(&[], &mut nowhere);
    for record in records {
        sink.process(0, TupleRef::new(record), &mut out).unwrap();
    }
    sink.finish(&mut out).unwrap();
}

/// Runs `sluice run wordcount` with `args`, checking that it succeeds; its summary.
fn wordcount(args: &[&str]) -> String {
    let run = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "wordcount"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    String::from_utf8_lossy(&run.stdout).into_owned()
}

#[test]
fn wordcount_reads_a_kafka_topic() {
    let Some(broker) = broker::broker() else {
        return;
    };
    let expected = write_lines(broker, "wordcount-lines");
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("counts.tsv");
    let input = format!("kafka://{}/wordcount-lines", broker.address);
    let output = output.to_str().unwrap();
    wordcount(&[
        "--input",
        &input,
        "--output",
        output,
        "--set",
        "kafka.client.id=wc",
    ]);
    let expected: String = expected
        .iter()
        .map(|(word, count)| format!("{word}\t{count}\n"))
        .collect();
    assert_eq!(std::fs::read_to_string(output).unwrap(), expected);
}

/// Runs WordCount from topic `NAME-in` to topic `NAME-out` with `extra` arguments, and checks
/// each word's last count there; returns its summary.
fn counts_through_kafka(name: &str, extra: &[&str]) -> String {
    let Some(broker) = broker::broker() else {
        return String::new();
    };
    let (topic_in, topic_out) = (format!("{name}-in"), format!("{name}-out"));
    let expected = write_lines(broker, &topic_in);
    broker::create_topic(broker, &topic_out, 3);
    let input = format!("kafka://{}/{topic_in}", broker.address);
    let output = format!("kafka://{}/{topic_out}", broker.address);
    let mut args = vec!["--input", &input, "--output", &output];
    args.extend(extra);
    let summary = wordcount(&args);

    let collected = read_counts(broker, &topic_out);
    // Each word's records are in one partition, in order: its last is its count.
    let last: BTreeMap<String, u64> = collected.into_iter().collect();
    assert_eq!(last, expected);
    summary
}

/// Every `word<TAB>count` record committed in `topic`, in each partition's order (a
/// `read_committed` read up to the end offsets now).
fn read_counts(broker: &broker::Broker, topic: &str) -> Vec<(String, u64)> {
    let mut config = KafkaSourceConfig::new(&broker.address, topic);
    config.end = EndAt::EndOffsetsAtStart;
    let mut source = KafkaSource::new(config, Csv::<(String, u64)>::new(b'\t'));
    source.start(&ctx()).unwrap();
    let mut collected = Collected(Vec::new());
    let schemas = [KafkaRecord::<(String, u64)>::schema()];
    let deadline = Instant::now() + Duration::from_secs(60);
    while source
        .produce(&mut Output::new(&schemas, &mut collected))
        .unwrap()
        != Produced::Exhausted
    {
        assert!(
            Instant::now() < deadline,
            "the counts topic read for over 60 s"
        );
    }
    collected.0
}

/// The summary has the Kafka figures: 500 lines of 5 words read, every word's count written,
/// nothing left to read.
#[test]
fn wordcount_writes_its_counts_to_a_kafka_topic() {
    let summary = counts_through_kafka("wordcount", &[]);
    assert!(
        summary.contains("kafka in: 500 records, ")
            && summary.contains("lag at the end 0 records")
            && summary.contains("kafka out: 2500 records, "),
        "{summary}"
    );
}

/// The runtime drives the source's and the sink's checkpoint hooks (on this machine the run
/// takes a few checkpoints), exactly once; the counts are the same, and the summary counts
/// the transactions.
#[test]
fn wordcount_from_kafka_to_kafka_takes_checkpoints() {
    let summary = counts_through_kafka(
        "wordcount-checkpointed",
        &[
            "--checkpoint-every",
            "50ms",
            "--set",
            "delivery=exactly-once",
        ],
    );
    assert!(
        summary.contains("kafka out: 2500 records, ") && summary.contains(" committed, 0 aborted"),
        "{summary}"
    );
}

#[test]
fn a_kafka_input_without_a_topic_is_refused() {
    let run = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "wordcount", "--input", "kafka://127.0.0.1:9092"])
        .output()
        .unwrap();
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("kafka://HOST:PORT/TOPIC"), "{stderr}");
}

#[test]
fn kafka_settings_reach_the_client() {
    let run = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "wordcount", "--input", "kafka://127.0.0.1:9/lines"])
        .args(["--set", "kafka.no.such.property=1"])
        .output()
        .unwrap();
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    // librdkafka's own refusal, not the application's of an unknown setting.
    assert!(
        stderr.contains("No such configuration property: \"no.such.property\""),
        "{stderr}"
    );
}

/// Longest a `sluice query` here may take before the test calls it a hang.
const QUERY_WATCHDOG: Duration = Duration::from_secs(120);

/// Runs `sluice query` with `args`, killed after [`QUERY_WATCHDOG`]; its exit status, standard
/// output and standard error.
fn query(args: &[&str]) -> (bool, String, String) {
    let run = common::sluice_within(&[&["query"], args].concat(), QUERY_WATCHDOG);
    (
        run.status.success(),
        common::stdout(&run),
        common::stderr(&run),
    )
}

/// SCSQL reads a topic and writes another through the connector registry: `input('kafka',
/// ...)` gives the topic's 500 records (3 partitions) and `output(..., 'kafka', ...)` writes
/// each of them, which a direct read of the output topic finds, with the client settings of
/// `--set kafka.KEY=VALUE`.
#[test]
fn scsql_copies_a_kafka_topic_to_another() {
    let Some(broker) = broker::broker() else {
        return;
    };
    broker::create_topic(broker, "scsql-in", 3);
    broker::create_topic(broker, "scsql-out", 3);
    let written: Vec<(String, u64)> = (0..500).map(|i| (format!("w{}", i % 13), i)).collect();
    produce(
        broker,
        "scsql-in",
        Csv::<(String, u64)>::new(b'\t'),
        &written,
    );

    let text = format!(
        "count(output(input('kafka', '{0}', 'scsql-in'), 'kafka', '{0}', 'scsql-out'));",
        broker.address
    );
    let (ok, stdout, stderr) = query(&["--set", "kafka.client.id=scsql", "-e", &text]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout, "500\n", "{stderr}");
    let mut copied = read_counts(broker, "scsql-out");
    copied.sort_by_key(|(_, i)| *i);
    assert_eq!(copied, written);
}

/// A Kafka address without a topic is refused where it is written, before anything runs.
#[test]
fn scsql_points_at_a_kafka_address_without_a_topic() {
    let (ok, _, stderr) = query(&["-e", "count(\n  input('kafka', '127.0.0.1:9'));"]);
    assert!(!ok);
    assert!(
        stderr.contains("kafka://127.0.0.1:9: a Kafka topic is named kafka://HOST:PORT/TOPIC")
            && stderr.contains("-e:2:18"),
        "{stderr}"
    );
}

/// Longest a WordCount under faults may take before the test calls it a hang.
const FAULTS_WATCHDOG: Duration = Duration::from_secs(240);

/// A `sluice run` under test, its standard error going to a file.
struct Job {
    child: Child,
    stderr: std::path::PathBuf,
    started: Instant,
}

impl Job {
    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits until `done` holds, failing if the job ends first or the watchdog passes.
    fn wait_for(&mut self, what: &str, mut done: impl FnMut(&Self) -> bool) {
        while !done(self) {
            assert!(
                matches!(self.child.try_wait(), Ok(None)),
                "the job ended before {what}:\n{}",
                self.stderr()
            );
            self.watch();
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn watch(&mut self) {
        if self.started.elapsed() > FAULTS_WATCHDOG {
            common::kill_job(&mut self.child);
            panic!("the job ran past {FAULTS_WATCHDOG:?}:\n{}", self.stderr());
        }
    }

    /// SIGKILLs one of the job's PEs: the `turn`-th, counting round.
    fn kill_a_pe(&mut self, turn: usize) {
        let pes = common::pes_of(self.child.id());
        assert!(!pes.is_empty(), "no PE to kill:\n{}", self.stderr());
        let victim = &pes[turn % pes.len()];
        eprintln!("killing PE {} (pid {})", victim.index, victim.pid);
        common::signal(victim.pid, "KILL");
    }

    /// Waits for the job's end; checks that it succeeded.
    fn finish(mut self) -> String {
        while matches!(self.child.try_wait(), Ok(None)) {
            self.watch();
            std::thread::sleep(Duration::from_millis(20));
        }
        let status = self.child.wait().unwrap();
        let stderr = self.stderr();
        assert!(status.success(), "{stderr}");
        stderr
    }
}

/// How many complete checkpoints are in `dir`.
fn complete_checkpoints(dir: &Path) -> usize {
    sluice_checkpoint::list(dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.status == sluice_checkpoint::CheckpointStatus::Complete)
        .count()
}

/// WordCount from a topic of known lines to a topic of counts with `delivery`, as processes,
/// while a PE is SIGKILLed, the broker restarted, then another PE SIGKILLed. Returns each
/// word's count and the counts read back (`read_committed`), each word's in order.
fn wordcount_under_faults(
    broker: &broker::Broker,
    delivery: &str,
) -> (BTreeMap<String, u64>, BTreeMap<String, Vec<u64>>) {
    let expected = write_many_lines(broker, "lines", 3000);
    broker::create_topic(broker, "counts", 3);
    let dir = tempfile::tempdir().unwrap();
    let checkpoints = dir.path().join("checkpoints");
    let stderr = dir.path().join("stderr");
    let input = format!("kafka://{}/lines", broker.address);
    let output = format!("kafka://{}/counts", broker.address);
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "wordcount", "--input", &input, "--output", &output])
        .args(["--set", &format!("delivery={delivery}")])
        .args(["--plan", "processes", "--checkpoint-every", "200ms"])
        .arg("--checkpoint-dir")
        .arg(&checkpoints)
        .args(["--restarts", "10", "--restart-delay", "100ms"])
        // 3000 lines at 100 a second: 30 s of input, so the job still runs once the broker
        // is back, however long its restart takes on a loaded machine (15 s did not last).
        .args(["--rate", "100", "--throttle-input"])
        .env("TMPDIR", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let mut job = Job {
        child,
        stderr,
        started: Instant::now(),
    };
    job.wait_for("a checkpoint completed", |_| {
        complete_checkpoints(&checkpoints) > 0
    });
    job.kill_a_pe(0);
    job.wait_for("the restart after the kill", |job| {
        job.stderr().contains("restarting the job from checkpoint ")
    });
    let before = complete_checkpoints(&checkpoints);
    job.wait_for("a checkpoint after the restart", |_| {
        complete_checkpoints(&checkpoints) > before
    });
    broker.down();
    std::thread::sleep(Duration::from_millis(500));
    broker.up();
    let before = complete_checkpoints(&checkpoints);
    job.wait_for("a checkpoint after the broker's restart", |_| {
        complete_checkpoints(&checkpoints) > before
    });
    job.kill_a_pe(1);
    let stderr = job.finish();
    eprintln!("{stderr}");

    let mut read: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (word, count) in read_counts(broker, "counts") {
        read.entry(word).or_default().push(count);
    }
    (expected, read)
}

/// Exactly once: each word's records read back with `read_committed` are its counts 1 to n,
/// each once and in order, n its count in the input.
#[test]
fn wordcount_to_kafka_exactly_once_survives_killed_pes_and_a_broker_restart() {
    let Some(broker) = broker::Broker::own() else {
        return;
    };
    let (expected, read) = wordcount_under_faults(&broker, "exactly-once");
    let want: BTreeMap<String, Vec<u64>> = expected
        .iter()
        .map(|(word, n)| (word.clone(), (1..=*n).collect()))
        .collect();
    assert!(read == want, "the counts read back differ from 1..=n");
}

/// At least once: no count is missing; repeats (of the counts after the checkpoint a
/// restart went back to) are allowed, and counted.
#[test]
fn wordcount_to_kafka_at_least_once_survives_killed_pes_and_a_broker_restart() {
    let Some(broker) = broker::Broker::own() else {
        return;
    };
    let (expected, read) = wordcount_under_faults(&broker, "at-least-once");
    let mut repeats = 0;
    for (word, n) in &expected {
        let counts = read.get(word).cloned().unwrap_or_default();
        let distinct: std::collections::BTreeSet<u64> = counts.iter().copied().collect();
        assert!(
            distinct == (1..=*n).collect(),
            "{word}: counts {distinct:?}, not each of 1..={n}"
        );
        repeats += counts.len() - distinct.len();
    }
    assert_eq!(
        read.len(),
        expected.len(),
        "words that are not in the input"
    );
    eprintln!("at least once: {repeats} counts repeated after the restarts");
}
