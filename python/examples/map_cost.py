"""The cost of a Python `map` per tuple, against a direct call of the same function in a
loop: jobs of 1 and of 5 maps in a chain over the same ints, fused; the difference of their
times over 4 maps per tuple is what one map costs (the source and the sink cancel out).
Medians of --repeats runs.

    python python/examples/map_cost.py --tuples 1000000
"""

import argparse
import statistics
import time

import sluice


def increment(n: int) -> int:
    return n + 1


def job_seconds(tuples: int, maps: int) -> float:
    """How long a fused job of `maps` maps of `increment` over `tuples` ints takes."""
    flow = sluice.Dataflow(f"maps-{maps}")
    stream = flow.source("numbers", range(tuples))
    for m in range(maps):
        stream = stream.map(f"increment-{m}", increment)
    out = stream.collect("out")
    started = time.perf_counter()
    flow.run()
    seconds = time.perf_counter() - started
    assert out.items()[-1] == tuples - 1 + maps
    return seconds


def loop_seconds(tuples: int) -> float:
    """How long calling `increment` directly on `tuples` ints takes."""
    started = time.perf_counter()
    for n in range(tuples):
        increment(n)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n = args.tuples
    one = statistics.median(job_seconds(n, 1) for _ in range(args.repeats))
    five = statistics.median(job_seconds(n, 5) for _ in range(args.repeats))
    direct = statistics.median(loop_seconds(n) for _ in range(args.repeats))
    per_map = (five - one) / (4 * n) * 1e9
    per_call = direct / n * 1e9
    print(f"a Python map in a fused job: {per_map:.0f} ns a tuple")
    print(f"a direct call in a loop: {per_call:.0f} ns")
    print(f"map / direct call: {per_map / per_call:.1f}x")


if __name__ == "__main__":
    main()
