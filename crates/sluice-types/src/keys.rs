//! Hashing keys: one fixed hash that every process of a job agrees on, for partitioning, and
//! the maps that hold keyed state.
//!
//! A key-partitioned edge sends a tuple to the instance its key's hash picks. The sender may
//! be in any process, so the hash must not depend on a per-process seed: [`partition_hash`]
//! uses foldhash under a fixed seed. Keyed state lives in one instance, so its maps
//! ([`KeyMap`], [`KeySet`]) take foldhash's per-process random seed instead, which keeps an
//! adversary who controls the keys from forcing collisions in them. foldhash is several times
//! faster than the standard library's SipHash on the short keys streams are keyed by (a word,
//! a symbol, an id), and that hash is paid on every tuple of a keyed operator.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hash};

/// The hasher of keyed state: foldhash with a random seed per process.
pub type KeyHasher = foldhash::fast::RandomState;

/// A map from keys to state, with [`KeyHasher`].
pub type KeyMap<K, V> = HashMap<K, V, KeyHasher>;

/// A set of keys, with [`KeyHasher`].
pub type KeySet<K> = HashSet<K, KeyHasher>;

/// The seed of [`partition_hash`]; changing it changes which instance every key goes to.
const PARTITION_SEED: u64 = 0x5175_1ce0_9a27_d3b1;

/// The hash of `key` that picks its instance on a key-partitioned edge: the same in every
/// process of every run.
#[inline]
pub fn partition_hash<K: Hash + ?Sized>(key: &K) -> u64 {
    foldhash::fast::FixedState::with_seed(PARTITION_SEED).hash_one(key)
}

/// The instance among `n` that `hash` picks, using the hash's high bits (a map keyed by the
/// same keys indexes its buckets by the low bits; drawing both from the same bits would leave
/// most buckets of each instance empty).
#[inline]
pub fn pick_instance(hash: u64, n: usize) -> usize {
    (((hash >> 32) * n as u64) >> 32) as usize
}

/// A hash that [`pick_instance`] maps to `instance` among `n` (`instance < n`): for a
/// key-partitioned edge whose key function has already chosen the instance, from a routing
/// table, say, instead of from a hash of the key.
#[inline]
pub fn hash_of_instance(instance: usize, n: usize) -> u64 {
    debug_assert!(instance < n);
    // The smallest high half h with h * n >= instance * 2^32; then h * n is below
    // (instance + 1) * 2^32 because n <= 2^32.
    ((instance as u64) << 32).div_ceil(n as u64) << 32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_hash_is_fixed_and_spreads() {
        assert_eq!(partition_hash("word"), partition_hash(&"word".to_string()));
        let mut seen = [0usize; 4];
        for i in 0..4000u32 {
            seen[pick_instance(partition_hash(&i), 4)] += 1;
        }
        assert!(seen.iter().all(|&n| n > 800), "{seen:?}");
        assert!((0..1000u64).all(|h| pick_instance(h << 40, 3) < 3));
    }

    #[test]
    fn hash_of_instance_picks_that_instance() {
        for n in [1, 2, 3, 7, 64, 1000, 1 << 20] {
            for instance in [0, n / 3, n / 2, n - 1] {
                assert_eq!(
                    pick_instance(hash_of_instance(instance, n), n),
                    instance,
                    "{n}"
                );
            }
        }
    }
}
