//! The type checker: names and types of a statement, before anything runs.
//!
//! [`check`] resolves every variable against the declarations of the `select`s around it
//! and the parameters of the function being defined, every call against the built-ins
//! ([`crate::functions`]) and the user's functions ([`Functions`]), and types every
//! expression with the rules of [`crate::types`]. It reports, each with the span of what it
//! refuses:
//! - an unknown function or variable, with the nearest known name as a hint (`unknown
//!   function 'mege'`, `did you mean 'merge'?`);
//! - a wrong number of arguments (`extract expects 1 argument, found 2`);
//! - an argument of the wrong type, naming both (`extract expects sp, found integer`);
//! - a binding that does not fit its declaration (`'a' is declared sp but bound to
//!   integer`), a range over something that is not a bag or a stream, a declared variable
//!   that no condition binds, a condition that is not a comparison;
//! - a function whose body does not give its declared result type.
//!
//! The type of a `select`: a bag of its result's type, one element for each binding of its
//! variables; but a `select` without range conditions (`in`) whose result is a stream is that
//! stream (`select extract(c) from sp c where c = sp(...)`). So the subqueries of `spv` are a
//! bag of streams (`select gen_array(...) from integer i where i in iota(1, n)`).
//!
//! A scalar built-in given a stream where it expects a value is lifted over it
//! ([`functions::lifted_argument`]); [`Typing`] keeps the type of every expression (by
//! span), so the binder can ask the same rule which calls are lifted. A user's function is
//! not lifted: its arguments must have its parameters' types.

use std::collections::{BTreeMap, HashMap};

use crate::ast::{
    BinaryOp, ChainLink, Condition, Expr, ExprKind, FunctionDef, Ident, Param, Select, Span,
    Statement,
};
use crate::diagnostic::Diagnostic;
use crate::functions::{self, arith, Builtin, BuiltinKind};
use crate::types::Type;

/// A function defined with `create function`.
#[derive(Debug, Clone, PartialEq)]
pub struct UserFunction {
    /// Its parameters' names (as written) and types.
    pub params: Vec<(String, Type)>,
    /// Its declared result type.
    pub result: Type,
    /// Its definition, for the binder to evaluate.
    pub definition: FunctionDef,
}

/// The functions a statement may call: the built-ins and those the session defined.
#[derive(Debug, Clone, Default)]
pub struct Functions {
    /// The user's functions by lower-case name.
    user: BTreeMap<String, UserFunction>,
}

/// A function a call names.
#[derive(Debug, Clone, Copy)]
pub enum Function<'a> {
    /// A built-in.
    Builtin(&'static Builtin),
    /// One defined with `create function`.
    User(&'a UserFunction),
}

impl Functions {
    /// The built-ins only.
    pub fn new() -> Self {
        Self::default()
    }

    /// The function `name` names (ignoring case): a built-in, or else a user's.
    pub fn resolve(&self, name: &str) -> Option<Function<'_>> {
        functions::lookup(name)
            .map(Function::Builtin)
            .or_else(|| self.user(name).map(Function::User))
    }

    /// The user's function `name` (ignoring case).
    pub fn user(&self, name: &str) -> Option<&UserFunction> {
        self.user.get(&name.to_lowercase())
    }

    /// Checks a `create function` and adds it (replacing an earlier one of the same name). A
    /// function may call itself.
    pub fn define(&mut self, definition: &FunctionDef) -> Result<(), Vec<Diagnostic>> {
        let (key, function, _) = self.checked(definition)?;
        self.user.insert(key, function);
        Ok(())
    }

    /// Checks a definition: its name, its parameters, and its body against its result type.
    /// The function under its lower-case name, and the typing of its body.
    fn checked(
        &self,
        definition: &FunctionDef,
    ) -> Result<(String, UserFunction, Typing), Vec<Diagnostic>> {
        let name = &definition.name;
        if functions::lookup(&name.name).is_some() {
            return Err(vec![Diagnostic::new(
                format!("'{}' is a built-in function", name.name),
                name.span.clone(),
            )
            .with_label("choose another name")]);
        }
        let function = UserFunction {
            params: definition
                .params
                .iter()
                .map(|param| (param.name.name.clone(), Type::from(&param.ty.kind)))
                .collect(),
            result: Type::from(&definition.result.kind),
            definition: definition.clone(),
        };
        let key = name.name.to_lowercase();
        let mut with_itself = self.clone();
        with_itself.user.insert(key.clone(), function.clone());
        let mut checker = Checker::new(&with_itself);
        checker.declare(&definition.params);
        if let Some(mut body) = checker.expr(&definition.body) {
            // A function of one value may be defined by a select: it gives the select's one
            // result (`create function sq(integer x) -> integer as select x * x`).
            let one_value = !matches!(function.result, Type::Stream(_) | Type::Bag(_));
            if let (true, ExprKind::Select(_), Type::Bag(element)) =
                (one_value, &definition.body.kind, &body)
            {
                body = element.as_ref().clone();
            }
            if !function.result.accepts(&body) {
                checker.error(
                    Diagnostic::new(
                        format!(
                            "{} is declared to return {}, but its body is {body}",
                            name.name, function.result
                        ),
                        definition.body.span.clone(),
                    )
                    .with_label(format!("this is {body}")),
                );
            }
        }
        let typing = checker.finish(function.result.clone())?;
        Ok((key, function, typing))
    }

    /// Every function name, for "did you mean" hints.
    fn names(&self) -> impl Iterator<Item = &str> + '_ {
        let users = self.user.values().map(|f| f.definition.name.name.as_str());
        functions::names().map(|name| -> &str { name }).chain(users)
    }
}

/// What checking a statement found: its type and that of every expression in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Typing {
    /// The statement's type: a query's, a function definition's declared result, a
    /// setting's value's.
    pub result: Type,
    /// The type of each expression, by its span (an expression whose type could not be
    /// known is missing).
    pub types: HashMap<Span, Type>,
}

/// Checks a statement; its type, or every problem found.
pub fn check(statement: &Statement, functions: &Functions) -> Result<Type, Vec<Diagnostic>> {
    check_typed(statement, functions).map(|typing| typing.result)
}

/// [`check`], keeping the type of every expression.
pub fn check_typed(
    statement: &Statement,
    functions: &Functions,
) -> Result<Typing, Vec<Diagnostic>> {
    match statement {
        Statement::Query(expr) | Statement::Set(crate::ast::Setting { value: expr, .. }) => {
            let mut checker = Checker::new(functions);
            let result = checker.expr(expr).unwrap_or(Type::Object);
            checker.finish(result)
        }
        Statement::CreateFunction(definition) => {
            functions.checked(definition).map(|(_, _, typing)| typing)
        }
    }
}

/// A variable in scope.
#[derive(Debug, Clone)]
struct Variable {
    name: String,
    ty: Type,
}

/// The state of one check: the scopes (a function's parameters, then one for each `select`
/// entered), what was found wrong, and the types found.
struct Checker<'f> {
    functions: &'f Functions,
    scopes: Vec<Vec<Variable>>,
    diagnostics: Vec<Diagnostic>,
    types: HashMap<Span, Type>,
}

/// How similar (0 to 1, by edit distance over length) a name must be to a known one for the
/// known one to be offered as what was meant; one edit away is always similar enough.
const SIMILAR_ENOUGH: f64 = 0.6;

/// The nearest of `candidates` to `name`, if one is near enough.
fn nearest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let name = name.to_lowercase();
    candidates
        .filter_map(|candidate| {
            let candidate_lower = candidate.to_lowercase();
            let edits = strsim::damerau_levenshtein(&name, &candidate_lower);
            let score = strsim::normalized_damerau_levenshtein(&name, &candidate_lower);
            (score >= SIMILAR_ENOUGH || edits <= 1).then_some((score, candidate))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

fn plural(count: usize, noun: &str) -> String {
    if count == 1 {
        format!("{count} {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

impl<'f> Checker<'f> {
    fn new(functions: &'f Functions) -> Self {
        Self {
            functions,
            scopes: vec![Vec::new()],
            diagnostics: Vec::new(),
            types: HashMap::new(),
        }
    }

    fn error(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }

    fn finish(self, result: Type) -> Result<Typing, Vec<Diagnostic>> {
        if self.diagnostics.is_empty() {
            Ok(Typing {
                result,
                types: self.types,
            })
        } else {
            Err(self.diagnostics)
        }
    }

    /// Adds declarations to the innermost scope, refusing a name declared twice in it.
    fn declare(&mut self, params: &[Param]) {
        for param in params {
            let scope = self.scopes.last_mut().expect("there is always a scope");
            if scope
                .iter()
                .any(|variable| variable.name.eq_ignore_ascii_case(&param.name.name))
            {
                self.error(
                    Diagnostic::new(
                        format!("'{}' is declared twice", param.name.name),
                        param.name.span.clone(),
                    )
                    .with_label("declared again here"),
                );
                continue;
            }
            scope.push(Variable {
                name: param.name.name.clone(),
                ty: Type::from(&param.ty.kind),
            });
        }
    }

    /// The declared type of a variable, innermost scope first; reports an unknown one.
    fn variable(&mut self, ident: &Ident) -> Option<Type> {
        let found = self
            .scopes
            .iter()
            .rev()
            .flatten()
            .find(|variable| variable.name.eq_ignore_ascii_case(&ident.name));
        if let Some(variable) = found {
            return Some(variable.ty.clone());
        }
        let names = self.scopes.iter().flatten().map(|v| v.name.as_str());
        let help = match nearest(&ident.name, names) {
            Some(near) => format!("did you mean '{near}'?"),
            None => format!("declare it in a from clause, as `integer {}`", ident.name),
        };
        self.error(
            Diagnostic::new(
                format!("unknown variable '{}'", ident.name),
                ident.span.clone(),
            )
            .with_label("not declared")
            .with_help(help),
        );
        None
    }

    /// The type of an expression (`None` if it is wrong, which was reported), remembered by
    /// its span.
    fn expr(&mut self, expr: &Expr) -> Option<Type> {
        let ty = match &expr.kind {
            ExprKind::Integer(_) => Some(Type::Integer),
            ExprKind::Real(_) => Some(Type::Real),
            ExprKind::String(_) => Some(Type::String),
            ExprKind::Var(ident) => self.variable(ident),
            ExprKind::Call { function, args } => self.call(function, args, expr.span.clone()),
            ExprKind::Set(elements) => {
                let types: Vec<Option<Type>> = elements.iter().map(|e| self.expr(e)).collect();
                let mut known = types.into_iter().flatten();
                let first = known.next().unwrap_or(Type::Object);
                Some(Type::bag_of(
                    known.fold(first, |joined, ty| joined.join(&ty)),
                ))
            }
            ExprKind::Select(select) => self.select(select),
            ExprKind::Binary { .. } => {
                let (first, links) = expr.operator_chain();
                let mut ty = self.expr(first);
                for link in links {
                    ty = self.binary(link, ty);
                    if let Some(ty) = &ty {
                        self.types.insert(link.node.span.clone(), ty.clone());
                    }
                }
                ty
            }
            ExprKind::Negate(operand) => {
                let ty = self.expr(operand)?;
                let number = ty.element().filter(|_| ty.is_stream()).unwrap_or(&ty);
                if Type::Number.accepts(number) {
                    Some(ty)
                } else {
                    self.error(
                        Diagnostic::new(
                            format!("- expects number, found {ty}"),
                            operand.span.clone(),
                        )
                        .with_label(format!("this is {ty}")),
                    );
                    None
                }
            }
        };
        if let Some(ty) = &ty {
            self.types.insert(expr.span.clone(), ty.clone());
        }
        ty
    }

    fn call(&mut self, function: &Ident, args: &[Expr], span: Span) -> Option<Type> {
        let arg_types: Vec<Option<Type>> = args.iter().map(|arg| self.expr(arg)).collect();
        match self.functions.resolve(&function.name) {
            Some(Function::Builtin(builtin)) => {
                let args: Vec<&Expr> = args.iter().collect();
                self.builtin_call(builtin.name, builtin, &args, &arg_types, span)
            }
            Some(Function::User(user)) => {
                let params: Vec<Type> = user.params.iter().map(|(_, ty)| ty.clone()).collect();
                let name = &user.definition.name.name;
                let args: Vec<&Expr> = args.iter().collect();
                self.arity(name, params.len(), params.len(), &args, span)?;
                for (position, ((arg, found), expected)) in
                    args.iter().zip(&arg_types).zip(&params).enumerate()
                {
                    if let Some(found) = found {
                        self.argument(name, position, expected, found, arg);
                    }
                }
                Some(user.result.clone())
            }
            None => {
                let help = nearest(&function.name, self.functions.names())
                    .map(|near| format!("did you mean '{near}'?"));
                let mut diagnostic = Diagnostic::new(
                    format!("unknown function '{}'", function.name),
                    function.span.clone(),
                )
                .with_label("no function of this name");
                if let Some(help) = help {
                    diagnostic = diagnostic.with_help(help);
                }
                self.error(diagnostic);
                None
            }
        }
    }

    /// Checks the number of arguments (from `required` to `allowed`).
    fn arity(
        &mut self,
        name: &str,
        required: usize,
        allowed: usize,
        args: &[&Expr],
        span: Span,
    ) -> Option<()> {
        if (required..=allowed).contains(&args.len()) {
            return Some(());
        }
        let expected = if required == allowed {
            plural(required, "argument")
        } else {
            format!("{required} to {}", plural(allowed, "argument"))
        };
        let span = match args.get(allowed..) {
            Some([first, .., last]) => first.span.start..last.span.end,
            Some([only]) => only.span.clone(),
            _ => span,
        };
        let label = if args.len() > allowed {
            "too many arguments"
        } else {
            "too few arguments"
        };
        self.error(
            Diagnostic::new(
                format!("{name} expects {expected}, found {}", args.len()),
                span,
            )
            .with_label(label),
        );
        None
    }

    /// Checks one argument against its parameter's type.
    fn argument(
        &mut self,
        function: &str,
        position: usize,
        expected: &Type,
        found: &Type,
        arg: &Expr,
    ) {
        if !expected.accepts(found) {
            self.error(
                Diagnostic::new(
                    format!("{function} expects {expected}, found {found}"),
                    arg.span.clone(),
                )
                .with_label(format!("argument {} of {function}", position + 1)),
            );
        }
    }

    /// A call of a built-in, `shown` in messages by that name (its own, or an operator's).
    fn builtin_call(
        &mut self,
        shown: &str,
        builtin: &Builtin,
        args: &[&Expr],
        arg_types: &[Option<Type>],
        span: Span,
    ) -> Option<Type> {
        self.arity(shown, builtin.required, builtin.params.len(), args, span)?;
        let known: Vec<Type> = arg_types
            .iter()
            .map(|ty| ty.clone().unwrap_or(Type::Object))
            .collect();
        let lifted = functions::lifted_argument(builtin, &known);
        for (position, (arg, found)) in args.iter().zip(arg_types).enumerate() {
            let Some(found) = found else { continue };
            let found = match (lifted == Some(position), found.element()) {
                (true, Some(element)) => element,
                _ => found,
            };
            if is_allocation(builtin, position) {
                let allocation = Type::stream_of(Type::Integer);
                if !Type::Integer.accepts(found) && !allocation.accepts(found) {
                    self.error(
                        Diagnostic::new(
                            format!("{shown} expects integer or {allocation}, found {found}"),
                            arg.span.clone(),
                        )
                        .with_label("the allocation: a node number, or a stream of them"),
                    );
                }
                continue;
            }
            self.argument(shown, position, &builtin.params[position], found, arg);
        }
        Some(builtin.result_type(&known))
    }

    /// The type of one operation of a chain, its left operand's type already known.
    fn binary(&mut self, link: ChainLink<'_>, left_type: Option<Type>) -> Option<Type> {
        let ChainLink {
            op, left, right, ..
        } = link;
        let symbol = match op {
            BinaryOp::Add => "+",
            BinaryOp::Subtract => "-",
            BinaryOp::Multiply => "*",
            BinaryOp::Divide => "/",
            BinaryOp::Less => "<",
            BinaryOp::LessOrEqual => "<=",
            BinaryOp::Greater => ">",
            BinaryOp::GreaterOrEqual => ">=",
            BinaryOp::NotEqual => "!=",
        };
        if let Some(builtin) = arith::operator(op) {
            let types = [left_type, self.expr(right)];
            let span = left.span.start..right.span.end;
            return self.builtin_call(symbol, builtin, &[left, right], &types, span);
        }
        let left_type = left_type?;
        let right_type = self.expr(right)?;
        let comparable = match op {
            BinaryOp::NotEqual => left_type.accepts(&right_type) || right_type.accepts(&left_type),
            _ => {
                let ordered = |ty: &Type| Type::Number.accepts(ty) || Type::String.accepts(ty);
                ordered(&left_type)
                    && ordered(&right_type)
                    && (left_type.accepts(&right_type) || right_type.accepts(&left_type))
            }
        };
        if !comparable {
            self.error(
                Diagnostic::new(
                    format!("{symbol} cannot compare {left_type} and {right_type}"),
                    left.span.start..right.span.end,
                )
                .with_label(format!("{left_type} {symbol} {right_type}")),
            );
            return None;
        }
        Some(Type::Boolean)
    }

    fn select(&mut self, select: &Select) -> Option<Type> {
        self.scopes.push(Vec::new());
        self.declare(&select.decls);
        let mut ranged = false;
        for condition in &select.conditions {
            ranged |= matches!(condition, Condition::In { .. });
            self.condition(condition);
        }
        self.unbound(select);
        let result = self.expr(&select.result);
        self.scopes.pop();
        let result = result?;
        Some(if !ranged && result.is_stream() {
            result
        } else {
            Type::bag_of(result)
        })
    }

    /// Reports the declared variables of a `select` that no condition binds.
    fn unbound(&mut self, select: &Select) {
        let is_var = |expr: &Expr, name: &str| matches!(&expr.kind, ExprKind::Var(var) if var.name.eq_ignore_ascii_case(name));
        for decl in &select.decls {
            let name = &decl.name.name;
            let bound = select.conditions.iter().any(|condition| match condition {
                Condition::Equals { left, right, .. } => is_var(left, name) || is_var(right, name),
                Condition::In { var, .. } => var.name.eq_ignore_ascii_case(name),
                Condition::Test(_) => false,
            });
            if !bound {
                self.error(
                    Diagnostic::new(
                        format!("'{name}' is declared but never bound"),
                        decl.name.span.clone(),
                    )
                    .with_label("declared here")
                    .with_help(format!(
                        "bind it in the where clause: `{name} = ...` or `{name} in ...`"
                    )),
                );
            }
        }
    }

    fn condition(&mut self, condition: &Condition) {
        match condition {
            Condition::Equals { left, right, span } => {
                let (left_type, right_type) = (self.expr(left), self.expr(right));
                let (Some(left_type), Some(right_type)) = (left_type, right_type) else {
                    return;
                };
                let binding = match (&left.kind, &right.kind) {
                    (ExprKind::Var(var), _) => Some((var, &left_type, right, &right_type)),
                    (_, ExprKind::Var(var)) => Some((var, &right_type, left, &left_type)),
                    _ => None,
                };
                match binding {
                    Some((var, declared, value, found)) if !declared.accepts(found) => {
                        self.error(
                            Diagnostic::new(
                                format!(
                                    "'{}' is declared {declared} but bound to {found}",
                                    var.name
                                ),
                                value.span.clone(),
                            )
                            .with_label(format!("this is {found}")),
                        );
                    }
                    Some(_) => {}
                    None if left_type.accepts(&right_type) || right_type.accepts(&left_type) => {}
                    None => self.error(
                        Diagnostic::new(
                            format!("= cannot compare {left_type} and {right_type}"),
                            span.clone(),
                        )
                        .with_label(format!("{left_type} = {right_type}")),
                    ),
                }
            }
            Condition::In { var, over, .. } => {
                let declared = self.variable(var);
                let Some(over_type) = self.expr(over) else {
                    return;
                };
                let Some(element) = over_type.element() else {
                    self.error(
                        Diagnostic::new(
                            format!("in expects a bag or a stream, found {over_type}"),
                            over.span.clone(),
                        )
                        .with_label(format!("this is {over_type}")),
                    );
                    return;
                };
                if let Some(declared) = declared.filter(|declared| !declared.accepts(element)) {
                    self.error(
                        Diagnostic::new(
                            format!(
                                "'{}' is declared {declared} but ranges over {over_type}",
                                var.name
                            ),
                            over.span.clone(),
                        )
                        .with_label(format!("this is {over_type}")),
                    );
                }
            }
            Condition::Test(expr) => {
                if let Some(ty) = self.expr(expr).filter(|ty| *ty != Type::Boolean) {
                    self.error(
                        Diagnostic::new(
                            format!("a condition must be a comparison, found {ty}"),
                            expr.span.clone(),
                        )
                        .with_label(format!("this is {ty}")),
                    );
                }
            }
        }
    }
}

/// Whether argument `position` of the built-in is the allocation of `sp` or `spv`.
fn is_allocation(builtin: &Builtin, position: usize) -> bool {
    matches!(builtin.kind, BuiltinKind::Special)
        && builtin.param_names.get(position) == Some(&"allocation")
}
