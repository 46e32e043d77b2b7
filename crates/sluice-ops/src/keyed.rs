//! Keyed state: one value per key, held by an operator instance in a hash table, and its
//! snapshot.
//!
//! A keyed operator's input edge is partitioned by the same key its state is kept by, so each
//! instance holds the keys routed to it. [`KeyedState::snapshot`] encodes every key and value
//! with `postcard` beside the key's partition hash, so that a redeploy can deal the keys over
//! any number of new instances ([`sluice_graph::Snapshot::split`]).
//!
//! The table's hash of a key is made from its partition hash ([`table_hash`]): a restore
//! takes each key's partition hash from the snapshot and hashes no key again (a restore of
//! millions of keys is mostly inserts), and the data path hashes each key's bytes once, as
//! the standard map did. The partition hash is not used as it is, for two reasons. Its high
//! bits are alike in the keys of one instance (they picked the instance, [`pick_instance`]),
//! and the table draws its tags from its high bits. And its seed is fixed and public (every
//! process must agree on it), so keys chosen to share the low bits the table indexes by
//! would collide in every run: a peer that picks the keys could make each lookup walk a
//! long probe sequence (HashDoS). So the partition hash is mixed with a seed drawn per table
//! from the process's random seed: two folded multiplies, each `x * m` taken to 128 bits and
//! its two halves xored (`m` odd; foldhash's own step), the first of `p ^ a` by `b`, the
//! second of its result by `c`. A plain multiply would not do: its low bits depend only on
//! the low bits of `p`, so keys colliding there would collide whatever the seed. One folded
//! multiply is not enough either: keys whose partition hashes differ only in their high half
//! vary its result's low bits by a 16-bit window of a product, a lattice that for about one
//! seed in sixty put 1024 such keys in a few dozen slots (measured over 200,000 seeds; none of
//! them does so with the second multiply, see the test). After both, every bit of the result
//! depends on every bit of `p`, and which keys share a slot changes with the seed, which no
//! peer sees. What the mix cannot undo is a full 64-bit collision of partition hashes, which
//! an adversary who knows the fixed partition seed would have to search for (by brute force,
//! some 2^32 hashes for one pair). Its cost is two 64 x 64 -> 128-bit multiplies and three
//! xors per lookup, beside hashing the key's bytes.
//!
//! A snapshot lists the keys in the order of the table's slots, and carries the table's seed
//! ([`KeyedEntries::table_seed`]). An empty table restoring it takes that seed, so each key
//! lands beside the one before it: the restore fills the table's memory front to back, as a
//! copy would, instead of missing the cache on every key (a restore of a million keys took
//! half the time). The seed stays as private as the state it travels with (a checkpoint's
//! files, the launcher's link to its PEs), which holds every key anyway.

use std::hash::{BuildHasher, Hash};

use hashbrown::hash_table::Entry;
use hashbrown::HashTable;
use serde::de::DeserializeOwned;
use serde::Serialize;
use sluice_graph::{KeyedEntries, LaterSnapshot, OperatorError, Snapshot};
#[cfg(doc)]
use sluice_types::pick_instance;
use sluice_types::{partition_hash, KeyHasher};

/// The bounds of a key: hashed, compared, cloned into state, and encoded in snapshots.
pub trait Key: Hash + Eq + Clone + Send + Sync + Serialize + DeserializeOwned + 'static {}
impl<K: Hash + Eq + Clone + Send + Sync + Serialize + DeserializeOwned + 'static> Key for K {}

/// A value per key.
#[derive(Debug, Clone)]
pub struct KeyedState<K, S> {
    /// Each key beside its state, found by [`table_hash`].
    map: HashTable<(K, S)>,
    /// The seed mixed into every key's table hash.
    seed: TableSeed,
}

impl<K, S> Default for KeyedState<K, S> {
    fn default() -> Self {
        Self {
            map: HashTable::new(),
            seed: TableSeed::default(),
        }
    }
}

/// The seed of a table's hashes: three words drawn from the process's random seed (that of
/// [`KeyHasher`]), or taken from a snapshot's, the multipliers odd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TableSeed {
    xor: u64,
    multiplier: u64,
    second_multiplier: u64,
}

impl TableSeed {
    /// The seed as a snapshot carries it.
    fn words(self) -> [u64; 3] {
        [self.xor, self.multiplier, self.second_multiplier]
    }

    /// The seed a snapshot carried (its multipliers made odd, whatever the snapshot says).
    fn from_words([xor, multiplier, second_multiplier]: [u64; 3]) -> Self {
        Self {
            xor,
            multiplier: multiplier | 1,
            second_multiplier: second_multiplier | 1,
        }
    }
}

impl Default for TableSeed {
    fn default() -> Self {
        let draw = KeyHasher::default();
        Self {
            xor: draw.hash_one(0u8),
            multiplier: draw.hash_one(1u8) | 1,
            second_multiplier: draw.hash_one(2u8) | 1,
        }
    }
}

/// `x * multiplier` taken to 128 bits, its two halves xored.
#[inline]
fn folded_multiply(x: u64, multiplier: u64) -> u64 {
    let product = u128::from(x) * u128::from(multiplier);
    (product as u64) ^ ((product >> 64) as u64)
}

/// The table's hash of a key whose partition hash is `partition`: two folded multiplies with
/// the table's seed (why, in the module's doc).
#[inline]
fn table_hash(seed: TableSeed, partition: u64) -> u64 {
    folded_multiply(
        folded_multiply(partition ^ seed.xor, seed.multiplier),
        seed.second_multiplier,
    )
}

/// The table's hash of `key`.
#[inline]
fn key_hash<K: Hash>(seed: TableSeed, key: &K) -> u64 {
    table_hash(seed, partition_hash(key))
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
        let seed = self.seed;
        let hash = key_hash(seed, key);
        match self
            .map
            .entry(hash, |(k, _)| k == key, |(k, _)| key_hash(seed, k))
        {
            Entry::Occupied(found) => f(&mut found.into_mut().1),
            Entry::Vacant(slot) => f(&mut slot.insert((key.clone(), init())).into_mut().1),
        }
    }

    /// The state of `key`, if it has one.
    pub fn get(&self, key: &K) -> Option<&S> {
        let hash = key_hash(self.seed, key);
        self.map
            .find(hash, |(k, _)| k == key)
            .map(|(_, state)| state)
    }

    /// The state of `key`, mutably, if it has one.
    pub fn get_mut(&mut self, key: &K) -> Option<&mut S> {
        let hash = key_hash(self.seed, key);
        self.map
            .find_mut(hash, |(k, _)| k == key)
            .map(|(_, state)| state)
    }

    /// Removes the state of `key`.
    pub fn remove(&mut self, key: &K) -> Option<S> {
        let hash = key_hash(self.seed, key);
        let found = self.map.find_entry(hash, |(k, _)| k == key).ok()?;
        Some(found.remove().0 .1)
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
        self.map.iter().map(|(key, state)| (key, state))
    }

    /// Every key and its state, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&K, &mut S)> {
        self.map.iter_mut().map(|(key, state)| (&*key, state))
    }

    /// Keeps only the keys for which `keep` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut S) -> bool) {
        self.map.retain(|(key, state)| keep(key, state))
    }

    /// Every key's state, encoded, with the key's partition hash: each key and state encoded
    /// straight into the entries' one buffer, in the order of the table's slots, beside the
    /// table's seed.
    pub fn snapshot(&self) -> Result<KeyedEntries, OperatorError> {
        let mut entries = KeyedEntries::with_capacity(self.map.len());
        entries.taken_from_table(self.seed.words());
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

    /// Adds the keys of `entries` (made by [`KeyedState::snapshot`]); a key already here
    /// takes the state of `entries`. Each key's table hash is made from the partition hash
    /// stored beside it, and the table has room for every key before the first goes in: a
    /// restore hashes no key and grows no table. An empty table takes the seed of the table
    /// the entries came from, so they go in the order of its slots (the module's doc says
    /// why).
    pub fn restore(&mut self, entries: &KeyedEntries) -> Result<(), OperatorError> {
        let Self { map, seed } = self;
        if let Some(taken) = entries.table_seed().filter(|_| map.is_empty()) {
            *seed = TableSeed::from_words(taken);
        }
        let seed = *seed;
        let rehash = |(k, _): &(K, S)| key_hash(seed, k);
        map.reserve(entries.len(), rehash);
        let mut run: Vec<(u64, K, S)> = Vec::with_capacity(RESTORE_RUN);
        let mut all = entries.iter();
        loop {
            for entry in all.by_ref().take(RESTORE_RUN) {
                let key: K = decode(entry.key)?;
                debug_assert_eq!(
                    entry.hash,
                    partition_hash(&key),
                    "a stored hash is the key's"
                );
                run.push((table_hash(seed, entry.hash), key, decode(entry.state)?));
            }
            if run.is_empty() {
                break;
            }
            for (hash, key, state) in run.drain(..) {
                match map.entry(hash, |(k, _)| *k == key, rehash) {
                    Entry::Occupied(mut found) => found.get_mut().1 = state,
                    Entry::Vacant(slot) => {
                        slot.insert((key, state));
                    }
                }
            }
        }
        Ok(())
    }
}

/// How many entries a restore decodes before it inserts them.
const RESTORE_RUN: usize = 256;

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

    /// A restore from the stored hashes gives back the state that was snapshotted: the same
    /// entries, as many keys, every key found by a lookup (and absent keys not found), and
    /// the restored state goes on counting and snapshots the same again. Two snapshots'
    /// entries restored one after the other, with a key in both, keep the later state.
    #[test]
    fn a_restore_gives_back_the_snapshotted_state() {
        let mut state: KeyedState<String, u64> = KeyedState::new();
        for i in 0..20_000u64 {
            state.update(&format!("w{}", i % 5_000), || 0, |n| *n += i);
        }
        let snapshot = state.snapshot().unwrap();
        let mut restored: KeyedState<String, u64> = KeyedState::new();
        restored.restore(&snapshot).unwrap();
        assert_eq!(restored.len(), state.len());
        let sorted = |s: &KeyedState<String, u64>| {
            let mut all: Vec<_> = s.iter().map(|(k, v)| (k.clone(), *v)).collect();
            all.sort();
            all
        };
        assert_eq!(sorted(&restored), sorted(&state));
        for (key, count) in state.iter() {
            assert_eq!(restored.get(key), Some(count), "{key}");
        }
        assert_eq!(restored.get(&"w5000".into()), None);
        restored.update(&"w7".into(), || 0, |n| *n += 1);
        state.update(&"w7".into(), || 0, |n| *n += 1);
        assert_eq!(sorted(&restored), sorted(&state));
        assert_eq!(restored.remove(&"w8".into()), state.remove(&"w8".into()));
        assert_eq!(restored.len(), 4_999);

        let mut later: KeyedState<String, u64> = KeyedState::new();
        later.update(&"w1".into(), || 0, |n| *n = 99);
        restored.restore(&later.snapshot().unwrap()).unwrap();
        assert_eq!(restored.get(&"w1".into()), Some(&99));
        assert_eq!(restored.len(), 4_999);
    }

    /// A restore decodes entries in runs of [`RESTORE_RUN`] before inserting them: a key
    /// that comes twice, in one run and in the next, keeps its later state, and every key of
    /// a last, partial run is restored.
    #[test]
    fn a_restore_keeps_the_later_of_a_key_twice_across_its_runs() {
        let mut entries = KeyedEntries::default();
        let push = |entries: &mut KeyedEntries, key: &str, count: u64| {
            let (key_bytes, state) = (
                postcard::to_allocvec(&key.to_string()).unwrap(),
                postcard::to_allocvec(&count).unwrap(),
            );
            entries.push(partition_hash(&key.to_string()), &key_bytes, &state);
        };
        for i in 0..RESTORE_RUN as u64 + 7 {
            push(&mut entries, &format!("k{i}"), i);
        }
        push(&mut entries, "k3", 1_000);
        let mut restored: KeyedState<String, u64> = KeyedState::new();
        restored.restore(&entries).unwrap();
        assert_eq!(restored.len(), RESTORE_RUN + 7);
        assert_eq!(restored.get(&"k3".into()), Some(&1_000));
        let last = format!("k{}", RESTORE_RUN + 6);
        assert_eq!(restored.get(&last), Some(&(RESTORE_RUN as u64 + 6)));
    }

    /// A fresh table restoring a snapshot takes the seed of the table it was taken from, so it
    /// lays the keys out as that table did: it lists them in the snapshot's order, but for
    /// the few that had wrapped round the end of the table (a table of another seed would
    /// share next to no neighbours). A table that holds keys already keeps its own seed.
    #[test]
    fn a_restored_table_lays_its_keys_out_in_the_snapshots_order() {
        let mut state: KeyedState<String, u64> = KeyedState::new();
        for i in 0..50_000u64 {
            state.update(&format!("w{i}"), || 0, |n| *n += i);
        }
        let snapshot = state.snapshot().unwrap();
        let mut restored: KeyedState<String, u64> = KeyedState::new();
        restored.restore(&snapshot).unwrap();
        let taken: Vec<&[u8]> = snapshot.iter().map(|e| e.key).collect();
        let again = restored.snapshot().unwrap();
        let neighbours: std::collections::HashSet<(&[u8], &[u8])> =
            taken.windows(2).map(|w| (w[0], w[1])).collect();
        let kept = again
            .iter()
            .zip(again.iter().skip(1))
            .filter(|(a, b)| neighbours.contains(&(a.key, b.key)))
            .count();
        assert!(kept * 100 >= taken.len() * 99, "{kept} of {}", taken.len());
        assert_eq!(again.table_seed(), snapshot.table_seed());

        let mut holding: KeyedState<String, u64> = KeyedState::new();
        holding.update(&"w1".into(), || 0, |n| *n = 7);
        let own = holding.seed;
        holding.restore(&snapshot).unwrap();
        assert_eq!(holding.seed, own);
        assert_eq!(holding.get(&"w1".into()), Some(&1));
        assert_eq!(holding.len(), 50_000);
    }

    /// Keys whose partition hashes share their low 32 bits (as keys picked to collide under
    /// the public partition seed would) get table hashes that differ in the low bits the
    /// table indexes by, and two tables mix them differently: the seed's multiply is folded.
    ///
    /// Over many seeds: with one folded multiply, about one seed in sixty put these 1024 keys
    /// in under 1000 of the 65536 slots (as few as 25), so a single draw failed now and then.
    #[test]
    fn table_hashes_spread_partition_hashes_alike_in_their_low_bits() {
        let slots = |seed: TableSeed| {
            (1..=1024u64)
                .map(|i| table_hash(seed, i << 32) & 0xffff)
                .collect::<std::collections::HashSet<_>>()
                .len()
        };
        for _ in 0..2_000 {
            let seed = TableSeed::default();
            assert!(slots(seed) > 1000, "{seed:?}: {} slots", slots(seed));
        }
        let (one, other) = (TableSeed::default(), TableSeed::default());
        assert!((1..=64u64).any(|i| table_hash(one, i << 32) != table_hash(other, i << 32)));
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
