//! Synchronisation primitives shared by Sluice's lock-free structures and polling loops.
//!
//! - [`atomic`] and [`cell`] are `std`'s types normally and `loom`'s under `--cfg loom`, so the
//!   same queue code is both the production code and the model `loom` checks.
//! - [`CachePadded`] keeps a producer's and a consumer's fields on different cache lines.
//! - [`IdleStrategy`] is what every polling loop does when a poll found no work.
//! - [`Doorbell`] lets a reader that found no work sleep until its writer publishes (a futex,
//!   private between threads or shared between processes), for [`IdleStrategy::Park`].
#![forbid(unsafe_code)]

mod doorbell;
mod idle;

pub use crossbeam_utils::CachePadded;
pub use doorbell::{Doorbell, Sharing, Wakeup};
pub use idle::{Idle, IdleStrategy, UnknownIdleStrategy, PARK_TIMEOUT};

/// Atomics and fences: `std::sync::atomic` normally, `loom::sync::atomic` under `--cfg loom`.
pub mod atomic {
    #[cfg(loom)]
    pub use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
    #[cfg(not(loom))]
    pub use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
}

/// Shared ownership: `std::sync::Arc` normally, `loom::sync::Arc` under `--cfg loom`.
pub mod sync {
    #[cfg(loom)]
    pub use loom::sync::Arc;
    #[cfg(not(loom))]
    pub use std::sync::Arc;
}

/// Interior mutability for slots: `loom`'s checked cell under `--cfg loom`, a thin wrapper over
/// `std::cell::UnsafeCell` with the same `with`/`with_mut` API otherwise.
pub mod cell {
    #[cfg(loom)]
    pub use loom::cell::UnsafeCell;

    /// `std::cell::UnsafeCell` with `loom`'s closure-based API.
    #[cfg(not(loom))]
    #[derive(Debug)]
    pub struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    #[cfg(not(loom))]
    impl<T> UnsafeCell<T> {
        /// Wraps `value`.
        pub const fn new(value: T) -> Self {
            Self(std::cell::UnsafeCell::new(value))
        }

        /// Gives `f` a shared raw pointer to the contents.
        #[inline(always)]
        pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        /// Gives `f` a mutable raw pointer to the contents.
        #[inline(always)]
        pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

/// Runs the `loom` model `f` exploring every interleaving with at most three preemptions
/// (`LOOM_MAX_PREEMPTIONS` overrides it): the bound for models with a doorbell, whose futex
/// stand-in (a mutex and a condition variable) makes the unbounded search take hours. Three
/// preemptions still catch the doorbell's known failure modes (see its module doc).
#[cfg(loom)]
pub fn check_model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound.get_or_insert(3);
    builder.check(f);
}

/// `std::hint::spin_loop`, or a `loom` yield so models make progress.
#[inline(always)]
pub fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}
