//! The planner for one process: instances, threads, and the transport of each physical edge.

use std::collections::BTreeMap;

use sluice_graph::{Graph, Partitioning};
use sluice_transport::TransportSpec;
use thiserror::Error;

use crate::{
    EdgePlan, InstanceId, InstancePlan, PePlan, PhysicalPlan, PlanFile, PortRef, ThreadPlan,
};

/// Which plan the user asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanRequest {
    /// Every instance in one thread.
    Fused,
    /// One thread per instance.
    Threaded,
    /// The threads of a plan file; the string names the file in messages.
    File(String, PlanFile),
}

/// Machine facts and defaults the planner needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanOptions {
    /// Cores available to the job; threads are pinned only when they fit.
    pub cores: usize,
    /// Messages per threaded port unless the request says otherwise.
    pub queue_capacity: usize,
}

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            queue_capacity: sluice_transport::DEFAULT_QUEUE_CAPACITY,
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
    /// A thread pinned to a core the machine lacks.
    #[error("thread '{thread}' is pinned to core {core}, but this machine has cores 0..{cores}")]
    NoSuchCore {
        /// The thread.
        thread: String,
        /// The core asked for.
        core: usize,
        /// How many cores there are.
        cores: usize,
    },
    /// A zero queue capacity.
    #[error("queue_capacity must be at least 1")]
    ZeroCapacity,
    /// Threads that feed each other could deadlock under backpressure.
    #[error("threads {} feed each other in a cycle; with bounded queues that can deadlock, so place those operators so that threads form a pipeline", .0.join(" -> "))]
    ThreadCycle(Vec<String>),
}

/// Plans `graph` as `request` asks.
pub fn plan(
    graph: &Graph,
    request: &PlanRequest,
    options: &PlanOptions,
) -> Result<PhysicalPlan, PlanError> {
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

    let (strategy, mut threads, capacity) = match request {
        PlanRequest::Fused => (
            "fused".to_string(),
            vec![thread(0, "main", None, (0..instances.len()).collect())],
            options.queue_capacity,
        ),
        PlanRequest::Threaded => (
            "threaded".to_string(),
            instances
                .iter()
                .map(|i| thread(i.id.0, &i.name, None, vec![i.id.0]))
                .collect(),
            options.queue_capacity,
        ),
        PlanRequest::File(path, file) => (
            path.clone(),
            threads_from_file(graph, path, file, &instances, &first_instance)?,
            file.queue_capacity.unwrap_or(options.queue_capacity),
        ),
    };
    if capacity == 0 {
        return Err(PlanError::ZeroCapacity);
    }
    assign_cores(&mut threads, options.cores)?;
    for t in &threads {
        for i in &t.instances {
            instances[i.0].thread = t.id;
        }
    }

    let mut edges = Vec::new();
    for edge in graph.edges() {
        let up = graph.operator(edge.from.operator);
        let down = graph.operator(edge.to.operator);
        for i in 0..up.parallelism {
            let from = InstanceId(first_instance[up.id.0] + i);
            let targets: Vec<usize> = match edge.partitioning {
                Partitioning::Forward => vec![i % down.parallelism],
                _ => (0..down.parallelism).collect(),
            };
            for j in targets {
                let to = InstanceId(first_instance[down.id.0] + j);
                let transport = if instances[from.0].thread == instances[to.0].thread {
                    TransportSpec::Fused
                } else {
                    TransportSpec::Threaded { capacity }
                };
                edges.push(EdgePlan {
                    logical: edge.id.0,
                    from: PortRef {
                        instance: from,
                        port: edge.from.port,
                    },
                    to: PortRef {
                        instance: to,
                        port: edge.to.port,
                    },
                    partitioning: edge.partitioning.name().to_string(),
                    transport,
                });
            }
        }
    }
    check_thread_cycles(&threads, &instances, &edges)?;

    Ok(PhysicalPlan {
        job: graph.name().to_string(),
        strategy,
        pes: vec![PePlan {
            id: 0,
            name: "pe0".into(),
            host: "localhost".into(),
            threads,
        }],
        instances,
        edges,
    })
}

fn thread(id: usize, name: &str, core: Option<usize>, instances: Vec<usize>) -> ThreadPlan {
    ThreadPlan {
        id,
        name: name.to_string(),
        core,
        instances: instances.into_iter().map(InstanceId).collect(),
    }
}

fn threads_from_file(
    graph: &Graph,
    path: &str,
    file: &PlanFile,
    instances: &[InstancePlan],
    first_instance: &[usize],
) -> Result<Vec<ThreadPlan>, PlanError> {
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
        threads.push(thread(id, &spec.name, spec.core, members));
    }
    if let Some(missing) = instances.iter().find(|i| !placed.contains_key(&i.id.0)) {
        return Err(PlanError::NotPlaced {
            file: path.to_string(),
            instance: missing.name.clone(),
        });
    }
    threads.retain(|t| !t.instances.is_empty());
    for (id, t) in threads.iter_mut().enumerate() {
        t.id = id;
    }
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

/// Pins threads one per core when they fit and the user pinned none; checks user pins.
fn assign_cores(threads: &mut [ThreadPlan], cores: usize) -> Result<(), PlanError> {
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
