//! CSV in a running job: records read into a serde type (malformed ones counted and skipped,
//! or failing the job when asked; bad UTF-8 replaced and counted), records written with a
//! header row and read back the same.

#[path = "../../sluice-ops/tests/common/mod.rs"]
mod common;

use serde::{Deserialize, Serialize};
use sluice_connectors::{ByteTarget, CsvFormat, CsvSink, CsvSource, MalformedRecords};
use sluice_ops::Generator;
use sluice_plan::PlanRequest;
use sluice_types::normal_tuple;

use common::{collect, counter, run_under, source_into};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Trade {
    symbol: String,
    price: f64,
    volume: u64,
}
normal_tuple!(Trade);

fn trade(symbol: &str, price: f64, volume: u64) -> Trade {
    Trade {
        symbol: symbol.into(),
        price,
        volume,
    }
}

const TRADES: &[u8] = b"symbol,price,volume\n\
IBM,101.5,300\n\
MSFT,abc,10\n\
AAPL,170.25\n\
\xffBAD,1.0,1\n\
\"A,B\",2.5,7\n";

#[test]
fn records_become_tuples_and_malformed_ones_are_counted_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trades.csv");
    std::fs::write(&path, TRADES).unwrap();
    let (trades, report): (Vec<Trade>, _) = collect(
        move || CsvSource::<Trade>::new(&path, CsvFormat::default()),
        &PlanRequest::Fused,
    )
    .unwrap();
    assert_eq!(
        trades,
        [
            trade("IBM", 101.5, 300),
            trade("\u{fffd}BAD", 1.0, 1),
            trade("A,B", 2.5, 7)
        ]
    );
    assert_eq!(counter(&report, "source", "malformed_records"), 2);
    assert_eq!(counter(&report, "source", "invalid_utf8_records"), 1);
}

#[test]
fn a_malformed_record_fails_the_job_when_asked_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trades.csv");
    std::fs::write(&path, TRADES).unwrap();
    let file = path.clone();
    let err = collect::<Trade, _>(
        move || {
            CsvSource::<Trade>::new(&file, CsvFormat::default())
                .on_malformed(MalformedRecords::Fail)
        },
        &PlanRequest::Fused,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("'source'"), "{err}");
    assert!(err.contains(&format!("{}: ", path.display())), "{err}");
    assert!(err.contains("line: 3"), "{err}");

    let missing = dir.path().join("missing.csv");
    let file = missing.clone();
    let err = collect::<Trade, _>(
        move || CsvSource::<Trade>::new(&file, CsvFormat::default()),
        &PlanRequest::Fused,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(&format!("open {}", missing.display())),
        "{err}"
    );
}

#[test]
fn written_records_have_a_header_and_read_back_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.csv");
    let made = |i: u64| trade(&format!("S,{i}"), i as f64 / 4.0, i * 100);
    let into = path.clone();
    let graph = source_into::<Trade, _, _>(
        move || Generator::new(move |i| Some(made(i))).count(1_000),
        move || CsvSink::<Trade>::csv(ByteTarget::file(&into), CsvFormat::default()),
    );
    run_under(&graph, &PlanRequest::Threaded).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with("symbol,price,volume\n\"S,0\",0.0,0\n\"S,1\",0.25,100\n"),
        "{text}"
    );
    let (back, _): (Vec<Trade>, _) = collect(
        move || CsvSource::<Trade>::new(&path, CsvFormat::default()),
        &PlanRequest::Fused,
    )
    .unwrap();
    assert_eq!(back, (0..1_000).map(made).collect::<Vec<_>>());
}

#[test]
fn records_without_headers_and_another_delimiter_round_trip_as_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pairs.csv");
    let format = CsvFormat {
        has_headers: false,
        delimiter: b';',
    };
    let into = path.clone();
    let graph = source_into::<(String, u64), _, _>(
        || Generator::new(|i| Some((format!("w{i}"), i))).count(3),
        move || CsvSink::<(String, u64)>::csv(ByteTarget::file(&into), format),
    );
    run_under(&graph, &PlanRequest::Fused).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "w0;0\nw1;1\nw2;2\n"
    );
    let (back, _): (Vec<(String, u64)>, _) = collect(
        move || CsvSource::<(String, u64)>::new(&path, format),
        &PlanRequest::Fused,
    )
    .unwrap();
    assert_eq!(back, [("w0".into(), 0), ("w1".into(), 1), ("w2".into(), 2)]);
}
