//! Arithmetic and comparison on integers and reals: the built-ins `plus`, `minus`, `times` and
//! `div`, which the operators `+ - * /` of a query are ([`operator`]), the negation `-e`
//! ([`negate`]) and the comparisons of a `where` clause ([`compare`]).
//!
//! Between two integers the result is an integer: an overflow is an error, `div` rounds
//! toward zero and dividing by 0 is an error. Any real operand makes the result real (IEEE
//! arithmetic: `1.0 / 0` is infinity). Like every scalar built-in, an operator is applied to
//! each element of a stream operand (`extract(c) * 2`).

use std::cmp::Ordering;

use super::aggregate::compare_numbers;
use super::{eval_error, lookup, Builtin};
use crate::ast::BinaryOp;
use crate::stage::EvalError;
use crate::value::Value;

/// The built-in an arithmetic operator stands for (`+` is `plus`); `None` for a comparison.
pub fn operator(op: BinaryOp) -> Option<&'static Builtin> {
    let name = match op {
        BinaryOp::Add => "plus",
        BinaryOp::Subtract => "minus",
        BinaryOp::Multiply => "times",
        BinaryOp::Divide => "div",
        BinaryOp::Less
        | BinaryOp::LessOrEqual
        | BinaryOp::Greater
        | BinaryOp::GreaterOrEqual
        | BinaryOp::NotEqual => return None,
    };
    lookup(name)
}

/// The two operands of a binary built-in.
fn operands<'a>(function: &str, args: &'a [Value]) -> Result<(&'a Value, &'a Value), EvalError> {
    match args {
        [left, right] => Ok((left, right)),
        _ => Err(eval_error(
            function,
            format!("expects 2 arguments, found {}", args.len()),
        )),
    }
}

/// Applies an arithmetic operation: `integer` to two integers (`None` on overflow or for a
/// division by 0), `real` to any other pair of numbers.
fn arithmetic(
    function: &str,
    args: &[Value],
    integer: fn(i64, i64) -> Option<i64>,
    real: fn(f64, f64) -> f64,
) -> Result<Value, EvalError> {
    let (left, right) = operands(function, args)?;
    let as_real = |value: &Value| match value {
        Value::Integer(i) => Ok(*i as f64),
        Value::Real(x) => Ok(*x),
        other => Err(eval_error(
            function,
            format!("expects numbers, found {}", other.type_name()),
        )),
    };
    match (left, right) {
        (Value::Integer(a), Value::Integer(b)) => {
            integer(*a, *b).map(Value::Integer).ok_or_else(|| {
                let why = if *b == 0 && function == "div" {
                    "division by zero"
                } else {
                    "integer overflow"
                };
                eval_error(function, format!("{why} ({a} and {b})"))
            })
        }
        _ => Ok(Value::Real(real(as_real(left)?, as_real(right)?))),
    }
}

/// `plus(x, y)`, `x + y`.
pub fn plus(args: &[Value]) -> Result<Value, EvalError> {
    arithmetic("plus", args, i64::checked_add, |a, b| a + b)
}

/// `minus(x, y)`, `x - y`.
pub fn minus(args: &[Value]) -> Result<Value, EvalError> {
    arithmetic("minus", args, i64::checked_sub, |a, b| a - b)
}

/// `times(x, y)`, `x * y`.
pub fn times(args: &[Value]) -> Result<Value, EvalError> {
    arithmetic("times", args, i64::checked_mul, |a, b| a * b)
}

/// `div(x, y)`, `x / y`.
pub fn div(args: &[Value]) -> Result<Value, EvalError> {
    arithmetic("div", args, i64::checked_div, |a, b| a / b)
}

/// `-x`.
pub fn negate(value: &Value) -> Result<Value, EvalError> {
    match value {
        Value::Integer(i) => i
            .checked_neg()
            .map(Value::Integer)
            .ok_or_else(|| eval_error("-", format!("integer overflow (-{i})"))),
        Value::Real(x) => Ok(Value::Real(-x)),
        other => Err(eval_error(
            "-",
            format!("expects a number, found {}", other.type_name()),
        )),
    }
}

/// A comparison of a `where` clause: numbers by value (`1 = 1.0`), strings in byte order;
/// `!=` compares any two values, the orderings numbers or strings only.
pub fn compare(op: BinaryOp, left: &Value, right: &Value) -> Result<bool, EvalError> {
    let ordering = match (left, right) {
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        _ => compare_numbers(left, right),
    };
    let symbol = match op {
        BinaryOp::Less => "<",
        BinaryOp::LessOrEqual => "<=",
        BinaryOp::Greater => ">",
        BinaryOp::GreaterOrEqual => ">=",
        BinaryOp::NotEqual => return Ok(ordering.map_or(left != right, Ordering::is_ne)),
        BinaryOp::Add | BinaryOp::Subtract | BinaryOp::Multiply | BinaryOp::Divide => {
            return Err(eval_error(
                "compare",
                format!("{op:?} is arithmetic, not a comparison"),
            ))
        }
    };
    let Some(ordering) = ordering else {
        return Err(eval_error(
            symbol,
            format!(
                "cannot order {} and {}",
                left.type_name(),
                right.type_name()
            ),
        ));
    };
    Ok(match op {
        BinaryOp::Less => ordering.is_lt(),
        BinaryOp::LessOrEqual => ordering.is_le(),
        BinaryOp::Greater => ordering.is_gt(),
        _ => ordering.is_ge(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use Value::{Integer, Real};

    #[test]
    fn integers_stay_integers_and_reals_spread() {
        assert_eq!(plus(&[Integer(2), Integer(3)]), Ok(Integer(5)));
        assert_eq!(minus(&[Integer(2), Real(0.5)]), Ok(Real(1.5)));
        assert_eq!(times(&[Real(1.5), Integer(2)]), Ok(Real(3.0)));
        assert_eq!(div(&[Integer(-7), Integer(2)]), Ok(Integer(-3)));
        assert_eq!(div(&[Real(1.0), Integer(0)]), Ok(Real(f64::INFINITY)));
        assert_eq!(negate(&Integer(4)), Ok(Integer(-4)));
    }

    #[test]
    fn overflow_division_by_zero_and_non_numbers_are_errors() {
        let message = |result: Result<Value, EvalError>| result.unwrap_err().to_string();
        assert_eq!(
            message(div(&[Integer(1), Integer(0)])),
            "div: division by zero (1 and 0)"
        );
        assert_eq!(
            message(times(&[Integer(i64::MAX), Integer(2)])),
            format!("times: integer overflow ({} and 2)", i64::MAX)
        );
        assert_eq!(
            message(plus(&[Integer(1), Value::String("a".into())])),
            "plus: expects numbers, found string"
        );
        assert!(negate(&Integer(i64::MIN)).is_err());
    }

    #[test]
    fn operators_are_the_named_built_ins() {
        assert_eq!(operator(BinaryOp::Add).map(|b| b.name), Some("plus"));
        assert_eq!(operator(BinaryOp::Divide).map(|b| b.name), Some("div"));
        assert!(operator(BinaryOp::Less).is_none());
    }

    #[test]
    fn comparisons_order_numbers_and_strings() {
        assert_eq!(compare(BinaryOp::Less, &Integer(1), &Real(1.5)), Ok(true));
        assert_eq!(
            compare(BinaryOp::NotEqual, &Integer(1), &Real(1.0)),
            Ok(false)
        );
        assert_eq!(
            compare(BinaryOp::NotEqual, &Value::Sp(1), &Value::Sp(2)),
            Ok(true)
        );
        let s = |text: &str| Value::String(text.into());
        assert_eq!(
            compare(BinaryOp::GreaterOrEqual, &s("b"), &s("a")),
            Ok(true)
        );
        assert!(compare(BinaryOp::Less, &Value::Sp(1), &Value::Sp(2)).is_err());
    }
}
