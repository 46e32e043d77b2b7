//! `sluice bench` end to end, through the command line as the `sluice` binary declares it:
//! very short runs of every benchmark and transport give a JSON line with every field and
//! sane figures (speeds are never asserted), and bad input is one clear error, not a panic.

use clap::{CommandFactory, Parser, Subcommand};
use serde_json::Value;
use sluice_bench::{render_json, render_table, run, BenchArgs};

/// The `sluice` CLI's shape: `sluice bench ...`.
#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Bench(BenchArgs),
}

fn parse(line: &str) -> BenchArgs {
    let words = std::iter::once("sluice").chain(line.split_whitespace());
    match Cli::try_parse_from(words) {
        Ok(Cli {
            command: Command::Bench(args),
        }) => args,
        Err(e) => panic!("{line}: {e}"),
    }
}

fn bench_json(line: &str) -> Value {
    let result = run(&parse(line)).unwrap_or_else(|e| panic!("{line}: {e:#}"));
    let text = render_json(&result);
    assert!(!text.contains('\n'), "one line");
    assert!(render_table(&result).contains("median"));
    serde_json::from_str(&text).unwrap()
}

fn positive(v: &Value, field: &str) -> f64 {
    let x = v[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} missing in {v}"));
    assert!(x > 0.0 && x.is_finite(), "{field} = {x} in {v}");
    x
}

fn check_common(v: &Value, bench: &str, transport: &str, size: u64) {
    assert_eq!(v["bench"], bench);
    assert_eq!(v["transport"], transport);
    assert_eq!(v["tuple_size"], size);
    positive(v, "tuples_per_sec");
    positive(v, "gbit_per_sec");
    assert_eq!(v["duration_s"], 0.2);
    assert!(v["commit"].as_str().is_some_and(|c| !c.is_empty()));
    assert!(v["cpu"].as_str().is_some_and(|c| !c.is_empty()));
    assert!(v["cores"].as_u64().is_some_and(|c| c >= 1));
    assert_eq!(v["runs"].as_array().map(Vec::len), Some(1));
    assert!(v["warnings"].is_array(), "warnings missing in {v}");
    positive(&v["runs"][0], "tuples_per_sec");
    positive(&v["runs"][0], "tuples");
    let baseline = &v["baseline"];
    assert!(baseline["name"].as_str().is_some_and(|n| !n.is_empty()));
    positive(baseline, "tuples_per_sec");
    positive(baseline, "gbit_per_sec");
    assert_eq!(baseline["runs"].as_array().map(Vec::len), Some(1));
}

fn check_latency(l: &Value) {
    for field in ["p50", "p99", "p999", "mean"] {
        let x = l[field]
            .as_f64()
            .unwrap_or_else(|| panic!("{field} missing in {l}"));
        assert!((0.0..60e9).contains(&x), "{field} = {x}");
    }
    assert!(l["p50"].as_f64() <= l["p99"].as_f64());
    assert!(l["p99"].as_f64() <= l["p999"].as_f64());
    positive(l, "samples");
}

/// The benchmarks run one at a time: two at once would fight over the same two cores.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

const SHORT: &str = "--duration 0.2 --repeat 1 --warmup 0 --json";

#[test]
fn throughput_on_both_transports() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for transport in ["fused", "threaded"] {
        let v = bench_json(&format!(
            "bench throughput --transport {transport} --size 64 {SHORT}"
        ));
        check_common(&v, "throughput", transport, 64);
        assert!(v["latency_ns"].is_null());
        assert!(v["baseline"]["latency_ns"].is_null());
        positive(&v, "ratio_to_baseline");
    }
    let v = bench_json(&format!(
        "bench throughput --transport threaded --size 100 --encoding normal {SHORT}"
    ));
    check_common(&v, "throughput", "threaded", 100);
    assert_eq!(v["encoding"], "normal");
}

#[test]
fn latency_on_both_transports() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for transport in ["fused", "threaded"] {
        let v = bench_json(&format!(
            "bench latency --transport {transport} --size 64 --rate 100000 {SHORT}"
        ));
        check_common(&v, "latency", transport, 64);
        assert_eq!(v["target_rate"], 100_000);
        check_latency(&v["latency_ns"]);
        check_latency(&v["runs"][0]["latency_ns"]);
        check_latency(&v["baseline"]["latency_ns"]);
        assert!(v.get("p50_ratio_to_baseline").is_some());
        assert!(v.get("ratio_to_baseline").is_none());
    }
}

#[test]
fn a_rate_the_run_cannot_reach_is_a_warning_in_the_json_and_the_table() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // A trillion tuples a second: no machine reaches it.
    let line = format!("bench latency --transport threaded --size 64 --rate 1000000000000 {SHORT}");
    let result = run(&parse(&line)).unwrap();
    let v: Value = serde_json::from_str(&render_json(&result)).unwrap();
    let warnings = v["warnings"].as_array().expect("a list of warnings");
    let short = warnings
        .iter()
        .find(|w| w["check"] == "rate-not-reached")
        .unwrap_or_else(|| panic!("no rate-not-reached in {v}"));
    let detail = short["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("the sender reached ") && detail.contains("of the 1000.00 G/s asked"),
        "{detail}"
    );
    assert!(render_table(&result).contains(&format!("warning: {detail}")));
}

#[test]
fn the_command_line_is_well_formed_and_documented() {
    Cli::command().debug_assert();
    let mut cmd = Cli::command();
    let bench = cmd.find_subcommand_mut("bench").unwrap();
    for sub in bench.get_subcommands() {
        for arg in sub.get_arguments().filter(|a| a.get_id() != "help") {
            assert!(
                arg.get_help().is_some(),
                "{} --{} has no help",
                sub.get_name(),
                arg.get_id()
            );
        }
    }
    let args = parse("bench throughput --transport fused --size 8");
    let sluice_bench::BenchCommand::Throughput(t) = args.command else {
        panic!("not throughput")
    };
    assert_eq!((t.common.run.repeat, t.common.run.warmup), (3, 0.5));
    assert_eq!(t.common.encoding, sluice_bench::TupleEncoding::Facade);
    assert!(Cli::try_parse_from([
        "sluice",
        "bench",
        "throughput",
        "--transport",
        "carrier-pigeon",
        "--size",
        "8"
    ])
    .is_err());
}

#[test]
fn a_huge_repeat_is_refused_before_anything_is_allocated() {
    let err = sluice_bench::main(parse("bench baseline --repeat 1000000000000000000")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--repeat must be between 1 and 10000, got 1000000000000000000"
    );
}

#[test]
fn bad_input_is_one_clear_line() {
    let cases = [
        (
            "throughput --transport fused --size 0",
            "--size must be at least 1 byte",
        ),
        (
            "throughput --transport fused --size 100",
            "facade tuples of 100 bytes are not supported; supported sizes: 4, 8, 16, 22",
        ),
        (
            "latency --transport fused --size 4 --rate 10",
            "latency needs --size of at least 8 bytes",
        ),
        (
            "latency --transport threaded --size 64 --rate 0",
            "--rate must be at least 1",
        ),
        (
            "throughput --transport fused --size 8 --repeat 0",
            "--repeat must be between 1 and 10000, got 0",
        ),
        (
            "throughput --transport fused --size 8 --duration 0",
            "--duration must be more than 0",
        ),
        (
            "throughput --transport fused --size 8 --duration -2",
            "--duration must be more than 0",
        ),
        (
            "throughput --transport fused --size 8 --duration NaN",
            "--duration must be more than 0",
        ),
        (
            "throughput --transport fused --size 8 --warmup -1",
            "--warmup must be at least 0",
        ),
        (
            "throughput --transport fused --size 8 --warmup inf",
            "--warmup must be at least 0",
        ),
        (
            "throughput --transport fused --size 999999999 --encoding normal",
            "--size of a normal tuple must be at most",
        ),
        (
            "throughput --transport shm-osr --size 8 --producers 0",
            "--producers must be between 1 and 16, got 0",
        ),
        (
            "throughput --transport shm-osr --size 8 --producers 17",
            "--producers must be between 1 and 16, got 17",
        ),
        (
            "throughput --transport shm-vega --size 8 --producers 2",
            "--producers 2 needs --transport shm-osr",
        ),
    ];
    for (line, expected) in cases {
        let err = run(&parse(&format!("bench {line}"))).unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains(expected), "{line}: {msg}");
        assert!(!msg.contains('\n'), "{line}: {msg}");
    }
}
