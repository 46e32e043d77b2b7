//! Sluice's connectors to outside systems, each a module: [`kafka`] (a source and a sink on
//! librdkafka, with exactly-once output through Kafka transactions), and the record
//! [`format`]s they read and write (JSON, CSV, UTF-8 lines, raw bytes).
//!
//! The file, CSV, TCP, UDP and multicast sources and sinks live in `sluice-ops`, beside the
//! operators.

pub mod format;
pub mod kafka;

pub use format::{Csv, Format, FormatError, Json, Lines, OnBadRecord, Raw};
pub use kafka::{
    BadRecord, Delivery, EndAt, KafkaError, KafkaRecord, KafkaSink, KafkaSinkConfig, KafkaSource,
    KafkaSourceConfig, StartFrom,
};
