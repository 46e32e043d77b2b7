//! The suite's report: tables built from the records (the same tables in `report.md` and in
//! the self-contained `report.html`, which also inlines the plots as SVG).
//!
//! Every Sluice figure stands beside its baseline (measured in the same run) and the peers
//! compared with its transport, each with the ratio Sluice / other: above 1 is faster for a
//! rate, slower for a latency.
//!
//! This file holds the tables, the cells they share and the two renderers (markdown, HTML);
//! each experiment's section is in a file of its own under `report/`, in the report's order
//! as [`sections`] lists them.

mod apps;
mod encoding;
mod fanout;
mod hardware;
mod large;
mod latency;
mod machine;
mod omdp;
mod peers;
mod pipeline;
mod round_trip;
mod throughput;
mod topology;
mod warnings;

pub(crate) use pipeline::pipeline_table;
pub(crate) use round_trip::round_trip_table;
pub(crate) use topology::{topology_table, REACHED_SHARE};

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

use super::plots;
use super::rows::{rows, Row};
use crate::foundation::stats::si;

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

/// The plans in the order the applications' tables list them; plan files come after.
const PLAN_ORDER: [&str; 3] = ["fused", "threaded", "processes"];

/// Every section of the report.
pub(crate) fn sections(rows: &[Row]) -> Vec<Section> {
    vec![
        machine::machine_section(rows),
        warnings::warnings_section(rows),
        hardware::hardware_section(rows),
        throughput::throughput_section(rows),
        latency::latency_section(rows),
        round_trip::round_trip_section(rows),
        encoding::encoding_section(rows),
        fanout::fanout_section(rows),
        large::large_section(rows),
        apps::apps_section(rows),
        topology::topology_section(rows),
        omdp::omdp_section(rows),
        pipeline::pipeline_section(rows),
        peers::peers_section(rows),
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
    use super::warnings::warnings_table;
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
