//! Sluice's data plane: runs a PE's part of a physical plan on threads of this process.
//!
//! Each thread of the plan runs its operator instances fused: a tuple emitted by one instance
//! is passed by reference, depth first, to the downstream instances in the same thread by a
//! direct call (System S fusion, the Vega paper's section II.B). Edges between threads go
//! through the transport of their channel: a threaded port inside a PE, and between PEs the
//! sender and receiver the planner inserted (shared memory on one host). A thread's work loop
//! polls its sources and its receivers; a poll reports the work it did and the thread idles by
//! its [`IdleStrategy`](sluice_sync::IdleStrategy) when a round did none.
//!
//! The executor is hand-written because it *is* the fused transport: the cost of a hop between
//! fused operators is the cost of the `exec` module's dispatch, so it avoids allocation,
//! locking and dynamic lookups on the per-tuple path.
//!
//! What this crate does, for whichever PEs a process runs ([`assemble::Scope`]): binds their
//! receivers and opens their senders ([`assemble::bind`], [`assemble::start`]), runs the work
//! loops, watches the threads for stalls and the drain for its deadline
//! ([`watch::wait_threads`]), holds the flags every thread reads (go, stop, suspend, abort:
//! [`control::JobControl`], [`StopHandle`]), keeps the metrics counters ([`metrics`]), the
//! event-time clock and timers, the suspended state ([`JobState`]) and the report
//! ([`JobReport`]). It knows nothing of processes: launching PEs, the control link to them,
//! heartbeats and supervision are the control plane's (`sluice-runtime`), which depends on this
//! crate and never the other way. Programs use `sluice-runtime`'s `run` and `start`, which
//! re-export this crate's public types.
//!
//! Stopping: a finite source ends its stream, end-of-stream flows downstream, and a thread
//! ends when all its instances have finished. [`StopHandle::stop`] makes every source finish
//! early, so every tuple already emitted is still processed (a drain), within
//! [`RunOptions::drain_timeout`]. [`StopHandle::suspend`] drains the same way but keeps every
//! source's position and every instance's state ([`JobReport::state`]) instead of finishing.
//! A failed or panicking operator aborts the job: every thread leaves its loop, blocked senders
//! give up, and the error is the root cause ([`RunError`]). A thread stuck in an operator's
//! call fails the job within [`RunOptions::stall_timeout`] ([`watch`]).
#![forbid(unsafe_code)]

pub mod assemble;
pub mod checkpoint;
mod clock;
pub mod control;
pub mod error;
mod exec;
pub mod metrics;
mod options;
mod report;
mod scheduler;
mod state;
pub mod watch;

pub use control::StopHandle;
pub use error::RunError;
pub use metrics::{MetricsHandle, MetricsSnapshot};
pub use options::{
    CheckpointOptions, Launcher, RunOptions, DEFAULT_ALIGN_LIMIT, DEFAULT_CHECKPOINTS_RETAINED,
    DEFAULT_CHECKPOINT_TIMEOUT, DEFAULT_COLLECT_LIMIT, DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_LATENCY_EVERY, DEFAULT_RESTARTS, DEFAULT_RESTART_DELAY, DEFAULT_STALL_TIMEOUT,
    DEFAULT_START_TIMEOUT,
};
pub use report::{CheckpointSummary, InstanceReport, JobReport, Restart, LOST_TUPLES_COUNTER};
pub use state::{
    operator_of, part_for_pe, size_text, Counted, InFlightTuples, InstanceState, JobState,
};
