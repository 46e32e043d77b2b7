//! Keyed state: one value per key, held by an operator instance in a [`KeyMap`], and its
//! snapshot.
//!
//! A keyed operator's input edge is partitioned by the same key its state is kept by, so each
//! instance holds the keys routed to it. [`KeyedState::snapshot`] encodes every key and value
//! with `postcard` beside the key's partition hash, so that a redeploy can deal the keys over
//! any number of new instances ([`sluice_graph::Snapshot::split`]).

use std::hash::Hash;

use serde::de::DeserializeOwned;
use serde::Serialize;
use sluice_graph::{KeyedEntries, LaterSnapshot, OperatorError, Snapshot};
use sluice_types::{partition_hash, KeyMap};

/// The bounds of a key: hashed, compared, cloned into state, and encoded in snapshots.
pub trait Key: Hash + Eq + Clone + Send + Sync + Serialize + DeserializeOwned + 'static {}
impl<K: Hash + Eq + Clone + Send + Sync + Serialize + DeserializeOwned + 'static> Key for K {}

/// A value per key.
#[derive(Debug, Clone)]
pub struct KeyedState<K, S> {
    map: KeyMap<K, S>,
}

impl<K, S> Default for KeyedState<K, S> {
    fn default() -> Self {
        Self {
            map: KeyMap::default(),
        }
    }
}

impl<K: Key, S: Serialize + DeserializeOwned> KeyedState<K, S> {
    /// No keys yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `f` on the state of `key`, made with `init` if the key is new (the key is cloned
    /// only then).
    #[inline]
    pub fn update<R>(
        &mut self,
        key: &K,
        init: impl FnOnce() -> S,
        f: impl FnOnce(&mut S) -> R,
    ) -> R {
        if let Some(state) = self.map.get_mut(key) {
            return f(state);
        }
        f(self.map.entry(key.clone()).or_insert_with(init))
    }

    /// The state of `key`, if it has one.
    pub fn get(&self, key: &K) -> Option<&S> {
        self.map.get(key)
    }

    /// The state of `key`, mutably, if it has one.
    pub fn get_mut(&mut self, key: &K) -> Option<&mut S> {
        self.map.get_mut(key)
    }

    /// Removes the state of `key`.
    pub fn remove(&mut self, key: &K) -> Option<S> {
        self.map.remove(key)
    }

    /// How many keys have state.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no key has state.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every key and its state, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &S)> {
        self.map.iter()
    }

    /// Every key and its state, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&K, &mut S)> {
        self.map.iter_mut()
    }

    /// Keeps only the keys for which `keep` holds.
    pub fn retain(&mut self, keep: impl FnMut(&K, &mut S) -> bool) {
        self.map.retain(keep)
    }

    /// Every key's state, encoded, with the key's partition hash: each key and state encoded
    /// straight into the entries' one buffer.
    pub fn snapshot(&self) -> Result<KeyedEntries, OperatorError> {
        let mut entries = KeyedEntries::with_capacity(self.map.len());
        for (key, state) in &self.map {
            entries.push_with(partition_hash(key), |bytes| {
                let start = bytes.len();
                encode_onto(key, bytes)?;
                let key_len = bytes.len() - start;
                encode_onto(state, bytes)?;
                Ok::<_, OperatorError>(key_len)
            })?;
        }
        Ok(entries)
    }

    /// A copy of every key's state, made into a snapshot (as [`KeyedState::snapshot`] makes
    /// its entries) later, on the thread that runs it: what a checkpoint takes on the data
    /// path is a clone of the map, no encoding.
    pub fn snapshot_later(&self) -> LaterSnapshot
    where
        S: Clone + Send + Serialize + 'static,
    {
        let copy = self.clone();
        LaterSnapshot::new(move || {
            Ok(Snapshot {
                operator: Vec::new(),
                keyed: copy.snapshot()?,
            })
        })
    }

    /// Adds the keys of `entries` (made by [`KeyedState::snapshot`]).
    pub fn restore(&mut self, entries: &KeyedEntries) -> Result<(), OperatorError> {
        // Room for every key at once: a restore of millions of keys rehashes no table.
        self.map.reserve(entries.len());
        for entry in entries.iter() {
            self.map.insert(decode(entry.key)?, decode(entry.state)?);
        }
        Ok(())
    }
}

/// Appends `value`, encoded, to `bytes`.
fn encode_onto<V: Serialize>(value: &V, bytes: &mut Vec<u8>) -> Result<(), OperatorError> {
    let buffer = std::mem::take(bytes);
    *bytes = postcard::to_extend(value, buffer)
        .map_err(|e| OperatorError::Failed(format!("cannot encode state for a snapshot: {e}")))?;
    Ok(())
}

fn decode<V: DeserializeOwned>(bytes: &[u8]) -> Result<V, OperatorError> {
    postcard::from_bytes(bytes)
        .map_err(|e| OperatorError::Failed(format!("a snapshot's state does not decode: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_restore_every_key() {
        let mut state: KeyedState<String, u64> = KeyedState::new();
        for w in ["a", "b", "a", "c", "a"] {
            state.update(&w.to_string(), || 0, |n| *n += 1);
        }
        let mut restored: KeyedState<String, u64> = KeyedState::new();
        restored.restore(&state.snapshot().unwrap()).unwrap();
        assert_eq!(restored.get(&"a".into()), Some(&3));
        assert_eq!(restored.len(), 3);
        let mut bad = KeyedEntries::default();
        bad.push(0, &[0xff], &[]);
        assert!(restored.restore(&bad).is_err());
    }

    /// A checkpoint's copy is the state at the barrier: what the operator does after it,
    /// before the writer thread encodes the copy, is not in it.
    #[test]
    fn a_later_snapshot_is_the_state_when_it_was_taken() {
        let mut state: KeyedState<String, u64> = KeyedState::new();
        for w in ["a", "b", "a"] {
            state.update(&w.to_string(), || 0, |n| *n += 1);
        }
        let at_barrier = state.snapshot().unwrap();
        let later = state.snapshot_later();
        for w in ["a", "c"] {
            state.update(&w.to_string(), || 0, |n| *n += 1);
        }
        let made = std::thread::spawn(move || later.make().unwrap())
            .join()
            .unwrap();
        let sorted = |entries: &KeyedEntries| {
            let mut entries: Vec<_> = entries.iter().map(|e| (e.key, e.state, e.hash)).collect();
            entries.sort();
            entries
                .iter()
                .map(|(k, s, h)| (k.to_vec(), s.to_vec(), *h))
                .collect::<Vec<_>>()
        };
        assert_eq!(sorted(&made.keyed), sorted(&at_barrier));
        assert!(made.operator.is_empty());
    }
}
