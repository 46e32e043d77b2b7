//! I/O in one call on the fluent API: [`FlowIo`] adds the sources to
//! [`Dataflow`](sluice_ops::Dataflow) (`flow.read_text(name, path)`, `read_csv`, `read_json`,
//! `read_tcp`, `read_kafka`) and [`StreamIo`] the sinks to [`Stream`]
//! (`stream.write_text(name, path)`, `write_csv`, `write_json`, `write_tcp`, `write_kafka`), as
//! Flink's `fromSource`/`sinkTo` read. They are extension traits because the connectors
//! build on the operators, not the other way round; `use sluice_connectors::prelude::*`
//! brings them in with the builder.
//!
//! Each call adds one operator, named by its first argument as every operator of the builder
//! is (plans, plan files and reports name it). A file or socket that cannot be opened fails
//! the job when it starts, naming the operator and the path or address.
//!
//! ```
//! use sluice_connectors::prelude::*;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let (input, output) = (dir.path().join("in.txt"), dir.path().join("out.txt"));
//! std::fs::write(&input, "a b\nb\n").unwrap();
//! let flow = Dataflow::new("upper");
//! flow.read_text("lines", &input)
//!     .map("upper", |line: &String| line.to_uppercase())
//!     .write_text("out", &output);
//! let graph = flow.build().unwrap();
//! let plan = sluice_plan::plan(&graph, &sluice_plan::PlanRequest::Fused, &Default::default());
//! sluice_runtime::run(&graph, &plan.unwrap(), &Default::default()).unwrap();
//! assert_eq!(std::fs::read_to_string(&output).unwrap(), "A B\nB\n");
//! ```

use std::fmt::Display;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;
use sluice_graph::Ports;
use sluice_ops::{Dataflow, Sink, Stream};
use sluice_types::Tuple;

use crate::csv_file::{CsvFormat, CsvSink, CsvSource};
use crate::format::{Format, OnBadRecord};
use crate::json_file::{BadLine, JsonFileSource, JsonSink};
use crate::kafka::{KafkaRecord, KafkaSink, KafkaSinkConfig, KafkaSource, KafkaSourceConfig};
use crate::net::TcpEndpoint;
use crate::stream_sink::{ByteTarget, StreamSink};
use crate::tcp::TcpSource;
use crate::text_file::TextFileSource;

/// The sources of the connectors, as methods of [`Dataflow`] (see the module doc).
pub trait FlowIo {
    /// The lines of the text file at `path` ([`TextFileSource`]).
    fn read_text(&self, name: &str, path: impl AsRef<Path>) -> Stream<String>;

    /// The records of the CSV file at `path`, a header row first, each into a `T`; a record
    /// that does not deserialize is counted and skipped ([`CsvSource`]).
    fn read_csv<T: Tuple + DeserializeOwned>(
        &self,
        name: &str,
        path: impl AsRef<Path>,
    ) -> Stream<T>;

    /// The JSON lines of the file at `path`, each into a `T`; a line that does not decode is
    /// counted (`bad_records`) and dropped ([`JsonFileSource`]).
    fn read_json<T: Tuple + DeserializeOwned>(
        &self,
        name: &str,
        path: impl AsRef<Path>,
    ) -> Stream<T> {
        self.read_json_with(name, path, OnBadRecord::Drop).0
    }

    /// As [`FlowIo::read_json`], a line that does not decode handled as `on_bad` says; the
    /// second stream holds them under [`OnBadRecord::SideOutput`] (and is empty otherwise).
    fn read_json_with<T: Tuple + DeserializeOwned>(
        &self,
        name: &str,
        path: impl AsRef<Path>,
        on_bad: OnBadRecord,
    ) -> (Stream<T>, Stream<BadLine>);

    /// The lines of the TCP connections `endpoint` accepts or makes ([`TcpSource::lines`]).
    fn read_tcp(&self, name: &str, endpoint: TcpEndpoint) -> Stream<String>;

    /// The records of a Kafka topic as `config` says, values decoded by `format`
    /// ([`KafkaSource`]).
    fn read_kafka<V, F>(
        &self,
        name: &str,
        config: KafkaSourceConfig,
        format: F,
    ) -> Stream<KafkaRecord<V>>
    where
        V: Serialize + DeserializeOwned + Clone + Send + 'static,
        F: Format<V> + Clone + Sync + 'static;
}

impl FlowIo for Dataflow {
    fn read_text(&self, name: &str, path: impl AsRef<Path>) -> Stream<String> {
        let path = path.as_ref().to_path_buf();
        self.source(name, move |_| TextFileSource::new(path.clone()))
    }

    fn read_csv<T: Tuple + DeserializeOwned>(
        &self,
        name: &str,
        path: impl AsRef<Path>,
    ) -> Stream<T> {
        let path = path.as_ref().to_path_buf();
        self.source(name, move |_| {
            CsvSource::<T>::new(path.clone(), CsvFormat::default())
        })
    }

    fn read_json_with<T: Tuple + DeserializeOwned>(
        &self,
        name: &str,
        path: impl AsRef<Path>,
        on_bad: OnBadRecord,
    ) -> (Stream<T>, Stream<BadLine>) {
        let path = path.as_ref().to_path_buf();
        let ports = Ports::new().output::<T>().output::<BadLine>();
        let op = self.source_with_ports(name, ports, move |_| {
            JsonFileSource::<T>::new(path.clone()).on_bad_record(on_bad)
        });
        (self.stream(op, 0), self.stream(op, 1))
    }

    fn read_tcp(&self, name: &str, endpoint: TcpEndpoint) -> Stream<String> {
        self.source(name, move |_| TcpSource::lines(endpoint.clone()))
    }

    fn read_kafka<V, F>(
        &self,
        name: &str,
        config: KafkaSourceConfig,
        format: F,
    ) -> Stream<KafkaRecord<V>>
    where
        V: Serialize + DeserializeOwned + Clone + Send + 'static,
        F: Format<V> + Clone + Sync + 'static,
    {
        self.source(name, move |_| {
            KafkaSource::new(config.clone(), format.clone())
        })
    }
}

/// The sinks of the connectors, as methods of [`Stream`] (see the module doc).
pub trait StreamIo<T: Tuple> {
    /// Writes each tuple's `Display` as a line of the file at `path`, exactly once through
    /// checkpoints ([`StreamSink::lines`] to a [`ByteTarget::File`]).
    fn write_text(&self, name: &str, path: impl AsRef<Path>) -> Sink
    where
        T: Display;

    /// Writes each tuple as a CSV record of the file at `path`, a header row first
    /// ([`CsvSink`]).
    fn write_csv(&self, name: &str, path: impl AsRef<Path>) -> Sink
    where
        T: Serialize;

    /// Writes each tuple as a JSON line of the file at `path` ([`JsonSink`]).
    fn write_json(&self, name: &str, path: impl AsRef<Path>) -> Sink
    where
        T: Serialize + DeserializeOwned;

    /// Writes each tuple's `Display` as a line to the TCP connection `endpoint` accepts or
    /// makes.
    fn write_tcp(&self, name: &str, endpoint: TcpEndpoint) -> Sink
    where
        T: Display;

    /// Writes each tuple to Kafka as `config` says, encoded by `format`, keyed by `key`
    /// ([`KafkaSink`]).
    fn write_kafka<F, K>(&self, name: &str, config: KafkaSinkConfig, format: F, key: K) -> Sink
    where
        F: Format<T> + Clone + Sync + 'static,
        K: Fn(&T) -> Option<Vec<u8>> + Clone + Send + Sync + 'static;
}

impl<T: Tuple> StreamIo<T> for Stream<T> {
    fn write_text(&self, name: &str, path: impl AsRef<Path>) -> Sink
    where
        T: Display,
    {
        let path = path.as_ref().to_path_buf();
        self.sink(name, move |_| {
            StreamSink::<T, _>::lines(ByteTarget::File(path.clone()))
        })
    }

    fn write_csv(&self, name: &str, path: impl AsRef<Path>) -> Sink
    where
        T: Serialize,
    {
        let path = path.as_ref().to_path_buf();
        self.sink(name, move |_| {
            CsvSink::<T>::csv(ByteTarget::File(path.clone()), CsvFormat::default())
        })
    }

    fn write_json(&self, name: &str, path: impl AsRef<Path>) -> Sink
    where
        T: Serialize + DeserializeOwned,
    {
        let path = path.as_ref().to_path_buf();
        self.sink(name, move |_| {
            JsonSink::<T>::json(ByteTarget::File(path.clone()))
        })
    }

    fn write_tcp(&self, name: &str, endpoint: TcpEndpoint) -> Sink
    where
        T: Display,
    {
        self.sink(name, move |_| {
            StreamSink::<T, _>::lines(ByteTarget::Tcp(endpoint.clone()))
        })
    }

    fn write_kafka<F, K>(&self, name: &str, config: KafkaSinkConfig, format: F, key: K) -> Sink
    where
        F: Format<T> + Clone + Sync + 'static,
        K: Fn(&T) -> Option<Vec<u8>> + Clone + Send + Sync + 'static,
    {
        self.sink(name, move |_| {
            KafkaSink::new(config.clone(), format.clone(), key.clone())
        })
    }
}
