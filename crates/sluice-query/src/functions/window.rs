//! Count windows over a stream, as CQL's `[ROWS size SLIDE slide]`:
//! - `window(s, size, slide)`: a stream of bags, each `size` consecutive elements of `s`;
//! - `winagg(s, size, slide, aggregate)`: the aggregate (`'count'`, `'sum'`, `'avg'`, `'min'`
//!   or `'max'`, as the functions of those names) of each such window.
//!
//! Window `k` (from 0) holds the elements at positions `k * slide .. k * slide + size` of the
//! stream, and is emitted when its last element arrives: `slide = size` makes tumbling
//! windows, `slide < size` sliding (overlapping) ones, `slide > size` hopping ones that skip
//! the elements between them. A window that the end of the stream leaves incomplete is not
//! emitted. A window keeps its `size` elements in memory until it is emitted, so the size is
//! at most [`MAX_WINDOW_ELEMENTS`].

use std::collections::VecDeque;

use super::aggregate::{Accumulator, Aggregate};
use super::{eval_error, integer_argument, string_argument};
use crate::stage::{decode_state, encode_state, Emit, EvalError, Stage};
use crate::value::Value;

/// The most elements a window holds: 2^20, as the elements a condition ranges over.
pub const MAX_WINDOW_ELEMENTS: usize = 1 << 20;

/// What a window stage emits for each window.
enum Output {
    /// The window's elements, as a bag.
    Bag,
    /// An aggregate of them.
    Aggregate(Aggregate),
}

/// The stage of `window` and `winagg`.
struct CountWindow {
    size: usize,
    slide: usize,
    output: Output,
    /// How many elements of the stream arrived so far.
    seen: usize,
    /// The position in the stream of the first element of the next window.
    next_start: usize,
    /// The next window's elements so far.
    elements: VecDeque<Value>,
}

impl Stage for CountWindow {
    fn element(&mut self, _from: usize, value: Value, out: &mut Emit<'_>) -> Result<(), EvalError> {
        let position = self.seen;
        self.seen += 1;
        if position < self.next_start {
            return Ok(());
        }
        self.elements.push_back(value);
        if self.elements.len() < self.size {
            return Ok(());
        }
        let result = match self.output {
            Output::Bag => Value::Bag(self.elements.iter().cloned().collect()),
            Output::Aggregate(aggregate) => {
                let mut accumulator = Accumulator::new(aggregate);
                for element in &self.elements {
                    accumulator.add(element)?;
                }
                accumulator
                    .result()
                    .expect("a window is never empty, so every aggregate has a result")
            }
        };
        self.next_start += self.slide;
        self.elements.drain(..self.slide.min(self.size));
        out(result)
    }

    fn end(&mut self, _out: &mut Emit<'_>) -> Result<(), EvalError> {
        Ok(())
    }

    /// Where the stream is and the next window's elements so far.
    fn state(&self) -> Result<Vec<u8>, EvalError> {
        encode_state("window", &(self.seen, self.next_start, &self.elements))
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), EvalError> {
        (self.seen, self.next_start, self.elements) = decode_state("window", state)?;
        Ok(())
    }
}

/// The window's size and slide from the constants `[size, slide, ...]`: both at least 1.
fn size_and_slide(function: &str, constants: &[Value]) -> Result<(usize, usize), EvalError> {
    // The constants follow the stream: the size is argument 2 of the call.
    let positive = |index: usize, name: &str| {
        let n = integer_argument(function, constants.get(index), index + 2)?;
        match usize::try_from(n) {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(eval_error(
                function,
                format!("the {name} must be at least 1, not {n}"),
            )),
        }
    };
    let size = positive(0, "window size")?;
    if size > MAX_WINDOW_ELEMENTS {
        return Err(eval_error(
            function,
            format!(
                "a window of {size} elements, over the limit of {MAX_WINDOW_ELEMENTS} (a window \
                 is kept in memory)"
            ),
        ));
    }
    Ok((size, positive(1, "slide")?))
}

fn count_window(size: usize, slide: usize, output: Output) -> Box<dyn Stage> {
    Box::new(CountWindow {
        size,
        slide,
        output,
        seen: 0,
        next_start: 0,
        elements: VecDeque::with_capacity(size.min(1 << 16)),
    })
}

/// `window(s, size, slide)`: the constants are `[size, slide]`.
pub fn window_stage(constants: &[Value]) -> Result<Box<dyn Stage>, EvalError> {
    let (size, slide) = size_and_slide("window", constants)?;
    Ok(count_window(size, slide, Output::Bag))
}

/// `winagg(s, size, slide, aggregate)`: the constants are `[size, slide, aggregate]`.
pub fn winagg_stage(constants: &[Value]) -> Result<Box<dyn Stage>, EvalError> {
    let (size, slide) = size_and_slide("winagg", constants)?;
    let name = string_argument("winagg", constants.get(2), 4)?;
    let aggregate = Aggregate::named(name).ok_or_else(|| {
        eval_error(
            "winagg",
            format!("unknown aggregate '{name}': use 'count', 'sum', 'avg', 'min' or 'max'"),
        )
    })?;
    Ok(count_window(size, slide, Output::Aggregate(aggregate)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(mut stage: Box<dyn Stage>, values: &[i64]) -> Vec<Value> {
        let mut emitted = Vec::new();
        let mut out = |value| {
            emitted.push(value);
            Ok(())
        };
        for value in values {
            stage.element(0, Value::Integer(*value), &mut out).unwrap();
        }
        stage.end(&mut out).unwrap();
        emitted
    }

    /// What `make`'s stage emits for `values` when it is checkpointed after the first `cut`
    /// of them and a new one, given that state, takes the rest.
    fn run_resumed(make: impl Fn() -> Box<dyn Stage>, values: &[i64], cut: usize) -> Vec<Value> {
        let mut emitted = Vec::new();
        let mut out = |value| {
            emitted.push(value);
            Ok(())
        };
        let (before, after) = values.split_at(cut.min(values.len()));
        let mut first = make();
        for value in before {
            first.element(0, Value::Integer(*value), &mut out).unwrap();
        }
        let state = first.state().unwrap();
        let mut resumed = make();
        resumed.restore(&state).unwrap();
        for value in after {
            resumed
                .element(0, Value::Integer(*value), &mut out)
                .unwrap();
        }
        resumed.end(&mut out).unwrap();
        emitted
    }

    /// The windows by their definition: window k is positions k*slide .. k*slide+size.
    fn direct_windows(values: &[i64], size: usize, slide: usize) -> Vec<&[i64]> {
        (0..)
            .map(|k| k * slide)
            .take_while(|start| start + size <= values.len())
            .map(|start| &values[start..start + size])
            .collect()
    }

    #[test]
    fn tumbling_sliding_and_hopping_windows() {
        let values: Vec<i64> = (1..=7).collect();
        let sums = |size, slide| {
            let constants = [
                Value::Integer(size),
                Value::Integer(slide),
                Value::String("sum".into()),
            ];
            run(winagg_stage(&constants).unwrap(), &values)
        };
        let integers = |v: &[i64]| v.iter().copied().map(Value::Integer).collect::<Vec<_>>();
        assert_eq!(sums(3, 3), integers(&[6, 15]));
        assert_eq!(sums(3, 1), integers(&[6, 9, 12, 15, 18]));
        assert_eq!(sums(2, 3), integers(&[3, 9]));
    }

    #[test]
    fn bad_sizes_and_aggregates_are_refused() {
        let refused = |constants: &[Value]| winagg_stage(constants).err().unwrap().to_string();
        assert_eq!(
            refused(&[
                Value::Integer(0),
                Value::Integer(1),
                Value::String("sum".into())
            ]),
            "winagg: the window size must be at least 1, not 0"
        );
        assert!(refused(&[
            Value::Integer(2),
            Value::Integer(1),
            Value::String("median".into())
        ])
        .contains("unknown aggregate 'median'"));
        let huge = window_stage(&[Value::Integer(1 << 62), Value::Integer(1)]);
        assert_eq!(
            huge.err().unwrap().to_string(),
            "window: a window of 4611686018427387904 elements, over the limit of 1048576 (a \
             window is kept in memory)"
        );
    }

    proptest! {
        #[test]
        fn a_stage_resumed_from_its_state_emits_what_an_uninterrupted_one_does(
            values in prop::collection::vec(-1000i64..1000, 0..60),
            size in 1usize..8,
            slide in 1usize..10,
            cut in 0usize..60,
        ) {
            let constants = [Value::Integer(size as i64), Value::Integer(slide as i64)];
            let window = || window_stage(&constants).unwrap();
            prop_assert_eq!(run_resumed(window, &values, cut), run(window(), &values));
            for aggregate in Aggregate::ALL {
                let mut constants = constants.to_vec();
                constants.push(Value::String(aggregate.name().into()));
                let winagg = || winagg_stage(&constants).unwrap();
                prop_assert_eq!(run_resumed(winagg, &values, cut), run(winagg(), &values));
                let whole = || super::super::aggregate::stage(aggregate).unwrap();
                prop_assert_eq!(run_resumed(whole, &values, cut), run(whole(), &values));
            }
        }

        #[test]
        fn windows_and_their_aggregates_match_a_direct_computation(
            values in prop::collection::vec(-1000i64..1000, 0..60),
            size in 1usize..8,
            slide in 1usize..10,
        ) {
            let expected = direct_windows(&values, size, slide);
            let constants = [Value::Integer(size as i64), Value::Integer(slide as i64)];
            let bags = run(window_stage(&constants).unwrap(), &values);
            let expected_bags: Vec<Value> = expected
                .iter()
                .map(|w| Value::Bag(w.iter().copied().map(Value::Integer).collect()))
                .collect();
            prop_assert_eq!(bags, expected_bags);
            for aggregate in Aggregate::ALL {
                let mut constants = constants.to_vec();
                constants.push(Value::String(aggregate.name().into()));
                let results = run(winagg_stage(&constants).unwrap(), &values);
                let direct: Vec<Value> = expected
                    .iter()
                    .map(|w| match aggregate {
                        Aggregate::Count => Value::Integer(w.len() as i64),
                        Aggregate::Sum => Value::Integer(w.iter().sum()),
                        Aggregate::Avg => {
                            Value::Real(w.iter().sum::<i64>() as f64 / w.len() as f64)
                        }
                        Aggregate::Min => Value::Integer(*w.iter().min().unwrap()),
                        Aggregate::Max => Value::Integer(*w.iter().max().unwrap()),
                    })
                    .collect();
                prop_assert_eq!(results, direct);
            }
        }
    }
}
