//! What a finished job reports: per-instance counts and what each operator returned from
//! `stop`, merged per operator.

use std::time::Duration;

use sluice_graph::{LatencyHistogram, OperatorReport};

/// One instance's figures.
#[derive(Debug, Clone)]
pub struct InstanceReport {
    /// The logical operator's name.
    pub operator: String,
    /// The instance's name.
    pub instance: String,
    /// Tuples it received.
    pub tuples_in: u64,
    /// Tuples it emitted.
    pub tuples_out: u64,
    /// What its `stop` returned.
    pub report: OperatorReport,
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
    pub(crate) fn new(elapsed: Duration, mut instances: Vec<InstanceReport>) -> Self {
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

    /// Latency merged across every instance that recorded some.
    pub fn latency(&self) -> Option<LatencyHistogram> {
        let mut merged = OperatorReport::default();
        for i in &self.instances {
            merged.merge(&i.report);
        }
        merged.latency
    }

    fn of<'a>(&'a self, operator: &'a str) -> impl Iterator<Item = &'a InstanceReport> + 'a {
        self.instances
            .iter()
            .filter(move |i| i.operator == operator)
    }
}
