//! Configuration of `sluice run` from a TOML file (`--config`) and `SLUICE_*` variables:
//! precedence (command line > environment > file > default) as `sluice config show` reports
//! it, a run that takes its values from both, and the errors for unknown keys and bad values.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{stderr, stdout};

/// Environment variables, by name.
type Variables<'a> = &'a [(&'a str, &'a str)];

/// Runs `sluice args` with exactly the `SLUICE_*` variables of `env`.
fn sluice_with(env: Variables, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("SLUICE_") {
            command.env_remove(name);
        }
    }
    command
        .envs(env.iter().copied())
        .args(args)
        .output()
        .unwrap()
}

/// The line of `config show`'s output for `key`.
fn shown(o: &Output, key: &str) -> String {
    assert!(o.status.success(), "{}", stderr(o));
    stdout(o)
        .lines()
        .find(|l| l.starts_with(&format!("{key} = ")) || l.starts_with(&format!("# {key}: ")))
        .unwrap_or_else(|| panic!("no {key} in {}", stdout(o)))
        .to_string()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn the_command_line_wins_over_the_environment_over_the_file_over_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "run.toml",
        "rate = 500\nstall_timeout = 7\n\n[set]\nwords = 5\nseed = 9\n",
    );
    let env = [("SLUICE_RATE", "700"), ("SLUICE_SET_WORDS", "7")];
    let all = sluice_with(
        &env,
        &[
            "config",
            "show",
            "wordcount",
            "--config",
            &file,
            "--rate",
            "900",
            "--set",
            "words=9",
        ],
    );
    assert_eq!(shown(&all, "rate"), "rate = 900  # command line");
    assert_eq!(shown(&all, "words"), "words = 9  # command line");
    let no_command_line = sluice_with(&env, &["config", "show", "wordcount", "--config", &file]);
    assert_eq!(
        shown(&no_command_line, "rate"),
        "rate = 700  # environment SLUICE_RATE"
    );
    assert_eq!(
        shown(&no_command_line, "words"),
        "words = 7  # environment SLUICE_SET_WORDS"
    );
    assert_eq!(
        shown(&no_command_line, "seed"),
        format!("seed = 9  # {file}:6")
    );
    assert_eq!(
        shown(&no_command_line, "stall-timeout"),
        format!("stall-timeout = 7  # {file}:2")
    );
    let file_only = sluice_with(&[], &["config", "show", "wordcount", "--config", &file]);
    assert_eq!(shown(&file_only, "rate"), format!("rate = 500  # {file}:1"));
    let file_by_variable = sluice_with(
        &[("SLUICE_CONFIG", &file)],
        &["config", "show", "wordcount"],
    );
    assert_eq!(
        shown(&file_by_variable, "rate"),
        format!("rate = 500  # {file}:1")
    );
    assert_eq!(
        shown(&file_by_variable, "config"),
        format!("# config: {file}  # environment SLUICE_CONFIG")
    );
    let defaults = sluice_with(&[], &["config", "show", "wordcount"]);
    assert!(
        shown(&defaults, "rate").ends_with("# default"),
        "{}",
        stdout(&defaults)
    );
    assert_eq!(
        shown(&defaults, "launcher"),
        "launcher = \"local\"  # default"
    );

    // What `config show` prints is itself a configuration file giving the same values.
    let again = write(dir.path(), "again.toml", &stdout(&no_command_line));
    let reread = sluice_with(&[], &["config", "show", "wordcount", "--config", &again]);
    let rate_line = 1 + stdout(&no_command_line)
        .lines()
        .position(|l| l.starts_with("rate ="))
        .expect("config show prints the rate");
    assert_eq!(
        shown(&reread, "rate"),
        format!("rate = 700  # {again}:{rate_line}")
    );
    assert!(shown(&reread, "words").starts_with("words = 7  # "));
}

#[test]
fn a_run_takes_its_options_and_settings_from_the_file_and_environment() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "run.toml",
        "rate = 0\nduration = 30\nplan = \"processes\"\n[set]\nsentences = 256\n",
    );
    // Every PE re-runs the command line in the same environment, so it builds the same graph
    // (two sum instances) as the launcher plans.
    let o = sluice_with(
        &[("SLUICE_SET_PARALLELISM", "2")],
        &["run", "wordcount", "--config", &file],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("sentences: 256 "), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("processes, 5 process(es)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn unknown_keys_and_bad_values_are_errors_naming_where_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(Variables, &str, String); 7] = [
        (
            &[],
            "config = \"other.toml\"\n",
            "run.toml:1: a configuration file cannot name another (`config`)".into(),
        ),
        (
            &[],
            "rate = 1\n\nrat = 2\n",
            "run.toml:3: `sluice run` has no option 'rat'".into(),
        ),
        (
            &[],
            "[set]\nwords = 3\nwrods = 3\n",
            "run.toml:3: wordcount has no setting 'wrods'".into(),
        ),
        (
            &[],
            "rate = \"fast\"\n",
            "run.toml:1: invalid value 'fast' for '--rate <RATE>'".into(),
        ),
        (
            &[],
            "json = 1\n",
            "run.toml:1: --json is a flag: true or false, not '1'".into(),
        ),
        (
            &[("SLUICE_RAET", "1")],
            "",
            "environment SLUICE_RAET: `sluice run` has no option 'raet'".into(),
        ),
        (
            &[("SLUICE_SET_WROD", "1")],
            "",
            "environment SLUICE_SET_WROD: wordcount has no setting 'wrod'".into(),
        ),
    ];
    for (env, text, expected) in cases {
        let file = write(dir.path(), "run.toml", text);
        let o = sluice_with(env, &["run", "wordcount", "--config", &file]);
        assert!(!o.status.success(), "{text}");
        let err = stderr(&o);
        assert!(
            err.starts_with(&format!("error: {}", dir.path().join("").display()))
                || err.starts_with("error: environment"),
            "{err}"
        );
        assert!(err.contains(&expected), "{err} lacks {expected}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    let o = sluice_with(
        &[],
        &["run", "wordcount", "--config", "/nonexistent/run.toml"],
    );
    assert!(
        stderr(&o).starts_with("error: cannot read the configuration file /nonexistent/run.toml"),
        "{}",
        stderr(&o)
    );
    let broken = write(dir.path(), "broken.toml", "rate = \n");
    let o = sluice_with(&[], &["run", "wordcount", "--config", &broken]);
    assert!(
        stderr(&o).contains("broken.toml: TOML parse error at line 1"),
        "{}",
        stderr(&o)
    );
    let o = sluice_with(&[], &["config", "show", "wordcont"]);
    assert!(
        stderr(&o).starts_with("error: no application named 'wordcont'"),
        "{}",
        stderr(&o)
    );
    // The launcher's own variables and the harnesses' are no configuration.
    let o = sluice_with(
        &[("SLUICE_TEST_ANYTHING", "1")],
        &["config", "show", "wordcount"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
}
