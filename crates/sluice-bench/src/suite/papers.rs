//! `docs/benchmarks.md`: the latest run's figures beside the ones the papers published (Vega,
//! IBM InfoSphere Streams 2.0, TurboStream, the TCD parallel runtime), the machine described,
//! then every table of the report. The papers' figures are typed in here from their text and
//! tables; where a paper gives only a plot, the page quotes what its text says.
//!
//! The papers' part of the page also holds sections written by hand (each issue's figures, with
//! its commands and profile). A regeneration replaces the sections it writes and keeps every
//! other `###` section of the page it replaces where it stood, so measuring again never loses them.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use serde_json::Value;

use super::report::{self, Table};
use super::rows::{self, Row};
use crate::foundation::stats::si;

/// The tuple sizes of the IBM report's tables.
const IBM_SIZES: [usize; 13] = [
    4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
];
/// IBM Table 1: Streams' TCP transport, intranode, Gbit/s.
const IBM_TCP: [f64; 13] = [
    0.03, 0.06, 0.12, 0.24, 0.71, 1.58, 2.51, 4.29, 7.06, 11.52, 12.32, 12.49, 13.07,
];
/// IBM Table 1: LLM over TCP (batching), intranode, Gbit/s.
const IBM_LLM_TCP: [f64; 13] = [
    0.16, 0.33, 0.77, 1.55, 3.46, 9.33, 10.32, 10.18, 9.42, 8.59, 6.59, 5.80, 7.74,
];
/// IBM Table 5: fused operators, Gbit/s.
const IBM_FUSED: [f64; 13] = [
    0.66, 1.32, 2.47, 4.94, 9.91, 19.81, 42.08, 84.42, 169.49, 337.85, 677.63, 1355.20, 2711.61,
];
/// IBM Table 5: a threaded port, Gbit/s.
const IBM_THREADED: [f64; 13] = [
    0.09, 0.14, 0.36, 0.67, 1.33, 2.54, 5.47, 10.46, 21.19, 39.95, 71.21, 179.81, 349.17,
];
/// IBM Table 3: TCP with normal tuples, intranode, Gbit/s (facade: `IBM_TCP`).
const IBM_TCP_NORMAL: [f64; 13] = [
    0.03, 0.06, 0.12, 0.24, 0.59, 1.55, 2.39, 4.01, 6.59, 10.14, 11.30, 11.62, 11.63,
];
/// IBM Table 6: fan-out, Gbit/s, by receivers 1..6: TCP at 22, 108, 1004 bytes, then LLM-TCP.
const IBM_FANOUT: [[f64; 6]; 6] = [
    [0.14, 0.91, 2.89, 0.77, 2.44, 3.34],
    [0.03, 0.15, 2.88, 0.78, 2.89, 3.54],
    [0.02, 0.11, 2.94, 0.92, 2.84, 3.46],
    [0.02, 0.11, 2.83, 0.92, 2.82, 3.67],
    [0.02, 0.11, 2.78, 0.94, 2.98, 3.73],
    [0.02, 0.11, 2.78, 0.93, 3.09, 3.83],
];

fn find<'a>(rows: &'a [Row], experiment: &str, transport: &str, size: usize) -> Option<&'a Row> {
    rows.iter().find(|r| {
        r.experiment == experiment
            && !r.skipped
            && r.peer.is_none()
            && r.transport.as_deref() == Some(transport)
            && r.tuple_size == Some(size)
    })
}

fn gbit(row: Option<&Row>) -> String {
    row.and_then(|r| r.gbit_per_sec)
        .map_or("-".into(), |g| format!("{g:.3}"))
}

fn ibm_throughput(rows: &[Row]) -> Table {
    let mut t = Table {
        title: "Throughput beside IBM Streams 2.0 (Tables 1 and 5), Gbit/s".into(),
        note: "IBM: HS-22 blades, 2 x 4-core Xeon X5570 at 2.98 GHz, RHEL 5.5, source and sink on one host. Sluice: this machine, facade tuples.".into(),
        header: [
            "tuple bytes",
            "IBM fused",
            "Sluice fused",
            "IBM threaded port",
            "Sluice threaded",
            "IBM TCP",
            "Sluice tcp",
            "IBM LLM-TCP (batched)",
            "Sluice tcp-batched",
            "Sluice shm-vega",
            "Sluice shm-osr",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
    };
    for (i, size) in IBM_SIZES.iter().copied().enumerate() {
        let ours = |tr| gbit(find(rows, "throughput", tr, size));
        t.rows.push(vec![
            size.to_string(),
            format!("{:.2}", IBM_FUSED[i]),
            ours("fused"),
            format!("{:.2}", IBM_THREADED[i]),
            ours("threaded"),
            format!("{:.2}", IBM_TCP[i]),
            ours("tcp"),
            format!("{:.2}", IBM_LLM_TCP[i]),
            ours("tcp-batched"),
            ours("shm-vega"),
            ours("shm-osr"),
        ]);
    }
    t
}

fn ibm_encoding(rows: &[Row]) -> Table {
    let mut t = Table {
        title: "Facade against normal tuples beside IBM Table 3 (TCP, intranode), Gbit/s".into(),
        note: String::new(),
        header: [
            "tuple bytes",
            "IBM TCP facade",
            "IBM TCP normal",
            "Sluice tcp facade",
            "Sluice tcp normal",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
    };
    for (i, size) in IBM_SIZES.iter().copied().enumerate() {
        let normal = rows.iter().find(|r| {
            r.experiment == "encoding"
                && !r.skipped
                && r.transport.as_deref() == Some("tcp")
                && r.tuple_size == Some(size)
        });
        t.rows.push(vec![
            size.to_string(),
            format!("{:.2}", IBM_TCP[i]),
            format!("{:.2}", IBM_TCP_NORMAL[i]),
            gbit(find(rows, "throughput", "tcp", size)),
            gbit(normal),
        ]);
    }
    t
}

fn ibm_fanout(rows: &[Row]) -> Table {
    let sizes = [22, 108, 1004];
    let mut header = vec!["receivers".to_string()];
    for s in sizes {
        header.push(format!("IBM TCP {s} B"));
        header.push(format!("raw TCP {s} B"));
        header.push(format!("Sluice tcp {s} B"));
    }
    for s in sizes {
        header.push(format!("IBM LLM-TCP {s} B"));
        header.push(format!("Sluice tcp-batched {s} B"));
    }
    let mut t = Table {
        title: "Fan-out beside IBM Table 6, aggregate Gbit/s".into(),
        note: "IBM's plain TCP fell tenfold from one receiver to two at 22 and 108 bytes; its batching LLM-TCP did not. Raw TCP (one write per tuple to each socket) is IBM's plain TCP measured here in the same run as Sluice's tcp.".into(),
        header,
        rows: Vec::new(),
    };
    for (i, ibm) in IBM_FANOUT.iter().enumerate() {
        let n = i + 1;
        let ours = |tr: &str, size| {
            rows.iter().find(|r| {
                r.experiment == "fanout"
                    && !r.skipped
                    && r.transport.as_deref() == Some(tr)
                    && r.tuple_size == Some(size)
                    && r.receivers == Some(n)
            })
        };
        let mut row = vec![n.to_string()];
        for (j, s) in sizes.iter().enumerate() {
            let tcp = ours("tcp", *s);
            row.push(format!("{:.2}", ibm[j]));
            row.push(
                tcp.and_then(|r| r.baseline.as_ref())
                    .map_or("-".into(), |b| format!("{:.3}", b.gbit_per_sec)),
            );
            row.push(gbit(tcp));
        }
        for (j, s) in sizes.iter().enumerate() {
            row.push(format!("{:.2}", ibm[3 + j]));
            row.push(gbit(ours("tcp-batched", *s)));
        }
        t.rows.push(row);
    }
    t
}

fn vega(rows: &[Row]) -> Table {
    let mut t = Table {
        title: "Shared memory beside Vega (Figure 7), tuples/s and one-way latency".into(),
        note: "Vega: IBM x3950 X5, 4 x 8-core Xeon X7560 at 2.26 GHz, DVFS off; Fused 25.3-27.8 M tuples/s at every size and about 0.1 us; Vega 10.1 M tuples/s at 32 B down to 0.8 M/s at 16 KB, 0.5-0.7 us one way for 8-512 B. Sluice: this machine; latency at the lowest rate measured.".into(),
        header: [
            "tuple bytes",
            "Vega paper",
            "Sluice shm-vega tuples/s",
            "Sluice shm-osr tuples/s",
            "Sluice fused tuples/s",
            "Sluice shm-vega p50 us",
            "Sluice fused p50 us",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
    };
    let rate = rows
        .iter()
        .filter(|r| r.experiment == "latency")
        .filter_map(|r| r.target_rate)
        .min();
    let latency = |tr: &str, size| {
        rows.iter()
            .find(|r| {
                r.experiment == "latency"
                    && !r.skipped
                    && r.peer.is_none()
                    && r.transport.as_deref() == Some(tr)
                    && r.tuple_size == Some(size)
                    && r.target_rate == rate
            })
            .and_then(|r| r.latency_ns)
            .map_or("-".into(), |l| report::us(l.p50))
    };
    for size in IBM_SIZES.iter().copied().filter(|&s| s >= 8) {
        let paper = match size {
            8..=512 => "0.5-0.7 us".to_string(),
            _ => String::new(),
        } + match size {
            32 => "; 10.1 M/s",
            16384 => "0.8 M/s",
            _ => "",
        };
        let tps = |tr| {
            find(rows, "throughput", tr, size)
                .and_then(|r| r.tuples_per_sec)
                .map_or("-".into(), si)
        };
        t.rows.push(vec![
            size.to_string(),
            paper,
            tps("shm-vega"),
            tps("shm-osr"),
            tps("fused"),
            latency("shm-vega", size),
            latency("fused", size),
        ]);
    }
    t
}

const TURBOSTREAM: &str = "TurboStream (Figure 8; 8 nodes of 16 x 1.2 GHz cores, JVM) gives its results as plots; its text says: with a 2 MB OSRBuffer at 100 messages/s, Netty's mean latency stays about twice the OSRBuffer's from 10 KB to 320 KB (8a); at 3,000 messages/s Netty's latency climbs (Figure 2c: 11.43 ms for 10 KB and 192.36 ms for 40 KB messages) while the OSRBuffer stays low (8b), in all a 45.64% to 99.30% lower latency; the best ring is 50 to 100 times the message (8c). Sluice's shm-osr plays the OSRBuffer, tcp plays Netty.";

const IBM_LATENCY: &str = "IBM Streams 2.0's latency test (source -> relay -> sink, round trip, at 1,000 and 5,000 tuples/s) found 15 to 30 us round trip within a node for 128 to 512-byte tuples over any transport, and 57 us for 256-byte normal tuples over TCP on 1 GbE between nodes. Sluice measures the same way: the round trip from the sender through a reflector process on the other core and back, at the same two rates, with raw TCP beside it.";

const TURBOSTREAM_FIG10: &str = "TurboStream's Figure 10 runs the Storm Throughput Test topology on JStorm and on TurboStream (8 nodes of 16 x 1.2 GHz cores, JVM) at 1,000 to 80,000 tuples/s and plots the average processing latency; its text says: at about 1,000 tuples/s JStorm's average is about 2.16 times TurboStream's; at 40,000 tuples/s JStorm's reaches 142.53 ms while TurboStream's stays below 20 ms; at 80,000 tuples/s JStorm's backpressure holds the input at 50,000 tuples/s (queuing the rest in memory) and TurboStream's average is 27.90 ms. Sluice runs the same topology (`sluice bench topology throughput-test`, defaults: 8 identity and 8 count tasks, 100-byte items) on one two-core machine under each plan; a reached rate marked * is one its bounded queues held back.";

/// The Throughput Test's mean latency at each rate beside what TurboStream's text gives.
fn turbostream_fig10(rows: &[Row]) -> Table {
    let plans = ["fused", "threaded", "processes"];
    let mut header = ["tuples/s", "JStorm (paper)", "TurboStream (paper)"]
        .map(String::from)
        .to_vec();
    for plan in plans {
        header.push(format!("Sluice {plan} mean / p99 us"));
    }
    let mut t = Table {
        title: "The Throughput Test topology beside TurboStream (Figure 10), average latency"
            .into(),
        note: TURBOSTREAM_FIG10.into(),
        header,
        rows: Vec::new(),
    };
    for rate in super::matrix::TOPOLOGY_RATES {
        let (jstorm, turbostream) = match rate {
            1_000 => ("about 2.16 x TurboStream", ""),
            40_000 => ("142.53 ms", "below 20 ms"),
            80_000 => ("held at 50,000 tuples/s", "27.90 ms"),
            _ => ("", ""),
        };
        let mut cells = vec![rate.to_string(), jstorm.into(), turbostream.into()];
        for plan in plans {
            let run = rows.iter().find(|r| {
                r.experiment == "topology"
                    && !r.skipped
                    && r.app.as_deref() == Some("throughput-test")
                    && r.plan.as_deref() == Some(plan)
                    && r.target_rate == Some(rate)
            });
            cells.push(run.map_or("-".into(), |r| {
                let held_back =
                    r.input_per_sec.unwrap_or(0.0) < report::REACHED_SHARE * rate as f64;
                let latency = r.latency_ns.map_or("-".into(), |l| {
                    format!("{} / {}", report::us(l.mean), report::us(l.p99))
                });
                format!("{latency}{}", if held_back { " *" } else { "" })
            }));
        }
        t.rows.push(cells);
    }
    t
}

const TCD_PIPELINES: &str = "Muralidharan, Casey and Gregg (Trinity College Dublin) built compression (zlib, 1.28 GB of generated data) and encryption (OpenSSL, 2.56 GB) pipelines of senders and receivers over UDP on netmap between two servers of 24 logical cores each, and plot the speedup over one sender and one receiver (Figure 4): compression scales to 12x with small packets and 10x with large ones, encryption to 12x, and every application beyond 8x; compression needs more senders than receivers (it costs more than decompression), encryption and decryption are balanced; speedup dips past 12 senders, where the second socket's memory comes in. Sluice runs the same pipelines on one host (`sluice run compress|encrypt`), senders and receivers as threads joined by threaded ports (`sluice bench pipeline`, whose `--plan engine-processes` joins processes by shared memory instead, and `--transport udp-mq` joins the engines by UDP over several queues as the paper did, a flow to a queue), and measures the speedup against a serial program doing the same work in the same run, a stricter yardstick than the paper's one sender and one receiver. With two cores, 2x is the ceiling. Encryption uses `ring`'s AES-256-GCM: on this machine it ran 2.5 to 5 times faster than the `aes-gcm` crate (about 0.6 GB/s for encryption and decryption together at 4 KiB and 64 KiB packets, against 1.6 to 2.9 GB/s for `ring`).";

const TURBOSTREAM_TABLE_II: &str = "TurboStream's Table II gives, for JStorm's default placement, the share of the inter-worker traffic that stays inside a node: SOL (a spout and five bolts of five tasks) with 8 workers on 8, 4 and 2 nodes keeps 0%, 14.29% and 42.86% inside (100%, 85.71% and 57.14% cross nodes); the Throughput Test on 4N4W, 2N4W, 2N2W and 1N2W keeps 0%, 33.33%, 0% and 100%. Its coarse-grained scheduler consolidates communicating tasks before placing them, which cut SOL's latency by up to 59.84% against JStorm. Below, Sluice's placement (`sluice plan APP --optimize placement --hosts FILE`: the paper's Algorithms 1 and 2, a guard against parents heavier than a slot's share, and a refinement by moves and swaps) beside round robin and Storm's even scheduler on simulated clusters of 8 worker slots, with the traffic the topologies imply at declared rates (every source instance at rate 1, every operator passing on what it receives); load imbalance is the most loaded host's load per slot over the mean. Round robin and Storm's even scheduler coincide when every host has as many slots; they part on hosts with different numbers of slots. Computed, not measured: `sluice bench placement` prints the same table.";

/// Writes the page to `path`.
/// The heading that opens the papers' part of the page, and the one that follows that part.
const PAPERS: &str = "## Beside the papers\n\n";
const EVERY_TABLE: &str = "## Every table of the run\n\n";

/// The papers' part of a page written before, if it has one.
fn papers_part(page: &str) -> Option<&str> {
    let start = page.find(PAPERS)? + PAPERS.len();
    let end = page[start..]
        .find(EVERY_TABLE)
        .map_or(page.len(), |e| start + e);
    Some(&page[start..end])
}

/// A part's `### ` sections, each as its heading line and its whole text (up to the next one).
fn sections_of(part: &str) -> Vec<(&str, &str)> {
    let mut starts: Vec<usize> = part
        .match_indices("### ")
        .map(|(at, _)| at)
        .filter(|&at| at == 0 || part.as_bytes()[at - 1] == b'\n')
        .collect();
    starts.push(part.len());
    starts
        .windows(2)
        .map(|w| {
            let text = &part[w[0]..w[1]];
            (text.lines().next().unwrap_or_default(), text)
        })
        .collect()
}

/// The papers' part as generated, merged into the one it replaces: each section of the old part
/// that is generated again takes its new text in its old place, each the suite does not write
/// (a hand-written one) stays as it is, and generated sections new to the page come last.
fn keep_hand_written(generated: &str, replaced: &str) -> String {
    let fresh = sections_of(generated);
    let mut merged = String::new();
    let mut placed = vec![false; fresh.len()];
    for (heading, text) in sections_of(replaced) {
        match fresh.iter().position(|(h, _)| *h == heading) {
            Some(i) => {
                merged.push_str(fresh[i].1);
                placed[i] = true;
            }
            None => merged.push_str(text),
        }
    }
    for ((_, text), _) in fresh.iter().zip(&placed).filter(|(_, placed)| !**placed) {
        merged.push_str(text);
    }
    merged
}

pub(crate) fn write_docs(path: &Path, records: &[Value]) -> anyhow::Result<()> {
    let rows = rows::rows(records);
    let mut out = String::new();
    out.push_str("# Benchmarks\n\n");
    out.push_str("The tables are generated by `sluice bench suite` from its latest full run; the sections of \"Beside the papers\" that it does not write are written by hand and kept where they stand when it regenerates the page. To measure again and regenerate this page (about 25 minutes on two cores):\n\n");
    out.push_str("```\ncargo build --release -p sluice --features peers\ntarget/release/sluice bench suite --docs docs/benchmarks.md\n```\n\n");
    out.push_str("To rebuild it from an earlier run without measuring: `sluice bench suite --from bench-results/DIR/results.jsonl --docs docs/benchmarks.md`. That directory also holds `report.html` and the plots.\n\n");
    out.push_str("**Caveat.** The machine below is a shared virtual machine with two cores, with other people compiling on it during the run: every figure is the median of a few short runs and can move by tens of percent from one run to the next. Ratios to the baselines measured in the same run (next to each figure) are steadier than the absolute figures. The papers used dedicated machines with many cores, daemons off and threads pinned; compare shapes (how a figure changes with size, receivers or rate) more than absolute values.\n\n");
    let sections = report::sections(&rows);
    if let Some(machine) = sections.first() {
        for t in &machine.tables {
            out.push_str(&t.markdown());
        }
    }
    out.push_str(PAPERS);
    let mut papers = String::new();
    papers.push_str(&vega(&rows).markdown());
    papers.push_str(&ibm_throughput(&rows).markdown());
    papers.push_str(&ibm_encoding(&rows).markdown());
    papers.push_str(&ibm_fanout(&rows).markdown());
    let _ = writeln!(
        papers,
        "### Latency beside IBM Streams 2.0\n\n{IBM_LATENCY}\n"
    );
    let round_trips = report::round_trip_table(&rows);
    if !round_trips.rows.is_empty() {
        papers.push_str(&round_trips.markdown().replacen("### ", "#### ", 1));
    }
    let _ = writeln!(
        papers,
        "### Large messages beside TurboStream\n\n{TURBOSTREAM} The tables are under \"Large messages\" below.\n"
    );
    papers.push_str(&turbostream_fig10(&rows).markdown());
    let _ = writeln!(
        papers,
        "### Compression and encryption pipelines beside the TCD parallel runtime paper\n\n{TCD_PIPELINES}\n"
    );
    let pipelines = report::pipeline_table(&rows);
    if !pipelines.rows.is_empty() {
        papers.push_str(&pipelines.markdown().replacen("### ", "#### ", 1));
    }
    let _ = writeln!(
        papers,
        "### Placement beside TurboStream (Table II)\n\n{TURBOSTREAM_TABLE_II}\n"
    );
    papers.push_str(&crate::apps::placement_table(
        &["sol", "throughput-test"],
        &[2, 4, 8],
        8,
        &sluice_apps::Settings::default(),
    )?);
    papers.push('\n');
    let replaced = std::fs::read_to_string(path).ok();
    out.push_str(&keep_hand_written(
        &papers,
        replaced.as_deref().and_then(papers_part).unwrap_or(""),
    ));
    out.push_str(EVERY_TABLE);
    for s in sections.iter().skip(1) {
        if s.tables.iter().all(|t| t.rows.is_empty()) {
            continue;
        }
        let _ = writeln!(out, "### {}\n", s.title);
        for t in s.tables.iter().filter(|t| !t.rows.is_empty()) {
            out.push_str(&t.markdown().replacen("### ", "#### ", 1));
        }
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    std::fs::write(path, out).with_context(|| format!("write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_tables_are_whole() {
        assert_eq!(IBM_SIZES.len(), IBM_TCP.len());
        assert!(IBM_FUSED.windows(2).all(|w| w[0] < w[1]));
        let t = ibm_throughput(&[]);
        assert_eq!(t.rows.len(), 13);
        assert_eq!(t.rows[12][1], "2711.61");
        assert_eq!(t.rows[0][2], "-");
        assert_eq!(ibm_fanout(&[]).rows[1][1], "0.03");
        let fig10 = turbostream_fig10(&[]);
        assert_eq!(fig10.rows.len(), 6);
        assert_eq!(fig10.rows[4][..3], ["40000", "142.53 ms", "below 20 ms"]);
    }

    #[test]
    fn the_page_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("docs/benchmarks.md");
        let records = vec![serde_json::json!({
            "experiment": "throughput", "bench": "throughput", "transport": "tcp",
            "tuple_size": 64, "tuples_per_sec": 1e6, "gbit_per_sec": 0.512, "skipped": false
        })];
        write_docs(&path, &records).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("| 64 | 9.91 | - | 1.33 | - | 0.71 | 0.512 |"),
            "{text}"
        );
        assert!(text.contains("TurboStream"));
    }

    #[test]
    fn a_regeneration_keeps_the_hand_written_sections_where_they_stood() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("benchmarks.md");
        write_docs(&path, &[]).unwrap();
        let first = std::fs::read_to_string(&path).unwrap();
        let hand =
            "### Checkpoints by hand\n\nA figure measured by hand.\n\n#### Its profile\n\nbusy\n\n";
        let edited = first.replacen(
            "### Latency beside IBM Streams 2.0",
            &format!("{hand}### Latency beside IBM Streams 2.0"),
            1,
        );
        std::fs::write(&path, &edited).unwrap();
        write_docs(&path, &[]).unwrap();
        let second = std::fs::read_to_string(&path).unwrap();
        assert_eq!(second, edited, "the hand-written section moved or changed");
        let vega = "### Shared memory beside Vega";
        assert!(second.find(hand).unwrap() < second.find("### Latency beside IBM").unwrap());
        assert!(second.find(vega).unwrap() < second.find(hand).unwrap());
        assert_eq!(second.matches(vega).count(), 1);
    }
}
