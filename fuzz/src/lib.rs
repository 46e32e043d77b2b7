//! What the fuzz targets share: the check that a syntax error points inside the text.

use sluice_plan::TomlSyntaxError;

/// Asserts that `error`, from decoding `text`, names a line of the text and a column of that
/// line (or just past its end).
pub fn assert_located(text: &str, error: &TomlSyntaxError) {
    let lines: Vec<&str> = text.split('\n').collect();
    assert!((1..=lines.len()).contains(&error.line), "{error}");
    assert!(
        (1..=lines[error.line - 1].len() + 1).contains(&error.column),
        "{error}"
    );
}
