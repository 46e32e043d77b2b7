//! Parameters that cannot work are refused when the graph is built, each with a message
//! naming the operator and what is wrong, rather than failing (or silently doing nothing)
//! once the job runs.

use std::time::Duration;

use sluice_ops::{Collect, Count, Dataflow, IterSource, JoinWindow, Stream, Windows};
use sluice_types::Tuple;

/// A tuple: (key, event time).
type Event = (u64, u64);

fn events(flow: &Dataflow, name: &str) -> Stream<Event> {
    flow.source(name, |_| IterSource::new(vec![(1u64, 5u64)].into_iter()))
}

/// The error `Dataflow::build` gives for a window operator `name` over `windows`.
fn window_error(windows: Windows<Event>) -> String {
    let flow = Dataflow::new("bad");
    let counts = events(&flow, "events")
        .key_by(|e: &Event| &e.0)
        .window(windows)
        .count("tally");
    end(&counts, "sink");
    flow.build().map(|_| ()).unwrap_err().to_string()
}

/// Ends `stream` in a sink called `name` that keeps what it gets.
fn end<T: Tuple>(stream: &Stream<T>, name: &str) {
    stream.sink(name, |_| Collect::<T>::new(Default::default()));
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn window_parameters_that_cannot_work_are_refused_naming_the_operator() {
    let by_time = |w: Windows<Event>| w.event_time(|e: &Event| e.1);
    let cases: Vec<(Windows<Event>, &str)> = vec![
        (
            Windows::tumbling_count(0),
            "a count window needs a size and a slide of at least 1 tuple, not 0 and 0",
        ),
        (
            Windows::sliding_count(4, 0),
            "a count window needs a size and a slide of at least 1 tuple, not 4 and 0",
        ),
        (Windows::sliding_count(0, 2), "not 0 and 2"),
        (
            Windows::sliding_count(3, 5),
            "a slide of 5 tuples is longer than the window of 3",
        ),
        (
            Windows::tumbling(Duration::ZERO),
            "a time window needs a size and a slide above 0",
        ),
        (
            by_time(Windows::tumbling(Duration::ZERO)),
            "a time window needs a size and a slide above 0",
        ),
        (
            Windows::sliding(ms(10), Duration::ZERO),
            "a time window needs a size and a slide above 0",
        ),
        (
            Windows::sliding(Duration::ZERO, ms(10)),
            "a time window needs a size and a slide above 0",
        ),
        (
            Windows::sliding(ms(10), ms(20)),
            "a slide of 20ms is longer than the window of 10ms",
        ),
        (
            Windows::session(Duration::ZERO),
            "a session window needs a gap above 0",
        ),
        (
            by_time(Windows::session(Duration::ZERO)),
            "a session window needs a gap above 0",
        ),
        (
            Windows::tumbling(ms(10)).allowed_lateness(ms(5)),
            "allowed lateness applies to event time only",
        ),
    ];
    for (windows, expected) in cases {
        let shape = windows.shape;
        let error = window_error(windows);
        assert!(
            error.starts_with("operator 'tally': "),
            "{shape:?}: {error}"
        );
        assert!(error.contains(expected), "{shape:?}: {error}");
    }
}

#[test]
fn a_top_k_of_zero_is_refused_naming_the_operator() {
    let flow = Dataflow::new("bad");
    let best = events(&flow, "events")
        .key_by(|e: &Event| &e.0)
        .window(Windows::tumbling_count(4))
        .top_k("best", 0, |e: &Event| e.1);
    end(&best, "sink");
    let error = flow.build().map(|_| ()).unwrap_err().to_string();
    assert_eq!(error, "operator 'best': a top-k needs k of at least 1");
}

#[test]
fn a_late_stream_without_a_late_port_is_refused_naming_the_operator() {
    let flow = Dataflow::new("bad");
    let (counts, late) = events(&flow, "events")
        .key_by(|e: &Event| &e.0)
        .window(Windows::tumbling(ms(1)).event_time(|e: &Event| e.1))
        .aggregate_with_late("tally", Count);
    end(&counts, "sink");
    end(&late, "late");
    let error = flow.build().map(|_| ()).unwrap_err().to_string();
    assert_eq!(
        error,
        "operator 'tally': a late stream needs the late policy LatePolicy::Port"
    );
}

#[test]
fn join_windows_that_cannot_work_are_refused_naming_the_operator() {
    let cases = [
        (JoinWindow::Count(0), "a join window needs at least 1 tuple"),
        (
            JoinWindow::Arrival(Duration::ZERO),
            "a join window needs a duration above 0",
        ),
        (
            JoinWindow::EventTime(Duration::from_secs(1)),
            "a join by event time needs both sides' times: key_by(..).event_time(f)",
        ),
    ];
    for (window, expected) in cases {
        let flow = Dataflow::new("bad");
        let left = events(&flow, "left");
        let right = events(&flow, "right");
        let pairs = left.key_by(|e: &Event| &e.0).join(
            "pairs",
            &right.key_by(|e: &Event| &e.0),
            window,
            |l: &Event, r: &Event| (l.1, r.1),
        );
        end(&pairs, "sink");
        let error = flow.build().map(|_| ()).unwrap_err().to_string();
        assert_eq!(error, format!("operator 'pairs': {expected}"), "{window:?}");
    }
}

#[test]
fn an_as_of_join_without_both_sides_times_is_refused_naming_the_operator() {
    let flow = Dataflow::new("bad");
    let left = events(&flow, "left").key_by(|e: &Event| &e.0);
    let right = events(&flow, "right").key_by(|e: &Event| &e.0);
    let latest =
        left.event_time(|e: &Event| e.1)
            .as_of("latest", &right, |l: &Event, r: Option<&Event>| {
                Some((l.1, r.map_or(0, |r| r.1)))
            });
    end(&latest, "sink");
    let error = flow.build().map(|_| ()).unwrap_err().to_string();
    assert_eq!(
        error,
        "operator 'latest': an as-of join needs both sides' times: key_by(..).event_time(f)"
    );
}

#[test]
fn a_parallelism_of_zero_is_refused_naming_the_operator() {
    let flow = Dataflow::new("bad");
    let doubled = events(&flow, "events")
        .map("double", |e: &Event| e.1 * 2)
        .parallelism(0);
    end(&doubled, "sink");
    let error = flow.build().map(|_| ()).unwrap_err().to_string();
    assert!(error.contains("'double'"), "{error}");
}

#[test]
fn a_second_build_is_refused_rather_than_panicking() {
    let flow = Dataflow::new("twice");
    end(&events(&flow, "events"), "sink");
    assert!(flow.build().is_ok());
    let again = flow.build().map(|_| ()).unwrap_err().to_string();
    assert!(again.contains("'twice' was built already"), "{again}");
}
