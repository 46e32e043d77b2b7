//! Text helpers shared by operators and applications that read words.
//!
//! [`words`] is WordCount's tokenizer as a library function: split on whitespace, strip
//! leading and trailing ASCII punctuation, drop empty words, lowercase. Each word is a
//! [`CompactString`], which keeps up to 24 bytes inline: the words of natural text and of
//! symbols and ids are shorter than that, so tokenizing allocates nothing per word, and the
//! word moves through a fused chain and into keyed state without touching the allocator.
//!
//! Text that is all ASCII (checked once per text, a fast scan) is cut byte by byte, and a word
//! with no capital letter is copied as it is; other text goes through the standard library's
//! Unicode-aware splitting and lowercasing. Both give the same words (a property test checks
//! it).

use std::iter::{Filter, Map};
use std::str::SplitWhitespace;

use sluice_types::CompactString;

/// The words of `text`, normalised: split on whitespace, ASCII punctuation trimmed from both
/// ends, empty words dropped, lowercased.
pub fn words(text: &str) -> Words<'_> {
    if text.is_ascii() {
        Words::Ascii { text, at: 0 }
    } else {
        Words::Unicode(
            text.split_whitespace()
                .map(trim_punctuation as fn(&str) -> &str)
                .filter(not_empty as fn(&&str) -> bool)
                .map(lowercase),
        )
    }
}

/// The iterator [`words`] returns.
pub enum Words<'a> {
    /// ASCII text, cut byte by byte from `at`.
    Ascii {
        /// The text.
        text: &'a str,
        /// Where the next word's search starts.
        at: usize,
    },
    /// Any other text, through the standard library's Unicode-aware steps.
    #[allow(clippy::type_complexity)]
    Unicode(
        Map<
            Filter<Map<SplitWhitespace<'a>, fn(&str) -> &str>, fn(&&str) -> bool>,
            fn(&str) -> CompactString,
        >,
    ),
}

impl Iterator for Words<'_> {
    type Item = CompactString;

    #[inline]
    fn next(&mut self) -> Option<CompactString> {
        match self {
            Words::Ascii { text, at } => loop {
                let bytes = text.as_bytes();
                let start = *at + bytes[*at..].iter().position(|b| !is_space(*b))?;
                let end = bytes[start..]
                    .iter()
                    .position(|b| is_space(*b))
                    .map_or(bytes.len(), |n| start + n);
                *at = end;
                let word = &bytes[start..end];
                let Some(first) = word.iter().position(|b| !b.is_ascii_punctuation()) else {
                    continue;
                };
                // A byte that is not punctuation exists, so the search from the end finds one.
                let last = word
                    .iter()
                    .rposition(|b| !b.is_ascii_punctuation())
                    .unwrap_or(first);
                // Every byte is ASCII, so every index is a character boundary.
                return Some(ascii_lowercase(&text[start + first..=start + last]));
            },
            Words::Unicode(words) => words.next(),
        }
    }
}

/// Whether an ASCII byte is whitespace as `char::is_whitespace` says (which, unlike
/// `u8::is_ascii_whitespace`, counts the vertical tab).
#[inline]
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// `word` without leading and trailing ASCII punctuation.
#[inline]
fn trim_punctuation(word: &str) -> &str {
    word.trim_matches(|c: char| c.is_ascii_punctuation())
}

fn not_empty(word: &&str) -> bool {
    !word.is_empty()
}

/// An ASCII `word` lowercased; copied as it is when it has no capital.
#[inline]
fn ascii_lowercase(word: &str) -> CompactString {
    let mut lower = CompactString::from(word);
    if word.bytes().any(|b| b.is_ascii_uppercase()) {
        lower.as_mut_str().make_ascii_lowercase();
    }
    lower
}

/// `word` lowercased; ASCII words without copying through a `String`.
fn lowercase(word: &str) -> CompactString {
    if word.is_ascii() {
        ascii_lowercase(word)
    } else {
        CompactString::from(word.to_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn words_are_normalised() {
        let w: Vec<CompactString> =
            words("  Hello, WORLD!  it's \"quoted\" -- ... e-mail\t(x) ÉTÉ").collect();
        assert_eq!(
            w,
            ["hello", "world", "it's", "quoted", "e-mail", "x", "été"].map(CompactString::from)
        );
        let ascii: Vec<CompactString> = words("\x0bA\x0c b.\r\n").collect();
        assert_eq!(ascii, ["a", "b"].map(CompactString::from));
    }

    proptest! {
        /// The ASCII path cuts the same words as the Unicode one.
        #[test]
        fn both_paths_agree(text in "[a-cA-C .,!'\\-\t\n\r\u{b}\u{c}]{0,40}") {
            let unicode: Vec<CompactString> = text
                .split_whitespace()
                .map(trim_punctuation)
                .filter(not_empty)
                .map(lowercase)
                .collect();
            let ascii: Vec<CompactString> = words(&text).collect();
            prop_assert_eq!(ascii, unicode);
        }
    }
}
