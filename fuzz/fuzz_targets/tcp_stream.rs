//! The bytes an admitted `tcp` sender streams, fed to the frame decoder in reads of the size
//! the first byte gives.
//!
//! The checks are `sluice_transport::fuzzing::tcp_stream`'s, which the normal test suite's
//! proptests run too.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| sluice_transport::fuzzing::tcp_stream(bytes));
