//! The Kafka sink: writes each tuple as one record of a topic, its value encoded by a
//! [`Format`], its key chosen by a function (records are partitioned by key with librdkafka's
//! `murmur2_random` partitioner, the Java client's: a key's records go to one partition and
//! stay in order).
//!
//! **At least once** ([`Delivery::AtLeastOnce`]): records are sent as they come, and every
//! `checkpoint` (and `finish`) waits until all sent are acknowledged, failing if one was not.
//!
//! **Exactly once** ([`Delivery::ExactlyOnce`]): one Kafka transaction per checkpoint, with
//! the transactional id `PREFIX-INSTANCE`, stable per instance, so that a restarted
//! instance's `init_transactions` fences its predecessor and aborts whatever transaction it
//! left open. Flink's KafkaSink commits a pre-committed transaction after a restart by
//! resuming it (setting the producer id and epoch it kept in its state through reflection);
//! librdkafka has no call to resume a transaction, and `init_transactions` aborts any open
//! one. So this sink keeps in its checkpoint state the records of every checkpoint not yet
//! known committed, and commits with each checkpoint's transaction a *marker*: the offset
//! `CHECKPOINT` of the output topic's partition 0 for the consumer group named by the
//! transactional id (`send_offsets_to_transaction`, atomic with the records). Then:
//!
//! - `process`: the record is encoded and kept; it is sent into the open transaction at
//!   once unless an earlier checkpoint's records hold that transaction (then it waits, in
//!   memory, for that checkpoint to commit).
//! - `checkpoint(n)` (pre-commit): flushes the transaction; the records since the previous
//!   checkpoint become checkpoint `n`'s, kept in the returned state.
//! - `checkpoint_complete(n)`: commits the transaction (records and marker `n`), begins the
//!   next and sends into it what waited.
//! - `restore` of checkpoint `n`'s state, then `start`: `init_transactions` (fencing the
//!   predecessor, aborting its open transaction), reads the marker with `read_committed`,
//!   and commits again, each in its own transaction with its marker, the state's records of
//!   every checkpoint past the marker. Records after checkpoint `n` were in the aborted
//!   transaction or not sent; the sources replay them.
//! - `finish`: commits everything, the records after the last checkpoint included.
//!
//! Its figures, live ([`sluice_graph::live`], after each checkpoint and every few hundred
//! records) and in its report: `records_out`, `bytes_out` (keys and values), and exactly
//! once `transactions_committed` and `transactions_aborted` (the predecessor's open
//! transaction that `init_transactions` aborted at a restart from a checkpoint).
//!
//! The cost: the records of checkpoints not yet committed are held in memory and written in
//! the checkpoint, at most [`KafkaSinkConfig::max_pending_bytes`]. A consumer reading the
//! output must use `isolation.level=read_committed`; the output becomes visible one
//! checkpoint interval after it is written.

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use sluice_graph::live::{live_figures, LiveFigures};
use sluice_graph::{
    expect_tuple, CheckpointState, Operator, OperatorContext, OperatorError, OperatorReport,
    Output, Snapshot,
};
use sluice_types::{Tuple, TupleRef};

use super::{client_config, KafkaError};
use crate::Format;

/// The most bytes of records the exactly-once sink holds uncommitted unless configured
/// otherwise: 256 MiB.
pub const DEFAULT_MAX_PENDING_BYTES: usize = 256 << 20;

/// Records sent between two checks of delivery reports (at least once).
const POLL_EVERY: u64 = 256;

/// The sink's guarantee.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Every record at least once: flushed at each checkpoint and at the end.
    AtLeastOnce,
    /// Every record exactly once for `read_committed` readers: one transaction per
    /// checkpoint. Instance `i` uses the transactional id `{transactional_id}-{i}`; it names
    /// one job: two jobs with the same prefix fence each other.
    ExactlyOnce {
        /// The transactional ids' prefix.
        transactional_id: String,
    },
}

/// What a [`KafkaSink`] writes and how.
#[derive(Debug, Clone)]
pub struct KafkaSinkConfig {
    /// `bootstrap.servers`: `host:port[,host:port...]`.
    pub brokers: String,
    /// The topic.
    pub topic: String,
    /// At least once or exactly once.
    pub delivery: Delivery,
    /// librdkafka settings, applied last.
    pub settings: Vec<(String, String)>,
    /// How long a flush, a transaction's commit or an offsets request may take.
    pub request_timeout: Duration,
    /// The most bytes of uncommitted records the exactly-once sink holds (keys and values);
    /// past it the job fails naming this limit.
    pub max_pending_bytes: usize,
}

impl KafkaSinkConfig {
    /// Writes to `topic` at `brokers` with the guarantee `delivery`.
    pub fn new(brokers: impl Into<String>, topic: impl Into<String>, delivery: Delivery) -> Self {
        Self {
            brokers: brokers.into(),
            topic: topic.into(),
            delivery,
            settings: Vec::new(),
            request_timeout: super::DEFAULT_REQUEST_TIMEOUT,
            max_pending_bytes: DEFAULT_MAX_PENDING_BYTES,
        }
    }
}

/// One encoded record: key and value.
type Record = (Option<Vec<u8>>, Vec<u8>);

/// The records of one checkpoint, not yet known committed.
#[derive(Debug, Serialize, Deserialize)]
struct Epoch {
    checkpoint: u64,
    records: Vec<Record>,
}

impl Epoch {
    fn bytes(&self) -> usize {
        self.records.iter().map(record_bytes).sum()
    }
}

fn record_bytes((key, value): &Record) -> usize {
    key.as_ref().map_or(0, Vec::len) + value.len()
}

/// The exactly-once sink's checkpoint state, as written.
#[derive(Serialize)]
struct StateRef<'a> {
    transactional_id: &'a str,
    pending: &'a VecDeque<Epoch>,
}

/// The exactly-once sink's checkpoint state, as read back.
#[derive(Deserialize)]
struct State {
    transactional_id: String,
    pending: Vec<Epoch>,
}

/// Keeps the first failed delivery librdkafka reports.
#[derive(Default)]
struct DeliveryReports {
    failed: Mutex<Option<String>>,
}

impl ClientContext for DeliveryReports {}

impl ProducerContext for DeliveryReports {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((error, _)) = result {
            let mut failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
            failed.get_or_insert_with(|| error.to_string());
        }
    }
}

/// What exactly once needs beside the producer.
struct Transactions {
    id: String,
    /// A consumer of the marker's group, for its metadata and committed offset.
    marker: BaseConsumer,
    /// Checkpoints closed and not committed, oldest first. The open transaction holds the
    /// first one's records if there is one, else the records of `open`.
    closed: VecDeque<Epoch>,
    /// Records since the last checkpoint.
    open: Vec<Record>,
    /// Bytes in `closed` and `open`.
    bytes: usize,
    committed: u64,
    aborted: u64,
}

/// The Kafka sink (see the module doc): an operator with one input port of `T`.
pub struct KafkaSink<T, F, K> {
    config: KafkaSinkConfig,
    format: F,
    key: K,
    producer: Option<BaseProducer<DeliveryReports>>,
    transactions: Option<Transactions>,
    restored: Option<State>,
    records: u64,
    bytes: u64,
    live: Option<std::sync::Arc<LiveFigures>>,
    value: PhantomData<fn(T)>,
}

impl<T, F, K> KafkaSink<T, F, K>
where
    T: Tuple,
    F: Format<T>,
    K: Fn(&T) -> Option<Vec<u8>> + Send,
{
    /// A sink writing as `config` says, values encoded with `format`, keys chosen by `key`.
    pub fn new(config: KafkaSinkConfig, format: F, key: K) -> Self {
        Self {
            config,
            format,
            key,
            producer: None,
            transactions: None,
            restored: None,
            records: 0,
            bytes: 0,
            live: None,
            value: PhantomData,
        }
    }
}

impl<T, F, K> KafkaSink<T, F, K> {
    fn client_error(
        &self,
        what: impl Into<String>,
        source: rdkafka::error::KafkaError,
    ) -> KafkaError {
        KafkaError::client(&self.config.brokers, what, source)
    }

    fn producer(&self) -> Result<&BaseProducer<DeliveryReports>, KafkaError> {
        self.producer
            .as_ref()
            .ok_or_else(|| KafkaError::Snapshot("the Kafka sink was not started".into()))
    }

    /// Sends one record, waiting (up to the request timeout) while librdkafka's queue is full.
    fn send(&self, (key, value): &Record) -> Result<(), KafkaError> {
        let producer = self.producer()?;
        let mut record = BaseRecord::<[u8], [u8]>::to(&self.config.topic).payload(value);
        if let Some(key) = key {
            record = record.key(key);
        }
        let deadline = Instant::now() + self.config.request_timeout;
        loop {
            match producer.send(record) {
                Ok(()) => return Ok(()),
                Err((
                    rdkafka::error::KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull),
                    back,
                )) if Instant::now() < deadline => {
                    record = back;
                    producer.poll(Duration::from_millis(10));
                }
                Err((e, _)) => return Err(self.client_error("sending a record", e)),
            }
        }
    }

    /// Its figures (see the module doc).
    fn figures(&self) -> Vec<(&'static str, u64)> {
        let mut figures = vec![("records_out", self.records), ("bytes_out", self.bytes)];
        if let Some(transactions) = &self.transactions {
            figures.push(("transactions_committed", transactions.committed));
            figures.push(("transactions_aborted", transactions.aborted));
        }
        figures
    }

    /// Publishes its figures live.
    fn publish(&self) {
        if let Some(live) = &self.live {
            for (name, value) in self.figures() {
                live.set(name, value);
            }
        }
    }

    /// Waits until the brokers know the topic (a producer's metadata request creates a
    /// missing one where the brokers create topics on demand); fails naming it after the
    /// request timeout.
    fn wait_for_topic(&self) -> Result<(), KafkaError> {
        let producer = self.producer()?;
        let topic = &self.config.topic;
        let deadline = Instant::now() + self.config.request_timeout;
        loop {
            let metadata = producer
                .client()
                .fetch_metadata(Some(topic), self.config.request_timeout)
                .map_err(|e| self.client_error("reading the topic's metadata", e))?;
            let found = metadata.topics().iter().find(|t| t.name() == topic);
            let error = match found {
                Some(t) if t.error().is_none() && !t.partitions().is_empty() => return Ok(()),
                Some(t) => t.error().map(RDKafkaErrorCode::from),
                None => None,
            };
            if Instant::now() >= deadline {
                return Err(KafkaError::NoSuchTopic {
                    brokers: self.config.brokers.clone(),
                    topic: topic.clone(),
                    detail: error.map_or_else(String::new, |e| format!(": {e:?}")),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Fails if librdkafka reported a record it could not deliver.
    fn check_deliveries(&self) -> Result<(), KafkaError> {
        let producer = self.producer()?;
        let failed = producer
            .context()
            .failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match failed {
            Some(reason) => Err(KafkaError::Delivery {
                brokers: self.config.brokers.clone(),
                topic: self.config.topic.clone(),
                reason,
            }),
            None => Ok(()),
        }
    }

    /// Waits until every record sent is acknowledged (or failed).
    fn flush(&self) -> Result<(), KafkaError> {
        self.producer()?
            .flush(self.config.request_timeout)
            .map_err(|e| self.client_error("flushing records", e))?;
        self.check_deliveries()
    }

    fn begin(&self) -> Result<(), KafkaError> {
        self.producer()?
            .begin_transaction()
            .map_err(|e| self.client_error("beginning a transaction", e))
    }

    /// Commits the open transaction, with the marker of `checkpoint` if given.
    fn commit(
        &self,
        transactions: &Transactions,
        checkpoint: Option<u64>,
    ) -> Result<(), KafkaError> {
        let producer = self.producer()?;
        let timeout = self.config.request_timeout;
        if let Some(checkpoint) = checkpoint {
            let mut marker = TopicPartitionList::new();
            let offset = i64::try_from(checkpoint).map_err(|_| {
                KafkaError::Snapshot(format!("checkpoint {checkpoint} is past i64::MAX"))
            })?;
            marker
                .add_partition_offset(&self.config.topic, 0, Offset::Offset(offset))
                .map_err(|e| self.client_error("naming the marker's partition", e))?;
            let group = transactions.marker.group_metadata().ok_or_else(|| {
                KafkaError::Snapshot("the marker's consumer has no group metadata".into())
            })?;
            producer
                .send_offsets_to_transaction(&marker, &group, timeout)
                .map_err(|e| {
                    self.client_error(format!("adding the marker of checkpoint {checkpoint}"), e)
                })?;
        }
        producer.commit_transaction(timeout).map_err(|e| {
            self.client_error(
                format!("committing the transaction of {}", transactions.id),
                e,
            )
        })?;
        self.check_deliveries()
    }

    /// Commits, one transaction each, the closed checkpoints up to `through`, beginning the
    /// next transaction after each and sending into it what it must hold.
    fn commit_through(&mut self, through: u64) -> Result<(), KafkaError> {
        let Some(mut transactions) = self.transactions.take() else {
            return Ok(());
        };
        let committed = self.commit_closed(&mut transactions, through);
        self.transactions = Some(transactions);
        committed
    }

    fn commit_closed(
        &self,
        transactions: &mut Transactions,
        through: u64,
    ) -> Result<(), KafkaError> {
        while transactions
            .closed
            .front()
            .is_some_and(|front| front.checkpoint <= through)
        {
            let Some(epoch) = transactions.closed.pop_front() else {
                break;
            };
            self.commit(transactions, Some(epoch.checkpoint))?;
            transactions.committed += 1;
            transactions.bytes -= epoch.bytes();
            self.begin()?;
            let next = match transactions.closed.front() {
                Some(front) => &front.records,
                None => &transactions.open,
            };
            next.iter().try_for_each(|record| self.send(record))?;
        }
        Ok(())
    }

    /// The marker's committed checkpoint: the last checkpoint whose records are committed.
    fn committed_checkpoint(&self, marker: &BaseConsumer) -> Result<Option<u64>, KafkaError> {
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(&self.config.topic, 0, Offset::Invalid)
            .map_err(|e| self.client_error("naming the marker's partition", e))?;
        let committed = marker
            .committed_offsets(list, self.config.request_timeout)
            .map_err(|e| self.client_error("reading the marker", e))?;
        Ok(committed
            .find_partition(&self.config.topic, 0)
            .and_then(|p| match p.offset() {
                Offset::Offset(o) => u64::try_from(o).ok(),
                _ => None,
            }))
    }

    /// Exactly once at start: fences the predecessor, then commits what the restored state
    /// holds past the marker.
    fn start_transactions(&mut self, id: String) -> Result<(), KafkaError> {
        let marker: BaseConsumer = client_config(
            &self.config.brokers,
            &[("group.id", &id), ("isolation.level", "read_committed")],
            &self.config.settings,
        )
        .create()
        .map_err(|e| self.client_error("creating the marker's consumer", e))?;
        self.producer()?
            .init_transactions(self.config.request_timeout)
            .map_err(|e| self.client_error(format!("initialising transactions as {id}"), e))?;
        let mut transactions = Transactions {
            id,
            marker,
            closed: VecDeque::new(),
            open: Vec::new(),
            bytes: 0,
            committed: 0,
            aborted: 0,
        };
        if let Some(state) = self.restored.take() {
            // A restart from a checkpoint: `init_transactions` aborted the transaction the
            // predecessor had begun after it.
            transactions.aborted += 1;
            if state.transactional_id != transactions.id {
                return Err(KafkaError::Snapshot(format!(
                    "the state is the sink {:?}'s, but this instance is {:?}",
                    state.transactional_id, transactions.id
                )));
            }
            let done = self.committed_checkpoint(&transactions.marker)?;
            for epoch in state.pending {
                if done.is_some_and(|done| epoch.checkpoint <= done) {
                    continue;
                }
                self.begin()?;
                epoch
                    .records
                    .iter()
                    .try_for_each(|record| self.send(record))?;
                self.commit(&transactions, Some(epoch.checkpoint))?;
                transactions.committed += 1;
            }
        }
        self.begin()?;
        self.transactions = Some(transactions);
        Ok(())
    }
}

impl<T, F, K> Operator for KafkaSink<T, F, K>
where
    T: Tuple,
    F: Format<T>,
    K: Fn(&T) -> Option<Vec<u8>> + Send,
{
    fn start(&mut self, ctx: &OperatorContext) -> Result<(), OperatorError> {
        let id = match &self.config.delivery {
            Delivery::AtLeastOnce => None,
            Delivery::ExactlyOnce { transactional_id } => {
                Some(format!("{transactional_id}-{}", ctx.instance))
            }
        };
        let mut own = vec![
            ("partitioner", "murmur2_random"),
            ("enable.idempotence", "true"),
        ];
        if let Some(id) = &id {
            own.push(("transactional.id", id));
        }
        let producer: BaseProducer<DeliveryReports> =
            client_config(&self.config.brokers, &own, &self.config.settings)
                .create_with_context(DeliveryReports::default())
                .map_err(|e| self.client_error("creating the producer", e))?;
        self.producer = Some(producer);
        if let Some(id) = id {
            // The marker names the topic's partition 0: the topic must be there before the
            // first commit.
            self.wait_for_topic()?;
            self.start_transactions(id)?;
        }
        self.live = Some(live_figures(ctx));
        self.publish();
        Ok(())
    }

    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let tuple = expect_tuple::<T>(port, tuple)?;
        let mut value = Vec::new();
        self.format
            .encode(tuple, &mut value)
            .map_err(|source| KafkaError::Encode {
                topic: self.config.topic.clone(),
                source,
            })?;
        let record = ((self.key)(tuple), value);
        self.records += 1;
        self.bytes += record_bytes(&record) as u64;
        if self.records.is_multiple_of(POLL_EVERY) {
            self.publish();
        }
        match self.transactions.take() {
            None => {
                self.send(&record)?;
                if self.records.is_multiple_of(POLL_EVERY) {
                    self.producer()?.poll(Duration::ZERO);
                    self.check_deliveries()?;
                }
            }
            Some(mut transactions) => {
                let sent = if transactions.closed.is_empty() {
                    self.send(&record)
                } else {
                    Ok(())
                };
                transactions.bytes += record_bytes(&record);
                transactions.open.push(record);
                let bytes = transactions.bytes;
                self.transactions = Some(transactions);
                sent?;
                if bytes > self.config.max_pending_bytes {
                    return Err(KafkaError::PendingOverLimit {
                        bytes,
                        limit: self.config.max_pending_bytes,
                    }
                    .into());
                }
            }
        }
        Ok(())
    }

    fn checkpoint(&mut self, checkpoint: u64) -> Result<CheckpointState, OperatorError> {
        self.flush()?;
        let Some(transactions) = self.transactions.as_mut() else {
            return Ok(Snapshot::default().into());
        };
        let records = std::mem::take(&mut transactions.open);
        transactions.closed.push_back(Epoch {
            checkpoint,
            records,
        });
        Snapshot::whole(&StateRef {
            transactional_id: &transactions.id,
            pending: &transactions.closed,
        })
        .map(CheckpointState::Now)
    }

    fn checkpoint_complete(&mut self, checkpoint: u64) -> Result<(), OperatorError> {
        self.commit_through(checkpoint)?;
        self.publish();
        Ok(())
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        if snapshot.is_empty() {
            return Ok(());
        }
        if self.config.delivery == Delivery::AtLeastOnce {
            return Err(KafkaError::Snapshot(
                "the state is an exactly-once Kafka sink's, but this sink writes at least once"
                    .into(),
            )
            .into());
        }
        self.restored = Some(snapshot.decode_whole()?);
        Ok(())
    }

    fn finish(&mut self, _out: &mut Output<'_>) -> Result<(), OperatorError> {
        self.commit_through(u64::MAX)?;
        let Some(mut transactions) = self.transactions.take() else {
            return Ok(self.flush()?);
        };
        // The open transaction holds the records after the last checkpoint.
        self.commit(&transactions, None)?;
        transactions.committed += 1;
        transactions.open.clear();
        transactions.bytes = 0;
        self.transactions = Some(transactions);
        Ok(())
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        self.publish();
        let mut report = OperatorReport::default();
        report.counters.extend(
            self.figures()
                .into_iter()
                .map(|(name, value)| (name.to_owned(), value)),
        );
        self.producer = None;
        Ok(report)
    }
}
