//! One `mpi` batch, fed to the batch decoder.
//!
//! The checks are `sluice_transport::fuzzing::mpi_batch`'s, which the normal test suite's
//! proptests run too.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| sluice_transport::fuzzing::mpi_batch(bytes));
