//! The Sluice operators that run stream processes: [`SpOperator`] for a stream process that
//! reads others (one input port per producer, in the order its `extract` or `merge` names
//! them; an element's `from` is that port) and [`SpSource`] for one whose subquery reads a
//! generator. Each compiles its [`Pipeline`] into a [`Chain`] of stages when the job starts
//! and pushes every element through it; when all its producers have ended (or its generator
//! has) it ends the chain, so an aggregate emits its result, and its stream ends.
//!
//! The client (the query's top-level expression) is an [`SpOperator`] whose results go to
//! `sluice query` instead of an output port: over a Unix socket in the launching process's
//! private directory, as frames of a 4-byte little-endian length and a [`Frame`]'s postcard
//! encoding ([`ClientReader`] reads them), flushed after every frame so results show as they
//! arrive.
//!
//! Under checkpoints (`sluice query --checkpoint-every`) every stream process keeps its
//! stages' state in each checkpoint, and one that reads a generator the number of elements
//! the generator made (a resumed one makes them again and passes over them: every generator
//! makes the same elements every run, but one reading a pipe or a terminal, which refuses
//! checkpoints). The client's output is exactly once: it marks each checkpoint's place among
//! its results and each checkpoint's completion, and tells at its start the checkpoint it
//! resumes from; `sluice query` hands on the results up to a checkpoint once it is complete,
//! and drops those a failure makes the client send again ([`ClientReader::read`]). A result
//! then shows once the checkpoint after it is complete (or the query ends).
//!
//! Elements arrive by reference (the runtime owns them) and a stage takes its element by
//! value, so each element is copied once on its way in (for `gen_array`'s 3 MB arrays, a
//! memcpy beside the transport's own copy).
//!
//! Every stream process counts the payload bytes it received (`Value::payload_bytes`) in its
//! report (`bytes_in`, `elements_in`): what `sluice query` reports as moved between stream
//! processes.

use std::io::{BufWriter, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sluice_graph::{
    expect_tuple, CheckpointState, Operator, OperatorContext, OperatorError, OperatorReport,
    Output, Produced, Snapshot, Source,
};
use sluice_types::TupleRef;

use crate::pipeline::{Chain, Pipeline};
use crate::stage::{EvalError, Generator};
use crate::value::Value;

/// The report counter of the payload bytes a stream process received.
pub const BYTES_IN: &str = "bytes_in";
/// The report counter of the elements a stream process received.
pub const ELEMENTS_IN: &str = "elements_in";
/// The largest frame a client sends: the largest tuple any transport carries.
const MAX_FRAME: usize = 1 << 30;
/// Elements a generating stream process emits per call at most.
const BATCH_ELEMENTS: usize = 64;
/// Payload bytes a generating stream process emits per call at most (one element at least).
const BATCH_BYTES: u64 = 1 << 20;

/// Where a stream process's results go.
enum Target {
    /// Its output port.
    Port,
    /// `sluice query`, over the socket at this path (opened when the job starts).
    Client(PathBuf, Option<BufWriter<UnixStream>>),
}

/// What the client sends `sluice query`, a frame at a time.
#[derive(Debug, Serialize, Deserialize)]
pub enum Frame<V = Value> {
    /// The client connected: afresh (`None`) or resumed from a checkpoint, after a failure.
    Start {
        /// The checkpoint it resumed from.
        resumed: Option<u64>,
    },
    /// A result.
    Value(V),
    /// The results before it are in the checkpoint of this number.
    Barrier(u64),
    /// The checkpoint of this number is complete: the job never goes back before it.
    Complete(u64),
    /// The client ended: every result was sent.
    End,
}

/// What a stream process keeps in a checkpoint (or a suspension).
#[derive(Debug, Default, Serialize, Deserialize)]
struct SpState {
    /// Each stage's state, innermost first ([`Chain::state`]).
    stages: Vec<Vec<u8>>,
    bytes_in: u64,
    elements_in: u64,
    /// The elements its generator made (one that reads a generator).
    generated: u64,
    /// The checkpoint it was taken for (`None`: a suspension).
    checkpoint: Option<u64>,
}

/// Runs the subquery of a stream process that reads other stream processes.
pub struct SpOperator {
    name: String,
    pipeline: Pipeline,
    chain: Option<Chain>,
    target: Target,
    bytes_in: u64,
    elements_in: u64,
    /// The state to take back in `start`, once the chain is made.
    restored: Option<SpState>,
}

impl SpOperator {
    /// The stream process `name` running `pipeline`, its results on its output port.
    pub fn new(name: &str, pipeline: Pipeline) -> Self {
        Self {
            name: name.to_string(),
            pipeline,
            chain: None,
            target: Target::Port,
            bytes_in: 0,
            elements_in: 0,
            restored: None,
        }
    }

    /// The client running `pipeline`, its results sent to the socket at `socket`.
    pub fn client(pipeline: Pipeline, socket: &Path) -> Self {
        Self {
            target: Target::Client(socket.to_path_buf(), None),
            ..Self::new("client", pipeline)
        }
    }

    fn report(&self) -> OperatorReport {
        let mut report = OperatorReport::default();
        report.counters.insert(BYTES_IN.into(), self.bytes_in);
        report.counters.insert(ELEMENTS_IN.into(), self.elements_in);
        report
    }

    /// Its state for a checkpoint (`Some`) or a suspension, `generated` elements made by its
    /// generator.
    fn state(&self, checkpoint: Option<u64>, generated: u64) -> Result<Snapshot, OperatorError> {
        let stages = match &self.chain {
            Some(chain) => chain.state().map_err(|e| self.failed(e))?,
            None => Vec::new(),
        };
        Snapshot::whole(&SpState {
            stages,
            bytes_in: self.bytes_in,
            elements_in: self.elements_in,
            generated,
            checkpoint,
        })
    }

    /// Keeps the state of `snapshot` for `start`; the elements its generator had made.
    fn restore_state(&mut self, snapshot: Snapshot) -> Result<u64, OperatorError> {
        if snapshot.is_empty() {
            return Ok(0);
        }
        let state: SpState = snapshot.decode_whole()?;
        (self.bytes_in, self.elements_in) = (state.bytes_in, state.elements_in);
        let generated = state.generated;
        self.restored = Some(state);
        Ok(generated)
    }

    fn failed(&self, e: EvalError) -> OperatorError {
        OperatorError::Failed(format!("{}: {e}", self.name))
    }

    /// Sends `frame` to the client's socket, for a client.
    fn tell_client(&mut self, frame: &Frame<&Value>) -> Result<(), OperatorError> {
        match &mut self.target {
            Target::Port => Ok(()),
            Target::Client(_, writer) => send_to_client(writer.as_mut(), frame),
        }
    }

    /// Runs `step` on the chain, its results emitted to the target.
    fn run(
        &mut self,
        out: &mut Output<'_>,
        step: impl FnOnce(&mut Chain, &mut crate::pipeline::Out<'_>) -> Result<(), EvalError>,
    ) -> Result<(), OperatorError> {
        let Some(chain) = self.chain.as_mut() else {
            return Err(OperatorError::Failed(
                "the stream process did not start".into(),
            ));
        };
        let mut failure = None;
        let mut emit = |v: Value| {
            let sent = match &mut self.target {
                Target::Port => out.emit(0, v),
                Target::Client(_, writer) => send_to_client(writer.as_mut(), &Frame::Value(&v)),
            };
            sent.map_err(|e| {
                failure = Some(e);
                EvalError {
                    function: "emit".into(),
                    message: "the result could not be sent".into(),
                }
            })
        };
        let result = step(chain, &mut emit);
        if let Some(e) = failure {
            return Err(e);
        }
        result.map_err(|e| self.failed(e))
    }
}

/// Writes one frame to the client's socket: its length, then its encoding.
fn send_to_client(
    writer: Option<&mut BufWriter<UnixStream>>,
    frame: &Frame<&Value>,
) -> Result<(), OperatorError> {
    let Some(writer) = writer else {
        return Err(OperatorError::Failed("the client is not connected".into()));
    };
    let bytes = postcard::to_allocvec(frame)
        .map_err(|e| OperatorError::Failed(format!("a result cannot be encoded: {e}")))?;
    let len = u32::try_from(bytes.len())
        .ok()
        .filter(|&n| n as usize <= MAX_FRAME)
        .ok_or_else(|| {
            OperatorError::Failed(format!(
                "a result of {} bytes is over the client's limit of {MAX_FRAME}",
                bytes.len()
            ))
        })?;
    let io = |e| OperatorError::io("sending a result to sluice query", e);
    writer.write_all(&len.to_le_bytes()).map_err(io)?;
    writer.write_all(&bytes).map_err(io)?;
    writer.flush().map_err(io)
}

impl Operator for SpOperator {
    fn start(&mut self, _ctx: &OperatorContext) -> Result<(), OperatorError> {
        let mut chain = self.pipeline.chain().map_err(|e| self.failed(e))?;
        let restored = self.restored.take();
        if let Some(state) = &restored {
            chain.restore(&state.stages).map_err(|e| self.failed(e))?;
        }
        self.chain = Some(chain);
        if let Target::Client(path, writer) = &mut self.target {
            let stream = UnixStream::connect(&*path)
                .map_err(|e| OperatorError::io(format!("connect to {}", path.display()), e))?;
            *writer = Some(BufWriter::new(stream));
            let resumed = restored.and_then(|state| state.checkpoint);
            self.tell_client(&Frame::Start { resumed })?;
        }
        Ok(())
    }

    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let value = expect_tuple::<Value>(port, tuple)?.clone();
        self.bytes_in += value.payload_bytes();
        self.elements_in += 1;
        self.run(out, |chain, emit| chain.push(port, value, emit))
    }

    fn finish(&mut self, out: &mut Output<'_>) -> Result<(), OperatorError> {
        self.run(out, |chain, emit| chain.end(emit))?;
        self.tell_client(&Frame::End)
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        self.state(None, 0)
    }

    /// Its state; a client marks the checkpoint's place among its results.
    fn checkpoint(&mut self, checkpoint: u64) -> Result<CheckpointState, OperatorError> {
        self.tell_client(&Frame::Barrier(checkpoint))?;
        self.state(Some(checkpoint), 0).map(CheckpointState::Now)
    }

    /// A client tells `sluice query` that the results before the checkpoint may be shown.
    fn checkpoint_complete(&mut self, checkpoint: u64) -> Result<(), OperatorError> {
        self.tell_client(&Frame::Complete(checkpoint))
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        self.restore_state(snapshot).map(drop)
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        Ok(self.report())
    }
}

/// Runs the subquery of a stream process that reads a generator (or a few values).
pub struct SpSource {
    inner: SpOperator,
    generator: Option<Box<dyn Generator>>,
    /// The elements its generator made so far.
    generated: u64,
}

impl SpSource {
    /// The stream process `name` running `pipeline`.
    pub fn new(name: &str, pipeline: Pipeline) -> Self {
        Self {
            inner: SpOperator::new(name, pipeline),
            generator: None,
            generated: 0,
        }
    }
}

impl Source for SpSource {
    /// A resumed one makes its generator pass over the elements it had made.
    fn start(&mut self, ctx: &OperatorContext) -> Result<(), OperatorError> {
        self.inner.start(ctx)?;
        let mut generator = self
            .inner
            .pipeline
            .generator()
            .map_err(|e| self.inner.failed(e))?;
        if let Some(generator) = &mut generator {
            generator
                .skip(self.generated)
                .map_err(|e| self.inner.failed(e))?;
        }
        self.generator = generator;
        Ok(())
    }

    /// Unless its generator reads a pipe, a socket or a terminal.
    fn resumable(&self) -> bool {
        self.inner.pipeline.replays()
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        self.inner.state(None, self.generated)
    }

    fn checkpoint(&mut self, checkpoint: u64) -> Result<Snapshot, OperatorError> {
        self.inner.state(Some(checkpoint), self.generated)
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        self.generated = self.inner.restore_state(snapshot)?;
        Ok(())
    }

    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let Some(generator) = self.generator.as_mut() else {
            return Ok(Produced::Exhausted);
        };
        let (mut elements, mut bytes) = (0, 0);
        while elements < BATCH_ELEMENTS && bytes < BATCH_BYTES {
            let Some(next) = generator.next() else {
                self.generator = None;
                return Ok(if elements == 0 {
                    Produced::Exhausted
                } else {
                    Produced::Emitted(elements)
                });
            };
            let value = next.map_err(|e| self.inner.failed(e))?;
            self.generated += 1;
            bytes += value.payload_bytes();
            elements += 1;
            self.inner
                .run(out, |chain, emit| chain.push(0, value, emit))?;
        }
        Ok(Produced::Emitted(elements))
    }

    fn finish(&mut self, out: &mut Output<'_>) -> Result<(), OperatorError> {
        self.inner.finish(out)
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        self.inner.stop()
    }
}

/// The launching side of the client's socket: accepts the client's one connection and reads
/// the values it sends.
pub struct ClientReader {
    dir: tempfile::TempDir,
    listener: UnixListener,
}

impl ClientReader {
    /// A listener on a new socket in a private directory (mode 0700).
    pub fn bind() -> std::io::Result<Self> {
        let dir = tempfile::Builder::new().prefix("sluice-query-").tempdir()?;
        let listener = UnixListener::bind(dir.path().join("client.sock"))?;
        listener.set_nonblocking(true)?;
        Ok(Self { dir, listener })
    }

    /// The socket's path, which the client connects to.
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("client.sock")
    }

    /// Accepts the client and hands every result it sends to `each` until it ends or `each`
    /// returns `false`; gives up waiting for the client once `done` is set (the job ended
    /// without it).
    ///
    /// With `exactly_once` (a job that takes checkpoints), a result is handed on once the
    /// checkpoint after it is complete, or the client ended, and a client that dies does not
    /// end the reading: the job is restarted, its new client connects, and the results the
    /// failed one sent after the checkpoint it resumes from are dropped (it sends them again).
    pub fn read(
        self,
        done: &AtomicBool,
        exactly_once: bool,
        mut each: impl FnMut(Value) -> bool,
    ) -> Result<(), String> {
        let mut held = Held::default();
        loop {
            let Some(mut stream) = self.accept(done)? else {
                return Ok(());
            };
            loop {
                let frame = match read_frame(&mut stream)? {
                    Some(frame) => frame,
                    // The client died: unless checkpoints restart it, the job failed.
                    None if exactly_once => break,
                    None => return Ok(()),
                };
                let more = match frame {
                    Frame::Value(value) if !exactly_once => each(value),
                    Frame::Value(value) => {
                        held.results.push(value);
                        true
                    }
                    Frame::Barrier(checkpoint) => {
                        held.barriers.push((checkpoint, held.results.len()));
                        true
                    }
                    Frame::Complete(checkpoint) => held.hand_on(Some(checkpoint), &mut each),
                    Frame::Start { resumed } => {
                        let more = resumed.is_none_or(|n| held.hand_on(Some(n), &mut each));
                        held = Held::default();
                        more
                    }
                    Frame::End => {
                        held.hand_on(None, &mut each);
                        return Ok(());
                    }
                };
                if !more {
                    return Ok(());
                }
            }
        }
    }

    /// The client's next connection; `None` once `done` is set first.
    fn accept(&self, done: &AtomicBool) -> Result<Option<UnixStream>, String> {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    stream
                        .set_nonblocking(false)
                        .map_err(|e| format!("the client's socket: {e}"))?;
                    return Ok(Some(stream));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if done.load(Ordering::Acquire) {
                        return Ok(None);
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(format!("the client's socket: {e}")),
            }
        }
    }
}

/// The results of a checkpointed job's client not yet handed on, and where its checkpoints'
/// barriers fell among them.
#[derive(Default)]
struct Held {
    results: Vec<Value>,
    /// Each checkpoint's barrier: its number and the held results before it.
    barriers: Vec<(u64, usize)>,
}

impl Held {
    /// Hands on the results before the barrier of `checkpoint` (all of them for `None`);
    /// whether `each` wants more.
    fn hand_on(&mut self, checkpoint: Option<u64>, each: &mut impl FnMut(Value) -> bool) -> bool {
        let upto = match checkpoint {
            None => self.results.len(),
            Some(n) => match self.barriers.iter().find(|(b, _)| *b == n) {
                Some(&(_, before)) => before,
                None => return true,
            },
        };
        self.barriers.retain_mut(|(_, before)| {
            *before = before.saturating_sub(upto);
            *before > 0
        });
        let handed: Vec<Value> = self.results.drain(..upto).collect();
        handed.into_iter().all(each)
    }
}

/// The client's next frame; `None` at the end of the connection.
fn read_frame(stream: &mut UnixStream) -> Result<Option<Frame>, String> {
    let mut len = [0u8; 4];
    match stream.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(format!("reading the client's results: {e}")),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(format!(
            "the client sent a frame of {len} bytes, over the limit of {MAX_FRAME}"
        ));
    }
    let mut buffer = vec![0; len];
    stream
        .read_exact(&mut buffer)
        .map_err(|e| format!("reading the client's results: {e}"))?;
    postcard::from_bytes(&buffer)
        .map(Some)
        .map_err(|e| format!("the client sent a malformed frame: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `frames` over a new connection to `path`, then closes it.
    fn connection(path: &Path, frames: &[Frame<&Value>]) {
        let mut writer = Some(BufWriter::new(UnixStream::connect(path).unwrap()));
        for frame in frames {
            send_to_client(writer.as_mut(), frame).unwrap();
        }
    }

    #[test]
    fn exactly_once_results_survive_a_client_that_dies_after_a_checkpoint() {
        let reader = ClientReader::bind().unwrap();
        let path = reader.path();
        let v: Vec<Value> = (1..=6).map(Value::Integer).collect();
        let client = std::thread::spawn(move || {
            // The first client dies after sending 5, past checkpoint 2's barrier.
            connection(
                &path,
                &[
                    Frame::Start { resumed: None },
                    Frame::Value(&v[0]),
                    Frame::Value(&v[1]),
                    Frame::Barrier(1),
                    Frame::Value(&v[2]),
                    Frame::Complete(1),
                    Frame::Value(&v[3]),
                    Frame::Barrier(2),
                    Frame::Value(&v[4]),
                ],
            );
            // Its successor resumes from checkpoint 2 and sends 5 again.
            connection(
                &path,
                &[
                    Frame::Start { resumed: Some(2) },
                    Frame::Value(&v[4]),
                    Frame::Value(&v[5]),
                    Frame::End,
                ],
            );
        });
        let mut got = Vec::new();
        let done = AtomicBool::new(false);
        reader
            .read(&done, true, |value| {
                got.push(value);
                true
            })
            .unwrap();
        client.join().unwrap();
        assert_eq!(got, (1..=6).map(Value::Integer).collect::<Vec<_>>());
    }
}
