//! The syntax tree of SCSQL statements. Every node keeps the byte range of the source text it
//! came from ([`Span`]), so a later stage (the type checker, the binder, a built-in function
//! refusing its argument) can point at the line and column of what it refuses.
//!
//! The language, by example (the paper's radix-2 FFT):
//! ```text
//! create function radix2(string s) -> stream
//! as select radixcombine(merge({a,b}))
//! from sp a, sp b, sp c
//! where a=sp(fft(odd(extract(c))))
//!   and b=sp(fft(even(extract(c))))
//!   and c=sp(receiver(s));
//! ```
//! A statement is a query (`select ...;`, or any expression such as `merge(spv(...));`) or a
//! function definition. A `select` declares variables with types (`sp a`, `bag of sp b`,
//! `integer n`) and its `where` clause is a conjunction of conditions that bind them
//! (`c = sp(...)`, `n = 4`), range them over a bag or stream (`i in iota(1, n)`, `p in a`) or
//! filter (`i > 2`). Conditions may name variables bound by later ones: binding order is
//! found from their dependencies, not from their order in the text.

use std::ops::Range;

/// A byte range in the source text of a statement.
pub type Span = Range<usize>;

/// A name as written, with where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Ident {
    /// The name. SCSQL names are case-insensitive; the parser keeps them as written.
    pub name: String,
    /// Where it is.
    pub span: Span,
}

/// One statement of a query text, ended by `;` (the last one's `;` may be left out).
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    /// A query: its value is printed, element by element for a stream.
    Query(Expr),
    /// `create function NAME(PARAMS) -> TYPE as EXPR;`
    CreateFunction(FunctionDef),
    /// `set NAME = VALUE;`: a driver setting for the queries that follow (buffer size,
    /// single or double buffering, the transport), as the shell's `set` command.
    Set(Setting),
}

/// `create function name(type param, ...) -> type as body`.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionDef {
    /// The function's name.
    pub name: Ident,
    /// Its parameters, in order.
    pub params: Vec<Param>,
    /// The declared type of its result.
    pub result: TypeName,
    /// The body: usually a `select`.
    pub body: Expr,
    /// The whole definition.
    pub span: Span,
}

/// A declared variable or parameter: `integer n`, `bag of sp a`.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// Its type as written.
    pub ty: TypeName,
    /// Its name.
    pub name: Ident,
}

/// A type as written in a declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeName {
    /// Which type.
    pub kind: TypeKind,
    /// Where it is written.
    pub span: Span,
}

/// The types a declaration can name.
#[derive(Debug, Clone, PartialEq)]
pub enum TypeKind {
    /// `integer`.
    Integer,
    /// `real`.
    Real,
    /// `string` (also written `charstring`).
    String,
    /// `sp`: a handle to a stream process.
    Sp,
    /// `stream`: a (possibly infinite) sequence of objects.
    Stream,
    /// `array`: a one-dimensional array of numbers.
    Array,
    /// `object`: any value.
    Object,
    /// `bag of T`.
    BagOf(Box<TypeKind>),
}

/// `set name = value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    /// The setting's name.
    pub name: Ident,
    /// Its value.
    pub value: Expr,
}

/// An expression with its span.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where it is.
    pub span: Span,
}

/// One operator of a chain of binary operators ([`Expr::operator_chain`]).
#[derive(Debug, Clone, Copy)]
pub struct ChainLink<'a> {
    /// The operator's node.
    pub node: &'a Expr,
    /// The operator.
    pub op: BinaryOp,
    /// Its left operand: the chain so far.
    pub left: &'a Expr,
    /// Its right operand.
    pub right: &'a Expr,
}

impl Expr {
    /// The chain of binary operators this expression is the top of (`1 + 2 - 3` is `(1 + 2) -
    /// 3`, whose left operands nest as deep as the chain is long): its first operand, which is
    /// no binary operation, and the operators from the innermost out. The stages that walk the
    /// tree go along a chain in a loop, so that only real nesting takes their stack.
    pub fn operator_chain(&self) -> (&Expr, Vec<ChainLink<'_>>) {
        let mut links = Vec::new();
        let mut first = self;
        while let ExprKind::Binary { op, left, right } = &first.kind {
            links.push(ChainLink {
                node: first,
                op: *op,
                left,
                right,
            });
            first = left;
        }
        links.reverse();
        (first, links)
    }
}

/// The kinds of expression.
#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    /// An integer literal.
    Integer(i64),
    /// A real literal (`1.5`, `2e3`).
    Real(f64),
    /// A string literal, in single or double quotes, its escapes resolved.
    String(String),
    /// A variable or parameter.
    Var(Ident),
    /// `f(args)`: a built-in or user-defined function.
    Call {
        /// The function's name.
        function: Ident,
        /// Its arguments.
        args: Vec<Expr>,
    },
    /// `{a, b}`: a set (bag) written out.
    Set(Vec<Expr>),
    /// `select ... from ... where ...`, as an expression (its value is a bag, or a stream
    /// where its result expression is one).
    Select(Box<Select>),
    /// `left op right`.
    Binary {
        /// The operator.
        op: BinaryOp,
        /// Its left operand.
        left: Box<Expr>,
        /// Its right operand.
        right: Box<Expr>,
    },
    /// `-e`.
    Negate(Box<Expr>),
}

/// Arithmetic and comparison operators, in conditions and expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    /// `+`.
    Add,
    /// `-`.
    Subtract,
    /// `*`.
    Multiply,
    /// `/`.
    Divide,
    /// `<`.
    Less,
    /// `<=`.
    LessOrEqual,
    /// `>`.
    Greater,
    /// `>=`.
    GreaterOrEqual,
    /// `!=` or `<>`.
    NotEqual,
}

/// `select result from decls where conditions`.
#[derive(Debug, Clone, PartialEq)]
pub struct Select {
    /// The expression evaluated for each binding.
    pub result: Expr,
    /// The declared variables (`from`); may be empty.
    pub decls: Vec<Param>,
    /// The conditions of `where`, joined by `and`; may be empty.
    pub conditions: Vec<Condition>,
}

/// One condition of a `where` clause.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// `left = right`: binds a declared variable on one side that is not bound yet to the
    /// other side's value; a test of equality when both sides are bound.
    Equals {
        /// The left side.
        left: Expr,
        /// The right side.
        right: Expr,
        /// The whole condition.
        span: Span,
    },
    /// `var in e`: binds `var` to each element of the bag or finite stream `e` in turn.
    In {
        /// The variable ranged.
        var: Ident,
        /// What it ranges over.
        over: Expr,
        /// The whole condition.
        span: Span,
    },
    /// Any other boolean expression (`i > 2`): a filter.
    Test(Expr),
}
