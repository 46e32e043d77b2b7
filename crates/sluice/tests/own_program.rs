//! A program of the user's own, written against the library as the book shows (the fluent
//! API, `collect()`, `sluice_runtime::run` with a processes plan), is a job like the
//! built-in applications: `sluice jobs` lists it while it runs and `sluice stop` drains it,
//! on the real binaries, and what it collected comes back to it from its PE processes. The
//! book's getting-started program (`examples/getting-started/src/main.rs`, compiled into this
//! binary as it is, the file the book shows) prints the same totals under the fused, threaded
//! and processes plans, the totals a direct computation gives, and is listed under each.
//!
//! The binary has its own `main` (no test harness): run with the argument `program` it is
//! the first user's program, and with `GETTING_STARTED_PROGRAM` set the getting-started one
//! (its argument the plan), each also, re-executed by its launcher, each of its PEs; without
//! either, it runs the cases, which start the programs as children. Each case keeps its own
//! registry (its own `XDG_RUNTIME_DIR`), so jobs of other tests or users never show.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

mod common;

use common::watch::{have_tmux, private_registry, until, Terminal, Ui};
use common::{finish, http_get, jobs_in as jobs, stop_in, Program};
use sluice_graph::Graph;
use sluice_ops::{collected, Collected, Dataflow, Generator};
use sluice_plan::{plan, PlanOptions, PlanRequest};
use sluice_runtime::{is_pe_process, serve_pe, RunOptions};

#[path = "../../../examples/getting-started/src/main.rs"]
mod getting_started;

/// Generous bound on the wait for the listing (a hang, not a slow machine, should trip it).
const PATIENCE: Duration = Duration::from_secs(60);
/// The longest the cases may take together before this binary calls it a hang.
const WATCHDOG: Duration = Duration::from_secs(420);
/// Set in the environment of the getting-started program this binary starts (and its PEs).
const GETTING_STARTED: &str = "GETTING_STARTED_PROGRAM";

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

/// This binary as a program (`args`, and `GETTING_STARTED` set when `getting_started`) in
/// `registry`, its output piped.
fn program_in(registry: &Path, args: &[&str], getting_started: bool) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.args(args).env("XDG_RUNTIME_DIR", registry);
    if getting_started {
        command.env(GETTING_STARTED, "1");
    }
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    command
}

/// Starts `command`, for the watchdog to kill if the case hangs.
fn start(mut command: Command) -> Program {
    let child = command.spawn().unwrap();
    // SYNC: see `WATCHED`.
    common::WATCHED.store(child.id(), Ordering::Relaxed);
    Program(Some(child))
}

/// Starts this binary as a program in `registry` (see [`program_in`]).
fn start_in(registry: &Path, args: &[&str], getting_started: bool) -> Program {
    start(program_in(registry, args, getting_started))
}

/// The row `sluice jobs` lists in `registry` for the job of `program`, named `name`, once it
/// is there; its columns checked to be `name-PID`, `name` and `plan`.
fn listed(registry: &Path, program: &Program, name: &str, plan: &str) -> String {
    let pid = program.0.as_ref().map_or(0, Child::id);
    let began = Instant::now();
    let row = loop {
        let listing = jobs(registry);
        if let Some(row) = listing.lines().find(|l| l.starts_with(&format!("{name}-"))) {
            break row.to_string();
        }
        assert!(
            began.elapsed() < PATIENCE,
            "{name} ({plan}): never listed: {listing}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let columns: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(columns[0], format!("{name}-{pid}"), "{row}");
    assert_eq!(&columns[1..3], [name, plan], "{row}");
    row
}

fn a_program_of_its_own_is_listed_and_stopped_as_a_job() {
    let registry = private_registry();
    let registry = registry.path();
    let mut program = start_in(registry, &["program"], false);
    let row = listed(registry, &program, "own-program", "processes");
    let columns: Vec<&str> = row.split_whitespace().collect();
    let id = columns[0];
    assert_eq!(columns[3], "3", "{row}");

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

/// What the getting-started program prints, computed directly: readings `n` of 0..3000 from
/// sensor `n % 4`, those whose value is a multiple of 10 dropped, summed per sensor.
fn getting_started_totals() -> String {
    let valid = (0..3000u64).filter(|n| !n.is_multiple_of(10));
    let mut out = format!("{} valid readings\n", valid.clone().count());
    for sensor in 0..4 {
        let total: u64 = valid.clone().filter(|n| n % 4 == sensor).sum();
        out.push_str(&format!("sensor {sensor}: {total}\n"));
    }
    out
}

fn the_getting_started_program_gives_the_same_totals_under_every_plan_and_is_listed() {
    let expected = getting_started_totals();
    for plan in ["fused", "threaded", "processes"] {
        let registry = private_registry();
        let registry = registry.path();
        let mut program = start_in(registry, &[plan], true);
        listed(registry, &program, "getting-started", plan);
        let o = finish(program.0.take().expect("the program runs"));
        assert!(
            o.status.success(),
            "{plan}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            expected,
            "under the {plan} plan"
        );
        assert!(jobs(registry).contains("no job is running"));
    }
}

/// How many readings the getting-started program is given to be watched and stopped: ten
/// minutes' worth, so that it is stopped long before its source ends.
const READINGS_TO_STOP: &str = "600000";

/// The book's "Watch it": the getting-started program, under the processes plan and then the
/// threaded one, is watched by `sluice top` and by `sluice ui` (the REST API, the job's page,
/// its figures live, and the host's Prometheus `/metrics`), then stopped by `sluice stop` (processes) or by `POST
/// /jobs/ID/stop` (threaded); it prints its totals so far, and `sluice ui` lists it stopped.
fn the_getting_started_program_is_watched_by_top_and_the_web_page_and_stopped_by_either() {
    if !have_tmux() {
        sluice_skip::skip("tmux is not installed (the CI installs it)");
        return;
    }
    let registry = private_registry();
    let registry = registry.path();
    let ui = Ui::start(registry, "127.0.0.1:0", None);
    for (plan, by_post) in [("processes", false), ("threaded", true)] {
        let mut program = start_in(registry, &[plan, READINGS_TO_STOP], true);
        let row = listed(registry, &program, "getting-started", plan);
        let columns: Vec<&str> = row.split_whitespace().collect();
        let (id, pes) = (columns[0], columns[3].parse().unwrap());
        assert_eq!(ui.running_job(pes), id, "{plan}");

        let (status, page) = http_get(&ui.address, &format!("/jobs/{id}/"));
        assert!(status.contains(" 200 "), "{plan}: {status}");
        assert!(page.starts_with("<!doctype html>"), "{plan}: {page}");
        let (_, figures) = http_get(&ui.address, &format!("/jobs/{id}/snapshot.json"));
        let figures: serde_json::Value = serde_json::from_str(&figures).unwrap();
        assert_eq!(figures["state"], "running", "{plan}: {figures}");
        assert_eq!(figures["stoppable"], true, "{plan}: {figures}");
        assert_eq!(figures["snapshot"]["job"], "getting-started", "{figures}");
        // Its live metrics at the host's one scrape target, labelled with its id.
        let (_, scraped) = http_get(&ui.address, "/metrics");
        let id_label = format!("id=\"{id}\"");
        assert!(
            scraped
                .lines()
                .any(|l| l.starts_with("sluice_tuples_out_total{")
                    && l.contains(&id_label)
                    && l.contains("operator=\"readings\"")),
            "{plan}: {scraped}"
        );

        let top = Terminal::top(registry, id, &format!("own-{plan}"));
        let screen = top.rate_shown("valid");
        assert!(screen.contains("readings"), "{plan}: {screen}");
        top.quit();

        let running = program.0.take().expect("the program runs");
        let o = if by_post {
            ui.stop_by_post(id, running)
        } else {
            stop_in(registry, id);
            finish(running)
        };
        let (stdout, stderr) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        assert!(o.status.success(), "{plan}: {stderr}");
        assert!(
            stdout.contains(" valid readings\nsensor 0: "),
            "{plan}: {stdout}"
        );
        let ended = ui.listed(Some(id)).expect("the ended job is listed");
        assert_eq!(ended["status"], "STOPPED", "{plan}: {ended}");
    }
}

/// The getting-started program reads its run options as `sluice run` does: a configuration
/// file (`SLUICE_CONFIG`) whose `collect-limit` is smaller than its results fails it under the
/// processes plan, naming the limit; a `SLUICE_COLLECT_LIMIT` variable wins over the file, and
/// the program then prints its totals. (`sluice run`'s own keys in the file are left to it.)
fn the_getting_started_program_reads_the_variables_and_the_file_sluice_run_reads() {
    let registry = private_registry();
    let registry = registry.path();
    let file = registry.join("sluice.toml");
    std::fs::write(&file, "rate = 10\ncollect-limit = 64\n[set]\nwords = 3\n").unwrap();
    let run = |limit: Option<&str>| {
        let mut command = program_in(registry, &["processes"], true);
        command.env("SLUICE_CONFIG", &file);
        if let Some(limit) = limit {
            command.env("SLUICE_COLLECT_LIMIT", limit);
        }
        finish(start(command).0.take().expect("the program runs"))
    };
    let refused = run(None);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains("past the limit of 64 bytes") && stderr.contains("collect-limit"),
        "{stderr}"
    );
    let o = run(Some("100000000"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), getting_started_totals());
}

/// The book's "Watch it" on a terminal: the getting-started program shows its progress (its
/// sources' and sinks' rates) while it runs and, stopped by `sluice stop`, prints its totals
/// so far and says that its output is partial.
fn the_getting_started_program_shows_its_progress_and_says_a_stop_cut_it_short() {
    if !have_tmux() {
        sluice_skip::skip("tmux is not installed (the CI installs it)");
        return;
    }
    let registry = private_registry();
    let registry = registry.path();
    let command = format!(
        "env XDG_RUNTIME_DIR='{}' {GETTING_STARTED}=1 '{}' processes {READINGS_TO_STOP}",
        registry.display(),
        std::env::current_exe().unwrap().display()
    );
    let terminal = Terminal::start(&command, "own-progress");
    let screen = terminal.shown("/s, sinks ");
    assert!(screen.contains(" s: sources "), "{screen}");
    let id = until("the program listed", || {
        let listing = jobs(registry);
        let row = listing
            .lines()
            .find(|l| l.starts_with("getting-started-"))?;
        Some(row.split_whitespace().next()?.to_string())
    });
    stop_in(registry, &id);
    terminal.ended();
    let screen = terminal.screen().unwrap_or_default();
    assert!(screen.contains("the output is partial"), "{screen}");
    assert!(screen.contains(" valid readings"), "{screen}");
}

fn main() {
    if std::env::var_os(GETTING_STARTED).is_some() {
        if let Err(e) = getting_started::main() {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
        return;
    }
    if std::env::args().nth(1).as_deref() == Some("program") {
        program();
        return;
    }
    common::watchdog(WATCHDOG, "own_program");
    let cases: [(&str, fn()); 5] = [
        (
            "a_program_of_its_own_is_listed_and_stopped_as_a_job",
            a_program_of_its_own_is_listed_and_stopped_as_a_job,
        ),
        (
            "the_getting_started_program_gives_the_same_totals_under_every_plan_and_is_listed",
            the_getting_started_program_gives_the_same_totals_under_every_plan_and_is_listed,
        ),
        (
            "the_getting_started_program_is_watched_by_top_and_the_web_page_and_stopped_by_either",
            the_getting_started_program_is_watched_by_top_and_the_web_page_and_stopped_by_either,
        ),
        (
            "the_getting_started_program_reads_the_variables_and_the_file_sluice_run_reads",
            the_getting_started_program_reads_the_variables_and_the_file_sluice_run_reads,
        ),
        (
            "the_getting_started_program_shows_its_progress_and_says_a_stop_cut_it_short",
            the_getting_started_program_shows_its_progress_and_says_a_stop_cut_it_short,
        ),
    ];
    for (name, case) in cases {
        eprintln!("test {name} ...");
        case();
        eprintln!("test {name} ... ok");
    }
}
