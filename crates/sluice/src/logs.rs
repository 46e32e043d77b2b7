//! The log of `sluice run`: `tracing` events on standard error, one line each, in the style of
//! the rest of the tool's messages: `started: the sources run ...` for information,
//! `warning: ...`, `error: ...`, `debug: ...` and `trace: ...` for the other levels, then the
//! event's fields as `key=value`.
//!
//! Which events show: `--quiet` only errors (and no progress line), `--verbose` debug and up,
//! else `RUST_LOG` when set (an `EnvFilter` directive such as `debug` or `sluice=debug,warn`),
//! else information and up. The job's summary is not a log line: it goes to standard output,
//! quiet or not.
//!
//! A line from a PE's process comes out of the launching process prefixed with the PE's name
//! (`[split] warning: ...`, by `sluice_runtime::launch`); a line without a prefix comes from the
//! launching process itself, which runs the job's only PE when the plan has one.

use std::fmt;
use std::sync::OnceLock;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// How much to log, from `--quiet` and `--verbose`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verbosity {
    /// Errors only.
    Quiet,
    /// `RUST_LOG`, or information and up.
    Normal,
    /// Debug and up.
    Verbose,
}

/// The verbosity [`init`] was given.
static VERBOSITY: OnceLock<Verbosity> = OnceLock::new();

/// Whether `--quiet` asked for errors only (so nothing else, a progress line neither, is shown).
pub(crate) fn is_quiet() -> bool {
    VERBOSITY.get() == Some(&Verbosity::Quiet)
}

/// Sends this process's events to standard error at `verbosity`. Called once, before the first
/// event; a second call leaves the first subscriber in place.
pub(crate) fn init(verbosity: Verbosity) {
    let _ = VERBOSITY.set(verbosity);
    let filter = match verbosity {
        Verbosity::Quiet => EnvFilter::new("error"),
        Verbosity::Verbose => EnvFilter::new("debug"),
        Verbosity::Normal => {
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"))
        }
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        // A closed standard error loses the line and nothing else: the subscriber's own report
        // of a failed write would go to standard error with `eprint!`, which panics then.
        .log_internal_errors(false)
        .event_format(Lines)
        .try_init();
}

/// Logs `line`, a message that says `warning: ...` itself, as a warning event.
pub(crate) use sluice_runtime::progress::warn_line;

/// One line per event: the level as the tool's other messages say it, the message, the fields.
struct Lines;

impl<S, N> FormatEvent<S, N> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        context: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let level = match *event.metadata().level() {
            Level::ERROR => "error: ",
            Level::WARN => "warning: ",
            Level::INFO => "",
            Level::DEBUG => "debug: ",
            Level::TRACE => "trace: ",
        };
        writer.write_str(level)?;
        context
            .field_format()
            .format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}
