//! From a logical graph to a physical plan: which instance of which operator runs in which
//! thread of which processing element (PE) on which host, and which transport carries each
//! physical edge.
//!
//! The plan is plain data (serde), so a launcher can hand it to every PE of a job and each PE
//! builds its own part. Planning is a pure function of the graph and the request: the same
//! inputs always give the same plan.
//!
//! Edges inside a thread are `fused` (direct calls), edges between threads of one PE are
//! `threaded` ports, and where an edge crosses PEs the planner inserts a transport: a sender
//! operator fused into the upstream thread and a receiver operator polled by the downstream
//! thread ([`ChannelPlan`]), `shm-vega` between two PEs of one host unless the user pins
//! another. Every PE runs on `localhost` today.
#![forbid(unsafe_code)]

mod auto;
mod check;
mod choice;
pub mod consolidate;
mod file;
pub mod fusion;
mod hosts;
mod placement;
mod plan;
mod planner;
mod render;
pub mod replication;
mod svg;
mod text_file;
pub mod traffic_placement;
mod transports;

pub use auto::{AutoChoice, FUSED_HEADROOM, PORT_HOP_NS, UNDECLARED_NS_PER_TUPLE};
pub use choice::{PlanChoiceError, TomlSyntaxError};
pub use file::{EdgeSpec, PlanFile, ReplicaSpec, ThreadSpec};
pub use hosts::{HostSpec, HostsError, HostsFile, HostsFileError, LauncherSpec};
pub use plan::{
    ChannelPlan, EdgePlan, InstanceId, InstancePlan, PePlan, PhysicalPlan, PortRef, ThreadPlan,
};
pub use planner::{plan, replicated_graph, PlanError, PlanOptions, PlanRequest};
pub use text_file::{read_text_file, MAX_TEXT_FILE_BYTES};
