//! The book's getting-started program (`examples/getting-started/src/main.rs`, compiled into
//! this binary as it is, the file the book shows) prints the same totals under the fused,
//! threaded and processes plans, the totals a direct computation gives, and `sluice jobs`
//! lists it under each plan while it runs.
//!
//! The binary has its own `main` (no test harness): started with `GETTING_STARTED_PROGRAM`
//! set it is the user's program (and, re-executed by its launcher, each of its PEs), its
//! argument the plan; without, it runs the case, which starts it as a child per plan. The
//! case keeps its own registry (its own `XDG_RUNTIME_DIR`), so jobs of other tests or users
//! never show.

use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

mod common;

use common::{finish, jobs_in as jobs, Program};

#[path = "../../../examples/getting-started/src/main.rs"]
mod program;

/// Set in the environment of the program this binary starts as a child (and its PEs).
const PROGRAM_VARIABLE: &str = "GETTING_STARTED_PROGRAM";
/// Generous bound on the wait for the listing (a hang, not a slow machine, should trip it).
const PATIENCE: Duration = Duration::from_secs(60);
/// The longest the whole case may take before this binary calls it a hang.
const WATCHDOG: Duration = Duration::from_secs(300);

/// What the program prints, computed directly: readings `n` of 0..3000 from sensor `n % 4`,
/// those whose value is a multiple of 10 dropped, summed per sensor.
fn expected() -> String {
    let valid = (0..3000u64).filter(|n| !n.is_multiple_of(10));
    let mut out = format!("{} valid readings\n", valid.clone().count());
    for sensor in 0..4 {
        let total: u64 = valid.clone().filter(|n| n % 4 == sensor).sum();
        out.push_str(&format!("sensor {sensor}: {total}\n"));
    }
    out
}

/// Runs the program under `plan` in a registry of its own, waits until `sluice jobs` lists
/// it, and returns what it printed.
fn run_listed(plan: &str) -> String {
    let registry = tempfile::tempdir().unwrap();
    std::fs::set_permissions(registry.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let registry = registry.path();
    let mut program = Program(Some(
        Command::new(std::env::current_exe().unwrap())
            .arg(plan)
            .env(PROGRAM_VARIABLE, "1")
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
        if let Some(row) = listing.lines().find(|l| l.starts_with("getting-started-")) {
            break row.to_string();
        }
        assert!(
            began.elapsed() < PATIENCE,
            "{plan}: never listed: {listing}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let columns: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(columns[0], format!("getting-started-{pid}"), "{row}");
    assert_eq!(&columns[1..3], ["getting-started", plan], "{row}");

    let o = finish(program.0.take().expect("the program runs"));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{plan}: {stderr}");
    assert!(jobs(registry).contains("no job is running"));
    String::from_utf8(o.stdout).unwrap()
}

fn the_getting_started_program_gives_the_same_totals_under_every_plan_and_is_listed() {
    let expected = expected();
    for plan in ["fused", "threaded", "processes"] {
        assert_eq!(run_listed(plan), expected, "under the {plan} plan");
    }
}

fn main() {
    if std::env::var_os(PROGRAM_VARIABLE).is_some() {
        if let Err(e) = program::main() {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
        return;
    }
    let name = "the_getting_started_program_gives_the_same_totals_under_every_plan_and_is_listed";
    common::watchdog(WATCHDOG, name);
    eprintln!("test {name} ...");
    the_getting_started_program_gives_the_same_totals_under_every_plan_and_is_listed();
    eprintln!("test {name} ... ok");
}
