"""The dataflow API from Python: sources, Python operators, the keyed aggregates in Rust,
collect, the values a stream carries, and the errors a job raises."""

import collections
import gc
import sys

import pytest

import sluice

PLANS = ["fused", "threaded"]


def word_counts(lines, plan):
    flow = sluice.Dataflow("wordcount")
    counts = (
        flow.source("lines", lines)
        .flat_map("split", lambda line: line.lower().split())
        .key_by("word")
        .count("count")
        .collect("counts")
    )
    flow.run(plan)
    return counts


@pytest.mark.parametrize("plan", PLANS)
def test_word_counts_equal_a_python_counter(plan):
    lines = [f"The w{i % 7} W{i % 3} the" for i in range(1000)]
    expected = collections.Counter(w for line in lines for w in line.lower().split())
    assert word_counts(lines, plan).latest() == dict(expected)


@pytest.mark.parametrize("plan", PLANS)
def test_counts_and_sums_at_end_give_each_key_once_with_its_total(plan):
    lines = [f"the w{i % 7} w{i % 3}" for i in range(100)]
    flow = sluice.Dataflow("at-end")
    words = flow.source("lines", lines).flat_map("split", str.split)
    counts = words.key_by("word").count("count", at_end=True).collect("counts")
    lengths = words.key_by("first", lambda w: w[0]).sum("length", len, at_end=True).collect("l")
    flow.run(plan)
    expected = collections.Counter(w for line in lines for w in line.split())
    assert sorted(counts.items()) == sorted(expected.items())
    assert sorted(lengths.items()) == [("t", 300), ("w", 400)]


READINGS = [(f"s{i % 3}", (i * 37) % 11 - 5 + (0.5 if i % 4 == 0 else 0)) for i in range(60)]


def folded(fold):
    """Each sensor's running fold of its readings, in order: (sensor, fold so far)."""
    seen = collections.defaultdict(list)
    running = []
    for sensor, value in READINGS:
        seen[sensor].append(value)
        running.append((sensor, fold(seen[sensor])))
    return running


@pytest.mark.parametrize(
    "aggregate, fold",
    [("min", min), ("max", max), ("mean", lambda values: sum(values) / len(values))],
)
@pytest.mark.parametrize("plan", PLANS)
def test_running_and_final_least_greatest_and_mean_per_key(aggregate, fold, plan):
    flow = sluice.Dataflow("readings")
    readings = flow.source("readings", READINGS)
    running = getattr(readings.key_by("sensor", lambda r: r[0]), aggregate)("agg", 1)
    final = getattr(readings.key_by("sensor-final", lambda r: r[0]), aggregate)(
        "final", 1, at_end=True
    )
    running, final = running.collect("running"), final.collect("final-out")
    flow.run(plan)
    expected = folded(fold)
    assert running.items() == expected
    assert sorted(final.items()) == sorted(dict(expected).items())


def test_running_counts_arrive_in_order_per_key():
    counts = word_counts(["a b", "b a b"], "fused")
    assert counts.items() == [("a", 1), ("b", 1), ("b", 2), ("a", 2), ("b", 3)]


def test_a_generator_is_a_source():
    flow = sluice.Dataflow("generated")
    evens = flow.source("numbers", (n for n in range(10))).filter("even", lambda n: n % 2 == 0)
    out = evens.map("square", lambda n: n * n).collect("out")
    flow.run()
    assert out.items() == [0, 4, 16, 36, 64]


def test_every_carried_type_survives_the_trip():
    values = [None, True, False, -(2**63), 2**63 - 1, 1.5, float("inf"), "", "é" * 30, b"\x00\xff", (1, ("x", b"y"), 2.0)]
    flow = sluice.Dataflow("types")
    out = flow.source("values", values).map("same", lambda v: v).collect("out")
    flow.run()
    assert out.items() == values
    assert [type(v) for v in out.items()] == [type(v) for v in values]


@pytest.mark.parametrize("field", [1, lambda r: r[1]], ids=["item", "function"])
def test_sum_keeps_ints_and_turns_float_after_a_float(field):
    flow = sluice.Dataflow("sums")
    sums = (
        flow.source("readings", [("a", 1), ("b", 2), ("a", 3), ("b", 0.5), ("c", 2**62), ("c", 2**62)])
        .key_by("sensor", lambda r: r[0])
        .sum("total", field)
        .collect("totals")
    )
    flow.run()
    assert sums.items()[:4] == [("a", 1), ("b", 2), ("a", 4), ("b", 2.5)]
    assert sums.latest() == {"a": 4, "b": 2.5, "c": float(2**63)}
    assert type(sums.latest()["a"]) is int


def test_sum_of_a_missing_item_names_it():
    flow = sluice.Dataflow("short")
    flow.source("readings", [("a",)]).key_by("sensor", lambda r: r[0]).sum("total", 1).collect("t")
    with pytest.raises(sluice.OperatorError, match="operator 'sensor' raised IndexError") as raised:
        flow.run()
    assert "item 1" in str(raised.value.__cause__)


def test_sum_of_values_per_key():
    flow = sluice.Dataflow("sums")
    sums = (
        flow.source("readings", [("a", 1), ("b", 2), ("a", 3), ("b", 0.5)])
        .map("value", lambda r: r[1])
        .key_by("parity", lambda v: int(v) % 2)
        .sum("total")
        .collect("totals")
    )
    flow.run()
    assert sums.latest() == {1: 4, 0: 2.5}


def test_read_text_gives_lines(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("one two\r\nthree\n")
    flow = sluice.Dataflow("text")
    out = flow.read_text("lines", path).collect("out")
    flow.run()
    assert out.items() == ["one two", "three"]


def test_an_exception_names_the_operator_and_keeps_its_traceback():
    def boom(n):
        if n == 3:
            raise ValueError("three is too many")
        return n

    flow = sluice.Dataflow("failing")
    flow.source("numbers", range(10)).map("boom", boom).collect("out")
    with pytest.raises(sluice.OperatorError, match="operator 'boom' raised ValueError") as raised:
        flow.run()
    cause = raised.value.__cause__
    assert isinstance(cause, ValueError)
    assert cause.__traceback__.tb_next is not None or cause.__traceback__.tb_frame.f_code.co_name == "boom"


def test_an_exception_in_a_source_names_the_source():
    def numbers():
        yield 1
        raise RuntimeError("the feed broke")

    flow = sluice.Dataflow("failing-source")
    flow.source("feed", numbers()).collect("out")
    with pytest.raises(sluice.OperatorError, match="operator 'feed' raised RuntimeError"):
        flow.run()


def test_a_type_the_engine_cannot_carry_is_refused_naming_it():
    flow = sluice.Dataflow("lists")
    flow.source("numbers", [1]).map("listed", lambda n: [n]).collect("out")
    with pytest.raises(sluice.OperatorError, match="listed") as raised:
        flow.run()
    assert isinstance(raised.value.__cause__, TypeError)
    assert "type list cannot travel" in str(raised.value.__cause__)


def test_an_int_beyond_64_bits_is_refused():
    flow = sluice.Dataflow("big")
    flow.source("numbers", [2**64]).collect("out")
    with pytest.raises(sluice.OperatorError) as raised:
        flow.run()
    assert isinstance(raised.value.__cause__, OverflowError)


def test_a_sum_of_strings_fails_the_key_by():
    flow = sluice.Dataflow("bad-sum")
    flow.source("words", ["a"]).key_by("word").sum("total").collect("out")
    with pytest.raises(sluice.OperatorError, match="operator 'word' raised TypeError"):
        flow.run()


def test_latest_needs_pairs():
    flow = sluice.Dataflow("plain")
    out = flow.source("numbers", [1]).collect("out")
    flow.run()
    with pytest.raises(TypeError, match="items()"):
        out.latest()


def test_mistakes_are_python_errors():
    flow = sluice.Dataflow("mistakes")
    stream = flow.source("numbers", [1])
    with pytest.raises(TypeError, match="map needs a function"):
        stream.map("m", 3)
    stream.collect("same")
    stream.collect("same")
    with pytest.raises(sluice.SluiceError, match="same"):
        flow.run()
    with pytest.raises(ValueError, match="no plan 'everywhere'"):
        sluice.Dataflow("p").run("everywhere")


@pytest.mark.parametrize("plan", PLANS)
def test_replicated_operators_share_the_stream(plan):
    flow = sluice.Dataflow("replicated")
    odd = flow.source("numbers", range(100)).filter("odd", lambda n: n % 2 == 1, parallelism=2)
    out = odd.map("square", lambda n: n * n, parallelism=3).flat_map("twice", lambda n: [n, n], parallelism=2)
    collected = out.collect("out")
    flow.run(plan)
    assert sorted(collected.items()) == sorted(n * n for n in range(1, 100, 2) for _ in range(2))


@pytest.mark.parametrize("plan", PLANS)
def test_a_partitioned_source_emits_each_instances_part(plan):
    asked = []

    def part(i, n):
        asked.append((i, n))
        return (f"{i}:{k}" for k in range(i, 10, n))  # a generator of its share

    flow = sluice.Dataflow("parts")
    out = flow.partitioned_source("numbers", part, parallelism=3).collect("out")
    flow.run(plan)
    assert sorted(asked) == [(0, 3), (1, 3), (2, 3)]
    assert sorted(out.items()) == sorted(f"{k % 3}:{k}" for k in range(10))
    with pytest.raises(TypeError, match="partitioned_source needs a function"):
        flow.partitioned_source("not-a-function", [1, 2], parallelism=2)


@pytest.mark.parametrize("plan", PLANS)
@pytest.mark.parametrize("at_end", [False, True], ids=["running", "at the end"])
def test_keyed_aggregates_of_parallelism_2_keep_each_key_in_one_instance(plan, at_end):
    words = [f"w{i % 13}" for i in range(200)]
    flow = sluice.Dataflow("parallel-counts")
    keyed = flow.source("words", words).key_by("word")
    counts = keyed.count("count", at_end=at_end, parallelism=2).collect("counts", parallelism=2)
    lengths = flow.source("more", words).key_by("w", lambda w: w[1:]).sum(
        "length", len, at_end=at_end, parallelism=2
    )
    lengths = lengths.collect("lengths")
    planned = flow.plan(plan)
    assert "count[0]" in planned and "count[1]" in planned and "length[1]" in planned
    # Each count instance's sink instance, on a forward edge: in its thread under threaded too.
    assert "count[1].out[0] -> counts[1].in[0]  forward" in planned
    flow.run(plan)
    expected = collections.Counter(words)
    got = dict(counts.items()) if at_end else counts.latest()
    assert got == dict(expected)
    if at_end:  # each key once: no instance counted a key the other one counted too
        assert len(counts.items()) == len(expected)
    summed = dict(lengths.items()) if at_end else lengths.latest()
    assert summed == {w[1:]: n * len(w) for w, n in expected.items()}


def test_encode_gives_the_bytes_a_value_crosses_processes_as():
    values = [None, True, -(2**63), 1.5, "é" * 30, b"\x00", (1, ("x", b"y"))]
    for value in values:
        assert sluice.decode(sluice.encode(value)) == value
    assert sluice.encode("kalomi") == b"\x04\x06kalomi"  # the variant Str, the length, UTF-8
    with pytest.raises(TypeError):
        sluice.encode([1])
    with pytest.raises(ValueError, match="not an encoded value"):
        sluice.decode(b"\xff")


def test_a_dataflow_the_collector_frees_on_a_job_thread_is_freed_quietly(monkeypatch):
    # A dataflow in a reference cycle is freed by the cyclic collector on whichever thread
    # runs it: here the thread of another job's Python operator.
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    flow = sluice.Dataflow("cyclic")
    stream = flow.source("numbers", [1]).map("same", lambda n: n)
    keyed = stream.key_by("k")
    cycle = [flow, stream, keyed, stream.collect("out")]
    cycle.append(cycle)
    del flow, stream, keyed, cycle

    def collect_garbage(n):
        gc.collect()
        return n

    job = sluice.Dataflow("collecting")
    out = job.source("numbers", [1, 2]).map("gc", collect_garbage).collect("out")
    job.run("threaded")
    assert out.items() == [1, 2]
    assert [str(u.exc_value) for u in unraisable] == []
