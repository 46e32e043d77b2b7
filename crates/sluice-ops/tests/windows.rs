//! Event-time windows end to end: tuples out of order, watermarks made from the data by the
//! watermark assigner and carried to the window operator as punctuations through each plan's
//! transports (a direct call fused, a threaded port, shared memory between PEs), and the
//! windows' counts compared with a direct computation. Tuples later than the allowed
//! disorder are counted, not lost silently.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use sluice_ops::{Collect, Collected, Dataflow, IterSource, Windowed, Windows};
use sluice_plan::PlanRequest;
use sluice_runtime::JobReport;

use common::{drain, every_plan, run_in_process};

/// A tuple: (key, event time in ns).
type Event = (u64, u64);

/// Runs the windowed count over `events` under `request`; returns each window's count by
/// (key, start) and the job's report.
fn windowed_counts(
    events: Vec<Event>,
    size: u64,
    delay: u64,
    request: PlanRequest,
) -> (BTreeMap<(u64, u64), u64>, JobReport) {
    let into: Collected<Windowed<u64, u64>> = Default::default();
    let sink_into = into.clone();
    let flow = Dataflow::new("windows");
    flow.source("events", move |_| {
        IterSource::new(events.clone().into_iter())
    })
    .watermarks("stamp", |e: &Event| e.1, Duration::from_nanos(delay))
    .key_by(|e: &Event| &e.0)
    .window(Windows::tumbling(Duration::from_nanos(size)).event_time(|e: &Event| e.1))
    .count("count")
    .parallelism(2)
    .sink("sink", move |_| Collect::new(sink_into.clone()));
    let report = run_in_process(&flow.build().unwrap(), &request).unwrap();
    let mut counts = BTreeMap::new();
    for w in drain(&into) {
        assert_eq!(w.end - w.start, size);
        let previous = counts.insert((w.key, w.start), w.value);
        assert!(
            previous.is_none(),
            "window {:?} fired twice",
            (w.key, w.start)
        );
    }
    (counts, report)
}

/// The direct computation: each tuple counted in its window, unless it came later than the
/// watermark allowed (its window had ended by the greatest time seen before it, less `delay`).
fn direct(events: &[Event], size: u64, delay: u64) -> (BTreeMap<(u64, u64), u64>, u64) {
    let mut counts = BTreeMap::new();
    let mut greatest: Option<u64> = None;
    let mut late = 0;
    let mut watermark = 0;
    for &(key, at) in events {
        let start = at - at % size;
        if start + size <= watermark {
            late += 1;
        } else {
            *counts.entry((key, start)).or_insert(0) += 1;
        }
        greatest = Some(greatest.map_or(at, |g| g.max(at)));
        watermark = watermark.max(greatest.unwrap_or(0).saturating_sub(delay));
    }
    (counts, late)
}

/// Events whose times rise with some disorder: each is at most `jitter` behind the greatest
/// before it.
fn events() -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec((0u64..4, 0u64..50, 0u64..30), 1..300).prop_map(|steps| {
        let mut now = 0;
        steps
            .into_iter()
            .map(|(key, step, jitter)| {
                now += step;
                (key, now.saturating_sub(jitter))
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn windows_match_a_direct_count_under_every_plan(events in events(), size in 20u64..200) {
        // A delay covering the disorder: no tuple is late.
        let (expected, late) = direct(&events, size, 30);
        prop_assert_eq!(late, 0);
        for request in every_plan() {
            let (got, _) = windowed_counts(events.clone(), size, 30, request.clone());
            prop_assert_eq!(&got, &expected, "{:?}", request);
        }
    }
}

#[test]
fn tuples_later_than_the_watermark_are_counted_late() {
    // Times 0..300 in order, then a tuple at 5: window [0, 50) ended long before. The
    // assigner sends a watermark after each batch its source emits (256 tuples), so the late
    // tuple, in the second batch, comes after a watermark past its window in every plan.
    let mut events: Vec<Event> = (0..300).map(|t| (1, t)).collect();
    events.push((1, 5));
    events.push((2, 320));
    let (expected, late) = direct(&events, 50, 0);
    assert_eq!(late, 1);
    for request in every_plan() {
        let (got, report) = windowed_counts(events.clone(), 50, 0, request.clone());
        assert_eq!(got, expected, "{request:?}");
        assert_eq!(
            report.operator_report("count").counters["late_tuples"],
            1,
            "{request:?}"
        );
    }
}

/// Nanoseconds since the Unix epoch, by the system's wall clock.
fn utc_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

#[test]
fn processing_time_windows_carry_utc_times_aligned_to_their_size() {
    let size = Duration::from_millis(200);
    let size_ns = size.as_nanos() as u64;
    for request in every_plan() {
        let into: Collected<Windowed<u64, u64>> = Default::default();
        let sink_into = into.clone();
        let flow = Dataflow::new("processing-windows");
        flow.source("events", |_| {
            IterSource::new((0..1000u64).map(|i| (i % 3, i)))
        })
        .key_by(|e: &Event| &e.0)
        .window(Windows::tumbling(size))
        .count("count")
        .sink("sink", move |_| Collect::new(sink_into.clone()));
        let before = utc_now();
        run_in_process(&flow.build().unwrap(), &request).unwrap();
        let after = utc_now();
        let windows = drain(&into);
        assert_eq!(windows.iter().map(|w| w.value).sum::<u64>(), 1000);
        for w in &windows {
            // A window holds a tuple that arrived during the run: it starts before the run
            // ended and ends after it began, on the wall clock (a step of the system clock
            // during the test aside).
            assert!(
                w.start <= after && w.end > before,
                "{request:?}: window [{}, {}) outside the run [{}, {}]",
                sluice_types::utc_text(w.start),
                sluice_types::utc_text(w.end),
                sluice_types::utc_text(before),
                sluice_types::utc_text(after),
            );
            assert_eq!(w.end - w.start, size_ns);
            assert_eq!(w.start % size_ns, 0, "aligned to the epoch");
        }
    }
}
