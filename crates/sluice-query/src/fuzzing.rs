//! The entry point for fuzzing the SCSQL parser: [`parse_text`] parses any text and panics only
//! where the parser breaks its promise. The `cargo fuzz` target `scsql_parse` in `fuzz/` at the
//! workspace root calls it (cargo fuzz builds with `--cfg fuzzing`, which compiles this module;
//! see `fuzz/README.md`), and the proptests below run it in the normal test suite on random
//! text, on soups of SCSQL's tokens and on the paper's queries mutated, offline and in seconds.
//!
//! The promise: `parse` returns (no panic, whatever the text); every diagnostic's span lies
//! within the text, on character boundaries, and renders with the line and column of its start;
//! and in a text that parses, every node's span lies within the text and within its parent's.

use crate::ast::{Condition, Expr, ExprKind, Ident, Param, Span, Statement};
use crate::diagnostic::line_column;

/// The name the rendered diagnostics give the text.
const SOURCE: &str = "fuzz.scsql";

/// Parses `text` and asserts the promise of the module doc.
pub fn parse_text(text: &str) {
    match crate::parse(text) {
        Ok(statements) => {
            let whole = 0..text.len();
            for statement in &statements {
                check_statement(text, statement, &whole);
            }
        }
        Err(diagnostics) => {
            assert!(!diagnostics.is_empty(), "an error without a diagnostic");
            for diagnostic in &diagnostics {
                let span = &diagnostic.span;
                assert!(
                    span.start <= span.end && text.get(span.clone()).is_some(),
                    "{diagnostic:?} is not within the {} bytes of the text",
                    text.len()
                );
                assert!(!diagnostic.message.is_empty(), "{diagnostic:?}");
                let (line, column) = line_column(text, span.start);
                let place = format!("{SOURCE}:{line}:{column}");
                let rendered = diagnostic.render(SOURCE, text);
                assert!(rendered.contains(&place), "{place} not in\n{rendered}");
            }
        }
    }
}

/// Asserts that `span` is a slice of `text` within `outer`.
fn check_span(text: &str, span: &Span, outer: &Span) {
    assert!(
        outer.start <= span.start && span.start <= span.end && span.end <= outer.end,
        "{span:?} is not within {outer:?}"
    );
    assert!(
        text.get(span.clone()).is_some(),
        "{span:?} cuts a character"
    );
}

fn check_ident(text: &str, ident: &Ident, outer: &Span) {
    check_span(text, &ident.span, outer);
    assert_eq!(&text[ident.span.clone()], ident.name);
}

fn check_param(text: &str, param: &Param, outer: &Span) {
    check_span(text, &param.ty.span, outer);
    check_ident(text, &param.name, outer);
}

fn check_statement(text: &str, statement: &Statement, outer: &Span) {
    match statement {
        Statement::Query(expr) => check_expr(text, expr, outer),
        Statement::CreateFunction(def) => {
            check_span(text, &def.span, outer);
            check_ident(text, &def.name, &def.span);
            for param in &def.params {
                check_param(text, param, &def.span);
            }
            check_span(text, &def.result.span, &def.span);
            check_expr(text, &def.body, &def.span);
        }
        Statement::Set(setting) => {
            check_ident(text, &setting.name, outer);
            check_expr(text, &setting.value, outer);
        }
    }
}

fn check_expr(text: &str, expr: &Expr, outer: &Span) {
    check_span(text, &expr.span, outer);
    let span = &expr.span;
    match &expr.kind {
        ExprKind::Integer(_) | ExprKind::Real(_) | ExprKind::String(_) => {}
        ExprKind::Var(name) => check_ident(text, name, span),
        ExprKind::Call { function, args } => {
            check_ident(text, function, span);
            for arg in args {
                check_expr(text, arg, span);
            }
        }
        ExprKind::Set(items) => {
            for item in items {
                check_expr(text, item, span);
            }
        }
        ExprKind::Binary { left, right, .. } => {
            check_expr(text, left, span);
            check_expr(text, right, span);
        }
        ExprKind::Negate(operand) => check_expr(text, operand, span),
        ExprKind::Select(select) => {
            check_expr(text, &select.result, span);
            for param in &select.decls {
                check_param(text, param, span);
            }
            for condition in &select.conditions {
                match condition {
                    Condition::Equals {
                        left,
                        right,
                        span: whole,
                    } => {
                        check_span(text, whole, span);
                        check_expr(text, left, whole);
                        check_expr(text, right, whole);
                    }
                    Condition::In {
                        var,
                        over,
                        span: whole,
                    } => {
                        check_span(text, whole, span);
                        check_ident(text, var, whole);
                        check_expr(text, over, whole);
                    }
                    Condition::Test(test) => check_expr(text, test, span),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::parse_text;
    use crate::parse::tests::PAPER;

    /// SCSQL's tokens and the pieces of them a mutation inserts: keywords in any case, the
    /// type names, the special functions, literals at and past their limits, open strings and
    /// comments, punctuation, and text that is not ASCII.
    const PIECES: [&str; 44] = [
        "select",
        "SELECT",
        "from",
        "where",
        "and",
        "in",
        "create",
        "function",
        "as",
        "set",
        "bag",
        "of",
        "integer",
        "sp",
        "string",
        "stream",
        "sp(",
        "spv(",
        "merge(",
        "extract(",
        "(",
        ")",
        "{",
        "}",
        ",",
        ";",
        "=",
        "->",
        "<>",
        "<=",
        "-",
        "*",
        "/",
        "1",
        "2.5e3",
        "99999999999999999999",
        "1e999",
        "'bg'",
        "\"",
        "'",
        "--",
        "/*",
        "\n",
        "é€",
    ];

    /// One change to a text, at a position taken modulo its length in characters.
    #[derive(Debug, Clone)]
    enum Edit {
        Delete(usize, usize),
        Insert(usize, &'static str),
        Swap(usize, usize, usize),
    }

    fn edits() -> impl Strategy<Value = Vec<Edit>> {
        let edit = prop_oneof![
            (any::<usize>(), 1usize..8).prop_map(|(at, len)| Edit::Delete(at, len)),
            (any::<usize>(), proptest::sample::select(&PIECES[..]))
                .prop_map(|(at, piece)| Edit::Insert(at, piece)),
            (any::<usize>(), any::<usize>(), 1usize..12)
                .prop_map(|(a, b, len)| Edit::Swap(a, b, len)),
        ];
        proptest::collection::vec(edit, 1..5)
    }

    /// `text` with `edits` applied in order, on character boundaries.
    fn mutate(text: &str, edits: &[Edit]) -> String {
        let mut chars: Vec<char> = text.chars().collect();
        for edit in edits {
            let len = chars.len();
            match *edit {
                Edit::Delete(at, n) => {
                    let at = at % (len + 1);
                    chars.drain(at..(at + n).min(len));
                }
                Edit::Insert(at, piece) => {
                    let at = at % (len + 1);
                    chars.splice(at..at, piece.chars());
                }
                Edit::Swap(a, b, n) if len >= 2 * n => {
                    // Two runs of `n` characters that do not overlap, exchanged.
                    let first = a % (len - 2 * n + 1);
                    let second = first + n + b % (len - first - 2 * n + 1);
                    for i in 0..n {
                        chars.swap(first + i, second + i);
                    }
                }
                Edit::Swap(..) => {}
            }
        }
        chars.into_iter().collect()
    }

    #[test]
    fn the_papers_queries_keep_the_promise() {
        for (_, text) in PAPER {
            parse_text(text);
        }
    }

    #[test]
    fn a_lone_carriage_return_ends_a_line_for_the_place_too() {
        // Found by cargo fuzz: ariadne counts `\r` as a line end, so must `line_column`.
        parse_text("create function radix2(string s)\n    \r>stream as 1");
    }

    proptest! {
        // No regression files: the suite stays offline and leaves nothing behind; a failure
        // prints its minimal input.
        #![proptest_config(ProptestConfig {
            cases: 512,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn mutated_paper_queries_keep_the_promise(query in 0..PAPER.len(), edits in edits()) {
            parse_text(&mutate(PAPER[query].1, &edits));
        }

        #[test]
        fn token_soups_keep_the_promise(
            pieces in proptest::collection::vec(proptest::sample::select(&PIECES[..]), 0..40),
            spaces in proptest::collection::vec(proptest::sample::select(vec!["", " ", "\n"]), 40),
        ) {
            let text: String = pieces
                .iter()
                .zip(&spaces)
                .flat_map(|(piece, space)| [*piece, *space])
                .collect();
            parse_text(&text);
        }

        #[test]
        fn arbitrary_text_keeps_the_promise(
            text in "\\PC*",
            scsqlish in "[a-z0-9(){},;='\"*/<>!-. \n]{0,80}",
        ) {
            parse_text(&text);
            parse_text(&scsqlish);
        }
    }
}
