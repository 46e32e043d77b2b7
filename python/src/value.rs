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
//! | `dict` of these | `Dict` (its items in order) | a varint length, each key and value |
//!
//! A value is converted once when a Python function returns it (or a source yields it) and
//! once when it is handed to the next Python function; between the two, Rust operators (the
//! keyed count and sum, the partitioning by key, the collect sink) read it without the
//! interpreter, and it crosses threads, processes and hosts in the encoding above, never as a
//! pickle. No Python object handle is carried, so the same value works under every plan. Any
//! other type (a list, a set, an `int` beyond 64 bits, an object) is refused where it is
//! returned, naming the operator and the type (the limits chapter of the book lists this).
//! Floats are equal and hash by their bits, so a `float` key `nan` is one key; two dicts are
//! equal when they hold the same items in the same order.
//!
//! The file connectors read and write values in their own formats through the same serde
//! implementation, which looks at the format: to a binary one (the engine's encoding,
//! postcard) it writes the table above, to a text one (JSON, CSV) the value as the format
//! writes it (`None` as `null` or an empty field, a tuple as a JSON array or a CSV record, a
//! dict as a JSON object), and from JSON it reads any value back (an object as a dict, an
//! array as a tuple). A CSV record is read as a [`CsvRecord`].

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::hash::{Hash, Hasher};

use compact_str::CompactString;
use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyString, PyTuple};
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A Python value as the engine carries it (see the module doc).
#[derive(Debug, Clone)]
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
    Bytes(Box<[u8]>),
    /// A `tuple` of values.
    Tuple(Box<[Value]>),
    /// A `dict`: its items, in order.
    Dict(Box<[(Value, Value)]>),
}

sluice_types::normal_tuple!(Value);

// A value is as small as a `str` of up to 24 bytes held inline: the variants that own more
// hold boxed slices (16 bytes), so a keyed aggregate's `(key, value)` pair is 48 bytes (with
// vectors it was 64, and every batch, table and collection of pairs a third larger).
const _: () = assert!(std::mem::size_of::<Value>() == 24);

/// The engine's encoding of a [`Value`] (postcard's enum: a variant index, then its fields),
/// derived for the binary formats by serde's remote derive.
#[derive(Serialize, Deserialize)]
#[serde(remote = "Value")]
enum Binary {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(CompactString),
    Bytes(#[serde(with = "serde_bytes")] Box<[u8]>),
    Tuple(Box<[Value]>),
    Dict(Box<[(Value, Value)]>),
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if !serializer.is_human_readable() {
            return Binary::serialize(self, serializer);
        }
        match self {
            Value::None => serializer.serialize_none(),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Int(i) => serializer.serialize_i64(*i),
            Value::Float(f) => serializer.serialize_f64(*f),
            Value::Str(s) => serializer.serialize_str(s),
            Value::Bytes(b) => serializer.serialize_bytes(b),
            Value::Tuple(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Value::Dict(items) => {
                let mut map = serializer.serialize_map(Some(items.len()))?;
                for (key, value) in items {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        if deserializer.is_human_readable() {
            deserializer.deserialize_any(TextVisitor)
        } else {
            Binary::deserialize(deserializer)
        }
    }
}

/// Reads a [`Value`] from a self-describing text format (JSON; a CSV field).
struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value a Sluice stream carries")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::None)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::deserialize(d)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E>(self, i: i64) -> Result<Value, E> {
        Ok(Value::Int(i))
    }
    fn visit_u64<E: de::Error>(self, u: u64) -> Result<Value, E> {
        i64::try_from(u).map(Value::Int).map_err(|_| {
            E::custom(format!(
                "the integer {u} does not fit the 64 bits (signed) a Sluice stream carries"
            ))
        })
    }
    fn visit_f64<E>(self, f: f64) -> Result<Value, E> {
        Ok(Value::Float(f))
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::Str(CompactString::from(s)))
    }
    fn visit_bytes<E>(self, b: &[u8]) -> Result<Value, E> {
        Ok(Value::Bytes(b.into()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Tuple(items.into()))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
        while let Some((key, value)) = map.next_entry()? {
            // A CSV header's names come as bytes (the reader keeps them so); UTF-8 ones are str.
            let key = match key {
                Value::Bytes(b) => String::from_utf8(b.into_vec())
                    .map(|s| Value::Str(s.into()))
                    .unwrap_or_else(|e| Value::Bytes(e.into_bytes().into())),
                key => key,
            };
            items.push((key, value));
        }
        Ok(Value::Dict(items.into()))
    }
}

/// A record of a CSV file as a value: a dict from the header's names to the fields when the
/// file has a header row, a tuple of the fields otherwise; each field an `int`, a `float` or
/// a `bool` where it reads as one (`true`, `false`), a `str` otherwise.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct CsvRecord(pub Value);

sluice_types::normal_tuple!(CsvRecord);

impl<'de> Deserialize<'de> for CsvRecord {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        if !deserializer.is_human_readable() {
            return Value::deserialize(deserializer).map(CsvRecord);
        }
        // The CSV reader hands a record with a header row to a map, one without to a sequence.
        deserializer.deserialize_map(TextVisitor).map(CsvRecord)
    }
}

impl PartialEq for Value {
    // Inlined: a keyed table compares a key on every lookup, mostly a str with a str.
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Value::None, Value::None) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Float(a), Value::Float(b)) => a.to_bits() == b.to_bits(),
            (Value::Str(a), Value::Str(b)) => a == b,
            (Value::Bytes(a), Value::Bytes(b)) => a == b,
            (Value::Tuple(a), Value::Tuple(b)) => a == b,
            (Value::Dict(a), Value::Dict(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Value {}

impl Hash for Value {
    #[inline]
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
            Value::Dict(items) => items.hash(state),
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
            return Ok(Value::Bytes(b.as_bytes().into()));
        }
        if let Ok(t) = object.cast_exact::<PyTuple>() {
            return t
                .iter()
                .map(|item| Value::from_py(&item))
                .collect::<PyResult<_>>()
                .map(Value::Tuple);
        }
        if let Ok(d) = object.cast_exact::<PyDict>() {
            return d
                .iter()
                .map(|(key, value)| Ok((Value::from_py(&key)?, Value::from_py(&value)?)))
                .collect::<PyResult<_>>()
                .map(Value::Dict);
        }
        Err(PyTypeError::new_err(format!(
            "a value of type {} cannot travel in a Sluice stream: it carries None, bool, int \
             (64 bits), float, str, bytes and tuples and dicts of them",
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
            Value::Dict(items) => {
                let dict = PyDict::new(py);
                for (key, value) in items {
                    dict.set_item(key.to_py(py)?, value.to_py(py)?)?;
                }
                dict.into_any()
            }
        })
    }

    /// Appends the value as Python's `str()` writes it: a `str` as itself, anything else as
    /// its `repr()` (a `float` as Rust writes it, which is Python's `repr` but for exponents).
    pub fn write_text(&self, out: &mut String) -> fmt::Result {
        match self {
            Value::Str(s) => out.write_str(s),
            other => other.write_repr(out),
        }
    }

    /// Appends the value as Python's `repr()` writes it (see [`Value::write_text`]).
    fn write_repr(&self, out: &mut String) -> fmt::Result {
        match self {
            Value::None => out.write_str("None"),
            Value::Bool(true) => out.write_str("True"),
            Value::Bool(false) => out.write_str("False"),
            Value::Int(i) => write!(out, "{i}"),
            Value::Float(f) if f.is_nan() => out.write_str("nan"),
            Value::Float(f) if f.is_infinite() => {
                out.write_str(if *f > 0.0 { "inf" } else { "-inf" })
            }
            Value::Float(f) => write!(out, "{f:?}"),
            Value::Str(s) => write!(out, "'{}'", s.escape_debug()),
            Value::Bytes(b) => write!(out, "b'{}'", b.escape_ascii()),
            Value::Tuple(items) => {
                out.write_char('(')?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.write_str(", ")?;
                    }
                    item.write_repr(out)?;
                }
                out.write_str(if items.len() == 1 { ",)" } else { ")" })
            }
            Value::Dict(items) => {
                out.write_char('{')?;
                for (i, (key, value)) in items.iter().enumerate() {
                    if i > 0 {
                        out.write_str(", ")?;
                    }
                    key.write_repr(out)?;
                    out.write_str(": ")?;
                    value.write_repr(out)?;
                }
                out.write_char('}')
            }
        }
    }
}

/// A tuple type a Python stream carries: a value, a keyed aggregate's `(key, value)` pair, a
/// line of a text file or a record of a CSV file; each is handed to Python as one object.
pub trait Carried: sluice_types::Tuple + Serialize + serde::de::DeserializeOwned {
    /// The tuple as a new Python object.
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>>;

    /// The tuple as one value (a pair as a 2-tuple), borrowed where the tuple is one.
    fn as_value(&self) -> Cow<'_, Value>;

    /// The tuple as one value, owned.
    fn to_value(&self) -> Value {
        self.as_value().into_owned()
    }

    /// Appends the tuple as Python's `str()` of it writes it (see [`Value::write_text`]): a
    /// line of a text sink.
    fn write_text(&self, out: &mut String) -> fmt::Result {
        self.as_value().write_text(out)
    }
}

/// A window's result: `(key, start, end, value)`, its bounds in seconds.
impl Carried for sluice_ops::Windowed<Value, Value> {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.to_value().to_py(py)
    }

    fn as_value(&self) -> Cow<'_, Value> {
        let seconds = |nanos: u64| Value::Float(nanos as f64 / 1e9);
        Cow::Owned(Value::Tuple(Box::new([
            self.key.clone(),
            seconds(self.start),
            seconds(self.end),
            self.value.clone(),
        ])))
    }
}

/// A Kafka record: its value (the key, the headers and the position stay in Rust).
impl Carried for sluice_connectors::KafkaRecord<Value> {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.value.to_py(py)
    }

    fn as_value(&self) -> Cow<'_, Value> {
        Cow::Borrowed(&self.value)
    }
}

impl Carried for CsvRecord {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.0.to_py(py)
    }

    fn as_value(&self) -> Cow<'_, Value> {
        Cow::Borrowed(&self.0)
    }
}

impl Carried for Value {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Value::to_py(self, py)
    }

    fn as_value(&self) -> Cow<'_, Value> {
        Cow::Borrowed(self)
    }
}

impl Carried for (Value, Value) {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyTuple::new(py, [self.0.to_py(py)?, self.1.to_py(py)?])?.into_any())
    }

    fn as_value(&self) -> Cow<'_, Value> {
        Cow::Owned(Value::Tuple(Box::new([self.0.clone(), self.1.clone()])))
    }
}

impl Carried for String {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyString::new(py, self).into_any())
    }

    fn as_value(&self) -> Cow<'_, Value> {
        Cow::Owned(Value::Str(CompactString::from(self.as_str())))
    }

    fn write_text(&self, out: &mut String) -> fmt::Result {
        out.write_str(self)
    }
}
