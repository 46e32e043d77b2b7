//! The stateless routing operators end to end under the fused, threaded and processes plans:
//! split (by a function, and to every port), union (of streams of several parallelisms, and
//! the event time it passes on), and throttle; and their parameters refused when the
//! dataflow is built.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{counter, every_plan, run_flow};
use sluice_ops::{collected, Collected, Dataflow, IterSource, Windows};

#[test]
fn split_sends_each_tuple_to_the_port_its_function_picks() {
    for request in every_plan() {
        let flow = Dataflow::new("split");
        let ports = flow
            .source("numbers", |_| IterSource::new(0..1000u64))
            .split("route", 3, |x: &u64| (x % 4) as usize);
        let sinks: Vec<Collected<u64>> = ports
            .iter()
            .enumerate()
            .map(|(i, port)| port.collect(&format!("port{i}")))
            .collect();
        let report = run_flow(&flow, &request);
        for (i, into) in sinks.iter().enumerate() {
            let expected: Vec<u64> = (0..1000).filter(|x| x % 4 == i as u64).collect();
            assert_eq!(collected(into), expected, "{request:?}: port {i}");
        }
        assert_eq!(counter(&report, "route", "unrouted_tuples"), 250);
    }
}

#[test]
fn duplicate_sends_every_tuple_to_every_port() {
    for request in every_plan() {
        let flow = Dataflow::new("duplicate");
        let copies = flow
            .source("numbers", |_| IterSource::new(0..700u64))
            .duplicate("copy", 2);
        let first = copies[0].collect("first");
        let second = copies[1].map("double", |x: &u64| x * 2).collect("second");
        run_flow(&flow, &request);
        assert_eq!(
            collected(&first),
            (0..700).collect::<Vec<u64>>(),
            "{request:?}"
        );
        let doubled: Vec<u64> = (0..700).map(|x| x * 2).collect();
        assert_eq!(collected(&second), doubled, "{request:?}");
    }
}

#[test]
fn union_merges_streams_of_any_parallelism_keeping_each_in_order() {
    for request in every_plan() {
        let flow = Dataflow::new("union");
        let evens = flow.source("evens", |_| IterSource::new((0..500u64).map(|x| 2 * x)));
        let odds = flow
            .source("odds", |_| IterSource::new((0..500u64).map(|x| 2 * x + 1)))
            .map("spread", |x: &u64| *x)
            .parallelism(2);
        let hundreds = flow.source("hundreds", |_| IterSource::new(1000..1100u64));
        let into = evens.union("merge", &[&odds, &hundreds]).collect("sink");
        run_flow(&flow, &request);
        let got = collected(&into);
        let evens: Vec<u64> = got
            .iter()
            .copied()
            .filter(|x| *x < 1000 && x % 2 == 0)
            .collect();
        assert_eq!(
            evens,
            (0..500).map(|x| 2 * x).collect::<Vec<_>>(),
            "{request:?}"
        );
        let hundreds: Vec<u64> = got.iter().copied().filter(|x| *x >= 1000).collect();
        assert_eq!(hundreds, (1000..1100).collect::<Vec<_>>(), "{request:?}");
        let mut all = got;
        all.sort_unstable();
        assert_eq!(all, (0..1100).collect::<Vec<_>>(), "{request:?}");
    }
}

/// A tuple: (key, event time in ns).
type Event = (u64, u64);

#[test]
fn event_time_windows_after_a_union_wait_for_every_stream() {
    // Two streams over the same stretch of event time, one through two instances: a window
    // must not fire until every instance feeding the union has passed its end, or the slower
    // stream's tuples would come late.
    let fast: Vec<Event> = (0..2000).map(|t| (t % 3, t)).collect();
    let slow: Vec<Event> = (0..1000).map(|t| (t % 3, 2 * t)).collect();
    let mut expected = BTreeMap::new();
    for (key, at) in fast.iter().chain(&slow) {
        *expected.entry((*key, at - at % 100)).or_insert(0u64) += 1;
    }
    for request in every_plan() {
        let (fast, slow) = (fast.clone(), slow.clone());
        let flow = Dataflow::new("union-windows");
        let fast = flow
            .source("fast", move |_| IterSource::new(fast.clone().into_iter()))
            .watermarks("stamp-fast", |e: &Event| e.1, Duration::ZERO);
        let slow = flow
            .source("slow", move |_| IterSource::new(slow.clone().into_iter()))
            .map("spread", |e: &Event| *e)
            .parallelism(2)
            .watermarks("stamp-slow", |e: &Event| e.1, Duration::ZERO)
            .parallelism(2);
        let counts = fast
            .union("merge", &[&slow])
            .key_by(|e: &Event| &e.0)
            .window(Windows::tumbling(Duration::from_nanos(100)).event_time(|e: &Event| e.1))
            .count("count")
            .parallelism(2);
        let into = counts.collect("sink");
        let report = run_flow(&flow, &request);
        assert_eq!(counter(&report, "count", "late_tuples"), 0, "{request:?}");
        let mut got = BTreeMap::new();
        for w in collected(&into) {
            assert!(
                got.insert((w.key, w.start), w.value).is_none(),
                "{request:?}: {w:?} twice"
            );
        }
        assert_eq!(got, expected, "{request:?}");
    }
}

#[test]
fn throttle_passes_every_tuple_in_order_no_faster_than_its_rate() {
    for request in every_plan() {
        let flow = Dataflow::new("throttle");
        let slowed = flow
            .source("numbers", |_| IterSource::new(0..50u64))
            .throttle("slow", 100.0);
        let into = slowed.collect("sink");
        let began = Instant::now();
        run_flow(&flow, &request);
        // 50 tuples at 100 a second: the last is due half a second after the first call.
        let took = began.elapsed();
        assert!(took >= Duration::from_millis(400), "{request:?}: {took:?}");
        assert_eq!(
            collected(&into),
            (0..50).collect::<Vec<u64>>(),
            "{request:?}"
        );
    }
}

#[test]
fn parameters_that_cannot_work_are_refused_naming_the_operator() {
    let refusal = |add: &dyn Fn(&sluice_ops::Stream<u64>)| {
        let flow = Dataflow::new("refused");
        add(&flow.source("numbers", |_| IterSource::new(0..1u64)));
        flow.build().unwrap_err().to_string()
    };
    let none = refusal(&|s| {
        s.split("nowhere", 0, |_| 0);
    });
    assert_eq!(
        none,
        "operator 'nowhere': a split needs at least 1 output stream"
    );
    for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let error = refusal(&|s| {
            s.throttle("stuck", rate);
        });
        assert!(
            error.starts_with("operator 'stuck': a throttle needs a rate above 0"),
            "{error}"
        );
    }
    let twice = refusal(&|s| {
        s.union("same", &[s]);
    });
    assert!(twice.contains("numbers.out[0]"), "{twice}");
}
