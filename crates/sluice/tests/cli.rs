//! The `sluice` command as a user meets it: listing, planning, running WordCount under every
//! kind of plan (one thread, threads, one process per operator, a mixed plan file), Ctrl-C
//! draining, a killed PE, and one-line errors (never a panic) for bad input.

mod common;

use common::{sluice, stderr, stdout};

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn apps_lists_wordcount() {
    let o = sluice(&["apps"]);
    assert!(o.status.success());
    assert!(stdout(&o).starts_with("wordcount "), "{}", stdout(&o));
    assert!(stdout(&o).contains("--plan two-threads"), "{}", stdout(&o));
}

#[test]
fn help_is_everywhere() {
    for args in [
        vec!["--help"],
        vec!["run", "--help"],
        vec!["plan", "--help"],
        vec!["apps", "--help"],
        vec!["bench", "app", "--help"],
    ] {
        let o = sluice(&args);
        assert!(o.status.success(), "{args:?}");
        assert!(stdout(&o).contains("Usage:"), "{args:?}");
    }
}

#[test]
fn run_help_of_an_application_lists_its_settings_and_plans() {
    let generic = stdout(&sluice(&["run", "--help"]));
    assert!(!generic.contains("Settings (--set"), "{generic}");
    for app in ["sol", "throughput-test", "wordcount", "relay"] {
        for help in ["--help", "-h"] {
            let o = sluice(&["run", "--plan", "fused", app, help]);
            assert!(o.status.success(), "{app} {help}");
            let text = stdout(&o);
            assert!(text.contains("Usage:"), "{text}");
            let own = text.split_once(&format!("\n{app}: ")).expect(app).1;
            assert!(own.contains("Settings (--set KEY=VALUE):"), "{text}");
            assert!(
                own.contains("Plans (--plan NAME): auto (the default"),
                "{text}"
            );
        }
    }
    let sol = stdout(&sluice(&["run", "sol", "--help"]));
    assert!(sol.contains("\n  levels       bolts in the chain"), "{sol}");
    assert!(
        sol.contains("\n  parallelism  tasks (instances) of each bolt"),
        "{sol}"
    );
    let wordcount = stdout(&sluice(&["run", "wordcount", "--help"]));
    assert!(
        wordcount.contains("\n  two-threads    a pipeline"),
        "{wordcount}"
    );
}

/// A plan file mixing threads and PEs, with a pinned shared-memory transport and the counting
/// operator in three key-partitioned instances spread over two PEs.
const MIXED_PLAN: &str = r#"
[[thread]]
name = "read"
pe = "ingest"
operators = ["sentences", "split"]
[[thread]]
name = "count-a"
pe = "count"
operators = ["sum[0]", "sum[1]"]
[[thread]]
name = "count-b"
pe = "tail"
operators = ["sum[2]", "counts"]
[[edge]]
from = "split"
to = "sum"
transport = { kind = "shm-vega", slot_bytes = 128, slots = 64 }
"#;

/// Two PEs of several threads each (with `--set parallelism=3`).
const TWO_PES_OF_THREADS_PLAN: &str = r#"
[[thread]]
name = "read"
pe = "a"
operators = ["sentences", "split"]
[[thread]]
name = "count-a"
pe = "a"
operators = ["sum[0]"]
[[thread]]
name = "count-b"
pe = "b"
operators = ["sum[1]"]
[[thread]]
name = "count-c"
pe = "b"
operators = ["sum[2]"]
[[thread]]
name = "tail"
pe = "b"
operators = ["counts"]
"#;

/// The three counting instances in two PEs sending into one `shm-osr` receiver in a third:
/// three senders, one ring.
const FAN_IN_PLAN: &str = r#"
[[thread]]
name = "read"
pe = "ingest"
operators = ["sentences", "split"]
[[thread]]
name = "count-a"
pe = "count"
operators = ["sum[0]", "sum[1]"]
[[thread]]
name = "count-b"
pe = "tail"
operators = ["sum[2]"]
[[thread]]
name = "out"
pe = "out"
operators = ["counts"]
[[edge]]
from = "sum"
to = "counts"
transport = { kind = "shm-osr", capacity_bytes = 65536 }
"#;

/// Runs WordCount on `input` under each plan and returns the output files' contents.
fn wordcount_outputs(dir: &Path, input: &Path, plans: &[&str], extra: &[&str]) -> Vec<String> {
    let mut outputs = Vec::new();
    for (k, plan) in plans.iter().enumerate() {
        let output = dir.join(format!("out{k}.tsv"));
        let mut args = vec![
            "run",
            "wordcount",
            "--plan",
            plan,
            "--input",
            input.to_str().unwrap(),
            "--output",
            output.to_str().unwrap(),
        ];
        args.extend(extra);
        let o = sluice(&args);
        assert!(o.status.success(), "{plan}: {}", stderr(&o));
        assert!(stdout(&o).contains("latency"), "{}", stdout(&o));
        outputs.push(std::fs::read_to_string(&output).unwrap());
    }
    outputs
}

#[test]
fn wordcount_counts_match_under_every_plan() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "a b, c!\nB a A\n\n...\n").unwrap();
    let outputs = wordcount_outputs(
        dir.path(),
        &input,
        &[
            "fused",
            "threaded",
            "processes",
            "two-threads",
            "two-processes",
        ],
        &[],
    );
    assert_eq!(outputs[0], "a\t3\nb\t2\nc\t1\n");
    assert!(outputs.iter().all(|o| *o == outputs[0]));
}

#[test]
fn wordcount_counts_match_across_processes_and_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let mut text = String::new();
    for i in 0..3000u64 {
        let words: Vec<String> = (0..(i % 13))
            .map(|k| format!("w{}", (i * 7 + k * 31) % 257))
            .collect();
        text.push_str(&words.join(" "));
        text.push('\n');
    }
    std::fs::write(&input, text).unwrap();
    let plan_file = dir.path().join("mixed.toml");
    std::fs::write(&plan_file, MIXED_PLAN).unwrap();
    let fan_in_file = dir.path().join("fan-in.toml");
    std::fs::write(&fan_in_file, FAN_IN_PLAN).unwrap();
    let outputs = wordcount_outputs(
        dir.path(),
        &input,
        &[
            "fused",
            "processes",
            plan_file.to_str().unwrap(),
            fan_in_file.to_str().unwrap(),
        ],
        &["--set", "parallelism=3"],
    );
    assert_eq!(outputs[0].lines().count(), 257);
    assert!(outputs.iter().all(|o| *o == outputs[0]));
}

/// `--workers 1`: every plan thread of a process a task of one polling worker, the counts
/// those of one thread.
#[test]
fn wordcount_counts_match_on_one_shared_worker() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let text: String = (0..2000u64)
        .map(|i| format!("w{} w{} w{}\n", i % 97, i % 13, (i * 7) % 251))
        .collect();
    std::fs::write(&input, text).unwrap();
    let plan_file = dir.path().join("two-pes.toml");
    std::fs::write(&plan_file, TWO_PES_OF_THREADS_PLAN).unwrap();
    let one_thread = wordcount_outputs(dir.path(), &input, &["fused"], &[]);
    let shared = wordcount_outputs(
        dir.path(),
        &input,
        &["threaded", plan_file.to_str().unwrap()],
        &["--set", "parallelism=3", "--workers", "1"],
    );
    assert_eq!(one_thread[0].lines().count(), 251);
    assert!(shared.iter().all(|o| *o == one_thread[0]));
}

/// The shared segments of the job run by the launcher with pid `pid`.
fn segments_of(pid: u32) -> Vec<String> {
    let prefix = format!("sluice-wordcount_2d{pid}_2d");
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// The pids of `parent`'s children.
fn children_of(parent: u32) -> Vec<u32> {
    let o = Command::new("pgrep")
        .args(["-P", &parent.to_string()])
        .output()
        .unwrap();
    stdout(&o)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

#[test]
fn a_killed_pe_stops_the_job_naming_it_and_leaves_nothing_behind() {
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "wordcount", "--plan", "processes", "--rate", "20000"])
        .args(["--duration", "120"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let launcher = child.id();
    // Wait (with a watchdog) until the four PEs run and have made their segments.
    let started = Instant::now();
    let pes = loop {
        let pes = children_of(launcher);
        if pes.len() == 4 && segments_of(launcher).len() == 3 {
            break pes;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "PEs never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // Kill the PE of `split` (the second PE started).
    let mut by_pid = pes.clone();
    by_pid.sort_unstable();
    let victim = by_pid[1];
    let o = common::kill_pe_and_wait(child, victim, started);
    let err = stderr(&o);
    assert!(
        err.contains("error: PE 'split' (operators: split) was killed by signal 9"),
        "{err}"
    );
    for pid in pes {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| s.contains(") Z ")),
            "PE process {pid} was left behind"
        );
    }
    assert_eq!(segments_of(launcher), Vec::<String>::new());
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
    let o = sluice(&["plan", "wordcount", "--plan", "processes", "--dot"]);
    let dot = stdout(&o);
    assert!(dot.contains("label=\"PE split (localhost)\""), "{dot}");
    assert!(
        dot.contains("label=\"send c1 (shm-osr) to sum\"")
            && dot.contains("label=\"receive c1 (shm-osr) from split\""),
        "{dot}"
    );
    let o = sluice(&["plan", "wordcount", "--json"]);
    assert!(stdout(&o).contains("\"kind\": \"fused\""), "{}", stdout(&o));
}

#[test]
fn plan_auto_never_emits_more_polling_workers_than_cores_and_says_why() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for (parallelism, rate) in [("1", "0"), ("3", "0"), ("8", "0"), ("8", "100000000")] {
        let setting = format!("parallelism={parallelism}");
        let o = sluice(&[
            "plan",
            "wordcount",
            "--plan",
            "auto",
            "--rate",
            rate,
            "--set",
            &setting,
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let text = stdout(&o);
        let threads: usize = text
            .split(" PE(s), ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no thread count in {text}"));
        assert!((1..=cores).contains(&threads), "{cores} cores: {text}");
        assert!(
            text.contains("1 PE(s)"),
            "one process, one worker a thread: {text}"
        );
        assert!(
            text.contains(&format!("auto: {threads} thread(s) for {cores} core(s)")),
            "{text}"
        );
    }
}

#[test]
fn plan_without_a_plan_is_auto_and_fused_at_wordcounts_default_rate() {
    // 100,000 sentences/s of ten words: a tenth of a core by WordCount's declared costs.
    let o = sluice(&["plan", "wordcount"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("plan for wordcount (auto): 1 PE(s), 1 thread(s)"),
        "{text}"
    );
    assert!(
        text.contains(
            "fused: at the asked 100000 tuples/s a source, one core carries the job at 0.10 of \
             its time, within the 0.5 headroom, by 1000 ns of CPU a source tuple fused, 4 of 4 \
             operator(s) declaring their cost"
        ),
        "{text}"
    );
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
        &["run", "./my-program"],
        "'./my-program' is a program, not one of sluice's applications",
    );
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
        "setting parallelism: 0 is out of range: must be between 1 and 1024",
    );
    assert_one_line_error(&["run", "wordcount", "--plan", "/no/plan.toml"], "--plan");
    assert_one_line_error(
        &["run", "wordcount", "--plan", "three-threads"],
        "two-threads, two-processes",
    );
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
        "--queue-capacity 0 is out of range: a threaded port holds 1 to 16777216 messages",
    );
    // clap's own errors: non-zero exit, no panic.
    let o = sluice(&["run", "wordcount", "--duration", "-3"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(!stderr(&o).contains("panicked"));
}

#[test]
fn ctrl_c_drains_and_exits_zero_with_the_summary() {
    ctrl_c_drains("threaded");
}

#[test]
fn ctrl_c_drains_every_process_of_a_job() {
    ctrl_c_drains("processes");
}

fn ctrl_c_drains(plan: &str) {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.tsv");
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "wordcount", "--plan", plan, "--rate", "20000"])
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
fn shared_memory_benchmarks_run_across_processes_and_leave_no_segment() {
    for (transport, producers) in [("shm-vega", "1"), ("shm-osr", "2")] {
        for bench in [
            vec!["bench", "throughput"],
            vec!["bench", "latency", "--rate", "20000"],
        ] {
            let mut args = bench.clone();
            args.extend([
                "--transport",
                transport,
                "--producers",
                producers,
                "--size",
                "64",
                "--json",
            ]);
            args.extend(ONE_SHORT_RUN);
            let o = sluice(&args);
            assert!(o.status.success(), "{args:?}: {}", stderr(&o));
            let line = stdout(&o);
            for field in [
                "\"bench\"",
                &format!("\"transport\":\"{transport}\""),
                &format!("\"producers\":{producers}"),
                "\"tuple_size\":64",
                "\"tuples_per_sec\"",
                "\"gbit_per_sec\"",
                "\"latency_ns\"",
                "\"duration_s\"",
                "\"commit\"",
                "\"cpu\"",
                "\"baseline\"",
                "\"ratio_to_baseline\"",
            ] {
                if field.contains("ratio") && bench[1] == "latency" {
                    continue;
                }
                assert!(line.contains(field), "{field} missing from {line}");
            }
            let json: serde_json::Value =
                serde_json::from_str(line.trim()).expect("one JSON object");
            assert!(json["tuples_per_sec"].as_f64().unwrap() > 0.0, "{line}");
            let two_cores = std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
            if bench[1] == "throughput" && two_cores {
                // Each memcpy baseline run records where the host put the two cores.
                let placement = json["baseline"]["runs"][0]["cacheline_ns"].as_f64();
                assert!(placement.is_some_and(|ns| ns > 0.0), "{line}");
            }
            if bench[1] == "throughput" {
                // And copies through a region the ring's size, which Sluice is compared with.
                let through = json["baseline"]["runs"][0]["ring_memcpy_gbit"].as_f64();
                assert!(through.is_some_and(|g| g > 0.0), "{line}");
                assert!(
                    json["ratio_to_ring_memcpy"].as_f64().unwrap() > 0.0,
                    "{line}"
                );
            }
        }
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

#[test]
fn a_shared_memory_benchmark_takes_its_ring_size_and_other_transports_refuse_one() {
    for transport in ["shm-vega", "shm-osr"] {
        let json = short_bench(
            &["bench", "throughput"],
            transport,
            "64",
            &["--ring-bytes", "8192"],
        );
        assert_eq!(json["ring_bytes"], 8192, "{json}");
    }
    assert_refused(
        &[
            "bench",
            "throughput",
            "--transport",
            "tcp",
            "--size",
            "64",
            "--ring-bytes",
            "8192",
        ],
        "--ring-bytes needs --transport shm-osr or shm-vega",
    );
}

/// The options of one short benchmark run: 0.3 s measured, no warm-up.
const ONE_SHORT_RUN: [&str; 6] = ["--duration", "0.3", "--warmup", "0", "--repeat", "1"];

/// Runs `sluice args` and checks that it fails with exit code 1 and `message` on stderr.
fn assert_refused(args: &[&str], message: &str) {
    let o = sluice(args);
    assert_eq!(o.status.code(), Some(1), "{args:?}");
    assert!(stderr(&o).contains(message), "{}", stderr(&o));
}

/// Runs a short benchmark across two processes (`bench` then `extra` arguments, one run of
/// 0.3 s, no warm-up) and returns its JSON line.
fn short_bench(bench: &[&str], transport: &str, size: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = bench.to_vec();
    args.extend(["--transport", transport, "--size", size]);
    args.extend(ONE_SHORT_RUN);
    args.push("--json");
    args.extend(extra);
    let o = sluice(&args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    let json: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("one JSON object");
    assert_eq!(json["transport"], transport, "{json}");
    assert_eq!(json["tuple_size"].to_string(), size, "{json}");
    assert!(json["tuples_per_sec"].as_f64().unwrap() > 0.0, "{json}");
    json
}

#[test]
fn tcp_benchmarks_run_across_two_processes_beside_raw_tcp() {
    for (bench, transport) in [
        (vec!["bench", "throughput"], "tcp"),
        (vec!["bench", "throughput"], "tcp-batched"),
        (vec!["bench", "latency", "--rate", "5000"], "tcp"),
    ] {
        let json = short_bench(&bench, transport, "22", &[]);
        let line = json.to_string();
        assert_eq!(json["baseline"]["name"], "raw-tcp", "{line}");
        assert!(
            json["baseline"]["tuples_per_sec"].as_f64().unwrap() > 0.0,
            "{line}"
        );
        if bench[1] == "latency" {
            assert!(json["latency_ns"]["p50"].as_f64().unwrap() > 0.0, "{line}");
            assert!(
                json["baseline"]["latency_ns"]["p50"].as_f64().unwrap() > 0.0,
                "{line}"
            );
            // Across the network, one way is half the round trip through a reflector, for
            // Sluice and raw TCP alike.
            assert_eq!(json["latency_method"], "half-round-trip", "{line}");
            for side in [&json, &json["baseline"]] {
                let rtt = side["round_trip_ns"]["p50"].as_f64().unwrap();
                assert_eq!(
                    side["latency_ns"]["p50"].as_f64().unwrap(),
                    rtt / 2.0,
                    "{line}"
                );
            }
        } else {
            assert!(json["ratio_to_baseline"].as_f64().unwrap() > 0.0, "{line}");
        }
    }
}

#[test]
fn a_ping_pong_latency_runs_through_a_reflector_beside_its_baseline() {
    let two_cores = std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
    for (transport, baseline) in [
        ("shm-vega", "hardware"),
        ("shm-osr", "hardware"),
        ("tcp", "raw-tcp"),
    ] {
        let bench = ["bench", "latency", "--rate", "1000000000"];
        let json = short_bench(&bench, transport, "64", &["--method", "ping-pong"]);
        let line = json.to_string();
        assert_eq!(json["latency_method"], "ping-pong", "{line}");
        assert_eq!(json["baseline"]["name"], baseline, "{line}");
        for side in [&json, &json["baseline"]] {
            let rtt = side["round_trip_ns"]["p50"].as_f64().unwrap();
            assert!(rtt > 0.0, "{line}");
            assert_eq!(
                side["latency_ns"]["p50"].as_f64().unwrap(),
                rtt / 2.0,
                "{line}"
            );
        }
        if baseline == "hardware" && two_cores {
            // Every baseline run measures the two-line hand-off too, and the run compares
            // Sluice with it.
            let handoff = json["baseline"]["runs"][0]["handoff_ns"].as_f64();
            assert!(handoff.is_some_and(|ns| ns > 0.0), "{line}");
            assert!(
                json["p50_ratio_to_handoff"].as_f64().unwrap() > 0.0,
                "{line}"
            );
        }
    }
}

#[test]
fn a_ping_pong_over_a_lossy_transport_is_refused() {
    assert_refused(
        &[
            "bench",
            "latency",
            "--transport",
            "udp-mq",
            "--size",
            "64",
            "--rate",
            "10",
            "--method",
            "ping-pong",
        ],
        "--method ping-pong needs a transport that loses nothing",
    );
}

#[test]
fn a_latency_method_without_a_reflector_is_refused() {
    assert_refused(
        &[
            "bench",
            "latency",
            "--transport",
            "threaded",
            "--size",
            "64",
            "--rate",
            "10",
            "--method",
            "half-round-trip",
        ],
        "--method half-round-trip needs shm-vega, shm-osr, tcp",
    );
}

#[test]
fn a_tcp_fan_out_throughput_runs_whatever_the_latency_method_default() {
    let o = sluice(&[
        "bench",
        "throughput",
        "--transport",
        "tcp",
        "--size",
        "108",
        "--receivers",
        "2",
        "--duration",
        "0.1",
        "--warmup",
        "0",
        "--repeat",
        "1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["receivers"], 2, "{r}");
    assert_eq!(r["baseline"]["name"], "raw-tcp", "{r}");
}

#[test]
fn udp_mq_benchmarks_run_across_two_processes_beside_raw_udp_and_report_loss() {
    for (bench, queues) in [
        (vec!["bench", "throughput"], "2"),
        (vec!["bench", "latency", "--rate", "5000"], "1"),
    ] {
        let json = short_bench(&bench, "udp-mq", "64", &["--queues", queues]);
        let line = json.to_string();
        assert_eq!(json["baseline"]["name"], "raw-udp", "{line}");
        for side in [&json, &json["baseline"]] {
            let loss = side["loss"].as_f64().expect("a loss figure");
            assert!((0.0..=1.0).contains(&loss), "{line}");
            let run = &side["runs"][0]["loss"];
            assert!(run["delivered"].as_u64().unwrap() > 0, "{line}");
            assert!(run["lost"].as_u64().is_some(), "{line}");
        }
    }
    let o = sluice(&[
        "bench",
        "throughput",
        "--transport",
        "udp-mq",
        "--size",
        "64",
        "--queues",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("--queues must be between 1 and 64, got 0"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn wordcount_over_udp_mq_between_pes_matches_fused() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let text: String = (0..2000u64)
        .map(|i| format!("w{} w{} w{}\n", i % 41, (i * 7) % 41, (i * 13) % 41))
        .collect();
    std::fs::write(&input, text).unwrap();
    // Buffers far larger than the job's traffic: at-most-once loses nothing here.
    let udp_plan = MIXED_PLAN.replace(
        r#"{ kind = "shm-vega", slot_bytes = 128, slots = 64 }"#,
        r#"{ kind = "udp-mq", queues = 2, idle_limit_ms = 20000, socket_buffer_bytes = 4194304 }"#,
    );
    assert!(udp_plan.contains("udp-mq"));
    let plan_file = dir.path().join("udp.toml");
    std::fs::write(&plan_file, udp_plan).unwrap();
    let outputs = wordcount_outputs(
        dir.path(),
        &input,
        &["fused", plan_file.to_str().unwrap()],
        &["--set", "parallelism=3"],
    );
    assert_eq!(outputs[0].lines().count(), 41);
    assert_eq!(outputs[1], outputs[0]);
}

/// Sentences and split in one PE, the count in another, over a `udp-mq` edge whose socket
/// holds 64 KiB.
const UDP_PLAN: &str = r#"
[[thread]]
name = "read"
pe = "ingest"
operators = ["sentences", "split"]
[[thread]]
name = "count"
pe = "count"
operators = ["sum", "counts"]
[[edge]]
from = "split"
to = "sum"
transport = { kind = "udp-mq", queues = 1, socket_buffer_bytes = 65536 }
"#;

/// The receiving PE stopped for a second while the sender floods it: its socket overflows and
/// the datagrams in between are lost, which the run's summary must say, naming the edge.
#[test]
fn an_edge_that_lost_tuples_is_named_in_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("udp.toml");
    std::fs::write(&plan, UDP_PLAN).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command.args([
        "run",
        "wordcount",
        "--rate",
        "0",
        "--duration",
        "4",
        "--plan",
    ]);
    command.arg(&plan);
    let child = common::start_and_wait(command);
    let launcher = child.id();
    let watchdog = Instant::now() + Duration::from_secs(60);
    let receiver = loop {
        if let Some(pe) = common::pes_of(launcher)
            .into_iter()
            .find(|pe| pe.index == 1)
        {
            break pe.pid;
        }
        assert!(Instant::now() < watchdog, "the counting PE never started");
        std::thread::sleep(Duration::from_millis(10));
    };
    common::signal(receiver, "STOP");
    std::thread::sleep(Duration::from_secs(1));
    common::signal(receiver, "CONT");
    let (sent, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sent.send(child.wait_with_output());
    });
    let Ok(o) = received.recv_timeout(watchdog.saturating_duration_since(Instant::now())) else {
        common::signal(launcher, "KILL");
        panic!("the job did not end within its watchdog");
    };
    let o = o.unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let summary = stdout(&o);
    let lost: u64 = summary
        .lines()
        .find_map(|l| {
            l.strip_prefix("lost: ")?
                .strip_suffix(" tuples on the edge split -> sum")
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no loss named in the summary: {summary}"));
    assert!(lost > 0, "{summary}");
}

#[test]
fn relay_measures_round_trips_in_one_thread_and_across_processes() {
    for plan in ["fused", "processes"] {
        let o = sluice(&[
            "run",
            "relay",
            "--plan",
            plan,
            "--rate",
            "2000",
            "--duration",
            "0.5",
        ]);
        assert!(o.status.success(), "{plan}: {}", stderr(&o));
        let text = stdout(&o);
        assert!(text.contains("round trips: "), "{text}");
        assert!(
            text.contains("round trip, end-to-end latency (us): p50"),
            "{text}"
        );
    }
    // Apart from the pinger needs a second host.
    let o = sluice(&["run", "relay", "--plan", "processes", "--set", "apart=true"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("operator 'relay' must run never on the same host as 'pinger'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn storm_topologies_deliver_every_tuple_once_across_processes() {
    for (app, shape) in [("sol", "levels=3"), ("throughput-test", "ids=3")] {
        let o = sluice(&[
            "run",
            app,
            "--plan",
            "processes",
            "--set",
            shape,
            "--set",
            "parallelism=2",
            "--set",
            "tuples=2000",
            "--rate",
            "20000",
        ]);
        assert!(o.status.success(), "{app}: {}", stderr(&o));
        let text = stdout(&o);
        assert!(
            text.contains("integrity: ok, every tuple arrived once with its payload intact: sent 2000, received 2000"),
            "{text}"
        );
        assert!(text.contains("end-to-end latency (us): p50"), "{text}");
    }
}

#[test]
fn bench_topology_prints_latency_against_rate_under_each_plan() {
    let o = sluice(&[
        "bench",
        "topology",
        "throughput-test",
        "--rates",
        "500,2000",
        "--plans",
        "fused,processes",
        "--duration",
        "0.3",
        "--warmup",
        "0",
        "--repeat",
        "1",
        "--set",
        "parallelism=2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.starts_with("sluice bench topology throughput-test"),
        "{text}"
    );
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("| ")).collect();
    assert_eq!(
        rows[0],
        "| plan | rate/s | reached/s | mean us | p50 us | p99 us | p99.9 us |"
    );
    for (row, (plan, rate)) in rows[2..].iter().zip([
        ("fused", 500),
        ("fused", 2000),
        ("processes", 500),
        ("processes", 2000),
    ]) {
        assert!(row.starts_with(&format!("| {plan} | {rate} | ")), "{text}");
        assert!(!row.contains("skipped") && !row.contains(" - "), "{text}");
    }
    assert_eq!(rows.len(), 6, "{text}");
    let o = sluice(&["bench", "topology", "wordcount"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("no topology named 'wordcount'; topologies: sol, throughput-test"),
        "{}",
        stderr(&o)
    );
}

/// Runs `sluice bench app wordcount` with `extra` arguments and returns its JSON line, after
/// checking the fields every result has.
fn app_bench(extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["bench", "app", "wordcount", "--json"];
    args.extend(extra);
    let o = sluice(&args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    let json: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("one JSON object");
    assert_eq!(json["bench"], "app", "{json}");
    assert_eq!(json["app"], "wordcount", "{json}");
    assert_eq!(json["unit"], "words", "{json}");
    assert_eq!(json["counted_operator"], "sum", "{json}");
    assert!(json["per_sec"].as_f64().unwrap() > 0.0, "{json}");
    for run in json["runs"].as_array().unwrap() {
        assert!(run["units"].as_u64().unwrap() > 0, "{json}");
        assert!(run["elapsed_s"].as_f64().unwrap() > 0.0, "{json}");
    }
    let names: Vec<&str> = json["yardsticks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|y| y["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["naive", "tuned"], "{json}");
    for y in json["yardsticks"].as_array().unwrap() {
        assert!(!y["description"].as_str().unwrap().is_empty(), "{json}");
        assert!(y["per_sec"].as_f64().unwrap() > 0.0, "{json}");
        assert!(y["ratio"].as_f64().unwrap() > 0.0, "{json}");
        assert_eq!(
            y["runs"].as_array().unwrap().len(),
            json["runs"].as_array().unwrap().len()
        );
    }
    for field in ["duration_s", "warmup_s", "cores"] {
        assert!(json[field].as_f64().is_some(), "{field}: {json}");
    }
    for field in ["commit", "cpu", "plan", "input"] {
        assert!(json[field].as_str().is_some(), "{field}: {json}");
    }
    json
}

#[test]
fn an_application_benchmark_reports_its_yardsticks_beside_it() {
    let json = app_bench(&["--duration", "0.3", "--warmup", "0.1", "--repeat", "2"]);
    assert_eq!(json["plan"], "fused");
    assert_eq!(json["runs"].as_array().unwrap().len(), 2, "{json}");
    assert!(json["latency_ns"].is_null(), "as fast as possible: {json}");
    assert!(json.get("target_rate").is_none(), "{json}");
    // At a rate, across processes (each PE re-executes the same command), with latency.
    let json = app_bench(
        &[
            &["--plan", "processes", "--rate", "5000"],
            &ONE_SHORT_RUN[..],
        ]
        .concat(),
    );
    assert_eq!(json["plan"], "processes");
    assert_eq!(json["target_rate"], 5000);
    for field in ["p50", "p99", "p999"] {
        assert!(json["latency_ns"][field].as_f64().unwrap() > 0.0, "{json}");
    }
    assert!(json["runs"][0]["latency_ns"].is_object(), "{json}");
}

#[test]
fn an_application_without_yardsticks_is_refused_naming_those_there_are() {
    assert_one_line_error(
        &["bench", "app", "nosuch"],
        "no benchable application named 'nosuch'; benchable applications: wordcount",
    );
    assert_one_line_error(
        &["bench", "app", "relay"],
        "relay has no yardsticks to measure it against yet; benchable applications: wordcount",
    );
    assert_one_line_error(&["bench", "app", "wordcount", "--repeat", "0"], "--repeat");
    assert_one_line_error(
        &["bench", "app", "wordcount", "--set", "colour=red"],
        "no setting 'colour'",
    );
    assert_one_line_error(
        &["bench", "app", "wordcount", "--plan", "/no/plan.toml"],
        "--plan",
    );
}

#[test]
fn wordcount_takes_any_address_of_the_connectors_registry() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("hamlet.txt");
    std::fs::write(&input, "To be, or not to be\n").unwrap();
    let input = input.to_str().unwrap();
    // `stdout` was taken for a file of that name before the registry resolved addresses.
    let o = sluice(&["run", "wordcount", "--input", input, "--output", "stdout"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let counts: Vec<&str> = out.lines().filter(|l| l.contains('\t')).collect();
    assert!(
        counts.contains(&"be\t2") && counts.contains(&"not\t1"),
        "{counts:?}"
    );
    let o = sluice(&["run", "wordcount", "--input", "ftp://host/lines"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("ftp://host/lines: no connector for the scheme ftp:// (known: file, tcp, udp, stdout, kafka)"),
        "{}",
        stderr(&o)
    );
}
