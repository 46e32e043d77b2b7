//! The one-call I/O of the fluent API (`FlowIo`, `StreamIo`): real files and sockets round
//! trip through a job, and JSON lines that do not decode meet each `OnBadRecord` policy.

#[path = "../../sluice-ops/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;
use std::thread;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sluice_connectors::prelude::*;
use sluice_connectors::TextFileSource;
use sluice_plan::PlanRequest;
use sluice_types::normal_tuple;

use common::{counter, run_flow, run_under, Watchdog};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Reading {
    sensor: String,
    value: f64,
}
normal_tuple!(Reading);

fn readings() -> Vec<Reading> {
    (0..5)
        .map(|i| Reading {
            sensor: format!("s{}", i % 2),
            value: f64::from(i) * 1.5,
        })
        .collect()
}

/// The JSON lines of `readings`, with `bad` inserted as line 3.
fn json_file(path: &Path, bad: Option<&str>) {
    let mut lines: Vec<String> = readings()
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    if let Some(bad) = bad {
        lines.insert(2, bad.to_owned());
    }
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn text_round_trips_through_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.txt"), dir.path().join("out.txt"));
    std::fs::write(&input, "one\ntwo\r\nthree").unwrap();
    let flow = Dataflow::new("text");
    flow.read_text("lines", &input)
        .map("len", |line: &String| format!("{line}:{}", line.len()))
        .write_text("out", &output);
    run_flow(&flow, &PlanRequest::Threaded);
    assert_eq!(
        std::fs::read_to_string(&output).unwrap(),
        "one:3\ntwo:3\nthree:5\n"
    );
}

#[test]
fn a_text_file_source_fits_the_fluent_source() {
    // Issue 28: `flow.source(.., |_| TextFileSource::new(p))` did not compile (E0277).
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "a\nb\n").unwrap();
    let flow = Dataflow::new("source");
    let path = input.clone();
    let got = flow
        .source("lines", move |_| TextFileSource::new(path.clone()))
        .collect("out");
    run_flow(&flow, &PlanRequest::Fused);
    assert_eq!(collected(&got), ["a", "b"]);
}

#[test]
fn csv_round_trips_through_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.csv"), dir.path().join("out.csv"));
    std::fs::write(&input, "sensor,value\ns0,1.5\ns1,2\n").unwrap();
    let flow = Dataflow::new("csv");
    flow.read_csv::<Reading>("readings", &input)
        .map("double", |r: &Reading| Reading {
            sensor: r.sensor.clone(),
            value: r.value * 2.0,
        })
        .write_csv("out", &output);
    run_flow(&flow, &PlanRequest::Threaded);
    assert_eq!(
        std::fs::read_to_string(&output).unwrap(),
        "sensor,value\ns0,3.0\ns1,4.0\n"
    );
}

#[test]
fn json_round_trips_through_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.json"), dir.path().join("out.json"));
    json_file(&input, None);
    let flow = Dataflow::new("json");
    flow.read_json::<Reading>("readings", &input)
        .write_json("out", &output);
    run_flow(&flow, &PlanRequest::Threaded);
    let back: Vec<Reading> = std::fs::read_to_string(&output)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(back, readings());
}

const BAD: &str = r#"{"sensor": "s9", "value": "not a number"}"#;

#[test]
fn a_bad_json_line_is_dropped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.json");
    json_file(&input, Some(BAD));
    let flow = Dataflow::new("json-drop");
    let got = flow.read_json::<Reading>("readings", &input).collect("out");
    let report = run_flow(&flow, &PlanRequest::Fused);
    assert_eq!(collected(&got), readings());
    assert_eq!(counter(&report, "readings", "bad_records"), 1);
}

#[test]
fn a_bad_json_line_goes_to_the_side_output_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.json");
    json_file(&input, Some(BAD));
    let flow = Dataflow::new("json-side");
    let (good, bad) = flow.read_json_with::<Reading>("readings", &input, OnBadRecord::SideOutput);
    let (good, bad) = (good.collect("good"), bad.collect("bad"));
    run_flow(&flow, &PlanRequest::Threaded);
    assert_eq!(collected(&good), readings());
    let bad = collected(&bad);
    assert_eq!(bad.len(), 1);
    assert_eq!((bad[0].line, bad[0].text.as_str()), (3, BAD));
    assert_eq!(bad[0].path, input.display().to_string());
    assert!(bad[0].error.contains("invalid type"), "{}", bad[0].error);
}

#[test]
fn a_bad_json_line_fails_the_job_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.json");
    json_file(&input, Some(BAD));
    let flow = Dataflow::new("json-fail");
    let (good, _) = flow.read_json_with::<Reading>("readings", &input, OnBadRecord::Fail);
    good.collect("out");
    let graph = flow.build().unwrap();
    let error = run_under(&graph, &PlanRequest::Fused)
        .expect_err("a bad line fails the job")
        .to_string();
    assert!(
        error.contains(&format!("{}: line 3 does not decode", input.display())),
        "{error}"
    );
}

#[test]
fn lines_round_trip_through_tcp() {
    let _watchdog = Watchdog::arm("lines_round_trip_through_tcp", Duration::from_secs(60));
    // The job reads from a server that sends three lines, and writes to another that keeps
    // what it gets.
    let source = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let sink = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let (from, to) = (source.local_addr().unwrap(), sink.local_addr().unwrap());
    let sender = thread::spawn(move || {
        let (mut stream, _) = source.accept().unwrap();
        stream.write_all(b"x\ny\nz\n").unwrap();
    });
    let receiver = thread::spawn(move || {
        let (stream, _) = sink.accept().unwrap();
        BufReader::new(stream)
            .lines()
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
    });
    let flow = Dataflow::new("tcp");
    flow.read_tcp("lines", TcpEndpoint::connect(from))
        .map("upper", |line: &String| line.to_uppercase())
        .write_tcp("out", TcpEndpoint::connect(to));
    run_flow(&flow, &PlanRequest::Threaded);
    sender.join().unwrap();
    assert_eq!(receiver.join().unwrap(), ["X", "Y", "Z"]);
}
