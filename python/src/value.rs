//! How a Python value travels in a Sluice stream: a [`Value`], an owned copy of the value the
//! engine can read, hash and encode.
//!
//! | Python | `Value` | encoded (postcard: a variant byte, then) |
//! |---|---|---|
//! | `None` | `None` | nothing |
//! | `bool` | `Bool` | one byte |
//! | `int` (64 bits, signed) | `Int` | a zig-zag varint (1 byte for -64..63) |
//! | `float` | `Float` | 8 bytes |
//! | `str` | `Str` (inline up to 24 bytes) | a varint length, the UTF-8 bytes |
//! | `bytes` | `Bytes` | a varint length, the bytes |
//! | `tuple` of these | `Tuple` | a varint length, each item |
//!
//! A value is converted once when a Python function returns it (or a source yields it) and
//! once when it is handed to the next Python function; between the two, Rust operators (the
//! keyed count and sum, the partitioning by key, the collect sink) read it without the
//! interpreter, and it crosses threads, processes and hosts in the encoding above, never as a
//! pickle. No Python object handle is carried, so the same value works under every plan. Any
//! other type (a list, a dict, an `int` beyond 64 bits, an object) is refused where it is
//! returned, naming the operator and the type (the limits chapter of the book lists this).
//! Floats are equal and hash by their bits, so a `float` key `nan` is one key.

use std::hash::{Hash, Hasher};

use compact_str::CompactString;
use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyFloat, PyInt, PyString, PyTuple};
use serde::{Deserialize, Serialize};

/// A Python value as the engine carries it (see the module doc).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Value {
    /// `None`.
    None,
    /// A `bool`.
    Bool(bool),
    /// An `int` that fits 64 bits.
    Int(i64),
    /// A `float`.
    Float(f64),
    /// A `str`.
    Str(CompactString),
    /// A `bytes`.
    Bytes(#[serde(with = "serde_bytes")] Vec<u8>),
    /// A `tuple` of values.
    Tuple(Vec<Value>),
}

sluice_types::normal_tuple!(Value);

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Value::None, Value::None) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Float(a), Value::Float(b)) => a.to_bits() == b.to_bits(),
            (Value::Str(a), Value::Str(b)) => a == b,
            (Value::Bytes(a), Value::Bytes(b)) => a == b,
            (Value::Tuple(a), Value::Tuple(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Value {}

impl Hash for Value {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Value::None => {}
            Value::Bool(b) => b.hash(state),
            Value::Int(i) => i.hash(state),
            Value::Float(f) => f.to_bits().hash(state),
            Value::Str(s) => s.hash(state),
            Value::Bytes(b) => b.hash(state),
            Value::Tuple(items) => items.hash(state),
        }
    }
}

impl Value {
    /// Copies a Python value; a type the engine cannot carry is a `TypeError` (an `int`
    /// beyond 64 bits an `OverflowError`) naming it.
    pub fn from_py(object: &Bound<'_, PyAny>) -> PyResult<Value> {
        // The most frequent types first; bool before int, since bool is a subclass of int.
        if let Ok(s) = object.cast_exact::<PyString>() {
            return Ok(Value::Str(CompactString::from(s.to_str()?)));
        }
        if object.is_exact_instance_of::<PyInt>() {
            return object.extract::<i64>().map(Value::Int).map_err(|_| {
                PyOverflowError::new_err(format!(
                    "the int {object} does not fit the 64 bits (signed) a Sluice stream carries"
                ))
            });
        }
        if let Ok(f) = object.cast_exact::<PyFloat>() {
            return Ok(Value::Float(f.value()));
        }
        if let Ok(b) = object.cast_exact::<PyBool>() {
            return Ok(Value::Bool(b.is_true()));
        }
        if object.is_none() {
            return Ok(Value::None);
        }
        if let Ok(b) = object.cast_exact::<PyBytes>() {
            return Ok(Value::Bytes(b.as_bytes().to_vec()));
        }
        if let Ok(t) = object.cast_exact::<PyTuple>() {
            return t
                .iter()
                .map(|item| Value::from_py(&item))
                .collect::<PyResult<_>>()
                .map(Value::Tuple);
        }
        Err(PyTypeError::new_err(format!(
            "a value of type {} cannot travel in a Sluice stream: it carries None, bool, int \
             (64 bits), float, str, bytes and tuples of them",
            object.get_type().name()?
        )))
    }

    /// The value as a new Python object.
    pub fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self {
            Value::None => py.None().into_bound(py),
            Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
            Value::Int(i) => i.into_pyobject(py)?.into_any(),
            Value::Float(f) => PyFloat::new(py, *f).into_any(),
            Value::Str(s) => PyString::new(py, s).into_any(),
            Value::Bytes(b) => PyBytes::new(py, b).into_any(),
            Value::Tuple(items) => PyTuple::new(
                py,
                items
                    .iter()
                    .map(|item| item.to_py(py))
                    .collect::<PyResult<Vec<_>>>()?,
            )?
            .into_any(),
        })
    }
}

/// A tuple type a Python stream carries: a value, a keyed aggregate's `(key, value)` pair, or
/// a line of a text file; each is handed to Python as one object.
pub trait Carried: sluice_types::Tuple {
    /// The tuple as a new Python object.
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>>;

    /// The tuple as one value (a pair as a 2-tuple).
    fn to_value(&self) -> Value;
}

impl Carried for Value {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Value::to_py(self, py)
    }

    fn to_value(&self) -> Value {
        self.clone()
    }
}

impl Carried for (Value, Value) {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyTuple::new(py, [self.0.to_py(py)?, self.1.to_py(py)?])?.into_any())
    }

    fn to_value(&self) -> Value {
        Value::Tuple(vec![self.0.clone(), self.1.clone()])
    }
}

impl Carried for String {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyString::new(py, self).into_any())
    }

    fn to_value(&self) -> Value {
        Value::Str(CompactString::from(self.as_str()))
    }
}
