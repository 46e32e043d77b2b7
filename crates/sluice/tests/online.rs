//! `sluice run APP --hosts FILE --online-placement`: the job, started on the naive placement
//! (a process per instance, dealt over two hosts in turn), is redeployed on the scheduler's
//! while it runs, as processes joined by TCP between the hosts (two loopback addresses) and
//! shared memory within one; every tuple arrives exactly once and every key's state survives.

mod common;

use common::{direct_counts, stderr, stdout, wordcount_logged, write_wordcount_input};

/// Two hosts of two slots on this machine, at two loopback addresses.
fn two_hosts(dir: &std::path::Path) -> std::path::PathBuf {
    let hosts = dir.join("hosts.toml");
    let text: String = (1..=2)
        .map(|i| format!("[[host]]\nname = \"h{i}\"\naddress = \"127.0.0.{i}\"\ncores = 2\n"))
        .collect();
    std::fs::write(&hosts, text).unwrap();
    hosts
}

const ONLINE: [&str; 5] = [
    "--online-placement",
    "--rebalance-every",
    "0.4",
    "--rebalance-threshold",
    "0.05",
];

#[test]
fn wordcount_redeployed_while_it_reads_counts_every_word_once() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = two_hosts(dir.path());
    let input = dir.path().join("book.txt");
    write_wordcount_input(&input, 6_000);
    let mut args = vec![
        "--hosts",
        hosts.to_str().unwrap(),
        "--rate",
        "3000",
        "--throttle-input",
    ];
    args.extend(ONLINE);
    // A chain of four processes dealt over two hosts in turn: every edge crosses, and the
    // scheduler's placement cuts only the lightest (sentences -> split).
    let (counts, log) = wordcount_logged(dir.path(), &input, "processes", &args);
    assert!(log.contains("redeployed at"), "{log}");
    assert_eq!(
        counts,
        direct_counts(&std::fs::read_to_string(&input).unwrap())
    );
}

#[test]
fn sol_redeployed_loses_and_repeats_no_tuple() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = two_hosts(dir.path());
    let mut args = vec![
        "run",
        "sol",
        "--plan",
        "processes",
        "--hosts",
        hosts.to_str().unwrap(),
        "--set",
        "parallelism=1",
        "--set",
        "levels=3",
        "--rate",
        "5000",
        "--duration",
        "3",
    ];
    args.extend(ONLINE);
    let o = common::sluice(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("redeployed at"), "{}", stderr(&o));
    assert!(stdout(&o).contains("integrity: ok"), "{}", stdout(&o));
}

#[test]
fn a_source_that_cannot_resume_is_refused_at_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = two_hosts(dir.path());
    let mut args = vec![
        "run",
        "relay",
        "--plan",
        "processes",
        "--hosts",
        hosts.to_str().unwrap(),
        "--duration",
        "1",
    ];
    args.extend(ONLINE);
    let o = common::sluice(&args);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("cannot resume"), "{}", stderr(&o));
}

#[test]
fn the_redeploy_benchmark_measures_the_pause_beside_a_cold_start_and_checks_every_tuple() {
    let o = common::sluice(&[
        "bench",
        "redeploy",
        "--apps",
        "sol",
        "--set",
        "parallelism=1",
        "--set",
        "levels=3",
        "--rate",
        "2000",
        "--run-for",
        "0.3",
        "--repeat",
        "1",
        "--warmup",
        "0",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let result: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(result["bench"], "redeploy", "{result}");
    assert_eq!(result["app"], "sol");
    assert_eq!(result["intact"], 1);
    let run = &result["runs"][0];
    assert!(
        run["check"].as_str().unwrap().starts_with("integrity: ok"),
        "{result}"
    );
    let seconds = |v: &serde_json::Value| v.as_f64().unwrap();
    assert!(
        seconds(&run["pause_s"]) >= seconds(&run["drain_s"]),
        "{result}"
    );
    assert!(seconds(&run["cold_start_s"]) > 0.0, "{result}");
    assert!(seconds(&result["pause_over_cold_start"]) > 0.0, "{result}");
    assert!(run["state_bytes"].as_u64().unwrap() > 0, "{result}");
    for source_sent in run["emitted"].as_array().unwrap() {
        assert!(source_sent.as_u64().unwrap() > 0, "{result}");
    }

    let o = common::sluice(&["bench", "redeploy", "--apps", "relay"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--apps takes sol, wordcount"),
        "{}",
        stderr(&o)
    );
}
