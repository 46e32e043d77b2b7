"""The cost of the encoding Python values cross threads, processes and hosts in (postcard, by
`sluice.encode` and `sluice.decode`) against `pickle.dumps` and `pickle.loads`, per value and
in bytes, for WordCount's tuples: a word, and a `(word, count)` pair. Medians of --repeats
timings of --values calls each, in the same run.

    python python/examples/encoding_cost.py --values 200000
"""

import argparse
import pickle
import statistics
import time

import sluice

VALUES = {"word": "kalomi", "(word, count)": ("kalomi", 1234)}


def ns_per_call(f, value, calls: int, repeats: int) -> float:
    """The median time of one `f(value)` over `repeats` timings of `calls` calls, in ns."""
    timings = []
    for _ in range(repeats):
        started = time.perf_counter_ns()
        for _ in range(calls):
            f(value)
        timings.append((time.perf_counter_ns() - started) / calls)
    return statistics.median(timings)


def costs(calls: int, repeats: int) -> list[tuple[str, str, int, float, float]]:
    """For each value and encoding: its size in bytes and the ns of an encode and a decode,
    having checked that decoding gives the value back."""
    rows = []
    for label, value in VALUES.items():
        for name, dumps, loads in [
            ("sluice", sluice.encode, sluice.decode),
            ("pickle", pickle.dumps, pickle.loads),
        ]:
            encoded = dumps(value)
            assert loads(encoded) == value, f"{name} did not give {value!r} back"
            out = ns_per_call(dumps, value, calls, repeats)
            back = ns_per_call(loads, encoded, calls, repeats)
            rows.append((label, name, len(encoded), out, back))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    print("| value | encoding | bytes | encode ns | decode ns | round trip ns |")
    print("|---|---|---|---|---|---|")
    for label, name, size, out, back in costs(args.values, args.repeats):
        print(f"| {label} | {name} | {size} | {out:.0f} | {back:.0f} | {out + back:.0f} |")


if __name__ == "__main__":
    main()
