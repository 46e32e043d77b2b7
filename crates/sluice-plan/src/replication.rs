//! Automatic replication, after the TCD parallel runtime paper (computation filters that keep
//! no state run as several instances, each flow kept on one instance): from a run's profile,
//! which operator to give more instances, and how many.
//!
//! The operator is the one whose instances are the busiest (CPU per instance at the
//! profiled rate) among those that declared themselves replicable
//! (`GraphBuilder::replicable`); when a busier operator cannot be replicated, the choice says
//! so. Its instances: enough that its share of the job's CPU, spread over them, is no more
//! than a core's share of the whole, so it stops being the bottleneck: `ceil(cores x its
//! share)`, at most the cores, and never fewer than it has. Its input is then spread as the
//! operator declared: key-by (flow affinity, so each key's tuples keep their order through
//! it) or round robin.

use std::collections::{BTreeMap, BTreeSet};

use sluice_graph::Graph;
use thiserror::Error;

use crate::fusion::{InstanceProfile, Profile};
use crate::PhysicalPlan;

/// Why no operator can be replicated.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ReplicationError {
    /// No operator declared itself replicable.
    #[error("no operator of {0} may be replicated (none declared itself stateless or keyed)")]
    NothingReplicable(String),
    /// The profile measured no CPU time.
    #[error("the profile measured no CPU time: record it with sluice run APP --profile FILE")]
    NoCpu,
}

/// The operator to replicate and its instances.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicationChoice {
    /// Its name.
    pub operator: String,
    /// Its index among the graph's operators (the same in the replicated graph).
    pub operator_index: usize,
    /// The instances it has.
    pub from: usize,
    /// The instances it should have.
    pub parallelism: usize,
    /// Its CPU at the profiled rate, in cores.
    pub load: f64,
    /// Its share of the job's CPU.
    pub share: f64,
    /// The busiest operator per instance, when it is another one that cannot be replicated.
    pub busier: Option<String>,
}

impl ReplicationChoice {
    /// Chooses from `profile`, a run of `plan` (whose graph is `graph`), for `cores` cores.
    pub fn new(
        graph: &Graph,
        plan: &PhysicalPlan,
        profile: &Profile,
        cores: usize,
    ) -> Result<Self, ReplicationError> {
        let seconds = profile.seconds.max(1e-9);
        let mut load: BTreeMap<usize, f64> = BTreeMap::new();
        for instance in &plan.instances {
            let cpu = profile
                .instances
                .get(&instance.name)
                .map_or(0, |p| p.cpu_ns);
            *load.entry(instance.operator).or_default() += cpu as f64 / 1e9 / seconds;
        }
        let total: f64 = load.values().sum();
        if total <= 0.0 {
            return Err(ReplicationError::NoCpu);
        }
        let per_instance = |op: usize| load[&op] / graph.operators()[op].parallelism as f64;
        let busiest = |ops: &mut dyn Iterator<Item = usize>| {
            ops.max_by(|&a, &b| per_instance(a).total_cmp(&per_instance(b)))
        };
        let chosen = busiest(
            &mut load
                .keys()
                .copied()
                .filter(|&op| graph.operators()[op].replication.is_some()),
        )
        .ok_or_else(|| ReplicationError::NothingReplicable(graph.name().to_string()))?;
        let overall = busiest(&mut load.keys().copied()).unwrap_or(chosen);
        let def = &graph.operators()[chosen];
        let share = load[&chosen] / total;
        let wanted = (cores as f64 * share).ceil() as usize;
        Ok(Self {
            operator: def.name.clone(),
            operator_index: chosen,
            from: def.parallelism,
            parallelism: wanted.clamp(1, cores.max(1)).max(def.parallelism),
            load: load[&chosen],
            share,
            busier: (overall != chosen).then(|| graph.operators()[overall].name.clone()),
        })
    }

    /// `profile` (of `plan`) as it would read for `wide`, the plan of the replicated graph:
    /// the operator's figures shared evenly among its new instances, the others' unchanged;
    /// an edge to or from the operator carries an even share of what the profile measured
    /// between its other end and all the operator's instances (exact for round robin, the
    /// mean for key-by), every other edge what the profile measured.
    pub fn spread(&self, plan: &PhysicalPlan, profile: &Profile, wide: &PhysicalPlan) -> Profile {
        let mut whole = InstanceProfile::default();
        let mut replicated = BTreeSet::new();
        for instance in plan
            .instances
            .iter()
            .filter(|i| i.operator == self.operator_index)
        {
            replicated.insert(instance.name.as_str());
            if let Some(p) = profile.instances.get(&instance.name) {
                whole.tuples_in += p.tuples_in;
                whole.tuples_out += p.tuples_out;
                whole.cpu_ns += p.cpu_ns;
            }
        }
        let n = self.parallelism.max(1) as u64;
        let share = InstanceProfile {
            tuples_in: whole.tuples_in / n,
            tuples_out: whole.tuples_out / n,
            cpu_ns: whole.cpu_ns / n,
        };
        // The measured traffic between instances, the operator's instances as one (`None`).
        let end = |name: &str| (!replicated.contains(name)).then(|| name.to_string());
        let mut traffic: BTreeMap<(Option<String>, Option<String>), u64> = BTreeMap::new();
        for edge in &profile.edges {
            *traffic.entry((end(&edge.from), end(&edge.to))).or_default() += edge.tuples;
        }
        let wide_end = |id: usize| {
            let instance = &wide.instances[id];
            (instance.operator != self.operator_index).then(|| instance.name.clone())
        };
        Profile::measured(
            wide,
            profile.seconds,
            |name| {
                let instance = wide.instances.iter().find(|i| i.name == name)?;
                if instance.operator == self.operator_index {
                    Some(share.clone())
                } else {
                    profile.instances.get(name).cloned()
                }
            },
            |from, to| {
                let ends = (wide_end(from), wide_end(to));
                let shared = ends.0.is_none() || ends.1.is_none();
                let tuples = traffic.get(&ends).copied().unwrap_or(0);
                if shared {
                    tuples / n
                } else {
                    tuples
                }
            },
        )
    }
}
