//! The entry point for fuzzing the packet decoder, [`fast_decode`]. The `cargo fuzz` target
//! `fast_decode` in `fuzz/` at the workspace root calls it (cargo fuzz builds with
//! `--cfg fuzzing`, which compiles this module; see `fuzz/README.md`), and the proptests below
//! run the same checks in the normal test suite, on random bytes and on mutated valid packets,
//! offline and in seconds.

use crate::fast::{decode_packet, encode_packet, HEADER_BYTES};

/// Decodes `bytes` as a packet and panics only where the decoder breaks its promise: a panic
/// of its own, messages it returns with an error, more messages than the bytes can hold (each
/// takes 2 bytes or more), an error placed outside the bytes, or a packet it accepts that does
/// not decode to the same messages once encoded again (in as many bytes or fewer: the encoder
/// writes no field a decoder can infer).
pub fn fast_decode(bytes: &[u8]) {
    let mut messages = Vec::new();
    match decode_packet(bytes, &mut messages) {
        Ok(header) => {
            assert_eq!(messages.len(), usize::from(header.count));
            assert!(messages.len() <= (bytes.len() - HEADER_BYTES) / 2);
            let mut again = Vec::new();
            encode_packet(&header, &messages, &mut again);
            assert!(again.len() <= bytes.len());
            let mut decoded = Vec::new();
            assert_eq!(decode_packet(&again, &mut decoded), Ok(header));
            assert_eq!(decoded, messages);
        }
        Err(error) => {
            assert!(messages.is_empty());
            assert!(error.offset <= bytes.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::{Feed, FeedConfig};

    /// The first packets of each channel of the default feed, built once.
    fn valid_packets() -> &'static [Vec<u8>] {
        static PACKETS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
        PACKETS.get_or_init(|| {
            let mut feed = Feed::new(&FeedConfig::default()).unwrap();
            (0..20)
                .map(|n| {
                    let mut out = Vec::new();
                    feed.next_packet(n % 4, 42, &mut out);
                    out
                })
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            fast_decode(&bytes);
        }

        #[test]
        fn random_bytes_after_a_valid_header(tail in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut bytes = valid_packets()[0][..HEADER_BYTES].to_vec();
            // Any count: the bytes rarely agree with it.
            bytes[7] = tail.first().copied().unwrap_or(0) % 8;
            bytes.extend_from_slice(&tail);
            fast_decode(&bytes);
        }

        #[test]
        fn mutated_valid_packets(
            packet in any::<prop::sample::Index>(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
            cut in any::<prop::sample::Index>(),
            truncate in any::<bool>(),
        ) {
            let mut bytes = packet.get(valid_packets()).clone();
            fast_decode(&bytes);
            for (at, value) in flips {
                let at = at.index(bytes.len());
                bytes[at] = value;
            }
            if truncate {
                bytes.truncate(cut.index(bytes.len() + 1));
            }
            fast_decode(&bytes);
        }
    }
}
