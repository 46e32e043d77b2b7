//! The configuration of `sluice run` from three places besides the command line, and `sluice
//! config show`, which prints every effective value and where it came from.
//!
//! Every option of `sluice run` (`--rate`, `--plan`, `--duration`, `--ui`, ...) and every
//! application setting (`--set key=value`) can also come from
//!
//! - the environment: `SLUICE_<OPTION>` for an option, its name upper-cased with `-` written
//!   `_` (`SLUICE_RATE=1000`, `SLUICE_STALL_TIMEOUT=10`, `SLUICE_JSON=true`), and
//!   `SLUICE_SET_<KEY>` for a setting (`SLUICE_SET_PARALLELISM=4`, `SLUICE_SET_SAMPLE_EVERY=800`);
//! - a TOML file named by `--config FILE` (or `SLUICE_CONFIG`): a key per option, named as the
//!   option (`rate = 1000`, `stall-timeout = 10`, `_` accepted for `-`, a flag `true` or
//!   `false`), and the settings in a `[set]` table (`[set]` then `parallelism = 4`).
//!
//! The command line wins over the environment, which wins over the file, which wins over the
//! defaults; for settings, key by key. A value from the environment or the file is checked as
//! the command line checks it, and its error names the variable, or the file and line. A key of
//! the file or a `SLUICE_*` variable that names no option or setting of the application is an
//! error, except the variables the launcher gives its PEs (`sluice_runtime::PE_ENVIRONMENT`)
//! and those of the test and benchmark harnesses (`SLUICE_TEST_*`, `SLUICE_BENCH_*`, ...).
//!
//! A program of its own reads the same variables and file for its run options
//! ([`sluice_runtime::configuration`], which reads the file for this module too); every run
//! option it reads is an option of `sluice run` (checked below).
//!
//! How it works: before the command line is parsed, the values it lacks are added to it as
//! options (`--rate 1000`), so every PE of a job, which re-runs the same command line in the
//! same environment, resolves the same values. A PE on another host (a hosts file's launch
//! command) sees that host's environment and file instead: give such a job its configuration
//! on the command line.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Arg, ArgAction, ArgMatches};

/// The prefix of every variable this module reads.
const PREFIX: &str = sluice_runtime::configuration::PREFIX;
/// The prefix of a setting's variable.
const SET_PREFIX: &str = "SLUICE_SET_";
/// The option naming the configuration file, and the file's table of settings.
const CONFIG: &str = "config";
const SET: &str = sluice_runtime::configuration::SETTINGS_TABLE;
/// `SLUICE_*` variables of other commands than `run`, which are not its configuration.
const OTHER_COMMANDS: [&str; 1] = ["SLUICE_UI_TOKEN"];
/// `SLUICE_*` variables of the test and benchmark harnesses, which are not configuration.
const HARNESS_PREFIXES: [&str; 4] = [
    "SLUICE_TEST_",
    "SLUICE_BENCH_",
    "SLUICE_SHM_TEST_",
    "SLUICE_PLOT_",
];

/// Where an effective value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// The command line.
    CommandLine,
    /// An environment variable.
    Environment(String),
    /// A line of the configuration file.
    File(PathBuf, usize),
    /// The default.
    Default,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::CommandLine => write!(f, "command line"),
            Self::Environment(name) => write!(f, "environment {name}"),
            Self::File(path, line) => write!(f, "{}:{line}", path.display()),
            Self::Default => write!(f, "default"),
        }
    }
}

/// One value and where it came from.
#[derive(Debug, Clone)]
struct Value {
    text: String,
    source: Source,
}

/// What the environment or the file gives: options and settings by key.
#[derive(Default)]
struct Layer {
    options: BTreeMap<String, Value>,
    settings: BTreeMap<String, Value>,
}

/// The effective configuration of a `run` or `config show` command line.
#[derive(Debug, Default)]
pub(crate) struct Effective {
    /// The application.
    app: String,
    /// Every option of `sluice run`, in its order: its value (`None`: unset) and source.
    options: Vec<(String, Option<String>, Source)>,
    /// Every setting given anywhere, by key.
    settings: BTreeMap<String, (String, Source)>,
}

/// Where the subcommand that takes run options is in `args`, and its name in `command`:
/// `sluice run ...` and `sluice config show ...`.
fn run_position(args: &[OsString]) -> Option<usize> {
    match args.get(1).and_then(|a| a.to_str()) {
        Some("run") => Some(2),
        Some("config") if args.get(2).and_then(|a| a.to_str()) == Some("show") => Some(3),
        _ => None,
    }
}

/// `args` with what the environment (`variables`) and the configuration file give for the
/// options and settings it lacks, and the effective configuration; `args` unchanged for a
/// command that takes no run options. `command` is the whole program's command, `matches` its
/// parse of `args`.
pub(crate) fn resolve(
    args: Vec<OsString>,
    command: &clap::Command,
    matches: &ArgMatches,
    variables: impl IntoIterator<Item = (OsString, OsString)>,
) -> anyhow::Result<(Vec<OsString>, Effective)> {
    let Some(position) = run_position(&args) else {
        return Ok((args, Effective::default()));
    };
    let (run, given) = match matches.subcommand() {
        Some(("run", given)) => (command.find_subcommand("run"), given),
        Some(("config", config)) => (
            command
                .find_subcommand("config")
                .and_then(|c| c.find_subcommand("show")),
            config.subcommand_matches("show").unwrap_or(config),
        ),
        _ => (None, matches),
    };
    let run = run.context("no run options")?;
    let app: String = given.get_one::<String>("app").cloned().unwrap_or_default();
    let settings_known = sluice_apps::find(&app)
        .map(|spec| spec.settings.iter().map(|(k, _)| k.to_string()).collect())
        .ok();
    let options: Vec<&Arg> = run
        .get_arguments()
        .filter(|a| a.get_long().is_some_and(|l| l != "help" && l != SET))
        .collect();
    let known = Known {
        options: &options,
        settings: settings_known,
        app: &app,
    };
    let environment = known.environment(variables)?;
    let file_path = given.get_one::<PathBuf>(CONFIG).cloned().or_else(|| {
        environment
            .options
            .get(CONFIG)
            .map(|v| PathBuf::from(&v.text))
    });
    let file = match &file_path {
        Some(path) => known.file(path)?,
        None => Layer::default(),
    };

    let mut effective = Effective {
        app: app.clone(),
        ..Effective::default()
    };
    let mut added: Vec<OsString> = Vec::new();
    for arg in &options {
        let id = arg.get_id().as_str();
        let long = arg.get_long().unwrap_or(id);
        let from_command_line =
            given.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
        let layered = environment.options.get(long).or(file.options.get(long));
        let (text, source) = match layered {
            _ if from_command_line => (raw(given, id), Source::CommandLine),
            Some(value) => {
                check_value(arg, value)?;
                if is_flag(arg) {
                    if value.text == "true" {
                        added.push(format!("--{long}").into());
                    }
                } else if long != CONFIG {
                    added.push(format!("--{long}").into());
                    added.push(value.text.clone().into());
                }
                (Some(value.text.clone()), value.source.clone())
            }
            None => (raw(given, id), Source::Default),
        };
        effective.options.push((long.to_string(), text, source));
    }
    let set_id = run
        .get_arguments()
        .find(|a| a.get_long() == Some(SET))
        .context("no --set option")?
        .get_id();
    let on_command_line: Vec<(String, String)> = given
        .get_raw(set_id.as_str())
        .into_iter()
        .flatten()
        .filter_map(|pair| pair.to_str())
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut keys: Vec<&String> = environment.settings.keys().collect();
    keys.extend(file.settings.keys());
    for key in keys {
        if effective.settings.contains_key(key) || on_command_line.iter().any(|(k, _)| k == key) {
            continue;
        }
        let value = environment.settings.get(key).or(file.settings.get(key));
        let value = value.expect("a key of one of the layers");
        added.push(format!("--{SET}").into());
        added.push(format!("{key}={}", value.text).into());
        effective
            .settings
            .insert(key.clone(), (value.text.clone(), value.source.clone()));
    }
    for (key, value) in on_command_line {
        effective.settings.insert(key, (value, Source::CommandLine));
    }
    let mut args = args;
    args.splice(position..position, added);
    Ok((args, effective))
}

/// The options and settings there are, to check each key and value against.
struct Known<'a> {
    options: &'a [&'a Arg],
    /// The application's settings; `None` when the application is unknown (its error comes
    /// when it is built).
    settings: Option<Vec<String>>,
    app: &'a str,
}

impl Known<'_> {
    /// Adds `key`'s `value` to `layer`, or says why not: an unknown option or setting, or a
    /// setting of a table that is not `[set]`.
    fn add(&self, layer: &mut Layer, key: &str, setting: bool, value: Value) -> anyhow::Result<()> {
        let key = key.replace('_', "-");
        if setting {
            if let Some(known) = &self.settings {
                if !known.contains(&key) {
                    bail!(
                        "{}: {} has no setting '{key}' (settings: {})",
                        value.source,
                        self.app,
                        known.join(", ")
                    );
                }
            }
            layer.settings.insert(key, value);
        } else if self.options.iter().any(|a| a.get_long() == Some(&key)) {
            layer.options.insert(key, value);
        } else {
            bail!(
                "{}: `sluice run` has no option '{key}' (options: {}; settings go in [set])",
                value.source,
                self.options
                    .iter()
                    .filter_map(|a| a.get_long())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        Ok(())
    }

    /// The options and settings of the `SLUICE_*` variables among `variables`.
    fn environment(
        &self,
        variables: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> anyhow::Result<Layer> {
        let mut layer = Layer::default();
        for (name, value) in variables {
            let Some(name) = name.to_str().filter(|n| n.starts_with(PREFIX)) else {
                continue;
            };
            if sluice_runtime::PE_ENVIRONMENT.contains(&name)
                || OTHER_COMMANDS.contains(&name)
                || HARNESS_PREFIXES.iter().any(|p| name.starts_with(p))
            {
                continue;
            }
            let Some(text) = value.to_str() else {
                bail!("environment {name}: its value is not UTF-8");
            };
            let value = Value {
                text: text.to_string(),
                source: Source::Environment(name.to_string()),
            };
            match name.strip_prefix(SET_PREFIX) {
                Some(key) => self.add(&mut layer, &key.to_ascii_lowercase(), true, value)?,
                None => {
                    let key = name[PREFIX.len()..].to_ascii_lowercase();
                    self.add(&mut layer, &key, false, value)?;
                }
            }
        }
        Ok(layer)
    }

    /// The options and settings of the configuration file at `path`, read as a program reads
    /// it ([`sluice_runtime::configuration::read_file`]).
    fn file(&self, path: &Path) -> anyhow::Result<Layer> {
        let mut layer = Layer::default();
        for entry in sluice_runtime::configuration::read_file(path)? {
            let source = Source::File(path.to_path_buf(), entry.line);
            let value = Value {
                text: entry.text,
                source,
            };
            self.add(&mut layer, &entry.key, entry.setting, value)?;
        }
        Ok(layer)
    }
}

/// Whether `arg` is a flag (`--json`): true or false, no value on the command line.
fn is_flag(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::SetTrue)
}

/// Checks `value` as the command line would check it for `arg`.
fn check_value(arg: &Arg, value: &Value) -> anyhow::Result<()> {
    let long = arg.get_long().unwrap_or_default();
    if is_flag(arg) {
        if value.text != "true" && value.text != "false" {
            bail!(
                "{}: --{long} is a flag: true or false, not '{}'",
                value.source,
                value.text
            );
        }
        return Ok(());
    }
    // The option alone, parsed as the command line parses it (without the options it
    // requires or conflicts with, which are not there; the whole command line checks those).
    let option = clap::Command::new("sluice run").no_binary_name(true).arg(
        arg.clone()
            .required(false)
            .requires(clap::builder::Resettable::<clap::Id>::Reset)
            .conflicts_with(clap::builder::Resettable::<clap::Id>::Reset),
    );
    option
        .try_get_matches_from([format!("--{long}"), value.text.clone()])
        .map(drop)
        .map_err(|e| {
            let message = e.to_string();
            let first = message.lines().next().unwrap_or_default();
            anyhow::anyhow!(
                "{}: {}",
                value.source,
                first.strip_prefix("error: ").unwrap_or(first)
            )
        })
}

/// The command line's text for `id` (its default where it has one), values joined by commas.
fn raw(matches: &ArgMatches, id: &str) -> Option<String> {
    let values: Vec<String> = matches
        .get_raw(id)?
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    Some(values.join(","))
}

/// `sluice config show`: every option and setting, its effective value and where it came from.
pub(crate) fn show(effective: &Effective) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "# sluice run {}: effective configuration",
        effective.app
    )?;
    writeln!(
        out,
        "# precedence: command line > environment (SLUICE_*) > file (--config) > default"
    )?;
    let implicit = crate::run::implicit_defaults();
    for (key, value, source) in &effective.options {
        match value {
            // A file cannot name another: the file itself is named in a comment.
            Some(value) if key == CONFIG => writeln!(out, "# {key}: {value}  # {source}")?,
            Some(value) => writeln!(out, "{key} = {}  # {source}", toml_value(value))?,
            None => {
                let default = implicit.iter().find(|(k, _)| k == key);
                let default = default.map_or("not set", |(_, text)| text.as_str());
                writeln!(out, "# {key}: {default}  # {source}")?;
            }
        }
    }
    writeln!(out, "[set]")?;
    for (key, description) in sluice_apps::find(&effective.app)?.settings {
        match effective.settings.get(*key) {
            Some((value, source)) => {
                writeln!(out, "{key} = {}  # {source}", toml_value(value))?;
            }
            None => writeln!(out, "# {key}: {description}  # default")?,
        }
    }
    Ok(())
}

/// `text` as a TOML value: a number or boolean as it is, anything else a quoted string, so that
/// what `config show` prints, less its comments, is a configuration file.
fn toml_value(text: &str) -> String {
    match text.parse::<toml_edit::Value>() {
        Ok(value) if value.is_integer() || value.is_float() || value.is_bool() => text.to_string(),
        _ => toml_edit::Value::from(text).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn every_run_option_a_program_reads_is_an_option_of_sluice_run() {
        let command = crate::Cli::command();
        let run = command.find_subcommand("run").expect("sluice run");
        for key in sluice_runtime::configuration::KEYS {
            assert!(
                run.get_arguments().any(|a| a.get_long() == Some(key)),
                "`sluice run` has no --{key}, which a program's configuration reads"
            );
        }
    }

    #[test]
    fn no_setting_has_an_underscore_so_variables_name_settings_unambiguously() {
        for spec in sluice_apps::registry() {
            for (key, _) in spec.settings {
                assert!(!key.contains('_'), "{}'s setting {key}", spec.name);
            }
        }
    }
}
