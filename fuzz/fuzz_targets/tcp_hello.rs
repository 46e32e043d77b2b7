//! The first 60 bytes of a connection to a `tcp` receiver, checked as its hello.
//!
//! The checks are `sluice_transport::fuzzing::tcp_hello`'s, which the normal test suite's
//! proptests run too.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| sluice_transport::fuzzing::tcp_hello(bytes));
