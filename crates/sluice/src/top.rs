//! `sluice top [ID]`: a terminal monitor attached to a running job (`ratatui` over
//! `crossterm`). It asks the job's control socket ([`crate::jobs`]) for its latest metrics
//! every `--interval` and draws: the job and its sources' rate; its operators with their
//! rates and the latency percentiles of the sampled markers that reached them; every edge
//! between threads or PEs with its rate and the fill of its queue or ring as a bar, and the
//! tuples it lost; every thread with the share of time it spent blocked on a full queue
//! downstream (backpressure); for a checkpointed job, a line of what its checkpoints and
//! restarts did ([`crate::checkpoint_figures::line`]); and a line per connector that
//! publishes live figures ([`sluice_graph::live`]): a Kafka source's records and bytes read
//! and its lag per partition, a Kafka sink's records written and its transactions committed
//! and aborted ([`connector_lines`]). `q` (or Esc, or Ctrl-C) quits; it ends by itself when the job
//! ends. Without an ID it watches the only running job, and lists them and asks which when
//! there are several.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};
use ratatui::Frame;
use sluice_runtime::MetricsSnapshot;

use crate::jobs::{self, with_commas, JobEntry};
use sluice_runtime::progress::micros;
use sluice_runtime::CheckpointFigures;

/// Arguments of `sluice top`.
#[derive(Args, Debug)]
pub(crate) struct TopArgs {
    /// The job's ID, as `sluice jobs` lists it (default: the only running job).
    id: Option<String>,
    /// Seconds between refreshes (default 0.5).
    #[arg(long, value_parser = crate::plan_choice::parse_seconds)]
    interval: Option<Duration>,
}

/// Width of a fill bar, in cells.
const BAR: usize = 10;

/// `sluice top`: watches a running job until it ends or the user quits.
pub(crate) fn top(args: TopArgs) -> anyhow::Result<()> {
    let job = jobs::pick(args.id.as_deref())?;
    let interval = args.interval.unwrap_or(Duration::from_millis(500));
    let mut seen =
        Seen::fetch(&job).with_context(|| format!("job '{}' does not answer", job.id))?;
    let mut terminal = ratatui::try_init().context("cannot take over the terminal")?;
    let watched = watch(&mut terminal, &job, &mut seen, interval);
    ratatui::restore();
    if watched? {
        println!("job '{}' ended", job.id);
    }
    Ok(())
}

/// What `top` shows of a job, as last asked.
struct Seen {
    snapshot: MetricsSnapshot,
    /// `None`: the job takes no checkpoints.
    checkpoints: Option<CheckpointFigures>,
}

impl Seen {
    /// Asks `job` for its figures.
    fn fetch(job: &JobEntry) -> anyhow::Result<Self> {
        Ok(Self {
            snapshot: jobs::metrics_of(&job.socket)?,
            checkpoints: match job.checkpoints {
                Some(_) => jobs::checkpoints_of(&job.socket)?,
                None => None,
            },
        })
    }
}

/// Draws and refreshes until the user quits (false) or the job ends (true).
fn watch(
    terminal: &mut ratatui::DefaultTerminal,
    job: &JobEntry,
    seen: &mut Seen,
    interval: Duration,
) -> anyhow::Result<bool> {
    let mut fetched = Instant::now();
    loop {
        terminal.draw(|frame| draw(frame, job, seen))?;
        let wait = interval.saturating_sub(fetched.elapsed());
        if event::poll(wait)? {
            if let Event::Key(key) = event::read()? {
                let ctrl_c =
                    key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
                if key.kind == KeyEventKind::Press
                    && (ctrl_c || matches!(key.code, KeyCode::Char('q') | KeyCode::Esc))
                {
                    return Ok(false);
                }
            }
        }
        if fetched.elapsed() >= interval {
            fetched = Instant::now();
            match Seen::fetch(job) {
                Ok(latest) => *seen = latest,
                // Its socket is gone or closed: the job has ended.
                Err(_) => return Ok(true),
            }
        }
    }
}

/// `fill` (0 to 1) as a bar of [`BAR`] cells and a percentage.
fn bar(fill: f64) -> String {
    let full = ((fill.clamp(0.0, 1.0) * BAR as f64).round() as usize).min(BAR);
    format!(
        "{}{} {:>3.0}%",
        "█".repeat(full),
        "░".repeat(BAR - full),
        fill * 100.0
    )
}

fn rate(r: f64) -> String {
    with_commas(r.round() as u64)
}

/// A line per operator whose instances publish live figures, their figures summed: a Kafka
/// source's ([`sluice_connectors::kafka::source_live`]), a Kafka sink's, or any other
/// operator's as `name value` pairs.
fn connector_lines(snapshot: &MetricsSnapshot) -> Vec<String> {
    let mut operators: Vec<(&str, BTreeMap<String, u64>)> = Vec::new();
    for instance in snapshot.instances().filter(|i| !i.figures.is_empty()) {
        let at = match operators
            .iter()
            .position(|(op, _)| *op == instance.operator)
        {
            Some(at) => at,
            None => {
                operators.push((&instance.operator, BTreeMap::new()));
                operators.len() - 1
            }
        };
        for (name, value) in &instance.figures {
            *operators[at].1.entry(name.clone()).or_default() += value;
        }
    }
    operators
        .iter()
        .map(|(operator, figures)| {
            let line = if figures.contains_key("records_in") {
                sluice_connectors::kafka::source_live(figures)
            } else if figures.contains_key("records_out") {
                sluice_connectors::kafka::sink_summary(figures)
            } else {
                let pairs: Vec<String> = figures.iter().map(|(n, v)| format!("{n} {v}")).collect();
                pairs.join(", ")
            };
            format!("{operator}: {line}")
        })
        .collect()
}

fn draw(frame: &mut Frame<'_>, job: &JobEntry, seen: &Seen) {
    let snapshot = &seen.snapshot;
    let connectors = connector_lines(snapshot);
    let operators = snapshot.operators();
    let edges: Vec<_> = snapshot.edges().collect();
    let threads: Vec<_> = snapshot
        .pes
        .iter()
        .flat_map(|pe| pe.threads.iter().map(move |t| (pe.pe.as_str(), t)))
        .collect();
    let header_lines =
        1 + u16::from(seen.checkpoints.is_some()) + u16::try_from(connectors.len()).unwrap_or(0);
    let [header, ops_area, edges_area, threads_area] = Layout::vertical([
        Constraint::Length(header_lines + 2),
        Constraint::Length(operators.len() as u16 + 3),
        Constraint::Length(edges.len().max(1) as u16 + 3),
        Constraint::Min(4),
    ])
    .areas(frame.area());

    let title = format!(
        "job {} ({}, plan {}, {} PE(s)), up {:.0} s, sources {} tuples/s   q quits",
        job.id,
        job.app,
        job.plan,
        job.pes,
        snapshot.uptime_secs,
        rate(snapshot.source_rate())
    );
    let mut lines = vec![Line::from(title)];
    lines.extend(
        seen.checkpoints
            .as_ref()
            .map(|c| Line::from(crate::checkpoint_figures::line(c))),
    );
    lines.extend(connectors.into_iter().map(Line::from));
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title("sluice top")),
        header,
    );

    let bold = Style::default().add_modifier(Modifier::BOLD);
    let latency = |l: Option<sluice_runtime::metrics::LatencySummary>,
                   f: fn(&sluice_runtime::metrics::LatencySummary) -> f64| {
        l.map_or_else(|| "-".to_string(), |l| micros(f(&l)))
    };
    let rows = operators.iter().map(|o| {
        Row::new(vec![
            o.operator.clone(),
            o.instances.to_string(),
            rate(o.rate_in),
            rate(o.rate_out),
            with_commas(o.tuples_out),
            latency(o.latency, |l| l.p50_us),
            latency(o.latency, |l| l.p99_us),
            latency(o.latency, |l| l.max_us),
        ])
    });
    let table = Table::new(
        rows,
        [
            Constraint::Min(14),
            Constraint::Length(5),
            Constraint::Length(12),
            Constraint::Length(12),
            Constraint::Length(14),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Length(10),
        ],
    )
    .header(
        Row::new(vec![
            "OPERATOR", "INST", "IN/S", "OUT/S", "OUT", "P50", "P99", "MAX",
        ])
        .style(bold),
    )
    .block(
        Block::default()
            .borders(Borders::ALL)
            .title("operators (latency: sampled markers from the sources)"),
    );
    frame.render_widget(table, ops_area);

    let rows = edges.iter().map(|e| {
        Row::new(vec![
            e.edge.clone(),
            e.transport.clone(),
            rate(e.rate),
            e.fill().map_or_else(|| "-".to_string(), bar),
            with_commas(e.lost),
        ])
    });
    let table = Table::new(
        rows,
        [
            Constraint::Min(20),
            Constraint::Length(10),
            Constraint::Length(12),
            Constraint::Length(16),
            Constraint::Length(8),
        ],
    )
    .header(Row::new(vec!["EDGE", "TRANSPORT", "TUPLES/S", "QUEUE", "LOST"]).style(bold))
    .block(
        Block::default()
            .borders(Borders::ALL)
            .title("edges between threads and PEs"),
    );
    frame.render_widget(table, edges_area);

    let rows = threads.iter().map(|(pe, t)| {
        Row::new(vec![
            pe.to_string(),
            t.thread.clone(),
            bar(t.blocked_share),
            format!("{:.1} s", t.blocked_secs),
        ])
    });
    let table = Table::new(
        rows,
        [
            Constraint::Min(12),
            Constraint::Min(16),
            Constraint::Length(16),
            Constraint::Length(10),
        ],
    )
    .header(Row::new(vec!["PE", "THREAD", "BACKPRESSURE", "BLOCKED"]).style(bold))
    .block(
        Block::default()
            .borders(Borders::ALL)
            .title("threads (backpressure: time blocked on a full queue)"),
    );
    frame.render_widget(table, threads_area);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fill_is_a_bar_and_a_percentage() {
        assert_eq!(bar(0.0), "░░░░░░░░░░   0%");
        assert_eq!(bar(0.5), "█████░░░░░  50%");
        assert_eq!(bar(1.0), "██████████ 100%");
    }

    /// The figures the Kafka connectors publish (named as in `sluice_connectors::kafka`),
    /// summed over the instances of each operator: the source's lag by partition, the
    /// sink's records and transactions.
    #[test]
    fn kafka_figures_are_a_line_per_connector() {
        use sluice_runtime::metrics::{InstanceMetrics, PeMetrics, ThreadMetrics};
        let instance = |operator: &str, instance: &str, figures: &[(&str, u64)]| InstanceMetrics {
            operator: operator.into(),
            instance: instance.into(),
            figures: figures.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            ..InstanceMetrics::default()
        };
        let snapshot = MetricsSnapshot {
            job: "wordcount".into(),
            pes: vec![PeMetrics {
                pe: "pe0".into(),
                threads: vec![ThreadMetrics {
                    thread: "t0".into(),
                    instances: vec![
                        instance(
                            "sentences",
                            "sentences[0]",
                            &[
                                ("records_in", 300),
                                ("bytes_in", 3000),
                                ("lag.partition.0", 4),
                            ],
                        ),
                        instance(
                            "sentences",
                            "sentences[1]",
                            &[
                                ("records_in", 200),
                                ("bytes_in", 2000),
                                ("lag.partition.1", 6),
                            ],
                        ),
                        instance("split", "split", &[]),
                        instance(
                            "counts",
                            "counts",
                            &[
                                ("records_out", 70),
                                ("bytes_out", 700),
                                ("transactions_committed", 5),
                                ("transactions_aborted", 1),
                            ],
                        ),
                    ],
                    ..ThreadMetrics::default()
                }],
                ..PeMetrics::default()
            }],
            ..MetricsSnapshot::default()
        };
        assert_eq!(
            connector_lines(&snapshot),
            [
                "sentences: kafka in: 500 records, 5000 bytes, 0 bad; lag 10 records (by \
                 partition 0: 4, 1: 6)",
                "counts: kafka out: 70 records, 700 bytes; transactions 5 committed, 1 aborted",
            ]
        );
    }
}
