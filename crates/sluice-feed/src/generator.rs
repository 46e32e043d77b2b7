//! [`Feed`]: a deterministic generator of the feed's packets, channel by channel.
//!
//! Each channel has its own random stream (seeded from the config's seed and the channel), its
//! own message and packet sequence numbers (from 1) and its own underlyings, so a channel's
//! packets are the same whatever order the channels are asked in.
//!
//! A packet carries 1 to [`FeedConfig::max_messages_per_packet`] messages (uniformly). Each
//! message picks an underlying of the channel by its Zipf weight (Walker's alias method: one
//! uniform index and one coin per draw, whatever the number of underlyings), one of its series
//! uniformly, and an
//! exchange uniformly. It is a trade with probability [`FeedConfig::trade_fraction`] (at the
//! series' bid or ask), else a quote: the series' bid moves by -2 to +2 cents (never below a
//! cent) and the ask sits 1 to 4 cents above it, so prices move by small steps per series as
//! real quotes do. Sizes come from a short list of round lots, most often 10, so the copy
//! operator often pays. Prices are in 1/10,000 of a dollar, a series starting between
//! $0.05 and $50.

use crate::fast::{encode_packet, Message, MessageKind, PacketHeader};
use crate::{FeedConfig, FeedError};

/// One cent in 1/10,000 of a dollar.
const CENT: u64 = 100;
/// Quote and trade sizes, drawn uniformly: 10 half the time.
const SIZES: [u32; 8] = [10, 10, 10, 10, 20, 50, 100, 250];

/// A series' current quote.
#[derive(Clone, Copy)]
struct SeriesQuote {
    bid: u64,
    ask: u64,
}

/// One channel's state.
struct Channel {
    rng: fastrand::Rng,
    /// The channel's underlyings, in rank order.
    underlyings: Vec<u32>,
    /// Draws an index into `underlyings` by their weights.
    popularity: AliasTable,
    next_seq: u64,
    next_packet_seq: u64,
}

/// Walker's alias table (Vose's construction): draws index `i` with probability
/// `weights[i] / sum(weights)` from one uniform index and one uniform coin.
struct AliasTable {
    /// The chance of keeping the drawn index rather than taking its alias.
    keep: Vec<f64>,
    alias: Vec<u32>,
}

impl AliasTable {
    /// A table of `weights` (positive, at least one).
    fn new(weights: &[f64]) -> Self {
        let n = weights.len();
        let total: f64 = weights.iter().sum();
        // Each index's weight in units of the mean: under 1 it needs an alias to fill its slot.
        let mut scaled: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
        let (mut small, mut large): (Vec<usize>, Vec<usize>) =
            (0..n).partition(|&i| scaled[i] < 1.0);
        let mut keep = vec![1.0; n];
        let mut alias: Vec<u32> = (0..n as u32).collect();
        while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
            small.pop();
            keep[s] = scaled[s];
            alias[s] = l as u32;
            scaled[l] -= 1.0 - scaled[s];
            if scaled[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        // What is left has a weight of 1 up to rounding: it keeps its own slot.
        Self { keep, alias }
    }

    fn sample(&self, rng: &mut fastrand::Rng) -> usize {
        let i = rng.usize(..self.keep.len());
        if rng.f64() < self.keep[i] {
            i
        } else {
            self.alias[i] as usize
        }
    }
}

/// A deterministic generator of the feed (module docs): the same config and seed give the
/// same packets.
pub struct Feed {
    config: FeedConfig,
    channels: Vec<Channel>,
    quotes: Vec<SeriesQuote>,
    messages: Vec<Message>,
}

/// A 64-bit mix (SplitMix64's finaliser) for seeds and starting prices.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Feed {
    /// A generator of the feed `config` describes, after checking it.
    pub fn new(config: &FeedConfig) -> Result<Self, FeedError> {
        config.validate()?;
        let channels = config
            .underlyings_by_channel()
            .into_iter()
            .enumerate()
            .map(|(c, underlyings)| {
                let weights: Vec<f64> = underlyings.iter().map(|&u| config.popularity(u)).collect();
                Channel {
                    rng: fastrand::Rng::with_seed(mix(config.seed ^ mix(c as u64))),
                    underlyings,
                    popularity: AliasTable::new(&weights),
                    next_seq: 1,
                    next_packet_seq: 1,
                }
            })
            .collect();
        let quotes = (0..config.series())
            .map(|series| {
                let bid = CENT * (5 + mix(config.seed ^ series) % 5_000);
                SeriesQuote {
                    bid,
                    ask: bid + CENT,
                }
            })
            .collect();
        Ok(Self {
            config: config.clone(),
            channels,
            quotes,
            messages: Vec::with_capacity(config.max_messages_per_packet.into()),
        })
    }

    /// The feed's config.
    pub fn config(&self) -> &FeedConfig {
        &self.config
    }

    /// Encodes the next packet of `channel` into `out` (cleared first), stamping `sent_ns`;
    /// returns its message count. A channel out of range leaves `out` empty and returns 0.
    pub fn next_packet(&mut self, channel: usize, sent_ns: u64, out: &mut Vec<u8>) -> usize {
        out.clear();
        let mut messages = std::mem::take(&mut self.messages);
        let count = match self.next_messages(channel, sent_ns, &mut messages) {
            Some(header) => {
                encode_packet(&header, &messages, out);
                messages.len()
            }
            None => 0,
        };
        self.messages = messages;
        count
    }

    /// The next packet of `channel` unencoded: its messages into `out` (cleared first) and its
    /// header, stamped `sent_ns` (what [`decode_packet`](crate::decode_packet) gives for the
    /// packet [`Feed::next_packet`] would have encoded). `None` for a channel out of range.
    pub fn next_messages(
        &mut self,
        channel: usize,
        sent_ns: u64,
        out: &mut Vec<Message>,
    ) -> Option<PacketHeader> {
        out.clear();
        let state = self.channels.get_mut(channel)?;
        let count = state.rng.u16(1..=self.config.max_messages_per_packet);
        let header = PacketHeader {
            channel: channel as u16,
            packet_seq: state.next_packet_seq,
            first_seq: state.next_seq,
            count,
            sent_ns,
        };
        for _ in 0..count {
            out.push(next_message(&self.config, state, &mut self.quotes));
        }
        state.next_packet_seq += 1;
        Some(header)
    }
}

/// The channel's next message, moving its series' quote.
fn next_message(config: &FeedConfig, channel: &mut Channel, quotes: &mut [SeriesQuote]) -> Message {
    let rng = &mut channel.rng;
    let underlying = channel.underlyings[channel.popularity.sample(rng)];
    let series = config.series_range(underlying).start + rng.u32(0..config.series_per_underlying);
    let exchange = rng.u8(0..config.exchanges);
    let quote = &mut quotes[series as usize];
    let seq = channel.next_seq;
    channel.next_seq += 1;
    let base = Message {
        seq,
        underlying,
        series,
        exchange,
        ..Message::zeroed(MessageKind::Quote)
    };
    if rng.f64() < config.trade_fraction {
        Message {
            kind: MessageKind::Trade,
            trade_price: if rng.bool() { quote.bid } else { quote.ask },
            trade_size: SIZES[rng.usize(..SIZES.len())],
            ..base
        }
    } else {
        let step = rng.i64(-2..=2) * CENT as i64;
        quote.bid = quote.bid.saturating_add_signed(step).max(CENT);
        quote.ask = quote.bid + CENT * rng.u64(1..=4);
        Message {
            bid_price: quote.bid,
            bid_size: SIZES[rng.usize(..SIZES.len())],
            ask_price: quote.ask,
            ask_size: SIZES[rng.usize(..SIZES.len())],
            ..base
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fast::decode_packet;

    fn packets(config: &FeedConfig, order: &[usize]) -> Vec<Vec<u8>> {
        let mut feed = Feed::new(config).unwrap();
        order
            .iter()
            .map(|&channel| {
                let mut out = Vec::new();
                feed.next_packet(channel, 5, &mut out);
                out
            })
            .collect()
    }

    #[test]
    fn the_same_seed_gives_the_same_packets_whatever_the_channel_order() {
        let config = FeedConfig::default();
        let forward = packets(&config, &[0, 1, 0, 1]);
        let interleaved = packets(&config, &[1, 0, 1, 0]);
        assert_eq!(forward[0], interleaved[1]);
        assert_eq!(forward[1], interleaved[0]);
        assert_eq!(forward[2], interleaved[3]);
        let reseeded = packets(
            &FeedConfig {
                seed: 1,
                ..config.clone()
            },
            &[0],
        );
        assert_ne!(reseeded[0], forward[0]);
    }

    #[test]
    fn unencoded_packets_are_what_the_encoded_ones_decode_to() {
        let config = FeedConfig::default();
        let (mut encoding, mut plain) = (Feed::new(&config).unwrap(), Feed::new(&config).unwrap());
        let (mut bytes, mut decoded, mut messages) = (Vec::new(), Vec::new(), Vec::new());
        for n in 0..50 {
            encoding.next_packet(n % 4, 9, &mut bytes);
            let header = plain.next_messages(n % 4, 9, &mut messages).unwrap();
            assert_eq!(decode_packet(&bytes, &mut decoded), Ok(header));
            assert_eq!(decoded, messages);
        }
        assert_eq!(plain.next_messages(4, 0, &mut messages), None);
        assert!(messages.is_empty());
    }

    #[test]
    fn sequence_numbers_run_without_gaps_per_channel() {
        let config = FeedConfig::default();
        let mut feed = Feed::new(&config).unwrap();
        let mut out = Vec::new();
        let mut messages = Vec::new();
        let mut next_seq = [1u64; 4];
        let mut trades = 0;
        let mut total = 0;
        for round in 0..200u64 {
            for (channel, next_seq) in next_seq.iter_mut().enumerate() {
                let count = feed.next_packet(channel, round, &mut out);
                let header = decode_packet(&out, &mut messages).unwrap();
                assert_eq!(usize::from(header.count), count);
                assert_eq!(header.packet_seq, round + 1);
                assert_eq!(usize::from(header.channel), channel);
                assert!((1..=8).contains(&count));
                for m in &messages {
                    assert_eq!(m.seq, *next_seq);
                    *next_seq += 1;
                    assert_eq!(config.channel_of(m.underlying), channel);
                    assert!(config.series_range(m.underlying).contains(&m.series));
                    match m.kind {
                        MessageKind::Quote => assert!(m.ask_price > m.bid_price),
                        MessageKind::Trade => trades += 1,
                    }
                }
                total += count;
            }
        }
        assert!(trades > 0 && trades * 10 < total, "{trades} of {total}");
        assert!(feed.next_packet(4, 0, &mut out) == 0 && out.is_empty());
    }

    #[test]
    fn the_alias_table_draws_each_index_by_its_weight() {
        let weights = [1.0, 2.0, 3.0, 4.0, 0.5, 9.5];
        let table = AliasTable::new(&weights);
        let mut rng = fastrand::Rng::with_seed(7);
        let mut counts = [0u32; 6];
        const DRAWS: u32 = 200_000;
        for _ in 0..DRAWS {
            counts[table.sample(&mut rng)] += 1;
        }
        for (weight, count) in weights.iter().zip(counts) {
            let expected = weight / 20.0 * f64::from(DRAWS);
            assert!(
                (f64::from(count) - expected).abs() < 0.05 * expected,
                "{counts:?}"
            );
        }
        let single = AliasTable::new(&[3.0]);
        assert_eq!(single.sample(&mut rng), 0);
    }

    #[test]
    fn popularity_is_skewed_toward_the_top_ranks() {
        let config = FeedConfig::default();
        let mut feed = Feed::new(&config).unwrap();
        let mut out = Vec::new();
        let mut messages = Vec::new();
        let mut counts = vec![0u32; config.underlyings as usize];
        let mut total = 0;
        for _ in 0..5_000 {
            for channel in 0..config.channels {
                feed.next_packet(channel, 0, &mut out);
                decode_packet(&out, &mut messages).unwrap();
                for m in &messages {
                    counts[m.underlying as usize] += 1;
                    total += 1;
                }
            }
        }
        // Each underlying's count is near its expected share.
        let shares = config.message_shares();
        for u in [0usize, 1, 2, 10] {
            let expected = shares[u] * f64::from(total);
            let got = f64::from(counts[u]);
            assert!(
                (got - expected).abs() < 0.1 * expected,
                "{u}: {got} vs {expected}"
            );
        }
        // The top 1% of names carry far more than 1% of the messages.
        let top: u32 = counts[..20].iter().sum();
        assert!(f64::from(top) > 0.2 * f64::from(total), "{top} of {total}");
    }
}
