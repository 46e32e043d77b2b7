"""End-to-end latency of a Python job at a set rate: a source yields tuples on a schedule
(--rate per second, each stamped with the time it was due), a Python map parses them, a
Python filter keeps the valid ones, and a last Python map takes each tuple's latency (the clock
when it reaches it less the time it was due, CLOCK_MONOTONIC, which every process of the
machine shares); p50 and p99 of those, the first second (the warm-up) left out.

    python python/examples/latency.py --rate 100000 --seconds 10 --plan fused
    python python/examples/latency.py --rate 100000 --seconds 10 --plan processes

The latency includes the source's batching: the source hands the engine up to 256 items of its
iterable at a time, so at 100,000 tuples/s a tuple may wait up to 2.56 ms for its batch.
"""

import argparse
import time

import sluice

WARM_UP_SECONDS = 1.0


def paced(rate: int, count: int):
    """`count` tuples `(i, due)`, each yielded when it is due (`rate` per second from now,
    `due` in CLOCK_MONOTONIC nanoseconds): a busy wait, as a sleep is too coarse for 10 µs."""
    period = 1e9 / rate
    start = time.monotonic_ns()
    for i in range(count):
        due = start + int(i * period)
        while time.monotonic_ns() < due:
            pass
        yield (i, due)


def parse(event):
    i, due = event
    return (f"key{i % 100}", due)


def valid(parsed):
    return parsed[1] > 0


def latency_ns(parsed):
    return time.monotonic_ns() - parsed[1]


def measure(rate: int, seconds: float, plan: str = "fused", processes=None):
    """Runs the job for `seconds` at `rate` tuples/s; returns (p50 µs, p99 µs, tuples
    measured)."""
    count = int(rate * seconds)
    flow = sluice.Dataflow("latency")
    latencies = (
        flow.source("events", paced(rate, count))
        .map("parse", parse)
        .filter("valid", valid)
        .map("latency", latency_ns)
        .collect("latencies")
    )
    flow.run(plan, processes=processes)
    measured = sorted(latencies.items()[int(rate * WARM_UP_SECONDS) :])
    assert len(latencies.items()) == count, "every tuple reaches the end"

    def percentile(p):
        return measured[min(len(measured) - 1, int(p * len(measured)))] / 1e3

    return percentile(0.50), percentile(0.99), len(measured)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--plan", default="fused", choices=["fused", "threaded", "processes"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for _ in range(args.repeats):
        p50, p99, n = measure(args.rate, args.seconds, args.plan)
        if n == 0:
            raise SystemExit("--seconds must be longer than the one-second warm-up")
        print(f"{args.plan}: {args.rate} tuples/s, {n} measured: p50 {p50:.0f} µs, p99 {p99:.0f} µs")


if __name__ == "__main__":
    main()
