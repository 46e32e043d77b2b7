"""Type hints of the native half of Sluice (``sluice._native``, written in Rust)."""

from os import PathLike
from typing import Any, Callable, Iterable, Literal

Carried = None | bool | int | float | str | bytes | tuple[Any, ...] | dict[Any, Any]
"""What a stream carries: None, bool, int (64 bits), float, str, bytes and tuples and dicts of
them."""

Path = str | PathLike[str]

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
    def partitioned_source(
        self, name: str, part: Callable[[int, int], Iterable[Carried]], parallelism: int
    ) -> Stream:
        """A source of ``parallelism`` instances, instance ``i`` emitting the items of the
        iterable ``part(i, parallelism)`` (a generator of its share, say), called where the
        instance runs: under the processes plan, in its own process, so that each process
        makes only its share of the input, in parallel with the others."""
    def read_text(self, name: str, path: Path) -> Stream:
        """A source emitting the lines of the text file at ``path`` as str, without their
        line ends; a missing file fails the job naming the path."""
    def read_csv(self, name: str, path: Path, header: bool = True) -> Stream:
        """A source emitting the records of the CSV file at ``path``: with ``header`` (the
        first record names the fields) each a dict from the names to the fields, without it a
        tuple of the fields; a field is an int, a float or a bool where it reads as one, a str
        otherwise. A record with more or fewer fields than the header is counted and
        skipped. It cannot resume from a checkpoint."""
    def read_json(self, name: str, path: Path) -> Stream:
        """A source emitting the JSON lines of the file at ``path``, each as the value it
        holds (an object as a dict, an array as a tuple); a line that is not JSON, or holds an
        integer beyond 64 bits, is counted and dropped."""
    def read_socket(
        self, name: str, address: str, listen: bool = False, connections: int | None = None
    ) -> Stream:
        """A source emitting the lines of a TCP connection as str: with ``listen``, the
        connections it accepts at ``address`` ("host:port") until ``connections`` of them
        have ended (without it, until the job stops); otherwise the one connection it makes
        to ``address``, ending with it."""
    def read_kafka(
        self,
        name: str,
        brokers: str,
        topic: str,
        format: Literal["json", "str", "bytes"] = "json",
        start: Literal["earliest", "latest", "committed"] = "earliest",
        bounded: bool = False,
        group: str | None = None,
        metadata: bool = False,
    ) -> Stream:
        """A source emitting the values of the records of Kafka topic ``topic`` at
        ``brokers`` ("host:port[,host:port...]"), each read as ``format`` says: from the
        earliest record (or only new ones, or from ``group``'s committed offsets), to the end
        offsets as they are when the job starts with ``bounded``, on as records come
        otherwise. Checkpoints keep its positions; it reads only committed transactions. With
        ``metadata``, each record is a dict of its ``key`` (bytes or None), ``value``,
        ``topic``, ``partition``, ``offset``, ``timestamp`` (seconds since the Unix epoch, or
        None) and ``headers`` (a tuple of (name, bytes or None))."""
    def plan(
        self,
        plan: Literal["fused", "threaded", "processes"] = "fused",
        processes: int | None = None,
        hosts: Path | None = None,
    ) -> str:
        """The plan :meth:`run` would run the job on, as ``sluice plan`` prints it: its
        processes, their threads and the operators each runs, and each edge's transport."""
    def run(
        self,
        plan: Literal["fused", "threaded", "processes"] = "fused",
        processes: int | None = None,
        checkpoint_every: float | None = None,
        checkpoint_dir: Path | None = None,
        from_: Path | None = None,
        hosts: Path | None = None,
    ) -> None:
        """Builds the job, plans it ("fused": one thread; "threaded": a thread per operator;
        "processes": a process per operator, each running this script again with its own
        interpreter) and runs it to its end; the ``collect`` results are then readable in
        this process under every plan. An exception in a user's function is raised as an
        :class:`OperatorError` naming the operator. The default is "fused", not the engine's
        "auto", which splits a job over threads as if its Python operators ran side by side,
        where they take turns with the interpreter.

        ``processes=n`` (with "processes") runs the job in ``n`` processes instead: instance
        ``i`` of each operator of parallelism ``n`` in process ``i``, the other operators
        before the first of them (the sources) in the first process, those after it (the
        aggregates, the sinks) in the last. ``hosts`` (a hosts file, as ``sluice run
        --hosts`` reads it; with "processes") places the PEs on its hosts, each started
        through its host's ``launch`` prefix, the edges between hosts carried by TCP.

        Every ``checkpoint_every`` seconds (with ``checkpoint_dir``) the job takes a
        checkpoint of its state (the sources' positions, the Rust operators' state, each
        ``stateful_map``'s state pickled) into ``checkpoint_dir``, and recovers from the last
        one when a process or thread of it fails. ``from_`` (a checkpoint's directory, or a
        job's checkpoint directory for its latest) resumes the job from that checkpoint: an
        iterable source iterates its iterable again and skips what it had emitted (a
        generator cannot be iterated again, and fails the job)."""

class Stream:
    """A stream of tuples: the output of one operator, which more operators can read."""

    def map(self, name: str, f: Callable[[Any], Carried], parallelism: int = 1) -> Stream:
        """Emits ``f(x)`` for every tuple ``x``. Its ``parallelism`` instances share the stream round robin."""
    def stateful_map(
        self,
        name: str,
        init: Callable[[], Any],
        f: Callable[[Any, Any], tuple[Any, Carried]],
        parallelism: int = 1,
    ) -> Stream:
        """Emits what ``f(state, x)`` returns beside the new state, for every tuple ``x``:
        ``f`` returns ``(new_state, emitted)``; each instance's state starts as ``init()``.
        The state is any Python object that pickles: checkpoints keep it pickled, and a job
        resumed from one starts from it."""
    def filter(self, name: str, f: Callable[[Any], object], parallelism: int = 1) -> Stream:
        """Keeps the tuples ``x`` for which ``f(x)`` is true. Its ``parallelism`` instances share the stream round robin."""
    def flat_map(self, name: str, f: Callable[[Any], Iterable[Carried]], parallelism: int = 1) -> Stream:
        """Emits every item of the iterable ``f(x)`` for every tuple ``x``. Its ``parallelism`` instances share the stream round robin."""
    def key_by(
        self,
        name: str,
        key: Callable[[Any], Carried] | None = None,
        time: Callable[[Any], float] | None = None,
        max_delay: float = 0.0,
    ) -> KeyedStream:
        """The stream keyed by ``key(x)`` (by the tuple itself without ``key``), for a keyed
        aggregate, a window or a join; ``name`` is the operator that computes the key. With
        ``time``, each tuple's event time is ``time(x)`` in seconds (from 0): windows and
        joins on the keyed stream then go by event time, behind watermarks trailing the
        greatest time seen by ``max_delay`` seconds (a watermark operator NAME-watermarks)."""
    def write_text(self, name: str, path: Path) -> None:
        """Ends the stream in a sink writing each tuple as a line of the text file at
        ``path``: what ``str()`` of it writes. Written under a temporary name and renamed at
        the end; with checkpoints, exactly once."""
    def write_csv(self, name: str, path: Path) -> None:
        """Ends the stream in a sink writing each tuple as a CSV record of the file at
        ``path``: a tuple's items as its fields (None an empty one), anything else as one
        field; a dict or a tuple inside a tuple fails the job. With checkpoints, exactly
        once."""
    def write_json(self, name: str, path: Path) -> None:
        """Ends the stream in a sink writing each tuple as a JSON line of the file at
        ``path`` (a tuple as an array, a dict as an object, bytes as an array of numbers);
        with checkpoints, exactly once."""
    def write_kafka(
        self,
        name: str,
        brokers: str,
        topic: str,
        format: Literal["json", "str", "bytes"] = "json",
        transactional_id: str | None = None,
        key: int | str | None = None,
    ) -> None:
        """Ends the stream in a sink writing each tuple as the value of a record of Kafka
        topic ``topic``, as ``format`` says. At least once; with ``transactional_id`` and
        checkpoints, exactly once (one transaction a checkpoint). ``key=n`` keys each record
        by item ``n`` of the tuple, ``key="k"`` by a dict's value under ``"k"`` (bytes as
        they are, str as UTF-8, anything else as its text; a tuple without it has no key)."""
    def collect(self, name: str, parallelism: int = 1) -> Collected:
        """Ends the stream in a sink keeping every tuple it receives; read them with
        :meth:`Collected.items` once the job has run. With ``parallelism=n`` the sink runs as
        ``n`` instances, each keeping what reaches it (after an operator of ``n`` instances,
        what that instance emits, in its thread and under the processes plan in its process,
        which sends it back from there); ``items()`` lists them instance by instance."""

class KeyedStream:
    """A stream keyed by a function of its tuples: its aggregates keep one state per key.
    Its aggregates, windows and joins share its key-by operator when they read the same field
    of the tuples; one reading another field is refused (key the stream again, under another
    name, for it)."""

    def count(self, name: str, at_end: bool = False, parallelism: int = 1) -> Stream:
        """The running count of each key: ``(key, n)`` for every tuple (counted in Rust);
        with ``at_end``, each key's ``(key, n)`` once, when the stream ends. A stream keyed by
        its tuples themselves (``key_by`` without ``key`` and ``time``) is counted without the
        key-by operator. Every keyed aggregate runs as ``parallelism`` instances, each key's
        tuples dealt by its hash to one of them (under the processes plan with
        ``processes=n``, ``parallelism=n`` puts instance i in process i)."""
    def sum(
        self,
        name: str,
        field: int | Callable[[Any], int | float] | None = None,
        at_end: bool = False,
        parallelism: int = 1,
    ) -> Stream:
        """The running sum of each key's ``field`` (the tuple itself without one; an int
        ``n``: item ``n`` of each tuple, read in Rust; a function: what it returns):
        ``(key, total)`` for every tuple, summed in Rust, an int while every field is an
        int; with ``at_end``, each key's ``(key, total)`` once, when the stream ends. A field
        that is not a number fails the key-by operator."""
    def min(
        self,
        name: str,
        field: int | Callable[[Any], int | float] | None = None,
        at_end: bool = False,
        parallelism: int = 1,
    ) -> Stream:
        """The running least of each key's ``field`` (read as :meth:`sum` reads it):
        ``(key, least)`` for every tuple, as the value itself; with ``at_end``, once per key
        when the stream ends (in Rust)."""
    def max(
        self,
        name: str,
        field: int | Callable[[Any], int | float] | None = None,
        at_end: bool = False,
        parallelism: int = 1,
    ) -> Stream:
        """The running greatest of each key's ``field`` (read as :meth:`sum` reads it):
        ``(key, greatest)`` for every tuple; with ``at_end``, once per key (in Rust)."""
    def mean(
        self,
        name: str,
        field: int | Callable[[Any], int | float] | None = None,
        at_end: bool = False,
        parallelism: int = 1,
    ) -> Stream:
        """The running mean of each key's ``field`` (read as :meth:`sum` reads it), a float:
        ``(key, mean)`` for every tuple; with ``at_end``, once per key (in Rust)."""
    def window(self, size: float, slide: float | None = None) -> WindowedStream:
        """The keyed stream cut into windows of ``size`` seconds starting every ``slide``
        seconds (tumbling without ``slide``), by event time when ``key_by`` was given
        ``time``, by processing time otherwise."""
    def count_window(self, size: int, slide: int | None = None) -> WindowedStream:
        """The keyed stream cut into windows of ``size`` tuples of a key, one every ``slide``
        of them (tumbling without ``slide``); a window's ``start`` and ``end`` are the key's
        tuple numbers (from 0) of its first tuple and of the one after its last. At the end
        of the stream the tuples since a key's last window make one more."""
    def session(self, gap: float) -> WindowedStream:
        """The keyed stream cut into sessions: a key's tuples less than ``gap`` seconds apart
        (by event time when ``key_by`` was given ``time``, by processing time otherwise); a
        session ends ``gap`` seconds after its last tuple."""
    def join(self, name: str, other: KeyedStream, within: float) -> Stream:
        """Joins this stream with ``other`` on equal keys: ``(key, x, y)`` for every tuple
        ``x`` of this stream and ``y`` of ``other`` at most ``within`` seconds apart, by event
        time when both keyed streams have ``time``, by arrival otherwise (in Rust)."""

class WindowedStream:
    """A keyed stream cut into windows: each window's aggregate is ``(key, start, end,
    value)``, ``start`` and ``end`` in seconds (by processing time, since the Unix epoch) or,
    for windows by count, tuple numbers, emitted as the window closes (by event time, when the watermark passes its end; every
    window at the end of the stream)."""

    def count(self, name: str) -> Stream:
        """The number of tuples of each key's window (counted in Rust)."""
    def sum(self, name: str, field: int | Callable[[Any], int | float] | None = None) -> Stream:
        """The sum of ``field`` (as :meth:`KeyedStream.sum` reads it) over each key's window
        (summed in Rust)."""
    def min(self, name: str, field: int | Callable[[Any], int | float] | None = None) -> Stream:
        """The least ``field`` (read as ``sum`` reads it, a number) of each key's window, as
        the value itself (in Rust)."""
    def max(self, name: str, field: int | Callable[[Any], int | float] | None = None) -> Stream:
        """The greatest ``field`` (read as ``sum`` reads it, a number) of each key's window,
        as the value itself (in Rust)."""
    def mean(self, name: str, field: int | Callable[[Any], int | float] | None = None) -> Stream:
        """The mean of ``field`` (read as ``sum`` reads it, a number) over each key's window,
        a float (in Rust)."""
    def values(self, name: str, field: int | Callable[[Any], Any] | None = None) -> Stream:
        """The fields (read as ``sum`` reads it, any value; the tuples without one) of
        each key's window, a tuple in the order they arrived (gathered in Rust)."""

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
