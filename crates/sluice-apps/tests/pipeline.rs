//! The compression and encryption pipelines end to end on small inputs: under one thread, a
//! thread per instance, and the paper's engines (a thread per sender and per receiver), every
//! packet of the input arrives and is verified byte for byte, in as many packets and bytes as
//! the input has, also with the engines joined by `udp-mq` as in the paper; a packet flipped
//! on the wire fails the job naming it.

use sluice_apps::pipeline::{self, Pipeline, BYTES_VERIFIED, PACKETS_VERIFIED, WIRE_BYTES};
use sluice_apps::{AppConfig, Settings};
use sluice_plan::{plan, PlanOptions, PlanRequest};
use sluice_runtime::{run, JobReport, RunError, RunOptions};

/// Runs `app` with `settings` under `request`.
fn run_app(app: &str, settings: &[&str], request: &PlanRequest) -> Result<JobReport, RunError> {
    let config = AppConfig {
        settings: Settings::parse(settings.iter().copied()).unwrap(),
        ..AppConfig::default()
    };
    let built = sluice_apps::build(app, &config).unwrap();
    let options = PlanOptions {
        cores: 2,
        queue_capacity: 16,
        ..PlanOptions::default()
    };
    let physical = plan(&built.graph, request, &options).unwrap();
    let report = run(&built.graph, &physical, &RunOptions::default())?;
    let summary = (built.summarize)(&report);
    assert!(summary.contains("verified byte for byte"), "{summary}");
    Ok(report)
}

fn counter(report: &JobReport, operator: &str, name: &str) -> u64 {
    report.operator_report(operator).counters[name]
}

/// The paper's execution engines: a thread per sender and per receiver.
fn engines(app: &str, settings: &[&str]) -> PlanRequest {
    let settings = Settings::parse(settings.iter().copied()).unwrap();
    let pipeline = Pipeline::from_settings(app, &settings).unwrap();
    PlanRequest::File("engines".into(), pipeline::engines(&pipeline, false))
}

/// The paper's engines, senders joined to receivers by `udp-mq` with `queues` sockets a side.
fn engines_over_udp_mq(app: &str, settings: &[&str], queues: usize) -> PlanRequest {
    let settings = Settings::parse(settings.iter().copied()).unwrap();
    let pipeline = Pipeline::from_settings(app, &settings).unwrap();
    let mut file = pipeline::engines(&pipeline, false);
    file.edges
        .push(pipeline::udp_mq_between_engines(&pipeline, queues).unwrap());
    PlanRequest::File("engines over udp-mq".into(), file)
}

#[test]
fn every_packet_arrives_verified_under_every_plan() {
    // 100,003 bytes: 25 packets of 4,000 bytes and one of 3, over 7 flows.
    let size = 100_003;
    let packets = 26;
    let settings = [
        "size=100003",
        "packet=4000",
        "flows=7",
        "senders=2",
        "receivers=3",
    ];
    for (app, encode) in [("compress", "compress"), ("encrypt", "encrypt")] {
        let requests = [
            ("fused", PlanRequest::Fused),
            ("threaded", PlanRequest::Threaded),
            ("engines", engines(app, &settings)),
            // Seven flows over three queues: a flow keeps its queue, so its order holds.
            (
                "engines over udp-mq",
                engines_over_udp_mq(app, &settings, 3),
            ),
        ];
        for (name, request) in &requests {
            let report = run_app(app, &settings, request).unwrap();
            let case = format!("{app} under {name}");
            assert_eq!(report.tuples_out("packets"), packets, "{case}");
            assert_eq!(
                counter(&report, "verify", PACKETS_VERIFIED),
                packets,
                "{case}"
            );
            assert_eq!(counter(&report, "verify", BYTES_VERIFIED), size, "{case}");
            let wire = counter(&report, encode, WIRE_BYTES);
            if app == "encrypt" {
                assert_eq!(wire, size + 16 * packets, "{case}: a tag per packet");
            } else {
                assert!(wire * 2 < size, "{case}: {wire} bytes compressed");
            }
        }
    }
}

#[test]
fn a_packet_flipped_on_the_wire_fails_the_job_naming_it() {
    for (app, failure) in [
        ("compress", "decompression failed"),
        ("encrypt", "decryption failed"),
    ] {
        for request in [PlanRequest::Fused, PlanRequest::Threaded] {
            let settings = ["size=50000", "packet=1000", "flows=4", "corrupt=3:2"];
            let error = run_app(app, &settings, &request).unwrap_err().to_string();
            assert!(error.contains("flow 3 packet 2: "), "{app}: {error}");
            assert!(
                error.contains(failure) || error.contains("where the input has"),
                "{app}: {error}"
            );
        }
    }
}

#[test]
fn a_packet_that_cannot_cross_udp_mq_whole_is_refused_naming_the_limit() {
    let settings = Settings::parse(["packet=70000"]).unwrap();
    let pipeline = Pipeline::from_settings("compress", &settings).unwrap();
    let error = pipeline::udp_mq_between_engines(&pipeline, 4)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("70000 bytes: a packet crossing udp-mq must fit one datagram, at most 61440 bytes (MAX_UDP_MQ_PACKET)"),
        "{error}"
    );
    let fits = Settings::parse(["packet=61440"]).unwrap();
    let pipeline = Pipeline::from_settings("encrypt", &fits).unwrap();
    let edge = pipeline::udp_mq_between_engines(&pipeline, 65).unwrap_err();
    assert!(edge.to_string().contains("queues"), "{edge}");
    let edge = pipeline::udp_mq_between_engines(&pipeline, 4).unwrap();
    assert_eq!(
        (edge.from.as_str(), edge.to.as_str()),
        ("encrypt", "decrypt")
    );
    assert_eq!(edge.transport.name(), "udp-mq");
}

#[test]
fn settings_beyond_their_bounds_are_refused() {
    for (app, setting, message) in [
        (
            "compress",
            "level=10",
            "setting level: 10 is out of range: must be between 0 and 9",
        ),
        ("encrypt", "level=1", "encrypt has no setting 'level'"),
        (
            "encrypt",
            "packet=63",
            "setting packet: 63 is out of range: must be between 64 and 16777216",
        ),
        (
            "compress",
            "senders=300",
            "setting senders: 300 is out of range: must be between 1 and 256",
        ),
        (
            "encrypt",
            "corrupt=1-2",
            "setting corrupt: '1-2': expected FLOW:SEQ, e.g. 0:3",
        ),
    ] {
        let config = AppConfig {
            settings: Settings::parse([setting]).unwrap(),
            ..AppConfig::default()
        };
        let error = sluice_apps::build(app, &config).err().expect(setting);
        assert!(error.to_string().starts_with(message), "{error}");
    }
}
