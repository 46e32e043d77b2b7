//! VWAP's size, plans and bargains against the direct computation, in this process (fused and
//! threaded; the processes plans are tested through the CLI, `crates/sluice/tests/vwap.rs`).

use std::path::Path;

use sluice_plan::{PlanOptions, PlanRequest};
use sluice_runtime::RunOptions;

use super::*;
use crate::Settings;

fn config(settings: &[&str], output: Option<&Path>) -> AppConfig {
    AppConfig {
        output: output.map(Path::to_path_buf),
        settings: Settings::parse(settings.iter().copied()).unwrap(),
        ..AppConfig::default()
    }
}

/// The lines the direct computation writes for the feed `settings` describe.
fn expected_lines(settings: &[&str]) -> Vec<String> {
    let s =
        VwapSettings::from_settings(&Settings::parse(settings.iter().copied()).unwrap()).unwrap();
    direct::bargains(&s, s.records.unwrap())
        .iter()
        .map(Bargain::to_string)
        .collect()
}

#[test]
fn the_default_has_the_reports_332_operators_and_groups_scale_it() {
    let app = crate::build("vwap", &config(&[], None)).unwrap();
    assert_eq!(app.graph.operators().len(), 332);
    assert_eq!(operators(DEFAULT_GROUPS), 332);
    for groups in [1, 5] {
        let app = crate::build("vwap", &config(&[&format!("groups={groups}")], None)).unwrap();
        assert_eq!(app.graph.operators().len(), operators(groups));
    }
    let refused = crate::build("vwap", &config(&["groups=0"], None))
        .err()
        .unwrap();
    assert!(
        refused.to_string().contains("between 1 and 1024"),
        "{refused}"
    );
}

#[test]
fn the_shipped_plans_put_each_group_in_one_thread_over_two_cores() {
    let app = crate::build("vwap", &config(&[], None)).unwrap();
    for plan in ["two-threads", "two-processes"] {
        let request = crate::plan_request("vwap", plan).unwrap();
        let physical = sluice_plan::plan(&app.graph, &request, &PlanOptions::default()).unwrap();
        let threads: Vec<_> = physical.threads().collect();
        assert_eq!(threads.len(), 2, "{plan}");
        let thread_of = |name: &str| {
            let op = app.graph.find(name).unwrap().id.0;
            physical
                .instances
                .iter()
                .find(|i| i.operator == op)
                .unwrap()
                .thread
        };
        for g in 0..DEFAULT_GROUPS {
            let t = thread_of(&format!("trades-{g}"));
            for part in ["vwap", "quotes", "match"] {
                assert_eq!(thread_of(&format!("{part}-{g}")), t, "{plan} group {g}");
            }
        }
        assert_ne!(thread_of("taq"), thread_of("bargains"), "{plan}");
    }
}

/// Runs VWAP with `settings` under `plan` and checks its bargains against the direct loop.
fn bargains_match(settings: &[&str], plan: &PlanRequest) {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("bargains.tsv");
    let app = crate::build("vwap", &config(settings, Some(&output))).unwrap();
    let physical = sluice_plan::plan(&app.graph, plan, &PlanOptions::default()).unwrap();
    let report = sluice_runtime::run(&app.graph, &physical, &RunOptions::default()).unwrap();
    let expected = expected_lines(settings);
    assert!(expected.len() > 1000, "{} bargains", expected.len());
    let got = sink::in_feed_order(&std::fs::read_to_string(&output).unwrap());
    assert_eq!(got.len(), expected.len(), "{plan:?}");
    assert_eq!(got, expected, "{plan:?}");
    assert_eq!(report.tuples_in("bargains"), expected.len() as u64);
}

#[test]
fn bargains_are_the_direct_computations_fused_auto_and_threaded_at_332_operators() {
    let settings = ["records=30000", "symbols=500", "window=5", "seed=3"];
    bargains_match(&settings, &PlanRequest::Fused);
    bargains_match(&settings, &PlanRequest::Auto);
    bargains_match(&settings, &PlanRequest::Threaded);
}

#[test]
fn bargains_are_the_direct_computations_under_the_shipped_threads_plan() {
    let settings = ["records=30000", "seed=9"];
    bargains_match(
        &settings,
        &crate::plan_request("vwap", "two-threads").unwrap(),
    );
}
