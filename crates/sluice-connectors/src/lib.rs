//! Sluice's connectors to outside systems, one module each:
//! - [`text_file`]: [`TextFileSource`], the lines of a text file;
//! - [`csv_file`]: [`CsvSource`], the records of a CSV file into a serde type, and [`CsvSink`];
//! - [`tcp`]: [`TcpSource`], lines or length-prefixed frames from TCP connections it accepts
//!   or makes ([`net`] says where a network source or sink meets its peer);
//! - [`udp`]: [`UdpSource`] and [`UdpSink`], one datagram a tuple;
//! - [`multicast`]: [`MulticastSource`], a UDP multicast feed received in batches;
//! - [`stream_sink`]: [`StreamSink`], tuples as lines, length-prefixed frames or CSV records
//!   written to a file, standard output or a TCP connection ([`ByteTarget`]);
//! - [`table_file`]: [`TableSink`], the latest value of every key, written at the end;
//! - [`json_file`]: [`JsonFileSource`], the JSON lines of a file into a serde type, and
//!   [`JsonSink`];
//! - [`kafka`]: a source and a sink on librdkafka, with exactly-once output through Kafka
//!   transactions.
//!
//! The wire formats of byte streams are in [`framing`], the record formats (JSON, CSV, UTF-8
//! lines, raw bytes) in [`format`]. Each connector opens its file or socket when the job
//! starts, so what cannot be opened fails the job with the operator's name and the path or
//! address, and each counts what it refused (a malformed record, an oversized frame) in its
//! report instead of failing.
//!
//! Through a job's checkpoints and recoveries, the file sinks are exactly once (their output
//! after any failure is that of a run without one: see [`staged_output`]); standard output,
//! TCP and UDP are at least once (what was sent after the checkpoint recovered from is sent
//! again); Kafka is either, as configured.
//!
//! [`fluent`] offers them in one call each on the fluent API (`flow.read_text(path)`,
//! `stream.write_json(path)`, ...): `use sluice_connectors::prelude::*`.
//!
//! The [`registry`] resolves an address (`in.txt`, `tcp://HOST:PORT`, `kafka://HOST:PORT/TOPIC`)
//! to its connector: what the applications' `--input` and `--output` take.
//!
//! This crate sits above `sluice-ops`: connectors are sources and sinks of the operators'
//! graph and builder, and the operators need no connector.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use sluice_connectors::{ByteTarget, StreamSink, TcpEndpoint, TextFileSource};
//! use sluice_graph::{GraphBuilder, Ports};
//!
//! // Every line of a file, sent to a server one line at a time.
//! let server = "127.0.0.1:9000".parse()?;
//! let mut g = GraphBuilder::new("ship-lines");
//! let lines = g.source("lines", Ports::new().output::<String>(), |_| {
//!     TextFileSource::new("in.txt")
//! });
//! let send = g.operator("send", Ports::new().input::<String>(), move |_| {
//!     StreamSink::<String, _>::lines(ByteTarget::Tcp(TcpEndpoint::connect(server)))
//! });
//! g.connect(lines.out(0), send.input(0))?;
//! let graph = g.build()?;
//! # let _ = graph;
//! # Ok(())
//! # }
//! ```

pub mod csv_file;
pub mod fluent;
pub mod format;
pub mod framing;
pub mod json_file;
pub mod kafka;
pub mod multicast;
pub mod net;
mod output_file;
pub mod registry;
pub mod staged_output;
pub mod stream_sink;
pub mod table_file;
pub mod tcp;
pub mod text_file;
pub mod udp;

pub use csv_file::{CsvEncoder, CsvFormat, CsvSink, CsvSource, MalformedRecords};
pub use fluent::{FlowIo, StreamIo};
pub use format::{Csv, Format, FormatError, Json, Lines, OnBadRecord, Raw};
pub use framing::{LengthDecoder, LengthEncoder, LineDecoder, LineEncoder, DEFAULT_MAX_FRAME};
pub use json_file::{BadLine, JsonEncoder, JsonFileSource, JsonSink};
pub use kafka::{
    BadRecord, Delivery, EndAt, KafkaError, KafkaRecord, KafkaSink, KafkaSinkConfig, KafkaSource,
    KafkaSourceConfig, StartFrom, FETCH_QUEUE_BACKOFF,
};
pub use multicast::{BytesDecoder, FeedCounters, MulticastConfig, MulticastSource, SEQUENCE_BYTES};
pub use net::{OnBound, TcpConnect, TcpEndpoint, TcpListen, DEFAULT_ACCEPT_TIMEOUT};
pub use output_file::{same_file, OutputFile};
pub use registry::{resolve, AddressError, Connector, Target, CONNECTORS};
pub use stream_sink::{ByteTarget, StreamSink, TupleEncoder, FLUSH_BYTES};
pub use table_file::TableSink;
pub use tcp::TcpSource;
pub use text_file::{LineFile, TextFileSource};
pub use udp::{UdpSink, UdpSource};

/// What a program built on the fluent API imports: the builder and its streams, the common
/// sources and window specifications of `sluice-ops`, and the one-call I/O of the
/// connectors ([`FlowIo`], [`StreamIo`]) with what their calls take.
pub mod prelude {
    pub use sluice_ops::{
        collected, text, Collected, Dataflow, Dedup, Generator, IterSource, JoinWindow,
        KeyedStream, LatePolicy, Sink, Stream, Windowed, WindowedStream, Windows,
    };

    pub use crate::{
        BadLine, Csv, CsvFormat, Delivery, FlowIo, Json, KafkaRecord, KafkaSinkConfig,
        KafkaSourceConfig, Lines, OnBadRecord, Raw, StreamIo, TcpEndpoint,
    };
}
