//! The engine's file and socket connectors (`sluice-connectors`) on Python streams: what a
//! Python `read_csv`, `read_socket`, `read_kafka`, `write_text` or `write_kafka` adds to the
//! job, and a Kafka record's key and metadata as Python reads and writes them. The connectors are the
//! engine's own: their formats read and write [`Value`](crate::value::Value)s through its
//! serde implementation (the module `value` says how), and the file sinks are the engine's
//! exactly-once ones.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use sluice_connectors::csv_file::{CsvFormat, CsvSource};
use sluice_connectors::fluent::StreamIo;
use sluice_connectors::stream_sink::{ByteTarget, StreamSink};
use sluice_connectors::tcp::TcpSource;
use sluice_connectors::TcpEndpoint;
use sluice_connectors::{Format, FormatError, KafkaRecord, KafkaSinkConfig};
use sluice_ops::{Dataflow, Stream};

use crate::value::{Carried, CsvRecord, Value};

/// The records of the CSV file at `path` ([`CsvRecord`]s), the first its header when `header`.
pub fn read_csv(flow: &Dataflow, name: &str, path: PathBuf, header: bool) -> Stream<CsvRecord> {
    let format = CsvFormat {
        has_headers: header,
        ..CsvFormat::default()
    };
    flow.source(name, move |_| {
        CsvSource::<CsvRecord>::new(path.clone(), format)
    })
}

/// The lines of TCP connections at `address`: those accepted there (until `connections` have
/// ended, when given) with `listen`, the one made to it otherwise. An address that does not
/// resolve is refused here, naming it.
pub fn read_socket(
    flow: &Dataflow,
    name: &str,
    address: &str,
    listen: bool,
    connections: Option<u64>,
) -> Result<Stream<String>, String> {
    let resolved: SocketAddr = address
        .to_socket_addrs()
        .ok()
        .and_then(|mut all| all.next())
        .ok_or_else(|| format!("read_socket: '{address}' is no address (host:port)"))?;
    let endpoint = if listen {
        TcpEndpoint::listen(resolved)
    } else {
        TcpEndpoint::connect(resolved)
    };
    Ok(flow.source(name, move |_| {
        let source = TcpSource::lines(endpoint.clone());
        match connections {
            Some(n) => source.end_after(n),
            None => source,
        }
    }))
}

/// Ends `stream` in a sink writing each tuple's text ([`Carried::write_text`]) as a line of
/// the file at `path`, exactly once through checkpoints ([`StreamSink`]).
pub fn write_text<T: Carried>(stream: &Stream<T>, name: &str, path: PathBuf) {
    stream.sink(name, move |_| {
        StreamSink::formatted_lines(ByteTarget::File(path.clone()), |tuple: &T, line| {
            tuple.write_text(line)
        })
    });
}

/// How a Kafka record's value is read and written from Python (`format=`): `"json"` (a value
/// as JSON, read back into any value), `"str"` (UTF-8 text: written as `str()` writes the
/// value) or `"bytes"` (the record's bytes; a str value is written as its UTF-8, anything else
/// as its text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KafkaFormat {
    /// JSON.
    Json,
    /// UTF-8 text.
    Str,
    /// The bytes as they are.
    Bytes,
}

impl KafkaFormat {
    /// The format `name` stands for; an unknown one is an error listing them.
    pub fn named(name: &str) -> Result<Self, String> {
        match name {
            "json" => Ok(Self::Json),
            "str" => Ok(Self::Str),
            "bytes" => Ok(Self::Bytes),
            other => Err(format!(
                "no Kafka format '{other}': a record's value is 'json', 'str' or 'bytes'"
            )),
        }
    }
}

impl<T: Carried> Format<T> for KafkaFormat {
    fn decode(&self, bytes: &[u8]) -> Result<T, FormatError> {
        use serde::de::value::{BytesDeserializer, StrDeserializer};
        Ok(match self {
            Self::Json => serde_json::from_slice(bytes)?,
            Self::Str => {
                let text = std::str::from_utf8(bytes)?;
                T::deserialize(StrDeserializer::<serde_json::Error>::new(text))?
            }
            Self::Bytes => T::deserialize(BytesDeserializer::<serde_json::Error>::new(bytes))?,
        })
    }

    fn encode(&self, tuple: &T, out: &mut Vec<u8>) -> Result<(), FormatError> {
        match (self, &*tuple.as_value()) {
            (Self::Json, _) => serde_json::to_writer(out, tuple)?,
            (Self::Str, value) => append_text(value, out),
            (Self::Bytes, value) => append_bytes(value, out),
        }
        Ok(())
    }
}

/// Ends `stream` in a sink writing each tuple as a record's value to `config`'s topic, as
/// `format` says, keyed by `key` when there is one.
pub fn write_kafka<T: Carried>(
    stream: &Stream<T>,
    name: &str,
    config: KafkaSinkConfig,
    format: KafkaFormat,
    key: Option<RecordKey>,
) {
    stream.write_kafka(name, config, format, move |tuple: &T| {
        key.as_ref()?.of(&tuple.to_value())
    });
}

/// Where `write_kafka(key=...)` reads a record's key in each tuple.
#[derive(Debug, Clone)]
pub enum RecordKey {
    /// Item `n` of a tuple (`key=n`).
    Item(usize),
    /// A dict's value under this key (`key="k"`).
    Entry(Value),
}

impl RecordKey {
    /// The key `key=` gives: an int from 0 or a str.
    pub fn read(key: &Bound<'_, PyAny>) -> PyResult<Self> {
        if let Ok(n) = key.extract::<usize>() {
            return Ok(Self::Item(n));
        }
        match key.extract::<String>() {
            Ok(name) => Ok(Self::Entry(Value::Str(name.into()))),
            Err(_) => Err(PyTypeError::new_err(
                "write_kafka's key is an item number (an int from 0) or a dict's key (a str)",
            )),
        }
    }

    /// The key's bytes in `value`, if it has that item or entry.
    fn of(&self, value: &Value) -> Option<Vec<u8>> {
        let key = match (self, value) {
            (Self::Item(n), Value::Tuple(items)) => items.get(*n)?,
            (Self::Entry(name), Value::Dict(entries)) => {
                &entries.iter().find(|(k, _)| k == name)?.1
            }
            _ => return None,
        };
        let mut bytes = Vec::new();
        append_bytes(key, &mut bytes);
        Some(bytes)
    }
}

/// Appends `value` as the "bytes" format writes it: a bytes value as it is, anything else as
/// its `str()` (a str as UTF-8).
fn append_bytes(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Bytes(bytes) => out.extend_from_slice(bytes),
        other => append_text(other, out),
    }
}

/// Appends `value`'s `str()`, as UTF-8.
fn append_text(value: &Value, out: &mut Vec<u8>) {
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = value.write_text(&mut text);
    out.extend_from_slice(text.as_bytes());
}

/// A Kafka record as the dict `read_kafka(metadata=True)` emits.
pub fn record_dict(record: &KafkaRecord<Value>) -> Value {
    let bytes = |b: &Option<Vec<u8>>| b.as_deref().map_or(Value::None, |b| Value::Bytes(b.into()));
    let text = |t: &str| Value::Str(t.into());
    let headers = record
        .headers
        .iter()
        .map(|(name, value)| Value::Tuple(Box::new([text(name), bytes(value)])));
    let timestamp = record
        .timestamp
        .map_or(Value::None, |ms| Value::Float(ms as f64 / 1e3));
    Value::Dict(Box::new([
        (text("key"), bytes(&record.key)),
        (text("value"), record.value.clone()),
        (text("topic"), text(&record.topic)),
        (text("partition"), Value::Int(record.partition.into())),
        (text("offset"), Value::Int(record.offset)),
        (text("timestamp"), timestamp),
        (text("headers"), Value::Tuple(headers.collect())),
    ]))
}
