//! The type checker on the paper's queries and on each class of error it reports. The syntax
//! trees are built by hand (each node gets a span of its own, so a diagnostic's span says
//! which node it points at).

use sluice_query::ast::{
    BinaryOp, Condition, Expr, ExprKind, FunctionDef, Ident, Param, Select, Span, Statement,
    TypeKind, TypeName,
};
use sluice_query::check::{check, check_typed, Functions};
use sluice_query::{Diagnostic, Type};

/// Builds syntax trees, giving every node a span of its own.
#[derive(Default)]
struct Ast {
    next: usize,
}

impl Ast {
    fn span(&mut self) -> Span {
        self.next += 2;
        self.next - 2..self.next - 1
    }

    fn expr(&mut self, kind: ExprKind) -> Expr {
        Expr {
            kind,
            span: self.span(),
        }
    }

    fn ident(&mut self, name: &str) -> Ident {
        Ident {
            name: name.into(),
            span: self.span(),
        }
    }

    fn int(&mut self, n: i64) -> Expr {
        self.expr(ExprKind::Integer(n))
    }

    fn string(&mut self, text: &str) -> Expr {
        self.expr(ExprKind::String(text.into()))
    }

    /// A variable: the expression's span is the name's, as the parser makes it.
    fn var(&mut self, name: &str) -> Expr {
        let ident = self.ident(name);
        Expr {
            span: ident.span.clone(),
            kind: ExprKind::Var(ident),
        }
    }

    fn call(&mut self, name: &str, args: Vec<Expr>) -> Expr {
        let function = self.ident(name);
        self.expr(ExprKind::Call { function, args })
    }

    fn set(&mut self, elements: Vec<Expr>) -> Expr {
        self.expr(ExprKind::Set(elements))
    }

    fn binary(&mut self, op: BinaryOp, left: Expr, right: Expr) -> Expr {
        self.expr(ExprKind::Binary {
            op,
            left: Box::new(left),
            right: Box::new(right),
        })
    }

    fn select(&mut self, result: Expr, decls: Vec<Param>, conditions: Vec<Condition>) -> Expr {
        self.expr(ExprKind::Select(Box::new(Select {
            result,
            decls,
            conditions,
        })))
    }

    fn decl(&mut self, kind: TypeKind, name: &str) -> Param {
        Param {
            ty: TypeName {
                kind,
                span: self.span(),
            },
            name: self.ident(name),
        }
    }

    fn eq(&mut self, name: &str, right: Expr) -> Condition {
        let left = self.var(name);
        Condition::Equals {
            left,
            right,
            span: self.span(),
        }
    }

    fn range(&mut self, name: &str, over: Expr) -> Condition {
        Condition::In {
            var: self.ident(name),
            over,
            span: self.span(),
        }
    }

    /// `sp(subquery, 'cluster', allocation)`.
    fn sp(
        &mut self,
        function: &str,
        subquery: Expr,
        cluster: &str,
        allocation: Option<Expr>,
    ) -> Expr {
        let mut args = vec![subquery, self.string(cluster)];
        args.extend(allocation);
        self.call(function, args)
    }
}

fn bag_of(kind: TypeKind) -> TypeKind {
    TypeKind::BagOf(Box::new(kind))
}

fn only_error(result: Result<Type, Vec<Diagnostic>>) -> Diagnostic {
    let mut diagnostics = result.expect_err("the statement should not check");
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    diagnostics.remove(0)
}

/// The radix2 function of the paper.
fn radix2(ast: &mut Ast) -> FunctionDef {
    let a_b = {
        let (a, b) = (ast.var("a"), ast.var("b"));
        ast.set(vec![a, b])
    };
    let merged = ast.call("merge", vec![a_b]);
    let result = ast.call("radixcombine", vec![merged]);
    let decls = vec![
        ast.decl(TypeKind::Sp, "a"),
        ast.decl(TypeKind::Sp, "b"),
        ast.decl(TypeKind::Sp, "c"),
    ];
    let half = |ast: &mut Ast, which: &str| {
        let c = ast.var("c");
        let extracted = ast.call("extract", vec![c]);
        let half = ast.call(which, vec![extracted]);
        let fft = ast.call("fft", vec![half]);
        ast.call("sp", vec![fft])
    };
    let a = half(ast, "odd");
    let b = half(ast, "even");
    let s = ast.var("s");
    let received = ast.call("receiver", vec![s]);
    let c = ast.call("sp", vec![received]);
    let conditions = vec![ast.eq("a", a), ast.eq("b", b), ast.eq("c", c)];
    let body = ast.select(result, decls, conditions);
    let string = ast.decl(TypeKind::String, "s");
    FunctionDef {
        name: ast.ident("radix2"),
        params: vec![string],
        result: TypeName {
            kind: TypeKind::Stream,
            span: ast.span(),
        },
        body,
        span: ast.span(),
    }
}

#[test]
fn the_radix2_function_checks_and_can_be_called() {
    let mut ast = Ast::default();
    let definition = radix2(&mut ast);
    let statement = Statement::CreateFunction(definition.clone());
    let typing = check_typed(&statement, &Functions::new()).unwrap();
    assert_eq!(typing.result, Type::stream_of(Type::Object));
    let ExprKind::Select(body) = &definition.body.kind else {
        unreachable!()
    };
    // radixcombine of a merge: the FFTs.
    assert_eq!(
        typing.types[&body.result.span],
        Type::stream_of(Type::Complex)
    );
    let mut functions = Functions::new();
    functions.define(&definition).unwrap();
    let source = ast.string("sine:8:4");
    let call = ast.call("RADIX2", vec![source]);
    assert_eq!(
        check(&Statement::Query(call), &functions),
        Ok(Type::stream_of(Type::Object))
    );
    let wrong = ast.int(3);
    let call = ast.call("radix2", vec![wrong.clone()]);
    let error = only_error(check(&Statement::Query(call), &functions));
    assert_eq!(error.message, "radix2 expects string, found integer");
    assert_eq!(error.span, wrong.span);
}

#[test]
fn the_mapreduce_grep_checks() {
    let mut ast = Ast::default();
    let i = ast.var("i");
    let file = ast.call("filename", vec![i]);
    let pattern = ast.string("pattern");
    let grep = ast.call("grep", vec![pattern, file]);
    let decls = vec![ast.decl(TypeKind::Integer, "i")];
    let (one, thousand) = (ast.int(1), ast.int(1000));
    let iota = ast.call("iota", vec![one, thousand]);
    let range = ast.range("i", iota);
    let subqueries = ast.select(grep, decls, vec![range]);
    let processes = ast.call("spv", vec![subqueries.clone()]);
    let query = ast.call("merge", vec![processes]);
    let typing = check_typed(&Statement::Query(query), &Functions::new()).unwrap();
    assert_eq!(typing.result, Type::stream_of(Type::Object));
    assert_eq!(
        typing.types[&subqueries.span],
        Type::bag_of(Type::stream_of(Type::String))
    );
}

/// Queries 1 to 6 of the paper's section 3.2: `two_levels` gives Queries 3 to 6 (the `b`
/// of `count` stream processes), the allocations of `b` and `a` are given.
fn inbound_query(
    ast: &mut Ast,
    two_levels: bool,
    b_allocation: Option<Expr>,
    a_allocation: Expr,
) -> Statement {
    let c = ast.var("c");
    let result = ast.call("extract", vec![c]);
    let mut decls = vec![ast.decl(bag_of(TypeKind::Sp), "a")];
    decls.push(ast.decl(
        if two_levels {
            bag_of(TypeKind::Sp)
        } else {
            TypeKind::Sp
        },
        "b",
    ));
    decls.push(ast.decl(TypeKind::Sp, "c"));
    decls.push(ast.decl(TypeKind::Integer, "n"));
    let (c_body, b) = if two_levels {
        let b = ast.var("b");
        let merged = ast.call("merge", vec![b]);
        let sum = ast.call("sum", vec![merged]);
        let c_body = ast.call("streamof", vec![sum]);
        let p = ast.var("p");
        let extracted = ast.call("extract", vec![p]);
        let count = ast.call("count", vec![extracted]);
        let counted = ast.call("streamof", vec![count]);
        let p_decl = vec![ast.decl(TypeKind::Sp, "p")];
        let a = ast.var("a");
        let range = ast.range("p", a);
        let subqueries = ast.select(counted, p_decl, vec![range]);
        (c_body, ast.sp("spv", subqueries, "bg", b_allocation))
    } else {
        let b = ast.var("b");
        let c_body = ast.call("extract", vec![b]);
        let a = ast.var("a");
        let merged = ast.call("merge", vec![a]);
        let count = ast.call("count", vec![merged]);
        (c_body, ast.sp("sp", count, "bg", b_allocation))
    };
    let c = ast.sp("sp", c_body, "bg", None);
    let (size, count) = (ast.int(3_000_000), ast.int(100));
    let arrays = ast.call("gen_array", vec![size, count]);
    let i_decl = vec![ast.decl(TypeKind::Integer, "i")];
    let (one, n) = (ast.int(1), ast.var("n"));
    let iota = ast.call("iota", vec![one, n]);
    let range = ast.range("i", iota);
    let generators = ast.select(arrays, i_decl, vec![range]);
    let a = ast.sp("spv", generators, "be", Some(a_allocation));
    let four = ast.int(4);
    let conditions = vec![
        ast.eq("c", c),
        ast.eq("b", b),
        ast.eq("a", a),
        ast.eq("n", four),
    ];
    Statement::Query(ast.select(result, decls, conditions))
}

#[test]
fn queries_1_to_6_check() {
    let mut ast = Ast::default();
    let functions = Functions::new();
    for two_levels in [false, true] {
        for b_allocation in ["none", "inPset", "psetrr"] {
            for a_allocation in ["node", "urr"] {
                let b_allocation = match b_allocation {
                    "inPset" => {
                        let one = ast.int(1);
                        Some(ast.call("inPset", vec![one]))
                    }
                    "psetrr" => Some(ast.call("psetrr", vec![])),
                    _ => None,
                };
                let a_allocation = match a_allocation {
                    "urr" => {
                        let be = ast.string("be");
                        ast.call("urr", vec![be])
                    }
                    _ => ast.int(1),
                };
                let query = inbound_query(&mut ast, two_levels, b_allocation, a_allocation);
                assert_eq!(check(&query, &functions), Ok(Type::stream_of(Type::Object)));
            }
        }
    }
}

#[test]
fn the_intra_bluegene_queries_check() {
    let mut ast = Ast::default();
    let functions = Functions::new();
    // Point to point: b counts a's arrays.
    let b = ast.var("b");
    let result = ast.call("extract", vec![b]);
    let decls = vec![ast.decl(TypeKind::Sp, "a"), ast.decl(TypeKind::Sp, "b")];
    let a = ast.var("a");
    let extracted = ast.call("extract", vec![a]);
    let count = ast.call("count", vec![extracted]);
    let counted = ast.call("streamof", vec![count]);
    let zero = ast.int(0);
    let b_sp = ast.sp("sp", counted, "bg", Some(zero));
    let (size, n) = (ast.int(3_000_000), ast.int(100));
    let arrays = ast.call("gen_array", vec![size, n]);
    let one = ast.int(1);
    let a_sp = ast.sp("sp", arrays, "bg", Some(one));
    let conditions = vec![ast.eq("b", b_sp), ast.eq("a", a_sp)];
    let query = Statement::Query(ast.select(result, decls, conditions));
    assert_eq!(check(&query, &functions), Ok(Type::stream_of(Type::Object)));
    // Merge: c counts the arrays of a and b.
    let (a, b) = (ast.var("a"), ast.var("b"));
    let pair = ast.set(vec![a, b]);
    let merged = ast.call("merge", vec![pair]);
    let count = ast.call("count", vec![merged]);
    let typing = check_typed(&Statement::Query(count.clone()), &functions);
    let error = typing.unwrap_err();
    assert_eq!(error.len(), 2, "a and b are not declared here: {error:#?}");
    let decls = vec![
        ast.decl(TypeKind::Sp, "a"),
        ast.decl(TypeKind::Sp, "b"),
        ast.decl(TypeKind::Sp, "c"),
    ];
    let c = ast.var("c");
    let result = ast.call("extract", vec![c]);
    let zero = ast.int(0);
    let c_sp = ast.sp("sp", count, "bg", Some(zero));
    let generator = |ast: &mut Ast, node| {
        let (size, n) = (ast.int(3_000_000), ast.int(100));
        let arrays = ast.call("gen_array", vec![size, n]);
        let node = ast.int(node);
        ast.sp("sp", arrays, "bg", Some(node))
    };
    let (a_sp, b_sp) = (generator(&mut ast, 1), generator(&mut ast, 4));
    let conditions = vec![ast.eq("c", c_sp), ast.eq("a", a_sp), ast.eq("b", b_sp)];
    let query = Statement::Query(ast.select(result, decls, conditions));
    assert_eq!(check(&query, &functions), Ok(Type::stream_of(Type::Object)));
}

#[test]
fn an_unknown_function_suggests_the_nearest_name() {
    let mut ast = Ast::default();
    let set = ast.set(vec![]);
    let call = ast.call("mege", vec![set]);
    let ExprKind::Call { function, .. } = &call.kind else {
        unreachable!()
    };
    let name_span = function.span.clone();
    let error = only_error(check(&Statement::Query(call), &Functions::new()));
    assert_eq!(error.message, "unknown function 'mege'");
    assert_eq!(error.help.as_deref(), Some("did you mean 'merge'?"));
    assert_eq!(error.span, name_span);
    let call = ast.call("frobnicate", vec![]);
    let error = only_error(check(&Statement::Query(call), &Functions::new()));
    assert_eq!(error.help, None);
}

#[test]
fn a_type_error_names_both_types_and_points_at_the_argument() {
    let mut ast = Ast::default();
    let one = ast.int(1);
    let span = one.span.clone();
    let call = ast.call("extract", vec![one]);
    let error = only_error(check(&Statement::Query(call), &Functions::new()));
    assert_eq!(error.message, "extract expects sp, found integer");
    assert_eq!(error.label, "argument 1 of extract");
    assert_eq!(error.span, span);
    // The second argument of gen_array.
    let (size, count) = (ast.int(10), ast.string("ten"));
    let span = count.span.clone();
    let call = ast.call("gen_array", vec![size, count]);
    let error = only_error(check(&Statement::Query(call), &Functions::new()));
    assert_eq!(error.message, "gen_array expects integer, found string");
    assert_eq!(
        (error.label.as_str(), error.span),
        ("argument 2 of gen_array", span)
    );
    // An allocation that is not a node.
    let (query, cluster, node) = (ast.int(1), ast.string("bg"), ast.string("node"));
    let call = ast.call("sp", vec![query, cluster, node]);
    let error = only_error(check(&Statement::Query(call), &Functions::new()));
    assert_eq!(
        error.message,
        "sp expects integer or stream of integer, found string"
    );
}

#[test]
fn arity_errors_say_how_many() {
    let mut ast = Ast::default();
    let (a, b) = (ast.int(1), ast.int(2));
    let extra = b.span.clone();
    let call = ast.call("odd", vec![a, b]);
    let error = only_error(check(&Statement::Query(call), &Functions::new()));
    assert_eq!(error.message, "odd expects 1 argument, found 2");
    assert_eq!(error.span, extra);
    let call = ast.call("sp", vec![]);
    let call_span = call.span.clone();
    let error = only_error(check(&Statement::Query(call), &Functions::new()));
    assert_eq!(error.message, "sp expects 1 to 3 arguments, found 0");
    assert_eq!(error.span, call_span);
}

#[test]
fn bindings_must_fit_their_declarations() {
    let mut ast = Ast::default();
    let a = ast.var("a");
    let result = ast.call("extract", vec![a]);
    let decls = vec![ast.decl(TypeKind::Sp, "a")];
    let one = ast.int(1);
    let span = one.span.clone();
    let bound = ast.eq("a", one);
    let query = ast.select(result, decls, vec![bound]);
    let error = only_error(check(&Statement::Query(query), &Functions::new()));
    assert_eq!(error.message, "'a' is declared sp but bound to integer");
    assert_eq!(error.span, span);
    // A range whose elements do not fit.
    let i = ast.var("i");
    let decls = vec![ast.decl(TypeKind::Sp, "i")];
    let (one, two) = (ast.int(1), ast.int(2));
    let iota = ast.call("iota", vec![one, two]);
    let range = ast.range("i", iota);
    let query = ast.select(i, decls, vec![range]);
    let error = only_error(check(&Statement::Query(query), &Functions::new()));
    assert_eq!(
        error.message,
        "'i' is declared sp but ranges over stream of integer"
    );
    // A range over a number.
    let i = ast.var("i");
    let decls = vec![ast.decl(TypeKind::Integer, "i")];
    let five = ast.int(5);
    let range = ast.range("i", five);
    let query = ast.select(i, decls, vec![range]);
    let error = only_error(check(&Statement::Query(query), &Functions::new()));
    assert_eq!(error.message, "in expects a bag or a stream, found integer");
}

#[test]
fn variables_must_be_declared_and_bound() {
    let mut ast = Ast::default();
    let c = ast.var("cc");
    let span = c.span.clone();
    let result = ast.call("extract", vec![c]);
    let decls = vec![ast.decl(TypeKind::Sp, "c")];
    let received = {
        let name = ast.string("signal");
        let receiver = ast.call("receiver", vec![name]);
        ast.call("sp", vec![receiver])
    };
    let bound = ast.eq("c", received);
    let query = ast.select(result, decls, vec![bound]);
    let error = only_error(check(&Statement::Query(query), &Functions::new()));
    assert_eq!(error.message, "unknown variable 'cc'");
    assert_eq!(error.help.as_deref(), Some("did you mean 'c'?"));
    assert_eq!(error.span, span);
    // Declared, never bound.
    let n = ast.var("n");
    let decls = vec![ast.decl(TypeKind::Integer, "n")];
    let query = ast.select(n, decls, vec![]);
    let error = only_error(check(&Statement::Query(query), &Functions::new()));
    assert_eq!(error.message, "'n' is declared but never bound");
}

#[test]
fn scalars_lift_over_streams_and_operators_are_arithmetic() {
    let mut ast = Ast::default();
    let functions = Functions::new();
    let typed = |ast: &mut Ast, expr: Expr| -> Type {
        let _ = ast;
        check(&Statement::Query(expr), &functions).unwrap()
    };
    let name = ast.string("sine:8:2");
    let received = ast.call("receiver", vec![name]);
    let odd = ast.call("odd", vec![received]);
    let fft = ast.call("fft", vec![odd]);
    assert_eq!(typed(&mut ast, fft), Type::stream_of(Type::Complex));
    let (one, ten) = (ast.int(1), ast.int(10));
    let iota = ast.call("iota", vec![one, ten]);
    let half = ast.expr(ExprKind::Real(0.5));
    let scaled = ast.binary(BinaryOp::Multiply, iota, half);
    assert_eq!(typed(&mut ast, scaled.clone()), Type::stream_of(Type::Real));
    let (size, slide, sum) = (ast.int(4), ast.int(2), ast.string("sum"));
    let windows = ast.call("winagg", vec![scaled, size, slide, sum]);
    assert_eq!(typed(&mut ast, windows), Type::stream_of(Type::Number));
    let (two, three) = (ast.int(2), ast.int(3));
    let product = ast.binary(BinaryOp::Multiply, two, three);
    assert_eq!(typed(&mut ast, product), Type::Integer);
    let (text, one) = (ast.string("a"), ast.int(1));
    let bad = ast.binary(BinaryOp::Add, text, one);
    let error = only_error(check(&Statement::Query(bad), &functions));
    assert_eq!(error.message, "+ expects number, found string");
}

#[test]
fn conditions_must_be_comparisons_of_comparable_values() {
    let mut ast = Ast::default();
    let functions = Functions::new();
    let ranged = |ast: &mut Ast, test: Expr| {
        let i = ast.var("i");
        let decls = vec![ast.decl(TypeKind::Integer, "i")];
        let (one, five) = (ast.int(1), ast.int(5));
        let iota = ast.call("iota", vec![one, five]);
        let range = ast.range("i", iota);
        Statement::Query(ast.select(i, decls, vec![range, Condition::Test(test)]))
    };
    let (i, two) = (ast.var("i"), ast.int(2));
    let test = ast.binary(BinaryOp::Greater, i, two);
    let query = ranged(&mut ast, test);
    assert_eq!(check(&query, &functions), Ok(Type::bag_of(Type::Integer)));
    let (i, text) = (ast.var("i"), ast.string("a"));
    let test = ast.binary(BinaryOp::Less, i, text);
    let query = ranged(&mut ast, test);
    let error = only_error(check(&query, &functions));
    assert_eq!(error.message, "< cannot compare integer and string");
    let i = ast.var("i");
    let query = ranged(&mut ast, i);
    let error = only_error(check(&query, &functions));
    assert_eq!(
        error.message,
        "a condition must be a comparison, found integer"
    );
}

#[test]
fn function_definitions_are_checked() {
    let mut ast = Ast::default();
    let definition = |ast: &mut Ast, name: &str, result: TypeKind, body: Expr| FunctionDef {
        name: ast.ident(name),
        params: vec![ast.decl(TypeKind::Integer, "n")],
        result: TypeName {
            kind: result,
            span: ast.span(),
        },
        body,
        span: ast.span(),
    };
    let mut functions = Functions::new();
    let body = ast.var("n");
    let count = definition(&mut ast, "count", TypeKind::Integer, body);
    let error = only_error(check(&Statement::CreateFunction(count), &functions));
    assert_eq!(error.message, "'count' is a built-in function");
    let text = ast.string("n");
    let wrong = definition(&mut ast, "twice", TypeKind::Integer, text);
    let error = only_error(functions.define(&wrong).map(|()| Type::Object));
    assert_eq!(
        error.message,
        "twice is declared to return integer, but its body is string"
    );
    let (n, two) = (ast.var("n"), ast.int(2));
    let body = ast.binary(BinaryOp::Multiply, n, two);
    let twice = definition(&mut ast, "twice", TypeKind::Integer, body);
    functions.define(&twice).unwrap();
    let four = ast.int(4);
    let call = ast.call("twice", vec![four]);
    assert_eq!(
        check(&Statement::Query(call), &functions),
        Ok(Type::Integer)
    );
    let call = ast.call("twcie", vec![]);
    let error = only_error(check(&Statement::Query(call), &functions));
    assert_eq!(error.help.as_deref(), Some("did you mean 'twice'?"));
}

/// Parses and checks every statement of a query text, defining its functions as a session
/// does; the type of each query, or the rendered diagnostics.
fn check_text(name: &str, text: &str) -> Result<Vec<Type>, String> {
    let render = |diagnostics: Vec<Diagnostic>| {
        diagnostics
            .iter()
            .map(|diagnostic| diagnostic.render(name, text))
            .collect::<String>()
    };
    let statements = sluice_query::parse(text).map_err(render)?;
    let mut functions = Functions::new();
    let mut types = Vec::new();
    for statement in &statements {
        match statement {
            Statement::CreateFunction(definition) => {
                functions.define(definition).map_err(render)?;
            }
            _ => types.push(check(statement, &functions).map_err(render)?),
        }
    }
    Ok(types)
}

#[test]
fn the_papers_query_files_check() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice/tests/queries");
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("paper_") || !name.ends_with(".scsql") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let types = check_text(&name, &text).unwrap_or_else(|errors| panic!("{errors}"));
        // Every query of the paper is a stream: of grep's lines, radix2's FFTs, one count.
        assert_eq!(types, vec![Type::stream_of(Type::Object)], "{name}");
        checked += 1;
    }
    assert!(
        checked >= 10,
        "only {checked} of the paper's queries found in {dir}"
    );
}

#[test]
fn checker_errors_render_with_the_source() {
    let errors = check_text(
        "mege.scsql",
        "select mege({a}) from sp a where a = sp(iota(1, 2));",
    )
    .unwrap_err();
    assert!(errors.contains("unknown function 'mege'"), "{errors}");
    assert!(errors.contains("did you mean 'merge'?"), "{errors}");
    let errors = check_text("extract.scsql", "extract(1);").unwrap_err();
    assert!(
        errors.contains("extract expects sp, found integer"),
        "{errors}"
    );
    let errors = check_text("bound.scsql", "select extract(a) from sp a where a = 1;").unwrap_err();
    assert!(
        errors.contains("'a' is declared sp but bound to integer"),
        "{errors}"
    );
}
