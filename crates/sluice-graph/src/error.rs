//! Why a graph was refused. Every message names the operators and ports involved.

use thiserror::Error;

/// A graph that cannot run, and why.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum GraphError {
    /// A placement constraint names no other operator of the graph, or the operator itself.
    #[error(
        "operator '{operator}' is placed {placement}, which is not another operator of the graph"
    )]
    BadPlacement {
        /// The constrained operator.
        operator: String,
        /// The constraint.
        placement: String,
    },
    /// Two operators share a name.
    #[error("two operators are named '{0}'; operator names must be unique")]
    DuplicateName(String),
    /// A name that cannot be used in plans.
    #[error(
        "operator name '{0}' is invalid: use letters, digits, '_' and '-', starting with a letter"
    )]
    InvalidName(String),
    /// A port index beyond the operator's ports.
    #[error("operator '{operator}' has {count} {direction} port(s); port {port} does not exist")]
    NoSuchPort {
        /// The operator.
        operator: String,
        /// "input" or "output".
        direction: &'static str,
        /// The port asked for.
        port: usize,
        /// How many it has.
        count: usize,
    },
    /// Connected ports carry different tuple types.
    #[error("cannot connect {from} ({from_type}) to {to} ({to_type}): the tuple types differ")]
    SchemaMismatch {
        /// The output port, as `operator.out[N]`.
        from: String,
        /// Its tuple type.
        from_type: &'static str,
        /// The input port, as `operator.in[N]`.
        to: String,
        /// Its tuple type.
        to_type: &'static str,
    },
    /// A key function typed for another tuple than the edge carries.
    #[error(
        "the key function on {from} -> {to} reads {key_type} but the stream carries {stream_type}"
    )]
    KeyTypeMismatch {
        /// The output port.
        from: String,
        /// The input port.
        to: String,
        /// What the key function reads.
        key_type: &'static str,
        /// What the stream carries.
        stream_type: &'static str,
    },
    /// The same output port connected twice to the same input port.
    #[error("{from} is connected to {to} twice")]
    DuplicateEdge {
        /// The output port.
        from: String,
        /// The input port.
        to: String,
    },
    /// An input port nothing feeds.
    #[error("input port {port} of operator '{operator}' is not connected")]
    UnconnectedInput {
        /// The operator.
        operator: String,
        /// The port.
        port: usize,
    },
    /// The graph has a cycle.
    #[error("the graph has a cycle through operators {}", .0.join(" -> "))]
    Cycle(Vec<String>),
    /// Parallelism of zero.
    #[error("operator '{0}' has parallelism 0; it must be at least 1")]
    ZeroParallelism(String),
    /// An operator that is not a source but has no input ports would never run.
    #[error("operator '{0}' has no input ports; add it as a source instead")]
    NoInputs(String),
    /// A forward edge into more instances than it comes from would leave some without input.
    #[error("forward edge {from} -> {to} goes from {up} to {down} instances; forward pairs instance i with i mod {down}, so use round-robin, key-by or broadcast to widen")]
    ForwardWidens {
        /// The output port.
        from: String,
        /// The input port.
        to: String,
        /// Upstream parallelism.
        up: usize,
        /// Downstream parallelism.
        down: usize,
    },
    /// An operator's parameters cannot work (a window of 0, a slide longer than its window).
    #[error("operator '{operator}': {reason}")]
    InvalidParameter {
        /// The operator.
        operator: String,
        /// What is wrong with its parameters.
        reason: String,
    },
    /// No sources, so nothing would ever run.
    #[error("the graph has no source operator")]
    NoSource,
    /// A replication names an operator the graph lacks.
    #[error("there is no operator '{name}' to replicate (operators: {known})")]
    NoSuchOperator {
        /// The name given.
        name: String,
        /// The operators there are.
        known: String,
    },
    /// A replication names an operator that did not declare how it may be replicated.
    #[error("operator '{0}' keeps state across its tuples, or did not say it does not, so it cannot be given more instances")]
    NotReplicable(String),
    /// An edge id from another builder.
    #[error("edge {0} does not belong to this graph")]
    UnknownEdge(usize),
    /// A handle from another builder.
    #[error("operator handle {0} does not belong to this graph")]
    UnknownOperator(usize),
    /// A dataflow builder asked for its graph a second time: it hands its graph over once.
    #[error("the graph of '{0}' was built already; a dataflow builds its graph once")]
    AlreadyBuilt(String),
}

/// A job asked to take checkpoints whose sources cannot all replay their input after a
/// failure ([`crate::Graph::check_replayable`]).
#[derive(Debug, Error)]
#[error(
    "{job} cannot take checkpoints (--checkpoint-every): its source(s) '{}' cannot replay \
     their input after a failure (a socket, a pipe, a live feed or a source that keeps no \
     position: Source::resumable); a checkpointed job needs replayable input, such as a \
     file, a generator or a recording",
    sources.join("', '")
)]
pub struct UnreplayableSources {
    /// The job (an application's name, `the query`).
    pub job: String,
    /// The sources, as the message names them.
    pub sources: Vec<String>,
}
