//! The signal functions of the paper's radix-2 FFT query:
//! ```text
//! create function radix2(string s) -> stream
//! as select radixcombine(merge({a,b}))
//! from sp a, sp b, sp c
//! where a=sp(fft(odd(extract(c)))) and b=sp(fft(even(extract(c)))) and c=sp(receiver(s));
//! ```
//! - `odd(x)` and `even(x)`: the elements of the array `x` at odd and even positions,
//!   counting from 0 (`even` = `x[0], x[2], ...`, `odd` = `x[1], x[3], ...`); real arrays
//!   stay real, complex ones complex.
//! - `fft(x)`: the discrete Fourier transform `X[k] = sum_j x[j] e^(-2 pi i jk/n)` of a real
//!   or complex array of any length (with `rustfft`, unnormalised), a complex array.
//! - `radixcombine(s)`: the last step of a radix-2 FFT. Its input is a `merge` of two
//!   producers: producer 0 (the first of the set) sends the FFTs `O` of the odd elements of
//!   each array, producer 1 the FFTs `E` of the even ones. It pairs their i-th arrays and
//!   emits `X[k] = E[k] + W^k O[k]`, `X[k + N/2] = E[k] - W^k O[k]` with `W = e^(-2 pi i/N)`,
//!   the FFT of the whole array of length `N`. Arrays of a pair must be of one length (so
//!   `N` is even); a producer that ends with arrays its partner never matched is an error.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::f64::consts::PI;

use rustfft::num_complex::Complex64;
use rustfft::FftPlanner;

use super::eval_error;
use crate::stage::{decode_state, encode_state, Emit, EvalError, Stage};
use crate::value::Value;

/// The array argument of a function of one array.
enum ArrayArgument<'a> {
    Real(&'a [f64]),
    Complex(&'a [(f64, f64)]),
}

/// The one argument of a function of an array.
fn array_argument<'a>(function: &str, args: &'a [Value]) -> Result<ArrayArgument<'a>, EvalError> {
    match args {
        [Value::Array(x)] => Ok(ArrayArgument::Real(x)),
        [Value::Complex(x)] => Ok(ArrayArgument::Complex(x)),
        [other] => Err(eval_error(
            function,
            format!("expects an array, found {}", other.type_name()),
        )),
        _ => Err(eval_error(
            function,
            format!("expects 1 argument, found {}", args.len()),
        )),
    }
}

/// Every other element of an array, from `first`.
fn every_other(function: &str, args: &[Value], first: usize) -> Result<Value, EvalError> {
    Ok(match array_argument(function, args)? {
        ArrayArgument::Real(x) => Value::Array(x.iter().skip(first).step_by(2).copied().collect()),
        ArrayArgument::Complex(x) => {
            Value::Complex(x.iter().skip(first).step_by(2).copied().collect())
        }
    })
}

/// `odd(x)`: `x[1], x[3], ...`.
pub fn odd(args: &[Value]) -> Result<Value, EvalError> {
    every_other("odd", args, 1)
}

/// `even(x)`: `x[0], x[2], ...`.
pub fn even(args: &[Value]) -> Result<Value, EvalError> {
    every_other("even", args, 0)
}

/// A real or complex array as complex numbers.
fn to_complex(function: &str, value: &Value) -> Result<Vec<Complex64>, EvalError> {
    Ok(
        match array_argument(function, std::slice::from_ref(value))? {
            ArrayArgument::Real(x) => x.iter().map(|&re| Complex64::new(re, 0.0)).collect(),
            ArrayArgument::Complex(x) => x.iter().map(|&(re, im)| Complex64::new(re, im)).collect(),
        },
    )
}

fn from_complex(x: Vec<Complex64>) -> Value {
    Value::Complex(x.into_iter().map(|c| (c.re, c.im)).collect())
}

thread_local! {
    /// The planner keeps the FFT plan of each length it was asked for, so a stream of
    /// arrays of one length plans once per thread.
    static PLANNER: RefCell<FftPlanner<f64>> = RefCell::new(FftPlanner::new());
}

/// `fft(x)`.
pub fn fft(args: &[Value]) -> Result<Value, EvalError> {
    let [x] = args else {
        return Err(eval_error(
            "fft",
            format!("expects 1 argument, found {}", args.len()),
        ));
    };
    let mut buffer = to_complex("fft", x)?;
    if !buffer.is_empty() {
        let plan = PLANNER.with(|planner| planner.borrow_mut().plan_fft_forward(buffer.len()));
        plan.process(&mut buffer);
    }
    Ok(from_complex(buffer))
}

/// The full FFT from the FFTs of the odd and even elements (see the module doc).
fn combine(odd: &[Complex64], even: &[Complex64]) -> Vec<Complex64> {
    let half = even.len();
    let n = 2 * half;
    let mut x = vec![Complex64::new(0.0, 0.0); n];
    for k in 0..half {
        let twiddle = Complex64::from_polar(1.0, -2.0 * PI * k as f64 / n as f64);
        let t = twiddle * odd[k];
        x[k] = even[k] + t;
        x[k + half] = even[k] - t;
    }
    x
}

/// The stage of `radixcombine`: the arrays of each producer that wait for their partner.
#[derive(Default)]
struct RadixCombine {
    waiting: [VecDeque<Vec<Complex64>>; 2],
}

impl Stage for RadixCombine {
    fn element(&mut self, from: usize, value: Value, out: &mut Emit<'_>) -> Result<(), EvalError> {
        let Some(queue) = self.waiting.get_mut(from) else {
            return Err(eval_error(
                "radixcombine",
                format!(
                    "expects the merge of two streams (odd FFTs first, even second), \
                     got an element from producer {from}"
                ),
            ));
        };
        queue.push_back(to_complex("radixcombine", &value)?);
        let [odds, evens] = &mut self.waiting;
        while let (Some(odd), Some(even)) = (odds.front(), evens.front()) {
            if odd.len() != even.len() {
                return Err(eval_error(
                    "radixcombine",
                    format!(
                        "the FFTs of the odd and even elements differ in length ({} and {})",
                        odd.len(),
                        even.len()
                    ),
                ));
            }
            let whole = combine(odd, even);
            odds.pop_front();
            evens.pop_front();
            out(from_complex(whole))?;
        }
        Ok(())
    }

    /// The arrays that wait for their partner, as (re, im) pairs.
    fn state(&self) -> Result<Vec<u8>, EvalError> {
        let waiting = self.waiting.each_ref().map(|queue| {
            queue
                .iter()
                .map(|x| x.iter().map(|c| (c.re, c.im)).collect())
                .collect::<Vec<Vec<(f64, f64)>>>()
        });
        encode_state("radixcombine", &waiting)
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), EvalError> {
        let waiting: [Vec<Vec<(f64, f64)>>; 2] = decode_state("radixcombine", state)?;
        self.waiting = waiting.map(|queue| {
            queue
                .into_iter()
                .map(|x| {
                    x.into_iter()
                        .map(|(re, im)| Complex64::new(re, im))
                        .collect()
                })
                .collect()
        });
        Ok(())
    }

    fn end(&mut self, _out: &mut Emit<'_>) -> Result<(), EvalError> {
        match self.waiting.iter().position(|queue| !queue.is_empty()) {
            None => Ok(()),
            Some(producer) => Err(eval_error(
                "radixcombine",
                format!(
                    "producer {producer} sent {} more arrays than its partner",
                    self.waiting[producer].len()
                ),
            )),
        }
    }
}

/// `radixcombine(s)`: no constants.
pub fn radixcombine_stage(_: &[Value]) -> Result<Box<dyn Stage>, EvalError> {
    Ok(Box::<RadixCombine>::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn complex(value: Value) -> Vec<(f64, f64)> {
        match value {
            Value::Complex(x) => x,
            other => panic!("not a complex array: {other:?}"),
        }
    }

    #[test]
    fn odd_and_even_count_positions_from_zero() {
        let x = Value::Array(vec![10.0, 11.0, 12.0, 13.0, 14.0]);
        assert_eq!(
            even(std::slice::from_ref(&x)),
            Ok(Value::Array(vec![10.0, 12.0, 14.0]))
        );
        assert_eq!(odd(&[x]), Ok(Value::Array(vec![11.0, 13.0])));
        let z = Value::Complex(vec![(1.0, 2.0), (3.0, 4.0)]);
        assert_eq!(odd(&[z]), Ok(Value::Complex(vec![(3.0, 4.0)])));
        assert_eq!(
            odd(&[Value::Integer(3)]).unwrap_err().to_string(),
            "odd: expects an array, found integer"
        );
    }

    #[test]
    fn fft_of_an_impulse_is_flat_and_of_a_constant_is_an_impulse() {
        let impulse = complex(fft(&[Value::Array(vec![1.0, 0.0, 0.0, 0.0])]).unwrap());
        assert_eq!(impulse, vec![(1.0, 0.0); 4]);
        let constant = complex(fft(&[Value::Array(vec![2.0; 3])]).unwrap());
        assert!((constant[0].0 - 6.0).abs() < 1e-12);
        assert!(constant[1..]
            .iter()
            .all(|(re, im)| re.abs() < 1e-12 && im.abs() < 1e-12));
        assert_eq!(fft(&[Value::Array(vec![])]), Ok(Value::Complex(vec![])));
    }

    #[test]
    fn radixcombine_refuses_unpaired_and_mismatched_arrays() {
        let mut stage = radixcombine_stage(&[]).unwrap();
        let mut out = |_| Ok(());
        stage
            .element(0, Value::Complex(vec![(1.0, 0.0)]), &mut out)
            .unwrap();
        let error = stage.end(&mut out).unwrap_err();
        assert_eq!(
            error.to_string(),
            "radixcombine: producer 0 sent 1 more arrays than its partner"
        );
        let mismatch = stage.element(1, Value::Complex(vec![(1.0, 0.0); 2]), &mut out);
        assert!(mismatch.unwrap_err().message.contains("differ in length"));
        let third = stage.element(2, Value::Complex(vec![]), &mut out);
        assert!(third.unwrap_err().message.contains("producer 2"));
    }

    proptest! {
        #[test]
        fn radixcombine_of_the_odd_and_even_ffts_is_the_fft_of_the_whole(
            log_length in 1u32..9,
            seed in any::<u64>(),
            arrays in 1usize..4,
        ) {
            let n = 1usize << log_length;
            let mut state = seed | 1;
            let mut sample = move || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
            };
            let inputs: Vec<Value> = (0..arrays)
                .map(|_| Value::Array((0..n).map(|_| sample()).collect()))
                .collect();
            let mut stage = radixcombine_stage(&[]).unwrap();
            let mut combined = Vec::new();
            let mut out = |value| {
                combined.push(value);
                Ok(())
            };
            // All odd FFTs first, then the even ones: pairing is by order, not by arrival.
            for input in &inputs {
                let odds = fft(&[odd(std::slice::from_ref(input)).unwrap()]).unwrap();
                stage.element(0, odds, &mut out).unwrap();
            }
            for input in &inputs {
                let evens = fft(&[even(std::slice::from_ref(input)).unwrap()]).unwrap();
                stage.element(1, evens, &mut out).unwrap();
            }
            stage.end(&mut out).unwrap();
            prop_assert_eq!(combined.len(), inputs.len());
            for (input, result) in inputs.iter().zip(combined) {
                let direct = complex(fft(std::slice::from_ref(input)).unwrap());
                let scale = direct.iter().map(|(re, im)| re.hypot(*im)).fold(1.0, f64::max);
                for ((re, im), (dre, dim)) in complex(result).into_iter().zip(direct) {
                    prop_assert!((re - dre).hypot(im - dim) <= 1e-9 * scale);
                }
            }
        }
    }
}
