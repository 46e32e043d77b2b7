//! Faults a user can type, against the real binary: every plan the runtime would refuse is
//! refused by `sluice plan` and by `sluice run` with one and the same line, before anything
//! starts; sizes beyond their bounds are refused naming the setting, the value and the bound
//! (never an abort); a closed standard output ends every command quietly. No case may show a
//! panic or a backtrace, and each runs under a watchdog.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The longest any case may take; beyond it the case hangs and fails.
const WATCHDOG: Duration = Duration::from_secs(60);

/// Waits for `child` under the watchdog, reading its standard error if it is piped; kills it
/// on a hang.
fn wait_watched(mut child: Child, args: &[&str]) -> (Option<i32>, String) {
    let stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut stderr) = stderr {
            let _ = stderr.read_to_string(&mut text);
        }
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("sluice can be waited for") {
            break status;
        }
        if started.elapsed() > WATCHDOG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} hung for {WATCHDOG:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stderr = reader.join().expect("stderr reader");
    assert_no_panic(args, &stderr);
    (status.code(), stderr)
}

fn assert_no_panic(args: &[&str], stderr: &str) {
    for sign in [
        "panicked",
        "stack backtrace",
        "RUST_BACKTRACE",
        "memory allocation",
    ] {
        assert!(!stderr.contains(sign), "{args:?} shows '{sign}': {stderr}");
    }
}

/// The exit code and standard error of `sluice args`, run under the watchdog.
fn outcome(args: &[&str]) -> (Option<i32>, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sluice starts");
    wait_watched(child, args)
}

/// Asserts that `sluice args` fails with exit status 1 and the one line `error: {message}`.
fn assert_refused(args: &[&str], message: &str) {
    let (code, stderr) = outcome(args);
    assert_eq!(code, Some(1), "{args:?}: {stderr}");
    assert_eq!(stderr, format!("error: {message}\n"), "{args:?}");
}

/// Asserts that `sluice plan` and `sluice run` (which would end at once) refuse `plan` and
/// `extra` with the same line, `error: {message}`.
fn assert_plan_and_run_refuse(plan: &str, extra: &[&str], message: &str) {
    let planned: Vec<&str> = ["plan", "wordcount", "--plan", plan]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    assert_refused(&planned, message);
    let run: Vec<&str> = ["run", "wordcount", "--plan", plan, "--set", "sentences=10"]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    assert_refused(&run, message);
}

/// A plan file in `dir` of two PEs (sentences and split; sum and counts) with `edge` pinning
/// the transport of split -> sum.
fn pinned(dir: &Path, name: &str, transport: &str) -> String {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "[[thread]]\nname = 'a'\npe = 'a'\noperators = ['sentences', 'split']\n\
             [[thread]]\nname = 'b'\npe = 'b'\noperators = ['sum', 'counts']\n\
             [[edge]]\nfrom = 'split'\nto = 'sum'\ntransport = {transport}\n"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn plans_the_runtime_would_refuse_are_refused_by_plan_and_run_alike() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    assert_plan_and_run_refuse(
        &pinned(
            dir,
            "slot0.toml",
            "{ kind = 'shm-vega', slot_bytes = 0, slots = 16 }",
        ),
        &[],
        "edge split -> sum: transport shm-vega: slot_bytes must be at least 1, got 0",
    );
    assert_plan_and_run_refuse(
        &pinned(
            dir,
            "slot4g.toml",
            "{ kind = 'shm-vega', slot_bytes = 4294967296, slots = 16 }",
        ),
        &[],
        "edge split -> sum: transport shm-vega: slot_bytes/slots a slot of 4294967297 bytes is \
         above the limit of 4294967295",
    );
    assert_plan_and_run_refuse(
        &pinned(
            dir,
            "slots0.toml",
            "{ kind = 'shm-vega', slot_bytes = 256, slots = 0 }",
        ),
        &[],
        "edge split -> sum: transport shm-vega: slot_bytes/slots a Vega ring needs at least one \
         slot",
    );
    assert_plan_and_run_refuse(
        &pinned(
            dir,
            "osr.toml",
            "{ kind = 'shm-osr', capacity_bytes = 100 }",
        ),
        &[],
        "edge split -> sum: transport shm-osr: capacity_bytes invalid OSR ring layout: capacity \
         must be a power of two between 64 bytes and 64 MiB",
    );
    if !cfg!(feature = "mpi") {
        assert_plan_and_run_refuse(
            &pinned(dir, "mpi.toml", "{ kind = 'mpi' }"),
            &[],
            "edge split -> sum: the mpi transport: this program was built without the mpi \
             feature (rebuild with --features mpi)",
        );
    }
}

#[test]
fn what_was_silently_accepted_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let unknown = pinned(
        dir.path(),
        "unknown.toml",
        "{ kind = 'shm-vega', slot_bytes = 256, slots = 16, bogus = 3 }",
    );
    assert_plan_and_run_refuse(
        &unknown,
        &[],
        &format!(
            "plan file {unknown}, line 12, column 13: unknown field `bogus`, expected \
             `slot_bytes` or `slots`"
        ),
    );
    let twice = dir.path().join("twice.toml");
    std::fs::write(
        &twice,
        "[[thread]]\nname = 'a'\noperators = ['sentences', 'split']\n\
         [[thread]]\nname = 'a'\noperators = ['sum', 'counts']\n",
    )
    .unwrap();
    assert_plan_and_run_refuse(
        twice.to_str().unwrap(),
        &[],
        "two threads are named 'a'; every thread needs a name of its own",
    );
    let nul = dir.path().join("nul.toml");
    std::fs::write(
        &nul,
        "[[thread]]\nname = \"a\\u0000\"\noperators = ['sentences', 'split', 'sum', 'counts']\n",
    )
    .unwrap();
    assert_plan_and_run_refuse(
        nul.to_str().unwrap(),
        &[],
        "thread name 'a\\0' is empty or holds a NUL byte",
    );
    let hosts = dir.path().join("hosts.toml");
    std::fs::write(&hosts, "[[host]]\nname = 'a b'\naddress = '127.0.0.1'\n").unwrap();
    assert_plan_and_run_refuse(
        "fused",
        &["--hosts", hosts.to_str().unwrap()],
        &format!(
            "hosts file {}: host name 'a b' is empty or holds a space or a control character \
             (it is a line of mpirun's hostfile and an argument of its -host)",
            hosts.display()
        ),
    );
}

#[test]
fn sizes_beyond_their_bounds_are_refused_never_aborted() {
    assert_refused(
        &["run", "wordcount", "--queue-capacity", "4294967296"],
        "--queue-capacity 4294967296 is out of range: a threaded port holds 1 to 16777216 \
         messages",
    );
    assert_refused(
        &[
            "plan",
            "wordcount",
            "--plan",
            "threaded",
            "--queue-capacity",
            "0",
        ],
        "--queue-capacity 0 is out of range: a threaded port holds 1 to 16777216 messages",
    );
    for (setting, message) in [
        (
            "parallelism=100000000000",
            "setting parallelism: 100000000000 is out of range: must be between 1 and 1024",
        ),
        (
            "words=4294967296",
            "setting words: 4294967296 is out of range: must be between 1 and 65536",
        ),
        (
            "vocabulary=100000000000",
            "setting vocabulary: 100000000000 is out of range: must be between 1 and 16777216",
        ),
    ] {
        assert_refused(&["run", "wordcount", "--set", setting], message);
    }
    let dir = tempfile::tempdir().unwrap();
    let huge = dir.path().join("huge.toml");
    std::fs::write(
        &huge,
        "queue_capacity = 4294967296\n[[thread]]\nname = 'a'\n\
         operators = ['sentences', 'split']\n[[thread]]\nname = 'b'\n\
         operators = ['sum', 'counts']\n",
    )
    .unwrap();
    let huge = huge.to_str().unwrap();
    assert_plan_and_run_refuse(
        huge,
        &[],
        &format!(
            "{huge}: queue_capacity 4294967296 is out of range: a threaded port holds 1 to \
             16777216 messages"
        ),
    );
    assert_refused(
        &["bench", "baseline", "--repeat", "1000000000000000000"],
        "--repeat must be between 1 and 10000, got 1000000000000000000",
    );
}

#[test]
fn endless_inputs_are_refused_at_their_limits_never_read_until_memory_runs_out() {
    for (option, what) in [
        ("--plan", "plan file"),
        ("--config", "the configuration file"),
    ] {
        assert_refused(
            &["run", "wordcount", option, "/dev/zero"],
            &format!(
                "cannot read {what} /dev/zero: it has more than 16777216 bytes, over the limit \
                 of 16777216"
            ),
        );
    }
    let args = ["run", "wordcount", "--input", "/dev/zero"];
    let (code, stderr) = outcome(&args);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "/dev/zero: line 1 (from byte 0) is longer than 1073741824 bytes, the limit of a \
             line (one tuple)"
        ),
        "{stderr}"
    );
    let shell = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("query")
        .stdin(std::fs::File::open("/dev/zero").unwrap())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sluice starts");
    let (code, stderr) = wait_watched(shell, &["query", "< /dev/zero"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(
        stderr,
        "error: a statement of more than 16777216 bytes (no ';' yet), over the limit of \
         16777216\n"
    );
    for (query, message) in [
        (
            "count(window(iota(1,100000000000), 4611686018427387904, 1));",
            "window: a window of 4611686018427387904 elements, over the limit of 1048576",
        ),
        (
            "count(winagg(iota(1,100000000000), 4611686018427387904, 1, 'sum'));",
            "winagg: a window of 4611686018427387904 elements, over the limit of 1048576",
        ),
        (
            "count(receiver('/dev/zero'));",
            "receiver: '/dev/zero' line 1: longer than 67108864 bytes, the limit of a line",
        ),
        (
            "count(grep('a','/dev/zero'));",
            "grep: '/dev/zero' line 1: longer than 67108864 bytes, the limit of a line",
        ),
        (
            "count(receiver('sine:100000000000:1'));",
            "receiver: 'sine:100000000000:1': arrays of 100000000000 samples, over the limit \
             of 134217728",
        ),
    ] {
        let args = ["query", "-e", query];
        let (code, stderr) = outcome(&args);
        assert_eq!(code, Some(1), "{query}: {stderr}");
        assert!(stderr.contains(message), "{query}: {stderr}");
    }
}

#[test]
fn a_line_that_is_not_utf8_is_named_with_its_file_line_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, b"good line\nbad \xff here\n").unwrap();
    let input = input.to_str().unwrap();
    let args = ["run", "wordcount", "--input", input];
    let (code, stderr) = outcome(&args);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{input}: line 2 is not valid UTF-8 at byte offset 14 of the file (offset 4 in the line)"
        )),
        "{stderr}"
    );
}

#[test]
fn an_output_that_is_the_input_is_refused_through_any_link() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "to be or not to be\n").unwrap();
    let hard = dir.path().join("hard.txt");
    std::fs::hard_link(&input, &hard).unwrap();
    let soft = dir.path().join("soft.txt");
    std::os::unix::fs::symlink(&input, &soft).unwrap();
    let input = input.to_str().unwrap();
    for output in [input, hard.to_str().unwrap(), soft.to_str().unwrap()] {
        assert_refused(
            &["run", "wordcount", "--input", input, "--output", output],
            &format!(
                "{output}: cannot write output: it is the input {input}, which it would \
                 overwrite"
            ),
        );
    }
    assert_eq!(
        std::fs::read_to_string(input).unwrap(),
        "to be or not to be\n"
    );
}

/// Runs `sluice args` with standard output a pipe whose reader is already gone, so its first
/// write fails with EPIPE; returns the exit code and standard error.
fn with_closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .expect("sluice starts");
    wait_watched(child, args)
}

#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    for line in [
        "plan wordcount --plan processes",
        "plan wordcount --plan processes --dot",
        "plan wordcount --json",
        "apps",
        "run wordcount --plan threaded --set sentences=100",
        "run wordcount --plan processes --set sentences=100",
        "bench throughput --transport fused --size 8 --duration 0.1 --warmup 0 --repeat 1",
    ] {
        let args: &[&str] = &line.split(' ').collect::<Vec<_>>();
        let (code, stderr) = with_closed_stdout(args);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("error"), "{args:?}: {stderr}");
        assert!(
            !stderr.to_lowercase().contains("broken pipe"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn a_closed_stdout_does_not_hide_a_failure() {
    let (code, stderr) = with_closed_stdout(&["run", "wordcount", "--set", "parallelism=0"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(
        stderr,
        "error: setting parallelism: 0 is out of range: must be between 1 and 1024\n"
    );
}

#[test]
fn plan_piped_into_head_exits_zero_under_pipefail() {
    let script = format!(
        "set -o pipefail; '{}' plan wordcount --plan processes --set parallelism=16 | head -1",
        env!("CARGO_BIN_EXE_sluice")
    );
    let child = Command::new("bash")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bash runs");
    let (code, stderr) = wait_watched(child, &["bash", "-c", &script]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stderr, "");
}

/// The exit code of `sluice args` with standard output and standard error both pipes whose
/// reader is already gone (`sluice ... 2>&1 | head -1`, once head has left).
fn with_closed_stdout_and_stderr(args: &[&str]) -> Option<i32> {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(writer.try_clone().expect("a second handle"))
        .stderr(writer)
        .spawn()
        .expect("sluice starts");
    wait_watched(child, args).0
}

#[test]
fn closed_stdout_and_stderr_leave_the_status_to_the_job() {
    // A panic would exit 101.
    let run = [
        "run",
        "wordcount",
        "--plan",
        "threaded",
        "--set",
        "sentences=100",
    ];
    assert_eq!(with_closed_stdout_and_stderr(&run), Some(0));
    let refused = ["run", "wordcount", "--set", "parallelism=0"];
    assert_eq!(with_closed_stdout_and_stderr(&refused), Some(1));
}

/// Twenty `sum` processes feed `counts` through one OSR ring: refused once (the ring took 16
/// senders, in an 800-character line), now counted exactly.
#[test]
fn twenty_processes_feeding_one_port_count_every_word() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let output = dir.path().join("counts.tsv");
    let text: String = (0..3000)
        .map(|i| format!("w{} w{} w{}\n", i % 97, i % 13, i % 211))
        .collect();
    std::fs::write(&input, &text).unwrap();
    let args = [
        "run",
        "wordcount",
        "--plan",
        "processes",
        "--set",
        "parallelism=20",
        "--input",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
    ];
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sluice starts");
    let (code, stderr) = wait_watched(child, &args);
    assert_eq!(code, Some(0), "{stderr}");
    let mut want = std::collections::BTreeMap::new();
    for word in text.split_ascii_whitespace() {
        *want.entry(word.to_owned()).or_insert(0u64) += 1;
    }
    let got: std::collections::BTreeMap<String, u64> = std::fs::read_to_string(&output)
        .unwrap()
        .lines()
        .map(|l| {
            let (word, count) = l.split_once('\t').expect("word<TAB>count");
            (word.to_owned(), count.parse().expect("a count"))
        })
        .collect();
    assert!(got == want, "the counts differ from a direct count");
}

/// The Vega paper's OMDP topology, 20 feed handlers into each of 8 engines, plans as
/// processes (each engine's port takes 20 senders).
#[test]
fn omdp_with_twenty_feed_handlers_plans_as_processes() {
    let args = [
        "plan",
        "omdp",
        "--plan",
        "processes",
        "--set",
        "channels=20",
        "--set",
        "engines=8",
    ];
    let (code, stderr) = outcome(&args);
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
}
