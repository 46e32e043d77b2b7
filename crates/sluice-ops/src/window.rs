//! Windows over keyed streams: tumbling and sliding by count or by time, and session windows
//! by gap; by processing time or by event time.
//!
//! Every window folds its tuples into an [`Aggregate`] as they arrive; a window function that
//! needs the tuples themselves (sorting, a user function over the whole window) is an
//! aggregate whose accumulator keeps them ([`crate::aggregate::Apply`],
//! [`crate::aggregate::SortBy`]; [`crate::aggregate::TopK`] keeps only its best `k`). Sliding windows keep
//! one accumulator per *pane* (the greatest common divisor of size and slide) and merge the
//! panes of a window when it fires, so a tuple is folded once however many windows hold it.
//!
//! # Time
//!
//! Time is in nanoseconds. By processing time a tuple belongs where the wall clock is when it
//! arrives, in UTC nanoseconds since the Unix epoch ([`sluice_types::WallClock`]: read once
//! per instance and advanced by `CLOCK_MONOTONIC`, so it never jumps with the system clock),
//! windows are aligned to the epoch (a one-minute window starts on the minute) and a
//! [`Windowed`]'s `start` and `end` are times a person reads ([`sluice_types::utc_text`]
//! prints them); a window fires on a processing-time timer at its end. By event time a
//! tuple's time is what the user's function reads from it, and a window `[start, end)` fires
//! when the operator's event time (the least watermark of its upstream instances) reaches
//! `end`. A tuple is *late* when every window that would hold it has ended more than the
//! allowed lateness ago; the [`LatePolicy`] says what becomes of it. A tuple that arrives
//! after its window fired but within the allowed lateness updates the window, which fires
//! again with the new result. At the end of the stream (or a drain) every window fires.
//!
//! Windows by count are per key: every `slide` tuples of a key, the last `size` of them; at
//! the end of the stream the tuples that arrived since a key's last window make one more
//! (IBM Streams flushes a partial window on its final punctuation; nothing is lost).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sluice_graph::{
    expect_tuple, Operator, OperatorContext, OperatorError, OperatorReport, Output, Snapshot, Timer,
};
use sluice_types::{BatchRef, Tuple, TupleRef, WallClock};

use crate::aggregate::{Aggregate, Value};
use crate::keyed::{Key, KeyedState};

/// One window's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Windowed<K, V> {
    /// The key.
    pub key: K,
    /// Where the window starts: by processing time, UTC nanoseconds since the Unix epoch
    /// ([`sluice_types::utc_text`] prints it); by event time, the user's time as the event-time
    /// function reads it; for a count window, the key's sequence number of its first tuple.
    pub start: u64,
    /// Where it ends (exclusive), as `start`.
    pub end: u64,
    /// The aggregate of its tuples.
    pub value: V,
}

impl<K: Value, V: Value> Tuple for Windowed<K, V> {
    const ENCODING: sluice_types::Encoding = sluice_types::Encoding::Normal;
    fn encode(&self, out: &mut Vec<u8>) -> Result<(), sluice_types::EncodeError> {
        sluice_types::tuple_codec::encode_normal(self, out)
    }
    fn decode(bytes: &[u8]) -> Result<Self, sluice_types::DecodeError> {
        sluice_types::tuple_codec::decode_normal(bytes)
    }
}

/// Reads a tuple's event time, in nanoseconds.
pub type EventTimeFn<T> = Arc<dyn Fn(&T) -> u64 + Send + Sync>;

/// Which clock places tuples in windows.
pub enum TimeDomain<T> {
    /// The wall clock when the tuple arrives: UTC nanoseconds since the Unix epoch.
    Processing,
    /// The tuple's own time, as the function reads it.
    Event(EventTimeFn<T>),
}

impl<T> Clone for TimeDomain<T> {
    fn clone(&self) -> Self {
        match self {
            Self::Processing => Self::Processing,
            Self::Event(f) => Self::Event(f.clone()),
        }
    }
}

/// What becomes of a late tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LatePolicy {
    /// Dropped without a trace.
    Drop,
    /// Dropped and counted (`late_tuples` in the operator's report).
    #[default]
    Count,
    /// Emitted on the window operator's second output port (and counted).
    Port,
}

/// The shape of a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Every `slide` tuples of a key, its last `size` tuples (`size == slide`: tumbling).
    Count {
        /// Tuples in a window.
        size: u64,
        /// Tuples between windows.
        slide: u64,
    },
    /// Windows `[k * slide, k * slide + size)` (`size == slide`: tumbling); a sliding window
    /// that would start before time 0 starts at 0.
    Time {
        /// The window's length.
        size: Duration,
        /// Between window starts.
        slide: Duration,
    },
    /// A key's tuples closer than `gap` to each other.
    Session {
        /// The gap that closes a session.
        gap: Duration,
    },
}

/// A window specification: its shape, its clock, and what to do with late tuples.
pub struct Windows<T> {
    /// The shape.
    pub shape: Shape,
    /// The clock (ignored by count windows).
    pub time: TimeDomain<T>,
    /// How long after a window ends its tuples are still taken (event time only).
    pub allowed_lateness: Duration,
    /// What becomes of later ones.
    pub late: LatePolicy,
}

impl<T> Clone for Windows<T> {
    fn clone(&self) -> Self {
        Self {
            shape: self.shape,
            time: self.time.clone(),
            allowed_lateness: self.allowed_lateness,
            late: self.late,
        }
    }
}

impl<T> Windows<T> {
    fn with_shape(shape: Shape) -> Self {
        Self {
            shape,
            time: TimeDomain::Processing,
            allowed_lateness: Duration::ZERO,
            late: LatePolicy::default(),
        }
    }

    /// Tumbling windows of `size` tuples per key.
    pub fn tumbling_count(size: u64) -> Self {
        Self::with_shape(Shape::Count { size, slide: size })
    }

    /// Every `slide` tuples of a key, its last `size` tuples.
    pub fn sliding_count(size: u64, slide: u64) -> Self {
        Self::with_shape(Shape::Count { size, slide })
    }

    /// Tumbling windows of `size` (processing time unless [`Windows::event_time`]).
    pub fn tumbling(size: Duration) -> Self {
        Self::with_shape(Shape::Time { size, slide: size })
    }

    /// Windows of `size` starting every `slide`.
    pub fn sliding(size: Duration, slide: Duration) -> Self {
        Self::with_shape(Shape::Time { size, slide })
    }

    /// Sessions closed by a gap of `gap` between a key's tuples.
    pub fn session(gap: Duration) -> Self {
        Self::with_shape(Shape::Session { gap })
    }

    /// Places tuples by the event time `time` reads from each (nanoseconds).
    pub fn event_time(mut self, time: impl Fn(&T) -> u64 + Send + Sync + 'static) -> Self {
        self.time = TimeDomain::Event(Arc::new(time));
        self
    }

    /// Takes tuples up to `lateness` after their window ended (event time).
    pub fn allowed_lateness(mut self, lateness: Duration) -> Self {
        self.allowed_lateness = lateness;
        self
    }

    /// What becomes of tuples later than that.
    pub fn late(mut self, policy: LatePolicy) -> Self {
        self.late = policy;
        self
    }

    /// Why the specification cannot work, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        match self.shape {
            Shape::Count { size, slide } => {
                if size == 0 || slide == 0 {
                    return Err(format!(
                        "a count window needs a size and a slide of at least 1 tuple, not {size} and {slide}"
                    ));
                }
                if slide > size {
                    return Err(format!(
                        "a slide of {slide} tuples is longer than the window of {size}: tuples would fall between windows"
                    ));
                }
            }
            Shape::Time { size, slide } => {
                if size.is_zero() || slide.is_zero() {
                    return Err(format!(
                        "a time window needs a size and a slide above 0, not {size:?} and {slide:?}"
                    ));
                }
                if slide > size {
                    return Err(format!(
                        "a slide of {slide:?} is longer than the window of {size:?}: tuples would fall between windows"
                    ));
                }
            }
            Shape::Session { gap } => {
                if gap.is_zero() {
                    return Err("a session window needs a gap above 0".into());
                }
            }
        }
        if matches!(self.time, TimeDomain::Processing) && !self.allowed_lateness.is_zero() {
            return Err("allowed lateness applies to event time only".into());
        }
        Ok(())
    }

    /// Whether late tuples leave on a second output port.
    pub fn has_late_port(&self) -> bool {
        self.late == LatePolicy::Port
    }
}

/// `d` in nanoseconds, saturating at `u64::MAX` (584 years).
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// A key's state in a window operator.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum KeyWindows<A> {
    /// Count windows: tuples seen, the accumulators of the last full panes (oldest first), of
    /// the pane being filled, and the count at the last window emitted.
    Count {
        seen: u64,
        panes: VecDeque<A>,
        filling: A,
        emitted_at: u64,
    },
    /// Time windows: each pane's start and accumulator, in time order.
    Panes(VecDeque<(u64, A)>),
    /// Sessions in time order: start, end (the last tuple's time plus the gap), accumulator,
    /// and whether the session has fired since it last changed.
    Sessions(Vec<Session<A>>),
}

/// One session of a key.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Session<A> {
    start: u64,
    end: u64,
    acc: A,
    fired: bool,
}

/// The window operator: windows of a keyed stream, each folded by an aggregate; see the
/// module documentation for when windows fire. Its report counts `late_tuples`.
pub struct WindowOperator<T, K, F, A: Aggregate<T>> {
    key: F,
    windows: Windows<T>,
    aggregate: A,
    state: KeyedState<K, KeyWindows<A::Acc>>,
    /// The instance's event time, or the processing time (UTC) of the last timer.
    now: u64,
    /// Processing time: the wall clock, and its conversion to the monotonic times timers are
    /// set in.
    wall: WallClock,
    results: Vec<Windowed<K, A::Out>>,
    late: Vec<T>,
    late_count: u64,
}

impl<T, K, F, A> WindowOperator<T, K, F, A>
where
    T: Tuple,
    K: Key,
    A: Aggregate<T>,
    F: Fn(&T) -> &K,
{
    /// Windows of `windows` over the keys `key` reads, aggregated by `aggregate`.
    pub fn new(key: F, windows: Windows<T>, aggregate: A) -> Self {
        Self {
            key,
            windows,
            aggregate,
            state: KeyedState::new(),
            now: 0,
            wall: WallClock::new(),
            results: Vec::new(),
            late: Vec::new(),
            late_count: 0,
        }
    }

    fn by_event_time(&self) -> bool {
        matches!(self.windows.time, TimeDomain::Event(_))
    }

    fn lateness(&self) -> u64 {
        nanos(self.windows.allowed_lateness)
    }

    fn timer(&self, end: u64) -> Timer {
        if self.by_event_time() {
            Timer::Event(end)
        } else {
            Timer::Processing(self.wall.to_monotonic(end))
        }
    }

    fn take(&mut self, tuple: &T, out: &mut Output<'_>) {
        let key = (self.key)(tuple);
        let at = match &self.windows.time {
            TimeDomain::Processing => self.wall.now(),
            TimeDomain::Event(time) => time(tuple),
        };
        match self.windows.shape {
            Shape::Count { size, slide } => self.take_counted(key, tuple, size, slide),
            Shape::Time { size, slide } => {
                let (size, slide) = (nanos(size), nanos(slide));
                if !self.is_late(at - at % slide + size, tuple) {
                    self.take_timed(key, tuple, at, size, slide, out);
                }
            }
            Shape::Session { gap } => {
                let end = at.saturating_add(nanos(gap));
                if !self.is_late(end, tuple) {
                    self.take_session(key, tuple, at, end, out);
                }
            }
        }
    }

    /// Whether a tuple whose last window ends at `end` is too late, handling it if so.
    fn is_late(&mut self, end: u64, tuple: &T) -> bool {
        if !self.by_event_time() || end.saturating_add(self.lateness()) > self.now {
            return false;
        }
        match self.windows.late {
            LatePolicy::Drop => {}
            LatePolicy::Count => self.late_count += 1,
            LatePolicy::Port => {
                self.late_count += 1;
                self.late.push(tuple.clone());
            }
        }
        true
    }

    fn take_counted(&mut self, key: &K, tuple: &T, size: u64, slide: u64) {
        let (aggregate, results) = (&self.aggregate, &mut self.results);
        let pane = panes_of(size, slide);
        self.state.update(
            key,
            || KeyWindows::Count {
                seen: 0,
                panes: VecDeque::new(),
                filling: aggregate.init(),
                emitted_at: 0,
            },
            |windows| {
                let KeyWindows::Count {
                    seen,
                    panes,
                    filling,
                    emitted_at,
                } = windows
                else {
                    return;
                };
                aggregate.add(filling, tuple);
                *seen += 1;
                if *seen % pane == 0 {
                    panes.push_back(std::mem::replace(filling, aggregate.init()));
                    if panes.len() as u64 > size / pane {
                        panes.pop_front();
                    }
                }
                if *seen % slide == 0 {
                    *emitted_at = *seen;
                    results.push(Windowed {
                        key: key.clone(),
                        start: seen.saturating_sub(size),
                        end: *seen,
                        value: aggregate.result(&merge_all(aggregate, panes.iter())),
                    });
                }
            },
        );
    }

    fn take_timed(
        &mut self,
        key: &K,
        tuple: &T,
        at: u64,
        size: u64,
        slide: u64,
        out: &mut Output<'_>,
    ) {
        let pane = panes_of(size, slide);
        let pane_start = at - at % pane;
        let aggregate = &self.aggregate;
        self.state.update(
            key,
            || KeyWindows::Panes(VecDeque::new()),
            |windows| {
                if let KeyWindows::Panes(panes) = windows {
                    let i = panes.partition_point(|(start, _)| *start < pane_start);
                    if panes.get(i).is_none_or(|(start, _)| *start != pane_start) {
                        panes.insert(i, (pane_start, aggregate.init()));
                    }
                    aggregate.add(&mut panes[i].1, tuple);
                }
            },
        );
        // The windows holding `at` end at `k * slide + size` in (at, at + size]; one that has
        // already fired fires again now if it is within the allowed lateness (the tuple is
        // late for it, not too late). One ended longer ago keeps the result it fired with: its
        // older panes may be gone, and it must not fire again with part of its tuples.
        let mut end = at - at % slide + size;
        while end > at {
            if end <= self.now {
                if end.saturating_add(self.lateness()) > self.now {
                    self.fire_time_window(key, end.saturating_sub(size), end);
                }
            } else {
                out.set_timer(self.timer(end));
            }
            end = match end.checked_sub(slide) {
                Some(e) => e,
                None => break,
            };
        }
    }

    /// Emits the window `[start, end)` of `key`, if it holds any tuple.
    fn fire_time_window(&mut self, key: &K, start: u64, end: u64) {
        let Some(KeyWindows::Panes(panes)) = self.state.get(key) else {
            return;
        };
        let mut inside = panes
            .iter()
            .filter(|(s, _)| (start..end).contains(s))
            .peekable();
        if inside.peek().is_none() {
            return;
        }
        let acc = merge_all(&self.aggregate, inside.map(|(_, pane)| pane));
        self.results.push(Windowed {
            key: key.clone(),
            start,
            end,
            value: self.aggregate.result(&acc),
        });
    }

    fn take_session(&mut self, key: &K, tuple: &T, at: u64, end: u64, out: &mut Output<'_>) {
        let aggregate = &self.aggregate;
        let merged_end = self.state.update(
            key,
            || KeyWindows::Sessions(Vec::new()),
            |windows| {
                let KeyWindows::Sessions(sessions) = windows else {
                    return end;
                };
                let mut joined = Session {
                    start: at,
                    end,
                    acc: aggregate.init(),
                    fired: false,
                };
                aggregate.add(&mut joined.acc, tuple);
                // Every session overlapping [at, end) merges into one, in time order.
                let mut kept = Vec::with_capacity(sessions.len() + 1);
                for mut session in sessions.drain(..) {
                    if session.start < joined.end && at < session.end {
                        joined.start = joined.start.min(session.start);
                        joined.end = joined.end.max(session.end);
                        if session.start <= at {
                            aggregate.merge(&mut session.acc, &joined.acc);
                            joined.acc = session.acc;
                        } else {
                            aggregate.merge(&mut joined.acc, &session.acc);
                        }
                    } else {
                        kept.push(session);
                    }
                }
                let merged_end = joined.end;
                let i = kept.partition_point(|s| s.start < joined.start);
                kept.insert(i, joined);
                *sessions = kept;
                merged_end
            },
        );
        if merged_end <= self.now {
            self.fire_sessions(key);
        } else {
            out.set_timer(self.timer(merged_end));
        }
    }

    /// Emits every session of `key` that has ended and not fired since it last changed.
    fn fire_sessions(&mut self, key: &K) {
        let (now, aggregate, results) = (self.now, &self.aggregate, &mut self.results);
        if let Some(KeyWindows::Sessions(sessions)) = self.state.get_mut(key) {
            for session in sessions.iter_mut().filter(|s| s.end <= now && !s.fired) {
                session.fired = true;
                results.push(Windowed {
                    key: key.clone(),
                    start: session.start,
                    end: session.end,
                    value: aggregate.result(&session.acc),
                });
            }
        }
    }

    /// Time reached `now`: fires the windows that ended by then and drops the state no
    /// window can need any more (ended longer ago than the allowed lateness).
    fn advance(&mut self, now: u64) {
        if now <= self.now {
            return;
        }
        let before = self.now;
        self.now = now;
        let keys: Vec<K> = self.state.iter().map(|(k, _)| k.clone()).collect();
        let horizon = now.saturating_sub(self.lateness());
        match self.windows.shape {
            Shape::Count { .. } => {}
            Shape::Time { size, slide } => {
                let (size, slide) = (nanos(size), nanos(slide));
                for key in &keys {
                    for end in self.ends_between(key, before, now, size, slide) {
                        self.fire_time_window(key, end.saturating_sub(size), end);
                    }
                }
                self.state.retain(|_, windows| {
                    let KeyWindows::Panes(panes) = windows else {
                        return true;
                    };
                    // A pane's last window ends at most `size` after the pane starts.
                    panes.retain(|(start, _)| start - start % slide + size > horizon);
                    !panes.is_empty()
                });
            }
            Shape::Session { .. } => {
                for key in &keys {
                    self.fire_sessions(key);
                }
                self.state.retain(|_, windows| {
                    let KeyWindows::Sessions(sessions) = windows else {
                        return true;
                    };
                    sessions.retain(|s| s.end > horizon || !s.fired);
                    !sessions.is_empty()
                });
            }
        }
    }

    /// The ends in `(after, upto]` of the windows that hold a pane of `key`, in order.
    fn ends_between(&self, key: &K, after: u64, upto: u64, size: u64, slide: u64) -> Vec<u64> {
        let Some(KeyWindows::Panes(panes)) = self.state.get(key) else {
            return Vec::new();
        };
        let mut ends: Vec<u64> = Vec::new();
        for (start, _) in panes {
            let mut end = start - start % slide + size;
            while end > *start {
                if end > after && end <= upto && ends.last() != Some(&end) {
                    ends.push(end);
                }
                end = match end.checked_sub(slide) {
                    Some(e) => e,
                    None => break,
                };
            }
        }
        ends.sort_unstable();
        ends.dedup();
        ends
    }

    /// The end of the stream: every window still open fires (count windows with the tuples
    /// since their key's last window).
    fn flush(&mut self) {
        match self.windows.shape {
            Shape::Count { size, slide } => {
                let (aggregate, results) = (&self.aggregate, &mut self.results);
                for (key, windows) in self.state.iter() {
                    if let KeyWindows::Count {
                        seen,
                        panes,
                        filling,
                        emitted_at,
                    } = windows
                    {
                        if seen > emitted_at {
                            // The last `size` tuples: the pane being filled and as many whole
                            // panes before it as fit.
                            let pane = panes_of(size, slide);
                            let filled = seen % pane;
                            let keep = ((size - filled) / pane) as usize;
                            let whole = panes.iter().skip(panes.len().saturating_sub(keep));
                            // The window starts at its first tuple: fewer than `size` back
                            // when the last pane is partial.
                            let held = (whole.len() as u64 * pane + filled).min(*seen);
                            let partial = (filled > 0).then_some(filling);
                            results.push(Windowed {
                                key: key.clone(),
                                start: seen - held,
                                end: *seen,
                                value: aggregate
                                    .result(&merge_all(aggregate, whole.chain(partial))),
                            });
                        }
                    }
                }
                self.state = KeyedState::new();
            }
            _ => self.advance(u64::MAX),
        }
    }

    fn emit(&mut self, out: &mut Output<'_>) -> Result<(), OperatorError> {
        out.emit_batch(0, &mut self.results)?;
        if !self.late.is_empty() {
            out.emit_batch(1, &mut self.late)?;
        }
        Ok(())
    }
}

/// The accumulators `accs` merged into one.
fn merge_all<'a, T, A: Aggregate<T>>(
    aggregate: &A,
    accs: impl Iterator<Item = &'a A::Acc>,
) -> A::Acc {
    let mut acc = aggregate.init();
    accs.for_each(|a| aggregate.merge(&mut acc, a));
    acc
}

/// The pane of a count or time window: what size and slide are both made of.
fn panes_of(size: u64, slide: u64) -> u64 {
    gcd(size, slide)
}

impl<T, K, F, A> Operator for WindowOperator<T, K, F, A>
where
    T: Tuple,
    K: Key,
    A: Aggregate<T>,
    Windowed<K, A::Out>: Tuple,
    F: Fn(&T) -> &K + Send,
{
    fn start(&mut self, _ctx: &OperatorContext) -> Result<(), OperatorError> {
        self.windows.check().map_err(OperatorError::Failed)
    }

    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.take(expect_tuple::<T>(port, tuple)?, out);
        self.emit(out)
    }

    fn process_batch(
        &mut self,
        port: usize,
        batch: BatchRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        for tuple in batch.iter() {
            self.take(expect_tuple::<T>(port, tuple)?, out);
        }
        self.emit(out)
    }

    fn timer(&mut self, timer: Timer, out: &mut Output<'_>) -> Result<(), OperatorError> {
        let now = match timer {
            Timer::Event(now) => now,
            Timer::Processing(monotonic) => self.wall.from_monotonic(monotonic),
        };
        self.advance(now);
        self.emit(out)
    }

    fn watermark(&mut self, watermark: u64, out: &mut Output<'_>) -> Result<(), OperatorError> {
        if self.by_event_time() {
            self.advance(watermark);
            self.emit(out)?;
        }
        out.watermark(watermark)
    }

    fn finish(&mut self, out: &mut Output<'_>) -> Result<(), OperatorError> {
        self.flush();
        self.emit(out)
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        let mut report = OperatorReport::default();
        report
            .counters
            .insert("late_tuples".into(), self.late_count);
        Ok(report)
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Ok(Snapshot {
            operator: self.now.to_le_bytes().to_vec(),
            keyed: self.state.snapshot()?,
        })
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        if let Ok(now) = <[u8; 8]>::try_from(snapshot.operator.as_slice()) {
            self.now = u64::from_le_bytes(now);
        }
        self.state.restore(&snapshot.keyed)
    }
}
