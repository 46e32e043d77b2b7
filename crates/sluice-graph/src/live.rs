//! Figures an operator instance publishes while it runs, beside the runtime's own (a Kafka
//! source's consumer lag per partition, records and bytes read, a sink's transactions): named
//! unsigned values, each instance's kept in this process under the instance's name
//! ([`OperatorContext::instance_name`]).
//!
//! An operator takes its [`LiveFigures`] once (at `start`) with [`live_figures`] and sets
//! values as it goes, a lock taken per call: set them a batch or a period at a time, not per
//! tuple. The runtime's metrics sampler reads every instance's with [`read_live_figures`]
//! when it takes a sample, so they reach `sluice top`, `/metrics` and the progress of the
//! job at the sampler's period. The figures an instance reports at its end belong in its
//! `OperatorReport` counters, as before.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use crate::OperatorContext;

/// One instance's live figures: name to value.
#[derive(Debug, Default)]
pub struct LiveFigures(Mutex<BTreeMap<String, u64>>);

impl LiveFigures {
    /// Sets the figure `name` to `value`.
    pub fn set(&self, name: &str, value: u64) {
        let mut figures = lock(&self.0);
        match figures.get_mut(name) {
            Some(slot) => *slot = value,
            None => {
                figures.insert(name.to_owned(), value);
            }
        }
    }

    /// Every figure, by name.
    pub fn read(&self) -> Vec<(String, u64)> {
        lock(&self.0)
            .iter()
            .map(|(name, value)| (name.clone(), *value))
            .collect()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Every instance's figures in this process, by instance name.
fn registry() -> &'static Mutex<BTreeMap<String, Arc<LiveFigures>>> {
    static REGISTRY: OnceLock<Mutex<BTreeMap<String, Arc<LiveFigures>>>> = OnceLock::new();
    REGISTRY.get_or_init(Mutex::default)
}

/// The live figures of the instance `ctx` (made empty on the first call of a process, the
/// same ones after: an instance restarted in the same process goes on with them).
pub fn live_figures(ctx: &OperatorContext) -> Arc<LiveFigures> {
    lock(registry())
        .entry(ctx.instance_name())
        .or_default()
        .clone()
}

/// The figures the instance named `instance` published, if it published any.
pub fn read_live_figures(instance: &str) -> Vec<(String, u64)> {
    let figures = lock(registry()).get(instance).cloned();
    figures.map_or_else(Vec::new, |figures| figures.read())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_s_figures_are_read_under_its_name() {
        let ctx = OperatorContext {
            name: "live-test-source".into(),
            instance: 1,
            parallelism: 2,
        };
        let figures = live_figures(&ctx);
        figures.set("lag.partition.3", 7);
        figures.set("lag.partition.3", 5);
        figures.set("records_in", 10);
        assert_eq!(
            read_live_figures("live-test-source[1]"),
            vec![("lag.partition.3".into(), 5), ("records_in".into(), 10)]
        );
        assert!(read_live_figures("live-test-source[0]").is_empty());
    }
}
