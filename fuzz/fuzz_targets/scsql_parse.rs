//! Fuzzes the SCSQL parser ([`sluice_query::parse`]) through
//! [`sluice_query::fuzzing::parse_text`]: any bytes, as text, must parse or fail with
//! diagnostics whose spans lie within the text and render with their line and column, never
//! panic; a text that parses has every node's span within its parent's (seeds: the queries of
//! `crates/sluice/tests/queries`, fuzz/README.md).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        sluice_query::fuzzing::parse_text(text);
    }
});
