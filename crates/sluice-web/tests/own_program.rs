//! A program of the user's own serves its job's web page and Prometheus `/metrics` as `sluice
//! run --ui --metrics-addr` does, through the library alone: the server bound before the job
//! starts, attached once it runs, its figures those of the real running job.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use sluice_ops::{Dataflow, Generator};
use sluice_plan::{plan, PlanOptions, PlanRequest};
use sluice_runtime::RunOptions;
use sluice_web::job_server::serve_if_asked;

/// Generous bound on each wait (a hang, not a slow machine, should trip it).
const PATIENCE: Duration = Duration::from_secs(60);

/// `GET path` at `address`: the status line and the body.
fn get(address: SocketAddr, path: &str) -> (String, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

#[test]
fn a_program_of_its_own_serves_its_page_and_metrics() {
    let flow = Dataflow::new("own-served");
    flow.source_of("numbers", |_| Generator::new(Some).rate(2000))
        .map("double", |n: &u64| n * 2)
        .collect("doubled");
    let graph = flow.build().unwrap();
    let plan = plan(&graph, &PlanRequest::Threaded, &PlanOptions::default()).unwrap();
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = serve_if_asked(Some(any), Some(any), &plan)
        .unwrap()
        .expect("a server when asked");
    let address = server.page_address().unwrap();
    assert_eq!(
        server.metrics_address(),
        Some(address),
        "one address serves both"
    );
    // Before the job runs: the page, and `/metrics` not yet.
    assert!(get(address, "/").1.starts_with("<!doctype html>"));
    assert!(get(address, "/metrics").0.contains(" 503 "));

    let job = sluice_runtime::start(&graph, &plan, &RunOptions::default()).unwrap();
    server.attach(job.metrics_handle(), job.checkpoint_handle());
    let began = Instant::now();
    let metrics = loop {
        let (status, body) = get(address, "/metrics");
        assert!(status.contains(" 200 "), "{status}");
        let counted = body.lines().any(|l| {
            l.starts_with("sluice_tuples_out_total{")
                && l.contains("operator=\"numbers\"")
                && !l.ends_with(" 0")
        });
        if counted {
            break body;
        }
        assert!(began.elapsed() < PATIENCE, "no tuples counted: {body}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(metrics.contains("job=\"own-served\""), "{metrics}");
    let figures: serde_json::Value =
        serde_json::from_str(&get(address, "/snapshot.json").1).unwrap();
    assert_eq!(figures["state"], "running", "{figures}");
    assert_eq!(figures["snapshot"]["job"], "own-served", "{figures}");

    job.stop_handle().stop();
    job.wait().unwrap();
    drop(server);
    assert!(
        TcpStream::connect(address).is_err(),
        "still served after the drop"
    );
}
