//! CSV in and out with the `csv` crate: [`CsvSource`] reads a file's records into the user's
//! serde type, [`CsvEncoder`] writes tuples as records (through a [`StreamSink`], so to a
//! file, standard output or TCP: [`CsvSink`]).
//!
//! A record that does not deserialize (a field of the wrong kind, too few or too many
//! fields) is counted (`malformed_records`) and skipped, or fails the job with the path and
//! its line, as [`MalformedRecords`] says. Fields that are not UTF-8 are replaced by U+FFFD
//! and the record counted (`invalid_utf8_records`). The file is opened when the job starts,
//! so a missing file names the operator and the path; run the source with parallelism 1.

use std::cell::RefCell;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use csv::{ByteRecord, ReaderBuilder, WriterBuilder};
use serde::de::DeserializeOwned;
use serde::Serialize;
use sluice_graph::{OperatorContext, OperatorError, OperatorReport, Output, Produced, Source};
use sluice_types::Tuple;

use crate::stream_sink::{ByteTarget, StreamSink, TupleEncoder};
use sluice_ops::counter_report;
use sluice_ops::SOURCE_BATCH;

/// How records are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CsvFormat {
    /// The first record names the fields (read: matched to the type's field names; written:
    /// made from them).
    pub has_headers: bool,
    /// The byte between fields.
    pub delimiter: u8,
}

impl Default for CsvFormat {
    /// A header row, fields separated by commas.
    fn default() -> Self {
        Self {
            has_headers: true,
            delimiter: b',',
        }
    }
}

/// What a [`CsvSource`] does with a record that does not deserialize.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MalformedRecords {
    /// Counts it (`malformed_records`) and goes on.
    #[default]
    Skip,
    /// Fails the job, naming the file and the record's line.
    Fail,
}

/// A source emitting each record of a CSV file as a `T` (see the module doc).
pub struct CsvSource<T> {
    path: PathBuf,
    format: CsvFormat,
    on_malformed: MalformedRecords,
    reader: Option<csv::Reader<File>>,
    headers: Option<ByteRecord>,
    record: ByteRecord,
    malformed: u64,
    invalid_utf8: u64,
    batch: Vec<T>,
}

impl<T> CsvSource<T> {
    /// A source reading the file at `path`, laid out as `format`, skipping malformed records.
    pub fn new(path: impl Into<PathBuf>, format: CsvFormat) -> Self {
        Self {
            path: path.into(),
            format,
            on_malformed: MalformedRecords::Skip,
            reader: None,
            headers: None,
            record: ByteRecord::new(),
            malformed: 0,
            invalid_utf8: 0,
            batch: Vec::with_capacity(SOURCE_BATCH),
        }
    }

    /// Says what to do with a record that does not deserialize.
    pub fn on_malformed(mut self, policy: MalformedRecords) -> Self {
        self.on_malformed = policy;
        self
    }

    /// A read or deserialization error: a malformed record is counted when the policy says
    /// skip; anything else fails the job.
    fn refuse(&mut self, error: csv::Error) -> Result<(), OperatorError> {
        if self.on_malformed == MalformedRecords::Skip && !error.is_io_error() {
            self.malformed += 1;
            return Ok(());
        }
        Err(read_failure(&self.path, error))
    }
}

/// The job's error for `error`, met reading the file at `path`.
fn read_failure(path: &Path, error: csv::Error) -> OperatorError {
    let message = error.to_string();
    match error.into_kind() {
        csv::ErrorKind::Io(e) => OperatorError::io(format!("read {}", path.display()), e),
        _ => OperatorError::Failed(format!("{}: {message}", path.display())),
    }
}

/// `record` with U+FFFD in place of the bytes that are not UTF-8 (its position kept), or
/// `None` if every field is UTF-8.
fn replace_invalid_utf8(record: &ByteRecord) -> Option<ByteRecord> {
    if record
        .iter()
        .all(|field| std::str::from_utf8(field).is_ok())
    {
        return None;
    }
    let mut replaced: ByteRecord = record
        .iter()
        .map(|field| String::from_utf8_lossy(field).into_owned())
        .collect();
    replaced.set_position(record.position().cloned());
    Some(replaced)
}

impl<T: Tuple + DeserializeOwned> sluice_ops::TypedSource for CsvSource<T> {
    type Out = T;
}

impl<T> Source for CsvSource<T>
where
    T: Tuple + DeserializeOwned,
{
    fn start(&mut self, _ctx: &OperatorContext) -> Result<(), OperatorError> {
        let file = File::open(&self.path)
            .map_err(|e| OperatorError::io(format!("open {}", self.path.display()), e))?;
        let mut reader = ReaderBuilder::new()
            .has_headers(self.format.has_headers)
            .delimiter(self.format.delimiter)
            .from_reader(file);
        if self.format.has_headers {
            let headers = reader
                .byte_headers()
                .map_err(|e| read_failure(&self.path, e))?
                .clone();
            self.headers = Some(replace_invalid_utf8(&headers).unwrap_or(headers));
        }
        self.reader = Some(reader);
        Ok(())
    }

    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let mut ended = false;
        while self.batch.len() < SOURCE_BATCH {
            let Some(reader) = self.reader.as_mut() else {
                ended = true;
                break;
            };
            match reader.read_byte_record(&mut self.record) {
                Ok(false) => {
                    self.reader = None;
                    ended = true;
                    break;
                }
                Ok(true) => {}
                Err(e) => {
                    self.refuse(e)?;
                    continue;
                }
            }
            if let Some(replaced) = replace_invalid_utf8(&self.record) {
                self.invalid_utf8 += 1;
                self.record = replaced;
            }
            match self.record.deserialize::<T>(self.headers.as_ref()) {
                Ok(tuple) => self.batch.push(tuple),
                Err(e) => self.refuse(e)?,
            }
        }
        let emitted = self.batch.len();
        out.emit_batch(0, &mut self.batch)?;
        Ok(if ended && emitted == 0 {
            Produced::Exhausted
        } else {
            Produced::Emitted(emitted)
        })
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        Ok(counter_report(&[
            ("malformed_records", self.malformed),
            ("invalid_utf8_records", self.invalid_utf8),
        ]))
    }
}

/// The bytes of the records the CSV writer has written, taken out after each record. (The
/// writer owns its destination and lends it only for reading, so the bytes sit in a cell.)
#[derive(Default)]
struct RecordBytes(RefCell<Vec<u8>>);

impl Write for RecordBytes {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.get_mut().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes each tuple as a CSV record, after a header row made from the type's field names
/// when the format has headers.
pub struct CsvEncoder {
    format: CsvFormat,
    writer: csv::Writer<RecordBytes>,
}

impl CsvEncoder {
    /// Records laid out as `format`.
    pub fn new(format: CsvFormat) -> Self {
        Self {
            format,
            writer: Self::writer(format),
        }
    }

    fn writer(format: CsvFormat) -> csv::Writer<RecordBytes> {
        WriterBuilder::new()
            .has_headers(format.has_headers)
            .delimiter(format.delimiter)
            .from_writer(RecordBytes::default())
    }
}

impl<T: Serialize> TupleEncoder<T> for CsvEncoder {
    fn encode(&mut self, tuple: &T, out: &mut Vec<u8>) -> Result<(), OperatorError> {
        let written = self.writer.serialize(tuple).and_then(|()| {
            self.writer.flush()?;
            Ok(())
        });
        let mut bytes = self.writer.get_ref().0.borrow_mut();
        match written {
            Ok(()) => {
                out.append(&mut bytes);
                Ok(())
            }
            Err(e) => {
                bytes.clear();
                Err(OperatorError::Failed(format!(
                    "a tuple does not serialize as a CSV record: {e}"
                )))
            }
        }
    }

    /// The header row, if any, was written before: the records go on without one.
    fn resume(&mut self) {
        self.writer = Self::writer(CsvFormat {
            has_headers: false,
            ..self.format
        });
    }
}

/// A sink writing each tuple as a CSV record (see [`StreamSink::csv`]).
pub type CsvSink<T> = StreamSink<T, CsvEncoder>;

impl<T: Serialize> StreamSink<T, CsvEncoder> {
    /// A sink writing each tuple as a record laid out as `format` into `target`.
    pub fn csv(target: ByteTarget, format: CsvFormat) -> Self {
        Self::new(target, CsvEncoder::new(format))
    }
}
