//! The physical edges of a plan and the transport of each: fused inside a thread, a threaded
//! port between threads of one PE, and between PEs the sender/receiver pair of a shared-memory
//! transport, grouped into [`ChannelPlan`]s.
//!
//! Between PEs of one host the default is `shm-vega` (one producer, one consumer, the cheapest
//! ring) for fixed-size (facade) tuples, and `shm-osr` where several PEs feed one input port or
//! where tuples vary in size; between hosts it is `tcp` with adaptive batching.
//!
//! Why variable-size tuples go over `shm-osr`: a Vega slot must hold the largest tuple, so a
//! stream of 10-byte words took one 1 KiB slot each, and the sender wrote (and the receiver
//! prefetched) a fresh line for every word across a 1 MiB footprint; the OSR ring packs
//! records by their size and takes tuples up to half its capacity. WordCount across two
//! processes went from 10.7 M to 13.1-14.5 M words/s (`sluice bench app wordcount --plan
//! two-processes --repeat 3`, medians of separate runs).
//!
//! A pinned transport must be able to join the edge's ends where they run, and, for a stream
//! of fixed-size (facade) tuples, carry them: a `tcp`, `mpi` or `udp-mq` edge whose largest
//! tuple ([`TransportSpec::max_tuple_bytes`]) is smaller would refuse every tuple when sent,
//! so the plan is refused instead.
//!
//! Where several upstream instances in other PEs feed one input port over a transport that
//! takes many producers (`shm-osr`, `tcp`, `mpi`: [`TransportSpec::takes_many_senders`]), they
//! share one channel, so the downstream thread polls one receiver for all of them (the Vega
//! paper, section III).
//!
//! A checkpointed job shares no receiver: every edge that is not fused has a channel of its
//! own, and `shm-vega` stays `shm-vega` where several instances feed one input port. An
//! instance aligns checkpoint barriers per upstream instance, holding back what one upstream
//! sends after its barrier until the barriers of the others arrive, so each receiver must
//! carry exactly one upstream's stream: a merged stream cannot tell whose barrier a tuple
//! follows.

use std::collections::BTreeMap;

use sluice_graph::{Graph, Partitioning};
use sluice_transport::tcp::TcpParams;
use sluice_transport::TransportSpec;
use sluice_types::Encoding;

use crate::{ChannelPlan, EdgePlan, HostSpec, InstanceId, InstancePlan, PlanError, PortRef};

/// Slots in a shared-memory ring unless the user pins another size.
pub const DEFAULT_SHM_SLOTS: usize = 1024;

/// The physical edges of `graph` between `instances` (each on the host `host_of` gives, an
/// index into `hosts`), with their transports and channels, one sender to a channel when the
/// job is `checkpointed`.
pub(crate) fn choose(
    graph: &Graph,
    instances: &[InstancePlan],
    first_instance: &[usize],
    pinned: &BTreeMap<usize, TransportSpec>,
    capacity: usize,
    (host_of, hosts): (&[usize], &[HostSpec]),
    checkpointed: bool,
) -> Result<(Vec<EdgePlan>, Vec<ChannelPlan>), PlanError> {
    let mut edges = Vec::new();
    // Per edge: whether its transport is the planner's choice (not pinned by the user).
    let mut chosen = Vec::new();
    for edge in graph.edges() {
        let up = graph.operator(edge.from.operator);
        let down = graph.operator(edge.to.operator);
        let encoding = up.outputs[edge.from.port].schema().encoding;
        for i in 0..up.parallelism {
            let from = InstanceId(first_instance[up.id.0] + i);
            let targets: Vec<usize> = match edge.partitioning {
                Partitioning::Forward => vec![i % down.parallelism],
                _ => (0..down.parallelism).collect(),
            };
            for j in targets {
                let to = InstanceId(first_instance[down.id.0] + j);
                let (a, b) = (&instances[from.0], &instances[to.0]);
                let hosts = (&hosts[host_of[from.0]], &hosts[host_of[to.0]]);
                let transport =
                    transport_for(a, b, hosts, pinned.get(&edge.id.0), encoding, capacity)?;
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
                    channel: None,
                });
                chosen.push(!pinned.contains_key(&edge.id.0));
            }
        }
    }
    if !checkpointed {
        share_receivers(&mut edges, &chosen);
    }
    let channels = group_into_channels(&mut edges, instances, checkpointed);
    Ok((edges, channels))
}

/// The transport of one physical edge from `a` to `b`.
fn transport_for(
    a: &InstancePlan,
    b: &InstancePlan,
    (host_a, host_b): (&HostSpec, &HostSpec),
    pinned: Option<&TransportSpec>,
    encoding: Encoding,
    capacity: usize,
) -> Result<TransportSpec, PlanError> {
    let refuse = |spec: &TransportSpec, reason: &str| PlanError::PinnedTransport {
        from: a.name.clone(),
        to: b.name.clone(),
        transport: spec.to_string(),
        reason: reason.to_string(),
    };
    match pinned {
        Some(spec) if a.thread == b.thread && *spec != TransportSpec::Fused => Err(refuse(
            spec,
            "both ends run in one thread, where an edge is a direct call",
        )),
        Some(spec @ TransportSpec::Fused) if a.thread != b.thread => Err(refuse(
            spec,
            "its ends run in different threads; only edges inside a thread can be fused",
        )),
        Some(spec @ TransportSpec::Threaded { .. }) if a.pe != b.pe => Err(refuse(
            spec,
            "its ends run in different PEs (processes); a threaded port stays in one process",
        )),
        Some(spec @ TransportSpec::ShmVega { .. }) if host_a.name != host_b.name => Err(refuse(
            spec,
            &format!(
                "its ends run on hosts '{}' and '{}'; shared memory stays on one host",
                host_a.name, host_b.name
            ),
        )),
        Some(spec @ TransportSpec::Mpi(_)) if a.pe == b.pe => Err(refuse(
            spec,
            "both ends run in one PE; mpi joins PEs (the ranks of mpirun), a threaded port joins threads",
        )),
        Some(spec) => match (encoding, spec.max_tuple_bytes()) {
            // Every tuple of a fixed-size stream would be refused when sent.
            (Encoding::Facade { size }, Some(most)) if size > most => Err(refuse(
                spec,
                &format!("its tuples are {size} bytes each and the transport carries at most {most}"),
            )),
            _ => Ok(spec.clone()),
        },
        None if a.thread == b.thread => Ok(TransportSpec::Fused),
        None if a.pe == b.pe => Ok(TransportSpec::Threaded { capacity }),
        None if host_a.name != host_b.name => Ok(TransportSpec::Tcp(TcpParams::default())),
        None => Ok(match encoding {
            Encoding::Facade { size } => TransportSpec::ShmVega {
                slot_bytes: size.max(1),
                slots: DEFAULT_SHM_SLOTS,
            },
            Encoding::Normal => TransportSpec::shm_osr(),
        }),
    }
}

/// Where the planner chose `shm-vega` for several edges of one logical edge into one input
/// port, it chooses `shm-osr` instead, so that one receiver (and one polling thread) serves all
/// of those senders.
fn share_receivers(edges: &mut [EdgePlan], chosen: &[bool]) {
    let is_vega = |e: &EdgePlan| matches!(e.transport, TransportSpec::ShmVega { .. });
    let mut feeding: BTreeMap<(usize, PortRef), usize> = BTreeMap::new();
    for (e, &c) in edges.iter().zip(chosen) {
        if c && is_vega(e) {
            *feeding.entry((e.logical, e.to)).or_default() += 1;
        }
    }
    for (e, &c) in edges.iter_mut().zip(chosen) {
        if c && is_vega(e) && feeding[&(e.logical, e.to)] > 1 {
            e.transport = TransportSpec::shm_osr();
        }
    }
}

/// Gives every edge that is not fused a channel: edges of one logical edge into one input port
/// share a channel when its transport takes many senders and the job is not `checkpointed`;
/// every other edge has its own.
///
/// A shared channel takes at most one sender per thread, and at most as many senders as its
/// transport's receiver takes ([`TransportSpec::max_senders`]): a larger fan-in is split over
/// several channels, which the downstream thread polls in turn. Two senders of one thread into one
/// OSR ring could deadlock: one waits for room while the other holds an uncommitted batch
/// record that the receiver cannot pass, and only the waiting thread could commit it.
fn group_into_channels(
    edges: &mut [EdgePlan],
    instances: &[InstancePlan],
    checkpointed: bool,
) -> Vec<ChannelPlan> {
    let mut channels: Vec<ChannelPlan> = Vec::new();
    let mut shared: BTreeMap<(usize, PortRef), Vec<usize>> = BTreeMap::new();
    let thread = |i: InstanceId| instances[i.0].thread;
    for edge in edges.iter_mut() {
        if edge.transport == TransportSpec::Fused {
            continue;
        }
        let from = edge.from.instance;
        let candidates = shared.entry((edge.logical, edge.to)).or_default();
        let reuse = candidates.iter().copied().find(|&c| {
            !checkpointed
                && edge.transport.takes_many_senders()
                && channels[c].transport == edge.transport
                && (channels[c].senders.contains(&from)
                    || (channels[c].senders.len() < edge.transport.max_senders()
                        && channels[c]
                            .senders
                            .iter()
                            .all(|&s| thread(s) != thread(from))))
        });
        let id = match reuse {
            Some(id) => {
                let senders = &mut channels[id].senders;
                if !senders.contains(&from) {
                    senders.push(from);
                }
                id
            }
            None => {
                let id = channels.len();
                channels.push(ChannelPlan {
                    id,
                    transport: edge.transport.clone(),
                    to: edge.to,
                    senders: vec![from],
                });
                candidates.push(id);
                id
            }
        };
        edge.channel = Some(id);
    }
    channels
}
