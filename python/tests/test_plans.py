"""The processes plan: each PE is a process running the script again with its own
interpreter, and `collect()` brings the same results back to the launching script as the
fused plan does. Each job runs from a script of its own (a PE runs its script again, so a
job cannot run from inside pytest's process)."""

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run_script(tmp_path, body):
    """Runs `body` as a script (with the example WordCount importable) and returns its
    standard output, failing with its standard error."""
    script = tmp_path / "job.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(ROOT / 'python/examples')!r})\n" + body)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180)
    return done


def test_processes_collect_what_fused_collects(tmp_path):
    done = run_script(
        tmp_path,
        "import json, wordcount\n"
        "print(json.dumps([wordcount.count_with_sluice(3000, plan) for plan in ['processes', 'fused']]))\n",
    )
    assert done.returncode == 0, done.stderr
    processes, fused = json.loads(done.stdout.strip().splitlines()[-1])
    assert processes == fused
    assert sum(fused.values()) == 30_000


def test_an_exception_in_a_pe_names_the_operator_and_the_traceback(tmp_path):
    done = run_script(
        tmp_path,
        "import sluice\n"
        "def boom(n):\n"
        "    raise ValueError(f'no {n}')\n"
        "flow = sluice.Dataflow('failing')\n"
        "flow.source('numbers', [1, 2]).map('boom', boom).collect('out')\n"
        "try:\n"
        "    flow.run('processes')\n"
        "except sluice.OperatorError as error:\n"
        "    print('raised:', error)\n",
    )
    assert done.returncode == 0, done.stderr
    assert "raised:" in done.stdout
    assert "boom" in done.stdout and "ValueError: no 1" in done.stdout
    assert "line 5, in boom" in done.stdout


def test_processes_needs_a_script():
    import sluice

    flow = sluice.Dataflow("interactive")
    flow.source("numbers", [1]).collect("out")
    saved = sys.argv
    sys.argv = [""]
    try:
        with pytest.raises(ValueError, match="run the job from a file"):
            flow.run("processes")
    finally:
        sys.argv = saved
