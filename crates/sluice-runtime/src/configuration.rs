//! The run options of a program of its own from the places `sluice run` reads its options
//! from: [`configured_options`] gives [`RunOptions`] with what the `SLUICE_*` variables and
//! the TOML file named by `SLUICE_CONFIG` say, over the defaults. The names and the values are
//! `sluice run`'s (`SLUICE_WORKERS=4`, `SLUICE_STALL_TIMEOUT=10`, `duration = 2`,
//! `checkpoint-align-limit = 5000` in the file, `_` accepted for `-`), parsed by the same
//! functions ([`parse_seconds`], [`parse_duration`]), and the precedence is the same: a
//! variable wins over the file, which wins over the default; the program's own code, as
//! `sluice run`'s command line, has the last word over what it sets after the call.
//!
//! Why a call and not `run` reading them itself: a value the program's code fixes (a test's
//! launcher, say) must not change because a variable is set in its environment, and `run`
//! cannot tell a field the code set from a default. The file's reading ([`read_file`]) is the
//! `sluice` command's too, so both read one syntax.
//!
//! Keys of `sluice run` that are no run option (`rate`, `plan`, `input`, the `[set]` table of
//! application settings, ...) are left to the command: a program ignores them, so one file
//! serves both. Every key in [`KEYS`] is an option of `sluice run` (its tests check it).

use std::path::{Path, PathBuf};
use std::time::Duration;

use sluice_sync::IdleStrategy;
use thiserror::Error;

use crate::{CheckpointOptions, Launcher, RunOptions};

/// The prefix of the variables read.
pub const PREFIX: &str = "SLUICE_";
/// The variable naming the configuration file.
pub const CONFIG_VARIABLE: &str = "SLUICE_CONFIG";
/// The file's table of application settings, which are `sluice run`'s alone.
pub const SETTINGS_TABLE: &str = "set";
/// The most polling workers a process may be given (`workers`).
pub const MAX_WORKERS: u32 = 4096;

/// The run options read, as `sluice run` names its options.
pub const KEYS: [&str; 18] = [
    "duration",
    "launcher",
    "idle",
    "workers",
    "stall-timeout",
    "drain-timeout",
    "start-timeout",
    "metrics",
    "latency-every",
    "poll-batch",
    "collect-limit",
    "checkpoint-every",
    "checkpoint-dir",
    "checkpoints-retained",
    "restarts",
    "restart-delay",
    "checkpoint-mode",
    "checkpoint-align-limit",
];

/// Why the configuration could not be read.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read the configuration file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is no TOML.
    #[error("{path}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A line of the file holds what no option takes.
    #[error("{path}:{line}: {message}")]
    Line {
        /// The file.
        path: PathBuf,
        /// The line.
        line: usize,
        /// What is wrong.
        message: &'static str,
    },
    /// The checkpoint options given do not go together.
    #[error("checkpoints: {0}")]
    Checkpoints(String),
    /// A value is not one its option takes.
    #[error("{whence}: {key}: {message}")]
    Value {
        /// Where it came from: `environment SLUICE_X` or `FILE:LINE`.
        whence: String,
        /// The option.
        key: String,
        /// What is wrong.
        message: String,
    },
}

/// One top-level key of a configuration file, or one of its `[set]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// The key as written (`_` not yet read as `-`).
    pub key: String,
    /// The value as the command line would give it.
    pub text: String,
    /// Its line in the file.
    pub line: usize,
    /// Whether it is an application setting (in `[set]`).
    pub setting: bool,
}

/// The keys and values of the configuration file at `path` (at most
/// [`sluice_plan::MAX_TEXT_FILE_BYTES`]): scalars only, settings in the `[set]` table; a file
/// that names another (`config`) is refused.
pub fn read_file(path: &Path) -> Result<Vec<FileEntry>, ConfigError> {
    let text = sluice_plan::read_text_file(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let refused = |line: usize, message: &'static str| ConfigError::Line {
        path: path.to_path_buf(),
        line,
        message,
    };
    let document =
        toml_edit::ImDocument::parse(text.as_str()).map_err(|e| ConfigError::Syntax {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
    let line = |span: Option<std::ops::Range<usize>>| {
        span.map_or(0, |s| text[..s.start].matches('\n').count() + 1)
    };
    let mut entries = Vec::new();
    let table = document.as_table();
    for (key, item) in table.iter() {
        let key_line = line(table.get_key_value(key).and_then(|(k, _)| k.span()));
        if key == SETTINGS_TABLE {
            let Some(set) = item.as_table_like() else {
                return Err(refused(
                    key_line,
                    "`set` must be a table of settings ([set], then key = value)",
                ));
            };
            for (setting, value) in set.iter() {
                let setting_line = line(set.get_key_value(setting).and_then(|(k, _)| k.span()));
                let text = scalar(value).ok_or_else(|| refused(setting_line, SCALARS))?;
                entries.push(FileEntry {
                    key: setting.to_string(),
                    text,
                    line: setting_line,
                    setting: true,
                });
            }
            continue;
        }
        if key == "config" {
            return Err(refused(
                key_line,
                "a configuration file cannot name another (`config`)",
            ));
        }
        let text = scalar(item).ok_or_else(|| refused(key_line, SCALARS))?;
        entries.push(FileEntry {
            key: key.to_string(),
            text,
            line: key_line,
            setting: false,
        });
    }
    Ok(entries)
}

/// What a file's value may be.
const SCALARS: &str = "a value must be a string, a number or true/false";

/// A file's value as the command line would give it: a string, number or boolean.
fn scalar(item: &toml_edit::Item) -> Option<String> {
    let value = item.as_value()?;
    value
        .as_str()
        .map(str::to_string)
        .or_else(|| value.as_integer().map(|n| n.to_string()))
        .or_else(|| value.as_float().map(|x| x.to_string()))
        .or_else(|| value.as_bool().map(|b| b.to_string()))
}

/// A duration in seconds, such as `5` or `0.5` (`duration`, the timeouts).
pub fn parse_seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("'{text}' is not a number of seconds"))?;
    if !secs.is_finite() || secs <= 0.0 || secs > 1e9 {
        return Err(format!("'{text}' must be a positive number of seconds"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A duration as a person writes it: `1s`, `200ms`, `2m`, or a number of seconds (the
/// checkpoints' periods).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration = match text.parse::<f64>() {
        Ok(_) => parse_seconds(text)?,
        Err(_) => humantime::parse_duration(text)
            .map_err(|e| format!("'{text}' is not a duration (e.g. 1s, 200ms, 0.5): {e}"))?,
    };
    if duration.is_zero() {
        return Err(format!("'{text}' must be longer than zero"));
    }
    Ok(duration)
}

/// The run options the `SLUICE_*` variables of this process and the file named by
/// `SLUICE_CONFIG` say, over [`RunOptions::default`]; see the module's docs.
pub fn configured_options() -> Result<RunOptions, ConfigError> {
    options_from(std::env::vars_os())
}

/// A value read and where it came from.
struct Given {
    text: String,
    whence: String,
}

/// [`configured_options`] from `variables` (name and value each).
fn options_from(
    variables: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Result<RunOptions, ConfigError> {
    let variables: Vec<(String, String)> = variables
        .into_iter()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .collect();
    // Each key's value, the file's first, then a variable's over it.
    let mut given: Vec<(&'static str, Given)> = Vec::new();
    let mut put = |key: &str, value: Given| {
        let Some(key) = KEYS.iter().find(|k| **k == key.replace('_', "-")) else {
            return;
        };
        given.retain(|(k, _)| k != key);
        given.push((key, value));
    };
    if let Some((_, file)) = variables.iter().find(|(n, _)| n == CONFIG_VARIABLE) {
        let path = Path::new(file);
        for entry in read_file(path)?.into_iter().filter(|e| !e.setting) {
            let whence = format!("{}:{}", path.display(), entry.line);
            put(
                &entry.key,
                Given {
                    text: entry.text,
                    whence,
                },
            );
        }
    }
    for (name, value) in &variables {
        if let Some(key) = name.strip_prefix(PREFIX) {
            let whence = format!("environment {name}");
            put(
                &key.to_ascii_lowercase(),
                Given {
                    text: value.clone(),
                    whence,
                },
            );
        }
    }
    let mut options = RunOptions::default();
    let mut checkpoints = CheckpointSettings::default();
    for (key, value) in &given {
        set(&mut options, &mut checkpoints, key, &value.text).map_err(|message| {
            ConfigError::Value {
                whence: value.whence.clone(),
                key: key.to_string(),
                message,
            }
        })?;
    }
    options.checkpoints = checkpoints.options().map_err(ConfigError::Checkpoints)?;
    Ok(options)
}

/// The checkpoint options read, checked together once all are in.
#[derive(Default)]
struct CheckpointSettings {
    every: Option<Duration>,
    dir: Option<PathBuf>,
    /// Whether any other checkpoint option was given.
    others: bool,
    retained: Option<usize>,
    restarts: Option<u32>,
    restart_delay: Option<Duration>,
    unaligned: bool,
    align_limit: Option<u64>,
}

impl CheckpointSettings {
    /// The checkpoint options, if `checkpoint-every` was given; an error when another
    /// checkpoint option was given without it, or without `checkpoint-dir`.
    fn options(self) -> Result<Option<CheckpointOptions>, String> {
        let Some(every) = self.every else {
            return match self.others {
                true => Err("the checkpoint options need checkpoint-every".into()),
                false => Ok(None),
            };
        };
        let Some(dir) = self.dir else {
            return Err("a program's checkpoints need checkpoint-dir too".into());
        };
        let defaults = CheckpointOptions::new(every, Box::leak(dir.into_boxed_path()));
        Ok(Some(CheckpointOptions {
            retained: self.retained.unwrap_or(defaults.retained),
            restarts: self.restarts.unwrap_or(defaults.restarts),
            restart_delay: self.restart_delay.unwrap_or(defaults.restart_delay),
            unaligned: self.unaligned,
            align_limit: self.align_limit.unwrap_or(defaults.align_limit),
            ..defaults
        }))
    }
}

/// A whole number from `text` in `range`.
fn number<T>(text: &str, range: std::ops::RangeInclusive<T>) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display,
{
    let n: T = text
        .parse()
        .map_err(|_| format!("'{text}' is not a whole number"))?;
    if !range.contains(&n) {
        return Err(format!(
            "{text} is not in {}..={}",
            range.start(),
            range.end()
        ));
    }
    Ok(n)
}

/// Sets `key` to `text` in `options` (the checkpoints' in `checkpoints`).
fn set(
    options: &mut RunOptions,
    checkpoints: &mut CheckpointSettings,
    key: &str,
    text: &str,
) -> Result<(), String> {
    let one_of = |names: &[&str]| format!("'{text}' is not one of {}", names.join(", "));
    match key {
        "duration" => options.duration = Some(parse_seconds(text)?),
        "launcher" => {
            options.launcher = match text {
                "local" => Launcher::Local,
                "mpi" => Launcher::Mpi,
                "in-process" => Launcher::InProcess,
                _ => return Err(one_of(&["local", "mpi", "in-process"])),
            }
        }
        "idle" => options.idle = Some(IdleStrategy::parse(text).map_err(|e| e.to_string())?),
        "workers" => options.workers = Some(number(text, 1..=MAX_WORKERS)? as usize),
        "stall-timeout" => options.stall_timeout = parse_seconds(text)?,
        "drain-timeout" => options.drain_timeout = parse_seconds(text)?,
        "start-timeout" => options.start_timeout = parse_seconds(text)?,
        "metrics" => {
            options.metrics = match text {
                "on" => true,
                "off" => false,
                _ => return Err(one_of(&["on", "off"])),
            }
        }
        "latency-every" => options.latency_every = number(text, 0..=u64::MAX)?,
        "poll-batch" => options.poll_batch = number(text, 1..=u32::MAX)? as usize,
        "collect-limit" => options.collect_limit = number(text, 1..=u64::MAX)?,
        "checkpoint-every" => checkpoints.every = Some(parse_duration(text)?),
        "checkpoint-dir" => checkpoints.dir = Some(PathBuf::from(text)),
        _ => {
            checkpoints.others = true;
            match key {
                "checkpoints-retained" => {
                    checkpoints.retained = Some(number(text, 1..=1000u32)? as usize)
                }
                "restarts" => checkpoints.restarts = Some(number(text, 0..=u32::MAX)?),
                "restart-delay" => checkpoints.restart_delay = Some(parse_duration(text)?),
                "checkpoint-mode" => {
                    checkpoints.unaligned = match text {
                        "aligned" => false,
                        "unaligned" => true,
                        _ => return Err(one_of(&["aligned", "unaligned"])),
                    }
                }
                _ => checkpoints.align_limit = Some(number(text, 1..=u64::MAX)?),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The options from `variables`, as `(name, value)` pairs.
    fn from(variables: &[(&str, &str)]) -> Result<RunOptions, ConfigError> {
        options_from(
            variables
                .iter()
                .map(|(n, v)| (n.into(), v.into()))
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("200ms"), Ok(Duration::from_millis(200)));
        assert_eq!(parse_duration("0.5"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("soon")
            .unwrap_err()
            .contains("'soon' is not a duration"));
    }

    #[test]
    fn variables_set_every_kind_of_option_and_leave_the_commands_own_alone() {
        let options = from(&[
            ("SLUICE_WORKERS", "3"),
            ("SLUICE_STALL_TIMEOUT", "7"),
            ("SLUICE_LAUNCHER", "in-process"),
            ("SLUICE_IDLE", "park"),
            ("SLUICE_METRICS", "off"),
            ("SLUICE_POLL_BATCH", "32"),
            ("SLUICE_COLLECT_LIMIT", "1000"),
            // `sluice run`'s, no run option: left alone.
            ("SLUICE_RATE", "10"),
            ("SLUICE_SET_PARALLELISM", "4"),
            ("HOME", "/nowhere"),
        ])
        .unwrap();
        let expected = RunOptions {
            workers: Some(3),
            stall_timeout: Duration::from_secs(7),
            launcher: Launcher::InProcess,
            idle: Some(IdleStrategy::Park),
            metrics: false,
            poll_batch: 32,
            collect_limit: 1000,
            ..RunOptions::default()
        };
        assert_eq!(options, expected);
        assert_eq!(from(&[]).unwrap(), RunOptions::default());
    }

    #[test]
    fn a_variable_wins_over_the_file_and_every_checkpoint_option_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sluice.toml");
        std::fs::write(
            &file,
            "rate = 1000\nworkers = 2\nduration = 9\ncheckpoint_every = \"200ms\"\n\
             checkpoint-dir = \"/var/cp\"\ncheckpoint-align-limit = 5000\n\
             checkpoint-mode = \"unaligned\"\nrestarts = 1\n[set]\nparallelism = 4\n",
        )
        .unwrap();
        let config = file.to_str().unwrap();
        let options = from(&[(CONFIG_VARIABLE, config), ("SLUICE_DURATION", "1.5")]).unwrap();
        assert_eq!(options.workers, Some(2));
        assert_eq!(options.duration, Some(Duration::from_millis(1500)));
        let checkpoints = options.checkpoints.expect("checkpoints");
        assert_eq!(checkpoints.every, Duration::from_millis(200));
        assert_eq!(checkpoints.dir, Path::new("/var/cp"));
        assert_eq!(checkpoints.align_limit, 5000);
        assert!(checkpoints.unaligned);
        assert_eq!(checkpoints.restarts, 1);
    }

    #[test]
    fn a_bad_value_is_refused_naming_where_it_came_from_and_the_option() {
        let refused = from(&[("SLUICE_WORKERS", "0")]).unwrap_err().to_string();
        assert_eq!(
            refused,
            format!("environment SLUICE_WORKERS: workers: 0 is not in 1..={MAX_WORKERS}")
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, "# a comment\nlauncher = \"ssh\"\n").unwrap();
        let refused = from(&[(CONFIG_VARIABLE, file.to_str().unwrap())])
            .unwrap_err()
            .to_string();
        assert!(
            refused.ends_with("bad.toml:2: launcher: 'ssh' is not one of local, mpi, in-process"),
            "{refused}"
        );
        let refused = from(&[("SLUICE_CHECKPOINT_ALIGN_LIMIT", "10")])
            .unwrap_err()
            .to_string();
        assert!(refused.contains("need checkpoint-every"), "{refused}");
        let refused = from(&[("SLUICE_CHECKPOINT_EVERY", "1s")])
            .unwrap_err()
            .to_string();
        assert!(refused.contains("need checkpoint-dir"), "{refused}");
    }
}
