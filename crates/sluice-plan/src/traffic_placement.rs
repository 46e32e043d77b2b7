//! Placement across hosts that cuts traffic: `sluice plan APP --optimize placement --hosts
//! FILE` writes a plan file that puts every instance on a host, chosen by TurboStream's
//! scheduler ([`crate::consolidate`]), beside the two placements a Storm user would get
//! otherwise, for comparison ([`Scheduler`]).
//!
//! The tasks are the graph's instances, with their load and the traffic between them from one
//! of two sources:
//! - measured ([`profiled_task_graph`], `--profile FILE`: a run's profile, `sluice run APP
//!   --profile FILE`; [`measured_task_graph`] for figures from elsewhere, such as two
//!   samples of a running job's live metrics): a task's load is its CPU time per second, or
//!   the tuples it handled per second where the run measured no CPU; an edge's traffic is the
//!   tuples its upstream instance delivered to its downstream one, as the runtime counted
//!   them, so a key-by edge with skewed keys carries what it really carried;
//! - declared ([`task_graph`], without a profile): every source instance emits at rate 1,
//!   every operator passes on what it receives, a forward or broadcast edge carries its
//!   upstream instance's whole output to each target, and a round-robin or key-by edge splits
//!   it evenly over its targets ([`PhysicalPlan::output_split`]); a task's load is the rate it
//!   handles.
//!
//! On each host the scheduler's tasks are dealt round
//! robin to one PE per free slot (the host's cores), as TurboStream deals tasks to the
//! workers of a node, and each task runs in a thread of its own, as a Storm executor does:
//! threads holding several tasks could feed each other in a cycle (a chain `a -> b -> c` with
//! `a` and `c` on one thread, or on one host and `b` on another), which can deadlock under
//! backpressure and which the planner refuses.
//!
//! On-line, [`rebalance`] weighs a running job's placement against the scheduler's for the
//! traffic measured: it proposes a move when that cuts the traffic crossing hosts by more than
//! a threshold.

use std::collections::BTreeMap;

use crate::consolidate::{PlacementQuality, TaskAssignment, TaskGraph, DEFAULT_BALANCE_TOLERANCE};
use crate::fusion::Profile;
use crate::{HostSpec, InstancePlan, PhysicalPlan, PlanFile, ThreadSpec};

/// Consolidation stops below this many parent tasks, unless the hosts need more.
pub const CONSOLIDATION_THRESHOLD: usize = 16;

/// Who decides the host of each task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheduler {
    /// Task `i` (in topological order) on host `i mod hosts`.
    RoundRobin,
    /// Storm's even scheduler: the hosts' slots interleaved (a slot of each host in turn, as
    /// far as each has slots), tasks dealt to the slots in order.
    StormEven,
    /// TurboStream's consolidation and bisection.
    Consolidated,
}

impl Scheduler {
    /// Every scheduler, in the order reports list them.
    pub const ALL: [Scheduler; 3] = [
        Scheduler::RoundRobin,
        Scheduler::StormEven,
        Scheduler::Consolidated,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Scheduler::RoundRobin => "round robin",
            Scheduler::StormEven => "Storm even",
            Scheduler::Consolidated => "Sluice (consolidation)",
        }
    }

    /// The host of every task of `tasks` on hosts with `slots` free slots each.
    pub fn assign(self, tasks: &TaskGraph, slots: &[usize]) -> Vec<usize> {
        match self {
            Scheduler::RoundRobin => (0..tasks.len()).map(|t| t % slots.len()).collect(),
            Scheduler::StormEven => {
                let interleaved = interleaved_slots(slots);
                (0..tasks.len())
                    .map(|t| interleaved[t % interleaved.len()])
                    .collect()
            }
            Scheduler::Consolidated => {
                TaskAssignment::new(
                    tasks,
                    slots,
                    CONSOLIDATION_THRESHOLD,
                    DEFAULT_BALANCE_TOLERANCE,
                )
                .host_of
            }
        }
    }
}

/// The host of each slot, a slot of each host in turn while it has slots left.
fn interleaved_slots(slots: &[usize]) -> Vec<usize> {
    let most = slots.iter().copied().max().unwrap_or(0);
    let order: Vec<usize> = (0..most)
        .flat_map(|round| (0..slots.len()).filter(move |&h| slots[h] > round))
        .collect();
    if order.is_empty() {
        (0..slots.len()).collect()
    } else {
        order
    }
}

/// The instances of `plan` as tasks, with the traffic the topology implies when each source
/// instance emits at `source_rate(instance)` (declared rates; nothing measured).
pub fn task_graph(plan: &PhysicalPlan, source_rate: impl Fn(usize) -> f64) -> TaskGraph {
    let n = plan.instances.len();
    let mut incoming = vec![0.0; n];
    let mut is_target = vec![false; n];
    for edge in &plan.edges {
        is_target[edge.to.instance.0] = true;
    }
    let mut traffic = Vec::new();
    let mut load = vec![0.0; n];
    // Instances are numbered in topological order, so an instance's input is complete by the
    // time it is reached.
    for instance in 0..n {
        let rate = if is_target[instance] {
            incoming[instance]
        } else {
            source_rate(instance)
        };
        load[instance] = rate;
        for edge in plan.edges.iter().filter(|e| e.from.instance.0 == instance) {
            let share = rate / plan.output_split(edge) as f64;
            incoming[edge.to.instance.0] += share;
            traffic.push((instance, edge.to.instance.0, share));
        }
    }
    let mut tasks = TaskGraph::new(load);
    for (from, to, amount) in traffic {
        tasks.add_traffic(from, to, amount);
    }
    tasks
}

/// The instances of `plan` as tasks with measured figures: `load[i]` is instance `i`'s load
/// (CPU per second, say, or tuples handled per second), `traffic` the tuples (or bytes) per
/// second from one instance to another, by their ids in `plan`. Traffic naming an instance
/// `plan` lacks is ignored; an instance beyond `load`'s end weighs nothing.
pub fn measured_task_graph(
    plan: &PhysicalPlan,
    load: &[f64],
    traffic: impl IntoIterator<Item = (usize, usize, f64)>,
) -> TaskGraph {
    let n = plan.instances.len();
    let weights = (0..n)
        .map(|i| load.get(i).copied().unwrap_or(0.0))
        .collect();
    let mut tasks = TaskGraph::new(weights);
    for (from, to, amount) in traffic {
        if from < n && to < n {
            tasks.add_traffic(from, to, amount);
        }
    }
    tasks
}

/// The instances of `plan` as tasks with what `profile` (a run of the same job) measured:
/// each weighs its CPU time per second or, when the profile holds no CPU time at all, the
/// tuples it handled per second (received, or emitted by a source); each edge carries its
/// measured tuples per second. Instances and edges the profile lacks weigh nothing.
pub fn profiled_task_graph(plan: &PhysicalPlan, profile: &Profile) -> TaskGraph {
    let seconds = profile.seconds.max(1e-9);
    let figures = |i: &InstancePlan| profile.instances.get(&i.name).cloned().unwrap_or_default();
    let timed = profile.instances.values().any(|p| p.cpu_ns > 0);
    let load: Vec<f64> = plan
        .instances
        .iter()
        .map(|i| {
            let p = figures(i);
            if timed {
                p.cpu_ns as f64 / 1e9 / seconds
            } else if p.tuples_in > 0 {
                p.tuples_in as f64 / seconds
            } else {
                p.tuples_out as f64 / seconds
            }
        })
        .collect();
    let id: BTreeMap<&str, usize> = plan
        .instances
        .iter()
        .map(|i| (i.name.as_str(), i.id.0))
        .collect();
    let traffic = profile.edges.iter().filter_map(|e| {
        let (from, to) = (*id.get(e.from.as_str())?, *id.get(e.to.as_str())?);
        Some((from, to, e.tuples as f64 / seconds))
    });
    measured_task_graph(plan, &load, traffic)
}

/// A plan file putting each instance of `plan` on the host `host_of` gives it: on each host,
/// one PE per slot, the host's instances dealt to them in turn, a thread each.
pub fn plan_file(plan: &PhysicalPlan, hosts: &[HostSpec], host_of: &[usize]) -> PlanFile {
    let mut threads = Vec::new();
    for (h, host) in hosts.iter().enumerate() {
        let on_host: Vec<&str> = plan
            .instances
            .iter()
            .filter(|i| host_of[i.id.0] == h)
            .map(|i| i.name.as_str())
            .collect();
        let workers = host.cores.max(1).min(on_host.len());
        for (k, name) in on_host.iter().enumerate() {
            threads.push(ThreadSpec {
                name: (*name).to_string(),
                operators: vec![(*name).to_string()],
                core: None,
                pe: Some(format!("{}-w{}", host.name, k % workers)),
                host: Some(host.name.clone()),
            });
        }
    }
    PlanFile {
        threads,
        ..PlanFile::default()
    }
}

/// A better placement for a running job, and how much better it is predicted to be.
#[derive(Debug, Clone, PartialEq)]
pub struct Rebalance {
    /// The host of every task.
    pub host_of: Vec<usize>,
    /// The placement the job runs on, for the traffic measured.
    pub now: PlacementQuality,
    /// The proposed one, for the same traffic.
    pub proposed: PlacementQuality,
}

/// TurboStream's on-line step: for `tasks` (the traffic and load measured) placed as
/// `current` on hosts with `slots` free slots, the scheduler's placement if it cuts the
/// fraction of the traffic crossing hosts by more than `threshold` (0 to 1); `None` if it does
/// not, or if there is no traffic to judge by.
pub fn rebalance(
    tasks: &TaskGraph,
    current: &[usize],
    slots: &[usize],
    threshold: f64,
) -> Option<Rebalance> {
    if tasks.total_traffic() <= 0.0 {
        return None;
    }
    let host_of = Scheduler::Consolidated.assign(tasks, slots);
    let now = PlacementQuality::of(tasks, current, slots);
    let proposed = PlacementQuality::of(tasks, &host_of, slots);
    (now.cross_host_traffic - proposed.cross_host_traffic > threshold).then_some(Rebalance {
        host_of,
        now,
        proposed,
    })
}

/// Each scheduler's placement quality for `tasks` on hosts with `slots` free slots.
pub fn compare(tasks: &TaskGraph, slots: &[usize]) -> Vec<(Scheduler, PlacementQuality)> {
    Scheduler::ALL
        .iter()
        .map(|&s| {
            (
                s,
                PlacementQuality::of(tasks, &s.assign(tasks, slots), slots),
            )
        })
        .collect()
}
