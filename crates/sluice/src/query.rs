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
//! drains; a second aborts the job (its PEs killed, its segments removed). The statements
//! after it are not run (the shell reads the next one).
//!
//! Each PE of a query's job is this program again: `sluice query [--set ..] [--hosts ..]
//! --client SOCKET --execute=TEXT`, where TEXT is the session's function definitions and settings
//! followed by the query, so a PE rebuilds the job's graph whatever the launching process was
//! given (a file, standard input).

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use sluice_plan::HostsFile;
use sluice_query::{QueryError, QueryOptions, Session};
use sluice_runtime::Launcher;

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
    /// The socket of the launching process's client (given to the PEs of a query's job).
    #[arg(long, hide = true)]
    client: Option<PathBuf>,
}

pub(crate) fn query(args: QueryArgs) -> anyhow::Result<()> {
    let options = options(&args)?;
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
                statements(&mut session, source_name, text, &options, args.explain)
                    .map_err(anyhow::Error::from)
            });
        }
    };
    statements(&mut session, &source_name, &text, &options, args.explain).map_err(|error| {
        if let Failure::Query(QueryError::Text { .. }) = &error {
            // Its rendering says `Error:` itself: printed as it is, not after main's `error:`.
            tell(format_args!("{error}"));
            std::process::exit(1);
        }
        error.into()
    })
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

/// The session's options from the command line, and the arguments its PEs are started with.
fn options(args: &QueryArgs) -> anyhow::Result<QueryOptions> {
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
    Ok(QueryOptions {
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
        interrupts: count_interrupts()?,
    })
}

/// Counts Ctrl-C (and SIGTERM) in the launching process, for the session to stop (then abort)
/// the running query; a PE keeps the default actions, as its launcher stops it.
fn count_interrupts() -> anyhow::Result<Option<Arc<AtomicUsize>>> {
    if sluice_runtime::is_pe_process() {
        return Ok(None);
    }
    let count = Arc::new(AtomicUsize::new(0));
    let handler = count.clone();
    ctrlc::set_handler(move || {
        handler.fetch_add(1, Ordering::Relaxed);
    })
    .context("cannot install the Ctrl-C handler")?;
    Ok(Some(count))
}
