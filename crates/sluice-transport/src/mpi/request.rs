//! A non-blocking MPI send of a buffer this side owns: the one place of the `mpi` transport
//! that needs `unsafe`.
//!
//! The `mpi` crate ties a request to a borrow of its buffer (`Request<'a, ..>` holds `&'a`),
//! which suits a send started and finished inside one call. An endpoint's batches stay in
//! flight across calls (that is what makes the send non-blocking), so the request and the
//! buffer it reads from live together in an [`OwnedSend`], which keeps the buffer untouched
//! until MPI says the send is complete. Requests are raw MPI handles, not `Send` in Rust's
//! eyes; MPI was initialised with `MPI_THREAD_MULTIPLE` ([`super::session`]) before any of
//! them exists, so any thread may test them.
#![allow(unsafe_code)]

use mpi::request::{Request, StaticScope};
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::Destination;
use mpi::Tag;

/// A send in flight and the bytes it sends.
pub(crate) struct OwnedSend {
    /// The request; `None` once complete.
    request: Option<Request<'static, [u8]>>,
    /// The bytes being sent; never moved in memory, written or freed while `request` is
    /// `Some` (a `Vec`'s heap block does not move when the `Vec` value does).
    buffer: Vec<u8>,
}

// SAFETY: an `OwnedSend` holds an MPI request handle and a `Vec`. MPI is initialised with
// `MPI_THREAD_MULTIPLE` before any `OwnedSend` is made (the endpoints check
// `super::session::check_ready` first), and at that level the standard lets any thread use a
// request handle, as long as no two use it at once, which `&mut self`/ownership guarantees.
unsafe impl Send for OwnedSend {}

impl OwnedSend {
    /// Starts sending `buffer` to rank `to` with `tag` on the world communicator.
    pub(crate) fn start(to: i32, tag: Tag, buffer: Vec<u8>) -> Self {
        // SAFETY: the slice points into `buffer`'s heap block, which `self.buffer` owns from
        // here on and which nothing writes, reallocates or frees while the request is
        // pending: `test` hands the buffer back only after MPI reports completion, and `drop`
        // leaks it if the request is still pending (see `Drop`). The `'static` lifetime is
        // only the `mpi` crate's way of naming "as long as the request lives".
        let bytes: &'static [u8] =
            unsafe { std::slice::from_raw_parts(buffer.as_ptr(), buffer.len()) };
        let world = SimpleCommunicator::world();
        let request = world
            .process_at_rank(to)
            .immediate_send_with_tag(StaticScope, bytes, tag);
        Self {
            request: Some(request),
            buffer,
        }
    }

    /// Whether the send is complete; the buffer may then be taken back with
    /// [`OwnedSend::into_buffer`].
    pub(crate) fn test(&mut self) -> bool {
        if let Some(request) = self.request.take() {
            if let Err(pending) = request.test() {
                self.request = Some(pending);
            }
        }
        self.request.is_none()
    }

    /// The buffer of a complete send, for reuse; `None` while it is pending.
    pub(crate) fn into_buffer(mut self) -> Option<Vec<u8>> {
        self.test().then(|| std::mem::take(&mut self.buffer))
    }
}

impl Drop for OwnedSend {
    fn drop(&mut self) {
        if let Some(request) = self.request.take() {
            match request.test() {
                Ok(_) => {}
                Err(pending) => {
                    // MPI may still read the buffer: leak it, and the request (whose own drop
                    // panics when incomplete). Only a send whose receiver never takes it gets
                    // here, as its PE is torn down.
                    std::mem::forget(pending);
                    std::mem::forget(std::mem::take(&mut self.buffer));
                }
            }
        }
    }
}

/// This process's rank in the world communicator.
pub(crate) fn own_rank() -> i32 {
    SimpleCommunicator::world().rank()
}

/// The number of ranks in the world communicator.
pub(crate) fn world_size() -> i32 {
    SimpleCommunicator::world().size()
}
