//! Profile-driven fusion, after COLA (the IBM Streams 2.0 report's "Optimized Fusion"): from
//! what a run measured, which instances share a thread, so that the job's throughput is as
//! high as the cores allow.
//!
//! The model: an instance costs the CPU time the profile measured for it, per second of the
//! run; a tuple crossing between two threads costs `hop_ns` more on each side (the report
//! counts about 170 cycles to enqueue and dequeue through a threaded port). A thread's load is
//! the sum over its instances plus its crossings. The slowest thread bounds the throughput, so
//! the optimizer minimises the largest load with at most `cores` threads: it starts from one
//! thread holding everything (fused) and splits the most loaded thread in two while that
//! lowers the largest load. A thread is split at the point of its instances' topological
//! order that best balances the two halves, counting the new crossings: a cut between a
//! prefix and a suffix of a topological order sends tuples one way only, so threads never
//! feed each other in a cycle (which could deadlock under backpressure). The order is depth
//! first (Kahn's algorithm with a stack), so each chain of instances is contiguous in it and
//! a cut can fall between chains: VWAP's 82 per-group chains split into two halves of the
//! groups, not into stages that every group's tuples would cross. Heavy traffic makes
//! a cut costly, so chains that talk much stay fused, and a chain is cut where its cost would
//! exceed a core.
//!
//! Rounds, as the report's: profile the optimized plan and optimize again; the second round
//! sees the costs of the crossings the first one made and is never worse by this model, since
//! it starts from scratch with better figures.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::{PhysicalPlan, PlanFile, ThreadSpec};

/// What a run measured, per instance and per edge between instances.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// The job's name.
    pub job: String,
    /// How long the measured part of the run lasted, in seconds.
    pub seconds: f64,
    /// Each instance by its name (`sum[1]`).
    pub instances: BTreeMap<String, InstanceProfile>,
    /// Each edge between two instances.
    pub edges: Vec<EdgeProfile>,
}

impl Profile {
    /// A profile of a run of `plan` that lasted `seconds`: each instance's counts
    /// (`figures(name)`: tuples in, tuples out, CPU nanoseconds), and each edge's tuples as
    /// the runtime counted them (`sent(from, to)`: the tuples instance `from` delivered to
    /// instance `to`, by their ids in `plan`), one edge per pair of instances the plan joins,
    /// in the order of the plan's edges.
    pub fn measured(
        plan: &PhysicalPlan,
        seconds: f64,
        figures: impl Fn(&str) -> Option<InstanceProfile>,
        sent: impl Fn(usize, usize) -> u64,
    ) -> Self {
        let instances: BTreeMap<String, InstanceProfile> = plan
            .instances
            .iter()
            .filter_map(|i| Some((i.name.clone(), figures(&i.name)?)))
            .collect();
        let mut joined = BTreeSet::new();
        let edges = plan
            .edges
            .iter()
            .map(|e| (e.from.instance.0, e.to.instance.0))
            .filter(|&pair| joined.insert(pair))
            .map(|(from, to)| EdgeProfile {
                from: plan.instances[from].name.clone(),
                to: plan.instances[to].name.clone(),
                tuples: sent(from, to),
                bytes: 0,
            })
            .collect();
        Self {
            job: plan.job.clone(),
            seconds,
            instances,
            edges,
        }
    }
}

/// One instance's figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InstanceProfile {
    /// Tuples it received.
    pub tuples_in: u64,
    /// Tuples it emitted.
    pub tuples_out: u64,
    /// CPU time its hooks took, in nanoseconds (estimated from a sample of calls).
    pub cpu_ns: u64,
}

/// One edge's figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EdgeProfile {
    /// The upstream instance's name.
    pub from: String,
    /// The downstream instance's name.
    pub to: String,
    /// Tuples that crossed it.
    pub tuples: u64,
    /// Their bytes, where the transport knows them (0 where it does not).
    pub bytes: u64,
}

/// Nanoseconds a tuple costs each side of a threaded port, unless told otherwise: about the
/// report's 170 cycles at 3 GHz.
pub const DEFAULT_HOP_NS: f64 = 60.0;

/// A split must lower the bottleneck by this fraction at least: a smaller gain is within the
/// profile's noise, and a cut costs latency.
pub const MIN_GAIN: f64 = 0.05;

/// The threads profile-driven fusion chose, and the loads it expects.
#[derive(Debug, Clone, PartialEq)]
pub struct FusionChoice {
    /// Each thread's instances (indices into the plan's instances), in a topological order.
    pub threads: Vec<Vec<usize>>,
    /// Each thread's expected load, in cores (1.0 is a core kept busy).
    pub loads: Vec<f64>,
}

impl FusionChoice {
    /// Chooses threads for `plan`'s instances from `profile`, at most `cores` of them.
    /// Instances and edges the profile lacks cost nothing.
    pub fn new(plan: &PhysicalPlan, profile: &Profile, cores: usize, hop_ns: f64) -> Self {
        Self::of_model(plan, &Model::new(plan, profile, hop_ns), cores)
    }

    /// Chooses threads for `plan`'s instances from loads estimated rather than measured:
    /// `cost[i]`, the cores instance `i` keeps busy, and `traffic`, the tuples per second
    /// from one instance to another (indices into the plan's instances).
    pub fn estimated(
        plan: &PhysicalPlan,
        cost: Vec<f64>,
        traffic: Vec<(usize, usize, f64)>,
        cores: usize,
        hop_ns: f64,
    ) -> Self {
        let model = Model {
            cost,
            traffic,
            hop: hop_ns / 1e9,
        };
        Self::of_model(plan, &model, cores)
    }

    /// Splits the most loaded thread while that lowers the largest load, at most `cores`
    /// threads.
    fn of_model(plan: &PhysicalPlan, model: &Model, cores: usize) -> Self {
        let mut threads = vec![depth_first_order(plan)];
        while threads.len() < cores.max(1) {
            let loads: Vec<f64> = threads.iter().map(|t| model.load(t)).collect();
            let (busiest, &worst) = loads
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .expect("there is a thread");
            let Some((at, split_worst)) = model.best_split(&threads[busiest]) else {
                break;
            };
            if split_worst > worst * (1.0 - MIN_GAIN) {
                break;
            }
            let second = threads[busiest].split_off(at);
            threads.insert(busiest + 1, second);
        }
        let loads = threads.iter().map(|t| model.load(t)).collect();
        Self { threads, loads }
    }

    /// The largest load: the bottleneck.
    pub fn bottleneck(&self) -> f64 {
        self.loads.iter().copied().fold(0.0, f64::max)
    }

    /// The choice as a plan file: one PE, a thread per group pinned to a core.
    pub fn plan_file(&self, plan: &PhysicalPlan) -> PlanFile {
        let threads = self
            .threads
            .iter()
            .enumerate()
            .map(|(i, members)| ThreadSpec {
                name: format!("fused{i}"),
                operators: members
                    .iter()
                    .map(|&m| plan.instances[m].name.clone())
                    .collect(),
                core: None,
                pe: None,
                host: None,
            })
            .collect();
        PlanFile {
            threads,
            ..PlanFile::default()
        }
    }
}

/// Costs per second of the run.
struct Model {
    /// CPU per instance, in cores.
    cost: Vec<f64>,
    /// Tuples per second between two instances.
    traffic: Vec<(usize, usize, f64)>,
    /// Cores a tuple's crossing costs each side: hop_ns / 1e9.
    hop: f64,
}

impl Model {
    fn new(plan: &PhysicalPlan, profile: &Profile, hop_ns: f64) -> Self {
        let seconds = profile.seconds.max(1e-9);
        let index: BTreeMap<&str, usize> = plan
            .instances
            .iter()
            .map(|i| (i.name.as_str(), i.id.0))
            .collect();
        let cost = plan
            .instances
            .iter()
            .map(|i| {
                profile
                    .instances
                    .get(&i.name)
                    .map_or(0.0, |p| p.cpu_ns as f64 / 1e9 / seconds)
            })
            .collect();
        let traffic = profile
            .edges
            .iter()
            .filter_map(|e| {
                let (a, b) = (*index.get(e.from.as_str())?, *index.get(e.to.as_str())?);
                Some((a, b, e.tuples as f64 / seconds))
            })
            .collect();
        Self {
            cost,
            traffic,
            hop: hop_ns / 1e9,
        }
    }

    /// A thread's load: its instances' cost and its crossings'.
    fn load(&self, members: &[usize]) -> f64 {
        let mut member = vec![false; self.cost.len()];
        for &m in members {
            member[m] = true;
        }
        let inside = |i: usize| member[i];
        let own: f64 = members.iter().map(|&m| self.cost[m]).sum();
        let crossing: f64 = self
            .traffic
            .iter()
            .filter(|(a, b, _)| inside(*a) != inside(*b))
            .map(|(_, _, rate)| rate * self.hop)
            .sum();
        own + crossing
    }

    /// Where to cut `members` (an index into it) so the larger half's load is least, and
    /// that load; `None` when it has fewer than two instances.
    fn best_split(&self, members: &[usize]) -> Option<(usize, f64)> {
        (1..members.len())
            .map(|at| {
                let worst = self.load(&members[..at]).max(self.load(&members[at..]));
                (at, worst)
            })
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }
}

/// The plan's instances in a depth-first topological order: Kahn's algorithm taking the most
/// recently freed instance first, so an instance's only successor follows it.
fn depth_first_order(plan: &PhysicalPlan) -> Vec<usize> {
    let n = plan.instances.len();
    let mut successors = vec![Vec::new(); n];
    let mut waiting = vec![0usize; n];
    for edge in &plan.edges {
        let (from, to) = (edge.from.instance.0, edge.to.instance.0);
        if !successors[from].contains(&to) {
            successors[from].push(to);
            waiting[to] += 1;
        }
    }
    // Sources in reverse, so the first is taken first.
    let mut ready: Vec<usize> = (0..n).rev().filter(|&i| waiting[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(next) = ready.pop() {
        order.push(next);
        for &to in successors[next].iter().rev() {
            waiting[to] -= 1;
            if waiting[to] == 0 {
                ready.push(to);
            }
        }
    }
    order
}
