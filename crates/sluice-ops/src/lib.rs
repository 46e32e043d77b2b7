//! The standard operators every application reaches for, typed with closures:
//! [`IterSource`] (a source over an iterator), [`Generator`] (tuples made by a closure, paced
//! by a [`Pacer`]), [`Map`], [`Filter`], [`FlatMap`], and the [`Collect`] sink that hands what
//! it received back to the caller. Routing: [`Split`] (to the output port a function picks, or
//! to all of them) and [`Throttle`] (at most a rate, delaying); per key, [`Deduplicate`] drops
//! repeats within a [`Dedup`] window; rolling and windowed aggregates, joins. The fluent
//! [`Dataflow`] offers them all as methods of [`Stream`] and [`KeyedStream`], with the union of
//! several streams. A user's sink becomes exactly once by implementing [`TransactionalSink`]
//! and running as [`ExactlyOnce`].
//!
//! The sources and sinks that meet the outside world (files, CSV, JSON, TCP, UDP, multicast,
//! standard output, Kafka) are connectors, in the `sluice-connectors` crate, which builds on
//! this one: it needs [`TypedSource`] (so the fluent builder knows a connector's stream type),
//! [`SOURCE_BATCH`], [`counter_report`] and [`add_counters`] (how every source reports what it
//! counted), [`Key`]/[`KeyedState`] (the table sink keeps the latest value per key) and
//! [`TransactionalSink`]. Nothing here needs a connector.
//!
//! Each operator reads its one input port as `I` and emits on output port 0.
#![forbid(unsafe_code)]

pub mod aggregate;
mod asof;
mod counters;
mod dataflow;
mod dedup;
mod generate;
mod join;
mod keyed;
mod keyed_stream;
mod pace;
mod rolling;
mod sinks;
mod sources;
mod split;
pub mod text;
mod throttle;
mod transactional;
mod transforms;
mod watermarks;
pub mod window;
mod windowed_stream;

pub use aggregate::{Aggregate, Apply, Count, Max, Mean, Min, Reduce, SortBy, Sum, TopK, Value};
pub use asof::AsOfJoin;
pub use counters::{add_counters, counter_report};
pub use dataflow::{Dataflow, Sink, Stream, TypedSource};
pub use dedup::{Dedup, Deduplicate};
pub use join::{JoinEventTimes, JoinWindow, TableJoin, WindowJoin};
pub use keyed::{Key, KeyedState};
pub use keyed_stream::KeyedStream;
pub use rolling::RollingAggregate;
pub use sluice_types::utc_text;
pub use watermarks::WatermarkAssigner;
pub use window::{LatePolicy, Shape, TimeDomain, WindowOperator, Windowed, Windows};
pub use windowed_stream::WindowedStream;

pub use generate::{Generator, MakeTuples, OfSeq, WithState, PACED_BATCH};
pub use pace::Pacer;
pub use sinks::{collected, Collect, CollectInlet, Collected};
pub use sources::{IterSource, SOURCE_BATCH};
pub use split::Split;
pub use throttle::{Throttle, BURST};
pub use transactional::{ExactlyOnce, TransactionalSink, FINAL_TRANSACTION};
pub use transforms::{Filter, FlatMap, Map};
