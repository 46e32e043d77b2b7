//! `--plan auto` ([`PlanRequest::Auto`]): the threads chosen for the machine, from the rate
//! the sources are asked for and what the operators declare they cost
//! ([`sluice_graph::DeclaredCost`]).
//!
//! The model is profile-driven fusion's ([`crate::fusion`]) with estimated loads in place of
//! measured ones. Each source instance emits at the asked rate (a nominal one when none is
//! asked: only ratios matter then); every instance takes in what its upstream instances send
//! it and passes on `outputs_per_input` tuples a tuple on each output port, split evenly over
//! a round-robin or key-by edge's targets ([`PhysicalPlan::output_split`]); its load is the
//! rate it takes in times its cost a tuple, and an operator that declares no cost is assumed
//! to cost [`UNDECLARED_NS_PER_TUPLE`]. The choice:
//! - a rate asked that one core carries fused within [`FUSED_HEADROOM`] of its time: fused,
//!   the plan with the shortest tail (no queue, no wake-up between threads);
//! - otherwise (more than that asked, or the sources running as fast as they can): fusion's
//!   split of the instances over at most the machine's cores, splitting the most loaded
//!   thread while that lowers the largest load (the crossings' cost counted, [`PORT_HOP_NS`]
//!   a tuple each side); fused again when no split helps.
//!
//! So auto never plans more threads than cores, each thread pinned to a core of its own, and
//! every thread is one polling worker.

use sluice_graph::Graph;

use crate::fusion::FusionChoice;
use crate::{PhysicalPlan, PlanError, PlanFile, PlanOptions, PlanRequest, ThreadSpec};

/// The CPU nanoseconds a tuple is assumed to cost an operator that declares no cost: about
/// a map or a keyed count over a short key on this project's reference machine.
pub const UNDECLARED_NS_PER_TUPLE: f64 = 100.0;

/// The share of one core a fused plan may need at the asked rate and still be chosen: the
/// rest is headroom for bursts and for the machine's other work.
pub const FUSED_HEADROOM: f64 = 0.5;

/// The CPU nanoseconds a tuple crossing a threaded port costs each side: callgrind counts
/// about 93 instructions a word to write WordCount's port and 108 to read it
/// (docs/benchmarks.md, issue 30), about 15 ns on this project's reference machine. Lower
/// than profile-driven fusion's [`crate::fusion::DEFAULT_HOP_NS`], the IBM report's figure,
/// which would keep a chain passing many small tuples fused where splitting it pays.
pub const PORT_HOP_NS: f64 = 15.0;

/// The rate each source instance is assumed to emit when none is asked (only the loads'
/// ratios matter then).
const NOMINAL_RATE: f64 = 1_000_000.0;

/// What auto chose for a graph, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoChoice {
    /// The threads, as a plan file of one PE: each thread's instances by name.
    pub file: PlanFile,
    /// Why, in a sentence with the figures used.
    pub reason: String,
}

impl AutoChoice {
    /// Chooses threads for `graph` on the cores of `options` at its `source_rate`.
    pub fn new(graph: &Graph, options: &PlanOptions) -> Result<Self, PlanError> {
        // The instances and their edges, as every plan has them; one thread each, so that
        // every edge is a channel and carries its partitioning.
        let probe = crate::plan(
            graph,
            &PlanRequest::Threaded,
            &PlanOptions {
                hosts: None,
                ..options.clone()
            },
        )?;
        let rate = options.source_rate.map(|r| r as f64);
        let loads = Loads::estimate(graph, &probe, rate.unwrap_or(NOMINAL_RATE));
        // Above zero, so that the shares below are figures even where nothing costs.
        let fused: f64 = loads.cost.iter().sum::<f64>().max(1e-12);
        let ns_per_source_tuple = fused * 1e9 / rate.unwrap_or(NOMINAL_RATE);
        let cores = options.cores.max(1);
        let costs = format!(
            "{ns_per_source_tuple:.0} ns of CPU a source tuple fused, {} of {} operator(s) \
             declaring their cost and the others taken at {UNDECLARED_NS_PER_TUPLE} ns a tuple",
            loads.declared,
            graph.operators().len()
        );
        let (threads, why) = match rate {
            Some(rate) if fused <= FUSED_HEADROOM => (
                vec![(0..probe.instances.len()).collect()],
                format!(
                    "fused: at the asked {rate} tuples/s a source, one core carries the job at \
                     {fused:.2} of its time, within the {FUSED_HEADROOM} headroom, by {costs}"
                ),
            ),
            _ => {
                let split =
                    FusionChoice::estimated(&probe, loads.cost, loads.traffic, cores, PORT_HOP_NS);
                let asked = match rate {
                    Some(rate) => format!(
                        "at the asked {rate} tuples/s a source fused needs {fused:.2} of a \
                         core, over the {FUSED_HEADROOM} headroom"
                    ),
                    None => "no rate asked (as fast as the sources go)".to_string(),
                };
                let why = if split.threads.len() == 1 {
                    format!(
                        "fused: {asked}, and no split over {cores} core(s) lowers the busiest \
                         thread's load by {:.0}%, by {costs}",
                        crate::fusion::MIN_GAIN * 100.0
                    )
                } else {
                    let loads: Vec<String> = split
                        .loads
                        .iter()
                        .map(|l| format!("{:.2}", l / fused))
                        .collect();
                    format!(
                        "split: {asked}; the busiest of the threads carries {:.2} of fused's \
                         load (each thread's share: {}; a tuple crossing threads taken at \
                         {PORT_HOP_NS} ns each side), so they go up to {:.2}x fused's rate, \
                         by {costs}",
                        split.bottleneck() / fused,
                        loads.join(", "),
                        fused / split.bottleneck()
                    )
                };
                (split.threads, why)
            }
        };
        let file = PlanFile {
            threads: threads
                .iter()
                .map(|members| ThreadSpec {
                    name: match threads.len() {
                        1 => "main".to_string(),
                        _ => probe.instances[members[0]].name.clone(),
                    },
                    operators: members
                        .iter()
                        .map(|&m| probe.instances[m].name.clone())
                        .collect(),
                    core: None,
                    pe: None,
                    host: None,
                })
                .collect(),
            ..PlanFile::default()
        };
        let reason = format!(
            "auto: {} thread(s) for {cores} core(s), never more threads than cores; {why}",
            threads.len()
        );
        Ok(Self { file, reason })
    }
}

/// The loads the model estimates for a plan's instances.
struct Loads {
    /// Cores each instance keeps busy.
    cost: Vec<f64>,
    /// Tuples per second from one instance to another.
    traffic: Vec<(usize, usize, f64)>,
    /// How many operators declare their cost.
    declared: usize,
}

impl Loads {
    /// Every source instance of `plan` emitting `rate` tuples a second.
    fn estimate(graph: &Graph, plan: &PhysicalPlan, rate: f64) -> Self {
        let n = plan.instances.len();
        let mut incoming = vec![0.0; n];
        let mut cost = vec![0.0; n];
        let mut traffic = Vec::new();
        // Instances are numbered in topological order, so an instance's input is complete by
        // the time it is reached.
        for (i, instance) in plan.instances.iter().enumerate() {
            let op = &graph.operators()[instance.operator];
            let declared = op.cost;
            let ns = declared.map_or(UNDECLARED_NS_PER_TUPLE, |c| c.ns_per_tuple);
            let (taken, passed) = if op.is_source() {
                (rate, rate)
            } else {
                let per_input = declared.map_or(1.0, |c| c.outputs_per_input);
                (incoming[i], incoming[i] * per_input)
            };
            cost[i] = taken * ns / 1e9;
            for edge in plan.edges.iter().filter(|e| e.from.instance.0 == i) {
                let share = passed / plan.output_split(edge) as f64;
                incoming[edge.to.instance.0] += share;
                traffic.push((i, edge.to.instance.0, share));
            }
        }
        Self {
            cost,
            traffic,
            declared: graph
                .operators()
                .iter()
                .filter(|o| o.cost.is_some())
                .count(),
        }
    }
}
