//! A program of the user's own, written against the library as the book shows (the fluent
//! API, `collect()`, `sluice_runtime::run` with a processes plan), is a job like the
//! built-in applications: `sluice jobs` lists it while it runs and `sluice stop` drains it,
//! on the real binaries, and what it collected comes back to it from its PE processes.
//!
//! The binary has its own `main` (no test harness): run with the argument `program` it is
//! the user's program (and, re-executed by its launcher, each of its PEs); without, it runs
//! the case, which starts it as a child. The case keeps its own registry (its own
//! `XDG_RUNTIME_DIR`), so jobs of other tests or users never show.

use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

mod common;

use common::{finish, jobs_in as jobs, stop_in, Program};
use sluice_graph::Graph;
use sluice_ops::{collected, Collected, Dataflow, Generator};
use sluice_plan::{plan, PlanOptions, PlanRequest};
use sluice_runtime::{is_pe_process, serve_pe, RunOptions};

/// Generous bound on the wait for the listing (a hang, not a slow machine, should trip it).
const PATIENCE: Duration = Duration::from_secs(60);
/// The longest the whole case may take before this binary calls it a hang.
const WATCHDOG: Duration = Duration::from_secs(240);

/// The user's application: numbers for ever, 2,000 a second, doubled, collected.
fn graph() -> (Graph, Collected<u64>) {
    let flow = Dataflow::new("own-program");
    let doubled = flow
        .source_of("numbers", |_| Generator::new(Some).rate(2000))
        .map("double", |n: &u64| n * 2)
        .collect("doubled");
    (flow.build().unwrap(), doubled)
}

/// The user's program: runs the application under a processes plan until it is stopped,
/// then says what it collected.
fn program() {
    let (graph, doubled) = graph();
    if is_pe_process() {
        serve_pe(&graph, &RunOptions::default());
    }
    let p = plan(&graph, &PlanRequest::Processes, &PlanOptions::default()).unwrap();
    sluice_runtime::run(&graph, &p, &RunOptions::default()).unwrap();
    let got = collected(&doubled);
    let in_order = got.iter().enumerate().all(|(i, n)| *n == 2 * i as u64);
    println!("collected {} in order: {in_order}", got.len());
}

fn a_program_of_its_own_is_listed_and_stopped_as_a_job() {
    let registry = tempfile::tempdir().unwrap();
    std::fs::set_permissions(registry.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let registry = registry.path();
    let mut program = Program(Some(
        Command::new(std::env::current_exe().unwrap())
            .arg("program")
            .env("XDG_RUNTIME_DIR", registry)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let pid = program.0.as_ref().map_or(0, Child::id);
    // SYNC: see `WATCHED`.
    common::WATCHED.store(pid, Ordering::Relaxed);
    let began = Instant::now();
    let row = loop {
        let listing = jobs(registry);
        if let Some(row) = listing.lines().find(|l| l.starts_with("own-program-")) {
            break row.to_string();
        }
        assert!(began.elapsed() < PATIENCE, "never listed: {listing}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let columns: Vec<&str> = row.split_whitespace().collect();
    let id = columns[0];
    assert_eq!(id, format!("own-program-{pid}"), "{row}");
    assert_eq!(&columns[1..4], ["own-program", "processes", "3"], "{row}");

    stop_in(registry, id);
    let o = finish(program.0.take().expect("the program runs"));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("asked by `sluice stop`"), "{stderr}");
    let collected: u64 = stdout
        .strip_prefix("collected ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {stdout}"));
    assert!(collected > 0, "{stdout}");
    assert!(stdout.contains("in order: true"), "{stdout}");
    assert!(jobs(registry).contains("no job is running"));
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("program") {
        program();
        return;
    }
    let name = "a_program_of_its_own_is_listed_and_stopped_as_a_job";
    common::watchdog(WATCHDOG, name);
    eprintln!("test {name} ...");
    a_program_of_its_own_is_listed_and_stopped_as_a_job();
    eprintln!("test {name} ... ok");
}
