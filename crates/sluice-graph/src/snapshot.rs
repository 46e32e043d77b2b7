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

/// One key's state, as [`KeyedEntries`] lends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyedEntry<'a> {
    /// The key's partition hash ([`sluice_types::partition_hash`] of the key), which decides
    /// the instance that owns it.
    pub hash: u64,
    /// The key, encoded by the operator.
    pub key: &'a [u8],
    /// Its state, encoded by the operator.
    pub state: &'a [u8],
}

/// Where one entry of [`KeyedEntries`] is: its hash and its key's and state's lengths (the
/// entries lie back to back in its bytes, in order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct EntryAt {
    hash: u64,
    key: usize,
    state: usize,
}

/// State per key: every key and its state, encoded by the operator, back to back in one
/// buffer, beside each entry's partition hash and lengths. A snapshot of millions of keys is
/// then two allocations, encoded and decoded in one pass each (the keys are encoded straight
/// into the buffer, and decoded from slices of it into the operator's map), not two buffers
/// per key.
///
/// It may also carry the seed of the hash table its entries were taken from, in that table's
/// order ([`KeyedEntries::table_seed`]): a table restored with the same seed takes them in
/// the order of its own slots, filling its memory front to back instead of at random.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "KeyedEntriesDecoded")]
pub struct KeyedEntries {
    entries: Vec<EntryAt>,
    #[serde(with = "compact")]
    bytes: Vec<u8>,
    table_seed: Option<[u64; 3]>,
}

impl KeyedEntries {
    /// No entries, with room for `entries` of them.
    pub fn with_capacity(entries: usize) -> Self {
        KeyedEntries {
            entries: Vec::with_capacity(entries),
            bytes: Vec::new(),
            table_seed: None,
        }
    }

    /// The seed of the hash table the entries were taken from, in the order of its slots (the
    /// entries added after those may lie in any order): set by the table that made them
    /// ([`KeyedEntries::taken_from_table`]), `None` when no table did. Its words are the
    /// table's to interpret; it is as private as the keys and states it comes with.
    pub fn table_seed(&self) -> Option<[u64; 3]> {
        self.table_seed
    }

    /// Says that the entries are (or are about to be) added in the order of the slots of a
    /// hash table whose seed is `seed`.
    pub fn taken_from_table(&mut self, seed: [u64; 3]) {
        self.table_seed = Some(seed);
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes of keys and states it holds.
    pub fn bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Adds the entry `key` (already encoded) with `state` (already encoded).
    pub fn push(&mut self, hash: u64, key: &[u8], state: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(state);
        self.entries.push(EntryAt {
            hash,
            key: key.len(),
            state: state.len(),
        });
    }

    /// Adds an entry whose key and state `encode` writes to the end of the buffer it is
    /// given, in this order, returning the length of the key: nothing is allocated per entry.
    /// If `encode` fails, the entries are left as they were and its error returned.
    pub fn push_with<E>(
        &mut self,
        hash: u64,
        encode: impl FnOnce(&mut Vec<u8>) -> Result<usize, E>,
    ) -> Result<(), E> {
        let start = self.bytes.len();
        match encode(&mut self.bytes) {
            Ok(key) => {
                let written = self.bytes.len() - start;
                debug_assert!(key <= written, "a key longer than its entry");
                self.entries.push(EntryAt {
                    hash,
                    key: key.min(written),
                    state: written - key.min(written),
                });
                Ok(())
            }
            Err(e) => {
                self.bytes.truncate(start);
                Err(e)
            }
        }
    }

    /// Every entry, in the order they were added.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = KeyedEntry<'_>> + '_ {
        let mut at = 0;
        self.entries.iter().map(move |e| {
            let key = &self.bytes[at..at + e.key];
            let state = &self.bytes[at + e.key..at + e.key + e.state];
            at += e.key + e.state;
            KeyedEntry {
                hash: e.hash,
                key,
                state,
            }
        })
    }

    /// Adds every entry of `other` (after its own, so its table's seed is kept, if any).
    pub fn append(&mut self, other: KeyedEntries) {
        if self.is_empty() {
            *self = other;
            return;
        }
        self.entries.extend(other.entries);
        self.bytes.extend_from_slice(&other.bytes);
    }
}

/// [`KeyedEntries`] as they travel, checked when decoded: the entries' lengths must add up to
/// the bytes held, so a decoded value never slices past its buffer.
#[derive(Deserialize)]
struct KeyedEntriesDecoded {
    entries: Vec<EntryAt>,
    #[serde(with = "compact")]
    bytes: Vec<u8>,
    table_seed: Option<[u64; 3]>,
}

impl TryFrom<KeyedEntriesDecoded> for KeyedEntries {
    type Error = String;

    fn try_from(decoded: KeyedEntriesDecoded) -> Result<Self, String> {
        let total = decoded.entries.iter().try_fold(0usize, |sum, e| {
            sum.checked_add(e.key)?.checked_add(e.state)
        });
        if total != Some(decoded.bytes.len()) {
            return Err(format!(
                "keyed state whose entries' lengths add up to {}, with {} bytes",
                total.map_or_else(|| "more than a usize".to_string(), |t| t.to_string()),
                decoded.bytes.len()
            ));
        }
        Ok(KeyedEntries {
            entries: decoded.entries,
            bytes: decoded.bytes,
            table_seed: decoded.table_seed,
        })
    }
}

impl<'a> FromIterator<KeyedEntry<'a>> for KeyedEntries {
    fn from_iter<I: IntoIterator<Item = KeyedEntry<'a>>>(entries: I) -> Self {
        let mut all = KeyedEntries::default();
        for e in entries {
            all.push(e.hash, e.key, e.state);
        }
        all
    }
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
    pub keyed: KeyedEntries,
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
            keyed: KeyedEntries::default(),
        })
    }

    /// The operator-wide state [`Snapshot::whole`] encoded, decoded as `T`.
    pub fn decode_whole<T: DeserializeOwned>(&self) -> Result<T, OperatorError> {
        postcard::from_bytes(&self.operator)
            .map_err(|e| OperatorError::Failed(format!("a snapshot's state does not decode: {e}")))
    }

    /// Deals the keyed state over `instances` instances as a key-partitioned edge deals the
    /// keys' tuples; the operator-wide state goes to instance 0. Each part keeps the entries'
    /// order, and so their table's seed.
    pub fn split(self, instances: usize) -> Vec<Snapshot> {
        let mut parts = vec![Snapshot::default(); instances.max(1)];
        if let Some(seed) = self.keyed.table_seed {
            for part in &mut parts {
                part.keyed.taken_from_table(seed);
            }
        }
        let count = parts.len();
        for entry in self.keyed.iter() {
            parts[pick_instance(entry.hash, count)]
                .keyed
                .push(entry.hash, entry.key, entry.state);
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
            merged.keyed.append(s.keyed);
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
        let mut whole = Snapshot {
            operator: vec![9],
            keyed: KeyedEntries::default(),
        };
        for k in 0..50u64 {
            whole.keyed.push(
                sluice_types::partition_hash(&k),
                &k.to_le_bytes(),
                &[k as u8],
            );
        }
        whole.keyed.taken_from_table([1, 2, 3]);
        let parts = whole.clone().split(3);
        assert_eq!(parts.len(), 3);
        for (i, part) in parts.iter().enumerate() {
            assert!(part.keyed.iter().all(|e| pick_instance(e.hash, 3) == i));
            // A part's entries keep their order, so their table's seed.
            assert_eq!(part.keyed.table_seed(), Some([1, 2, 3]));
        }
        let merged = Snapshot::merge(parts);
        assert_eq!(merged.operator, whole.operator);
        let sorted = |s: &Snapshot| {
            let mut entries: Vec<_> = s
                .keyed
                .iter()
                .map(|e| (e.hash, e.key.to_vec(), e.state.to_vec()))
                .collect();
            entries.sort();
            entries
        };
        assert_eq!(sorted(&merged), sorted(&whole));
    }

    #[test]
    fn snapshots_travel_as_base64_in_json_and_as_bytes_in_postcard() {
        let mut snapshot = Snapshot {
            operator: vec![0, 255, 7],
            keyed: KeyedEntries::default(),
        };
        snapshot.keyed.push(3, b"word", &[1; 10]);
        snapshot.keyed.taken_from_table([5, u64::MAX, 7]);
        let json = serde_json::to_string(&snapshot).unwrap();
        assert!(json.contains("\"AP8H\""), "{json}");
        assert_eq!(serde_json::from_str::<Snapshot>(&json).unwrap(), snapshot);
        assert!(serde_json::from_str::<Snapshot>(&json.replace("AP8H", "!!")).is_err());
        let binary = postcard::to_allocvec(&snapshot).unwrap();
        assert_eq!(postcard::from_bytes::<Snapshot>(&binary).unwrap(), snapshot);
    }

    /// Keys and states lie in one buffer, written in place or copied, and read back as
    /// slices of it; an entry whose encoding fails leaves nothing behind.
    #[test]
    fn keyed_entries_share_one_buffer() {
        let mut entries = KeyedEntries::with_capacity(3);
        entries.push(1, b"ab", b"c");
        entries
            .push_with(2, |bytes| {
                bytes.extend_from_slice(b"key");
                bytes.extend_from_slice(b"state");
                Ok::<_, ()>(3)
            })
            .unwrap();
        assert_eq!(
            entries.push_with(3, |bytes| {
                bytes.push(9);
                Err("no")
            }),
            Err("no")
        );
        entries.push(4, b"", b"");
        let got: Vec<_> = entries.iter().map(|e| (e.hash, e.key, e.state)).collect();
        let expected: Vec<(u64, &[u8], &[u8])> =
            vec![(1, b"ab", b"c"), (2, b"key", b"state"), (4, b"", b"")];
        assert_eq!(got, expected);
        assert_eq!((entries.len(), entries.bytes()), (3, 11));
        let mut more: KeyedEntries = entries.iter().collect();
        more.append(entries.clone());
        assert_eq!(more.len(), 6);
    }

    /// A decoded value whose lengths do not add up to its bytes is refused, never sliced.
    #[test]
    fn keyed_entries_whose_lengths_lie_are_refused() {
        let mut entries = KeyedEntries::default();
        entries.push(1, b"key", b"state");
        let mut binary = postcard::to_allocvec(&entries).unwrap();
        // [1 entry][hash 1][key 3][state 5][8 bytes]...: say the state is 6 bytes long.
        assert_eq!(binary[..5], [1, 1, 3, 5, 8]);
        binary[3] = 6;
        let error = postcard::from_bytes::<KeyedEntries>(&binary).unwrap_err();
        assert!(matches!(error, postcard::Error::SerdeDeCustom), "{error}");
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
