//! Hosts made on this machine from Linux network namespaces, for jobs that must cross a real
//! network stack: `sluice bench placement --run` and the tests of jobs across hosts.
//!
//! [`NetnsHosts::make`] makes `n` namespaces, each a host with the address `10.NET.0.i`
//! (`i` from 1) on a veth pair whose other end is a port of a bridge, `br0`, in a switch
//! namespace of its own; this namespace (the launcher's machine) joins the bridge too, as
//! `10.NET.0.254`. Every host's loopback is up. A PE runs on a host through the launch prefix
//! `ip netns exec NAME` ([`launch_prefix`]), so an edge between hosts is a TCP connection
//! through two veth pairs and the bridge, and an edge between PEs of one host shared memory
//! (the namespaces share `/dev/shm`). The hosts share this machine's cores: a namespace gives
//! a network, not CPUs.
//!
//! Names carry this process's id, so two processes make different namespaces; two processes
//! using the same `NET` at once would clash on the launcher's address. Making them needs root
//! and iproute2: without, [`NetnsHosts::make`] says why. Dropping the hosts removes everything
//! made (deleting a namespace deletes its veth ends, and so their peers) and first kills any
//! process still inside one of the host namespaces (a PE its launcher could not reap).

use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;

use anyhow::bail;
use sluice_plan::{HostSpec, HostsFile, LauncherSpec};

/// Runs `ip` with `args`; the error names the command and says what `ip` printed.
fn ip(args: &[&str]) -> anyhow::Result<()> {
    let output = Command::new("ip").args(args).output();
    match output {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => bail!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => bail!("cannot run `ip` (iproute2): {e}"),
    }
}

/// Runs `ip` with `args` in the network namespace `namespace`.
fn in_namespace(namespace: &str, args: &[&str]) -> anyhow::Result<()> {
    ip(&[&["netns", "exec", namespace, "ip"], args].concat())
}

/// The prefix that runs a program in the namespace `name`.
pub fn launch_prefix(name: &str) -> Vec<String> {
    ["ip", "netns", "exec", name].map(String::from).to_vec()
}

/// Hosts as network namespaces on one bridge, removed on drop.
#[derive(Debug)]
pub struct NetnsHosts {
    /// The second byte of every address: the hosts are on `10.net.0.0/24`.
    net: u8,
    /// The namespace holding the bridge.
    switch: String,
    /// The hosts' namespaces, which are also their names.
    names: Vec<String>,
    /// This namespace's end of its link to the bridge, once made.
    launcher_link: Option<String>,
}

impl NetnsHosts {
    /// Makes `n` hosts (1 to 250) `10.<net>.0.1..` and gives this namespace `10.<net>.0.254`
    /// on their bridge; the error says why that was impossible (not root, no iproute2).
    pub fn make(n: usize, net: u8) -> anyhow::Result<Self> {
        if !(1..=250).contains(&n) {
            bail!("{n} hosts: network-namespace hosts number 1 to 250");
        }
        let tag = format!("{}{net}", std::process::id() % 100_000);
        let switch = format!("sw{tag}");
        ip(&["netns", "add", &switch]).map_err(|e| {
            e.context("cannot make network namespaces here (needs root and iproute2)")
        })?;
        // From here on, what is made goes when `hosts` is dropped, also on the way out of an
        // error: each veth pair is made with its ends already where they belong, so nothing
        // is left behind half-moved, and only what this call made is recorded.
        let mut hosts = NetnsHosts {
            net,
            switch,
            names: Vec::new(),
            launcher_link: None,
        };
        in_namespace(&hosts.switch, &["link", "add", "br0", "type", "bridge"])?;
        in_namespace(&hosts.switch, &["link", "set", "br0", "up"])?;
        let launcher = format!("v{tag}l");
        hosts.join_bridge(&[&launcher], &format!("v{tag}m"))?;
        hosts.launcher_link = Some(launcher.clone());
        let launcher_address = format!("{}/24", hosts.launcher_address());
        ip(&["addr", "add", &launcher_address, "dev", &launcher])?;
        ip(&["link", "set", &launcher, "up"])?;
        for i in 0..n {
            let name = format!("h{tag}x{i}");
            ip(&["netns", "add", &name])?;
            hosts.names.push(name.clone());
            let inner = format!("v{tag}i{i}");
            hosts.join_bridge(&[&inner, "netns", &name], &format!("v{tag}o{i}"))?;
            let address = format!("{}/24", hosts.address(i));
            in_namespace(&name, &["link", "set", "lo", "up"])?;
            in_namespace(&name, &["link", "set", &inner, "up"])?;
            in_namespace(&name, &["addr", "add", &address, "dev", &inner])?;
        }
        Ok(hosts)
    }

    /// Makes a veth pair whose end is `end` (a name, perhaps followed by `netns NAME`) and
    /// whose other end, `port`, is in the switch, and puts `port` on the bridge, up.
    fn join_bridge(&self, end: &[&str], port: &str) -> anyhow::Result<()> {
        let peer = ["type", "veth", "peer", "name", port, "netns", &self.switch];
        ip(&[&["link", "add"], end, &peer].concat())?;
        in_namespace(&self.switch, &["link", "set", port, "master", "br0"])?;
        in_namespace(&self.switch, &["link", "set", port, "up"])
    }

    /// The hosts' names (their namespaces), in order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The address of host `i` (from 0).
    pub fn address(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, self.net, 0, (i + 1) as u8)
    }

    /// This namespace's address on the hosts' bridge.
    pub fn launcher_address(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, self.net, 0, 254)
    }

    /// A hosts file of these hosts, host `i` with `cores(i)` cores, each run through the
    /// prefix `launch` gives for its name (normally [`launch_prefix`]), the launcher at its
    /// address on the bridge.
    pub fn hosts_file(
        &self,
        cores: impl Fn(usize) -> usize,
        launch: impl Fn(&str) -> Vec<String>,
    ) -> HostsFile {
        HostsFile {
            hosts: self
                .names
                .iter()
                .enumerate()
                .map(|(i, name)| HostSpec {
                    name: name.clone(),
                    address: IpAddr::V4(self.address(i)),
                    cores: cores(i),
                    groups: Vec::new(),
                    launch: launch(name),
                })
                .collect(),
            launcher: LauncherSpec {
                address: Some(IpAddr::V4(self.launcher_address())),
            },
        }
    }

    /// The processes inside host `name`'s namespace.
    pub fn pids(name: &str) -> Vec<u32> {
        Command::new("ip")
            .args(["netns", "pids", name])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for NetnsHosts {
    fn drop(&mut self) {
        for name in &self.names {
            for pid in Self::pids(name) {
                if let Some(pid) = i32::try_from(pid)
                    .ok()
                    .and_then(rustix::process::Pid::from_raw)
                {
                    // Only processes inside a namespace this made: PEs of its jobs.
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
        }
        // Deleting a namespace deletes the veth ends in it, and so their peers, but later (the
        // kernel cleans a namespace up in the background): this namespace's end goes first,
        // at once, so that hosts made again right after find its name and address free.
        if let Some(link) = &self.launcher_link {
            let _ = ip(&["link", "del", link]);
        }
        for name in &self.names {
            let _ = ip(&["netns", "del", name]);
        }
        let _ = ip(&["netns", "del", &self.switch]);
    }
}
