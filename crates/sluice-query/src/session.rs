//! A query session: the user functions and driver settings statements leave behind, and the
//! running of each query.
//!
//! A query is bound ([`crate::eval`]); a result known when it is bound is handed out at once,
//! a stream that reads no stream process runs in this thread, and one that does runs as a
//! Sluice job ([`crate::lower`]) whose client sends every result here as it arrives. With a
//! limit, the job is stopped once that many results have come: its sources stop, what is in
//! flight drains (and is dropped here), and every PE and shared segment is gone when `run`
//! returns.
//!
//! Every PE of the job is this program again, started with [`QueryOptions::pe_args`] followed
//! by `--client SOCKET -e TEXT`, where `TEXT` is every `create function` and `set` statement
//! run so far and then the query: binding is deterministic, so the PE rebuilds the same graph.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use sluice_plan::HostsFile;
use sluice_runtime::{CheckpointOptions, Launcher, RunOptions, StopHandle, StoredCheckpoint};

use crate::ast::{ExprKind, FunctionDef, Span, Statement};
use crate::cluster::Machine;
use crate::diagnostic::Diagnostic;
use crate::eval::{Binder, BoundQuery, QueryResult};
use crate::lower::{lower, sp_name, DriverSettings};
use crate::pipeline::Pipeline;
use crate::process::{ClientReader, BYTES_IN, ELEMENTS_IN};
use crate::value::Value;

/// How queries run.
#[derive(Default)]
pub struct QueryOptions {
    /// The hosts file (`--hosts`); this machine alone when `None`.
    pub hosts: Option<HostsFile>,
    /// Driver settings given on the command line (`--set key=value`), applied before the
    /// text's own `set` statements.
    pub settings: Vec<(String, String)>,
    /// Where the PEs run.
    pub launcher: Launcher,
    /// Stop each query after this many results.
    pub limit: Option<u64>,
    /// How long a thread of a query's job may hold work without progress, and a PE stay
    /// silent, before the job fails (`None`: the runtime's default).
    pub stall_timeout: Option<std::time::Duration>,
    /// The arguments that make this program run a query as a PE, before `--client SOCKET
    /// --execute=TEXT` (`["query", "--set", "buffer=1000"]`).
    pub pe_args: Vec<OsString>,
    /// In a PE: the client's socket in the launching process.
    pub client: Option<PathBuf>,
    /// Called after each job with what moved between its stream processes.
    pub on_transfer: Option<TransferReport>,
    /// Interrupts (Ctrl-C) so far, counted by the caller: one during a query stops it (a
    /// job's sources stop and what is in flight drains), a second aborts its job.
    pub interrupts: Option<Arc<AtomicUsize>>,
    /// The checkpoints of each query's job (`--checkpoint-every`), `None` for none: the job
    /// of the session's K-th query that runs as a job keeps them in `query-K` under their
    /// directory, is restarted from the last one after a failure, and hands its results on
    /// exactly once. A query whose sources cannot replay is refused, naming them.
    pub checkpoints: Option<CheckpointOptions>,
    /// The state (a checkpoint's or savepoint's) the job of the session's first query that
    /// runs as a job starts from (`--from`).
    pub from: Option<StoredCheckpoint>,
}

/// How many interrupts `options` has seen so far.
fn interrupts(options: &QueryOptions) -> usize {
    options
        .interrupts
        .as_ref()
        .map_or(0, |count| count.load(Ordering::Relaxed))
}

/// Called with what each job moved ([`QueryOptions::on_transfer`]).
pub type TransferReport = Box<dyn Fn(&Transfer)>;

/// What a job moved between its stream processes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transfer {
    /// Payload bytes received by the stream processes and the client.
    pub bytes: u64,
    /// Elements received by them.
    pub elements: u64,
    /// The job's run time, from its start to the end of its last thread.
    pub seconds: f64,
}

impl Transfer {
    /// Megabytes (10^6 bytes) per second.
    pub fn megabytes_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 / 1e6 / self.seconds
        } else {
            0.0
        }
    }
}

impl std::fmt::Display for Transfer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} element(s), {:.1} MB between stream processes in {:.3} s: {:.1} MB/s",
            self.elements,
            self.bytes as f64 / 1e6,
            self.seconds,
            self.megabytes_per_second()
        )
    }
}

/// Why a query failed.
#[derive(Debug)]
pub enum QueryError {
    /// Problems in the text, with the text they are in.
    Text {
        /// The text's name (a file, `-e`, `<shell>`).
        source_name: String,
        /// The text.
        text: String,
        /// The problems.
        diagnostics: Vec<Diagnostic>,
    },
    /// The job failed, or could not start.
    Run(String),
    /// An interrupt (Ctrl-C, SIGTERM) stopped a query: the results it gave are partial, and
    /// the statements after it were not run.
    Interrupted,
}

impl std::error::Error for QueryError {}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryError::Text {
                source_name,
                text,
                diagnostics,
            } => {
                for (i, d) in diagnostics.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    f.write_str(d.render(source_name, text).trim_end())?;
                }
                Ok(())
            }
            QueryError::Run(message) => f.write_str(message),
            QueryError::Interrupted => f.write_str(
                "interrupted: the query was stopped, its results above are partial, and the \
                 statements after it were not run",
            ),
        }
    }
}

/// The user functions and driver settings of a session, and the text that recreates them.
#[derive(Default)]
pub struct Session {
    functions: BTreeMap<String, FunctionDef>,
    /// The same functions, typed, for the checker.
    checked: crate::check::Functions,
    /// The `set` statements run so far, in order.
    sets: Vec<(String, String)>,
    /// The `create function` and `set` statements run so far, as text.
    preamble: String,
    /// The queries run as jobs so far.
    jobs: std::cell::Cell<usize>,
}

impl Session {
    /// A session with no user function and the default driver settings.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses `text` (named `source_name` in messages) and runs its statements in order,
    /// handing each result of each query to `out` as it arrives: `create function` and `set`
    /// change the session for the statements after them.
    pub fn run(
        &mut self,
        source_name: &str,
        text: &str,
        options: &QueryOptions,
        out: &mut dyn FnMut(&Value),
    ) -> Result<(), QueryError> {
        let statements = parsed(source_name, text)?;
        self.run_statements(source_name, text, &statements, options, out)
    }

    /// The plan of each query of `text` instead of running it: its stream processes with
    /// their subqueries, clusters and nodes, and the edges with their transports. Its
    /// `create function` and `set` statements change the session as `run` would.
    pub fn explain(
        &mut self,
        source_name: &str,
        text: &str,
        options: &QueryOptions,
    ) -> Result<String, QueryError> {
        let statements = parsed(source_name, text)?;
        self.explain_statements(source_name, text, &statements, options)
    }

    fn run_statements(
        &mut self,
        source_name: &str,
        text: &str,
        statements: &[Statement],
        options: &QueryOptions,
        out: &mut dyn FnMut(&Value),
    ) -> Result<(), QueryError> {
        let problems = |diagnostics: Vec<Diagnostic>| QueryError::Text {
            source_name: source_name.to_string(),
            text: text.to_string(),
            diagnostics,
        };
        let problem = |d: Diagnostic| problems(vec![d]);
        // An interrupt from now on stops the query running then, and the statements after it.
        let before = interrupts(options);
        for statement in statements {
            if interrupts(options) != before {
                return Err(QueryError::Interrupted);
            }
            if let Statement::Query(_) = statement {
                crate::check::check(statement, &self.checked).map_err(problems)?;
            }
            match statement {
                Statement::CreateFunction(def) => {
                    self.checked.define(def).map_err(problems)?;
                    self.functions
                        .insert(def.name.name.to_lowercase(), def.clone());
                    self.remember(text, &def.span);
                }
                Statement::Set(setting) => {
                    let span = setting.name.span.start..setting.value.span.end;
                    let value = match &setting.value.kind {
                        ExprKind::Integer(n) => n.to_string(),
                        ExprKind::String(s) => s.clone(),
                        ExprKind::Var(name) => name.name.clone(),
                        _ => {
                            return Err(problem(Diagnostic::new(
                                "a setting's value is a number, a name or a string",
                                setting.value.span.clone(),
                            )))
                        }
                    };
                    DriverSettings::default()
                        .set(&setting.name.name, &value)
                        .map_err(|m| {
                            problem(Diagnostic::new(m, span.clone()).with_label("refused"))
                        })?;
                    self.sets.push((setting.name.name.clone(), value));
                    // The span leaves out the keyword.
                    self.preamble.push_str("set ");
                    self.remember(text, &span);
                }
                Statement::Query(expr) => {
                    let settings = self.settings_with(options).map_err(QueryError::Run)?;
                    let machine = machine(options, &settings);
                    let bound = Binder::new(&self.functions, &machine)
                        .bind(expr)
                        .map_err(problem)?;
                    let own_text =
                        &text[expr.span.start.min(text.len())..expr.span.end.min(text.len())];
                    let query = Query {
                        bound,
                        text: own_text,
                        settings: &settings,
                        machine: &machine,
                        interrupts_before: before,
                    };
                    let ran = self.run_query(query, options, out);
                    // A job aborted by a second interrupt fails: it was interrupted.
                    if interrupts(options) != before {
                        return Err(QueryError::Interrupted);
                    }
                    ran?;
                }
            }
        }
        Ok(())
    }

    fn explain_statements(
        &mut self,
        source_name: &str,
        text: &str,
        statements: &[Statement],
        options: &QueryOptions,
    ) -> Result<String, QueryError> {
        // Each query is explained with the settings and functions of the statements before
        // it, as `run` would run it.
        let mut plans = String::new();
        for statement in statements {
            let Statement::Query(expr) = statement else {
                self.run_statements(
                    source_name,
                    text,
                    std::slice::from_ref(statement),
                    options,
                    &mut |_| {},
                )?;
                continue;
            };
            let settings = self.settings_with(options).map_err(QueryError::Run)?;
            let machine = machine(options, &settings);
            let bound = Binder::new(&self.functions, &machine)
                .bind(expr)
                .map_err(|d| QueryError::Text {
                    source_name: source_name.to_string(),
                    text: text.to_string(),
                    diagnostics: vec![d],
                })?;
            plans.push_str(&explain(&bound, &settings, &machine)?);
        }
        Ok(plans)
    }

    /// Adds the statement at `span` of `text` to the preamble every PE runs.
    fn remember(&mut self, text: &str, span: &Span) {
        if let Some(statement) = text.get(span.clone()) {
            self.preamble.push_str(statement);
            self.preamble.push_str(";\n");
        }
    }

    /// The session's settings with the command line's applied first.
    fn settings_with(&self, options: &QueryOptions) -> Result<DriverSettings, String> {
        let mut settings = DriverSettings::default();
        // The text's own `set` statements come after the command line's.
        for (key, value) in options.settings.iter().chain(&self.sets) {
            settings.set(key, value)?;
        }
        Ok(settings)
    }

    fn run_query(
        &self,
        query: Query<'_>,
        options: &QueryOptions,
        out: &mut dyn FnMut(&Value),
    ) -> Result<(), QueryError> {
        let limit = options.limit.unwrap_or(u64::MAX);
        let mut given = 0u64;
        let interrupted = || interrupts(options) != query.interrupts_before;
        let mut each = |v: Value| {
            if given < limit {
                given += 1;
                out(&v);
            }
            given < limit && !interrupted()
        };
        match query.bound.result {
            QueryResult::Values(values) => {
                for v in values {
                    if !each(v) {
                        break;
                    }
                }
                Ok(())
            }
            QueryResult::Stream(pipeline) if pipeline.producers().is_empty() => pipeline
                .run_here(&interrupted, &mut each)
                .map_err(|e| QueryError::Run(e.to_string())),
            QueryResult::Stream(pipeline) => {
                self.jobs.set(self.jobs.get() + 1);
                let job = Job {
                    sps: &query.bound.sps,
                    client: &pipeline,
                    settings: query.settings,
                    machine: query.machine,
                    number: self.jobs.get(),
                };
                job.run(
                    &self.preamble,
                    query.text,
                    options,
                    query.interrupts_before,
                    &mut each,
                )
            }
        }
    }
}

/// A bound query and what it runs with.
struct Query<'a> {
    bound: BoundQuery,
    /// Its own text, for the PEs of its job.
    text: &'a str,
    settings: &'a DriverSettings,
    machine: &'a Machine,
    /// The interrupts counted before the statements began: one more stops the query.
    interrupts_before: usize,
}

/// The statements of `text`, or its syntax errors.
fn parsed(source_name: &str, text: &str) -> Result<Vec<Statement>, QueryError> {
    crate::parse(text).map_err(|diagnostics| QueryError::Text {
        source_name: source_name.to_string(),
        text: text.to_string(),
        diagnostics,
    })
}

/// The machine of a query: the hosts file's, or this one's cores.
fn machine(options: &QueryOptions, settings: &DriverSettings) -> Machine {
    let machine = match &options.hosts {
        Some(hosts) => Machine::from_hosts(hosts.clone()),
        None => Machine::embedded(std::thread::available_parallelism().map_or(1, |n| n.get())),
    };
    machine.with_pset_size(settings.pset_size)
}

/// A query that runs as a job.
struct Job<'a> {
    sps: &'a [crate::eval::StreamProcess],
    client: &'a Pipeline,
    settings: &'a DriverSettings,
    machine: &'a Machine,
    /// Its number among the session's jobs, from 1.
    number: usize,
}

impl Job<'_> {
    /// The checkpoints this job takes (in its own directory under `options`'), after its
    /// sources are found to replay.
    fn checkpoints(
        &self,
        graph: &sluice_graph::Graph,
        options: &QueryOptions,
    ) -> Result<Option<CheckpointOptions>, QueryError> {
        let Some(checkpoints) = options.checkpoints else {
            return Ok(None);
        };
        if let Err(mut refused) = graph.check_replayable("the query") {
            // Each stream process named with its subquery.
            for source in &mut refused.sources {
                if let Some(sp) = self.sps.iter().find(|sp| sp_name(sp.id) == *source) {
                    *source = format!("{source} = {}", sp.pipeline);
                }
            }
            return Err(QueryError::Run(refused.to_string()));
        }
        let dir = checkpoints.dir.join(format!("query-{}", self.number));
        Ok(Some(CheckpointOptions {
            dir: Box::leak(dir.into_boxed_path()),
            ..checkpoints
        }))
    }

    fn run(
        &self,
        preamble: &str,
        query_text: &str,
        options: &QueryOptions,
        interrupts_before: usize,
        each: &mut dyn FnMut(Value) -> bool,
    ) -> Result<(), QueryError> {
        let failed = |e: String| QueryError::Run(e);
        if sluice_runtime::is_pe_process() {
            // A PE of the job: rebuild the graph and run this process's part (never returns).
            let socket = options
                .client
                .clone()
                .ok_or_else(|| failed("a PE of a query needs --client".into()))?;
            let lowered = lower(self.sps, self.client, &socket, self.settings, self.machine)
                .map_err(failed)?;
            sluice_runtime::start(&lowered.graph, &lowered.plan, &run_options(options))
                .map_err(|e| failed(e.to_string()))?;
            return Ok(());
        }
        let reader =
            ClientReader::bind().map_err(|e| failed(format!("the client's socket: {e}")))?;
        let socket = reader.path();
        let lowered =
            lower(self.sps, self.client, &socket, self.settings, self.machine).map_err(failed)?;
        let checkpoints = self.checkpoints(&lowered.graph, options)?;
        let from = options.from.as_ref().filter(|_| self.number == 1).cloned();
        let mut args = options.pe_args.clone();
        args.push("--client".into());
        args.push(socket.clone().into_os_string());
        args.push(format!("--execute={preamble}{query_text};").into());
        let run_options = RunOptions {
            launcher: options.launcher,
            pe_args: Some(Box::leak(args.into_boxed_slice())),
            checkpoints,
            ..run_options(options)
        };
        let stop = StopHandle::new();
        let done = Arc::new(AtomicBool::new(false));
        if let Some(count) = &options.interrupts {
            watch_interrupts(count.clone(), interrupts_before, stop.clone(), done.clone());
        }
        let waiter = {
            let (stop, done) = (stop.clone(), done.clone());
            std::thread::spawn(move || {
                let (graph, plan) = (&lowered.graph, &lowered.plan);
                let result = match &from {
                    Some(state) => {
                        sluice_runtime::resume_with(graph, plan, &run_options, &stop, state)
                    }
                    None => sluice_runtime::start_with(graph, plan, &run_options, &stop),
                }
                .and_then(|job| job.wait());
                done.store(true, Ordering::Release);
                result
            })
        };
        let mut stopped = false;
        let read = reader.read(&done, checkpoints.is_some(), |v| {
            if !each(v) && !stopped {
                // Enough results: stop the sources; what is in flight drains and is dropped.
                stopped = true;
                stop.stop();
            }
            true
        });
        if read.is_err() {
            stop.abort();
        }
        let report = waiter
            .join()
            .map_err(|_| failed("the job's waiter panicked".into()))?
            .map_err(|e| failed(e.to_string()))?;
        read.map_err(failed)?;
        if let Some(on_transfer) = &options.on_transfer {
            let names: Vec<String> = (0..self.sps.len())
                .map(sp_name)
                .chain(["client".to_string()])
                .collect();
            let counter = |key: &str| -> u64 {
                names
                    .iter()
                    .map(|n| {
                        report
                            .operator_report(n)
                            .counters
                            .get(key)
                            .copied()
                            .unwrap_or(0)
                    })
                    .sum()
            };
            on_transfer(&Transfer {
                bytes: counter(BYTES_IN),
                elements: counter(ELEMENTS_IN),
                seconds: report.elapsed.as_secs_f64(),
            });
        }
        Ok(())
    }
}

/// The run options of a query's job (in its launching process and in each PE).
fn run_options(options: &QueryOptions) -> RunOptions {
    let defaults = RunOptions::default();
    RunOptions {
        stall_timeout: options.stall_timeout.unwrap_or(defaults.stall_timeout),
        // The shell shows a query's results as they come; a progress line or a notice on
        // standard error would interleave with them.
        progress: false,
        partial_notice: false,
        ..defaults
    }
}

/// Stops the job on the first interrupt after `before` and aborts it on the second, until
/// `done`.
fn watch_interrupts(
    count: Arc<AtomicUsize>,
    before: usize,
    stop: StopHandle,
    done: Arc<AtomicBool>,
) {
    std::thread::spawn(move || {
        let mut stopped = false;
        while !done.load(Ordering::Acquire) {
            let seen = count.load(Ordering::Relaxed) - before;
            if seen >= 2 {
                stop.abort();
                return;
            }
            if seen == 1 && !stopped {
                stopped = true;
                stop.stop();
            }
            std::thread::sleep(INTERRUPT_POLL);
        }
    });
}

/// How often a running job's watcher looks at the interrupt count.
const INTERRUPT_POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// The plan of a bound query, as text.
fn explain(
    bound: &BoundQuery,
    settings: &DriverSettings,
    machine: &Machine,
) -> Result<String, QueryError> {
    let mut text = String::new();
    let client = match &bound.result {
        QueryResult::Values(values) => {
            let shown: Vec<String> = values.iter().map(Value::to_string).collect();
            text.push_str(&format!(
                "no stream process runs: the result is known ({})\n",
                shown.join(", ")
            ));
            return Ok(text);
        }
        QueryResult::Stream(p) if p.producers().is_empty() => {
            text.push_str(&format!("runs in the client, no stream process: {p}\n"));
            return Ok(text);
        }
        QueryResult::Stream(p) => p,
    };
    let lowered = lower(
        &bound.sps,
        client,
        std::path::Path::new("client.sock"),
        settings,
        machine,
    )
    .map_err(QueryError::Run)?;
    text.push_str(&format!("stream processes ({}):\n", bound.sps.len()));
    let width = bound
        .sps
        .iter()
        .map(|sp| sp.pipeline.to_string().len())
        .max()
        .unwrap_or(0);
    for sp in &bound.sps {
        let pe = lowered
            .plan
            .instances
            .iter()
            .find(|i| i.name == sp_name(sp.id))
            .map(|i| lowered.plan.pes[i.pe].name.clone())
            .unwrap_or_default();
        text.push_str(&format!(
            "  {:<6} {:<width$}  cluster {} node {} ({} core {}), PE {pe}\n",
            sp_name(sp.id),
            sp.pipeline.to_string(),
            sp.cluster
                .as_deref()
                .map_or("(any)".to_string(), |c| format!("'{c}'")),
            sp.node,
            sp.place.host,
            sp.place.core,
        ));
    }
    text.push_str(&format!("  client {client}\n"));
    text.push_str("edges:\n");
    for edge in &lowered.plan.edges {
        text.push_str(&format!(
            "  {} -> {}  {}\n",
            lowered.plan.instance(edge.from.instance).name,
            lowered.plan.instance(edge.to.instance).name,
            edge.transport
        ));
    }
    Ok(text)
}
