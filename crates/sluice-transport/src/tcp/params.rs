//! The parameters of a `tcp` edge, as a plan stores them, and their validation.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::TransportError;

/// When a sender writes what it holds (see the module documentation of [`crate::tcp`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BatchProfile {
    /// Write a message at once when the socket is idle, the rest of its burst at the flush;
    /// coalesce while the socket pushes back.
    Latency,
    /// Coalesce up to the byte budget or until the oldest message is `max_batch_us` old.
    Throughput,
    /// Hold batches between `min_batch_us` and `max_batch_us`, longer while the socket pushes
    /// back, shorter while writes go through.
    #[default]
    Adaptive,
}

impl BatchProfile {
    /// The profile's name, as in plans and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Latency => "latency",
            Self::Throughput => "throughput",
            Self::Adaptive => "adaptive",
        }
    }
}

/// The parameters of a `tcp` edge; the sender and the receiver of an edge must use the same.
/// A plan file may give any of them; the rest keep their defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TcpParams {
    /// When the sender writes.
    pub profile: BatchProfile,
    /// The shortest hold of an adaptive batch, in microseconds.
    pub min_batch_us: u64,
    /// The hold of a throughput batch and the longest hold of an adaptive one, in
    /// microseconds.
    pub max_batch_us: u64,
    /// A frame is written once it holds this many bytes; the sender's buffer holds at most
    /// about this much before `offer` reports the edge full.
    pub batch_bytes: usize,
    /// The largest encoded tuple one record carries; a longer one goes in parts of this size
    /// (module doc), up to [`MAX_TUPLE_BYTES`](crate::MAX_TUPLE_BYTES).
    pub max_tuple_bytes: usize,
    /// The kernel's send and receive buffer sizes for the connection (`SO_SNDBUF`,
    /// `SO_RCVBUF`); `None` leaves them to the kernel's autotuning.
    pub socket_buffer_bytes: Option<usize>,
}

impl Default for TcpParams {
    fn default() -> Self {
        Self {
            profile: BatchProfile::Adaptive,
            min_batch_us: 0,
            max_batch_us: DEFAULT_MAX_BATCH_US,
            batch_bytes: DEFAULT_BATCH_BYTES,
            max_tuple_bytes: DEFAULT_MAX_TUPLE_BYTES,
            socket_buffer_bytes: None,
        }
    }
}

/// The default longest hold of a batch (IBM's latency configuration of LLM holds 25-50 us,
/// its throughput one 400-800 us).
pub const DEFAULT_MAX_BATCH_US: u64 = 200;
/// The default byte budget of a batch.
pub const DEFAULT_BATCH_BYTES: usize = 64 << 10;
/// The default largest tuple.
pub const DEFAULT_MAX_TUPLE_BYTES: usize = 64 << 10;
/// The largest batch budget, tuple size or socket buffer accepted (so a frame length always
/// fits its `u32` with room to spare, and a typo cannot ask for gigabytes of buffer).
pub const MAX_BYTES_PARAMETER: usize = 64 << 20;
/// The longest batching delay accepted: one second.
pub const MAX_BATCH_US: u64 = 1_000_000;
/// The smallest socket buffer accepted (the kernel's own minimum is about this).
pub const MIN_SOCKET_BUFFER: usize = 4 << 10;

impl TcpParams {
    /// Default parameters with the given profile.
    pub fn with_profile(profile: BatchProfile) -> Self {
        Self {
            profile,
            ..Self::default()
        }
    }

    /// Checks every parameter; the error names the first one out of range.
    pub fn validate(&self) -> Result<(), TransportError> {
        let invalid = |parameter, reason: String| {
            Err(TransportError::InvalidParameter {
                transport: "tcp",
                parameter,
                reason,
            })
        };
        if self.max_batch_us > MAX_BATCH_US {
            return invalid(
                "max_batch_us",
                format!("must be at most {MAX_BATCH_US}, got {}", self.max_batch_us),
            );
        }
        if self.min_batch_us > self.max_batch_us {
            return invalid(
                "min_batch_us",
                format!(
                    "must be at most max_batch_us ({}), got {}",
                    self.max_batch_us, self.min_batch_us
                ),
            );
        }
        for (parameter, value, least) in [
            ("batch_bytes", self.batch_bytes, 1),
            ("max_tuple_bytes", self.max_tuple_bytes, 1),
            (
                "socket_buffer_bytes",
                self.socket_buffer_bytes.unwrap_or(MIN_SOCKET_BUFFER),
                MIN_SOCKET_BUFFER,
            ),
        ] {
            if !(least..=MAX_BYTES_PARAMETER).contains(&value) {
                return invalid(
                    parameter,
                    format!("must be between {least} and {MAX_BYTES_PARAMETER}, got {value}"),
                );
            }
        }
        Ok(())
    }

    /// The shortest hold of a batch.
    pub(crate) fn min_hold(&self) -> Duration {
        Duration::from_micros(self.min_batch_us)
    }

    /// The longest hold of a batch.
    pub(crate) fn max_hold(&self) -> Duration {
        Duration::from_micros(self.max_batch_us)
    }
}

impl std::fmt::Display for TcpParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "profile={}, min_batch_us={}, max_batch_us={}, batch_bytes={}, max_tuple_bytes={}",
            self.profile.name(),
            self.min_batch_us,
            self.max_batch_us,
            self.batch_bytes,
            self.max_tuple_bytes
        )?;
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
        TcpParams::default().validate().unwrap();
        let cases = [
            (
                TcpParams {
                    min_batch_us: 300,
                    max_batch_us: 200,
                    ..TcpParams::default()
                },
                "tcp: min_batch_us must be at most max_batch_us (200), got 300",
            ),
            (
                TcpParams {
                    max_batch_us: 2_000_000,
                    ..TcpParams::default()
                },
                "tcp: max_batch_us must be at most 1000000, got 2000000",
            ),
            (
                TcpParams {
                    batch_bytes: 0,
                    ..TcpParams::default()
                },
                "tcp: batch_bytes must be between 1 and 67108864, got 0",
            ),
            (
                TcpParams {
                    max_tuple_bytes: usize::MAX,
                    ..TcpParams::default()
                },
                "tcp: max_tuple_bytes must be between 1 and 67108864",
            ),
            (
                TcpParams {
                    socket_buffer_bytes: Some(10),
                    ..TcpParams::default()
                },
                "tcp: socket_buffer_bytes must be between 4096 and 67108864, got 10",
            ),
        ];
        for (params, message) in cases {
            let error = params.validate().unwrap_err().to_string();
            assert!(
                error.starts_with(&format!("transport {message}")),
                "{error}"
            );
        }
    }

    #[test]
    fn display_names_every_parameter() {
        let p = TcpParams {
            socket_buffer_bytes: Some(8192),
            ..TcpParams::with_profile(BatchProfile::Throughput)
        };
        assert_eq!(
            p.to_string(),
            "profile=throughput, min_batch_us=0, max_batch_us=200, batch_bytes=65536, \
             max_tuple_bytes=65536, socket_buffer_bytes=8192"
        );
    }
}
