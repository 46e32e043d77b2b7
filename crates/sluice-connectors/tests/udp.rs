//! UDP in and out on loopback: datagrams become tuples (the undecodable and the oversized
//! counted), a sink's datagrams reach a source in another job, and a tuple too large for a
//! datagram is refused with both sizes.

#[path = "../../sluice-ops/tests/common/mod.rs"]
mod common;

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use sluice_connectors::{UdpSink, UdpSource};
use sluice_ops::Generator;
use sluice_plan::{plan, PlanOptions, PlanRequest};
use sluice_runtime::{start, JobReport, RunOptions};
use sluice_types::BytesTuple;

use common::{counter, run_under, source_into, wait_for, Gather, Watchdog};

const LIMIT: Duration = Duration::from_secs(60);

/// Runs a UDP source of `u64` on loopback (datagrams of at most 64 bytes) into a gathering
/// sink; `send` is given the source's address. Stops the job once `expected` tuples arrived.
fn receive_u64(expected: usize, send: impl FnOnce(SocketAddr)) -> (Vec<u64>, JobReport) {
    let (bound, address) = mpsc::channel();
    let gathered = Arc::new(Mutex::new(Vec::new()));
    let into = gathered.clone();
    let graph = source_into::<u64, _, _>(
        move || {
            let bound = bound.clone();
            UdpSource::<u64>::new(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
                .max_datagram(64)
                .on_bound(move |a| bound.send(a).unwrap())
        },
        move || Gather(into.clone()),
    );
    let p = plan(&graph, &PlanRequest::Fused, &PlanOptions::default()).unwrap();
    let job = start(&graph, &p, &RunOptions::default()).unwrap();
    send(address.recv_timeout(LIMIT).unwrap());
    let arrived = wait_for(&gathered, expected, LIMIT);
    job.stop_handle().stop();
    let report = job.wait().unwrap();
    assert!(
        arrived,
        "only {} of {expected} arrived",
        gathered.lock().unwrap().len()
    );
    let tuples = gathered.lock().unwrap().clone();
    (tuples, report)
}

#[test]
fn datagrams_become_tuples_and_bad_ones_are_counted() {
    let _watchdog = Watchdog::arm("udp source", LIMIT);
    let (tuples, report) = receive_u64(50, |address| {
        let peer = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        peer.send_to(b"abc", address).unwrap();
        peer.send_to(&[0; 100], address).unwrap();
        for i in 0..50u64 {
            peer.send_to(&i.to_ne_bytes(), address).unwrap();
        }
    });
    assert_eq!(tuples, (0..50).collect::<Vec<u64>>());
    assert_eq!(counter(&report, "source", "datagrams"), 52);
    assert_eq!(counter(&report, "source", "undecodable_datagrams"), 1);
    assert_eq!(counter(&report, "source", "oversized_datagrams"), 1);
}

#[test]
fn a_sinks_datagrams_reach_a_source_in_another_job() {
    let _watchdog = Watchdog::arm("udp between jobs", LIMIT);
    let (tuples, _) = receive_u64(100, |address| {
        let sender = thread::spawn(move || {
            let graph = source_into::<u64, _, _>(
                || Generator::new(Some).rate(20_000).count(100),
                move || UdpSink::<u64>::new(address),
            );
            run_under(&graph, &PlanRequest::Threaded).unwrap()
        });
        let report = sender.join().unwrap();
        assert_eq!(counter(&report, "sink", "datagrams_sent"), 100);
    });
    assert_eq!(tuples, (0..100).collect::<Vec<u64>>());
}

#[test]
fn a_tuple_larger_than_a_datagram_is_refused_with_both_sizes() {
    let nobody = SocketAddr::from((Ipv4Addr::LOCALHOST, 9));
    for (size, most, limit) in [(2_000, Some(1_500), 1_500), (70_000, None, 65_507)] {
        let graph = source_into::<BytesTuple, _, _>(
            move || Generator::new(move |_| Some(BytesTuple(vec![7; size]))).count(1),
            move || {
                let sink = UdpSink::<BytesTuple>::new(nobody);
                match most {
                    Some(bytes) => sink.max_datagram(bytes),
                    None => sink,
                }
            },
        );
        let err = run_under(&graph, &PlanRequest::Fused)
            .unwrap_err()
            .to_string();
        let sizes =
            format!("a tuple of {size} bytes does not fit in a datagram of at most {limit} bytes");
        assert!(err.contains("'sink'") && err.contains(&sizes), "{err}");
    }
}
