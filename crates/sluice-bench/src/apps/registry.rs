//! Every application `sluice bench app` measures: one [`Benchable`] entry each, beside the
//! application's own module of yardsticks.

use anyhow::bail;

use crate::apps::entry::Benchable;
use crate::apps::{pipeline, storm, vwap, wordcount};

/// Every benchable application the suite's `apps` experiment measures.
pub(crate) static BENCHABLE: &[Benchable] = &[
    wordcount::BENCHABLE,
    storm::SOL,
    storm::THROUGHPUT_TEST,
    vwap::BENCHABLE,
];

/// Benchable applications the suite measures in an experiment of their own, the way their
/// paper did (the pipelines: `sluice bench pipeline`).
pub(crate) static MEASURED_APART: &[Benchable] =
    &[pipeline::BENCHABLE_COMPRESS, pipeline::BENCHABLE_ENCRYPT];

/// The benchable application `name`, or an error listing those there are.
pub(crate) fn find(name: &str) -> anyhow::Result<&'static Benchable> {
    let every = || BENCHABLE.iter().chain(MEASURED_APART);
    if let Some(found) = every().find(|b| b.name == name) {
        return Ok(found);
    }
    let benchable = every().map(|b| b.name).collect::<Vec<_>>().join(", ");
    if sluice_apps::find(name).is_ok() {
        bail!("{name} has no yardsticks to measure it against yet; benchable applications: {benchable}");
    }
    bail!("no benchable application named '{name}'; benchable applications: {benchable}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_names_a_built_in_application_and_its_yardsticks() {
        for b in BENCHABLE.iter().chain(MEASURED_APART) {
            assert!(sluice_apps::find(b.name).is_ok(), "{}", b.name);
            assert!(!b.yardsticks.is_empty(), "{}", b.name);
            assert!(std::ptr::eq(find(b.name).unwrap(), b));
        }
        let unknown = find("nosuch").err().unwrap().to_string();
        assert!(
            unknown.contains("'nosuch'")
                && unknown
                    .contains("benchable applications: wordcount, sol, throughput-test, vwap"),
            "{unknown}"
        );
        let relay = find("relay").err().unwrap().to_string();
        assert!(relay.starts_with("relay has no yardsticks"), "{relay}");
    }
}
