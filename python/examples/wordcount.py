"""WordCount from Python: sentences of 10 words drawn from 1,000 are split, trimmed and
lowercased by a Python function, and the words counted per word by Sluice's keyed count (in
Rust). With --compare, a plain Python loop counting in a dict does the same work in the same
run, taking turns with the job, and both speeds are printed (medians of --repeats runs,
generation included in both) with the median of the turns' ratios, and the CPU time each
took (medians; the job's in all its processes); --bytewax does the same beside Bytewax.

With `--plan processes --processes 2` the job runs in two processes, each making half the
sentences (a `partitioned_source`, each half with a seed of its own: the loop counts the same
two halves), splitting them in its own interpreter and counting the words whose hash deals
them to it. Each run of the job starts its processes anew, and its time includes their
start-up (an interpreter each, importing the package and running this script again to build
the job: about 0.06 s of CPU and wall time in all); run it on a million sentences or more
(`--sentences 1000000`), where the start-up is about 1% of the time, rather than measuring a
steady rate that leaves it out.

    python python/examples/wordcount.py --sentences 100000 --compare
    python python/examples/wordcount.py --sentences 1000000 --plan processes --processes 2 --compare
    python python/examples/wordcount.py --at-end --compare
"""

import argparse
import random
import resource
import statistics
import string
import time
from typing import Iterator

import sluice

SYLLABLES = ["ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "va", "ze", "bo", "du", "fi", "ga", "he", "ju"]


def vocabulary(size: int) -> list[str]:
    """`size` distinct made-up words, capitalised or punctuated here and there."""
    words = []
    for i in range(size):
        word, n = "", i
        while True:
            word += SYLLABLES[n % 16]
            n //= 16
            if n == 0:
                break
        words.append(word.capitalize() + "," if i % 7 == 0 else word)
    return words


def sentences(count: int, words_per_sentence: int = 10, seed: int = 1) -> Iterator[str]:
    """`count` sentences of `words_per_sentence` words from a vocabulary of 1,000."""
    words = vocabulary(1000)
    pick = random.Random(seed).choices
    for _ in range(count):
        yield " ".join(pick(words, k=words_per_sentence))


def part(count: int, parts: int, i: int) -> Iterator[str]:
    """Part `i` of `parts` of the input of `count` sentences: its share of them (the first
    parts one more where they do not divide evenly), drawn with a seed of its own. One part
    is `sentences(count)`."""
    return sentences(count // parts + (i < count % parts), seed=1 + i)


def all_parts(count: int, parts: int) -> Iterator[str]:
    """The input of `count` sentences in `parts` parts, one part after the other."""
    for i in range(parts):
        yield from part(count, parts, i)


def words(sentence: str) -> list[str]:
    """The words of a sentence: split on whitespace, punctuation trimmed, lowercased."""
    return [w for w in (t.strip(string.punctuation).lower() for t in sentence.split()) if w]


def count_with_sluice(
    count: int,
    plan: str = "fused",
    processes: int | None = None,
    at_end: bool = False,
    parts: int | None = None,
) -> dict[str, int]:
    """Counts the words of `count` sentences in `parts` parts (`all_parts`) with a Sluice
    job whose source, split, count and sink run as `parts` instances, instance i making and
    splitting part i, counting the words whose hash deals them to it and keeping their
    counts; with `processes`
    (`parts` by default, and `parts` is `processes` or 1 by default), in that many processes,
    instance i in process i. The job's running count emits every word's count so far, whose
    last per word the collection's `latest()` reads; with `at_end` it emits each word's count
    once, at the end (as Bytewax's `count_final`)."""
    parts = parts or processes or 1
    flow = sluice.Dataflow("wordcount")
    counts = (
        flow.partitioned_source("sentences", lambda i, n: part(count, n, i), parallelism=parts)
        .flat_map("split", words, parallelism=parts)
        .key_by("word")
        .count("count", at_end=at_end, parallelism=parts)
        .collect("counts", parallelism=parts)
    )
    flow.run(plan, processes=processes)
    return dict(counts.items()) if at_end else counts.latest()


def count_with_a_loop(count: int, parts: int = 1) -> dict[str, int]:
    """Counts the words of `count` sentences in `parts` parts in a plain Python loop and a
    dict."""
    counts: dict[str, int] = {}
    for sentence in all_parts(count, parts):
        for word in words(sentence):
            counts[word] = counts.get(word, 0) + 1
    return counts


def count_with_bytewax(count: int, parts: int = 1) -> dict[str, int]:
    """Counts the words of `count` sentences in `parts` parts with Bytewax (`pip install
    bytewax==0.21.1`), the same generator and split, Bytewax's final count per word, run by
    `run_main` (one worker)."""
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("wordcount")
    sentences_in = op.input("sentences", flow, TestingSource(all_parts(count, parts)))
    split = op.flat_map("split", sentences_in, words)
    counted: list[tuple[str, int]] = []
    op.output("counts", op.count_final("count", split, lambda word: word), TestingSink(counted))
    run_main(flow)
    return dict(counted)


def cpu_seconds() -> float:
    """The CPU time (user and system) of this process and of its children that ended: a
    job's PE processes under the processes plan."""
    used = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in used)


def timed(count_words, count: int) -> tuple[float, float, dict[str, int]]:
    """The speed of one run of `count_words(count)`, words/s, its CPU time (s) and what it
    counted."""
    started, cpu = time.perf_counter(), cpu_seconds()
    counted = count_words(count)
    elapsed, cpu = time.perf_counter() - started, cpu_seconds() - cpu
    return sum(counted.values()) / elapsed, cpu, counted


def words_per_second(count_words, count: int, repeats: int) -> tuple[float, dict[str, int]]:
    """The median speed of `repeats` runs of `count_words(count)`, and what it counted."""
    runs = [timed(count_words, count) for _ in range(repeats)]
    return statistics.median(speed for speed, _, _ in runs), runs[-1][2]


def side_by_side(first, second, count: int, repeats: int) -> tuple[list, float, dict, dict]:
    """`repeats` runs of each of `first` and `second`, taking turns (so that a machine whose
    load changes during the runs slows both alike): the median speed and CPU time of each,
    the median of the ratios first/second of each turn's speeds, and what each counted."""
    turns = [(timed(first, count), timed(second, count)) for _ in range(repeats)]
    ratio = statistics.median(a[0] / b[0] for a, b in turns)
    medians = [[statistics.median(turn[i][k] for turn in turns) for k in (0, 1)] for i in (0, 1)]
    return medians, ratio, turns[-1][0][2], turns[-1][1][2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=100_000)
    parser.add_argument("--plan", default="fused", choices=["fused", "threaded", "processes"])
    parser.add_argument("--processes", type=int, help="with --plan processes: this many processes")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--compare", action="store_true", help="run the plain loop too")
    parser.add_argument("--bytewax", action="store_true", help="run Bytewax 0.21.1 too")
    parser.add_argument(
        "--at-end", action="store_true", help="count each word once at the end, not running"
    )
    args = parser.parse_args()

    # The same sentences for all: in as many parts as the job has processes.
    parts = args.processes or 1

    def count_words(n: int) -> dict[str, int]:
        return count_with_sluice(n, args.plan, args.processes, args.at_end)

    plan = args.plan if args.processes is None else f"{args.plan}={args.processes}"
    plan += ", counted at the end" if args.at_end else ""
    others = []
    if args.compare:
        others.append(("plain Python loop", "loop", lambda n: count_with_a_loop(n, parts)))
    if args.bytewax:
        others.append(("bytewax 0.21.1", "bytewax", lambda n: count_with_bytewax(n, parts)))
    if not others:
        speed, counted = words_per_second(count_words, args.sentences, args.repeats)
        print(f"sluice ({plan}): {speed / 1e3:.0f} k words/s, {len(counted)} distinct words")
    for name, short, other in others:
        ((speed, cpu), (other_speed, other_cpu)), ratio, counted, by_other = side_by_side(
            count_words, other, args.sentences, args.repeats
        )
        assert by_other == counted, f"{name} and the job counted differently"
        print(f"sluice ({plan}): {speed / 1e3:.0f} k words/s, {len(counted)} distinct words")
        print(f"{name}: {other_speed / 1e3:.0f} k words/s")
        print(f"sluice / {short}: {ratio:.2f}x (the median of the {args.repeats} turns' ratios)")
        print(f"CPU time: sluice {cpu:.3f} s (all its processes), {short} {other_cpu:.3f} s")


if __name__ == "__main__":
    main()
