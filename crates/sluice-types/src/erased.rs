//! Type-erased views of tuples and batches, as the runtime hands them to operators.
//!
//! The engine routes tuples between operators chosen at run time, so inside it a tuple is a
//! `&dyn Any` and an operator asks for its concrete type with [`TupleRef::get`] (one type-id
//! comparison). The graph has already checked that connected ports carry the same type, so a
//! failed `get` means an operator asked for a type its port does not declare.

use std::any::Any;

use crate::Tuple;

/// One tuple, borrowed.
#[derive(Clone, Copy)]
pub struct TupleRef<'a> {
    value: &'a dyn Any,
}

impl<'a> TupleRef<'a> {
    /// Borrows `value` as a tuple.
    pub fn new<T: Tuple>(value: &'a T) -> Self {
        Self { value }
    }

    /// The tuple as `T`, or `None` if it is of another type.
    #[inline]
    pub fn get<T: Tuple>(&self) -> Option<&'a T> {
        self.value.downcast_ref()
    }
}

/// Something that holds tuples of one type in order; implemented for slices and vectors of
/// tuples.
pub trait ErasedItems {
    /// How many tuples.
    fn len(&self) -> usize;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The tuple at `index`.
    fn item(&self, index: usize) -> Option<TupleRef<'_>>;
}

/// A slice of tuples, as an [`ErasedItems`].
pub struct TupleSlice<'a, T>(pub &'a [T]);

impl<T: Tuple> ErasedItems for TupleSlice<'_, T> {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn item(&self, index: usize) -> Option<TupleRef<'_>> {
        self.0.get(index).map(TupleRef::new)
    }
}

impl<T: Tuple> ErasedItems for Vec<T> {
    fn len(&self) -> usize {
        self.as_slice().len()
    }
    fn item(&self, index: usize) -> Option<TupleRef<'_>> {
        self.get(index).map(TupleRef::new)
    }
}

/// A batch of tuples of one type, borrowed.
#[derive(Clone, Copy)]
pub struct BatchRef<'a> {
    items: &'a dyn ErasedItems,
    /// The same items as a `Vec<T>`, when they are one, for [`BatchRef::as_slice`].
    vec: Option<&'a dyn Any>,
}

impl<'a> BatchRef<'a> {
    /// Borrows `items` as a batch.
    pub fn new(items: &'a dyn ErasedItems) -> Self {
        Self { items, vec: None }
    }

    /// Borrows a vector of tuples as a batch that can also be read as a slice.
    pub fn from_vec<T: Tuple>(items: &'a Vec<T>) -> Self {
        Self {
            items,
            vec: Some(items),
        }
    }

    /// The tuples as a slice of `T`, when the batch is held contiguously (batches emitted by
    /// a fused upstream are); `None` otherwise, or for another type: use
    /// [`BatchRef::iter_as`] then.
    #[inline]
    pub fn as_slice<T: Tuple>(&self) -> Option<&'a [T]> {
        self.vec?.downcast_ref::<Vec<T>>().map(Vec::as_slice)
    }

    /// How many tuples are in the batch.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.items.len() == 0
    }

    /// The tuples, type-erased, in order.
    pub fn iter(&self) -> impl Iterator<Item = TupleRef<'a>> + 'a {
        let items = self.items;
        (0..items.len()).filter_map(move |i| items.item(i))
    }

    /// The tuples as `T`, in order; a tuple of another type ends the iteration early, so
    /// compare the count with [`BatchRef::len`] where that matters.
    pub fn iter_as<T: Tuple>(&self) -> impl Iterator<Item = &'a T> + 'a {
        let items = self.items;
        (0..items.len()).map_while(move |i| items.item(i).and_then(|t| t.get::<T>()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_downcast_to_their_own_type_only() {
        let x = 5u64;
        let t = TupleRef::new(&x);
        assert_eq!(t.get::<u64>(), Some(&5));
        assert!(t.get::<u32>().is_none());
    }

    #[test]
    fn batches_iterate_slices_and_data_runs() {
        let v = vec![1u32, 2, 3];
        let slice = TupleSlice(&v);
        let b = BatchRef::new(&slice);
        assert_eq!(b.len(), 3);
        assert_eq!(b.iter_as::<u32>().copied().collect::<Vec<_>>(), v);
        assert_eq!(b.iter().filter_map(|t| t.get::<u32>()).sum::<u32>(), 6);
        assert!(b.as_slice::<u32>().is_none());
        let b = BatchRef::from_vec(&v);
        assert_eq!(b.as_slice::<u32>(), Some(&v[..]));
        assert!(b.as_slice::<u64>().is_none());
    }
}
