//! Printing to standard output, read through a pipe whose reader goes away after a few lines
//! (`| head -3`): the job ends quietly, counting the broken pipe and the tuples not written.
//!
//! The test runs itself again as a child process whose standard output is a pipe the test
//! reads; the child runs the job and reports its counters on standard error.

#[path = "../../sluice-ops/tests/common/mod.rs"]
mod common;

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use sluice_connectors::{ByteTarget, StreamSink};
use sluice_ops::Generator;
use sluice_plan::PlanRequest;

use common::{counter, run_under, source_into, Watchdog};

/// Set in the child: it runs the printing job.
const CHILD: &str = "SLUICE_TEST_STDOUT_CHILD";
/// Lines the child prints: far more than a pipe holds, so its writes meet the closed pipe.
const LINES: u64 = 200_000;

/// The child: prints `LINES` lines, reports the sink's counters on standard error and exits
/// before the test harness writes to the broken pipe itself.
fn print_into_the_pipe() -> ! {
    let graph = source_into::<u64, _, _>(
        || Generator::new(Some).count(LINES),
        || {
            StreamSink::formatted_lines(ByteTarget::Stdout, |i: &u64, line: &mut String| {
                write!(line, "tuple {i}")
            })
        },
    );
    match run_under(&graph, &PlanRequest::Fused) {
        Ok(report) => {
            eprintln!(
                "broken_pipe={} tuples_not_written={} tuples_in={}",
                counter(&report, "sink", "broken_pipe"),
                counter(&report, "sink", "tuples_not_written"),
                report.tuples_in("sink"),
            );
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("the job failed: {e}");
            std::process::exit(1)
        }
    }
}

#[test]
fn printing_into_a_closed_pipe_ends_quietly_and_is_counted() {
    if std::env::var_os(CHILD).is_some() {
        print_into_the_pipe();
    }
    let _watchdog = Watchdog::arm("stdout broken pipe", Duration::from_secs(120));
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "printing_into_a_closed_pipe_ends_quietly_and_is_counted",
        ])
        .args(["--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // The harness prints its own lines first, and the name of the test without an ending.
    let first = lines
        .by_ref()
        .map(Result::unwrap)
        .find_map(|line| line.find("tuple").map(|at| line[at..].to_string()));
    assert_eq!(first.as_deref(), Some("tuple 0"));
    let next: Vec<String> = lines.by_ref().take(2).map(Result::unwrap).collect();
    assert_eq!(next, ["tuple 1", "tuple 2"]);
    drop(lines);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let counters = stderr
        .lines()
        .find(|l| l.starts_with("broken_pipe="))
        .unwrap();
    let values: Vec<u64> = counters
        .split(' ')
        .map(|pair| pair.split_once('=').unwrap().1.parse().unwrap())
        .collect();
    let [broken_pipe, not_written, received] = values[..] else {
        panic!("{counters}");
    };
    assert_eq!((broken_pipe, received), (1, LINES));
    assert!(not_written > 0 && not_written < LINES, "{counters}");
}
