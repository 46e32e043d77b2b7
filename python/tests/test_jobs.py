"""A Python job is a job like any other: `sluice jobs` lists it while it runs."""

import json
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



PLANNED = (
    "import sluice\n"
    "print('a line the script prints')\n"
    "flow = sluice.Dataflow('planned-script')\n"
    "words = flow.source('words', ['a b', 'b']).flat_map('split', str.split)\n"
    "words.key_by('word').count('count').collect('counts')\n"
    "flow.run(plan='processes')\n"
    "raise SystemExit('the job ran instead of being planned')\n"
)


def test_sluice_plan_prints_the_plan_of_a_python_script(tmp_path):
    binary = sluice_binary()
    script = tmp_path / "job.py"
    script.write_text(PLANNED)
    env = dict(os.environ, SLUICE_PYTHON=sys.executable)
    plan = lambda *args: subprocess.run(  # noqa: E731
        [binary, "plan", str(script), *args], capture_output=True, text=True, timeout=120, env=env
    )
    flow = sluice.Dataflow("planned-script")
    words = flow.source("words", ["a b", "b"]).flat_map("split", str.split)
    words.key_by("word").count("count").collect("counts")

    printed = plan()
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == flow.plan("processes")  # the plan its run names, alone on stdout
    assert "a line the script prints" in printed.stderr
    fused = plan("--plan", "fused")
    assert fused.returncode == 0, fused.stderr
    assert fused.stdout == flow.plan("fused")
    as_json = plan("--json")
    assert as_json.returncode == 0, as_json.stderr
    assert len(json.loads(as_json.stdout)["pes"]) > 1

    script.write_text("print('no job here')\n")
    refused = plan()
    assert refused.returncode != 0
    assert "ended without running a job" in refused.stderr
    script.write_text("raise ValueError('broken script')\n")
    broken = plan()
    assert broken.returncode != 0
    assert "ValueError: broken script" in broken.stderr
    assert "before its job's plan was written" in broken.stderr
