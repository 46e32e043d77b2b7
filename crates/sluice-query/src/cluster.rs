//! Clusters, their nodes, and where each stream process runs (the paper's node selection).
//!
//! A *node* is a core of a host: a stream process placed on it runs as a PE pinned to that
//! core. A *cluster* is a named set of nodes (`'bg'`, `'be'` in the paper):
//!
//! - On the embedded default (no hosts file) every cluster name maps to this machine, and its
//!   nodes are this machine's cores, numbered `0..cores`.
//! - With a hosts file (`--hosts FILE`, the format of `sluice_plan::HostsFile`), a cluster is
//!   the hosts whose `groups` list its name (or the host of that name), in the file's order;
//!   their cores are its nodes, numbered on from the first host's core 0 (hosts `a` and `b`
//!   of 4 cores each in group `bg`: nodes 0-3 are `a`'s cores, 4-7 `b`'s). The hosts file
//!   needed no new field: a cluster is a host group.
//!
//! Nodes are grouped into *psets* (the BlueGene's processing sets) of `pset_size`
//! consecutive nodes (driver setting `pset_size`, default 1): pset `k` is nodes
//! `k*pset_size ..`.
//!
//! An *allocation sequence* says which nodes a stream process may use, in preference order;
//! the first available one is taken:
//!
//! | allocation | the node |
//! |---|---|
//! | none | the next available node: the cluster's node that has run the fewest stream processes of this query so far, the lowest numbered among equals (the paper's naive selection; round robin once every node has one) |
//! | `n` (an integer) | node `n` of the cluster |
//! | `urr(c)` | round robin over cluster `c`'s nodes, from its node 0 in each query |
//! | `inPset(k)` | round robin over the nodes of pset `k` of the cluster |
//! | `psetrr()` | each next stream process in the next pset (round robin over psets; within a pset, its nodes in turn) |
//!
//! An allocation that names no node of the cluster (node 7 of 2 cores, pset 3 of 2, a cluster
//! no host belongs to) is an error before anything starts.

use std::collections::BTreeMap;

use sluice_plan::HostsFile;

/// The hosts and cores stream processes may use.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    /// Where clusters come from.
    kind: MachineKind,
    /// Nodes per pset.
    pset_size: usize,
}

#[derive(Debug, Clone, PartialEq)]
enum MachineKind {
    /// This machine alone: every cluster is its cores.
    Embedded {
        /// Its cores.
        cores: usize,
    },
    /// The hosts of a hosts file: a cluster is a host group.
    Hosts(HostsFile),
}

/// One node: a core of a host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Node {
    /// The host's name (`localhost` on the embedded default).
    pub host: String,
    /// The core on that host.
    pub core: usize,
}

/// How a stream process's node is chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum Allocation {
    /// No allocation given: the next available node.
    Next,
    /// An explicit node number.
    Node(i64),
    /// `urr(cluster)`: round robin over that cluster's nodes.
    RoundRobin(String),
    /// `inPset(k)`: the nodes of pset `k`.
    InPset(i64),
    /// `psetrr()`: each next node in the next pset.
    PsetRoundRobin,
}

/// The host of every node on the embedded default (the planner's name for this machine).
pub const EMBEDDED_HOST: &str = "localhost";

/// The most nodes per pset.
pub const MAX_PSET_SIZE: usize = 1 << 16;

impl Machine {
    /// This machine alone, with `cores` cores (at least one).
    pub fn embedded(cores: usize) -> Self {
        Self {
            kind: MachineKind::Embedded {
                cores: cores.max(1),
            },
            pset_size: 1,
        }
    }

    /// The hosts of a hosts file.
    pub fn from_hosts(hosts: HostsFile) -> Self {
        Self {
            kind: MachineKind::Hosts(hosts),
            pset_size: 1,
        }
    }

    /// The hosts file it was made from, if any.
    pub fn hosts(&self) -> Option<&HostsFile> {
        match &self.kind {
            MachineKind::Hosts(file) => Some(file),
            MachineKind::Embedded { .. } => None,
        }
    }

    /// The same with psets of `size` nodes (1 to [`MAX_PSET_SIZE`]).
    pub fn with_pset_size(mut self, size: usize) -> Self {
        self.pset_size = size.clamp(1, MAX_PSET_SIZE);
        self
    }

    /// The nodes of `cluster` (`None`: of every host), in node-number order; empty when no
    /// host belongs to it.
    pub fn nodes(&self, cluster: Option<&str>) -> Vec<Node> {
        match &self.kind {
            MachineKind::Embedded { cores } => (0..*cores)
                .map(|core| Node {
                    host: EMBEDDED_HOST.into(),
                    core,
                })
                .collect(),
            MachineKind::Hosts(file) => file
                .hosts
                .iter()
                .filter(|h| cluster.is_none_or(|c| h.name == c || h.groups.iter().any(|g| g == c)))
                .flat_map(|h| {
                    (0..h.cores).map(|core| Node {
                        host: h.name.clone(),
                        core,
                    })
                })
                .collect(),
        }
    }

    /// Where `cluster`'s nodes are, for messages: `nodes 0..2 (this machine's cores)`.
    fn describe(&self, cluster: Option<&str>, nodes: usize) -> String {
        let Some(cluster) = cluster else {
            return format!("the hosts have nodes 0..{nodes}");
        };
        match &self.kind {
            MachineKind::Embedded { .. } => {
                format!("cluster '{cluster}' has nodes 0..{nodes}: this machine's cores")
            }
            MachineKind::Hosts(_) if nodes == 0 => {
                format!("no host of the hosts file is named '{cluster}' or lists it in its groups")
            }
            MachineKind::Hosts(_) => format!(
                "cluster '{cluster}' has nodes 0..{nodes}: the cores of the hosts in group \
                 '{cluster}'"
            ),
        }
    }
}

/// Chooses the node of each stream process of one query, in the order they are made.
#[derive(Debug)]
pub struct Allocator<'m> {
    machine: &'m Machine,
    /// Stream processes placed on each node so far.
    load: BTreeMap<Node, usize>,
    /// The next position of each round-robin sequence, by its name.
    next: BTreeMap<String, usize>,
}

impl<'m> Allocator<'m> {
    /// An allocator for a new query on `machine`.
    pub fn new(machine: &'m Machine) -> Self {
        Self {
            machine,
            load: BTreeMap::new(),
            next: BTreeMap::new(),
        }
    }

    /// The node number and node of a new stream process in `cluster` under `allocation`, or
    /// why there is none.
    pub fn allocate(
        &mut self,
        cluster: Option<&str>,
        allocation: &Allocation,
    ) -> Result<(usize, Node), String> {
        let target = match allocation {
            Allocation::RoundRobin(other) => Some(other.as_str()),
            _ => cluster,
        };
        let named = target.unwrap_or("*");
        let nodes = self.machine.nodes(target);
        let none = |what: String| format!("{what}: {}", self.machine.describe(target, nodes.len()));
        if nodes.is_empty() {
            return Err(none(format!("cluster '{named}' has no node")));
        }
        let pset = self.machine.pset_size;
        let psets = nodes.len().div_ceil(pset);
        let number = match allocation {
            Allocation::Next => {
                let least = |n: &usize| (self.load.get(&nodes[*n]).copied().unwrap_or(0), *n);
                (0..nodes.len()).min_by_key(least).unwrap_or(0)
            }
            Allocation::Node(n) => match usize::try_from(*n) {
                Ok(n) if n < nodes.len() => n,
                _ => return Err(none(format!("node {n} is not available"))),
            },
            Allocation::RoundRobin(_) => self.step(format!("urr {named}")) % nodes.len(),
            Allocation::InPset(k) => {
                let k = match usize::try_from(*k) {
                    Ok(k) if k < psets => k,
                    _ => {
                        return Err(none(format!(
                            "pset {k} has no node ({psets} pset(s) of {pset} node(s))"
                        )))
                    }
                };
                let first = k * pset;
                let size = pset.min(nodes.len() - first);
                first + self.step(format!("inPset {named} {k}")) % size
            }
            Allocation::PsetRoundRobin => {
                let i = self.step(format!("psetrr {named}"));
                let k = i % psets;
                let first = k * pset;
                let size = pset.min(nodes.len() - first);
                first + (i / psets) % size
            }
        };
        let node = nodes[number].clone();
        *self.load.entry(node.clone()).or_default() += 1;
        Ok((number, node))
    }

    /// The next position of the sequence `name`, counting from 0.
    fn step(&mut self, name: String) -> usize {
        let at = self.next.entry(name).or_default();
        *at += 1;
        *at - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(machine: &Machine, cluster: &str, allocation: &Allocation, n: usize) -> Vec<usize> {
        let mut allocator = Allocator::new(machine);
        (0..n)
            .map(|_| allocator.allocate(Some(cluster), allocation).unwrap().0)
            .collect()
    }

    #[test]
    fn sequences_choose_nodes_as_the_paper_describes() {
        let machine = Machine::embedded(4);
        assert_eq!(
            numbers(&machine, "bg", &Allocation::Next, 6),
            [0, 1, 2, 3, 0, 1]
        );
        assert_eq!(numbers(&machine, "bg", &Allocation::Node(2), 2), [2, 2]);
        let urr = Allocation::RoundRobin("be".into());
        assert_eq!(numbers(&machine, "bg", &urr, 5), [0, 1, 2, 3, 0]);
        let psets = machine.clone().with_pset_size(2);
        assert_eq!(numbers(&psets, "bg", &Allocation::InPset(1), 3), [2, 3, 2]);
        assert_eq!(
            numbers(&psets, "bg", &Allocation::PsetRoundRobin, 4),
            [0, 2, 1, 3]
        );
    }

    #[test]
    fn the_next_node_avoids_nodes_already_taken() {
        let machine = Machine::embedded(2);
        let mut allocator = Allocator::new(&machine);
        assert_eq!(
            allocator
                .allocate(Some("be"), &Allocation::Node(0))
                .unwrap()
                .0,
            0
        );
        assert_eq!(
            allocator.allocate(Some("bg"), &Allocation::Next).unwrap().0,
            1
        );
    }

    #[test]
    fn an_unavailable_node_is_refused_with_the_cluster_s_nodes() {
        let machine = Machine::embedded(2);
        let mut allocator = Allocator::new(&machine);
        let error = allocator
            .allocate(Some("bg"), &Allocation::Node(7))
            .unwrap_err();
        assert_eq!(
            error,
            "node 7 is not available: cluster 'bg' has nodes 0..2: this machine's cores"
        );
        let error = allocator
            .allocate(Some("bg"), &Allocation::InPset(5))
            .unwrap_err();
        assert!(
            error.starts_with("pset 5 has no node (2 pset(s) of 1 node(s))"),
            "{error}"
        );
    }

    #[test]
    fn with_a_hosts_file_a_cluster_is_a_host_group() {
        let hosts = HostsFile::parse(
            "[[host]]\nname = \"a\"\naddress = \"10.0.0.1\"\ncores = 2\ngroups = [\"bg\"]\n\
             [[host]]\nname = \"b\"\naddress = \"10.0.0.2\"\ncores = 2\ngroups = [\"bg\"]\n\
             [[host]]\nname = \"c\"\naddress = \"10.0.0.3\"\ncores = 1\ngroups = [\"be\"]\n",
        )
        .unwrap();
        let machine = Machine::from_hosts(hosts);
        let nodes = machine.nodes(Some("bg"));
        assert_eq!(nodes.len(), 4);
        assert_eq!(
            nodes[3],
            Node {
                host: "b".into(),
                core: 1
            }
        );
        assert_eq!(machine.nodes(Some("be")).len(), 1);
        assert_eq!(machine.nodes(Some("c")).len(), 1);
        let error = Allocator::new(&machine)
            .allocate(Some("fe"), &Allocation::Next)
            .unwrap_err();
        assert!(
            error.contains("no host of the hosts file is named 'fe'"),
            "{error}"
        );
    }
}
