//! `sluice run --metrics-addr ADDRESS:PORT`: serves the running job's live metrics at
//! `/metrics` in the Prometheus text format (OpenMetrics, as `prometheus-client` writes it),
//! every name prefixed `sluice_`, each series labelled with its `job` and `pe` and, per
//! instance, `operator` and `instance`, per edge `operator` (the receiving one), `edge` and
//! `transport`, per thread `thread`.
//!
//! The run's HTTP server ([`crate::http_server`]) serves it, binding only the address given
//! (`127.0.0.1:9464` is reachable from this machine alone), scrapes concurrently and each
//! within the server's bounds; any other path gets 404. A scrape builds a fresh registry from
//! the latest [`MetricsSnapshot`], so the series are always the job's current figures.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use sluice_runtime::MetricsSnapshot;

type Labels = Vec<(String, String)>;
type FloatCounter = Counter<f64, AtomicU64>;
type FloatGauge = Gauge<f64, AtomicU64>;

/// The snapshot in the Prometheus text format.
pub(crate) fn text(snapshot: &MetricsSnapshot) -> String {
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

    let job = || ("job".to_string(), snapshot.job.clone());
    uptime.get_or_create(&vec![job()]).set(snapshot.uptime_secs);
    for pe in &snapshot.pes {
        let pe_label = ("pe".to_string(), pe.pe.clone());
        for thread in &pe.threads {
            blocked
                .get_or_create(&vec![
                    job(),
                    pe_label.clone(),
                    ("thread".into(), thread.thread.clone()),
                ])
                .inc_by(thread.blocked_secs);
            for i in &thread.instances {
                let labels = vec![
                    job(),
                    pe_label.clone(),
                    ("operator".into(), i.operator.clone()),
                    ("instance".into(), i.instance.clone()),
                ];
                tuples_in.get_or_create(&labels).inc_by(i.tuples_in);
                tuples_out.get_or_create(&labels).inc_by(i.tuples_out);
                rate_out.get_or_create(&labels).set(i.rate_out);
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
                let labels = vec![
                    job(),
                    pe_label.clone(),
                    ("operator".into(), e.operator.clone()),
                    ("edge".into(), e.edge.clone()),
                    ("transport".into(), e.transport.clone()),
                ];
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
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = encode(&mut out, &registry);
    out
}

#[cfg(test)]
mod tests {
    use sluice_runtime::metrics::{EdgeMetrics, InstanceMetrics, PeMetrics, ThreadMetrics};

    use super::*;

    #[test]
    fn every_series_is_prefixed_and_labelled() {
        let snapshot = MetricsSnapshot {
            job: "wordcount".into(),
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
        };
        let text = text(&snapshot);
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
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(line.starts_with("sluice_"), "{line}");
        }
    }
}
