//! A source reading a file of JSON lines (one JSON value a line, as `serde_json` reads them)
//! into the user's serde type, and the sink writing tuples that way.
//!
//! The lines are read as [`TextFileSource`](crate::TextFileSource) reads them (its limits,
//! its position in checkpoints); a blank line is skipped. A line that does not decode into
//! the type is counted (`bad_records`) and then, as its [`OnBadRecord`] says, dropped, sent
//! on output port 1 as a [`BadLine`] naming the file and line, or fails the job naming the
//! file, the line and why. Run it with parallelism 1: every instance would read the whole
//! file.

use std::marker::PhantomData;
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sluice_graph::{
    OperatorContext, OperatorError, OperatorReport, Output, Produced, Snapshot, Source,
};
use sluice_ops::{TypedSource, SOURCE_BATCH};
use sluice_types::Tuple;

use crate::format::{Format, Json, OnBadRecord};
use crate::stream_sink::{ByteTarget, StreamSink, TupleEncoder};
use crate::text_file::LineFile;

/// A line of a file that did not decode, as a JSON source set to
/// [`OnBadRecord::SideOutput`] emits it on port 1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BadLine {
    /// The file.
    pub path: String,
    /// The line's number, from 1.
    pub line: u64,
    /// The line as read.
    pub text: String,
    /// Why it did not decode.
    pub error: String,
}

sluice_types::normal_tuple!(BadLine);

/// A source emitting each JSON line of a file as a `T` (see the module doc).
pub struct JsonFileSource<T> {
    file: LineFile,
    on_bad: OnBadRecord,
    lines: Vec<String>,
    batch: Vec<T>,
    bad: Vec<BadLine>,
    bad_records: u64,
    types: PhantomData<fn() -> T>,
}

impl<T> JsonFileSource<T> {
    /// A source reading the file at `path`, dropping the lines that do not decode.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            file: LineFile::new(path),
            on_bad: OnBadRecord::Drop,
            lines: Vec::with_capacity(SOURCE_BATCH),
            batch: Vec::with_capacity(SOURCE_BATCH),
            bad: Vec::new(),
            bad_records: 0,
            types: PhantomData,
        }
    }

    /// Says what to do with a line that does not decode; [`OnBadRecord::SideOutput`] needs
    /// the source to have output port 1, of [`BadLine`]s.
    pub fn on_bad_record(mut self, policy: OnBadRecord) -> Self {
        self.on_bad = policy;
        self
    }
}

impl<T: Tuple + DeserializeOwned> TypedSource for JsonFileSource<T> {
    type Out = T;
}

impl<T: Tuple + DeserializeOwned> Source for JsonFileSource<T> {
    fn start(&mut self, _ctx: &OperatorContext) -> Result<(), OperatorError> {
        self.file.open()
    }

    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let first = self.file.lines() + 1;
        let Some(produced) = self.file.pull(&mut self.lines, SOURCE_BATCH)? else {
            return Ok(Produced::Exhausted);
        };
        for (line, text) in (first..).zip(self.lines.drain(..)) {
            if text.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<T>(&text) {
                Ok(value) => self.batch.push(value),
                Err(error) => {
                    self.bad_records += 1;
                    let path = self.file.path().display().to_string();
                    match self.on_bad {
                        OnBadRecord::Drop => {}
                        OnBadRecord::SideOutput => self.bad.push(BadLine {
                            path,
                            line,
                            text,
                            error: error.to_string(),
                        }),
                        OnBadRecord::Fail => {
                            return Err(OperatorError::Failed(format!(
                                "{path}: line {line} does not decode: {error}"
                            )))
                        }
                    }
                }
            }
        }
        out.emit_batch(0, &mut self.batch)?;
        if !self.bad.is_empty() {
            out.emit_batch(1, &mut self.bad)?;
        }
        Ok(produced)
    }

    fn resumable(&self) -> bool {
        true
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Ok(self.file.snapshot())
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        self.file.restore(snapshot)
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        let mut report = sluice_ops::counter_report(&[("bad_records", self.bad_records)]);
        self.file.report(&mut report);
        Ok(report)
    }
}

/// Writes each tuple as one JSON line (through a [`StreamSink`]: [`JsonSink`]). A tuple whose
/// `Serialize` fails (a map with keys that are not strings) fails the job, saying why.
pub struct JsonEncoder<T>(Json<T>);

impl<T> Default for JsonEncoder<T> {
    fn default() -> Self {
        Self(Json::new())
    }
}

impl<T: Serialize + DeserializeOwned> TupleEncoder<T> for JsonEncoder<T> {
    fn encode(&mut self, tuple: &T, out: &mut Vec<u8>) -> Result<(), OperatorError> {
        self.0
            .encode(tuple, out)
            .map_err(|e| OperatorError::Failed(format!("a tuple does not encode as JSON: {e}")))?;
        out.push(b'\n');
        Ok(())
    }
}

/// A sink writing tuples as JSON lines to a file, standard output or TCP.
pub type JsonSink<T> = StreamSink<T, JsonEncoder<T>>;

impl<T: Tuple + Serialize + DeserializeOwned> StreamSink<T, JsonEncoder<T>> {
    /// A sink writing every tuple as one JSON line to `target`.
    pub fn json(target: ByteTarget) -> Self {
        Self::new(target, JsonEncoder::default())
    }
}
