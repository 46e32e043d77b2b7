//! The planner: instances, their threads and PEs, and the transport of each physical edge.

use std::collections::BTreeMap;

use sluice_graph::Graph;
use sluice_transport::{TransportError, TransportSpec, MAX_QUEUE_CAPACITY};
use thiserror::Error;

use crate::{
    EdgePlan, HostSpec, HostsFile, InstanceId, InstancePlan, PePlan, PhysicalPlan, PlanFile,
    ThreadPlan,
};

/// Which plan the user asked for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PlanRequest {
    /// Every instance in one thread.
    Fused,
    /// One thread per instance.
    Threaded,
    /// One PE (process) per instance, each with one thread.
    Processes,
    /// The threads of a plan file; the string names the file in messages.
    File(String, PlanFile),
    /// The plan for the machine, from the rate asked of the sources and the operators'
    /// declared costs ([`crate::AutoChoice`], whose reason says why): fused when one core
    /// carries the rate with headroom, else the instances split over at most as many
    /// threads as cores, in one PE. The default.
    #[default]
    Auto,
}

/// Machine facts and defaults the planner needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanOptions {
    /// Cores of this machine, when the job runs on it alone; threads are pinned only when
    /// they fit.
    pub cores: usize,
    /// Messages per threaded port unless the request says otherwise.
    pub queue_capacity: usize,
    /// The hosts the job may use; this machine alone when `None`.
    pub hosts: Option<HostsFile>,
    /// The job takes checkpoints: every channel carries the stream of one upstream instance
    /// (an instance aligns the barriers of each upstream instance, which a receiver merging
    /// several senders could not tell apart), and a transport that loses tuples (`udp-mq`)
    /// is refused ([`PhysicalPlan::check_checkpointed`]).
    pub checkpointed: bool,
    /// Tuples a second each source instance is asked to emit, which [`PlanRequest::Auto`]
    /// plans for; `None` when the sources run as fast as they can (a file read to its end).
    pub source_rate: Option<u64>,
}

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            queue_capacity: sluice_transport::DEFAULT_QUEUE_CAPACITY,
            hosts: None,
            checkpointed: false,
            source_rate: None,
        }
    }
}

/// Why no plan could be made.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PlanError {
    /// A plan file names an operator the graph lacks.
    #[error("{file}: thread '{thread}' names '{name}', which is not an operator of {job} (operators: {known})")]
    UnknownOperator {
        /// The plan file.
        file: String,
        /// The thread naming it.
        thread: String,
        /// The name.
        name: String,
        /// The job.
        job: String,
        /// The operators there are.
        known: String,
    },
    /// A plan file names an instance beyond the operator's parallelism.
    #[error(
        "{file}: thread '{thread}' names '{name}', but the operator has {parallelism} instance(s)"
    )]
    NoSuchInstance {
        /// The plan file.
        file: String,
        /// The thread naming it.
        thread: String,
        /// The name.
        name: String,
        /// The operator's parallelism.
        parallelism: usize,
    },
    /// An instance placed in two threads.
    #[error(
        "{file}: instance '{instance}' is placed in both thread '{first}' and thread '{second}'"
    )]
    PlacedTwice {
        /// The plan file.
        file: String,
        /// The instance.
        instance: String,
        /// One thread.
        first: String,
        /// The other.
        second: String,
    },
    /// An instance no thread runs.
    #[error("{file}: instance '{instance}' is not placed in any thread")]
    NotPlaced {
        /// The plan file.
        file: String,
        /// The instance.
        instance: String,
    },
    /// A placement constraint the planner cannot meet.
    #[error("operator '{operator}' must run {constraint}, but {reason}")]
    Placement {
        /// The constrained operator.
        operator: String,
        /// The constraint.
        constraint: String,
        /// Why it cannot be met.
        reason: String,
    },
    /// A thread pinned to a core its host lacks.
    #[error("thread '{thread}' is pinned to core {core}, but its host has cores 0..{cores}")]
    NoSuchCore {
        /// The thread.
        thread: String,
        /// The core asked for.
        core: usize,
        /// How many cores there are.
        cores: usize,
    },
    /// A threaded port's capacity out of range.
    #[error("{setting} {value} is out of range: a threaded port holds 1 to {MAX_QUEUE_CAPACITY} messages")]
    QueueCapacity {
        /// The setting that gave it: `queue_capacity`, or a plan file's.
        setting: String,
        /// The value given.
        value: usize,
    },
    /// A plan file pins two transports on one edge.
    #[error("{file}: [[edge]] {from} -> {to} is pinned twice")]
    PinnedTwice {
        /// The plan file.
        file: String,
        /// The upstream operator named.
        from: String,
        /// The downstream operator named.
        to: String,
    },
    /// Two threads of a plan with one name.
    #[error("two threads are named '{0}'; every thread needs a name of its own")]
    DuplicateThread(String),
    /// A thread name an OS thread cannot take.
    #[error("thread name '{}' is empty or holds a NUL byte", .0.escape_debug())]
    ThreadName(String),
    /// A channel's transport refuses its parameters or its senders, or is not built in: the
    /// runtime's message for the same plan.
    #[error("edge {edge}: {error}")]
    Transport {
        /// The channel, as `from -> to`.
        edge: String,
        /// What the transport refuses.
        error: TransportError,
    },
    /// A plan file pins a transport on an edge the graph lacks.
    #[error("{file}: [[edge]] {from} -> {to} is not an edge of {job}")]
    UnknownEdge {
        /// The plan file.
        file: String,
        /// The upstream operator named.
        from: String,
        /// The downstream operator named.
        to: String,
        /// The job.
        job: String,
    },
    /// A pinned transport that cannot carry the edge where its ends are placed.
    #[error("edge {from} -> {to} is pinned to {transport}, but {reason}")]
    PinnedTransport {
        /// The upstream instance.
        from: String,
        /// The downstream instance.
        to: String,
        /// The transport pinned.
        transport: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// A plan file places a thread on a host the hosts file lacks.
    #[error("{file}: thread '{thread}' names host '{host}', which is not a host of the job (hosts: {known})")]
    UnknownHost {
        /// The plan file.
        file: String,
        /// The thread naming it.
        thread: String,
        /// The name.
        host: String,
        /// The hosts there are.
        known: String,
    },
    /// Two threads of one PE name different hosts.
    #[error("{file}: PE '{pe}' has threads on host '{first}' and on host '{second}'; a PE runs on one host")]
    HostConflict {
        /// The plan file.
        file: String,
        /// The PE.
        pe: String,
        /// The host one thread names.
        first: String,
        /// The host another names.
        second: String,
    },
    /// A plan file replicates an operator the graph it is given does not yet run that way.
    #[error("{file} runs '{operator}' as {wanted} instance(s), but the graph has {has}: build the graph with sluice_plan::replicated_graph first")]
    Unreplicated {
        /// The plan file.
        file: String,
        /// The operator.
        operator: String,
        /// The parallelism the file asks for.
        wanted: usize,
        /// The graph's.
        has: usize,
    },
    /// A plan file's replication the graph refuses.
    #[error("{file}: {error}")]
    Replication {
        /// The plan file.
        file: String,
        /// Why.
        error: sluice_graph::GraphError,
    },
    /// A checkpointed job's channel merging the streams of several upstream instances.
    #[error("edge {edge}: a checkpointed job needs one upstream instance per channel (barriers are aligned per upstream instance, and one receiver merging {senders} senders cannot tell which tuples follow which sender's barrier)")]
    SharedChannel {
        /// The channel, as `from, ... -> to`.
        edge: String,
        /// How many senders it merges.
        senders: usize,
    },
    /// A checkpointed job's channel over a transport that may drop tuples.
    #[error("edge {edge}: {transport} is at most once (it drops datagrams it has no room for), so a checkpoint cannot cover the tuples it loses; pin another transport or run without checkpoints")]
    LosesTuples {
        /// The channel, as `from -> to`.
        edge: String,
        /// The transport's name.
        transport: &'static str,
    },
    /// Threads that feed each other could deadlock under backpressure.
    #[error("threads {} feed each other in a cycle; with bounded queues that can deadlock, so place those operators so that threads form a pipeline", .0.join(" -> "))]
    ThreadCycle(Vec<String>),
}

/// The graph `request` runs: `graph` with the operators a plan file replicates given their
/// instances ([`Graph::replicated`]); `graph` itself for every other request.
pub fn replicated_graph(graph: &Graph, request: &PlanRequest) -> Result<Graph, PlanError> {
    let PlanRequest::File(path, file) = request else {
        return Ok(graph.clone());
    };
    file.replicas.iter().try_fold(graph.clone(), |g, r| {
        g.replicated(&r.operator, r.parallelism)
            .map_err(|error| PlanError::Replication {
                file: path.clone(),
                error,
            })
    })
}

/// Plans `graph` as `request` asks. A plan file that replicates operators needs the graph
/// [`replicated_graph`] makes.
///
/// In phases: the operators' instances; their threads, as the request places them, grouped
/// into PEs; the PEs placed on hosts and the threads on cores; a transport for every channel;
/// then the whole plan checked.
pub fn plan(
    graph: &Graph,
    request: &PlanRequest,
    options: &PlanOptions,
) -> Result<PhysicalPlan, PlanError> {
    check_replicas(graph, request)?;
    let (mut instances, first_instance) = instances_of(graph);
    let placed = threads_of(graph, request, options, &instances, &first_instance)?;
    let mut pes = group_into_pes(placed.threads);
    for pe in &pes {
        for t in &pe.threads {
            for i in &t.instances {
                instances[i.0].thread = t.id;
                instances[i.0].pe = pe.id;
            }
        }
    }
    let hosts = options
        .hosts
        .clone()
        .unwrap_or_else(|| HostsFile::localhost(options.cores))
        .hosts;
    let host_of_pe = place_on_hosts(graph, request, &mut pes, &instances, &hosts)?;
    let host_of: Vec<usize> = instances.iter().map(|i| host_of_pe[i.pe]).collect();
    let pinned = match request {
        PlanRequest::File(path, file) => pinned_transports(graph, path, file)?,
        _ => BTreeMap::new(),
    };
    let (edges, channels) = crate::transports::choose(
        graph,
        &instances,
        &first_instance,
        &pinned,
        placed.capacity,
        (&host_of, &hosts),
        options.checkpointed,
    )?;
    let threads: Vec<ThreadPlan> = pes.iter().flat_map(|p| p.threads.clone()).collect();
    check_thread_cycles(&threads, &instances, &edges)?;

    let plan = PhysicalPlan {
        job: graph.name().to_string(),
        strategy: placed.strategy,
        pes,
        instances,
        edges,
        channels,
        hosts,
        launcher: options.hosts.as_ref().map(|h| h.launcher.clone()),
    };
    plan.check()?;
    if options.checkpointed {
        plan.check_checkpointed()?;
    }
    Ok(plan)
}

/// Refuses a plan file whose replicated operators `graph` does not have at the parallelism
/// the file gives (the graph was not made by [`replicated_graph`]).
fn check_replicas(graph: &Graph, request: &PlanRequest) -> Result<(), PlanError> {
    let PlanRequest::File(path, file) = request else {
        return Ok(());
    };
    for r in &file.replicas {
        let has = graph.find(&r.operator).map_or(0, |o| o.parallelism);
        if has != r.parallelism {
            return Err(PlanError::Unreplicated {
                file: path.clone(),
                operator: r.operator.clone(),
                wanted: r.parallelism,
                has,
            });
        }
    }
    Ok(())
}

/// Every operator's instances in topological order (named `op[i]` when there are several),
/// not yet on a PE or thread; and the index of each operator's first instance.
fn instances_of(graph: &Graph) -> (Vec<InstancePlan>, Vec<usize>) {
    let mut instances = Vec::new();
    let mut first_instance = vec![0usize; graph.operators().len()];
    for &op_id in graph.topological_order() {
        let op = graph.operator(op_id);
        first_instance[op_id.0] = instances.len();
        for index in 0..op.parallelism {
            let name = if op.parallelism == 1 {
                op.name.clone()
            } else {
                format!("{}[{index}]", op.name)
            };
            instances.push(InstancePlan {
                id: InstanceId(instances.len()),
                operator: op_id.0,
                name,
                index,
                parallelism: op.parallelism,
                pe: 0,
                thread: 0,
            });
        }
    }
    (instances, first_instance)
}

/// The threads a request places the instances on, before they are grouped into PEs.
struct Placed {
    /// The plan's strategy: the request's name, or the plan file's path.
    strategy: String,
    /// Each thread with the name of its PE.
    threads: Vec<(String, ThreadPlan)>,
    /// Messages each queue between threads holds, checked against its limit.
    capacity: usize,
}

/// Places the instances on threads (and names their PEs) as `request` says, with the queue
/// capacity it asks for, refused outside `1..=MAX_QUEUE_CAPACITY`.
fn threads_of(
    graph: &Graph,
    request: &PlanRequest,
    options: &PlanOptions,
    instances: &[InstancePlan],
    first_instance: &[usize],
) -> Result<Placed, PlanError> {
    let thread_each = |pe: &dyn Fn(&InstancePlan) -> String| {
        instances
            .iter()
            .map(|i| (pe(i), thread(i.id.0, &i.name, None, vec![i.id.0])))
            .collect()
    };
    let (strategy, threads, capacity) = match request {
        PlanRequest::Fused => (
            "fused".to_string(),
            vec![(
                MAIN_PE.to_string(),
                thread(0, "main", None, (0..instances.len()).collect()),
            )],
            options.queue_capacity,
        ),
        PlanRequest::Threaded => (
            "threaded".to_string(),
            thread_each(&|_| MAIN_PE.to_string()),
            options.queue_capacity,
        ),
        PlanRequest::Processes => (
            "processes".to_string(),
            thread_each(&|i| i.name.clone()),
            options.queue_capacity,
        ),
        PlanRequest::File(path, file) => (
            path.clone(),
            threads_from_file(graph, path, file, instances, first_instance)?,
            file.queue_capacity.unwrap_or(options.queue_capacity),
        ),
        PlanRequest::Auto => (
            "auto".to_string(),
            threads_from_file(
                graph,
                "auto",
                &crate::AutoChoice::new(graph, options)?.file,
                instances,
                first_instance,
            )?,
            options.queue_capacity,
        ),
    };
    if !(1..=MAX_QUEUE_CAPACITY).contains(&capacity) {
        let setting = match request {
            PlanRequest::File(path, file) if file.queue_capacity.is_some() => {
                format!("{path}: queue_capacity")
            }
            _ => "queue_capacity".to_string(),
        };
        return Err(PlanError::QueueCapacity {
            setting,
            value: capacity,
        });
    }
    Ok(Placed {
        strategy,
        threads,
        capacity,
    })
}

/// Places the PEs on `hosts` (where a plan file pins them, else by the placement algorithm)
/// and each host's threads on its cores; names each PE's host and returns the host index of
/// each PE.
fn place_on_hosts(
    graph: &Graph,
    request: &PlanRequest,
    pes: &mut [PePlan],
    instances: &[InstancePlan],
    hosts: &[HostSpec],
) -> Result<Vec<usize>, PlanError> {
    let pe_of: Vec<usize> = instances.iter().map(|i| i.pe).collect();
    let pinned_hosts = match request {
        PlanRequest::File(path, file) => hosts_from_file(path, file, pes, hosts)?,
        _ => vec![None; pes.len()],
    };
    let host_of_pe = crate::placement::place(graph, pes, instances, &pe_of, hosts, &pinned_hosts)?;
    for (pe, &h) in pes.iter_mut().zip(&host_of_pe) {
        pe.host = hosts[h].name.clone();
    }
    for (h, host) in hosts.iter().enumerate() {
        let mut on_host: Vec<&mut ThreadPlan> = pes
            .iter_mut()
            .zip(&host_of_pe)
            .filter(|(_, &ph)| ph == h)
            .flat_map(|(pe, _)| pe.threads.iter_mut())
            .collect();
        assign_cores(&mut on_host, host.cores)?;
    }
    Ok(host_of_pe)
}

/// The PE of threads that name none.
const MAIN_PE: &str = "main";

/// Groups threads into PEs by name, in order of first appearance; numbers the threads in that
/// order, so thread ids index [`PhysicalPlan::threads`].
fn group_into_pes(placed: Vec<(String, ThreadPlan)>) -> Vec<PePlan> {
    let mut pes: Vec<PePlan> = Vec::new();
    for (pe_name, t) in placed {
        match pes.iter_mut().find(|p| p.name == pe_name) {
            Some(pe) => pe.threads.push(t),
            None => pes.push(PePlan {
                id: pes.len(),
                name: pe_name,
                host: "localhost".into(),
                threads: vec![t],
            }),
        }
    }
    for (id, t) in pes
        .iter_mut()
        .flat_map(|p| p.threads.iter_mut())
        .enumerate()
    {
        t.id = id;
    }
    pes
}

/// The transports a plan file pins, by logical edge.
fn pinned_transports(
    graph: &Graph,
    path: &str,
    file: &PlanFile,
) -> Result<BTreeMap<usize, TransportSpec>, PlanError> {
    let mut pinned = BTreeMap::new();
    for spec in &file.edges {
        let edge = graph.edges().iter().find(|e| {
            graph.operator(e.from.operator).name == spec.from
                && graph.operator(e.to.operator).name == spec.to
        });
        let Some(edge) = edge else {
            return Err(PlanError::UnknownEdge {
                file: path.to_string(),
                from: spec.from.clone(),
                to: spec.to.clone(),
                job: graph.name().to_string(),
            });
        };
        if pinned.insert(edge.id.0, spec.transport.clone()).is_some() {
            return Err(PlanError::PinnedTwice {
                file: path.to_string(),
                from: spec.from.clone(),
                to: spec.to.clone(),
            });
        }
    }
    Ok(pinned)
}

fn thread(id: usize, name: &str, core: Option<usize>, instances: Vec<usize>) -> ThreadPlan {
    ThreadPlan {
        id,
        name: name.to_string(),
        core,
        instances: instances.into_iter().map(InstanceId).collect(),
    }
}

/// The host (index into `hosts`) each PE's threads name in a plan file, if any.
fn hosts_from_file(
    path: &str,
    file: &PlanFile,
    pes: &[PePlan],
    hosts: &[HostSpec],
) -> Result<Vec<Option<usize>>, PlanError> {
    let mut pinned: Vec<Option<usize>> = vec![None; pes.len()];
    for spec in &file.threads {
        let Some(name) = &spec.host else { continue };
        let host =
            hosts
                .iter()
                .position(|h| h.name == *name)
                .ok_or_else(|| PlanError::UnknownHost {
                    file: path.to_string(),
                    thread: spec.name.clone(),
                    host: name.clone(),
                    known: hosts
                        .iter()
                        .map(|h| h.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })?;
        let pe_name = spec.pe.as_deref().unwrap_or(MAIN_PE);
        let pe = pes.iter().position(|p| p.name == pe_name).unwrap_or(0);
        match pinned[pe] {
            Some(other) if other != host => {
                return Err(PlanError::HostConflict {
                    file: path.to_string(),
                    pe: pe_name.to_string(),
                    first: hosts[other].name.clone(),
                    second: name.clone(),
                })
            }
            _ => pinned[pe] = Some(host),
        }
    }
    Ok(pinned)
}

fn threads_from_file(
    graph: &Graph,
    path: &str,
    file: &PlanFile,
    instances: &[InstancePlan],
    first_instance: &[usize],
) -> Result<Vec<(String, ThreadPlan)>, PlanError> {
    let mut placed: BTreeMap<usize, String> = BTreeMap::new();
    let mut threads = Vec::new();
    for (id, spec) in file.threads.iter().enumerate() {
        let mut members = Vec::new();
        for name in &spec.operators {
            let (op_name, index) = split_instance(name);
            let op = graph
                .find(op_name)
                .ok_or_else(|| PlanError::UnknownOperator {
                    file: path.to_string(),
                    thread: spec.name.clone(),
                    name: name.clone(),
                    job: graph.name().to_string(),
                    known: graph
                        .operators()
                        .iter()
                        .map(|o| o.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })?;
            let range = match index {
                None => 0..op.parallelism,
                Some(i) if i < op.parallelism => i..i + 1,
                Some(_) => {
                    return Err(PlanError::NoSuchInstance {
                        file: path.to_string(),
                        thread: spec.name.clone(),
                        name: name.clone(),
                        parallelism: op.parallelism,
                    })
                }
            };
            for i in range {
                let instance = first_instance[op.id.0] + i;
                if let Some(first) = placed.insert(instance, spec.name.clone()) {
                    return Err(PlanError::PlacedTwice {
                        file: path.to_string(),
                        instance: instances[instance].name.clone(),
                        first,
                        second: spec.name.clone(),
                    });
                }
                members.push(instance);
            }
        }
        // Upstream before downstream inside a thread, whatever order the file lists.
        members.sort_unstable();
        let pe = spec.pe.clone().unwrap_or_else(|| MAIN_PE.to_string());
        threads.push((pe, thread(id, &spec.name, spec.core, members)));
    }
    if let Some(missing) = instances.iter().find(|i| !placed.contains_key(&i.id.0)) {
        return Err(PlanError::NotPlaced {
            file: path.to_string(),
            instance: missing.name.clone(),
        });
    }
    threads.retain(|(_, t)| !t.instances.is_empty());
    Ok(threads)
}

/// Splits `op[3]` into (`op`, Some(3)); a plain name gives (`name`, None).
fn split_instance(name: &str) -> (&str, Option<usize>) {
    if let Some(open) = name.find('[') {
        if let Some(index) = name[open + 1..].strip_suffix(']') {
            if let Ok(i) = index.parse() {
                return (&name[..open], Some(i));
            }
        }
    }
    (name, None)
}

/// Pins the threads of one host one per core when they fit and the user pinned none; checks
/// user pins.
fn assign_cores(threads: &mut [&mut ThreadPlan], cores: usize) -> Result<(), PlanError> {
    for t in threads.iter() {
        if let Some(core) = t.core {
            if core >= cores {
                return Err(PlanError::NoSuchCore {
                    thread: t.name.clone(),
                    core,
                    cores,
                });
            }
        }
    }
    let user_pinned = threads.iter().any(|t| t.core.is_some());
    if !user_pinned && threads.len() > 1 && threads.len() <= cores {
        for (core, t) in threads.iter_mut().enumerate() {
            t.core = Some(core);
        }
    }
    Ok(())
}

fn check_thread_cycles(
    threads: &[ThreadPlan],
    instances: &[InstancePlan],
    edges: &[EdgePlan],
) -> Result<(), PlanError> {
    let n = threads.len();
    let mut feeds = vec![Vec::new(); n];
    for e in edges {
        let (a, b) = (
            instances[e.from.instance.0].thread,
            instances[e.to.instance.0].thread,
        );
        if a != b && !feeds[a].contains(&b) {
            feeds[a].push(b);
        }
    }
    // Depth-first search with colours; a grey successor closes a cycle.
    #[derive(Clone, Copy, PartialEq)]
    enum Colour {
        White,
        Grey,
        Black,
    }
    let mut colour = vec![Colour::White; n];
    for start in 0..n {
        if colour[start] != Colour::White {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        colour[start] = Colour::Grey;
        while let Some(&mut (at, ref mut next)) = stack.last_mut() {
            if let Some(&to) = feeds[at].get(*next) {
                *next += 1;
                match colour[to] {
                    Colour::White => {
                        colour[to] = Colour::Grey;
                        stack.push((to, 0));
                    }
                    Colour::Grey => {
                        let from = stack.iter().position(|&(t, _)| t == to).unwrap_or(0);
                        let mut names: Vec<String> = stack[from..]
                            .iter()
                            .map(|&(t, _)| threads[t].name.clone())
                            .collect();
                        names.push(threads[to].name.clone());
                        return Err(PlanError::ThreadCycle(names));
                    }
                    Colour::Black => {}
                }
            } else {
                colour[at] = Colour::Black;
                stack.pop();
            }
        }
    }
    Ok(())
}
