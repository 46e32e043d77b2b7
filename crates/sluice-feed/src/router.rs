//! [`Router`]: which decision engine each underlying goes to.
//!
//! The paper assigns each decision engine "a group of stocks ... based on the symbol
//! distribution in the recorded data". Here the groups are balanced from the feed's expected
//! message shares ([`FeedConfig::message_shares`]): greedily, heaviest underlying first, each
//! onto the engine with the least load so far (longest-processing-time-first scheduling, within
//! 4/3 of the best balance). With a Zipf feed the top name alone may outweigh an even share, so
//! the best possible balance is capped by it: [`Router::loads`] says what was achieved.

use crate::FeedConfig;

/// Which of `engines` decision engines each underlying goes to.
#[derive(Clone, Debug)]
pub struct Router {
    engine_by_underlying: Vec<u32>,
    loads: Vec<f64>,
}

impl Router {
    /// Groups `config`'s underlyings onto `engines` engines (at least 1: 0 counts as 1).
    pub fn new(config: &FeedConfig, engines: usize) -> Self {
        let engines = engines.max(1);
        let shares = config.message_shares();
        let mut order: Vec<u32> = (0..config.underlyings).collect();
        order.sort_by(|a, b| shares[*b as usize].total_cmp(&shares[*a as usize]));
        let mut loads = vec![0.0f64; engines];
        let mut engine_by_underlying = vec![0; shares.len()];
        for underlying in order {
            let lightest = (0..engines)
                .min_by(|a, b| loads[*a].total_cmp(&loads[*b]))
                .unwrap_or(0);
            loads[lightest] += shares[underlying as usize];
            engine_by_underlying[underlying as usize] = lightest as u32;
        }
        Self {
            engine_by_underlying,
            loads,
        }
    }

    /// The engine of `underlying`; one the config does not have goes to engine
    /// `underlying % engines`.
    pub fn engine_of(&self, underlying: u32) -> usize {
        match self.engine_by_underlying.get(underlying as usize) {
            Some(&engine) => engine as usize,
            None => underlying as usize % self.loads.len(),
        }
    }

    /// The engines.
    pub fn engines(&self) -> usize {
        self.loads.len()
    }

    /// The expected share of all messages each engine gets (they sum to 1).
    pub fn loads(&self) -> &[f64] {
        &self.loads
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_get_about_equal_shares() {
        let config = FeedConfig::default();
        for engines in [1, 2, 4, 8] {
            let router = Router::new(&config, engines);
            let even = 1.0 / engines as f64;
            let heaviest = config.message_shares().into_iter().fold(0.0, f64::max);
            for &load in router.loads() {
                assert!(
                    load <= (even * 1.05).max(heaviest * 1.01),
                    "{engines} engines: {:?}",
                    router.loads()
                );
            }
            assert!((router.loads().iter().sum::<f64>() - 1.0).abs() < 1e-9);
            assert!((0..config.underlyings).all(|u| router.engine_of(u) < engines));
        }
        let router = Router::new(&config, 0);
        assert_eq!(router.engines(), 1);
        assert_eq!(
            Router::new(&config, 3).engine_of(u32::MAX),
            (u32::MAX % 3) as usize
        );
    }
}
