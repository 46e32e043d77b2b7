//! `sluice bench suite` end to end at its `--smoke` level: every measurement of every
//! experiment is produced or skipped with a reason, each record has the schema's fields with
//! their types, and the files are valid (JSONL parses, the HTML holds the tables and inline
//! SVG, the PNG and SVG plots exist). Figures are never asserted.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Runs `sluice` with `args`, killed after `limit` (a watchdog: a hung child fails the test).
fn sluice(args: &[&str], limit: Duration) -> (bool, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sluice starts");
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            return (status.success(), err);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("sluice {args:?} ran over {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn number(v: &Value, field: &str) -> f64 {
    v[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} is not a number in {v}"))
}

fn string<'a>(v: &'a Value, field: &str) -> &'a str {
    v[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} is not a string in {v}"))
}

fn latency(l: &Value) {
    for f in ["p50", "p99", "p999", "mean", "max"] {
        assert!(number(l, f) >= 0.0, "{f} in {l}");
    }
    assert!(l["samples"].as_u64().is_some(), "{l}");
}

/// A latency measurement's method, and with `half-round-trip` or `ping-pong` the round trip
/// of which the one-way latency is half (for Sluice and, when measured, its baseline).
fn latency_method(r: &Value) {
    let method = string(r, "latency_method");
    assert!(
        ["one-way-clock", "half-round-trip", "ping-pong"].contains(&method),
        "{r}"
    );
    let mut sides = vec![r];
    if r["baseline"]["skipped"] == false {
        sides.push(&r["baseline"]);
    }
    for side in sides {
        if method != "one-way-clock" {
            let (rtt, one_way) = (&side["round_trip_ns"], &side["latency_ns"]);
            latency(rtt);
            assert_eq!(number(one_way, "p50"), number(rtt, "p50") / 2.0, "{r}");
            assert_eq!(number(one_way, "max"), number(rtt, "max") / 2.0, "{r}");
        } else {
            assert!(side.get("round_trip_ns").is_none(), "{r}");
        }
    }
}

/// The fields every record has, and those of its kind.
fn check_schema(r: &Value) {
    string(r, "experiment");
    assert!(r["run_index"].as_u64().is_some(), "{r}");
    assert!(!string(r, "commit").is_empty());
    let m = &r["machine"];
    string(m, "cpu");
    string(m, "kernel");
    assert!(m["cores"].as_u64().is_some_and(|c| c >= 1), "{r}");
    let skipped = r["skipped"].as_bool().expect("skipped is a boolean");
    if skipped {
        assert!(!string(r, "reason").is_empty(), "{r}");
        return;
    }
    // Every measurement of Sluice says what in it cannot be true (an empty list when nothing).
    if r.get("peer").is_none() && r["experiment"] != "omdp" {
        assert!(r["warnings"].is_array(), "no warnings list in {r}");
    }
    if r["experiment"] == "hardware" {
        assert!(r["memcpy"].as_array().is_some_and(|m| !m.is_empty()), "{r}");
        return;
    }
    let bench = string(r, "bench");
    if bench == "app" {
        app_schema(r);
        return;
    }
    if bench == "pipeline" {
        pipeline_schema(r);
        return;
    }
    assert!(bench == "throughput" || bench == "latency", "{r}");
    assert!(r["tuple_size"].as_u64().is_some(), "{r}");
    assert!(number(r, "tuples_per_sec") > 0.0, "{r}");
    assert!(number(r, "gbit_per_sec") > 0.0, "{r}");
    number(r, "duration_s");
    assert!(
        r["runs"].as_array().is_some_and(|runs| !runs.is_empty()),
        "{r}"
    );
    if bench == "latency" {
        latency(&r["latency_ns"]);
        latency_method(r);
    }
    if r.get("peer").is_some() {
        string(r, "peer");
        assert!(r["compared_with"].as_array().is_some_and(|c| !c.is_empty()));
        return;
    }
    string(r, "transport");
    string(r, "encoding");
    string(r, "cpu");
    assert!(r["cores"].as_u64().is_some());
    assert!(r["receivers"].as_u64().is_some_and(|n| n >= 1), "{r}");
    let b = &r["baseline"];
    assert!(!string(b, "name").is_empty());
    assert!(b["runs"].as_array().is_some(), "{r}");
    // A baseline that could not be measured says so, with the reason, and only then is the
    // ratio missing.
    let baseline_skipped = b["skipped"]
        .as_bool()
        .expect("baseline.skipped is a boolean");
    if baseline_skipped {
        assert!(!string(b, "reason").is_empty(), "{r}");
        assert!(r.get("ratio_to_baseline").is_none(), "{r}");
    } else {
        number(b, "tuples_per_sec");
    }
    if bench == "throughput" {
        if !baseline_skipped {
            assert!(number(r, "ratio_to_baseline") > 0.0, "{r}");
        }
    } else {
        assert!(r["latency_ns"].is_object(), "{r}");
    }
}

/// An application's record: its throughput and runs, each yardstick's beside it with the
/// ratio (none in a topology's sweep of rates), and the latency when it ran at a rate.
fn app_schema(r: &Value) {
    string(r, "app");
    string(r, "plan");
    string(r, "unit");
    assert!(number(r, "per_sec") > 0.0, "{r}");
    assert!(
        r["runs"].as_array().is_some_and(|runs| !runs.is_empty()),
        "{r}"
    );
    let yardsticks = r["yardsticks"].as_array().expect("yardsticks");
    if r["experiment"] == "topology" {
        assert!(yardsticks.is_empty(), "{r}");
        assert!(number(r, "input_per_sec") > 0.0, "{r}");
    } else {
        assert!(!yardsticks.is_empty(), "{r}");
    }
    for y in yardsticks {
        string(y, "name");
        assert!(number(y, "per_sec") > 0.0, "{r}");
        assert!(number(y, "ratio") > 0.0, "{r}");
    }
    if r.get("target_rate").is_some() {
        latency(&r["latency_ns"]);
    }
}

/// A pipeline's record at one parallelism: its MB/s beside the serial program's, the speedup
/// and every run's seconds.
fn pipeline_schema(r: &Value) {
    string(r, "app");
    string(r, "plan");
    for field in [
        "senders",
        "receivers",
        "size_bytes",
        "packet_bytes",
        "flows",
    ] {
        assert!(r[field].as_u64().is_some_and(|n| n >= 1), "{field}: {r}");
    }
    for field in ["mb_per_sec", "serial_mb_per_sec", "speedup"] {
        assert!(number(r, field) > 0.0, "{field}: {r}");
    }
    for runs in ["seconds", "serial_seconds"] {
        assert!(r[runs].as_array().is_some_and(|s| !s.is_empty()), "{r}");
    }
}

fn read_records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("results.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn the_smoke_suite_produces_every_measurement_and_valid_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let docs = dir.path().join("docs/benchmarks.md");
    let (ok, err) = sluice(
        &[
            "bench",
            "suite",
            "--smoke",
            "--out",
            out.to_str().unwrap(),
            "--docs",
            docs.to_str().unwrap(),
        ],
        Duration::from_secs(600),
    );
    assert!(ok, "{err}");
    let records = read_records(&out.join("results.jsonl"));
    for r in &records {
        check_schema(r);
    }
    let indexes: Vec<u64> = records
        .iter()
        .map(|r| r["run_index"].as_u64().unwrap())
        .collect();
    assert_eq!(indexes, (0..records.len() as u64).collect::<Vec<_>>());
    for experiment in [
        "hardware",
        "throughput",
        "latency",
        "round-trip",
        "encoding",
        "fanout",
        "large",
        "apps",
        "topology",
        "pipeline",
        "peers",
    ] {
        assert!(
            records.iter().any(|r| r["experiment"] == experiment),
            "no {experiment} record"
        );
    }
    // Sluice's own measurements are all made; only a peer may be skipped (built without it).
    let failed: Vec<&Value> = records
        .iter()
        .filter(|r| r["skipped"] == true && r.get("peer").is_none())
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    for transport in [
        "fused",
        "threaded",
        "shm-vega",
        "shm-osr",
        "tcp",
        "tcp-batched",
    ] {
        assert!(records.iter().any(|r| r["transport"] == transport));
    }
    for peer in ["crossbeam-channel", "iceoryx2", "zmq-ipc", "zmq-tcp"] {
        let mine: Vec<&Value> = records.iter().filter(|r| r["peer"] == peer).collect();
        assert!(!mine.is_empty(), "no {peer}");
        // Built with the peers, each is measured; built without, each says which feature.
        for r in mine {
            if cfg!(feature = "peers") {
                assert_eq!(r["skipped"], false, "{r}");
            } else if peer != "crossbeam-channel" {
                assert!(string(r, "reason").contains("built without feature"), "{r}");
            }
        }
    }
    assert!(records
        .iter()
        .any(|r| r["experiment"] == "fanout" && r["receivers"] == 2));
    // Network latency is half the round trip through a reflector, shared memory's one way
    // from the clock (Vega V.A.1 and Fig. 7a); the round-trip experiment reflects the rings.
    for r in records
        .iter()
        .filter(|r| r["bench"] == "latency" && r["skipped"] == false)
    {
        let expected = match (r["experiment"].as_str(), r["transport"].as_str()) {
            // Large messages are one way over both, as TurboStream compares them.
            (Some("large"), _) => "one-way-clock",
            // The rings' ping-pong goes back to back, far above any rate a round trip allows.
            (Some("round-trip"), _) if r["target_rate"] == 1_000_000_000 => "ping-pong",
            (Some("round-trip"), _) | (_, Some("tcp" | "tcp-batched")) => "half-round-trip",
            (_, Some(_)) => "one-way-clock",
            (_, None) if r["peer"] == "zmq-tcp" => "half-round-trip",
            (_, None) => "one-way-clock",
        };
        assert_eq!(r["latency_method"], expected, "{r}");
    }
    for transport in ["shm-vega", "shm-osr"] {
        let ping_pong = records
            .iter()
            .find(|r| r["transport"] == transport && r["latency_method"] == "ping-pong")
            .unwrap_or_else(|| panic!("no ping-pong over {transport}"));
        let two_cores = std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
        if ping_pong["skipped"] == false && two_cores {
            // Compared with the two-line hand-off measured in the same run.
            assert!(
                number(ping_pong, "p50_ratio_to_handoff") > 0.0,
                "{ping_pong}"
            );
        }
    }
    for transport in ["shm-vega", "shm-osr", "tcp", "tcp-batched"] {
        assert!(
            records
                .iter()
                .any(|r| r["transport"] == transport && r["round_trip_ns"].is_object()),
            "no round trip over {transport}"
        );
    }
    assert!(records.iter().any(|r| r["transport"] == "tcp"
        && r["baseline"]["name"] == "raw-tcp"
        && r["baseline"]["round_trip_ns"].is_object()));

    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("| tuple bytes |")
            && md.contains("## Fan-out")
            && md.contains("## Round trip")
            && md.contains("## Applications\n\n### ")
            && md.contains("\n### wordcount\n")
            && md.contains("\n### vwap\n")
            && md.contains("## Storm topologies: latency against input rate\n\n### sol")
            && md.contains("## Pipelines"),
        "{md}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("<table>") && html.contains("<svg"),
        "tables and inline SVG"
    );
    for plot in [
        "throughput",
        "throughput-gbit",
        "latency",
        "fanout",
        "large",
        "topology-sol",
        "topology-throughput-test",
        "pipeline",
    ] {
        let svg = std::fs::read_to_string(out.join(format!("{plot}.svg"))).unwrap();
        assert!(svg.contains("<svg"), "{plot}.svg");
        let png = std::fs::read(out.join(format!("{plot}.png"))).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{plot}.png");
    }
    let page = std::fs::read_to_string(&docs).unwrap();
    assert!(page.contains("IBM") && page.contains("Vega") && page.contains("TurboStream"));
    assert!(page.contains("TCD parallel runtime paper\n"), "{page}");

    // The report rebuilds from the records alone, measuring nothing.
    let again = dir.path().join("again");
    let results = out.join("results.jsonl");
    let (ok, err) = sluice(
        &[
            "bench",
            "suite",
            "--from",
            results.to_str().unwrap(),
            "--out",
            again.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert!(ok, "{err}");
    assert_eq!(
        std::fs::read_to_string(again.join("report.md")).unwrap(),
        md
    );
}

#[test]
fn suite_options_are_checked() {
    let (ok, err) = sluice(
        &["bench", "suite", "--quick", "--smoke"],
        Duration::from_secs(30),
    );
    assert!(!ok);
    assert!(err.contains("cannot be used with"), "{err}");
    let (ok, err) = sluice(
        &["bench", "suite", "--from", "/nonexistent/results.jsonl"],
        Duration::from_secs(30),
    );
    assert!(!ok);
    assert!(err.contains("open /nonexistent/results.jsonl"), "{err}");
}
