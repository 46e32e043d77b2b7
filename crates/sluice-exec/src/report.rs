//! What a finished job reports: per-instance counts (tuples in and out, tuples delivered to
//! each downstream instance, sampled CPU time) and what each operator returned from `stop`,
//! merged per operator.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_graph::{LatencyHistogram, OperatorReport};

use crate::state::{InstanceState, JobState};

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
    /// Every instance, in plan order.
    pub instances: Vec<InstanceReport>,
}

impl JobReport {
    /// The report of a job that ran for `elapsed`, of its `instances` (in any order).
    pub fn new(elapsed: Duration, mut instances: Vec<InstanceReport>) -> Self {
        instances.sort_by(|a, b| a.instance.cmp(&b.instance));
        Self { elapsed, instances }
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
