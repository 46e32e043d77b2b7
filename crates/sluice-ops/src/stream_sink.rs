//! The sink that writes tuples into a byte stream: a file, standard output or a TCP
//! connection ([`ByteTarget`]), each tuple turned into bytes by a [`TupleEncoder`] (lines,
//! length-prefixed frames, CSV records).
//!
//! The target is opened when the job starts, so a path that cannot be created or a server
//! that cannot be reached fails the job with the operator's name and the path or address.
//! Bytes are gathered in a buffer and written when it holds [`FLUSH_BYTES`] (or a set number
//! of tuples, [`StreamSink::flush_every`]), at the end of the stream (`finish`, which a job
//! stop's drain also calls) and in `stop`; nothing handed to the sink is lost.
//!
//! Standard output is written under its lock, a buffer at a time. When the reader of a pipe
//! goes away (`sluice run ... | head -1`) the sink stops writing quietly: it counts
//! `broken_pipe` (1) and the `tuples_not_written`, and the job goes on.
//!
//! A file is an [`OutputFile`]: written under a temporary name beside it, made when the job
//! starts (so a directory that cannot be written fails the job before any input is read), and
//! renamed over the path at the end of the stream; a sink that fails or a job that fails
//! removes it, so a full disk never leaves a file cut off mid-record.
//!
//! A job that takes checkpoints makes a file exactly once: at its first checkpoint the sink's
//! file becomes a [`StagedOutput`], which closes what was written since the last checkpoint as
//! a pending part, publishes the parts into the path when their checkpoint completes, and on
//! recovery from a checkpoint publishes what it held pending and cuts the path to what it
//! accounts for (see [`staged_output`](crate::staged_output) for the part files, their names
//! and where they live). A sink that starts afresh removes the part files a failed earlier
//! attempt left. Standard output, a TCP connection and a file that is not a regular file
//! (a device, a pipe) cannot be taken back: through checkpoints they are *at least once*
//! (what was written after the checkpoint a job recovers from is written again).
//!
//! A job suspended to be redeployed ([`Operator::snapshot`]) has the sink write what it holds
//! and keep its counts and its temporary file; resumed, it opens that file where it left it
//! (cut to the bytes it had written, then appended to) instead of starting anew, and opens a
//! TCP target anew.

use std::fmt::{self, Display};
use std::io::{self, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sluice_graph::{
    expect_tuple, CheckpointState, Operator, OperatorContext, OperatorError, OperatorReport,
    Output, Snapshot,
};
use sluice_types::{Tuple, TupleRef};

use crate::counters::{add_counters, counter_report};
use crate::framing::{DisplayLine, LengthEncoder, LineEncoder};
use crate::net::TcpEndpoint;
use crate::output_file::OutputFile;
use crate::staged_output::{discard_stale_parts, StagedOutput, StagedState};

/// Bytes a [`StreamSink`] gathers before it writes them.
pub const FLUSH_BYTES: usize = 64 << 10;

/// How long a write to a TCP peer may make no progress before the sink fails (a peer that
/// stops reading must not keep a job from stopping).
const TCP_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Turns a tuple into the bytes a [`StreamSink`] writes.
pub trait TupleEncoder<T>: Send {
    /// Appends the bytes of `tuple` to `out`; on an error `out` is as it was.
    fn encode(&mut self, tuple: &T, out: &mut Vec<u8>) -> Result<(), OperatorError>;

    /// The sink goes on from a state in which it had written tuples (a suspended job
    /// resumed, a job recovered from a checkpoint): what the encoder writes once before the
    /// first tuple (a CSV header) is written already. The default has nothing of the kind.
    fn resume(&mut self) {}
}

/// Where a [`StreamSink`] writes.
#[derive(Debug, Clone)]
pub enum ByteTarget {
    /// A file, begun under a temporary name when the job starts and renamed over the path at
    /// the end of the stream ([`OutputFile`]); through checkpoints, published a part at a
    /// time as they complete, exactly once ([`StagedOutput`]).
    File(PathBuf),
    /// The process's standard output: at least once through a recovery from a checkpoint.
    Stdout,
    /// A TCP connection, to a server or from the one client of a listener: at least once
    /// through a recovery from a checkpoint.
    Tcp(TcpEndpoint),
}

impl ByteTarget {
    /// The file at `path`.
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self::File(path.into())
    }

    /// Opens the target for writing as instance `instance`: a new file (the part files of a
    /// failed earlier attempt removed), the temporary file a suspended sink kept, or a
    /// checkpoint's staged output recovered, as `resume` says.
    fn open(&self, resume: Resume<'_>, instance: usize) -> Result<Opened, OperatorError> {
        Ok(match self {
            Self::File(path) => {
                let (doing, opened) = match resume {
                    Resume::Afresh => (
                        "create",
                        discard_stale_parts(path, instance)
                            .and_then(|()| OutputFile::create(path))
                            .map(Opened::File),
                    ),
                    Resume::Kept(partial, offset) => (
                        "resume",
                        OutputFile::resume(path, partial, offset).map(Opened::File),
                    ),
                    Resume::Staged(state) => (
                        "recover",
                        StagedOutput::resume(path, instance, state.clone()).map(Opened::Staged),
                    ),
                };
                opened.map_err(|e| OperatorError::io(format!("{doing} {}", path.display()), e))?
            }
            Self::Stdout => Opened::Stream(Box::new(io::stdout())),
            Self::Tcp(endpoint) => {
                let stream = endpoint.open_one()?;
                let configure = stream
                    .set_nodelay(true)
                    .and_then(|()| stream.set_write_timeout(Some(TCP_WRITE_TIMEOUT)));
                configure.map_err(|e| OperatorError::io(self.to_string(), e))?;
                Opened::Stream(Box::new(stream))
            }
        })
    }
}

/// How a [`StreamSink`] opens its file when it starts.
enum Resume<'a> {
    /// Anew.
    Afresh,
    /// The temporary file a suspended sink kept (`None`: the path, written directly), cut to
    /// its first bytes.
    Kept(Option<&'a Path>, u64),
    /// From a checkpoint's state.
    Staged(&'a StagedState),
}

/// What a [`StreamSink`] keeps of its file in its state.
#[derive(serde::Serialize, serde::Deserialize)]
enum FileState {
    /// Suspended to be redeployed: the temporary file it kept (`None`: none, or written
    /// directly).
    Kept(Option<PathBuf>),
    /// At a checkpoint: what its staged output published and holds pending.
    Staged(StagedState),
}

/// An opened [`ByteTarget`].
enum Opened {
    /// A file, complete once committed.
    File(OutputFile),
    /// A file published with checkpoints.
    Staged(StagedOutput),
    /// Standard output or a TCP connection.
    Stream(Box<dyn Write + Send>),
}

impl Opened {
    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Self::File(file) => file,
            Self::Staged(file) => file,
            Self::Stream(stream) => stream,
        }
    }
}

impl fmt::Display for ByteTarget {
    /// What writing to the target is, for error messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => write!(f, "write {}", path.display()),
            Self::Stdout => f.write_str("write to standard output"),
            Self::Tcp(endpoint) => write!(f, "send to {}", endpoint.address()),
        }
    }
}

/// A sink writing each tuple, encoded by `E`, into a [`ByteTarget`] (see the module doc).
pub struct StreamSink<T, E> {
    target: ByteTarget,
    encoder: E,
    flush_tuples: usize,
    writer: Option<Opened>,
    buffer: Vec<u8>,
    /// Where each tuple in `buffer` ends.
    ends: Vec<usize>,
    bytes_written: u64,
    broken_pipe: bool,
    not_written: u64,
    /// It resumes a suspended job's sink: its file is kept to what it had written.
    resumed: bool,
    /// The temporary file a suspended sink kept, or the staged output of the checkpoint it
    /// was restored from.
    file_state: FileState,
    /// The instance's index, which names its part files.
    instance: usize,
    tuples: PhantomData<fn(&T)>,
}

impl<T, E> StreamSink<T, E> {
    /// A sink writing into `target` what `encoder` makes of each tuple.
    pub fn new(target: ByteTarget, encoder: E) -> Self {
        Self {
            target,
            encoder,
            flush_tuples: usize::MAX,
            writer: None,
            buffer: Vec::with_capacity(FLUSH_BYTES),
            ends: Vec::new(),
            bytes_written: 0,
            broken_pipe: false,
            not_written: 0,
            resumed: false,
            file_state: FileState::Kept(None),
            instance: 0,
            tuples: PhantomData,
        }
    }

    /// Also writes whenever `tuples` tuples are gathered (1: each tuple as it comes, for a
    /// live reader of a socket or a terminal).
    pub fn flush_every(mut self, tuples: usize) -> Self {
        self.flush_tuples = tuples.max(1);
        self
    }

    /// Takes the outcome of a write: a broken pipe on standard output ends the writing
    /// quietly, any other error names the target.
    fn settle(&mut self, written: io::Result<()>) -> Result<(), OperatorError> {
        match written {
            Ok(()) => Ok(()),
            Err(e)
                if e.kind() == io::ErrorKind::BrokenPipe
                    && matches!(self.target, ByteTarget::Stdout) =>
            {
                self.broken_pipe = true;
                self.writer = None;
                Ok(())
            }
            Err(e) => Err(OperatorError::io(self.target.to_string(), e)),
        }
    }

    /// Writes the gathered bytes; on a failure, counts the tuples not written whole.
    fn write_buffer(&mut self) -> Result<(), OperatorError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let mut written = 0;
        let outcome = match &mut self.writer {
            Some(writer) => loop {
                if written == self.buffer.len() {
                    break Ok(());
                }
                match writer.writer().write(&self.buffer[written..]) {
                    Ok(0) => break Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => written += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => break Err(e),
                }
            },
            None => Ok(()),
        };
        let whole = self.ends.partition_point(|&end| end <= written);
        self.not_written += (self.ends.len() - whole) as u64;
        self.bytes_written += written as u64;
        self.buffer.clear();
        self.ends.clear();
        self.settle(outcome)
    }

    /// Writes the gathered bytes and flushes the target.
    fn flush(&mut self) -> Result<(), OperatorError> {
        self.write_buffer()?;
        let flushed = self.writer.as_mut().map_or(Ok(()), |w| w.writer().flush());
        self.settle(flushed)
    }

    /// The instance's state: its counts and what it keeps of its file.
    fn state(&self) -> Result<Snapshot, OperatorError> {
        Snapshot::whole(&(
            self.bytes_written,
            self.not_written,
            self.broken_pipe,
            &self.file_state,
        ))
    }

    /// Flushes the target, and renames a file over its path: the stream is complete.
    fn complete(&mut self) -> Result<(), OperatorError> {
        self.flush()?;
        match self.writer.take() {
            Some(Opened::File(file)) => {
                let committed = file.commit();
                self.settle(committed)
            }
            Some(Opened::Staged(file)) => {
                let published = file.finish().map(|state| {
                    self.file_state = FileState::Staged(state);
                });
                self.settle(published)
            }
            other => {
                self.writer = other;
                Ok(())
            }
        }
    }
}

impl<T: Display> StreamSink<T, LineEncoder<DisplayLine<T>>> {
    /// A sink writing each tuple's `Display` as a line.
    pub fn lines(target: ByteTarget) -> Self {
        Self::new(target, LineEncoder::display())
    }
}

impl<T, F> StreamSink<T, LineEncoder<F>>
where
    F: FnMut(&T, &mut String) -> fmt::Result,
{
    /// A sink writing each tuple as the line `format(tuple, line)` appends to an empty
    /// string.
    pub fn formatted_lines(target: ByteTarget, format: F) -> Self {
        Self::new(target, LineEncoder::new(format))
    }
}

impl<T: Tuple> StreamSink<T, LengthEncoder> {
    /// A sink writing each tuple as a length-prefixed frame of its encoding (at most
    /// [`DEFAULT_MAX_FRAME`](crate::DEFAULT_MAX_FRAME) bytes).
    pub fn frames(target: ByteTarget) -> Self {
        Self::new(target, LengthEncoder::default())
    }
}

impl<T, E> Operator for StreamSink<T, E>
where
    T: Tuple,
    E: TupleEncoder<T>,
{
    fn start(&mut self, ctx: &OperatorContext) -> Result<(), OperatorError> {
        self.instance = ctx.instance;
        let resume = match &self.file_state {
            _ if !self.resumed => Resume::Afresh,
            FileState::Kept(partial) => Resume::Kept(partial.as_deref(), self.bytes_written),
            FileState::Staged(state) => Resume::Staged(state),
        };
        self.writer = Some(self.target.open(resume, self.instance)?);
        Ok(())
    }

    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let tuple = expect_tuple::<T>(port, tuple)?;
        if self.broken_pipe {
            self.not_written += 1;
            return Ok(());
        }
        self.encoder.encode(tuple, &mut self.buffer)?;
        self.ends.push(self.buffer.len());
        if self.buffer.len() >= FLUSH_BYTES || self.ends.len() >= self.flush_tuples {
            self.write_buffer()?;
        }
        Ok(())
    }

    fn finish(&mut self, _out: &mut Output<'_>) -> Result<(), OperatorError> {
        self.complete()
    }

    /// Writes what it holds and keeps its temporary file (a file published with checkpoints
    /// publishes all it holds instead); its state is its counts and that file.
    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        self.flush()?;
        match self.writer.take() {
            Some(Opened::File(file)) => {
                let kept = file.keep();
                let kept = kept.map_err(|e| OperatorError::io(self.target.to_string(), e))?;
                self.file_state = FileState::Kept(kept);
            }
            Some(Opened::Staged(mut file)) => {
                let published = file.publish_all();
                let state = published.map_err(|e| OperatorError::io(self.target.to_string(), e))?;
                self.file_state = FileState::Staged(state);
            }
            other => self.writer = other,
        }
        self.state()
    }

    /// Closes the bytes written since the last checkpoint as a pending part of the file
    /// (which becomes a [`StagedOutput`] at the first checkpoint); its state is its counts
    /// and what the file published and holds pending. Other targets are flushed.
    fn checkpoint(&mut self, checkpoint: u64) -> Result<CheckpointState, OperatorError> {
        self.flush()?;
        let staged = match self.writer.take() {
            Some(Opened::File(file)) if !file.is_direct() => {
                StagedOutput::begin(file, self.instance).map(|f| Some(Opened::Staged(f)))
            }
            other => Ok(other),
        };
        self.writer = staged.map_err(|e| OperatorError::io(self.target.to_string(), e))?;
        if let Some(Opened::Staged(file)) = &mut self.writer {
            let state = file.checkpoint(checkpoint);
            self.file_state = FileState::Staged(
                state.map_err(|e| OperatorError::io(self.target.to_string(), e))?,
            );
        }
        self.state().map(CheckpointState::Now)
    }

    /// Publishes the parts of the checkpoints up to `checkpoint` into the file.
    fn checkpoint_complete(&mut self, checkpoint: u64) -> Result<(), OperatorError> {
        if let Some(Opened::Staged(file)) = &mut self.writer {
            file.complete(checkpoint)
                .map_err(|e| OperatorError::io(self.target.to_string(), e))?;
        }
        Ok(())
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        (
            self.bytes_written,
            self.not_written,
            self.broken_pipe,
            self.file_state,
        ) = snapshot.decode_whole()?;
        if self.bytes_written > 0 {
            self.encoder.resume();
        }
        self.resumed = true;
        Ok(())
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        self.flush()?;
        self.writer = None;
        let mut report = counter_report(&[("bytes_written", self.bytes_written)]);
        if matches!(self.target, ByteTarget::Stdout) {
            add_counters(
                &mut report,
                &[
                    ("broken_pipe", u64::from(self.broken_pipe)),
                    ("tuples_not_written", self.not_written),
                ],
            );
        }
        Ok(report)
    }
}
