//! Jobs across hosts: each host is a network namespace made by the test
//! (`sluice_bench::netns`: joined through a bridge in a namespace of its own, which the
//! launcher's namespace joins too), its PEs started there with `ip netns exec`, the edges
//! between hosts carried by TCP and the PEs reaching the launcher over TCP; and `sluice bench
//! placement --run`, which makes such hosts itself. Skips, saying why, where namespaces cannot
//! be made (not root, no `ip`), failing under `CI=true`; always removes what it made.

mod common;

use common::sluice;
use sluice_bench::netns::{launch_prefix, NetnsHosts};

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `n` hosts on `10.<net>.0.0/24`, or `None` after saying why they cannot be made here.
fn make_hosts(n: usize, net: u8) -> Option<NetnsHosts> {
    NetnsHosts::make(n, net)
        .map_err(|e| sluice_skip::skip(format!("{e:#}")))
        .ok()
}

/// The hosts file of `hosts`, a core each, each run through the prefix `launch` gives.
fn hosts_toml(hosts: &NetnsHosts, launch: impl Fn(&str) -> Vec<String>) -> String {
    toml::to_string(&hosts.hosts_file(|_| 1, launch)).unwrap()
}

/// Runs WordCount over `input` fused, then as processes on the hosts of `hosts_file` (the
/// launcher with `env` set), and returns both outputs after checking the runs succeeded.
fn wordcount_fused_and_on_hosts(
    dir: &Path,
    input: &Path,
    hosts_file: &Path,
    env: &[(&str, &Path)],
) -> [String; 2] {
    let run = |name: &str, extra: &[&str]| {
        let output = dir.join(name);
        let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["run", "wordcount", "--input", input.to_str().unwrap()])
            .args([
                "--output",
                output.to_str().unwrap(),
                "--set",
                "parallelism=2",
            ])
            .args(extra)
            .envs(env.iter().copied())
            .output()
            .expect("sluice runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read_to_string(&output).unwrap()
    };
    [
        run("fused.tsv", &["--plan", "fused"]),
        run(
            "hosts.tsv",
            &[
                "--plan",
                "processes",
                "--hosts",
                hosts_file.to_str().unwrap(),
            ],
        ),
    ]
}

#[test]
fn wordcount_across_three_hosts_matches_one_thread() {
    let Some(hosts) = make_hosts(3, 71) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (input, hosts_file) = (dir.path().join("in.txt"), dir.path().join("hosts.toml"));
    common::write_wordcount_input(&input, 2000);
    std::fs::write(&hosts_file, hosts_toml(&hosts, launch_prefix)).unwrap();
    let outputs = wordcount_fused_and_on_hosts(dir.path(), &input, &hosts_file, &[]);
    assert_eq!(outputs[0].lines().count(), 211);
    assert_eq!(outputs[0], outputs[1]);
    let plan = sluice(&[
        "plan",
        "wordcount",
        "--plan",
        "processes",
        "--hosts",
        hosts_file.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&plan.stdout);
    assert!(text.contains(&format!("on {}", hosts.names()[2])), "{text}");
    assert!(text.contains("via tcp("), "{text}");
}

#[test]
fn a_killed_pe_on_one_host_stops_the_job_on_the_others() {
    let Some(hosts) = make_hosts(2, 72) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let hosts_file = dir.path().join("hosts.toml");
    std::fs::write(&hosts_file, hosts_toml(&hosts, launch_prefix)).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "wordcount", "--plan", "processes", "--rate", "20000"])
        .args(["--duration", "120", "--hosts", hosts_file.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let launcher = child.id();
    let started = Instant::now();
    // The PE of `split` runs in the second namespace; wait until it is there, then kill it.
    let victim = loop {
        let pids = NetnsHosts::pids(&hosts.names()[1]);
        let split = pids.iter().copied().find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.contains("SLUICE_PE=1\0"))
        });
        if let Some(pid) = split {
            break pid;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the PE never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(300));
    let o = common::kill_pe_and_wait(child, victim, started);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("error: PE 'split' (operators: split) was killed by signal 9"),
        "{err}"
    );
    // Nothing of the job is left running on either host.
    for name in hosts.names() {
        let left = NetnsHosts::pids(name);
        assert!(
            left.is_empty(),
            "processes left in {name}: {left:?} (launcher {launcher})"
        );
    }
}

#[test]
fn pes_that_cannot_see_the_launchers_files_get_everything_over_tcp() {
    if !Command::new("unshare")
        .args(["-m", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        sluice_skip::skip("cannot make mount namespaces here (needs root and unshare)");
        return;
    }
    let Some(hosts) = make_hosts(3, 73) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (input, hosts_file) = (dir.path().join("in.txt"), dir.path().join("hosts.toml"));
    // The launcher makes its job directory in `jobs`; every PE runs in a mount namespace of
    // its own where `jobs` is an empty tmpfs, so nothing the launcher wrote there is visible.
    let jobs = dir.path().join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    common::write_wordcount_input(&input, 2000);
    let hide = format!(
        "mount -t tmpfs none '{0}' && test -z \"$(ls -A '{0}')\" && exec \"$@\"",
        jobs.display()
    );
    let file = hosts_toml(&hosts, |name| {
        let mut prefix = launch_prefix(name);
        prefix.extend(["unshare", "-m", "sh", "-c", &hide, "sh"].map(String::from));
        prefix
    });
    std::fs::write(&hosts_file, file).unwrap();
    let outputs =
        wordcount_fused_and_on_hosts(dir.path(), &input, &hosts_file, &[("TMPDIR", &jobs)]);
    assert_eq!(outputs[0].lines().count(), 211);
    assert_eq!(outputs[0], outputs[1]);
}

#[test]
fn a_pe_without_the_jobs_secret_is_refused_and_reported() {
    // One host, this machine, whose launch prefix hands the PE a wrong secret on its standard
    // input (where a PE started through a prefix reads it): the launcher, listening on TCP,
    // must turn it away, say so, and fail the job instead of running it.
    let dir = tempfile::tempdir().unwrap();
    let hosts_file = dir.path().join("hosts.toml");
    let wrong = "5a".repeat(32);
    let prefix = ["sh", "-c", &format!("echo {wrong} | \"$@\""), "sh"];
    std::fs::write(
        &hosts_file,
        format!(
            "[[host]]\nname = \"here\"\naddress = \"127.0.0.1\"\ncores = 4\nlaunch = {prefix:?}\n"
        ),
    )
    .unwrap();
    let o = sluice(&[
        "run",
        "wordcount",
        "--plan",
        "processes",
        "--duration",
        "1",
        "--hosts",
        hosts_file.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("refused a control connection from 127.0.0.1:")
            && err.contains("it did not present the job's secret"),
        "{err}"
    );
    assert!(err.contains("error: PE '"), "{err}");
    assert!(
        err.contains("before reaching the launcher at 127.0.0.1:"),
        "{err}"
    );
}

#[test]
fn each_placement_of_the_placement_bench_runs_on_two_hosts_and_delivers_every_tuple() {
    const TUPLES: u64 = 2000;
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["bench", "placement", "--run", "--hosts", "2"])
        .args(["--apps", "sol,throughput-test", "--rate", "2000"])
        .args(["--set", &format!("tuples={TUPLES}")])
        .args([
            "--duration",
            "20",
            "--warmup",
            "0",
            "--repeat",
            "1",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let bench = child.id();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    if err.contains("skipped: ") {
        sluice_skip::skip(format!("`sluice bench placement --run` skipped: {err}"));
        return;
    }
    let results: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let placed: Vec<(&str, &str)> = results
        .iter()
        .map(|r| (r["app"].as_str().unwrap(), r["scheduler"].as_str().unwrap()))
        .collect();
    let schedulers = ["round robin", "Storm even", "Sluice (consolidation)"];
    let expected: Vec<(&str, &str)> = ["sol", "throughput-test"]
        .into_iter()
        .flat_map(|app| schedulers.map(|s| (app, s)))
        .collect();
    assert_eq!(placed, expected, "{err}");
    for r in &results {
        let run = &r["runs"][0];
        assert_eq!(run["sent"], TUPLES, "{r}");
        assert_eq!(run["received"], TUPLES, "{r}");
        assert_eq!(run["intact"], true, "{r}");
    }
    // SOL's round-robin edges split evenly, so the traffic measured crossing hosts follows the
    // placements: consolidation sends less across than round robin.
    let measured = |scheduler: &str| {
        results
            .iter()
            .find(|r| r["app"] == "sol" && r["scheduler"] == scheduler)
            .and_then(|r| r["cross_host_measured"].as_f64())
            .unwrap()
    };
    assert!(
        measured("Sluice (consolidation)") < measured("round robin"),
        "{results:?}"
    );
    // Its namespaces (named after its process id) are gone, and with them its PEs.
    let tag = format!("{}61", bench % 100_000);
    let o = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let left = String::from_utf8_lossy(&o.stdout);
    assert!(!left.contains(&tag), "namespaces left: {left}");
}
