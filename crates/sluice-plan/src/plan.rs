//! The physical plan's data types.

use serde::{Deserialize, Serialize};
use sluice_transport::TransportSpec;

use crate::{HostSpec, LauncherSpec};

/// Index of an operator instance in [`PhysicalPlan::instances`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct InstanceId(pub usize);

/// A whole job's plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhysicalPlan {
    /// The application's name.
    pub job: String,
    /// How the plan was chosen (`fused`, `threaded`, or the plan file's path).
    pub strategy: String,
    /// The processing elements (OS processes).
    pub pes: Vec<PePlan>,
    /// Every operator instance.
    pub instances: Vec<InstancePlan>,
    /// Every physical edge: one per pair of connected instances.
    pub edges: Vec<EdgePlan>,
    /// Every transport instance: the edges between threads, grouped by the receiver they share.
    pub channels: Vec<ChannelPlan>,
    /// The hosts the PEs run on (every host the job may use).
    pub hosts: Vec<HostSpec>,
    /// The hosts file's `[launcher]` settings; `None` without a hosts file, when every PE runs
    /// on the launcher's machine.
    #[serde(default)]
    pub launcher: Option<LauncherSpec>,
}

/// One processing element: an OS process on a host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PePlan {
    /// Its index.
    pub id: usize,
    /// Its name, used in logs.
    pub name: String,
    /// The host it runs on.
    pub host: String,
    /// Its threads.
    pub threads: Vec<ThreadPlan>,
}

/// One thread of a PE, running its instances fused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadPlan {
    /// Its index within the job.
    pub id: usize,
    /// Its name.
    pub name: String,
    /// The core it is pinned to, if any.
    pub core: Option<usize>,
    /// Its instances, upstream before downstream.
    pub instances: Vec<InstanceId>,
}

/// One instance of an operator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstancePlan {
    /// Its index.
    pub id: InstanceId,
    /// The logical operator's index in the graph.
    pub operator: usize,
    /// `name` for a single instance, `name[i]` for one of several.
    pub name: String,
    /// Its index among the operator's instances.
    pub index: usize,
    /// How many instances the operator has.
    pub parallelism: usize,
    /// The PE it runs in.
    pub pe: usize,
    /// The thread it runs in.
    pub thread: usize,
}

/// A port of an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PortRef {
    /// The instance.
    pub instance: InstanceId,
    /// The port index.
    pub port: usize,
}

/// A physical edge: from an output port of one instance to an input port of another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EdgePlan {
    /// The logical edge's index in the graph.
    pub logical: usize,
    /// The sending port.
    pub from: PortRef,
    /// The receiving port.
    pub to: PortRef,
    /// The logical edge's partitioning (`forward`, `round-robin`, `key-by`, `broadcast`).
    pub partitioning: String,
    /// How tuples cross it.
    pub transport: TransportSpec,
    /// The channel carrying it, in [`PhysicalPlan::channels`]; `None` for a fused edge.
    pub channel: Option<usize>,
}

/// One transport instance: a receiver feeding one input port, and the senders feeding it.
///
/// Where a channel crosses PEs, it is the pair of operators the planner inserts (the Vega
/// paper's transport operators): a sender fused into the thread of each upstream instance and a
/// receiver polled by the thread of the downstream instance. Inside a PE it is a threaded port.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelPlan {
    /// Its index; also names its shared segment.
    pub id: usize,
    /// The transport and its parameters.
    pub transport: TransportSpec,
    /// The input port it feeds.
    pub to: PortRef,
    /// The upstream instances, each with a sender of its own, in instance order.
    pub senders: Vec<InstanceId>,
}

impl ChannelPlan {
    /// The channel's name, unique in its job: `c<id>`.
    pub fn name(&self) -> String {
        format!("c{}", self.id)
    }
}

impl PhysicalPlan {
    /// How many ways `edge`'s upstream instance splits its output on that logical edge: the
    /// number of that instance's edges of it on a round-robin or key-by edge (each takes an
    /// even share: exactly for round robin, on average for key-by), 1 on a forward or
    /// broadcast edge (which carries all of it). The optimizers estimate traffic with it.
    pub fn output_split(&self, edge: &EdgePlan) -> usize {
        match edge.partitioning.as_str() {
            "round-robin" | "key-by" => self
                .edges
                .iter()
                .filter(|e| e.from == edge.from && e.logical == edge.logical)
                .count()
                .max(1),
            _ => 1,
        }
    }

    /// The instance with this id.
    pub fn instance(&self, id: InstanceId) -> &InstancePlan {
        &self.instances[id.0]
    }

    /// All threads of all PEs.
    pub fn threads(&self) -> impl Iterator<Item = &ThreadPlan> {
        self.pes.iter().flat_map(|pe| pe.threads.iter())
    }

    /// Whether `channel` joins two PEs, so it has inserted sender and receiver operators.
    pub fn crosses_pes(&self, channel: &ChannelPlan) -> bool {
        let pe = self.instance(channel.to.instance).pe;
        channel.senders.iter().any(|s| self.instance(*s).pe != pe)
    }

    /// The instances of PE `pe`, by their threads' order.
    pub fn pe_instances(&self, pe: usize) -> impl Iterator<Item = &InstancePlan> {
        self.instances.iter().filter(move |i| i.pe == pe)
    }

    /// The host a PE runs on.
    pub fn host_of(&self, pe: &PePlan) -> Option<&HostSpec> {
        self.hosts.iter().find(|h| h.name == pe.host)
    }

    /// The host (its index in [`PhysicalPlan::hosts`]) of every instance, by instance id; 0
    /// for an instance whose PE names no host of the plan (a plan without hosts).
    pub fn instance_hosts(&self) -> Vec<usize> {
        self.instances
            .iter()
            .map(|i| {
                let host = &self.pes[i.pe].host;
                self.hosts.iter().position(|h| &h.name == host).unwrap_or(0)
            })
            .collect()
    }

    /// How many physical edges feed input `port` of `instance`.
    pub fn fan_in(&self, instance: InstanceId, port: usize) -> usize {
        self.edges
            .iter()
            .filter(|e| e.to.instance == instance && e.to.port == port)
            .count()
    }
}
