//! The decision engine: keeps the book of every option series it is given (best bid and offer,
//! last trade) and a simple signal on it, and passes the sampled messages on to the metrics
//! collector.
//!
//! The signal counts a trade printed outside the series' current quote (below the bid or above
//! the offer: a trade-through) and a quote that crosses the market (bid at or above offer),
//! the two conditions a market-data consumer acts on first. The engine's state digest is an
//! order-independent hash of every book, so two runs over the same feed compare by one number
//! even when the channels' packets interleave differently.

use serde::{Deserialize, Serialize};
use sluice_graph::{expect_tuple, Operator, OperatorError, OperatorReport, Output, Snapshot};
use sluice_types::{partition_hash, KeyMap, TupleRef};

use super::tick::{Tick, TRADE};

/// What an engine knows of one option series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Book {
    bid_price: u64,
    bid_size: u32,
    ask_price: u64,
    ask_size: u32,
    last_trade_price: u64,
    last_trade_size: u32,
    updates: u64,
}

/// What an engine keeps in a checkpoint: its books and its counts (messages, trades,
/// trade-throughs, crossed quotes, forwarded).
type EngineState = (Vec<(u32, Book)>, [u64; 5]);

/// A decision engine.
#[derive(Default)]
pub struct DecisionEngine {
    books: KeyMap<u32, Book>,
    messages: u64,
    trades: u64,
    trade_throughs: u64,
    crossed_quotes: u64,
    forwarded: u64,
}

impl DecisionEngine {
    /// Applies one message to its series' book; returns whether it raised the signal.
    fn apply(&mut self, tick: &Tick) -> bool {
        let book = self.books.entry(tick.series).or_default();
        book.updates += 1;
        if tick.kind == TRADE {
            book.last_trade_price = tick.trade_price;
            book.last_trade_size = tick.trade_size;
            self.trades += 1;
            let quoted = book.ask_price != 0;
            let through =
                quoted && (tick.trade_price < book.bid_price || tick.trade_price > book.ask_price);
            self.trade_throughs += u64::from(through);
            through
        } else {
            book.bid_price = tick.bid_price;
            book.bid_size = tick.bid_size;
            book.ask_price = tick.ask_price;
            book.ask_size = tick.ask_size;
            let crossed = tick.ask_price != 0 && tick.bid_price >= tick.ask_price;
            self.crossed_quotes += u64::from(crossed);
            crossed
        }
    }

    /// An order-independent digest of every book: equal feeds give equal digests, however the
    /// books are dealt over engines. Each book adds 40 bits of its hash, so neither an engine's
    /// sum nor the runtime's sum of the engines' digests wraps below 2^24 books in all (the
    /// default feed has 96,000 series): a sum that wrapped, or that was shifted after adding,
    /// would depend on which books met in which engine.
    fn digest(&self) -> u64 {
        self.books.iter().fold(0u64, |acc, (series, book)| {
            acc.wrapping_add(partition_hash(&(series, book)) >> 24)
        })
    }
}

impl Operator for DecisionEngine {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let tick = expect_tuple::<Tick>(port, tuple)?;
        self.messages += 1;
        if !tick.is_sampled() {
            self.apply(tick);
            return Ok(());
        }
        let mut tick = *tick;
        tick.de_in_ns = sluice_types::monotonic_ns();
        self.apply(&tick);
        tick.de_out_ns = sluice_types::monotonic_ns();
        self.forwarded += 1;
        out.emit(0, tick)
    }

    /// Its books and counts, whole: a recovery restarts every engine as it was (a run from a
    /// savepoint with another number of engines would deal the books anew, which it does
    /// not do).
    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        let books: Vec<(u32, Book)> = self.books.iter().map(|(s, b)| (*s, *b)).collect();
        let counts = [
            self.messages,
            self.trades,
            self.trade_throughs,
            self.crossed_quotes,
            self.forwarded,
        ];
        Snapshot::whole(&(books, counts))
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        if snapshot.is_empty() {
            return Ok(());
        }
        let (books, counts): EngineState = snapshot.decode_whole()?;
        self.books = books.into_iter().collect();
        [
            self.messages,
            self.trades,
            self.trade_throughs,
            self.crossed_quotes,
            self.forwarded,
        ] = counts;
        Ok(())
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        Ok(sluice_ops::counter_report(&[
            ("messages", self.messages),
            ("series", self.books.len() as u64),
            ("trades", self.trades),
            ("trade_throughs", self.trade_throughs),
            ("crossed_quotes", self.crossed_quotes),
            ("forwarded", self.forwarded),
            ("state_digest", self.digest()),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quote(series: u32, bid: u64, ask: u64) -> Tick {
        Tick {
            series,
            bid_price: bid,
            ask_price: ask,
            ..bytemuck::Zeroable::zeroed()
        }
    }

    #[test]
    fn the_signal_is_a_trade_outside_the_quote_or_a_crossed_quote() {
        let mut engine = DecisionEngine::default();
        assert!(!engine.apply(&quote(7, 100, 110)));
        let trade = |price| Tick {
            series: 7,
            kind: TRADE,
            trade_price: price,
            trade_size: 5,
            ..bytemuck::Zeroable::zeroed()
        };
        assert!(!engine.apply(&trade(105)));
        assert!(engine.apply(&trade(111)));
        assert!(engine.apply(&trade(99)));
        assert!(engine.apply(&quote(7, 120, 110)));
        assert_eq!((engine.trade_throughs, engine.crossed_quotes), (2, 1));
    }

    #[test]
    fn the_digest_does_not_depend_on_the_order_of_series() {
        let (mut a, mut b) = (DecisionEngine::default(), DecisionEngine::default());
        for s in 0..50 {
            a.apply(&quote(s, 100 + u64::from(s), 200));
        }
        for s in (0..50).rev() {
            b.apply(&quote(s, 100 + u64::from(s), 200));
        }
        assert_eq!(a.digest(), b.digest());
        b.apply(&quote(3, 1, 2));
        assert_ne!(a.digest(), b.digest());
        // Dealt over two engines, the same books give the same digest in sum.
        let (mut left, mut right) = (DecisionEngine::default(), DecisionEngine::default());
        for s in 0..50 {
            let engine = if s % 3 == 0 { &mut left } else { &mut right };
            engine.apply(&quote(s, 100 + u64::from(s), 200));
        }
        assert_eq!(left.digest() + right.digest(), a.digest());
    }
}
