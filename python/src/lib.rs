//! Sluice from Python: the native half of the `sluice` package (`sluice._native`), the
//! dataflow builder of `sluice_ops` offered to Python.
//!
//! A Python job is a [`Dataflow`] of streams as in Rust: sources (a Python iterable, or the
//! engine's file, socket and Kafka connectors: [`connectors`]), Python functions as `map`,
//! `stateful_map`, `filter`, `flat_map` and `key_by` operators ([`operators::PythonStep`]),
//! the keyed `count` and `sum`, the windows and the joins running as Rust (the engine's own
//! operators), and sinks: files, Kafka, and `collect`, whose tuples come back as Python
//! objects once the job has run. Tuples are [`value::Value`]s (their module doc says what a
//! Python value becomes and how it is encoded). `Dataflow.run` builds the graph, plans it and
//! runs it with the interpreter released, so each Python operator takes it only while it runs
//! a batch, taking checkpoints and resuming from one when asked; a Python exception in a
//! user's function stops the job (unless it recovers from a checkpoint) and is raised again by
//! `run` under an `OperatorError` naming the operator. A Ctrl-C during `run` stops the job,
//! which drains, and `run` then raises `KeyboardInterrupt`. `Dataflow.plan` returns the plan's
//! text.
//!
//! The Python half (`sluice/__init__.py`, with the type hints in `sluice/_native.pyi`) re-exports
//! these classes.

pub mod connectors;
pub mod operators;
pub mod value;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use sluice_connectors::fluent::{FlowIo, StreamIo};
use sluice_connectors::{
    Delivery, EndAt, KafkaRecord, KafkaSinkConfig, KafkaSourceConfig, StartFrom,
};
use sluice_ops::{
    Collected as Collection, JoinWindow, Shape, Stream as RustStream, Windowed, Windows,
};
use sluice_plan::{PlanFile, PlanOptions, PlanRequest, ThreadSpec};
use sluice_runtime::{CheckpointOptions, RunOptions, StopHandle};

use crate::connectors::KafkaFormat;
use crate::operators::{
    event_time, field_of, Average, Extreme, Failures, Field, Gather, Items, IterableSource,
    PythonStep, Shared, Step, Tally, Total, PYTHON_EXCEPTION,
};
use crate::value::{Carried, CsvRecord, Value};

create_exception!(
    sluice,
    SluiceError,
    PyException,
    "A Sluice job could not be built, planned or run."
);
create_exception!(
    sluice,
    OperatorError,
    SluiceError,
    "A user's function raised in an operator, which stopped the job; the exception it raised \
     is the cause (`__cause__`), its traceback included (under the processes plan, where it \
     was raised in another process, its traceback is in the message)."
);

/// A Rust stream of one of the tuple types a Python stream carries.
#[derive(Clone)]
enum Flow {
    /// Python values.
    Values(RustStream<Value>),
    /// `(key, value)` pairs of a keyed aggregate.
    Pairs(RustStream<(Value, Value)>),
    /// Lines of a text file or a socket.
    Lines(RustStream<String>),
    /// Records of a CSV file.
    Records(RustStream<CsvRecord>),
    /// Windows' results.
    Windows(RustStream<Windowed<Value, Value>>),
    /// Kafka records.
    Kafka(RustStream<KafkaRecord<Value>>),
}

/// Runs `$body` with `$s` bound to the Rust stream of `$flow`, whatever its tuple type.
macro_rules! on_flow {
    ($flow:expr, $s:ident => $body:expr) => {
        match $flow {
            Flow::Values($s) => $body,
            Flow::Pairs($s) => $body,
            Flow::Lines($s) => $body,
            Flow::Records($s) => $body,
            Flow::Windows($s) => $body,
            Flow::Kafka($s) => $body,
        }
    };
}

/// The sinks' collections of a Python job, of one of its tuple types.
#[derive(Clone)]
enum Collections {
    Values(Collection<Value>),
    Pairs(Collection<(Value, Value)>),
    Lines(Collection<String>),
    Records(Collection<CsvRecord>),
    Windows(Collection<Windowed<Value, Value>>),
    Kafka(Collection<KafkaRecord<Value>>),
}

/// What `mutex` holds, as far as it got if a panic left it poisoned.
fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A Sluice job being built: add sources to it, chain operators on their streams, then run it.
///
/// It, its streams and their collections are sendable classes: the interpreter frees an
/// object on whichever thread collects it, which may be a thread running a Python operator
/// of another job (an unsendable object freed there would be leaked, with a warning).
#[pyclass(module = "sluice")]
struct Dataflow {
    flow: sluice_ops::Dataflow,
    failures: Failures,
    /// The graph `plan` built, which `run` takes (a dataflow builds its graph once).
    built: Mutex<Option<sluice_graph::Graph>>,
}

#[pymethods]
impl Dataflow {
    /// A new job called `name` (the name `sluice jobs` shows).
    #[new]
    fn new(name: &str) -> Self {
        Self {
            flow: sluice_ops::Dataflow::new(name),
            failures: Failures::default(),
            built: Mutex::default(),
        }
    }

    /// A source emitting the items of `iterable` (a list, a generator, any iterable), once.
    fn source(&self, name: &str, iterable: Py<PyAny>) -> Stream {
        self.items_source(name, Items::Iterable(iterable.into()), 1)
    }

    /// A source of `parallelism` instances, instance `i` emitting the items of the iterable
    /// `part(i, parallelism)` (a generator of its share, say), called where the instance runs:
    /// under the processes plan, in its own process, so that each process makes only its
    /// share of the input, in parallel with the others.
    fn partitioned_source(
        &self,
        name: &str,
        part: Bound<'_, PyAny>,
        parallelism: usize,
    ) -> PyResult<Stream> {
        callable(&part, "partitioned_source")?;
        Ok(self.items_source(name, Items::Parts(Arc::new(part.unbind())), parallelism))
    }

    /// A source emitting the lines of the text file at `path` as str, without their line
    /// ends; a missing file fails the job naming the path.
    fn read_text(&self, name: &str, path: PathBuf) -> Stream {
        self.stream(Flow::Lines(self.flow.read_text(name, path)))
    }

    /// A source emitting the records of the CSV file at `path`: with `header` (the first
    /// record names the fields) each a dict from the names to the fields, without it a tuple
    /// of the fields; a field is an int, a float or a bool where it reads as one, a str
    /// otherwise. A record with more or fewer fields than the header is counted and skipped.
    #[pyo3(signature = (name, path, header = true))]
    fn read_csv(&self, name: &str, path: PathBuf, header: bool) -> Stream {
        self.stream(Flow::Records(connectors::read_csv(
            &self.flow, name, path, header,
        )))
    }

    /// A source emitting the JSON lines of the file at `path`, each as the value it holds (an
    /// object as a dict, an array as a tuple); a line that is not JSON, or holds an integer
    /// beyond 64 bits, is counted (`bad_records`) and dropped.
    fn read_json(&self, name: &str, path: PathBuf) -> Stream {
        self.stream(Flow::Values(self.flow.read_json(name, path)))
    }

    /// A source emitting the lines of a TCP connection as str: with `listen`, the
    /// connections it accepts at `address` ("host:port") until `connections` of them have
    /// ended (without it, until the job stops); otherwise the one connection it makes to
    /// `address`, ending with it.
    #[pyo3(signature = (name, address, listen = false, connections = None))]
    fn read_socket(
        &self,
        name: &str,
        address: &str,
        listen: bool,
        connections: Option<u64>,
    ) -> PyResult<Stream> {
        let stream = connectors::read_socket(&self.flow, name, address, listen, connections)
            .map_err(PyValueError::new_err)?;
        Ok(self.stream(Flow::Lines(stream)))
    }

    /// A source emitting the values of the records of Kafka topic `topic` at `brokers`
    /// ("host:port[,host:port...]"), each read as `format` says ("json": any value, "str",
    /// "bytes"): from the earliest record (`start="latest"`: only new ones, `"committed"`:
    /// from `group`'s committed offsets), to the end offsets as they are when the job starts
    /// with `bounded`, on as records come otherwise. Checkpoints keep its positions; it reads
    /// only committed transactions. A value that does not decode is counted and dropped.
    /// With `metadata`, each record is a dict of its `key` (bytes or None), `value`, `topic`,
    /// `partition`, `offset`, `timestamp` (seconds since the Unix epoch, or None) and
    /// `headers` (a tuple of (name, bytes or None)), made by an operator `NAME-records`.
    #[pyo3(signature = (
        name, brokers, topic, format = "json", start = "earliest", bounded = false, group = None,
        metadata = false
    ))]
    #[allow(clippy::too_many_arguments)]
    fn read_kafka(
        &self,
        name: &str,
        brokers: &str,
        topic: &str,
        format: &str,
        start: &str,
        bounded: bool,
        group: Option<String>,
        metadata: bool,
    ) -> PyResult<Stream> {
        let format = KafkaFormat::named(format).map_err(PyValueError::new_err)?;
        let mut config = KafkaSourceConfig::new(brokers, topic);
        config.start = match start {
            "earliest" => StartFrom::Earliest,
            "latest" => StartFrom::Latest,
            "committed" => StartFrom::Committed,
            other => {
                return Err(PyValueError::new_err(format!(
                    "no start '{other}': a Kafka source starts at 'earliest', 'latest' or \
                     'committed'"
                )))
            }
        };
        if bounded {
            config.end = EndAt::EndOffsetsAtStart;
        }
        if let Some(group) = group {
            config.group = group;
        }
        let records = self.flow.read_kafka(name, config, format);
        Ok(self.stream(match metadata {
            true => Flow::Values(records.map(&format!("{name}-records"), connectors::record_dict)),
            false => Flow::Kafka(records),
        }))
    }

    /// Builds the job, plans it (`plan`: "fused", one thread; "threaded", a thread per
    /// operator; "processes", a process per operator, each running this script again with its
    /// own interpreter) and runs it to its end; the `collect` results are then readable in
    /// this process under every plan. An exception in a user's function is raised as an
    /// `OperatorError` naming the operator, the exception its cause.
    ///
    /// The default is "fused", not the engine's "auto" (a Rust job's default): auto splits a
    /// job's operators over threads pinned one to a core, as if each ran beside the others,
    /// and a process's Python operators take turns with its one interpreter. It splits a
    /// chain of Python maps in two threads that wait for each other, and WordCount (its
    /// Python source and split on one thread, the count on another) ran at 0.42x and 0.53x
    /// a plain Python loop's speed on two busy cores, where fused it ran at 1.03x to 1.21x.
    ///
    /// `processes=n` (with the "processes" plan) runs the job in `n` processes instead of
    /// one per operator instance: instance `i` of each operator of parallelism `n` in process
    /// `i`, the other operators before the first of them (the sources) in the first process,
    /// those after it (the aggregates, the sinks) in the last; in each process, the instances
    /// past an edge that deals tuples to every process (a keyed `count(parallelism=n)` after
    /// a split) in a thread of their own. `hosts` (a hosts file, as
    /// `sluice run --hosts` reads it; with "processes") places the PEs on its hosts, each
    /// started through its host's `launch` prefix, the edges between hosts carried by TCP.
    ///
    /// `checkpoint_every` seconds (with `checkpoint_dir`) the job takes a checkpoint of its
    /// state (the sources' positions, the Rust operators' state, each `stateful_map`'s
    /// state pickled) into `checkpoint_dir`, and recovers from the last one when a process
    /// or thread of it fails. `from_` (a checkpoint's directory, or a job's checkpoint
    /// directory for its latest) resumes the job from that checkpoint.
    #[pyo3(signature = (
        plan = "fused",
        processes = None,
        checkpoint_every = None,
        checkpoint_dir = None,
        from_ = None,
        hosts = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        py: Python<'_>,
        plan: &str,
        processes: Option<usize>,
        checkpoint_every: Option<f64>,
        checkpoint_dir: Option<PathBuf>,
        from_: Option<PathBuf>,
        hosts: Option<PathBuf>,
    ) -> PyResult<()> {
        let asked = Asked {
            plan,
            processes,
            hosts,
        };
        let checkpoints = match (checkpoint_every, checkpoint_dir) {
            (Some(every), Some(dir)) => Some(CheckpointOptions::new(
                seconds("checkpoint_every", every)?,
                Box::leak(dir.into_boxed_path()),
            )),
            (None, None) => None,
            _ => {
                return Err(PyValueError::new_err(
                    "checkpoint_every and checkpoint_dir go together: a checkpoint every so \
                     many seconds into that directory",
                ))
            }
        };
        let mut options = RunOptions {
            checkpoints,
            ..RunOptions::default()
        };
        if let Some(into) = std::env::var_os(PLAN_ONLY_INTO) {
            return self.plan_only(py, asked, &mut options, into.as_ref());
        }
        let (graph, physical) = self.planned(py, &asked, &mut options)?;
        let from = from_
            .map(|dir| sluice_runtime::load_checkpoint(&dir))
            .transpose()
            .map_err(|e| SluiceError::new_err(e.to_string()))?;
        let (ran, interrupted) = run_interruptibly(py, &graph, &physical, &options, from.as_ref());
        // A job that recovered from a checkpoint after an exception ran to its end: that
        // exception is not raised.
        let failure = self.failures.take().filter(|_| ran.is_err());
        if let Some((operator, cause)) = failure {
            let error = OperatorError::new_err(format!(
                "operator '{operator}' raised {}",
                cause.value(py).repr()?
            ));
            error.set_cause(py, Some(cause));
            return Err(error);
        }
        // Under the processes plan the exception was raised in a PE process: its traceback
        // comes back as text, in the error.
        ran.map_err(|e| match e.to_string() {
            text if text.contains(PYTHON_EXCEPTION) => OperatorError::new_err(text),
            text => SluiceError::new_err(text),
        })?;
        interrupted.map_or(Ok(()), Err)
    }

    /// The plan `run` would run the job on, as `sluice plan` prints it: its processes, their
    /// threads and the operators each runs, and the transport of each edge between them.
    #[pyo3(signature = (plan = "fused", processes = None, hosts = None))]
    fn plan(
        &self,
        py: Python<'_>,
        plan: &str,
        processes: Option<usize>,
        hosts: Option<PathBuf>,
    ) -> PyResult<String> {
        let asked = Asked {
            plan,
            processes,
            hosts,
        };
        let (graph, physical) = self.planned(py, &asked, &mut RunOptions::default())?;
        *locked(&self.built) = Some(graph);
        Ok(physical.to_string())
    }
}

/// The variable `sluice plan SCRIPT` runs a script with: its `run` writes the plan it would
/// run on into this file, as JSON, and ends the script (`SystemExit(0)`) instead of running.
const PLAN_ONLY_INTO: &str = "SLUICE_PLAN_ONLY_INTO";
/// The plan `sluice plan SCRIPT --plan P` asks for instead of the one the script's `run` names.
const PLAN_ONLY_REQUEST: &str = "SLUICE_PLAN_ONLY_REQUEST";

impl Dataflow {
    /// `run` under `sluice plan SCRIPT`: writes the plan into `into` and ends the script.
    fn plan_only(
        &self,
        py: Python<'_>,
        asked: Asked<'_>,
        options: &mut RunOptions,
        into: &std::path::Path,
    ) -> PyResult<()> {
        let instead = std::env::var(PLAN_ONLY_REQUEST).ok();
        let asked = Asked {
            plan: instead.as_deref().unwrap_or(asked.plan),
            ..asked
        };
        let (_, physical) = self.planned(py, &asked, options)?;
        let json =
            serde_json::to_vec(&physical).map_err(|e| SluiceError::new_err(e.to_string()))?;
        std::fs::write(into, json).map_err(|e| {
            SluiceError::new_err(format!(
                "cannot write the plan into {}: {e}",
                into.display()
            ))
        })?;
        Err(pyo3::exceptions::PySystemExit::new_err(0))
    }

    /// The job's graph and the plan `asked` names, with `options` set for it (the processes
    /// plan's interpreter).
    fn planned(
        &self,
        py: Python<'_>,
        asked: &Asked<'_>,
        options: &mut RunOptions,
    ) -> PyResult<(sluice_graph::Graph, sluice_plan::PhysicalPlan)> {
        let plan_options = asked.plan_options()?;
        let processes = asked.processes;
        let request = match (asked.plan, processes) {
            ("fused", None) => PlanRequest::Fused,
            ("threaded", None) => PlanRequest::Threaded,
            ("processes", _) => {
                options.pe_program = Some(rerun_program(py)?);
                PlanRequest::Processes
            }
            (other @ ("fused" | "threaded"), Some(_)) => {
                return Err(PyValueError::new_err(format!(
                    "processes= is for the 'processes' plan, not for '{other}'"
                )))
            }
            (other, _) => {
                return Err(PyValueError::new_err(format!(
                    "no plan '{other}': a Python job runs 'fused', 'threaded' or 'processes'"
                )))
            }
        };
        let built = locked(&self.built).take();
        let graph = match built {
            Some(graph) => graph,
            None => self
                .flow
                .build()
                .map_err(|e| SluiceError::new_err(e.to_string()))?,
        };
        let request = match processes {
            Some(n) => PlanRequest::File(format!("processes={n}"), spread_plan(&graph, n)?),
            None => request,
        };
        let physical = sluice_plan::plan(&graph, &request, &plan_options)
            .map_err(|e| SluiceError::new_err(e.to_string()))?;
        Ok((graph, physical))
    }
}

/// The plan a job's `run` or `plan` asks for: the plan's name, `processes=` and `hosts=`.
struct Asked<'a> {
    plan: &'a str,
    processes: Option<usize>,
    /// A hosts file (TOML, as `sluice run --hosts` reads it): the machines its PEs may run on.
    hosts: Option<PathBuf>,
}

impl Asked<'_> {
    /// What the planner is told: the hosts file, if one is named (only the processes plan
    /// spreads PEs over hosts).
    fn plan_options(&self) -> PyResult<PlanOptions> {
        let Some(path) = &self.hosts else {
            return Ok(PlanOptions::default());
        };
        if self.plan != "processes" {
            return Err(PyValueError::new_err(format!(
                "hosts= is for the 'processes' plan, whose PEs it places on hosts, not for '{}'",
                self.plan
            )));
        }
        let text = sluice_plan::read_text_file(path).map_err(|e| {
            SluiceError::new_err(format!("cannot read hosts file {}: {e}", path.display()))
        })?;
        let hosts = sluice_plan::HostsFile::read(path, &text)
            .map_err(|e| SluiceError::new_err(e.to_string()))?;
        Ok(PlanOptions {
            hosts: Some(hosts),
            ..PlanOptions::default()
        })
    }
}

/// Runs the job on a thread of its own while this one, the interpreter released, waits for it
/// and looks at Python's signals every [`SIGNAL_CHECK`]: a Ctrl-C (`KeyboardInterrupt`, or any
/// exception a signal handler raises) stops the job, which drains, and a second one aborts it.
/// Returns how the job ended and the exception to raise after it, if a signal came.
fn run_interruptibly(
    py: Python<'_>,
    graph: &sluice_graph::Graph,
    plan: &sluice_plan::PhysicalPlan,
    options: &RunOptions,
    from: Option<&sluice_runtime::StoredCheckpoint>,
) -> (Result<(), sluice_runtime::RunError>, Option<PyErr>) {
    let stop = StopHandle::new();
    let (ended, end) = crossbeam_channel::bounded(1);
    std::thread::scope(|scope| {
        let job_stop = stop.clone();
        scope.spawn(move || {
            let started = match from {
                Some(checkpoint) => {
                    sluice_runtime::resume_with(graph, plan, options, &job_stop, checkpoint)
                }
                None => sluice_runtime::start_with(graph, plan, options, &job_stop),
            };
            let ran = started.and_then(sluice_runtime::RunningJob::wait);
            // The receiver waits for this until it has it.
            let _ = ended.send(ran.map(|_| ()));
        });
        let mut interrupted = None;
        loop {
            match py.detach(|| end.recv_timeout(SIGNAL_CHECK)) {
                Ok(ran) => return (ran, interrupted),
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                    let lost = "the job's thread ended without its result".to_string();
                    return (Err(sluice_runtime::RunError::Launch(lost)), interrupted);
                }
            }
            if let Err(signal) = py.check_signals() {
                if stop.is_stopping() {
                    stop.abort();
                } else {
                    stop.stop();
                }
                interrupted.get_or_insert(signal);
            }
        }
    })
}

/// The plan of `graph` in `n` processes (`run(processes=n)`): instance `i` of every operator
/// of parallelism `n` in process `i`; every other operator in the first process when it comes
/// before the first of them in the graph's topological order, in the last otherwise. Refused
/// when no operator has parallelism `n` (the plan would not spread any work).
///
/// A process runs its instances in one thread, but for those past an edge that deals tuples
/// to every instance (a keyed count after a split, say): they make a stage of their own, run
/// by a thread of their own in each process. Otherwise process 0's thread would send to
/// process 1's and process 1's to process 0's, and two threads that feed each other through
/// bounded queues can wait for each other for ever (the planner refuses such a cycle).
fn spread_plan(graph: &sluice_graph::Graph, n: usize) -> PyResult<PlanFile> {
    let order = graph.topological_order();
    let replicated = |id: &sluice_graph::OperatorId| graph.operator(*id).parallelism == n;
    let first = order
        .iter()
        .position(replicated)
        .filter(|_| n > 0)
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "processes={n} puts instance i of each operator of parallelism {n} in process i, \
             and job '{}' has no operator of parallelism {n}: give one parallelism={n} \
             (a map, filter or flat_map)",
                graph.name()
            ))
        })?;
    // Each replicated operator's stage: 0, or one more than a replicated upstream's whose
    // edge to it is not forward (its instances then send to every process).
    let mut stages = vec![0; graph.operators().len()];
    for id in order.iter().filter(|id| replicated(id)) {
        stages[id.0] = graph
            .edges()
            .iter()
            .filter(|e| e.to.operator == *id && replicated(&e.from.operator))
            .map(|e| {
                let across = !matches!(e.partitioning, sluice_graph::Partitioning::Forward);
                stages[e.from.operator.0] + usize::from(across)
            })
            .max()
            .unwrap_or(0);
    }
    let last_stage = stages.iter().copied().max().unwrap_or(0);
    // The operators of each process's threads, by stage.
    let mut processes = vec![vec![Vec::new(); last_stage + 1]; n];
    for (rank, id) in order.iter().enumerate() {
        let op = graph.operator(*id);
        if replicated(id) {
            for (i, process) in processes.iter_mut().enumerate() {
                process[stages[id.0]].push(format!("{}[{i}]", op.name));
            }
        } else if rank < first {
            processes[0][0].push(op.name.clone());
        } else {
            processes[n - 1][last_stage].push(op.name.clone());
        }
    }
    let threads = processes
        .into_iter()
        .enumerate()
        .flat_map(|(i, stages)| {
            let threads = stages.into_iter().enumerate();
            threads
                .filter(|(_, operators)| !operators.is_empty())
                .map(move |(stage, operators)| ThreadSpec {
                    name: match stage {
                        0 => format!("process{i}"),
                        _ => format!("process{i}-stage{stage}"),
                    },
                    operators,
                    core: None,
                    pe: Some(format!("process{i}")),
                    host: None,
                })
        })
        .collect();
    Ok(PlanFile {
        threads,
        ..PlanFile::default()
    })
}

/// How often a running job's `run` looks at Python's signals (a Ctrl-C).
const SIGNAL_CHECK: std::time::Duration = std::time::Duration::from_millis(100);

/// The interpreter each PE process of a job runs this script with: `sys.executable` (a
/// virtual environment's, so the PE imports what this process imports), leaked as
/// [`RunOptions::pe_program`] wants. A script is needed: an interactive interpreter has none
/// to run again.
fn rerun_program(py: Python<'_>) -> PyResult<&'static std::path::Path> {
    let sys = py.import("sys")?;
    let script: String = sys.getattr("argv")?.get_item(0)?.extract()?;
    if script.is_empty() || script == "-" {
        return Err(PyValueError::new_err(
            "the processes plan runs the script again in each process, and an interactive \
             interpreter has no script: run the job from a file",
        ));
    }
    let executable: PathBuf = sys.getattr("executable")?.extract()?;
    Ok(Box::leak(executable.into_boxed_path()))
}

impl Dataflow {
    /// An [`IterableSource`] of `parallelism` instances emitting `items`.
    fn items_source(&self, name: &str, items: Items, parallelism: usize) -> Stream {
        let failures = self.failures.clone();
        let stream = self.flow.source_of::<Value, _, _>(name, move |_| {
            IterableSource::new(items.clone(), failures.clone())
        });
        self.stream(Flow::Values(stream.parallelism(parallelism)))
    }

    fn stream(&self, flow: Flow) -> Stream {
        Stream {
            flow,
            failures: self.failures.clone(),
        }
    }
}

/// A stream of tuples: the output of one operator, which more operators can read.
#[pyclass(module = "sluice")]
struct Stream {
    flow: Flow,
    failures: Failures,
}

impl Stream {
    /// Adds a Python step reading this stream and emitting `O`s.
    fn step<O: operators::Emitted>(
        &self,
        name: &str,
        f: Option<Py<PyAny>>,
        step: Step,
    ) -> RustStream<O> {
        let f: Option<Shared> = f.map(Into::into);
        let failures = self.failures.clone();
        on_flow!(&self.flow, s => add_step(s, name, f, step, failures))
    }

    /// Adds a Python step with `f` run as `parallelism` instances, emitting values.
    fn replicated_step(
        &self,
        name: &str,
        f: Bound<'_, PyAny>,
        step: Step,
        parallelism: usize,
    ) -> Stream {
        self.values(
            self.step(name, Some(f.unbind()), step)
                .parallelism(parallelism),
        )
    }

    fn values(&self, flow: RustStream<Value>) -> Stream {
        Stream {
            flow: Flow::Values(flow),
            failures: self.failures.clone(),
        }
    }
}

/// Adds a [`PythonStep`] reading `stream`.
fn add_step<I: Carried, O: operators::Emitted>(
    stream: &RustStream<I>,
    name: &str,
    f: Option<Shared>,
    step: Step,
    failures: Failures,
) -> RustStream<O> {
    stream.process(name, move |_| {
        PythonStep::<I, O>::new(f.clone(), step.clone(), failures.clone())
    })
}

/// Checks that `f` can be called.
fn callable(f: &Bound<'_, PyAny>, method: &str) -> PyResult<()> {
    if f.is_callable() {
        Ok(())
    } else {
        Err(PyTypeError::new_err(format!(
            "{method} needs a function, not a {}",
            f.get_type().name()?
        )))
    }
}

#[pymethods]
impl Stream {
    /// Emits `f(x)` for every tuple `x`. Its `parallelism` instances (as for `filter` and
    /// `flat_map`) share the stream round robin; see `Dataflow.run`'s `processes`.
    #[pyo3(signature = (name, f, parallelism = 1))]
    fn map(&self, name: &str, f: Bound<'_, PyAny>, parallelism: usize) -> PyResult<Stream> {
        callable(&f, "map")?;
        Ok(self.replicated_step(name, f, Step::Map, parallelism))
    }

    /// Emits what `f(state, x)` returns beside the new state, for every tuple `x`: `f`
    /// returns `(new_state, emitted)`; each instance's state starts as `init()`. The state is
    /// any Python object that pickles: checkpoints keep it pickled, and a job resumed from
    /// one starts from it.
    #[pyo3(signature = (name, init, f, parallelism = 1))]
    fn stateful_map(
        &self,
        name: &str,
        init: Bound<'_, PyAny>,
        f: Bound<'_, PyAny>,
        parallelism: usize,
    ) -> PyResult<Stream> {
        callable(&init, "stateful_map's init")?;
        callable(&f, "stateful_map")?;
        let step = Step::Stateful {
            init: Arc::new(init.unbind()),
        };
        Ok(self.replicated_step(name, f, step, parallelism))
    }

    /// Keeps the tuples `x` for which `f(x)` is true.
    #[pyo3(signature = (name, f, parallelism = 1))]
    fn filter(&self, name: &str, f: Bound<'_, PyAny>, parallelism: usize) -> PyResult<Stream> {
        callable(&f, "filter")?;
        Ok(self.replicated_step(name, f, Step::Filter, parallelism))
    }

    /// Emits every item of the iterable `f(x)` for every tuple `x`.
    #[pyo3(signature = (name, f, parallelism = 1))]
    fn flat_map(&self, name: &str, f: Bound<'_, PyAny>, parallelism: usize) -> PyResult<Stream> {
        callable(&f, "flat_map")?;
        Ok(self.replicated_step(name, f, Step::FlatMap, parallelism))
    }

    /// The stream keyed by `key(x)` (by the tuple itself without `key`), for a keyed
    /// aggregate, a window or a join; `name` is the operator that computes the key. With
    /// `time`, each tuple's event time is `time(x)` in seconds (from 0): windows and joins on
    /// the keyed stream then go by event time, behind watermarks trailing the greatest time
    /// seen by `max_delay` seconds (how far out of order tuples may come).
    #[pyo3(signature = (name, key = None, time = None, max_delay = 0.0))]
    fn key_by(
        &self,
        name: &str,
        key: Option<Bound<'_, PyAny>>,
        time: Option<Bound<'_, PyAny>>,
        max_delay: f64,
    ) -> PyResult<KeyedStream> {
        if let Some(key) = &key {
            callable(key, "key_by")?;
        }
        if let Some(time) = &time {
            callable(time, "key_by's time")?;
        }
        let max_delay = seconds("max_delay", max_delay)?;
        Ok(KeyedStream {
            input: Stream {
                flow: self.flow.clone(),
                failures: self.failures.clone(),
            },
            name: name.to_string(),
            key: key.map(Bound::unbind),
            time: time.map(|t| Arc::new(t.unbind())),
            max_delay,
            emitted: Arc::default(),
        })
    }

    /// Ends the stream in a sink writing each tuple as a line of the text file at `path`:
    /// what Python's `str()` of it writes (a str as itself). The file is written under a
    /// temporary name and renamed at the end; with checkpoints, exactly once.
    fn write_text(&self, name: &str, path: PathBuf) {
        on_flow!(&self.flow, s => connectors::write_text(s, name, path));
    }

    /// Ends the stream in a sink writing each tuple as a record of the CSV file at `path`:
    /// a tuple's items as its fields (`None` an empty one), anything else as one field; a
    /// dict or a tuple inside a tuple fails the job. With checkpoints, exactly once.
    fn write_csv(&self, name: &str, path: PathBuf) {
        on_flow!(&self.flow, s => s.write_csv(name, path));
    }

    /// Ends the stream in a sink writing each tuple as a JSON line of the file at `path` (a
    /// tuple as an array, a dict as an object, bytes as an array of numbers); with
    /// checkpoints, exactly once.
    fn write_json(&self, name: &str, path: PathBuf) {
        on_flow!(&self.flow, s => s.write_json(name, path));
    }

    /// Ends the stream in a sink writing each tuple as the value of a record of Kafka topic
    /// `topic` at `brokers`, as `format` says ("json", "str": its `str()`, "bytes": a bytes
    /// value as it is, anything else as its text). At least once; with `transactional_id`
    /// and checkpoints, exactly once (one transaction a checkpoint, for readers of committed
    /// records: that id names the job, two jobs with it fence each other). Without `key` the
    /// records have none; `key=n` (an int) keys each by item `n` of the tuple, `key="k"` (a
    /// str) by the dict's value under "k", read in Rust (bytes as they are, str as UTF-8,
    /// anything else as its `str()`); a tuple without it is written without a key.
    #[pyo3(signature = (name, brokers, topic, format = "json", transactional_id = None, key = None))]
    #[allow(clippy::too_many_arguments)]
    fn write_kafka(
        &self,
        name: &str,
        brokers: &str,
        topic: &str,
        format: &str,
        transactional_id: Option<String>,
        key: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let key = key.map(|k| connectors::RecordKey::read(&k)).transpose()?;
        let format = KafkaFormat::named(format).map_err(PyValueError::new_err)?;
        let delivery = match transactional_id {
            Some(transactional_id) => Delivery::ExactlyOnce { transactional_id },
            None => Delivery::AtLeastOnce,
        };
        let config = KafkaSinkConfig::new(brokers, topic, delivery);
        on_flow!(&self.flow, s => connectors::write_kafka(s, name, config, format, key.clone()));
        Ok(())
    }

    /// Ends the stream in a sink keeping every tuple it receives; read them with
    /// `Collected.items()` once the job has run. With `parallelism=n` the sink runs as `n`
    /// instances, each keeping what reaches it (after an operator of `n` instances, what that
    /// instance emits, in its thread and under the processes plan in its process, which sends
    /// it back from there); `items()` lists them instance by instance.
    #[pyo3(signature = (name, parallelism = 1))]
    fn collect(&self, name: &str, parallelism: usize) -> Collected {
        let n = parallelism;
        let into = match &self.flow {
            Flow::Values(s) => Collections::Values(s.collect_in(name, n)),
            Flow::Pairs(s) => Collections::Pairs(s.collect_in(name, n)),
            Flow::Lines(s) => Collections::Lines(s.collect_in(name, n)),
            Flow::Records(s) => Collections::Records(s.collect_in(name, n)),
            Flow::Windows(s) => Collections::Windows(s.collect_in(name, n)),
            Flow::Kafka(s) => Collections::Kafka(s.collect_in(name, n)),
        };
        Collected { into }
    }
}

/// The keyed aggregate `name` of `keyed`: a running one, or with `at_end` one emitting each
/// key's result once, when its input ends; `parallelism` instances, each keeping the keys
/// the key's hash deals it.
fn aggregated<T, F, A>(
    keyed: &sluice_ops::KeyedStream<T, Value, F>,
    name: &str,
    aggregate: A,
    (at_end, parallelism): (bool, usize),
) -> RustStream<(Value, Value)>
where
    T: sluice_types::Tuple,
    F: Fn(&T) -> &Value + Clone + Send + Sync + 'static,
    A: sluice_ops::Aggregate<T, Out = Value>,
{
    let results = if at_end {
        keyed.aggregate_at_end(name, aggregate)
    } else {
        keyed.aggregate(name, aggregate)
    };
    results.parallelism(parallelism)
}

/// A keyed stream of `(key, tuple)` pairs, as the Rust aggregates read it.
type Keyed = sluice_ops::KeyedStream<(Value, Value), Value, fn(&(Value, Value)) -> &Value>;

/// The key of a `(key, tuple)` pair.
fn pair_key(pair: &(Value, Value)) -> &Value {
    &pair.0
}

/// A stream keyed by a function of its tuples: its aggregates keep one state per key. Its
/// aggregates, windows and joins share its key-by operator when they read the same field of
/// the tuples; one reading another field is refused (key the stream again, under another name,
/// for it).
#[pyclass(module = "sluice")]
struct KeyedStream {
    input: Stream,
    name: String,
    key: Option<Py<PyAny>>,
    /// The event time function, if the stream has event times.
    time: Option<Shared>,
    /// How far behind the greatest event time the watermarks trail.
    max_delay: Duration,
    /// The key-by operator's pairs once added: what field they carry, whether it is checked
    /// numeric, and the stream (shared with the copies windows keep).
    emitted: Arc<Mutex<Option<KeyedPairs>>>,
}

/// A key-by operator's output: the field its pairs carry, whether it checks it is a number,
/// and the stream of pairs.
type KeyedPairs = (Field, bool, RustStream<(Value, Value)>);

impl KeyedStream {
    /// The aggregate `name` of each key's `field` (numbers only, as `sum` reads them), at
    /// the end or running, in so many instances (`when`).
    fn numeric<A>(
        &self,
        name: &str,
        field: FieldArg<'_>,
        aggregate: A,
        when: (bool, usize),
    ) -> PyResult<Stream>
    where
        A: sluice_ops::Aggregate<(Value, Value), Out = Value>,
    {
        let field = sum_field(field)?;
        let keyed = Python::attach(|py| self.pairs(py, field, true))?;
        Ok(self.pairs_stream(aggregated(&keyed, name, aggregate, when)))
    }

    /// The least (or, `greatest`, the greatest) of each key's values.
    fn extreme(&self, greatest: bool) -> Extreme {
        Extreme {
            timed: self.time.is_some(),
            greatest,
        }
    }
}

/// `value` seconds, for the parameter `name`; a negative or endless one is a `ValueError`.
fn seconds(name: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| PyValueError::new_err(format!("{name} is seconds from 0, not {value}")))
}

impl KeyedStream {
    /// The key-by operator (the tuples as `(key, field)` pairs, or `(key, (field, t))` with
    /// event times, after which a watermark operator named `NAME-watermarks` follows),
    /// keyed by the pair's key.
    ///
    /// The operators are added once: a second aggregate, window or join of this keyed stream
    /// reading the same field (a count and a windowed count, say) reads the same pairs, and
    /// one reading another field is refused, naming both (key the stream again under another
    /// name for it).
    fn pairs(&self, py: Python<'_>, field: Field, numeric: bool) -> PyResult<Keyed> {
        let mut emitted = locked(&self.emitted);
        let pairs = match &*emitted {
            Some((read, was_numeric, pairs)) if read.same_as(&field) && *was_numeric == numeric => {
                pairs.clone()
            }
            Some((read, was_numeric, _)) => {
                let numbers = |n: bool| if n { ", numbers for a sum" } else { "" };
                return Err(SluiceError::new_err(format!(
                    "key-by '{}' already emits {}{} for another operator, and this one reads \
                     {}{}: key the stream again, under another name, for it",
                    self.name,
                    read.describe(),
                    numbers(*was_numeric),
                    field.describe(),
                    numbers(numeric)
                )));
            }
            None => {
                let pairs = self.add_pairs(py, field.clone(), numeric);
                *emitted = Some((field, numeric, pairs.clone()));
                pairs
            }
        };
        let keyed = pairs.key_by(pair_key as fn(&(Value, Value)) -> &Value);
        Ok(if self.time.is_some() {
            keyed.event_time(event_time)
        } else {
            keyed
        })
    }

    /// Adds the key-by operator (and the watermarks after it, with event times) emitting the
    /// tuples' `field` in `(key, field)` pairs.
    fn add_pairs(&self, py: Python<'_>, field: Field, numeric: bool) -> RustStream<(Value, Value)> {
        let key = self.key.as_ref().map(|k| k.clone_ref(py));
        let time = self.time.clone();
        let mut pairs: RustStream<(Value, Value)> = self.input.step(
            &self.name,
            key,
            Step::KeyBy {
                field,
                numeric,
                time,
            },
        );
        if self.time.is_some() {
            pairs = pairs.watermarks(
                &format!("{}-watermarks", self.name),
                event_time,
                self.max_delay,
            );
        }
        pairs
    }

    fn pairs_stream(&self, flow: RustStream<(Value, Value)>) -> Stream {
        Stream {
            flow: Flow::Pairs(flow),
            failures: self.input.failures.clone(),
        }
    }
}

#[pymethods]
impl KeyedStream {
    /// The running count of each key: `(key, n)` for every tuple, n its key's count so far
    /// (counted in Rust, without calling Python); with `at_end`, each key's `(key, n)` once,
    /// when the stream ends (a bounded stream's totals, without a result per tuple). A
    /// stream keyed by its tuples themselves (`key_by` without `key` and `time`) is counted as
    /// it is, without the key-by operator: the count reads each tuple as its key, and
    /// `key_by`'s name is no operator of its own.
    ///
    /// Every keyed aggregate (`count`, `sum`, `min`, `max`, `mean`) runs as `parallelism`
    /// instances, each key's tuples dealt by its hash to one of them (under the processes
    /// plan with `processes=n`, `parallelism=n` puts instance i in process i).
    #[pyo3(signature = (name, at_end = false, parallelism = 1))]
    fn count(
        &self,
        py: Python<'_>,
        name: &str,
        at_end: bool,
        parallelism: usize,
    ) -> PyResult<Stream> {
        let when = (at_end, parallelism);
        if let (None, None, Flow::Values(values)) = (&self.key, &self.time, &self.input.flow) {
            let itself: fn(&Value) -> &Value = |value| value;
            let keyed = values.key_by(itself);
            return Ok(self.pairs_stream(aggregated(&keyed, name, Tally, when)));
        }
        let keyed = self.pairs(py, Field::Unread, false)?;
        Ok(self.pairs_stream(aggregated(&keyed, name, Tally, when)))
    }

    /// The running sum of each key's `field` (the tuple itself without one; an int `n`:
    /// item `n` of each tuple, read in Rust; a function: what it returns): `(key, total)`
    /// for every tuple, summed in Rust, an int while every field is an int; with `at_end`,
    /// each key's `(key, total)` once, when the stream ends. A field that is not a number
    /// fails the key-by operator.
    #[pyo3(signature = (name, field = None, at_end = false, parallelism = 1))]
    fn sum(
        &self,
        name: &str,
        field: FieldArg<'_>,
        at_end: bool,
        parallelism: usize,
    ) -> PyResult<Stream> {
        let total = Total {
            timed: self.time.is_some(),
        };
        self.numeric(name, field, total, (at_end, parallelism))
    }

    /// The running least of each key's `field` (read as `sum` reads it, a number):
    /// `(key, least)` for every tuple, as the value itself; with `at_end`, once per key when
    /// the stream ends (in Rust).
    #[pyo3(signature = (name, field = None, at_end = false, parallelism = 1))]
    fn min(
        &self,
        name: &str,
        field: FieldArg<'_>,
        at_end: bool,
        parallelism: usize,
    ) -> PyResult<Stream> {
        self.numeric(name, field, self.extreme(false), (at_end, parallelism))
    }

    /// The running greatest of each key's `field` (read as `sum` reads it, a number):
    /// `(key, greatest)` for every tuple; with `at_end`, once per key when the stream ends
    /// (in Rust).
    #[pyo3(signature = (name, field = None, at_end = false, parallelism = 1))]
    fn max(
        &self,
        name: &str,
        field: FieldArg<'_>,
        at_end: bool,
        parallelism: usize,
    ) -> PyResult<Stream> {
        self.numeric(name, field, self.extreme(true), (at_end, parallelism))
    }

    /// The running mean of each key's `field` (read as `sum` reads it, a number), a float:
    /// `(key, mean)` for every tuple; with `at_end`, once per key when the stream ends (in
    /// Rust).
    #[pyo3(signature = (name, field = None, at_end = false, parallelism = 1))]
    fn mean(
        &self,
        name: &str,
        field: FieldArg<'_>,
        at_end: bool,
        parallelism: usize,
    ) -> PyResult<Stream> {
        let timed = self.time.is_some();
        self.numeric(name, field, Average { timed }, (at_end, parallelism))
    }

    /// The keyed stream cut into windows of `size` seconds starting every `slide` seconds
    /// (tumbling without `slide`), by event time when `key_by` was given `time`, by
    /// processing time otherwise; aggregate it with `count` or `sum`.
    #[pyo3(signature = (size, slide = None))]
    fn window(&self, py: Python<'_>, size: f64, slide: Option<f64>) -> PyResult<WindowedStream> {
        let size = seconds("size", size)?;
        let slide = slide.map(|s| seconds("slide", s)).transpose()?;
        self.windows(
            py,
            Shape::Time {
                size,
                slide: slide.unwrap_or(size),
            },
        )
    }

    /// The keyed stream cut into windows of `size` tuples of a key, one every `slide` of
    /// them (tumbling without `slide`); a window's `start` and `end` are the key's tuple
    /// numbers (from 0) of its first tuple and of the one after its last. At the end of the
    /// stream the tuples since a key's last window make one more.
    #[pyo3(signature = (size, slide = None))]
    fn count_window(
        &self,
        py: Python<'_>,
        size: i64,
        slide: Option<i64>,
    ) -> PyResult<WindowedStream> {
        let tuples = |name: &str, n: i64| {
            u64::try_from(n).map_err(|_| {
                PyValueError::new_err(format!("{name} is a number of tuples from 1, not {n}"))
            })
        };
        let size = tuples("size", size)?;
        let slide = slide.map(|s| tuples("slide", s)).transpose()?;
        self.windows(
            py,
            Shape::Count {
                size,
                slide: slide.unwrap_or(size),
            },
        )
    }

    /// The keyed stream cut into sessions: a key's tuples less than `gap` seconds apart (by
    /// event time when `key_by` was given `time`, by processing time otherwise); a session
    /// ends `gap` seconds after its last tuple.
    fn session(&self, py: Python<'_>, gap: f64) -> PyResult<WindowedStream> {
        let gap = seconds("gap", gap)?;
        self.windows(py, Shape::Session { gap })
    }

    /// Joins this stream with `other` (keyed the same way) on equal keys: `(key, x, y)` for
    /// every tuple `x` of this stream and `y` of `other` at most `within` seconds apart, by
    /// event time when both keyed streams have `time`, by arrival otherwise. Runs in Rust.
    fn join(
        &self,
        py: Python<'_>,
        name: &str,
        other: &KeyedStream,
        within: f64,
    ) -> PyResult<Stream> {
        let within = seconds("within", within)?;
        let window = match (self.time.is_some(), other.time.is_some()) {
            (true, true) => JoinWindow::EventTime(within),
            (false, false) => JoinWindow::Arrival(within),
            _ => {
                return Err(PyValueError::new_err(format!(
                    "join '{name}': both keyed streams need event times (key_by's time) or \
                     neither"
                )))
            }
        };
        let timed = self.time.is_some();
        let left = self.pairs(py, Field::Whole, false)?;
        let right = other.pairs(py, Field::Whole, false)?;
        let joined = left.join(name, &right, window, move |l, r| {
            Value::Tuple(Box::new([
                l.0.clone(),
                field_of(l, timed).clone(),
                field_of(r, timed).clone(),
            ]))
        });
        Ok(self.input.values(joined))
    }
}

impl KeyedStream {
    /// A copy of this keyed stream's description (the key-by operator is added when an
    /// aggregate, a window or a join is).
    fn clone_ref(&self, py: Python<'_>) -> KeyedStream {
        KeyedStream {
            input: Stream {
                flow: self.input.flow.clone(),
                failures: self.input.failures.clone(),
            },
            name: self.name.clone(),
            key: self.key.as_ref().map(|k| k.clone_ref(py)),
            time: self.time.clone(),
            max_delay: self.max_delay,
            emitted: self.emitted.clone(),
        }
    }
}

/// A keyed stream cut into windows (`KeyedStream.window`, `count_window` or `session`): each
/// window's aggregate is `(key, start, end, value)`, `start` and `end` in seconds (by
/// processing time, since the Unix epoch), or tuple numbers for windows by count.
#[pyclass(module = "sluice")]
struct WindowedStream {
    keyed: KeyedStream,
    shape: Shape,
}

impl KeyedStream {
    /// This stream cut into windows of `shape`, refused as the engine would refuse it.
    fn windows(&self, py: Python<'_>, shape: Shape) -> PyResult<WindowedStream> {
        let windows = WindowedStream {
            keyed: self.clone_ref(py),
            shape,
        };
        windows.windows().check().map_err(PyValueError::new_err)?;
        Ok(windows)
    }
}

impl WindowedStream {
    /// The engine's windows of this shape, on the key-by's pairs.
    fn windows(&self) -> Windows<(Value, Value)> {
        let mut windows = match self.shape {
            Shape::Count { size, slide } => Windows::sliding_count(size, slide),
            Shape::Time { size, slide } => Windows::sliding(size, slide),
            Shape::Session { gap } => Windows::session(gap),
        };
        if self.keyed.time.is_some() {
            windows = windows.event_time(event_time);
        }
        windows
    }

    /// The window operator `name` folding each key's windows with `aggregate`.
    fn windowed<A>(
        &self,
        py: Python<'_>,
        name: &str,
        field: Field,
        numeric: bool,
        aggregate: A,
    ) -> PyResult<Stream>
    where
        A: sluice_ops::Aggregate<(Value, Value), Out = Value>,
    {
        let results = self
            .keyed
            .pairs(py, field, numeric)?
            .window(self.windows())
            .aggregate(name, aggregate);
        let flow = match self.shape {
            // A count window's bounds are tuple numbers, not times: they cross as ints.
            Shape::Count { .. } => Flow::Values(results.map(&format!("{name}-bounds"), |w| {
                let number = |n: u64| Value::Int(i64::try_from(n).unwrap_or(i64::MAX));
                Value::Tuple(Box::new([
                    w.key.clone(),
                    number(w.start),
                    number(w.end),
                    w.value.clone(),
                ]))
            })),
            Shape::Time { .. } | Shape::Session { .. } => Flow::Windows(results),
        };
        Ok(Stream {
            flow,
            failures: self.keyed.input.failures.clone(),
        })
    }
}

#[pymethods]
impl WindowedStream {
    /// The number of tuples of each key's window: `(key, start, end, n)` as each window
    /// closes (counted in Rust).
    fn count(&self, py: Python<'_>, name: &str) -> PyResult<Stream> {
        self.windowed(py, name, Field::Unread, false, Tally)
    }

    /// The sum of `field` (as `KeyedStream.sum` reads it) over each key's window:
    /// `(key, start, end, total)` as each window closes (summed in Rust).
    #[pyo3(signature = (name, field = None))]
    fn sum(&self, py: Python<'_>, name: &str, field: Option<Bound<'_, PyAny>>) -> PyResult<Stream> {
        let timed = self.keyed.time.is_some();
        self.windowed(py, name, sum_field(field)?, true, Total { timed })
    }

    /// The least `field` (read as `sum` reads it, a number) of each key's window:
    /// `(key, start, end, least)` as each window closes (in Rust).
    #[pyo3(signature = (name, field = None))]
    fn min(&self, py: Python<'_>, name: &str, field: FieldArg<'_>) -> PyResult<Stream> {
        self.extreme(py, name, field, false)
    }

    /// The greatest `field` (read as `sum` reads it, a number) of each key's window:
    /// `(key, start, end, greatest)` as each window closes (in Rust).
    #[pyo3(signature = (name, field = None))]
    fn max(&self, py: Python<'_>, name: &str, field: FieldArg<'_>) -> PyResult<Stream> {
        self.extreme(py, name, field, true)
    }

    /// The mean of `field` (read as `sum` reads it, a number) over each key's window, a
    /// float: `(key, start, end, mean)` as each window closes (in Rust).
    #[pyo3(signature = (name, field = None))]
    fn mean(&self, py: Python<'_>, name: &str, field: FieldArg<'_>) -> PyResult<Stream> {
        let timed = self.keyed.time.is_some();
        self.windowed(py, name, sum_field(field)?, true, Average { timed })
    }

    /// The `field`s (read as `sum` reads it, any value; the tuples without one) of each
    /// key's window, in the order they arrived: `(key, start, end, (x, ...))` as each window
    /// closes (gathered in Rust).
    #[pyo3(signature = (name, field = None))]
    fn values(&self, py: Python<'_>, name: &str, field: FieldArg<'_>) -> PyResult<Stream> {
        let timed = self.keyed.time.is_some();
        self.windowed(py, name, sum_field(field)?, false, Gather { timed })
    }
}

impl WindowedStream {
    /// The window operator `name` keeping each window's least or greatest field.
    fn extreme(
        &self,
        py: Python<'_>,
        name: &str,
        field: FieldArg<'_>,
        greatest: bool,
    ) -> PyResult<Stream> {
        let extreme = self.keyed.extreme(greatest);
        self.windowed(py, name, sum_field(field)?, true, extreme)
    }
}

/// The `field=` argument of an aggregate: what [`sum_field`] reads.
type FieldArg<'py> = Option<Bound<'py, PyAny>>;

/// The field a `sum` reads: the tuple itself without one; an int `n`: item `n`; a function:
/// what it returns.
fn sum_field(field: Option<Bound<'_, PyAny>>) -> PyResult<Field> {
    Ok(match field {
        None => Field::Whole,
        Some(f) if f.is_callable() => Field::Call(Arc::new(f.unbind())),
        Some(n) => Field::Item(n.extract().map_err(|_| {
            PyTypeError::new_err(
                "sum reads a field given as a function or an item number (an int from 0)",
            )
        })?),
    })
}

/// What a `collect` sink received, readable once the job has run.
#[pyclass(module = "sluice")]
struct Collected {
    into: Collections,
}

#[pymethods]
impl Collected {
    /// Every tuple the sink received, in the order each of its instances received them.
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        match &self.into {
            Collections::Values(c) => append_all(&list, c),
            Collections::Pairs(c) => append_all(&list, c),
            Collections::Lines(c) => append_all(&list, c),
            Collections::Records(c) => append_all(&list, c),
            Collections::Windows(c) => append_all(&list, c),
            Collections::Kafka(c) => append_all(&list, c),
        }?;
        Ok(list)
    }

    /// For a stream of `(key, value)` pairs (a keyed aggregate's): the last value of each
    /// key, as a dict (a running count's last value is the key's count).
    fn latest<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let Collections::Pairs(c) = &self.into else {
            return Err(PyTypeError::new_err(
                "latest() reads a keyed aggregate's (key, value) pairs; this sink collected \
                 other tuples: read them with items()",
            ));
        };
        with_collected(c, |parts| {
            let mut last = sluice_types::KeyMap::default();
            for (key, value) in parts.iter().flat_map(|tuples| tuples.iter()) {
                last.insert(key, value);
            }
            let dict = PyDict::new(py);
            for (key, value) in last {
                dict.set_item(key.to_py(py)?, value.to_py(py)?)?;
            }
            Ok(dict)
        })
    }
}

/// Calls `f` with the tuples of `collection`, instance by instance, each instance's in the
/// order they arrived (as `sluice_ops::collected` lists them, without copying them).
fn with_collected<T, R>(collection: &Collection<T>, f: impl FnOnce(&[&[T]]) -> R) -> R {
    let parts = collection
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut order: Vec<&(usize, Vec<T>)> = parts.iter().collect();
    order.sort_by_key(|(instance, _)| *instance);
    let tuples: Vec<&[T]> = order.iter().map(|(_, tuples)| tuples.as_slice()).collect();
    f(&tuples)
}

/// Appends every tuple of `collection` to `list`, as Python objects.
fn append_all<T: Carried>(list: &Bound<'_, PyList>, collection: &Collection<T>) -> PyResult<()> {
    with_collected(collection, |parts| {
        parts
            .iter()
            .flat_map(|tuples| tuples.iter())
            .try_for_each(|tuple| list.append(tuple.to_py(list.py())?))
    })
}

/// The bytes `value` crosses threads, processes and hosts as in a stream (the encoding the
/// module `value` describes); `decode` reads them back. A value a stream cannot carry is
/// refused as a function's result is.
#[pyfunction]
fn encode<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let mut bytes = Vec::new();
    sluice_types::Tuple::encode(&Value::from_py(value)?, &mut bytes)
        .map_err(|e| SluiceError::new_err(e.to_string()))?;
    Ok(PyBytes::new(value.py(), &bytes))
}

/// The value `bytes` (made by `encode`) stands for.
#[pyfunction]
fn decode<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    <Value as sluice_types::Tuple>::decode(bytes)
        .map_err(|e| PyValueError::new_err(format!("not an encoded value: {e}")))?
        .to_py(py)
}

/// The module `sluice._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Dataflow>()?;
    m.add_class::<Stream>()?;
    m.add_class::<KeyedStream>()?;
    m.add_class::<WindowedStream>()?;
    m.add_class::<Collected>()?;
    m.add_function(wrap_pyfunction!(encode, m)?)?;
    m.add_function(wrap_pyfunction!(decode, m)?)?;
    m.add("SluiceError", m.py().get_type::<SluiceError>())?;
    m.add("OperatorError", m.py().get_type::<OperatorError>())?;
    Ok(())
}
