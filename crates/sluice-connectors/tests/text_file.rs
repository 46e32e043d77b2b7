//! Text files in a running job: lines read (endings stripped, invalid UTF-8 replaced and
//! counted), lines written (flushed at the end and by a stop's drain), and the errors that
//! name the operator and the path.

#[path = "../../sluice-ops/tests/common/mod.rs"]
mod common;

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use sluice_connectors::{ByteTarget, StreamSink, TextFileSource};
use sluice_graph::{GraphBuilder, Ports};
use sluice_ops::Generator;
use sluice_plan::{plan, PlanOptions, PlanRequest};
use sluice_runtime::{start, RunOptions};

use common::{collect, counter, run_under, source_into};

#[test]
fn lines_lose_their_endings_and_bad_bytes_are_replaced_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("in.txt");
    std::fs::write(&path, b"first\r\nsecond\n\nbad \xff\xfe byte\nlast").unwrap();
    let (lines, report): (Vec<String>, _) =
        collect(move || TextFileSource::new(&path), &PlanRequest::Fused).unwrap();
    assert_eq!(
        lines,
        ["first", "second", "", "bad \u{fffd}\u{fffd} byte", "last"]
    );
    assert_eq!(counter(&report, "source", "invalid_utf8_lines"), 1);
}

/// A file of `n` numbered lines, long enough to cross many read buffers.
fn numbered_lines(n: usize) -> String {
    (0..n).fold(String::new(), |mut text, i| {
        writeln!(text, "line {i} {}", "x".repeat(i % 97)).unwrap();
        text
    })
}

#[test]
fn a_file_copied_line_by_line_is_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.txt"), dir.path().join("out.txt"));
    let text = numbered_lines(20_000);
    std::fs::write(&input, &text).unwrap();
    let copy = output.clone();
    let graph = source_into::<String, _, _>(
        move || TextFileSource::new(&input),
        move || StreamSink::<String, _>::lines(ByteTarget::file(&copy)),
    );
    let report = run_under(&graph, &PlanRequest::Threaded).unwrap();
    assert_eq!(std::fs::read_to_string(&output).unwrap(), text);
    assert_eq!(counter(&report, "sink", "bytes_written"), text.len() as u64);
}

#[test]
fn tuples_are_written_by_display_or_by_a_formatter() {
    let dir = tempfile::tempdir().unwrap();
    let (shown, formatted) = (
        dir.path().join("shown.txt"),
        dir.path().join("formatted.txt"),
    );
    let into = shown.clone();
    let graph = source_into::<u64, _, _>(
        || Generator::new(Some).count(3),
        move || StreamSink::<u64, _>::lines(ByteTarget::file(&into)),
    );
    run_under(&graph, &PlanRequest::Fused).unwrap();
    assert_eq!(std::fs::read_to_string(&shown).unwrap(), "0\n1\n2\n");

    let into = formatted.clone();
    let graph = source_into::<u64, _, _>(
        || Generator::new(Some).count(3),
        move || {
            StreamSink::formatted_lines(ByteTarget::file(&into), |n: &u64, line: &mut String| {
                write!(line, "#{n}\t{}", n * n)
            })
        },
    );
    run_under(&graph, &PlanRequest::Fused).unwrap();
    assert_eq!(
        std::fs::read_to_string(&formatted).unwrap(),
        "#0\t0\n#1\t1\n#2\t4\n"
    );
}

#[test]
fn a_stopped_job_leaves_every_tuple_the_sink_received_in_the_file() {
    let _watchdog = common::Watchdog::arm("stop drains the file sink", Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.txt");
    let into = path.clone();
    let graph = source_into::<u64, _, _>(
        || Generator::new(Some),
        move || StreamSink::<u64, _>::lines(ByteTarget::file(&into)),
    );
    let p = plan(&graph, &PlanRequest::Fused, &PlanOptions::default()).unwrap();
    let job = start(&graph, &p, &RunOptions::default()).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    job.stop_handle().stop();
    let report = job.wait().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let received = report.tuples_in("sink");
    assert!(received > 0);
    assert_eq!(text.lines().count() as u64, received);
    assert!(text.lines().enumerate().all(|(i, l)| l == i.to_string()));
    assert_eq!(names_in(dir.path()), ["out.txt"]);
}

/// The error of a job copying `input` to `output` with a file source named `reader` and a
/// file sink named `writer`.
fn copy_error(input: &Path, output: &Path, max_line: usize) -> String {
    let (input, output) = (input.to_path_buf(), output.to_path_buf());
    let mut g = GraphBuilder::new("copy");
    let src = g.source("reader", Ports::new().output::<String>(), move |_| {
        TextFileSource::new(&input).max_line_bytes(max_line)
    });
    let sink = g.operator("writer", Ports::new().input::<String>(), move |_| {
        StreamSink::<String, _>::lines(ByteTarget::file(&output))
    });
    g.connect(src.out(0), sink.input(0)).unwrap();
    let graph = g.build().unwrap();
    run_under(&graph, &PlanRequest::Fused)
        .unwrap_err()
        .to_string()
}

#[test]
fn missing_files_and_long_lines_are_errors_naming_the_operator_and_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let (missing, output) = (dir.path().join("missing.txt"), dir.path().join("out.txt"));
    let err = copy_error(&missing, &output, 100);
    assert!(err.contains("'reader'"), "{err}");
    assert!(
        err.contains(&format!("open {}", missing.display())),
        "{err}"
    );

    let nowhere = dir.path().join("no-such-dir").join("out.txt");
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "short\nmuch too long\n").unwrap();
    let err = copy_error(&input, &nowhere, 100);
    assert!(err.contains("'writer'"), "{err}");
    assert!(
        err.contains(&format!("create {}", nowhere.display())),
        "{err}"
    );

    let err = copy_error(&input, &output, 8);
    assert!(err.contains("'reader'"), "{err}");
    let long = format!("{}: line 2 is longer than 8 bytes", input.display());
    assert!(err.contains(&long), "{err}");
    // The sink had its first line when the job failed: neither the output nor its temporary
    // file is left, only the input.
    assert_eq!(names_in(dir.path()), ["in.txt"]);
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
