"""A Python job is a job like any other: `sluice jobs` lists it while it runs."""

import os
import pathlib
import shutil
import subprocess
import sys
import threading

import pytest

import sluice

ROOT = pathlib.Path(__file__).resolve().parents[2]


def sluice_binary():
    """The `sluice` command: $SLUICE_BIN, the workspace's debug build, or one on PATH."""
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    for candidate in [os.environ.get("SLUICE_BIN"), target / "debug" / "sluice", shutil.which("sluice")]:
        if candidate and pathlib.Path(candidate).is_file():
            return str(candidate)
    if os.environ.get("CI") == "true":
        pytest.fail("no sluice binary (build it with cargo build -p sluice, or set SLUICE_BIN)")
    pytest.skip("no sluice binary (build it with cargo build -p sluice, or set SLUICE_BIN)")


@pytest.mark.parametrize("plan", ["fused", "processes"])
def test_sluice_jobs_lists_a_running_python_job(plan, tmp_path):
    binary = sluice_binary()
    name = f"python-listed-{plan}-{os.getpid()}"
    # The job runs in a process of its own (a script, run again per PE under processes); its
    # source waits until the file `release` exists, so the job runs until this test saw it.
    release = tmp_path / "release"
    script = tmp_path / "job.py"
    script.write_text(
        "import pathlib, sys, time\n"
        "import sluice\n"
        "def numbers():\n"
        "    for n in range(600):\n"
        f"        if pathlib.Path({str(release)!r}).exists(): return\n"
        "        time.sleep(0.05)\n"
        "        yield n\n"
        f"flow = sluice.Dataflow({name!r})\n"
        "out = flow.source('numbers', numbers()).map('double', lambda n: 2 * n).collect('out')\n"
        f"flow.run({plan!r})\n"
        "print(len(out.items()))\n"
    )
    job = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        listed = ""
        for _ in range(100):  # at most 30 s
            listed = subprocess.run([binary, "jobs"], capture_output=True, text=True, timeout=10).stdout
            if name in listed or job.poll() is not None:
                break
            threading.Event().wait(0.3)
        assert name in listed, f"sluice jobs did not list {name}:\n{listed}"
    finally:
        release.touch()
        out, err = job.communicate(timeout=60)
    assert job.returncode == 0, err
    assert int(out.strip()) > 0

