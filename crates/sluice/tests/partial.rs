//! A run tells whether its output is partial: not after `--duration` ends a generated source
//! (complete by design) nor after a file is read to its end, but after Ctrl-C, SIGTERM or
//! `sluice stop`, and after `--duration` cuts a file short. `--rate` throttles a file only
//! with `--throttle-input`.

mod common;

use std::process::{Child, Command, Output};

use common::{signal, stderr, stdout};

const PARTIAL: &str = "partial output: ";

/// Starts a generated WordCount that would run for a minute, and waits until its sources run.
fn start() -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command.args(["run", "wordcount", "--rate", "1000", "--duration", "60"]);
    common::start_and_wait(command)
}

/// Waits for `job` and checks it drained and ended well.
fn finish(job: Child) -> Output {
    let o = job.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    o
}

/// Checks the summary says the output is partial because `why`, and returns the reason line.
fn assert_partial(o: &Output, why: &str) -> String {
    let line = stdout(o)
        .lines()
        .find(|l| l.starts_with(PARTIAL))
        .unwrap_or_else(|| panic!("no partial line: {}", stdout(o)))
        .to_string();
    assert!(line.contains(why), "{line}");
    line[PARTIAL.len()..].to_string()
}

#[test]
fn a_duration_ends_a_generated_run_complete() {
    let o = common::sluice(&["run", "wordcount", "--rate", "1000", "--duration", "0.5"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stdout(&o).contains("partial"), "{}", stdout(&o));
    assert!(!stderr(&o).contains("partial"), "{}", stderr(&o));
}

#[test]
fn ctrl_c_and_sigterm_make_the_output_partial() {
    for name in ["INT", "TERM"] {
        let job = start();
        signal(job.id(), name);
        assert_partial(
            &finish(job),
            "stopped by Ctrl-C or SIGTERM before its sources ended",
        );
    }
}

#[test]
fn sluice_stop_makes_the_output_partial() {
    let job = start();
    let o = common::sluice(&["stop", &format!("wordcount-{}", job.id())]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_partial(
        &finish(job),
        "stopped (sluice stop) before its sources ended",
    );
}

#[test]
fn rate_throttles_a_file_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("book.txt");
    common::write_wordcount_input(&input, 200);
    let output = dir.path().join("counts.tsv");
    let run = |extra: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["run", "wordcount", "--input"])
            .arg(&input)
            .arg("--output")
            .arg(&output)
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        o
    };
    // At 1 line a second the file would take 200 s: it is read whole, at once, with a word.
    let o = run(&["--rate", "1"]);
    assert!(stdout(&o).starts_with("sentences: 200 "), "{}", stdout(&o));
    assert!(!stdout(&o).contains("partial"), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("warning: --rate 1 does not throttle the input file"),
        "{}",
        stderr(&o)
    );
    // Asked for, the rate holds it back, and the duration cuts it short.
    let o = run(&["--rate", "1", "--throttle-input", "--duration", "1"]);
    let sentences: u64 = stdout(&o)
        .strip_prefix("sentences: ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", stdout(&o)));
    assert!(sentences < 200, "{}", stdout(&o));
    assert_partial(
        &o,
        "--duration ended the job before its input file was read to the end",
    );
    let o = common::sluice(&["run", "wordcount", "--throttle-input"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--rate"), "{}", stderr(&o));
}

#[test]
fn a_duration_that_cuts_a_finite_generated_input_short_makes_the_output_partial() {
    // Every application whose generated input has an end of its own, far more of it than a
    // second at the rate given can generate.
    let cut: [&[&str]; 5] = [
        &["wordcount", "--set", "sentences=100000000"],
        &["vwap", "--set", "records=100000000", "--set", "groups=2"],
        &["sol", "--set", "tuples=100000000", "--set", "parallelism=1"],
        &[
            "throughput-test",
            "--set",
            "tuples=100000000",
            "--set",
            "parallelism=1",
        ],
        &[
            "compress",
            "--set",
            "size=100000000",
            "--set",
            "packet=1000",
        ],
    ];
    for app in cut {
        let mut args = vec!["run"];
        args.extend_from_slice(app);
        args.extend_from_slice(&["--rate", "1000", "--duration", "1"]);
        let o = common::sluice(&args);
        assert!(o.status.success(), "{app:?}: {}", stderr(&o));
        let why = assert_partial(
            &o,
            "--duration ended the job before its generated input was used up (",
        );
        assert!(why.contains(" of 100000"), "{app:?}: {why}");
        assert!(
            stderr(&o).contains("the output is partial"),
            "{}",
            stderr(&o)
        );
    }
    // All of it generated before the duration: complete.
    let o = common::sluice(&[
        "run",
        "wordcount",
        "--set",
        "sentences=100",
        "--duration",
        "30",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("sentences: 100 "), "{}", stdout(&o));
    assert!(!stdout(&o).contains("partial"), "{}", stdout(&o));
}
