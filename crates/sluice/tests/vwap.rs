//! VWAP through `sluice run` under plans of several processes: its bargains are those of the
//! direct computation (the in-process plans are tested in `sluice-apps`), and it leaves no
//! shared memory behind.

use std::path::Path;
use std::process::Command;

use sluice_apps::vwap::{direct, sink, VwapSettings};
use sluice_apps::Settings;

/// Runs VWAP with `settings` (`records` among them) under `plan`; returns its bargains sorted
/// by the quote's position in the feed.
fn run(dir: &Path, plan: &str, settings: &[&str]) -> Vec<String> {
    let output = dir.join(format!("{plan}.tsv"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    // The records end the run, not the default 5 s, which a loaded machine may need more than
    // (the run would say its output is partial).
    command.args([
        "run",
        "vwap",
        "--duration",
        "600",
        "--plan",
        plan,
        "--output",
    ]);
    command.arg(&output);
    for setting in settings {
        command.args(["--set", setting]);
    }
    let o = command.output().unwrap();
    assert!(
        o.status.success(),
        "{plan}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let summary = String::from_utf8_lossy(&o.stdout);
    assert!(!summary.contains("partial"), "{plan}: {summary}");
    sink::in_feed_order(&std::fs::read_to_string(&output).unwrap())
}

fn expected(settings: &[&str]) -> Vec<String> {
    let parsed = Settings::parse(settings.iter().copied()).unwrap();
    let s = VwapSettings::from_settings(&parsed).unwrap();
    direct::bargains(&s, s.records.unwrap())
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn vwap_bargains_are_the_direct_computations_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    for (plan, settings) in [
        // A PE per operator: 16 processes.
        ("processes", &["groups=3", "records=20000", "seed=5"][..]),
        // The shipped plan: 82 groups in two processes.
        ("two-processes", &["records=20000", "seed=6"][..]),
    ] {
        let expected = expected(settings);
        assert!(expected.len() > 1000, "{} bargains", expected.len());
        assert_eq!(run(dir.path(), plan, settings), expected, "{plan}");
    }
    // Segments are named after the job (`sluice-vwap_2d<launcher pid>...`); no other test
    // runs VWAP.
    let left: Vec<_> = std::fs::read_dir("/dev/shm")
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        !left
            .iter()
            .any(|n| n.to_string_lossy().starts_with("sluice-vwap_2d")),
        "{left:?}"
    );
}

#[test]
fn vwaps_replicated_filters_keep_every_symbols_order_and_the_bargains() {
    // The filters declare themselves replicable by symbol: run each with more instances, on
    // threads of their own, and the bargains are still the direct computation's.
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("replicated.toml");
    std::fs::write(
        &plan,
        r#"
[[thread]]
name = "feed"
operators = ["taq", "clock", "route"]

[[thread]]
name = "filters"
operators = ["trades-0[0]", "quotes-0[0]"]

[[thread]]
name = "more-filters"
operators = ["trades-0[1]", "quotes-0[1]", "quotes-0[2]"]

[[thread]]
name = "rest"
operators = ["vwap-0", "match-0", "bargains"]

[[replicate]]
operator = "trades-0"
parallelism = 2

[[replicate]]
operator = "quotes-0"
parallelism = 3
"#,
    )
    .unwrap();
    let settings = ["groups=1", "records=30000", "seed=7"];
    let expected = expected(&settings);
    assert!(expected.len() > 1000, "{} bargains", expected.len());
    assert_eq!(run(dir.path(), plan.to_str().unwrap(), &settings), expected);
}
