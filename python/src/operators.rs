//! The operators that run Python: [`IterableSource`] (the items of a Python iterable) and
//! [`PythonStep`] (a Python function applied to each tuple: map, stateful map, filter,
//! flat-map, key-by, the key-by reading event times too), and the keyed aggregates of Python
//! streams that run as Rust ([`Tally`], [`Total`]), in windows too.
//!
//! Through checkpoints, an [`IterableSource`] keeps the number of items it emitted (resumed,
//! it iterates its iterable again and skips them) and a stateful map its state, pickled.
//!
//! A Python operator takes the interpreter once per batch of tuples, not once per tuple. An
//! exception in a user's function fails the operator: its traceback becomes the operator's
//! error (which the runtime reports with the operator's name, as it does a Rust panic), and
//! the exception itself is kept in the job's [`Failures`], so that `run` raises it again in
//! the caller, chained under an `OperatorError` naming the operator.

use std::sync::{Arc, Mutex, PoisonError};

use pyo3::exceptions::{PyIndexError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyList;
use sluice_graph::{
    expect_tuple, Operator, OperatorContext, OperatorError, Output, Produced, Snapshot, Source,
};
use sluice_ops::{Aggregate, SOURCE_BATCH};
use sluice_types::{BatchRef, TupleRef};

use crate::value::{Carried, Value};

/// How the error of an operator stopped by a Python exception begins (then the operator's
/// name): a job whose PE process failed so is raised as an `OperatorError` too.
pub const PYTHON_EXCEPTION: &str = "Python exception in operator";

/// The first Python exception of a job and the operator it came from, shared by the job's
/// Python operators and the `run` that raises it.
#[derive(Clone, Default)]
pub struct Failures(Arc<Mutex<Option<(String, PyErr)>>>);

impl Failures {
    /// Keeps `error` of `operator` (unless an earlier one is kept) and returns the operator
    /// error that stops the job: the Python traceback and the exception.
    fn fail(&self, py: Python<'_>, operator: &str, error: PyErr) -> OperatorError {
        let traceback = error
            .traceback(py)
            .and_then(|t| t.format().ok())
            .unwrap_or_default();
        let message = format!("{PYTHON_EXCEPTION} '{operator}':\n{traceback}{error}");
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert((operator.to_string(), error));
        OperatorError::Failed(message)
    }

    /// The first exception kept, and its operator's name.
    pub fn take(&self) -> Option<(String, PyErr)> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

thread_local! {
    /// Whether this thread has a Python thread state it keeps ([`keep_thread_state`]).
    static KEPT_THREAD_STATE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Gives this thread a Python thread state it keeps until the interpreter ends, so that each
/// batch's `Python::attach` takes the interpreter with that state rather than making a new one
/// and throwing it away (a new state maps its frame stack with `mmap` and unmaps it when it is
/// thrown away: a third of a PE process's time in a profile of WordCount). Called where an
/// operator starts, which is never on a thread holding the interpreter: every plan runs the
/// job's operators on threads of their own, which `Dataflow.run` starts after releasing it.
fn keep_thread_state() {
    KEPT_THREAD_STATE.with(|kept| {
        if kept.replace(true) {
            return;
        }
        // SAFETY: this thread does not hold the interpreter (see above): PyGILState_Ensure
        // makes its thread state and takes the interpreter, and PyEval_SaveThread releases the
        // interpreter keeping the state, which the next PyGILState_Ensure on this thread
        // (under `Python::attach`) finds and reuses. The state is never released by this
        // thread; the interpreter frees it when it ends.
        unsafe {
            pyo3::ffi::PyGILState_Ensure();
            pyo3::ffi::PyEval_SaveThread();
        }
    });
}

/// A user's Python function (or iterable), shared by an operator's instances.
pub type Shared = Arc<Py<PyAny>>;

/// Where an [`IterableSource`] instance gets its items from.
#[derive(Clone)]
pub enum Items {
    /// The items of one iterable, for a source of parallelism 1 (every instance would
    /// iterate the whole iterable).
    Iterable(Shared),
    /// Instance `i` of `n` iterates what `part(i, n)` returns, called where the instance
    /// runs (in its PE process under the processes plan): each instance its own part.
    Parts(Shared),
}

/// A source emitting the items of a Python iterable, a batch of up to [`SOURCE_BATCH`] per
/// call: the one iterable, or each instance its part ([`Items`]).
pub struct IterableSource {
    items: Items,
    iterator: Option<Py<PyAny>>,
    name: String,
    failures: Failures,
    batch: Vec<Value>,
    /// Items emitted since the iterable's start (restored from a checkpoint's position).
    position: u64,
}

impl IterableSource {
    /// A source over `items`, failing into `failures`.
    pub fn new(items: Items, failures: Failures) -> Self {
        Self {
            items,
            iterator: None,
            name: String::new(),
            failures,
            batch: Vec::with_capacity(SOURCE_BATCH),
            position: 0,
        }
    }

    /// The iterator of the instance's iterable (instance `instance` of `parallelism`), past
    /// the `position` items emitted before a checkpoint: the iterable is iterated again from
    /// its start, which one that is its own iterator (a generator) cannot be; a part is asked
    /// for again, so it can.
    fn iterate<'py>(
        &self,
        py: Python<'py>,
        instance: usize,
        parallelism: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (iterable, again) = match &self.items {
            Items::Iterable(iterable) => (iterable.bind(py).clone(), false),
            Items::Parts(part) => (part.bind(py).call1((instance, parallelism))?, true),
        };
        let it = iterable.try_iter()?;
        if self.position > 0 {
            if !again && it.is(&iterable) {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "the source resumes at item {} of its iterable, iterating it again from \
                     its start, and a generator or iterator cannot be: give a list, a range \
                     or another iterable that can be iterated again",
                    self.position
                )));
            }
            for skipped in it.clone().take(self.position as usize) {
                skipped?;
            }
        }
        Ok(it.into_any())
    }
}

impl Source for IterableSource {
    fn start(&mut self, ctx: &OperatorContext) -> Result<(), OperatorError> {
        self.name.clone_from(&ctx.name);
        keep_thread_state();
        Python::attach(|py| match self.iterate(py, ctx.instance, ctx.parallelism) {
            Ok(it) => {
                self.iterator = Some(it.unbind());
                Ok(())
            }
            Err(e) => Err(self.failures.fail(py, &self.name, e)),
        })
    }

    fn resumable(&self) -> bool {
        true
    }

    /// The number of items emitted: a restored source skips them.
    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Snapshot::whole(&self.position)
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        if !snapshot.is_empty() {
            self.position = snapshot.decode_whole()?;
        }
        Ok(())
    }

    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let Some(iterator) = &self.iterator else {
            return Ok(Produced::Exhausted);
        };
        let ended = Python::attach(|py| {
            let it = iterator
                .bind(py)
                .cast::<pyo3::types::PyIterator>()
                .map_err(PyErr::from);
            let pulled = it.and_then(|it| {
                let mut it = it.clone();
                while self.batch.len() < SOURCE_BATCH {
                    match it.next() {
                        Some(item) => self.batch.push(Value::from_py(&item?)?),
                        None => return Ok(true),
                    }
                }
                Ok(false)
            });
            pulled.map_err(|e| self.failures.fail(py, &self.name, e))
        })?;
        let emitted = self.batch.len();
        out.emit_batch(0, &mut self.batch)?;
        self.position += emitted as u64;
        if ended {
            self.iterator = None;
        }
        Ok(if ended && emitted == 0 {
            Produced::Exhausted
        } else {
            Produced::Emitted(emitted)
        })
    }
}

/// What a [`PythonStep`] does with its function's result.
#[derive(Clone, Debug)]
pub enum Step {
    /// Emits the result.
    Map,
    /// Emits the tuple when the result is true.
    Filter,
    /// Emits every item of the result (an iterable).
    FlatMap,
    /// Calls the function with the instance's state and the tuple; it returns the new state
    /// and what to emit. The state starts as `init()` and is pickled into checkpoints.
    Stateful {
        /// Makes the first state.
        init: Shared,
    },
    /// Emits `(result, field)`; the function is optional (the tuple is its own key). With a
    /// `time` function, emits `(result, (field, t))`, `t` its event time in nanoseconds
    /// ([`event_time`] reads it back, [`field_of`] the field).
    KeyBy {
        /// What of the tuple the keyed aggregate reads.
        field: Field,
        /// The keyed stream is summed: the field must be an int or a float.
        numeric: bool,
        /// The tuple's event time, in seconds (an int or a float from 0).
        time: Option<Shared>,
    },
}

/// The event time (nanoseconds) of a key-by's `(key, (field, t))` pair: `t`; 0 for a pair
/// without one.
pub fn event_time(pair: &(Value, Value)) -> u64 {
    match &pair.1 {
        Value::Tuple(timed) => match &**timed {
            [_, Value::Int(t)] => u64::try_from(*t).unwrap_or(0),
            _ => 0,
        },
        _ => 0,
    }
}

/// The field of a key-by's pair: its value, or the field of a `(field, t)` value when `timed`.
pub fn field_of(pair: &(Value, Value), timed: bool) -> &Value {
    match &pair.1 {
        Value::Tuple(parts) if timed && parts.len() == 2 => &parts[0],
        value => value,
    }
}

/// Nanoseconds in a second, for event times given in seconds.
const NANOS: f64 = 1e9;

/// The event time `time(tuple)` returns in seconds, in nanoseconds; one before the epoch or
/// past 2^63 ns (the year 2262) is a `ValueError` naming it.
fn nanoseconds(py: Python<'_>, time: &Shared, object: &Bound<'_, PyAny>) -> PyResult<Value> {
    let seconds: f64 = time.bind(py).call1((object.clone(),))?.extract()?;
    let nanos = seconds * NANOS;
    if !(0.0..9.2e18).contains(&nanos) {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "an event time is seconds from 0 to 9.2e9 (the nanoseconds fit 63 bits), not {seconds}"
        )));
    }
    Ok(Value::Int(nanos as i64))
}

/// What of a tuple a keyed aggregate reads.
#[derive(Clone, Debug)]
pub enum Field {
    /// Nothing (a count reads no field): `None`.
    Unread,
    /// The whole tuple.
    Whole,
    /// Item `n` of a tuple (read in Rust).
    Item(usize),
    /// What a Python function returns for it.
    Call(Shared),
}

impl Field {
    /// Whether `self` reads what `other` reads (a function: the same function object).
    pub fn same_as(&self, other: &Field) -> bool {
        match (self, other) {
            (Field::Unread, Field::Unread) | (Field::Whole, Field::Whole) => true,
            (Field::Item(a), Field::Item(b)) => a == b,
            (Field::Call(a), Field::Call(b)) => a.as_ptr() == b.as_ptr(),
            _ => false,
        }
    }

    /// What it reads, for a message.
    pub fn describe(&self) -> String {
        match self {
            Field::Unread => "nothing of the tuple (a count)".into(),
            Field::Whole => "the whole tuple".into(),
            Field::Item(n) => format!("item {n} of the tuple"),
            Field::Call(_) => "what a function returns".into(),
        }
    }
    /// The field of `tuple`, with `object` its Python object when there is one.
    fn of(
        &self,
        py: Python<'_>,
        tuple: &Value,
        object: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Value> {
        match self {
            Field::Unread => Ok(Value::None),
            Field::Whole => Ok(tuple.clone()),
            Field::Item(n) => match tuple {
                Value::Tuple(items) if *n < items.len() => Ok(items[*n].clone()),
                _ => Err(PyIndexError::new_err(format!(
                    "the aggregate reads item {n} of each tuple, and {} has none",
                    tuple.to_py(py)?.repr()?
                ))),
            },
            Field::Call(f) => {
                let arg = match object {
                    Some(object) => object.clone(),
                    None => tuple.to_py(py)?,
                };
                Value::from_py(&f.bind(py).call1((arg,))?)
            }
        }
    }
}

/// The tuples a step emits: values, or `(key, value)` pairs for a key-by.
pub trait Emitted: Carried {
    /// What the step makes of `tuple` given its function's `result` (`None`: no function).
    /// `object` is the tuple as a Python object, when the step made one. The tuple is copied
    /// only where the step emits it (a filter's, a key-by's), not for a map's result.
    fn step<I: Carried>(
        py: Python<'_>,
        step: &Step,
        tuple: &I,
        object: Option<&Bound<'_, PyAny>>,
        result: Option<Bound<'_, PyAny>>,
        results: &mut Vec<Self>,
    ) -> PyResult<()>;
}

impl Emitted for Value {
    fn step<I: Carried>(
        _py: Python<'_>,
        step: &Step,
        tuple: &I,
        _object: Option<&Bound<'_, PyAny>>,
        result: Option<Bound<'_, PyAny>>,
        results: &mut Vec<Self>,
    ) -> PyResult<()> {
        let Some(result) = result else {
            results.push(tuple.to_value());
            return Ok(());
        };
        match step {
            Step::Filter => {
                if result.is_truthy()? {
                    results.push(tuple.to_value());
                }
            }
            // A list (what a split returns) is read by index, without an iterator object.
            Step::FlatMap => match result.cast_exact::<PyList>() {
                Ok(list) => {
                    results.reserve(list.len());
                    for item in list {
                        results.push(Value::from_py(&item)?);
                    }
                }
                Err(_) => {
                    for item in result.try_iter()? {
                        results.push(Value::from_py(&item?)?);
                    }
                }
            },
            Step::Map | Step::Stateful { .. } | Step::KeyBy { .. } => {
                results.push(Value::from_py(&result)?)
            }
        }
        Ok(())
    }
}

impl Emitted for (Value, Value) {
    fn step<I: Carried>(
        py: Python<'_>,
        step: &Step,
        tuple: &I,
        object: Option<&Bound<'_, PyAny>>,
        result: Option<Bound<'_, PyAny>>,
        results: &mut Vec<Self>,
    ) -> PyResult<()> {
        let Step::KeyBy {
            field,
            numeric,
            time,
        } = step
        else {
            return Err(PyTypeError::new_err(format!(
                "only a key-by emits (key, value) pairs, not a {step:?}"
            )));
        };
        let whole = tuple.as_value();
        let mut value = field.of(py, &whole, object)?;
        if *numeric && !matches!(value, Value::Int(_) | Value::Float(_) | Value::Bool(_)) {
            return Err(PyTypeError::new_err(format!(
                "a sum reads ints and floats, not {}",
                value.to_py(py)?.repr()?
            )));
        }
        if let Some(time) = time {
            let t = match object {
                Some(object) => nanoseconds(py, time, object)?,
                None => nanoseconds(py, time, &whole.to_py(py)?)?,
            };
            value = Value::Tuple(Box::new([value, t]));
        }
        let key = match result {
            Some(key) => Value::from_py(&key)?,
            None => whole.into_owned(),
        };
        results.push((key, value));
        Ok(())
    }
}

/// A Python function applied to each tuple of type `I`, emitting `O`s as its [`Step`] says.
pub struct PythonStep<I, O> {
    f: Option<Shared>,
    step: Step,
    /// The instance's state, for a [`Step::Stateful`].
    state: Option<Py<PyAny>>,
    name: String,
    failures: Failures,
    results: Vec<O>,
    inputs: std::marker::PhantomData<fn(&I)>,
}

impl<I, O> PythonStep<I, O> {
    /// A step calling `f` (none: a key-by whose key is the tuple), failing into `failures`.
    pub fn new(f: Option<Shared>, step: Step, failures: Failures) -> Self {
        Self {
            f,
            step,
            state: None,
            name: String::new(),
            failures,
            results: Vec::new(),
            inputs: std::marker::PhantomData,
        }
    }

    /// Runs the step on one tuple.
    fn one(&mut self, py: Python<'_>, tuple: &I) -> PyResult<()>
    where
        I: Carried,
        O: Emitted,
    {
        let (object, result) = match (&self.f, &mut self.state) {
            (Some(f), Some(state)) => {
                let object = tuple.to_py(py)?;
                let returned = f.bind(py).call1((state.bind(py), object.clone()))?;
                let (next, emitted): (Bound<'_, PyAny>, Bound<'_, PyAny>) =
                    returned.extract().map_err(|_| {
                        PyTypeError::new_err(
                            "a stateful_map's function returns a pair: (the new state, what \
                             to emit)",
                        )
                    })?;
                *state = next.unbind();
                (Some(object), Some(emitted))
            }
            (Some(f), None) => {
                let object = tuple.to_py(py)?;
                let result = f.bind(py).call1((object.clone(),))?;
                (Some(object), Some(result))
            }
            (None, _) => (None, None),
        };
        O::step(
            py,
            &self.step,
            tuple,
            object.as_ref(),
            result,
            &mut self.results,
        )
    }
}

impl<I: Carried, O: Emitted> Operator for PythonStep<I, O> {
    fn start(&mut self, ctx: &OperatorContext) -> Result<(), OperatorError> {
        self.name.clone_from(&ctx.name);
        keep_thread_state();
        let Step::Stateful { init } = &self.step else {
            return Ok(());
        };
        if self.state.is_none() {
            let first = Python::attach(|py| {
                init.bind(py)
                    .call0()
                    .map(Bound::unbind)
                    .map_err(|e| self.failures.fail(py, &self.name, e))
            })?;
            self.state = Some(first);
        }
        Ok(())
    }

    /// A stateful step's state, pickled.
    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        let Some(state) = &self.state else {
            return Ok(Snapshot::default());
        };
        let pickled: Vec<u8> = Python::attach(|py| {
            let dumps = py.import("pickle")?.getattr("dumps")?;
            dumps.call1((state.bind(py),))?.extract()
        })
        .map_err(|e: PyErr| {
            OperatorError::Failed(format!(
                "the state of '{}' cannot be pickled: {e}",
                self.name
            ))
        })?;
        Snapshot::whole(&serde_bytes::ByteBuf::from(pickled))
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        if snapshot.is_empty() {
            return Ok(());
        }
        let pickled: serde_bytes::ByteBuf = snapshot.decode_whole()?;
        let state = Python::attach(|py| {
            let loads = py.import("pickle")?.getattr("loads")?;
            loads
                .call1((pyo3::types::PyBytes::new(py, &pickled),))
                .map(Bound::unbind)
        })
        .map_err(|e| OperatorError::Failed(format!("a state cannot be unpickled: {e}")))?;
        self.state = Some(state);
        Ok(())
    }

    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let tuple = expect_tuple::<I>(port, tuple)?;
        Python::attach(|py| {
            self.one(py, tuple)
                .map_err(|e| self.failures.fail(py, &self.name, e))
        })?;
        out.emit_batch(0, &mut self.results)
    }

    fn process_batch(
        &mut self,
        port: usize,
        batch: BatchRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        Python::attach(|py| {
            let mut each = |tuple: &I| {
                self.one(py, tuple)
                    .map_err(|e| self.failures.fail(py, &self.name, e))
            };
            match batch.as_slice::<I>() {
                Some(tuples) => tuples.iter().try_for_each(&mut each),
                None => batch
                    .iter()
                    .try_for_each(|tuple| each(expect_tuple::<I>(port, tuple)?)),
            }
        })?;
        out.emit_batch(0, &mut self.results)
    }
}

/// The running count of each key of a keyed Python stream, as an `int`: of its key-by's
/// `(key, field)` pairs, or of the values themselves where they are their own keys.
#[derive(Clone, Copy, Debug)]
pub struct Tally;

impl<T> Aggregate<T> for Tally {
    type Acc = i64;
    type Out = Value;
    fn init(&self) -> i64 {
        0
    }
    fn add(&self, acc: &mut i64, _tuple: &T) {
        *acc += 1;
    }
    fn merge(&self, acc: &mut i64, other: &i64) {
        *acc += other;
    }
    fn result(&self, acc: &i64) -> Value {
        Value::Int(*acc)
    }
}

/// The running sum of each key's values: an `int` while every value is an int (or bool) and
/// the sum fits 64 bits, a `float` after a float or beyond 64 bits. The key-by before it lets
/// only numbers through ([`Step::KeyBy`] `numeric`); `timed`: its pairs carry event times.
#[derive(Clone, Copy, Debug)]
pub struct Total {
    /// The pairs' values are `(field, t)`.
    pub timed: bool,
}

impl Total {
    /// `acc + value` for numbers; anything else leaves `acc` as it is.
    fn plus(acc: &Value, value: &Value) -> Value {
        let int = |v: &Value| match v {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(i64::from(*b)),
            _ => None,
        };
        if let Some(sum) = int(acc).zip(int(value)).and_then(|(a, b)| a.checked_add(b)) {
            return Value::Int(sum);
        }
        match as_float(acc).zip(as_float(value)) {
            Some((a, b)) => Value::Float(a + b),
            None => acc.clone(),
        }
    }
}

impl Aggregate<(Value, Value)> for Total {
    type Acc = Value;
    type Out = Value;
    fn init(&self) -> Value {
        Value::Int(0)
    }
    fn add(&self, acc: &mut Value, tuple: &(Value, Value)) {
        *acc = Total::plus(acc, field_of(tuple, self.timed));
    }
    fn merge(&self, acc: &mut Value, other: &Value) {
        *acc = Total::plus(acc, other);
    }
    fn result(&self, acc: &Value) -> Value {
        acc.clone()
    }
}

/// A number as a float, for comparing and averaging ints and floats alike.
fn as_float(value: &Value) -> Option<f64> {
    match value {
        Value::Int(i) => Some(*i as f64),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::Float(f) => Some(*f),
        _ => None,
    }
}

/// The least (or, with `greatest`, the greatest) of each key's values in a window, as the
/// value itself (an int stays an int); `None` where the window held no number. The key-by
/// before it lets only numbers through.
#[derive(Clone, Copy, Debug)]
pub struct Extreme {
    /// The pairs' values are `(field, t)`.
    pub timed: bool,
    /// The greatest instead of the least.
    pub greatest: bool,
}

impl Extreme {
    /// Whether `candidate` replaces `kept`.
    fn beats(&self, candidate: &Value, kept: &Value) -> bool {
        match (as_float(candidate), as_float(kept)) {
            (Some(c), Some(k)) => !c.is_nan() && (c > k) == self.greatest && c != k,
            (Some(c), None) => !c.is_nan(),
            _ => false,
        }
    }
}

impl Aggregate<(Value, Value)> for Extreme {
    type Acc = Value;
    type Out = Value;
    fn init(&self) -> Value {
        Value::None
    }
    fn add(&self, acc: &mut Value, tuple: &(Value, Value)) {
        self.merge(acc, field_of(tuple, self.timed));
    }
    fn merge(&self, acc: &mut Value, other: &Value) {
        if self.beats(other, acc) {
            *acc = other.clone();
        }
    }
    fn result(&self, acc: &Value) -> Value {
        acc.clone()
    }
}

/// The mean of each key's values in a window, a float. The key-by before it lets only
/// numbers through.
#[derive(Clone, Copy, Debug)]
pub struct Average {
    /// The pairs' values are `(field, t)`.
    pub timed: bool,
}

impl Aggregate<(Value, Value)> for Average {
    /// The sum and the count.
    type Acc = (f64, u64);
    type Out = Value;
    fn init(&self) -> (f64, u64) {
        (0.0, 0)
    }
    fn add(&self, acc: &mut (f64, u64), tuple: &(Value, Value)) {
        if let Some(x) = as_float(field_of(tuple, self.timed)) {
            *acc = (acc.0 + x, acc.1 + 1);
        }
    }
    fn merge(&self, acc: &mut (f64, u64), other: &(f64, u64)) {
        *acc = (acc.0 + other.0, acc.1 + other.1);
    }
    fn result(&self, acc: &(f64, u64)) -> Value {
        Value::Float(acc.0 / acc.1 as f64)
    }
}

/// Each key's values in a window, in the order they arrived, as a tuple.
#[derive(Clone, Copy, Debug)]
pub struct Gather {
    /// The pairs' values are `(field, t)`.
    pub timed: bool,
}

impl Aggregate<(Value, Value)> for Gather {
    type Acc = Vec<Value>;
    type Out = Value;
    fn init(&self) -> Vec<Value> {
        Vec::new()
    }
    fn add(&self, acc: &mut Vec<Value>, tuple: &(Value, Value)) {
        acc.push(field_of(tuple, self.timed).clone());
    }
    fn merge(&self, acc: &mut Vec<Value>, other: &Vec<Value>) {
        acc.extend(other.iter().cloned());
    }
    fn result(&self, acc: &Vec<Value>) -> Value {
        Value::Tuple(acc.as_slice().into())
    }
}
