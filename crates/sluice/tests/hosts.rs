//! Jobs across hosts: each host is a network namespace made by the test (joined through a
//! bridge in a namespace of its own, which the launcher's namespace joins too), its PEs
//! started there with `ip netns exec`, the edges between hosts carried by TCP and the PEs
//! reaching the launcher over TCP. Skips, saying why, where namespaces cannot be made (not
//! root, no `ip`); always removes what it made.

mod common;

use common::sluice;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `ip` with `args`; true when it succeeded.
fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Hosts as network namespaces on one bridge, removed on drop.
struct Hosts {
    switch: String,
    names: Vec<String>,
    /// This namespace's end of its link to the bridge.
    launcher_link: String,
}

impl Hosts {
    /// Makes `n` hosts 10.<net>.0.1.. and gives this namespace (the launcher's machine)
    /// 10.<net>.0.254 on their bridge; `None` (after saying why) where that is impossible.
    fn make(n: usize, net: u8) -> Option<Self> {
        let tag = format!("{}{}", std::process::id() % 100_000, net);
        let hosts = Hosts {
            switch: format!("sw{tag}"),
            names: (0..n).map(|i| format!("h{tag}x{i}")).collect(),
            launcher_link: format!("v{tag}l"),
        };
        if !ip(&["netns", "add", &hosts.switch]) {
            eprintln!("skipped: cannot make network namespaces here (needs root and iproute2)");
            return None;
        }
        let sw = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &hosts.switch, "ip"];
            all.extend(args);
            ip(&all)
        };
        let (launcher, port) = (hosts.launcher_link.clone(), format!("v{tag}m"));
        let launcher_address = format!("10.{net}.0.254/24");
        let mut ok = sw(&["link", "add", "br0", "type", "bridge"])
            && sw(&["link", "set", "br0", "up"])
            && ip(&[
                "link", "add", &launcher, "type", "veth", "peer", "name", &port,
            ])
            && ip(&["link", "set", &port, "netns", &hosts.switch])
            && sw(&["link", "set", &port, "master", "br0"])
            && sw(&["link", "set", &port, "up"])
            && ip(&["addr", "add", &launcher_address, "dev", &launcher])
            && ip(&["link", "set", &launcher, "up"]);
        for (i, name) in hosts.names.iter().enumerate() {
            let (inner, outer) = (format!("v{tag}i{i}"), format!("v{tag}o{i}"));
            let address = format!("10.{net}.0.{}/24", i + 1);
            ok = ok
                && ip(&["netns", "add", name])
                && ip(&[
                    "link", "add", &inner, "type", "veth", "peer", "name", &outer,
                ])
                && ip(&["link", "set", &inner, "netns", name])
                && ip(&["link", "set", &outer, "netns", &hosts.switch])
                && sw(&["link", "set", &outer, "master", "br0"])
                && sw(&["link", "set", &outer, "up"])
                && ip(&["netns", "exec", name, "ip", "link", "set", "lo", "up"])
                && ip(&["netns", "exec", name, "ip", "link", "set", &inner, "up"])
                && ip(&[
                    "netns", "exec", name, "ip", "addr", "add", &address, "dev", &inner,
                ]);
        }
        if !ok {
            eprintln!("skipped: the namespaces could not be joined by veth pairs");
            return None;
        }
        Some(hosts)
    }

    /// The hosts file naming them, each run with `ip netns exec`.
    fn file(&self, net: u8) -> String {
        self.file_with(net, |name| {
            vec!["ip", "netns", "exec", name]
                .into_iter()
                .map(String::from)
                .collect()
        })
    }

    /// The hosts file naming them, each run with the prefix `launch` gives for its name.
    fn file_with(&self, net: u8, launch: impl Fn(&str) -> Vec<String>) -> String {
        self.names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                format!(
                    "[[host]]\nname = \"{name}\"\naddress = \"10.{net}.0.{}\"\ncores = 1\n\
                     launch = {:?}\n",
                    i + 1,
                    launch(name)
                )
            })
            .collect()
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth ends in it, and so their peers (the
        // launcher's end too, unless making it stopped before its peer moved).
        for name in &self.names {
            ip(&["netns", "del", name]);
        }
        ip(&["netns", "del", &self.switch]);
        ip(&["link", "del", &self.launcher_link]);
    }
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
    let Some(hosts) = Hosts::make(3, 71) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (input, hosts_file) = (dir.path().join("in.txt"), dir.path().join("hosts.toml"));
    common::write_wordcount_input(&input, 2000);
    std::fs::write(&hosts_file, hosts.file(71)).unwrap();
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
    assert!(text.contains(&format!("on {}", hosts.names[2])), "{text}");
    assert!(text.contains("via tcp("), "{text}");
}

#[test]
fn a_killed_pe_on_one_host_stops_the_job_on_the_others() {
    let Some(hosts) = Hosts::make(2, 72) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let hosts_file = dir.path().join("hosts.toml");
    std::fs::write(&hosts_file, hosts.file(72)).unwrap();
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
        let o = Command::new("ip")
            .args(["netns", "pids", &hosts.names[1]])
            .output()
            .unwrap();
        let pids: Vec<u32> = String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
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
    for name in &hosts.names {
        let o = Command::new("ip")
            .args(["netns", "pids", name])
            .output()
            .unwrap();
        let left = String::from_utf8_lossy(&o.stdout).trim().to_string();
        assert!(
            left.is_empty(),
            "processes left in {name}: {left} (launcher {launcher})"
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
        eprintln!("skipped: cannot make mount namespaces here (needs root and unshare)");
        return;
    }
    let Some(hosts) = Hosts::make(3, 73) else {
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
    let file = hosts.file_with(73, |name| {
        [
            "ip", "netns", "exec", name, "unshare", "-m", "sh", "-c", &hide, "sh",
        ]
        .map(String::from)
        .to_vec()
    });
    std::fs::write(
        &hosts_file,
        format!("{file}[launcher]\naddress = \"10.73.0.254\"\n"),
    )
    .unwrap();
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
