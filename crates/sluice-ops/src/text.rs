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
            Words::Ascii { text, at } => {
                let bytes = text.as_bytes();
                // Leading punctuation is trimmed and a word of punctuation alone dropped, so a
                // word starts at the first byte that is neither space nor punctuation.
                let start = *at
                    + bytes[*at..]
                        .iter()
                        .position(|b| class(*b) & (SPACE | PUNCTUATION) == 0)?;
                let mut end = bytes.len();
                let mut last = start;
                let mut capitals = false;
                for (i, b) in bytes[start..].iter().enumerate() {
                    let c = class(*b);
                    if c & SPACE != 0 {
                        end = start + i;
                        break;
                    }
                    if c & PUNCTUATION == 0 {
                        last = start + i;
                    }
                    capitals |= c & CAPITAL != 0;
                }
                *at = end;
                // Every byte is ASCII, so every index is a character boundary.
                let mut word = CompactString::from(&text[start..=last]);
                if capitals {
                    word.as_mut_str().make_ascii_lowercase();
                }
                Some(word)
            }
            Words::Unicode(words) => words.next(),
        }
    }
}

/// A byte that is whitespace as `char::is_whitespace` says (which, unlike
/// `u8::is_ascii_whitespace`, counts the vertical tab).
const SPACE: u8 = 1;
/// A byte that is ASCII punctuation.
const PUNCTUATION: u8 = 2;
/// A capital ASCII letter.
const CAPITAL: u8 = 4;

/// What each byte is to the tokenizer, one lookup per byte.
static CLASSES: [u8; 256] = {
    let mut classes = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        classes[b] = if matches!(byte, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
            SPACE
        } else if byte.is_ascii_punctuation() {
            PUNCTUATION
        } else if byte.is_ascii_uppercase() {
            CAPITAL
        } else {
            0
        };
        b += 1;
    }
    classes
};

#[inline]
fn class(b: u8) -> u8 {
    CLASSES[usize::from(b)]
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
        fn both_paths_agree(text in "[a-cA-C .,!'\\-\t\n\r\u{b}\u{c}\u{0}~]{0,40}") {
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
