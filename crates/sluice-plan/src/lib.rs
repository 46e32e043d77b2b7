//! From a logical graph to a physical plan: which instance of which operator runs in which
//! thread of which processing element (PE) on which host, and which transport carries each
//! physical edge.
//!
//! The plan is plain data (serde), so a launcher can hand it to every PE of a job and each PE
//! builds its own part. Planning is a pure function of the graph and the request: the same
//! inputs always give the same plan.
//!
//! Today every plan has one PE on `localhost`; edges inside a thread are `fused` (direct calls)
//! and edges between threads are `threaded` ports. Later the planner inserts sender/receiver
//! operators where edges cross PEs.
#![forbid(unsafe_code)]

mod file;
mod plan;
mod planner;
mod render;

pub use file::{PlanFile, ThreadSpec};
pub use plan::{EdgePlan, InstanceId, InstancePlan, PePlan, PhysicalPlan, PortRef, ThreadPlan};
pub use planner::{plan, PlanError, PlanOptions, PlanRequest};
