//! The yardsticks of the Storm topologies (`sol`, `throughput-test`): one thread makes each
//! tuple from the application's own message pool, stamped with the clock, passes it along the
//! chain of bolts and gives it to the application's own terminal bolt (`storm::Check` for
//! SOL, `throughput_test::Count` for the Throughput Test), which records its latency, tracks
//! its sequence number and compares its payload, as the application's terminal bolt does.
//!
//! A bolt passing a tuple on is what a hand-written program does not do: it hands the value
//! to the next function. Each level is one such hand-over (`std::hint::black_box`, so the
//! compiler keeps it), so the application's ratio to the yardstick is the engine's own cost
//! of carrying a tuple through its bolts. Both read the application's settings
//! (`levels`, `size`, `seed`, `ids`); `parallelism` means nothing to one thread.

use sluice_apps::storm::{Check, MessagePool, StormTuple};
use sluice_apps::throughput_test::{self, Count};
use sluice_apps::{sol, storm, AppConfig, Settings};
use sluice_runtime::JobReport;
use sluice_types::monotonic_ns;

use crate::apps::entry::{Benchable, Yardstick, YardstickSpec};

/// SOL's registry entry.
pub(crate) const SOL: Benchable = Benchable {
    name: "sol",
    input: "tuples",
    counted: sol::SINK,
    unit: "tuples",
    input_rate: Some(spout_rate),
    yardsticks: &[YardstickSpec {
        name: "direct",
        about: "one thread: each tuple made from the same pool, handed through as many functions as SOL has bolts, then checked and timed by SOL's own terminal bolt",
        tunes: None,
        make: |settings| {
            let (_, levels, pool) = sol::read(&config(settings))?;
            Ok(Box::new(Chain::new(pool, levels - 1, Check::new)))
        },
    }],
};

/// The Throughput Test's registry entry.
pub(crate) const THROUGHPUT_TEST: Benchable = Benchable {
    name: "throughput-test",
    input: "tuples",
    counted: throughput_test::COUNT,
    unit: "tuples",
    input_rate: Some(spout_rate),
    yardsticks: &[YardstickSpec {
        name: "direct",
        about: "one thread: each tuple made from the same pool, handed through one function (the identity bolt), then counted by id, checked and timed by the topology's own count",
        tunes: None,
        make: |settings| {
            let (_, pool) = throughput_test::read(&config(settings))?;
            Ok(Box::new(Chain::new(pool, 1, Count::new)))
        },
    }],
};

/// The rate the spout reached while it sent.
fn spout_rate(report: &JobReport) -> f64 {
    storm::achieved_rate(report, storm::SPOUT)
}

/// What a run of a topology says about its tuples: the spout's against its terminal bolt's
/// (the sink), as the topology's own integrity line gives them.
pub(crate) fn integrity(report: &JobReport) -> storm::Integrity {
    let terminal = report
        .instances
        .iter()
        .find(|i| i.sink)
        .map_or("", |i| i.operator.as_str());
    storm::Integrity::of(report, storm::SPOUT, terminal)
}

/// The application's configuration with `settings`.
fn config(settings: &Settings) -> AppConfig {
    AppConfig {
        settings: settings.clone(),
        ..AppConfig::default()
    }
}

/// What ends a chain: the application's terminal bolt, without the engine.
trait Terminal {
    fn record(&mut self, tuple: &StormTuple, now_ns: u64);
}

impl Terminal for Check {
    fn record(&mut self, tuple: &StormTuple, now_ns: u64) {
        Check::record(self, tuple, now_ns);
    }
}

impl Terminal for Count {
    fn record(&mut self, tuple: &StormTuple, now_ns: u64) {
        Count::record(self, tuple, now_ns);
    }
}

/// A topology in one thread: tuples from `pool`, `hand_overs` functions, then `terminal`.
struct Chain<T> {
    pool: MessagePool,
    hand_overs: usize,
    terminal: T,
    seq: u64,
}

impl<T: Terminal> Chain<T> {
    /// The chain whose terminal `make` builds from the pool.
    fn new(pool: MessagePool, hand_overs: usize, make: fn(MessagePool) -> T) -> Self {
        Self {
            terminal: make(pool.clone()),
            pool,
            hand_overs,
            seq: 0,
        }
    }
}

impl<T: Terminal> Yardstick for Chain<T> {
    fn steps(&mut self, n: usize) -> u64 {
        for _ in 0..n {
            let mut tuple = self.pool.tuple(self.seq, monotonic_ns());
            self.seq += 1;
            for _ in 0..self.hand_overs {
                tuple = std::hint::black_box(tuple);
            }
            self.terminal.record(&tuple, monotonic_ns());
        }
        n as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_graph::Operator;

    #[test]
    fn a_yardstick_delivers_every_tuple_intact_to_the_terminal_bolt() {
        let settings = Settings::parse(["levels=3", "size=40", "seed=4"]).unwrap();
        let (_, _, pool) = sol::read(&config(&settings)).unwrap();
        let mut chain = Chain::new(pool, 2, Check::new);
        assert_eq!(chain.steps(500), 500);
        let report = chain.terminal.report();
        assert_eq!(report.counters[storm::DISTINCT], 500);
        assert_eq!(report.counters[storm::CORRUPT], 0);
        assert_eq!(report.latency.unwrap().len(), 500);

        let settings = Settings::parse(["ids=3"]).unwrap();
        let (_, pool) = throughput_test::read(&config(&settings)).unwrap();
        let mut chain = Chain::new(pool, 1, Count::new);
        chain.steps(90);
        let report = chain.terminal.stop().unwrap();
        assert_eq!(report.counters[throughput_test::IDS], 3);
        assert_eq!(report.counters[storm::DISTINCT], 90);
        for bench in [&SOL, &THROUGHPUT_TEST] {
            let mut made = (bench.yardsticks[0].make)(&Settings::default()).unwrap();
            assert_eq!(made.steps(10), 10, "{}", bench.name);
        }
        let bad = Settings::parse(["levels=0"]).unwrap();
        assert!((SOL.yardsticks[0].make)(&bad).is_err());
    }
}
