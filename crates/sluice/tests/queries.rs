//! Golden tests of `sluice query`: for each `tests/queries/NAME.scsql` that has an expected
//! output `NAME.out` or expected errors `NAME.err` beside it, runs
//! `sluice query tests/queries/NAME.scsql` (from this crate's directory, so the file's name in
//! a diagnostic is that relative path) and compares its standard output with `NAME.out`; where
//! `NAME.err` exists the run must fail and its standard error must equal `NAME.err`.
//!
//! - Extra arguments come from a first line `-- args: ARG ARG ...` (split at spaces, no
//!   quoting), e.g. `-- args: --limit 5`.
//! - Every query runs with `SLUICE_FILENAMES` naming `grep_table.txt`, the table the paper's
//!   `filename(i)` reads: 1000 lines naming two small files under `grep/`, each with one line
//!   holding "pattern" (the same line, so the merge's order of the 1000 greps cannot change
//!   what is printed).
//! - `BLESS=1 cargo test -p sluice --test queries` rewrites the expected files that exist from
//!   what the runs print; to add a case, create its `.out` (or `.err`) empty and bless it, then
//!   read what it says.
//! - A query file without either is not run; [`every_paper_query_has_its_expected_output`]
//!   names the paper's queries that still lack one.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where the query files are, from this crate's directory (where `cargo test` runs tests).
const DIR: &str = "tests/queries";

/// The paper's queries, each of which must have its expected output.
const PAPER: [&str; 10] = [
    "paper_grep",
    "paper_radix2",
    "paper_p2p_bandwidth",
    "paper_merge_bandwidth",
    "paper_query1",
    "paper_query2",
    "paper_query3",
    "paper_query4",
    "paper_query5",
    "paper_query6",
];

/// Longer than any query here takes, short enough to end a hang.
const WATCHDOG: Duration = Duration::from_secs(120);

/// One query file and its expected files (those that exist).
struct Case {
    name: String,
    query: PathBuf,
    out: Option<PathBuf>,
    err: Option<PathBuf>,
}

/// The query files of [`DIR`], by name.
fn cases() -> Vec<Case> {
    let mut cases: Vec<Case> = std::fs::read_dir(DIR)
        .expect("the query directory")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "scsql"))
        .map(|query| {
            let existing = |ext| Some(query.with_extension(ext)).filter(|path| path.exists());
            Case {
                name: query.file_stem().unwrap().to_string_lossy().into_owned(),
                out: existing("out"),
                err: existing("err"),
                query,
            }
        })
        .collect();
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    cases
}

/// The arguments of a first line `-- args: ...`.
fn extra_args(text: &str) -> Vec<String> {
    text.lines()
        .next()
        .and_then(|line| line.strip_prefix("-- args:"))
        .map(|args| args.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}

/// What a run printed, and whether it succeeded.
struct Run {
    success: bool,
    stdout: String,
    stderr: String,
}

/// Runs `sluice query FILE ARGS`, killing it after [`WATCHDOG`].
fn run_query(query: &Path, args: &[String]) -> Run {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .env("SLUICE_FILENAMES", Path::new(DIR).join("grep_table.txt"))
        .arg("query")
        .arg(query)
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("sluice runs");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > WATCHDOG {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{}: still running after {WATCHDOG:?}", query.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |path| String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned();
    Run {
        success: status.success(),
        stdout: read(&out),
        stderr: read(&err),
    }
}

/// Compares `actual` with the file `expected` (or, blessing, writes it); the mismatch, if any.
fn compare(expected: &Path, actual: &str, bless: bool) -> Option<String> {
    if bless {
        std::fs::write(expected, actual).unwrap();
        return None;
    }
    let wanted = std::fs::read_to_string(expected).unwrap();
    (wanted != actual).then(|| {
        format!(
            "{} differs:\n--- expected\n{wanted}--- actual\n{actual}---",
            expected.display()
        )
    })
}

#[test]
fn queries_print_their_expected_output() {
    let bless = std::env::var_os("BLESS").is_some_and(|v| v == "1");
    let mut failures = Vec::new();
    let mut run = 0;
    for case in cases() {
        if case.out.is_none() && case.err.is_none() {
            eprintln!("{}: no .out nor .err, not run", case.name);
            continue;
        }
        run += 1;
        let text = std::fs::read_to_string(&case.query).unwrap();
        let result = run_query(&case.query, &extra_args(&text));
        let expect_failure = case.err.is_some();
        if result.success == expect_failure {
            failures.push(format!(
                "{}: {} where {} was expected\nstdout:\n{}stderr:\n{}",
                case.name,
                if result.success {
                    "succeeded"
                } else {
                    "failed"
                },
                if expect_failure { "failure" } else { "success" },
                result.stdout,
                result.stderr
            ));
            continue;
        }
        if let Some(out) = &case.out {
            failures.extend(compare(out, &result.stdout, bless));
        }
        if let Some(err) = &case.err {
            failures.extend(compare(err, &result.stderr, bless));
        }
    }
    eprintln!("{run} queries run");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_paper_query_has_its_expected_output() {
    let missing: Vec<&str> = PAPER
        .into_iter()
        .filter(|name| !Path::new(DIR).join(format!("{name}.out")).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "the paper's queries without an expected output ({DIR}/NAME.out): {missing:?}"
    );
}

#[test]
fn the_paper_queries_are_all_here_and_args_lines_are_read() {
    let names: Vec<String> = cases().into_iter().map(|case| case.name).collect();
    for name in PAPER {
        assert!(
            names.iter().any(|n| n == name),
            "{DIR}/{name}.scsql is missing"
        );
    }
    assert_eq!(
        extra_args("-- args: --limit 5  -x\nselect 1;"),
        ["--limit", "5", "-x"]
    );
    assert!(extra_args("select 1;\n-- args: --limit 5").is_empty());
}
