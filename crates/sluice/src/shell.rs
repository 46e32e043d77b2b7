//! The SCSQL shell of `sluice query` (run with no query text nor file): reads statements and
//! hands each, as it is completed, to the caller, which runs it and prints its results.
//!
//! A statement is complete when it ends with `;` outside strings and comments (the lexer of
//! `sluice_query` decides), so it may span several lines; everything up to that `;` (several
//! statements, if a line holds several) is handed over at once. An error the caller returns is
//! printed to standard error (`error: ...`, or as it is when it is already a rendered
//! diagnostic, `Error: ...`) and the shell goes on.
//!
//! - `quit;` or `exit;` (the `;` may be left out), or Ctrl-D, leaves; at the end of the input
//!   a last statement without its `;` is run first.
//! - `help;` lists the statements and the built-in functions' signatures.
//! - On a terminal, lines are edited with `rustyline` (the usual Emacs keys; Ctrl-C drops the
//!   statement being typed; Tab completes keywords, type names and built-in functions) and each
//!   statement is kept in the history file
//!   `$XDG_STATE_HOME/sluice/history` (else `~/.local/state/sluice/history`; made readable by
//!   its owner only), so that Up and Ctrl-R find it in later sessions.
//! - When standard input is not a terminal (a pipe, a file), statements are read from it the
//!   same way, without prompts or history.
//!
//! A statement (the text up to its `;`) is at most [`MAX_TEXT_FILE_BYTES`], as a query file
//! is: a longer one, or a line that never ends (`sluice query < /dev/zero`), ends the shell
//! with an error naming the limit rather than filling memory.

use std::ffi::OsString;
use std::io::{BufRead, IsTerminal, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use rustyline::completion::Completer;
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Editor, Helper};
use sluice_plan::MAX_TEXT_FILE_BYTES;
use sluice_query::functions;
use sluice_query::lexer::{self, Keyword, Token};

/// What `help;` prints.
const HELP: &str = "\
SCSQL statements (end each with ';'; keywords in any case):
  select EXPR from TYPE NAME, ... where COND and ...;
      a query; conditions bind (c = sp(...), n = 4), range (i in iota(1, n)) or filter (i > 2)
  EXPR;                       a query of one expression, e.g. merge(spv(...));
  create function NAME(TYPE NAME, ...) -> TYPE as select ...;
  set NAME = VALUE;           a driver setting for the queries that follow
Types: integer, real, string, sp, stream, array, object, bag of TYPE.
Comments: -- to the end of the line, /* ... */.
Shell: help; quit; exit; (or Ctrl-D). Ctrl-C drops the statement being typed; Tab completes
  keywords and function names.
Built-in functions ([...] optional; docs/src/scsql.md says what each does):
";

/// `help;`'s text: [`HELP`] and the signature of every built-in.
fn help() -> String {
    let mut text = HELP.to_owned();
    for builtin in functions::all() {
        text.push_str("  ");
        text.push_str(&builtin.signature());
        text.push('\n');
    }
    text
}

/// Reads statements until `quit;`, `exit;` or the end of the input, calling `run` with the text
/// of each as it is completed; an error `run` returns is printed and the shell goes on. An
/// error of the shell itself (the terminal cannot be read) ends it.
pub(crate) fn run_shell(run: impl FnMut(&str) -> anyhow::Result<()>) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout();
    let mut stderr = std::io::stderr();
    if std::io::stdin().is_terminal() {
        let mut terminal = Terminal::new()?;
        drive(|more| terminal.read(more), &mut stdout, &mut stderr, run)
    } else {
        let mut input = std::io::stdin().lock();
        let next = |_| piped_line(&mut input);
        drive(next, &mut stdout, &mut stderr, run)
    }
}

/// The next line of piped input, without its line end, read no further than the limit of a
/// statement.
fn piped_line(input: &mut impl BufRead) -> anyhow::Result<Input> {
    let mut line = Vec::new();
    std::io::Read::take(&mut *input, MAX_TEXT_FILE_BYTES + 1)
        .read_until(b'\n', &mut line)
        .context("reading standard input")?;
    if line.is_empty() {
        return Ok(Input::End);
    }
    if line.pop_if(|end| *end == b'\n').is_none() && line.len() as u64 > MAX_TEXT_FILE_BYTES {
        return Err(too_long());
    }
    let line = String::from_utf8(line).context("standard input is not UTF-8")?;
    Ok(Input::Text(
        line.strip_suffix('\r').unwrap_or(&line).to_owned(),
    ))
}

/// The error of a statement longer than [`MAX_TEXT_FILE_BYTES`].
fn too_long() -> anyhow::Error {
    anyhow::anyhow!(
        "a statement of more than {MAX_TEXT_FILE_BYTES} bytes (no ';' yet), over the limit of \
         {MAX_TEXT_FILE_BYTES}"
    )
}

/// What the user gave at a prompt.
#[derive(Debug)]
enum Input {
    /// A line, or on a terminal a whole statement.
    Text(String),
    /// Ctrl-C: drop what is pending.
    Interrupted,
    /// Ctrl-D or the end of the input.
    End,
}

/// What a completed text asks for.
#[derive(Debug, PartialEq)]
enum Entered {
    /// `quit` or `exit`.
    Quit,
    /// `help`.
    Help,
    /// Statements to run.
    Statements,
    /// Nothing but spaces and comments.
    Nothing,
}

/// Whether `text` is one of the shell's words (`quit`, `exit`, `help`, with or without `;`),
/// statements or nothing.
fn entered(text: &str) -> Entered {
    let (tokens, errors) = lexer::lex(text);
    let words: Vec<&Token> = tokens
        .iter()
        .map(|(token, _)| token)
        .filter(|token| **token != Token::Semicolon)
        .collect();
    match words.as_slice() {
        [] if errors.is_empty() => Entered::Nothing,
        [Token::Ident(word)] if errors.is_empty() && tokens.len() <= 2 => {
            match word.to_ascii_lowercase().as_str() {
                "quit" | "exit" => Entered::Quit,
                "help" => Entered::Help,
                _ => Entered::Statements,
            }
        }
        _ => Entered::Statements,
    }
}

/// Whether `text` is ready to be handed over: it ends a statement or is one of the shell's
/// words.
fn complete(text: &str) -> bool {
    lexer::ends_statement(text) || matches!(entered(text), Entered::Quit | Entered::Help)
}

/// The shell's loop over `next` (called with whether a statement is pending, for the prompt):
/// collects lines until they are [`complete`], then acts on them.
fn drive(
    mut next: impl FnMut(bool) -> anyhow::Result<Input>,
    out: &mut impl Write,
    errors: &mut impl Write,
    mut run: impl FnMut(&str) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut pending = String::new();
    loop {
        let at_end = match next(!pending.is_empty())? {
            Input::Text(line) => {
                pending.push_str(&line);
                pending.push('\n');
                if pending.len() as u64 > MAX_TEXT_FILE_BYTES {
                    return Err(too_long());
                }
                if entered(&pending) == Entered::Nothing {
                    // Blank lines and comments alone do not start a statement.
                    pending.clear();
                    continue;
                }
                false
            }
            Input::Interrupted => {
                pending.clear();
                continue;
            }
            Input::End => true,
        };
        if !at_end && !complete(&pending) {
            continue;
        }
        let text = std::mem::take(&mut pending);
        match entered(&text) {
            Entered::Quit => return Ok(()),
            Entered::Help => out.write_all(help().as_bytes())?,
            Entered::Nothing => {}
            Entered::Statements => {
                if let Err(error) = run(&text) {
                    let message = format!("{error:#}");
                    let prefix = if message.starts_with("Error:") {
                        ""
                    } else {
                        "error: "
                    };
                    writeln!(errors, "{prefix}{}", message.trim_end())?;
                }
            }
        }
        out.flush()?;
        if at_end {
            return Ok(());
        }
    }
}

/// The terminal's line editor, with the history file.
struct Terminal {
    editor: Editor<StatementHelper, DefaultHistory>,
    history: Option<PathBuf>,
}

impl Terminal {
    fn new() -> anyhow::Result<Self> {
        let mut editor = Editor::new().context("opening the terminal")?;
        editor.set_helper(Some(StatementHelper));
        let history = history_file();
        if let Some(path) = &history {
            // A missing or unreadable history is no reason not to start.
            let _ = editor.load_history(path);
        }
        Ok(Self { editor, history })
    }

    /// A whole statement (the editor goes on to a new line until it is complete).
    fn read(&mut self, more: bool) -> anyhow::Result<Input> {
        let prompt = if more { "   ...> " } else { "scsql> " };
        match self.editor.readline(prompt) {
            Ok(text) => {
                if !text.trim().is_empty() {
                    let _ = self.editor.add_history_entry(text.as_str());
                    if let Some(path) = &self.history {
                        // Appended as it is entered, so that a crash loses nothing; the
                        // editor makes the file readable by its owner only.
                        let _ = self.editor.append_history(path);
                    }
                }
                Ok(Input::Text(text))
            }
            Err(ReadlineError::Interrupted) => Ok(Input::Interrupted),
            Err(ReadlineError::Eof) => Ok(Input::End),
            Err(error) => Err(error).context("reading the terminal"),
        }
    }
}

/// The history file, its directory made (see [`history_path`]); `None` where there is none.
fn history_file() -> Option<PathBuf> {
    let path = history_path(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME"))?;
    make_private_dir(path.parent()?).ok()?;
    Some(path)
}

/// `$XDG_STATE_HOME/sluice/history`, else `$HOME/.local/state/sluice/history`; `None` where
/// neither variable is set.
fn history_path(xdg_state_home: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    Some(state_dir(xdg_state_home, home)?.join("history"))
}

/// Sluice's state directory: `$XDG_STATE_HOME/sluice`, else `$HOME/.local/state/sluice`;
/// `None` where neither variable is set.
pub(crate) fn state_dir(
    xdg_state_home: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    let state = match xdg_state_home.filter(|dir| !dir.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(home.filter(|dir| !dir.is_empty())?).join(".local/state"),
    };
    Some(state.join("sluice"))
}

/// Makes `dir` and its parents; the ones it makes only their owner may enter.
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Keeps the editor on a statement until it is complete: Enter before the closing `;` starts a
/// new line of the same statement.
struct StatementHelper;

impl Validator for StatementHelper {
    fn validate(&self, ctx: &mut ValidationContext) -> rustyline::Result<ValidationResult> {
        let input = ctx.input();
        Ok(if input.trim().is_empty() || complete(input) {
            ValidationResult::Valid(None)
        } else {
            ValidationResult::Incomplete
        })
    }
}

/// The type names a declaration may use (besides `bag of`).
const TYPE_NAMES: [&str; 8] = [
    "integer",
    "real",
    "string",
    "charstring",
    "sp",
    "stream",
    "array",
    "object",
];

/// The words Tab completes `prefix` to (ignoring case): keywords, type names, built-in
/// functions and the shell's words, sorted.
fn completions(prefix: &str) -> Vec<String> {
    let mut words: Vec<String> = Keyword::ALL
        .iter()
        .map(|keyword| keyword.text())
        .chain(TYPE_NAMES)
        .chain(functions::names())
        .chain(["help", "quit", "exit"])
        .filter(|word| {
            word.len() >= prefix.len()
                && word.is_char_boundary(prefix.len())
                && word[..prefix.len()].eq_ignore_ascii_case(prefix)
        })
        .map(String::from)
        .collect();
    words.sort();
    words.dedup();
    words
}

impl Completer for StatementHelper {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let before = &line[..pos];
        let start = before
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(0, |at| at + 1);
        let prefix = &before[start..];
        Ok(if prefix.is_empty() {
            (pos, Vec::new())
        } else {
            (start, completions(prefix))
        })
    }
}

impl Hinter for StatementHelper {
    type Hint = String;
}

impl Highlighter for StatementHelper {}

impl Helper for StatementHelper {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the shell over `lines` as piped input; returns what `run` was given, what was
    /// printed and what was printed as errors. `run` fails on statements containing `fail`.
    fn shell(lines: &[&str]) -> (Vec<String>, String, String) {
        let mut lines = lines.iter();
        let mut given = Vec::new();
        let (mut out, mut errors) = (Vec::new(), Vec::new());
        drive(
            |_| {
                Ok(match lines.next() {
                    Some(&"^C") => Input::Interrupted,
                    Some(line) => Input::Text(line.to_string()),
                    None => Input::End,
                })
            },
            &mut out,
            &mut errors,
            |text| {
                given.push(text.to_owned());
                anyhow::ensure!(!text.contains("fail"), "it failed");
                Ok(())
            },
        )
        .unwrap();
        let text = |bytes| String::from_utf8(bytes).unwrap();
        (given, text(out), text(errors))
    }

    #[test]
    fn a_statement_longer_than_the_limit_ends_the_shell_naming_it() {
        // One line over the limit: refused before it is lexed.
        let mut lines = ["select 1".to_string(), "x".repeat(16 << 20)].into_iter();
        let mut run = 0;
        let error = drive(
            |_| Ok(lines.next().map_or(Input::End, Input::Text)),
            &mut Vec::new(),
            &mut Vec::new(),
            |_| {
                run += 1;
                Ok(())
            },
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "a statement of more than 16777216 bytes (no ';' yet), over the limit of 16777216"
        );
        assert_eq!(run, 0);
        let mut endless = std::io::BufReader::new(std::io::repeat(b'a'));
        let error = piped_line(&mut endless).unwrap_err();
        assert!(
            error.to_string().starts_with("a statement of more than"),
            "{error}"
        );
        let mut two = "select 1;\r\nlast".as_bytes();
        assert!(matches!(piped_line(&mut two).unwrap(), Input::Text(t) if t == "select 1;"));
        assert!(matches!(piped_line(&mut two).unwrap(), Input::Text(t) if t == "last"));
        assert!(matches!(piped_line(&mut two).unwrap(), Input::End));
    }

    #[test]
    fn statements_are_handed_over_at_their_semicolon() {
        let (given, out, errors) = shell(&[
            "select 1;",
            "select x",
            "  from integer x -- a comment; not the end",
            "  where x in {';', 2}; select 2;",
            "",
            "/* select 3; */",
        ]);
        assert_eq!(
            given,
            [
                "select 1;\n",
                "select x\n  from integer x -- a comment; not the end\n  \
                 where x in {';', 2}; select 2;\n",
            ]
        );
        assert_eq!((out.as_str(), errors.as_str()), ("", ""));
    }

    #[test]
    fn an_error_is_printed_and_the_shell_goes_on() {
        let (given, _, errors) = shell(&["select fail;", "select 2;"]);
        assert_eq!(given, ["select fail;\n", "select 2;\n"]);
        assert_eq!(errors, "error: it failed\n");
    }

    #[test]
    fn quit_exit_and_the_end_leave_and_a_last_statement_runs() {
        assert_eq!(
            shell(&["select 1;", "quit;", "select 2;"]).0,
            ["select 1;\n"]
        );
        assert_eq!(shell(&["EXIT", "select 2;"]).0, Vec::<String>::new());
        assert_eq!(shell(&["select 1", "+ 2"]).0, ["select 1\n+ 2\n"]);
        // A name that starts like a word of the shell is a statement.
        assert_eq!(shell(&["quitting;"]).0, ["quitting;\n"]);
    }

    #[test]
    fn ctrl_c_drops_the_pending_statement() {
        assert_eq!(shell(&["select 1", "^C", "select 2;"]).0, ["select 2;\n"]);
    }

    #[test]
    fn help_lists_the_statements_and_the_built_ins() {
        let (given, out, _) = shell(&["help;"]);
        assert!(given.is_empty());
        assert!(
            out.contains("create function") && out.contains("quit"),
            "{out}"
        );
        assert!(
            out.contains("\n  gen_array(integer bytes, integer count) -> "),
            "{out}"
        );
    }

    #[test]
    fn tab_completes_keywords_types_and_functions() {
        assert_eq!(completions("SEL"), ["select"]);
        assert_eq!(completions("ex"), ["exit", "extract"]);
        assert_eq!(completions("inp"), ["inPset", "input"]);
        assert_eq!(completions("inps"), ["inPset"]);
        assert_eq!(completions("s"), completions("S"));
        assert!(completions("s").contains(&"sp".to_owned()));
        assert!(completions("é").is_empty());
    }

    #[test]
    fn the_history_lives_under_xdg_state_home_or_home() {
        let path = |xdg: Option<&str>, home: Option<&str>| {
            history_path(xdg.map(OsString::from), home.map(OsString::from))
        };
        assert_eq!(
            path(Some("/s"), Some("/h")),
            Some("/s/sluice/history".into())
        );
        assert_eq!(
            path(Some(""), Some("/h")),
            Some("/h/.local/state/sluice/history".into())
        );
        assert_eq!(
            path(None, Some("/h")),
            Some("/h/.local/state/sluice/history".into())
        );
        assert_eq!(path(None, None), None);

        let dir = tempfile::tempdir().unwrap();
        let history = dir.path().join("state/sluice");
        make_private_dir(&history).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&history).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }
}
