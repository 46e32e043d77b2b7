//! A closed standard output ends `sluice` quietly: every command writes its output with
//! `writeln!` on [`std::io::stdout`] and passes a failed write up as an error (Rust ignores
//! SIGPIPE, so a write to a pipe whose reader has gone fails with `EPIPE` instead of killing
//! the process, and `println!` would panic); `main` then tells that error apart from every
//! other with [`was_closed`] and exits with status 0 (`main` says why). Lines for standard
//! error go through [`tell`], which a closed standard error cannot turn into a panic.

use std::io::{ErrorKind, Write};
use std::os::fd::AsFd;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

/// Whether `error` is a write that failed because the reader of standard output went away: a
/// broken pipe in its chain while standard output is a pipe or socket without a reader (so a
/// broken pipe to a child process is still reported).
pub(crate) fn was_closed(error: &anyhow::Error) -> bool {
    let broken_pipe = error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == ErrorKind::BrokenPipe)
    });
    broken_pipe && reader_gone()
}

/// Whether standard output is a pipe or socket whose reading end is closed: poll reports
/// POLLERR on such a pipe and POLLHUP on such a socket, whatever events are asked for.
fn reader_gone() -> bool {
    let stdout = std::io::stdout();
    let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::empty())];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
        && fds[0]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP))
}

/// Writes a line to standard error; a closed standard error loses the line and nothing else
/// (`eprintln!` would panic).
pub(crate) fn tell(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "{line}");
}
