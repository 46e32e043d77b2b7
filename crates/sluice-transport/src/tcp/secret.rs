//! The job's secret: random bytes every PE of a job shares, presented by each sender when it
//! connects so a listener accepts only the job's own senders.
//!
//! It is never printed (`Debug` hides it) and is compared in constant time (`subtle`), so
//! neither logs nor timing give it away. Between processes it travels as hex, in an
//! environment variable or a file readable only by its owner, never on a command line.

use subtle::ConstantTimeEq;

use crate::TransportError;

/// Bytes in a job secret.
pub const SECRET_LEN: usize = 32;

/// A job's shared secret.
#[derive(Clone, PartialEq, Eq)]
pub struct JobSecret([u8; SECRET_LEN]);

impl std::fmt::Debug for JobSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobSecret(..)")
    }
}

/// Why a text is not a job secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a job secret is {hex} hexadecimal digits", hex = 2 * SECRET_LEN)]
pub struct InvalidSecret;

impl JobSecret {
    /// A fresh secret from the operating system's random source.
    pub fn random() -> Result<Self, TransportError> {
        let mut bytes = [0u8; SECRET_LEN];
        getrandom::fill(&mut bytes)
            .map_err(|e| TransportError::Setup(format!("no random job secret: {e}")))?;
        Ok(Self(bytes))
    }

    /// The secret made of `bytes`.
    pub fn from_bytes(bytes: [u8; SECRET_LEN]) -> Self {
        Self(bytes)
    }

    /// The secret as lowercase hex, to hand to another process.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Reads a secret written by [`JobSecret::to_hex`].
    pub fn from_hex(text: &str) -> Result<Self, InvalidSecret> {
        let text = text.trim().as_bytes();
        if text.len() != 2 * SECRET_LEN {
            return Err(InvalidSecret);
        }
        let mut bytes = [0u8; SECRET_LEN];
        for (byte, pair) in bytes.iter_mut().zip(text.chunks_exact(2)) {
            let pair = std::str::from_utf8(pair).map_err(|_| InvalidSecret)?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| InvalidSecret)?;
        }
        Ok(Self(bytes))
    }

    /// The secret's bytes, for the hello.
    pub(crate) fn bytes(&self) -> &[u8; SECRET_LEN] {
        &self.0
    }

    /// Whether `presented` is this secret, in time independent of where they differ.
    pub(crate) fn matches(&self, presented: &[u8]) -> bool {
        self.0.ct_eq(presented).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_bad_text_is_refused() {
        let secret = JobSecret::random().unwrap();
        assert_eq!(JobSecret::from_hex(&secret.to_hex()).unwrap(), secret);
        assert_eq!(secret.to_hex().len(), 64);
        for bad in [
            "",
            "00",
            &"zz".repeat(32),
            &"0".repeat(65),
            "é".repeat(32).as_str(),
        ] {
            assert_eq!(JobSecret::from_hex(bad), Err(InvalidSecret), "{bad}");
        }
        assert_eq!(
            InvalidSecret.to_string(),
            "a job secret is 64 hexadecimal digits"
        );
    }

    #[test]
    fn debug_hides_the_secret_and_matching_is_exact() {
        let secret = JobSecret::from_bytes([7; SECRET_LEN]);
        assert_eq!(format!("{secret:?}"), "JobSecret(..)");
        assert!(secret.matches(&[7; SECRET_LEN]));
        let mut other = [7; SECRET_LEN];
        other[31] = 8;
        assert!(!secret.matches(&other));
        assert!(!secret.matches(&[7; 31]));
        assert_ne!(JobSecret::random().unwrap(), JobSecret::random().unwrap());
    }
}
