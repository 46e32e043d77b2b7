//! The suite's report: tables built from the records (the same tables in `report.md` and in
//! the self-contained `report.html`, which also inlines the plots as SVG).
//!
//! Every Sluice figure stands beside its baseline (measured in the same run) and the peers
//! compared with its transport, each with the ratio Sluice / other: above 1 is faster for a
//! rate, slower for a latency.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

use super::plots;
use super::rows::{rows, Row, ORDER};
use crate::foundation::stats::si;
use crate::foundation::stats::LatencySummary;

/// A table of the report.
#[derive(Debug, Clone, Default)]
pub(crate) struct Table {
    pub(crate) title: String,
    pub(crate) note: String,
    pub(crate) header: Vec<String>,
    pub(crate) rows: Vec<Vec<String>>,
}

impl Table {
    fn new(title: impl Into<String>, note: impl Into<String>, header: &[&str]) -> Self {
        Self {
            title: title.into(),
            note: note.into(),
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// As markdown: a `###` title, the note, a pipe table.
    pub(crate) fn markdown(&self) -> String {
        let mut out = format!("### {}\n\n", self.title);
        if !self.note.is_empty() {
            let _ = writeln!(out, "{}\n", self.note);
        }
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        out.push_str(&line(&self.header));
        out.push_str(&line(&vec!["---".to_string(); self.header.len()]));
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out.push('\n');
        out
    }

    fn html(&self) -> String {
        let mut out = format!("<h3>{}</h3>\n", escape(&self.title));
        if !self.note.is_empty() {
            let _ = writeln!(out, "<p>{}</p>", escape(&self.note));
        }
        out.push_str("<table>\n<tr>");
        for h in &self.header {
            let _ = write!(out, "<th>{}</th>", escape(h));
        }
        out.push_str("</tr>\n");
        for row in &self.rows {
            out.push_str("<tr>");
            for cell in row {
                let _ = write!(out, "<td>{}</td>", escape(cell));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table>\n");
        out
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A section of the report: tables, and the plots that go with them.
pub(crate) struct Section {
    pub(crate) title: &'static str,
    pub(crate) tables: Vec<Table>,
    pub(crate) plots: Vec<&'static str>,
}

/// Microseconds with two decimals.
pub(crate) fn us(ns: f64) -> String {
    format!("{:.2}", ns / 1e3)
}

/// A ratio with two decimals, or a dash.
pub(crate) fn times(ratio: Option<f64>) -> String {
    ratio.map_or_else(|| "-".to_string(), |r| format!("{r:.2}"))
}

fn ratio(ours: f64, theirs: f64) -> Option<f64> {
    crate::foundation::stats::ratio(ours, theirs)
}

fn sorted_unique<T: Ord + Clone>(values: impl Iterator<Item = T>) -> Vec<T> {
    let mut v: Vec<T> = values.collect();
    v.sort();
    v.dedup();
    v
}

/// The peers' figures for a Sluice row: `name value (xratio)` for every peer compared with
/// its transport at the same bench, size and rate.
fn peer_cells(rows: &[Row], ours: &Row) -> String {
    let peers: Vec<String> = rows
        .iter()
        .filter(|p| {
            p.peer.is_some()
                && !p.skipped
                && p.compared_with.iter().any(|t| t == ours.transport())
                && p.bench == ours.bench
                && p.size() == ours.size()
                && p.target_rate == ours.target_rate
        })
        .map(|p| {
            let name = p.peer.as_deref().unwrap_or("");
            if ours.latency() {
                let (a, b) = (ours.latency_ns, p.latency_ns);
                let r = a.zip(b).and_then(|(a, b)| ratio(a.p50, b.p50));
                format!(
                    "{name} {} us (x{})",
                    b.map_or("-".into(), |l| us(l.p50)),
                    times(r)
                )
            } else {
                format!(
                    "{name} {} (x{})",
                    si(p.tps()),
                    times(ratio(ours.tps(), p.tps()))
                )
            }
        })
        .collect();
    if peers.is_empty() {
        "-".to_string()
    } else {
        peers.join("; ")
    }
}

fn machine_section(rows: &[Row]) -> Section {
    let mut t = Table::new("Where and what", "", &["", ""]);
    if let Some(m) = rows.iter().find_map(|r| r.machine.clone()) {
        t.rows.push(vec!["CPU".into(), m.cpu]);
        t.rows.push(vec!["cores".into(), m.cores.to_string()]);
        t.rows.push(vec!["kernel".into(), m.kernel]);
        t.rows
            .push(vec!["memory".into(), format!("{} GiB", m.memory_gib)]);
    }
    if let Some(c) = rows.iter().find_map(|r| r.commit.clone()) {
        t.rows.push(vec!["commit".into(), c]);
    }
    let skipped = rows.iter().filter(|r| r.skipped).count();
    t.rows.push(vec![
        "measurements".into(),
        format!("{} ({skipped} skipped)", rows.len()),
    ]);
    let mut skips = Table::new(
        "Skipped",
        "Measurements that could not be made here, and why.",
        &["experiment", "what", "reason"],
    );
    for r in rows.iter().filter(|r| r.skipped) {
        let what = format!(
            "{} {} {} B{}",
            r.bench.as_deref().unwrap_or(""),
            r.peer.as_deref().unwrap_or(r.transport()),
            r.size(),
            r.target_rate
                .map_or(String::new(), |n| format!(" at {n}/s"))
        );
        skips.rows.push(vec![
            r.experiment.clone(),
            what,
            r.reason.clone().unwrap_or_default(),
        ]);
    }
    let mut tables = vec![t];
    if !skips.rows.is_empty() {
        tables.push(skips);
    }
    Section {
        title: "Machine",
        tables,
        plots: vec![],
    }
}

fn hardware_section(rows: &[Row]) -> Section {
    let mut tables = Vec::new();
    if let Some(h) = rows.iter().find(|r| r.is("hardware")) {
        let mut t = Table::new(
            "The hardware",
            "`sluice bench baseline`: what nothing between two cores can beat.",
            &["measure", "figure"],
        );
        t.rows.push(vec![
            "cache line one way, core 0 -> 1".into(),
            h.cacheline_oneway_ns
                .map_or("- (one core)".into(), |ns| format!("{ns:.1} ns")),
        ]);
        for (what, figure) in [
            (
                "two lines, one writer each (a queue's hand-off), one way",
                h.handoff_oneway_ns,
            ),
            (
                "one line, clock-stamped one-way (the least a stamped latency can show)",
                h.stamped_oneway_ns,
            ),
        ] {
            if let Some(ns) = figure {
                t.rows.push(vec![what.into(), format!("{ns:.1} ns")]);
            }
        }
        for m in &h.memcpy {
            t.rows.push(vec![
                format!("memcpy, one core, {} KiB", m.bytes >> 10),
                format!("{:.1} Gbit/s", m.gbit_per_sec),
            ]);
        }
        tables.push(t);
    }
    let mut raw = Table::new(
        "Raw TCP on loopback",
        "One blocking write() per tuple on a TCP_NODELAY socket, measured beside the tcp throughput runs (the IBM report's \"tcp\" column).",
        &["tuple bytes", "tuples/s", "Gbit/s"],
    );
    for r in rows
        .iter()
        .filter(|r| r.is("throughput") && r.transport() == "tcp")
    {
        if let Some(b) = &r.baseline {
            raw.rows.push(vec![
                r.size().to_string(),
                si(b.tuples_per_sec),
                format!("{:.3}", b.gbit_per_sec),
            ]);
        }
    }
    if !raw.rows.is_empty() {
        tables.push(raw);
    }
    Section {
        title: "Baselines",
        tables,
        plots: vec![],
    }
}

/// Gbit/s and tuples/s by size (rows) and transport (columns), the papers' layout.
pub(crate) fn throughput_grid(rows: &[Row], experiment: &str, gbit: bool) -> Table {
    let picked: Vec<&Row> = rows
        .iter()
        .filter(|r| r.is(experiment) && r.peer.is_none() && !r.normal())
        .collect();
    let transports: Vec<&str> = ORDER
        .iter()
        .copied()
        .filter(|t| picked.iter().any(|r| r.transport() == *t))
        .collect();
    let (title, unit) = if gbit {
        ("Throughput, Gbit/s (IBM Tables 1 and 5)", "Gbit/s")
    } else {
        ("Throughput, tuples/s (Vega Figure 7b)", "tuples/s")
    };
    let mut header = vec!["tuple bytes"];
    header.extend(transports.iter().copied());
    let mut t = Table::new(
        title,
        format!("Sender -> receiver, facade tuples, {unit} at the receiver (median of the runs)."),
        &header,
    );
    for size in sorted_unique(picked.iter().map(|r| r.size())) {
        let mut row = vec![size.to_string()];
        for tr in &transports {
            let cell = picked
                .iter()
                .find(|r| r.size() == size && r.transport() == *tr)
                .map_or("-".to_string(), |r| {
                    if gbit {
                        format!("{:.3}", r.gbit_per_sec.unwrap_or(0.0))
                    } else {
                        si(r.tps())
                    }
                });
            row.push(cell);
        }
        t.rows.push(row);
    }
    t
}

fn throughput_section(rows: &[Row]) -> Section {
    let mut detail = Table::new(
        "Throughput against the baselines and the peers",
        "x = Sluice / other (above 1: Sluice is faster).",
        &[
            "transport",
            "tuple bytes",
            "tuples/s",
            "Gbit/s",
            "baseline",
            "baseline tuples/s",
            "x baseline",
            "peers",
        ],
    );
    for tr in ORDER {
        for r in rows
            .iter()
            .filter(|r| r.is("throughput") && r.transport() == tr && r.peer.is_none())
        {
            let b = r.baseline.clone().unwrap_or_default();
            detail.rows.push(vec![
                tr.to_string(),
                r.size().to_string(),
                si(r.tps()),
                format!("{:.3}", r.gbit_per_sec.unwrap_or(0.0)),
                b.name.clone(),
                si(b.tuples_per_sec),
                times(ratio(r.tps(), b.tuples_per_sec)),
                peer_cells(rows, r),
            ]);
        }
    }
    Section {
        title: "Throughput",
        tables: vec![
            throughput_grid(rows, "throughput", false),
            throughput_grid(rows, "throughput", true),
            detail,
        ],
        plots: vec![plots::THROUGHPUT, plots::THROUGHPUT_GBIT],
    }
}

fn latency_section(rows: &[Row]) -> Section {
    let mut t = Table::new(
        "Latency (Vega Figure 7a, IBM latency test)",
        "One-way latency. In process and over shared memory (method \"one way\"): the receiver subtracts the CLOCK_MONOTONIC send time carried in the tuple (Vega Figure 7a). Over the network (method \"RTT/2\"): half the round trip from the sender through a reflector process on the other core and back over the same kind of transport (Vega V.A.1), the raw-TCP baseline and ZeroMQ over tcp:// the same way. Microseconds; x = Sluice p50 / other p50 (below 1: Sluice is faster).",
        &[
            "transport",
            "method",
            "tuple bytes",
            "tuples/s",
            "p50 us",
            "p99 us",
            "p99.9 us",
            "max us",
            "baseline p50 us",
            "x baseline",
            "peers p50",
        ],
    );
    for rate in sorted_unique(
        rows.iter()
            .filter(|r| r.is("latency"))
            .filter_map(|r| r.target_rate),
    ) {
        for tr in ORDER {
            for r in rows.iter().filter(|r| {
                r.is("latency")
                    && r.peer.is_none()
                    && r.transport() == tr
                    && r.target_rate == Some(rate)
            }) {
                let l = r.latency_ns.unwrap_or(LatencySummary {
                    p50: 0.0,
                    p99: 0.0,
                    p999: 0.0,
                    mean: 0.0,
                    max: 0.0,
                    samples: 0,
                });
                let b = r.baseline.clone().unwrap_or_default();
                let bl = b.latency_ns.map(|x| x.p50);
                t.rows.push(vec![
                    tr.to_string(),
                    r.method().to_string(),
                    r.size().to_string(),
                    rate.to_string(),
                    us(l.p50),
                    us(l.p99),
                    us(l.p999),
                    us(l.max),
                    format!("{} {}", b.name, bl.map_or("-".into(), us)),
                    times(bl.and_then(|b| ratio(l.p50, b))),
                    peer_cells(rows, r),
                ]);
            }
        }
    }
    Section {
        title: "Latency",
        tables: vec![t],
        plots: vec![plots::LATENCY],
    }
}

/// The round-trip table (the IBM latency test): every Sluice measurement and peer that timed
/// round trips through a reflector, by rate, transport and size.
pub(crate) fn round_trip_table(rows: &[Row]) -> Table {
    let mut t = Table::new(
        "Round trip through a reflector (IBM latency test)",
        "The sender stamps each tuple and sends it at a fixed rate to a reflector process on the other core, which sends it back over the same kind of transport; the sender, also the receiver, reads the same clock when it comes back. Raw TCP is tcp's baseline (one write per tuple, the reflector writing back what it reads); the hardware's round trip is twice the cache-line transfer. Microseconds.",
        &[
            "transport",
            "tuple bytes",
            "tuples/s",
            "p50 us",
            "p99 us",
            "p99.9 us",
            "max us",
            "baseline p50 us",
            "baseline p99 us",
            "x baseline p50",
        ],
    );
    let trips = |r: &Row| !r.skipped && r.round_trip_ns.is_some() && !r.ping_pong();
    for rate in sorted_unique(
        rows.iter()
            .filter(|r| trips(r))
            .filter_map(|r| r.target_rate),
    ) {
        let mut seen = std::collections::HashSet::new();
        let names = ORDER.iter().map(|t| t.to_string()).chain(
            rows.iter()
                .filter(|r| trips(r))
                .filter_map(|r| r.peer.clone()),
        );
        for name in names {
            let mut mine: Vec<&Row> = rows
                .iter()
                .filter(|r| {
                    trips(r)
                        && r.target_rate == Some(rate)
                        && r.peer.as_deref().unwrap_or(r.transport()) == name
                })
                .collect();
            mine.sort_by_key(|r| r.size());
            for r in mine {
                if !seen.insert((name.clone(), r.size())) {
                    continue;
                }
                let Some(l) = r.round_trip_ns else { continue };
                let b = r.baseline.clone().unwrap_or_default();
                let bl = b.round_trip_ns;
                t.rows.push(vec![
                    name.clone(),
                    r.size().to_string(),
                    rate.to_string(),
                    us(l.p50),
                    us(l.p99),
                    us(l.p999),
                    us(l.max),
                    bl.map_or("-".into(), |x| format!("{} {}", b.name, us(x.p50))),
                    bl.map_or("-".into(), |x| us(x.p99)),
                    times(bl.and_then(|b| ratio(l.p50, b.p50))),
                ]);
            }
        }
    }
    t
}

/// The ping-pong table: the rings' one-way latency with one tuple in flight, back to back,
/// beside the cache-line ping-pong and the two-line hand-off of the same runs.
fn ping_pong_table(rows: &[Row]) -> Table {
    let mut t = Table::new(
        "Ping-pong through a reflector (one tuple in flight)",
        "As the round trip above, but the sender sends the next tuple as soon as the previous one is back, the shape of the cache-line ping-pong (one line both cores write) and of the two-line hand-off (each core writes a line of its own and polls the other's, as in every single-producer queue), both measured at each baseline run. One way = half the round trip. Nanoseconds.",
        &[
            "transport",
            "tuple bytes",
            "p50 ns",
            "p99 ns",
            "cache line ns",
            "x cache line",
            "x hand-off",
        ],
    );
    for name in ORDER {
        for r in rows
            .iter()
            .filter(|r| !r.skipped && r.ping_pong() && r.transport() == name)
        {
            let Some(l) = r.latency_ns else { continue };
            let line = r.baseline.as_ref().and_then(|b| b.latency_ns);
            t.rows.push(vec![
                name.to_string(),
                r.size().to_string(),
                format!("{:.0}", l.p50),
                format!("{:.0}", l.p99),
                line.map_or("-".into(), |b| format!("{:.1}", b.p50)),
                times(line.and_then(|b| ratio(l.p50, b.p50))),
                times(r.p50_ratio_to_handoff),
            ]);
        }
    }
    t
}

fn round_trip_section(rows: &[Row]) -> Section {
    Section {
        title: "Round trip",
        tables: vec![round_trip_table(rows), ping_pong_table(rows)],
        plots: vec![],
    }
}

fn encoding_section(rows: &[Row]) -> Section {
    let mut t = Table::new(
        "Facade against normal tuples (IBM Table 3)",
        "Throughput in Gbit/s of fixed-size facade tuples (read in place) and normal tuples (a serialized byte vector) of the same size.",
        &["transport", "tuple bytes", "facade Gbit/s", "normal Gbit/s", "normal / facade"],
    );
    for tr in ORDER {
        for n in rows
            .iter()
            .filter(|r| r.is("encoding") && r.transport() == tr && r.normal())
        {
            let facade = rows.iter().find(|f| {
                f.is("throughput") && f.transport() == tr && f.size() == n.size() && !f.normal()
            });
            let f_gbit = facade.and_then(|f| f.gbit_per_sec);
            let n_gbit = n.gbit_per_sec.unwrap_or(0.0);
            t.rows.push(vec![
                tr.to_string(),
                n.size().to_string(),
                f_gbit.map_or("-".into(), |g| format!("{g:.3}")),
                format!("{n_gbit:.3}"),
                times(f_gbit.and_then(|f| ratio(n_gbit, f))),
            ]);
        }
    }
    Section {
        title: "Encoding",
        tables: vec![t],
        plots: vec![],
    }
}

/// The transport whose fan-out baseline (raw TCP, one writer to every socket) the fan-out
/// grid shows as a column of its own.
const RAW_TCP_OF: &str = "tcp";

/// Aggregate Gbit/s by receivers (rows) and transport x size (columns), IBM Table 6's layout,
/// with raw TCP (the baseline of `tcp`, measured in the same run) beside the transports.
pub(crate) fn fanout_grid(rows: &[Row]) -> Table {
    let picked: Vec<&Row> = rows.iter().filter(|r| r.is("fanout")).collect();
    // (transport, size, whether the column is that transport's baseline)
    let columns: Vec<(String, usize, bool)> = sorted_unique(picked.iter().map(|r| r.size()))
        .into_iter()
        .flat_map(|size| {
            ORDER
                .iter()
                .filter(|t| {
                    picked
                        .iter()
                        .any(|r| r.transport() == **t && r.size() == size)
                })
                .flat_map(move |t| {
                    let raw = (*t == RAW_TCP_OF).then(|| (t.to_string(), size, true));
                    std::iter::once((t.to_string(), size, false)).chain(raw)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let header: Vec<String> = std::iter::once("receivers".to_string())
        .chain(columns.iter().map(|(t, s, raw)| {
            if *raw {
                format!("raw TCP {s} B")
            } else {
                format!("{t} {s} B")
            }
        }))
        .collect();
    let mut t = Table {
        title: "Fan-out, aggregate Gbit/s (IBM Table 6)".into(),
        note: "One sender sends every tuple to each receiver on the same host; the figure is the sum over the receivers (each receiver's mean rate is in the next table). Raw TCP is one hand-written writer sending each tuple to every socket with a write each (IBM's plain TCP), measured in the same run as tcp.".into(),
        header,
        rows: Vec::new(),
    };
    for n in sorted_unique(picked.iter().filter_map(|r| r.receivers)) {
        let mut row = vec![n.to_string()];
        for (tr, size, raw) in &columns {
            let figure = picked
                .iter()
                .find(|r| r.transport() == tr && r.size() == *size && r.receivers == Some(n))
                .map(|r| {
                    if *raw {
                        r.baseline.as_ref().map_or(0.0, |b| b.gbit_per_sec)
                    } else {
                        r.gbit_per_sec.unwrap_or(0.0)
                    }
                });
            row.push(figure.map_or("-".into(), |g| format!("{g:.3}")));
        }
        t.rows.push(row);
    }
    t
}

fn fanout_section(rows: &[Row]) -> Section {
    let mut per = Table::new(
        "Fan-out, per receiver and against the baselines",
        "Tuples/s each receiver gets (mean), the sum, the baseline's sum (same fan-out, hand-written) and x = Sluice / baseline.",
        &[
            "transport",
            "tuple bytes",
            "receivers",
            "per receiver tuples/s",
            "sum tuples/s",
            "baseline",
            "baseline sum tuples/s",
            "x baseline",
        ],
    );
    for tr in ORDER {
        for r in rows
            .iter()
            .filter(|r| r.is("fanout") && r.transport() == tr)
        {
            let n = r.receivers.unwrap_or(1);
            let b = r.baseline.clone().unwrap_or_default();
            per.rows.push(vec![
                tr.to_string(),
                r.size().to_string(),
                n.to_string(),
                si(r.per_receiver_tuples_per_sec.unwrap_or(r.tps() / n as f64)),
                si(r.tps()),
                b.name.clone(),
                si(b.tuples_per_sec),
                times(ratio(r.tps(), b.tuples_per_sec)),
            ]);
        }
    }
    Section {
        title: "Fan-out",
        tables: vec![fanout_grid(rows), per],
        plots: vec![plots::FANOUT],
    }
}

fn large_section(rows: &[Row]) -> Section {
    let sweep_ring = |r: &Row| {
        r.transport() == "shm-osr" && r.ring_bytes != Some(super::matrix::LARGE_RING_BYTES)
    };
    let mut t = Table::new(
        "Large messages (TurboStream Figure 8a, 8b)",
        format!(
            "Normal tuples of 10 KB to 320 KB at a fixed rate; shm-osr with a {} MiB ring (TurboStream's 2 MB OSRBuffer), tcp with the latency profile. Microseconds, one way.",
            super::matrix::LARGE_RING_BYTES >> 20
        ),
        &[
            "transport",
            "message bytes",
            "messages/s",
            "mean us",
            "p50 us",
            "p99 us",
            "max us",
            "baseline",
            "baseline mean us",
        ],
    );
    // A run may measure one configuration twice (the sweep's message in the experiment's own
    // ring); the first one stands.
    let mut seen = std::collections::HashSet::new();
    for rate in sorted_unique(
        rows.iter()
            .filter(|r| r.is("large"))
            .filter_map(|r| r.target_rate),
    ) {
        for r in rows.iter().filter(|r| {
            r.is("large")
                && r.target_rate == Some(rate)
                && !sweep_ring(r)
                && seen.insert((r.transport().to_string(), r.size(), rate))
        }) {
            let l = r.latency_ns;
            let b = r.baseline.clone().unwrap_or_default();
            t.rows.push(vec![
                r.transport().to_string(),
                r.size().to_string(),
                rate.to_string(),
                l.map_or("-".into(), |l| us(l.mean)),
                l.map_or("-".into(), |l| us(l.p50)),
                l.map_or("-".into(), |l| us(l.p99)),
                l.map_or("-".into(), |l| us(l.max)),
                b.name.clone(),
                b.latency_ns.map_or("-".into(), |l| us(l.mean)),
            ]);
        }
    }
    let mut ring = Table::new(
        "The ring size large messages need (TurboStream Figure 8c)",
        format!(
            "shm-osr, {} KiB messages at {} messages/s, by ring size (TurboStream found 50 to 100 times the message best).",
            super::matrix::RING_SWEEP_SIZE >> 10,
            super::matrix::RING_SWEEP_RATE
        ),
        &["ring bytes", "ring / message", "mean us", "p99 us", "max us"],
    );
    for r in rows.iter().filter(|r| {
        r.is("large")
            && r.transport() == "shm-osr"
            && r.size() == super::matrix::RING_SWEEP_SIZE
            && r.target_rate == Some(super::matrix::RING_SWEEP_RATE)
    }) {
        let bytes = r.ring_bytes.unwrap_or(0);
        let l = r.latency_ns;
        ring.rows.push(vec![
            bytes.to_string(),
            format!("{:.1}", bytes as f64 / r.size().max(1) as f64),
            l.map_or("-".into(), |l| us(l.mean)),
            l.map_or("-".into(), |l| us(l.p99)),
            l.map_or("-".into(), |l| us(l.max)),
        ]);
    }
    ring.rows
        .sort_by_key(|row| row[0].parse::<usize>().unwrap_or(0));
    ring.rows.dedup_by(|a, b| a[0] == b[0]);
    Section {
        title: "Large messages",
        tables: vec![t, ring],
        plots: vec![plots::LARGE],
    }
}

/// The plans in the order the applications' tables list them; plan files come after.
const PLAN_ORDER: [&str; 3] = ["fused", "threaded", "processes"];

/// A table per application: a row per plan with its throughput as fast as possible beside
/// each yardstick's and the ratio to it, and its end-to-end latency at the paced run's rate.
fn apps_section(rows: &[Row]) -> Section {
    let measured: Vec<&Row> = rows.iter().filter(|r| r.experiment == "apps").collect();
    let mut tables = Vec::new();
    for app in sorted_unique(measured.iter().filter_map(|r| r.app.clone())) {
        let of_app: Vec<&Row> = measured
            .iter()
            .copied()
            .filter(|r| r.app.as_ref() == Some(&app))
            .collect();
        let unit = of_app
            .iter()
            .find_map(|r| r.unit.clone())
            .unwrap_or_default();
        let input = of_app
            .iter()
            .find_map(|r| r.input.clone())
            .unwrap_or_default();
        let rate = of_app.iter().find_map(|r| r.target_rate);
        let yardsticks: Vec<String> = of_app
            .iter()
            .find(|r| !r.yardsticks.is_empty())
            .map(|r| r.yardsticks.iter().map(|y| y.name.clone()).collect())
            .unwrap_or_default();
        let mut header = vec!["plan".to_string(), format!("{app} {unit}/s")];
        for y in &yardsticks {
            header.extend([format!("{y} {unit}/s"), format!("{app} / {y}")]);
        }
        header.extend(["p50 us".to_string(), "p99 us".to_string()]);
        let rate_note = rate.map_or_else(String::new, |r| format!(" at {r} {input}/s"));
        let mut t = Table::new(
            app.clone(),
            format!(
                "Throughput in {unit}/s as fast as possible, the application under each plan beside single-threaded hand-written programs doing the same computation on the same input (ratio below 1: the application is slower); end-to-end latency{rate_note}."
            ),
            &header.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        let mut plans = sorted_unique(of_app.iter().filter_map(|r| r.plan.clone()));
        plans.sort_by_key(|p| {
            PLAN_ORDER
                .iter()
                .position(|o| o == p)
                .unwrap_or(PLAN_ORDER.len())
        });
        for plan in plans {
            let run = |paced: bool| {
                of_app
                    .iter()
                    .find(|r| r.plan.as_ref() == Some(&plan) && r.target_rate.is_some() == paced)
            };
            let mut cells = vec![plan.clone()];
            match run(false) {
                Some(r) if r.skipped => {
                    cells.push(format!("skipped: {}", r.reason.clone().unwrap_or_default()));
                    cells.extend(
                        yardsticks
                            .iter()
                            .flat_map(|_| ["-".to_string(), "-".to_string()]),
                    );
                }
                flooded => {
                    cells.push(flooded.and_then(|r| r.per_sec).map_or("-".into(), si));
                    for y in &yardsticks {
                        let theirs =
                            flooded.and_then(|r| r.yardsticks.iter().find(|t| &t.name == y));
                        cells.push(theirs.map_or("-".into(), |t| si(t.per_sec)));
                        cells.push(times(theirs.and_then(|t| t.ratio)));
                    }
                }
            }
            let latency = run(true).and_then(|r| r.latency_ns);
            cells.push(latency.map_or("-".into(), |l| us(l.p50)));
            cells.push(latency.map_or("-".into(), |l| us(l.p99)));
            t.rows.push(cells);
        }
        tables.push(t);
    }
    Section {
        title: "Applications",
        tables,
        plots: vec![],
    }
}

/// The share of the asked rate below which a topology's spout counts as held back.
pub(crate) const REACHED_SHARE: f64 = 0.95;

/// The table of `sluice bench topology APP` (and of the suite's `topology` experiment): a row
/// per plan and rate of `runs` (the application's records), with the rate the spout reached,
/// marked when full queues held it back, and the end-to-end latency.
pub(crate) fn topology_table(app: &str, runs: &[&Row]) -> Table {
    let mut t = Table::new(
        app,
        format!(
            "End-to-end latency of each tuple from the spout's send time to the terminal bolt, at each input rate under each plan; reached: the rate the spout sent at while it sent. A reached rate marked * is below {:.0}% of the rate asked: the topology could not keep up, its bounded queues filled and held the spout back (backpressure) instead of growing.",
            REACHED_SHARE * 100.0
        ),
        &["plan", "rate/s", "reached/s", "mean us", "p50 us", "p99 us", "p99.9 us"],
    );
    let mut runs = runs.to_vec();
    runs.sort_by_key(|r| {
        let plan = r.plan.as_deref().unwrap_or("");
        let order = PLAN_ORDER.iter().position(|o| *o == plan);
        (
            order.unwrap_or(PLAN_ORDER.len()),
            plan.to_string(),
            r.target_rate,
        )
    });
    for r in runs {
        let rate = r.target_rate.unwrap_or(0);
        let mut cells = vec![r.plan.clone().unwrap_or_default(), rate.to_string()];
        if r.skipped {
            cells.push(format!("skipped: {}", r.reason.clone().unwrap_or_default()));
            cells.extend(["-"; 4].map(String::from));
        } else {
            let reached = r.input_per_sec.unwrap_or(0.0);
            let held_back = reached < REACHED_SHARE * rate as f64;
            cells.push(format!(
                "{}{}",
                si(reached),
                if held_back { " *" } else { "" }
            ));
            let l = r.latency_ns;
            for pick in [
                (|l: LatencySummary| l.mean) as fn(LatencySummary) -> f64,
                |l| l.p50,
                |l| l.p99,
                |l| l.p999,
            ] {
                cells.push(l.map_or("-".into(), |l| us(pick(l))));
            }
        }
        t.rows.push(cells);
    }
    t
}

/// The pipelines' table: a row per pipeline and parallelism, its MB/s beside the serial
/// program's and the speedup.
pub(crate) fn pipeline_table(rows: &[Row]) -> Table {
    let mut t = Table::new(
        "Compression and encryption pipelines: speedup over the serial program",
        "A fixed input cut into packets, compressed (zlib level 6) or encrypted (AES-256-GCM) by the senders and checked byte for byte by the receivers, each sender and receiver a thread, parked when idle (`sluice bench pipeline`); the serial program does every packet on one thread in the same run. MB/s of input, decimal; speedup: the serial program's time over the pipeline's.",
        &[
            "pipeline",
            "senders",
            "receivers",
            "input MB",
            "packet bytes",
            "pipeline MB/s",
            "serial MB/s",
            "speedup",
        ],
    );
    for r in rows.iter().filter(|r| r.experiment == "pipeline") {
        let mut cells = vec![r.app.clone().unwrap_or_default()];
        if r.skipped {
            cells.push(format!("skipped: {}", r.reason.clone().unwrap_or_default()));
            cells.extend(["-"; 6].map(String::from));
        } else {
            let number =
                |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
            cells.extend([
                r.senders.map_or("-".into(), |n| n.to_string()),
                r.receivers.map_or("-".into(), |n| n.to_string()),
                number(r.size_bytes.map(|b| b as f64 / 1e6), 1),
                r.packet_bytes.map_or("-".into(), |n| n.to_string()),
                number(r.mb_per_sec, 1),
                number(r.serial_mb_per_sec, 1),
                number(r.speedup, 2),
            ]);
        }
        t.rows.push(cells);
    }
    t
}

/// A table and a plot per Storm topology.
fn topology_section(rows: &[Row]) -> Section {
    let measured: Vec<&Row> = rows.iter().filter(|r| r.experiment == "topology").collect();
    let tables = sorted_unique(measured.iter().filter_map(|r| r.app.clone()))
        .into_iter()
        .map(|app| {
            let runs: Vec<&Row> = measured
                .iter()
                .copied()
                .filter(|r| r.app.as_ref() == Some(&app))
                .collect();
            topology_table(&app, &runs)
        })
        .collect();
    Section {
        title: "Storm topologies: latency against input rate",
        tables,
        plots: plots::TOPOLOGY.iter().map(|(_, plot)| *plot).collect(),
    }
}

/// OMDP's latency breakdown against the feed rate under each plan, and the highest multiple
/// each plan sustained.
fn omdp_section(rows: &[Row]) -> Section {
    let mut runs: Vec<&Row> = rows.iter().filter(|r| r.experiment == "omdp").collect();
    runs.sort_by(|a, b| {
        let order = |r: &Row| {
            let plan = r.plan.as_deref().unwrap_or("");
            PLAN_ORDER
                .iter()
                .position(|o| *o == plan)
                .unwrap_or(PLAN_ORDER.len())
        };
        (order(a), &a.plan).cmp(&(order(b), &b.plan)).then(
            a.rate_multiple
                .unwrap_or(0.0)
                .total_cmp(&b.rate_multiple.unwrap_or(0.0)),
        )
    });
    let mut t = Table::new(
        "OMDP",
        "The Vega paper's options market-data application over the shared-memory feed (sluice run omdp --set feed=shm --json): mean microseconds in each hop of the messages timed through (1 in 1,600), over the middle two thirds of the samples; received: the feed's rate at the handlers; sustained: the rate reached and at most 0.01% of messages missed (the paper's rule). The paper: under 20 us on average at 25x over shared memory on 32 cores, Fused slower than Vega above 120,000 packets/s.",
        &["plan", "x OPRA", "packets/s", "received/s", "missed %", "FH", "To DE", "DE", "To MC", "end to end", "e2e p99", "sustained"],
    );
    let mut highest: Vec<(String, f64)> = Vec::new();
    for r in runs {
        let plan = r.plan.clone().unwrap_or_default();
        let multiple = r.rate_multiple.unwrap_or(0.0);
        let mut cells = vec![plan.clone(), format!("{multiple}")];
        if r.skipped {
            cells.push(format!("skipped: {}", r.reason.clone().unwrap_or_default()));
            cells.extend(["-"; 9].map(String::from));
        } else {
            let hop = |h: &str| {
                r.latency_us
                    .get(h)
                    .map_or("-".into(), |l| format!("{:.2}", l.mean))
            };
            cells.push(si(r.target_rate.unwrap_or(0) as f64));
            cells.push(si(r.input_per_sec.unwrap_or(0.0)));
            cells.push(format!("{:.4}", 100.0 * r.missed_fraction.unwrap_or(0.0)));
            for h in ["fh", "to_de", "de", "to_mc", "end_to_end"] {
                cells.push(hop(h));
            }
            cells.push(
                r.latency_us
                    .get("end_to_end")
                    .map_or("-".into(), |l| format!("{:.2}", l.p99)),
            );
            let sustained = r.sustained == Some(true);
            cells.push(if sustained { "yes" } else { "no" }.into());
            if sustained {
                match highest.iter_mut().find(|(p, _)| *p == plan) {
                    Some((_, best)) => *best = best.max(multiple),
                    None => highest.push((plan, multiple)),
                }
            }
        }
        t.rows.push(cells);
    }
    let mut best = Table::new(
        "OMDP: the highest multiple sustained",
        "Per plan, the highest rate multiple of the February 2008 OPRA rate (24,000 packets/s) sustained in this run.",
        &["plan", "highest sustained x OPRA"],
    );
    best.rows = highest
        .into_iter()
        .map(|(plan, m)| vec![plan, format!("{m}")])
        .collect();
    Section {
        title: "OMDP: latency against the feed rate",
        tables: if t.rows.is_empty() {
            vec![]
        } else {
            vec![t, best]
        },
        plots: vec![plots::OMDP],
    }
}

fn pipeline_section(rows: &[Row]) -> Section {
    Section {
        title: "Pipelines",
        tables: vec![pipeline_table(rows)],
        plots: vec![plots::PIPELINE],
    }
}

fn peers_section(rows: &[Row]) -> Section {
    let mut t = Table::new(
        "The peers",
        "What a user would pick instead, measured in the same run by the same sender and receiver code. Latency one way: from the shared clock, or half the round trip through a reflector for zmq-tcp (as for Sluice's tcp).",
        &["peer", "bench", "tuple bytes", "tuples/s", "Gbit/s", "p50 us", "p99 us", "compared with"],
    );
    for r in rows.iter().filter(|r| r.peer.is_some()) {
        let (tps, gbit, p50, p99) = if r.skipped {
            let reason = format!("skipped: {}", r.reason.clone().unwrap_or_default());
            (reason, "-".into(), "-".into(), "-".into())
        } else {
            (
                si(r.tps()),
                format!("{:.3}", r.gbit_per_sec.unwrap_or(0.0)),
                r.latency_ns.map_or("-".into(), |l| us(l.p50)),
                r.latency_ns.map_or("-".into(), |l| us(l.p99)),
            )
        };
        let bench = match r.target_rate {
            Some(rate) => format!("latency at {rate}/s"),
            None => r.bench.clone().unwrap_or_default(),
        };
        t.rows.push(vec![
            r.peer.clone().unwrap_or_default(),
            bench,
            r.size().to_string(),
            tps,
            gbit,
            p50,
            p99,
            r.compared_with.join(", "),
        ]);
    }
    Section {
        title: "Peers",
        tables: vec![t],
        plots: vec![],
    }
}

/// Every figure a benchmark doubted, with the rule it broke: first, so that nobody reads a
/// table below without knowing which of its figures the run itself could not believe.
pub(crate) fn warnings_table(rows: &[Row]) -> Table {
    let mut t = Table::new(
        "Figures in doubt",
        "Figures that cannot be true as measured: a floor beaten (below-floor), a rate not reached (rate-not-reached), repeats that disagree (wide-spread). On a loaded machine, measure these again.",
        &["experiment", "measurement", "rule", "what was seen"],
    );
    for r in rows {
        for w in &r.warnings {
            let rule = serde_json::to_value(w.check)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            t.rows.push(vec![
                r.experiment.clone(),
                r.label(),
                rule,
                w.detail.clone(),
            ]);
        }
    }
    t
}

fn warnings_section(rows: &[Row]) -> Section {
    Section {
        title: "Warnings",
        tables: vec![warnings_table(rows)],
        plots: vec![],
    }
}

/// Every section of the report.
pub(crate) fn sections(rows: &[Row]) -> Vec<Section> {
    vec![
        machine_section(rows),
        warnings_section(rows),
        hardware_section(rows),
        throughput_section(rows),
        latency_section(rows),
        round_trip_section(rows),
        encoding_section(rows),
        fanout_section(rows),
        large_section(rows),
        apps_section(rows),
        topology_section(rows),
        omdp_section(rows),
        pipeline_section(rows),
        peers_section(rows),
    ]
}

/// The report as markdown, plots referenced as `NAME.svg` beside it.
fn markdown(sections: &[Section], plotted: &[&str]) -> String {
    let mut out = String::from("# sluice bench suite\n\n");
    for s in sections {
        if s.tables.iter().all(|t| t.rows.is_empty()) {
            continue;
        }
        let _ = writeln!(out, "## {}\n", s.title);
        for t in s.tables.iter().filter(|t| !t.rows.is_empty()) {
            out.push_str(&t.markdown());
        }
        for p in s.plots.iter().filter(|p| plotted.contains(p)) {
            let _ = writeln!(out, "![{p}]({p}.svg)\n");
        }
    }
    out
}

/// The report as one HTML page with the SVG plots inlined.
fn html(sections: &[Section], svgs: &[plots::Svg]) -> String {
    let mut out = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>sluice bench suite</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse;margin-bottom:1em}td,th{border:1px solid #bbb;padding:2px 6px;text-align:right}th{background:#eee}td:first-child{text-align:left}svg{max-width:100%;height:auto}</style>\n</head><body>\n<h1>sluice bench suite</h1>\n",
    );
    for s in sections {
        if s.tables.iter().all(|t| t.rows.is_empty()) {
            continue;
        }
        let _ = writeln!(out, "<h2>{}</h2>", escape(s.title));
        for t in s.tables.iter().filter(|t| !t.rows.is_empty()) {
            out.push_str(&t.html());
        }
        for (_, svg) in svgs.iter().filter(|(name, _)| s.plots.contains(name)) {
            let body = svg.find("<svg").map_or(svg.as_str(), |i| &svg[i..]);
            let _ = writeln!(out, "<figure>{body}</figure>");
        }
    }
    out.push_str("</body></html>\n");
    out
}

/// Writes `report.md`, `report.html` and the plots into `dir`; returns the paths written.
pub(crate) fn write(dir: &Path, records: &[Value]) -> anyhow::Result<Vec<PathBuf>> {
    let rows = rows(records);
    let sections = sections(&rows);
    let mut written = Vec::new();
    let svgs = match plots::draw(dir, &rows) {
        Ok((svgs, paths)) => {
            written.extend(paths);
            svgs
        }
        Err(e) => {
            eprintln!("no plots: {e:#}");
            Vec::new()
        }
    };
    let plotted: Vec<&str> = svgs.iter().map(|(name, _)| *name).collect();
    for (name, text) in [
        ("report.md", markdown(&sections, &plotted)),
        ("report.html", html(&sections, &svgs)),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(transport: &str, size: usize, tps: f64, peer: Option<&str>) -> Value {
        let mut v = json!({
            "experiment": if peer.is_some() { "peers" } else { "throughput" },
            "bench": "throughput",
            "transport": transport,
            "encoding": "facade",
            "tuple_size": size,
            "tuples_per_sec": tps,
            "gbit_per_sec": tps * size as f64 * 8e-9,
            "baseline": {"name": "hardware", "tuples_per_sec": tps * 2.0, "gbit_per_sec": 1.0},
            "skipped": false,
        });
        if let Some(p) = peer {
            v["peer"] = json!(p);
            v["compared_with"] = json!([transport]);
        }
        v
    }

    #[test]
    fn the_omdp_section_gives_the_breakdown_and_the_highest_multiple_sustained() {
        let record = |plan: &str, multiple: f64, sustained: bool| {
            json!({"experiment": "omdp", "app": "omdp", "plan": plan, "rate_multiple": multiple,
                   "target_rate": (multiple * 24_000.0) as u64, "input_per_sec": multiple * 24_000.0,
                   "missed_fraction": 0.0, "sustained": sustained,
                   "latency_us": {"fh": {"mean": 1.5, "p99": 3.0},
                                  "end_to_end": {"mean": 4.25, "p99": 9.0}}})
        };
        let records = [
            record("fused", 1.0, true),
            record("fused", 25.0, true),
            record("fused", 50.0, false),
            record("two-processes", 1.0, false),
        ];
        let section = omdp_section(&rows(&records));
        let (table, best) = (&section.tables[0], &section.tables[1]);
        assert_eq!(table.rows.len(), 4);
        assert_eq!(table.rows[1][..3], ["fused", "25", "600.00 k"]);
        assert_eq!(table.rows[1][5], "1.50");
        assert_eq!(table.rows[1][9..], ["4.25", "9.00", "yes"]);
        assert_eq!(best.rows, [["fused", "25"]]);
        assert!(omdp_section(&[]).tables.is_empty());
    }

    #[test]
    fn a_topology_table_marks_a_spout_held_back_and_lists_plans_in_order() {
        let point = |plan: &str, rate: u64, reached: f64| {
            json!({"experiment": "topology", "bench": "app", "app": "sol", "plan": plan,
                "target_rate": rate, "input_per_sec": reached, "skipped": false,
                "latency_ns": {"p50": 2000.0, "p99": 9000.0, "p999": 20000.0, "mean": 3000.0,
                    "max": 1e5, "samples": 10}})
        };
        let records = vec![
            point("processes", 1000, 1000.0),
            point("fused", 80000, 60000.0),
            point("fused", 1000, 999.0),
            json!({"experiment": "topology", "bench": "app", "app": "sol", "plan": "threaded",
                "target_rate": 1000, "skipped": true, "reason": "no core"}),
        ];
        let section = topology_section(&rows(&records));
        let md = section.tables[0].markdown();
        let lines: Vec<&str> = md.lines().filter(|l| l.starts_with("| ")).collect();
        assert_eq!(
            lines[2], "| fused | 1000 | 999.00 | 3.00 | 2.00 | 9.00 | 20.00 |",
            "{md}"
        );
        assert_eq!(
            lines[3], "| fused | 80000 | 60.00 k * | 3.00 | 2.00 | 9.00 | 20.00 |",
            "{md}"
        );
        assert_eq!(
            lines[4], "| threaded | 1000 | skipped: no core | - | - | - | - |",
            "{md}"
        );
        assert!(
            lines[5].starts_with("| processes | 1000 | 1.00 k |"),
            "{md}"
        );
        assert!(section.plots.contains(&"topology-sol"));
    }

    #[test]
    fn a_sluice_figure_stands_beside_its_baseline_and_peer() {
        let records = vec![
            record("shm-vega", 64, 4e6, None),
            record("shm-vega", 64, 1e6, Some("zmq-ipc")),
            json!({"experiment": "peers", "peer": "iceoryx2", "skipped": true, "reason": "built without feature peer-iceoryx2", "tuple_size": 64, "bench": "throughput"}),
        ];
        let rows = rows(&records);
        let s = sections(&rows);
        let md = markdown(&s, &[]);
        assert!(md.contains("| shm-vega | 64 | 4.00 M | 2.048 | hardware | 8.00 M | 0.50 | zmq-ipc 1.00 M (x4.00) |"), "{md}");
        assert!(
            md.contains("skipped: built without feature peer-iceoryx2"),
            "{md}"
        );
        let page = html(&s, &[(plots::THROUGHPUT, "<?xml?><svg>x</svg>".into())]);
        assert!(page.contains("<table>") && page.contains("<figure><svg>x</svg></figure>"));
        assert!(!page.contains("<?xml"));
    }

    #[test]
    fn the_fan_out_grid_sets_raw_tcp_beside_the_transports() {
        let fanout = |transport: &str, receivers: usize, gbit: f64, raw: f64| {
            json!({
                "experiment": "fanout", "bench": "throughput", "transport": transport,
                "tuple_size": 22, "receivers": receivers, "gbit_per_sec": gbit,
                "baseline": {"name": "raw-tcp", "tuples_per_sec": 1.0, "gbit_per_sec": raw},
                "skipped": false,
            })
        };
        let records = vec![
            fanout("tcp", 1, 0.5, 0.02),
            fanout("tcp", 2, 0.4, 0.01),
            fanout("tcp-batched", 1, 1.5, 0.03),
            fanout("shm-vega", 2, 3.0, 9.0),
        ];
        let t = fanout_grid(&rows(&records));
        assert_eq!(
            t.header,
            [
                "receivers",
                "shm-vega 22 B",
                "tcp 22 B",
                "raw TCP 22 B",
                "tcp-batched 22 B"
            ]
        );
        assert_eq!(t.rows[0], ["1", "-", "0.500", "0.020", "1.500"]);
        assert_eq!(t.rows[1], ["2", "3.000", "0.400", "0.010", "-"]);
    }

    #[test]
    fn an_application_stands_beside_its_yardsticks_with_its_latency_at_the_rate() {
        let app = |plan: &str, rate: Option<u64>, per_sec: f64| {
            json!({
                "experiment": "apps", "bench": "app", "app": "wordcount", "plan": plan,
                "unit": "words", "input": "sentences", "target_rate": rate, "per_sec": per_sec,
                "latency_ns": rate.map(|_| json!({"p50": 12_000.0, "p99": 48_000.0, "p999": 0.0,
                    "mean": 0.0, "max": 0.0, "samples": 9})),
                "yardsticks": [
                    {"name": "naive", "per_sec": per_sec * 4.0, "ratio": 0.25},
                    {"name": "tuned", "per_sec": per_sec * 10.0, "ratio": 0.1},
                ],
                "skipped": false,
            })
        };
        let records = vec![
            app("processes", None, 1e6),
            app("fused", None, 2.5e6),
            app("fused", Some(40_000), 4e5),
            json!({"experiment": "apps", "bench": "app", "app": "wordcount", "plan": "threaded",
                "skipped": true, "reason": "no cores"}),
        ];
        let section = apps_section(&rows(&records));
        let t = &section.tables[0];
        assert_eq!(
            t.header,
            [
                "plan",
                "wordcount words/s",
                "naive words/s",
                "wordcount / naive",
                "tuned words/s",
                "wordcount / tuned",
                "p50 us",
                "p99 us"
            ]
        );
        assert!(
            t.note.ends_with("latency at 40000 sentences/s."),
            "{}",
            t.note
        );
        assert_eq!(
            t.rows[0],
            ["fused", "2.50 M", "10.00 M", "0.25", "25.00 M", "0.10", "12.00", "48.00"]
        );
        assert_eq!(
            t.rows[1],
            [
                "threaded",
                "skipped: no cores",
                "-",
                "-",
                "-",
                "-",
                "-",
                "-"
            ]
        );
        assert_eq!(
            t.rows[2],
            [
                "processes",
                "1.00 M",
                "4.00 M",
                "0.25",
                "10.00 M",
                "0.10",
                "-",
                "-"
            ]
        );
    }

    #[test]
    fn a_pipeline_stands_beside_the_serial_program_with_its_speedup() {
        let records = vec![
            json!({"experiment": "pipeline", "bench": "pipeline", "app": "compress",
                "senders": 2, "receivers": 2, "size_bytes": 67_108_864u64, "packet_bytes": 16384,
                "mb_per_sec": 80.0, "serial_mb_per_sec": 42.5, "speedup": 1.875}),
            json!({"experiment": "pipeline", "bench": "pipeline", "app": "encrypt",
                "skipped": true, "reason": "no core"}),
        ];
        let t = pipeline_table(&rows(&records));
        assert_eq!(
            t.rows[0],
            ["compress", "2", "2", "67.1", "16384", "80.0", "42.5", "1.88"]
        );
        assert_eq!(t.rows[1][1], "skipped: no core");
        assert_eq!(t.rows[1].len(), t.header.len());
    }

    #[test]
    fn every_warning_of_every_record_is_listed_first_with_its_measurement_and_rule() {
        let mut latency = record("shm-vega", 64, 1e5, None);
        latency["experiment"] = json!("latency");
        latency["bench"] = json!("latency");
        latency["target_rate"] = json!(100_000);
        latency["warnings"] = json!([
            {"check": "below-floor", "detail": "sluice's p50 436.0 ns is below the hardware baseline's p50 2.47 k ns"},
            {"check": "rate-not-reached", "detail": "the sender reached 27.00 k/s of the 100.00 k/s asked (27%)"},
        ]);
        let quiet = record("threaded", 64, 1e6, None);
        let rows = rows(&[quiet, latency]);
        let t = warnings_table(&rows);
        assert_eq!(t.rows.len(), 2);
        assert_eq!(
            t.rows[0][..3],
            [
                "latency",
                "latency shm-vega 64 B at 100000/s",
                "below-floor"
            ]
        );
        assert_eq!(t.rows[1][2], "rate-not-reached");
        let report = markdown(&sections(&rows), &[]);
        let warned = report.find("## Warnings").unwrap();
        assert!(warned < report.find("## Throughput").unwrap(), "{report}");
        assert!(report.contains("reached 27.00 k/s of the 100.00 k/s asked"));
        // No warning: no section.
        let calm = markdown(&sections(&rows[..1]), &[]);
        assert!(!calm.contains("## Warnings"), "{calm}");
    }

    #[test]
    fn html_cells_are_escaped() {
        let mut t = Table::new("a<b", "", &["x&y"]);
        t.rows.push(vec!["<script>".into()]);
        let h = t.html();
        assert!(h.contains("a&lt;b") && h.contains("x&amp;y") && h.contains("&lt;script&gt;"));
    }
}
