//! A feed packet, decoded by the FAST packet decoder.
//!
//! The checks are `sluice_feed::fuzzing::fast_decode`'s, which the normal test suite's
//! proptests run too.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| sluice_feed::fuzzing::fast_decode(bytes));
