//! What a physical plan must satisfy to run: the one check that the planner makes of every plan
//! it returns and the runtime makes of every plan it is handed, so `sluice plan` accepts
//! exactly the plans `sluice run` would build, and refuses the others with the same message.
//!
//! - Every channel's transport takes its parameters and its number of senders, and is built
//!   into this program ([`TransportSpec::validate`]): a `shm-osr` ring takes at most 1024
//!   senders, a `shm-vega` slot at least one byte and below 4 GiB, a threaded port 1 to
//!   [`MAX_QUEUE_CAPACITY`] messages; `mpi` needs the `mpi` feature.
//! - Thread names are unique, not empty and without a NUL byte (they name OS threads and
//!   appear in every message about a thread).
//!
//! A checkpointed job asks more ([`PhysicalPlan::check_checkpointed`]): every channel carries
//! one upstream instance (barriers are aligned per upstream instance), over a transport that
//! loses no tuple (not `udp-mq`).
//!
//! What depends on how the job is launched (an `mpi` edge needs `--launcher mpi`) is checked
//! by the runtime when it starts.
//!
//! [`TransportSpec::validate`]: sluice_transport::TransportSpec::validate
//! [`MAX_QUEUE_CAPACITY`]: sluice_transport::MAX_QUEUE_CAPACITY

use crate::{ChannelPlan, InstanceId, PhysicalPlan, PlanError};

impl PhysicalPlan {
    /// Checks that the plan can run (module doc); the error is the one running it would give.
    pub fn check(&self) -> Result<(), PlanError> {
        let threads: Vec<&str> = self.threads().map(|t| t.name.as_str()).collect();
        for (i, name) in threads.iter().enumerate() {
            if name.is_empty() || name.contains('\0') {
                return Err(PlanError::ThreadName(name.to_string()));
            }
            if threads[..i].contains(name) {
                return Err(PlanError::DuplicateThread(name.to_string()));
            }
        }
        for channel in &self.channels {
            channel
                .transport
                .validate(channel.senders.len())
                .map_err(|error| PlanError::Transport {
                    edge: self.channel_label(channel),
                    error,
                })?;
        }
        Ok(())
    }

    /// Checks that the plan can run checkpointed: every channel has one sender, since an
    /// instance aligns the checkpoint barriers of each upstream instance and a receiver that
    /// merges several senders cannot tell which tuples follow which sender's barrier; and no
    /// channel's transport is at most once ([`TransportSpec::is_at_most_once`]), since a
    /// checkpoint cannot cover the tuples it drops. The planner makes such plans when asked
    /// ([`crate::PlanOptions::checkpointed`]) and checks them with this; a runtime checks a
    /// plan it is handed.
    ///
    /// [`TransportSpec::is_at_most_once`]: sluice_transport::TransportSpec::is_at_most_once
    pub fn check_checkpointed(&self) -> Result<(), PlanError> {
        for channel in &self.channels {
            if channel.transport.is_at_most_once() {
                return Err(PlanError::LosesTuples {
                    edge: self.channel_label(channel),
                    transport: channel.transport.name(),
                });
            }
            if channel.senders.len() > 1 {
                return Err(PlanError::SharedChannel {
                    edge: self.channel_label(channel),
                    senders: channel.senders.len(),
                });
            }
        }
        Ok(())
    }

    /// The label of a channel in messages: `up -> down`, `up1, up2 -> down`, or for more than
    /// three senders the first and the last with their count, `up1 ... up20 (20 senders) ->
    /// down`, so that a message stays one short line however wide the fan-in.
    pub fn channel_label(&self, channel: &ChannelPlan) -> String {
        let name = |s: &InstanceId| self.instance(*s).name.as_str();
        let senders = match channel.senders.as_slice() {
            [first, .., last] if channel.senders.len() > 3 => format!(
                "{} ... {} ({} senders)",
                name(first),
                name(last),
                channel.senders.len()
            ),
            senders => senders.iter().map(name).collect::<Vec<_>>().join(", "),
        };
        format!("{senders} -> {}", self.instance(channel.to.instance).name)
    }
}
