//! Turns a graph and its plan into running threads: creates every instance of the PEs this
//! process runs with its factory, builds the transport of every channel (binding receivers
//! first, so senders in other processes can open them), wires the fans, pins and starts the
//! threads.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};

use sluice_graph::{EdgeDef, Graph, OperatorContext, OperatorKind, Partitioning};
use sluice_plan::{ChannelPlan, EdgePlan, InstanceId, PhysicalPlan, ThreadPlan};
use sluice_shm::SegmentName;
use sluice_sync::IdleStrategy;
use sluice_transport::tcp::JobSecret;
use sluice_transport::{ChannelSite, ErasedReceiver, Rendezvous};

use crate::clock::{EventClock, Timers};
use crate::control::JobControl;
use crate::exec::{
    wait_for_go, Body, CpuSampler, Env, Fan, Inbound, InstanceName, Node, Picker, Target,
    ThreadExec,
};
use crate::metrics::{InstanceLabels, ProcessMetrics, ThreadLabels, ThreadPublisher};
use crate::scheduler::{Rotation, ThreadTask};
use crate::state::JobState;
use crate::watch::{Progress, Worker};
use crate::{InstanceReport, RunError, RunOptions};

/// Which PEs of a plan this process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every PE, as threads of this process.
    All,
    /// One PE; the others are other processes.
    Pe(usize),
}

impl Scope {
    fn runs(self, pe: usize) -> bool {
        match self {
            Self::All => true,
            Self::Pe(own) => own == pe,
        }
    }
}

/// Where the channels of a job meet: their shared segments are named after the job's id and
/// the channel, with a random nonce each receiver draws so that nobody can create the name
/// first (in [`sluice_shm::DEFAULT_DIR`], where [`sluice_shm::JobSegments`] sweeps them), and
/// their network receivers are bound on their hosts' addresses; the launcher hands the nonces
/// and the addresses to the senders (`endpoints`).
#[derive(Debug, Clone)]
pub struct Sites {
    /// The job's id, unique among the jobs running on the host.
    job: String,
    /// The job's secret, which network receivers require of senders.
    secret: JobSecret,
    /// What the senders of every bound receiver must be told, by channel: a network
    /// receiver's address, a shared-memory receiver's segment nonce.
    pub endpoints: BTreeMap<usize, Rendezvous>,
}

impl Sites {
    /// The sites of job `job`, whose network receivers require `secret`; no endpoint known yet.
    pub fn new(job: impl Into<String>, secret: JobSecret) -> Self {
        Self {
            job: job.into(),
            secret,
            endpoints: BTreeMap::new(),
        }
    }

    fn site(
        &self,
        plan: &PhysicalPlan,
        channel: &ChannelPlan,
        sender: Option<InstanceId>,
    ) -> Result<ChannelSite, RunError> {
        let mismatch =
            |e: String| RunError::PlanMismatch(format!("channel {}: {e}", channel.name()));
        let mut segment =
            SegmentName::new(&self.job, &channel.name()).map_err(|e| mismatch(e.to_string()))?;
        let mut peer = None;
        match self.endpoints.get(&channel.id) {
            Some(Rendezvous::Address(address)) => peer = Some(*address),
            Some(Rendezvous::SegmentNonce(nonce)) => segment = segment.with_nonce(*nonce),
            None => {}
        }
        let receiver_pe = &plan.pes[plan.instance(channel.to.instance).pe];
        let bind = plan
            .host_of(receiver_pe)
            .map(|h| h.address)
            .ok_or_else(|| mismatch(format!("host '{}' is not in the plan", receiver_pe.host)))?;
        let sender_index = sender
            .and_then(|s| channel.senders.iter().position(|&x| x == s))
            .unwrap_or(0);
        Ok(ChannelSite {
            segment,
            bind,
            peer,
            secret: self.secret.clone(),
            sender_index: sender_index as u32,
            receiver_pe: receiver_pe.id,
            channel: channel.id,
        })
    }
}

/// The receivers this process bound for channels whose senders open them by name or address.
pub struct Bound {
    receivers: Vec<(usize, Box<dyn ErasedReceiver>)>,
    /// What the senders of each bound receiver must be told, by channel.
    pub endpoints: Vec<(usize, Rendezvous)>,
}

/// Whether `channel` is joined by one in-process pair (its only sender and its receiver both
/// run here) rather than by a receiver bound at a site and senders opening it.
fn joined_in_process(plan: &PhysicalPlan, channel: &ChannelPlan, scope: Scope) -> bool {
    matches!(channel.senders.as_slice(), [s] if scope.runs(plan.instance(*s).pe))
        && scope.runs(plan.instance(channel.to.instance).pe)
}

/// The label of the first channel of `plan` whose transport runs only between PEs launched by
/// `mpirun`, if any.
pub fn mpi_channel(plan: &PhysicalPlan) -> Option<String> {
    plan.channels
        .iter()
        .find(|c| c.transport.needs_mpi_launcher())
        .map(|c| plan.channel_label(c))
}

/// Binds the receivers of this process's channels that senders open by name, before any
/// sender (in this process or another) opens them.
pub fn bind(
    graph: &Graph,
    plan: &PhysicalPlan,
    scope: Scope,
    sites: &Sites,
) -> Result<Bound, RunError> {
    check_plan(graph, plan)?;
    let mut receivers = Vec::new();
    let mut endpoints = Vec::new();
    for channel in &plan.channels {
        let to = plan.instance(channel.to.instance);
        if !scope.runs(to.pe) || joined_in_process(plan, channel, scope) {
            continue;
        }
        let stream = &graph.operators()[to.operator].inputs[channel.to.port];
        let (receiver, rendezvous) = stream
            .bind_receiver(
                &channel.transport,
                &sites.site(plan, channel, None)?,
                channel.senders.len(),
            )
            .map_err(|error| RunError::Transport {
                edge: plan.channel_label(channel),
                error,
            })?;
        receivers.push((channel.id, receiver));
        endpoints.extend(rendezvous.map(|r| (channel.id, r)));
    }
    Ok(Bound {
        receivers,
        endpoints,
    })
}

/// Who watches the threads a [`start`] starts: the job's control, and where they publish
/// their live metrics (when they are on); and the state the job resumes from, if it does.
pub struct Watched<'a> {
    /// The job's flags and failures.
    pub control: &'a Arc<JobControl>,
    /// Where the threads publish their live metrics; `None` when they are off.
    pub metrics: Option<&'a ProcessMetrics>,
    /// The state the job resumes from: each instance's is taken out of it as it is built.
    pub resume: Option<&'a mut JobState>,
}

/// Builds this process's threads (opening the senders of channels bound elsewhere), starts
/// them and returns once each has run its operators' start hooks; their sources wait for
/// `control` to say go.
///
/// In phases: the threads of this process's PEs and where each instance lives in them; each
/// thread's operators (their state resumed); the receivers bound here attached to their
/// instances; every edge's fans from its upstream instances, fused or through transports;
/// then the threads spawned.
pub fn start(
    graph: &Graph,
    plan: &PhysicalPlan,
    scope: Scope,
    sites: &Sites,
    bound: Bound,
    options: &RunOptions,
    watched: Watched<'_>,
) -> Result<Vec<Worker>, RunError> {
    let Watched {
        control,
        metrics,
        mut resume,
    } = watched;
    let placed: Vec<(&str, &ThreadPlan)> = plan
        .pes
        .iter()
        .filter(|pe| scope.runs(pe.id))
        .flat_map(|pe| pe.threads.iter().map(move |t| (pe.name.as_str(), t)))
        .collect();
    let location = locate_instances(plan, scope, &placed)?;
    let mut execs = Vec::with_capacity(placed.len());
    for (_, t) in &placed {
        let nodes = t
            .instances
            .iter()
            .map(|id| new_node(graph, plan, *id, resume.as_deref_mut()).map(RefCell::new))
            .collect::<Result<_, _>>()?;
        execs.push(ThreadExec {
            name: t.name.clone(),
            core: t.core,
            nodes,
            inbound: Vec::new(),
        });
    }
    attach_bound_receivers(plan, bound, &location, &mut execs);
    let wiring = Wiring {
        graph,
        plan,
        scope,
        sites,
        location: &location,
    };
    for edge in graph.edges() {
        wiring.fans_of(edge, &mut execs)?;
    }
    spawn_threads(plan, options, (control, metrics), execs, &placed)
}

/// Where each local instance lives, by instance id: (thread position in `placed`, node
/// position in that thread); `None` for instances of other processes. An instance of a local
/// PE in none of its threads is a plan mismatch.
fn locate_instances(
    plan: &PhysicalPlan,
    scope: Scope,
    placed: &[(&str, &ThreadPlan)],
) -> Result<Vec<Option<(usize, usize)>>, RunError> {
    let mut location = vec![None; plan.instances.len()];
    for (t, (_, thread)) in placed.iter().enumerate() {
        for (k, id) in thread.instances.iter().enumerate() {
            location[id.0] = Some((t, k));
        }
    }
    if let Some(lost) = plan
        .instances
        .iter()
        .find(|i| scope.runs(i.pe) && location[i.id.0].is_none())
    {
        return Err(RunError::PlanMismatch(format!(
            "instance '{}' is in no thread of its PE",
            lost.name
        )));
    }
    Ok(location)
}

/// Gives each receiver `bound` here to the thread of its downstream instance.
fn attach_bound_receivers(
    plan: &PhysicalPlan,
    bound: Bound,
    location: &[Option<(usize, usize)>],
    execs: &mut [ThreadExec],
) {
    for (channel, receiver) in bound.receivers {
        let c = &plan.channels[channel];
        let Some((to_thread, to_node)) = location[c.to.instance.0] else {
            continue;
        };
        execs[to_thread].inbound.push(Inbound {
            receiver,
            node: to_node,
            port: c.to.port,
            edge: plan.channel_label(c),
            from: single_sender(c),
            transport: c.transport.name().to_string(),
            open: c.senders.len(),
            tuples: 0,
        });
    }
}

/// What wiring the edges of this process's instances reads.
struct Wiring<'a> {
    graph: &'a Graph,
    plan: &'a PhysicalPlan,
    scope: Scope,
    sites: &'a Sites,
    location: &'a [Option<(usize, usize)>],
}

impl Wiring<'_> {
    /// Gives every local upstream instance of the logical `edge` its fan: the edge's
    /// partitioning over its physical edges' targets.
    fn fans_of(&self, edge: &EdgeDef, execs: &mut [ThreadExec]) -> Result<(), RunError> {
        let up = self.graph.operator(edge.from.operator);
        for from in self
            .plan
            .instances
            .iter()
            .filter(|i| i.operator == up.id.0)
            .map(|i| i.id)
        {
            let Some((from_thread, from_node)) = self.location[from.0] else {
                continue;
            };
            let mut physical: Vec<_> = self
                .plan
                .edges
                .iter()
                .filter(|e| e.logical == edge.id.0 && e.from.instance == from)
                .collect();
            physical.sort_by_key(|e| e.to.instance);
            if physical.is_empty() {
                continue;
            }
            let mut targets = Vec::with_capacity(physical.len());
            for pe in physical {
                targets.push(self.target(edge, from, from_thread, pe, execs)?);
            }
            let picker = match &edge.partitioning {
                Partitioning::Forward => Picker::Forward,
                Partitioning::RoundRobin => Picker::RoundRobin { next: 0 },
                Partitioning::KeyBy(key) => Picker::Key(key.clone()),
                Partitioning::Broadcast => Picker::Broadcast,
            };
            execs[from_thread].nodes[from_node].get_mut().routes[edge.from.port]
                .push(Fan::new(picker, targets));
        }
        Ok(())
    }

    /// The target of the physical edge `pe` from instance `from` (in thread `from_thread`)
    /// of the logical `edge`: a direct call in the same thread, a sender joined in this
    /// process with its receiver given to the downstream thread, or a sender opened to a
    /// receiver bound elsewhere.
    fn target(
        &self,
        edge: &EdgeDef,
        from: InstanceId,
        from_thread: usize,
        pe: &EdgePlan,
        execs: &mut [ThreadExec],
    ) -> Result<(usize, Target), RunError> {
        let plan = self.plan;
        let label = format!(
            "{} -> {}",
            plan.instance(from).name,
            plan.instance(pe.to.instance).name
        );
        let transport_error = |error| RunError::Transport {
            edge: label.clone(),
            error,
        };
        let to = pe.to.instance.0;
        let local_to = self.location[to];
        let Some(channel) = pe.channel.map(|c| &plan.channels[c]) else {
            return match local_to {
                Some((to_thread, to_node)) if to_thread == from_thread => Ok((
                    to,
                    Target::Fused {
                        node: to_node,
                        port: pe.to.port,
                    },
                )),
                _ => Err(RunError::PlanMismatch(format!(
                    "edge {label} is fused but crosses threads"
                ))),
            };
        };
        if local_to.is_some_and(|(t, _)| t == from_thread) {
            return Err(RunError::PlanMismatch(format!(
                "edge {label} uses {} inside one thread",
                pe.transport
            )));
        }
        let stream = &self.graph.operator(edge.from.operator).outputs[edge.from.port];
        if !joined_in_process(plan, channel, self.scope) {
            let sender = stream
                .open_sender(
                    &channel.transport,
                    &self.sites.site(plan, channel, Some(from))?,
                )
                .map_err(transport_error)?;
            return Ok((to, Target::Remote(sender)));
        }
        let (sender, receiver) = stream
            .connect(&channel.transport)
            .map_err(transport_error)?;
        let (to_thread, to_node) = local_to
            .ok_or_else(|| RunError::PlanMismatch(format!("edge {label} leads nowhere")))?;
        execs[to_thread].inbound.push(Inbound {
            receiver,
            node: to_node,
            port: pe.to.port,
            edge: label,
            from: single_sender(channel),
            transport: channel.transport.name().to_string(),
            open: 1,
            tuples: 0,
        });
        Ok((to, Target::Remote(sender)))
    }
}

/// What every thread's [`Env`] shares, from the job's options.
#[derive(Clone, Copy)]
struct EnvOptions {
    idle: IdleStrategy,
    poll_batch: usize,
    latency_every: u64,
    profile_cpu: bool,
    suspendable: bool,
    checkpointed: bool,
    unaligned: bool,
    align_limit: u64,
}

impl EnvOptions {
    /// The environment of plan thread `thread` (its position in this process), which beats
    /// `progress` and publishes to `metrics`.
    fn env<'a>(
        self,
        control: &'a JobControl,
        progress: &'a Progress,
        metrics: Option<&'a ThreadPublisher>,
        thread: usize,
    ) -> Env<'a> {
        Env {
            control,
            idle: self.idle,
            poll_batch: self.poll_batch,
            latency_every: self.latency_every,
            progress,
            metrics,
            cpu: self
                .profile_cpu
                .then(|| CpuSampler::new(0x9e37_79b9 ^ thread as u64)),
            suspendable: self.suspendable,
            checkpointed: self.checkpointed,
            unaligned: self.unaligned,
            align_limit: self.align_limit,
        }
    }
}

/// Spawns the threads running `execs` (placed as `placed` says), watched by the job's
/// control and publishing to its metrics when they are on; returns once every thread has
/// run its operators' start hooks. Each of `execs` gets an OS thread of its own when there are
/// at most [`RunOptions::workers`] (by default, the machine's cores); else they are split, in
/// order, among that many polling workers, each pinned to a core ([`crate::scheduler`]).
fn spawn_threads(
    plan: &PhysicalPlan,
    options: &RunOptions,
    (control, metrics): (&Arc<JobControl>, Option<&ProcessMetrics>),
    execs: Vec<ThreadExec>,
    placed: &[(&str, &ThreadPlan)],
) -> Result<Vec<Worker>, RunError> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let most = options.workers.unwrap_or(cores).max(1);
    let shared = execs.len() > most;
    let pollers = if shared { most } else { plan.threads().count() };
    let checkpointed = control.checkpoint_sink().is_some();
    let shape = EnvOptions {
        idle: options
            .idle
            .unwrap_or_else(|| IdleStrategy::default_for(pollers, cores)),
        poll_batch: options.poll_batch.max(1),
        latency_every: options.latency_every,
        profile_cpu: options.profile_cpu,
        suspendable: options.suspendable,
        checkpointed,
        unaligned: options.checkpoints.is_some_and(|c| c.unaligned),
        align_limit: options.checkpoints.map_or(u64::MAX, |c| c.align_limit),
    };
    if checkpointed {
        plan.check_checkpointed()?;
    }
    // Each OS thread's plan threads, with their positions in this process and their PEs.
    let mut groups: Vec<Vec<(usize, ThreadExec, &str)>> = Vec::new();
    let count = execs.len();
    let per_worker = if shared { count.div_ceil(most) } else { 1 };
    for (thread, (exec, (pe, _))) in execs.into_iter().zip(placed).enumerate() {
        if thread % per_worker == 0 {
            groups.push(Vec::new());
        }
        if let Some(group) = groups.last_mut() {
            group.push((thread, exec, *pe));
        }
    }
    // Every thread, and this one: `start` returns once every operator's start hook has run,
    // so that what the caller does next (print "started", start an application's companion
    // processes) finds every source's socket bound and every segment made.
    let ready = Arc::new(Barrier::new(groups.len() + 1));
    let mut workers = Vec::with_capacity(groups.len());
    for (worker, group) in groups.into_iter().enumerate() {
        let publishers: Vec<Option<ThreadPublisher>> = group
            .iter()
            .map(|(_, exec, pe)| metrics.map(|m| m.register(thread_labels(pe, exec))))
            .collect();
        let group: Vec<(usize, ThreadExec)> = group
            .into_iter()
            .map(|(thread, exec, _)| (thread, exec))
            .collect();
        let (control_t, ready_t) = (control.clone(), ready.clone());
        let name = match group.as_slice() {
            [(_, exec)] => exec.name.clone(),
            _ => format!("worker-{worker}"),
        };
        let operators: Vec<String> = group
            .iter()
            .flat_map(|(_, exec)| exec.nodes.iter())
            .map(|n| n.borrow().ctx.name_of_instance())
            .collect();
        let progress = Progress::default();
        let progress_t = progress.clone();
        let spawned = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || {
                let envs: Vec<Env<'_>> = group
                    .iter()
                    .zip(&publishers)
                    .map(|((thread, _), publisher)| {
                        shape.env(&control_t, &progress_t, publisher.as_ref(), *thread)
                    })
                    .collect();
                let execs = group.into_iter().map(|(_, exec)| exec);
                if shared {
                    run_worker(execs.collect(), &envs, worker % cores, &ready_t)
                } else {
                    execs
                        .zip(&envs)
                        .flat_map(|(exec, env)| exec.run(env, &ready_t))
                        .collect()
                }
            });
        match spawned {
            Ok(handle) => workers.push(Worker {
                handle,
                name,
                operators: operators.join(", "),
                progress,
            }),
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
    ready.wait();
    Ok(workers)
}

/// A polling worker pinned to `core` running `execs` as tasks ([`crate::scheduler`]), each
/// with its environment in `envs`: their start hooks, the start barrier, the go, the turns
/// until every task is done or the job aborts, then their reports.
fn run_worker(
    execs: Vec<ThreadExec>,
    envs: &[Env<'_>],
    core: usize,
    ready: &Barrier,
) -> Vec<InstanceReport> {
    let Some(first) = envs.first() else {
        return Vec::new();
    };
    first.progress.record_thread();
    core_affinity::set_for_current(core_affinity::CoreId { id: core });
    let started: Vec<_> = execs
        .into_iter()
        .zip(envs)
        .map(|(e, env)| e.start(env))
        .collect();
    ready.wait();
    wait_for_go(first);
    let tasks = started
        .into_iter()
        .zip(envs)
        .map(|(running, env)| {
            // Its senders hold when full before anything is sent: a replay must not wait on
            // a consumer this worker runs.
            let mut task = ThreadTask::new(running, env);
            task.running.begin(env);
            task
        })
        .collect();
    let mut rotation = Rotation::new(tasks);
    rotation.run(first.idle);
    rotation
        .into_tasks()
        .into_iter()
        .flat_map(|task| task.running.reports(task.env))
        .collect()
}

/// The names of what thread `exec` of PE `pe` publishes.
fn thread_labels(pe: &str, exec: &ThreadExec) -> ThreadLabels {
    ThreadLabels {
        pe: pe.to_string(),
        thread: exec.name.clone(),
        instances: exec
            .nodes
            .iter()
            .map(|n| {
                let n = n.borrow();
                InstanceLabels {
                    operator: n.operator.clone(),
                    instance: n.ctx.name_of_instance(),
                    id: n.id as usize,
                    source: matches!(n.body, Body::Source(_)),
                    sink: n.outputs.is_empty(),
                    to: n.deliveries().map(|(to, _)| to).collect(),
                }
            })
            .collect(),
        inputs: exec
            .inbound
            .iter()
            .map(|i| {
                let to = exec.nodes[i.node].borrow().operator.clone();
                (i.edge.clone(), i.transport.clone(), to)
            })
            .collect(),
    }
}

/// Instance `id` of `plan`, made by its operator's factory, with the state it resumes from
/// in `resume` (if the job resumes).
fn new_node(
    graph: &Graph,
    plan: &PhysicalPlan,
    id: InstanceId,
    resume: Option<&mut JobState>,
) -> Result<Node, RunError> {
    let instance = plan.instance(id);
    let op = &graph.operators()[instance.operator];
    let ctx = OperatorContext {
        name: op.name.clone(),
        instance: instance.index,
        parallelism: op.parallelism,
    };
    let is_source = matches!(op.kind, OperatorKind::Source(_));
    let resume = match resume {
        Some(state) => {
            state.take_for_instance(&op.name, instance.index, op.parallelism, is_source)?
        }
        None => None,
    };
    let body = match &op.kind {
        OperatorKind::Source(factory) => Body::Source(factory(&ctx)),
        OperatorKind::Operator(factory) => Body::Operator(factory(&ctx)),
    };
    let upstream = plan
        .edges
        .iter()
        .filter(|e| e.to.instance == id)
        .map(|e| e.from.instance.0 as u32);
    Ok(Node {
        id: id.0 as u32,
        clock: EventClock::new(upstream),
        timers: Timers::default(),
        arrival_latency: None,
        latency_window: None,
        sampled_ns: 0,
        round_ns: 0,
        until_marker: 0,
        operator: op.name.clone(),
        body,
        outputs: op.outputs.iter().map(|s| *s.schema()).collect(),
        inputs: op.inputs.clone(),
        routes: (0..op.outputs.len()).map(|_| Vec::new()).collect(),
        open_inputs: (0..op.inputs.len()).map(|p| plan.fan_in(id, p)).collect(),
        open_ports: op.inputs.len(),
        ended_ports: Vec::new(),
        finished: false,
        resume,
        resumed_finished: false,
        suspended: None,
        tuples_in: 0,
        tuples_out: 0,
        aligning: None,
        checkpointed: 0,
        told_complete: 0,
        replay: Vec::new(),
        ctx,
    })
}

/// The plan id of a channel's upstream instance, when it has only one.
fn single_sender(channel: &ChannelPlan) -> Option<u32> {
    match channel.senders.as_slice() {
        [one] => Some(one.0 as u32),
        _ => None,
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
