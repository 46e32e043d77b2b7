//! The log of `sluice run`: `--quiet` leaves only the summary, `--verbose` adds debug lines,
//! from every PE's process too (prefixed with the PE's name), and `RUST_LOG` filters.

mod common;

use std::process::{Command, Output};

use common::{stderr, stdout};

/// Runs WordCount for half a second at a rate any machine reaches (no warning that it fell
/// short), with `env` and `args`.
fn run(env: &[(&str, &str)], args: &[&str]) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .args(["run", "wordcount", "--duration", "0.5", "--rate", "1000"])
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("sentences: "), "{}", stdout(&o));
    o
}

#[test]
fn quiet_leaves_the_summary_alone() {
    let o = run(&[], &["--quiet"]);
    assert_eq!(stderr(&o), "");
}

#[test]
fn verbose_logs_debug_lines_from_every_pe_named_by_its_prefix() {
    let o = run(&[], &["--verbose", "--plan", "processes"]);
    let err = stderr(&o);
    assert!(err.contains("\ndebug: run options "), "{err}");
    assert!(err.lines().any(|l| l.starts_with("started: ")), "{err}");
    for pe in ["sentences", "split", "sum", "counts"] {
        assert!(
            err.contains(&format!(
                "[{pe}] debug: this PE builds its part of the job job=wordcount"
            )),
            "{pe}: {err}"
        );
    }
}

#[test]
fn rust_log_filters_when_no_flag_is_given() {
    // Warnings only (a loaded machine may warn that the rate fell short).
    let o = run(&[("RUST_LOG", "warn")], &[]);
    assert!(
        stderr(&o).lines().all(|l| l.starts_with("warning: ")),
        "{}",
        stderr(&o)
    );
    let o = run(&[("RUST_LOG", "debug")], &[]);
    assert!(stderr(&o).contains("debug: run options "), "{}", stderr(&o));
    let o = run(&[("RUST_LOG", "debug")], &["--quiet"]);
    assert_eq!(stderr(&o), "");
}
