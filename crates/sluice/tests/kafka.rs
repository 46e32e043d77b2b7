//! `sluice run wordcount --input kafka://HOST:PORT/TOPIC` (and `--output kafka://...`) against a real Kafka broker (the
//! connectors' test broker: KRaft, started once for this binary).

#[path = "../../sluice-connectors/tests/kafka/broker.rs"]
mod broker;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use sluice_connectors::{
    Csv, Delivery, EndAt, KafkaRecord, KafkaSink, KafkaSinkConfig, KafkaSource, KafkaSourceConfig,
    Lines,
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

/// Writes lines of words to `topic` (made with 3 partitions); returns each word's count.
fn write_lines(broker: &broker::Broker, topic: &str) -> BTreeMap<String, u64> {
    broker::create_topic(broker, topic, 3);
    let lines: Vec<String> = (0..500)
        .map(|i| format!("the quick w{} fox w{}", i % 7, i % 11))
        .collect();
    let mut sink = KafkaSink::new(
        KafkaSinkConfig::new(&broker.address, topic, Delivery::AtLeastOnce),
        Lines,
        |_: &String| None,
    );
    sink.start(&ctx()).unwrap();
    let mut nowhere = Collected(Vec::new());
    let mut out = Output::new(&[], &mut nowhere);
    for line in &lines {
        sink.process(0, TupleRef::new(line), &mut out).unwrap();
    }
    sink.finish(&mut out).unwrap();
    let mut counts = BTreeMap::new();
    for word in lines.iter().flat_map(|line| line.split(' ')) {
        *counts.entry(word.to_owned()).or_default() += 1;
    }
    counts
}

/// Runs `sluice run wordcount` with `args`, checking that it succeeds.
fn wordcount(args: &[&str]) {
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
/// each word's last count there.
fn counts_through_kafka(name: &str, extra: &[&str]) {
    let Some(broker) = broker::broker() else {
        return;
    };
    let (topic_in, topic_out) = (format!("{name}-in"), format!("{name}-out"));
    let expected = write_lines(broker, &topic_in);
    broker::create_topic(broker, &topic_out, 3);
    let input = format!("kafka://{}/{topic_in}", broker.address);
    let output = format!("kafka://{}/{topic_out}", broker.address);
    let mut args = vec!["--input", &input, "--output", &output];
    args.extend(extra);
    wordcount(&args);

    let mut config = KafkaSourceConfig::new(&broker.address, &topic_out);
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
    // Each word's records are in one partition, in order: its last is its count.
    let last: BTreeMap<String, u64> = collected.0.into_iter().collect();
    assert_eq!(last, expected);
}

#[test]
fn wordcount_writes_its_counts_to_a_kafka_topic() {
    counts_through_kafka("wordcount", &[]);
}

/// The runtime drives the source's and the sink's checkpoint hooks (on this machine the run
/// takes a few checkpoints); the counts are the same.
#[test]
fn wordcount_from_kafka_to_kafka_takes_checkpoints() {
    counts_through_kafka("wordcount-checkpointed", &["--checkpoint-every", "50ms"]);
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
