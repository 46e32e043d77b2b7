//! What the command line gives an application, and its errors.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use sluice_connectors::{same_file, OutputFile};
use sluice_graph::GraphError;
use sluice_plan::PlanChoiceError;
use thiserror::Error;

use crate::AppSpec;

/// An application's configuration from `sluice run`.
#[derive(Debug, Clone, Default)]
pub struct AppConfig {
    /// `--input ADDRESS`: a file, or a connector's URL (`sluice_connectors::registry`).
    pub input: Option<PathBuf>,
    /// `--output ADDRESS`: a file, or a connector's URL (`sluice_connectors::registry`).
    pub output: Option<PathBuf>,
    /// `--rate N`: tuples per second from the source; `None` or 0 is as fast as possible.
    pub rate: Option<u64>,
    /// `--duration S`.
    pub duration: Option<Duration>,
    /// `--rate-multiple R`: for applications whose source rate is a multiple of a reference
    /// rate (OMDP: the February 2008 OPRA rate).
    pub rate_multiple: Option<f64>,
    /// `--set key=value` pairs.
    pub settings: Settings,
}

impl AppConfig {
    /// Refuses an `--output` that cannot be written (a directory, a directory that does not
    /// exist or that the user cannot write: a file is made there and removed) or that is the
    /// `--input` (the same device and inode, through a link too), before the job starts.
    pub fn check_output(&self) -> Result<(), AppError> {
        let Some(output) = &self.output else {
            return Ok(());
        };
        let refuse = |reason: String| AppError::File {
            path: output.display().to_string(),
            reason,
        };
        if let Some(input) = self.input.as_deref().filter(|i| same_file(i, output)) {
            return Err(refuse(format!(
                "cannot write output: it is the input {}, which it would overwrite",
                input.display()
            )));
        }
        OutputFile::create(output).map(drop).map_err(|e| {
            let directory = output.parent().filter(|d| !d.as_os_str().is_empty());
            match directory {
                Some(dir) if e.kind() == std::io::ErrorKind::NotFound => refuse(format!(
                    "cannot write output: directory {} does not exist",
                    dir.display()
                )),
                _ => refuse(format!("cannot write output: {e}")),
            }
        })
    }
}

/// `--set key=value` pairs.
#[derive(Debug, Clone, Default)]
pub struct Settings(BTreeMap<String, String>);

impl Settings {
    /// Parses `key=value` pairs; the last of repeated keys wins.
    pub fn parse<'a>(pairs: impl IntoIterator<Item = &'a str>) -> Result<Self, AppError> {
        let mut map = BTreeMap::new();
        for pair in pairs {
            let (key, value) = pair
                .split_once('=')
                .filter(|(k, _)| !k.trim().is_empty())
                .ok_or_else(|| AppError::BadSetting {
                    key: pair.to_string(),
                    reason: "expected key=value".into(),
                })?;
            map.insert(key.trim().to_string(), value.trim().to_string());
        }
        Ok(Self(map))
    }

    /// Sets `key` to `value` for `by` (what needs it, for the message), unless it is set to
    /// `value` already; refuses a key set to another value.
    pub fn imply(
        &mut self,
        key: &str,
        value: &str,
        by: impl FnOnce() -> String,
    ) -> Result<(), AppError> {
        match self.0.get(key) {
            Some(given) if given != value => Err(AppError::BadSetting {
                key: key.to_string(),
                reason: format!("'{given}': {} runs with {key}={value}", by()),
            }),
            _ => {
                self.0.insert(key.to_string(), value.to_string());
                Ok(())
            }
        }
    }

    /// Refuses keys the application does not know. A key the application lists as
    /// `PREFIX*` (`kafka.*`) stands for every key `PREFIXsomething`.
    pub fn check_keys(&self, spec: &AppSpec) -> Result<(), AppError> {
        let known = |key: &str, k: &str| match k.strip_suffix('*') {
            Some(prefix) => key.len() > prefix.len() && key.starts_with(prefix),
            None => key == k,
        };
        for key in self.0.keys() {
            if !spec.settings.iter().any(|(k, _)| known(key, k)) {
                return Err(AppError::UnknownSetting {
                    app: spec.name,
                    key: key.clone(),
                    known: spec
                        .settings
                        .iter()
                        .map(|(k, _)| *k)
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        }
        Ok(())
    }

    /// The settings whose keys start with `prefix`, the prefix taken off, in key order.
    pub fn with_prefix(&self, prefix: &str) -> Vec<(String, String)> {
        self.0
            .iter()
            .filter_map(|(key, value)| Some((key.strip_prefix(prefix)?.to_owned(), value.clone())))
            .collect()
    }

    /// The value of `key` parsed as `T`, or `default` when absent.
    pub fn get<T: FromStr>(&self, key: &str, default: T) -> Result<T, AppError>
    where
        T::Err: std::fmt::Display,
    {
        match self.0.get(key) {
            None => Ok(default),
            Some(text) => text.parse().map_err(|e: T::Err| AppError::BadSetting {
                key: key.to_string(),
                reason: format!("'{text}': {e}"),
            }),
        }
    }
}

impl Settings {
    /// The value of `key` as a count in `range`, or `default` when absent: a size a user types
    /// is refused with its bounds, never allocated beyond them.
    pub fn get_in(
        &self,
        key: &str,
        default: usize,
        range: RangeInclusive<usize>,
    ) -> Result<usize, AppError> {
        let value = self.get(key, default)?;
        if !range.contains(&value) {
            return Err(AppError::BadSetting {
                key: key.to_string(),
                reason: format!(
                    "{value} is out of range: must be between {} and {}",
                    range.start(),
                    range.end()
                ),
            });
        }
        Ok(value)
    }
}

/// Why an application could not be built.
#[derive(Debug, Error)]
pub enum AppError {
    /// No such application.
    #[error("no application named '{name}' (built-in: {known}); see `sluice apps`")]
    UnknownApp {
        /// The name asked for.
        name: String,
        /// The names there are.
        known: String,
    },
    /// A `--set` key the application does not take.
    #[error("{app} has no setting '{key}' (settings: {known})")]
    UnknownSetting {
        /// The application.
        app: &'static str,
        /// The key.
        key: String,
        /// The keys it takes.
        known: String,
    },
    /// A `--set` value that does not parse or is out of range.
    #[error("setting {key}: {reason}")]
    BadSetting {
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// An `--input` or `--output` address that names no connector usable there.
    #[error(transparent)]
    Address(#[from] sluice_connectors::AddressError),
    /// An input or output file problem found before the run.
    #[error("{path}: {reason}")]
    File {
        /// The path.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// `--plan` names no plan there is.
    #[error("--plan {choice}: not 'auto', 'fused', 'threaded', 'processes', a plan of {app} ({known}) or an existing plan file")]
    UnknownPlan {
        /// What was asked for.
        choice: String,
        /// The application.
        app: &'static str,
        /// The plans it ships.
        known: String,
    },
    /// The plan file `--plan` names cannot be read or parsed.
    #[error(transparent)]
    Plan(#[from] PlanChoiceError),
    /// A plan the application ships does not parse (a bug in the application).
    #[error("{app}'s plan {plan} does not parse: {reason}")]
    ShippedPlan {
        /// The application.
        app: &'static str,
        /// The plan.
        plan: &'static str,
        /// The parser's message.
        reason: String,
    },
    /// The application's graph is invalid (a bug in the application). The graph's error is
    /// in the message, not a source, so `{:#}` does not print it twice.
    #[error("the application's graph is invalid: {0}")]
    Graph(GraphError),
}

impl From<GraphError> for AppError {
    fn from(error: GraphError) -> Self {
        Self::Graph(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_graph_error_is_said_once_even_through_a_chain_of_sources() {
        let error = AppError::from(GraphError::DuplicateName("sum".into()));
        assert_eq!(
            error.to_string(),
            "the application's graph is invalid: two operators are named 'sum'; operator names must be unique"
        );
        assert!(std::error::Error::source(&error).is_none());
    }
}
