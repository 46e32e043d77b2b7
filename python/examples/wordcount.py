"""WordCount from Python: sentences of 10 words drawn from 1,000 are split, trimmed and
lowercased by a Python function, and the words counted per word by Sluice's keyed count (in
Rust). With --compare, a plain Python loop counting in a dict does the same work in the same
run, and both speeds are printed (medians of --repeats runs, generation included in both).

    python python/examples/wordcount.py --sentences 100000 --compare
"""

import argparse
import random
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


def words(sentence: str) -> list[str]:
    """The words of a sentence: split on whitespace, punctuation trimmed, lowercased."""
    return [w for w in (t.strip(string.punctuation).lower() for t in sentence.split()) if w]


def count_with_sluice(count: int, plan: str = "fused") -> dict[str, int]:
    """Counts the words of `count` sentences with a Sluice job."""
    flow = sluice.Dataflow("wordcount")
    counts = (
        flow.source("sentences", sentences(count))
        .flat_map("split", words)
        .key_by("word")
        .count("count")
        .collect("counts")
    )
    flow.run(plan)
    return counts.latest()


def count_with_a_loop(count: int) -> dict[str, int]:
    """Counts the words of `count` sentences in a plain Python loop and a dict."""
    counts: dict[str, int] = {}
    for sentence in sentences(count):
        for word in words(sentence):
            counts[word] = counts.get(word, 0) + 1
    return counts


def words_per_second(count_words, count: int, repeats: int) -> tuple[float, dict[str, int]]:
    """The median speed of `repeats` runs of `count_words(count)`, and what it counted."""
    speeds = []
    for _ in range(repeats):
        started = time.perf_counter()
        counted = count_words(count)
        speeds.append(sum(counted.values()) / (time.perf_counter() - started))
    return statistics.median(speeds), counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=100_000)
    parser.add_argument("--plan", default="fused", choices=["fused", "threaded", "processes"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--compare", action="store_true", help="run the plain loop too")
    args = parser.parse_args()

    speed, counted = words_per_second(lambda n: count_with_sluice(n, args.plan), args.sentences, args.repeats)
    print(f"sluice ({args.plan}): {speed / 1e3:.0f} k words/s, {len(counted)} distinct words")
    if args.compare:
        loop_speed, looped = words_per_second(count_with_a_loop, args.sentences, args.repeats)
        assert looped == counted, "the loop and the job counted differently"
        print(f"plain Python loop: {loop_speed / 1e3:.0f} k words/s")
        print(f"sluice / loop: {speed / loop_speed:.2f}x")


if __name__ == "__main__":
    main()
