//! Text helpers shared by operators and applications that read words.
//!
//! [`words`] is WordCount's tokenizer as a library function: split on whitespace, strip
//! leading and trailing ASCII punctuation, drop empty words, lowercase. Each word is a
//! [`CompactString`], which keeps up to 24 bytes inline: the words of natural text and of
//! symbols and ids are shorter than that, so tokenizing allocates nothing per word, and the
//! word moves through a fused chain and into keyed state without touching the allocator.

use sluice_types::CompactString;

/// The words of `text`, normalised: split on whitespace, ASCII punctuation trimmed from both
/// ends, empty words dropped, lowercased.
pub fn words(text: &str) -> impl Iterator<Item = CompactString> + '_ {
    text.split_whitespace()
        .map(|w| w.trim_matches(|c: char| c.is_ascii_punctuation()))
        .filter(|w| !w.is_empty())
        .map(lowercase)
}

/// `word` lowercased; ASCII words without copying through a `String`.
fn lowercase(word: &str) -> CompactString {
    if word.is_ascii() {
        let mut lower = CompactString::from(word);
        lower.as_mut_str().make_ascii_lowercase();
        lower
    } else {
        CompactString::from(word.to_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_normalised() {
        let w: Vec<CompactString> =
            words("  Hello, WORLD!  it's \"quoted\" -- ... e-mail\t(x) ÉTÉ").collect();
        assert_eq!(
            w,
            ["hello", "world", "it's", "quoted", "e-mail", "x", "été"].map(CompactString::from)
        );
    }
}
