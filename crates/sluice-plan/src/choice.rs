//! The plan a command line names (`--plan`): `fused`, `threaded`, `processes`, or the path of
//! a plan file, read and parsed; and a TOML file's syntax error located by line and column,
//! for the messages about plan and hosts files.

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::{PlanFile, PlanRequest};

/// Why the plan a command line names cannot be had.
#[derive(Debug, Error)]
pub enum PlanChoiceError {
    /// Neither the name of a plan nor an existing file.
    #[error("--plan {0}: not 'auto', 'fused', 'threaded', 'processes' or an existing plan file")]
    Unknown(String),
    /// The plan file exists but cannot be read.
    #[error("cannot read plan file {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The plan file is not valid TOML or not a valid plan.
    #[error(transparent)]
    Syntax(#[from] TomlSyntaxError),
}

/// A TOML file's syntax error, located: `{what} {path}, line {line}, column {column}: {message}`.
#[derive(Debug, Error)]
#[error("{what} {path}, line {line}, column {column}: {message}")]
pub struct TomlSyntaxError {
    /// What the file is (`plan file`, `hosts file`).
    pub what: &'static str,
    /// The file.
    pub path: String,
    /// The line of the error, from 1.
    pub line: usize,
    /// The column of the error, from 1.
    pub column: usize,
    /// The parser's message, on one line.
    pub message: String,
}

impl TomlSyntaxError {
    /// The error `e` of parsing `text`, the contents of the `what` at `path`.
    pub fn new(what: &'static str, path: &Path, text: &str, e: &toml::de::Error) -> Self {
        let (line, column) = e.span().map_or((1, 1), |span| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            (line, column)
        });
        Self {
            what,
            path: path.display().to_string(),
            line,
            column,
            message: e.message().trim().replace('\n', "; "),
        }
    }
}

impl PlanRequest {
    /// The plan `choice` names: `fused`, `threaded`, `processes`, or a plan file's path (read
    /// and parsed here).
    pub fn from_choice(choice: &str) -> Result<Self, PlanChoiceError> {
        match choice {
            "fused" => Ok(Self::Fused),
            "threaded" => Ok(Self::Threaded),
            "processes" => Ok(Self::Processes),
            "auto" => Ok(Self::Auto),
            path => {
                let path = PathBuf::from(path);
                let shown = path.display().to_string();
                if !path.exists() {
                    return Err(PlanChoiceError::Unknown(shown));
                }
                let text =
                    crate::read_text_file(&path).map_err(|source| PlanChoiceError::Read {
                        path: shown.clone(),
                        source,
                    })?;
                let file = PlanFile::read(&path, &text)?;
                Ok(Self::File(shown, file))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_files_choose_a_plan() {
        assert_eq!(
            PlanRequest::from_choice("fused").unwrap(),
            PlanRequest::Fused
        );
        assert_eq!(
            PlanRequest::from_choice("processes").unwrap(),
            PlanRequest::Processes
        );
        let unknown = PlanRequest::from_choice("/no/such/plan.toml").unwrap_err();
        let unknown = unknown.to_string();
        assert!(
            unknown.starts_with("--plan /no/such/plan.toml: not 'auto', 'fused', 'threaded'"),
            "{unknown}"
        );
        let dir = std::env::temp_dir().join(format!("sluice-plan-choice-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad = dir.join("bad.toml");
        std::fs::write(&bad, "queue_capacity = 4\n[[thread]]\nname = \n").unwrap();
        let syntax = PlanRequest::from_choice(bad.to_str().unwrap()).unwrap_err();
        let text = syntax.to_string();
        assert!(
            text.starts_with(&format!("plan file {}, line 3, column ", bad.display())),
            "{text}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
