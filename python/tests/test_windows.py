"""Windows and joins from Python: the engine's Rust window and join operators on the values a
stream carries, by processing time and by event time."""

import collections
import random

import pytest

import sluice

EVENTS = [(f"u{i % 3}", i * 0.7, i % 5) for i in range(100)]  # (user, time in seconds, amount)


def windowed(build, plan="fused"):
    flow = sluice.Dataflow("windows")
    keyed = flow.source("events", EVENTS).key_by("user", lambda e: e[0], time=lambda e: e[1])
    results = build(keyed).collect("out")
    flow.run(plan)
    return results.items()


def gathered_windows(size, slide):
    """What windows of `size` seconds every `slide` hold, computed in Python: (key, start,
    end) -> the amounts of their events in order (a window that would start before 0 starts
    at 0)."""
    gathered = collections.defaultdict(list)
    for user, t, amount in EVENTS:
        k = int(t // slide)
        while k * slide + size > max(t, 0):
            gathered[(user, float(max(k * slide, 0)), float(k * slide + size))].append(amount)
            k -= 1
    return gathered


def expected_windows(size, slide, field):
    """(key, start, end) -> the sum of `field` over each window's amounts."""
    return {w: sum(map(field, amounts)) for w, amounts in gathered_windows(size, slide).items()}


@pytest.mark.parametrize("plan", ["fused", "threaded"])
def test_tumbling_event_time_windows_count_each_key(plan):
    results = windowed(lambda keyed: keyed.window(10).count("per-10s"), plan)
    assert {(k, s, e): n for k, s, e, n in results} == expected_windows(10, 10, lambda a: 1)
    assert len(results) == len(expected_windows(10, 10, lambda a: 1))  # each window once


def test_sliding_event_time_windows_sum_a_field():
    results = windowed(lambda keyed: keyed.window(10, slide=5).sum("amounts", 2))
    assert {(k, s, e): total for k, s, e, total in results} == expected_windows(
        10, 5, lambda a: a
    )


@pytest.mark.parametrize(
    "aggregate, expected",
    [
        ("min", min),
        ("max", max),
        ("mean", lambda amounts: sum(amounts) / len(amounts)),
        ("values", tuple),
    ],
)
def test_windows_take_the_least_greatest_mean_and_every_value(aggregate, expected):
    results = windowed(lambda keyed: getattr(keyed.window(10, slide=5), aggregate)("agg", 2))
    assert {(k, s, e): value for k, s, e, value in results} == {
        w: expected(amounts) for w, amounts in gathered_windows(10, 5).items()
    }


def test_out_of_order_events_within_the_delay_are_counted():
    shuffled = EVENTS[:]
    random.Random(7).shuffle(shuffled)
    flow = sluice.Dataflow("out-of-order")
    keyed = flow.source("events", shuffled).key_by(
        "user", lambda e: e[0], time=lambda e: e[1], max_delay=100.0
    )
    results = keyed.window(10).count("per-10s").collect("out")
    flow.run()
    counted = {(k, s, e): n for k, s, e, n in results.items()}
    assert counted == expected_windows(10, 10, lambda a: 1)


def test_processing_time_windows_hold_every_tuple_once():
    flow = sluice.Dataflow("processing-time")
    words = ["a", "b", "a", "c", "a"] * 20
    results = flow.source("words", words).key_by("word").window(3600).count("hourly").collect("out")
    flow.run()
    totals = collections.Counter()
    for key, start, end, n in results.items():
        assert end - start == 3600 and start % 3600 == 0
        totals[key] += n
    assert totals == collections.Counter(words)


def expected_count_windows(size, slide, field):
    """What windows of `size` tuples a key every `slide` hold, computed in Python: (key,
    start, end) -> the fold of `field` over them, the tuples after a key's last full window
    making one more, cut at its last tuple."""
    by_key = collections.defaultdict(list)
    for user, _, amount in EVENTS:
        by_key[user].append(amount)
    folded = {}
    for user, amounts in by_key.items():
        end = slide
        while end - slide < len(amounts):
            start, cut = max(end - size, 0), min(end, len(amounts))
            folded[(user, start, cut)] = sum(field(a) for a in amounts[start:cut])
            end += slide
    return folded


@pytest.mark.parametrize("size, slide", [(3, None), (4, 2), (5, 1)])
def test_count_windows_fold_each_keys_last_tuples(size, slide):
    results = windowed(lambda keyed: keyed.count_window(size, slide).sum("by-count", 2))
    assert {(k, s, e): total for k, s, e, total in results} == expected_count_windows(
        size, slide or size, lambda a: a
    )
    assert len(results) == len(expected_count_windows(size, slide or size, lambda a: a))


def test_event_time_sessions_close_on_a_gap():
    events = [("a", 0.0), ("a", 1.0), ("a", 2.0), ("a", 10.0), ("a", 11.0), ("a", 30.0), ("b", 5.0)]
    flow = sluice.Dataflow("sessions")
    keyed = flow.source("events", events).key_by("user", lambda e: e[0], time=lambda e: e[1])
    sessions = keyed.session(5.0).count("sessions").collect("out")
    flow.run()
    assert sorted(sessions.items()) == [
        ("a", 0.0, 7.0, 3),
        ("a", 10.0, 16.0, 2),
        ("a", 30.0, 35.0, 1),
        ("b", 5.0, 10.0, 1),
    ]


def test_processing_time_sessions_hold_every_tuple_once():
    flow = sluice.Dataflow("processing-sessions")
    words = ["a", "b", "a", "c", "a"] * 20
    sessions = flow.source("words", words).key_by("word").session(3600).count("s").collect("out")
    flow.run()
    assert collections.Counter({k: n for k, _, _, n in sessions.items()}) == collections.Counter(
        words
    )


def test_an_event_time_join_pairs_what_is_close_in_time():
    clicks = [("u1", 1.0, "c1"), ("u2", 2.0, "c2"), ("u1", 9.0, "c3")]
    buys = [("u1", 2.5, "b1"), ("u2", 8.0, "b2"), ("u1", 10.0, "b3")]
    flow = sluice.Dataflow("event-join")
    by_time = dict(key=lambda e: e[0], time=lambda e: e[1])
    left = flow.source("clicks", clicks).key_by("click-user", **by_time)
    right = flow.source("buys", buys).key_by("buy-user", **by_time)
    joined = left.join("joined", right, within=2.0).collect("out")
    flow.run()
    expected = [
        (c[0], c, b) for c in clicks for b in buys if c[0] == b[0] and abs(c[1] - b[1]) <= 2.0
    ]
    assert sorted(joined.items()) == sorted(expected)
    assert len(expected) == 2


def test_a_join_by_arrival_pairs_every_tuple_of_a_key():
    flow = sluice.Dataflow("arrival-join")
    left = flow.source("left", [("a", 1), ("b", 2), ("a", 3)]).key_by("lk", lambda t: t[0])
    right = flow.source("right", [("a", "x"), ("c", "y")]).key_by("rk", lambda t: t[0])
    joined = left.join("joined", right, within=3600.0).collect("out")
    flow.run()
    assert sorted(joined.items()) == [("a", ("a", 1), ("a", "x")), ("a", ("a", 3), ("a", "x"))]


def test_a_join_of_a_timed_and_an_untimed_stream_is_refused():
    flow = sluice.Dataflow("mixed")
    left = flow.source("left", [1]).key_by("lk", time=float)
    right = flow.source("right", [1]).key_by("rk")
    with pytest.raises(ValueError, match="both keyed streams need event times"):
        left.join("joined", right, within=1.0)


def test_bad_window_sizes_and_event_times_are_refused():
    keyed = sluice.Dataflow("bad").source("numbers", [1]).key_by("k")
    with pytest.raises(ValueError, match="size is seconds from 0, not -1"):
        keyed.window(-1)
    with pytest.raises(ValueError, match="a time window needs a size and a slide above 0"):
        keyed.window(0)
    with pytest.raises(ValueError, match="size is a number of tuples from 1, not -1"):
        keyed.count_window(-1)
    with pytest.raises(ValueError, match="a count window needs a size and a slide of at least 1"):
        keyed.count_window(0)
    with pytest.raises(ValueError, match="a slide of 3 tuples is longer than the window of 2"):
        keyed.count_window(2, slide=3)
    with pytest.raises(ValueError, match="a session window needs a gap above 0"):
        keyed.session(0)
    flow = sluice.Dataflow("negative-time")
    flow.source("numbers", [-5]).key_by("k", time=float).window(1).count("c").collect("out")
    with pytest.raises(sluice.OperatorError, match="an event time is seconds from 0"):
        flow.run()


def test_a_keyed_stream_feeds_a_running_and_a_windowed_count():
    flow = sluice.Dataflow("one-key-by")
    keyed = flow.source("words", ["a", "b", "a"]).key_by("word")
    running = keyed.count("running").collect("running-out")
    windowed = keyed.window(3600).count("hourly").collect("hourly-out")
    plan = flow.plan()
    # The running count reads the words as their own keys; the window reads the key-by's pairs.
    assert "words.out[0] -> running.in[0]  key-by" in plan
    assert "word.out[0] -> hourly.in[0]  key-by" in plan
    flow.run()
    assert running.latest() == {"a": 2, "b": 1}
    assert sum(n for _, _, _, n in windowed.items()) == 3


def test_a_second_operator_reading_another_field_names_the_key_by():
    flow = sluice.Dataflow("two-fields")
    keyed = flow.source("pairs", [("a", 1)]).key_by("word", lambda p: p[0])
    keyed.sum("total", 1)
    with pytest.raises(sluice.SluiceError, match="key-by 'word' already emits item 1 of the tuple"):
        keyed.count("count")
