//! The second layer: the transport benchmarks (`sluice bench throughput`, `latency` and
//! `baseline`), each measuring Sluice's transport beside a hand-written baseline run alongside.
//! They stand on the foundation only; the layers above (the application benchmarks, the
//! suite, the command line) call them.
//!
//! - `engine`: the Sluice side in process, a `source -> sink` graph fused or threaded;
//!   `baseline`: its direct-call and crossbeam-channel baselines.
//! - `endpoints`: the two ends of every benchmark across processes (the receiving process
//!   started and read back, pinning, the sending and recording loops); `network` (tcp, against
//!   raw TCP) and `udp` (udp-mq, against raw UDP) on it, `shm_osr` (many senders into an OSR
//!   ring), `reflect` (latency as half the round trip through a reflector) and `mpi` (two
//!   ranks of mpirun) on those, and `processes` (shm-vega, the receiving process's entry, and
//!   the choice among them all) on top.
//! - `hardware`: the machine's own limits, `sluice bench baseline` and the shared-memory
//!   baselines.
//! - `measure`: one benchmark from its settings to its result.
//!
//! Within the layer too no two modules use each other (`tests/layers.rs`).

pub(crate) mod baseline;
pub(crate) mod endpoints;
pub(crate) mod engine;
pub(crate) mod hardware;
pub(crate) mod measure;
pub(crate) mod mpi;
pub(crate) mod network;
pub(crate) mod processes;
pub(crate) mod reflect;
pub(crate) mod shm_osr;
pub(crate) mod udp;
