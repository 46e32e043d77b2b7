//! A source reading a text file line by line: each line is a `String` tuple, its `\n` or
//! `\r\n` stripped, emitted in batches of up to [`SOURCE_BATCH`]; the stream ends at the end of
//! the file. (Lines are written to a file by a [`StreamSink`](crate::StreamSink) with a
//! [`ByteTarget::File`](crate::ByteTarget::File).)
//!
//! The file is opened when the job starts, so a missing file fails the job with the
//! operator's name and the path. Bytes that are not UTF-8 are replaced by U+FFFD and the line
//! counted (`invalid_utf8_lines` in the job summary), never an error. A line longer than the
//! maximum ([`DEFAULT_MAX_FRAME`](crate::DEFAULT_MAX_FRAME) unless set) fails the job with the
//! path and line number rather than filling memory. Run it with parallelism 1: every instance
//! would read the whole file.
//!
//! Its position is the number of lines it emitted: a source restored from a checkpoint or a
//! suspension opens the file again and skips that many lines, so it emits exactly what the
//! one it replaces would have emitted next. [`LineFile`] is that reader, shared with the
//! [`json_file`](crate::json_file) source.

use std::fs::File;
use std::path::{Path, PathBuf};

use sluice_graph::{
    KeyedEntries, OperatorContext, OperatorError, OperatorReport, Output, Produced, Snapshot,
    Source,
};
use sluice_ops::{TypedSource, SOURCE_BATCH};

use crate::framing::{FrameCounters, FrameDecoder, FrameReader, LineDecoder, Pulled};

/// The lines of a file, read a batch at a time, with the number of lines read so far (its
/// position: see the module doc).
pub struct LineFile {
    path: PathBuf,
    decoder: LineDecoder,
    reader: Option<FrameReader<File, LineDecoder>>,
    ended: bool,
    /// Lines read so far (taken from the file and handed out, or skipped on a restore).
    lines: u64,
    counters: FrameCounters,
}

impl LineFile {
    /// The lines of the file at `path`, not opened yet.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            decoder: LineDecoder::default(),
            reader: None,
            ended: false,
            lines: 0,
            counters: FrameCounters::default(),
        }
    }

    /// Refuses lines longer than `bytes` (their ending not counted).
    pub fn max_line_bytes(&mut self, bytes: usize) {
        self.decoder = LineDecoder::new(bytes);
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Lines read so far: the number of the next line is one more.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Opens the file and skips the lines a restored position says were read already.
    pub fn open(&mut self) -> Result<(), OperatorError> {
        let file = File::open(&self.path)
            .map_err(|e| OperatorError::io(format!("open {}", self.path.display()), e))?;
        self.reader = Some(FrameReader::new(file, self.decoder.clone()));
        let mut skip = std::mem::take(&mut self.lines);
        let mut skipped = Vec::with_capacity(SOURCE_BATCH);
        while skip > 0 && !self.ended {
            let most = usize::try_from(skip).map_or(SOURCE_BATCH, |n| n.min(SOURCE_BATCH));
            self.pull(&mut skipped, most)?;
            skip -= skipped.len() as u64;
            skipped.clear();
        }
        Ok(())
    }

    /// Reads up to `most` more lines into `batch`; `None` at the end of the file, or before
    /// it is opened.
    pub fn pull(
        &mut self,
        batch: &mut Vec<String>,
        most: usize,
    ) -> Result<Option<Produced>, OperatorError> {
        let Some(reader) = self.reader.as_mut().filter(|_| !self.ended) else {
            return Ok(None);
        };
        let before = batch.len();
        let pulled = reader
            .pull(batch, most, &mut self.counters)
            .map_err(|e| OperatorError::io(format!("read {}", self.path.display()), e))?;
        let read = batch.len() - before;
        self.lines += read as u64;
        match pulled {
            Pulled::Oversized { .. } => {
                return Err(OperatorError::Failed(format!(
                    "{}: line {} is longer than {} bytes",
                    self.path.display(),
                    self.lines + 1,
                    self.decoder.max_frame()
                )));
            }
            Pulled::Ended => self.ended = true,
            Pulled::Open { .. } => {}
        }
        Ok(Some(match pulled {
            _ if read > 0 => Produced::Emitted(read),
            Pulled::Ended => Produced::Exhausted,
            Pulled::Open { arrived: true } => Produced::Emitted(0),
            _ => Produced::Idle,
        }))
    }

    /// The position: the lines read so far.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            operator: self.lines.to_le_bytes().to_vec(),
            keyed: KeyedEntries::default(),
        }
    }

    /// Takes back a position made by [`LineFile::snapshot`], before [`LineFile::open`].
    pub fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        let lines = <[u8; 8]>::try_from(snapshot.operator.as_slice()).map_err(|_| {
            OperatorError::Failed(format!(
                "{}: a file position is 8 bytes, the snapshot holds {}",
                self.path.display(),
                snapshot.operator.len()
            ))
        })?;
        self.lines = u64::from_le_bytes(lines);
        Ok(())
    }

    /// Writes what the reader counted into `report`.
    pub fn report(&self, report: &mut OperatorReport) {
        LineDecoder::report(&self.counters, report);
    }
}

/// A source emitting the lines of a text file (see the module doc).
pub struct TextFileSource {
    file: LineFile,
    batch: Vec<String>,
}

impl TextFileSource {
    /// A source reading the file at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            file: LineFile::new(path),
            batch: Vec::with_capacity(SOURCE_BATCH),
        }
    }

    /// Refuses lines longer than `bytes` (their ending not counted).
    pub fn max_line_bytes(mut self, bytes: usize) -> Self {
        self.file.max_line_bytes(bytes);
        self
    }
}

impl TypedSource for TextFileSource {
    type Out = String;
}

impl Source for TextFileSource {
    fn start(&mut self, _ctx: &OperatorContext) -> Result<(), OperatorError> {
        self.file.open()
    }

    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let Some(produced) = self.file.pull(&mut self.batch, SOURCE_BATCH)? else {
            return Ok(Produced::Exhausted);
        };
        out.emit_batch(0, &mut self.batch)?;
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
        let mut report = OperatorReport::default();
        self.file.report(&mut report);
        Ok(report)
    }
}
