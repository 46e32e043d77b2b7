//! The multicast source end to end: a job reads a sequenced feed sent to a group on loopback,
//! in order, counting the datagrams the sender skipped as lost.
//!
//! Multicast must never leave the machine, so the test runs inside a network namespace it
//! makes (only a loopback there, with a route for 224.0.0.0/4): it re-executes itself under
//! `ip netns exec` and removes the namespace afterwards. Where namespaces cannot be made (no
//! `ip`, no privilege), it says so and passes without running.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_connectors::{MulticastConfig, MulticastSource};
use sluice_graph::{GraphBuilder, Ports};
use sluice_ops::{Collect, Collected};
use sluice_plan::{plan, PlanOptions, PlanRequest};
use sluice_runtime::{start, RunOptions};
use socket2::{Domain, Protocol, Socket, Type};

/// Set in the re-executed test: it is inside the namespace.
const INSIDE: &str = "SLUICE_TEST_MULTICAST_NETNS";
const WATCHDOG: Duration = Duration::from_secs(30);
const GROUP: Ipv4Addr = Ipv4Addr::new(239, 77, 0, 1);
const PORT: u16 = 30_001;

/// A network namespace removed when dropped.
struct Namespace(String);

impl Namespace {
    fn create() -> Result<Self, String> {
        let name = format!("sluice-mc-{}", std::process::id());
        let made = Command::new("ip").args(["netns", "add", &name]).output();
        match made {
            Ok(out) if out.status.success() => Ok(Self(name)),
            Ok(out) => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
            Err(e) => Err(format!("cannot run ip: {e}")),
        }
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("run ip");
    assert!(status.success(), "ip {args:?} failed");
}

/// Runs the calling test (`name`) again inside a fresh namespace; `false` if it ran here.
fn inside_a_namespace(name: &str) -> bool {
    if std::env::var_os(INSIDE).is_some() {
        ip(&["link", "set", "lo", "up"]);
        ip(&["route", "add", "224.0.0.0/4", "dev", "lo"]);
        return false;
    }
    let namespace = match Namespace::create() {
        Ok(ns) => ns,
        Err(why) => {
            sluice_skip::skip(format!(
                "no network namespace for the multicast test ({why})"
            ));
            return true;
        }
    };
    let exe = std::env::current_exe().expect("the test binary");
    let status = Command::new("ip")
        .args(["netns", "exec", &namespace.0])
        .arg(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(INSIDE, "1")
        .status()
        .expect("run the test in the namespace");
    assert!(status.success(), "the test failed inside the namespace");
    true
}

/// A socket sending to the group through loopback only.
fn feed_sender() -> UdpSocket {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
    socket.set_multicast_if_v4(&Ipv4Addr::LOCALHOST).unwrap();
    socket.set_multicast_loop_v4(true).unwrap();
    socket
        .connect(&SocketAddrV4::new(GROUP, PORT).into())
        .unwrap();
    socket.into()
}

fn numbered(sequence: u64) -> Vec<u8> {
    let mut d = sequence.to_be_bytes().to_vec();
    d.extend_from_slice(&sequence.to_le_bytes());
    d
}

fn wait_for(count: &AtomicU64, at_least: u64) {
    let deadline = Instant::now() + WATCHDOG;
    // SYNC: pairs with the decoder's Release increment.
    while count.load(Ordering::Acquire) < at_least {
        assert!(Instant::now() < deadline, "the feed stalled");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_sequenced_feed_arrives_in_order_with_its_gaps_counted() {
    if inside_a_namespace("a_sequenced_feed_arrives_in_order_with_its_gaps_counted") {
        return;
    }
    let decoded = Arc::new(AtomicU64::new(0));
    let into: Collected<u64> = Default::default();
    let mut g = GraphBuilder::new("feed");
    let counter = decoded.clone();
    let feed = g.source("feed", Ports::new().output::<u64>(), move |_| {
        let counter = counter.clone();
        let mut config = MulticastConfig::new(GROUP, PORT, Ipv4Addr::LOCALHOST);
        config.sequenced = true;
        config.socket_buffer_bytes = Some(4 << 20);
        MulticastSource::new(config, move |payload: &[u8]| {
            // SYNC: pairs with the test's Acquire load in wait_for.
            counter.fetch_add(1, Ordering::Release);
            Some(u64::from_le_bytes(payload.try_into().ok()?))
        })
    });
    let into2 = into.clone();
    let sink = g.operator("sink", Ports::new().input::<u64>(), move |_| {
        Collect::new(into2.clone())
    });
    g.connect(feed.out(0), sink.input(0)).unwrap();
    let graph = g.build().unwrap();
    let p = plan(&graph, &PlanRequest::Threaded, &PlanOptions::default()).unwrap();
    let job = start(&graph, &p, &RunOptions::default()).unwrap();

    let sender = feed_sender();
    // Until the source has joined, datagram 0 is sent again (repeats arrive as late).
    let deadline = Instant::now() + WATCHDOG;
    while decoded.load(Ordering::Acquire) == 0 {
        assert!(Instant::now() < deadline, "the source never joined");
        sender.send(&numbered(0)).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    const LAST: u64 = 20_000;
    let skipped = [100, 101, 5_000, 19_999];
    let mut sent = 1;
    for sequence in 1..=LAST {
        if skipped.contains(&sequence) {
            continue;
        }
        // Never more than 256 ahead of the source: any socket buffer holds them.
        if sent % 128 == 0 {
            wait_for(&decoded, sent - 128);
        }
        sender.send(&numbered(sequence)).unwrap();
        sent += 1;
    }
    wait_for(&decoded, sent);
    job.stop_handle().stop();
    let report = job.wait().unwrap();

    let got = into.lock().unwrap().clone();
    let expected: Vec<u64> = (0..=LAST).filter(|s| !skipped.contains(s)).collect();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, expected);
    let counters = report.operator_report("feed").counters;
    assert_eq!(
        counters["lost_datagrams"],
        skipped.len() as u64,
        "{counters:?}"
    );
    assert_eq!(counters["malformed_datagrams"], 0);
    assert_eq!(counters["undecodable_datagrams"], 0);
    assert_eq!(
        counters["datagrams"],
        sent + counters["late_datagrams"],
        "{counters:?}"
    );
    assert!(counters["receive_system_calls"] > 0);
}
