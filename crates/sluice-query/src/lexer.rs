//! SCSQL's tokens: the text of a query cut into names, keywords, literals and punctuation, each
//! with its byte span, by a `chumsky` lexer.
//!
//! - Names are ASCII letters, digits and `_`, not starting with a digit. The keywords
//!   (`select from where and in create function as set bag of`) are recognised whatever their
//!   case (`Select`, `SELECT`); other names keep their case as written.
//! - Numbers: an integer (`42`, at most `i64::MAX`; a minus sign is an operator) or a real with
//!   a fraction or an exponent (`1.5`, `2e3`, `6.02E-23`).
//! - Strings in single or double quotes, on one line or several; inside, `\\`, `\'`, `\"`,
//!   `\n` and `\t` are escapes, and a quote of the other kind is an ordinary character.
//! - Comments: `--` to the end of the line, and `/* ... */` (not nested).
//!
//! A character that starts no token, an unterminated string or comment and an integer too large
//! are errors; the lexer skips what it cannot read and goes on, so one text reports all of them
//! (an unknown escape in a string too).

use std::fmt;

use chumsky::prelude::*;

use crate::ast::Span;
use crate::diagnostic::Diagnostic;

/// The reserved words of SCSQL. Type names (`integer`, `sp`, `bag`'s `of` aside) are not
/// reserved: `sp` is both a type and the function that makes a stream process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keyword {
    /// `select`.
    Select,
    /// `from`.
    From,
    /// `where`.
    Where,
    /// `and`.
    And,
    /// `in`.
    In,
    /// `create`.
    Create,
    /// `function`.
    Function,
    /// `as`.
    As,
    /// `set`.
    Set,
    /// `bag` (of `bag of T`).
    Bag,
    /// `of` (of `bag of T`).
    Of,
}

impl Keyword {
    /// Every keyword.
    pub const ALL: [Keyword; 11] = [
        Keyword::Select,
        Keyword::From,
        Keyword::Where,
        Keyword::And,
        Keyword::In,
        Keyword::Create,
        Keyword::Function,
        Keyword::As,
        Keyword::Set,
        Keyword::Bag,
        Keyword::Of,
    ];

    /// The keyword as written in lower case.
    pub fn text(self) -> &'static str {
        match self {
            Keyword::Select => "select",
            Keyword::From => "from",
            Keyword::Where => "where",
            Keyword::And => "and",
            Keyword::In => "in",
            Keyword::Create => "create",
            Keyword::Function => "function",
            Keyword::As => "as",
            Keyword::Set => "set",
            Keyword::Bag => "bag",
            Keyword::Of => "of",
        }
    }

    /// The keyword `word` is, in any case.
    fn of_word(word: &str) -> Option<Keyword> {
        Keyword::ALL
            .into_iter()
            .find(|keyword| keyword.text().eq_ignore_ascii_case(word))
    }
}

/// One token.
#[derive(Debug, Clone, PartialEq)]
pub enum Token {
    /// A reserved word.
    Keyword(Keyword),
    /// A name: a variable, a function, a type, a setting.
    Ident(String),
    /// An integer literal.
    Integer(i64),
    /// A real literal.
    Real(f64),
    /// A string literal, its escapes resolved.
    Str(String),
    /// `(`.
    LParen,
    /// `)`.
    RParen,
    /// `{`.
    LBrace,
    /// `}`.
    RBrace,
    /// `,`.
    Comma,
    /// `;`.
    Semicolon,
    /// `->`.
    Arrow,
    /// `=`.
    Equals,
    /// `!=` or `<>`.
    NotEqual,
    /// `<=`.
    LessOrEqual,
    /// `>=`.
    GreaterOrEqual,
    /// `<`.
    Less,
    /// `>`.
    Greater,
    /// `+`.
    Plus,
    /// `-`.
    Minus,
    /// `*`.
    Star,
    /// `/`.
    Slash,
}

impl Token {
    /// Whether the token is an arithmetic or comparison operator (error messages name them
    /// together as "an operator").
    pub fn is_operator(&self) -> bool {
        matches!(
            self,
            Token::NotEqual
                | Token::LessOrEqual
                | Token::GreaterOrEqual
                | Token::Less
                | Token::Greater
                | Token::Plus
                | Token::Minus
                | Token::Star
                | Token::Slash
        )
    }

    /// The punctuation or operator as written, if the token is one.
    fn symbol(&self) -> Option<&'static str> {
        Some(match self {
            Token::LParen => "(",
            Token::RParen => ")",
            Token::LBrace => "{",
            Token::RBrace => "}",
            Token::Comma => ",",
            Token::Semicolon => ";",
            Token::Arrow => "->",
            Token::Equals => "=",
            Token::NotEqual => "!=",
            Token::LessOrEqual => "<=",
            Token::GreaterOrEqual => ">=",
            Token::Less => "<",
            Token::Greater => ">",
            Token::Plus => "+",
            Token::Minus => "-",
            Token::Star => "*",
            Token::Slash => "/",
            _ => return None,
        })
    }
}

/// How messages name a token: `'select'`, `name 'a'`, `integer 42`, `string "bg"`, `')'`.
impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Keyword(keyword) => write!(f, "'{}'", keyword.text()),
            Token::Ident(name) => write!(f, "name '{name}'"),
            Token::Integer(n) => write!(f, "integer {n}"),
            Token::Real(x) => write!(f, "real {x:?}"),
            Token::Str(s) => write!(f, "string {s:?}"),
            other => write!(f, "'{}'", other.symbol().unwrap_or_default()),
        }
    }
}

/// A token and where it is.
pub type Spanned = (Token, SimpleSpan);

type Extra<'src> = extra::Err<Rich<'src, char>>;

/// What the lexer reads at one place: a token, or a character that starts none.
#[derive(Debug, Clone)]
enum Lexeme {
    Token(Token),
    Unknown(char),
}

/// The tokens of `text`, and the errors met on the way, as diagnostics in the order of the
/// text (what could not be read is skipped).
pub fn lex(text: &str) -> (Vec<Spanned>, Vec<Diagnostic>) {
    let (lexemes, errors) = lexer().parse(text).into_output_errors();
    let mut tokens = Vec::new();
    let mut diagnostics: Vec<Diagnostic> = errors.iter().map(diagnostic).collect();
    for (lexeme, span) in lexemes.unwrap_or_default() {
        match lexeme {
            Lexeme::Token(token) => tokens.push((token, span)),
            Lexeme::Unknown(c) => diagnostics.push(
                Diagnostic::new(format!("unexpected character {c:?}"), range(span))
                    .with_label("not part of any token")
                    .with_help(
                        "SCSQL is made of names, numbers, strings in quotes, \
                         ( ) { } , ; = and the operators + - * / < <= > >= != <> ->",
                    ),
            ),
        }
    }
    diagnostics.sort_by_key(|diagnostic| diagnostic.span.start);
    (tokens, diagnostics)
}

/// A diagnostic for an error of the lexer (a literal it refuses, an unterminated string or
/// comment).
fn diagnostic(error: &Rich<'_, char>) -> Diagnostic {
    let span = range(*error.span());
    match error.reason() {
        chumsky::error::RichReason::Custom(message) => {
            Diagnostic::new(message.clone(), span).with_label("here")
        }
        reason => Diagnostic::new(reason.to_string(), span).with_label("here"),
    }
}

/// Whether `text` ends a statement: its last token is `;` and nothing after it is left open
/// (a string or a `/*` comment). The shell reads lines until this holds.
pub fn ends_statement(text: &str) -> bool {
    let (tokens, errors) = lex(text);
    match tokens.last() {
        Some((Token::Semicolon, span)) => errors.iter().all(|error| error.span.end <= span.start),
        _ => false,
    }
}

/// The span as the syntax tree keeps it.
pub fn range(span: SimpleSpan) -> Span {
    span.start..span.end
}

fn lexer<'src>() -> impl Parser<'src, &'src str, Vec<(Lexeme, SimpleSpan)>, Extra<'src>> {
    let digits = text::digits(10).to_slice();
    let exponent = one_of("eE").then(one_of("+-").or_not()).then(digits);
    let real = digits
        .then(just('.').then(digits).then(exponent.or_not()).ignored())
        .ignored()
        .or(digits.then(exponent).ignored())
        .to_slice()
        .validate(|digits: &str, e, emitter| {
            let x: f64 = digits.parse().unwrap_or(f64::INFINITY);
            if !x.is_finite() {
                emitter.emit(Rich::custom(e.span(), "real literal out of range"));
            }
            Token::Real(x)
        });
    let integer = digits.validate(|digits: &str, e, emitter| {
        Token::Integer(digits.parse().unwrap_or_else(|_| {
            emitter.emit(Rich::custom(
                e.span(),
                format!("integer literal too large (at most {})", i64::MAX),
            ));
            0
        }))
    });

    let escape = just('\\').ignore_then(choice((
        just('\\'),
        just('\''),
        just('"'),
        just('n').to('\n'),
        just('t').to('\t'),
        any().validate(|c: char, e, emitter| {
            emitter.emit(Rich::custom(e.span(), format!("unknown escape \\{c}")));
            c
        }),
    )));
    let quoted = |quote: char| {
        just(quote)
            .ignore_then(
                escape
                    .or(none_of(['\\', quote]))
                    .repeated()
                    .collect::<String>(),
            )
            .then(just(quote).or_not())
            .validate(move |(text, closed), e, emitter| {
                if closed.is_none() {
                    emitter.emit(Rich::custom(
                        e.span(),
                        format!("unterminated string: no closing {quote}"),
                    ));
                }
                Token::Str(text)
            })
    };

    let name = text::ascii::ident().map(|word: &str| match Keyword::of_word(word) {
        Some(keyword) => Token::Keyword(keyword),
        None => Token::Ident(word.to_owned()),
    });

    let symbol = choice((
        just("->").to(Token::Arrow),
        just("<=").to(Token::LessOrEqual),
        just(">=").to(Token::GreaterOrEqual),
        just("<>").to(Token::NotEqual),
        just("!=").to(Token::NotEqual),
        just('<').to(Token::Less),
        just('>').to(Token::Greater),
        just('=').to(Token::Equals),
        just('+').to(Token::Plus),
        just('-').to(Token::Minus),
        just('*').to(Token::Star),
        just('/').to(Token::Slash),
        just('(').to(Token::LParen),
        just(')').to(Token::RParen),
        just('{').to(Token::LBrace),
        just('}').to(Token::RBrace),
        just(',').to(Token::Comma),
        just(';').to(Token::Semicolon),
    ));

    let token =
        choice((real, integer, quoted('\''), quoted('"'), name, symbol)).labelled("a token");

    let line_comment = just("--")
        .then(any().and_is(just('\n').not()).repeated())
        .ignored();
    let block_comment = just("/*")
        .then(any().and_is(just("*/").not()).repeated())
        .then(just("*/").or_not())
        .validate(|((_, _), closed), e, emitter| {
            if closed.is_none() {
                emitter.emit(Rich::custom(
                    e.span(),
                    "unterminated comment: no closing */",
                ));
            }
        });
    // Whitespace and comments, between tokens and around them.
    let skip = text::whitespace()
        .then(
            line_comment
                .or(block_comment)
                .then(text::whitespace())
                .repeated(),
        )
        .ignored();

    skip.ignore_then(
        token
            .map(Lexeme::Token)
            .or(any().map(Lexeme::Unknown))
            .map_with(|lexeme, e| (lexeme, e.span()))
            .then_ignore(skip)
            .repeated()
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Vec<Token> {
        let (tokens, errors) = lex(text);
        assert!(errors.is_empty(), "{text:?}: {errors:?}");
        tokens.into_iter().map(|(token, _)| token).collect()
    }

    #[test]
    fn keywords_are_case_insensitive_and_names_keep_their_case() {
        assert_eq!(
            tokens("Select FROM wHeRe sp Merge"),
            vec![
                Token::Keyword(Keyword::Select),
                Token::Keyword(Keyword::From),
                Token::Keyword(Keyword::Where),
                Token::Ident("sp".into()),
                Token::Ident("Merge".into()),
            ]
        );
    }

    #[test]
    fn numbers_strings_and_symbols() {
        assert_eq!(
            tokens(r#"42 1.5 2e3 'bg' "it's" 'a\'b\n' -> <= <> != ;"#),
            vec![
                Token::Integer(42),
                Token::Real(1.5),
                Token::Real(2000.0),
                Token::Str("bg".into()),
                Token::Str("it's".into()),
                Token::Str("a'b\n".into()),
                Token::Arrow,
                Token::LessOrEqual,
                Token::NotEqual,
                Token::NotEqual,
                Token::Semicolon,
            ]
        );
    }

    #[test]
    fn comments_are_skipped_and_spans_are_bytes() {
        let (tokens, errors) = lex("-- é\n/* x\n y */ n -- end");
        assert!(errors.is_empty());
        assert_eq!(tokens, vec![(Token::Ident("n".into()), (17..18).into())]);
    }

    #[test]
    fn errors_are_reported_and_skipped() {
        let (tokens, errors) = lex("a @ b 99999999999999999999 'a\\qb' 'open ]");
        let messages: Vec<&str> = errors.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(errors.len(), 4, "{messages:?}");
        assert_eq!(errors[0].span, 2..3);
        assert!(messages[1].contains("too large"), "{messages:?}");
        assert_eq!(messages[2], "unknown escape \\q");
        assert!(messages[3].contains("unterminated string"), "{messages:?}");
        assert_eq!(tokens.len(), 5);
        // A character that starts no token at the very end of the text.
        let (tokens, errors) = lex("[1.5e-16, 2]");
        assert_eq!((tokens.len(), errors.len()), (3, 2));
    }

    #[test]
    fn a_statement_ends_at_a_semicolon_outside_strings_and_comments() {
        assert!(ends_statement("select 1;"));
        assert!(ends_statement("select 1; -- done"));
        assert!(ends_statement("select ';';"));
        assert!(!ends_statement("select 1"));
        assert!(!ends_statement("select ';"));
        assert!(!ends_statement("select 1 -- ;"));
        assert!(!ends_statement("select 1; /* open"));
        assert!(!ends_statement("select 1 /* ; */"));
        assert!(!ends_statement(""));
    }
}
