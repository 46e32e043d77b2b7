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


@pytest.mark.parametrize(
    "processes", [None, 2], ids=["one per instance", "two, the source, split and count in both"]
)
@pytest.mark.parametrize("at_end", [False, True], ids=["running", "at the end"])
def test_processes_collect_what_fused_collects(tmp_path, processes, at_end):
    parts = processes or 1
    done = run_script(
        tmp_path,
        "import json, wordcount\n"
        f"print(json.dumps([wordcount.count_with_sluice(3000, 'processes', {processes}, {at_end}),\n"
        f"                  wordcount.count_with_sluice(3000, 'fused', None, {at_end}, {parts}),\n"
        f"                  wordcount.count_with_a_loop(3000, {parts})]))\n",
    )
    assert done.returncode == 0, done.stderr
    by_processes, fused, by_a_loop = json.loads(done.stdout.strip().splitlines()[-1])
    assert by_processes == fused == by_a_loop
    assert sum(fused.values()) == 30_000


def test_each_process_makes_its_part_of_a_partitioned_source(tmp_path):
    done = run_script(
        tmp_path,
        "import json, os, sluice\n"
        "flow = sluice.Dataflow('parts')\n"
        "pids = flow.partitioned_source('pids', lambda i, n: [(i, n, os.getpid())], parallelism=2)\n"
        "out = pids.map('same', lambda x: x, parallelism=2).collect('out')\n"
        "flow.run('processes', processes=2)\n"
        "print(json.dumps([os.getpid(), out.items()]))\n",
    )
    assert done.returncode == 0, done.stderr
    launcher, items = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted((i, n) for i, n, _ in items) == [(0, 2), (1, 2)]
    pids = {pid for _, _, pid in items}
    assert len(pids) == 2 and launcher not in pids  # each part made in a PE process of its own


def test_processes_n_needs_an_operator_of_parallelism_n(tmp_path):
    import sluice

    flow = sluice.Dataflow("unspread")
    flow.source("numbers", [1]).map("double", lambda n: 2 * n).collect("out")
    with pytest.raises(ValueError, match="processes= is for the 'processes' plan"):
        flow.run("fused", processes=2)
    with pytest.raises(ValueError, match="no operator of parallelism 3"):
        flow.run("processes", processes=3)


def test_a_job_runs_once():
    import sluice

    flow = sluice.Dataflow("once")
    out = flow.source("numbers", [1, 2]).collect("out")
    flow.run()
    with pytest.raises(sluice.SluiceError, match="'once' was built already"):
        flow.run()
    assert out.items() == [1, 2]


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


def test_a_plan_names_every_instance_and_edge_before_the_job_runs():
    import sluice

    flow = sluice.Dataflow("planned")
    split = flow.source("lines", ["a b", "b"]).flat_map("split", str.split, parallelism=2)
    counts = split.key_by("word").count("count").collect("counts")
    fused = flow.plan()
    # The words are their own keys: the count reads them as they are, without a key-by operator.
    assert fused.startswith("plan for planned (fused): 1 PE(s), 1 thread(s), 5 instance(s)")
    assert "thread 0 'main' (unpinned): lines, split[0], split[1], count, counts" in fused
    assert "split[1].out[0] -> count.in[0]  key-by  via fused" in fused
    spread = flow.plan("threaded")
    assert "5 thread(s)" in spread
    flow.run()  # after plan(): the job runs, once
    assert counts.latest() == {"a": 1, "b": 2}


HOSTS = """
[[host]]
name = "a"
address = "127.0.0.1"
cores = 1

[[host]]
name = "b"
address = "127.0.0.1"
cores = 1
"""


def test_a_job_on_two_hosts_collects_what_fused_collects(tmp_path):
    # Two hosts on loopback: the PEs reach the launcher over TCP with the job's secret, and
    # the edges between them are TCP, as between machines.
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(HOSTS)
    done = run_script(
        tmp_path,
        "import json, wordcount\n"
        "import sluice\n"
        "flow = sluice.Dataflow('hosted')\n"
        "lines = flow.source('lines', list(wordcount.sentences(500)))\n"
        "words = lines.flat_map('split', wordcount.words, parallelism=2)\n"
        "counts = words.key_by('word').count('count').collect('counts')\n"
        f"plan = flow.plan('processes', processes=2, hosts={str(hosts)!r})\n"
        f"flow.run('processes', processes=2, hosts={str(hosts)!r})\n"
        "print(json.dumps([plan, counts.latest(), wordcount.count_with_sluice(500, 'fused')]))\n",
    )
    assert done.returncode == 0, done.stderr
    plan, on_hosts, fused = json.loads(done.stdout.strip().splitlines()[-1])
    assert "PE 0 'process0' on a" in plan and "PE 1 'process1' on b" in plan
    assert "via tcp" in plan
    assert on_hosts == fused
    assert sum(fused.values()) == 5_000


def test_hosts_are_for_the_processes_plan(tmp_path):
    import sluice

    flow = sluice.Dataflow("unhosted")
    flow.source("numbers", [1]).collect("out")
    with pytest.raises(ValueError, match="hosts= is for the 'processes' plan"):
        flow.run("fused", hosts=tmp_path / "hosts.toml")
    with pytest.raises(sluice.SluiceError, match="cannot read hosts file"):
        flow.plan("processes", hosts=tmp_path / "missing.toml")
