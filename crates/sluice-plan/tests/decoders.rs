//! The plan-file and hosts-file decoders ([`PlanFile::read`], [`HostsFile::read`]) under
//! arbitrary text and under valid files mutated at random: they never panic, a syntax error
//! points at a line and a column inside the text, and whatever decodes is planned without a
//! panic (a plan that comes out passes its own check and survives the trip to a PE as JSON).
//! The `cargo fuzz` targets `plan_file` and `hosts_file` (in `fuzz/`) drive the same decoders
//! for longer; this is their short, offline run in the test suite.

mod common;

use std::path::Path;

use proptest::prelude::*;
use sluice_plan::{
    plan, EdgeSpec, HostsFile, HostsFileError, PhysicalPlan, PlanFile, PlanOptions, PlanRequest,
    ThreadSpec, TomlSyntaxError,
};
use sluice_transport::tcp::TcpParams;
use sluice_transport::TransportSpec;

/// Valid plan files for the graph of `common`, each using other fields.
const PLANS: [&str; 3] = [
    r#"
queue_capacity = 256
[[thread]]
name = "tokenize"
operators = ["source", "split"]
core = 0
[[thread]]
name = "count"
operators = ["sum", "sink"]
core = 1
"#,
    r#"
[[thread]]
name = "in"
pe = "left"
operators = ["source", "split"]
[[thread]]
name = "sum0"
pe = "right"
operators = ["sum[0]"]
[[thread]]
name = "rest"
pe = "right"
operators = ["sum[1]", "sink"]
[[edge]]
from = "split"
to = "sum"
transport = { kind = "shm-vega", slot_bytes = 256, slots = 64 }
"#,
    r#"
[[thread]]
name = "a"
pe = "a"
operators = ["source", "split", "sum"]
[[thread]]
name = "b"
pe = "b"
operators = ["sink"]
[[edge]]
from = "sum"
to = "sink"
transport = { kind = "tcp", profile = "throughput", batch_bytes = 4096 }
"#,
];

/// A valid hosts file using every field.
const HOSTS: &str = r#"
[[host]]
name = "a"
address = "127.0.0.1"
cores = 2
groups = ["left"]
[[host]]
name = "b"
address = "::1"
cores = 4
launch = ["env"]
[launcher]
address = "127.0.0.1"
"#;

/// Pieces a mutation inserts: TOML's punctuation, numbers at and past the limits of the
/// fields, escapes, the names of tables and fields, and text that is not ASCII.
const PIECES: [&str; 24] = [
    "[",
    "]",
    "[[",
    "=",
    "'",
    "\"",
    "\n",
    "{",
    "}",
    ",",
    "#",
    "0",
    "-1",
    "18446744073709551616",
    "4294967296",
    "\\u0000",
    "\\",
    "é",
    "[[thread]]\n",
    "[[edge]]\n",
    "[[host]]\n",
    "operators = []\n",
    "name = \"a\"\n",
    "kind = \"shm-osr\"",
];

/// Whole lines a mutation inserts at the start of a line: valid TOML with values at and past
/// the bounds of the fields, so that most mutated files still decode and reach the planner.
const LINES: [&str; 16] = [
    "core = 7\n",
    "core = 9223372036854775807\n",
    "pe = \"x\"\n",
    "name = \"\"\n",
    "queue_capacity = 0\n",
    "queue_capacity = 99999999999\n",
    "operators = [\"sum[5]\"]\n",
    "operators = [\"sum[9223372036854775807]\", \"sink\"]\n",
    "[[thread]]\nname = \"z\"\noperators = []\n",
    "[[thread]]\nname = \"a\"\npe = \"q\"\noperators = [\"sink\"]\n",
    "[[edge]]\nfrom = \"split\"\nto = \"sum\"\ntransport = { kind = \"threaded\", capacity = 0 }\n",
    "[[edge]]\nfrom = \"sum\"\nto = \"sink\"\ntransport = { kind = \"shm-osr\", batch_bytes = 0 }\n",
    "cores = 0\n",
    "cores = 9223372036854775807\n",
    "groups = [\"left\", \"\"]\n",
    "[[host]]\nname = \"c\"\naddress = \"10.0.0.3\"\n",
];

/// One change to a text, at a position taken modulo its length in characters (or lines).
#[derive(Debug, Clone)]
enum Edit {
    Delete(usize),
    Insert(usize, &'static str),
    InsertLine(usize, &'static str),
    DuplicateLine(usize),
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    let edit = prop_oneof![
        1 => any::<usize>().prop_map(Edit::Delete),
        1 => (any::<usize>(), proptest::sample::select(&PIECES[..]))
            .prop_map(|(at, piece)| Edit::Insert(at, piece)),
        3 => (any::<usize>(), proptest::sample::select(&LINES[..]))
            .prop_map(|(at, line)| Edit::InsertLine(at, line)),
        1 => any::<usize>().prop_map(Edit::DuplicateLine),
    ];
    proptest::collection::vec(edit, 1..4)
}

/// The index in `chars` where line `at` (modulo the number of lines) starts, and that line.
fn line_at(chars: &[char], at: usize) -> (usize, Vec<char>) {
    let starts: Vec<usize> = std::iter::once(0)
        .chain(
            chars
                .iter()
                .enumerate()
                .filter(|(_, c)| **c == '\n')
                .map(|(i, _)| i + 1),
        )
        .collect();
    let start = starts[at % starts.len()];
    let end = chars[start..]
        .iter()
        .position(|c| *c == '\n')
        .map_or(chars.len(), |i| start + i + 1);
    (start, chars[start..end].to_vec())
}

/// `text` with `edits` applied in order, on character boundaries.
fn mutate(text: &str, edits: &[Edit]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for edit in edits {
        match *edit {
            Edit::Delete(at) if !chars.is_empty() => {
                chars.remove(at % chars.len());
            }
            Edit::Delete(_) => {}
            Edit::Insert(at, piece) => {
                let at = at % (chars.len() + 1);
                chars.splice(at..at, piece.chars());
            }
            Edit::InsertLine(at, line) => {
                let (start, _) = line_at(&chars, at);
                chars.splice(start..start, line.chars());
            }
            Edit::DuplicateLine(at) => {
                let (start, line) = line_at(&chars, at);
                chars.splice(start..start, line);
            }
        }
    }
    chars.into_iter().collect()
}

/// Asserts that a syntax error of `text` points inside it.
fn assert_located(text: &str, error: &TomlSyntaxError) {
    let lines: Vec<&str> = text.split('\n').collect();
    assert!(
        (1..=lines.len()).contains(&error.line),
        "line {} of {}: {error}",
        error.line,
        lines.len()
    );
    let line = lines[error.line - 1];
    assert!(
        (1..=line.len() + 1).contains(&error.column),
        "column {} of a line of {} bytes: {error}",
        error.column,
        line.len()
    );
    assert!(!error.message.contains('\n'), "{error}");
}

/// Decodes `text` as a plan file and plans what decodes, asserting the properties of the
/// module doc.
fn decode_plan(text: &str) {
    match PlanFile::read(Path::new("fuzz.toml"), text) {
        Err(error) => assert_located(text, &error),
        Ok(file) => {
            let request = PlanRequest::File("fuzz.toml".into(), file);
            if let Ok(planned) = plan(&common::graph(), &request, &PlanOptions::default()) {
                assert_survives_the_trip(&planned);
            }
        }
    }
}

/// Decodes `text` as a hosts file and plans a job over what decodes.
fn decode_hosts(text: &str) {
    match HostsFile::read(Path::new("hosts.toml"), text) {
        Err(HostsFileError::Syntax(error)) => assert_located(text, &error),
        Err(HostsFileError::Invalid { path, reason }) => {
            assert_eq!(path, "hosts.toml");
            assert!(!reason.is_empty());
        }
        Ok(hosts) => {
            let options = PlanOptions {
                hosts: Some(hosts),
                ..PlanOptions::default()
            };
            if let Ok(planned) = plan(&common::graph(), &PlanRequest::Processes, &options) {
                assert_survives_the_trip(&planned);
            }
        }
    }
}

fn assert_survives_the_trip(planned: &PhysicalPlan) {
    planned
        .check()
        .expect("a plan the planner returns passes its check");
    let json = serde_json::to_string(planned).expect("a plan serializes");
    let back: PhysicalPlan = serde_json::from_str(&json).expect("a plan deserializes");
    assert_eq!(&back, planned);
}

/// Sizes and counts at and past the bounds of every field (TOML integers stop at 2^63 - 1).
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(0usize),
        Just(1),
        2usize..70_000,
        Just(1 << 24),
        Just((1 << 24) + 1),
        Just(1 << 32),
        Just(i64::MAX as usize),
    ]
}

fn transport() -> impl Strategy<Value = TransportSpec> {
    prop_oneof![
        Just(TransportSpec::Fused),
        size().prop_map(|capacity| TransportSpec::Threaded { capacity }),
        (size(), size())
            .prop_map(|(slot_bytes, slots)| TransportSpec::ShmVega { slot_bytes, slots }),
        (size(), size()).prop_map(|(capacity_bytes, batch_bytes)| TransportSpec::ShmOsr {
            capacity_bytes,
            batch_bytes
        }),
        size().prop_map(|batch_bytes| TransportSpec::Tcp(TcpParams {
            batch_bytes,
            ..TcpParams::default()
        })),
        Just(TransportSpec::UdpMq(Default::default())),
        Just(TransportSpec::Mpi(Default::default())),
    ]
}

/// The instances of the graph of `common`, each of which a plan file must place once.
const INSTANCES: [&str; 5] = ["source", "split", "sum[0]", "sum[1]", "sink"];

/// Plan files built field by field over the graph of `common`: each instance placed in one of
/// four threads (whose names may clash, whose PEs and cores vary), now and then a name the
/// graph lacks, and pins of any transport with sizes at and past their bounds, so that the
/// planner sees every combination of placements, pins and sizes.
fn plan_file() -> impl Strategy<Value = PlanFile> {
    // Mostly what works, now and then what does not: a clashing or empty name, a core the
    // machine lacks.
    let thread = (
        proptest::option::weighted(0.1, proptest::sample::select(vec!["t0", ""])),
        proptest::option::weighted(
            0.3,
            prop_oneof![4 => 0usize..2, 1 => Just(i64::MAX as usize)],
        ),
        proptest::option::of(proptest::sample::select(vec!["x", "y", "main"])),
    );
    let edge = (
        proptest::sample::select(vec![("source", "split"), ("split", "sum"), ("sum", "sink")]),
        transport(),
    )
        .prop_map(|((from, to), transport)| EdgeSpec {
            from: from.into(),
            to: to.into(),
            transport,
        });
    (
        proptest::option::weighted(0.2, size()),
        proptest::collection::vec(thread, 4),
        proptest::array::uniform5(0usize..4),
        proptest::option::weighted(
            0.1,
            proptest::sample::select(vec!["nothing", "sum[2]", "sum"]),
        ),
        proptest::collection::vec(edge, 0..3),
    )
        .prop_map(|(queue_capacity, threads, placement, stray, edges)| {
            let mut threads: Vec<ThreadSpec> = threads
                .into_iter()
                .enumerate()
                .map(|(t, (name, core, pe))| ThreadSpec {
                    name: name.map_or_else(|| format!("t{t}"), String::from),
                    operators: INSTANCES
                        .iter()
                        .zip(placement)
                        .filter(|(_, at)| *at == t)
                        .map(|(instance, _)| instance.to_string())
                        .collect(),
                    core,
                    pe: pe.map(String::from),
                    host: None,
                })
                .filter(|t| !t.operators.is_empty())
                .collect();
            threads[0].operators.extend(stray.map(String::from));
            PlanFile {
                queue_capacity,
                threads,
                edges,
                ..PlanFile::default()
            }
        })
}

#[test]
fn the_samples_decode_and_plan() {
    for text in PLANS {
        let file = PlanFile::read(Path::new("p.toml"), text).unwrap();
        plan(
            &common::graph(),
            &PlanRequest::File("p.toml".into(), file),
            &PlanOptions::default(),
        )
        .unwrap();
    }
    HostsFile::read(Path::new("h.toml"), HOSTS).unwrap();
}

proptest! {
    // No regression files: the suite stays offline and leaves nothing behind; a failure prints
    // its minimal input.
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_plan_files_never_panic(sample in 0..PLANS.len(), edits in edits()) {
        decode_plan(&mutate(PLANS[sample], &edits));
    }

    #[test]
    fn mutated_hosts_files_never_panic(edits in edits()) {
        decode_hosts(&mutate(HOSTS, &edits));
    }

    #[test]
    fn plan_files_of_any_fields_never_panic_the_planner(file in plan_file()) {
        let text = toml::to_string(&file).expect("a plan file serializes");
        decode_plan(&text);
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC*", bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        decode_plan(&text);
        decode_hosts(&text);
        let lossy = String::from_utf8_lossy(&bytes);
        decode_plan(&lossy);
        decode_hosts(&lossy);
    }
}
