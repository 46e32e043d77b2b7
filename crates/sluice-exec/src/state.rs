//! A suspended job's state ([`StopHandle::suspend`](crate::StopHandle::suspend)): every
//! instance's snapshot with what the runtime knew about it, gathered from all its PEs, and
//! dealt back to the instances of the plan it resumes on (`sluice_runtime::resume_with`).
//!
//! Placement keeps each operator's parallelism, so an instance takes back the state of the
//! instance of the same index. When an operator's parallelism changed, its instances'
//! snapshots are merged and split again as its key-partitioned input will deal the keys
//! ([`Snapshot::split`]); a source cannot change its parallelism across a redeploy, since
//! each instance's position is its own.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sluice_graph::{Snapshot, Timer};
use sluice_plan::{InstancePlan, PhysicalPlan};

use crate::RunError;

/// One instance's state when its job was suspended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceState {
    /// What its `snapshot` returned.
    pub snapshot: Snapshot,
    /// Whether it had finished for good (every input ended, or its source was exhausted)
    /// before the suspension reached it: it resumes finished, never called again.
    pub finished: bool,
    /// Input ports whose `port_ended` it was already given, not to be given again.
    pub ended_ports: Vec<usize>,
    /// The timers it had set and that were not yet due.
    pub timers: Vec<Timer>,
    /// Tuples that were in flight to it when an unaligned checkpoint took its state: they
    /// are processed first when it resumes.
    #[serde(default)]
    pub in_flight: Vec<InFlightTuples>,
    /// The tuples it had taken in and sent out when a checkpoint took its state: a job
    /// restarted from it counts on from there, so its report is a run's without the failure.
    /// (A suspension leaves them at 0: the redeploy adds up its runs' reports.)
    #[serde(default)]
    pub counted: Counted,
}

/// Tuples an instance took in and sent out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counted {
    /// Tuples in.
    pub tuples_in: u64,
    /// Tuples out.
    pub tuples_out: u64,
}

/// Tuples in flight to one input port of an instance, as an unaligned checkpoint keeps them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlightTuples {
    /// The input port.
    pub port: usize,
    /// The tuples, encoded (`TupleLog::encode`).
    pub tuples: Vec<u8>,
}

/// Every instance's state, by operator, each operator's instances in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobState {
    /// Per operator, the state of each instance (index = the instance's).
    pub operators: BTreeMap<String, Vec<InstanceState>>,
}

impl JobState {
    /// Records the state of instance `instance` of `operator`.
    pub(crate) fn insert(&mut self, operator: &str, instance: usize, state: InstanceState) {
        let states = self.operators.entry(operator.to_string()).or_default();
        if states.len() <= instance {
            states.resize_with(instance + 1, InstanceState::default);
        }
        states[instance] = state;
    }

    /// The state instance `instance` of `operator`, one of `parallelism`, resumes from;
    /// `None` when the job's state has none of the operator (an operator added since). When
    /// the operator keeps its parallelism, the instance's state is taken out (left at its
    /// default), not copied: each instance resumes once, and a state of millions of keys is
    /// handed over as it was read.
    pub(crate) fn take_for_instance(
        &mut self,
        operator: &str,
        instance: usize,
        parallelism: usize,
        is_source: bool,
    ) -> Result<Option<InstanceState>, RunError> {
        let Some(states) = self.operators.get_mut(operator) else {
            return Ok(None);
        };
        if states.len() == parallelism {
            return Ok(states.get_mut(instance).map(std::mem::take));
        }
        if is_source {
            return Err(RunError::PlanMismatch(format!(
                "source '{operator}' was suspended with {} instance(s) and resumes with \
                 {parallelism}: each instance's position is its own",
                states.len()
            )));
        }
        // Tuples in flight belong to their instance's keys: they cannot be dealt anew.
        if states.iter().any(|s| !s.in_flight.is_empty()) {
            return Err(RunError::PlanMismatch(format!(
                "operator '{operator}' had tuples in flight to it when its unaligned \
                 checkpoint was taken with {} instance(s): resume it with as many (it now \
                 has {parallelism})",
                states.len()
            )));
        }
        let merged = Snapshot::merge(states.iter().map(|s| s.snapshot.clone()));
        let snapshot = merged
            .split(parallelism)
            .into_iter()
            .nth(instance)
            .unwrap_or_default();
        let mut timers: Vec<Timer> = states.iter().flat_map(|s| s.timers.clone()).collect();
        timers.sort_unstable();
        timers.dedup();
        let ended_ports = states
            .first()
            .map(|first| {
                first
                    .ended_ports
                    .iter()
                    .copied()
                    .filter(|p| states.iter().all(|s| s.ended_ports.contains(p)))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Some(InstanceState {
            snapshot,
            finished: states.iter().all(|s| s.finished),
            ended_ports,
            timers,
            in_flight: Vec::new(),
            // Counted once, by the first of the instances the keys are dealt to.
            counted: if instance == 0 {
                Counted {
                    tuples_in: states.iter().map(|s| s.counted.tuples_in).sum(),
                    tuples_out: states.iter().map(|s| s.counted.tuples_out).sum(),
                }
            } else {
                Counted::default()
            },
        }))
    }

    /// The part of it that PE `pe` of `plan` resumes from: the state of its instances, and
    /// an operator's whole state where its parallelism changed (each of its keys may now be
    /// anywhere). A PE is sent only its part.
    pub fn for_pe(&self, plan: &PhysicalPlan, pe: usize) -> JobState {
        JobState {
            operators: part_for_pe(&self.operators, plan, pe),
        }
    }

    /// How many instances it holds the state of.
    pub fn instances(&self) -> usize {
        self.operators.values().map(Vec::len).sum()
    }

    /// Bytes of operator state it holds (keys and values as the operators encoded them).
    pub fn bytes(&self) -> usize {
        self.operators
            .values()
            .flatten()
            .map(|s| s.snapshot.operator.len() + s.snapshot.keyed.bytes())
            .sum()
    }
}

/// The part of `operators` (per operator, a value for each of its instances in order: their
/// states, or where those are kept) that PE `pe` of `plan` resumes from: the values of its own
/// instances (the others left at their default), and all of an operator's values where its
/// parallelism changed (each of its keys may now be anywhere). Operators with no instance on
/// the PE are left out.
pub fn part_for_pe<T: Clone + Default>(
    operators: &BTreeMap<String, Vec<T>>,
    plan: &PhysicalPlan,
    pe: usize,
) -> BTreeMap<String, Vec<T>> {
    let mut part = BTreeMap::new();
    for (operator, values) in operators {
        let here: Vec<&InstancePlan> = plan
            .instances
            .iter()
            .filter(|i| i.pe == pe && operator_of(i) == operator)
            .collect();
        let Some(first) = here.first() else {
            continue;
        };
        if values.len() != first.parallelism {
            part.insert(operator.clone(), values.clone());
            continue;
        }
        let mut kept = vec![T::default(); values.len()];
        for instance in here {
            kept[instance.index] = values[instance.index].clone();
        }
        part.insert(operator.clone(), kept);
    }
    part
}

/// A size of state as people read it: bytes below 10 KiB, KiB with a decimal above (what
/// the on-line placement's log and `sluice bench redeploy` print of [`JobState::bytes`]).
pub fn size_text(bytes: f64) -> String {
    if bytes < 10.0 * 1024.0 {
        format!("{bytes:.0} B")
    } else {
        format!("{:.1} KiB", bytes / 1024.0)
    }
}

/// The operator an instance of a plan belongs to, by name: its own name without the
/// `[index]` a plan gives one of several instances.
pub fn operator_of(instance: &InstancePlan) -> &str {
    let suffix = format!("[{}]", instance.index);
    match instance.name.strip_suffix(&suffix) {
        Some(operator) if instance.parallelism > 1 => operator,
        _ => &instance.name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_graph::KeyedEntries;

    fn keyed(keys: std::ops::Range<u64>) -> InstanceState {
        let mut keyed = KeyedEntries::default();
        for k in keys {
            keyed.push(sluice_types::partition_hash(&k), &k.to_le_bytes(), &[1]);
        }
        InstanceState {
            snapshot: Snapshot {
                operator: Vec::new(),
                keyed,
            },
            timers: vec![Timer::Event(5)],
            ..InstanceState::default()
        }
    }

    #[test]
    fn same_parallelism_keeps_each_instance_its_own_state() {
        let mut state = JobState::default();
        state.insert("sum", 1, keyed(0..3));
        state.insert("sum", 0, keyed(3..5));
        assert_eq!(state.instances(), 2);
        assert_eq!(size_text(state.bytes() as f64), "45 B");
        let one = state
            .take_for_instance("sum", 1, 2, false)
            .unwrap()
            .unwrap();
        assert_eq!(one, keyed(0..3));
        assert_eq!(state.take_for_instance("other", 0, 1, false).unwrap(), None);
        assert_eq!(size_text(15_000.0), "14.6 KiB");
    }

    /// An instance's state is handed over, not copied: what is left of it is empty, and the
    /// other instances' states are as they were.
    #[test]
    fn an_instance_takes_its_state_out() {
        let mut state = JobState::default();
        state.insert("sum", 0, keyed(0..3));
        state.insert("sum", 1, keyed(3..5));
        assert_eq!(
            state.take_for_instance("sum", 0, 2, false).unwrap(),
            Some(keyed(0..3))
        );
        assert_eq!(state.operators["sum"][0], InstanceState::default());
        assert_eq!(state.bytes(), 18);
        assert_eq!(
            state.take_for_instance("sum", 1, 2, false).unwrap(),
            Some(keyed(3..5))
        );
        assert_eq!(state.bytes(), 0);
    }

    #[test]
    fn another_parallelism_deals_every_key_to_its_new_owner() {
        let mut state = JobState::default();
        state.insert("sum", 0, keyed(0..40));
        state.insert("sum", 1, keyed(40..100));
        let parts: Vec<InstanceState> = (0..3)
            .map(|i| {
                state
                    .take_for_instance("sum", i, 3, false)
                    .unwrap()
                    .unwrap()
            })
            .collect();
        let total: usize = parts.iter().map(|p| p.snapshot.keyed.len()).sum();
        assert_eq!(total, 100);
        for (i, part) in parts.iter().enumerate() {
            assert!(part
                .snapshot
                .keyed
                .iter()
                .all(|e| sluice_types::pick_instance(e.hash, 3) == i));
            assert_eq!(part.timers, vec![Timer::Event(5)]);
        }
        assert!(state.take_for_instance("sum", 0, 3, true).is_err());
    }

    #[test]
    fn an_instance_names_its_operator_without_its_index() {
        let instance = |name: &str, index, parallelism| InstancePlan {
            id: sluice_plan::InstanceId(0),
            operator: 0,
            name: name.into(),
            index,
            parallelism,
            pe: 0,
            thread: 0,
        };
        assert_eq!(operator_of(&instance("sum[1]", 1, 2)), "sum");
        assert_eq!(operator_of(&instance("sum", 0, 1)), "sum");
        assert_eq!(operator_of(&instance("odd[0]", 0, 1)), "odd[0]");
    }
}
