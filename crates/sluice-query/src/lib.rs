//! SCSQL, the query language of the SCSQ paper (Zeitler and Risch, "Using stream queries to
//! measure communication performance of a parallel computing environment"): continuous
//! queries in which stream processes are values. `sp(q)` runs the subquery `q` in a stream
//! process of its own (a PE), `extract(p)` and `merge(ps)` read the streams of others, and the
//! query wires them into a graph that Sluice plans, launches and runs.
//!
//! The crate's parts, in the order a statement goes through them:
//! - [`ast`]: the syntax tree, every node with its byte span in the source text;
//! - [`lexer`] and [`mod@parse`]: text to [`ast::Statement`]s, or [`Diagnostic`]s that point at
//!   the line and column ([`Diagnostic::render`] draws them);
//! - [`check`]: names and [`types`] against the built-in ([`functions`]) and user-defined
//!   functions;
//! - `eval`: the binding of a query's variables, which yields the stream processes, their
//!   subqueries and their allocation;
//! - [`connect`]: `input(...)` and `output(...)`, the connector registry's sources and sinks;
//! - `lower`: the stream processes as a Sluice graph and plan (a PE per stream process);
//! - [`process`]: the operators that run a stream process's [`pipeline`];
//! - [`session`]: runs statements, the queries as jobs, their results back to the caller;
//! - `fuzzing` (under test and `--cfg fuzzing`): the parser's fuzzing entry point.
#![forbid(unsafe_code)]

pub mod ast;
pub mod check;
pub mod cluster;
pub mod connect;
pub mod diagnostic;
pub mod eval;
pub mod functions;
#[cfg(any(test, fuzzing))]
pub mod fuzzing;
pub mod lexer;
pub mod lower;
pub mod parse;
pub mod pipeline;
pub mod process;
pub mod session;
pub mod stage;
pub mod types;
pub mod value;

pub use diagnostic::Diagnostic;
pub use parse::parse;
pub use session::{QueryError, QueryOptions, Session, Transfer};
pub use types::Type;
pub use value::Value;
