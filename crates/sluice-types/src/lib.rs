//! The vocabulary every other Sluice crate speaks: tuple encodings, stream messages and the
//! punctuations among them, the clock that timestamps tuples, and the identifiers shared by
//! the graph, the plan and the runtime.
//!
//! Tuples come in the two encodings of the InfoSphere Streams 2.0 report:
//! - **facade**: a fixed-size `#[repr(C)]` plain-old-data type whose bytes *are* its wire form,
//!   so crossing a process boundary is a copy and reading it on the far side is a cast in place
//!   (see [`FacadeTuple`] and [`facade_tuple!`]);
//! - **normal**: any `serde` type, serialized with `postcard` into a variable-size buffer
//!   (see [`normal_tuple!`]).
//!
//! Within one process neither encoding is ever serialized: tuples move by reference (fused) or
//! by value through a queue (threaded). The encoding matters only where bytes are needed.
#![forbid(unsafe_code)]

mod clock;
mod erased;
mod keys;
mod punctuation;
mod tuple;

#[doc(hidden)]
pub mod tuple_codec {
    //! Codec functions the tuple macros expand to; not part of the public API.
    pub use crate::tuple::{decode_facade, decode_normal, encode_normal};
}

pub use clock::{monotonic_ns, utc_text, Stopwatch, WallClock};
pub use compact_str::CompactString;
pub use erased::{BatchRef, ErasedItems, TupleRef, TupleSlice};
pub use keys::{hash_of_instance, partition_hash, pick_instance, KeyHasher, KeyMap, KeySet};
pub use punctuation::{Punctuation, PunctuationWireError};
pub use tuple::{
    BytesTuple, DecodeError, EncodeError, Encoding, FacadeTuple, FixedBytes, Tuple, TupleSchema,
};

#[doc(hidden)]
pub mod __private {
    //! Re-exports used by the tuple macros; not part of the public API.
    pub use bytemuck;
}

/// A control or data item travelling along one edge, in order with the data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message<T> {
    /// One tuple.
    Data(T),
    /// A punctuation from upstream: a window marker, a watermark or a latency marker.
    Punctuation(Punctuation),
    /// The upstream instance has finished: nothing more will arrive on this edge.
    EndOfStream,
}
