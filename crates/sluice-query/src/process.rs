//! The Sluice operators that run stream processes: [`SpOperator`] for a stream process that
//! reads others (one input port per producer, in the order its `extract` or `merge` names
//! them; an element's `from` is that port) and [`SpSource`] for one whose subquery reads a
//! generator. Each compiles its [`Pipeline`] into a [`Chain`] of stages when the job starts
//! and pushes every element through it; when all its producers have ended (or its generator
//! has) it ends the chain, so an aggregate emits its result, and its stream ends.
//!
//! The client (the query's top-level expression) is an [`SpOperator`] whose results go to
//! `sluice query` instead of an output port: over a Unix socket in the launching process's
//! private directory, as frames of a 4-byte little-endian length and the value's postcard
//! encoding ([`ClientReader`] reads them), flushed after every value so results show as they
//! arrive.
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

use sluice_graph::{
    expect_tuple, Operator, OperatorContext, OperatorError, OperatorReport, Output, Produced,
    Source,
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

/// Runs the subquery of a stream process that reads other stream processes.
pub struct SpOperator {
    name: String,
    pipeline: Pipeline,
    chain: Option<Chain>,
    target: Target,
    bytes_in: u64,
    elements_in: u64,
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
                Target::Client(_, writer) => send_to_client(writer.as_mut(), &v),
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
        result.map_err(|e| OperatorError::Failed(format!("{}: {e}", self.name)))
    }
}

/// Writes one value to the client's socket: its length, then its encoding.
fn send_to_client(
    writer: Option<&mut BufWriter<UnixStream>>,
    value: &Value,
) -> Result<(), OperatorError> {
    let Some(writer) = writer else {
        return Err(OperatorError::Failed("the client is not connected".into()));
    };
    let bytes = postcard::to_allocvec(value)
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
        let chain = self
            .pipeline
            .chain()
            .map_err(|e| OperatorError::Failed(format!("{}: {e}", self.name)))?;
        self.chain = Some(chain);
        if let Target::Client(path, writer) = &mut self.target {
            let stream = UnixStream::connect(&*path)
                .map_err(|e| OperatorError::io(format!("connect to {}", path.display()), e))?;
            *writer = Some(BufWriter::new(stream));
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
        self.run(out, |chain, emit| chain.end(emit))
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        Ok(self.report())
    }
}

/// Runs the subquery of a stream process that reads a generator (or a few values).
pub struct SpSource {
    inner: SpOperator,
    generator: Option<Box<dyn Generator>>,
}

impl SpSource {
    /// The stream process `name` running `pipeline`.
    pub fn new(name: &str, pipeline: Pipeline) -> Self {
        Self {
            inner: SpOperator::new(name, pipeline),
            generator: None,
        }
    }
}

impl Source for SpSource {
    fn start(&mut self, ctx: &OperatorContext) -> Result<(), OperatorError> {
        self.inner.start(ctx)?;
        self.generator = self
            .inner
            .pipeline
            .generator()
            .map_err(|e| OperatorError::Failed(format!("{}: {e}", self.inner.name)))?;
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
            let name = &self.inner.name;
            let value = next.map_err(|e| OperatorError::Failed(format!("{name}: {e}")))?;
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

    /// Accepts the client and hands every value it sends to `each` until it closes the
    /// connection or `each` returns `false`; gives up waiting for the client once `done` is
    /// set (the job ended without it).
    pub fn read(
        self,
        done: &AtomicBool,
        mut each: impl FnMut(Value) -> bool,
    ) -> Result<(), String> {
        let mut stream = loop {
            match self.listener.accept() {
                Ok((stream, _)) => break stream,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if done.load(Ordering::Acquire) {
                        return Ok(());
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(format!("the client's socket: {e}")),
            }
        };
        stream
            .set_nonblocking(false)
            .map_err(|e| format!("the client's socket: {e}"))?;
        let mut buffer = Vec::new();
        loop {
            let mut len = [0u8; 4];
            match stream.read_exact(&mut len) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(format!("reading the client's results: {e}")),
            }
            let len = u32::from_le_bytes(len) as usize;
            if len > MAX_FRAME {
                return Err(format!(
                    "the client sent a frame of {len} bytes, over the limit of {MAX_FRAME}"
                ));
            }
            buffer.resize(len, 0);
            stream
                .read_exact(&mut buffer)
                .map_err(|e| format!("reading the client's results: {e}"))?;
            let value: Value = postcard::from_bytes(&buffer)
                .map_err(|e| format!("the client sent a malformed result: {e}"))?;
            if !each(value) {
                return Ok(());
            }
        }
    }
}
