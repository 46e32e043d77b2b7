//! VWAP computed directly, without the engine: a plain loop over the records keeping each
//! symbol's last trades. The application's test compares its bargains with these, and
//! `sluice bench app vwap` measures the application beside this loop.

use std::collections::VecDeque;

use crate::vwap::feed::{Bargain, Taq, Vwap};
use crate::vwap::VwapSettings;

/// Each symbol's last `window` trades, and the bargains of the quotes against them.
pub struct DirectVwap {
    window: usize,
    /// Per symbol, its last trades (oldest first).
    trades: Vec<VecDeque<Taq>>,
}

impl DirectVwap {
    /// VWAPs over each symbol's last `window` trades (at least 1) of `symbols` symbols.
    pub fn new(symbols: usize, window: usize) -> Self {
        Self {
            window: window.max(1),
            trades: vec![VecDeque::new(); symbols.max(1)],
        }
    }

    /// Takes the next record of the feed: a trade joins its symbol's window, a quote is a
    /// bargain if its ask is below the VWAP of the trades before it.
    pub fn take(&mut self, record: &Taq) -> Option<Bargain> {
        let trades = &mut self.trades[record.symbol as usize];
        if record.is_trade() {
            trades.push_back(*record);
            if trades.len() > self.window {
                trades.pop_front();
            }
            return None;
        }
        if trades.is_empty() {
            return None;
        }
        let mut vwap = Vwap::default();
        trades.iter().for_each(|trade| vwap.add(trade));
        vwap.bargain(record)
    }
}

/// Every bargain of the first `records` records of the feed `settings` describe, in feed
/// order.
pub fn bargains(settings: &VwapSettings, records: u64) -> Vec<Bargain> {
    let mut feed = settings.generator();
    let mut direct = DirectVwap::new(settings.symbols, settings.window);
    (0..records)
        .filter_map(|_| direct.take(&feed.record()))
        .collect()
}
