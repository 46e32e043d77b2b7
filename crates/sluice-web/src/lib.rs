//! Sluice's HTTP side, for the `sluice` command and for programs of their own alike:
//!
//! - [`server`]: a bounded HTTP server (hyper on one thread of tokio), each address answered
//!   by a [`server::Handler`];
//! - [`job_page`]: a running job's live web page (`sluice run --ui`), its plan drawn with the
//!   figures on it;
//! - [`job_server`]: a running job's server of that page and of its Prometheus `/metrics`
//!   ([`prometheus`]), for `sluice run` and a program of its own alike;
//! - [`host`]: `sluice ui`, a REST API shaped as Flink's (`GET /jobs`, `/jobs/ID`,
//!   `/jobs/ID/metrics`, `/jobs/ID/checkpoints`, `POST /jobs/ID/stop`, `/jobs/ID/savepoint`)
//!   and a page listing every job of the host, running (from the job registry,
//!   `sluice_runtime::registry`) and ended (from their kept summaries,
//!   `sluice_runtime::summaries`), each with its job page.

pub mod host;
pub mod job_page;
pub mod job_server;
pub mod prometheus;
pub mod server;

use std::net::SocketAddr;

use thiserror::Error;

/// Why a server could not be started.
#[derive(Debug, Error)]
pub enum WebError {
    /// The address could not be bound.
    #[error("cannot serve {what} on {address} ({flag}): {source}")]
    Bind {
        /// What was to be served there, e.g. `the web page`.
        what: &'static str,
        /// The flag that named the address, e.g. `--ui`.
        flag: &'static str,
        /// The address.
        address: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The server's thread or runtime could not be started.
    #[error("cannot start {what}: {source}")]
    Start {
        /// What.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// `sluice ui` bound off loopback without a token.
    #[error(
        "{address} is not a loopback address: anyone who reaches it could stop your jobs, so \
         it needs a token (--token TOKEN or SLUICE_UI_TOKEN); or bind 127.0.0.1"
    )]
    TokenRequired {
        /// The address.
        address: SocketAddr,
    },
    /// The token holds a character it may not.
    #[error(
        "the token holds {0:?}: it may hold letters, digits and - _ . ~ only (it travels in a \
         URL and a cookie as it is)"
    )]
    TokenCharacter(char),
    /// The token is empty.
    #[error("the token is empty")]
    TokenEmpty,
}

/// Binds `address` (non-blocking) for `what`, named by `flag`.
pub fn bind(
    address: SocketAddr,
    what: &'static str,
    flag: &'static str,
) -> Result<std::net::TcpListener, WebError> {
    std::net::TcpListener::bind(address)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|source| WebError::Bind {
            what,
            flag,
            address,
            source,
        })
}
