//! The pseudo-random numbers the applications' generators draw from: xorshift64*, fast,
//! deterministic for a seed, and the same on every machine.

/// An xorshift64* generator; its state is a snapshot's (a generating source's, which resumes
/// where it stopped).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct XorShift(u64);

impl XorShift {
    /// The sequence of `seed` (0 counts as 1: the state must not be 0).
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// Where the sequence is: [`XorShift::new`] of it goes on from there.
    pub(crate) fn state(&self) -> u64 {
        self.0
    }

    /// The next number.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}
