//! The queues on Sluice's hot path, written by hand because moving a tuple between two cores
//! is the cost the whole engine is judged by.
//!
//! - [`spsc`]: a bounded single-producer single-consumer queue of Rust values, the in-process
//!   *threaded port* between two threads.
//!
//! Every structure here is checked three ways: `loom` models (`RUSTFLAGS="--cfg loom"
//! cargo test -p sluice-ring --test loom`), `proptest` against a `VecDeque` model, and Miri.

pub mod spsc;
