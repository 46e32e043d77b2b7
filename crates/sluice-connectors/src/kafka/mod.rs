//! Kafka: a [`KafkaSource`] that reads a topic's partitions with the offsets kept in Sluice's
//! checkpoints, and a [`KafkaSink`] that writes at least once or exactly once (one Kafka
//! transaction per checkpoint), both on librdkafka through the `rdkafka` crate.
//!
//! Client settings (`bootstrap.servers` aside) are librdkafka's, passed through as given
//! (`--set kafka.KEY=VALUE` on the command line).

mod sink;
mod source;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sluice_graph::OperatorError;
use sluice_types::{DecodeError, EncodeError, Encoding, Tuple};
use thiserror::Error;

use crate::FormatError;

pub use sink::{Delivery, KafkaSink, KafkaSinkConfig};
pub use source::{EndAt, KafkaSource, KafkaSourceConfig, StartFrom, FETCH_QUEUE_BACKOFF};

/// How long a request to the brokers (metadata, offsets, a transaction's commit) may take
/// before the connector gives up and fails, unless its configuration says otherwise.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// One Kafka record, as the source emits it: the value decoded by the source's format, the
/// rest as Kafka holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KafkaRecord<V> {
    /// The record's key, if it has one.
    pub key: Option<Vec<u8>>,
    /// The record's value, decoded.
    pub value: V,
    /// The record's headers, in order: name and value (a header may have no value).
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// The topic it was read from.
    pub topic: String,
    /// Its partition.
    pub partition: i32,
    /// Its offset in the partition.
    pub offset: i64,
    /// Its timestamp (create or log-append time), in milliseconds since the Unix epoch, if
    /// it has one.
    pub timestamp: Option<i64>,
}

impl<V> KafkaRecord<V> {
    /// The record's event time in nanoseconds since the Unix epoch (0 without a timestamp),
    /// the unit of Sluice's watermarks and windows.
    pub fn event_time_ns(&self) -> u64 {
        timestamp_ns(self.timestamp)
    }
}

/// A Kafka timestamp (milliseconds) in nanoseconds; none, or one before 1970, is 0.
fn timestamp_ns(timestamp_ms: Option<i64>) -> u64 {
    timestamp_ms
        .and_then(|ms| u64::try_from(ms).ok())
        .map_or(0, |ms| ms.saturating_mul(1_000_000))
}

impl<V> Tuple for KafkaRecord<V>
where
    V: Serialize + DeserializeOwned + Clone + Send + 'static,
{
    const ENCODING: Encoding = Encoding::Normal;

    fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        sluice_types::tuple_codec::encode_normal(self, out)
    }

    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        sluice_types::tuple_codec::decode_normal(bytes)
    }
}

/// A record whose value did not decode, as the source emits it on its side output (port 1)
/// under [`OnBadRecord::SideOutput`](crate::OnBadRecord::SideOutput).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BadRecord {
    /// Where it is: topic, partition, offset.
    pub topic: String,
    /// Its partition.
    pub partition: i32,
    /// Its offset in the partition.
    pub offset: i64,
    /// Its key, if it has one.
    pub key: Option<Vec<u8>>,
    /// Its value's bytes (empty if it has no value).
    pub value: Vec<u8>,
    /// Why it did not decode.
    pub error: String,
}

sluice_types::normal_tuple!(BadRecord);

/// Why a Kafka connector failed.
#[derive(Debug, Error)]
pub enum KafkaError {
    /// A call to librdkafka failed.
    #[error("Kafka at {brokers}: {what}: {source}")]
    Client {
        /// The brokers (`bootstrap.servers`).
        brokers: String,
        /// What was being done.
        what: String,
        /// librdkafka's error.
        source: Box<rdkafka::error::KafkaError>,
    },
    /// The topic does not exist (or has no partitions).
    #[error("Kafka at {brokers}: topic {topic:?} does not exist{detail}")]
    NoSuchTopic {
        /// The brokers.
        brokers: String,
        /// The topic.
        topic: String,
        /// What the broker said, if anything.
        detail: String,
    },
    /// No broker answered for the whole request timeout while the connector ran.
    #[error(
        "Kafka at {brokers}: no broker answered for {waited:?} (the connector's request_timeout): \
         the brokers are gone"
    )]
    Unreachable {
        /// The brokers.
        brokers: String,
        /// How long the connector went on trying.
        waited: Duration,
    },
    /// A record's value did not decode and the source is set to fail on bad records.
    #[error(
        "record at topic {topic:?} partition {partition} offset {offset} does not decode: {source}"
    )]
    BadRecord {
        /// Its topic.
        topic: String,
        /// Its partition.
        partition: i32,
        /// Its offset.
        offset: i64,
        /// Why.
        source: FormatError,
    },
    /// A tuple did not encode.
    #[error("a tuple for topic {topic:?} does not encode: {source}")]
    Encode {
        /// The topic.
        topic: String,
        /// Why.
        source: FormatError,
    },
    /// A record was not delivered.
    #[error("Kafka at {brokers}: a record for topic {topic:?} was not delivered: {reason}")]
    Delivery {
        /// The brokers.
        brokers: String,
        /// The topic.
        topic: String,
        /// librdkafka's reason.
        reason: String,
    },
    /// The exactly-once sink holds more bytes of uncommitted records than its limit.
    #[error(
        "the exactly-once Kafka sink holds {bytes} bytes of records not yet committed, over its \
         limit of {limit} bytes (KafkaSinkConfig::max_pending_bytes): checkpoints complete too \
         rarely for this rate"
    )]
    PendingOverLimit {
        /// What it holds.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// A snapshot given to `restore` is not this connector's.
    #[error("{0}")]
    Snapshot(String),
}

impl KafkaError {
    /// A failed call to librdkafka while doing `what` with the brokers `brokers`.
    fn client(brokers: &str, what: impl Into<String>, source: rdkafka::error::KafkaError) -> Self {
        Self::Client {
            brokers: brokers.to_owned(),
            what: what.into(),
            source: Box::new(source),
        }
    }
}

impl From<KafkaError> for OperatorError {
    fn from(e: KafkaError) -> Self {
        OperatorError::Failed(e.to_string())
    }
}

/// A run summary's line for a Kafka source's report `counters` (summed over its instances):
/// records and bytes read, bad records, and the lag left, in all and per partition.
pub fn source_summary(counters: &BTreeMap<String, u64>) -> String {
    source_line(counters, "lag at the end")
}

/// The same line for a running source's live figures ([`sluice_graph::live`], named as its
/// counters), as `sluice top` shows them: the lag is the latest the source measured.
pub fn source_live(figures: &BTreeMap<String, u64>) -> String {
    source_line(figures, "lag")
}

/// A Kafka source's line of `counters`, its lag called `lag`.
fn source_line(counters: &BTreeMap<String, u64>, lag: &str) -> String {
    let get = |name: &str| counters.get(name).copied().unwrap_or(0);
    let lags: Vec<(&str, u64)> = counters
        .iter()
        .filter_map(|(name, lag)| Some((name.strip_prefix("lag.partition.")?, *lag)))
        .collect();
    let per_partition: Vec<String> = lags.iter().map(|(p, lag)| format!("{p}: {lag}")).collect();
    format!(
        "kafka in: {} records, {} bytes, {} bad; {lag} {} records (by partition {})",
        get("records_in"),
        get("bytes_in"),
        get("bad_records"),
        lags.iter().map(|(_, lag)| lag).sum::<u64>(),
        per_partition.join(", ")
    )
}

/// A run summary's line for a Kafka sink's report `counters` (summed over its instances):
/// records and bytes written, and transactions committed and aborted if it wrote exactly once.
pub fn sink_summary(counters: &BTreeMap<String, u64>) -> String {
    let get = |name: &str| counters.get(name).copied().unwrap_or(0);
    let mut line = format!(
        "kafka out: {} records, {} bytes",
        get("records_out"),
        get("bytes_out")
    );
    if counters.contains_key("transactions_committed") {
        line += &format!(
            "; transactions {} committed, {} aborted",
            get("transactions_committed"),
            get("transactions_aborted")
        );
    }
    line
}

/// The client configuration shared by the source and the sink: the brokers, then the user's
/// settings, which override the connector's own.
fn client_config(
    brokers: &str,
    own: &[(&str, &str)],
    user: &[(String, String)],
) -> rdkafka::ClientConfig {
    let mut config = rdkafka::ClientConfig::new();
    config.set("bootstrap.servers", brokers);
    for (key, value) in own {
        config.set(*key, *value);
    }
    for (key, value) in user {
        config.set(key, value);
    }
    config
}
