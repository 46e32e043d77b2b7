//! How an edge spreads tuples over the parallel instances of its downstream operator.

use std::hash::Hash;
use std::sync::Arc;

use sluice_types::{partition_hash, Tuple, TupleRef, TupleSchema};

/// A key function: reads a tuple and returns its key's hash.
#[derive(Clone)]
pub struct KeyFn {
    schema: TupleSchema,
    hash: Arc<dyn Fn(TupleRef<'_>) -> u64 + Send + Sync>,
}

impl KeyFn {
    /// The tuple type the function reads.
    pub fn schema(&self) -> &TupleSchema {
        &self.schema
    }

    /// The key hash of `tuple`; 0 for a tuple of another type (the graph forbids that).
    #[inline]
    pub fn hash(&self, tuple: TupleRef<'_>) -> u64 {
        (self.hash)(tuple)
    }
}

/// The partitioning of one edge.
#[derive(Clone)]
pub enum Partitioning {
    /// Upstream instance `i` sends to downstream instance `i mod n`: one target each.
    Forward,
    /// Each upstream instance deals tuples to the downstream instances in turn.
    RoundRobin,
    /// Tuples with equal keys go to the same downstream instance (flow affinity).
    KeyBy(KeyFn),
    /// Every downstream instance gets every tuple.
    Broadcast,
}

impl std::fmt::Debug for Partitioning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Partitioning {
    /// Partitions by the key `key` extracts from each tuple of type `T`.
    ///
    /// The key is hashed with [`partition_hash`] (foldhash under a fixed seed), so every
    /// process of a job sends a given key to the same instance.
    pub fn key_by<T, K, F>(key: F) -> Self
    where
        T: Tuple,
        K: Hash,
        F: Fn(&T) -> K + Send + Sync + 'static,
    {
        Self::by_hash(move |t: &T| partition_hash(&key(t)))
    }

    /// Partitions by a hash of each tuple of type `T` that `hash` computes; equal hashes go to
    /// the same instance. It must give the same hash in every process of the job (use
    /// [`partition_hash`] of the key).
    pub fn by_hash<T, F>(hash: F) -> Self
    where
        T: Tuple,
        F: Fn(&T) -> u64 + Send + Sync + 'static,
    {
        Self::KeyBy(KeyFn {
            schema: T::schema(),
            hash: Arc::new(move |tuple: TupleRef<'_>| tuple.get::<T>().map_or(0, &hash)),
        })
    }

    /// The partitioning's name, as shown in plans.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Forward => "forward",
            Self::RoundRobin => "round-robin",
            Self::KeyBy(_) => "key-by",
            Self::Broadcast => "broadcast",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_hash_equally_and_other_types_hash_to_zero() {
        let p = Partitioning::key_by(|s: &String| s.to_lowercase());
        let Partitioning::KeyBy(k) = p else {
            unreachable!()
        };
        let a = "Word".to_string();
        let b = "word".to_string();
        assert_eq!(k.hash(TupleRef::new(&a)), k.hash(TupleRef::new(&b)));
        assert_eq!(k.hash(TupleRef::new(&5u64)), 0);
    }
}
