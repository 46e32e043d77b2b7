//! The standard operators every application reaches for, typed with closures:
//! [`IterSource`] (a source over an iterator), [`Map`], [`Filter`], [`FlatMap`], and the
//! [`Collect`] sink that hands what it received back to the caller, and [`MulticastSource`],
//! which receives a UDP multicast feed in batches. Routing: [`Split`] (to the output port a
//! function picks, or to all of them) and [`Throttle`] (at most a rate, delaying); per key,
//! [`Deduplicate`] drops repeats within a [`Dedup`] window. The fluent [`Dataflow`] offers them
//! all as methods of [`Stream`] and [`KeyedStream`], with the union of several streams.
//!
//! The sources and sinks that meet the outside world:
//! - [`TextFileSource`]: the lines of a text file;
//! - [`CsvSource`]: the records of a CSV file, into a serde type;
//! - [`Generator`]: a closure of the sequence number, as fast as possible or paced by a
//!   [`Pacer`];
//! - [`TcpSource`]: lines or length-prefixed frames from TCP connections it accepts or makes;
//! - [`StreamSink`]: tuples as lines, length-prefixed frames or CSV records ([`CsvSink`]),
//!   written to a file, standard output or a TCP connection ([`ByteTarget`]);
//! - [`UdpSource`] and [`UdpSink`]: one datagram a tuple.
//!
//! Through a job's checkpoints and recoveries, the file sinks are exactly once (their output
//! after any failure is that of a run without one: see [`staged_output`]); standard output,
//! TCP and UDP are at least once (what was sent after the checkpoint recovered from is sent
//! again). A user's sink becomes exactly once by implementing [`TransactionalSink`] and running
//! as [`ExactlyOnce`].
//!
//! The wire formats they read and write are in [`framing`]. Each opens its file or socket when
//! the job starts, so what cannot be opened fails the job with the operator's name and the
//! path or address, and each counts what it refused (a malformed record, an oversized frame)
//! in its report instead of failing.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use sluice_graph::{GraphBuilder, Ports};
//! use sluice_ops::{ByteTarget, StreamSink, TcpEndpoint, TextFileSource};
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
//!
//! Each operator reads its one input port as `I` and emits on output port 0.
#![forbid(unsafe_code)]

pub mod aggregate;
mod asof;
mod counters;
mod csv_io;
mod dataflow;
mod dedup;
mod files;
pub mod framing;
mod generate;
mod join;
mod keyed;
mod multicast;
mod net;
mod output_file;
mod pace;
mod rolling;
mod sinks;
mod sources;
mod split;
pub mod staged_output;
mod stream_sink;
mod tcp;
pub mod text;
mod throttle;
mod transactional;
mod transforms;
mod udp;
mod watermarks;
pub mod window;

pub use aggregate::{Aggregate, Apply, Count, Max, Mean, Min, Reduce, SortBy, Sum, TopK, Value};
pub use asof::AsOfJoin;
pub use counters::counter_report;
pub use dataflow::{Dataflow, KeyedStream, Sink, Stream, TypedSource, WindowedStream};
pub use dedup::{Dedup, Deduplicate};
pub use join::{JoinEventTimes, JoinWindow, TableJoin, WindowJoin};
pub use keyed::{Key, KeyedState};
pub use rolling::{RollingAggregate, TableSink};
pub use sluice_types::utc_text;
pub use watermarks::WatermarkAssigner;
pub use window::{LatePolicy, Shape, TimeDomain, WindowOperator, Windowed, Windows};

pub use csv_io::{CsvEncoder, CsvFormat, CsvSink, CsvSource, MalformedRecords};
pub use files::TextFileSource;
pub use framing::{LengthDecoder, LengthEncoder, LineDecoder, LineEncoder, DEFAULT_MAX_FRAME};
pub use generate::{Generator, MakeTuples, OfSeq, WithState, PACED_BATCH};
pub use multicast::{BytesDecoder, FeedCounters, MulticastConfig, MulticastSource, SEQUENCE_BYTES};
pub use net::{OnBound, TcpConnect, TcpEndpoint, TcpListen, DEFAULT_ACCEPT_TIMEOUT};
pub use output_file::{same_file, OutputFile};
pub use pace::Pacer;
pub use sinks::{collected, Collect, Collected};
pub use sources::{IterSource, SOURCE_BATCH};
pub use split::Split;
pub use stream_sink::{ByteTarget, StreamSink, TupleEncoder, FLUSH_BYTES};
pub use tcp::TcpSource;
pub use throttle::{Throttle, BURST};
pub use transactional::{ExactlyOnce, TransactionalSink, FINAL_TRANSACTION};
pub use transforms::{Filter, FlatMap, Map};
pub use udp::{UdpSink, UdpSource};
