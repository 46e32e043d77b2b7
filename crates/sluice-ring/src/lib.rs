//! The queues on Sluice's hot path, written by hand because moving a tuple between two cores
//! is the cost the whole engine is judged by.
//!
//! - [`copy`]: copying a tuple's bytes into or out of a slot, around `memcpy`'s 4K-aliasing
//!   slow case.
//! - [`memory`]: where a ring's bytes live (heap or a shared segment), the [`memory::RingMemory`]
//!   trait every byte ring is generic over.
//! - [`osr`]: the OSR ring, many producers (threads or processes) and one consumer on one
//!   byte ring, with TurboStream's sliding window so a producer dying mid-write costs only
//!   its own record.
//! - [`spsc`]: a bounded single-producer single-consumer queue of Rust values, the in-process
//!   *threaded port* between two threads.
//! - [`vega`]: the Vega ring, a single-producer single-consumer queue of fixed-size byte slots
//!   laid out entirely in a [`memory::RingMemory`], for the shared-memory transport between
//!   processes.
//!
//! Every structure here is checked three ways: `loom` models (`RUSTFLAGS="--cfg loom"
//! cargo test -p sluice-ring --test loom`), `proptest` against a `VecDeque` model, and Miri.

pub mod copy;
pub mod memory;
pub mod osr;
pub mod spsc;
pub mod vega;
