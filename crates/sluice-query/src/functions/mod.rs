//! SCSQL's built-in functions: their signatures (for the checker, [`crate::check`]) and how
//! each runs (for the binder, which builds a stream process's stage tree from them).
//!
//! [`lookup`] finds one by name, ignoring case (`inPset`, `INPSET`); [`names`] lists them all.
//! A [`Builtin`] runs in one of four ways ([`BuiltinKind`]):
//! - `Scalar`: a function of values (`odd(x)`, `fft(x)`, `filename(i)`, `plus(x, y)`). Called
//!   with a stream where it expects a value, it is *lifted*: applied to each element of the
//!   stream, giving a stream ([`lifted_argument`] says when, [`map_stage`] does it), so
//!   `fft(odd(extract(c)))` is the FFT of the odd elements of every array `c` sends.
//! - `Stage`: a stream function (`count`, `sum`, `radixcombine`, `winagg`). Its first
//!   parameter is its input stream; the function of the variant is given the values of the
//!   other parameters (constants) and makes the [`Stage`] that the elements are pushed into.
//!   Given a bag instead of a stream, it runs over the bag's elements ([`apply_to_bag`]):
//!   `count(select ...)` is an integer, `window(bag, 2, 2)` a bag of bags.
//! - `Generator`: a stream made inside a stream process (`iota`, `gen_array`, `receiver`,
//!   `grep`). A finite one can stand for a bag (`i in iota(1, n)`): [`collect_finite`]
//!   enumerates it.
//! - `Special`: `sp`, `spv`, `extract`, `merge`, `streamof`, `urr`, `inPset` and `psetrr`, which
//!   make and wire stream processes or choose their nodes. The binder implements them; this
//!   table gives their signatures to the checker.
//!
//! The families are one file each: [`aggregate`] (count, sum, avg, min, max), [`window`]
//! (window, winagg), [`signal`] (odd, even, fft, radixcombine), [`sources`] (iota, gen_array,
//! receiver, grep, filename) and [`arith`] (plus, minus, times, div and the operators).
//! `docs/src/scsql.md` ("Built-in functions") has the user's table.

pub mod aggregate;
pub mod arith;
pub mod signal;
pub mod sources;
pub mod window;

use std::fmt;
use std::sync::LazyLock;

use crate::stage::{Emit, EvalError, Generator, Stage};
use crate::types::Type;
use crate::value::Value;

/// A scalar built-in: the values of all its arguments to its result.
pub type ScalarFn = fn(&[Value]) -> Result<Value, EvalError>;
/// A stream built-in: the values of its parameters after the first (the input stream) to the
/// stage that processes the stream.
pub type StageFn = fn(&[Value]) -> Result<Box<dyn Stage>, EvalError>;
/// A generator built-in: the values of its arguments to the stream it makes.
pub type GeneratorFn = fn(&[Value]) -> Result<Box<dyn Generator>, EvalError>;

/// How a built-in runs.
#[derive(Clone, Copy)]
pub enum BuiltinKind {
    /// A function of values; lifted over a stream argument (see the module doc).
    Scalar(ScalarFn),
    /// A stream function: its first parameter is the input stream.
    Stage(StageFn),
    /// A stream made from constant arguments.
    Generator(GeneratorFn),
    /// Made and run by the binder: `sp`, `spv`, `extract`, `merge`, `streamof`, `urr`,
    /// `inPset`, `psetrr`.
    Special,
}

impl fmt::Debug for BuiltinKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BuiltinKind::Scalar(_) => "Scalar",
            BuiltinKind::Stage(_) => "Stage",
            BuiltinKind::Generator(_) => "Generator",
            BuiltinKind::Special => "Special",
        })
    }
}

/// How a built-in's result type follows from its arguments' types, where it is narrower than
/// the declared [`Builtin::result`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultRule {
    /// Always [`Builtin::result`].
    Declared,
    /// The element type of argument `i` (a stream or bag) where it is a number: `sum` of a
    /// stream of integers is an integer.
    NumericElementOf(usize),
    /// The type of argument `i` where it is narrower: `odd` of a complex array is one.
    SameAs(usize),
    /// A stream of argument `i`'s type, or argument `i` itself if it is a stream (and a
    /// stream of its elements if it is a bag): `streamof`.
    StreamOf(usize),
    /// Arithmetic: `integer` if every argument is one, `real` if any is, else `number`.
    Arithmetic,
}

/// One built-in function.
#[derive(Debug)]
pub struct Builtin {
    /// Its name as documented (lookups ignore case).
    pub name: &'static str,
    /// The types of its parameters, in order.
    pub params: Vec<Type>,
    /// The names of its parameters, for signatures and messages.
    pub param_names: Vec<&'static str>,
    /// How many of the parameters must be given; the rest are optional (`sp(q [, cluster
    /// [, allocation]])`).
    pub required: usize,
    /// Its result type (see also `rule`).
    pub result: Type,
    /// How the result type narrows with the arguments' types.
    pub rule: ResultRule,
    /// How it runs.
    pub kind: BuiltinKind,
    /// What it does, in one sentence, for `docs/src/scsql.md` and the shell's help.
    pub about: &'static str,
}

impl Builtin {
    fn new(
        name: &'static str,
        params: &[(&'static str, Type)],
        result: Type,
        kind: BuiltinKind,
        about: &'static str,
    ) -> Self {
        Self {
            name,
            params: params.iter().map(|(_, ty)| ty.clone()).collect(),
            param_names: params.iter().map(|(name, _)| *name).collect(),
            required: params.len(),
            result,
            rule: ResultRule::Declared,
            kind,
            about,
        }
    }

    fn optional_after(mut self, required: usize) -> Self {
        self.required = required;
        self
    }

    fn with_rule(mut self, rule: ResultRule) -> Self {
        self.rule = rule;
        self
    }

    /// The result type for arguments of these types (already checked against the
    /// parameters; a lifted argument given as its stream type): the declared result narrowed
    /// by the [`ResultRule`], then made a stream where the call is lifted
    /// ([`lifted_argument`]) and a bag where a stream function is applied to a bag.
    pub fn result_type(&self, args: &[Type]) -> Type {
        let narrowed = match self.rule {
            ResultRule::Declared => None,
            ResultRule::NumericElementOf(i) => args
                .get(i)
                .and_then(Type::element)
                .filter(|element| element.is_number())
                .cloned(),
            ResultRule::SameAs(i) => args
                .get(i)
                .map(|arg| arg.element().filter(|_| arg.is_stream()).unwrap_or(arg))
                .filter(|arg| self.result.accepts(arg) && **arg != Type::Object)
                .cloned(),
            ResultRule::StreamOf(i) => args.get(i).map(|arg| match arg {
                Type::Stream(_) => arg.clone(),
                Type::Bag(element) => Type::Stream(element.clone()),
                _ => Type::stream_of(arg.clone()),
            }),
            ResultRule::Arithmetic => {
                let numbers = args.iter().map(|arg| arg.element().unwrap_or(arg));
                let all_integers = numbers.clone().all(|arg| *arg == Type::Integer);
                let any_real = numbers.clone().any(|arg| *arg == Type::Real);
                Some(if all_integers {
                    Type::Integer
                } else if any_real {
                    Type::Real
                } else {
                    Type::Number
                })
            }
        };
        let result = narrowed.unwrap_or_else(|| self.result.clone());
        if lifted_argument(self, args).is_some() {
            return Type::stream_of(result);
        }
        match (&self.kind, args.first(), result) {
            (BuiltinKind::Stage(_), Some(Type::Bag(_)), Type::Stream(element)) => {
                Type::Bag(element)
            }
            (_, _, result) => result,
        }
    }

    /// Its signature as the docs write it: `gen_array(integer bytes, integer count) ->
    /// stream of byte array`, optional parameters in brackets.
    pub fn signature(&self) -> String {
        let mut text = format!("{}(", self.name);
        for (i, (name, ty)) in self.param_names.iter().zip(&self.params).enumerate() {
            if i == self.required {
                text.push('[');
            }
            if i > 0 {
                text.push_str(", ");
            }
            text.push_str(&format!("{ty} {name}"));
        }
        if self.required < self.params.len() {
            text.push(']');
        }
        text.push_str(&format!(") -> {}", self.result));
        text
    }
}

/// The position of the argument over whose stream a scalar built-in is lifted, if it is:
/// the first argument whose type is a stream where the parameter's is not. The other
/// arguments must then be values (the checker refuses a second stream); the call is a
/// stream, the built-in applied to each element with the other arguments fixed
/// ([`map_stage`]). Stream functions, generators and specials are never lifted.
pub fn lifted_argument(builtin: &Builtin, args: &[Type]) -> Option<usize> {
    if !matches!(builtin.kind, BuiltinKind::Scalar(_)) {
        return None;
    }
    args.iter()
        .zip(&builtin.params)
        .position(|(arg, param)| arg.is_stream() && !param.is_stream() && *param != Type::Object)
}

/// The stage of a lifted scalar call: each element of its input stream becomes argument
/// `position` (from 0) of `function` (the other arguments are `constant_args`, in order,
/// without it), and the result is emitted. A `position` past the constants puts the element
/// last.
pub fn map_stage(function: ScalarFn, constant_args: Vec<Value>, position: usize) -> Box<dyn Stage> {
    Box::new(MapStage {
        function,
        position: position.min(constant_args.len()),
        args: constant_args,
    })
}

/// See [`map_stage`].
struct MapStage {
    function: ScalarFn,
    args: Vec<Value>,
    position: usize,
}

impl Stage for MapStage {
    fn element(&mut self, _from: usize, value: Value, out: &mut Emit<'_>) -> Result<(), EvalError> {
        self.args.insert(self.position, value);
        let result = (self.function)(&self.args);
        self.args.remove(self.position);
        out(result?)
    }

    fn end(&mut self, _out: &mut Emit<'_>) -> Result<(), EvalError> {
        Ok(())
    }
}

/// A stream built-in applied to a bag: `args[0]` is the bag, the rest the constants. Its
/// stage is fed the bag's elements in order; a built-in whose result is a stream gives the
/// bag of what it emitted, any other (an aggregate) the one value it emitted.
pub fn apply_to_bag(builtin: &Builtin, args: &[Value]) -> Result<Value, EvalError> {
    let error = |message: String| eval_error(builtin.name, message);
    let BuiltinKind::Stage(make) = builtin.kind else {
        return Err(error("is not a stream function".into()));
    };
    let Some((Value::Bag(elements), constants)) = args.split_first() else {
        return Err(error("expects a bag as its first argument".into()));
    };
    let mut stage = make(constants)?;
    let mut emitted = Vec::new();
    let mut out = |value| {
        emitted.push(value);
        Ok(())
    };
    for element in elements {
        stage.element(0, element.clone(), &mut out)?;
    }
    stage.end(&mut out)?;
    if builtin.result.is_stream() {
        return Ok(Value::Bag(emitted));
    }
    let count = emitted.len();
    match (emitted.pop(), count) {
        (Some(value), 1) => Ok(value),
        (None, _) => Err(error("has no value for an empty bag".into())),
        (Some(_), _) => Err(error(format!("gave {count} values for one bag"))),
    }
}

/// Enumerates a finite generator as a bag (`i in iota(1, n)`), refusing one of more than
/// `limit` elements (a generator may be infinite: `receiver('signal')`).
pub fn collect_finite(
    function: &str,
    mut generator: Box<dyn Generator>,
    limit: usize,
) -> Result<Vec<Value>, EvalError> {
    let mut elements = Vec::new();
    while let Some(element) = generator.next() {
        if elements.len() == limit {
            return Err(eval_error(
                function,
                format!("gives more than {limit} elements, too many for a bag"),
            ));
        }
        elements.push(element?);
    }
    Ok(elements)
}

/// An error of the built-in `function`.
fn eval_error(function: &str, message: impl Into<String>) -> EvalError {
    EvalError {
        function: function.to_string(),
        message: message.into(),
    }
}

/// Argument number `position` (from 1, as the user counts) of `function`, which must be an
/// integer.
fn integer_argument(
    function: &str,
    value: Option<&Value>,
    position: usize,
) -> Result<i64, EvalError> {
    match value {
        Some(Value::Integer(n)) => Ok(*n),
        other => Err(argument_error(function, "an integer", other, position)),
    }
}

/// Argument number `position` (from 1) of `function`, which must be a string.
fn string_argument<'a>(
    function: &str,
    value: Option<&'a Value>,
    position: usize,
) -> Result<&'a str, EvalError> {
    match value {
        Some(Value::String(text)) => Ok(text),
        other => Err(argument_error(function, "a string", other, position)),
    }
}

fn argument_error(
    function: &str,
    expected: &str,
    found: Option<&Value>,
    position: usize,
) -> EvalError {
    let found = found.map_or("nothing", Value::type_name);
    eval_error(
        function,
        format!("expects {expected} as argument {position}, found {found}"),
    )
}

/// The built-in named `name`, ignoring case.
pub fn lookup(name: &str) -> Option<&'static Builtin> {
    BUILTINS
        .iter()
        .find(|builtin| builtin.name.eq_ignore_ascii_case(name))
}

/// The names of all built-ins, in the order of the docs' table.
pub fn names() -> impl Iterator<Item = &'static str> {
    BUILTINS.iter().map(|builtin| builtin.name)
}

/// All built-ins, in the order of the docs' table.
pub fn all() -> impl Iterator<Item = &'static Builtin> {
    BUILTINS.iter()
}

static BUILTINS: LazyLock<Vec<Builtin>> = LazyLock::new(table);

fn table() -> Vec<Builtin> {
    use BuiltinKind::{Generator as G, Scalar as F, Special, Stage as S};
    use Type::*;
    let stream = |ty| Type::stream_of(ty);
    let numbers = || Type::stream_of(Number);
    vec![
        // Stream processes (the binder's).
        Builtin::new(
            "sp",
            &[
                ("subquery", Object),
                ("cluster", String),
                ("allocation", Object),
            ],
            Sp,
            Special,
            "runs the subquery in a new stream process on cluster (default: this machine), \
             on the first available node of the allocation (a node number, or a stream of them)",
        )
        .optional_after(1),
        Builtin::new(
            "spv",
            &[
                ("subqueries", Type::bag_of(Object)),
                ("cluster", String),
                ("allocation", Object),
            ],
            Type::bag_of(Sp),
            Special,
            "runs each subquery of the bag in a stream process of its own; a bag of the handles",
        )
        .optional_after(1),
        Builtin::new(
            "extract",
            &[("p", Sp)],
            stream(Object),
            Special,
            "the stream of stream process p; ends when p ends",
        ),
        Builtin::new(
            "merge",
            &[("ps", Type::bag_of(Sp))],
            stream(Object),
            Special,
            "the streams of the stream processes ps, interleaved as they arrive; ends when all end",
        ),
        Builtin::new(
            "streamof",
            &[("e", Object)],
            stream(Object),
            Special,
            "e as a stream: a stream stays itself, a bag gives its elements, a value is a \
             stream of that one value",
        )
        .with_rule(ResultRule::StreamOf(0)),
        Builtin::new(
            "urr",
            &[("cluster", String)],
            stream(Integer),
            Special,
            "allocation: the nodes of the cluster, round robin",
        ),
        Builtin::new(
            "inPset",
            &[("k", Integer)],
            stream(Integer),
            Special,
            "allocation: the nodes of node group (pset) k",
        ),
        Builtin::new(
            "psetrr",
            &[],
            stream(Integer),
            Special,
            "allocation: one node of each node group (pset) in turn, round robin",
        ),
        // Aggregates.
        Builtin::new(
            "count",
            &[("s", stream(Object))],
            Integer,
            S(aggregate::count_stage),
            "the number of elements of the stream or bag s (a stream's once it ends)",
        ),
        Builtin::new(
            "sum",
            &[("s", numbers())],
            Number,
            S(aggregate::sum_stage),
            "the sum of the numbers of s; integer if they all are, 0 if there are none",
        )
        .with_rule(ResultRule::NumericElementOf(0)),
        Builtin::new(
            "avg",
            &[("s", numbers())],
            Real,
            S(aggregate::avg_stage),
            "the mean of the numbers of s; none for an empty stream",
        ),
        Builtin::new(
            "min",
            &[("s", numbers())],
            Number,
            S(aggregate::min_stage),
            "the least number of s; none for an empty stream",
        )
        .with_rule(ResultRule::NumericElementOf(0)),
        Builtin::new(
            "max",
            &[("s", numbers())],
            Number,
            S(aggregate::max_stage),
            "the greatest number of s; none for an empty stream",
        )
        .with_rule(ResultRule::NumericElementOf(0)),
        // Windows.
        Builtin::new(
            "window",
            &[("s", stream(Object)), ("size", Integer), ("slide", Integer)],
            stream(Type::bag_of(Object)),
            S(window::window_stage),
            "count windows of s as bags: each `size` elements, a new one every `slide` \
             (tumbling when slide = size); an incomplete last window is not emitted",
        ),
        Builtin::new(
            "winagg",
            &[
                ("s", numbers()),
                ("size", Integer),
                ("slide", Integer),
                ("aggregate", String),
            ],
            stream(Number),
            S(window::winagg_stage),
            "an aggregate ('count', 'sum', 'avg', 'min' or 'max') of each count window of s, \
             windows as `window` makes them",
        ),
        // Sources.
        Builtin::new(
            "iota",
            &[("m", Integer), ("n", Integer)],
            stream(Integer),
            G(sources::iota),
            "the integers m, m+1, ..., n (none if m > n); also a bag (`i in iota(1, n)`)",
        ),
        Builtin::new(
            "gen_array",
            &[("bytes", Integer), ("count", Integer)],
            stream(Bytes),
            G(sources::gen_array),
            "count byte arrays of `bytes` bytes each (the bandwidth tests' load)",
        ),
        Builtin::new(
            "receiver",
            &[("name", String)],
            stream(Array),
            G(sources::receiver),
            "a stream of real arrays: one per line of numbers of the file `name`, or from a \
             generator: 'signal', 'sine:N[:COUNT]', 'noise:N[:COUNT]'",
        ),
        Builtin::new(
            "grep",
            &[("pattern", String), ("file", String)],
            stream(String),
            G(sources::grep),
            "the lines of the file that match the pattern (a regular expression, Rust `regex` \
             syntax)",
        ),
        Builtin::new(
            "filename",
            &[("i", Integer)],
            String,
            F(sources::filename),
            "the i-th (from 1) name of the file table that SLUICE_FILENAMES names (a file of \
             names, one a line, or a directory)",
        ),
        // Signals.
        Builtin::new(
            "odd",
            &[("x", Array)],
            Array,
            F(signal::odd),
            "the elements of x at odd positions, counted from 0: x[1], x[3], ...",
        )
        .with_rule(ResultRule::SameAs(0)),
        Builtin::new(
            "even",
            &[("x", Array)],
            Array,
            F(signal::even),
            "the elements of x at even positions, counted from 0: x[0], x[2], ...",
        )
        .with_rule(ResultRule::SameAs(0)),
        Builtin::new(
            "fft",
            &[("x", Array)],
            Complex,
            F(signal::fft),
            "the discrete Fourier transform of the real or complex array x (any length)",
        ),
        Builtin::new(
            "radixcombine",
            &[("s", stream(Array))],
            stream(Complex),
            S(signal::radixcombine_stage),
            "the FFTs of whole arrays, from the FFTs of their odd (producer 0 of the merge) \
             and even (producer 1) elements, paired in order",
        ),
        // Arithmetic.
        Builtin::new(
            "plus",
            &[("x", Number), ("y", Number)],
            Number,
            F(arith::plus),
            "x + y",
        )
        .with_rule(ResultRule::Arithmetic),
        Builtin::new(
            "minus",
            &[("x", Number), ("y", Number)],
            Number,
            F(arith::minus),
            "x - y",
        )
        .with_rule(ResultRule::Arithmetic),
        Builtin::new(
            "times",
            &[("x", Number), ("y", Number)],
            Number,
            F(arith::times),
            "x * y",
        )
        .with_rule(ResultRule::Arithmetic),
        Builtin::new(
            "div",
            &[("x", Number), ("y", Number)],
            Number,
            F(arith::div),
            "x / y; between integers the quotient rounded toward zero",
        )
        .with_rule(ResultRule::Arithmetic),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_ignore_case_and_every_name_is_found() {
        assert_eq!(lookup("INPSET").map(|b| b.name), Some("inPset"));
        assert!(lookup("mege").is_none());
        for name in names() {
            assert_eq!(lookup(name).map(|b| b.name), Some(name));
        }
    }

    #[test]
    fn the_book_lists_every_built_in() {
        let doc = include_str!("../../../../docs/src/scsql.md");
        for builtin in all() {
            let row = format!("| `{}` | {} |", builtin.signature(), builtin.about);
            assert!(doc.contains(&row), "docs/src/scsql.md lacks the row\n{row}");
        }
    }

    #[test]
    fn signatures_show_optional_parameters() {
        let sp = lookup("sp").unwrap();
        assert_eq!(
            sp.signature(),
            "sp(object subquery[, string cluster, object allocation]) -> sp"
        );
        assert_eq!(
            lookup("gen_array").unwrap().signature(),
            "gen_array(integer bytes, integer count) -> stream of byte array"
        );
    }

    #[test]
    fn scalars_are_lifted_over_streams_and_stream_functions_over_bags_give_bags() {
        let fft = lookup("fft").unwrap();
        let arrays = Type::stream_of(Type::Array);
        assert_eq!(lifted_argument(fft, std::slice::from_ref(&arrays)), Some(0));
        assert_eq!(fft.result_type(&[arrays]), Type::stream_of(Type::Complex));
        assert_eq!(fft.result_type(&[Type::Array]), Type::Complex);
        let odd = lookup("odd").unwrap();
        assert_eq!(
            odd.result_type(&[Type::stream_of(Type::Object)]),
            Type::stream_of(Type::Array)
        );
        assert_eq!(odd.result_type(&[Type::Complex]), Type::Complex);
        let count = lookup("count").unwrap();
        assert_eq!(
            lifted_argument(count, &[Type::stream_of(Type::Object)]),
            None
        );
        let sum = lookup("sum").unwrap();
        assert_eq!(
            sum.result_type(&[Type::bag_of(Type::Integer)]),
            Type::Integer
        );
        assert_eq!(
            sum.result_type(&[Type::stream_of(Type::Object)]),
            Type::Number
        );
        let window = lookup("window").unwrap();
        assert_eq!(
            window.result_type(&[Type::bag_of(Type::Integer), Type::Integer, Type::Integer]),
            Type::bag_of(Type::bag_of(Type::Object))
        );
        let plus = lookup("plus").unwrap();
        assert_eq!(
            plus.result_type(&[Type::stream_of(Type::Integer), Type::Integer]),
            Type::stream_of(Type::Integer)
        );
        assert_eq!(plus.result_type(&[Type::Integer, Type::Real]), Type::Real);
        let streamof = lookup("streamof").unwrap();
        assert_eq!(
            streamof.result_type(&[Type::Integer]),
            Type::stream_of(Type::Integer)
        );
    }

    #[test]
    fn a_lifted_scalar_maps_each_element() {
        let mut stage = map_stage(arith::minus, vec![Value::Integer(10)], 1);
        let mut results = Vec::new();
        for i in 1..=3 {
            stage
                .element(0, Value::Integer(i), &mut |v| {
                    results.push(v);
                    Ok(())
                })
                .unwrap();
        }
        assert_eq!(
            results,
            vec![Value::Integer(9), Value::Integer(8), Value::Integer(7)]
        );
    }

    #[test]
    fn stream_functions_run_over_bags() {
        let bag = Value::Bag((1..=5).map(Value::Integer).collect());
        let count = lookup("count").unwrap();
        assert_eq!(
            apply_to_bag(count, std::slice::from_ref(&bag)),
            Ok(Value::Integer(5))
        );
        let window = lookup("window").unwrap();
        let windows = apply_to_bag(window, &[bag, Value::Integer(2), Value::Integer(2)]);
        assert_eq!(
            windows,
            Ok(Value::Bag(vec![
                Value::Bag(vec![Value::Integer(1), Value::Integer(2)]),
                Value::Bag(vec![Value::Integer(3), Value::Integer(4)]),
            ]))
        );
        let avg = lookup("avg").unwrap();
        assert!(apply_to_bag(avg, &[Value::Bag(vec![])]).is_err());
    }

    #[test]
    fn finite_generators_enumerate_as_bags_and_infinite_ones_are_refused() {
        let iota = sources::iota(&[Value::Integer(1), Value::Integer(4)]).unwrap();
        assert_eq!(
            collect_finite("iota", iota, 10),
            Ok((1..=4).map(Value::Integer).collect())
        );
        let signal = sources::receiver(&[Value::String("signal".into())]).unwrap();
        assert!(collect_finite("receiver", signal, 10).is_err());
    }
}
