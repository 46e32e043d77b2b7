//! A sequence of `udp-mq` datagrams (each a length byte, then its bytes), fed to a receiver's
//! intake.
//!
//! The checks are `sluice_transport::fuzzing::udp_mq_datagrams`'s, which the normal test suite's
//! proptests run too.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| sluice_transport::fuzzing::udp_mq_datagrams(bytes));
