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

use std::fs::File;
use std::path::PathBuf;

use sluice_graph::{OperatorContext, OperatorError, OperatorReport, Output, Produced, Source};

use crate::framing::{FrameCounters, FrameDecoder, FrameReader, LineDecoder, Pulled};
use sluice_ops::SOURCE_BATCH;

/// A source emitting the lines of a text file (see the module doc).
pub struct TextFileSource {
    path: PathBuf,
    decoder: LineDecoder,
    reader: Option<FrameReader<File, LineDecoder>>,
    ended: bool,
    lines: u64,
    counters: FrameCounters,
    batch: Vec<String>,
}

impl TextFileSource {
    /// A source reading the file at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            decoder: LineDecoder::default(),
            reader: None,
            ended: false,
            lines: 0,
            counters: FrameCounters::default(),
            batch: Vec::with_capacity(SOURCE_BATCH),
        }
    }

    /// Refuses lines longer than `bytes` (their ending not counted).
    pub fn max_line_bytes(mut self, bytes: usize) -> Self {
        self.decoder = LineDecoder::new(bytes);
        self
    }
}

impl Source for TextFileSource {
    fn start(&mut self, _ctx: &OperatorContext) -> Result<(), OperatorError> {
        let file = File::open(&self.path)
            .map_err(|e| OperatorError::io(format!("open {}", self.path.display()), e))?;
        self.reader = Some(FrameReader::new(file, self.decoder.clone()));
        Ok(())
    }

    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let Some(reader) = self.reader.as_mut().filter(|_| !self.ended) else {
            return Ok(Produced::Exhausted);
        };
        let pulled = reader
            .pull(&mut self.batch, SOURCE_BATCH, &mut self.counters)
            .map_err(|e| OperatorError::io(format!("read {}", self.path.display()), e))?;
        self.lines += self.batch.len() as u64;
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
        let emitted = self.batch.len();
        out.emit_batch(0, &mut self.batch)?;
        Ok(match pulled {
            _ if emitted > 0 => Produced::Emitted(emitted),
            Pulled::Ended => Produced::Exhausted,
            Pulled::Open { arrived: true } => Produced::Emitted(0),
            _ => Produced::Idle,
        })
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        let mut report = OperatorReport::default();
        LineDecoder::report(&self.counters, &mut report);
        Ok(report)
    }
}
