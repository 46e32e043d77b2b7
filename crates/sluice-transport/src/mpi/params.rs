//! The parameters of an `mpi` edge, as a plan stores them, and their validation. They exist
//! whether or not Sluice is built with the `mpi` feature, so every build reads every plan.

use serde::{Deserialize, Serialize};

use crate::TransportError;

/// The parameters of an `mpi` edge; the senders and the receiver of an edge use the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MpiParams {
    /// A batch (one MPI message) is sent once it holds this many bytes of records, or at the
    /// next flush.
    pub batch_bytes: usize,
    /// How many batches one sender may have sent that its receiver has not taken yet: the
    /// edge's backpressure. The receiver returns a credit per batch it takes.
    pub credit: usize,
    /// The largest encoded tuple one record carries; a longer normal tuple goes in parts of
    /// this size (module doc), up to [`MAX_TUPLE_BYTES`](crate::MAX_TUPLE_BYTES). A
    /// fixed-size tuple longer than this is refused as too large.
    pub max_tuple_bytes: usize,
}

/// The default byte budget of a batch.
pub const DEFAULT_BATCH_BYTES: usize = 16 << 10;
/// The default number of batches in flight per sender.
pub const DEFAULT_CREDIT: usize = 8;
/// The default largest tuple of one record.
pub const DEFAULT_MAX_TUPLE_BYTES: usize = 64 << 10;
/// The largest batch budget or tuple size accepted (so a message length always fits MPI's
/// `int` count with room to spare, and a typo cannot ask for gigabytes of buffer).
pub const MAX_BYTES_PARAMETER: usize = 64 << 20;
/// The most batches in flight per sender accepted.
pub const MAX_CREDIT: usize = 1024;

impl Default for MpiParams {
    fn default() -> Self {
        Self {
            batch_bytes: DEFAULT_BATCH_BYTES,
            credit: DEFAULT_CREDIT,
            max_tuple_bytes: DEFAULT_MAX_TUPLE_BYTES,
        }
    }
}

impl MpiParams {
    /// Checks every parameter; the error names the first one out of range.
    pub fn validate(&self) -> Result<(), TransportError> {
        for (parameter, value, most) in [
            ("batch_bytes", self.batch_bytes, MAX_BYTES_PARAMETER),
            ("credit", self.credit, MAX_CREDIT),
            ("max_tuple_bytes", self.max_tuple_bytes, MAX_BYTES_PARAMETER),
        ] {
            if !(1..=most).contains(&value) {
                return Err(TransportError::InvalidParameter {
                    transport: "mpi",
                    parameter,
                    reason: format!("must be between 1 and {most}, got {value}"),
                });
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for MpiParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "batch_bytes={}, credit={}, max_tuple_bytes={}",
            self.batch_bytes, self.credit, self.max_tuple_bytes
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_each_bound_is_named() {
        assert_eq!(MpiParams::default().validate(), Ok(()));
        let cases = [
            (
                MpiParams {
                    batch_bytes: 0,
                    ..MpiParams::default()
                },
                "batch_bytes",
            ),
            (
                MpiParams {
                    credit: MAX_CREDIT + 1,
                    ..MpiParams::default()
                },
                "credit",
            ),
            (
                MpiParams {
                    max_tuple_bytes: MAX_BYTES_PARAMETER + 1,
                    ..MpiParams::default()
                },
                "max_tuple_bytes",
            ),
        ];
        for (params, named) in cases {
            match params.validate() {
                Err(TransportError::InvalidParameter { parameter, .. }) => {
                    assert_eq!(parameter, named)
                }
                other => panic!("{params}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_plan_may_give_no_parameters() {
        let params: MpiParams = serde_json::from_str("{}").unwrap();
        assert_eq!(params, MpiParams::default());
    }
}
