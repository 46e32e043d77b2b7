//! The compression and encryption pipelines from the command line: every packet verified with
//! senders and receivers in processes of their own and under auto, a packet flipped on the wire
//! failing the job with one line naming it, and the benchmarks: `sluice bench pipeline` (its
//! speedup over the serial program, each parallelism in a child, PEs in processes, the engines
//! joined by udp-mq) and `sluice bench app`.

mod common;

use common::{sluice, stderr, stdout};

/// A small input: 200,000 bytes in 13 packets of 16,384 bytes over 64 flows.
const SMALL: [&str; 2] = ["--set", "size=200000"];

#[test]
fn every_packet_is_verified_across_processes_and_under_auto() {
    for (app, plan) in [
        ("compress", "processes"),
        ("encrypt", "processes"),
        ("compress", "auto"),
        ("encrypt", "auto"),
    ] {
        let mut args = vec!["run", app, "--plan", plan, "--rate", "0"];
        args.extend(SMALL);
        args.extend(["--set", "senders=2", "--set", "receivers=2"]);
        let o = sluice(&args);
        assert!(o.status.success(), "{app} {plan}: {}", stderr(&o));
        let out = stdout(&o);
        assert!(
            out.contains(
                "verified byte for byte: 13 of 13 packets, 200000 bytes (the whole input)"
            ),
            "{app} {plan}: {out}"
        );
    }
}

#[test]
fn a_packet_flipped_on_the_wire_fails_the_job_naming_it() {
    for (app, plan, failure) in [
        ("compress", "processes", "decompression failed"),
        ("encrypt", "processes", "decryption failed"),
        ("encrypt", "threaded", "decryption failed"),
    ] {
        let mut args = vec!["run", app, "--plan", plan, "--rate", "0"];
        args.extend(SMALL);
        args.extend(["--set", "corrupt=5:0"]);
        let o = sluice(&args);
        assert_eq!(o.status.code(), Some(1), "{app} {plan}");
        let err = stderr(&o);
        let first = err.lines().find(|l| l.starts_with("error: ")).unwrap_or("");
        assert!(first.contains("flow 5 packet 0: "), "{app} {plan}: {err}");
        assert!(
            first.contains(failure) || first.contains("where the input has"),
            "{app} {plan}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn the_speedup_is_measured_beside_the_serial_program_for_each_parallelism() {
    let o = sluice(&[
        "bench",
        "pipeline",
        "encrypt",
        "--parallelism",
        "1,2x1",
        "--size",
        "300000",
        "--repeat",
        "1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("pipeline MB/s"), "{out}");
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.trim_start().starts_with(char::is_numeric))
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert!(rows[1].split_whitespace().take(2).eq(["2", "1"]), "{out}");

    // Senders and receivers in processes of their own, each PE re-running the child.
    let o = sluice(&[
        "bench",
        "pipeline",
        "compress",
        "--parallelism",
        "2",
        "--size",
        "100000",
        "--repeat",
        "1",
        "--plan",
        "engine-processes",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(json["plan"], "engine-processes");
    assert_eq!(json["senders"], 2);
    assert!(json["speedup"].as_f64().unwrap() > 0.0, "{json}");
}

#[test]
fn the_speedup_can_be_measured_with_the_engines_joined_by_udp_mq() {
    for plan in ["engines", "engine-processes"] {
        let o = sluice(&[
            "bench",
            "pipeline",
            "encrypt",
            "--parallelism",
            "2",
            "--size",
            "300000",
            "--repeat",
            "1",
            "--plan",
            plan,
            "--transport",
            "udp-mq",
            "--queues",
            "3",
            "--json",
        ]);
        // Every byte verified, or the run fails: udp-mq may lose, never silently.
        assert!(o.status.success(), "{plan}: {}", stderr(&o));
        let json: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
        assert_eq!(json["transport"], "udp-mq", "{json}");
        assert_eq!(json["queues"], 3, "{json}");
        assert_eq!(
            (json["senders"].as_u64(), json["plan"].as_str()),
            (Some(2), Some(plan))
        );
        assert!(json["warnings"].is_array(), "{json}");
    }
    let o = sluice(&[
        "bench",
        "pipeline",
        "compress",
        "--parallelism",
        "1",
        "--plan",
        "threaded",
        "--transport",
        "udp-mq",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("--transport udp-mq joins the paper's engines: give --plan engines or engine-processes, not threaded"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn an_application_benchmark_runs_a_pipeline_beside_its_serial_program() {
    let o = sluice(&[
        "bench",
        "app",
        "encrypt",
        "--set",
        "size=300000",
        "--duration",
        "0.2",
        "--warmup",
        "0",
        "--repeat",
        "1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(json["unit"], "packets");
    assert_eq!(json["yardsticks"][0]["name"], "serial");
    assert!(json["per_sec"].as_f64().unwrap() > 0.0, "{json}");
}
