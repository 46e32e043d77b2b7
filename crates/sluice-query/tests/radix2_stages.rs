//! The paper's radix2 FFT run from the built-ins' stages, wired by hand as the binder wires
//! them: `c` is `receiver(s)`, `a` lifts `odd` then `fft` over `extract(c)`, `b` the same with
//! `even`, and `radixcombine(merge({a, b}))` must give the FFT of each of `c`'s arrays.

use sluice_query::functions::{lifted_argument, lookup, map_stage, BuiltinKind};
use sluice_query::stage::{EvalError, Stage};
use sluice_query::{Type, Value};

/// The stage of a lifted scalar built-in of one argument.
fn lifted(name: &str) -> Box<dyn Stage> {
    let builtin = lookup(name).unwrap();
    let BuiltinKind::Scalar(function) = builtin.kind else {
        panic!("{name} is not a scalar")
    };
    let position = lifted_argument(builtin, &[Type::stream_of(Type::Object)]);
    assert_eq!(
        position,
        Some(0),
        "{name} is lifted over its stream argument"
    );
    map_stage(function, vec![], 0)
}

/// Pushes `value` through `stages` in order, collecting what the last emits.
fn push(stages: &mut [Box<dyn Stage>], value: Value) -> Result<Vec<Value>, EvalError> {
    let mut values = vec![value];
    for stage in stages.iter_mut() {
        let mut next = Vec::new();
        for value in values {
            stage.element(0, value, &mut |out| {
                next.push(out);
                Ok(())
            })?;
        }
        values = next;
    }
    Ok(values)
}

fn complex(value: &Value) -> &[(f64, f64)] {
    match value {
        Value::Complex(x) => x,
        other => panic!("not a complex array: {other:?}"),
    }
}

#[test]
fn radixcombine_of_the_lifted_odd_and_even_ffts_is_the_fft_of_each_array() {
    let BuiltinKind::Generator(receiver) = lookup("receiver").unwrap().kind else {
        panic!("receiver is a generator")
    };
    let BuiltinKind::Stage(radixcombine) = lookup("radixcombine").unwrap().kind else {
        panic!("radixcombine is a stage")
    };
    let BuiltinKind::Scalar(fft) = lookup("fft").unwrap().kind else {
        panic!("fft is a scalar")
    };
    let mut c = receiver(&[Value::String("noise:64:5".into())]).unwrap();
    let mut a = [lifted("odd"), lifted("fft")];
    let mut b = [lifted("even"), lifted("fft")];
    let mut combine = radixcombine(&[]).unwrap();
    let mut inputs = Vec::new();
    let mut results = Vec::new();
    while let Some(array) = c.next() {
        let array = array.unwrap();
        inputs.push(array.clone());
        // The merge delivers a's and b's elements in whatever order they arrive.
        let odds = push(&mut a, array.clone()).unwrap();
        let evens = push(&mut b, array).unwrap();
        for (from, values) in [(1, evens), (0, odds)] {
            for value in values {
                combine
                    .element(from, value, &mut |out| {
                        results.push(out);
                        Ok(())
                    })
                    .unwrap();
            }
        }
    }
    combine.end(&mut |_| Ok(())).unwrap();
    assert_eq!(results.len(), 5);
    for (input, result) in inputs.iter().zip(&results) {
        let direct = fft(std::slice::from_ref(input)).unwrap();
        let direct = complex(&direct);
        let scale = direct
            .iter()
            .map(|(re, im)| re.hypot(*im))
            .fold(1.0, f64::max);
        for ((re, im), (dre, dim)) in complex(result).iter().zip(direct) {
            assert!((re - dre).hypot(im - dim) <= 1e-9 * scale);
        }
    }
}
