"""Sluice from Python: stream jobs of Python functions and built-in Rust operators.

Build a job as a chain of operators on streams, as with Sluice's Rust builder, then run it::

    import sluice

    flow = sluice.Dataflow("wordcount")
    counts = (
        flow.source("lines", ["a b", "b"])
        .flat_map("split", str.split)
        .key_by("word")
        .count("count")
        .collect("counts")
    )
    flow.run()
    assert counts.latest() == {"a": 1, "b": 2}

Python functions (``map``, ``stateful_map``, ``filter``, ``flat_map``, ``key_by``) run in the
interpreter of the process running their operator; the keyed ``count`` and ``sum``, the
windows, the joins, the file, socket and Kafka connectors and the sinks run as Rust without
calling Python. A stream carries ``None``, ``bool``, ``int`` (64 bits), ``float``, ``str``,
``bytes`` and tuples and dicts of them (other types are refused where a function returns
them, naming the operator). An exception in a user's function stops the job; ``run``
raises an :class:`OperatorError` naming the operator, the exception as its ``__cause__``.
"""

from ._native import (
    Collected,
    Dataflow,
    KeyedStream,
    OperatorError,
    SluiceError,
    Stream,
    WindowedStream,
    decode,
    encode,
)

__all__ = [
    "Collected",
    "Dataflow",
    "KeyedStream",
    "OperatorError",
    "SluiceError",
    "Stream",
    "WindowedStream",
    "decode",
    "encode",
]
