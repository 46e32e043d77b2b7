//! The Storm topologies end to end: under the fused, auto, threaded and processes plans (the PEs as
//! threads of this process, their edges still shared memory), every tuple the spout sent
//! arrives exactly once at the terminal bolt with the payload it was sent with, what the
//! settings say independently of the run (N tuples: sequence numbers 0 to N-1, payloads drawn
//! from the pool the seed makes).

use std::sync::mpsc;
use std::time::Duration;

use sluice_apps::storm::{self, Check, Integrity, MessagePool};
use sluice_apps::{sol, throughput_test, AppConfig, Settings};
use sluice_plan::{plan, PlanOptions, PlanRequest};
use sluice_runtime::{start, JobReport, Launcher, RunOptions};

/// Tuples each run sends.
const TUPLES: u64 = 3_000;
/// Far beyond what a run of a few thousand tuples takes, even on a loaded machine.
const WATCHDOG: Duration = Duration::from_secs(120);

/// Runs `app` with `settings` under `request` on two cores with small queues (so that the
/// spout waits on full ones), its PEs in this process.
fn run(app: &str, settings: &[&str], request: PlanRequest) -> (JobReport, String) {
    let config = AppConfig {
        settings: Settings::parse(settings.iter().copied()).unwrap(),
        ..AppConfig::default()
    };
    let app = sluice_apps::build(app, &config).unwrap();
    let options = PlanOptions {
        cores: 2,
        queue_capacity: 16,
        ..PlanOptions::default()
    };
    let physical = plan(&app.graph, &request, &options).unwrap();
    let job = start(
        &app.graph,
        &physical,
        &RunOptions {
            launcher: Launcher::InProcess,
            ..RunOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{request:?}: {e}"));
    let stop = job.stop_handle();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(job.wait());
    });
    let report = rx
        .recv_timeout(WATCHDOG)
        .unwrap_or_else(|_| {
            stop.stop();
            panic!("the job did not end within {WATCHDOG:?} under {request:?}")
        })
        .unwrap_or_else(|e| panic!("{request:?}: {e}"));
    let summary = (app.summarize)(&report);
    (report, summary)
}

fn plans() -> [PlanRequest; 4] {
    [
        PlanRequest::Fused,
        PlanRequest::Auto,
        PlanRequest::Threaded,
        PlanRequest::Processes,
    ]
}

/// Checks that all `TUPLES` arrived once, intact, at `terminal`, and that every instance of
/// each bolt in `bolts` got its share from the shuffle grouping (a third, give or take one
/// from each of up to three upstream instances dealing in turn).
fn assert_delivered(report: &JobReport, summary: &str, terminal: &str, bolts: &[&str]) {
    let integrity = Integrity::of(report, storm::SPOUT, terminal);
    assert_eq!(integrity.sent, TUPLES, "{summary}");
    assert!(integrity.holds(), "{summary}");
    assert!(summary.contains("integrity: ok"), "{summary}");
    assert!(
        summary.contains("end-to-end latency (us): p50"),
        "{summary}"
    );
    assert_eq!(report.latency().unwrap().len(), TUPLES, "{summary}");
    // The runtime's latency markers (one every 64 tuples by default) take one path each: a
    // fan-out followed by a fan-in does not multiply them.
    let markers = report.arrival_latency(terminal).map_or(0, |h| h.len());
    let sent = TUPLES.div_ceil(sluice_runtime::DEFAULT_LATENCY_EVERY);
    assert!(
        markers > 0 && markers <= sent,
        "{markers} markers at {terminal}, {sent} sent"
    );
    for bolt in bolts {
        let shares: Vec<u64> = report
            .instances
            .iter()
            .filter(|i| i.operator == *bolt)
            .map(|i| i.tuples_in)
            .collect();
        assert_eq!(shares.len(), 3, "{bolt}");
        assert_eq!(shares.iter().sum::<u64>(), TUPLES, "{bolt}");
        assert!(
            shares.iter().all(|&n| n.abs_diff(TUPLES / 3) <= 3),
            "{bolt}: {shares:?}"
        );
    }
}

#[test]
fn sol_delivers_every_tuple_once_intact_under_every_plan() {
    let tuples = format!("tuples={TUPLES}");
    for request in plans() {
        let name = format!("{request:?}");
        let (report, summary) = run(
            "sol",
            &["levels=3", "parallelism=3", "size=37", &tuples],
            request,
        );
        assert_delivered(&report, &summary, sol::SINK, &["bolt-1", "bolt-2"]);
        assert_eq!(report.tuples_in(sol::SINK), TUPLES, "{name}");
    }
}

#[test]
fn throughput_test_delivers_every_tuple_once_intact_and_counts_each_id() {
    let tuples = format!("tuples={TUPLES}");
    for request in plans() {
        let (report, summary) = run(
            "throughput-test",
            &["parallelism=3", "ids=5", "size=20", &tuples],
            request,
        );
        assert_delivered(&report, &summary, throughput_test::COUNT, &["identity"]);
        assert_eq!(
            storm::counter(&report, throughput_test::COUNT, throughput_test::IDS),
            5,
            "{summary}"
        );
        assert!(summary.contains("ids counted: 5"), "{summary}");
        // Fields grouping: each id's tuples all reach one instance of the count.
        for instance in report
            .instances
            .iter()
            .filter(|i| i.operator == throughput_test::COUNT)
        {
            assert_eq!(instance.tuples_in % (TUPLES / 5), 0, "{summary}");
        }
    }
}

#[test]
fn the_check_finds_corrupt_duplicate_and_missing_tuples() {
    let pool = MessagePool::new(storm::random_letters(4, 8, b'a'..=b'z', 3));
    let mut check = Check::new(pool.clone());
    for seq in 0..10 {
        check.record(&pool.tuple(seq, 0), 5);
    }
    check.record(&pool.tuple(4, 0), 5);
    let mut bent = pool.tuple(10, 0);
    let mut bytes = bent.payload.to_vec();
    bytes[3] ^= 1;
    bent.payload = bytes.into();
    check.record(&bent, 5);
    let report = check.report();
    assert_eq!(report.counters[storm::DISTINCT], 11);
    assert_eq!(report.counters[storm::DUPLICATES], 1);
    assert_eq!(report.counters[storm::CORRUPT], 1);
    assert_eq!(report.counters[storm::SEQ_SUM], 55);
    assert_eq!(report.latency.unwrap().len(), 12);
}

#[test]
fn settings_beyond_their_bounds_are_refused() {
    for (app, setting, message) in [
        (
            "sol",
            "levels=0",
            "setting levels: 0 is out of range: must be between 1 and 32",
        ),
        (
            "sol",
            "parallelism=65",
            "setting parallelism: 65 is out of range: must be between 1 and 64",
        ),
        (
            "throughput-test",
            "size=262145",
            "setting size: 262145 is out of range: must be between 0 and 262144",
        ),
        (
            "throughput-test",
            "ids=0",
            "setting ids: 0 is out of range: must be between 1 and 1024",
        ),
    ] {
        let config = AppConfig {
            settings: Settings::parse([setting]).unwrap(),
            ..AppConfig::default()
        };
        let error = sluice_apps::build(app, &config).err().expect(setting);
        assert_eq!(error.to_string(), message);
    }
}
