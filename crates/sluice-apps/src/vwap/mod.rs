//! VWAP, the application of the IBM InfoSphere Streams 2.0 report's fusion experiment (its
//! Figure 10): trades and quotes over many symbols, a volume-weighted average price (VWAP) per
//! symbol over a sliding window of its trades, joined with the quotes to flag bargains (an ask
//! below the symbol's current VWAP), replicated per group of symbols so that one setting scales
//! it to the report's 332 operators.
//!
//! ```text
//!                          +-> trades-g --key-by(symbol)--> vwap-g (last W trades) --+
//! taq -> clock -> route ---+                                                          +-> match-g --+
//!    (split by symbol % G) +-> quotes-g --key-by(symbol)----------------------------+              |
//!                          ... one such group per g in 0..G ...                          bargains <-+
//! ```
//!
//! - `taq` ([`sluice_ops::Generator`]): the feed ([`feed::TaqGenerator`]), a record a tuple,
//!   trades and quotes mixed, each with its position in the feed (`seq`);
//! - `clock` ([`sluice_ops::WatermarkAssigner`]): event time is the position in the feed;
//! - `route` ([`sluice_ops::Split`]): each record to its symbol's group, `symbol % groups`;
//! - per group `g`: `trades-g` and `quotes-g` (filters, stateless: replicable by symbol, so a
//!   replication optimizer may give them more instances), `vwap-g` (a keyed sliding count
//!   window, the library's window operator: every trade of a symbol, the VWAP of its last
//!   `window` trades), and `match-g` ([`sluice_ops::AsOfJoin`]): each quote joined with its
//!   symbol's VWAP as of the quote, the VWAP of the last `window` trades before it in the
//!   feed, a bargain when the ask is below it;
//! - `bargains`: every group's bargains, written with `--output FILE` ([`sink`]).
//!
//! **Operators**: `4 + 4 * groups`; the default `groups = 82` gives the report's 332.
//!
//! **The window** is by count: the last `window` trades of the symbol (default 10), sliding by
//! one trade. By count rather than by time because a count window's contents do not depend on
//! when tuples arrive, so with the as-of join by the feed's event time the bargains are the
//! same under every plan and equal to a plain loop's ([`direct`]); a processing-time window
//! would hold different trades under each plan. The report does not say how its application's
//! window was cut; a window of a symbol's last trades is what the System S VWAP examples use.
//!
//! **A bargain** ([`feed::Bargain`]) is a quote whose ask is below the VWAP, with its size
//! (what the report's application calls the bargain index; the report gives no formula):
//! `(vwap - ask) * ask_size` in dollars, what buying the whole ask saves against the VWAP.
//! Prices are integer cents, so the comparison is exact.
//!
//! The sizes `--set` takes are bounded ([`MAX_GROUPS`], [`MAX_SYMBOLS`], [`MAX_WINDOW`]). The
//! shipped plans `two-threads` and `two-processes`, written by hand as the report's "manual"
//! fusion, put each group's four operators in one thread and the groups over two cores (the
//! feed and groups 0-33 on one, groups 34-81 and the sink on the other); they name every
//! operator of the default 82 groups, so they plan only that size: for another, write a plan
//! file like them (`crates/sluice-apps/src/vwap/two-threads.toml`). Throughput under every plan
//! at 332 operators, and the commands: docs/benchmarks.md, "vwap".

pub mod direct;
pub mod feed;
pub mod sink;

use std::path::PathBuf;
use std::time::Duration;

use sluice_graph::Partitioning;
use sluice_ops::{Dataflow, Generator, Windowed, Windows};

use crate::{throughput_line, App, AppConfig, AppError, AppSpec, NamedPlan};
use feed::{seq, symbol, Bargain, Taq, TaqGenerator, Vwap};
use sink::BargainSink;

/// The registry entry.
pub const SPEC: AppSpec = AppSpec {
    name: "vwap",
    about: "bargains (asks below a symbol's VWAP over its last trades) in generated trades and quotes, replicated per symbol group (IBM Streams fusion experiment; 332 operators by default)",
    settings: &[
        (
            "groups",
            "symbol groups, each its own 4 operators: 4 + 4 * groups operators (1 to 1024, default 82: 332 operators)",
        ),
        ("symbols", "symbols in the feed (1 to 1048576, default 1000)"),
        (
            "window",
            "trades per symbol in the VWAP's sliding window (1 to 10000, default 10)",
        ),
        ("seed", "seed of the trade and quote generator (default 1)"),
        (
            "records",
            "generate this many trades and quotes, then end (default: until --duration)",
        ),
    ],
    build,
    plans: &[
        NamedPlan {
            name: "two-threads",
            about: "for 82 groups: the feed, its routing and groups 0-33 on one pinned thread, groups 34-81 and the sink on the other",
            toml: include_str!("two-threads.toml"),
            settings: &[],
        },
        NamedPlan {
            name: "two-processes",
            about: "the same two halves as two processes joined by shared memory",
            toml: include_str!("two-processes.toml"),
            settings: &[],
        },
    ],
};

/// The most symbol groups (`--set groups`): 4 operators each, each a process under
/// `--plan processes`.
pub const MAX_GROUPS: usize = 1024;
/// The most symbols (`--set symbols`): the generator keeps a price per symbol.
pub const MAX_SYMBOLS: usize = 1 << 20;
/// The most trades in a VWAP window (`--set window`): each symbol keeps that many.
pub const MAX_WINDOW: usize = 10_000;
/// Records the feed emits at a time when not paced: split over the groups, each group's
/// operators get about `FEED_BATCH / groups` a call (50 at 82 groups) and a watermark a batch;
/// the library's 256 gave 3 a call, and a third to a fifth of the throughput fused.
const FEED_BATCH: usize = 4096;

/// Symbol groups unless `--set groups` says otherwise: the report's 332 operators.
pub const DEFAULT_GROUPS: usize = 82;

/// The number of operators of the application with `groups` symbol groups.
pub const fn operators(groups: usize) -> usize {
    4 + 4 * groups
}

/// The application's `--set` values, read and checked.
#[derive(Debug, Clone)]
pub struct VwapSettings {
    /// Symbol groups.
    pub groups: usize,
    /// Symbols in the feed.
    pub symbols: usize,
    /// Trades per VWAP window.
    pub window: usize,
    /// The generator's seed.
    pub seed: u64,
    /// Records to generate, or until the job is stopped.
    pub records: Option<u64>,
}

impl VwapSettings {
    /// Reads and checks the settings.
    pub fn from_settings(settings: &crate::Settings) -> Result<Self, AppError> {
        Ok(Self {
            groups: settings.get_in("groups", DEFAULT_GROUPS, 1..=MAX_GROUPS)?,
            symbols: settings.get_in("symbols", 1000, 1..=MAX_SYMBOLS)?,
            window: settings.get_in("window", 10, 1..=MAX_WINDOW)?,
            seed: settings.get("seed", 1)?,
            records: settings
                .get("records", 0u64)
                .map(|n| (n > 0).then_some(n))?,
        })
    }

    /// The feed these settings describe.
    pub fn generator(&self) -> TaqGenerator {
        TaqGenerator::new(self.symbols, self.seed)
    }
}

/// The VWAP of one window of trades: an aggregate of the library's window operator.
#[derive(Debug, Clone, Copy)]
struct VwapOf;

impl sluice_ops::Aggregate<Taq> for VwapOf {
    type Acc = Vwap;
    type Out = Vwap;
    fn init(&self) -> Vwap {
        Vwap::default()
    }
    fn add(&self, acc: &mut Vwap, trade: &Taq) {
        acc.add(trade);
    }
    fn merge(&self, acc: &mut Vwap, other: &Vwap) {
        acc.notional += other.notional;
        acc.volume += other.volume;
        acc.last_trade = acc.last_trade.max(other.last_trade);
    }
    fn result(&self, acc: &Vwap) -> Vwap {
        *acc
    }
}

/// How a replicated filter's input is spread: by symbol, so that a symbol's trades and quotes
/// keep their feed order through the filter (the count window takes a symbol's last trades in
/// order; the filters themselves keep no state).
fn by_symbol() -> Partitioning {
    Partitioning::key_by(|record: &Taq| record.symbol)
}

/// The VWAP window's key: its symbol.
fn window_symbol(window: &Windowed<u32, Vwap>) -> &u32 {
    &window.key
}

/// The VWAP window's event time: its last trade's.
fn window_time(window: &Windowed<u32, Vwap>) -> u64 {
    window.value.last_trade
}

fn build(config: &AppConfig) -> Result<App, AppError> {
    let settings = VwapSettings::from_settings(&config.settings)?;
    config.check_output()?;
    let output: Option<PathBuf> = config.output.clone();
    let rate = config.rate.filter(|r| *r > 0);
    let (groups, window) = (settings.groups, settings.window as u64);

    let flow = Dataflow::new("vwap");
    let feed = settings.clone();
    let records = flow.source_of::<Taq, _, _>("taq", move |_| {
        let mut generator = Generator::with_state(feed.generator(), |taq: &mut TaqGenerator, _| {
            Some(taq.record())
        })
        .batch(FEED_BATCH);
        if let Some(rate) = rate {
            generator = generator.rate(rate);
        }
        match feed.records {
            Some(n) => generator.count(n),
            None => generator,
        }
    });
    let routed =
        records
            .watermarks("clock", seq, Duration::ZERO)
            .split("route", groups, move |r: &Taq| r.symbol as usize % groups);
    let bargains: Vec<_> = routed
        .iter()
        .enumerate()
        .map(|(g, group)| {
            let vwaps = group
                .filter(&format!("trades-{g}"), Taq::is_trade)
                .replicable(by_symbol())
                .key_by(symbol)
                .window(Windows::sliding_count(window, 1))
                .aggregate(&format!("vwap-{g}"), VwapOf);
            let quotes = group
                .filter(&format!("quotes-{g}"), Taq::is_quote)
                .replicable(by_symbol());
            quotes.key_by(symbol).event_time(seq).as_of(
                &format!("match-{g}"),
                &vwaps.key_by(window_symbol).event_time(window_time),
                |quote: &Taq, vwap: Option<&Windowed<u32, Vwap>>| {
                    vwap.and_then(|v| v.value.bargain(quote))
                },
            )
        })
        .collect();
    let (first, rest) = bargains.split_first().ok_or(AppError::BadSetting {
        key: "groups".into(),
        reason: "needs at least 1 group".into(),
    })?;
    let sink = first.apply(
        "bargains",
        sluice_graph::Ports::new().input::<Bargain>(),
        move |_| BargainSink::new(output.as_deref()),
    );
    rest.iter().for_each(|b| b.connect_to(sink, 0));

    Ok(App::new(
        flow.build()?,
        Box::new(|report| {
            [
                throughput_line("records", report.tuples_out("taq"), report.elapsed),
                throughput_line("bargains", report.tuples_in("bargains"), report.elapsed),
            ]
            .join("\n")
        }),
    )
    .with_finite_input("taq", settings.records, "records"))
}

#[cfg(test)]
mod tests;
