//! The state of an operator instance, as bytes: what [`Operator::snapshot`] returns and
//! [`Operator::restore`] takes back, so a job can be redeployed on another plan (or recovered)
//! without losing state.
//!
//! State held per key is kept apart from the rest, each entry with its key's partition hash:
//! when the operator is redeployed with another parallelism, [`Snapshot::split`] sends every
//! key to the instance the key-partitioned edge will send its tuples to.
//!
//! [`Operator::snapshot`]: crate::Operator::snapshot
//! [`Operator::restore`]: crate::Operator::restore

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sluice_types::pick_instance;

use crate::{LatencyHistogram, OperatorError};

/// One key's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyedEntry {
    /// The key's partition hash ([`sluice_types::partition_hash`] of the key), which decides
    /// the instance that owns it.
    pub hash: u64,
    /// The key, encoded by the operator.
    #[serde(with = "compact")]
    pub key: Vec<u8>,
    /// Its state, encoded by the operator.
    #[serde(with = "compact")]
    pub state: Vec<u8>,
}

/// What an operator's [`Operator::checkpoint`](crate::Operator::checkpoint) hands over: its
/// snapshot made now, or a copy of its state to be made into one later ([`LaterSnapshot`]).
pub enum CheckpointState {
    /// The snapshot, made on the data path.
    Now(Snapshot),
    /// A copy of the state, encoded off the data path.
    Later(LaterSnapshot),
}

impl From<Snapshot> for CheckpointState {
    fn from(snapshot: Snapshot) -> Self {
        CheckpointState::Now(snapshot)
    }
}

impl std::fmt::Debug for CheckpointState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckpointState::Now(snapshot) => f.debug_tuple("Now").field(snapshot).finish(),
            CheckpointState::Later(later) => f.debug_tuple("Later").field(later).finish(),
        }
    }
}

impl std::fmt::Debug for LaterSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LaterSnapshot(..)")
    }
}

/// A snapshot finished off the data path: an operator with a large state copies it cheaply
/// at the barrier (a clone of its map, no encoding) and returns the encoding as this
/// closure, which the runtime's checkpoint writer thread runs, so the data path stalls for
/// the copy only, not for encoding every key.
pub struct LaterSnapshot(Box<dyn FnOnce() -> Result<Snapshot, OperatorError> + Send>);

impl LaterSnapshot {
    /// The snapshot `make` makes, later, on another thread.
    pub fn new(make: impl FnOnce() -> Result<Snapshot, OperatorError> + Send + 'static) -> Self {
        LaterSnapshot(Box::new(make))
    }

    /// Makes the snapshot.
    pub fn make(self) -> Result<Snapshot, OperatorError> {
        (self.0)()
    }
}

impl CheckpointState {
    /// The snapshot, made now if it was left for later.
    pub fn make(self) -> Result<Snapshot, OperatorError> {
        match self {
            CheckpointState::Now(snapshot) => Ok(snapshot),
            CheckpointState::Later(later) => later.make(),
        }
    }
}

/// The state of one operator instance, or of several merged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// State not tied to a key, encoded by the operator (empty if it has none).
    #[serde(with = "compact")]
    pub operator: Vec<u8>,
    /// State per key.
    pub keyed: Vec<KeyedEntry>,
}

impl Snapshot {
    /// Whether there is no state at all.
    pub fn is_empty(&self) -> bool {
        self.operator.is_empty() && self.keyed.is_empty()
    }

    /// A snapshot of operator-wide state alone: `value`, encoded with `postcard`.
    pub fn whole<T: Serialize>(value: &T) -> Result<Snapshot, OperatorError> {
        let operator = postcard::to_allocvec(value).map_err(|e| {
            OperatorError::Failed(format!("cannot encode state for a snapshot: {e}"))
        })?;
        Ok(Snapshot {
            operator,
            keyed: Vec::new(),
        })
    }

    /// The operator-wide state [`Snapshot::whole`] encoded, decoded as `T`.
    pub fn decode_whole<T: DeserializeOwned>(&self) -> Result<T, OperatorError> {
        postcard::from_bytes(&self.operator)
            .map_err(|e| OperatorError::Failed(format!("a snapshot's state does not decode: {e}")))
    }

    /// Deals the keyed state over `instances` instances as a key-partitioned edge deals the
    /// keys' tuples; the operator-wide state goes to instance 0.
    pub fn split(self, instances: usize) -> Vec<Snapshot> {
        let mut parts = vec![Snapshot::default(); instances.max(1)];
        for entry in self.keyed {
            let at = pick_instance(entry.hash, parts.len());
            parts[at].keyed.push(entry);
        }
        parts[0].operator = self.operator;
        parts
    }

    /// Gathers the keyed state of several instances' snapshots into one (their operator-wide
    /// state is kept from the first that has any).
    pub fn merge(snapshots: impl IntoIterator<Item = Snapshot>) -> Snapshot {
        let mut merged = Snapshot::default();
        for s in snapshots {
            if merged.operator.is_empty() {
                merged.operator = s.operator;
            }
            merged.keyed.extend(s.keyed);
        }
        merged
    }
}

/// Bytes in a snapshot as `serde` carries them: base64 text in a human-readable format (JSON,
/// the launcher's messages to its PEs, where an array of numbers would take three to four
/// times the room and the time), raw bytes in a binary one.
mod compact {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&STANDARD.encode(bytes))
        } else {
            s.serialize_bytes(bytes)
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        if d.is_human_readable() {
            let text = String::deserialize(d)?;
            STANDARD.decode(text).map_err(D::Error::custom)
        } else {
            serde_bytes::ByteBuf::deserialize(d).map(serde_bytes::ByteBuf::into_vec)
        }
    }
}

/// A latency histogram as (value, count) pairs, a form `serde` carries (in a snapshot, or a
/// report between processes).
pub fn histogram_pairs(histogram: &LatencyHistogram) -> Vec<(u64, u64)> {
    histogram
        .iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

/// The histogram [`histogram_pairs`] described, as [`crate::latency_histogram`] makes them.
pub fn histogram_from_pairs(pairs: &[(u64, u64)]) -> LatencyHistogram {
    let mut h = crate::latency_histogram();
    for &(value, count) in pairs {
        h.saturating_record_n(value, count);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_follows_the_partitioning_and_merge_undoes_it() {
        let entry = |k: u64| KeyedEntry {
            hash: sluice_types::partition_hash(&k),
            key: k.to_le_bytes().to_vec(),
            state: vec![k as u8],
        };
        let whole = Snapshot {
            operator: vec![9],
            keyed: (0..50).map(entry).collect(),
        };
        let parts = whole.clone().split(3);
        assert_eq!(parts.len(), 3);
        for (i, part) in parts.iter().enumerate() {
            assert!(part.keyed.iter().all(|e| pick_instance(e.hash, 3) == i));
        }
        let mut merged = Snapshot::merge(parts);
        merged.keyed.sort_by(|a, b| a.key.cmp(&b.key));
        let mut expected = whole;
        expected.keyed.sort_by(|a, b| a.key.cmp(&b.key));
        assert_eq!(merged, expected);
    }

    #[test]
    fn snapshots_travel_as_base64_in_json_and_as_bytes_in_postcard() {
        let snapshot = Snapshot {
            operator: vec![0, 255, 7],
            keyed: vec![KeyedEntry {
                hash: 3,
                key: b"word".to_vec(),
                state: vec![1; 10],
            }],
        };
        let json = serde_json::to_string(&snapshot).unwrap();
        assert!(json.contains("\"AP8H\""), "{json}");
        assert_eq!(serde_json::from_str::<Snapshot>(&json).unwrap(), snapshot);
        assert!(serde_json::from_str::<Snapshot>(&json.replace("AP8H", "!!")).is_err());
        let binary = postcard::to_allocvec(&snapshot).unwrap();
        assert_eq!(postcard::from_bytes::<Snapshot>(&binary).unwrap(), snapshot);
    }

    #[test]
    fn whole_state_and_histograms_round_trip() {
        let whole = Snapshot::whole(&(7u64, true)).unwrap();
        assert_eq!(whole.decode_whole::<(u64, bool)>().unwrap(), (7, true));
        assert!(whole.decode_whole::<(u64, u64, u64)>().is_err());
        let mut h = crate::latency_histogram();
        h.saturating_record_n(1500, 3);
        h.saturating_record(90_000);
        let back = histogram_from_pairs(&histogram_pairs(&h));
        assert_eq!(back.len(), 4);
        assert_eq!(back.max(), h.max());
    }
}
