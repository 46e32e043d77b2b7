//! The Kafka source and sink against a real Apache Kafka broker (KRaft, started once for this
//! test binary by the `broker` module). The tests drive the `Source` and `Operator` hooks
//! directly, as the runtime will: produce, checkpoint, checkpoint_complete, restore, finish.

// Shared with sluice's Kafka tests; this binary uses a part of it.
#[allow(dead_code)]
#[path = "kafka/broker.rs"]
mod broker;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use broker::{add_partitions, broker, create_topic, Broker};
use serde::{Deserialize, Serialize};
use sluice_connectors::{
    BadRecord, Csv, Delivery, EndAt, Format, Json, KafkaRecord, KafkaSink, KafkaSinkConfig,
    KafkaSource, KafkaSourceConfig, Lines, OnBadRecord, Raw, StartFrom, FETCH_QUEUE_BACKOFF,
};
use sluice_graph::{
    Operator, OperatorContext, OperatorError, Output, OutputSink, OwnedTuple, Produced, Snapshot,
    Source, Timer,
};
use sluice_types::{BytesTuple, Tuple, TupleRef};

/// How long one read of a topic may take before the test fails instead of hanging.
const READ_WATCHDOG: Duration = Duration::from_secs(60);

/// What a source emitted: its records (port 0), its bad records (port 1), its last watermark.
struct Collected<V> {
    records: Vec<KafkaRecord<V>>,
    bad: Vec<BadRecord>,
    watermark: u64,
}

impl<V> Default for Collected<V> {
    fn default() -> Self {
        Self {
            records: Vec::new(),
            bad: Vec::new(),
            watermark: 0,
        }
    }
}

impl<V: 'static> OutputSink for Collected<V> {
    fn emit(&mut self, port: usize, tuple: &mut dyn OwnedTuple) -> Result<(), OperatorError> {
        let slot = tuple.slot();
        match port {
            0 => self.records.extend(
                slot.downcast_mut::<Option<KafkaRecord<V>>>()
                    .and_then(Option::take),
            ),
            _ => self.bad.extend(
                slot.downcast_mut::<Option<BadRecord>>()
                    .and_then(Option::take),
            ),
        }
        Ok(())
    }
    fn punctuate(&mut self, _: usize) -> Result<(), OperatorError> {
        Ok(())
    }
    fn watermark(&mut self, watermark: u64) -> Result<(), OperatorError> {
        self.watermark = watermark;
        Ok(())
    }
    fn set_timer(&mut self, _: Timer) {}
}

fn ctx(instance: usize, parallelism: usize) -> OperatorContext {
    OperatorContext {
        name: "kafka".into(),
        instance,
        parallelism,
    }
}

/// Calls `produce` until the source is exhausted, or has emitted at least `until` records.
fn drive<V, F>(
    source: &mut KafkaSource<V, F>,
    collected: &mut Collected<V>,
    until: Option<usize>,
) -> Result<(), OperatorError>
where
    V: Serialize + for<'de> Deserialize<'de> + Clone + Send + 'static,
    F: Format<V>,
{
    let schemas = [KafkaRecord::<V>::schema(), BadRecord::schema()];
    let deadline = Instant::now() + READ_WATCHDOG;
    loop {
        let produced = source.produce(&mut Output::new(&schemas, collected))?;
        if produced == Produced::Exhausted
            || until.is_some_and(|until| collected.records.len() >= until)
        {
            return Ok(());
        }
        assert!(
            Instant::now() < deadline,
            "the source read for over {READ_WATCHDOG:?}"
        );
    }
}

/// Everything committed in `topic` (a `read_committed` read up to the end offsets now).
fn read_all<V, F>(broker: &Broker, topic: &str, format: F) -> Vec<KafkaRecord<V>>
where
    V: Serialize + for<'de> Deserialize<'de> + Clone + Send + 'static,
    F: Format<V>,
{
    let mut config = KafkaSourceConfig::new(&broker.address, topic);
    config.end = EndAt::EndOffsetsAtStart;
    let mut source = KafkaSource::new(config, format);
    source.start(&ctx(0, 1)).unwrap();
    let mut collected = Collected::default();
    drive(&mut source, &mut collected, None).unwrap();
    collected.records
}

fn no_output() -> Collected<()> {
    Collected::default()
}

/// Feeds `values` to a sink, as the runtime would.
fn feed<T: Tuple, S: Operator>(sink: &mut S, values: impl IntoIterator<Item = T>) {
    let mut nowhere = no_output();
    let mut out = Output::new(&[], &mut nowhere);
    for value in values {
        sink.process(0, TupleRef::new(&value), &mut out).unwrap();
    }
}

fn finish<S: Operator>(sink: &mut S) {
    let mut nowhere = no_output();
    sink.finish(&mut Output::new(&[], &mut nowhere)).unwrap();
}

/// "KEY SEQ" lines: `count` records over 17 keys, each key's in sequence.
fn lines(count: usize) -> Vec<String> {
    (0..count)
        .map(|i| format!("key-{} {}", i % 17, i / 17))
        .collect()
}

fn key_of(line: &str) -> Option<Vec<u8>> {
    line.split(' ').next().map(|key| key.as_bytes().to_vec())
}

type LineSink = KafkaSink<String, Lines, fn(&String) -> Option<Vec<u8>>>;

fn line_sink(broker: &Broker, topic: &str, delivery: Delivery) -> LineSink {
    KafkaSink::new(
        KafkaSinkConfig::new(&broker.address, topic, delivery),
        Lines,
        (|line: &String| key_of(line)) as fn(&String) -> Option<Vec<u8>>,
    )
}

/// Writes `lines(count)` to `topic` through the at-least-once sink.
fn write_lines(broker: &Broker, topic: &str, count: usize) -> Vec<String> {
    let mut sink = line_sink(broker, topic, Delivery::AtLeastOnce);
    sink.start(&ctx(0, 1)).unwrap();
    let lines = lines(count);
    feed(&mut sink, lines.clone());
    finish(&mut sink);
    let report = sink.stop().unwrap();
    assert_eq!(report.counters["records_out"], count as u64);
    lines
}

/// Writes `count` lines "PREFIX-KEY SEQ" (over 17 keys) to `topic` at least once; returns
/// them.
fn append_lines(broker: &Broker, topic: &str, prefix: &str, count: usize) -> Vec<String> {
    let lines: Vec<String> = (0..count)
        .map(|i| format!("{prefix}-{} {}", i % 17, i / 17))
        .collect();
    let mut sink = line_sink(broker, topic, Delivery::AtLeastOnce);
    sink.start(&ctx(0, 1)).unwrap();
    feed(&mut sink, lines.clone());
    finish(&mut sink);
    lines
}

/// The values, checking that none came twice.
fn exactly_once(values: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for value in values {
        assert!(seen.insert(value.clone()), "{value:?} came twice");
    }
    seen
}

/// Checks that each key's sequence numbers and each partition's offsets rise.
fn assert_in_order(records: &[KafkaRecord<String>]) {
    let mut last_seq: BTreeMap<&str, u64> = BTreeMap::new();
    let mut last_offset: BTreeMap<i32, i64> = BTreeMap::new();
    for record in records {
        let (key, seq) = record.value.split_once(' ').unwrap();
        let seq: u64 = seq.parse().unwrap();
        if let Some(last) = last_seq.insert(key, seq) {
            assert!(seq > last, "{key}: {seq} after {last}");
        }
        if let Some(last) = last_offset.insert(record.partition, record.offset) {
            assert!(
                record.offset > last,
                "partition {}: offset {} after {last}",
                record.partition,
                record.offset
            );
        }
    }
}

#[test]
fn two_instances_read_every_record_once_in_partition_order() {
    let Some(broker) = broker() else { return };
    let topic = "two-instances";
    create_topic(broker, topic, 3);
    let written = write_lines(broker, topic, 3000);
    let mut all = Vec::new();
    let mut partitions = Vec::new();
    for instance in 0..2 {
        let mut config = KafkaSourceConfig::new(&broker.address, topic);
        config.end = EndAt::EndOffsetsAtStart;
        let mut source = KafkaSource::new(config, Lines);
        source.start(&ctx(instance, 2)).unwrap();
        let mut collected = Collected::default();
        drive(&mut source, &mut collected, None).unwrap();
        assert_in_order(&collected.records);
        let times: Vec<u64> = collected
            .records
            .iter()
            .map(KafkaRecord::event_time_ns)
            .collect();
        assert!(
            collected.watermark > 0,
            "instance {instance} emitted no watermark"
        );
        assert!(collected.watermark <= *times.iter().max().unwrap());
        partitions.push(
            collected
                .records
                .iter()
                .map(|r| r.partition)
                .collect::<BTreeSet<_>>(),
        );
        let report = source.stop().unwrap();
        assert_eq!(
            report.counters["records_in"],
            collected.records.len() as u64
        );
        all.extend(collected.records.into_iter().map(|r| r.value));
    }
    assert_eq!(partitions, [BTreeSet::from([0, 2]), BTreeSet::from([1])]);
    assert_eq!(exactly_once(all), written.into_iter().collect());
}

#[test]
fn a_restored_source_reads_exactly_the_rest() {
    let Some(broker) = broker() else { return };
    let topic = "restored-source";
    create_topic(broker, topic, 3);
    let written = write_lines(broker, topic, 2000);
    let bounded = || {
        let mut config = KafkaSourceConfig::new(&broker.address, topic);
        config.end = EndAt::EndOffsetsAtStart;
        config.group = "restored-source-group".into();
        config
    };
    let mut first = KafkaSource::new(bounded(), Lines);
    assert!(first.resumable());
    first.start(&ctx(0, 1)).unwrap();
    let mut before = Collected::default();
    drive(&mut first, &mut before, Some(700)).unwrap();
    let snapshot: Snapshot = first.checkpoint(1).unwrap();
    first.checkpoint_complete(1).unwrap();
    drop(first);
    assert!(before.records.len() < written.len());

    let mut second = KafkaSource::new(bounded(), Lines);
    second.restore(snapshot).unwrap();
    second.start(&ctx(0, 1)).unwrap();
    let mut after = Collected::default();
    drive(&mut second, &mut after, None).unwrap();
    let read = before
        .records
        .iter()
        .chain(&after.records)
        .map(|r| r.value.clone());
    assert_eq!(exactly_once(read), written.iter().cloned().collect());

    // The completed checkpoint's offsets went to the group: a source starting from them
    // reads what the restored one did.
    let mut config = bounded();
    config.start = StartFrom::Committed;
    let mut committed = KafkaSource::new(config, Lines);
    committed.start(&ctx(0, 1)).unwrap();
    let mut rest = Collected::default();
    drive(&mut committed, &mut rest, None).unwrap();
    let positions = |records: &[KafkaRecord<String>]| {
        records
            .iter()
            .map(|r| (r.partition, r.offset))
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(positions(&rest.records), positions(&after.records));
}

#[test]
fn exactly_once_output_is_visible_only_once_its_checkpoint_completes() {
    let Some(broker) = broker() else { return };
    let topic = "exactly-once-visibility";
    create_topic(broker, topic, 3);
    let transactional_id = "visibility".to_owned();
    let mut sink = line_sink(broker, topic, Delivery::ExactlyOnce { transactional_id });
    sink.start(&ctx(0, 1)).unwrap();
    feed(&mut sink, lines(100));
    sink.checkpoint(1).unwrap();
    assert_eq!(
        read_all(broker, topic, Lines).len(),
        0,
        "seen before its commit"
    );
    sink.checkpoint_complete(1).unwrap();
    let read = read_all(broker, topic, Lines).into_iter().map(|r| r.value);
    assert_eq!(exactly_once(read), lines(100).into_iter().collect());
    // Records after the last checkpoint are committed at the end of input.
    feed(&mut sink, lines(150).split_off(100));
    finish(&mut sink);
    let read = read_all(broker, topic, Lines).into_iter().map(|r| r.value);
    assert_eq!(exactly_once(read), lines(150).into_iter().collect());
    assert_eq!(sink.stop().unwrap().counters["transactions_committed"], 2);
}

#[test]
fn a_restarted_exactly_once_sink_writes_every_record_once() {
    let Some(broker) = broker() else { return };
    let topic = "exactly-once-restart";
    create_topic(broker, topic, 3);
    let delivery = || Delivery::ExactlyOnce {
        transactional_id: "restart".into(),
    };
    let all = lines(900);
    let (first, rest) = all.split_at(300);
    let (second, third) = rest.split_at(300);

    // Checkpoint 1 completes; checkpoint 2 is taken but the instance dies before it is told
    // the checkpoint completed, with records after it in hand.
    let mut doomed = line_sink(broker, topic, delivery());
    doomed.start(&ctx(0, 1)).unwrap();
    feed(&mut doomed, first.to_vec());
    doomed.checkpoint(1).unwrap();
    doomed.checkpoint_complete(1).unwrap();
    feed(&mut doomed, second.to_vec());
    let state = doomed.checkpoint(2).unwrap().make().unwrap();
    feed(&mut doomed, third[..100].to_vec());
    drop(doomed);

    // Recovery from checkpoint 2: the sources replay what followed it.
    let mut recovered = line_sink(broker, topic, delivery());
    recovered.restore(state).unwrap();
    recovered.start(&ctx(0, 1)).unwrap();
    feed(&mut recovered, third.to_vec());
    recovered.checkpoint(3).unwrap();
    recovered.checkpoint_complete(3).unwrap();
    let read = read_all(broker, topic, Lines).into_iter().map(|r| r.value);
    assert_eq!(exactly_once(read), all.iter().cloned().collect());
}

#[test]
fn a_restarted_exactly_once_sink_aborts_what_followed_its_checkpoint() {
    let Some(broker) = broker() else { return };
    let topic = "exactly-once-abort";
    create_topic(broker, topic, 3);
    let delivery = || Delivery::ExactlyOnce {
        transactional_id: "abort".into(),
    };
    let all = lines(400);
    let (first, second) = all.split_at(200);

    // Checkpoint 1 completes and is committed; records after it go into the open
    // transaction, then the instance dies.
    let mut doomed = line_sink(broker, topic, delivery());
    doomed.start(&ctx(0, 1)).unwrap();
    feed(&mut doomed, first.to_vec());
    let state = doomed.checkpoint(1).unwrap().make().unwrap();
    doomed.checkpoint_complete(1).unwrap();
    feed(&mut doomed, second.to_vec());
    drop(doomed);

    let mut recovered = line_sink(broker, topic, delivery());
    recovered.restore(state).unwrap();
    recovered.start(&ctx(0, 1)).unwrap();
    feed(&mut recovered, second.to_vec());
    finish(&mut recovered);
    let read = read_all(broker, topic, Lines).into_iter().map(|r| r.value);
    assert_eq!(exactly_once(read), all.iter().cloned().collect());
}

/// The exactly-once sink's marker names the output topic's partition 0: a topic the brokers
/// create on demand is made at the sink's start (a commit before the first record failed with
/// "Unknown topic or partition").
#[test]
fn an_exactly_once_sink_writes_to_a_topic_made_on_demand() {
    let Some(broker) = broker() else { return };
    let topic = "made-on-demand";
    let mut sink = line_sink(
        broker,
        topic,
        Delivery::ExactlyOnce {
            transactional_id: "on-demand".into(),
        },
    );
    sink.start(&ctx(0, 1)).unwrap();
    // A checkpoint before any record: nothing has made the topic yet but the start.
    sink.checkpoint(1).unwrap();
    sink.checkpoint_complete(1).unwrap();
    feed(&mut sink, lines(50));
    sink.checkpoint(2).unwrap();
    sink.checkpoint_complete(2).unwrap();
    let read = read_all(broker, topic, Lines).into_iter().map(|r| r.value);
    assert_eq!(exactly_once(read), lines(50).into_iter().collect());
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Trade {
    symbol: String,
    price: f64,
}

/// Writes the records `good`, `bad`, `good` (raw bytes) to a topic of one partition, and
/// reads them back with `format` under each [`OnBadRecord`] setting.
fn bad_records_follow_the_setting<V, F>(topic: &str, good: &[u8], bad: &[u8], format: fn() -> F)
where
    V: Serialize + for<'de> Deserialize<'de> + Clone + Send + 'static,
    F: Format<V>,
{
    let Some(broker) = broker() else { return };
    create_topic(broker, topic, 1);
    let mut sink = KafkaSink::new(
        KafkaSinkConfig::new(&broker.address, topic, Delivery::AtLeastOnce),
        Raw,
        |_: &BytesTuple| None,
    );
    sink.start(&ctx(0, 1)).unwrap();
    let good = BytesTuple(good.to_vec());
    feed(&mut sink, [good.clone(), BytesTuple(bad.to_vec()), good]);
    finish(&mut sink);

    let read = |on_bad_record| {
        let mut config = KafkaSourceConfig::new(&broker.address, topic);
        config.end = EndAt::EndOffsetsAtStart;
        config.on_bad_record = on_bad_record;
        let mut source = KafkaSource::new(config, format());
        source.start(&ctx(0, 1)).unwrap();
        let mut collected = Collected::default();
        let outcome = drive(&mut source, &mut collected, None);
        let bad = source.stop().unwrap().counters["bad_records"];
        (outcome, collected, bad)
    };

    let (outcome, dropped, count) = read(OnBadRecord::Drop);
    outcome.unwrap();
    assert_eq!((dropped.records.len(), dropped.bad.len(), count), (2, 0, 1));

    let (outcome, side, count) = read(OnBadRecord::SideOutput);
    outcome.unwrap();
    assert_eq!((side.records.len(), count), (2, 1));
    assert_eq!((side.bad[0].partition, side.bad[0].offset), (0, 1));
    assert_eq!(side.bad[0].value, bad);

    let (outcome, _, count) = read(OnBadRecord::Fail);
    let message = outcome.unwrap_err().to_string();
    assert!(
        message.contains(&format!("topic \"{topic}\" partition 0 offset 1")),
        "{message}"
    );
    assert_eq!(count, 1);
}

#[test]
fn json_records_that_do_not_decode_follow_the_setting() {
    bad_records_follow_the_setting(
        "bad-json-records",
        br#"{"symbol":"ACME","price":1.5}"#,
        b"{\"symbol\": oops",
        Json::<Trade>::new,
    );
}

#[test]
fn csv_records_that_do_not_decode_follow_the_setting() {
    // A price that is no number, then a record with a field too few.
    bad_records_follow_the_setting(
        "bad-csv-records",
        b"ACME,1.5",
        b"ACME,one and a half",
        || Csv::<Trade>::new(b','),
    );
    bad_records_follow_the_setting("short-csv-records", b"ACME,1.5", b"ACME", || {
        Csv::<Trade>::new(b',')
    });
}

/// An address where no broker listens (a port just free).
fn no_broker() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

#[test]
fn a_broker_down_at_start_is_named() {
    let address = no_broker();
    let mut config = KafkaSourceConfig::new(&address, "lines");
    config.request_timeout = Duration::from_secs(2);
    let mut source = KafkaSource::new(config, Lines);
    let message = source.start(&ctx(0, 1)).unwrap_err().to_string();
    assert!(
        message.contains(&format!("Kafka at {address}")),
        "{message}"
    );

    let mut config = KafkaSinkConfig::new(&address, "counts", Delivery::AtLeastOnce);
    config.request_timeout = Duration::from_secs(2);
    let mut sink = KafkaSink::new(config, Lines, |_: &String| None);
    sink.start(&ctx(0, 1)).unwrap();
    feed(&mut sink, lines(3));
    let message = sink.checkpoint(1).unwrap_err().to_string();
    assert!(
        message.contains(&format!("Kafka at {address}")),
        "{message}"
    );
}

/// Once the broker has been gone for their request timeout, source and sink fail naming it
/// (`sluice/tests/kafka.rs` has a job read on across a restart of the broker).
#[test]
fn a_broker_gone_mid_run_is_named_after_the_request_timeout() {
    let Some(broker) = Broker::own() else { return };
    let topic = "broker-gone";
    create_topic(&broker, topic, 2);
    write_lines(&broker, topic, 100);
    let mut config = KafkaSourceConfig::new(&broker.address, topic);
    config.request_timeout = Duration::from_secs(3);
    let mut source = KafkaSource::new(config, Lines);
    source.start(&ctx(0, 1)).unwrap();
    let mut collected = Collected::default();
    drive(&mut source, &mut collected, Some(100)).unwrap();
    let mut config = KafkaSinkConfig::new(&broker.address, topic, Delivery::AtLeastOnce);
    config.request_timeout = Duration::from_secs(3);
    let mut sink = KafkaSink::new(config, Lines, |_: &String| None);
    sink.start(&ctx(0, 1)).unwrap();
    broker.down();
    let message = drive(&mut source, &mut collected, None)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains(&format!("Kafka at {}: no broker answered", broker.address)),
        "{message}"
    );
    feed(&mut sink, lines(3));
    let message = sink.checkpoint(1).unwrap_err().to_string();
    assert!(
        message.contains(&format!("Kafka at {}", broker.address)),
        "{message}"
    );
}

#[test]
fn an_unbounded_source_reads_partitions_added_to_its_topic() {
    let Some(broker) = broker() else { return };
    let topic = "partitions-added";
    create_topic(broker, topic, 1);
    write_lines(broker, topic, 50);
    let read_by = |instance| {
        let mut config = KafkaSourceConfig::new(&broker.address, topic);
        config.discover_partitions_every = Some(Duration::from_millis(100));
        let mut source = KafkaSource::new(config, Lines);
        source.start(&ctx(instance, 2)).unwrap();
        source
    };
    let (mut first, mut second) = (read_by(0), read_by(1));
    let (mut by_first, mut by_second) = (Collected::default(), Collected::default());
    drive(&mut first, &mut by_first, Some(50)).unwrap();

    add_partitions(broker, topic, 4);
    let added = append_lines(broker, topic, "added", 200);

    // Each instance reads its own share of the new partitions (0 and 2, 1 and 3), until
    // every record is read.
    let schemas = [KafkaRecord::<String>::schema(), BadRecord::schema()];
    let deadline = Instant::now() + READ_WATCHDOG;
    while by_first.records.len() + by_second.records.len() < 250 {
        first
            .produce(&mut Output::new(&schemas, &mut by_first))
            .unwrap();
        second
            .produce(&mut Output::new(&schemas, &mut by_second))
            .unwrap();
        assert!(
            Instant::now() < deadline,
            "the added partitions were not read within {READ_WATCHDOG:?}"
        );
    }
    let partitions = |c: &Collected<String>| {
        c.records
            .iter()
            .map(|r| r.partition)
            .collect::<BTreeSet<_>>()
    };
    assert!(partitions(&by_first).is_subset(&BTreeSet::from([0, 2])));
    assert!(partitions(&by_second).is_subset(&BTreeSet::from([1, 3])));
    let read = by_first
        .records
        .into_iter()
        .chain(by_second.records)
        .map(|r| r.value);
    let written = lines(50).into_iter().chain(added);
    assert_eq!(exactly_once(read), written.collect());
}

#[test]
fn a_missing_topic_is_named() {
    let Some(broker) = broker() else { return };
    let mut source = KafkaSource::new(
        KafkaSourceConfig::new(&broker.address, "no-such-topic"),
        Lines,
    );
    let message = source.start(&ctx(0, 1)).unwrap_err().to_string();
    assert!(
        message.contains("topic \"no-such-topic\" does not exist"),
        "{message}"
    );
    assert!(message.contains(&broker.address), "{message}");
}

fn now_ms() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since_epoch.as_millis()).unwrap()
}

#[test]
fn an_unbounded_source_from_latest_or_a_timestamp_reads_only_newer_records() {
    let Some(broker) = broker() else { return };
    let topic = "latest-and-timestamp";
    create_topic(broker, topic, 3);
    write_lines(broker, topic, 200);
    // Timestamps are milliseconds: the new records' are past `since`, the old ones' before.
    std::thread::sleep(Duration::from_millis(5));
    let since = now_ms();
    std::thread::sleep(Duration::from_millis(5));

    let mut config = KafkaSourceConfig::new(&broker.address, topic);
    config.start = StartFrom::Latest;
    let mut latest = KafkaSource::new(config, Lines);
    latest.start(&ctx(0, 1)).unwrap();
    let new = append_lines(broker, topic, "new", 300);
    let mut collected = Collected::default();
    drive(&mut latest, &mut collected, Some(new.len())).unwrap();
    let read = collected.records.into_iter().map(|r| r.value);
    assert_eq!(exactly_once(read), new.iter().cloned().collect());

    let mut config = KafkaSourceConfig::new(&broker.address, topic);
    config.start = StartFrom::Timestamp(since);
    config.end = EndAt::EndOffsetsAtStart;
    let mut by_time = KafkaSource::new(config, Lines);
    by_time.start(&ctx(0, 1)).unwrap();
    let mut collected = Collected::default();
    drive(&mut by_time, &mut collected, None).unwrap();
    let read = collected.records.into_iter().map(|r| r.value);
    assert_eq!(exactly_once(read), new.into_iter().collect());
}

#[test]
fn the_at_least_once_sink_has_delivered_everything_when_a_checkpoint_returns() {
    let Some(broker) = broker() else { return };
    let topic = "at-least-once-checkpoint";
    create_topic(broker, topic, 3);
    let mut config = KafkaSinkConfig::new(&broker.address, topic, Delivery::AtLeastOnce);
    // Records would wait a second in librdkafka's queue but for the checkpoint's flush.
    config.settings.push(("linger.ms".into(), "1000".into()));
    let mut sink = KafkaSink::new(config, Lines, |line: &String| key_of(line));
    sink.start(&ctx(0, 1)).unwrap();
    feed(&mut sink, lines(500));
    assert!(
        sink.checkpoint(1).unwrap().make().unwrap().is_empty(),
        "at least once keeps no state"
    );
    let read = read_all(broker, topic, Lines).into_iter().map(|r| r.value);
    assert_eq!(exactly_once(read), lines(500).into_iter().collect());
}

/// Once librdkafka's local queue of a partition holds `queued.min.messages`, it stops fetching
/// the partition for `fetch.queue.backoff.ms`, 1 s by default: the source drained such a
/// queue in a fraction of that and sat idle for the rest. Its own setting is a few
/// milliseconds, and a user's setting still overrides it.
#[test]
fn the_source_fetches_again_soon_after_its_local_queue_fills() {
    let mut config = KafkaSourceConfig::new("127.0.0.1:9", "any");
    let backoff = FETCH_QUEUE_BACKOFF.as_millis().to_string();
    assert!(FETCH_QUEUE_BACKOFF < Duration::from_millis(100));
    assert_eq!(
        config.consumer_config().get("fetch.queue.backoff.ms"),
        Some(backoff.as_str())
    );
    config
        .settings
        .push(("fetch.queue.backoff.ms".into(), "500".into()));
    assert_eq!(
        config.consumer_config().get("fetch.queue.backoff.ms"),
        Some("500")
    );
}
