//! The suite's records as its report and plots read them: every field optional but the
//! experiment, so a record of any kind (and of an earlier run) reads as a [`Row`].

use serde::Deserialize;
use serde_json::Value;

use crate::foundation::stats::LatencySummary;
use crate::foundation::warnings::Warning;

/// The fields of a record the report reads (every one optional but `experiment`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Row {
    pub(crate) experiment: String,
    pub(crate) bench: Option<String>,
    pub(crate) transport: Option<String>,
    pub(crate) peer: Option<String>,
    pub(crate) compared_with: Vec<String>,
    pub(crate) encoding: Option<String>,
    pub(crate) tuple_size: Option<usize>,
    pub(crate) target_rate: Option<u64>,
    pub(crate) receivers: Option<usize>,
    pub(crate) ring_bytes: Option<usize>,
    pub(crate) skipped: bool,
    pub(crate) reason: Option<String>,
    pub(crate) tuples_per_sec: Option<f64>,
    pub(crate) gbit_per_sec: Option<f64>,
    pub(crate) per_receiver_tuples_per_sec: Option<f64>,
    pub(crate) latency_method: Option<String>,
    pub(crate) latency_ns: Option<LatencySummary>,
    pub(crate) round_trip_ns: Option<LatencySummary>,
    pub(crate) p50_ratio_to_handoff: Option<f64>,
    pub(crate) baseline: Option<BaselineRow>,
    pub(crate) cacheline_oneway_ns: Option<f64>,
    pub(crate) handoff_oneway_ns: Option<f64>,
    pub(crate) stamped_oneway_ns: Option<f64>,
    pub(crate) memcpy: Vec<MemcpyRow>,
    pub(crate) machine: Option<MachineRow>,
    pub(crate) commit: Option<String>,
    pub(crate) duration_s: Option<f64>,
    pub(crate) runs: Vec<Value>,
    pub(crate) app: Option<String>,
    pub(crate) plan: Option<String>,
    pub(crate) unit: Option<String>,
    pub(crate) input: Option<String>,
    pub(crate) per_sec: Option<f64>,
    pub(crate) input_per_sec: Option<f64>,
    pub(crate) yardsticks: Vec<YardstickRow>,
    pub(crate) senders: Option<usize>,
    pub(crate) size_bytes: Option<u64>,
    pub(crate) packet_bytes: Option<usize>,
    pub(crate) mb_per_sec: Option<f64>,
    pub(crate) serial_mb_per_sec: Option<f64>,
    pub(crate) speedup: Option<f64>,
    pub(crate) rate_multiple: Option<f64>,
    pub(crate) missed_fraction: Option<f64>,
    pub(crate) sustained: Option<bool>,
    /// Figures of the record that cannot be true as printed.
    pub(crate) warnings: Vec<Warning>,
    /// OMDP's per-hop breakdown, by hop.
    pub(crate) latency_us: std::collections::BTreeMap<String, HopRow>,
}

/// One hop of OMDP's breakdown, in microseconds.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct HopRow {
    pub(crate) mean: f64,
    pub(crate) p99: f64,
}

/// One yardstick of an application's record.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct YardstickRow {
    pub(crate) name: String,
    pub(crate) per_sec: f64,
    pub(crate) ratio: Option<f64>,
}

/// A record's baseline.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct BaselineRow {
    pub(crate) name: String,
    pub(crate) tuples_per_sec: f64,
    pub(crate) gbit_per_sec: f64,
    pub(crate) latency_ns: Option<LatencySummary>,
    pub(crate) round_trip_ns: Option<LatencySummary>,
}

/// One memcpy figure of the hardware record.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct MemcpyRow {
    pub(crate) bytes: usize,
    pub(crate) gbit_per_sec: f64,
}

/// The machine of a record.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct MachineRow {
    pub(crate) cpu: String,
    pub(crate) cores: usize,
    pub(crate) kernel: String,
    pub(crate) memory_gib: f64,
}

impl Row {
    pub(crate) fn is(&self, experiment: &str) -> bool {
        self.experiment == experiment && !self.skipped
    }

    pub(crate) fn transport(&self) -> &str {
        self.transport.as_deref().unwrap_or("")
    }

    pub(crate) fn size(&self) -> usize {
        self.tuple_size.unwrap_or(0)
    }

    pub(crate) fn latency(&self) -> bool {
        self.bench.as_deref() == Some("latency")
    }

    pub(crate) fn normal(&self) -> bool {
        self.encoding.as_deref() == Some("normal")
    }

    pub(crate) fn tps(&self) -> f64 {
        self.tuples_per_sec.unwrap_or(0.0)
    }

    /// Whether its latency was measured by ping-pong.
    pub(crate) fn ping_pong(&self) -> bool {
        self.latency_method.as_deref() == Some("ping-pong")
    }

    /// What the record measured, in a few words: its bench, transport or peer, application
    /// and plan, tuple size, rate and senders, those it has.
    pub(crate) fn label(&self) -> String {
        let words = [
            self.bench.clone(),
            self.transport.clone(),
            self.peer.clone(),
            self.app.clone(),
            self.plan.clone(),
            self.tuple_size.map(|b| format!("{b} B")),
            self.target_rate.map(|r| format!("at {r}/s")),
            self.senders.map(|s| format!("{s} sender(s)")),
        ];
        words.into_iter().flatten().collect::<Vec<_>>().join(" ")
    }

    /// How its latency was measured, for a table: `RTT/2`, `ping-pong RTT/2` or `one way`.
    pub(crate) fn method(&self) -> &'static str {
        match self.latency_method.as_deref() {
            Some("half-round-trip") => "RTT/2",
            Some("ping-pong") => "ping-pong RTT/2",
            _ => "one way",
        }
    }
}

/// The records as rows (records that do not parse are left out).
pub(crate) fn rows(records: &[Value]) -> Vec<Row> {
    records
        .iter()
        .filter_map(|r| serde_json::from_value(r.clone()).ok())
        .collect()
}

/// The transports in the order the tables list them.
pub(crate) const ORDER: [&str; 6] = [
    "fused",
    "threaded",
    "shm-vega",
    "shm-osr",
    "tcp",
    "tcp-batched",
];
