"""Checkpoints of a Python job: the sources' positions, the Rust operators' state and each
stateful_map's pickled Python state; a job resumed from a checkpoint collects what a job never
interrupted collects."""

import os
import pathlib
import shutil
import signal
import time

import pytest

import sluice

N = 50_000


def add(state, n):
    """A running total kept in a Python object (a dict), emitted beside each number."""
    state["total"] += n
    return state, (n, state["total"])


def checkpointed(directory):
    """The directory of the newest complete checkpoint in `directory`, if there is one (the
    newest: the job deletes older ones as it completes new ones)."""
    complete = [p for p in pathlib.Path(directory).glob("chk-*") if (p / "MANIFEST.json").exists()]
    return max(complete, key=lambda p: int(p.name.rsplit("-", 1)[1]), default=None)


def totals_job(interrupt_in=None, numbers=range(N), file=None):
    """A job of running totals (a stateful map, collected and written to `file`) and a keyed
    count (Rust) over range(N), and what it saw; with `interrupt_in`, it runs slowly (so the
    Ctrl-C's drain comes long before its end), sends itself a Ctrl-C once a checkpoint is
    complete in that directory, once, and what it saw names that checkpoint
    (`seen["checkpoint"]`)."""
    flow = sluice.Dataflow("totals")
    seen = {"interrupt": interrupt_in}

    def watch(n):
        if interrupt_in is None or n % 100:
            return n
        complete = seen["interrupt"] and checkpointed(interrupt_in)
        if complete:
            # Kept aside: the job deletes all but its last three checkpoints.
            seen["checkpoint"] = interrupt_in.parent / "kept" / complete.name
            shutil.copytree(complete, seen["checkpoint"])
            seen["interrupt"] = None
            os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.005)
        return n

    numbers = flow.source("numbers", numbers).map("watch", watch)
    running = numbers.stateful_map("total", lambda: {"total": 0}, add)
    totals = running.collect("totals")
    if file is not None:
        running.write_text("file", file)
    counts = numbers.key_by("mod", lambda n: n % 7).count("count").collect("counts")
    return flow, totals, counts, seen


@pytest.fixture
def ctrl_c_raises():
    """Ctrl-C raises KeyboardInterrupt during the test, whatever the disposition the test run
    inherited: Python keeps SIGINT ignored when it starts with it ignored, as a command put in
    the background by a non-interactive shell does (the send would then be lost and the job
    would run to its end)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_job_resumed_from_a_checkpoint_collects_what_an_uninterrupted_one_does(
    tmp_path, ctrl_c_raises
):
    flow, totals, counts, _ = totals_job()
    flow.run()
    expected_totals, expected_counts = totals.items(), counts.latest()
    assert expected_totals[-1] == (N - 1, N * (N - 1) // 2)

    file = tmp_path / "totals.txt"
    flow, totals, counts, seen = totals_job(interrupt_in=tmp_path / "chk", file=file)
    with pytest.raises(KeyboardInterrupt):
        flow.run(checkpoint_every=0.2, checkpoint_dir=tmp_path / "chk")
    first = totals.items()
    assert 0 < len(first) < N  # it was stopped midway
    assert first == expected_totals[: len(first)]

    # The job drained after the Ctrl-C and may have taken a checkpoint after its source had
    # stopped for good (resuming from that one has nothing left to do): resume from the one
    # it saw before, as a crash would have left it.
    flow, totals, counts, _ = totals_job(file=file)  # the same job, as a script builds it
    flow.run(from_=seen["checkpoint"])
    resumed = totals.items()
    # The resumed run starts at the checkpoint's position with the state pickled there: what
    # it emits is the end of what the uninterrupted job emitted, and with the first run's
    # output it covers all of it.
    assert 0 < len(resumed) < N
    assert resumed == expected_totals[N - len(resumed) :]
    assert len(first) + len(resumed) >= N
    assert counts.latest() == {k: n for k, n in expected_counts.items() if k in counts.latest()}
    assert len(counts.latest()) == 7
    # The file sink is exactly once: the resumed run cut the file to what the checkpoint
    # accounted for before it went on.
    assert file.read_text().splitlines() == [str(t) for t in expected_totals]

    # A generator is iterated once: a source cannot go through it again to its position.
    flow, _, _, _ = totals_job(numbers=(n for n in range(N)))
    with pytest.raises(sluice.OperatorError, match="a generator or iterator cannot be"):
        flow.run(from_=seen["checkpoint"])


def test_checkpoint_every_needs_a_directory():
    flow = sluice.Dataflow("half")
    flow.source("numbers", [1]).collect("out")
    with pytest.raises(ValueError, match="checkpoint_every and checkpoint_dir go together"):
        flow.run(checkpoint_every=1.0)


def test_a_state_that_does_not_pickle_fails_the_checkpoint(tmp_path):
    flow = sluice.Dataflow("unpicklable")

    def keep(state, n):
        if n % 100 == 0:
            time.sleep(0.001)  # the job lasts at least half a second: checkpoints are due
        return state, n

    flow.source("numbers", range(N)).stateful_map("keep", lambda: (lambda: 0), keep).collect("out")
    with pytest.raises(sluice.SluiceError, match="the state of 'keep' cannot be pickled"):
        flow.run(checkpoint_every=0.01, checkpoint_dir=tmp_path)


def test_a_job_recovers_from_an_exception_raised_once(tmp_path):
    flow = sluice.Dataflow("flaky")
    raised = []

    def once(n):
        if n == N // 2 and not raised and checkpointed(tmp_path):
            raised.append(n)
            raise ConnectionError("a passing fault")
        if n % 100 == 0 and not raised:
            time.sleep(0.005)  # slowly, until a checkpoint is complete
        return n

    out = flow.source("numbers", range(N)).map("flaky", once).collect("out")
    flow.run(checkpoint_every=0.05, checkpoint_dir=tmp_path)
    assert raised == [N // 2]
    # Restarted from the last checkpoint: at least once into the collecting sink.
    assert set(out.items()) == set(range(N))
