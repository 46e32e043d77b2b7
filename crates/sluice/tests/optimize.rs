//! `sluice plan --optimize placement|fusion|replication`: the plan files they write run as
//! they are and give the application's output; on several hosts placement cuts less traffic
//! than round robin, and from a profile it weighs each edge with the tuples the run counted.

mod common;

use common::{direct_counts, sluice, stderr, wordcount, write_wordcount_input};

#[test]
fn the_placement_plan_runs_wordcount_with_the_same_counts() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("placed.toml");
    let o = sluice(&[
        "plan",
        "wordcount",
        "--set",
        "parallelism=2",
        "--optimize",
        "placement",
        "--output",
        plan.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&plan).unwrap();
    assert!(text.contains("host = \"localhost\""), "{text}");
    let input = dir.path().join("book.txt");
    write_wordcount_input(&input, 2_000);
    let counts = wordcount(
        dir.path(),
        &input,
        plan.to_str().unwrap(),
        &["--set", "parallelism=2"],
    );
    assert_eq!(
        counts,
        direct_counts(&std::fs::read_to_string(&input).unwrap())
    );
}

#[test]
fn on_four_hosts_the_scheduler_cuts_less_traffic_than_round_robin() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts.toml");
    let text: String = (1..=4)
        .map(|i| format!("[[host]]\nname = \"n{i}\"\naddress = \"10.0.0.{i}\"\ncores = 2\n"))
        .collect();
    std::fs::write(&hosts, text).unwrap();
    let o = sluice(&[
        "plan",
        "vwap",
        "--optimize",
        "placement",
        "--hosts",
        hosts.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let percent = |name: &str| -> f64 {
        let line = stderr(&o)
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no line for {name}: {}", stderr(&o)))
            .to_string();
        let field = line[name.len()..].split_whitespace().next().unwrap();
        field.trim_end_matches('%').parse().unwrap()
    };
    assert!(
        percent("Sluice (consolidation)") < percent("round robin"),
        "{}",
        stderr(&o)
    );
    // The plan names every host, and the planner accepts it on those hosts.
    let plan_text = String::from_utf8_lossy(&o.stdout).into_owned();
    for i in 1..=4 {
        assert!(
            plan_text.contains(&format!("host = \"n{i}\"")),
            "{plan_text}"
        );
    }
    let plan = dir.path().join("placed.toml");
    std::fs::write(&plan, plan_text).unwrap();
    let o = sluice(&[
        "plan",
        "vwap",
        "--plan",
        plan.to_str().unwrap(),
        "--hosts",
        hosts.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn placement_from_a_profile_weighs_the_edges_as_the_run_counted_them() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profile.json");
    let app = ["wordcount", "--set", "parallelism=2"];
    let mut run = vec!["run"];
    run.extend_from_slice(&app);
    run.extend_from_slice(&["--plan", "threaded", "--duration", "1"]);
    run.extend_from_slice(&["--profile", profile.to_str().unwrap()]);
    let o = sluice(&run);
    assert!(o.status.success(), "{}", stderr(&o));
    // Each key-by edge carries what it carried: split's words, each where its key led.
    let text = std::fs::read_to_string(&profile).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let tuples = |name: &str, field: &str| json["instances"][name][field].as_u64().unwrap();
    let edge = |from: &str, to: &str| {
        let edges = json["edges"].as_array().unwrap();
        let found = edges.iter().find(|e| e["from"] == from && e["to"] == to);
        found.unwrap_or_else(|| panic!("no edge {from} -> {to}: {text}"))["tuples"]
            .as_u64()
            .unwrap()
    };
    let words = tuples("split", "tuples_out");
    assert!(words > 0, "{text}");
    for sum in ["sum[0]", "sum[1]"] {
        assert_eq!(edge("split", sum), tuples(sum, "tuples_in"), "{text}");
    }
    assert_eq!(edge("split", "sum[0]") + edge("split", "sum[1]"), words);

    let hosts = dir.path().join("hosts.toml");
    let text: String = (1..=2)
        .map(|i| format!("[[host]]\nname = \"n{i}\"\naddress = \"10.0.0.{i}\"\ncores = 2\n"))
        .collect();
    std::fs::write(&hosts, text).unwrap();
    let placement = |app: &[&str]| {
        let mut args = vec!["plan"];
        args.extend_from_slice(app);
        args.extend_from_slice(&[
            "--optimize",
            "placement",
            "--hosts",
            hosts.to_str().unwrap(),
        ]);
        args.extend_from_slice(&["--profile", profile.to_str().unwrap()]);
        sluice(&args)
    };
    let o = placement(&app);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("profile.json measured them"),
        "{}",
        stderr(&o)
    );
    let plan_text = common::stdout(&o);
    for host in ["n1", "n2"] {
        assert!(
            plan_text.contains(&format!("host = \"{host}\"")),
            "{plan_text}"
        );
    }
    // A profile of another application is refused, naming both.
    let o = placement(&["sol"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("profiles wordcount, not sol"),
        "{}",
        stderr(&o)
    );
}

/// `sluice run APP RUN_ONLY --profile FILE`, then `sluice plan APP --optimize OPTIMIZER
/// --profile FILE`: the plan it writes.
fn optimized(
    dir: &std::path::Path,
    app: &[&str],
    run_only: &[&str],
    optimizer: &str,
) -> std::path::PathBuf {
    let profile = dir.join("profile.json");
    let mut run = vec!["run"];
    run.extend_from_slice(app);
    run.extend_from_slice(run_only);
    run.extend_from_slice(&["--plan", "threaded", "--profile", profile.to_str().unwrap()]);
    let o = sluice(&run);
    assert!(o.status.success(), "{}", stderr(&o));
    let plan = dir.join(format!("{optimizer}.toml"));
    let mut optimize = vec!["plan"];
    optimize.extend_from_slice(app);
    optimize.extend_from_slice(&[
        "--optimize",
        optimizer,
        "--profile",
        profile.to_str().unwrap(),
        "--cores",
        "2",
        "--output",
        plan.to_str().unwrap(),
    ]);
    let o = sluice(&optimize);
    assert!(o.status.success(), "{}", stderr(&o));
    plan
}

#[test]
fn replication_gives_the_compressor_a_second_instance_and_every_byte_still_checks() {
    let dir = tempfile::tempdir().unwrap();
    let app = ["compress", "--set", "size=1000000", "--set", "packet=4096"];
    let plan = optimized(dir.path(), &app, &[], "replication");
    let text = std::fs::read_to_string(&plan).unwrap();
    assert!(
        text.contains("[[replicate]]\noperator = \"compress\"\nparallelism = 2"),
        "{text}"
    );
    let mut run = vec!["run"];
    run.extend_from_slice(&app);
    run.extend_from_slice(&["--plan", plan.to_str().unwrap(), "--duration", "120"]);
    let o = sluice(&run);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        common::stdout(&o).contains("1000000 bytes (the whole input)"),
        "{}",
        common::stdout(&o)
    );
}

#[test]
fn a_fusion_plan_from_a_profile_runs_wordcount_with_the_same_counts() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("book.txt");
    write_wordcount_input(&input, 3_000);
    let plan = optimized(dir.path(), &["wordcount"], &["--duration", "1"], "fusion");
    let counts = wordcount(dir.path(), &input, plan.to_str().unwrap(), &[]);
    assert_eq!(
        counts,
        direct_counts(&std::fs::read_to_string(&input).unwrap())
    );
    // A profile of another application is refused, naming both.
    let o = sluice(&[
        "plan",
        "sol",
        "--optimize",
        "fusion",
        "--profile",
        dir.path().join("profile.json").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("profiles wordcount, not sol"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn replication_gives_wordcounts_stateless_split_more_instances_and_the_counts_stay_exact() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("book.txt");
    write_wordcount_input(&input, 3_000);
    let profile = dir.path().join("profile.json");
    let o = sluice(&[
        "run",
        "wordcount",
        "--duration",
        "1",
        "--plan",
        "threaded",
        "--profile",
        profile.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let plan = dir.path().join("replicated.toml");
    // Eight cores: a split with more than an eighth of the job's CPU asks for two instances or
    // more.
    let o = sluice(&[
        "plan",
        "wordcount",
        "--optimize",
        "replication",
        "--profile",
        profile.to_str().unwrap(),
        "--cores",
        "8",
        "--output",
        plan.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&plan).unwrap();
    let replicas: usize = text
        .split_once("[[replicate]]\noperator = \"split\"\nparallelism = ")
        .and_then(|(_, rest)| rest.lines().next()?.parse().ok())
        .unwrap_or_else(|| panic!("split is not replicated: {text}"));
    assert!(replicas >= 2, "{text}");
    let counts = wordcount(dir.path(), &input, plan.to_str().unwrap(), &[]);
    assert_eq!(
        counts,
        direct_counts(&std::fs::read_to_string(&input).unwrap())
    );
}
