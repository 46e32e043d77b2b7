//! What an OMDP run reports: the latency breakdown by hop, the rate reached, the messages
//! missed (against what the feed sender sent) and whether the rate was sustained, as text and as one JSON object
//! (`sluice run omdp --json`).

use serde_json::{json, Value};
use sluice_runtime::JobReport;

use super::collector::HOPS;
use super::OmdpConfig;

/// Above this fraction of messages missed a rate is not sustained (the paper's 0.01%).
pub const MAX_MISSED_FRACTION: f64 = 0.0001;
/// Below this fraction of the asked rate, the feed did not reach the rate.
pub const MIN_RATE_FRACTION: f64 = 0.95;

/// Whether `instance` is one of the operator `base` (`fh`, `de`), or of one of its copies per
/// channel (`fh-0`, `de-1`, ... with `handler-engines`).
fn is_of(instance: &sluice_runtime::InstanceReport, base: &str) -> bool {
    instance
        .operator
        .strip_prefix(base)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
}

/// The messages sent on each channel, from the feed sender's `--json` report (its last line):
/// `None` when it has none.
fn sent_per_channel(sender: &str) -> Option<Vec<u64>> {
    let report: Value = serde_json::from_str(sender.lines().last()?).ok()?;
    report
        .get("messages_per_channel")?
        .as_array()?
        .iter()
        .map(Value::as_u64)
        .collect()
}

/// One hop's figures, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HopLatency {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
}

/// An OMDP run's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Breakdown {
    /// The rate multiple asked for.
    pub rate_multiple: f64,
    /// Packets per second asked for, all channels together.
    pub asked_packets_per_sec: f64,
    /// Packets per second received, all channels together (each channel from its first packet
    /// to its last).
    pub rate_packets_per_sec: f64,
    /// Packets and messages the handlers took.
    pub packets: u64,
    /// Messages the handlers took.
    pub messages: u64,
    /// Messages missed: those the feed sender sent less those received, on each channel; or,
    /// when the sender did not say what it sent, those missing from the channels' sequences.
    pub missed: u64,
    /// Messages the feed sender said it sent, all channels together, if it said.
    pub sent: Option<u64>,
    /// Packets refused as malformed.
    pub malformed: u64,
    /// Samples the metrics collector received, and those the breakdown is over.
    pub samples_received: u64,
    /// Samples the breakdown is over.
    pub samples_used: u64,
    /// The decision engines' state digests, summed: equal feeds give equal digests.
    pub engine_state_digest: u64,
    /// Signals the engines raised (trade-throughs and crossed quotes).
    pub signals: u64,
    /// Each hop of [`HOPS`], in that order.
    pub hops: Vec<(&'static str, HopLatency)>,
}

impl Breakdown {
    /// The figures of a finished run, whose feed sender printed `sender` (its `--json`
    /// report), if it did.
    pub fn of(report: &JobReport, config: &OmdpConfig, sender: Option<&str>) -> Self {
        let ingest = report.operator_report("ingest").counters;
        let metrics = report.operator_report("metrics").counters;
        let mut engines = sluice_graph::OperatorReport::default();
        for engine in report.instances.iter().filter(|i| is_of(i, "de")) {
            engines.merge(&engine.report);
        }
        let engines = engines.counters;
        let count = |map: &std::collections::BTreeMap<String, u64>, key: &str| {
            map.get(key).copied().unwrap_or(0)
        };
        let rate = report
            .instances
            .iter()
            .filter(|i| is_of(i, "fh"))
            .map(|i| {
                let c = &i.report.counters;
                let span = count(c, "last_arrival_ns").saturating_sub(count(c, "first_arrival_ns"));
                let packets = count(c, "packets");
                if span == 0 || packets < 2 {
                    0.0
                } else {
                    (packets - 1) as f64 * 1e9 / span as f64
                }
            })
            .sum();
        let sent = sender.and_then(sent_per_channel);
        let received = |channel: usize| {
            report
                .instances
                .iter()
                .filter(|i| {
                    is_of(i, "fh") && count(&i.report.counters, "channel") == channel as u64
                })
                .map(|i| count(&i.report.counters, "messages"))
                .sum::<u64>()
        };
        let missed = match &sent {
            Some(sent) => sent
                .iter()
                .enumerate()
                .map(|(channel, &n)| n.saturating_sub(received(channel)))
                .sum(),
            None => count(&ingest, "missed_messages"),
        };
        let us = |ns: u64| ns as f64 / 1000.0;
        let hops = HOPS
            .iter()
            .map(|&hop| {
                let at = |stat: &str| us(count(&metrics, &format!("{hop}_{stat}_ns")));
                (
                    hop,
                    HopLatency {
                        mean: at("mean"),
                        p50: at("p50"),
                        p99: at("p99"),
                        p999: at("p999"),
                        max: at("max"),
                    },
                )
            })
            .collect();
        Self {
            rate_multiple: config.rate_multiple,
            asked_packets_per_sec: config.packets_per_sec(),
            rate_packets_per_sec: rate,
            packets: count(&ingest, "packets"),
            messages: count(&ingest, "messages"),
            missed,
            sent: sent.map(|s| s.iter().sum()),
            malformed: count(&ingest, "malformed_packets"),
            samples_received: count(&metrics, "samples_received"),
            samples_used: count(&metrics, "samples_used"),
            engine_state_digest: count(&engines, "state_digest"),
            signals: count(&engines, "trade_throughs") + count(&engines, "crossed_quotes"),
            hops,
        }
    }

    /// Missed messages as a fraction of those expected (sent).
    pub fn missed_fraction(&self) -> f64 {
        let expected = self.sent.unwrap_or(self.messages + self.missed);
        if expected == 0 {
            0.0
        } else {
            self.missed as f64 / expected as f64
        }
    }

    /// Whether the feed reached the asked rate.
    pub fn rate_reached(&self) -> bool {
        self.rate_packets_per_sec >= MIN_RATE_FRACTION * self.asked_packets_per_sec
    }

    /// Whether the application kept up: the rate reached, at most 0.01% missed, and samples
    /// to show for it.
    pub fn sustained(&self) -> bool {
        self.rate_reached()
            && self.missed_fraction() <= MAX_MISSED_FRACTION
            && self.samples_used > 0
    }

    /// The latency of `hop`.
    pub fn hop(&self, hop: &str) -> HopLatency {
        self.hops
            .iter()
            .find(|(name, _)| *name == hop)
            .map_or_else(HopLatency::default, |(_, l)| *l)
    }

    /// The lines `sluice run omdp` prints.
    pub fn to_text(&self) -> String {
        let verdict = if self.sustained() {
            "sustained".to_string()
        } else if !self.rate_reached() {
            format!(
                "NOT sustained: the feed reached {:.0}% of the asked rate",
                100.0 * self.rate_packets_per_sec / self.asked_packets_per_sec.max(1.0)
            )
        } else if self.samples_used == 0 {
            "NOT measured: no latency samples (run longer, or lower --set sample-every)".to_string()
        } else {
            "NOT sustained: more than 0.01% of messages missed".to_string()
        };
        let against = match self.sent {
            Some(sent) => format!(" of {sent} sent"),
            None => " (gaps in the sequences: the feed sender did not say what it sent)".into(),
        };
        let mut text = format!(
            "rate: {}x OPRA Feb 2008 = {:.0} packets/s asked, {:.0} received\n\
             messages: {} in {} packets, {} missed{against} ({:.4}%), {} malformed packets: \
             {verdict}\n\
             latency (us) over {} of {} samples:\n\
             {:<12} {:>9} {:>9} {:>9}\n",
            self.rate_multiple,
            self.asked_packets_per_sec,
            self.rate_packets_per_sec,
            self.messages,
            self.packets,
            self.missed,
            100.0 * self.missed_fraction(),
            self.malformed,
            self.samples_used,
            self.samples_received,
            "hop",
            "mean",
            "p50",
            "p99",
        );
        for (hop, l) in &self.hops {
            let label = match *hop {
                "feed" => "(feed)",
                "fh" => "FH",
                "to_de" => "To DE",
                "de" => "DE",
                "to_mc" => "To MC",
                _ => "end to end",
            };
            text.push_str(&format!(
                "{label:<12} {:>9.2} {:>9.2} {:>9.2}\n",
                l.mean, l.p50, l.p99
            ));
        }
        text.push_str("(feed: sender to handler across UDP, outside end to end, as in the paper)");
        text
    }

    /// The object `sluice run omdp --json` prints (the caller adds `plan`).
    pub fn to_json(&self) -> Value {
        let latency: serde_json::Map<String, Value> = self
            .hops
            .iter()
            .map(|(hop, l)| {
                (
                    hop.to_string(),
                    json!({"mean": l.mean, "p50": l.p50, "p99": l.p99, "p999": l.p999, "max": l.max}),
                )
            })
            .collect();
        json!({
            "app": "omdp",
            "rate_multiple": self.rate_multiple,
            "asked_packets_per_sec": self.asked_packets_per_sec,
            "rate_packets_per_sec": self.rate_packets_per_sec,
            "packets": self.packets,
            "messages": self.messages,
            "missed": self.missed,
            "sent_messages": self.sent,
            "missed_fraction": self.missed_fraction(),
            "malformed_packets": self.malformed,
            "samples_received": self.samples_received,
            "samples_used": self.samples_used,
            "engine_state_digest": self.engine_state_digest,
            "signals": self.signals,
            "rate_reached": self.rate_reached(),
            "sustained": self.sustained(),
            "latency_us": latency,
        })
    }
}
