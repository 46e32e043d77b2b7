//! VWAP's input and output records and the deterministic TAQ (trades and quotes) generator the
//! application's source, its test's direct computation and its yardsticks all draw from.
//!
//! Prices are integer cents and sizes integer shares, so a window's VWAP is the exact ratio of
//! two integers (`notional / volume`) and "ask below VWAP" is the exact integer comparison
//! `ask * volume < notional`: the application and a plain loop agree to the last bit under
//! every plan.

use std::fmt;

use bytemuck::{Pod, Zeroable};
use serde::{Deserialize, Serialize};
use sluice_types::facade_tuple;

use crate::random::XorShift;

/// [`Taq::kind`] of a trade.
pub const TRADE: u32 = 0;
/// [`Taq::kind`] of a quote.
pub const QUOTE: u32 = 1;

/// One record of the feed: a trade (price and size traded) or a quote (ask price and size).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable, Serialize, Deserialize)]
pub struct Taq {
    /// Its position in the feed, from 1: the event time of the whole application.
    pub seq: u64,
    /// The symbol, `0..symbols`.
    pub symbol: u32,
    /// [`TRADE`] or [`QUOTE`].
    pub kind: u32,
    /// The trade's price or the quote's ask, in cents.
    pub price: u64,
    /// Shares traded or offered at the ask.
    pub size: u64,
}
facade_tuple!(Taq);

impl Taq {
    /// Whether it is a trade.
    pub fn is_trade(&self) -> bool {
        self.kind == TRADE
    }

    /// Whether it is a quote.
    pub fn is_quote(&self) -> bool {
        self.kind == QUOTE
    }
}

/// The key of a record: its symbol.
pub fn symbol(record: &Taq) -> &u32 {
    &record.symbol
}

/// The event time of a record: its position in the feed.
pub fn seq(record: &Taq) -> u64 {
    record.seq
}

/// A volume-weighted average price: the trades' total price times size over their total
/// size, and the last of those trades' position in the feed (when it became current).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vwap {
    /// Sum of price (cents) times size.
    pub notional: u64,
    /// Sum of sizes.
    pub volume: u64,
    /// The latest trade's [`Taq::seq`].
    pub last_trade: u64,
}

impl Vwap {
    /// Adds a trade.
    pub fn add(&mut self, trade: &Taq) {
        self.notional += trade.price * trade.size;
        self.volume += trade.size;
        self.last_trade = self.last_trade.max(trade.seq);
    }

    /// The bargain `quote` is at this VWAP: when its ask is below it.
    pub fn bargain(&self, quote: &Taq) -> Option<Bargain> {
        (quote.price * self.volume < self.notional).then(|| Bargain {
            seq: quote.seq,
            ask: quote.price,
            notional: self.notional,
            volume: self.volume,
            symbol: quote.symbol,
            ask_size: u32::try_from(quote.size).unwrap_or(u32::MAX),
        })
    }
}

/// A quote whose ask is below its symbol's VWAP at the time.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
pub struct Bargain {
    /// The quote's position in the feed.
    pub seq: u64,
    /// Its ask, in cents.
    pub ask: u64,
    /// The VWAP's notional ([`Vwap::notional`]).
    pub notional: u64,
    /// The VWAP's volume ([`Vwap::volume`]).
    pub volume: u64,
    /// The symbol.
    pub symbol: u32,
    /// Shares offered at the ask.
    pub ask_size: u32,
}
facade_tuple!(Bargain);

impl Bargain {
    /// The VWAP in dollars.
    pub fn vwap(&self) -> f64 {
        self.notional as f64 / self.volume as f64 / 100.0
    }

    /// The bargain's size (the report's application calls it its index): what buying the
    /// whole ask saves against paying the VWAP, `(vwap - ask) * ask_size`, in dollars.
    pub fn index(&self) -> f64 {
        let below = (self.notional - self.ask * self.volume) as f64;
        below * f64::from(self.ask_size) / self.volume as f64 / 100.0
    }
}

impl fmt::Display for Bargain {
    /// `seq<TAB>symbol<TAB>ask<TAB>ask size<TAB>vwap<TAB>index`, dollars with cents (the VWAP
    /// to 1/10,000 of a dollar).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}\t{}\t{}.{:02}\t{}\t{:.4}\t{:.2}",
            self.seq,
            self.symbol,
            self.ask / 100,
            self.ask % 100,
            self.ask_size,
            self.vwap(),
            self.index()
        )
    }
}

/// The lowest mid price a symbol walks to, in cents.
const LOWEST_MID: u64 = 100;
/// The highest, in cents.
const HIGHEST_MID: u64 = 10_000_000;

/// Deterministic trades and quotes over `symbols` symbols (xorshift64*): each record picks a
/// symbol uniformly, moves its mid price by -2..=2 cents, and is a quote 3 times in 4 (an ask
/// of mid -2..=+6 cents, 100 to 2,000 shares) or else a trade (at mid -3..=+3 cents, 100 to
/// 1,000 shares). Mid prices start between $10 and $1,000. Its state (the mid prices, where
/// the random sequence is) is a generating source's snapshot, so a feed resumed from a
/// checkpoint goes on with the records it would have made.
#[derive(Serialize, Deserialize)]
pub struct TaqGenerator {
    mids: Vec<u64>,
    random: XorShift,
    seq: u64,
}

impl TaqGenerator {
    /// Records over `symbols` symbols (at least 1), in an order fixed by `seed`.
    pub fn new(symbols: usize, seed: u64) -> Self {
        let mut generator = Self {
            mids: Vec::new(),
            random: XorShift::new(seed),
            seq: 0,
        };
        generator.mids = (0..symbols.max(1))
            .map(|_| 1_000 + generator.random.next() % 99_000)
            .collect();
        generator
    }

    /// The next record.
    pub fn record(&mut self) -> Taq {
        let r = self.random.next();
        self.seq += 1;
        let symbol = (r >> 32) % self.mids.len() as u64;
        let mid = &mut self.mids[symbol as usize];
        *mid = (*mid + (r & 0xff) % 5)
            .saturating_sub(2)
            .clamp(LOWEST_MID, HIGHEST_MID);
        let quote = (r >> 8) & 3 != 0;
        let spread = (r >> 10) & 0xff;
        let lots = (r >> 18) & 0xff;
        let (price, size) = if quote {
            (*mid + spread % 9 - 2, 100 * (1 + lots % 20))
        } else {
            (*mid + spread % 7 - 3, 100 * (1 + lots % 10))
        };
        Taq {
            seq: self.seq,
            symbol: symbol as u32,
            kind: if quote { QUOTE } else { TRADE },
            price,
            size,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_feed_is_deterministic_and_mixes_trades_and_quotes() {
        let a: Vec<Taq> = {
            let mut g = TaqGenerator::new(10, 7);
            (0..1000).map(|_| g.record()).collect()
        };
        let mut g = TaqGenerator::new(10, 7);
        assert!(a.iter().all(|r| *r == g.record()));
        assert!(a.iter().enumerate().all(|(i, r)| r.seq == i as u64 + 1));
        let quotes = a.iter().filter(|r| r.is_quote()).count();
        assert!((650..850).contains(&quotes), "{quotes} quotes in 1000");
        assert!(a.iter().all(|r| r.symbol < 10 && r.size >= 100));
    }

    #[test]
    fn a_bargain_is_an_ask_below_the_vwap_and_prints_in_dollars() {
        let mut vwap = Vwap::default();
        for (seq, price, size) in [(1, 1000, 100), (2, 1010, 300)] {
            vwap.add(&Taq {
                seq,
                symbol: 3,
                kind: TRADE,
                price,
                size,
            });
        }
        assert_eq!(vwap.last_trade, 2);
        let quote = |price| Taq {
            seq: 9,
            symbol: 3,
            kind: QUOTE,
            price,
            size: 200,
        };
        assert_eq!(
            vwap.bargain(&quote(1008)),
            None,
            "vwap is 10.075: 10.08 is above"
        );
        let bargain = vwap.bargain(&quote(1007)).unwrap();
        assert_eq!(bargain.to_string(), "9\t3\t10.07\t200\t10.0750\t1.00");
    }
}
