//! The SCSQL parser: a text of statements to their syntax trees ([`parse`]), or diagnostics
//! that point at the offending token.
//!
//! The grammar (EBNF; keywords are case-insensitive, [`crate::lexer`] gives the tokens):
//! ```text
//! text      = { statement ";" } [ statement [ ";" ] ] ;
//! statement = "create" "function" name "(" [ param { "," param } ] ")" "->" type "as" expr
//!           | "set" name "=" expr
//!           | expr ;
//! param     = type name ;
//! type      = "bag" "of" type
//!           | "integer" | "real" | "string" | "charstring" | "sp" | "stream" | "array" | "object" ;
//! expr      = sum [ ( "<" | "<=" | ">" | ">=" | "!=" | "<>" ) sum ] ;
//! sum       = product { ( "+" | "-" ) product } ;
//! product   = unary { ( "*" | "/" ) unary } ;
//! unary     = { "-" } atom ;
//! atom      = integer | real | string
//!           | name "(" [ expr { "," expr } ] ")"      (* a call *)
//!           | name                                    (* a variable *)
//!           | "{" [ expr { "," expr } ] "}"           (* a set *)
//!           | "(" expr ")"
//!           | select ;
//! select    = "select" expr [ "from" param { "," param } ]
//!             [ "where" condition { "and" condition } ] ;
//! condition = name "in" expr | expr "=" expr | expr ;
//! ```
//! A `select` extends as far as it can: `f(select x from integer x where x in iota(1, 3))`
//! needs no parentheses around it, while a `select` inside another's `where` clause takes the
//! `and`s that follow as its own unless put in parentheses. The type names are not reserved:
//! `sp` is also the function that makes a stream process. Statements are `;`-separated; the
//! last one's `;` may be left out, and empty statements are skipped.
//!
//! Every node keeps its byte span. An error names what was expected and what was found
//! (`unexpected ')'`, `expected ',' or ')'`), at the offending token or, for an unexpected end
//! of the text, at its end (right after its last token, before any spaces and comments). Each statement is parsed on its own, and a statement recovers from
//! a bad argument list, parenthesised expression or set by skipping to its closing bracket, so
//! one text reports the errors of all its statements; a statement with a lexical error (an
//! unknown character, an unterminated string) reports only that.
//!
//! A statement may have at most [`MAX_DEPTH`] levels of nesting, counting each open bracket,
//! `select` and negation as one, and a chain of binary operators inside one bracket
//! (`1 + 2 * 3 - 4`) as one, and at most [`MAX_OPERATORS`] binary operators: deeper trees
//! would exhaust the stack of the stages that walk them.

use chumsky::input::ValueInput;
use chumsky::prelude::*;

use crate::ast::{
    BinaryOp, Condition, Expr, ExprKind, FunctionDef, Ident, Param, Select, Setting, Statement,
    TypeKind, TypeName,
};
use crate::diagnostic::Diagnostic;
use crate::lexer::{self, Keyword, Token};

/// Parses the statements of `text`, or returns every error found, in the order of the text.
pub fn parse(text: &str) -> Result<Vec<Statement>, Vec<Diagnostic>> {
    let (tokens, lex_errors) = lexer::lex(text);
    let mut diagnostics = lex_errors.clone();
    let mut statements = Vec::new();
    let terminated = statement().then_ignore(just(Token::Semicolon));
    let last = statement();
    // Where the text before the current statement ends: a lexical error after it and up to the
    // statement's end is in this statement.
    let mut previous_end = 0;
    for chunk in tokens.split_inclusive(|(token, _)| *token == Token::Semicolon) {
        let Some(((last_token, last_span), _)) = chunk.split_last() else {
            continue;
        };
        let end = last_span.end;
        let lexically_bad = lex_errors
            .iter()
            .any(|error| (previous_end..end).contains(&error.span.start));
        previous_end = end;
        if lexically_bad || chunk.len() == 1 && *last_token == Token::Semicolon {
            continue;
        }
        if let Some((span, message)) = too_deep(chunk) {
            diagnostics.push(
                Diagnostic::new(message, lexer::range(span))
                    .with_label("here")
                    .with_help(
                        "brackets, operators and selects nest; split the statement, \
                     or give parts of it a name with `create function`",
                    ),
            );
            continue;
        }
        let ends_with_semicolon = *last_token == Token::Semicolon;
        // An unexpected end is right after the statement's last token (the end of the text but
        // for the spaces and comments after it).
        let eoi = SimpleSpan::from(end..end);
        let input = chunk.map(eoi, |(token, span)| (token, span));
        let result = if ends_with_semicolon {
            terminated.parse(input).into_result()
        } else {
            last.parse(input).into_result()
        };
        match result {
            Ok(statement) => statements.push(statement),
            Err(errors) => diagnostics.extend(errors.iter().map(syntax_diagnostic)),
        }
    }
    if diagnostics.is_empty() {
        Ok(statements)
    } else {
        diagnostics.sort_by_key(|diagnostic| diagnostic.span.start);
        Err(diagnostics)
    }
}

/// The most levels of nesting a statement may have (counted as below), so that no stage that
/// walks its tree recursively (the parser, a checker, dropping it) runs out of stack.
pub const MAX_DEPTH: usize = 256;
/// The most binary operators a statement may have: a chain of them (`1 + 1 + ... + 1`) is one
/// level of nesting, but its tree is as deep as it is long.
pub const MAX_OPERATORS: usize = 1024;

/// Whether `token` ends an operand, so that a `-` after it subtracts rather than negates.
fn ends_operand(token: &Token) -> bool {
    matches!(
        token,
        Token::Integer(_)
            | Token::Real(_)
            | Token::Str(_)
            | Token::Ident(_)
            | Token::RParen
            | Token::RBrace
    )
}

/// The token at which the statement's tree could exceed [`MAX_DEPTH`] levels of nesting or
/// [`MAX_OPERATORS`] operators, if any, and which limit it exceeds. Each level of nesting comes
/// from an open bracket, a `select`, a negation, or a chain of binary operators inside one
/// bracket (however long: each operator of the chain is counted against [`MAX_OPERATORS`]), so
/// the tree is at most `MAX_DEPTH + MAX_OPERATORS` deep.
fn too_deep(statement: &[lexer::Spanned]) -> Option<(SimpleSpan, String)> {
    // Per open bracket (the statement itself first): whether a chain of operators is in it.
    let mut chains = vec![false];
    let mut selects_and_negations = 0usize;
    let mut operators = 0usize;
    let mut previous = None;
    for (token, span) in statement {
        match token {
            Token::LParen | Token::LBrace => chains.push(false),
            Token::RParen | Token::RBrace if chains.len() > 1 => {
                chains.pop();
            }
            Token::Keyword(Keyword::Select) => selects_and_negations += 1,
            Token::Minus if !previous.is_some_and(ends_operand) => selects_and_negations += 1,
            token if token.is_operator() => {
                operators += 1;
                *chains.last_mut().expect("the statement's own level") = true;
            }
            _ => {}
        }
        let open_chains = chains.iter().filter(|&&chain| chain).count();
        let depth = chains.len() - 1 + selects_and_negations + open_chains;
        if depth > MAX_DEPTH {
            return Some((
                *span,
                format!("statement nested too deeply (more than {MAX_DEPTH} levels)"),
            ));
        }
        if operators > MAX_OPERATORS {
            return Some((
                *span,
                format!("statement has more than {MAX_OPERATORS} operators"),
            ));
        }
        previous = Some(token);
    }
    None
}

/// A diagnostic for a parser error: what was found, and at the caret what was expected.
fn syntax_diagnostic(error: &Rich<'_, Token>) -> Diagnostic {
    let span = lexer::range(*error.span());
    match error.reason() {
        chumsky::error::RichReason::Custom(message) => {
            Diagnostic::new(message.clone(), span).with_label("here")
        }
        chumsky::error::RichReason::ExpectedFound { expected, found } => {
            let message = match found {
                Some(token) => format!("unexpected {}", **token),
                None => "unexpected end of input".to_owned(),
            };
            let mut names: Vec<String> = Vec::new();
            for pattern in expected {
                let name = match pattern {
                    chumsky::error::RichPattern::Token(token) if token.is_operator() => {
                        "an operator".to_owned()
                    }
                    chumsky::error::RichPattern::Token(token) => token.to_string(),
                    chumsky::error::RichPattern::Label(label) => label.to_string(),
                    chumsky::error::RichPattern::Identifier(word) => format!("'{word}'"),
                    chumsky::error::RichPattern::EndOfInput => "the end of the text".to_owned(),
                    _ => continue,
                };
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            let mut diagnostic = Diagnostic::new(message, span);
            if names.iter().any(|name| name == TYPE) {
                diagnostic = diagnostic.with_help(
                    "the types are integer, real, string (or charstring), sp, stream, array, \
                     object and bag of TYPE",
                );
            }
            match names.split_last() {
                None => diagnostic.with_label("not expected here"),
                Some((only, [])) => diagnostic.with_label(format!("expected {only}")),
                Some((last, rest)) => {
                    diagnostic.with_label(format!("expected {} or {last}", rest.join(", ")))
                }
            }
        }
    }
}

/// How messages name what a declaration starts with.
const TYPE: &str = "a type";

type Extra<'t> = extra::Err<Rich<'t, Token>>;

/// A parser's output: what it is over the tokens `I`.
trait TokenParser<'t, I: ValueInput<'t, Token = Token, Span = SimpleSpan>, O>:
    Parser<'t, I, O, Extra<'t>> + Clone
{
}

impl<'t, I, O, P> TokenParser<'t, I, O> for P
where
    I: ValueInput<'t, Token = Token, Span = SimpleSpan>,
    P: Parser<'t, I, O, Extra<'t>> + Clone,
{
}

fn keyword<'t, I>(keyword: Keyword) -> impl TokenParser<'t, I, Token>
where
    I: ValueInput<'t, Token = Token, Span = SimpleSpan>,
{
    just(Token::Keyword(keyword))
}

fn name<'t, I>() -> impl TokenParser<'t, I, Ident>
where
    I: ValueInput<'t, Token = Token, Span = SimpleSpan>,
{
    select! {
        Token::Ident(name) = e => Ident { name, span: lexer::range(e.span()) },
    }
    .labelled("a name")
}

/// The type a (case-insensitive) name stands for.
fn simple_type(name: &str) -> Option<TypeKind> {
    let name = name.to_ascii_lowercase();
    Some(match name.as_str() {
        "integer" => TypeKind::Integer,
        "real" => TypeKind::Real,
        "string" | "charstring" => TypeKind::String,
        "sp" => TypeKind::Sp,
        "stream" => TypeKind::Stream,
        "array" => TypeKind::Array,
        "object" => TypeKind::Object,
        _ => return None,
    })
}

fn type_name<'t, I>() -> impl TokenParser<'t, I, TypeName>
where
    I: ValueInput<'t, Token = Token, Span = SimpleSpan>,
{
    let simple = chumsky::primitive::select(|token, _| match token {
        Token::Ident(name) => simple_type(&name),
        _ => None,
    })
    .map_with(|kind, e| TypeName {
        kind,
        span: lexer::range(e.span()),
    });
    recursive(|type_name| {
        keyword(Keyword::Bag)
            .ignore_then(keyword(Keyword::Of))
            .ignore_then(type_name)
            .map_with(|element: TypeName, e| TypeName {
                kind: TypeKind::BagOf(Box::new(element.kind)),
                span: lexer::range(e.span()),
            })
            .or(simple)
    })
    .labelled(TYPE)
}

fn param<'t, I>() -> impl TokenParser<'t, I, Param>
where
    I: ValueInput<'t, Token = Token, Span = SimpleSpan>,
{
    type_name()
        .then(name())
        .map(|(ty, name)| Param { ty, name })
}

/// Skips a group in `open` and `close` with an error inside to its closing bracket (minding
/// the `other` brackets nested in it), so the statement goes on after it and reports its next
/// error, if any.
fn skip_group<'t, I, O: Clone>(
    (open, close): (Token, Token),
    other: (Token, Token),
    fallback: impl Fn(SimpleSpan) -> O + Clone + 't,
) -> impl TokenParser<'t, I, O>
where
    I: ValueInput<'t, Token = Token, Span = SimpleSpan>,
{
    nested_delimiters(open, close, [other], fallback)
}

const PARENS: (Token, Token) = (Token::LParen, Token::RParen);
const BRACES: (Token, Token) = (Token::LBrace, Token::RBrace);

fn spanned(kind: ExprKind, span: SimpleSpan) -> Expr {
    Expr {
        kind,
        span: lexer::range(span),
    }
}

fn binary(op: BinaryOp, left: Expr, right: Expr) -> Expr {
    let span = left.span.start..right.span.end;
    Expr {
        kind: ExprKind::Binary {
            op,
            left: Box::new(left),
            right: Box::new(right),
        },
        span,
    }
}

/// `operand { op operand }`, the operators applied from the left.
fn left_associative<'t, I>(
    operand: impl TokenParser<'t, I, Expr>,
    op: impl TokenParser<'t, I, BinaryOp>,
) -> impl TokenParser<'t, I, Expr>
where
    I: ValueInput<'t, Token = Token, Span = SimpleSpan>,
{
    operand
        .clone()
        .foldl(op.then(operand).repeated(), |left, (op, right)| {
            binary(op, left, right)
        })
}

fn expr<'t, I>() -> impl TokenParser<'t, I, Expr>
where
    I: ValueInput<'t, Token = Token, Span = SimpleSpan>,
{
    recursive(|expr| {
        // What stands for a group skipped after an error: never seen, as the text then fails.
        let skipped = |span| spanned(ExprKind::Set(Vec::new()), span);
        let list = |brackets: (Token, Token), other| {
            expr.clone()
                .separated_by(just(Token::Comma))
                .collect::<Vec<Expr>>()
                .delimited_by(just(brackets.0.clone()), just(brackets.1.clone()))
                .recover_with(via_parser(skip_group(brackets, other, |_| Vec::new())))
        };
        let literal = select! {
            Token::Integer(n) => ExprKind::Integer(n),
            Token::Real(x) => ExprKind::Real(x),
            Token::Str(s) => ExprKind::String(s),
        }
        .map_with(|kind, e| spanned(kind, e.span()));
        let call = name()
            .then(list(PARENS, BRACES))
            .map_with(|(function, args), e| spanned(ExprKind::Call { function, args }, e.span()));
        let var = name().map(|name| Expr {
            span: name.span.clone(),
            kind: ExprKind::Var(name),
        });
        let set = list(BRACES, PARENS).map_with(|items, e| spanned(ExprKind::Set(items), e.span()));
        let condition = name()
            .then_ignore(keyword(Keyword::In))
            .then(expr.clone())
            .map_with(|(var, over), e| Condition::In {
                var,
                over,
                span: lexer::range(e.span()),
            })
            .or(expr
                .clone()
                .then(just(Token::Equals).ignore_then(expr.clone()).or_not())
                .map_with(|(left, right), e| match right {
                    Some(right) => Condition::Equals {
                        left,
                        right,
                        span: lexer::range(e.span()),
                    },
                    None => Condition::Test(left),
                }))
            .labelled("a condition");
        let select = keyword(Keyword::Select)
            .ignore_then(expr.clone())
            .then(
                keyword(Keyword::From)
                    .ignore_then(
                        param()
                            .separated_by(just(Token::Comma))
                            .at_least(1)
                            .collect(),
                    )
                    .or_not(),
            )
            .then(
                keyword(Keyword::Where)
                    .ignore_then(
                        condition
                            .separated_by(keyword(Keyword::And))
                            .at_least(1)
                            .collect(),
                    )
                    .or_not(),
            )
            .map_with(|((result, decls), conditions), e| {
                let select = Select {
                    result,
                    decls: decls.unwrap_or_default(),
                    conditions: conditions.unwrap_or_default(),
                };
                spanned(ExprKind::Select(Box::new(select)), e.span())
            });
        let parenthesised = expr
            .clone()
            .delimited_by(just(Token::LParen), just(Token::RParen))
            .recover_with(via_parser(skip_group(PARENS, BRACES, skipped)));
        let atom = choice((literal, call, var, set, parenthesised, select));

        let unary = just(Token::Minus)
            .map_with(|_, e| e.span())
            .repeated()
            .foldr(atom, |minus: SimpleSpan, operand: Expr| Expr {
                span: minus.start..operand.span.end,
                kind: ExprKind::Negate(Box::new(operand)),
            })
            .labelled("an expression");
        let product_op = choice((
            just(Token::Star).to(BinaryOp::Multiply),
            just(Token::Slash).to(BinaryOp::Divide),
        ));
        let product = left_associative(unary, product_op);
        let sum_op = choice((
            just(Token::Plus).to(BinaryOp::Add),
            just(Token::Minus).to(BinaryOp::Subtract),
        ));
        let sum = left_associative(product, sum_op);
        let comparison_op = choice((
            just(Token::Less).to(BinaryOp::Less),
            just(Token::LessOrEqual).to(BinaryOp::LessOrEqual),
            just(Token::Greater).to(BinaryOp::Greater),
            just(Token::GreaterOrEqual).to(BinaryOp::GreaterOrEqual),
            just(Token::NotEqual).to(BinaryOp::NotEqual),
        ));
        sum.clone()
            .then(comparison_op.then(sum).or_not())
            .map(|(left, comparison)| match comparison {
                Some((op, right)) => binary(op, left, right),
                None => left,
            })
            .boxed()
    })
}

fn statement<'t, I>() -> impl TokenParser<'t, I, Statement>
where
    I: ValueInput<'t, Token = Token, Span = SimpleSpan>,
{
    let expr = expr();
    let params = param()
        .separated_by(just(Token::Comma))
        .collect::<Vec<Param>>()
        .delimited_by(just(Token::LParen), just(Token::RParen));
    let create_function = keyword(Keyword::Create)
        .ignore_then(keyword(Keyword::Function))
        .ignore_then(name())
        .then(params)
        .then_ignore(just(Token::Arrow))
        .then(type_name())
        .then_ignore(keyword(Keyword::As))
        .then(expr.clone())
        .map_with(|(((name, params), result), body), e| {
            Statement::CreateFunction(FunctionDef {
                name,
                params,
                result,
                body,
                span: lexer::range(e.span()),
            })
        });
    let set = keyword(Keyword::Set)
        .ignore_then(name())
        .then_ignore(just(Token::Equals))
        .then(expr.clone())
        .map(|(name, value)| Statement::Set(Setting { name, value }));
    choice((create_function, set, expr.map(Statement::Query)))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The paper's queries (crates/sluice/tests/queries), by name.
    pub(crate) const PAPER: [(&str, &str); 10] = [
        (
            "grep",
            include_str!("../../sluice/tests/queries/paper_grep.scsql"),
        ),
        (
            "radix2",
            include_str!("../../sluice/tests/queries/paper_radix2.scsql"),
        ),
        (
            "p2p",
            include_str!("../../sluice/tests/queries/paper_p2p_bandwidth.scsql"),
        ),
        (
            "merge",
            include_str!("../../sluice/tests/queries/paper_merge_bandwidth.scsql"),
        ),
        (
            "query1",
            include_str!("../../sluice/tests/queries/paper_query1.scsql"),
        ),
        (
            "query2",
            include_str!("../../sluice/tests/queries/paper_query2.scsql"),
        ),
        (
            "query3",
            include_str!("../../sluice/tests/queries/paper_query3.scsql"),
        ),
        (
            "query4",
            include_str!("../../sluice/tests/queries/paper_query4.scsql"),
        ),
        (
            "query5",
            include_str!("../../sluice/tests/queries/paper_query5.scsql"),
        ),
        (
            "query6",
            include_str!("../../sluice/tests/queries/paper_query6.scsql"),
        ),
    ];

    fn type_shape(kind: &TypeKind) -> String {
        match kind {
            TypeKind::BagOf(element) => format!("bag of {}", type_shape(element)),
            other => format!("{other:?}").to_lowercase(),
        }
    }

    fn param_shape(param: &Param) -> String {
        format!("{} {}", type_shape(&param.ty.kind), param.name.name)
    }

    fn list(exprs: &[Expr]) -> String {
        exprs.iter().map(shape).collect::<Vec<_>>().join(", ")
    }

    /// The tree as text, every operator parenthesised, every select in brackets.
    fn shape(expr: &Expr) -> String {
        match &expr.kind {
            ExprKind::Integer(n) => n.to_string(),
            ExprKind::Real(x) => format!("{x:?}"),
            ExprKind::String(s) => format!("{s:?}"),
            ExprKind::Var(name) => name.name.clone(),
            ExprKind::Call { function, args } => format!("{}({})", function.name, list(args)),
            ExprKind::Set(items) => format!("{{{}}}", list(items)),
            ExprKind::Binary { op, left, right } => {
                format!("({} {op:?} {})", shape(left), shape(right))
            }
            ExprKind::Negate(operand) => format!("-{}", shape(operand)),
            ExprKind::Select(select) => {
                let mut text = format!("[select {}", shape(&select.result));
                if !select.decls.is_empty() {
                    let decls: Vec<String> = select.decls.iter().map(param_shape).collect();
                    text += &format!(" from {}", decls.join(", "));
                }
                if !select.conditions.is_empty() {
                    let conditions: Vec<String> = select
                        .conditions
                        .iter()
                        .map(|condition| match condition {
                            Condition::Equals { left, right, .. } => {
                                format!("{} = {}", shape(left), shape(right))
                            }
                            Condition::In { var, over, .. } => {
                                format!("{} in {}", var.name, shape(over))
                            }
                            Condition::Test(test) => shape(test),
                        })
                        .collect();
                    text += &format!(" where {}", conditions.join(" and "));
                }
                text + "]"
            }
        }
    }

    fn statement_shape(statement: &Statement) -> String {
        match statement {
            Statement::Query(expr) => shape(expr),
            Statement::CreateFunction(def) => {
                let params: Vec<String> = def.params.iter().map(param_shape).collect();
                format!(
                    "create {}({}) -> {} as {}",
                    def.name.name,
                    params.join(", "),
                    type_shape(&def.result.kind),
                    shape(&def.body)
                )
            }
            Statement::Set(setting) => {
                format!("set {} = {}", setting.name.name, shape(&setting.value))
            }
        }
    }

    fn shapes(text: &str) -> Vec<String> {
        match parse(text) {
            Ok(statements) => statements.iter().map(statement_shape).collect(),
            Err(diagnostics) => panic!("{text}: {diagnostics:#?}"),
        }
    }

    /// Each error as `start..end: message [label]`.
    fn errors(text: &str) -> Vec<String> {
        let diagnostics = parse(text).expect_err(text);
        for diagnostic in &diagnostics {
            assert!(
                diagnostic.span.end <= text.len(),
                "{text:?}: {diagnostic:?}"
            );
        }
        diagnostics
            .iter()
            .map(|d| format!("{:?}: {} [{}]", d.span, d.message, d.label))
            .collect()
    }

    #[test]
    fn an_error_names_the_token_found_and_what_was_expected() {
        // The paper's typo in the point-to-point query: a missing comma.
        assert_eq!(
            errors(
                "select extract(b) from sp a, sp b\n\
                 where b=sp(streamof(count(extract(a)))\n 'bg',0) and\n\
                 a=sp(gen_array(3000000,100),'bg',1);"
            ),
            ["74..78: unexpected string \"bg\" [expected an operator, ',' or ')']"]
        );
        assert_eq!(
            errors("select 1 select 2;"),
            ["9..15: unexpected 'select' [expected an operator, 'from', 'where' or ';']"]
        );
        assert_eq!(
            errors("create function f(string s) stream as 1"),
            ["28..34: unexpected name 'stream' [expected '->']"]
        );
        assert_eq!(
            errors("set buffer = ;"),
            ["13..14: unexpected ';' [expected an expression]"]
        );
        assert_eq!(
            errors("select x from sp a where a in iota(1, 2) and and;"),
            ["45..48: unexpected 'and' [expected a condition]"]
        );
        let diagnostics = parse("select x from integr i").expect_err("a bad type");
        assert_eq!(diagnostics[0].label, "expected a type");
        assert!(diagnostics[0]
            .help
            .as_deref()
            .unwrap_or_default()
            .contains("bag of"));
    }

    #[test]
    fn a_parse_error_renders_with_its_line_column_and_caret() {
        let text = "select extract(b)\nfrom sp a, sp b\n\
                    where b=sp(streamof(count(extract(a)))\n    'bg',0) and\n\
                    a=sp(gen_array(3000000,100),'bg',1);\n";
        let diagnostics = parse(text).expect_err("the paper's typo");
        assert_eq!(
            diagnostics[0].render("p2p.scsql", text),
            "Error: unexpected string \"bg\"\n\
             \x20  ,-[ p2p.scsql:4:5 ]\n\
             \x20  |\n\
             \x204 |     'bg',0) and\n\
             \x20  |     ^^|^\n\
             \x20  |       `--- expected an operator, ',' or ')'\n\
             ---'\n"
        );
    }

    #[test]
    fn an_unexpected_end_is_at_the_end_of_the_text() {
        assert_eq!(
            errors("select 1 +"),
            ["10..10: unexpected end of input [expected an expression]"]
        );
        assert_eq!(
            errors("select x from sp a where -- and\n"),
            ["24..24: unexpected end of input [expected a condition]"]
        );
    }

    #[test]
    fn errors_of_several_statements_and_groups_are_all_reported() {
        assert_eq!(
            errors("select f(1 2), g(3); select x from integr i; h(3"),
            [
                "11..12: unexpected integer 2 [expected an operator, ',' or ')']",
                "13..14: unexpected ',' [expected an operator, 'from', 'where' or ';']",
                "35..41: unexpected name 'integr' [expected a type]",
                "48..48: unexpected end of input [expected an operator, ',' or ')']",
            ]
        );
        assert_eq!(
            errors("x @ y; select 1 +; select 'abc"),
            [
                "2..3: unexpected character '@' [not part of any token]",
                "17..18: unexpected ';' [expected an expression]",
                "26..30: unterminated string: no closing ' [here]",
            ]
        );
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = format!("select {}1{};", "(".repeat(300), ")".repeat(300));
        // Spaced, as `--` starts a comment.
        let negated = format!("select {}1;", "- ".repeat(1000));
        let nested_sums = format!("select {}1{};", "(1+".repeat(300), ")".repeat(300));
        for text in [&deep, &negated, &nested_sums] {
            let diagnostics = parse(text).expect_err("too deep");
            assert_eq!(diagnostics.len(), 1);
            assert!(diagnostics[0].message.contains("nested too deeply"));
        }
        let long = format!("select 1{};", "+1".repeat(MAX_OPERATORS + 1));
        let diagnostics = parse(&long).expect_err("too long");
        assert_eq!(
            diagnostics[0].message,
            format!("statement has more than {MAX_OPERATORS} operators")
        );
        let fine = format!("select {}1{}", "(".repeat(100), ")".repeat(100));
        assert!(parse(&fine).is_ok());
        // A chain of operators is one level, however long.
        let flat = format!("select 1{};", "+1*2-1".repeat(MAX_OPERATORS / 3));
        assert!(parse(&flat).is_ok());
    }

    #[test]
    fn empty_statements_and_comments_are_nothing() {
        assert_eq!(shapes(""), Vec::<String>::new());
        assert_eq!(shapes(" ;; -- nothing\n/* at all */"), Vec::<String>::new());
    }

    #[test]
    fn operators_bind_as_in_arithmetic() {
        assert_eq!(
            shapes("select -a * 2 + b / c - 1 >= 3.5e1 from integer a where a < 4 and a in {1, 2}"),
            [
                "[select ((((-a Multiply 2) Add (b Divide c)) Subtract 1) GreaterOrEqual 35.0) \
              from integer a where (a Less 4) and a in {1, 2}]"
            ]
        );
        assert_eq!(
            shapes("select (1 + 2) * 3"),
            ["[select ((1 Add 2) Multiply 3)]"]
        );
    }

    #[test]
    fn keywords_are_case_insensitive_and_settings_are_statements() {
        assert_eq!(
            shapes("SET Buffer_Size = 1000; Select x From Bag Of Integer x; set double = 1"),
            [
                "set Buffer_Size = 1000",
                "[select x from bag of integer x]",
                "set double = 1"
            ]
        );
    }

    fn paper(name: &str) -> &'static str {
        PAPER
            .iter()
            .find(|(n, _)| *n == name)
            .expect("a paper query")
            .1
    }

    #[test]
    fn the_papers_queries_parse_to_their_shape() {
        assert_eq!(
            shapes(paper("grep")),
            [
                "merge(spv([select grep(\"pattern\", filename(i)) from integer i \
              where i in iota(1, 1000)]))"
            ]
        );
        assert_eq!(
            shapes(paper("radix2")),
            [
                "create radix2(string s) -> stream as [select radixcombine(merge({a, b})) \
                 from sp a, sp b, sp c where a = sp(fft(odd(extract(c)))) \
                 and b = sp(fft(even(extract(c)))) and c = sp(receiver(s))]",
                "radix2(\"sine:8:4\")"
            ]
        );
        assert_eq!(
            shapes(paper("p2p")),
            ["[select extract(b) from sp a, sp b \
              where b = sp(streamof(count(extract(a))), \"bg\", 0) \
              and a = sp(gen_array(3000000, 100), \"bg\", 1)]"]
        );
        assert_eq!(
            shapes(paper("merge")),
            ["[select extract(c) from sp a, sp b, sp c \
              where c = sp(count(merge({a, b})), \"bg\", 0) \
              and a = sp(gen_array(3000000, 100), \"bg\", 1) \
              and b = sp(gen_array(3000000, 100), \"bg\", 1)]"]
        );
        let back_end = |allocation: &str| {
            format!(
                "a = spv([select gen_array(3000000, 100) from integer i \
                 where i in iota(1, n)], \"be\", {allocation}) and n = 4]"
            )
        };
        let one_receiver = "[select extract(c) from bag of sp a, sp b, sp c, integer n \
                            where c = sp(extract(b), \"bg\") \
                            and b = sp(count(merge(a)), \"bg\") and ";
        let receivers = |allocation: &str| {
            format!(
                "[select extract(c) from bag of sp a, bag of sp b, sp c, integer n \
                 where c = sp(streamof(sum(merge(b))), \"bg\") \
                 and b = spv([select streamof(count(extract(p))) from sp p where p in a], \
                 \"bg\", {allocation}) and "
            )
        };
        assert_eq!(
            shapes(paper("query1")),
            [format!("{one_receiver}{}", back_end("1"))]
        );
        assert_eq!(
            shapes(paper("query2")),
            [format!("{one_receiver}{}", back_end("urr(\"be\")"))]
        );
        for (query, receiving, sending) in [
            ("query3", "inPset(1)", "1"),
            ("query4", "inPset(1)", "urr(\"be\")"),
            ("query5", "psetrr()", "1"),
            ("query6", "psetrr()", "urr(\"be\")"),
        ] {
            assert_eq!(
                shapes(paper(query)),
                [format!("{}{}", receivers(receiving), back_end(sending))],
                "{query}"
            );
        }
    }

    #[test]
    fn spans_are_the_bytes_of_their_node() {
        let text = "select 'é' + f(1) from integer x";
        let Ok(statements) = parse(text) else {
            panic!()
        };
        let Statement::Query(query) = &statements[0] else {
            panic!()
        };
        assert_eq!(query.span, 0..text.len());
        let ExprKind::Select(select) = &query.kind else {
            panic!()
        };
        let ExprKind::Binary { left, right, .. } = &select.result.kind else {
            panic!()
        };
        assert_eq!(&text[left.span.clone()], "'é'");
        assert_eq!(&text[right.span.clone()], "f(1)");
        assert_eq!(&text[select.decls[0].ty.span.clone()], "integer");
        assert_eq!(&text[select.decls[0].name.span.clone()], "x");
    }
}
