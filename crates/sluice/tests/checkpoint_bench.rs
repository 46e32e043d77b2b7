//! `sluice bench checkpoint --quick` end to end: every part of the benchmark (overhead,
//! recovery after `kill -9` of a PE, checkpoint duration and size) runs through `sluice run`
//! and prints its table; speeds are never asserted.

mod common;

use std::time::Duration;

/// Longer than the quick benchmark takes on a loaded machine; past it the benchmark hangs.
const WATCHDOG: Duration = Duration::from_secs(150);

#[test]
fn the_quick_checkpoint_benchmark_prints_its_three_tables() {
    let o = common::sluice_within(
        &["bench", "checkpoint", "--quick", "--plans", "two-threads"],
        WATCHDOG,
    );
    let (out, err) = (common::stdout(&o), common::stderr(&o));
    assert!(o.status.success(), "{err}");
    for heading in [
        "| plan | words/s without | with | ratio |",
        "| vocabulary | checkpoint | words/s before | detection | restart |",
        "| vocabulary | checkpoint | duration | MB/s | disk write+fsync |",
    ] {
        assert!(out.contains(heading), "{heading} missing:\n{out}");
    }
    assert!(out.contains("| two-threads | "), "{out}");
    assert!(out.contains("| 1000 | "), "{out}");
    assert!(err.contains("recovery 1000 words round 1"), "{err}");

    let o = common::sluice(&["bench", "checkpoint", "--repeat", "0"]);
    assert!(!o.status.success());
    assert!(
        common::stderr(&o).contains("--repeat must be between 1"),
        "{}",
        common::stderr(&o)
    );
}
