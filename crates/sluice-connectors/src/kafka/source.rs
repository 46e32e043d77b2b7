//! The Kafka source: reads one topic, its partitions dealt over the source's parallel
//! instances (instance `i` of `p` takes the partitions whose number modulo `p` is `i`), each
//! instance assigning its own explicitly (no consumer-group rebalancing).
//!
//! Positions are Sluice's, as in Flink: each instance keeps its partitions' next offsets,
//! returns them from `snapshot` and `checkpoint`, and rewinds to them after `restore`. Once a
//! checkpoint completes they are also committed to the consumer group, for monitoring tools
//! and for [`StartFrom::Committed`].
//!
//! An unbounded read looks for partitions added to the topic every
//! [`KafkaSourceConfig::discover_partitions_every`] and reads those that are this instance's
//! from their first record. When the brokers stop answering the source keeps trying (librdkafka
//! reconnects by itself) for up to [`KafkaSourceConfig::request_timeout`], then fails naming
//! them.
//!
//! Its figures, live ([`sluice_graph::live`]) and in its report: `records_in`, `bytes_in`
//! (keys and values), `bad_records`, and `lag.partition.N`, partition N's records not yet read
//! (its end offset less the next to read), asked of the broker every [`LAG_EVERY`].
//!
//! Event time is the record's timestamp; the instance's watermark is the least, over its
//! partitions still being read, of the greatest timestamp seen in each (a partition that has
//! given no record yet holds it at 0). Records out of timestamp order within a partition are
//! late to it: put a `WatermarkAssigner` with a delay after the source for such topics.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::{BorrowedMessage, Headers};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Message, Offset, TopicPartitionList};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sluice_graph::live::{live_figures, LiveFigures};
use sluice_graph::{OperatorContext, OperatorError, OperatorReport, Output, Produced, Snapshot};
use sluice_ops::Pacer;

use super::{client_config, timestamp_ns, BadRecord, KafkaError, KafkaRecord};
use crate::{Format, OnBadRecord};

/// Records emitted per `produce` call at most.
const BATCH: usize = 256;

/// How long one `produce` call waits for the first record before saying it is idle.
const POLL_WAIT: Duration = Duration::from_millis(100);

/// How often, while no broker answers, the source asks for the topic's metadata to learn
/// whether one answers again (librdkafka says when the brokers go, not when they come back).
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// How long librdkafka waits before fetching a partition again once its local queue holds
/// `queued.min.messages` (100,000 by default), the source's own setting of
/// `fetch.queue.backoff.ms` (librdkafka's default is 1 s). The source drains such a queue in a
/// fraction of a second, so with librdkafka's default it then sat idle for the rest of the
/// second: a bounded read of 1 M records took 2 to 3 times as long. 0 would make librdkafka's
/// fetcher spin while the queue stays full; a few milliseconds costs nothing.
pub const FETCH_QUEUE_BACKOFF: Duration = Duration::from_millis(10);

/// How often the source asks the broker for its partitions' end offsets, for their lag.
pub const LAG_EVERY: Duration = Duration::from_secs(1);

/// How often an unbounded read looks for added partitions unless configured otherwise.
pub const DEFAULT_DISCOVER_PARTITIONS_EVERY: Duration = Duration::from_secs(5);

/// Where a partition is read from when no checkpoint says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFrom {
    /// Its first record still kept.
    Earliest,
    /// After its last record at start: only new records.
    Latest,
    /// The first record whose timestamp is at or after this time (milliseconds since the
    /// Unix epoch); a partition with none starts at its end.
    Timestamp(i64),
    /// The offset the consumer group last committed; a partition with none starts at its
    /// earliest record.
    Committed,
}

/// When the source ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndAt {
    /// Never: it reads new records as they come.
    Unbounded,
    /// At each partition's end offset as seen at start (a bounded read, as of a file).
    EndOffsetsAtStart,
}

/// What a [`KafkaSource`] reads and how.
#[derive(Debug, Clone)]
pub struct KafkaSourceConfig {
    /// `bootstrap.servers`: `host:port[,host:port...]`.
    pub brokers: String,
    /// The topic.
    pub topic: String,
    /// The consumer group offsets are committed to (`sluice-TOPIC` unless set).
    pub group: String,
    /// Where to start without a checkpoint.
    pub start: StartFrom,
    /// When to end.
    pub end: EndAt,
    /// What to do with a record whose value does not decode.
    pub on_bad_record: OnBadRecord,
    /// librdkafka settings, applied last.
    pub settings: Vec<(String, String)>,
    /// How long a metadata or offsets request may take, and how long the source goes on
    /// while no broker answers before it fails.
    pub request_timeout: Duration,
    /// How often an unbounded read looks for partitions added to the topic (`None`: never).
    pub discover_partitions_every: Option<Duration>,
    /// The most records per second each instance emits (`None`: as fast as they come).
    pub max_rate: Option<u64>,
}

impl KafkaSourceConfig {
    /// Reads `topic` from `brokers`: from the earliest record, unbounded, dropping bad records.
    pub fn new(brokers: impl Into<String>, topic: impl Into<String>) -> Self {
        let topic = topic.into();
        Self {
            brokers: brokers.into(),
            group: format!("sluice-{topic}"),
            topic,
            start: StartFrom::Earliest,
            end: EndAt::Unbounded,
            on_bad_record: OnBadRecord::Drop,
            settings: Vec::new(),
            request_timeout: super::DEFAULT_REQUEST_TIMEOUT,
            discover_partitions_every: Some(DEFAULT_DISCOVER_PARTITIONS_EVERY),
            max_rate: None,
        }
    }

    /// The source's consumer settings: its own (its group, no automatic commits, partition
    /// ends reported, `read_committed`, [`FETCH_QUEUE_BACKOFF`]), then [`Self::settings`],
    /// which override them.
    pub fn consumer_config(&self) -> rdkafka::ClientConfig {
        let backoff_ms = FETCH_QUEUE_BACKOFF.as_millis().to_string();
        client_config(
            &self.brokers,
            &[
                ("group.id", &self.group),
                ("enable.auto.commit", "false"),
                ("enable.auto.offset.store", "false"),
                ("enable.partition.eof", "true"),
                ("isolation.level", "read_committed"),
                ("fetch.queue.backoff.ms", &backoff_ms),
            ],
            &self.settings,
        )
    }
}

/// A partition this instance reads.
#[derive(Debug)]
struct PartitionRead {
    /// The offset of the next record to emit.
    next: i64,
    /// Where a bounded read of it ends.
    end: Option<i64>,
    /// Whether a bounded read of it is over.
    done: bool,
    /// The greatest event time seen in it (ns).
    max_time: u64,
    /// Its end offset when last asked (or the offset after the last record read, if past).
    high: i64,
}

impl PartitionRead {
    /// Its records not yet read, as far as the source knows.
    fn lag(&self) -> u64 {
        u64::try_from(self.high - self.next).unwrap_or(0)
    }
}

/// Which partitions are an instance's: those whose number modulo `parallelism` is
/// `instance`.
#[derive(Debug, Clone, Default)]
struct PartitionsOf {
    instance: usize,
    parallelism: usize,
}

/// The position kept in a snapshot: the topic and each partition's next offset.
#[derive(Debug, Serialize, Deserialize)]
struct Position {
    topic: String,
    next: Vec<(i32, i64)>,
}

/// The Kafka source (see the module doc). It emits [`KafkaRecord<V>`] on port 0, and
/// [`BadRecord`] on port 1 under [`OnBadRecord::SideOutput`].
pub struct KafkaSource<V, F> {
    config: KafkaSourceConfig,
    format: F,
    consumer: Option<BaseConsumer>,
    partitions: BTreeMap<i32, PartitionRead>,
    /// Offsets given by `restore`, used by `start`.
    restored: Option<BTreeMap<i32, i64>>,
    /// Positions of checkpoints taken and not yet complete.
    pending: BTreeMap<u64, Vec<(i32, i64)>>,
    watermark: u64,
    batch: Vec<KafkaRecord<V>>,
    bad_batch: Vec<BadRecord>,
    records: u64,
    bytes: u64,
    bad_records: u64,
    pacer: Pacer,
    /// Which partitions are this instance's (known once started).
    instance: PartitionsOf,
    /// When the brokers were last seen gone (librdkafka reported them down) with no answer
    /// since, and when the source last asked whether they answer again.
    unreachable: Option<(Instant, Instant)>,
    /// When the source last looked for added partitions.
    discovered: Instant,
    /// Its live figures (once started), and when it last asked for the lag.
    live: Option<(std::sync::Arc<LiveFigures>, Instant)>,
    value: PhantomData<fn() -> V>,
}

impl<V, F: Format<V>> KafkaSource<V, F> {
    /// A source reading as `config` says, decoding values with `format`.
    pub fn new(config: KafkaSourceConfig, format: F) -> Self {
        Self {
            format,
            consumer: None,
            partitions: BTreeMap::new(),
            restored: None,
            pending: BTreeMap::new(),
            watermark: 0,
            batch: Vec::with_capacity(BATCH),
            bad_batch: Vec::new(),
            records: 0,
            bytes: 0,
            bad_records: 0,
            pacer: Pacer::new(config.max_rate),
            instance: PartitionsOf::default(),
            unreachable: None,
            discovered: Instant::now(),
            live: None,
            value: PhantomData,
            config,
        }
    }

    fn client_error(
        &self,
        what: impl Into<String>,
        source: rdkafka::error::KafkaError,
    ) -> KafkaError {
        KafkaError::client(&self.config.brokers, what, source)
    }

    fn consumer(&self) -> Result<&BaseConsumer, OperatorError> {
        self.consumer
            .as_ref()
            .ok_or_else(|| OperatorError::Failed("the Kafka source was not started".into()))
    }

    /// This instance's partitions of the topic.
    fn my_partitions(
        &self,
        consumer: &BaseConsumer,
        instance: &PartitionsOf,
    ) -> Result<Vec<i32>, KafkaError> {
        let topic = &self.config.topic;
        let metadata = consumer
            .fetch_metadata(Some(topic), self.config.request_timeout)
            .map_err(|e| self.client_error("reading the topic's metadata", e))?;
        let no_such_topic = |detail: String| KafkaError::NoSuchTopic {
            brokers: self.config.brokers.clone(),
            topic: topic.clone(),
            detail,
        };
        let found = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .ok_or_else(|| no_such_topic(String::new()))?;
        if let Some(error) = found.error() {
            return Err(no_such_topic(format!(
                ": {:?}",
                RDKafkaErrorCode::from(error)
            )));
        }
        if found.partitions().is_empty() {
            return Err(no_such_topic(" (it has no partitions)".into()));
        }
        Ok(found
            .partitions()
            .iter()
            .map(|p| p.id())
            .filter(|id| {
                usize::try_from(*id).is_ok_and(|id| id % instance.parallelism == instance.instance)
            })
            .collect())
    }

    /// Where partition `partition` starts when no checkpoint says: an offset in
    /// `low..=high`.
    fn start_offset(
        &self,
        consumer: &BaseConsumer,
        partition: i32,
        start: StartFrom,
        (low, high): (i64, i64),
    ) -> Result<i64, KafkaError> {
        let topic = &self.config.topic;
        let timeout = self.config.request_timeout;
        let one = |offset: Offset| -> Result<TopicPartitionList, KafkaError> {
            let mut list = TopicPartitionList::new();
            list.add_partition_offset(topic, partition, offset)
                .map_err(|e| self.client_error("naming a partition", e))?;
            Ok(list)
        };
        let offset_in = |list: TopicPartitionList| {
            list.find_partition(topic, partition)
                .and_then(|p| match p.offset() {
                    Offset::Offset(o) => Some(o),
                    _ => None,
                })
        };
        Ok(match start {
            StartFrom::Earliest => low,
            StartFrom::Latest => high,
            StartFrom::Timestamp(ms) => {
                let found = consumer
                    .offsets_for_times(one(Offset::Offset(ms))?, timeout)
                    .map_err(|e| self.client_error("finding offsets by time", e))?;
                offset_in(found).unwrap_or(high)
            }
            StartFrom::Committed => {
                let found = consumer
                    .committed_offsets(one(Offset::Invalid)?, timeout)
                    .map_err(|e| self.client_error("reading the group's committed offsets", e))?;
                offset_in(found).unwrap_or(low)
            }
        }
        .clamp(low, high))
    }

    fn positions(&self) -> Vec<(i32, i64)> {
        self.partitions
            .iter()
            .map(|(p, read)| (*p, read.next))
            .collect()
    }

    /// Takes in one record: emits it, or handles it as a bad one.
    fn take(&mut self, message: &BorrowedMessage<'_>) -> Result<(), KafkaError> {
        let partition = message.partition();
        let offset = message.offset();
        let Some(read) = self.partitions.get_mut(&partition) else {
            return Ok(());
        };
        if read.done || offset < read.next {
            return Ok(());
        }
        if read.end.is_some_and(|end| offset >= end) {
            read.done = true;
            return Ok(());
        }
        read.next = offset + 1;
        read.high = read.high.max(read.next);
        if read.end.is_some_and(|end| read.next >= end) {
            read.done = true;
        }
        let timestamp = message.timestamp().to_millis();
        read.max_time = read.max_time.max(timestamp_ns(timestamp));
        let payload = message.payload();
        self.records += 1;
        self.bytes +=
            (payload.map_or(0, <[u8]>::len) + message.key().map_or(0, <[u8]>::len)) as u64;
        let value = payload
            .ok_or(crate::FormatError::Missing)
            .and_then(|bytes| self.format.decode(bytes));
        match value {
            Ok(value) => self.batch.push(KafkaRecord {
                key: message.key().map(<[u8]>::to_vec),
                value,
                headers: message.headers().map_or_else(Vec::new, |headers| {
                    headers
                        .iter()
                        .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                        .collect()
                }),
                topic: self.config.topic.clone(),
                partition,
                offset,
                timestamp,
            }),
            Err(error) => {
                self.bad_records += 1;
                match self.config.on_bad_record {
                    OnBadRecord::Drop => {}
                    OnBadRecord::SideOutput => self.bad_batch.push(BadRecord {
                        topic: self.config.topic.clone(),
                        partition,
                        offset,
                        key: message.key().map(<[u8]>::to_vec),
                        value: payload.map_or_else(Vec::new, <[u8]>::to_vec),
                        error: error.to_string(),
                    }),
                    OnBadRecord::Fail => {
                        return Err(KafkaError::BadRecord {
                            topic: self.config.topic.clone(),
                            partition,
                            offset,
                            source: error,
                        })
                    }
                }
            }
        }
        Ok(())
    }

    /// Polls up to `most` records into `batch` and `bad_batch`, waiting a little for the
    /// first.
    fn poll_batch(&mut self, consumer: &BaseConsumer, most: usize) -> Result<(), KafkaError> {
        let mut wait = POLL_WAIT;
        while self.batch.len() + self.bad_batch.len() < most {
            let polled = consumer.poll(wait);
            wait = Duration::ZERO;
            match polled {
                None => break,
                Some(Ok(message)) => {
                    self.unreachable = None;
                    let taken = self.take(&message);
                    drop(message);
                    taken?;
                }
                Some(Err(rdkafka::error::KafkaError::PartitionEOF(partition))) => {
                    if let Some(read) = self.partitions.get_mut(&partition) {
                        // Caught up with the partition's end as of now, which is at or past
                        // its end as of the start.
                        read.done |= read.end.is_some();
                    }
                }
                Some(Err(
                    e @ (rdkafka::error::KafkaError::MessageConsumptionFatal(_)
                    | rdkafka::error::KafkaError::MessageConsumption(
                        RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic,
                    )),
                )) => return Err(self.client_error("reading records", e)),
                Some(Err(rdkafka::error::KafkaError::MessageConsumption(
                    RDKafkaErrorCode::AllBrokersDown
                    | RDKafkaErrorCode::BrokerTransportFailure
                    | RDKafkaErrorCode::Resolve,
                ))) => {
                    let now = Instant::now();
                    self.unreachable.get_or_insert((now, now));
                    break;
                }
                // Others librdkafka retries by itself.
                Some(Err(_)) => break,
            }
        }
        Ok(())
    }

    /// While the brokers are gone: asks every [`PROBE_EVERY`] whether one answers again, and
    /// fails once none has for the request timeout.
    fn check_reachable(&mut self, consumer: &BaseConsumer) -> Result<(), KafkaError> {
        let Some((since, probed)) = self.unreachable else {
            return Ok(());
        };
        if probed.elapsed() < PROBE_EVERY && probed != since {
            return Ok(());
        }
        let answer = consumer.fetch_metadata(Some(&self.config.topic), PROBE_EVERY);
        if answer.is_ok_and(|metadata| !metadata.brokers().is_empty()) {
            self.unreachable = None;
            return Ok(());
        }
        if since.elapsed() >= self.config.request_timeout {
            return Err(KafkaError::Unreachable {
                brokers: self.config.brokers.clone(),
                waited: self.config.request_timeout,
            });
        }
        self.unreachable = Some((since, Instant::now()));
        Ok(())
    }

    /// Every [`KafkaSourceConfig::discover_partitions_every`] of an unbounded read: starts
    /// reading, from their first record, the partitions of the topic added since that are
    /// this instance's.
    fn discover_partitions(
        &mut self,
        consumer: &BaseConsumer,
        ctx: &PartitionsOf,
    ) -> Result<(), KafkaError> {
        let Some(every) = self.config.discover_partitions_every else {
            return Ok(());
        };
        if self.config.end != EndAt::Unbounded
            || self.unreachable.is_some()
            || self.discovered.elapsed() < every
        {
            return Ok(());
        }
        self.discovered = Instant::now();
        let mut added = TopicPartitionList::new();
        for partition in self.my_partitions(consumer, ctx)? {
            if !self.partitions.contains_key(&partition) {
                self.add_partition(consumer, partition, Some(StartFrom::Earliest), &mut added)?;
            }
        }
        if added.count() > 0 {
            consumer
                .incremental_assign(&added)
                .map_err(|e| self.client_error("assigning added partitions", e))?;
        }
        Ok(())
    }

    /// Starts reading `partition`: from the restored offset, else as `start` says (the
    /// configured start unless given), adding it to `assignment` unless a bounded read of it
    /// is over already.
    fn add_partition(
        &mut self,
        consumer: &BaseConsumer,
        partition: i32,
        start: Option<StartFrom>,
        assignment: &mut TopicPartitionList,
    ) -> Result<(), KafkaError> {
        let marks = consumer
            .fetch_watermarks(&self.config.topic, partition, self.config.request_timeout)
            .map_err(|e| {
                self.client_error(format!("reading partition {partition}'s offsets"), e)
            })?;
        let restored = self
            .restored
            .as_ref()
            .and_then(|r| r.get(&partition).copied());
        let next = match restored {
            Some(next) => next,
            None => self.start_offset(
                consumer,
                partition,
                start.unwrap_or(self.config.start),
                marks,
            )?,
        };
        let end = match self.config.end {
            EndAt::Unbounded => None,
            EndAt::EndOffsetsAtStart => Some(marks.1),
        };
        let done = end.is_some_and(|end| next >= end);
        if !done {
            assignment
                .add_partition_offset(&self.config.topic, partition, Offset::Offset(next))
                .map_err(|e| self.client_error("naming a partition", e))?;
        }
        self.partitions.insert(
            partition,
            PartitionRead {
                next,
                end,
                done,
                max_time: 0,
                high: marks.1,
            },
        );
        Ok(())
    }

    /// Every [`LAG_EVERY`] while the brokers answer: asks for each partition's end offset,
    /// and publishes the figures.
    fn publish(&mut self, consumer: &BaseConsumer) {
        let Some((live, asked)) = &self.live else {
            return;
        };
        if asked.elapsed() < LAG_EVERY {
            return;
        }
        let live = live.clone();
        if self.unreachable.is_none() {
            for (partition, read) in &mut self.partitions {
                let marks = consumer.fetch_watermarks(&self.config.topic, *partition, POLL_WAIT);
                if let Ok((_, high)) = marks {
                    read.high = high;
                }
            }
        }
        for (name, value) in self.figures() {
            live.set(&name, value);
        }
        self.live = Some((live, Instant::now()));
    }

    /// Its figures (see the module doc).
    fn figures(&self) -> Vec<(String, u64)> {
        let mut figures = vec![
            ("records_in".to_owned(), self.records),
            ("bytes_in".to_owned(), self.bytes),
            ("bad_records".to_owned(), self.bad_records),
        ];
        figures.extend(
            self.partitions
                .iter()
                .map(|(partition, read)| (format!("lag.partition.{partition}"), read.lag())),
        );
        figures
    }

    /// The least, over partitions still read, of their greatest event time.
    fn least_time(&self) -> Option<u64> {
        self.partitions
            .values()
            .filter(|read| !read.done)
            .map(|read| read.max_time)
            .min()
    }
}

impl<V, F> sluice_ops::TypedSource for KafkaSource<V, F>
where
    V: Serialize + DeserializeOwned + Clone + Send + 'static,
    F: Format<V>,
{
    type Out = KafkaRecord<V>;
}

impl<V, F> sluice_graph::Source for KafkaSource<V, F>
where
    V: Serialize + DeserializeOwned + Clone + Send + 'static,
    F: Format<V>,
{
    fn start(&mut self, ctx: &OperatorContext) -> Result<(), OperatorError> {
        let consumer: BaseConsumer = self
            .config
            .consumer_config()
            .create()
            .map_err(|e| self.client_error("creating the consumer", e))?;
        self.instance = PartitionsOf {
            instance: ctx.instance,
            parallelism: ctx.parallelism.max(1),
        };
        let mut assignment = TopicPartitionList::new();
        for partition in self.my_partitions(&consumer, &self.instance)? {
            self.add_partition(&consumer, partition, None, &mut assignment)?;
        }
        consumer
            .assign(&assignment)
            .map_err(|e| self.client_error("assigning the partitions", e))?;
        self.live = Some((live_figures(ctx), Instant::now()));
        self.consumer = Some(consumer);
        Ok(())
    }

    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        if self.partitions.values().all(|read| read.done) && self.config.end != EndAt::Unbounded {
            return Ok(Produced::Exhausted);
        }
        // A message borrows the consumer: it is lent to the loop, which fills `self`.
        let consumer = self
            .consumer
            .take()
            .ok_or_else(|| OperatorError::Failed("the Kafka source was not started".into()))?;
        let instance = self.instance.clone();
        let discovered = self.discover_partitions(&consumer, &instance);
        if self.partitions.is_empty() {
            self.consumer = Some(consumer);
            discovered?;
            // No partition of the topic is this instance's (yet): it holds back no one's
            // event time. Records of partitions added to it later may be late.
            if self.watermark < u64::MAX {
                self.watermark = u64::MAX;
                out.watermark(u64::MAX)?;
            }
            return Ok(Produced::Idle);
        }
        let most = self.pacer.allowance(BATCH);
        let polled = discovered
            .and_then(|()| self.poll_batch(&consumer, most))
            .and_then(|()| self.check_reachable(&consumer));
        self.publish(&consumer);
        self.consumer = Some(consumer);
        polled?;
        self.pacer.emitted(self.batch.len() + self.bad_batch.len());
        let emitted = self.batch.len() + self.bad_batch.len();
        out.emit_batch(0, &mut self.batch)?;
        out.emit_batch(1, &mut self.bad_batch)?;
        if let Some(least) = self.least_time() {
            if least > self.watermark {
                self.watermark = least;
                out.watermark(least)?;
            }
        }
        Ok(if self.partitions.values().all(|read| read.done) {
            Produced::Exhausted
        } else if emitted == 0 {
            Produced::Idle
        } else {
            Produced::Emitted(emitted)
        })
    }

    fn resumable(&self) -> bool {
        true
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Snapshot::whole(&Position {
            topic: self.config.topic.clone(),
            next: self.positions(),
        })
    }

    fn checkpoint(&mut self, checkpoint: u64) -> Result<Snapshot, OperatorError> {
        self.pending.insert(checkpoint, self.positions());
        self.snapshot()
    }

    fn checkpoint_complete(&mut self, checkpoint: u64) -> Result<(), OperatorError> {
        let Some(next) = self.pending.remove(&checkpoint) else {
            return Ok(());
        };
        // Older checkpoints are covered by this one.
        self.pending.retain(|taken, _| *taken > checkpoint);
        let mut offsets = TopicPartitionList::new();
        for (partition, next) in next {
            offsets
                .add_partition_offset(&self.config.topic, partition, Offset::Offset(next))
                .map_err(|e| self.client_error("naming a partition", e))?;
        }
        self.consumer()?
            .commit(&offsets, CommitMode::Sync)
            .map_err(|e| {
                self.client_error("committing offsets to the group", e)
                    .into()
            })
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        if snapshot.is_empty() {
            return Ok(());
        }
        let position: Position = snapshot.decode_whole()?;
        if position.topic != self.config.topic {
            return Err(KafkaError::Snapshot(format!(
                "the snapshot holds positions in topic {:?}, but this source reads {:?}",
                position.topic, self.config.topic
            ))
            .into());
        }
        self.restored = Some(position.next.into_iter().collect());
        Ok(())
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        self.consumer = None;
        let mut report = OperatorReport::default();
        report.counters.extend(self.figures());
        Ok(report)
    }
}
