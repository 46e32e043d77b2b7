//! The logical graph of a streaming application and the API its operators implement.
//!
//! A program (through `sluice-ops`' fluent builder) or the SCSQL compiler (`sluice-query`)
//! builds a [`Graph`] with a [`GraphBuilder`]: sources and operators with typed input and
//! output ports, connected by edges that say how tuples are partitioned among the downstream
//! operator's parallel instances. [`GraphBuilder::build`]
//! validates the whole graph. The graph knows nothing of threads or processes: the planner
//! (`sluice-plan`) decides those, and the runtime (`sluice-runtime`) executes them.
#![forbid(unsafe_code)]

mod builder;
mod dot;
mod error;
pub mod live;
mod operator;
mod partitioning;
mod placement;
mod returned;
mod snapshot;

pub use builder::{
    DeclaredCost, EdgeDef, EdgeId, Graph, GraphBuilder, InPort, OperatorDef, OperatorHandle,
    OperatorId, OperatorKind, OutPort, Ports,
};
pub use error::{GraphError, UnreplayableSources};
pub use operator::{
    expect_tuple, latency_histogram, LatencyHistogram, Operator, OperatorContext, OperatorError,
    OperatorReport, Output, OutputSink, OwnedBatch, OwnedTuple, Produced, Source, Timer,
};
pub use partitioning::{KeyFn, Partitioning};
pub use placement::Placement;
pub use returned::{
    install_result_outlet, result_outlet, ResultInlet, ResultOutlet, MAX_RESULT_TUPLE_BYTES,
    RESULT_BATCH_BYTES,
};
pub use snapshot::{
    histogram_from_pairs, histogram_pairs, CheckpointState, KeyedEntries, KeyedEntry,
    LaterSnapshot, Snapshot,
};
