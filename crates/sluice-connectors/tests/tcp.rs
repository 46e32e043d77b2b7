//! TCP in and out on loopback: a listening source reading several clients, a connecting one
//! reading a listening sink, frames round-tripping between jobs, and the peer's mistakes
//! (a huge length, a frame cut short) counted without failing the job.

#[path = "../../sluice-ops/tests/common/mod.rs"]
mod common;

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use sluice_connectors::{
    ByteTarget, LengthDecoder, StreamSink, TcpConnect, TcpEndpoint, TcpListen, TcpSource,
};
use sluice_ops::{Collect, Generator};
use sluice_plan::{plan, PlanOptions, PlanRequest};
use sluice_runtime::{start, RunOptions};
use sluice_types::BytesTuple;

use common::{collect, counter, run_under, source_into, Watchdog};

const LIMIT: Duration = Duration::from_secs(60);

/// Listening on loopback at a port the system picks, told to the returned receiver.
fn listen_on_loopback() -> (TcpListen, mpsc::Receiver<SocketAddr>) {
    let (bound, address) = mpsc::channel();
    let listen = TcpListen::new(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .on_bound(move |a| bound.send(a).unwrap());
    (listen, address)
}

/// A client that waits for the address, then sends each of `messages` on a connection of
/// its own.
fn clients(address: mpsc::Receiver<SocketAddr>, messages: Vec<Vec<u8>>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let address = address.recv_timeout(LIMIT).expect("the source's address");
        for message in messages {
            TcpStream::connect(address)
                .unwrap()
                .write_all(&message)
                .unwrap();
        }
    })
}

/// `payload` after its length, as one frame.
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(payload);
    f
}

#[test]
fn a_listening_source_reads_each_client_to_its_end() {
    let _watchdog = Watchdog::arm("listening line source", LIMIT);
    let (listen, address) = listen_on_loopback();
    let peer = clients(
        address,
        vec![b"a1\r\na2\n".to_vec(), b"b1\nb\xff2\nb3".to_vec()],
    );
    let (mut lines, report): (Vec<String>, _) = collect(
        move || TcpSource::lines(listen.clone().into()).end_after(2),
        &PlanRequest::Fused,
    )
    .unwrap();
    peer.join().unwrap();
    lines.sort();
    assert_eq!(lines, ["a1", "a2", "b1", "b3", "b\u{fffd}2"]);
    assert_eq!(counter(&report, "source", "connections"), 2);
    assert_eq!(counter(&report, "source", "invalid_utf8_lines"), 1);
}

#[test]
fn frames_go_from_a_sink_to_a_listening_source_in_another_job() {
    let _watchdog = Watchdog::arm("frames between jobs", LIMIT);
    let (listen, address) = listen_on_loopback();
    let receiver = thread::spawn(move || {
        collect::<(String, u64), _>(
            move || {
                TcpSource::<LengthDecoder<(String, u64)>>::frames(listen.clone().into())
                    .end_after(1)
            },
            &PlanRequest::Threaded,
        )
    });
    let address = address.recv_timeout(LIMIT).unwrap();
    let graph = source_into::<(String, u64), _, _>(
        || Generator::new(|i| Some((format!("tuple {i}"), i))).count(50_000),
        move || {
            StreamSink::<(String, u64), _>::frames(ByteTarget::Tcp(TcpEndpoint::connect(address)))
        },
    );
    run_under(&graph, &PlanRequest::Threaded).unwrap();
    let (tuples, report) = receiver.join().unwrap().unwrap();
    let expected: Vec<(String, u64)> = (0..50_000).map(|i| (format!("tuple {i}"), i)).collect();
    assert_eq!(tuples, expected);
    assert_eq!(counter(&report, "source", "truncated_frames"), 0);
}

#[test]
fn a_connecting_source_reads_a_listening_sink_until_it_closes() {
    let _watchdog = Watchdog::arm("listening line sink", LIMIT);
    let (listen, address) = listen_on_loopback();
    let sender = thread::spawn(move || {
        let graph = source_into::<u64, _, _>(
            || Generator::new(Some).count(1_000),
            move || StreamSink::<u64, _>::lines(ByteTarget::Tcp(listen.clone().into())),
        );
        run_under(&graph, &PlanRequest::Fused)
    });
    let address = address.recv_timeout(LIMIT).unwrap();
    let (lines, _): (Vec<String>, _) = collect(
        move || TcpSource::lines(TcpEndpoint::connect(address)),
        &PlanRequest::Fused,
    )
    .unwrap();
    sender.join().unwrap().unwrap();
    assert_eq!(lines, (0..1_000).map(|i| i.to_string()).collect::<Vec<_>>());
}

#[test]
fn a_huge_length_closes_that_connection_only_and_is_counted() {
    let _watchdog = Watchdog::arm("oversized frame", LIMIT);
    let (listen, address) = listen_on_loopback();
    let mut huge = frame(b"before");
    huge.extend_from_slice(&u32::MAX.to_be_bytes());
    huge.extend_from_slice(b"never read");
    let peer = clients(address, vec![huge, frame(b"other")]);
    let (mut payloads, report): (Vec<BytesTuple>, _) = collect(
        move || TcpSource::<LengthDecoder<BytesTuple>>::frames(listen.clone().into()).end_after(2),
        &PlanRequest::Fused,
    )
    .unwrap();
    peer.join().unwrap();
    payloads.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        payloads,
        [
            BytesTuple(b"before".to_vec()),
            BytesTuple(b"other".to_vec())
        ]
    );
    assert_eq!(counter(&report, "source", "oversized_frames"), 1);
}

#[test]
fn a_connection_ending_inside_a_frame_is_counted() {
    let _watchdog = Watchdog::arm("truncated frame", LIMIT);
    let (listen, address) = listen_on_loopback();
    let mut cut = frame(b"whole");
    cut.extend_from_slice(&frame(b"cut short")[..7]);
    let peer = clients(address, vec![cut]);
    let (payloads, report): (Vec<BytesTuple>, _) = collect(
        move || TcpSource::<LengthDecoder<BytesTuple>>::frames(listen.clone().into()).end_after(1),
        &PlanRequest::Fused,
    )
    .unwrap();
    peer.join().unwrap();
    assert_eq!(payloads, [BytesTuple(b"whole".to_vec())]);
    assert_eq!(counter(&report, "source", "truncated_frames"), 1);
}

#[test]
fn a_stop_is_not_stuck_behind_a_silent_client() {
    let _watchdog = Watchdog::arm("stop with a silent client", LIMIT);
    let (listen, address) = listen_on_loopback();
    let graph = source_into::<String, _, _>(
        move || TcpSource::lines(listen.clone().into()),
        || Collect::<String>::new(Default::default()),
    );
    let p = plan(&graph, &PlanRequest::Fused, &PlanOptions::default()).unwrap();
    let job = start(&graph, &p, &RunOptions::default()).unwrap();
    let silent = TcpStream::connect(address.recv_timeout(LIMIT).unwrap()).unwrap();
    thread::sleep(Duration::from_millis(20));
    job.stop_handle().stop();
    job.wait().unwrap();
    drop(silent);
}

#[test]
fn nobody_to_connect_to_and_no_client_are_errors_naming_the_address() {
    let nobody = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap();
    let connect = TcpConnect {
        attempts: 2,
        retry_interval: Duration::from_millis(10),
        ..TcpConnect::new(nobody)
    };
    let err = collect::<String, _>(
        move || TcpSource::lines(connect.clone().into()),
        &PlanRequest::Fused,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("'source'"), "{err}");
    assert!(
        err.contains(&format!("connect to {nobody} (2 attempts)")),
        "{err}"
    );

    let (mut listen, _address) = listen_on_loopback();
    listen.accept_timeout = Duration::from_millis(20);
    let graph = source_into::<u64, _, _>(
        || Generator::new(Some).count(1),
        move || StreamSink::<u64, _>::lines(ByteTarget::Tcp(listen.clone().into())),
    );
    let err = run_under(&graph, &PlanRequest::Fused)
        .unwrap_err()
        .to_string();
    assert!(err.contains("'sink'"), "{err}");
    assert!(
        err.contains("no client connected to 127.0.0.1:0 within 20ms"),
        "{err}"
    );
}
