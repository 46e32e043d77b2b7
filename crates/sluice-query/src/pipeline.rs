//! What a stream process runs: a subquery compiled to a [`Pipeline`], a stream source (the
//! streams of other stream processes, a generator, or a few values) under a chain of stream
//! functions, and the [`Chain`] of push [`Stage`]s that runs it.
//!
//! The binder captures `sp(fft(odd(extract(c))))` as the source `extract(c)` under the calls
//! `odd` (a scalar function, applied to each element: a map) and `fft`, bottom up. A subquery
//! has one stream source: a call with two stream arguments is refused when it is bound.
//! A connector's lines (`input(...)`) are a source too, read by a stream process of their own.

use std::fmt;

use crate::functions::{map_stage, GeneratorFn, ScalarFn, StageFn};
use crate::stage::{EvalError, Generator, Stage};
use crate::value::{SpId, Value};

/// A subquery compiled for a stream process (or for the client): its source and the calls
/// above it, innermost first.
#[derive(Clone)]
pub struct Pipeline {
    /// Where its elements come from.
    pub source: Source,
    /// The stream functions above the source, innermost first.
    pub calls: Vec<Call>,
}

/// Where a pipeline's elements come from.
#[derive(Clone)]
pub enum Source {
    /// The streams of other stream processes: `extract(p)` (one, `merge` false) or
    /// `merge(ps)`. An element's `from` is its producer's position in the list.
    Producers {
        /// The producers, in order.
        sps: Vec<SpId>,
        /// Written as `merge`.
        merge: bool,
    },
    /// A generator call with its arguments.
    Generator {
        /// Its name.
        name: String,
        /// Its constructor.
        make: GeneratorFn,
        /// Its arguments.
        args: Vec<Value>,
    },
    /// These values, in order (a bag used as a stream, or `streamof` of a value).
    Values(Vec<Value>),
    /// The lines a connector of the registry reads (`input('kafka', '127.0.0.1:9092',
    /// 'lines')`), at this address; the stream process reading it has no call above it
    /// (the binder makes it so), and each line is a string.
    Connector {
        /// The registry's address (`kafka://127.0.0.1:9092/lines`).
        address: String,
    },
}

/// A stream function applied to the stream below it.
#[derive(Clone)]
pub struct Call {
    /// Its name as written, for the plan.
    pub name: String,
    /// How it runs.
    pub kind: CallKind,
    /// Its arguments; `None` where the stream goes.
    pub args: Vec<Option<Value>>,
}

/// How a [`Call`] runs.
#[derive(Clone, Copy)]
pub enum CallKind {
    /// A stream function.
    Stage(StageFn),
    /// A scalar function applied to each element.
    Map(ScalarFn),
    /// `streamof`: the stream itself.
    Pass,
}

impl Pipeline {
    /// A pipeline reading `source` with no call above it.
    pub fn new(source: Source) -> Self {
        Self {
            source,
            calls: Vec::new(),
        }
    }

    /// The stream processes it reads, in port order.
    pub fn producers(&self) -> &[SpId] {
        match &self.source {
            Source::Producers { sps, .. } => sps,
            _ => &[],
        }
    }

    /// Builds the chain of its calls.
    pub fn chain(&self) -> Result<Chain, EvalError> {
        let stages = self
            .calls
            .iter()
            .map(Call::stage)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Chain { stages })
    }

    /// Whether a stream process running it makes the same elements when it is made again
    /// (and so can resume from a checkpoint): one that reads other stream processes or a
    /// few values does, one that reads a generator if the generator does
    /// ([`crate::functions::sources::replays`]).
    pub fn replays(&self) -> bool {
        match &self.source {
            Source::Generator { name, args, .. } => crate::functions::sources::replays(name, args),
            Source::Producers { .. } | Source::Values(_) | Source::Connector { .. } => true,
        }
    }

    /// Its generator, for a pipeline that reads no stream process.
    pub fn generator(&self) -> Result<Option<Box<dyn Generator>>, EvalError> {
        match &self.source {
            Source::Producers { .. } | Source::Connector { .. } => Ok(None),
            Source::Generator { make, args, .. } => make(args).map(Some),
            Source::Values(values) => Ok(Some(Box::new(Values(values.clone().into_iter())))),
        }
    }

    /// Runs a pipeline that reads no stream process in this thread, handing each result to
    /// `out` until it returns `false`. Once `stopped` says so (it is asked before each element
    /// of the generator), the generator stops and the chain ends, as a job's stopped source
    /// does: an aggregate gives its value over the elements so far.
    pub fn run_here(
        &self,
        stopped: &dyn Fn() -> bool,
        out: &mut dyn FnMut(Value) -> bool,
    ) -> Result<(), EvalError> {
        let Some(mut generator) = self.generator()? else {
            return Err(EvalError {
                function: "extract".into(),
                message: "reads a stream process, which runs only in a job".into(),
            });
        };
        let mut chain = self.chain()?;
        let more = std::cell::Cell::new(true);
        let mut emit = |v: Value| {
            if more.get() {
                more.set(out(v));
            }
            Ok(())
        };
        while let Some(value) = (!stopped()).then(|| generator.next()).flatten() {
            chain.push(0, value?, &mut emit)?;
            if !more.get() {
                return Ok(());
            }
        }
        chain.end(&mut emit)
    }
}

impl Call {
    /// Its constant arguments, without the stream's place.
    fn constants(&self) -> Vec<Value> {
        self.args.iter().flatten().cloned().collect()
    }

    fn stage(&self) -> Result<Box<dyn Stage>, EvalError> {
        Ok(match self.kind {
            CallKind::Stage(make) => make(&self.constants())?,
            CallKind::Map(function) => {
                let position = self.args.iter().position(Option::is_none).unwrap_or(0);
                map_stage(function, self.constants(), position)
            }
            CallKind::Pass => Box::new(Pass),
        })
    }
}

/// A pipeline's stages, run by pushing each element through them.
pub struct Chain {
    stages: Vec<Box<dyn Stage>>,
}

/// Where a chain's results go.
pub type Out<'a> = dyn FnMut(Value) -> Result<(), EvalError> + 'a;

impl Chain {
    /// Pushes an element from producer `from` through the stages.
    pub fn push(&mut self, from: usize, value: Value, out: &mut Out<'_>) -> Result<(), EvalError> {
        push(&mut self.stages, from, value, out)
    }

    /// The state of each stage, innermost first, for a checkpoint.
    pub fn state(&self) -> Result<Vec<Vec<u8>>, EvalError> {
        self.stages.iter().map(|stage| stage.state()).collect()
    }

    /// Takes back what [`Chain::state`] gave, on a chain of the same pipeline.
    pub fn restore(&mut self, states: &[Vec<u8>]) -> Result<(), EvalError> {
        if states.len() != self.stages.len() {
            return Err(EvalError {
                function: "restore".into(),
                message: format!(
                    "a checkpoint holds the state of {} stage(s), the stream process has {}",
                    states.len(),
                    self.stages.len()
                ),
            });
        }
        for (stage, state) in self.stages.iter_mut().zip(states) {
            stage.restore(state)?;
        }
        Ok(())
    }

    /// Every producer has ended: ends each stage in turn, innermost first, pushing what each
    /// emits through the stages above it.
    pub fn end(&mut self, out: &mut Out<'_>) -> Result<(), EvalError> {
        for i in 0..self.stages.len() {
            let (ending, above) = self.stages[i..].split_at_mut(1);
            ending[0].end(&mut |v| push(above, 0, v, out))?;
        }
        Ok(())
    }
}

fn push(
    stages: &mut [Box<dyn Stage>],
    from: usize,
    value: Value,
    out: &mut Out<'_>,
) -> Result<(), EvalError> {
    match stages.split_first_mut() {
        None => out(value),
        Some((first, above)) => first.element(from, value, &mut |v| push(above, 0, v, out)),
    }
}

/// `streamof` of a stream: the stream itself.
struct Pass;

impl Stage for Pass {
    fn element(
        &mut self,
        _from: usize,
        value: Value,
        out: &mut crate::stage::Emit<'_>,
    ) -> Result<(), EvalError> {
        out(value)
    }

    fn end(&mut self, _out: &mut crate::stage::Emit<'_>) -> Result<(), EvalError> {
        Ok(())
    }
}

/// A few values as a stream.
struct Values(std::vec::IntoIter<Value>);

impl Generator for Values {
    fn next(&mut self) -> Option<Result<Value, EvalError>> {
        self.0.next().map(Ok)
    }
}

/// A value as SCSQL writes it: strings quoted.
struct Literal<'a>(&'a Value);

impl fmt::Display for Literal<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Value::String(s) => write!(f, "'{}'", s.replace('\'', "''")),
            other => write!(f, "{other}"),
        }
    }
}

/// The subquery as text: `count(merge({sp1, sp2}))`.
impl fmt::Display for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = match &self.source {
            Source::Producers { sps, merge: false } if sps.len() == 1 => {
                format!("extract(sp{})", sps[0])
            }
            Source::Producers { sps, .. } => {
                let names: Vec<String> = sps.iter().map(|p| format!("sp{p}")).collect();
                format!("merge({{{}}})", names.join(", "))
            }
            Source::Generator { name, args, .. } => {
                let args: Vec<String> = args.iter().map(|a| Literal(a).to_string()).collect();
                format!("{name}({})", args.join(", "))
            }
            Source::Values(values) => {
                let values: Vec<String> = values.iter().map(|v| Literal(v).to_string()).collect();
                format!("{{{}}}", values.join(", "))
            }
            Source::Connector { address } => format!("input('{address}')"),
        };
        for call in &self.calls {
            let args: Vec<String> = call
                .args
                .iter()
                .map(|a| a.as_ref().map_or(text.clone(), |v| Literal(v).to_string()))
                .collect();
            text = format!("{}({})", call.name, args.join(", "));
        }
        f.write_str(&text)
    }
}
