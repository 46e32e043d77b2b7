//! A bound query as a Sluice job: its stream processes as a [`Graph`] and a [`PhysicalPlan`].
//!
//! Each stream process `sp<N>` is one operator (a source when it reads a generator) with one
//! input port per producer, in order, and one output port; the client (the top-level
//! expression) is the operator `client`, whose results go to `sluice query`. By default each
//! runs in a PE (process) of its own, its thread pinned to the core of its node, on its node's
//! host; the planner chooses each edge's transport (shared memory between PEs of one host,
//! `tcp` between hosts). The client's PE has no core of its own.
//!
//! Driver settings ([`DriverSettings`], `--set key=value` or `set key = value;`) change that:
//!
//! | setting | values | what it changes |
//! |---|---|---|
//! | `transport` | `auto` (default), `threaded`, `shm-vega`, `shm-osr`, `tcp` | `threaded`: every stream process is a thread of one process (the paper's 1000-way grep), edges are threaded ports; the others pin that transport on every edge |
//! | `buffer` | bytes, 1 to 64 MiB | the unit a sender hands to its receiver (module table below); with `transport = auto`, pins `shm-vega` between PEs of one host and `tcp` between hosts |
//! | `double_buffering` | `on`/`off` (default `off`) | with `buffer`: room for two units in flight instead of one, so the sender fills one while the receiver reads the other |
//! | `pset_size` | 1 to 65536 (default 1) | nodes per pset ([`crate::cluster`]) |
//!
//! What `buffer = B` makes of each transport, single / double buffered:
//!
//! | transport | single | double |
//! |---|---|---|
//! | `shm-vega` | one slot of B bytes: the sender waits until the receiver has read it | two slots of B bytes |
//! | `shm-osr` | batch records of B bytes in a ring of 2B (rounded up to a power of two, at least 64 bytes); a record holds at most half the ring | a ring of 4B |
//! | `tcp` | frames of B bytes, tuples in parts of B bytes, kernel socket buffers of B (at least 4 KiB) | socket buffers of 2B |
//! | `threaded` | a port of 1 message (a value) | 2 messages |
//!
//! A value longer than the unit (a 3 MB `gen_array` element) crosses in parts of the unit's
//! size on every transport but `threaded` (which passes values whole), as any tuple does.

use std::path::Path;

use sluice_graph::{Graph, GraphBuilder, OperatorHandle, Placement, Ports};
use sluice_plan::{EdgeSpec, PhysicalPlan, PlanFile, PlanOptions, PlanRequest, ThreadSpec};
use sluice_transport::tcp::TcpParams;
use sluice_transport::TransportSpec;

use crate::cluster::{Machine, MAX_PSET_SIZE};
use crate::eval::StreamProcess;
use crate::pipeline::Pipeline;
use crate::process::{SpOperator, SpSource};
use crate::value::Value;

/// The graph's (and the job's) name.
pub const JOB_NAME: &str = "scsql";
/// A pinned `shm-vega` ring's slot without `buffer`: the shared-memory slot of the common
/// tuple (docs/src/plans.md, *Tuple sizes*).
const VEGA_SLOT_BYTES: usize = 1024;
/// A pinned `shm-vega` ring's slots without `buffer`, as the planner gives one.
const VEGA_SLOTS: usize = 1024;
/// The largest `buffer`.
pub const MAX_BUFFER: usize = 64 << 20;

/// How stream processes run and how their streams travel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverSettings {
    /// The transport between stream processes.
    pub transport: TransportChoice,
    /// The unit a sender hands over, in bytes.
    pub buffer: Option<usize>,
    /// Two units in flight instead of one.
    pub double_buffering: bool,
    /// Nodes per pset.
    pub pset_size: usize,
}

/// The `transport` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportChoice {
    /// The planner's choice (or, with `buffer`, shm-vega on a host and tcp between hosts).
    Auto,
    /// Every stream process a thread of one process.
    Threaded,
    /// `shm-vega` on every edge.
    ShmVega,
    /// `shm-osr` on every edge.
    ShmOsr,
    /// `tcp` on every edge.
    Tcp,
}

impl Default for DriverSettings {
    fn default() -> Self {
        Self {
            transport: TransportChoice::Auto,
            buffer: None,
            double_buffering: false,
            pset_size: 1,
        }
    }
}

impl DriverSettings {
    /// The settings' names, for messages.
    pub const KEYS: &'static str = "transport, buffer, double_buffering, pset_size";

    /// Sets `key` to `value` (as text), or says why not.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let number = |most: usize| {
            value
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=most).contains(n))
                .ok_or_else(|| {
                    format!("{key} must be a whole number from 1 to {most}, not '{value}'")
                })
        };
        match key.to_lowercase().as_str() {
            "transport" => {
                self.transport = match value {
                    "auto" => TransportChoice::Auto,
                    "threaded" => TransportChoice::Threaded,
                    "shm-vega" => TransportChoice::ShmVega,
                    "shm-osr" => TransportChoice::ShmOsr,
                    "tcp" => TransportChoice::Tcp,
                    _ => {
                        return Err(format!(
                            "transport must be auto, threaded, shm-vega, shm-osr or tcp, not \
                             '{value}'"
                        ))
                    }
                }
            }
            "buffer" => self.buffer = Some(number(MAX_BUFFER)?),
            "double_buffering" => {
                self.double_buffering = match value {
                    "on" | "true" | "1" => true,
                    "off" | "false" | "0" => false,
                    _ => return Err(format!("double_buffering must be on or off, not '{value}'")),
                }
            }
            "pset_size" => self.pset_size = number(MAX_PSET_SIZE)?,
            _ => {
                return Err(format!(
                    "unknown driver setting '{key}' (settings: {})",
                    Self::KEYS
                ))
            }
        }
        Ok(())
    }

    /// The transport pinned on an edge whose ends run on one host (`same_host`) or not;
    /// `None` leaves it to the planner.
    fn pinned(&self, same_host: bool) -> Option<TransportSpec> {
        let units = if self.double_buffering { 2 } else { 1 };
        let choice = match (self.transport, same_host) {
            (TransportChoice::Auto, _) if self.buffer.is_none() => return None,
            (TransportChoice::Auto, true) => TransportChoice::ShmVega,
            (TransportChoice::Auto, false) => TransportChoice::Tcp,
            (choice, _) => choice,
        };
        Some(match (choice, self.buffer) {
            (TransportChoice::Threaded, None) => TransportSpec::threaded(),
            (TransportChoice::Threaded, Some(_)) => TransportSpec::Threaded { capacity: units },
            (TransportChoice::ShmVega, None) => TransportSpec::ShmVega {
                slot_bytes: VEGA_SLOT_BYTES,
                slots: VEGA_SLOTS,
            },
            (TransportChoice::ShmVega, Some(b)) => TransportSpec::ShmVega {
                slot_bytes: b,
                slots: units,
            },
            (TransportChoice::ShmOsr, None) => TransportSpec::shm_osr(),
            (TransportChoice::ShmOsr, Some(b)) => TransportSpec::ShmOsr {
                capacity_bytes: (2 * units * b).next_power_of_two().clamp(64, 64 << 20),
                batch_bytes: b,
            },
            (TransportChoice::Tcp, None) => TransportSpec::Tcp(TcpParams::default()),
            (TransportChoice::Tcp, Some(b)) => TransportSpec::Tcp(TcpParams {
                batch_bytes: b,
                max_tuple_bytes: b,
                socket_buffer_bytes: Some(
                    (units * b).max(sluice_transport::tcp::MIN_SOCKET_BUFFER),
                ),
                ..TcpParams::default()
            }),
            (TransportChoice::Auto, _) => return None,
        })
    }
}

/// The graph and plan of a query's stream processes and its client.
pub struct Lowered {
    /// The graph.
    pub graph: Graph,
    /// Its plan.
    pub plan: PhysicalPlan,
}

/// The operator name of stream process `id`.
pub fn sp_name(id: usize) -> String {
    format!("sp{id}")
}

/// Lowers the stream processes `sps` and the client reading `client` (its results sent to
/// the socket at `socket`) into a graph and a plan on `machine`.
pub fn lower(
    sps: &[StreamProcess],
    client: &Pipeline,
    socket: &Path,
    settings: &DriverSettings,
    machine: &Machine,
) -> Result<Lowered, String> {
    let mut builder = GraphBuilder::new(JOB_NAME);
    let mut handles: Vec<OperatorHandle> = Vec::new();
    let graph_error = |e: sluice_graph::GraphError| e.to_string();
    for sp in sps {
        let name = sp_name(sp.id);
        let pipeline = sp.pipeline.clone();
        let inputs = sp.pipeline.producers().len();
        let handle = if inputs == 0 {
            let op = name.clone();
            builder.source(&name, Ports::new().output::<Value>(), move |_| {
                SpSource::new(&op, pipeline.clone())
            })
        } else {
            let mut ports = Ports::new().output::<Value>();
            for _ in 0..inputs {
                ports = ports.input::<Value>();
            }
            let op = name.clone();
            builder.operator(&name, ports, move |_| {
                SpOperator::new(&op, pipeline.clone())
            })
        };
        if machine.hosts().is_some() {
            builder
                .place(handle, Placement::Host(sp.place.host.clone()))
                .map_err(graph_error)?;
        }
        handles.push(handle);
    }
    let mut ports = Ports::new();
    for _ in client.producers() {
        ports = ports.input::<Value>();
    }
    let (pipeline, path) = (client.clone(), socket.to_path_buf());
    let client_handle = builder.operator("client", ports, move |_| {
        SpOperator::client(pipeline.clone(), &path)
    });
    // The client's socket is on this machine: a host of the hosts file with no launch prefix
    // (none: wherever the planner puts it), or the embedded default's one host.
    let local_host = match machine.hosts() {
        Some(file) => file
            .hosts
            .iter()
            .find(|h| h.launch.is_empty())
            .map(|h| h.name.clone()),
        None => Some(crate::cluster::EMBEDDED_HOST.to_string()),
    };
    if let (Some(host), Some(_)) = (&local_host, machine.hosts()) {
        builder
            .place(client_handle, Placement::Host(host.clone()))
            .map_err(graph_error)?;
    }
    let consumers = sps
        .iter()
        .map(|sp| (handles[sp.id], &sp.pipeline))
        .chain([(client_handle, client)]);
    for (consumer, pipeline) in consumers {
        for (port, &producer) in pipeline.producers().iter().enumerate() {
            let from = handles
                .get(producer)
                .ok_or("a stream process reads one that does not exist")?;
            builder
                .connect(from.out(0), consumer.input(port))
                .map_err(graph_error)?;
        }
    }
    let graph = builder.build().map_err(graph_error)?;

    let threaded = settings.transport == TransportChoice::Threaded;
    let pe = |name: &str| {
        if threaded {
            "main".to_string()
        } else {
            name.to_string()
        }
    };
    let mut threads: Vec<ThreadSpec> = sps
        .iter()
        .map(|sp| {
            let name = sp_name(sp.id);
            ThreadSpec {
                name: name.clone(),
                operators: vec![name.clone()],
                core: Some(sp.place.core),
                pe: Some(pe(&name)),
                host: None,
            }
        })
        .collect();
    threads.push(ThreadSpec {
        name: "client".into(),
        operators: vec!["client".into()],
        core: None,
        pe: Some(pe("client")),
        host: None,
    });
    let host_of = |op: usize| match sps.get(op) {
        Some(sp) => Some(sp.place.host.as_str()),
        None => local_host.as_deref(),
    };
    let mut edges = Vec::new();
    for edge in graph.edges() {
        let (from, to) = (edge.from.operator.0, edge.to.operator.0);
        if let Some(transport) = settings.pinned(host_of(from) == host_of(to)) {
            edges.push(EdgeSpec {
                from: graph.operator(edge.from.operator).name.clone(),
                to: graph.operator(edge.to.operator).name.clone(),
                transport,
            });
        }
    }
    let file = PlanFile {
        threads,
        edges,
        ..PlanFile::default()
    };
    let options = PlanOptions {
        hosts: machine.hosts().cloned(),
        ..PlanOptions::default()
    };
    let plan = sluice_plan::plan(
        &graph,
        &PlanRequest::File("the query".into(), file),
        &options,
    )
    .map_err(|e| e.to_string())?;
    Ok(Lowered { graph, plan })
}
