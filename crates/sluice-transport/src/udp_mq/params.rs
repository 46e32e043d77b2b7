//! The parameters of a `udp-mq` edge, as a plan stores them, and their validation.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::wire::{HEADER_LEN, PUNCTUATION_LEN, RECORD_HEADER};
use crate::datagram::{MAX_BATCH, MAX_DATAGRAM};
use crate::TransportError;

/// How a sender picks the queue (socket) of each tuple: the paper's `f(n)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueChoice {
    /// A random queue for each datagram (the paper's `X ~ U([0, n])`): the load spreads
    /// evenly, but tuples of different datagrams may overtake each other.
    Random,
    /// A hash of the tuple's key (its first `flow_key_bytes` encoded bytes, or a key function
    /// given to the sender): one flow always takes the same queue, so its order is kept.
    #[default]
    FlowHash,
}

impl QueueChoice {
    /// The choice's name, as in plans.
    pub fn name(self) -> &'static str {
        match self {
            Self::Random => "random",
            Self::FlowHash => "flow-hash",
        }
    }
}

/// The parameters of a `udp-mq` edge; the senders and the receiver of an edge must use the
/// same. Fields left out of a plan take their defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UdpMqParams {
    /// Sockets on each side, standing in for a NIC's hardware queues (1 to [`MAX_QUEUES`]).
    pub queues: usize,
    /// Datagrams in each queue's ring: the most one system call moves (1 to 1024).
    pub batch: usize,
    /// The largest datagram, header included (at most 65,507; the default fills one Ethernet
    /// frame, so nothing is fragmented between hosts).
    pub datagram_bytes: usize,
    /// How a sender picks each tuple's queue.
    pub queue_choice: QueueChoice,
    /// With `flow-hash`, how many leading bytes of a tuple's encoding are its flow key; 0 for
    /// all of them.
    pub flow_key_bytes: usize,
    /// A receiver refills a queue's ring once fewer than this many datagrams wait in it (1:
    /// only when it is exhausted; the paper's threshold of Algorithm 2).
    pub recv_threshold: usize,
    /// A receiver reports a sender that sent nothing for this long, and has not ended, as
    /// disconnected; senders then send a heartbeat from `flush` when they have been quiet for
    /// a quarter of it. `None` (the default) never gives up on a quiet sender.
    pub idle_limit_ms: Option<u64>,
    /// The kernel's send and receive buffer sizes of every socket (`SO_SNDBUF`, `SO_RCVBUF`);
    /// `None` leaves the system's defaults.
    pub socket_buffer_bytes: Option<usize>,
}

/// The most queues an edge has.
pub const MAX_QUEUES: usize = 64;
/// The default number of queues.
pub const DEFAULT_QUEUES: usize = 4;
/// The default ring size.
pub const DEFAULT_BATCH: usize = 32;
/// The default datagram size: a 1,500-byte Ethernet frame less the IPv4 and UDP headers.
pub const DEFAULT_DATAGRAM_BYTES: usize = 1472;
/// The smallest datagram accepted: a header and one punctuation record (the longest record
/// that is not data).
pub const MIN_DATAGRAM_BYTES: usize = HEADER_LEN + RECORD_HEADER + PUNCTUATION_LEN;
/// The largest socket buffer accepted (a typo cannot ask for gigabytes).
pub const MAX_SOCKET_BUFFER: usize = 256 << 20;
/// The smallest socket buffer accepted.
pub const MIN_SOCKET_BUFFER: usize = 4 << 10;
/// The longest idle limit accepted: a day.
pub const MAX_IDLE_LIMIT_MS: u64 = 86_400_000;

impl Default for UdpMqParams {
    fn default() -> Self {
        Self {
            queues: DEFAULT_QUEUES,
            batch: DEFAULT_BATCH,
            datagram_bytes: DEFAULT_DATAGRAM_BYTES,
            queue_choice: QueueChoice::FlowHash,
            flow_key_bytes: 0,
            recv_threshold: 1,
            idle_limit_ms: None,
            socket_buffer_bytes: None,
        }
    }
}

impl UdpMqParams {
    /// Checks every parameter; the error names the first one out of range.
    pub fn validate(&self) -> Result<(), TransportError> {
        let ranges = [
            ("queues", self.queues, 1, MAX_QUEUES),
            ("batch", self.batch, 1, MAX_BATCH),
            (
                "datagram_bytes",
                self.datagram_bytes,
                MIN_DATAGRAM_BYTES,
                MAX_DATAGRAM,
            ),
            ("flow_key_bytes", self.flow_key_bytes, 0, MAX_DATAGRAM),
            ("recv_threshold", self.recv_threshold, 1, self.batch.max(1)),
            (
                "socket_buffer_bytes",
                self.socket_buffer_bytes.unwrap_or(MIN_SOCKET_BUFFER),
                MIN_SOCKET_BUFFER,
                MAX_SOCKET_BUFFER,
            ),
        ];
        let idle = (
            "idle_limit_ms",
            self.idle_limit_ms.unwrap_or(1),
            1,
            MAX_IDLE_LIMIT_MS,
        );
        let widened = ranges
            .map(|(name, value, least, most)| (name, value as u64, least as u64, most as u64));
        for (parameter, value, least, most) in widened.into_iter().chain([idle]) {
            if !(least..=most).contains(&value) {
                return Err(TransportError::InvalidParameter {
                    transport: "udp-mq",
                    parameter,
                    reason: format!("must be between {least} and {most}, got {value}"),
                });
            }
        }
        Ok(())
    }

    /// The largest encoded tuple: what one datagram holds after its header and one record
    /// header.
    pub fn max_tuple_bytes(&self) -> usize {
        self.datagram_bytes
            .saturating_sub(HEADER_LEN + RECORD_HEADER)
    }

    /// How long a sender may stay quiet before the receiver gives up on it.
    pub(crate) fn idle_limit(&self) -> Option<Duration> {
        self.idle_limit_ms.map(Duration::from_millis)
    }
}

impl std::fmt::Display for UdpMqParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "queues={}, batch={}, datagram_bytes={}, queue_choice={}",
            self.queues,
            self.batch,
            self.datagram_bytes,
            self.queue_choice.name()
        )?;
        if self.queue_choice == QueueChoice::FlowHash && self.flow_key_bytes > 0 {
            write!(f, ", flow_key_bytes={}", self.flow_key_bytes)?;
        }
        if self.recv_threshold != 1 {
            write!(f, ", recv_threshold={}", self.recv_threshold)?;
        }
        if let Some(ms) = self.idle_limit_ms {
            write!(f, ", idle_limit_ms={ms}")?;
        }
        if let Some(bytes) = self.socket_buffer_bytes {
            write!(f, ", socket_buffer_bytes={bytes}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_each_bound_is_named() {
        UdpMqParams::default().validate().unwrap();
        let base = UdpMqParams::default();
        let cases = [
            (
                UdpMqParams { queues: 0, ..base },
                "queues must be between 1 and 64, got 0",
            ),
            (
                UdpMqParams {
                    batch: 2000,
                    ..base
                },
                "batch must be between 1 and 1024, got 2000",
            ),
            (
                UdpMqParams {
                    datagram_bytes: 70_000,
                    ..base
                },
                "datagram_bytes must be between 64 and 65507, got 70000",
            ),
            (
                UdpMqParams {
                    recv_threshold: 33,
                    ..base
                },
                "recv_threshold must be between 1 and 32, got 33",
            ),
            (
                UdpMqParams {
                    socket_buffer_bytes: Some(1),
                    ..base
                },
                "socket_buffer_bytes must be between 4096 and 268435456, got 1",
            ),
            (
                UdpMqParams {
                    idle_limit_ms: Some(0),
                    ..base
                },
                "idle_limit_ms must be between 1 and 86400000, got 0",
            ),
        ];
        for (params, message) in cases {
            assert_eq!(
                params.validate().unwrap_err().to_string(),
                format!("transport udp-mq: {message}")
            );
        }
    }

    #[test]
    fn a_plan_names_only_what_it_changes() {
        use crate::TransportSpec;
        let spec: TransportSpec =
            serde_json::from_str(r#"{"kind": "udp-mq", "queues": 2, "queue_choice": "random"}"#)
                .unwrap();
        let expected = TransportSpec::UdpMq(UdpMqParams {
            queues: 2,
            queue_choice: QueueChoice::Random,
            ..UdpMqParams::default()
        });
        assert_eq!(spec, expected);
        assert_eq!(spec.name(), "udp-mq");
        let text = serde_json::to_string(&spec).unwrap();
        assert_eq!(serde_json::from_str::<TransportSpec>(&text).unwrap(), spec);
        assert_eq!(
            spec.to_string(),
            "udp-mq(queues=2, batch=32, datagram_bytes=1472, queue_choice=random)"
        );
    }

    #[test]
    fn the_largest_tuple_fills_a_datagram_and_display_names_what_is_set() {
        let p = UdpMqParams::default();
        assert_eq!(p.max_tuple_bytes(), 1472 - HEADER_LEN - RECORD_HEADER);
        assert_eq!(
            p.to_string(),
            "queues=4, batch=32, datagram_bytes=1472, queue_choice=flow-hash"
        );
        let p = UdpMqParams {
            queue_choice: QueueChoice::FlowHash,
            flow_key_bytes: 4,
            recv_threshold: 8,
            idle_limit_ms: Some(500),
            socket_buffer_bytes: Some(1 << 20),
            ..p
        };
        assert_eq!(
            p.to_string(),
            "queues=4, batch=32, datagram_bytes=1472, queue_choice=flow-hash, flow_key_bytes=4, \
             recv_threshold=8, idle_limit_ms=500, socket_buffer_bytes=1048576"
        );
    }
}
