//! A problem found in a query's text, with where it is: what every stage (parser, checker,
//! binder, a built-in refusing its argument) reports, and what the tool shows as the line,
//! the column and a caret under the offending text.
//!
//! [`Diagnostic::render`] draws one with `ariadne`, in plain ASCII and without colour (the same
//! text on a terminal, in a pipe and in the golden tests):
//! ```text
//! Error: unexpected string "bg"
//!    ,-[ p2p.scsql:4:5 ]
//!    |
//!  4 |     'bg',0) and
//!    |     ^^|^
//!    |       `--- expected an operator, ',' or ')'
//! ---'
//! ```
//! (a span of one character gets a `|` under it instead of a `^`).
//! Lines and columns count from 1, and columns count characters, not bytes.

use std::ops::Range;

use ariadne::{CharSet, Config, IndexType, Label, Report, ReportKind, Source};

use crate::ast::Span;

/// One problem in a statement's text.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    /// What is wrong, in one sentence (`unknown function 'mege'`).
    pub message: String,
    /// The text it is about.
    pub span: Span,
    /// What to say at the caret (`expected ')'`); may be empty.
    pub label: String,
    /// A hint after the picture (`did you mean 'merge'?`), if any.
    pub help: Option<String>,
}

impl Diagnostic {
    /// A diagnostic with no label and no help.
    pub fn new(message: impl Into<String>, span: Span) -> Self {
        Self {
            message: message.into(),
            span,
            label: String::new(),
            help: None,
        }
    }

    /// The same, with a label at the caret.
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// The same, with a hint.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// The line and column (from 1, in characters) where the diagnostic's text starts in `text`.
    pub fn line_column(&self, text: &str) -> (usize, usize) {
        line_column(text, self.span.start)
    }

    /// The diagnostic drawn as the user sees it: its message, `source_name:line:column`, the
    /// source lines of its span with a caret under the span, the label there and the help.
    /// A span past the end of `text` (or inside a character) is drawn at the nearest place
    /// inside it.
    pub fn render(&self, source_name: &str, text: &str) -> String {
        let span = within(text, &self.span);
        let config = Config::default()
            .with_color(false)
            .with_char_set(CharSet::Ascii)
            .with_index_type(IndexType::Byte);
        let mut label = Label::new((source_name, span.clone()));
        if !self.label.is_empty() {
            label = label.with_message(&self.label);
        }
        let mut report = Report::build(ReportKind::Error, (source_name, span))
            .with_config(config)
            .with_message(&self.message)
            .with_label(label);
        if let Some(help) = &self.help {
            report = report.with_help(help);
        }
        let mut out = Vec::new();
        report
            .finish()
            .write((source_name, Source::from(text)), &mut out)
            .expect("writing to a Vec cannot fail");
        // Without the spaces ariadne leaves at the end of some lines.
        String::from_utf8_lossy(&out)
            .lines()
            .map(|line| line.trim_end().to_owned() + "\n")
            .collect()
    }
}

/// What ends a line, as `ariadne` draws the text (`\r\n` counts as one).
const LINE_ENDS: [char; 7] = ['\n', '\r', '\x0B', '\x0C', '\u{85}', '\u{2028}', '\u{2029}'];

/// The line and column (from 1, in characters) of the byte `offset` of `text` (an offset past
/// the end counts as the end, one inside a character as that character). Lines end as in the
/// rendering: at `\n`, `\r\n`, a lone `\r` and the other Unicode line ends.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = floor_char_boundary(text, offset);
    let (mut line, mut column) = (1, 1);
    let mut chars = text[..offset].chars().peekable();
    while let Some(c) = chars.next() {
        if LINE_ENDS.contains(&c) {
            if c == '\r' {
                chars.next_if_eq(&'\n');
            }
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    (line, column)
}

/// The largest character boundary of `text` at or before `offset` (at most its length).
fn floor_char_boundary(text: &str, offset: usize) -> usize {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// `span` moved inside `text`, on character boundaries.
fn within(text: &str, span: &Span) -> Range<usize> {
    let start = floor_char_boundary(text, span.start);
    let mut end = span.end.clamp(start, text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    start..end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_columns_count_characters_from_one() {
        let text = "ab\né€x\n";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 2), (1, 3));
        assert_eq!(line_column(text, 3), (2, 1));
        assert_eq!(line_column(text, "ab\né€".len()), (2, 3));
        // Inside '€', and past the end.
        assert_eq!(line_column(text, "ab\né".len() + 1), (2, 2));
        assert_eq!(line_column(text, 100), (3, 1));
        // As ariadne counts lines: `\r\n` is one line end, a lone `\r` another.
        assert_eq!(line_column("a\r\nb\rc", 3), (2, 1));
        assert_eq!(line_column("a\r\nb\rc", 5), (3, 1));
        let rendered = Diagnostic::new("m", 5..6).render("t", "a\r\nb\rc");
        assert!(rendered.contains("t:3:1"), "{rendered}");
    }

    #[test]
    fn a_rendering_shows_the_place_the_line_a_caret_the_label_and_the_help() {
        let text = "select 1;\nselect 'é', f(x y);\n";
        let at = text.find('y').unwrap();
        let diagnostic = Diagnostic::new("unexpected name 'y'", at..at + 1)
            .with_label("expected ',' or ')'")
            .with_help("arguments are separated by commas");
        assert_eq!(diagnostic.line_column(text), (2, 17));
        let rendered = diagnostic.render("q.scsql", text);
        assert_eq!(
            rendered,
            "Error: unexpected name 'y'\n\
             \x20  ,-[ q.scsql:2:17 ]\n\
             \x20  |\n\
             \x202 | select 'é', f(x y);\n\
             \x20  |                 |\n\
             \x20  |                 `-- expected ',' or ')'\n\
             \x20  |\n\
             \x20  | Help: arguments are separated by commas\n\
             ---'\n"
        );
    }

    #[test]
    fn spans_outside_the_text_are_drawn_inside_it() {
        for (start, end) in [(0, 0), (5, 5), (4, 100), (100, 200), (1, 2), (2, 1)] {
            let span = start..end;
            let rendered = Diagnostic::new("m", span).render("t", "aé\n");
            assert!(rendered.starts_with("Error: m"), "{rendered}");
        }
        assert!(Diagnostic::new("m", 0..1).render("t", "").contains("t:1:1"));
    }
}
