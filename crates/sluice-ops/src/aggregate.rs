//! Incremental aggregates: what a rolling aggregate keeps per key and a window keeps per pane.
//!
//! An [`Aggregate`] folds tuples into an accumulator one at a time (`add`) and combines two
//! accumulators (`merge`), so no operator ever buffers the tuples themselves to aggregate them:
//! a rolling `sum` keeps one accumulator per key, a sliding window one per pane, merged when a
//! window fires. Accumulators are `serde` values so that keyed state can be snapshotted.

use std::marker::PhantomData;
use std::ops::Add;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The bounds a value must meet to be kept as state and emitted in a `(key, value)` tuple.
pub trait Value: Clone + Send + Serialize + DeserializeOwned + 'static {}
impl<V: Clone + Send + Serialize + DeserializeOwned + 'static> Value for V {}

/// A fold of tuples of type `T` into an accumulator, and the value it reports.
pub trait Aggregate<T>: Clone + Send + Sync + 'static {
    /// The running state.
    type Acc: Value;
    /// What the aggregate reports.
    type Out: Value;
    /// The state before any tuple.
    fn init(&self) -> Self::Acc;
    /// Folds one tuple in.
    fn add(&self, acc: &mut Self::Acc, tuple: &T);
    /// Folds another accumulator (of tuples that came after `acc`'s) in.
    fn merge(&self, acc: &mut Self::Acc, other: &Self::Acc);
    /// The value of the state.
    fn result(&self, acc: &Self::Acc) -> Self::Out;
}

/// How many tuples.
#[derive(Debug, Clone, Copy, Default)]
pub struct Count;

impl<T> Aggregate<T> for Count {
    type Acc = u64;
    type Out = u64;
    fn init(&self) -> u64 {
        0
    }
    #[inline]
    fn add(&self, acc: &mut u64, _: &T) {
        *acc += 1;
    }
    fn merge(&self, acc: &mut u64, other: &u64) {
        *acc += other;
    }
    #[inline]
    fn result(&self, acc: &u64) -> u64 {
        *acc
    }
}

/// Declares an aggregate over the values a field function reads from each tuple.
macro_rules! field_aggregate {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub struct $name<T, V, F> {
            field: F,
            types: PhantomData<fn(&T) -> V>,
        }

        impl<T, V, F: Clone> Clone for $name<T, V, F> {
            fn clone(&self) -> Self {
                Self::new(self.field.clone())
            }
        }

        impl<T, V, F> $name<T, V, F> {
            /// Over the values `field` reads from each tuple.
            pub fn new(field: F) -> Self {
                Self {
                    field,
                    types: PhantomData,
                }
            }
        }
    };
}

field_aggregate!(
    /// The sum of a field.
    Sum
);
field_aggregate!(
    /// The least value of a field.
    Min
);
field_aggregate!(
    /// The greatest value of a field.
    Max
);
field_aggregate!(
    /// The arithmetic mean of a field, as `f64`.
    Mean
);

impl<T, V, F> Aggregate<T> for Sum<T, V, F>
where
    T: 'static,
    V: Value + Default + Add<Output = V> + Copy,
    F: Fn(&T) -> V + Clone + Send + Sync + 'static,
{
    type Acc = V;
    type Out = V;
    fn init(&self) -> V {
        V::default()
    }
    #[inline]
    fn add(&self, acc: &mut V, tuple: &T) {
        *acc = *acc + (self.field)(tuple);
    }
    fn merge(&self, acc: &mut V, other: &V) {
        *acc = *acc + *other;
    }
    fn result(&self, acc: &V) -> V {
        *acc
    }
}

/// Keeps the better of `acc` and `value` by `prefer` (true when the new value wins).
fn keep_extreme<V: Copy>(acc: &mut Option<V>, value: V, prefer: impl Fn(&V, &V) -> bool) {
    match acc {
        Some(current) if !prefer(&value, current) => {}
        _ => *acc = Some(value),
    }
}

/// Declares `Min` or `Max` as the aggregate keeping the extreme `prefer` picks.
macro_rules! extreme_aggregate {
    ($name:ident, $prefer:expr) => {
        impl<T, V, F> Aggregate<T> for $name<T, V, F>
        where
            T: 'static,
            V: Value + Default + PartialOrd + Copy,
            F: Fn(&T) -> V + Clone + Send + Sync + 'static,
        {
            type Acc = Option<V>;
            type Out = V;
            fn init(&self) -> Option<V> {
                None
            }
            #[inline]
            fn add(&self, acc: &mut Option<V>, tuple: &T) {
                keep_extreme(acc, (self.field)(tuple), $prefer);
            }
            fn merge(&self, acc: &mut Option<V>, other: &Option<V>) {
                if let Some(value) = *other {
                    keep_extreme(acc, value, $prefer);
                }
            }
            fn result(&self, acc: &Option<V>) -> V {
                acc.unwrap_or_default()
            }
        }
    };
}

extreme_aggregate!(Min, |new: &V, old: &V| new < old);
extreme_aggregate!(Max, |new: &V, old: &V| new > old);

/// The running sum and count behind [`Mean`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MeanAcc {
    /// The sum of the values.
    pub sum: f64,
    /// How many values.
    pub count: u64,
}

impl<T, V, F> Aggregate<T> for Mean<T, V, F>
where
    T: 'static,
    V: Into<f64> + 'static,
    F: Fn(&T) -> V + Clone + Send + Sync + 'static,
{
    type Acc = MeanAcc;
    type Out = f64;
    fn init(&self) -> MeanAcc {
        MeanAcc::default()
    }
    #[inline]
    fn add(&self, acc: &mut MeanAcc, tuple: &T) {
        acc.sum += (self.field)(tuple).into();
        acc.count += 1;
    }
    fn merge(&self, acc: &mut MeanAcc, other: &MeanAcc) {
        acc.sum += other.sum;
        acc.count += other.count;
    }
    fn result(&self, acc: &MeanAcc) -> f64 {
        if acc.count == 0 {
            0.0
        } else {
            acc.sum / acc.count as f64
        }
    }
}

/// A user's reduce: `f(earlier, later)` combines two values of the stream into one, and must
/// be associative (windows merge partial results).
pub struct Reduce<T, F> {
    f: F,
    types: PhantomData<fn(&T)>,
}

impl<T, F: Clone> Clone for Reduce<T, F> {
    fn clone(&self) -> Self {
        Self::new(self.f.clone())
    }
}

impl<T, F> Reduce<T, F> {
    /// Reduces with `f`.
    pub fn new(f: F) -> Self {
        Self {
            f,
            types: PhantomData,
        }
    }
}

impl<T, F> Aggregate<T> for Reduce<T, F>
where
    T: Value + Default,
    F: Fn(&T, &T) -> T + Clone + Send + Sync + 'static,
{
    type Acc = Option<T>;
    type Out = T;
    fn init(&self) -> Option<T> {
        None
    }
    fn add(&self, acc: &mut Option<T>, tuple: &T) {
        *acc = Some(match acc {
            Some(earlier) => (self.f)(earlier, tuple),
            None => tuple.clone(),
        });
    }
    fn merge(&self, acc: &mut Option<T>, other: &Option<T>) {
        if let Some(later) = other {
            self.add(acc, later);
        }
    }
    fn result(&self, acc: &Option<T>) -> T {
        acc.clone().unwrap_or_default()
    }
}

/// A user function over all of a window's tuples, in arrival order: the one aggregate that
/// keeps every tuple (use it only when the function needs them all).
pub struct Apply<T, O, F> {
    f: F,
    types: PhantomData<fn(&T) -> O>,
}

impl<T, O, F: Clone> Clone for Apply<T, O, F> {
    fn clone(&self) -> Self {
        Self::new(self.f.clone())
    }
}

impl<T, O, F> Apply<T, O, F> {
    /// Applies `f` to the tuples.
    pub fn new(f: F) -> Self {
        Self {
            f,
            types: PhantomData,
        }
    }
}

impl<T, O, F> Aggregate<T> for Apply<T, O, F>
where
    T: Value,
    O: Value,
    F: Fn(&[T]) -> O + Clone + Send + Sync + 'static,
{
    type Acc = Vec<T>;
    type Out = O;
    fn init(&self) -> Vec<T> {
        Vec::new()
    }
    fn add(&self, acc: &mut Vec<T>, tuple: &T) {
        acc.push(tuple.clone());
    }
    fn merge(&self, acc: &mut Vec<T>, other: &Vec<T>) {
        acc.extend_from_slice(other);
    }
    fn result(&self, acc: &Vec<T>) -> O {
        (self.f)(acc)
    }
}

/// The window's tuples sorted by what `by` reads (ascending; stable, so ties keep arrival
/// order).
pub struct SortBy<T, V, F> {
    by: F,
    types: PhantomData<fn(&T) -> V>,
}

impl<T, V, F: Clone> Clone for SortBy<T, V, F> {
    fn clone(&self) -> Self {
        Self::new(self.by.clone())
    }
}

impl<T, V, F> SortBy<T, V, F> {
    /// Sorts by `by`.
    pub fn new(by: F) -> Self {
        Self {
            by,
            types: PhantomData,
        }
    }
}

impl<T, V, F> Aggregate<T> for SortBy<T, V, F>
where
    T: Value,
    V: Ord + 'static,
    F: Fn(&T) -> V + Clone + Send + Sync + 'static,
{
    type Acc = Vec<T>;
    type Out = Vec<T>;
    fn init(&self) -> Vec<T> {
        Vec::new()
    }
    fn add(&self, acc: &mut Vec<T>, tuple: &T) {
        acc.push(tuple.clone());
    }
    fn merge(&self, acc: &mut Vec<T>, other: &Vec<T>) {
        acc.extend_from_slice(other);
    }
    fn result(&self, acc: &Vec<T>) -> Vec<T> {
        let mut sorted = acc.clone();
        sorted.sort_by_key(|t| (self.by)(t));
        sorted
    }
}

/// The `k` tuples with the greatest value of `by` (greatest first; among equals the earlier
/// first). It keeps only `k` tuples per window or pane, never all of them.
pub struct TopK<T, V, F> {
    k: usize,
    by: F,
    types: PhantomData<fn(&T) -> V>,
}

impl<T, V, F: Clone> Clone for TopK<T, V, F> {
    fn clone(&self) -> Self {
        Self::new(self.k, self.by.clone())
    }
}

impl<T, V, F> TopK<T, V, F> {
    /// The best `k` by `by`.
    pub fn new(k: usize, by: F) -> Self {
        Self {
            k,
            by,
            types: PhantomData,
        }
    }
}

impl<T, V, F> TopK<T, V, F>
where
    V: Ord,
    F: Fn(&T) -> V,
{
    /// Inserts `tuple` into the best-first `acc` after its equals, keeping `k`.
    fn insert(&self, acc: &mut Vec<T>, tuple: &T)
    where
        T: Clone,
    {
        let value = (self.by)(tuple);
        let at = acc.partition_point(|t| (self.by)(t) >= value);
        if at < self.k {
            acc.insert(at, tuple.clone());
            acc.truncate(self.k);
        }
    }
}

impl<T, V, F> Aggregate<T> for TopK<T, V, F>
where
    T: Value,
    V: Ord + 'static,
    F: Fn(&T) -> V + Clone + Send + Sync + 'static,
{
    type Acc = Vec<T>;
    type Out = Vec<T>;
    fn init(&self) -> Vec<T> {
        Vec::with_capacity(self.k)
    }
    fn add(&self, acc: &mut Vec<T>, tuple: &T) {
        self.insert(acc, tuple);
    }
    fn merge(&self, acc: &mut Vec<T>, other: &Vec<T>) {
        other.iter().for_each(|t| self.insert(acc, t));
    }
    fn result(&self, acc: &Vec<T>) -> Vec<T> {
        acc.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fold<T, A: Aggregate<T>>(agg: &A, items: &[T]) -> A::Acc {
        let mut acc = agg.init();
        items.iter().for_each(|t| agg.add(&mut acc, t));
        acc
    }

    /// Every aggregate gives the same result folded whole or in two parts merged.
    fn check_merge<T, A: Aggregate<T>>(agg: A, items: &[T], expected: A::Out)
    where
        A::Out: PartialEq + std::fmt::Debug,
    {
        assert_eq!(agg.result(&fold(&agg, items)), expected);
        for cut in 0..=items.len() {
            let mut acc = fold(&agg, &items[..cut]);
            agg.merge(&mut acc, &fold(&agg, &items[cut..]));
            assert_eq!(agg.result(&acc), expected, "cut at {cut}");
        }
    }

    #[test]
    fn aggregates_fold_and_merge() {
        let xs = [4i64, -2, 9, 0, 3];
        check_merge(Count, &xs, 5);
        check_merge(Sum::new(|x: &i64| *x), &xs, 14);
        check_merge(Min::new(|x: &i64| *x), &xs, -2);
        check_merge(Max::new(|x: &i64| *x), &xs, 9);
        check_merge(Mean::new(|x: &i64| *x as f64), &xs, 2.8);
        check_merge(Reduce::new(|a: &i64, b: &i64| *a.max(b)), &xs, 9);
        check_merge(Apply::new(|w: &[i64]| w.len() as u64 * 100), &xs, 500);
        check_merge(SortBy::new(|x: &i64| *x), &xs, vec![-2, 0, 3, 4, 9]);
        check_merge(TopK::new(2, |x: &i64| *x), &xs, vec![9, 4]);
        let pairs = [(1, 'a'), (3, 'b'), (3, 'c'), (2, 'd')];
        check_merge(
            TopK::new(2, |p: &(i32, char)| p.0),
            &pairs,
            vec![(3, 'b'), (3, 'c')],
        );
    }
}
