//! The second layer: the transport benchmarks (`sluice bench throughput`, `latency` and
//! `baseline`), each measuring Sluice's transport beside a hand-written baseline run alongside.
//! They stand on the foundation only; the layers above (the application benchmarks, the
//! suite, the command line) call them.
//!
//! - `engine`: the Sluice side in process, a `source -> sink` graph fused or threaded;
//!   `baseline`: its direct-call and crossbeam-channel baselines.
//! - `processes`: the benchmarks across two processes (shm-vega, and the receiving process of
//!   every cross-process benchmark), with `network` (tcp, against raw TCP), `udp` (udp-mq,
//!   against raw UDP), `shm_osr` (many senders into an OSR ring), `reflect` (latency as half
//!   the round trip through a reflector) and `mpi` (two ranks of mpirun).
//! - `hardware`: the machine's own limits, `sluice bench baseline` and the shared-memory
//!   baselines.
//! - `measure`: one benchmark from its settings to its result.

pub(crate) mod baseline;
pub(crate) mod engine;
pub(crate) mod hardware;
pub(crate) mod measure;
pub(crate) mod mpi;
pub(crate) mod network;
pub(crate) mod processes;
pub(crate) mod reflect;
pub(crate) mod shm_osr;
pub(crate) mod udp;
