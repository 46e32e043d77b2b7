//! Differential tests of the operator library: rolling aggregates, windows (by count, by
//! time, sessions; counted, dropped and late-port late policies; aggregates, sort and top-k),
//! the count-window join, the join by event time (an interval join) and the stream-table join run
//! under the fused, threaded and processes plans on proptest-generated streams, with event
//! time out of order and late tuples, and compared with a direct computation.
//!
//! Why the comparisons are exact: every keyed operator has one upstream instance, so each of
//! its instances gets its keys' tuples in the source's order, and its single sink gets each
//! instance's output in order; only the interleaving of keys across instances differs between
//! plans, so results are compared per key, in order. The window tests' source emits
//! watermarks itself at fixed places in its stream (a punctuation travels in order with the
//! tuples on every transport), so which tuples are late, and when each window fires, is fixed
//! whatever the plan and however the transports batch the tuples. The join of two sources
//! keeps every tuple (no eviction), so its multiset of pairs is fixed however the inputs
//! interleave; the table join's probes start once the whole table has arrived.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use sluice_graph::{OperatorError, Output, Produced, Source};
use sluice_ops::{Collect, Collected, Dataflow, LatePolicy, Stream, Sum, Windowed, Windows};
use sluice_plan::PlanRequest;
use sluice_runtime::JobReport;
use sluice_types::Tuple;

use common::{counter, drain, every_plan, run_in_process};

/// A tuple: (key, event time in ns, value).
type Event = (u64, u64, i64);

/// A step of a scripted stream.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    Tuple(Event),
    Watermark(u64),
}

/// A source emitting its script: the tuples up to each watermark as one batch, then the
/// watermark.
struct Script {
    steps: Vec<Step>,
    next: usize,
    batch: Vec<Event>,
}

impl Source for Script {
    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        if self.next == self.steps.len() {
            return Ok(Produced::Exhausted);
        }
        let mut mark = None;
        while let Some(step) = self.steps.get(self.next) {
            self.next += 1;
            match *step {
                Step::Tuple(e) => self.batch.push(e),
                Step::Watermark(w) => {
                    mark = Some(w);
                    break;
                }
            }
        }
        let emitted = self.batch.len();
        out.emit_batch(0, &mut self.batch)?;
        if let Some(w) = mark {
            out.watermark(w)?;
        }
        Ok(Produced::Emitted(emitted))
    }
}

/// The tuples of a script, in order.
fn tuples(steps: &[Step]) -> Vec<Event> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Tuple(e) => Some(*e),
            Step::Watermark(_) => None,
        })
        .collect()
}

/// A sink collecting `stream` into what it returns.
fn collect<T: Tuple>(stream: &Stream<T>, name: &str) -> Collected<T> {
    let into: Collected<T> = Default::default();
    let sink_into = into.clone();
    stream.sink(name, move |_| Collect::new(sink_into.clone()));
    into
}

/// What `into` got, grouped by the key `key` reads, each key's items in arrival order.
fn per_key<T>(into: &Collected<T>, key: impl Fn(&T) -> u64) -> BTreeMap<u64, Vec<T>> {
    let mut keyed: BTreeMap<u64, Vec<T>> = BTreeMap::new();
    for item in drain(into) {
        keyed.entry(key(&item)).or_default().push(item);
    }
    keyed
}

fn by_key<V>(w: &Windowed<u64, V>) -> u64 {
    w.key
}

fn pair_key<V>(pair: &(u64, V)) -> u64 {
    pair.0
}

// ---------------------------------------------------------------------------------------
// Rolling aggregates

/// Each key's sequence of running results, by the direct fold `step` from `init`.
fn rolling<V: Clone>(
    events: &[Event],
    init: impl Fn(&Event) -> V,
    step: impl Fn(&V, &Event) -> V,
) -> BTreeMap<u64, Vec<(u64, V)>> {
    let mut last: BTreeMap<u64, V> = BTreeMap::new();
    let mut out: BTreeMap<u64, Vec<(u64, V)>> = BTreeMap::new();
    for e in events {
        let next = match last.get(&e.0) {
            Some(v) => step(v, e),
            None => init(e),
        };
        last.insert(e.0, next.clone());
        out.entry(e.0).or_default().push((e.0, next));
    }
    out
}

fn check_rolling(events: &[Event], request: &PlanRequest) -> Result<(), TestCaseError> {
    let flow = Dataflow::new("rolling");
    let input = events.to_vec();
    let keyed = flow
        .source("events", move |_| {
            sluice_ops::IterSource::new(input.clone().into_iter())
        })
        .key_by(|e: &Event| &e.0);
    let count = collect(&keyed.count("count").parallelism(2), "count-sink");
    let count_at_end = collect(
        &keyed
            .aggregate_at_end("count-at-end", sluice_ops::Count)
            .parallelism(2),
        "count-at-end-sink",
    );
    let sum = collect(
        &keyed.sum("sum", |e: &Event| e.2).parallelism(2),
        "sum-sink",
    );
    let min = collect(
        &keyed.min("min", |e: &Event| e.2).parallelism(2),
        "min-sink",
    );
    let max = collect(
        &keyed.max("max", |e: &Event| e.2).parallelism(2),
        "max-sink",
    );
    let mean = collect(
        &keyed.mean("mean", |e: &Event| e.2 as f64).parallelism(2),
        "mean-sink",
    );
    // Not commutative: the latest time with the earliest value, and the values folded.
    let reduce = collect(
        &keyed
            .reduce("reduce", |a: &Event, b: &Event| {
                (a.0, b.1, a.2.wrapping_mul(3).wrapping_add(b.2))
            })
            .parallelism(2),
        "reduce-sink",
    );
    run_in_process(&flow.build().unwrap(), request).unwrap();
    let counts = rolling(events, |_| 1u64, |n, _| n + 1);
    // At the end: each key once, with its last running count.
    let last_counts: BTreeMap<u64, Vec<(u64, u64)>> = counts
        .iter()
        .map(|(key, running)| (*key, running.last().into_iter().cloned().collect()))
        .collect();
    prop_assert_eq!(
        per_key(&count_at_end, pair_key),
        last_counts,
        "count at end"
    );
    prop_assert_eq!(per_key(&count, pair_key), counts, "count");
    prop_assert_eq!(
        per_key(&sum, pair_key),
        rolling(events, |e| e.2, |s, e| s + e.2),
        "sum"
    );
    prop_assert_eq!(
        per_key(&min, pair_key),
        rolling(events, |e| e.2, |m, e| *m.min(&e.2)),
        "min"
    );
    prop_assert_eq!(
        per_key(&max, pair_key),
        rolling(events, |e| e.2, |m, e| *m.max(&e.2)),
        "max"
    );
    let means = rolling(
        events,
        |e| (e.2 as f64, 1u64),
        |(s, n), e| (s + e.2 as f64, n + 1),
    );
    let means: BTreeMap<u64, Vec<(u64, f64)>> = means
        .into_iter()
        .map(|(k, v)| {
            (
                k,
                v.into_iter().map(|(k, (s, n))| (k, s / n as f64)).collect(),
            )
        })
        .collect();
    prop_assert_eq!(per_key(&mean, pair_key), means, "mean");
    prop_assert_eq!(
        per_key(&reduce, pair_key),
        rolling(
            events,
            |e| *e,
            |a, b| (a.0, b.1, a.2.wrapping_mul(3).wrapping_add(b.2))
        ),
        "reduce"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Windows: the direct computation

/// One window's firing: key, start, end, and its tuples (in pane order, each pane in arrival
/// order, as the operator merges them).
type Fired = (u64, u64, u64, Vec<Event>);

/// What a window model gives: each key's firings in order, and the late tuples in order.
#[derive(Debug, Default)]
struct Model {
    fired: BTreeMap<u64, Vec<Fired>>,
    late: Vec<Event>,
}

impl Model {
    fn fire(&mut self, key: u64, start: u64, end: u64, tuples: Vec<Event>) {
        self.fired
            .entry(key)
            .or_default()
            .push((key, start, end, tuples));
    }

    /// Each key's firings with `value` of their tuples.
    fn results<V>(&self, value: impl Fn(&[Event]) -> V) -> BTreeMap<u64, Vec<Windowed<u64, V>>> {
        self.fired
            .iter()
            .map(|(k, fired)| {
                let windows = fired
                    .iter()
                    .map(|(key, start, end, tuples)| Windowed {
                        key: *key,
                        start: *start,
                        end: *end,
                        value: value(tuples),
                    })
                    .collect();
                (*k, windows)
            })
            .collect()
    }
}

/// Time windows of `size` every `slide` with allowed lateness `lateness`, over a script.
fn time_windows(steps: &[Step], size: u64, slide: u64, lateness: u64) -> Model {
    let pane = gcd(size, slide);
    let last_end = |t: u64| t - t % slide + size;
    let mut model = Model::default();
    // Each key's retained tuples, in arrival order.
    let mut kept: BTreeMap<u64, Vec<Event>> = BTreeMap::new();
    let mut now = 0u64;
    let window = |kept: &BTreeMap<u64, Vec<Event>>, key: u64, start: u64, end: u64| {
        let mut inside: Vec<Event> = kept[&key]
            .iter()
            .filter(|e| (start..end).contains(&e.1))
            .copied()
            .collect();
        inside.sort_by_key(|e| e.1 - e.1 % pane);
        inside
    };
    let advance =
        |model: &mut Model, kept: &mut BTreeMap<u64, Vec<Event>>, now: &mut u64, to: u64| {
            if to <= *now {
                return;
            }
            for (&key, tuples) in kept.iter() {
                let mut ends: Vec<u64> = Vec::new();
                for e in tuples {
                    let mut end = last_end(e.1);
                    while end > e.1 {
                        if end > *now && end <= to {
                            ends.push(end);
                        }
                        end = end.saturating_sub(slide);
                    }
                }
                ends.sort_unstable();
                ends.dedup();
                for end in ends {
                    model.fire(key, end - size, end, window(kept, key, end - size, end));
                }
            }
            *now = to;
            let horizon = to.saturating_sub(lateness);
            for tuples in kept.values_mut() {
                tuples.retain(|e| last_end(e.1) > horizon);
            }
            kept.retain(|_, tuples| !tuples.is_empty());
        };
    for step in steps {
        match *step {
            Step::Watermark(w) => advance(&mut model, &mut kept, &mut now, w),
            Step::Tuple(e) => {
                if last_end(e.1).saturating_add(lateness) <= now {
                    model.late.push(e);
                    continue;
                }
                kept.entry(e.0).or_default().push(e);
                // A window that fired already, and is still within the allowed lateness,
                // fires again with the tuple.
                let mut end = last_end(e.1);
                while end > e.1 {
                    if end <= now && end.saturating_add(lateness) > now {
                        model.fire(e.0, end - size, end, window(&kept, e.0, end - size, end));
                    }
                    end = end.saturating_sub(slide);
                }
            }
        }
    }
    advance(&mut model, &mut kept, &mut now, u64::MAX);
    model
}

/// One session of the model: start, end, tuples, fired since it last changed.
type ModelSession = (u64, u64, Vec<Event>, bool);

/// Session windows closed by `gap`, with allowed lateness `lateness`, over a script.
fn sessions(steps: &[Step], gap: u64, lateness: u64) -> Model {
    let mut model = Model::default();
    let mut open: BTreeMap<u64, Vec<ModelSession>> = BTreeMap::new();
    let mut now = 0u64;
    let fire = |model: &mut Model, key: u64, sessions: &mut Vec<ModelSession>, now: u64| {
        for s in sessions.iter_mut().filter(|s| s.1 <= now && !s.3) {
            s.3 = true;
            model.fire(key, s.0, s.1, s.2.clone());
        }
    };
    let advance =
        |model: &mut Model, open: &mut BTreeMap<u64, Vec<ModelSession>>, now: &mut u64, to: u64| {
            if to <= *now {
                return;
            }
            *now = to;
            let horizon = to.saturating_sub(lateness);
            for (&key, sessions) in open.iter_mut() {
                fire(model, key, sessions, to);
                sessions.retain(|s| s.1 > horizon || !s.3);
            }
            open.retain(|_, s| !s.is_empty());
        };
    for step in steps {
        match *step {
            Step::Watermark(w) => advance(&mut model, &mut open, &mut now, w),
            Step::Tuple(e) => {
                let end = e.1 + gap;
                if end.saturating_add(lateness) <= now {
                    model.late.push(e);
                    continue;
                }
                let sessions = open.entry(e.0).or_default();
                let mut joined: ModelSession = (e.1, end, vec![e], false);
                sessions.retain(|s| {
                    let overlaps = s.0 < end && e.1 < s.1;
                    if overlaps {
                        joined.0 = joined.0.min(s.0);
                        joined.1 = joined.1.max(s.1);
                        joined.2.extend(&s.2);
                    }
                    !overlaps
                });
                let at = sessions.partition_point(|s| s.0 < joined.0);
                let merged_end = joined.1;
                sessions.insert(at, joined);
                if merged_end <= now {
                    fire(&mut model, e.0, sessions, now);
                }
            }
        }
    }
    advance(&mut model, &mut open, &mut now, u64::MAX);
    model
}

/// Count windows of `size` every `slide` tuples per key; at the end, each key's tuples since
/// its last window (and as many whole panes before them as fit) make one more.
fn count_windows(events: &[Event], size: u64, slide: u64) -> Model {
    let pane = gcd(size, slide);
    let mut model = Model::default();
    let mut seen: BTreeMap<u64, Vec<Event>> = BTreeMap::new();
    for e in events {
        let tuples = seen.entry(e.0).or_default();
        tuples.push(*e);
        let n = tuples.len() as u64;
        if n.is_multiple_of(slide) {
            let from = n.saturating_sub(size);
            model.fire(e.0, from, n, tuples[from as usize..].to_vec());
        }
    }
    for (key, tuples) in &seen {
        let n = tuples.len() as u64;
        if !n.is_multiple_of(slide) {
            let filled = n % pane;
            let held = ((size - filled) / pane * pane + filled).min(n);
            model.fire(*key, n - held, n, tuples[(n - held) as usize..].to_vec());
        }
    }
    model
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn count_of(tuples: &[Event]) -> u64 {
    tuples.len() as u64
}

fn sum_of(tuples: &[Event]) -> i64 {
    tuples.iter().map(|e| e.2).sum()
}

/// The tuples sorted by value (stable).
fn sorted_by_value(tuples: &[Event]) -> Vec<Event> {
    let mut sorted = tuples.to_vec();
    sorted.sort_by_key(|e| e.2);
    sorted
}

/// The `k` tuples of greatest value, greatest first, the earlier first among equals.
fn top(k: usize) -> impl Fn(&[Event]) -> Vec<Event> {
    move |tuples| {
        let mut best = tuples.to_vec();
        best.sort_by_key(|e| std::cmp::Reverse(e.2));
        best.truncate(k);
        best
    }
}

// ---------------------------------------------------------------------------------------
// Windows: the job

/// The windows' parameters of one case.
#[derive(Debug, Clone, Copy)]
struct Params {
    size: u64,
    slide: u64,
    lateness: u64,
    gap: u64,
    count_size: u64,
    count_slide: u64,
    k: usize,
}

/// Windows over event time (the tuple's second field) with `lateness`.
fn by_event_time(windows: Windows<Event>, lateness: u64, late: LatePolicy) -> Windows<Event> {
    windows
        .event_time(|e: &Event| e.1)
        .allowed_lateness(Duration::from_nanos(lateness))
        .late(late)
}

fn check_windows(steps: &[Step], p: Params, request: &PlanRequest) -> Result<(), TestCaseError> {
    let flow = Dataflow::new("windowing");
    let script = steps.to_vec();
    let keyed = flow
        .source_of::<Event, _, _>("events", move |_| Script {
            steps: script.clone(),
            next: 0,
            batch: Vec::new(),
        })
        .key_by(|e: &Event| &e.0);
    let ns = Duration::from_nanos;
    let tumbling = keyed
        .window(by_event_time(
            Windows::tumbling(ns(p.size)),
            p.lateness,
            LatePolicy::Count,
        ))
        .count("tumbling")
        .parallelism(2);
    let tumbling = collect(&tumbling, "tumbling-sink");
    let (sliding, late) = keyed
        .window(by_event_time(
            Windows::sliding(ns(p.size), ns(p.slide)),
            p.lateness,
            LatePolicy::Port,
        ))
        .aggregate_with_late("sliding", sluice_ops::SortBy::new(|e: &Event| e.2));
    let sliding = collect(&sliding.parallelism(2), "sliding-sink");
    let late = collect(&late, "late-sink");
    let session = keyed
        .window(by_event_time(
            Windows::session(ns(p.gap)),
            p.lateness,
            LatePolicy::Drop,
        ))
        .aggregate("session", Sum::new(|e: &Event| e.2))
        .parallelism(2);
    let session = collect(&session, "session-sink");
    let counted = keyed
        .window(Windows::sliding_count(p.count_size, p.count_slide))
        .top_k("counted", p.k, |e: &Event| e.2)
        .parallelism(2);
    let counted = collect(&counted, "counted-sink");
    let report: JobReport = run_in_process(&flow.build().unwrap(), request).unwrap();

    let tumbling_model = time_windows(steps, p.size, p.size, p.lateness);
    prop_assert_eq!(
        per_key(&tumbling, by_key),
        tumbling_model.results(count_of),
        "tumbling"
    );
    prop_assert_eq!(
        counter(&report, "tumbling", "late_tuples"),
        tumbling_model.late.len() as u64,
        "tumbling late"
    );
    let sliding_model = time_windows(steps, p.size, p.slide, p.lateness);
    prop_assert_eq!(
        per_key(&sliding, by_key),
        sliding_model.results(sorted_by_value),
        "sliding"
    );
    let by_tuple_key = |e: &Event| e.0;
    let mut expected_late: BTreeMap<u64, Vec<Event>> = BTreeMap::new();
    for e in &sliding_model.late {
        expected_late.entry(e.0).or_default().push(*e);
    }
    prop_assert_eq!(per_key(&late, by_tuple_key), expected_late, "late port");
    prop_assert_eq!(
        counter(&report, "sliding", "late_tuples"),
        sliding_model.late.len() as u64,
        "sliding late"
    );
    let session_model = sessions(steps, p.gap, p.lateness);
    prop_assert_eq!(
        per_key(&session, by_key),
        session_model.results(sum_of),
        "sessions"
    );
    prop_assert_eq!(
        counter(&report, "session", "late_tuples"),
        0,
        "dropped, not counted"
    );
    let count_model = count_windows(&tuples(steps), p.count_size, p.count_slide);
    prop_assert_eq!(
        per_key(&counted, by_key),
        count_model.results(top(p.k)),
        "count windows"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Joins

/// Joins two streams by key within a count window large enough that no tuple of a key is
/// evicted before the last of the other side's arrives: every pair of equal keys joins, in
/// whatever order the two inputs interleave, so the multiset of pairs is exact.
fn check_count_join(
    left: &[Event],
    right: &[Event],
    request: &PlanRequest,
) -> Result<(), TestCaseError> {
    let flow = Dataflow::new("joining");
    let source = |name: &str, events: &[Event]| {
        let events = events.to_vec();
        flow.source(name, move |_| {
            sluice_ops::IterSource::new(events.clone().into_iter())
        })
        .key_by(|e: &Event| &e.0)
    };
    let most = left.len().max(right.len()).max(1);
    let pairs = source("left", left)
        .join(
            "join",
            &source("right", right),
            sluice_ops::JoinWindow::Count(most),
            |l: &Event, r: &Event| (*l, *r),
        )
        .parallelism(2);
    let pairs = collect(&pairs, "pairs");
    run_in_process(&flow.build().unwrap(), request).unwrap();
    let mut got = drain(&pairs);
    got.sort_unstable();
    let mut expected: Vec<(Event, Event)> = left
        .iter()
        .flat_map(|l| right.iter().filter(|r| r.0 == l.0).map(|r| (*l, *r)))
        .collect();
    expected.sort_unstable();
    prop_assert_eq!(got, expected);
    Ok(())
}

/// The steps of `steps` without the tuples behind the watermark before them.
fn on_time(steps: &[Step]) -> Vec<Step> {
    let mut mark = 0;
    steps
        .iter()
        .filter(|step| match step {
            Step::Tuple(e) => e.1 >= mark,
            Step::Watermark(w) => {
                mark = *w;
                true
            }
        })
        .copied()
        .collect()
}

/// Joins two scripted streams by event time, pairs within `within` of each other. Neither
/// script has a tuple behind its own watermark, so none is behind the join's (the least of
/// the two), and a tuple is evicted only once the watermark is past every time it could pair
/// with: the pairs are exactly those of equal keys within `within`, in any interleaving.
fn check_interval_join(
    left: &[Step],
    right: &[Step],
    within: u64,
    request: &PlanRequest,
) -> Result<(), TestCaseError> {
    let flow = Dataflow::new("interval");
    let source = |name: &str, steps: &[Step]| {
        let steps = steps.to_vec();
        flow.source_of::<Event, _, _>(name, move |_| Script {
            steps: steps.clone(),
            next: 0,
            batch: Vec::new(),
        })
        .key_by(|e: &Event| &e.0)
        .event_time(|e: &Event| e.1)
    };
    let pairs = source("left", left)
        .join(
            "join",
            &source("right", right),
            sluice_ops::JoinWindow::EventTime(Duration::from_nanos(within)),
            |l: &Event, r: &Event| (*l, *r),
        )
        .parallelism(2);
    let pairs = collect(&pairs, "pairs");
    let report = run_in_process(&flow.build().unwrap(), request).unwrap();
    prop_assert_eq!(counter(&report, "join", "late_tuples"), 0);
    let mut got = drain(&pairs);
    got.sort_unstable();
    let (left, right) = (tuples(left), tuples(right));
    let mut expected: Vec<(Event, Event)> = left
        .iter()
        .flat_map(|l| {
            right
                .iter()
                .filter(|r| r.0 == l.0 && r.1.abs_diff(l.1) <= within)
                .map(|r| (*l, *r))
        })
        .collect();
    expected.sort_unstable();
    prop_assert_eq!(got, expected);
    Ok(())
}

/// A probe of the table join that only records the row it saw.
const SENTINEL: u64 = u64::MAX;

/// The rows the sentinel probes saw, by key.
type Seen = Arc<Mutex<BTreeMap<u64, i64>>>;

/// The probe source of the table join: it sends sentinel probes of every key the table
/// updates until each has seen its key's final row, and only then its probes. As a key's
/// probes follow its sentinels on one edge, each sees the final row.
struct Gated {
    finals: BTreeMap<u64, i64>,
    seen: Seen,
    probes: std::vec::IntoIter<Event>,
    batch: Vec<Event>,
}

impl Source for Gated {
    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let seen = self.seen.lock().unwrap().clone();
        let waiting = self
            .finals
            .iter()
            .filter(|(k, v)| seen.get(k) != Some(v))
            .map(|(k, _)| (*k, SENTINEL, 0));
        self.batch.extend(waiting);
        if self.batch.is_empty() {
            self.batch.extend(self.probes.by_ref().take(64));
            if self.batch.is_empty() {
                return Ok(Produced::Exhausted);
            }
        } else {
            // Not a timing assumption: only fewer sentinels while the table arrives.
            std::thread::sleep(Duration::from_millis(1));
        }
        let emitted = self.batch.len();
        out.emit_batch(0, &mut self.batch)?;
        Ok(Produced::Emitted(emitted))
    }
}

/// Enriches probes from a table stream of `(key, update number)` rows, once the table has
/// arrived (see [`Gated`]): each probe meets its key's last row, or none.
fn check_lookup(
    updates: &[u64],
    probes: &[Event],
    request: &PlanRequest,
) -> Result<(), TestCaseError> {
    let rows: Vec<(u64, i64)> = updates.iter().zip(0i64..).map(|(k, n)| (*k, n)).collect();
    let finals: BTreeMap<u64, i64> = rows.iter().copied().collect();
    let seen: Seen = Default::default();
    let flow = Dataflow::new("lookup");
    let table = flow.source("table", move |_| {
        sluice_ops::IterSource::new(rows.clone().into_iter())
    });
    let (gate, input) = (seen.clone(), probes.to_vec());
    let gate_finals = finals.clone();
    let enriched = flow
        .source_of::<Event, _, _>("probes", move |_| Gated {
            finals: gate_finals.clone(),
            seen: gate.clone(),
            probes: input.clone().into_iter(),
            batch: Vec::new(),
        })
        .key_by(|e: &Event| &e.0)
        .lookup("enrich", &table, move |p: &Event, row: Option<&i64>| {
            if p.1 != SENTINEL {
                return Some((*p, row.copied()));
            }
            if let Some(row) = row {
                seen.lock().unwrap().insert(p.0, *row);
            }
            None
        })
        .parallelism(2);
    let enriched = collect(&enriched, "enriched");
    run_in_process(&flow.build().unwrap(), request).unwrap();
    let expected: BTreeMap<u64, Vec<(Event, Option<i64>)>> = probes
        .iter()
        .map(|p| (*p, finals.get(&p.0).copied()))
        .fold(BTreeMap::new(), |mut keyed, pair| {
            keyed.entry(pair.0 .0).or_insert_with(Vec::new).push(pair);
            keyed
        });
    prop_assert_eq!(per_key(&enriched, |pair| pair.0 .0), expected);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Generated streams

/// Events whose times rise with disorder, some far enough behind to be late; a watermark
/// (the greatest time so far less `delay`) after some of them.
fn script() -> impl Strategy<Value = Vec<Step>> {
    let step = (
        0u64..5,
        0u64..12,
        0u64..60,
        -20i64..20,
        prop::bool::weighted(0.2),
    );
    (prop::collection::vec(step, 1..150), 0u64..20).prop_map(|(raw, delay)| {
        let (mut now, mut greatest, mut mark) = (100u64, 0u64, 0u64);
        let mut steps = Vec::new();
        for (key, advance, back, value, watermark) in raw {
            now += advance;
            let at = now - back;
            greatest = greatest.max(at);
            steps.push(Step::Tuple((key, at, value)));
            let w = greatest.saturating_sub(delay);
            if watermark && w > mark {
                mark = w;
                steps.push(Step::Watermark(w));
            }
        }
        steps
    })
}

fn params() -> impl Strategy<Value = Params> {
    (
        10u64..60,
        1u64..5,
        0u64..30,
        1u64..30,
        1u64..6,
        1u64..4,
        1usize..4,
    )
        .prop_map(
            |(size, parts, lateness, gap, count_size, count_parts, k)| Params {
                size,
                slide: (size / parts).max(1),
                lateness,
                gap,
                count_size,
                count_slide: (count_size / count_parts).max(1),
                k,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn rolling_aggregates_match_a_direct_fold_under_every_plan(
        events in prop::collection::vec((0u64..6, 0u64..1000, -50i64..50), 0..200)
    ) {
        for request in every_plan() {
            check_rolling(&events, &request)?;
        }
    }

    #[test]
    fn count_joins_match_every_pair_of_equal_keys_under_every_plan(
        left in prop::collection::vec((0u64..6, 0u64..1000, -50i64..50), 0..60),
        right in prop::collection::vec((0u64..6, 0u64..1000, -50i64..50), 0..60),
    ) {
        for request in every_plan() {
            check_count_join(&left, &right, &request)?;
        }
    }

    #[test]
    fn interval_joins_match_every_pair_within_the_interval_under_every_plan(
        left in script(),
        right in script(),
        within in 1u64..40,
    ) {
        let (left, right) = (on_time(&left), on_time(&right));
        for request in every_plan() {
            check_interval_join(&left, &right, within, &request)?;
        }
    }

    #[test]
    fn table_lookups_meet_the_last_row_of_their_key_under_every_plan(
        updates in prop::collection::vec(0u64..6, 0..80),
        probes in prop::collection::vec((0u64..8, 0u64..1000, -50i64..50), 0..80),
    ) {
        for request in every_plan() {
            check_lookup(&updates, &probes, &request)?;
        }
    }

    #[test]
    fn windows_match_a_direct_computation_under_every_plan(steps in script(), p in params()) {
        for request in every_plan() {
            check_windows(&steps, p, &request)?;
        }
    }
}
