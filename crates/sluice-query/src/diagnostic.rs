//! A problem found in a query's text, with where it is: what every stage (parser, checker,
//! binder, a built-in refusing its argument) reports, and what the tool shows as the line,
//! the column and a caret under the offending text.

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
}
