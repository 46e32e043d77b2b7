//! What the `tcp` hello and the `udp-mq` datagram header have in common: both start with a
//! [`Preamble`] (the format's magic, then its version) that a reader checks before anything
//! else, and both carry little-endian integers at fixed offsets, read here from a slice the
//! caller has checked holds them.

/// The first bytes of a wire format's headers: its magic, then its version, little-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Preamble<const MAGIC: usize, const VERSION: usize> {
    /// The format's magic.
    pub(crate) magic: [u8; MAGIC],
    /// The format's version, little-endian.
    pub(crate) version: [u8; VERSION],
}

impl<const MAGIC: usize, const VERSION: usize> Preamble<MAGIC, VERSION> {
    /// Its bytes: the offset of the first field after it.
    pub(crate) const LEN: usize = MAGIC + VERSION;

    /// Writes it at the start of `header`, which holds at least [`Self::LEN`] bytes.
    pub(crate) fn write(&self, header: &mut [u8]) {
        header[..MAGIC].copy_from_slice(&self.magic);
        header[MAGIC..Self::LEN].copy_from_slice(&self.version);
    }

    /// Whether `header` starts with it (a shorter one does not).
    pub(crate) fn begins(&self, header: &[u8]) -> bool {
        header.get(..MAGIC) == Some(&self.magic[..])
            && header.get(MAGIC..Self::LEN) == Some(&self.version[..])
    }
}

/// The `N` bytes at `at`, which the caller knows `bytes` holds.
fn array<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    let mut word = [0u8; N];
    word.copy_from_slice(&bytes[at..at + N]);
    word
}

/// The little-endian `u16` at `at`.
pub(crate) fn get_u16(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(array(bytes, at))
}

/// The little-endian `u32` at `at`.
pub(crate) fn get_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(array(bytes, at))
}

/// The little-endian `u64` at `at`.
pub(crate) fn get_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(array(bytes, at))
}

/// Writes `le` (an integer's little-endian bytes) at `at`.
pub(crate) fn put(bytes: &mut [u8], at: usize, le: &[u8]) {
    bytes[at..at + le.len()].copy_from_slice(le);
}

/// Writes `value` little-endian at `at`.
pub(crate) fn put_u32(bytes: &mut [u8], at: usize, value: u32) {
    put(bytes, at, &value.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preamble_is_written_and_recognised_whole() {
        let p = Preamble {
            magic: *b"AB",
            version: 7u16.to_le_bytes(),
        };
        let mut header = [0u8; 6];
        p.write(&mut header);
        assert_eq!(header, [b'A', b'B', 7, 0, 0, 0]);
        assert!(p.begins(&header));
        assert!(!p.begins(&header[..3]), "too short");
        for at in 0..Preamble::<2, 2>::LEN {
            let mut bad = header;
            bad[at] ^= 1;
            assert!(!p.begins(&bad), "byte {at} changed");
        }
    }

    #[test]
    fn fields_are_little_endian_at_their_offsets() {
        let mut bytes = [0u8; 16];
        put_u32(&mut bytes, 1, 0x0403_0201);
        put(&mut bytes, 5, &0x0605u16.to_le_bytes());
        put(&mut bytes, 8, &0x0f0e_0d0c_0b0a_0908u64.to_le_bytes());
        assert_eq!(bytes[..8], [0, 1, 2, 3, 4, 5, 6, 0]);
        assert_eq!(get_u32(&bytes, 1), 0x0403_0201);
        assert_eq!(get_u16(&bytes, 5), 0x0605);
        assert_eq!(get_u64(&bytes, 8), 0x0f0e_0d0c_0b0a_0908);
    }
}
