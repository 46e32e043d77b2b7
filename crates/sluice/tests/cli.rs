//! The `sluice` command as a user meets it: listing, planning, running WordCount under both
//! plans, Ctrl-C draining, and one-line errors (never a panic) for bad input.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("sluice runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn apps_lists_wordcount() {
    let o = sluice(&["apps"]);
    assert!(o.status.success());
    assert!(stdout(&o).starts_with("wordcount "), "{}", stdout(&o));
}

#[test]
fn help_is_everywhere() {
    for args in [
        vec!["--help"],
        vec!["run", "--help"],
        vec!["plan", "--help"],
        vec!["apps", "--help"],
    ] {
        let o = sluice(&args);
        assert!(o.status.success(), "{args:?}");
        assert!(stdout(&o).contains("Usage:"), "{args:?}");
    }
}

#[test]
fn wordcount_counts_match_under_fused_and_threaded() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "a b, c!\nB a A\n\n...\n").unwrap();
    let mut outputs = Vec::new();
    for plan in ["fused", "threaded"] {
        let output = dir.path().join(format!("{plan}.tsv"));
        let o = sluice(&[
            "run",
            "wordcount",
            "--plan",
            plan,
            "--input",
            input.to_str().unwrap(),
            "--output",
            output.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stdout(&o).contains("latency"), "{}", stdout(&o));
        outputs.push(std::fs::read_to_string(&output).unwrap());
    }
    assert_eq!(outputs[0], "a\t3\nb\t2\nc\t1\n");
    assert_eq!(outputs[0], outputs[1]);
}

#[test]
fn plan_shows_threads_edges_and_transports() {
    let o = sluice(&["plan", "wordcount", "--plan", "threaded"]);
    assert!(o.status.success());
    let text = stdout(&o);
    assert!(
        text.contains("split.out[0] -> sum.in[0]  key-by  via threaded"),
        "{text}"
    );
    let o = sluice(&["plan", "wordcount", "--dot"]);
    assert!(stdout(&o).starts_with("digraph \"wordcount\""));
    let o = sluice(&["plan", "wordcount", "--json"]);
    assert!(stdout(&o).contains("\"kind\": \"fused\""), "{}", stdout(&o));
}

fn assert_one_line_error(args: &[&str], needle: &str) {
    let o = sluice(args);
    assert_eq!(o.status.code(), Some(1), "{args:?}");
    let err = stderr(&o);
    assert!(err.starts_with("error: "), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
}

#[test]
fn bad_input_gets_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad_plan = dir.path().join("bad.toml");
    std::fs::write(
        &bad_plan,
        "[[thread]]\nname = 'a'\noperators = ['sentences'\n",
    )
    .unwrap();
    let bad_plan = bad_plan.to_str().unwrap();
    assert_one_line_error(&["run", "nosuchapp"], "no application named 'nosuchapp'");
    assert_one_line_error(
        &["run", "wordcount", "--input", "/no/such/file"],
        "/no/such/file",
    );
    assert_one_line_error(
        &["run", "wordcount", "--set", "colour=red"],
        "no setting 'colour'",
    );
    assert_one_line_error(
        &["run", "wordcount", "--set", "parallelism=zero"],
        "parallelism",
    );
    assert_one_line_error(
        &["run", "wordcount", "--set", "parallelism=0"],
        "at least 1",
    );
    assert_one_line_error(&["run", "wordcount", "--plan", "/no/plan.toml"], "--plan");
    assert_one_line_error(
        &["plan", "wordcount", "--plan", bad_plan],
        "line 4, column 1",
    );
    assert_one_line_error(
        &["run", "wordcount", "--output", "/no/such/dir/out.tsv"],
        "does not exist",
    );
    assert_one_line_error(
        &["plan", "wordcount", "--queue-capacity", "0"],
        "at least 1",
    );
    // clap's own errors: non-zero exit, no panic.
    let o = sluice(&["run", "wordcount", "--duration", "-3"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(!stderr(&o).contains("panicked"));
}

#[test]
fn ctrl_c_drains_and_exits_zero_with_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.tsv");
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "wordcount", "--plan", "threaded", "--rate", "20000"])
        .args(["--duration", "120", "--output", output.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // Watchdog: the drain must finish long before the 120 s duration.
    let started = Instant::now();
    let o = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(60), "no hang");
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("sentences: "), "{text}");
    // Every word the source emitted was counted: the counts add up to the words processed.
    let words: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("words: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("a words line");
    let sentences: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("sentences: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("a sentences line");
    assert_eq!(words, sentences * 10);
    let counted: u64 = std::fs::read_to_string(Path::new(&output))
        .unwrap()
        .lines()
        .map(|l| l.split('\t').nth(1).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(counted, words);
}

#[test]
fn shm_vega_benchmarks_run_across_two_processes_and_leave_no_segment() {
    for bench in [
        vec!["bench", "throughput"],
        vec!["bench", "latency", "--rate", "20000"],
    ] {
        let mut args = bench.clone();
        args.extend([
            "--transport",
            "shm-vega",
            "--size",
            "64",
            "--duration",
            "0.3",
            "--warmup",
            "0",
            "--repeat",
            "1",
            "--json",
        ]);
        let o = sluice(&args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let line = stdout(&o);
        for field in [
            "\"bench\"",
            "\"transport\":\"shm-vega\"",
            "\"tuple_size\":64",
            "\"tuples_per_sec\"",
            "\"gbit_per_sec\"",
            "\"latency_ns\"",
            "\"duration_s\"",
            "\"commit\"",
            "\"cpu\"",
            "\"baseline\"",
        ] {
            assert!(line.contains(field), "{field} missing from {line}");
        }
        let json: serde_json::Value = serde_json::from_str(line.trim()).expect("one JSON object");
        assert!(json["tuples_per_sec"].as_f64().unwrap() > 0.0, "{line}");
    }
    let own = format!("sluice-bench{}r", std::process::id());
    let left: Vec<_> = std::fs::read_dir("/dev/shm")
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        !left.iter().any(|n| n.to_string_lossy().starts_with(&own)),
        "{left:?}"
    );
}
