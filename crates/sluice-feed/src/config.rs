//! The shape of a feed: how many channels, underlyings and series, how skewed the popularity,
//! how many messages a packet carries, how often a trade, and the seed.
//!
//! # Underlyings, series and channels
//!
//! Underlying `u` is the `u`-th most popular (its Zipf rank): its weight is `1 / (u + 1)^s`
//! with `s` the [`FeedConfig::zipf_exponent`]. It owns the series
//! `u * series_per_underlying .. (u + 1) * series_per_underlying`
//! ([`FeedConfig::series_range`]).
//!
//! OPRA splits its underlyings into channels by ranges of the alphabet. Here the underlyings
//! are laid out in a fixed "alphabetical" order that scatters the ranks (position
//! `u * 2,654,435,761 mod underlyings`, a permutation since that multiplier is a prime larger
//! than any count of underlyings), and channel `c` carries the `c`-th of `channels` equal
//! ranges of positions ([`FeedConfig::channel_of`]). So, as in an alphabetical split, the
//! popular names are spread over the channels rather than all in the first.
//!
//! Every channel sends the same number of packets (its share of the rate), and a channel's
//! messages are drawn from its own underlyings by their weights; so the share of all messages
//! an underlying gets is its weight over its channel's total, over the number of channels
//! ([`FeedConfig::message_shares`]), which is what [`crate::Router`] balances.

use std::ops::Range;

use crate::fast::{HEADER_BYTES, MAX_MESSAGE_BYTES, MTU_PAYLOAD_BYTES};
use crate::FeedError;

/// The multiplier that scatters ranks into symbol positions (a prime above `u32::MAX / 2`).
const SYMBOL_SCATTER: u64 = 2_654_435_761;
/// The most series a feed may have (the generator keeps 16 bytes of state per series).
pub const MAX_SERIES: u64 = 1 << 24;
/// The most messages a packet may carry: the worst case still fits the MTU.
pub const MAX_MESSAGES_PER_PACKET: u16 =
    ((MTU_PAYLOAD_BYTES - HEADER_BYTES) / MAX_MESSAGE_BYTES) as u16;

/// The feed's shape. [`FeedConfig::default`] is a sensible feed scaled for a small machine.
#[derive(Clone, Debug, PartialEq)]
pub struct FeedConfig {
    /// Channels, each its own packet stream (OPRA had 24 in 2008; default 4). 1 to 65,535.
    pub channels: usize,
    /// Underlying symbols (default 2,000).
    pub underlyings: u32,
    /// Option series of each underlying: strikes x expiries x put/call (default 48).
    pub series_per_underlying: u32,
    /// The Zipf exponent of the underlyings' popularity: 0 is uniform, 1 (the default) the
    /// classic skew where the top name gets about 1/ln(underlyings) of the messages.
    pub zipf_exponent: f64,
    /// The most messages a packet carries; each packet draws its count uniformly from 1 to
    /// this (default 8, so 4.5 on average). At most [`MAX_MESSAGES_PER_PACKET`], so that any
    /// packet fits a 1,500-byte MTU.
    pub max_messages_per_packet: u16,
    /// The fraction of messages that are trades (default 0.02: OPRA is mostly quotes).
    pub trade_fraction: f64,
    /// Participant exchanges quoting each series (default 7, as OPRA had in 2008).
    pub exchanges: u8,
    /// The seed: the same config and seed give the same packets.
    pub seed: u64,
}

impl Default for FeedConfig {
    fn default() -> Self {
        Self {
            channels: 4,
            underlyings: 2_000,
            series_per_underlying: 48,
            zipf_exponent: 1.0,
            max_messages_per_packet: 8,
            trade_fraction: 0.02,
            exchanges: 7,
            seed: 20_080_204,
        }
    }
}

impl FeedConfig {
    /// Checks every setting; the error names the one out of range.
    pub fn validate(&self) -> Result<(), FeedError> {
        let fail = |text: String| Err(FeedError::Config(text));
        if !(1..=usize::from(u16::MAX)).contains(&self.channels) {
            return fail(format!(
                "channels must be 1 to 65,535, got {}",
                self.channels
            ));
        }
        if self.underlyings < self.channels as u32 {
            return fail(format!(
                "underlyings ({}) must be at least the channels ({})",
                self.underlyings, self.channels
            ));
        }
        if self.series_per_underlying == 0 {
            return fail("series per underlying must be at least 1".into());
        }
        let series = u64::from(self.underlyings) * u64::from(self.series_per_underlying);
        if series > MAX_SERIES {
            return fail(format!(
                "underlyings x series per underlying must be at most {MAX_SERIES}, got {series}"
            ));
        }
        if !(self.zipf_exponent.is_finite() && (0.0..=10.0).contains(&self.zipf_exponent)) {
            return fail(format!(
                "the Zipf exponent must be 0 to 10, got {}",
                self.zipf_exponent
            ));
        }
        if !(1..=MAX_MESSAGES_PER_PACKET).contains(&self.max_messages_per_packet) {
            return fail(format!(
                "messages per packet must be 1 to {MAX_MESSAGES_PER_PACKET} (so a packet fits \
                 a 1,500-byte MTU), got {}",
                self.max_messages_per_packet
            ));
        }
        if !(0.0..=1.0).contains(&self.trade_fraction) {
            return fail(format!(
                "the trade fraction must be 0 to 1, got {}",
                self.trade_fraction
            ));
        }
        if self.exchanges == 0 {
            return fail("exchanges must be at least 1".into());
        }
        Ok(())
    }

    /// The channel that carries `underlying` (module docs): always below
    /// [`FeedConfig::channels`], for any `underlying`, even of an invalid config (then 0).
    pub fn channel_of(&self, underlying: u32) -> usize {
        let n = u64::from(self.underlyings);
        if n == 0 || self.channels == 0 {
            return 0;
        }
        let position = u64::from(underlying) * SYMBOL_SCATTER % n;
        (position * self.channels as u64 / n) as usize
    }

    /// Series of the whole feed.
    pub fn series(&self) -> u64 {
        u64::from(self.underlyings) * u64::from(self.series_per_underlying)
    }

    /// The series of `underlying`.
    pub fn series_range(&self, underlying: u32) -> Range<u32> {
        let start = underlying.saturating_mul(self.series_per_underlying);
        start..start.saturating_add(self.series_per_underlying)
    }

    /// The underlying that owns `series`.
    pub fn underlying_of_series(&self, series: u32) -> u32 {
        series.checked_div(self.series_per_underlying).unwrap_or(0)
    }

    /// The Zipf weight of `underlying`, not normalised: `1 / (underlying + 1)^s`.
    pub fn popularity(&self, underlying: u32) -> f64 {
        (f64::from(underlying) + 1.0).powf(-self.zipf_exponent)
    }

    /// The underlyings of each channel, in rank order.
    pub fn underlyings_by_channel(&self) -> Vec<Vec<u32>> {
        let mut channels = vec![Vec::new(); self.channels];
        for underlying in 0..self.underlyings {
            channels[self.channel_of(underlying)].push(underlying);
        }
        channels
    }

    /// The share of all messages each underlying gets (they sum to 1): its weight over its
    /// channel's total weight, over the number of channels (module docs).
    pub fn message_shares(&self) -> Vec<f64> {
        let mut shares = vec![0.0; self.underlyings as usize];
        for members in self.underlyings_by_channel() {
            let total: f64 = members.iter().map(|&u| self.popularity(u)).sum();
            for u in members {
                shares[u as usize] = self.popularity(u) / total / self.channels as f64;
            }
        }
        shares
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_valid_and_bad_settings_are_named() {
        FeedConfig::default().validate().unwrap();
        let bad = |change: fn(&mut FeedConfig)| {
            let mut config = FeedConfig::default();
            change(&mut config);
            config.validate().unwrap_err().to_string()
        };
        assert_eq!(
            bad(|c| c.channels = 0),
            "invalid feed setting: channels must be 1 to 65,535, got 0"
        );
        assert!(bad(|c| c.max_messages_per_packet = 27).contains("1 to 26"));
        assert!(bad(|c| c.zipf_exponent = f64::NAN).contains("Zipf"));
        assert!(bad(|c| c.trade_fraction = 1.5).contains("trade fraction"));
        assert!(bad(|c| c.underlyings = 3).contains("at least the channels"));
        assert!(bad(|c| c.series_per_underlying = 1 << 20).contains("at most"));
    }

    #[test]
    fn channels_split_the_underlyings_into_ranges_of_about_equal_size() {
        let config = FeedConfig::default();
        let channels = config.underlyings_by_channel();
        assert_eq!(channels.len(), 4);
        for members in &channels {
            assert_eq!(members.len(), 500);
        }
        // The top names are spread, not all on one channel.
        let top: std::collections::HashSet<usize> = (0..8).map(|u| config.channel_of(u)).collect();
        assert!(top.len() >= 3, "{top:?}");
        assert!((config.message_shares().iter().sum::<f64>() - 1.0).abs() < 1e-9);
        assert_eq!(config.series_range(2), 96..144);
        assert_eq!(config.underlying_of_series(143), 2);
        assert!(config.channel_of(u32::MAX) < 4);
    }
}
