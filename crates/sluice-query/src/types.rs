//! The types of SCSQL expressions, as the checker ([`crate::check`]) computes them and the
//! built-in table ([`crate::functions`]) states its signatures with.
//!
//! A declaration names a type (`integer n`, `bag of sp a`, `stream s`); [`Type::from`] turns
//! the syntax tree's [`TypeKind`] into one. Beyond what a declaration can write there are the
//! types built-ins give: `number` (an integer or a real: what `sum` of unknown elements
//! gives), `complex array` (what `fft` gives), `byte array` (what `gen_array` gives) and
//! `boolean` (a condition).
//!
//! # Assignability
//! [`Type::accepts`] says whether a value of one type may stand where another is expected:
//! - `object` is expected: anything goes.
//! - `object` is found: anything but a stream goes, checked when the query runs. This is
//!   what makes `sum(merge(b))` check: a stream process handle (`sp`) does not say what its
//!   stream carries, so `extract(p)` and `merge(ps)` are streams of `object`.
//! - numbers widen: an `integer` goes where a `real` or a `number` is expected, a `number`
//!   where a `real` is;
//! - `array` means a numeric one-dimensional array, real or complex: a `complex array` goes
//!   where an `array` is expected (`odd(fft(x))`), not the other way round;
//! - a `bag of T` goes where a `stream of T` is expected (a bag is a finite stream:
//!   `count(select ...)`); `stream of T` and `bag of T` accept what `T` accepts, element by
//!   element.

use std::fmt;

use crate::ast::TypeKind;
use crate::value::Value;

/// The type of an SCSQL expression.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Type {
    /// A 64-bit integer.
    Integer,
    /// A 64-bit float.
    Real,
    /// An integer or a real.
    Number,
    /// A string.
    String,
    /// The value of a condition (`i > 2`).
    Boolean,
    /// A one-dimensional numeric array: real (as `receiver` gives) or, where expected, complex.
    Array,
    /// A one-dimensional array of complex numbers (what `fft` gives).
    Complex,
    /// An array of bytes (what `gen_array` gives).
    Bytes,
    /// Any value.
    Object,
    /// A handle to a stream process.
    Sp,
    /// A (possibly infinite) sequence of elements of the inner type.
    Stream(Box<Type>),
    /// A finite collection of elements of the inner type.
    Bag(Box<Type>),
}

impl Type {
    /// `stream of inner`.
    pub fn stream_of(inner: Type) -> Type {
        Type::Stream(Box::new(inner))
    }

    /// `bag of inner`.
    pub fn bag_of(inner: Type) -> Type {
        Type::Bag(Box::new(inner))
    }

    /// Whether a value of type `found` may stand where `self` is expected (see the module
    /// doc for the rule).
    pub fn accepts(&self, found: &Type) -> bool {
        match (self, found) {
            (Type::Object, _) => true,
            (_, Type::Object) => !matches!(self, Type::Stream(_)),
            (Type::Real, Type::Integer | Type::Number) => true,
            (Type::Number, Type::Integer | Type::Real) => true,
            (Type::Array, Type::Complex) => true,
            (Type::Stream(want), Type::Stream(got) | Type::Bag(got)) => want.accepts(got),
            (Type::Bag(want), Type::Bag(got)) => want.accepts(got),
            _ => self == found,
        }
    }

    /// Whether it is a stream.
    pub fn is_stream(&self) -> bool {
        matches!(self, Type::Stream(_))
    }

    /// Whether it is a number (`integer`, `real` or `number`).
    pub fn is_number(&self) -> bool {
        matches!(self, Type::Integer | Type::Real | Type::Number)
    }

    /// The type of the elements of a stream or bag; `None` for any other type.
    pub fn element(&self) -> Option<&Type> {
        match self {
            Type::Stream(inner) | Type::Bag(inner) => Some(inner),
            _ => None,
        }
    }

    /// The narrowest type that both `self` and `other` go into: the type of a set
    /// `{a, b}` of both (`integer` and `real` give `real`; unrelated types give `object`).
    pub fn join(&self, other: &Type) -> Type {
        if self.accepts(other) && !matches!(other, Type::Object) {
            self.clone()
        } else if other.accepts(self) && !matches!(self, Type::Object) {
            other.clone()
        } else if self.is_number() && other.is_number() {
            Type::Number
        } else {
            match (self, other) {
                (Type::Stream(a), Type::Stream(b)) => Type::stream_of(a.join(b)),
                (Type::Bag(a), Type::Bag(b)) => Type::bag_of(a.join(b)),
                _ => Type::Object,
            }
        }
    }

    /// The type of a value (a bag's elements typed by their join; an empty bag is a
    /// `bag of object`).
    pub fn of(value: &Value) -> Type {
        match value {
            Value::Integer(_) => Type::Integer,
            Value::Real(_) => Type::Real,
            Value::String(_) => Type::String,
            Value::Array(_) => Type::Array,
            Value::Complex(_) => Type::Complex,
            Value::Bytes(_) => Type::Bytes,
            Value::Sp(_) => Type::Sp,
            Value::Bag(elements) => {
                let mut types = elements.iter().map(Type::of);
                let first = types.next().unwrap_or(Type::Object);
                Type::bag_of(types.fold(first, |joined, next| joined.join(&next)))
            }
        }
    }
}

impl From<&TypeKind> for Type {
    fn from(kind: &TypeKind) -> Self {
        match kind {
            TypeKind::Integer => Type::Integer,
            TypeKind::Real => Type::Real,
            TypeKind::String => Type::String,
            TypeKind::Sp => Type::Sp,
            TypeKind::Stream => Type::stream_of(Type::Object),
            TypeKind::Array => Type::Array,
            TypeKind::Object => Type::Object,
            TypeKind::BagOf(inner) => Type::bag_of(Type::from(inner.as_ref())),
        }
    }
}

impl fmt::Display for Type {
    /// As a declaration writes it: `integer`, `bag of sp`, `stream of integer`; a stream or
    /// bag of `object` is just `stream` or `bag`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (collection, inner) = match self {
            Type::Integer => return f.write_str("integer"),
            Type::Real => return f.write_str("real"),
            Type::Number => return f.write_str("number"),
            Type::String => return f.write_str("string"),
            Type::Boolean => return f.write_str("boolean"),
            Type::Array => return f.write_str("array"),
            Type::Complex => return f.write_str("complex array"),
            Type::Bytes => return f.write_str("byte array"),
            Type::Object => return f.write_str("object"),
            Type::Sp => return f.write_str("sp"),
            Type::Stream(inner) => ("stream", inner),
            Type::Bag(inner) => ("bag", inner),
        };
        if **inner == Type::Object {
            f.write_str(collection)
        } else {
            write!(f, "{collection} of {inner}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_display_as_declarations_write_them() {
        assert_eq!(Type::bag_of(Type::Sp).to_string(), "bag of sp");
        assert_eq!(
            Type::stream_of(Type::Integer).to_string(),
            "stream of integer"
        );
        assert_eq!(Type::stream_of(Type::Object).to_string(), "stream");
        assert_eq!(
            Type::bag_of(Type::stream_of(Type::Bytes)).to_string(),
            "bag of stream of byte array"
        );
    }

    #[test]
    fn declared_types_convert() {
        let kind = TypeKind::BagOf(Box::new(TypeKind::Sp));
        assert_eq!(Type::from(&kind), Type::bag_of(Type::Sp));
        assert_eq!(Type::from(&TypeKind::Stream), Type::stream_of(Type::Object));
    }

    #[test]
    fn assignability_widens_numbers_and_trusts_objects_but_not_the_other_way() {
        assert!(Type::Real.accepts(&Type::Integer));
        assert!(!Type::Integer.accepts(&Type::Real));
        assert!(Type::Number.accepts(&Type::Real));
        assert!(Type::Sp.accepts(&Type::Object));
        assert!(!Type::Sp.accepts(&Type::Integer));
        assert!(!Type::stream_of(Type::Object).accepts(&Type::Object));
        assert!(Type::stream_of(Type::Number).accepts(&Type::bag_of(Type::Integer)));
        assert!(!Type::bag_of(Type::Integer).accepts(&Type::stream_of(Type::Integer)));
        assert!(Type::Array.accepts(&Type::Complex));
        assert!(!Type::Complex.accepts(&Type::Array));
    }

    #[test]
    fn joins_find_the_common_type() {
        assert_eq!(Type::Integer.join(&Type::Real), Type::Real);
        assert_eq!(Type::Sp.join(&Type::Sp), Type::Sp);
        assert_eq!(Type::Sp.join(&Type::Integer), Type::Object);
        assert_eq!(Type::Object.join(&Type::Sp), Type::Object);
        let bag = Value::Bag(vec![Value::Integer(1), Value::Real(2.0)]);
        assert_eq!(Type::of(&bag), Type::bag_of(Type::Real));
    }
}
