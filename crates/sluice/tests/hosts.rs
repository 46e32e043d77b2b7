//! Jobs across hosts: each host is a network namespace made by the test (joined through a
//! bridge in a namespace of its own), its PEs started there with `ip netns exec`, the edges
//! between hosts carried by TCP. Skips, saying why, where namespaces cannot be made (not
//! root, no `ip`); always removes what it made.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
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
}

impl Hosts {
    /// Makes `n` hosts 10.<net>.0.1.. ; `None` (after saying why) where that is impossible.
    fn make(n: usize, net: u8) -> Option<Self> {
        let tag = format!("{}{}", std::process::id() % 100_000, net);
        let hosts = Hosts {
            switch: format!("sw{tag}"),
            names: (0..n).map(|i| format!("h{tag}x{i}")).collect(),
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
        let ok = sw(&["link", "add", "br0", "type", "bridge"]) && sw(&["link", "set", "br0", "up"]);
        let mut ok = ok;
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

    /// The hosts file naming them.
    fn file(&self, net: u8) -> String {
        self.names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                format!(
                    "[[host]]\nname = \"{name}\"\naddress = \"10.{net}.0.{}\"\ncores = 1\n\
                     launch = [\"ip\", \"netns\", \"exec\", \"{name}\"]\n",
                    i + 1
                )
            })
            .collect()
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth ends in it, and so their peers.
        for name in &self.names {
            ip(&["netns", "del", name]);
        }
        ip(&["netns", "del", &self.switch]);
    }
}

fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("sluice runs")
}

fn write_input(path: &Path) {
    let mut text = String::new();
    for i in 0..2000u64 {
        let words: Vec<String> = (0..(i % 11))
            .map(|k| format!("w{}", (i * 13 + k * 17) % 211))
            .collect();
        text.push_str(&words.join(" "));
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

#[test]
fn wordcount_across_three_hosts_matches_one_thread() {
    let Some(hosts) = Hosts::make(3, 71) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (input, hosts_file) = (dir.path().join("in.txt"), dir.path().join("hosts.toml"));
    write_input(&input);
    std::fs::write(&hosts_file, hosts.file(71)).unwrap();
    let mut outputs = Vec::new();
    for extra in [
        vec!["--plan", "fused"],
        vec![
            "--plan",
            "processes",
            "--hosts",
            hosts_file.to_str().unwrap(),
        ],
    ] {
        let output = dir.path().join(format!("out{}.tsv", outputs.len()));
        let mut args = vec!["run", "wordcount", "--input", input.to_str().unwrap()];
        args.extend([
            "--output",
            output.to_str().unwrap(),
            "--set",
            "parallelism=2",
        ]);
        args.extend(extra);
        let o = sluice(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        outputs.push(std::fs::read_to_string(&output).unwrap());
    }
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
