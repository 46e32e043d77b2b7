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
    /// An array of bytes (what `gen_array(bytes, count)` gives), encoded as one run of bytes
    /// (a `gen_array` element is megabytes: element by element, postcard's encoding took
    /// most of a stream process's time).
    Bytes(#[serde(with = "serde_bytes")] Vec<u8>),
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

// A value travels between stream processes as a normal (postcard-encoded) tuple.
sluice_types::normal_tuple!(Value);

impl Value {
    /// The bytes of data it holds: an array's elements (8 bytes a real, 16 a complex, 1 a
    /// byte), a string's bytes, 8 for a number or a handle, a bag's elements summed. What
    /// `sluice query` counts as moved between stream processes (the paper's bandwidth is in
    /// array bytes); the encoding adds a length prefix or two.
    pub fn payload_bytes(&self) -> u64 {
        let len = |n: usize, each: u64| n as u64 * each;
        match self {
            Value::Integer(_) | Value::Real(_) | Value::Sp(_) => 8,
            Value::String(s) => len(s.len(), 1),
            Value::Array(a) => len(a.len(), 8),
            Value::Complex(c) => len(c.len(), 16),
            Value::Bytes(b) => len(b.len(), 1),
            Value::Bag(items) => items.iter().map(Value::payload_bytes).sum(),
        }
    }
}

/// Significant digits a real is printed with: what an FFT's rounding leaves alone, so that
/// the same query prints the same text on every CPU.
const PRINTED_DIGITS: usize = 12;

/// A real as `sluice query` prints it: rounded to [`PRINTED_DIGITS`] significant digits, then
/// the shortest text that reads back as that number, always with a point or an exponent
/// (`2.0`, `1.1e-17`, `4.0` for 4.000000000000001).
fn real(f: &mut std::fmt::Formatter<'_>, x: f64) -> std::fmt::Result {
    let rounded: f64 = format!("{:.*e}", PRINTED_DIGITS - 1, x)
        .parse()
        .unwrap_or(x);
    write!(f, "{rounded:?}")
}

/// An element of an array whose largest magnitude is `scale`, as printed: what lies below the
/// printed digits of the largest, or below 1e-12 (floating-point noise, as the 1e-16 an FFT
/// leaves where a zero belongs), is 0.
fn in_array(x: f64, scale: f64) -> f64 {
    let noise = 10f64.powi(-(PRINTED_DIGITS as i32));
    if x.abs() <= (scale * noise).max(noise) {
        0.0
    } else {
        x
    }
}

/// How `sluice query` prints a value: numbers and strings as they are, arrays and bags in
/// brackets and braces, a complex number as `re+imi`, a byte array by its size (a
/// `gen_array` element is megabytes), a stream process handle as `sp<N>`.
impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        fn list<T>(
            f: &mut std::fmt::Formatter<'_>,
            (open, close): (&str, &str),
            items: &[T],
            each: impl Fn(&mut std::fmt::Formatter<'_>, &T) -> std::fmt::Result,
        ) -> std::fmt::Result {
            f.write_str(open)?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                each(f, item)?;
            }
            f.write_str(close)
        }
        match self {
            Value::Integer(n) => write!(f, "{n}"),
            Value::Real(x) => real(f, *x),
            Value::String(s) => f.write_str(s),
            Value::Array(a) => {
                let scale = a.iter().fold(0.0, |m: f64, x| m.max(x.abs()));
                list(f, ("[", "]"), a, |f, x| real(f, in_array(*x, scale)))
            }
            Value::Complex(c) => {
                let scale = c
                    .iter()
                    .fold(0.0, |m: f64, (re, im)| m.max(re.abs()).max(im.abs()));
                list(f, ("[", "]"), c, |f, (re, im)| {
                    let (re, im) = (in_array(*re, scale), in_array(*im, scale));
                    real(f, re)?;
                    f.write_str(if im.is_sign_negative() { "-" } else { "+" })?;
                    real(f, im.abs())?;
                    f.write_str("i")
                })
            }
            Value::Bytes(b) => write!(f, "<{} bytes>", b.len()),
            Value::Bag(items) => list(f, ("{", "}"), items, |f, v| write!(f, "{v}")),
            Value::Sp(id) => write!(f, "sp{id}"),
        }
    }
}
