//! The standard operators every application reaches for, typed with closures:
//! [`IterSource`] (a source over an iterator), [`Map`], [`Filter`], [`FlatMap`], and the
//! [`Collect`] sink that hands what it received back to the caller, and [`MulticastSource`],
//! which receives a UDP multicast feed in batches.
//!
//! Each operator reads its one input port as `I` and emits on output port 0.
#![forbid(unsafe_code)]

pub mod aggregate;
mod dataflow;
mod generate;
mod join;
mod keyed;
mod multicast;
mod pace;
mod rolling;
mod sinks;
mod sources;
pub mod text;
mod transforms;
mod watermarks;
pub mod window;

pub use aggregate::{Aggregate, Apply, Count, Max, Mean, Min, Reduce, SortBy, Sum, TopK, Value};
pub use dataflow::{Dataflow, KeyedStream, Sink, Stream, TypedSource, WindowedStream};
pub use join::{JoinWindow, TableJoin, WindowJoin};
pub use keyed::{Key, KeyedState};
pub use rolling::{RollingAggregate, TableSink};
pub use watermarks::WatermarkAssigner;
pub use window::{LatePolicy, Shape, TimeDomain, WindowOperator, Windowed, Windows};

pub use generate::{Generator, PACED_BATCH};
pub use multicast::{BytesDecoder, FeedCounters, MulticastConfig, MulticastSource, SEQUENCE_BYTES};
pub use pace::Pacer;
pub use sinks::{Collect, Collected};
pub use sources::IterSource;
pub use transforms::{Filter, FlatMap, Map};
