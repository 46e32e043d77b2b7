//! The binder: evaluates a query's variables and makes its stream processes.
//!
//! A `select`'s `where` conditions run in dependency order: a condition runs once every
//! variable it reads is bound, whatever its place in the text (the paper's radix2 names `c`
//! before the condition that binds it). `n = 4` binds `n` (or, once `n` is bound, tests
//! equality); `i in iota(1, n)` and `p in a` range over a bag or a finite stream made here;
//! any other condition is a test. Conditions that wait on each other are refused as a cycle.
//! Each binding of the `from` variables that passes every condition gives one result.
//!
//! Stream processes are made as their `sp` calls are evaluated:
//! - `sp(subquery [, cluster [, allocation]])` does not evaluate its subquery: it captures it,
//!   with the current bindings, as a [`Pipeline`] (its leaves `extract(p)`, `merge(ps)` or a
//!   generator) and places a new stream process on a node ([`crate::cluster`]);
//! - `spv(select q from ... where ...)` makes one stream process per binding of the select,
//!   each running `q` under that binding, and is the bag of their handles;
//! - `input(connector, address [, topic])` makes a stream process that reads a connector of
//!   the registry ([`crate::connect`]) and is its stream; `output(s, connector, address [,
//!   topic])` one that runs `s`, writes its elements to the connector and is their stream;
//! - a user function (`create function`) is expanded with its arguments bound to its
//!   parameters.
//!
//! Everything is evaluated in text order and numbered as it is made, so the same text binds to
//! the same stream processes in every process of the job (each PE rebuilds the graph).

use std::collections::{BTreeMap, BTreeSet};

use crate::ast::{
    BinaryOp, ChainLink, Condition, Expr, ExprKind, FunctionDef, Select, Span, TypeKind,
};
use crate::cluster::{Allocation, Allocator, Machine, Node};
use crate::diagnostic::Diagnostic;
use crate::functions::{self, arith, Builtin, BuiltinKind};
use crate::pipeline::{Call, CallKind, Pipeline, Source};
use crate::value::{SpId, Value};

/// The most stream processes one query makes.
pub const MAX_STREAM_PROCESSES: usize = 4096;
/// The most elements a `where` condition ranges over (`i in iota(1, n)`).
pub const MAX_RANGE: usize = 1 << 20;
/// The most bindings one `select` makes.
pub const MAX_BINDINGS: usize = 1 << 20;
/// How deeply user functions may call each other.
pub const MAX_DEPTH: usize = 64;

/// One stream process of a query.
#[derive(Clone)]
pub struct StreamProcess {
    /// Its handle: its index among the query's stream processes.
    pub id: SpId,
    /// Its subquery.
    pub pipeline: Pipeline,
    /// The cluster it was asked for (`None`: any).
    pub cluster: Option<String>,
    /// Its node's number in that cluster.
    pub node: usize,
    /// Its node.
    pub place: Node,
    /// The connector address its results are also written to (`output(...)`).
    pub output: Option<String>,
}

/// What a query binds to: its stream processes and what the client evaluates.
pub struct BoundQuery {
    /// The stream processes, by handle.
    pub sps: Vec<StreamProcess>,
    /// The query's result.
    pub result: QueryResult,
}

/// A query's result, as the client computes it.
pub enum QueryResult {
    /// Values known when the query is bound (no stream process reads them).
    Values(Vec<Value>),
    /// A stream the client runs: over the stream processes' results, or made here.
    Stream(Pipeline),
}

/// What an expression is bound to.
#[derive(Clone)]
enum Bound {
    Value(Value),
    Stream(Pipeline),
    Allocation(Allocation),
}

/// An allocation and where it is written (else the cluster's name; `None`: neither is).
type Allocated = (Allocation, Option<Span>);

/// The variables bound so far, by their name in lower case.
type Env = BTreeMap<String, Bound>;

/// The binder of one query.
pub struct Binder<'a> {
    functions: &'a BTreeMap<String, FunctionDef>,
    allocator: Allocator<'a>,
    sps: Vec<StreamProcess>,
    depth: usize,
}

/// A diagnostic at `span`, labelled `here` (the caret's line says which part of the text).
/// Refuses a call of `name` with `given` arguments unless `range` holds it.
fn check_arity(
    name: &str,
    given: usize,
    range: std::ops::RangeInclusive<usize>,
    span: &Span,
) -> Result<(), Diagnostic> {
    if range.contains(&given) {
        return Ok(());
    }
    let wanted = if range.start() == range.end() {
        range.start().to_string()
    } else {
        format!("{} to {}", range.start(), range.end())
    };
    Err(error(
        format!("{name} takes {wanted} argument(s), not {given}"),
        span,
    ))
}

/// What a stream process runs: a stream's pipeline, or a stream of one value; an allocation
/// is refused with `refusal`.
fn subquery(bound: Bound, refusal: &str, span: &Span) -> Result<Pipeline, Diagnostic> {
    match bound {
        Bound::Stream(p) => Ok(p),
        Bound::Value(v) => Ok(Pipeline::new(Source::Values(vec![v]))),
        Bound::Allocation(_) => Err(error(refusal, span)),
    }
}

fn error(message: impl Into<String>, span: &Span) -> Diagnostic {
    Diagnostic::new(message, span.clone()).with_label("here")
}

/// A diagnostic at `span` with its own label.
fn labelled(message: impl Into<String>, span: &Span, label: &str) -> Diagnostic {
    Diagnostic::new(message, span.clone()).with_label(label)
}

impl<'a> Binder<'a> {
    /// A binder for a query on `machine`, with the user functions `functions` (by name in
    /// lower case) beside the built-ins.
    pub fn new(functions: &'a BTreeMap<String, FunctionDef>, machine: &'a Machine) -> Self {
        Self {
            functions,
            allocator: Allocator::new(machine),
            sps: Vec::new(),
            depth: 0,
        }
    }

    /// Binds the query `expr`.
    pub fn bind(mut self, expr: &Expr) -> Result<BoundQuery, Diagnostic> {
        let env = Env::new();
        let result = match &expr.kind {
            ExprKind::Select(select) => {
                let mut results = Vec::new();
                for env in self.bindings(select, &env)? {
                    results.push(self.eval(&select.result, &env)?);
                }
                self.top_level(results, &select.result.span)?
            }
            _ => match self.eval(expr, &env)? {
                Bound::Value(v) => QueryResult::Values(vec![v]),
                Bound::Stream(p) => QueryResult::Stream(p),
                Bound::Allocation(_) => {
                    return Err(error("an allocation sequence is not a query", &expr.span))
                }
            },
        };
        Ok(BoundQuery {
            sps: self.sps,
            result,
        })
    }

    /// The result of a top-level select: its values, or the one stream it gives, or the
    /// streams of several bindings merged when each reads stream processes directly.
    fn top_level(&self, results: Vec<Bound>, span: &Span) -> Result<QueryResult, Diagnostic> {
        let mut values = Vec::new();
        let mut streams = Vec::new();
        for result in results {
            match result {
                Bound::Value(v) => values.push(v),
                Bound::Stream(p) => streams.push(p),
                Bound::Allocation(_) => {
                    return Err(error(
                        "an allocation sequence is not a query's result",
                        span,
                    ))
                }
            }
        }
        if streams.is_empty() {
            return Ok(QueryResult::Values(values));
        }
        if values.is_empty() && streams.len() == 1 {
            return Ok(QueryResult::Stream(streams.remove(0)));
        }
        let mut sps = Vec::new();
        for stream in &streams {
            if !stream.calls.is_empty() || stream.producers().is_empty() || !values.is_empty() {
                return Err(error(
                    "the select gives several streams that are not plain extracts; write \
                     merge(spv(select ...)) to combine them",
                    span,
                ));
            }
            sps.extend_from_slice(stream.producers());
        }
        Ok(QueryResult::Stream(Pipeline::new(Source::Producers {
            sps,
            merge: true,
        })))
    }

    /// Every binding of `select`'s variables that meets its conditions, in `outer`.
    fn bindings(&mut self, select: &Select, outer: &Env) -> Result<Vec<Env>, Diagnostic> {
        let declared: BTreeSet<String> = select
            .decls
            .iter()
            .map(|d| d.name.name.to_lowercase())
            .collect();
        let order = order(&select.conditions, &declared)?;
        // The select's own variables hide outer ones of the same name.
        let mut start = outer.clone();
        start.retain(|name, _| !declared.contains(name));
        let mut envs = vec![start];
        for &i in &order {
            let condition = &select.conditions[i];
            let mut next = Vec::new();
            for env in envs {
                match condition {
                    Condition::Equals { left, right, span } => {
                        match binding_of(left, right, &declared) {
                            Some((var, value)) if !env.contains_key(&var) => {
                                let v = self.eval(value, &env)?;
                                let mut env = env;
                                env.insert(var, v);
                                next.push(env);
                            }
                            _ => {
                                let (l, r) = (self.eval(left, &env)?, self.eval(right, &env)?);
                                if equal(&l, &r, span)? {
                                    next.push(env);
                                }
                            }
                        }
                    }
                    Condition::In { var, over, .. } => {
                        for element in self.elements(over, &env)? {
                            let mut env = env.clone();
                            env.insert(var.name.to_lowercase(), Bound::Value(element));
                            next.push(env);
                        }
                    }
                    Condition::Test(test) => {
                        if truth(&self.eval(test, &env)?, &test.span)? {
                            next.push(env);
                        }
                    }
                }
                if next.len() > MAX_BINDINGS {
                    return Err(error(
                        format!("the select has more than {MAX_BINDINGS} bindings"),
                        condition_span(condition),
                    ));
                }
            }
            envs = next;
        }
        // A declared variable no condition binds stays unbound; reading it is an error then.
        Ok(envs)
    }

    /// The elements `over` ranges over: a bag's, or a finite stream's made here.
    fn elements(&mut self, over: &Expr, env: &Env) -> Result<Vec<Value>, Diagnostic> {
        match self.eval(over, env)? {
            Bound::Value(Value::Bag(items)) => Ok(items),
            Bound::Value(other) => Err(error(
                format!(
                    "'in' ranges over a bag or a stream, not {}",
                    other.type_name()
                ),
                &over.span,
            )),
            Bound::Stream(p) if !p.producers().is_empty() => Err(error(
                "'in' cannot range over a stream process's stream: it runs only once the query \
                 does",
                &over.span,
            )),
            Bound::Stream(p) => {
                let mut items = Vec::new();
                let mut too_many = false;
                p.run_here(&|| false, &mut |v| {
                    too_many = items.len() == MAX_RANGE;
                    items.push(v);
                    !too_many
                })
                .map_err(|e| error(e.to_string(), &over.span))?;
                if too_many {
                    return Err(error(
                        format!("'in' ranges over at most {MAX_RANGE} elements"),
                        &over.span,
                    ));
                }
                Ok(items)
            }
            Bound::Allocation(_) => Err(error(
                "'in' cannot range over an allocation sequence",
                &over.span,
            )),
        }
    }

    fn eval(&mut self, expr: &Expr, env: &Env) -> Result<Bound, Diagnostic> {
        let span = &expr.span;
        Ok(match &expr.kind {
            ExprKind::Integer(n) => Bound::Value(Value::Integer(*n)),
            ExprKind::Real(x) => Bound::Value(Value::Real(*x)),
            ExprKind::String(s) => Bound::Value(Value::String(s.clone())),
            ExprKind::Var(name) => {
                env.get(&name.name.to_lowercase()).cloned().ok_or_else(|| {
                    labelled(
                        format!("'{}' is not bound: no condition binds it", name.name),
                        &name.span,
                        "not bound",
                    )
                })?
            }
            ExprKind::Set(items) => {
                let mut values = Vec::new();
                for item in items {
                    values.push(self.value(item, env)?);
                }
                Bound::Value(Value::Bag(values))
            }
            ExprKind::Select(select) => {
                let mut values = Vec::new();
                for env in self.bindings(select, env)? {
                    values.push(self.value(&select.result, &env)?);
                }
                Bound::Value(Value::Bag(values))
            }
            ExprKind::Binary { .. } => {
                let (first, links) = expr.operator_chain();
                let mut bound = self.eval(first, env)?;
                for link in links {
                    bound = self.binary(link, bound, env)?;
                }
                bound
            }
            ExprKind::Negate(inner) => Bound::Value(
                arith::negate(&self.value(inner, env)?).map_err(|e| error(e.to_string(), span))?,
            ),
            ExprKind::Call { function, args } => self.call(&function.name, args, env, span)?,
        })
    }

    /// One operation of a chain, its left operand already bound.
    fn binary(&mut self, link: ChainLink<'_>, left: Bound, env: &Env) -> Result<Bound, Diagnostic> {
        let right = self.eval(link.right, env)?;
        let span = &link.node.span;
        match arith::operator(link.op) {
            Some(builtin) => self.apply(
                builtin,
                vec![(left, &link.left.span), (right, &link.right.span)],
                span,
            ),
            None => {
                let (l, r) = (
                    into_value(left, &link.left.span)?,
                    into_value(right, &link.right.span)?,
                );
                let holds =
                    arith::compare(link.op, &l, &r).map_err(|e| error(e.to_string(), span))?;
                Ok(Bound::Value(Value::Integer(holds as i64)))
            }
        }
    }

    /// `expr`'s value, refusing a stream or an allocation.
    fn value(&mut self, expr: &Expr, env: &Env) -> Result<Value, Diagnostic> {
        let bound = self.eval(expr, env)?;
        into_value(bound, &expr.span)
    }

    fn call(
        &mut self,
        name: &str,
        args: &[Expr],
        env: &Env,
        span: &Span,
    ) -> Result<Bound, Diagnostic> {
        let lower = name.to_lowercase();
        let arity = |range| check_arity(name, args.len(), range, span);
        match lower.as_str() {
            "sp" => {
                arity(1..=3)?;
                let bound = self.eval(&args[0], env)?;
                let pipeline = subquery(
                    bound,
                    "sp runs a subquery, not an allocation",
                    &args[0].span,
                )?;
                let (cluster, allocation) = self.placement(&args[1..], env)?;
                let id = self.new_sp(pipeline, cluster, &allocation, span)?;
                Ok(Bound::Value(Value::Sp(id)))
            }
            "spv" => {
                arity(1..=3)?;
                self.stream_processes(args, env, span)
            }
            "extract" | "merge" => {
                arity(1..=1)?;
                self.producers(&lower, &args[0], env)
            }
            "input" => {
                arity(2..=3)?;
                let address = self.connector_address(args, env, true)?;
                let pipeline = Pipeline::new(Source::Connector { address });
                let id = self.new_sp(pipeline, None, &(Allocation::Next, None), span)?;
                Ok(Bound::Stream(Pipeline::new(Source::Producers {
                    sps: vec![id],
                    merge: false,
                })))
            }
            "output" => {
                arity(3..=4)?;
                let bound = self.eval(&args[0], env)?;
                let pipeline = subquery(
                    bound,
                    "output writes a stream, not an allocation",
                    &args[0].span,
                )?;
                let address = self.connector_address(&args[1..], env, false)?;
                let id = self.new_sp(pipeline, None, &(Allocation::Next, None), span)?;
                self.sps[id].output = Some(address);
                Ok(Bound::Stream(Pipeline::new(Source::Producers {
                    sps: vec![id],
                    merge: false,
                })))
            }
            "streamof" => {
                arity(1..=1)?;
                self.stream_of(name, &args[0], env)
            }
            "urr" | "inpset" | "psetrr" => {
                arity(if lower == "psetrr" { 0..=0 } else { 1..=1 })?;
                self.allocation(&lower, args, env)
            }
            _ => {
                if let Some(def) = self.functions.get(&lower) {
                    return self.expand(def, args, env, span);
                }
                let Some(builtin) = functions::lookup(&lower) else {
                    return Err(labelled(
                        format!("unknown function '{name}'"),
                        span,
                        "not a built-in or a created function",
                    ));
                };
                self.builtin(builtin, args, env, span)
            }
        }
    }

    /// The registry's address that `input`'s (`input` true) or `output`'s arguments `args`
    /// name (connector, address, topic), checked against the registry: a connector it does
    /// not know, or one that cannot go that way, is an error at the connector's name, an
    /// address the connector does not take one at the address.
    fn connector_address(
        &mut self,
        args: &[Expr],
        env: &Env,
        input: bool,
    ) -> Result<String, Diagnostic> {
        let mut parts = Vec::new();
        for arg in args {
            match self.value(arg, env)? {
                Value::String(part) => parts.push(part),
                other => {
                    return Err(error(
                        format!(
                            "a connector and its address are strings, not {}",
                            other.type_name()
                        ),
                        &arg.span,
                    ))
                }
            }
        }
        let address =
            crate::connect::address(&parts[0], &parts[1], parts.get(2).map(String::as_str));
        crate::connect::check(&address, input).map_err(|e| {
            let at = match e {
                sluice_connectors::AddressError::Malformed { .. } => {
                    args[1].span.start..args[args.len() - 1].span.end
                }
                _ => args[0].span.clone(),
            };
            error(e.to_string(), &at)
        })?;
        Ok(address)
    }

    /// `spv(select, ...)`: a stream process for each result of the select, each running that
    /// result as its subquery; a bag of their handles.
    fn stream_processes(
        &mut self,
        args: &[Expr],
        env: &Env,
        span: &Span,
    ) -> Result<Bound, Diagnostic> {
        let ExprKind::Select(select) = &args[0].kind else {
            return Err(error(
                "spv takes a select whose result is each stream process's subquery",
                &args[0].span,
            ));
        };
        let (cluster, allocation) = self.placement(&args[1..], env)?;
        let mut handles = Vec::new();
        for env in self.bindings(select, env)? {
            let bound = self.eval(&select.result, &env)?;
            let pipeline = subquery(
                bound,
                "spv runs subqueries, not allocations",
                &select.result.span,
            )?;
            let id = self.new_sp(pipeline, cluster.clone(), &allocation, span)?;
            handles.push(Value::Sp(id));
        }
        Ok(Bound::Value(Value::Bag(handles)))
    }

    /// `extract(p)` (`function` "extract"), the stream of one stream process, or `merge(ps)`,
    /// the streams of one or more merged.
    fn producers(&mut self, function: &str, arg: &Expr, env: &Env) -> Result<Bound, Diagnostic> {
        let merge = function == "merge";
        let sps = match self.value(arg, env)? {
            Value::Sp(id) => vec![id],
            Value::Bag(items) if merge && !items.is_empty() => items
                .iter()
                .map(|v| match v {
                    Value::Sp(id) => Ok(*id),
                    other => Err(error(
                        format!("merge takes stream processes, not {}", other.type_name()),
                        &arg.span,
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?,
            Value::Bag(_) if merge => return Err(error("merge of no stream process", &arg.span)),
            other => {
                return Err(error(
                    format!(
                        "{function} takes a stream process, not {}",
                        other.type_name()
                    ),
                    &arg.span,
                ))
            }
        };
        Ok(Bound::Stream(Pipeline::new(Source::Producers {
            sps,
            merge,
        })))
    }

    /// `streamOf(x)`: a stream of `x`'s values (a bag's items in turn), or `x` itself when it
    /// is a stream.
    fn stream_of(&mut self, name: &str, arg: &Expr, env: &Env) -> Result<Bound, Diagnostic> {
        let mut pipeline = match self.eval(arg, env)? {
            Bound::Stream(p) => p,
            Bound::Value(Value::Bag(items)) => Pipeline::new(Source::Values(items)),
            Bound::Value(v) => Pipeline::new(Source::Values(vec![v])),
            Bound::Allocation(_) => {
                return Err(error("streamof of an allocation sequence", &arg.span))
            }
        };
        pipeline.calls.push(Call {
            name: name.to_string(),
            kind: CallKind::Pass,
            args: vec![None],
        });
        Ok(Bound::Stream(pipeline))
    }

    /// The allocation sequences: `urr(cluster)`, `inPset(k)` and `psetRR()` (`function` in
    /// lower case, its arity checked).
    fn allocation(
        &mut self,
        function: &str,
        args: &[Expr],
        env: &Env,
    ) -> Result<Bound, Diagnostic> {
        if function == "psetrr" {
            return Ok(Bound::Allocation(Allocation::PsetRoundRobin));
        }
        match (function, self.value(&args[0], env)?) {
            ("urr", Value::String(cluster)) => {
                Ok(Bound::Allocation(Allocation::RoundRobin(cluster)))
            }
            ("urr", other) => Err(error(
                format!("urr takes a cluster's name, not {}", other.type_name()),
                &args[0].span,
            )),
            (_, Value::Integer(k)) => Ok(Bound::Allocation(Allocation::InPset(k))),
            (_, other) => Err(error(
                format!("inPset takes a pset number, not {}", other.type_name()),
                &args[0].span,
            )),
        }
    }

    /// A built-in function's call: evaluated now when its arguments are values, else a call
    /// in the pipeline of its stream argument (a stream function's first argument; the first
    /// stream argument of a scalar function, which is applied to each of its elements).
    fn builtin(
        &mut self,
        builtin: &'static Builtin,
        args: &[Expr],
        env: &Env,
        span: &Span,
    ) -> Result<Bound, Diagnostic> {
        let mut bound = Vec::with_capacity(args.len());
        for arg in args {
            bound.push((self.eval(arg, env)?, &arg.span));
        }
        self.apply(builtin, bound, span)
    }

    /// The built-in `builtin` called at `span` with the arguments `args` (each with where it
    /// is written).
    fn apply(
        &mut self,
        builtin: &'static Builtin,
        args: Vec<(Bound, &Span)>,
        span: &Span,
    ) -> Result<Bound, Diagnostic> {
        let name = builtin.name;
        let mut values = Vec::new();
        let mut stream: Option<(usize, Pipeline)> = None;
        let spans: Vec<&Span> = args.iter().map(|(_, at)| *at).collect();
        for (i, (arg, at)) in args.into_iter().enumerate() {
            match arg {
                Bound::Value(v) => values.push(v),
                Bound::Stream(p) if stream.is_none() => stream = Some((i, p)),
                Bound::Stream(_) => {
                    return Err(error(
                        format!("{name} reads two streams; a subquery reads one (use merge)"),
                        at,
                    ))
                }
                Bound::Allocation(_) => {
                    return Err(error("an allocation sequence is not an argument", at))
                }
            }
        }
        let failed = |e: crate::stage::EvalError| error(e.to_string(), span);
        let call = |kind, at: usize, values: &[Value]| {
            let mut args: Vec<Option<Value>> = values.iter().cloned().map(Some).collect();
            args.insert(at, None);
            Call {
                name: name.to_string(),
                kind,
                args,
            }
        };
        match (builtin.kind, stream) {
            (BuiltinKind::Scalar(f), None) => Ok(Bound::Value(f(&values).map_err(failed)?)),
            (BuiltinKind::Scalar(f), Some((at, mut p))) => {
                p.calls.push(call(CallKind::Map(f), at, &values));
                Ok(Bound::Stream(p))
            }
            (BuiltinKind::Stage(make), Some((0, mut p))) => {
                // Made once here so that arguments it refuses are refused before anything runs.
                make(&values).map_err(failed)?;
                p.calls.push(call(CallKind::Stage(make), 0, &values));
                Ok(Bound::Stream(p))
            }
            (BuiltinKind::Stage(_), None) if matches!(values.first(), Some(Value::Bag(_))) => Ok(
                Bound::Value(functions::apply_to_bag(builtin, &values).map_err(failed)?),
            ),
            (BuiltinKind::Stage(_), _) => Err(error(
                format!("{name} is a stream function: its first argument is a stream or a bag"),
                span,
            )),
            (BuiltinKind::Generator(make), None) => {
                make(&values).map_err(failed)?;
                Ok(Bound::Stream(Pipeline::new(Source::Generator {
                    name: name.to_string(),
                    make,
                    args: values,
                })))
            }
            (BuiltinKind::Generator(_), Some((at, _))) => Err(error(
                format!("{name} makes a stream; its arguments are values, not a stream"),
                spans[at],
            )),
            (BuiltinKind::Special, _) => Err(error(format!("{name} cannot be used here"), span)),
        }
    }

    /// A user function's body, its parameters bound to `args`.
    fn expand(
        &mut self,
        def: &FunctionDef,
        args: &[Expr],
        env: &Env,
        span: &Span,
    ) -> Result<Bound, Diagnostic> {
        if args.len() != def.params.len() {
            return Err(error(
                format!(
                    "{} takes {} argument(s), not {}",
                    def.name.name,
                    def.params.len(),
                    args.len()
                ),
                span,
            ));
        }
        if self.depth == MAX_DEPTH {
            return Err(error(
                format!("user functions call each other more than {MAX_DEPTH} deep"),
                span,
            ));
        }
        let mut inner = Env::new();
        for (param, arg) in def.params.iter().zip(args) {
            let bound = self.eval(arg, env)?;
            inner.insert(param.name.name.to_lowercase(), bound);
        }
        self.depth += 1;
        let body = match &def.body.kind {
            ExprKind::Select(select) => self.bindings(select, &inner).and_then(|envs| {
                let mut results = Vec::new();
                for env in envs {
                    results.push(self.eval(&select.result, &env)?);
                }
                Ok(results)
            }),
            _ => self.eval(&def.body, &inner).map(|b| vec![b]),
        };
        self.depth -= 1;
        let from_select = matches!(def.body.kind, ExprKind::Select(_));
        declared_result(def, body?, from_select, span)
    }

    /// The cluster and allocation of `sp(q, cluster, allocation)`'s optional arguments.
    fn placement(
        &mut self,
        args: &[Expr],
        env: &Env,
    ) -> Result<(Option<String>, Allocated), Diagnostic> {
        let cluster = match args.first() {
            None => None,
            Some(arg) => match self.value(arg, env)? {
                Value::String(name) => Some(name),
                other => {
                    return Err(error(
                        format!("a cluster is named by a string, not {}", other.type_name()),
                        &arg.span,
                    ))
                }
            },
        };
        let allocation = match args.get(1) {
            // A cluster with no node is refused at its name.
            None => (Allocation::Next, args.first().map(|arg| arg.span.clone())),
            Some(arg) => match self.eval(arg, env)? {
                Bound::Allocation(a) => (a, Some(arg.span.clone())),
                Bound::Value(Value::Integer(n)) => (Allocation::Node(n), Some(arg.span.clone())),
                _ => {
                    return Err(error(
                        "an allocation is a node number, urr(cluster), inPset(k) or psetrr()",
                        &arg.span,
                    ))
                }
            },
        };
        Ok((cluster, allocation))
    }

    fn new_sp(
        &mut self,
        pipeline: Pipeline,
        cluster: Option<String>,
        (allocation, allocation_span): &Allocated,
        span: &Span,
    ) -> Result<SpId, Diagnostic> {
        if self.sps.len() == MAX_STREAM_PROCESSES {
            return Err(error(
                format!("the query makes more than {MAX_STREAM_PROCESSES} stream processes"),
                span,
            ));
        }
        let (node, place) = self
            .allocator
            .allocate(cluster.as_deref(), allocation)
            .map_err(|reason| {
                labelled(
                    reason,
                    allocation_span.as_ref().unwrap_or(span),
                    "no available node",
                )
            })?;
        let id = self.sps.len();
        self.sps.push(StreamProcess {
            id,
            pipeline,
            cluster,
            node,
            place,
            output: None,
        });
        Ok(id)
    }
}

/// A bound value, refusing a stream or an allocation (written at `span`).
fn into_value(bound: Bound, span: &Span) -> Result<Value, Diagnostic> {
    match bound {
        Bound::Value(v) => Ok(v),
        Bound::Stream(_) => Err(error(
            "a stream where a value is expected (a bag of streams is written with spv)",
            span,
        )),
        Bound::Allocation(_) => Err(error(
            "an allocation sequence where a value is expected",
            span,
        )),
    }
}

/// A user function's result as its declaration says, from what its body gave (`results`: a
/// select's, one per binding; else the body's one value). `-> stream`: a stream of the
/// select's values, or the one stream it gives (a bag body: a stream of its elements);
/// `-> bag of T`: a bag of the select's values; `-> object`: the one result, else a bag of
/// them; any other type: the one value its select gives.
fn declared_result(
    def: &FunctionDef,
    mut results: Vec<Bound>,
    from_select: bool,
    span: &Span,
) -> Result<Bound, Diagnostic> {
    let name = &def.name.name;
    let count = results.len();
    let values = |results: Vec<Bound>| {
        results
            .into_iter()
            .map(|r| match r {
                Bound::Value(v) => Ok(v),
                _ => Err(error(
                    format!(
                        "{name}'s select gives {count} results that are not all values; a \
                         function gives one stream"
                    ),
                    span,
                )),
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let kind = &def.result.kind;
    if !from_select {
        return Ok(match (kind, results.remove(0)) {
            (TypeKind::Stream, Bound::Value(Value::Bag(items))) => {
                Bound::Stream(Pipeline::new(Source::Values(items)))
            }
            (_, result) => result,
        });
    }
    let one = count == 1;
    match kind {
        TypeKind::Stream if one && matches!(results[0], Bound::Stream(_)) => Ok(results.remove(0)),
        TypeKind::Stream => Ok(Bound::Stream(Pipeline::new(Source::Values(values(
            results,
        )?)))),
        TypeKind::BagOf(_) => Ok(Bound::Value(Value::Bag(values(results)?))),
        TypeKind::Object if !one => Ok(Bound::Value(Value::Bag(values(results)?))),
        _ if one => Ok(results.remove(0)),
        declared => Err(error(
            format!(
                "{name} is declared to return one {}, but its select gives {count} results",
                crate::types::Type::from(declared)
            ),
            span,
        )),
    }
}

/// The span of a condition.
fn condition_span(condition: &Condition) -> &Span {
    match condition {
        Condition::Equals { span, .. } | Condition::In { span, .. } => span,
        Condition::Test(e) => &e.span,
    }
}

/// `var = value` where `var` is declared here (on either side).
fn binding_of<'e>(
    left: &'e Expr,
    right: &'e Expr,
    declared: &BTreeSet<String>,
) -> Option<(String, &'e Expr)> {
    let declared_var = |e: &Expr| match &e.kind {
        ExprKind::Var(name) if declared.contains(&name.name.to_lowercase()) => {
            Some(name.name.to_lowercase())
        }
        _ => None,
    };
    declared_var(left)
        .map(|v| (v, right))
        .or_else(|| declared_var(right).map(|v| (v, left)))
}

/// The variables a condition binds and the declared variables it reads (with where).
fn binds_and_reads(
    condition: &Condition,
    declared: &BTreeSet<String>,
) -> (Option<String>, Vec<(String, Span)>) {
    let mut reads = Vec::new();
    let binds = match condition {
        Condition::Equals { left, right, .. } => match binding_of(left, right, declared) {
            Some((var, value)) => {
                free_vars(value, declared, &mut reads);
                Some(var)
            }
            None => {
                free_vars(left, declared, &mut reads);
                free_vars(right, declared, &mut reads);
                None
            }
        },
        Condition::In { var, over, .. } => {
            free_vars(over, declared, &mut reads);
            Some(var.name.to_lowercase())
        }
        Condition::Test(e) => {
            free_vars(e, declared, &mut reads);
            None
        }
    };
    (binds, reads)
}

/// The order conditions run in: each once the variables it reads are bound, earliest in the
/// text first among those ready.
fn order(conditions: &[Condition], declared: &BTreeSet<String>) -> Result<Vec<usize>, Diagnostic> {
    let facts: Vec<_> = conditions
        .iter()
        .map(|c| binds_and_reads(c, declared))
        .collect();
    let bindable: BTreeSet<&String> = facts.iter().filter_map(|(b, _)| b.as_ref()).collect();
    for (_, reads) in &facts {
        if let Some((var, span)) = reads.iter().find(|(v, _)| !bindable.contains(v)) {
            return Err(error(
                format!("'{var}' is declared but no condition binds it"),
                span,
            ));
        }
    }
    let mut bound: BTreeSet<String> = BTreeSet::new();
    let mut order = Vec::new();
    let mut pending: Vec<usize> = (0..conditions.len()).collect();
    while !pending.is_empty() {
        let ready = pending
            .iter()
            .position(|&i| facts[i].1.iter().all(|(v, _)| bound.contains(v)));
        let Some(at) = ready else {
            let names: BTreeSet<&str> = pending
                .iter()
                .filter_map(|&i| facts[i].0.as_deref())
                .collect();
            let names: Vec<&str> = names.into_iter().collect();
            return Err(labelled(
                format!(
                    "the conditions binding {} depend on each other in a cycle",
                    names.join(", ")
                ),
                condition_span(&conditions[pending[0]]),
                "waits on a variable bound only after it",
            ));
        };
        let i = pending.remove(at);
        if let Some(var) = &facts[i].0 {
            bound.insert(var.clone());
        }
        order.push(i);
    }
    Ok(order)
}

/// Adds the variables of `declared` that `expr` reads to `out` (a nested select's own
/// variables hide outer ones of the same name).
fn free_vars(expr: &Expr, declared: &BTreeSet<String>, out: &mut Vec<(String, Span)>) {
    match &expr.kind {
        ExprKind::Integer(_) | ExprKind::Real(_) | ExprKind::String(_) => {}
        ExprKind::Var(name) => {
            let lower = name.name.to_lowercase();
            if declared.contains(&lower) {
                out.push((lower, name.span.clone()));
            }
        }
        ExprKind::Call { args, .. } => args.iter().for_each(|a| free_vars(a, declared, out)),
        ExprKind::Set(items) => items.iter().for_each(|a| free_vars(a, declared, out)),
        ExprKind::Binary { left, right, .. } => {
            free_vars(left, declared, out);
            free_vars(right, declared, out);
        }
        ExprKind::Negate(inner) => free_vars(inner, declared, out),
        ExprKind::Select(select) => {
            let mut visible = declared.clone();
            for d in &select.decls {
                visible.remove(&d.name.name.to_lowercase());
            }
            free_vars(&select.result, &visible, out);
            for c in &select.conditions {
                match c {
                    Condition::Equals { left, right, .. } => {
                        free_vars(left, &visible, out);
                        free_vars(right, &visible, out);
                    }
                    Condition::In { over, .. } => free_vars(over, &visible, out),
                    Condition::Test(e) => free_vars(e, &visible, out),
                }
            }
        }
    }
}

/// Whether two bound values are equal (`n = 4` once `n` is bound).
fn equal(left: &Bound, right: &Bound, span: &Span) -> Result<bool, Diagnostic> {
    match (left, right) {
        (Bound::Value(l), Bound::Value(r)) => arith::compare(BinaryOp::NotEqual, l, r)
            .map(|different| !different)
            .map_err(|e| error(e.to_string(), span)),
        _ => Err(error("only values can be compared", span)),
    }
}

/// Whether a test's value holds: a non-zero number.
fn truth(value: &Bound, span: &Span) -> Result<bool, Diagnostic> {
    match value {
        Bound::Value(Value::Integer(n)) => Ok(*n != 0),
        Bound::Value(Value::Real(x)) => Ok(*x != 0.0),
        _ => Err(error("a condition must be a comparison or a number", span)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::Statement;

    /// Binds the last statement of `text` after defining its functions, on 4 cores.
    fn bind(text: &str) -> Result<BoundQuery, Diagnostic> {
        let machine = Machine::embedded(4);
        let mut functions = BTreeMap::new();
        let mut query = None;
        for statement in crate::parse(text).expect("parses") {
            match statement {
                Statement::CreateFunction(def) => {
                    functions.insert(def.name.name.to_lowercase(), def);
                }
                Statement::Query(expr) => query = Some(expr),
                Statement::Set(_) => {}
            }
        }
        Binder::new(&functions, &machine).bind(&query.expect("a query"))
    }

    fn values(bound: BoundQuery) -> Vec<String> {
        match bound.result {
            QueryResult::Values(values) => values.iter().map(Value::to_string).collect(),
            QueryResult::Stream(p) => {
                let mut out = Vec::new();
                p.run_here(&|| false, &mut |v| {
                    out.push(v.to_string());
                    true
                })
                .unwrap();
                out
            }
        }
    }

    #[test]
    fn conditions_run_once_what_they_read_is_bound() {
        let bound = bind(
            "create function radix2(string s) -> stream as \
             select radixcombine(merge({a,b})) from sp a, sp b, sp c \
             where a=sp(fft(odd(extract(c)))) and b=sp(fft(even(extract(c)))) \
             and c=sp(receiver(s)); radix2('sine:8:2');",
        )
        .unwrap();
        let texts: Vec<String> = bound.sps.iter().map(|sp| sp.pipeline.to_string()).collect();
        assert_eq!(
            texts,
            [
                "receiver('sine:8:2')",
                "fft(odd(extract(sp0)))",
                "fft(even(extract(sp0)))"
            ]
        );
        let QueryResult::Stream(client) = bound.result else {
            panic!("a stream")
        };
        assert_eq!(client.to_string(), "radixcombine(merge({sp1, sp2}))");
    }

    #[test]
    fn a_cycle_and_an_unbound_variable_are_refused_where_they_are() {
        let text = "select x from integer x, integer y where x = y + 1 and y = x;";
        let error = bind(text).err().unwrap();
        assert_eq!(
            error.message,
            "the conditions binding x, y depend on each other in a cycle"
        );
        assert_eq!(&text[error.span], "x = y + 1");
        let text = "select x from integer x, integer y where x = y;";
        let error = bind(text).err().unwrap();
        assert_eq!(error.message, "'y' is declared but no condition binds it");
    }

    #[test]
    fn spv_makes_a_stream_process_per_binding_on_its_allocation() {
        let bound = bind(
            "select extract(c) from bag of sp a, sp c, integer n \
             where c=sp(count(merge(a)), 'bg', 0) \
             and a=spv(select gen_array(10, i) from integer i where i in iota(1, n), \
                       'be', urr('be')) and n = 3;",
        )
        .unwrap();
        let nodes: Vec<usize> = bound.sps.iter().map(|sp| sp.node).collect();
        // a's three on nodes 0, 1, 2 (round robin from 0), then c on node 0.
        assert_eq!(nodes, [0, 1, 2, 0]);
        assert_eq!(
            bound.sps[3].pipeline.to_string(),
            "count(merge({sp0, sp1, sp2}))"
        );
        assert_eq!(bound.sps[2].pipeline.to_string(), "gen_array(10, 3)");
    }

    #[test]
    fn values_nested_selects_and_local_streams_are_computed_here() {
        assert_eq!(
            values(bind("select i * 2 from integer i where i in iota(1, 3) and i != 2;").unwrap()),
            ["2", "6"]
        );
        assert_eq!(
            values(bind("sum(select i from integer i where i in iota(1, 4));").unwrap()),
            ["10"]
        );
        assert_eq!(values(bind("count(iota(1, 5));").unwrap()), ["5"]);
        assert_eq!(values(bind("{1, 'a'};").unwrap()), ["{1, a}"]);
    }

    #[test]
    fn extract_of_a_value_names_its_type() {
        let error = bind("extract(4);").err().unwrap();
        assert_eq!(error.message, "extract takes a stream process, not integer");
    }
}
