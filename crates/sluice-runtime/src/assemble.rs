//! Turns a graph and its plan into running threads: creates every instance with its factory,
//! builds the transport of every physical edge between threads, wires the fans, pins and
//! starts the threads.

use std::cell::RefCell;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use sluice_graph::{Graph, OperatorContext, OperatorKind, Partitioning};
use sluice_plan::{InstanceId, PhysicalPlan};
use sluice_sync::IdleStrategy;
use sluice_transport::TransportSpec;

use crate::control::JobControl;
use crate::exec::{Body, Env, Fan, Inbound, Node, Picker, Target, ThreadExec};
use crate::{RunError, RunOptions, RunningJob};

pub(crate) fn start(
    graph: &Graph,
    plan: &PhysicalPlan,
    options: &RunOptions,
) -> Result<RunningJob, RunError> {
    check_plan(graph, plan)?;
    let threads: Vec<_> = plan.threads().collect();
    // Where each instance lives: (thread position, node position in that thread).
    let mut location = vec![(usize::MAX, 0usize); plan.instances.len()];
    for (t, thread) in threads.iter().enumerate() {
        for (k, id) in thread.instances.iter().enumerate() {
            location[id.0] = (t, k);
        }
    }
    if let Some(lost) = location.iter().position(|&(t, _)| t == usize::MAX) {
        return Err(RunError::PlanMismatch(format!(
            "instance '{}' is in no thread",
            plan.instances[lost].name
        )));
    }

    let mut execs: Vec<ThreadExec> = threads
        .iter()
        .map(|t| ThreadExec {
            name: t.name.clone(),
            core: t.core,
            nodes: t
                .instances
                .iter()
                .map(|id| RefCell::new(new_node(graph, plan, *id)))
                .collect(),
            inbound: Vec::new(),
        })
        .collect();

    for edge in graph.edges() {
        let up = graph.operator(edge.from.operator);
        for from in plan
            .instances
            .iter()
            .filter(|i| i.operator == up.id.0)
            .map(|i| i.id)
        {
            let mut physical: Vec<_> = plan
                .edges
                .iter()
                .filter(|e| e.logical == edge.id.0 && e.from.instance == from)
                .collect();
            physical.sort_by_key(|e| e.to.instance);
            if physical.is_empty() {
                continue;
            }
            let (from_thread, from_node) = location[from.0];
            let mut targets = Vec::with_capacity(physical.len());
            for pe in physical {
                let (to_thread, to_node) = location[pe.to.instance.0];
                let label = format!(
                    "{} -> {}",
                    plan.instance(from).name,
                    plan.instance(pe.to.instance).name
                );
                match (&pe.transport, to_thread == from_thread) {
                    (TransportSpec::Fused, true) => targets.push(Target::Fused {
                        node: to_node,
                        port: pe.to.port,
                    }),
                    (TransportSpec::Fused, false) => {
                        return Err(RunError::PlanMismatch(format!(
                            "edge {label} is fused but crosses threads"
                        )))
                    }
                    (_, true) => {
                        return Err(RunError::PlanMismatch(format!(
                            "edge {label} uses {} inside one thread",
                            pe.transport
                        )))
                    }
                    (spec, false) => {
                        let (sender, receiver) =
                            up.outputs[edge.from.port].connect(spec).map_err(|error| {
                                RunError::Transport {
                                    edge: label.clone(),
                                    error,
                                }
                            })?;
                        targets.push(Target::Remote(sender));
                        execs[to_thread].inbound.push(Inbound {
                            receiver,
                            node: to_node,
                            port: pe.to.port,
                            edge: label,
                            ended: false,
                        });
                    }
                }
            }
            let picker = match &edge.partitioning {
                Partitioning::Forward => Picker::Forward,
                Partitioning::RoundRobin => Picker::RoundRobin { next: 0 },
                Partitioning::KeyBy(key) => Picker::Key(key.clone()),
                Partitioning::Broadcast => Picker::Broadcast,
            };
            execs[from_thread].nodes[from_node].get_mut().routes[edge.from.port]
                .push(Fan { picker, targets });
        }
    }

    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let idle = options
        .idle
        .unwrap_or_else(|| IdleStrategy::default_for(execs.len(), cores));
    let control = Arc::new(JobControl::default());
    let ready = Arc::new(Barrier::new(execs.len()));
    let poll_batch = options.poll_batch.max(1);
    let started = Instant::now();
    let mut handles = Vec::with_capacity(execs.len());
    for exec in execs {
        let (control_t, ready_t) = (control.clone(), ready.clone());
        let name = exec.name.clone();
        let spawned = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || {
                let env = Env {
                    control: &control_t,
                    idle,
                    poll_batch,
                };
                exec.run(&env, &ready_t)
            });
        match spawned {
            Ok(handle) => handles.push(handle),
            Err(source) => {
                // The OS is out of threads. Threads already started stay parked at the
                // start barrier until the process exits; the caller reports the error.
                control.fail_with(RunError::Spawn {
                    thread: name,
                    source,
                });
                return Err(control.take_error().unwrap_or(RunError::Aborted));
            }
        }
    }
    Ok(RunningJob {
        control,
        threads: handles,
        started,
        duration: options.duration,
    })
}

fn new_node(graph: &Graph, plan: &PhysicalPlan, id: InstanceId) -> Node {
    let instance = plan.instance(id);
    let op = &graph.operators()[instance.operator];
    let ctx = OperatorContext {
        name: op.name.clone(),
        instance: instance.index,
        parallelism: op.parallelism,
    };
    let body = match &op.kind {
        OperatorKind::Source(factory) => Body::Source(factory(&ctx)),
        OperatorKind::Operator(factory) => Body::Operator(factory(&ctx)),
    };
    Node {
        operator: op.name.clone(),
        body,
        outputs: op.outputs.iter().map(|s| *s.schema()).collect(),
        routes: (0..op.outputs.len()).map(|_| Vec::new()).collect(),
        open_inputs: (0..op.inputs.len()).map(|p| plan.fan_in(id, p)).collect(),
        open_ports: op.inputs.len(),
        finished: false,
        tuples_in: 0,
        tuples_out: 0,
        ctx,
    }
}

fn check_plan(graph: &Graph, plan: &PhysicalPlan) -> Result<(), RunError> {
    if plan.job != graph.name() {
        return Err(RunError::PlanMismatch(format!(
            "the plan is for '{}', the graph is '{}'",
            plan.job,
            graph.name()
        )));
    }
    for instance in &plan.instances {
        let Some(op) = graph.operators().get(instance.operator) else {
            return Err(RunError::PlanMismatch(format!(
                "instance '{}' refers to operator {} of {}",
                instance.name,
                instance.operator,
                graph.operators().len()
            )));
        };
        if let Some(port) = (0..op.inputs.len()).find(|&p| plan.fan_in(instance.id, p) == 0) {
            return Err(RunError::PlanMismatch(format!(
                "input port {port} of instance '{}' has no incoming edge",
                instance.name
            )));
        }
        if instance.parallelism != op.parallelism || instance.index >= op.parallelism {
            return Err(RunError::PlanMismatch(format!(
                "instance '{}' does not match operator '{}' (parallelism {})",
                instance.name, op.name, op.parallelism
            )));
        }
    }
    if let Some(edge) = plan.edges.iter().find(|e| e.logical >= graph.edges().len()) {
        return Err(RunError::PlanMismatch(format!(
            "an edge refers to logical edge {}",
            edge.logical
        )));
    }
    Ok(())
}
