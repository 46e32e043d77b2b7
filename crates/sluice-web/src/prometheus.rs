//! `sluice run --metrics-addr ADDRESS:PORT` (or a program's own [`crate::job_server`]): serves
//! the running job's live metrics at
//! `/metrics` in the Prometheus text format (OpenMetrics, as `prometheus-client` writes it),
//! every name prefixed `sluice_`, each series labelled with its `job` and `pe` and, per
//! instance, `operator` and `instance`, per edge `operator` (the receiving one), `edge` and
//! `transport`, per thread `thread`.
//!
//! The run's HTTP server ([`crate::job_server`]) serves it, binding only the address given
//! (`127.0.0.1:9464` is reachable from this machine alone), scrapes concurrently and each
//! within the server's bounds; any other path gets 404. A scrape builds a fresh registry from
//! the latest [`MetricsSnapshot`], so the series are always the job's current figures.
//!
//! An operator's own figures ([`sluice_graph::live`]: a Kafka source's `records_in`,
//! `bytes_in` and `lag.partition.N`, a Kafka sink's `records_out`, `bytes_out`,
//! `transactions_committed` and `transactions_aborted`) are `sluice_operator_figure`, labelled
//! with the instance's and `figure`, its name.
//!
//! `sluice ui` serves every running job of the host at its own `/metrics` ([`text_of`]), each
//! series labelled with the job's registry `id` too, so that two jobs of one application are
//! told apart: a program of its own is scraped there without serving anything itself.
//!
//! A checkpointed job has its checkpoints' series too (labelled with its `job`):
//! `sluice_checkpoints_completed_total`, `sluice_checkpoints_failed_total`,
//! `sluice_job_restarts_total`, and once one is complete `sluice_checkpoint_last_complete`
//! (its number), `sluice_checkpoint_last_duration_seconds`, `sluice_checkpoint_last_bytes`
//! and `sluice_checkpoint_last_alignment_seconds`.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use sluice_runtime::MetricsSnapshot;

use sluice_runtime::CheckpointFigures;

type Labels = Vec<(String, String)>;
type FloatCounter = Counter<f64, AtomicU64>;
type FloatGauge = Gauge<f64, AtomicU64>;

/// The content type of what [`text`] and [`text_of`] write.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// One job's figures for [`text_of`].
pub struct JobFigures<'a> {
    /// Its registry id, a label `id` of every series; `None` for a job's own endpoint.
    pub id: Option<&'a str>,
    /// Its live metrics.
    pub snapshot: &'a MetricsSnapshot,
    /// What its checkpoints did, when it takes them.
    pub checkpoints: Option<&'a CheckpointFigures>,
}

/// The snapshot, and what a checkpointed job's `checkpoints` did, in the Prometheus text
/// format.
pub fn text(snapshot: &MetricsSnapshot, checkpoints: Option<&CheckpointFigures>) -> String {
    text_of(&[JobFigures {
        id: None,
        snapshot,
        checkpoints,
    }])
}

/// Every job of `jobs` in the Prometheus text format, one family per figure.
pub fn text_of(jobs: &[JobFigures<'_>]) -> String {
    let mut registry = Registry::with_prefix("sluice");
    let tuples_in = Family::<Labels, Counter>::default();
    let tuples_out = Family::<Labels, Counter>::default();
    let rate_out = Family::<Labels, FloatGauge>::default();
    let latency = Family::<Labels, FloatGauge>::default();
    let edge_tuples = Family::<Labels, Counter>::default();
    let edge_bytes = Family::<Labels, Counter>::default();
    let edge_lost = Family::<Labels, Counter>::default();
    let edge_queued = Family::<Labels, FloatGauge>::default();
    let edge_fill = Family::<Labels, FloatGauge>::default();
    let blocked = Family::<Labels, FloatCounter>::default();
    let uptime = Family::<Labels, FloatGauge>::default();
    let figures = Family::<Labels, Gauge>::default();

    for figured in jobs {
        let snapshot = figured.snapshot;
        let mut job_labels: Labels = vec![("job".to_string(), snapshot.job.clone())];
        if let Some(id) = figured.id {
            job_labels.push(("id".to_string(), id.to_string()));
        }
        uptime.get_or_create(&job_labels).set(snapshot.uptime_secs);
        for pe in &snapshot.pes {
            let pe_label = ("pe".to_string(), pe.pe.clone());
            let with = |more: Vec<(String, String)>| -> Labels {
                job_labels
                    .iter()
                    .cloned()
                    .chain([pe_label.clone()])
                    .chain(more)
                    .collect()
            };
            for thread in &pe.threads {
                blocked
                    .get_or_create(&with(vec![("thread".into(), thread.thread.clone())]))
                    .inc_by(thread.blocked_secs);
                for i in &thread.instances {
                    let labels = with(vec![
                        ("operator".into(), i.operator.clone()),
                        ("instance".into(), i.instance.clone()),
                    ]);
                    tuples_in.get_or_create(&labels).inc_by(i.tuples_in);
                    tuples_out.get_or_create(&labels).inc_by(i.tuples_out);
                    rate_out.get_or_create(&labels).set(i.rate_out);
                    for (figure, value) in &i.figures {
                        let mut labels = labels.clone();
                        labels.push(("figure".into(), figure.clone()));
                        figures
                            .get_or_create(&labels)
                            .set(i64::try_from(*value).unwrap_or(i64::MAX));
                    }
                    if let Some(l) = i.latency {
                        for (quantile, micros) in
                            [("0.5", l.p50_us), ("0.99", l.p99_us), ("1", l.max_us)]
                        {
                            let mut labels = labels.clone();
                            labels.push(("quantile".into(), quantile.into()));
                            latency.get_or_create(&labels).set(micros / 1e6);
                        }
                    }
                }
                for e in &thread.inputs {
                    let labels = with(vec![
                        ("operator".into(), e.operator.clone()),
                        ("edge".into(), e.edge.clone()),
                        ("transport".into(), e.transport.clone()),
                    ]);
                    edge_tuples.get_or_create(&labels).inc_by(e.tuples);
                    edge_lost.get_or_create(&labels).inc_by(e.lost);
                    if let Some(bytes) = e.bytes {
                        edge_bytes.get_or_create(&labels).inc_by(bytes);
                    }
                    if let Some(queued) = e.queued {
                        edge_queued.get_or_create(&labels).set(queued as f64);
                    }
                    if let Some(fill) = e.fill() {
                        edge_fill.get_or_create(&labels).set(fill);
                    }
                }
            }
        }
    }
    registry.register("uptime_seconds", "Seconds since the job started", uptime);
    registry.register(
        "tuples_in",
        "Tuples an operator instance received",
        tuples_in,
    );
    registry.register(
        "tuples_out",
        "Tuples an operator instance emitted",
        tuples_out,
    );
    registry.register(
        "operator_figure",
        "A figure an operator instance publishes itself (a Kafka source's consumer lag per partition, records and bytes in; a Kafka sink's records and bytes out, transactions committed and aborted)",
        figures,
    );
    registry.register(
        "tuples_out_per_second",
        "Tuples an operator instance emitted per second, over the last sampling period",
        rate_out,
    );
    registry.register(
        "latency_seconds",
        "Time the sampled latency markers took from their source to an instance, latest window",
        latency,
    );
    registry.register("edge_tuples", "Tuples received over an edge", edge_tuples);
    registry.register(
        "edge_bytes",
        "Bytes received over an edge, where its transport knows them",
        edge_bytes,
    );
    registry.register(
        "edge_lost_tuples",
        "Tuples lost on an edge (shm-osr window, udp-mq)",
        edge_lost,
    );
    registry.register(
        "edge_queued",
        "Messages (shm-osr: bytes) waiting in an edge's queue or ring",
        edge_queued,
    );
    registry.register(
        "edge_fill_ratio",
        "Fill of an edge's queue or ring, 0 to 1",
        edge_fill,
    );
    registry.register(
        "backpressure_seconds",
        "Seconds a thread waited on a full queue downstream",
        blocked,
    );
    register_checkpoints(&mut registry, jobs);
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = encode(&mut out, &registry);
    out
}

/// Registers the series of what the checkpoints of the checkpointed `jobs` did (none when no
/// job takes checkpoints; the last complete one's when one job has one).
fn register_checkpoints(registry: &mut Registry, jobs: &[JobFigures<'_>]) {
    let checkpointed: Vec<(Labels, &CheckpointFigures)> = jobs
        .iter()
        .filter_map(|job| {
            let mut labels: Labels = vec![("job".into(), job.snapshot.job.clone())];
            if let Some(id) = job.id {
                labels.push(("id".into(), id.into()));
            }
            Some((labels, job.checkpoints?))
        })
        .collect();
    if checkpointed.is_empty() {
        return;
    }
    let count = |value: fn(&CheckpointFigures) -> u64| {
        let family = Family::<Labels, Counter>::default();
        for (labels, figures) in &checkpointed {
            family.get_or_create(labels).inc_by(value(figures));
        }
        family
    };
    registry.register(
        "checkpoints_completed",
        "Checkpoints complete",
        count(|f| f.completed),
    );
    registry.register(
        "checkpoints_failed",
        "Checkpoints that failed (a part not written, the timeout, the job failing first)",
        count(|f| f.failed),
    );
    registry.register(
        "job_restarts",
        "Restarts of the job from its last complete checkpoint after a failure",
        count(|f| f.restarts.len() as u64),
    );
    if checkpointed.iter().all(|(_, f)| f.last_complete.is_none()) {
        return;
    }
    // Of the jobs with a complete checkpoint only.
    let whole = |value: fn(&CheckpointFigures) -> u64| {
        let family = Family::<Labels, Gauge>::default();
        for (labels, figures) in checkpointed
            .iter()
            .filter(|(_, f)| f.last_complete.is_some())
        {
            family
                .get_or_create(labels)
                .set(value(figures).try_into().unwrap_or(i64::MAX));
        }
        family
    };
    let seconds = |value: fn(&CheckpointFigures) -> f64| {
        let family = Family::<Labels, FloatGauge>::default();
        for (labels, figures) in checkpointed
            .iter()
            .filter(|(_, f)| f.last_complete.is_some())
        {
            family.get_or_create(labels).set(value(figures));
        }
        family
    };
    registry.register(
        "checkpoint_last_complete",
        "The number of the last complete checkpoint",
        whole(|f| f.last_complete.unwrap_or_default()),
    );
    registry.register(
        "checkpoint_last_duration_seconds",
        "How long the last complete checkpoint took, from its ask to its manifest",
        seconds(|f| f.last_duration_secs),
    );
    registry.register(
        "checkpoint_last_bytes",
        "Bytes of the last complete checkpoint's parts",
        whole(|f| f.last_bytes),
    );
    registry.register(
        "checkpoint_last_alignment_seconds",
        "The longest alignment of an instance in the last complete checkpoint",
        seconds(|f| f.last_alignment_secs),
    );
}

#[cfg(test)]
mod tests {
    use sluice_runtime::metrics::{EdgeMetrics, InstanceMetrics, PeMetrics, ThreadMetrics};

    use super::*;

    /// A snapshot of the job `job`: one PE, one thread, `split` and its input edge.
    fn snapshot(job: &str) -> MetricsSnapshot {
        MetricsSnapshot {
            job: job.into(),
            uptime_secs: 2.0,
            pes: vec![PeMetrics {
                pe: "pe0".into(),
                age_secs: 0.1,
                threads: vec![ThreadMetrics {
                    thread: "t0".into(),
                    blocked_secs: 0.5,
                    blocked_share: 0.1,
                    instances: vec![InstanceMetrics {
                        operator: "split".into(),
                        instance: "split".into(),
                        tuples_in: 7,
                        tuples_out: 21,
                        figures: vec![("lag.partition.2".into(), 40)],
                        ..InstanceMetrics::default()
                    }],
                    inputs: vec![EdgeMetrics {
                        edge: "sentences -> split".into(),
                        transport: "shm-vega".into(),
                        operator: "split".into(),
                        tuples: 7,
                        queued: Some(1),
                        capacity: Some(4),
                        ..EdgeMetrics::default()
                    }],
                }],
            }],
        }
    }

    #[test]
    fn every_series_is_prefixed_and_labelled() {
        let text = text(&snapshot("wordcount"), None);
        assert!(!text.contains("checkpoint"), "{text}");
        assert!(
            text.contains(
                "sluice_tuples_in_total{job=\"wordcount\",pe=\"pe0\",operator=\"split\",instance=\"split\"} 7"
            ),
            "{text}"
        );
        assert!(text.contains("sluice_edge_fill_ratio{job=\"wordcount\",pe=\"pe0\",operator=\"split\",edge=\"sentences -> split\",transport=\"shm-vega\"} 0.25"), "{text}");
        assert!(
            text.contains("sluice_backpressure_seconds_total{"),
            "{text}"
        );
        assert!(
            text.contains(
                "sluice_operator_figure{job=\"wordcount\",pe=\"pe0\",operator=\"split\",instance=\"split\",figure=\"lag.partition.2\"} 40"
            ),
            "{text}"
        );
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(line.starts_with("sluice_"), "{line}");
        }
    }

    #[test]
    fn two_jobs_of_one_application_are_told_apart_by_their_id_in_one_family() {
        let (a, b) = (snapshot("wordcount"), snapshot("wordcount"));
        let text = text_of(&[
            JobFigures {
                id: Some("wordcount-1"),
                snapshot: &a,
                checkpoints: None,
            },
            JobFigures {
                id: Some("wordcount-2"),
                snapshot: &b,
                checkpoints: None,
            },
        ]);
        for id in ["wordcount-1", "wordcount-2"] {
            assert!(
                text.contains(&format!(
                    "sluice_tuples_in_total{{job=\"wordcount\",id=\"{id}\",pe=\"pe0\",operator=\"split\",instance=\"split\"}} 7"
                )),
                "{text}"
            );
        }
        assert_eq!(
            text.matches("# TYPE sluice_tuples_in counter").count(),
            1,
            "{text}"
        );
    }

    #[test]
    fn a_checkpointed_job_has_its_checkpoints_series() {
        let snapshot = MetricsSnapshot {
            job: "wordcount".into(),
            ..MetricsSnapshot::default()
        };
        let mut figures = CheckpointFigures {
            completed: 7,
            failed: 1,
            ..CheckpointFigures::default()
        };
        let scraped = text(&snapshot, Some(&figures));
        assert!(
            scraped.contains("sluice_checkpoints_completed_total{job=\"wordcount\"} 7"),
            "{scraped}"
        );
        assert!(
            scraped.contains("sluice_checkpoints_failed_total{job=\"wordcount\"} 1"),
            "{scraped}"
        );
        assert!(
            scraped.contains("sluice_job_restarts_total{job=\"wordcount\"} 0"),
            "{scraped}"
        );
        assert!(!scraped.contains("sluice_checkpoint_last"), "{scraped}");
        figures.last_complete = Some(7);
        figures.last_duration_secs = 0.25;
        figures.last_bytes = 4096;
        figures.last_alignment_secs = 0.001;
        let scraped = text(&snapshot, Some(&figures));
        for series in [
            "sluice_checkpoint_last_complete{job=\"wordcount\"} 7",
            "sluice_checkpoint_last_duration_seconds{job=\"wordcount\"} 0.25",
            "sluice_checkpoint_last_bytes{job=\"wordcount\"} 4096",
            "sluice_checkpoint_last_alignment_seconds{job=\"wordcount\"} 0.001",
        ] {
            assert!(scraped.contains(series), "{series} in {scraped}");
        }
    }
}
