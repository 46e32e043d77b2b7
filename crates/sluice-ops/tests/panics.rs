//! A user's function that panics on one tuple stops the job with an error naming its operator
//! under every plan. Under the processes plan, with each PE a process of its own, the job's
//! result is an error (the CLI exits non-zero), its other PEs are stopped and no shared-memory
//! segment of the job is left in `/dev/shm`.
//!
//! The processes test runs itself again as a child process that launches the job (as the CLI
//! would) and reports its result on standard error; the launcher starts every PE by running
//! the child's command again, so each PE runs this same test and becomes its PE.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use sluice_graph::Graph;
use sluice_ops::{Collect, Collected, Dataflow, IterSource};
use sluice_plan::{plan, PlanOptions, PlanRequest};
use sluice_runtime::{run, RunOptions};

use common::{drain, every_plan, run_in_process, Watchdog};

/// Set in the child: it launches the job.
const CHILD: &str = "SLUICE_TEST_PANICS_CHILD";
/// The tuple the user's function cannot take.
const CURSED: u64 = 5_000;
/// Tuples the source emits: well beyond the cursed one, so the panic comes mid-stream.
const TUPLES: u64 = 200_000;

/// numbers -> explode (a map panicking on [`CURSED`]) -> sink.
fn panicking_job(name: &str, into: Collected<u64>) -> Graph {
    let flow = Dataflow::new(name);
    flow.source("numbers", |_| IterSource::new(0..TUPLES))
        .map("explode", |x: &u64| {
            assert!(*x != CURSED, "tuple {x} is cursed");
            *x
        })
        .sink("sink", move |_| Collect::new(into.clone()));
    flow.build().unwrap()
}

/// The names in `/dev/shm` of the segments of job `job` run by the process `pid`.
fn segments_of(job: &str, pid: u32) -> Vec<String> {
    let prefix = format!("sluice-{job}_2d{pid}_2d");
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Asserts that `error` names the operator and the panic.
fn assert_names_the_panic(error: &str, what: &str) {
    assert!(error.contains("'explode"), "{what}: {error}");
    assert!(error.contains("tuple 5000 is cursed"), "{what}: {error}");
}

#[test]
fn a_panicking_map_fails_the_job_naming_it_under_every_plan() {
    for request in every_plan() {
        let into: Collected<u64> = Default::default();
        let graph = panicking_job("panicking-threads", into.clone());
        let error = run_in_process(&graph, &request).unwrap_err().to_string();
        assert_names_the_panic(&error, &format!("{request:?}"));
        // Nothing past the cursed tuple was taken for a result.
        assert!(drain(&into).iter().all(|x| *x < CURSED), "{request:?}");
    }
    assert_eq!(
        segments_of("panicking_2dthreads", std::process::id()),
        Vec::<String>::new()
    );
}

/// The child: launches the job as one process per PE and exits as the CLI does, 1 with the
/// error on standard error when the job fails.
fn launch_the_job() -> ! {
    let graph = panicking_job("panicking", Default::default());
    let physical = plan(&graph, &PlanRequest::Processes, &PlanOptions::default()).unwrap();
    match run(&graph, &physical, &RunOptions::default()) {
        Ok(_) => {
            eprintln!("the job succeeded");
            std::process::exit(0)
        }
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(1)
        }
    }
}

#[test]
fn a_panicking_map_in_a_pe_process_fails_the_job_and_leaves_no_segment() {
    if std::env::var_os(CHILD).is_some() {
        launch_the_job();
    }
    let _watchdog = Watchdog::arm("panicking PE", Duration::from_secs(120));
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_panicking_map_in_a_pe_process_fails_the_job_and_leaves_no_segment",
        ])
        .args(["--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let launcher = child.id();
    let child = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert_eq!(child.status.code(), Some(1), "{stderr}");
    let error = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error reported: {stderr}"));
    assert_names_the_panic(error, "processes");
    // The root cause comes first, whatever its neighbours reported.
    assert!(
        error.starts_with("error: PE 'explode': operator 'explode' failed: panicked: tuple"),
        "{stderr}"
    );
    assert_eq!(segments_of("panicking", launcher), Vec::<String>::new());
}
