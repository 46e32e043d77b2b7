//! `sluice query` running real queries whose stream processes are PEs (processes) of a job:
//! the paper's point-to-point and merge queries and Queries 1-6 with small arrays, `--limit`
//! on a long query, `--explain`, the threaded transport, the radix2 FFT against a direct FFT,
//! and an allocation naming no node. Each leaves no process and no shared segment behind.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{sluice, stderr, stdout};

/// The paper's queries, in `tests/queries`.
fn paper(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/queries")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The shared segments the query jobs of the `sluice` process `pid` left on this host (a
/// job's id is `scsql-<pid>-<n>`, escaped in segment names).
fn segments_left_by(pid: u32) -> Vec<String> {
    let prefix = format!("sluice-scsql_2d{pid}_2d");
    let Ok(entries) = std::fs::read_dir("/dev/shm") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(&prefix))
        .collect()
}

/// Runs `sluice query ARGS -e TEXT`, checks that it succeeded and left no shared segment.
fn query(args: &[&str], text: &str) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("query")
        .args(args)
        .args(["-e", text])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sluice runs");
    let pid = child.id();
    let output = child.wait_with_output().expect("sluice ends");
    assert!(
        output.status.success(),
        "sluice query {args:?} -e {text} failed:\n{}",
        stderr(&output)
    );
    assert_eq!(segments_left_by(pid), Vec::<String>::new());
    output
}

#[test]
fn point_to_point_counts_the_arrays_and_reports_the_bandwidth() {
    let text =
        paper("paper_p2p_bandwidth.scsql").replace("gen_array(3000000,100)", "gen_array(1000,100)");
    let output = query(&[], &text);
    assert_eq!(stdout(&output), "100\n");
    let err = stderr(&output);
    assert!(
        err.contains("query: 101 element(s), 0.1 MB between stream processes in"),
        "{err}"
    );
    assert!(err.contains("MB/s"), "{err}");
}

#[test]
fn a_merge_counts_both_streams() {
    let text = "select extract(c) from sp a, sp b, sp c \
                where c=sp(count(merge({a,b})), 'bg', 0) \
                and a=sp(gen_array(1000,10), 'bg', 1) \
                and b=sp(gen_array(1000,10), 'bg', 1);";
    assert_eq!(stdout(&query(&[], text)), "20\n");
}

#[test]
fn queries_1_to_6_count_every_array_of_the_back_end() {
    for i in 1..=6 {
        let text = paper(&format!("paper_query{i}.scsql"))
            .replace("n=4", "n=2")
            .replace("gen_array(3000000,100)", "gen_array(1000,10)");
        assert_eq!(stdout(&query(&[], &text)), "20\n", "query {i}");
    }
}

#[test]
fn the_threaded_transport_runs_every_stream_process_in_one_process() {
    let text = "select extract(b) from sp a, sp b \
                where b=sp(streamof(count(extract(a)))) and a=sp(gen_array(100,10));";
    let explained = query(&["--set", "transport=threaded", "--explain"], text);
    let plan = stdout(&explained);
    assert!(plan.contains("PE main"), "{plan}");
    assert!(plan.contains("sp0 -> sp1  threaded"), "{plan}");
    assert_eq!(
        stdout(&query(&["--set", "transport=threaded"], text)),
        "10\n"
    );
}

#[test]
fn buffer_settings_pin_a_ring_of_one_or_two_buffers() {
    let text = "select extract(b) from sp a, sp b \
                where b=sp(count(extract(a))) and a=sp(gen_array(1000,10));";
    for (double, slots) in [("off", 1), ("on", 2)] {
        let double = format!("double_buffering={double}");
        let plan = stdout(&query(
            &["--set", "buffer=100", "--set", &double, "--explain"],
            text,
        ));
        let edge = format!("sp0 -> sp1  shm-vega(slot_bytes=100, slots={slots})");
        assert!(plan.contains(&edge), "{plan}");
        assert_eq!(
            stdout(&query(&["--set", "buffer=100", "--set", &double], text)),
            "10\n"
        );
    }
}

#[test]
fn explain_shows_the_stream_processes_their_nodes_and_the_edges() {
    let text = paper("paper_p2p_bandwidth.scsql");
    let plan = stdout(&query(&["--explain"], &text));
    let expected = [
        "stream processes (2):",
        "sp0    gen_array(3000000, 100)",
        "cluster 'bg' node 1 (localhost core 1), PE sp0",
        "sp1    streamof(count(extract(sp0)))",
        "cluster 'bg' node 0 (localhost core 0), PE sp1",
        "client extract(sp1)",
        "sp0 -> sp1  shm-osr",
        "sp1 -> client  shm-osr",
    ];
    for line in expected {
        assert!(plan.contains(line), "no '{line}' in:\n{plan}");
    }
}

#[test]
fn limit_stops_a_long_query_and_removes_everything() {
    let text = "select extract(b) from sp a, sp b \
                where b=sp(extract(a)) and a=sp(iota(1, 1000000000));";
    let output = query(&["--limit", "3"], text);
    assert_eq!(stdout(&output), "1\n2\n3\n");
}

#[test]
fn radix2_gives_the_direct_fft() {
    // The file's function definition, without its query.
    let file = paper("paper_radix2.scsql");
    let radix2 = &file[..file.find("radix2(\"").expect("the file's query")];
    let parallel = query(&[], &format!("{radix2} radix2('sine:16:3');"));
    let direct = query(&[], "fft(receiver('sine:16:3'));");
    // Each line is an array of complex numbers `[re+imi, re-imi, ...]`.
    let numbers = |output: &Output| -> Vec<f64> {
        let mut parts = Vec::new();
        for line in stdout(output).lines() {
            for number in line.trim_matches(['[', ']']).split(", ") {
                let number = number.trim_end_matches('i');
                let split = (1..number.len())
                    .rev()
                    .find(|&i| matches!(&number[i..=i], "+" | "-") && &number[i - 1..i] != "e")
                    .unwrap_or_else(|| panic!("not a complex number: {number}"));
                parts.push(number[..split].parse().unwrap());
                parts.push(number[split..].parse().unwrap());
            }
        }
        parts
    };
    let (parallel, direct) = (numbers(&parallel), numbers(&direct));
    assert_eq!(parallel.len(), direct.len());
    assert!(!direct.is_empty());
    for (p, d) in parallel.iter().zip(&direct) {
        assert!((p - d).abs() < 1e-9, "{p} vs {d}");
    }
}

#[test]
fn an_allocation_naming_no_node_fails_before_anything_starts() {
    let output = sluice(&[
        "query",
        "-e",
        "select extract(a) from sp a where a=sp(gen_array(10,1), 'bg', 99);",
    ]);
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(
        err.contains("node 99 is not available: cluster 'bg' has nodes 0.."),
        "{err}"
    );
    assert!(err.contains("-e:1:63"), "{err}");
    assert!(err.contains("no available node"), "{err}");
    assert!(stdout(&output).is_empty());
}

#[test]
fn the_shell_gives_each_job_the_functions_defined_before_it() {
    let mut shell = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("query")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sluice runs");
    let statements = "create function counted(integer n) -> stream as\n\
                      select extract(b) from sp a, sp b\n\
                      where b = sp(count(extract(a))) and a = sp(gen_array(10, n));\n\
                      counted(3);\n\
                      counted(5);\n";
    shell
        .stdin
        .take()
        .unwrap()
        .write_all(statements.as_bytes())
        .unwrap();
    let output = shell.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "3\n5\n");
}

#[test]
fn set_statements_reach_every_pe_of_the_queries_after_them() {
    let text = "set buffer = 1000; set double_buffering = on;\n\
                select extract(b) from sp a, sp b \
                where b=sp(count(extract(a))) and a=sp(gen_array(3000,7));";
    let plan = stdout(&query(&["--explain"], text));
    assert!(
        plan.contains("sp1 -> client  shm-vega(slot_bytes=1000, slots=2)"),
        "{plan}"
    );
    assert_eq!(stdout(&query(&[], text)), "7\n");
}

/// Whether `pid` has a handler for `signal` (its `SigCgt` mask in `/proc/PID/status`).
fn catches(pid: u32, signal: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (signal - 1)) != 0)
}

/// When to interrupt a `sluice query`.
#[derive(Clone, Copy, Debug)]
enum When {
    /// Once its handler is in place, again and again until it ends.
    Repeatedly,
    /// Once it has printed a result, again and again until it ends.
    AfterAResult,
    /// Once, when its job runs (in the job registry: its start is over).
    OnceItsJobRuns,
}

/// Runs `sluice query ARGS` with `input` on its standard input (kept open), interrupts it
/// with the signal `(number, name)` `when` says, and returns what it printed.
fn interrupted(args: &[&str], input: &str, (number, name): (u32, &str), when: When) -> Output {
    // A registry of its own: the job is in it once it runs (its start is over).
    let runtime = tempfile::tempdir().unwrap();
    let registry = runtime.path().join("sluice").join("jobs");
    let registered = || std::fs::read_dir(&registry).is_ok_and(|mut d| d.next().is_some());
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("query")
        .args(args)
        .env("XDG_RUNTIME_DIR", runtime.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sluice runs");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    let pid = child.id();
    let mut out = child.stdout.take().unwrap();
    let (printed, first) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut byte = [0u8; 1];
        while let Ok(1) = std::io::Read::read(&mut out, &mut byte) {
            all.push(byte[0]);
            if byte[0] == b'\n' {
                let _ = printed.send(());
            }
        }
        all
    });
    let (ended, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = ended.send(child.wait_with_output());
    });
    let began = std::time::Instant::now();
    let mut signalled = false;
    let output = loop {
        // A watchdog: without the stop the queries here would run for years.
        if began.elapsed() > std::time::Duration::from_secs(120) {
            common::signal(pid, "KILL");
            panic!("{args:?}: the {name} did not stop the query");
        }
        let ready = match when {
            When::Repeatedly => true,
            When::AfterAResult => first.try_recv().is_ok() || signalled,
            // Not while it starts: a stop then ends the start, before any result.
            When::OnceItsJobRuns => !signalled && registered(),
        };
        if ready && catches(pid, number) {
            common::signal(pid, name);
            signalled = true;
        }
        match wait.recv_timeout(std::time::Duration::from_millis(200)) {
            Ok(output) => break output.unwrap(),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(e) => panic!("{e}"),
        }
    };
    drop(stdin);
    Output {
        stdout: reader.join().unwrap(),
        ..output
    }
}

#[test]
fn an_interrupted_query_says_its_results_are_partial_and_exits_with_130() {
    let endless = "count(iota(1,1000000000000000000));";
    let stream = "iota(100,1000000000000000000);";
    let job = "select extract(b) from sp a, sp b \
               where b=sp(count(extract(a))) and a=sp(iota(1,1000000000000000000));";
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("endless.scsql");
    std::fs::write(&file, format!("{endless}\n7;\n")).unwrap();
    let file = file.to_str().unwrap().to_string();
    let two = format!("{endless} 7;");
    let (int, term) = ((2, "INT"), (15, "TERM"));
    // One statement, several, a file, the shell, a job: the aggregate's value over what came
    // (or the stream so far), never the 7 after it.
    let cases = [
        (vec!["-e", endless], String::new(), int, When::Repeatedly),
        (vec!["-e", &two], String::new(), term, When::Repeatedly),
        (vec![&file], String::new(), int, When::Repeatedly),
        (vec![], format!("{stream}\n7;\n"), term, When::AfterAResult),
        (vec![], format!("{stream}\n7;\n"), int, When::AfterAResult),
        (vec!["-e", job], String::new(), int, When::OnceItsJobRuns),
    ];
    for (args, input, signal, when) in cases {
        let output = interrupted(&args, &input, signal, when);
        let (out, err) = (stdout(&output), stderr(&output));
        assert_eq!(output.status.code(), Some(130), "{args:?} {when:?}: {err}");
        assert!(err.contains("results above are partial"), "{args:?}: {err}");
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            !lines.is_empty() && lines.last() != Some(&"7"),
            "{args:?}: {out}"
        );
        if !matches!(when, When::AfterAResult) {
            assert_eq!(lines.len(), 1, "{args:?}: {out}");
        }
    }
}

#[test]
fn the_stall_timeout_comes_from_the_option_or_the_environment() {
    // A stream process that reads a FIFO nobody writes to is stuck in its read. This test
    // holds the FIFO open for writing (read-write, which does not wait for a reader), so that
    // opening it to read does not wait.
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("silent.fifo");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let _writer = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    let text = format!(
        "select extract(a) from sp a where a=sp(receiver('{}'));",
        fifo.display()
    );
    for (args, variable) in [
        (vec!["--stall-timeout", "0.5"], None),
        (vec![], Some("0.5")),
    ] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
        command.arg("query").args(&args).args(["-e", &text]);
        if let Some(value) = variable {
            command.env("SLUICE_STALL_TIMEOUT", value);
        }
        let child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sluice runs");
        let pid = child.id();
        let (ended, wait) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = ended.send(child.wait_with_output());
        });
        // A watchdog: a stall never noticed would leave the query waiting for ever.
        let Ok(output) = wait.recv_timeout(std::time::Duration::from_secs(120)) else {
            common::signal(pid, "KILL");
            panic!("{args:?} {variable:?}: the stall was not noticed");
        };
        let output = output.unwrap();
        let err = stderr(&output);
        assert!(!output.status.success(), "{args:?} {variable:?}: {err}");
        assert!(
            err.contains("made no progress for 0.5 s"),
            "{args:?} {variable:?}: {err}"
        );
    }
}
