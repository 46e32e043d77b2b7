//! `sluice query`: runs SCSQL statements (`-e TEXT`, a file, or those typed or piped into the
//! shell, [`crate::shell`]) and prints each result of each query on a line of its own, as it
//! arrives.
//!
//! A query whose stream processes run as a job prints, on standard error after its results,
//! what moved between its stream processes: `query: 100 element(s), 300.0 MB between stream
//! processes in 0.412 s: 728.2 MB/s` (the payload bytes every stream process and the client
//! received, over the job's run time: the paper's bandwidth). `--explain` prints the plan of
//! each query instead of running it; `--limit N` stops each query after N results (its
//! sources stop, what is in flight drains, every process and segment is removed).
//!
//! Ctrl-C (or SIGTERM) during a query stops it: a job's sources stop and what is in flight
//! drains, a query evaluated here stops its generator (an aggregate gives its value over what
//! came); a second aborts the job (its PEs killed, its segments removed). The statements after
//! it are not run, the shell reads no more, and `sluice query` says on standard error that the
//! results printed are partial and exits with 130, however the statements were given. An
//! interrupt while the shell waits for input on a pipe or file ends it with 130 too (on a
//! terminal, Ctrl-C drops the statement being typed).
//!
//! With `--checkpoint-every` (and the other checkpoint flags of `sluice run`), each query's
//! job takes checkpoints into `query-K` (its number among the session's jobs) under the
//! checkpoint directory and is restarted from the last one when a PE fails; its results are
//! printed exactly once, each once the checkpoint after it is complete. A query whose stream
//! processes read a pipe or a terminal is refused, naming them. `--from DIR` starts the
//! session's first job from a checkpoint or savepoint.
//!
//! Each PE of a query's job is this program again: `sluice query [--set ..] [--hosts ..]
//! --client SOCKET --execute=TEXT`, where TEXT is the session's function definitions and settings
//! followed by the query, so a PE rebuilds the job's graph whatever the launching process was
//! given (a file, standard input).

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use sluice_plan::HostsFile;
use sluice_query::{QueryError, QueryOptions, Session};
use sluice_runtime::Launcher;

use crate::checkpointing::CheckpointArgs;
use crate::plan_choice::parse_seconds;
use crate::stdout::tell;

/// Arguments of `sluice query`.
#[derive(Args, Debug)]
pub(crate) struct QueryArgs {
    /// A file of SCSQL statements. With neither it nor -e, the shell: statements are read
    /// from the terminal (with line editing and history) or from standard input, and each
    /// runs as it is completed.
    file: Option<PathBuf>,
    /// The statements to run.
    #[arg(
        short = 'e',
        long = "execute",
        value_name = "TEXT",
        conflicts_with = "file",
        allow_hyphen_values = true
    )]
    text: Option<String>,
    /// Print each query's plan (stream processes, their nodes, the edges and their
    /// transports) instead of running it.
    #[arg(long)]
    explain: bool,
    /// Stop each query after this many results.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
    /// A driver setting, `key=value`: transport (auto, threaded, shm-vega, shm-osr, tcp),
    /// buffer (bytes), double_buffering (on, off), pset_size; repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    settings: Vec<String>,
    /// A hosts file (TOML): a cluster is a group of its hosts, a node a core of one.
    #[arg(long)]
    hosts: Option<PathBuf>,
    /// Where the PEs run: `local` (a child process per PE), `mpi` (the ranks of Open MPI's
    /// mpirun) or `in-process` (threads of this process).
    #[arg(long, default_value = "local", value_parser = ["local", "mpi", "in-process"])]
    launcher: String,
    /// Fail a query's job when one of its threads holds work and makes no progress, or a PE
    /// sends no heartbeat, for this many seconds (default 5; also SLUICE_STALL_TIMEOUT).
    #[arg(long, value_parser = parse_seconds)]
    stall_timeout: Option<Duration>,
    /// The socket of the launching process's client (given to the PEs of a query's job).
    #[arg(long, hide = true)]
    client: Option<PathBuf>,
    #[command(flatten)]
    checkpoints: CheckpointArgs,
}

/// The variable that gives `--stall-timeout` when the command line does not, as for `sluice
/// run`.
const STALL_TIMEOUT_VARIABLE: &str = "SLUICE_STALL_TIMEOUT";

/// The exit status of a query the user interrupted, as a shell gives a command killed by
/// SIGINT (as `sluice run`'s).
const INTERRUPTED_STATUS: i32 = 130;

pub(crate) fn query(args: QueryArgs) -> anyhow::Result<()> {
    // Statements given on the command line or in a file run from the start; the shell's,
    // once read.
    let busy = Arc::new(AtomicBool::new(args.text.is_some() || args.file.is_some()));
    let options = options(&args, &busy)?;
    let mut session = Session::new();
    let (source_name, text) = match (&args.text, &args.file) {
        (Some(text), _) => ("-e".to_string(), text.clone()),
        (None, Some(path)) => (
            path.display().to_string(),
            sluice_plan::read_text_file(path)
                .with_context(|| format!("cannot read {}", path.display()))?,
        ),
        (None, None) => {
            // The shell: each statement runs as it is completed; an error is printed and the
            // shell goes on.
            let source_name = if std::io::stdin().is_terminal() {
                "<shell>"
            } else {
                "<stdin>"
            };
            return crate::shell::run_shell(|text| {
                busy.store(true, Ordering::SeqCst);
                let done = statements(&mut session, source_name, text, &options, args.explain);
                if let Err(Failure::Query(QueryError::Interrupted)) = &done {
                    interrupted();
                }
                busy.store(false, Ordering::SeqCst);
                done.map_err(anyhow::Error::from)
            });
        }
    };
    statements(&mut session, &source_name, &text, &options, args.explain).map_err(|error| {
        if let Failure::Query(QueryError::Interrupted) = &error {
            interrupted();
        }
        if let Failure::Query(QueryError::Text { .. }) = &error {
            // Its rendering says `Error:` itself: printed as it is, not after main's `error:`.
            tell(format_args!("{error}"));
            std::process::exit(1);
        }
        error.into()
    })
}

/// Says that an interrupt stopped the statements, so that what they printed is partial, and
/// exits with [`INTERRUPTED_STATUS`].
fn interrupted() -> ! {
    tell(format_args!("{}", QueryError::Interrupted));
    std::process::exit(INTERRUPTED_STATUS);
}

/// Why statements failed: the query, or writing its results.
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error(transparent)]
    Query(#[from] QueryError),
    #[error(transparent)]
    Write(#[from] std::io::Error),
}

/// Runs (or, with `explain`, explains) the statements of `text` in `session`, printing each
/// result on a line of standard output.
fn statements(
    session: &mut Session,
    source_name: &str,
    text: &str,
    options: &QueryOptions,
    explain: bool,
) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    if explain {
        let plan = session.explain(source_name, text, options)?;
        write!(out, "{plan}")?;
        return Ok(());
    }
    let mut failed_write = None;
    session.run(source_name, text, options, &mut |value| {
        if failed_write.is_none() {
            failed_write = writeln!(out, "{value}").and_then(|()| out.flush()).err();
        }
    })?;
    match failed_write {
        Some(error) => Err(error.into()),
        None => Ok(()),
    }
}

/// The session's options from the command line, and the arguments its PEs are started with;
/// `busy` says when statements run (see [`count_interrupts`]).
fn options(args: &QueryArgs, busy: &Arc<AtomicBool>) -> anyhow::Result<QueryOptions> {
    let mut settings = Vec::new();
    let mut pe_args: Vec<OsString> = vec!["query".into()];
    for setting in &args.settings {
        let (key, value) = setting
            .split_once('=')
            .with_context(|| format!("--set {setting}: expected KEY=VALUE"))?;
        settings.push((key.trim().to_string(), value.trim().to_string()));
        pe_args.extend(["--set".into(), setting.into()]);
    }
    let hosts = match &args.hosts {
        Some(path) => {
            let text = sluice_plan::read_text_file(path)
                .with_context(|| format!("cannot read hosts file {}", path.display()))?;
            let absolute = std::fs::canonicalize(path)
                .with_context(|| format!("cannot find hosts file {}", path.display()))?;
            pe_args.extend(["--hosts".into(), absolute.into_os_string()]);
            Some(HostsFile::read(path, &text)?)
        }
        None => None,
    };
    let stall_timeout = match (args.stall_timeout, std::env::var(STALL_TIMEOUT_VARIABLE)) {
        (Some(given), _) => Some(given),
        (None, Ok(text)) => Some(
            parse_seconds(&text).map_err(|e| anyhow::anyhow!("{STALL_TIMEOUT_VARIABLE}: {e}"))?,
        ),
        (None, Err(_)) => None,
    };
    if let Some(timeout) = stall_timeout {
        pe_args.extend([
            "--stall-timeout".into(),
            timeout.as_secs_f64().to_string().into(),
        ]);
    }
    Ok(QueryOptions {
        stall_timeout,
        hosts,
        settings,
        launcher: match args.launcher.as_str() {
            "mpi" => Launcher::Mpi,
            "in-process" => Launcher::InProcess,
            _ => Launcher::Local,
        },
        limit: args.limit,
        pe_args,
        client: args.client.clone(),
        on_transfer: Some(Box::new(|transfer| tell(format_args!("query: {transfer}")))),
        interrupts: count_interrupts(busy.clone())?,
        // A PE's part in checkpoints is set by its launcher.
        checkpoints: match sluice_runtime::is_pe_process() {
            true => None,
            false => args.checkpoints.options_unchecked("query")?,
        },
        from: match sluice_runtime::is_pe_process() {
            true => None,
            false => args.checkpoints.from()?,
        },
    })
}

/// Counts Ctrl-C (and SIGTERM) in the launching process, for the session to stop (then abort)
/// the running query; a PE keeps the default actions, as its launcher stops it. While no
/// statement runs (`busy` is false: the shell waits for input), an interrupt ends the program
/// at once with [`INTERRUPTED_STATUS`], but on a terminal, whose line editor takes Ctrl-C
/// itself.
fn count_interrupts(busy: Arc<AtomicBool>) -> anyhow::Result<Option<Arc<AtomicUsize>>> {
    if sluice_runtime::is_pe_process() {
        return Ok(None);
    }
    let count = Arc::new(AtomicUsize::new(0));
    let handler = count.clone();
    let on_terminal = std::io::stdin().is_terminal();
    ctrlc::set_handler(move || {
        // SYNC: SeqCst pairs with the stores around each run of statements in `query`.
        if !busy.load(Ordering::SeqCst) && !on_terminal {
            std::process::exit(INTERRUPTED_STATUS);
        }
        handler.fetch_add(1, Ordering::Relaxed);
    })
    .context("cannot install the Ctrl-C handler")?;
    Ok(Some(count))
}
