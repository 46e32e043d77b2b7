//! `sluice run wordcount --input kafka://HOST:PORT/TOPIC` against a real Kafka broker (the
//! connectors' test broker: KRaft, started once for this binary).

#[path = "../../sluice-connectors/tests/kafka/broker.rs"]
mod broker;

use std::collections::BTreeMap;
use std::process::Command;

use sluice_connectors::{Delivery, KafkaSink, KafkaSinkConfig, Lines};
use sluice_graph::{Operator, OperatorContext, Output, OutputSink, OwnedTuple, Timer};
use sluice_types::TupleRef;

/// An output for a sink, which emits nothing.
struct Nowhere;

impl OutputSink for Nowhere {
    fn emit(
        &mut self,
        _: usize,
        _: &mut dyn OwnedTuple,
    ) -> Result<(), sluice_graph::OperatorError> {
        Ok(())
    }
    fn punctuate(&mut self, _: usize) -> Result<(), sluice_graph::OperatorError> {
        Ok(())
    }
    fn watermark(&mut self, _: u64) -> Result<(), sluice_graph::OperatorError> {
        Ok(())
    }
    fn set_timer(&mut self, _: Timer) {}
}

#[test]
fn wordcount_reads_a_kafka_topic() {
    let Some(broker) = broker::broker() else {
        return;
    };
    let topic = "wordcount-lines";
    broker::create_topic(broker, topic, 3);
    let lines: Vec<String> = (0..500)
        .map(|i| format!("the quick w{} fox w{}", i % 7, i % 11))
        .collect();
    let mut sink = KafkaSink::new(
        KafkaSinkConfig::new(&broker.address, topic, Delivery::AtLeastOnce),
        Lines,
        |_: &String| None,
    );
    let ctx = OperatorContext {
        name: "lines".into(),
        instance: 0,
        parallelism: 1,
    };
    sink.start(&ctx).unwrap();
    let mut nowhere = Nowhere;
    let mut out = Output::new(&[], &mut nowhere);
    for line in &lines {
        sink.process(0, TupleRef::new(line), &mut out).unwrap();
    }
    sink.finish(&mut out).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("counts.tsv");
    let run = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "wordcount", "--input"])
        .arg(format!("kafka://{}/{topic}", broker.address))
        .arg("--output")
        .arg(&output)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let mut expected: BTreeMap<&str, u64> = BTreeMap::new();
    for word in lines.iter().flat_map(|line| line.split(' ')) {
        *expected.entry(word).or_default() += 1;
    }
    let expected: String = expected
        .iter()
        .map(|(word, count)| format!("{word}\t{count}\n"))
        .collect();
    assert_eq!(std::fs::read_to_string(&output).unwrap(), expected);
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
