"""The Python examples of the book's Python chapter and of the README run, and so do the
examples under python/examples: WordCount counts what a plain loop counts."""

import importlib.util
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCUMENTS = ["docs/src/python.md", "README.md"]


def python_blocks(path):
    """The fenced ```python blocks of the Markdown file at `path`, with their first line."""
    text = (ROOT / path).read_text()
    return [
        (text.count("\n", 0, match.start()) + 1, match.group(1))
        for match in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)
    ]


BLOCKS = [(path, line, code) for path in DOCUMENTS for line, code in python_blocks(path)]


def test_the_book_has_python_examples():
    assert len([b for b in BLOCKS if b[0] == "docs/src/python.md"]) >= 2


@pytest.mark.parametrize("path,line,code", BLOCKS, ids=[f"{p}:{n}" for p, n, _ in BLOCKS])
def test_a_python_block_of_the_docs_runs(path, line, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"{path}:{line}", "exec"), {"__name__": "__docs__"})


def example(name):
    """The example python/examples/NAME.py, imported."""
    spec = importlib.util.spec_from_file_location(name, ROOT / f"python/examples/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("plan", ["fused", "threaded"])
def test_the_wordcount_example_counts_what_the_loop_counts(plan):
    wordcount = example("wordcount")
    counted = wordcount.count_with_sluice(2000, plan)
    assert counted == wordcount.count_with_a_loop(2000)
    assert sum(counted.values()) == 20_000


def test_the_map_cost_example_runs_its_chains():
    map_cost = example("map_cost")
    assert map_cost.job_seconds(1000, 5) > 0  # it checks what the chain computed


def test_the_encoding_cost_example_measures_both_encodings():
    rows = example("encoding_cost").costs(10, 1)  # it checks that each decodes what it encoded
    assert {(label, name) for label, name, *_ in rows} == {
        (label, name) for label in ["word", "(word, count)"] for name in ["sluice", "pickle"]
    }


def test_the_latency_example_measures_every_tuple():
    p50, p99, measured = example("latency").measure(rate=5_000, seconds=1.5)
    assert measured == 2_500  # the first second left out
    assert 0 < p50 <= p99
