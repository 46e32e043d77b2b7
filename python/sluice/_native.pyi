"""Type hints of the native half of Sluice (``sluice._native``, written in Rust)."""

from os import PathLike
from typing import Any, Callable, Iterable, Literal

Carried = None | bool | int | float | str | bytes | tuple[Any, ...]
"""What a stream carries: None, bool, int (64 bits), float, str, bytes and tuples of them."""

class SluiceError(Exception):
    """A Sluice job could not be built, planned or run."""

class OperatorError(SluiceError):
    """A user's function raised in an operator, which stopped the job; the exception it
    raised is the cause (``__cause__``), its traceback included (under the processes plan,
    where it was raised in another process, its traceback is in the message)."""

class Dataflow:
    """A Sluice job being built: add sources to it, chain operators on their streams, then
    run it."""

    def __init__(self, name: str) -> None:
        """A new job called ``name`` (the name ``sluice jobs`` shows)."""
    def source(self, name: str, iterable: Iterable[Carried]) -> Stream:
        """A source emitting the items of ``iterable`` (a list, a generator, any iterable),
        once."""
    def read_text(self, name: str, path: str | PathLike[str]) -> Stream:
        """A source emitting the lines of the text file at ``path`` as str, without their
        line ends; a missing file fails the job naming the path."""
    def run(
        self, plan: Literal["fused", "threaded", "processes"] = "fused", processes: int | None = None
    ) -> None:
        """Builds the job, plans it ("fused": one thread; "threaded": a thread per operator;
        "processes": a process per operator, each running this script again with its own
        interpreter) and runs it to its end; the ``collect`` results are then readable in
        this process under every plan. An exception in a user's function is raised as an
        :class:`OperatorError` naming the operator.

        ``processes=n`` (with "processes") runs the job in ``n`` processes instead: instance
        ``i`` of each operator of parallelism ``n`` in process ``i``, the other operators
        before the first of them (the sources) in the first process, those after it (the
        aggregates, the sinks) in the last."""

class Stream:
    """A stream of tuples: the output of one operator, which more operators can read."""

    def map(self, name: str, f: Callable[[Any], Carried], parallelism: int = 1) -> Stream:
        """Emits ``f(x)`` for every tuple ``x``. Its ``parallelism`` instances share the stream round robin."""
    def filter(self, name: str, f: Callable[[Any], object], parallelism: int = 1) -> Stream:
        """Keeps the tuples ``x`` for which ``f(x)`` is true. Its ``parallelism`` instances share the stream round robin."""
    def flat_map(self, name: str, f: Callable[[Any], Iterable[Carried]], parallelism: int = 1) -> Stream:
        """Emits every item of the iterable ``f(x)`` for every tuple ``x``. Its ``parallelism`` instances share the stream round robin."""
    def key_by(self, name: str, key: Callable[[Any], Carried] | None = None) -> KeyedStream:
        """The stream keyed by ``key(x)`` (by the tuple itself without ``key``), for a keyed
        aggregate; ``name`` is the operator that computes the key."""
    def collect(self, name: str) -> Collected:
        """Ends the stream in a sink keeping every tuple it receives; read them with
        :meth:`Collected.items` once the job has run."""

class KeyedStream:
    """A stream keyed by a function of its tuples: its aggregates keep one state per key."""

    def count(self, name: str) -> Stream:
        """The running count of each key: ``(key, n)`` for every tuple (counted in Rust)."""
    def sum(self, name: str, field: int | Callable[[Any], int | float] | None = None) -> Stream:
        """The running sum of each key's ``field`` (the tuple itself without one; an int
        ``n``: item ``n`` of each tuple, read in Rust; a function: what it returns):
        ``(key, total)`` for every tuple, summed in Rust, an int while every field is an
        int. A field that is not a number fails the key-by operator."""

class Collected:
    """What a ``collect`` sink received, readable once the job has run."""

    def items(self) -> list[Any]:
        """Every tuple the sink received, in the order each of its instances received
        them."""
    def latest(self) -> dict[Any, Any]:
        """For a keyed aggregate's ``(key, value)`` pairs: the last value of each key."""

def encode(value: Carried) -> bytes:
    """The bytes ``value`` crosses threads, processes and hosts as in a stream (postcard);
    :func:`decode` reads them back."""

def decode(data: bytes) -> Carried:
    """The value ``data`` (made by :func:`encode`) stands for."""
