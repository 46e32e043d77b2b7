//! No input panics the checker or a built-in: random syntax trees are checked (a result or
//! diagnostics, never a panic), and every built-in that runs is called with random arguments
//! (a value or an error).

use proptest::prelude::*;
use sluice_query::ast::{
    BinaryOp, Condition, Expr, ExprKind, Ident, Param, Select, Statement, TypeKind, TypeName,
};
use sluice_query::check::{check, Functions};
use sluice_query::functions::{self, BuiltinKind};
use sluice_query::Value;

const NAMES: [&str; 5] = ["a", "b", "c", "n", "p"];

fn ident() -> impl Strategy<Value = Ident> {
    (prop::sample::select(NAMES.to_vec()), 0usize..100).prop_map(|(name, at)| Ident {
        name: name.into(),
        span: at..at + 1,
    })
}

fn type_kind() -> impl Strategy<Value = TypeKind> {
    let leaf = prop_oneof![
        Just(TypeKind::Integer),
        Just(TypeKind::Real),
        Just(TypeKind::String),
        Just(TypeKind::Sp),
        Just(TypeKind::Stream),
        Just(TypeKind::Array),
        Just(TypeKind::Object),
    ];
    leaf.prop_recursive(2, 4, 1, |inner| {
        inner.prop_map(|kind| TypeKind::BagOf(Box::new(kind)))
    })
}

fn param() -> impl Strategy<Value = Param> {
    (type_kind(), ident()).prop_map(|(kind, name)| Param {
        ty: TypeName { kind, span: 0..1 },
        name,
    })
}

fn function_name() -> impl Strategy<Value = String> {
    let mut names: Vec<String> = functions::names().map(str::to_string).collect();
    names.push("mege".into());
    prop::sample::select(names)
}

fn binary_op() -> impl Strategy<Value = BinaryOp> {
    prop::sample::select(vec![
        BinaryOp::Add,
        BinaryOp::Subtract,
        BinaryOp::Multiply,
        BinaryOp::Divide,
        BinaryOp::Less,
        BinaryOp::LessOrEqual,
        BinaryOp::Greater,
        BinaryOp::GreaterOrEqual,
        BinaryOp::NotEqual,
    ])
}

fn expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(ExprKind::Integer),
        any::<f64>().prop_map(ExprKind::Real),
        "[a-z:0-9]{0,8}".prop_map(ExprKind::String),
        ident().prop_map(ExprKind::Var),
    ];
    let leaf = (leaf, 0usize..100).prop_map(|(kind, at)| Expr {
        kind,
        span: at..at + 2,
    });
    leaf.prop_recursive(4, 40, 4, |inner| {
        let condition = prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(left, right)| Condition::Equals {
                left,
                right,
                span: 0..1,
            }),
            (ident(), inner.clone()).prop_map(|(var, over)| Condition::In {
                var,
                over,
                span: 0..1
            }),
            inner.clone().prop_map(Condition::Test),
        ];
        let kind = prop_oneof![
            (
                function_name(),
                0usize..100,
                prop::collection::vec(inner.clone(), 0..5)
            )
                .prop_map(|(name, at, args)| ExprKind::Call {
                    function: Ident {
                        name,
                        span: at..at + 3,
                    },
                    args,
                }),
            prop::collection::vec(inner.clone(), 0..3).prop_map(ExprKind::Set),
            (binary_op(), inner.clone(), inner.clone()).prop_map(|(op, left, right)| {
                ExprKind::Binary {
                    op,
                    left: Box::new(left),
                    right: Box::new(right),
                }
            }),
            inner.clone().prop_map(|e| ExprKind::Negate(Box::new(e))),
            (
                inner.clone(),
                prop::collection::vec(param(), 0..3),
                prop::collection::vec(condition, 0..3)
            )
                .prop_map(|(result, decls, conditions)| {
                    ExprKind::Select(Box::new(Select {
                        result,
                        decls,
                        conditions,
                    }))
                }),
        ];
        (kind, 0usize..100).prop_map(|(kind, at)| Expr {
            kind,
            span: at..at + 5,
        })
    })
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        (-3i64..40).prop_map(Value::Integer),
        any::<f64>().prop_map(Value::Real),
        prop::sample::select(vec!["sum", "count", "sine:4:2", "noise:3", "x", "", "("])
            .prop_map(|text| Value::String(text.into())),
        prop::collection::vec(-1e3f64..1e3, 0..9).prop_map(Value::Array),
        prop::collection::vec((-1e3f64..1e3, -1e3f64..1e3), 0..9).prop_map(Value::Complex),
        prop::collection::vec(any::<u8>(), 0..4).prop_map(Value::Bytes),
        (0usize..4).prop_map(Value::Sp),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop::collection::vec(inner, 0..3).prop_map(Value::Bag)
    })
}

proptest! {
    #[test]
    fn the_checker_never_panics(expr in expr()) {
        let _ = check(&Statement::Query(expr), &Functions::new());
    }

    #[test]
    fn no_built_in_panics_on_any_arguments(
        args in prop::collection::vec(value(), 0..5),
        elements in prop::collection::vec((0usize..3, value()), 0..8),
    ) {
        for builtin in functions::all() {
            match builtin.kind {
                BuiltinKind::Scalar(function) => {
                    let _ = function(&args);
                }
                BuiltinKind::Stage(make) => {
                    let Ok(mut stage) = make(&args) else { continue };
                    let mut out = |_| Ok(());
                    for (from, element) in &elements {
                        let _ = stage.element(*from, element.clone(), &mut out);
                    }
                    let _ = stage.end(&mut out);
                    let mut bag = vec![Value::Bag(elements.iter().map(|(_, v)| v.clone()).collect())];
                    bag.extend(args.iter().cloned());
                    let _ = functions::apply_to_bag(builtin, &bag);
                }
                BuiltinKind::Generator(make) => {
                    if let Ok(generator) = make(&args) {
                        let _ = functions::collect_finite(builtin.name, generator, 50);
                    }
                }
                BuiltinKind::Special => {}
            }
        }
    }
}
