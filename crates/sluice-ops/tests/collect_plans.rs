//! `collect()` under every plan: a program built with the fluent API gets the same results
//! back whether its sinks run in its own threads (fused, threaded) or in PE processes (the
//! processes plan, its PEs reaching it over a Unix socket or over TCP, with checkpoints too,
//! whose every checkpoint hands over what the sink collected so far), and a job whose
//! results outgrow `RunOptions::collect_limit` fails naming the limit and the size.
//!
//! The binary has its own `main` (no test harness): a process started as a PE builds the
//! graph its first argument names ([`RunOptions::pe_args`]) and serves its PE; the launching
//! process runs the cases.

use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use sluice_graph::Graph;
use sluice_ops::{collected, Collected, Dataflow, Generator};
use sluice_plan::{plan, LauncherSpec, PlanOptions, PlanRequest};
use sluice_runtime::{is_pe_process, run, serve_pe, CheckpointOptions, RunError, RunOptions};

/// The longest the cases may take together before this binary calls it a hang.
const WATCHDOG: Duration = Duration::from_secs(240);
/// How many numbers the job reads.
const NUMBERS: u64 = 20_000;
/// The keys the numbers are counted by.
const KEYS: u64 = 7;

/// `numbers -> tripled -> (key 3n % 7, count) -> counts`, the count over two instances so
/// that the sink's input is spread; the handle the counts are collected in.
fn graph() -> (Graph, Collected<(u64, u64)>) {
    let flow = Dataflow::new("collect-plans");
    let counts = flow
        .source_of("numbers", |_| Generator::new(Some).count(NUMBERS))
        .map("tripled", |n: &u64| ((n * 3) % KEYS, n * 3))
        .key_by(|(key, _): &(u64, u64)| key)
        .count("count")
        .parallelism(2)
        .collect("counts");
    (flow.build().unwrap(), counts)
}

/// Options whose PEs rebuild the graph of `case`, with `limit` on what they return.
fn options(case: &str, limit: u64) -> RunOptions {
    let args: &'static [OsString] = Box::leak(Box::new([OsString::from(case)]));
    RunOptions {
        pe_args: Some(args),
        collect_limit: limit,
        ..RunOptions::default()
    }
}

/// How the job is run beside its plan.
#[derive(Clone, Copy, PartialEq)]
enum Way {
    /// As the plan says.
    Plain,
    /// Its PEs reach the launcher over TCP on the loopback.
    Tcp,
    /// It takes a checkpoint every few milliseconds.
    Checkpointed,
}

/// Runs the job under `request`, `way`, and returns what `collect()` got, sorted
/// (instances run in any order).
fn collect_under(request: &PlanRequest, way: Way, limit: u64) -> Result<Vec<(u64, u64)>, RunError> {
    let (graph, counts) = graph();
    let planning = PlanOptions {
        checkpointed: way == Way::Checkpointed,
        ..PlanOptions::default()
    };
    let mut p = plan(&graph, request, &planning).unwrap();
    let mut options = options("collect", limit);
    match way {
        Way::Plain => {}
        Way::Tcp => {
            p.launcher = Some(LauncherSpec {
                address: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            })
        }
        Way::Checkpointed => {
            let dir = tempfile::tempdir().unwrap().keep();
            let dir: &'static std::path::Path = Box::leak(dir.into_boxed_path());
            options.checkpoints = Some(CheckpointOptions::new(Duration::from_millis(5), dir));
        }
    }
    let ran = run(&graph, &p, &options);
    if let Some(checkpoints) = options.checkpoints {
        let _ = std::fs::remove_dir_all(checkpoints.dir);
    }
    ran?;
    let mut got = collected(&counts);
    got.sort_unstable();
    Ok(got)
}

fn every_plan_collects_the_same_results() {
    let limit = sluice_runtime::DEFAULT_COLLECT_LIMIT;
    let fused = collect_under(&PlanRequest::Fused, Way::Plain, limit).unwrap();
    // Every update of every key's count: as many as numbers, each count from 1 up.
    assert_eq!(fused.len() as u64, NUMBERS);
    assert_eq!(
        fused.iter().filter(|(_, count)| *count == 1).count() as u64,
        KEYS
    );
    let threaded = collect_under(&PlanRequest::Threaded, Way::Plain, limit).unwrap();
    assert_eq!(threaded, fused, "threaded");
    let processes = collect_under(&PlanRequest::Processes, Way::Plain, limit).unwrap();
    assert_eq!(processes, fused, "processes");
    let over_tcp = collect_under(&PlanRequest::Processes, Way::Tcp, limit).unwrap();
    assert_eq!(over_tcp, fused, "processes over TCP control links");
    let checkpointed = collect_under(&PlanRequest::Processes, Way::Checkpointed, limit).unwrap();
    assert_eq!(checkpointed, fused, "processes taking checkpoints");
}

fn results_past_the_limit_fail_the_job_naming_it() {
    // Each (key, count) encodes in at least 2 bytes (varints): 20,000 are 40,000 bytes or more.
    let Err(error) = collect_under(&PlanRequest::Processes, Way::Plain, 10_000) else {
        panic!("the job returned its results past the limit");
    };
    assert!(
        matches!(error, RunError::ResultsTooLarge { limit: 10_000, size, .. } if size > 10_000),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("sink 'counts'")
            && message.contains("limit of 10000 bytes")
            && message.contains("collect_limit"),
        "{message}"
    );
}

fn main() {
    if is_pe_process() {
        // The PE entry: this process is one PE of a job a case below started.
        let case = std::env::args()
            .nth(1)
            .expect("the launcher names the case");
        serve_pe(&graph().0, &options(&case, 0));
    }
    std::thread::spawn(|| {
        std::thread::sleep(WATCHDOG);
        eprintln!("the collect tests hung for {WATCHDOG:?}");
        std::process::exit(2);
    });
    let cases: [(&str, fn()); 2] = [
        (
            "every_plan_collects_the_same_results",
            every_plan_collects_the_same_results,
        ),
        (
            "results_past_the_limit_fail_the_job_naming_it",
            results_past_the_limit_fail_the_job_naming_it,
        ),
    ];
    for (name, case) in cases {
        eprintln!("test {name} ...");
        case();
        eprintln!("test {name} ... ok");
    }
}
