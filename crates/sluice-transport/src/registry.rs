//! The transport registry: which transports exist, their parameters, and how to build them.
//!
//! A [`TransportSpec`] is what the physical plan stores for an edge (it is serde-serializable,
//! so later a PE in another process rebuilds the same endpoint from the plan). Adding a
//! transport is its endpoints in a module of this crate, its line in [`transport_kinds!`] below
//! and its variant of [`TransportSpec`]; the compiler then asks for it wherever transports are
//! told apart, the conformance suite (`tests/conformance.rs`, which runs every kind of
//! [`TransportKind::ALL`]) included.

use serde::{Deserialize, Serialize};
use sluice_shm::SegmentName;
use sluice_types::Tuple;
use thiserror::Error;

use std::net::{IpAddr, SocketAddr};

use crate::mpi::MpiParams;
use crate::tcp::{JobSecret, TcpParams};
use crate::threaded::threaded_port;
use crate::udp_mq::UdpMqParams;
use crate::{TupleReceiver, TupleSender};

/// The default number of messages a threaded port holds.
pub const DEFAULT_QUEUE_CAPACITY: usize = 4096;
/// The most messages a threaded port holds: 2^24, 16 Mi messages (512 MiB of 32-byte
/// messages, allocated up front). A larger capacity is refused rather than allocated, so a
/// typo cannot abort the program on a failed allocation.
pub const MAX_QUEUE_CAPACITY: usize = 1 << 24;

/// A connected pair of typed endpoints.
pub type TypedPair<T> = (Box<dyn TupleSender<T>>, Box<dyn TupleReceiver<T>>);

/// Declares [`TransportKind`], its list [`TransportKind::ALL`] and its names from one line
/// per transport.
macro_rules! transport_kinds {
    ($($(#[doc = $doc:literal])* $kind:ident => $name:literal,)*) => {
        /// Which transport an edge uses, without its parameters: one per variant of
        /// [`TransportSpec`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum TransportKind {
            $($(#[doc = $doc])* $kind,)*
        }

        impl TransportKind {
            /// Every transport there is, in the registry's order.
            pub const ALL: &'static [TransportKind] = &[$(TransportKind::$kind,)*];

            /// The transport's name, as used on the command line and in plans (a spec's
            /// `kind`).
            pub fn name(self) -> &'static str {
                match self {
                    $(TransportKind::$kind => $name,)*
                }
            }
        }
    };
}

transport_kinds! {
    /// A direct call within one thread.
    Fused => "fused",
    /// A bounded SPSC queue between two threads of one process.
    Threaded => "threaded",
    /// A Vega ring in a shared segment.
    ShmVega => "shm-vega",
    /// Batched frames over TCP.
    Tcp => "tcp",
    /// An OSR ring in a shared segment, many senders into one receiver.
    ShmOsr => "shm-osr",
    /// Datagrams over several UDP sockets, at most once.
    UdpMq => "udp-mq",
    /// MPI messages between `mpirun` ranks.
    Mpi => "mpi",
}

/// A transport and its parameters, as chosen for one edge of a plan.
///
/// A parameter the transport does not take is refused when the spec is read (a plan file's
/// misspelt parameter is an error, not a default silently kept).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum TransportSpec {
    /// Both ends in one thread: the upstream operator calls the downstream one directly.
    Fused,
    /// Two threads of one process joined by a bounded SPSC queue.
    Threaded {
        /// Messages the queue holds (rounded up to a power of two).
        capacity: usize,
    },
    /// A Vega ring in a shared segment: between processes of one host (or threads).
    ShmVega {
        /// The largest encoded tuple a slot holds.
        slot_bytes: usize,
        /// Slots in the ring.
        slots: usize,
    },
    /// Batched frames over TCP: between processes or hosts (or threads, over loopback).
    Tcp(TcpParams),
    /// An OSR ring in a shared segment: many senders (processes of one host, or threads) into
    /// one receiver, tuples in batch records.
    ShmOsr {
        /// Bytes in the ring, a power of two from 64 bytes to 64 MiB (default 1 MiB). The
        /// largest tuple is a little under half of it ([`crate::shm_osr::slot_bytes`]).
        #[serde(default = "default_osr_capacity")]
        capacity_bytes: usize,
        /// Payload a sender reserves per batch record when its stream is busy (default 16 KiB).
        #[serde(default = "default_osr_batch")]
        batch_bytes: usize,
    },
    /// Datagrams over several UDP sockets (queues), sent and received in batches; at most
    /// once, every loss counted: between processes or hosts (or threads, over loopback).
    UdpMq(UdpMqParams),
    /// Batches as MPI point-to-point messages between PEs launched by `mpirun` (`--launcher
    /// mpi`); needs the `mpi` feature.
    Mpi(MpiParams),
}

fn default_osr_capacity() -> usize {
    crate::shm_osr::DEFAULT_CAPACITY_BYTES
}

fn default_osr_batch() -> usize {
    crate::shm_osr::DEFAULT_BATCH_BYTES
}

/// Why a transport could not be built.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum TransportError {
    /// The fused transport is a function call and has no endpoints.
    #[error("the fused transport is a direct call and has no sender or receiver")]
    NoEndpoints,
    /// The shared segment or ring could not be set up.
    #[error("{0}")]
    Setup(String),
    /// The transport joins threads of one process and cannot join processes.
    #[error("the {transport} transport joins threads of one process, not processes")]
    InProcessOnly {
        /// The transport's name.
        transport: &'static str,
    },
    /// The transport takes one sender per receiver.
    #[error("the {transport} transport takes one sender per receiver, not {senders}")]
    OneSenderOnly {
        /// The transport's name.
        transport: &'static str,
        /// How many senders were asked for.
        senders: usize,
    },
    /// The transport needs a Cargo feature this build does not have.
    #[error(
        "the {transport} transport: this program was built without the {feature} feature \
         (rebuild with --features {feature})"
    )]
    NotBuilt {
        /// The transport's name.
        transport: &'static str,
        /// The missing feature.
        feature: &'static str,
    },
    /// The transport joins processes launched a certain way, not threads of one process.
    #[error(
        "the {transport} transport joins PEs launched with {launcher}, not threads of one process"
    )]
    ProcessesOnly {
        /// The transport's name.
        transport: &'static str,
        /// How its PEs must be launched.
        launcher: &'static str,
    },
    /// A parameter is out of range.
    #[error("transport {transport}: {parameter} {reason}")]
    InvalidParameter {
        /// The transport's name.
        transport: &'static str,
        /// The parameter's name.
        parameter: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

/// Where the two ends of a channel between processes meet: the receiver binds it, the senders
/// open it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelSite {
    /// The shared segment of a shared-memory transport: for the receiver, the name it binds
    /// under with a random nonce of its own ([`SegmentName::with_nonce`]); for a sender, the
    /// name the receiver bound, nonce included, handed over by the launcher.
    pub segment: SegmentName,
    /// The address of the receiver's host: a network receiver binds there (any free port).
    pub bind: IpAddr,
    /// The address a network receiver was bound to, handed to its senders by the launcher.
    pub peer: Option<SocketAddr>,
    /// The job's secret, which a network receiver requires of every sender.
    pub secret: JobSecret,
    /// The sender's index among the channel's senders.
    pub sender_index: u32,
    /// The receiving PE's index (its rank under `mpirun`).
    pub receiver_pe: usize,
    /// The channel's id in the plan (an MPI tag names it).
    pub channel: usize,
}

/// What the senders of a bound receiver must be told to reach it, beyond what the plan says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Rendezvous {
    /// A network receiver's bound address.
    Address(SocketAddr),
    /// The random nonce in the name of a shared-memory receiver's segment: nobody can create
    /// the name before the receiver does, so the senders learn it from the receiver.
    SegmentNonce(u64),
}

/// A receiver bound at a channel site, and what its senders must be told to reach it.
pub type BoundReceiver<T> = (Box<dyn TupleReceiver<T>>, Option<Rendezvous>);

impl TransportSpec {
    /// A threaded port with the default capacity.
    pub fn threaded() -> Self {
        Self::Threaded {
            capacity: DEFAULT_QUEUE_CAPACITY,
        }
    }

    /// An OSR ring with the default capacity and batch size.
    pub fn shm_osr() -> Self {
        Self::ShmOsr {
            capacity_bytes: default_osr_capacity(),
            batch_bytes: default_osr_batch(),
        }
    }

    /// Which transport this is, without its parameters.
    pub fn kind(&self) -> TransportKind {
        match self {
            Self::Fused => TransportKind::Fused,
            Self::Threaded { .. } => TransportKind::Threaded,
            Self::ShmVega { .. } => TransportKind::ShmVega,
            Self::Tcp(_) => TransportKind::Tcp,
            Self::ShmOsr { .. } => TransportKind::ShmOsr,
            Self::UdpMq(_) => TransportKind::UdpMq,
            Self::Mpi(_) => TransportKind::Mpi,
        }
    }

    /// The transport's name, as used on the command line and in plans.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// Whether one receiver takes several senders, so that the edges of one logical edge
    /// into one input port can share a channel.
    pub fn takes_many_senders(&self) -> bool {
        matches!(self, Self::ShmOsr { .. } | Self::Tcp(_) | Self::Mpi(_))
    }

    /// Whether the transport may drop tuples (at most once: `udp-mq` drops the datagrams its
    /// receiver has no room for), so a checkpoint cannot cover what it carries.
    pub fn is_at_most_once(&self) -> bool {
        matches!(self, Self::UdpMq(_))
    }

    /// The most senders one receiver of the transport takes.
    pub fn max_senders(&self) -> usize {
        match self {
            Self::Fused | Self::Threaded { .. } | Self::ShmVega { .. } => 1,
            Self::ShmOsr { .. } => crate::shm_osr::MAX_SENDERS,
            Self::Tcp(_) => crate::tcp::MAX_SENDERS,
            Self::UdpMq(_) => crate::udp_mq::MAX_SENDERS,
            Self::Mpi(_) => crate::mpi::MAX_SENDERS as usize,
        }
    }

    /// Whether the transport runs only between PEs launched by `mpirun`.
    pub fn needs_mpi_launcher(&self) -> bool {
        matches!(self, Self::Mpi(_))
    }

    /// The largest encoded tuple one record of the transport carries where its parameters set
    /// one (`max_tuple_bytes` of `tcp` and `mpi`, a datagram's payload for `udp-mq`); `None`
    /// for the others. A fixed-size tuple must fit it; a variable-size one longer than it
    /// crosses `tcp` and `mpi` in parts (`crate::parts`) and is refused by `udp-mq`.
    pub fn max_tuple_bytes(&self) -> Option<usize> {
        match self {
            Self::Tcp(params) => Some(params.max_tuple_bytes),
            Self::Mpi(params) => Some(params.max_tuple_bytes),
            Self::UdpMq(params) => Some(params.max_tuple_bytes()),
            _ => None,
        }
    }

    /// Checks every parameter, and that one receiver of this transport takes `senders`
    /// senders and that this program has the transport built in, without building anything:
    /// what the planner checks of every channel, and what building the receiver checks first,
    /// so a plan the planner accepts is never refused for its parameters when it runs. The
    /// error names the first parameter out of range and its bounds.
    pub fn validate(&self, senders: usize) -> Result<(), TransportError> {
        let invalid = |parameter, reason: String| {
            Err(TransportError::InvalidParameter {
                transport: self.name(),
                parameter,
                reason,
            })
        };
        let senders_in_range = || {
            let most = self.max_senders();
            if (1..=most).contains(&senders) {
                Ok(())
            } else {
                invalid(
                    "senders",
                    format!("must be between 1 and {most}, got {senders}"),
                )
            }
        };
        match *self {
            Self::Fused => Ok(()),
            Self::Threaded { capacity } => {
                if !(1..=MAX_QUEUE_CAPACITY).contains(&capacity) {
                    return invalid(
                        "capacity",
                        format!("must be between 1 and {MAX_QUEUE_CAPACITY}, got {capacity}"),
                    );
                }
                senders_in_range()
            }
            Self::ShmVega { slot_bytes, slots } => {
                if senders != 1 {
                    return Err(TransportError::OneSenderOnly {
                        transport: self.name(),
                        senders,
                    });
                }
                if slot_bytes == 0 {
                    return invalid("slot_bytes", "must be at least 1, got 0".into());
                }
                crate::shm_vega::layout(slot_bytes, slots).map(drop)
            }
            Self::ShmOsr {
                capacity_bytes,
                batch_bytes,
            } => {
                senders_in_range()?;
                crate::shm_osr::slot_bytes(capacity_bytes)?;
                crate::shm_osr::check_batch_bytes(batch_bytes)
            }
            Self::Tcp(params) => {
                params.validate()?;
                senders_in_range()
            }
            Self::UdpMq(params) => {
                params.validate()?;
                senders_in_range()
            }
            Self::Mpi(params) => {
                params.validate()?;
                if !cfg!(feature = "mpi") {
                    return Err(TransportError::NotBuilt {
                        transport: self.name(),
                        feature: "mpi",
                    });
                }
                senders_in_range()
            }
        }
    }

    /// Builds a connected pair of typed endpoints.
    pub fn connect_typed<T: Tuple>(&self) -> Result<TypedPair<T>, TransportError> {
        self.validate(1)?;
        match *self {
            Self::Fused => Err(TransportError::NoEndpoints),
            Self::Threaded { capacity } => {
                // `validate` bounded the capacity, so the port exists.
                let (tx, rx) = threaded_port::<T>(capacity).ok_or_else(|| {
                    TransportError::Setup(format!("no threaded port of capacity {capacity}"))
                })?;
                Ok((Box::new(tx), Box::new(rx)))
            }
            Self::ShmVega { slot_bytes, slots } => {
                let (tx, rx) = crate::shm_vega::connect::<T>(slot_bytes, slots)?;
                Ok((Box::new(tx), Box::new(rx)))
            }
            Self::Tcp(params) => {
                let (tx, rx) = crate::tcp::connect::<T>(&params)?;
                Ok((Box::new(tx), Box::new(rx)))
            }
            Self::ShmOsr {
                capacity_bytes,
                batch_bytes,
            } => {
                let (mut senders, rx) =
                    crate::shm_osr::connect::<T>(capacity_bytes, batch_bytes, 1)?;
                let tx = senders.pop().ok_or(TransportError::NoEndpoints)?;
                Ok((Box::new(tx), Box::new(rx)))
            }
            Self::UdpMq(params) => {
                let (tx, rx) = crate::udp_mq::connect::<T>(&params)?;
                Ok((Box::new(tx), Box::new(rx)))
            }
            Self::Mpi(_) => Err(TransportError::ProcessesOnly {
                transport: self.name(),
                launcher: "--launcher mpi",
            }),
        }
    }
}

impl TransportSpec {
    /// Binds the receiving end of a channel at `site` for `senders` senders (creating its
    /// shared segment or its listening socket), before any sender opens it.
    pub fn bind_receiver_typed<T: Tuple>(
        &self,
        site: &ChannelSite,
        senders: usize,
    ) -> Result<BoundReceiver<T>, TransportError> {
        if !matches!(self, Self::Fused | Self::Threaded { .. }) {
            self.validate(senders)?;
        }
        match *self {
            Self::Fused | Self::Threaded { .. } => Err(TransportError::InProcessOnly {
                transport: self.name(),
            }),
            Self::ShmVega { slot_bytes, slots } => {
                if senders != 1 {
                    return Err(TransportError::OneSenderOnly {
                        transport: self.name(),
                        senders,
                    });
                }
                let (rx, name) =
                    crate::shm_vega::bind_receiver::<T>(&site.segment, slot_bytes, slots)?;
                Ok((Box::new(rx), name.nonce().map(Rendezvous::SegmentNonce)))
            }
            Self::Tcp(params) => {
                let (rx, bound) = crate::tcp::bind_receiver::<T>(
                    SocketAddr::new(site.bind, 0),
                    &site.secret,
                    senders,
                    &params,
                )?;
                Ok((Box::new(rx), Some(Rendezvous::Address(bound))))
            }
            Self::ShmOsr { capacity_bytes, .. } => {
                let (rx, name) =
                    crate::shm_osr::bind_receiver::<T>(&site.segment, capacity_bytes, senders)?;
                Ok((Box::new(rx), name.nonce().map(Rendezvous::SegmentNonce)))
            }
            Self::UdpMq(params) => {
                let (rx, bound) = crate::udp_mq::bind_receiver::<T>(
                    SocketAddr::new(site.bind, 0),
                    &site.secret,
                    senders,
                    &params,
                )?;
                Ok((Box::new(rx), Some(Rendezvous::Address(bound))))
            }
            Self::Mpi(params) => Ok((mpi_endpoints::bind(site, senders, &params)?, None)),
        }
    }

    /// The segment a shared-memory receiver bound at `site`: its name must carry the nonce the
    /// receiver drew, handed over to the senders.
    fn bound_segment<'a>(&self, site: &'a ChannelSite) -> Result<&'a SegmentName, TransportError> {
        match site.segment.nonce() {
            Some(_) => Ok(&site.segment),
            None => Err(TransportError::Setup(format!(
                "no segment name for the {} receiver was handed over",
                self.name()
            ))),
        }
    }

    /// Opens a sending end of the channel whose receiver is bound at `site`.
    pub fn open_sender_typed<T: Tuple>(
        &self,
        site: &ChannelSite,
    ) -> Result<Box<dyn TupleSender<T>>, TransportError> {
        match *self {
            Self::Fused | Self::Threaded { .. } => Err(TransportError::InProcessOnly {
                transport: self.name(),
            }),
            Self::ShmVega { slot_bytes, slots } => Ok(Box::new(crate::shm_vega::open_sender::<T>(
                self.bound_segment(site)?,
                slot_bytes,
                slots,
            )?)),
            Self::ShmOsr {
                capacity_bytes,
                batch_bytes,
            } => Ok(Box::new(crate::shm_osr::open_sender::<T>(
                self.bound_segment(site)?,
                capacity_bytes,
                batch_bytes,
            )?)),
            Self::Tcp(params) => {
                let peer = site.peer.ok_or_else(|| {
                    TransportError::Setup("no address for the tcp receiver was handed over".into())
                })?;
                Ok(Box::new(crate::tcp::connect_sender::<T>(
                    peer,
                    &site.secret,
                    site.sender_index,
                    &params,
                )?))
            }
            Self::UdpMq(params) => {
                let peer = site.peer.ok_or_else(|| {
                    TransportError::Setup(
                        "no address for the udp-mq receiver was handed over".into(),
                    )
                })?;
                Ok(Box::new(crate::udp_mq::connect_sender::<T>(
                    peer,
                    &site.secret,
                    site.sender_index,
                    &params,
                )?))
            }
            Self::Mpi(params) => mpi_endpoints::open(site, &params),
        }
    }
}

/// The `mpi` endpoints of a channel site, or the error of a build without them.
#[cfg(feature = "mpi")]
mod mpi_endpoints {
    use sluice_types::Tuple;

    use super::{ChannelSite, TransportError};
    use crate::mpi::{MpiParams, Route, MAX_CHANNELS};
    use crate::{TupleReceiver, TupleSender};

    fn route(site: &ChannelSite) -> Result<Route, TransportError> {
        let invalid = |parameter, reason: String| TransportError::InvalidParameter {
            transport: "mpi",
            parameter,
            reason,
        };
        Ok(Route {
            receiver: i32::try_from(site.receiver_pe).map_err(|_| {
                invalid(
                    "receiver rank",
                    format!("{} is too large", site.receiver_pe),
                )
            })?,
            channel: u32::try_from(site.channel)
                .map_err(|_| invalid("channel", format!("must be below {MAX_CHANNELS}")))?,
            sender: site.sender_index,
        })
    }

    pub(super) fn bind<T: Tuple>(
        site: &ChannelSite,
        senders: usize,
        params: &MpiParams,
    ) -> Result<Box<dyn TupleReceiver<T>>, TransportError> {
        Ok(Box::new(crate::mpi::bind_receiver::<T>(
            route(site)?,
            senders,
            params,
        )?))
    }

    pub(super) fn open<T: Tuple>(
        site: &ChannelSite,
        params: &MpiParams,
    ) -> Result<Box<dyn TupleSender<T>>, TransportError> {
        Ok(Box::new(crate::mpi::open_sender::<T>(
            route(site)?,
            params,
        )?))
    }
}

/// The `mpi` endpoints of a build without the `mpi` feature: every one is refused.
#[cfg(not(feature = "mpi"))]
mod mpi_endpoints {
    use super::{ChannelSite, TransportError};
    use crate::mpi::MpiParams;
    use crate::{TupleReceiver, TupleSender};

    const NOT_BUILT: TransportError = TransportError::NotBuilt {
        transport: "mpi",
        feature: "mpi",
    };

    pub(super) fn bind<T>(
        _: &ChannelSite,
        _: usize,
        params: &MpiParams,
    ) -> Result<Box<dyn TupleReceiver<T>>, TransportError> {
        params.validate()?;
        Err(NOT_BUILT)
    }

    pub(super) fn open<T>(
        _: &ChannelSite,
        params: &MpiParams,
    ) -> Result<Box<dyn TupleSender<T>>, TransportError> {
        params.validate()?;
        Err(NOT_BUILT)
    }
}

impl std::fmt::Display for TransportSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Fused => f.write_str("fused"),
            Self::Threaded { capacity } => write!(f, "threaded(capacity={capacity})"),
            Self::ShmVega { slot_bytes, slots } => {
                write!(f, "shm-vega(slot_bytes={slot_bytes}, slots={slots})")
            }
            Self::Tcp(params) => write!(f, "tcp({params})"),
            Self::ShmOsr {
                capacity_bytes,
                batch_bytes,
            } => write!(
                f,
                "shm-osr(capacity_bytes={capacity_bytes}, batch_bytes={batch_bytes})"
            ),
            Self::UdpMq(params) => write!(f, "udp-mq({params})"),
            Self::Mpi(params) => write!(f, "mpi({params})"),
        }
    }
}
