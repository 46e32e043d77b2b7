//! What a finished job reports: per-instance counts (tuples in and out, tuples delivered to
//! each downstream instance, sampled CPU time) and what each operator returned from `stop`,
//! merged per operator. Tuples an edge lost on the way (`udp-mq`'s missing datagrams,
//! `shm-osr`'s skipped records) are counters of the receiving instance's report, named
//! [`LOST_TUPLES_COUNTER`] and the edge ([`JobReport::lost_tuples`]), so they cross from a
//! PE to its launcher with the rest.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_graph::{LatencyHistogram, OperatorReport};

use crate::state::{InstanceState, JobState};

/// The start of the name of the counter, in a receiving instance's report, of the tuples one
/// of its inbound edges lost: `lost_tuples:` and the edge's label (`split -> sum[0]`).
pub const LOST_TUPLES_COUNTER: &str = "lost_tuples:";

/// One instance's figures.
#[derive(Debug, Clone)]
pub struct InstanceReport {
    /// The logical operator's name.
    pub operator: String,
    /// The instance's name.
    pub instance: String,
    /// Its index among the operator's instances.
    pub index: usize,
    /// Tuples it received.
    pub tuples_in: u64,
    /// Tuples it emitted.
    pub tuples_out: u64,
    /// CPU time its hooks took, in nanoseconds, estimated from a sample of its thread's
    /// rounds; 0 unless the job was profiled ([`crate::RunOptions::profile_cpu`]).
    pub cpu_ns: u64,
    /// Tuples it delivered to each downstream instance, measured: (that instance's id in the
    /// plan, `PhysicalPlan::instances` index; tuples), by id, one entry per instance even
    /// where several edges lead there. A broadcast edge delivers each tuple to every target.
    pub sent: Vec<(usize, u64)>,
    /// What its `stop` returned.
    pub report: OperatorReport,
    /// How long the latency markers took from their sources to this instance.
    pub arrival_latency: Option<LatencyHistogram>,
    /// Whether it is a sink (it has no output ports).
    pub sink: bool,
    /// Its state, when the job was suspended ([`crate::StopHandle::suspend`]).
    pub state: Option<InstanceState>,
}

/// A finished job's figures.
#[derive(Debug, Clone)]
pub struct JobReport {
    /// Wall time from start to the end of the last thread.
    pub elapsed: Duration,
    /// Every instance, in plan order (of the last run, when the job was restarted).
    pub instances: Vec<InstanceReport>,
    /// What its checkpoints and restarts did, when it took checkpoints.
    pub checkpoints: Option<CheckpointSummary>,
}

/// What a checkpointed job's checkpoints and restarts did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointSummary {
    /// Checkpoints complete.
    pub completed: u64,
    /// Checkpoints that failed (a part not written, the timeout, the job failing first).
    pub failed: u64,
    /// The last complete checkpoint's number.
    pub last: Option<u64>,
    /// How long the last complete one took, from its ask to its manifest.
    pub last_duration: Duration,
    /// Bytes of its parts.
    pub last_bytes: u64,
    /// The longest alignment of an instance in it.
    pub last_alignment: Duration,
    /// Why the last failed one failed.
    pub last_failure: Option<String>,
    /// Every restart, in order.
    pub restarts: Vec<Restart>,
}

/// One restart of a checkpointed job after a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restart {
    /// When, from the job's start.
    pub at: Duration,
    /// The checkpoint it restarted from; `None`: from the start, none being complete.
    pub from: Option<u64>,
    /// The failure, its first line.
    pub cause: String,
}

impl std::fmt::Display for CheckpointSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "checkpoints: {} complete, {} failed",
            self.completed, self.failed
        )?;
        if let Some(last) = self.last {
            write!(
                f,
                "; the last ({last}) took {:.3} s, {}, longest alignment {:.1} ms",
                self.last_duration.as_secs_f64(),
                crate::size_text(self.last_bytes as f64),
                self.last_alignment.as_secs_f64() * 1e3
            )?;
        }
        if let Some(why) = &self.last_failure {
            write!(f, "\nlast failed checkpoint: {why}")?;
        }
        for restart in &self.restarts {
            let from = restart
                .from
                .map_or("the start".to_string(), |n| format!("checkpoint {n}"));
            write!(
                f,
                "\nrestarted at {:.3} s from {from}, after: {}",
                restart.at.as_secs_f64(),
                restart.cause
            )?;
        }
        Ok(())
    }
}

impl JobReport {
    /// The report of a job that ran for `elapsed`, of its `instances` (in any order).
    pub fn new(elapsed: Duration, mut instances: Vec<InstanceReport>) -> Self {
        instances.sort_by(|a, b| a.instance.cmp(&b.instance));
        Self {
            elapsed,
            instances,
            checkpoints: None,
        }
    }

    /// Every edge that lost tuples on the way, with how many, by edge.
    pub fn lost_tuples(&self) -> Vec<(String, u64)> {
        let mut lost = BTreeMap::new();
        for i in &self.instances {
            for (name, count) in &i.report.counters {
                if let Some(edge) = name.strip_prefix(LOST_TUPLES_COUNTER) {
                    *lost.entry(edge.to_string()).or_insert(0) += count;
                }
            }
        }
        lost.into_iter().filter(|(_, count)| *count > 0).collect()
    }

    /// Tuples received by all instances of `operator`.
    pub fn tuples_in(&self, operator: &str) -> u64 {
        self.of(operator).map(|i| i.tuples_in).sum()
    }

    /// Tuples emitted by all instances of `operator`.
    pub fn tuples_out(&self, operator: &str) -> u64 {
        self.of(operator).map(|i| i.tuples_out).sum()
    }

    /// The merged report of all instances of `operator`.
    pub fn operator_report(&self, operator: &str) -> OperatorReport {
        let mut merged = OperatorReport::default();
        for i in self.of(operator) {
            merged.merge(&i.report);
        }
        merged
    }

    /// The job's end-to-end latency: what its operators recorded themselves if any did (a
    /// benchmark's exact per-tuple figures), otherwise the sampled latency markers' time from
    /// the sources to the sinks.
    pub fn latency(&self) -> Option<LatencyHistogram> {
        let mut merged = OperatorReport::default();
        for i in &self.instances {
            merged.merge(&i.report);
        }
        merged.latency.or_else(|| {
            merge_histograms(
                self.instances
                    .iter()
                    .filter(|i| i.sink)
                    .filter_map(|i| i.arrival_latency.as_ref()),
            )
        })
    }

    /// How long the sampled latency markers took from the sources to the instances of
    /// `operator`: the latency of each hop, read operator by operator.
    pub fn arrival_latency(&self, operator: &str) -> Option<LatencyHistogram> {
        merge_histograms(self.of(operator).filter_map(|i| i.arrival_latency.as_ref()))
    }

    /// The state the job was suspended with ([`crate::StopHandle::suspend`]), to resume it
    /// from (`sluice_runtime::resume_with`); `None` if it was not suspended. An instance that
    /// reported no state had finished before the suspension (its whole thread had).
    pub fn state(&self) -> Option<JobState> {
        if self.instances.iter().all(|i| i.state.is_none()) {
            return None;
        }
        let mut state = JobState::default();
        for i in &self.instances {
            let finished = InstanceState {
                finished: true,
                ..InstanceState::default()
            };
            state.insert(&i.operator, i.index, i.state.clone().unwrap_or(finished));
        }
        Some(state)
    }

    /// Adds the figures of `later`, a run of the same job resumed from this one's state: each
    /// instance's counts and CPU are summed, its reports and latencies merged (an instance is
    /// stopped once in the job's life, so its own report is in one of the runs), and the
    /// elapsed times added. The state is `later`'s.
    pub fn absorb(&mut self, later: JobReport) {
        self.elapsed += later.elapsed;
        for run in later.instances {
            let Some(ours) = self
                .instances
                .iter_mut()
                .find(|i| i.instance == run.instance)
            else {
                self.instances.push(run);
                continue;
            };
            ours.tuples_in += run.tuples_in;
            ours.tuples_out += run.tuples_out;
            ours.cpu_ns += run.cpu_ns;
            ours.report.merge(&run.report);
            ours.arrival_latency =
                merge_histograms(ours.arrival_latency.iter().chain(&run.arrival_latency));
            ours.state = run.state;
        }
        self.instances.sort_by(|a, b| a.instance.cmp(&b.instance));
    }

    fn of<'a>(&'a self, operator: &'a str) -> impl Iterator<Item = &'a InstanceReport> + 'a {
        self.instances
            .iter()
            .filter(move |i| i.operator == operator)
    }
}

/// Tuples delivered per destination instance, from per-edge counts that may name an instance
/// more than once: summed by destination, in the order of the ids.
pub(crate) fn per_destination(deliveries: impl Iterator<Item = (usize, u64)>) -> Vec<(usize, u64)> {
    let mut sent: BTreeMap<usize, u64> = BTreeMap::new();
    for (to, tuples) in deliveries {
        *sent.entry(to).or_default() += tuples;
    }
    sent.into_iter().collect()
}

/// The histograms merged into one, or `None` if there are none.
fn merge_histograms<'a>(
    histograms: impl Iterator<Item = &'a LatencyHistogram>,
) -> Option<LatencyHistogram> {
    histograms.fold(None, |merged, h| {
        let mut merged = merged.unwrap_or_else(|| LatencyHistogram::new_from(h));
        // Adding fails only for values beyond the bounds; every histogram here comes from
        // `latency_histogram` (saturating at an hour), so none is.
        let _ = merged.add(h);
        Some(merged)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receiving(instance: &str, counters: &[(&str, u64)]) -> InstanceReport {
        InstanceReport {
            operator: "sum".into(),
            instance: instance.into(),
            index: 0,
            tuples_in: 0,
            tuples_out: 0,
            cpu_ns: 0,
            sent: Vec::new(),
            report: OperatorReport {
                counters: counters.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
                latency: None,
            },
            arrival_latency: None,
            sink: false,
            state: None,
        }
    }

    #[test]
    fn every_edge_that_lost_tuples_is_named_with_its_count() {
        let report = JobReport::new(
            Duration::from_secs(1),
            vec![
                receiving(
                    "sum[0]",
                    &[("lost_tuples:split -> sum[0]", 35), ("distinct_keys", 9)],
                ),
                receiving("sum[1]", &[("lost_tuples:split -> sum[1]", 0)]),
                receiving("sum[2]", &[("lost_tuples:split -> sum[2]", 7)]),
            ],
        );
        assert_eq!(
            report.lost_tuples(),
            [
                ("split -> sum[0]".to_string(), 35),
                ("split -> sum[2]".to_string(), 7)
            ]
        );
    }
}
