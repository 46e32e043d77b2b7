//! The objects SCSQL computes with, and the ones that travel between stream processes.
//!
//! A stream between two stream processes carries [`Value`]s; between processes they are
//! encoded with `postcard` (a compact, self-describing-free serde format), so an array of
//! `gen_array` travels as its length and its bytes.

use serde::{Deserialize, Serialize};

/// A stream process's handle: its index among the query's stream processes.
pub type SpId = usize;

/// One SCSQL object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Value {
    /// An integer.
    Integer(i64),
    /// A real.
    Real(f64),
    /// A string.
    String(String),
    /// A one-dimensional array of reals (a signal, as `receiver` gives, `odd` and `even`
    /// keep).
    Array(Vec<f64>),
    /// A one-dimensional array of complex numbers, `(re, im)` (what `fft` gives).
    Complex(Vec<(f64, f64)>),
    /// An array of bytes (what `gen_array(bytes, count)` gives).
    Bytes(Vec<u8>),
    /// A bag: a finite collection, in the order it was made.
    Bag(Vec<Value>),
    /// A handle to a stream process.
    Sp(SpId),
}

impl Value {
    /// The name of its type, for messages (`integer`, `bag`, `sp`, ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Integer(_) => "integer",
            Value::Real(_) => "real",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Complex(_) => "complex array",
            Value::Bytes(_) => "byte array",
            Value::Bag(_) => "bag",
            Value::Sp(_) => "sp",
        }
    }
}
