//! VWAP's yardstick, `direct`: the application's computation as a plain single-threaded loop
//! (`sluice_apps::vwap::direct::DirectVwap`, the loop its tests compare the application
//! with): each record from the application's generator, each symbol's last trades in a
//! `VecDeque`, each quote's VWAP summed over them and compared with its ask. The
//! application's ratio to it is what its operators, their edges and the event-time machinery
//! (watermarks, the as-of join's holding of quotes) cost.

use sluice_apps::vwap::direct::DirectVwap;
use sluice_apps::vwap::feed::TaqGenerator;
use sluice_apps::vwap::VwapSettings;
use sluice_apps::Settings;

use crate::apps::entry::{Benchable, Yardstick, YardstickSpec};

/// The registry entry.
pub(crate) const BENCHABLE: Benchable = Benchable {
    name: "vwap",
    input: "records",
    counted: "route",
    unit: "records",
    input_rate: None,
    yardsticks: &[YardstickSpec {
        name: "direct",
        about: "one loop: each symbol's last trades in a VecDeque, each quote's VWAP summed over them and compared with its ask",
        tunes: None,
        make: direct,
    }],
};

/// The direct loop over the generated feed.
struct Direct {
    feed: TaqGenerator,
    vwap: DirectVwap,
    /// Bargains found, so the work cannot be optimised away.
    bargains: u64,
}

impl Yardstick for Direct {
    fn steps(&mut self, n: usize) -> u64 {
        for _ in 0..n {
            self.bargains += u64::from(self.vwap.take(&self.feed.record()).is_some());
        }
        n as u64
    }
}

/// The direct loop over the feed the application's `--set` values describe.
fn direct(settings: &Settings) -> anyhow::Result<Box<dyn Yardstick>> {
    let s = VwapSettings::from_settings(settings)?;
    Ok(Box::new(Direct {
        feed: s.generator(),
        vwap: DirectVwap::new(s.symbols, s.window),
        bargains: 0,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_yardstick_finds_the_bargains_the_direct_computation_does() {
        let settings = Settings::parse(["symbols=50", "window=4", "seed=2"]).unwrap();
        let s = VwapSettings::from_settings(&settings).unwrap();
        let mut direct = Direct {
            feed: s.generator(),
            vwap: DirectVwap::new(s.symbols, s.window),
            bargains: 0,
        };
        assert_eq!(direct.steps(5000), 5000);
        let expected = sluice_apps::vwap::direct::bargains(&s, 5000).len() as u64;
        assert!(expected > 100);
        assert_eq!(direct.bargains, expected);
        let bad = Settings::parse(["window=0"]).unwrap();
        assert!((BENCHABLE.yardsticks[0].make)(&bad).is_err());
    }
}
