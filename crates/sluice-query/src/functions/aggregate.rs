//! The aggregates `count`, `sum`, `avg`, `min` and `max`: over a stream, a stage that emits
//! its one result when the stream ends (`count(extract(a))` in a stream process counts the
//! arrays `a` sends); over a bag, the same run over the bag's elements
//! ([`super::apply_to_bag`]). The windows of [`super::window`] use the same [`Accumulator`].
//!
//! Results: `count` is an integer (0 for an empty stream); `sum` is an integer while every
//! element is one (an overflow is an error) and a real once one is real, 0 for an empty
//! stream; `avg` is a real; `min` and `max` keep the type of the element they pick. `avg`,
//! `min` and `max` of an empty stream emit nothing (and are an error for an empty bag).
//! Every aggregate but `count` refuses an element that is not a number.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use super::eval_error;
use crate::stage::{decode_state, encode_state, Emit, EvalError, Stage};
use crate::value::Value;

/// Which aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Aggregate {
    /// The number of elements.
    Count,
    /// Their sum.
    Sum,
    /// Their mean.
    Avg,
    /// The least.
    Min,
    /// The greatest.
    Max,
}

impl Aggregate {
    /// Every aggregate, in the order of the docs.
    pub const ALL: [Aggregate; 5] = [
        Aggregate::Count,
        Aggregate::Sum,
        Aggregate::Avg,
        Aggregate::Min,
        Aggregate::Max,
    ];

    /// Its name in a query.
    pub fn name(self) -> &'static str {
        match self {
            Aggregate::Count => "count",
            Aggregate::Sum => "sum",
            Aggregate::Avg => "avg",
            Aggregate::Min => "min",
            Aggregate::Max => "max",
        }
    }

    /// The aggregate of that name, ignoring case.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|aggregate| aggregate.name().eq_ignore_ascii_case(name))
    }
}

/// A running sum: exact while every element is an integer.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
enum Sum {
    Integer(i64),
    Real(f64),
}

/// An aggregate's state, fed one element at a time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Accumulator {
    aggregate: Aggregate,
    count: i64,
    sum: Sum,
    best: Option<Value>,
}

impl Accumulator {
    /// Nothing seen yet.
    pub fn new(aggregate: Aggregate) -> Self {
        Self {
            aggregate,
            count: 0,
            sum: Sum::Integer(0),
            best: None,
        }
    }

    fn error(&self, message: String) -> EvalError {
        eval_error(self.aggregate.name(), message)
    }

    /// One more element.
    pub fn add(&mut self, value: &Value) -> Result<(), EvalError> {
        self.count += 1;
        if self.aggregate == Aggregate::Count {
            return Ok(());
        }
        let number = match value {
            Value::Integer(i) => *i as f64,
            Value::Real(x) => *x,
            other => {
                return Err(self.error(format!("expects numbers, found {}", other.type_name())))
            }
        };
        match self.aggregate {
            Aggregate::Count => {}
            Aggregate::Sum | Aggregate::Avg => {
                self.sum = match (self.sum, value) {
                    (Sum::Integer(sum), Value::Integer(i)) => match sum.checked_add(*i) {
                        Some(sum) => Sum::Integer(sum),
                        None => return Err(self.error("the integer sum overflows".into())),
                    },
                    (Sum::Integer(sum), _) => Sum::Real(sum as f64 + number),
                    (Sum::Real(sum), _) => Sum::Real(sum + number),
                };
            }
            Aggregate::Min | Aggregate::Max => {
                let wanted = if self.aggregate == Aggregate::Min {
                    Ordering::Less
                } else {
                    Ordering::Greater
                };
                let better = match &self.best {
                    None => true,
                    Some(best) => compare_numbers(value, best) == Some(wanted),
                };
                if better {
                    self.best = Some(value.clone());
                }
            }
        }
        Ok(())
    }

    /// The aggregate of what was added; `None` for `avg`, `min` and `max` of nothing.
    pub fn result(&self) -> Option<Value> {
        match self.aggregate {
            Aggregate::Count => Some(Value::Integer(self.count)),
            Aggregate::Sum => Some(match self.sum {
                Sum::Integer(sum) => Value::Integer(sum),
                Sum::Real(sum) => Value::Real(sum),
            }),
            Aggregate::Avg if self.count == 0 => None,
            Aggregate::Avg => Some(Value::Real(match self.sum {
                Sum::Integer(sum) => sum as f64 / self.count as f64,
                Sum::Real(sum) => sum / self.count as f64,
            })),
            Aggregate::Min | Aggregate::Max => self.best.clone(),
        }
    }
}

/// The order of two numbers (integers exactly, otherwise as reals); `None` for a NaN or a
/// value that is not a number.
pub fn compare_numbers(left: &Value, right: &Value) -> Option<Ordering> {
    match (left, right) {
        (Value::Integer(a), Value::Integer(b)) => Some(a.cmp(b)),
        (Value::Integer(a), Value::Real(b)) => (*a as f64).partial_cmp(b),
        (Value::Real(a), Value::Integer(b)) => a.partial_cmp(&(*b as f64)),
        (Value::Real(a), Value::Real(b)) => a.partial_cmp(b),
        _ => None,
    }
}

/// An aggregate over a whole stream: emits once, when the stream ends.
struct AggregateStage(Accumulator);

impl Stage for AggregateStage {
    fn element(
        &mut self,
        _from: usize,
        value: Value,
        _out: &mut Emit<'_>,
    ) -> Result<(), EvalError> {
        self.0.add(&value)
    }

    fn end(&mut self, out: &mut Emit<'_>) -> Result<(), EvalError> {
        match self.0.result() {
            Some(result) => out(result),
            None => Ok(()),
        }
    }

    fn state(&self) -> Result<Vec<u8>, EvalError> {
        encode_state(self.0.aggregate.name(), &self.0)
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), EvalError> {
        self.0 = decode_state(self.0.aggregate.name(), state)?;
        Ok(())
    }
}

/// The stage of `aggregate` over a whole stream.
pub(super) fn stage(aggregate: Aggregate) -> Result<Box<dyn Stage>, EvalError> {
    Ok(Box::new(AggregateStage(Accumulator::new(aggregate))))
}

/// `count(s)`.
pub fn count_stage(_: &[Value]) -> Result<Box<dyn Stage>, EvalError> {
    stage(Aggregate::Count)
}

/// `sum(s)`.
pub fn sum_stage(_: &[Value]) -> Result<Box<dyn Stage>, EvalError> {
    stage(Aggregate::Sum)
}

/// `avg(s)`.
pub fn avg_stage(_: &[Value]) -> Result<Box<dyn Stage>, EvalError> {
    stage(Aggregate::Avg)
}

/// `min(s)`.
pub fn min_stage(_: &[Value]) -> Result<Box<dyn Stage>, EvalError> {
    stage(Aggregate::Min)
}

/// `max(s)`.
pub fn max_stage(_: &[Value]) -> Result<Box<dyn Stage>, EvalError> {
    stage(Aggregate::Max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::functions::{apply_to_bag, lookup};

    fn over(name: &str, values: Vec<Value>) -> Result<Value, EvalError> {
        apply_to_bag(lookup(name).unwrap(), &[Value::Bag(values)])
    }

    fn integers(values: &[i64]) -> Vec<Value> {
        values.iter().copied().map(Value::Integer).collect()
    }

    #[test]
    fn aggregates_of_integers_stay_integers_except_avg() {
        let values = integers(&[3, -1, 7, 2]);
        assert_eq!(over("count", values.clone()), Ok(Value::Integer(4)));
        assert_eq!(over("sum", values.clone()), Ok(Value::Integer(11)));
        assert_eq!(over("avg", values.clone()), Ok(Value::Real(2.75)));
        assert_eq!(over("min", values.clone()), Ok(Value::Integer(-1)));
        assert_eq!(over("max", values), Ok(Value::Integer(7)));
    }

    #[test]
    fn a_real_makes_the_sum_real_and_min_keeps_the_type_it_picks() {
        let values = vec![Value::Integer(1), Value::Real(0.5), Value::Integer(2)];
        assert_eq!(over("sum", values.clone()), Ok(Value::Real(3.5)));
        assert_eq!(over("min", values.clone()), Ok(Value::Real(0.5)));
        assert_eq!(over("max", values), Ok(Value::Integer(2)));
    }

    #[test]
    fn empty_streams_count_zero_and_have_no_mean() {
        assert_eq!(over("count", vec![]), Ok(Value::Integer(0)));
        assert_eq!(over("sum", vec![]), Ok(Value::Integer(0)));
        let mut stage = avg_stage(&[]).unwrap();
        let mut emitted = Vec::new();
        stage
            .end(&mut |v| {
                emitted.push(v);
                Ok(())
            })
            .unwrap();
        assert!(emitted.is_empty());
    }

    #[test]
    fn count_takes_anything_and_the_others_only_numbers() {
        let arrays = vec![Value::Bytes(vec![1, 2]), Value::String("x".into())];
        assert_eq!(over("count", arrays.clone()), Ok(Value::Integer(2)));
        let error = over("sum", arrays).unwrap_err();
        assert_eq!(error.to_string(), "sum: expects numbers, found byte array");
        let overflow = over("sum", integers(&[i64::MAX, 1])).unwrap_err();
        assert!(overflow.message.contains("overflows"), "{overflow}");
    }
}
