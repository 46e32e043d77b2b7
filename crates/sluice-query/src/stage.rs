//! The interface between the binder, which wires stream processes together, and the built-in
//! functions, which do the work inside them.
//!
//! A stream process's subquery is compiled into a tree of push stages: the leaves are its
//! inputs (`extract(p)` and `merge(ps)` read the streams of other stream processes; a
//! [`Generator`] such as `gen_array` or `iota` makes one), and each stream function above
//! them (`odd`, `fft`, `count`, `streamof`, a window) is a [`Stage`] fed by the one below.
//! Elements are pushed up as they arrive, so a stream process needs no thread of its own: it
//! runs as one Sluice operator (or source, when its leaves are generators).

use crate::value::Value;

/// Why evaluation failed at run time (an argument of the right type but a wrong value: an
/// FFT of a length that is not a power of two, a file that cannot be read).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{function}: {message}")]
pub struct EvalError {
    /// The function that failed.
    pub function: String,
    /// What went wrong.
    pub message: String,
}

/// Where a stage's results go: the stage above it, or the stream process's output.
pub type Emit<'a> = dyn FnMut(Value) -> Result<(), EvalError> + 'a;

/// A stream function inside a stream process: fed the elements of its input stream, it emits
/// the elements of its own.
pub trait Stage: Send {
    /// An element arrived. `from` is the position of the producer among those its input reads
    /// (the index in `merge({a, b})`'s set; 0 for `extract` or a generator).
    fn element(&mut self, from: usize, value: Value, out: &mut Emit<'_>) -> Result<(), EvalError>;

    /// Every producer of its input has ended: emit what is left (an aggregate's result).
    fn end(&mut self, out: &mut Emit<'_>) -> Result<(), EvalError>;

    /// What it keeps between elements (an aggregate's running value, a window's elements),
    /// encoded, for a checkpoint of its stream process; empty for a stage that keeps
    /// nothing, which the default says.
    fn state(&self) -> Result<Vec<u8>, EvalError> {
        Ok(Vec::new())
    }

    /// Takes back what [`Stage::state`] of the same stage gave, before any element. The
    /// default takes back nothing, and refuses state it does not know.
    fn restore(&mut self, state: &[u8]) -> Result<(), EvalError> {
        if state.is_empty() {
            Ok(())
        } else {
            Err(EvalError {
                function: "restore".into(),
                message: "a stage that keeps no state was given some".into(),
            })
        }
    }
}

/// A stage's state, encoded for [`Stage::state`] (`function` names it in an error).
pub fn encode_state<T: serde::Serialize>(function: &str, state: &T) -> Result<Vec<u8>, EvalError> {
    postcard::to_allocvec(state).map_err(|e| EvalError {
        function: function.into(),
        message: format!("its state cannot be encoded for a checkpoint: {e}"),
    })
}

/// A stage's state that [`encode_state`] encoded, for [`Stage::restore`].
pub fn decode_state<T: serde::de::DeserializeOwned>(
    function: &str,
    state: &[u8],
) -> Result<T, EvalError> {
    postcard::from_bytes(state).map_err(|e| EvalError {
        function: function.into(),
        message: format!("the state of a checkpoint does not decode: {e}"),
    })
}

/// A stream made inside a stream process (`gen_array(bytes, count)`, `iota(m, n)`,
/// `receiver(name)`, `grep(pattern, file)`): its elements, one call at a time.
pub trait Generator: Send {
    /// The next element, or `None` once the (finite) stream has ended.
    fn next(&mut self) -> Option<Result<Value, EvalError>>;

    /// Passes over the next `count` elements, as a stream process resumed from a checkpoint
    /// does to go back to where it was (every generator gives the same elements every run).
    /// The default makes each one; a generator that can jump overrides it.
    fn skip(&mut self, count: u64) -> Result<(), EvalError> {
        for _ in 0..count {
            match self.next() {
                Some(next) => drop(next?),
                None => break,
            }
        }
        Ok(())
    }
}
