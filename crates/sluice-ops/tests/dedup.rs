//! Deduplication by key end to end under the fused, threaded and processes plans: by a
//! window of tuples, of processing time, and of event time with watermarks, each compared with
//! a direct computation; and windows that cannot work refused when the dataflow is built.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{counter, every_plan, run_flow};
use sluice_ops::{collected, Dataflow, Dedup, IterSource};

/// A tuple: (key, event time in ns).
type Event = (u64, u64);

/// Runs `events` through a dedup by key with `dedup` (at `parallelism`) under every plan;
/// returns, per plan, what passed (sorted) and how many were counted as duplicates.
fn dedup_under_every_plan(
    events: &[Event],
    dedup: impl Fn() -> Dedup<Event>,
    parallelism: usize,
) -> Vec<(Vec<Event>, u64)> {
    every_plan()
        .into_iter()
        .map(|request| {
            let events = events.to_vec();
            let flow = Dataflow::new("dedup");
            let passed = flow
                .source("events", move |_| {
                    IterSource::new(events.clone().into_iter())
                })
                .watermarks("stamp", |e: &Event| e.1, Duration::ZERO)
                .key_by(|e: &Event| &e.0)
                .dedup("dedup", dedup())
                .parallelism(parallelism);
            let into = passed.collect("sink");
            let report = run_flow(&flow, &request);
            let mut got = collected(&into);
            got.sort_unstable();
            (got, counter(&report, "dedup", "duplicate_tuples"))
        })
        .collect()
}

/// The direct computation: a tuple passes unless its key last passed at most `window` of
/// `clock` before it.
fn direct(events: &[Event], window: u64, clock: impl Fn(usize, &Event) -> u64) -> Vec<Event> {
    let mut last: BTreeMap<u64, u64> = BTreeMap::new();
    let mut passed = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let at = clock(i, e);
        if last.get(&e.0).is_none_or(|l| at - l > window) {
            last.insert(e.0, at);
            passed.push(*e);
        }
    }
    passed.sort_unstable();
    passed
}

/// Keys repeating at several paces over rising event times.
fn events() -> Vec<Event> {
    (0..3000u64).map(|i| ((i * i) % 7, i * 3)).collect()
}

#[test]
fn by_event_time_a_key_passes_once_a_window() {
    let events = events();
    let expected = direct(&events, 50, |_, e| e.1);
    let duplicates = (events.len() - expected.len()) as u64;
    let dedup = || Dedup::within(Duration::from_nanos(50)).event_time(|e: &Event| e.1);
    for (got, counted) in dedup_under_every_plan(&events, dedup, 2) {
        assert_eq!(got, expected);
        assert_eq!(counted, duplicates);
    }
}

#[test]
fn by_count_a_key_passes_once_in_its_window_of_tuples() {
    let events = events();
    let expected = direct(&events, 20, |i, _| i as u64);
    for (got, _) in dedup_under_every_plan(&events, || Dedup::within_count(20), 1) {
        assert_eq!(got, expected);
    }
}

#[test]
fn by_processing_time_each_key_passes_once_within_a_long_window() {
    let events = events();
    let mut firsts: BTreeMap<u64, Event> = BTreeMap::new();
    for e in &events {
        firsts.entry(e.0).or_insert(*e);
    }
    let mut expected: Vec<Event> = firsts.into_values().collect();
    expected.sort_unstable();
    let hour = || Dedup::within(Duration::from_secs(3600));
    for (got, counted) in dedup_under_every_plan(&events, hour, 2) {
        assert_eq!(got, expected);
        assert_eq!(counted, (events.len() - expected.len()) as u64);
    }
}

#[test]
fn windows_that_cannot_work_are_refused_naming_the_operator() {
    let refusal = |dedup: Dedup<Event>| {
        let flow = Dataflow::new("refused");
        flow.source("events", |_| IterSource::new(events().into_iter()))
            .key_by(|e: &Event| &e.0)
            .dedup("once", dedup);
        flow.build().unwrap_err().to_string()
    };
    assert_eq!(
        refusal(Dedup::within(Duration::ZERO)),
        "operator 'once': a dedup window needs a time above 0"
    );
    assert_eq!(
        refusal(Dedup::within_count(0)),
        "operator 'once': a dedup window needs at least 1 tuple"
    );
}
