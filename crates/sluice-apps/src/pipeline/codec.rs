//! What the pipelines do to a packet on its way: zlib compression ([`Stage::Compress`]) or
//! AES-256-GCM encryption ([`Stage::Encrypt`]) at the sender, and the way back at the
//! receiver, which reports a packet it cannot take back (corrupt, truncated, tampered with) as
//! an error naming what failed, never a panic.
//!
//! - **compress**: each packet is a zlib stream of its own (`flate2` over zlib-rs, a Rust port
//!   of zlib), so any replica can compress or decompress any packet. Decompression must end
//!   the stream exactly at the end of the packet and give exactly the packet's length: zlib's
//!   Adler-32 check catches most corruption, and the sink compares every byte anyway.
//! - **encrypt**: AES-256-GCM from `ring`, under one key drawn from the seed; the nonce is the
//!   packet's flow (4 bytes) and sequence number (8 bytes), unique per packet and never sent,
//!   so a packet whose header was altered fails authentication too. On the wire: the
//!   ciphertext, then the 16-byte tag. `ring` was measured 2.5 to 5 times faster than the
//!   `aes-gcm` crate here (see docs/benchmarks.md), hence it.

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};

/// Which pipeline: what the sender does to a packet, and the receiver undoes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// zlib at `level` (0 to 9).
    Compress {
        /// The compression level.
        level: u32,
    },
    /// AES-256-GCM.
    Encrypt,
}

impl Stage {
    /// The operator that encodes, and the one that decodes, as named in the graph.
    pub fn operator_names(self) -> (&'static str, &'static str) {
        match self {
            Self::Compress { .. } => ("compress", "decompress"),
            Self::Encrypt => ("encrypt", "decrypt"),
        }
    }
}

/// The sender's half: encodes packets.
pub struct Encoder(Encoding);

/// The receiver's half: decodes packets, refusing any it cannot take back.
pub struct Decoder(Decoding);

enum Encoding {
    Zlib(Compress),
    Aead(Box<LessSafeKey>),
}

enum Decoding {
    Zlib(Decompress),
    Aead(Box<LessSafeKey>),
}

/// The key of a run: 32 bytes drawn from its seed (a benchmark's key, not a secret).
fn key(seed: u64) -> LessSafeKey {
    let mut bytes = [0u8; 32];
    let mut state = seed;
    for chunk in bytes.chunks_mut(8) {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        chunk.copy_from_slice(
            &state
                .rotate_left(17)
                .wrapping_mul(0xd6e8_feb8_6659_fd93)
                .to_le_bytes(),
        );
    }
    LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &bytes).expect("AES-256 takes a 32-byte key"))
}

/// The nonce of packet `seq` of `flow`: unique per packet of a run.
fn nonce(flow: u32, seq: u64) -> Nonce {
    let mut bytes = [0u8; aead::NONCE_LEN];
    bytes[..4].copy_from_slice(&flow.to_be_bytes());
    bytes[4..].copy_from_slice(&seq.to_be_bytes());
    Nonce::assume_unique_for_key(bytes)
}

/// The most bytes zlib makes of `len` bytes (zlib's `compressBound`).
fn compress_bound(len: usize) -> usize {
    len + (len >> 12) + (len >> 14) + (len >> 25) + 13
}

impl Encoder {
    /// The encoder of `stage`, keyed from `seed` when it encrypts.
    pub fn new(stage: Stage, seed: u64) -> Self {
        Self(match stage {
            Stage::Compress { level } => {
                Encoding::Zlib(Compress::new(Compression::new(level), true))
            }
            Stage::Encrypt => Encoding::Aead(Box::new(key(seed))),
        })
    }

    /// Encodes `plain`, packet `seq` of `flow`, into `out` (replacing what it held).
    pub fn encode(
        &mut self,
        flow: u32,
        seq: u64,
        plain: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        out.clear();
        match &mut self.0 {
            Encoding::Zlib(zlib) => {
                zlib.reset();
                out.reserve(compress_bound(plain.len()));
                // With room for the bound, the first call ends the stream.
                loop {
                    let read = zlib.total_in() as usize;
                    let status = zlib
                        .compress_vec(&plain[read..], out, FlushCompress::Finish)
                        .map_err(|e| format!("compression failed: {e}"))?;
                    if status == Status::StreamEnd {
                        break;
                    }
                    out.reserve(out.capacity().max(64));
                }
            }
            Encoding::Aead(key) => {
                out.reserve(plain.len() + AES_256_GCM.tag_len());
                out.extend_from_slice(plain);
                let tag = key
                    .seal_in_place_separate_tag(nonce(flow, seq), Aad::empty(), out)
                    .map_err(|_| format!("encryption of {} bytes failed", plain.len()))?;
                out.extend_from_slice(tag.as_ref());
            }
        }
        Ok(())
    }
}

impl Decoder {
    /// The decoder of `stage`, keyed from `seed` when it decrypts.
    pub fn new(stage: Stage, seed: u64) -> Self {
        Self(match stage {
            Stage::Compress { .. } => Decoding::Zlib(Decompress::new(true)),
            Stage::Encrypt => Decoding::Aead(Box::new(key(seed))),
        })
    }

    /// Decodes `wire`, packet `seq` of `flow`, which should give `expected` bytes, into
    /// `out` (replacing what it held); the error says what failed.
    pub fn decode(
        &mut self,
        flow: u32,
        seq: u64,
        wire: &[u8],
        expected: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        out.clear();
        match &mut self.0 {
            Decoding::Zlib(zlib) => {
                zlib.reset(true);
                // One byte of room beyond the expected length shows a packet that is longer.
                out.reserve(expected + 1);
                let status = zlib
                    .decompress_vec(wire, out, FlushDecompress::Finish)
                    .map_err(|e| format!("decompression failed: {e}"))?;
                let read = zlib.total_in();
                if status != Status::StreamEnd {
                    return Err(format!(
                        "decompression failed: the zlib stream of {} bytes does not end within {} bytes of output (truncated, or longer than the packet)",
                        wire.len(),
                        out.len()
                    ));
                }
                if read != wire.len() as u64 {
                    return Err(format!(
                        "decompression failed: {} bytes follow the end of the zlib stream",
                        wire.len() as u64 - read
                    ));
                }
            }
            Decoding::Aead(key) => {
                out.extend_from_slice(wire);
                let plain = key
                    .open_in_place(nonce(flow, seq), Aad::empty(), out)
                    .map_err(|_| {
                        format!(
                            "decryption failed: the {} bytes do not authenticate under the run's key and this packet's nonce (tampered with, corrupt or truncated)",
                            wire.len()
                        )
                    })?
                    .len();
                out.truncate(plain);
            }
        }
        if out.len() != expected {
            return Err(format!(
                "{} bytes decoded where the packet has {expected}",
                out.len()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::data::TextGenerator;

    fn round_trip(stage: Stage) -> (Vec<u8>, Vec<u8>) {
        let plain = TextGenerator::new(3).packet(0, 20_000);
        let (mut encoder, mut decoder) = (Encoder::new(stage, 3), Decoder::new(stage, 3));
        let (mut wire, mut back) = (Vec::new(), Vec::new());
        encoder.encode(1, 2, &plain, &mut wire).unwrap();
        decoder.decode(1, 2, &wire, plain.len(), &mut back).unwrap();
        assert_eq!(back, plain);
        // Reused for the next packet.
        encoder.encode(1, 3, &plain[..500], &mut wire).unwrap();
        decoder.decode(1, 3, &wire, 500, &mut back).unwrap();
        assert_eq!(back, plain[..500]);
        encoder.encode(1, 2, &plain, &mut wire).unwrap();
        (plain, wire)
    }

    fn refused(stage: Stage, flow: u32, seq: u64, wire: &[u8], expected: usize) -> String {
        let mut out = Vec::new();
        Decoder::new(stage, 3)
            .decode(flow, seq, wire, expected, &mut out)
            .unwrap_err()
    }

    #[test]
    fn compression_round_trips_and_refuses_damage() {
        let stage = Stage::Compress { level: 6 };
        let (plain, wire) = round_trip(stage);
        assert!(wire.len() * 3 < plain.len(), "{} bytes", wire.len());
        let mut flipped = wire.clone();
        flipped[wire.len() / 2] ^= 0x40;
        let e = refused(stage, 1, 2, &flipped, plain.len());
        assert!(
            e.starts_with("decompression failed") || e.contains("decoded"),
            "{e}"
        );
        let e = refused(stage, 1, 2, &wire[..wire.len() - 9], plain.len());
        assert!(e.contains("does not end"), "{e}");
        // Longer than expected: stopped at the room reserved, or found at the end.
        let e = refused(stage, 1, 2, &wire, plain.len() - 1);
        assert!(
            e.contains("does not end") || e.contains("decoded where the packet has 19999"),
            "{e}"
        );
        let e = refused(stage, 1, 2, &wire, plain.len() + 1);
        assert!(
            e.contains("20000 bytes decoded where the packet has 20001"),
            "{e}"
        );
        let mut trailing = wire.clone();
        trailing.push(0);
        let e = refused(stage, 1, 2, &trailing, plain.len());
        assert!(e.contains("1 bytes follow the end"), "{e}");
        assert!(refused(stage, 0, 0, b"not zlib", 10).starts_with("decompression failed"));
    }

    #[test]
    fn encryption_round_trips_and_refuses_tampering() {
        let (plain, wire) = round_trip(Stage::Encrypt);
        assert_eq!(wire.len(), plain.len() + 16);
        assert_ne!(&wire[..plain.len()], &plain[..]);
        let mut flipped = wire.clone();
        flipped[100] ^= 1;
        for (flow, seq, bytes) in [
            (1, 2, &flipped[..]),
            (1, 3, &wire[..]),
            (2, 2, &wire[..]),
            (1, 2, &wire[..wire.len() - 1]),
            (1, 2, &wire[..5]),
        ] {
            let e = refused(Stage::Encrypt, flow, seq, bytes, plain.len());
            assert!(e.starts_with("decryption failed"), "{e}");
        }
        let mut other_key = Vec::new();
        let e = Decoder::new(Stage::Encrypt, 4)
            .decode(1, 2, &wire, plain.len(), &mut other_key)
            .unwrap_err();
        assert!(e.contains("do not authenticate"), "{e}");
    }
}
