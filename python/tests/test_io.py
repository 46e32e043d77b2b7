"""The engine's file and socket connectors from Python: CSV, JSON lines and socket sources, and
the text, CSV and JSON lines file sinks."""

import json
import socket
import subprocess
import sys
import threading

import pytest

import sluice


def run_collecting(build, plan="fused"):
    """Runs the job `build(flow)` makes (it returns the stream to collect); its tuples."""
    flow = sluice.Dataflow("io")
    collected = build(flow).collect("out")
    flow.run(plan)
    return collected.items()


def test_a_csv_file_with_a_header_reads_as_dicts_of_typed_fields(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text("name,count,price,ok\na,1,2.5,true\nb,-3,4,false\nshort,1\n")
    rows = run_collecting(lambda flow: flow.read_csv("rows", path))
    assert rows == [
        {"name": "a", "count": 1, "price": 2.5, "ok": True},
        {"name": "b", "count": -3, "price": 4, "ok": False},
    ]  # the record with too few fields is counted and skipped


@pytest.mark.parametrize("plan", ["fused", "threaded"])
def test_a_csv_file_without_a_header_reads_as_tuples(tmp_path, plan):
    path = tmp_path / "in.csv"
    path.write_text("a,1\nb,2\n")
    rows = run_collecting(
        lambda flow: flow.read_csv("rows", path, header=False).map("swap", lambda r: (r[1], r[0])),
        plan,
    )
    assert rows == [(1, "a"), (2, "b")]


def test_json_lines_read_as_values_and_a_bad_line_is_dropped(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"user": "a", "amount": 3}\n[1, "x", null]\nnot json\n2.5\n')
    values = run_collecting(lambda flow: flow.read_json("events", path))
    assert values == [{"user": "a", "amount": 3}, (1, "x", None), 2.5]


def test_what_a_json_sink_writes_a_json_source_reads_back(tmp_path):
    path = tmp_path / "out.jsonl"
    values = [{"k": (1, 2.5)}, ("a", None, True), "plain", 7]
    flow = sluice.Dataflow("write-json")
    flow.source("values", values).write_json("out", path)
    flow.run()
    assert [json.loads(line) for line in path.read_text().splitlines()] == [
        {"k": [1, 2.5]},
        ["a", None, True],
        "plain",
        7,
    ]
    assert run_collecting(lambda flow: flow.read_json("back", path)) == [
        {"k": (1, 2.5)},
        ("a", None, True),
        "plain",
        7,
    ]


def test_a_text_sink_writes_what_str_writes(tmp_path):
    path = tmp_path / "out.txt"
    values = ["word", 3, 2.5, None, ("a", 1), ("one",), {"k": b"b"}]
    flow = sluice.Dataflow("write-text")
    flow.source("values", values).write_text("out", path)
    flow.run()
    assert path.read_text().splitlines() == [str(v) for v in values]


def test_a_keyed_count_writes_to_csv(tmp_path):
    path = tmp_path / "counts.csv"
    flow = sluice.Dataflow("count-to-csv")
    flow.source("words", ["a", "b", "a"]).key_by("word").count("count").write_csv("out", path)
    flow.run()
    assert path.read_text() == "a,1\nb,1\na,2\n"


def test_tuples_write_to_csv_and_read_back_and_a_dict_is_refused(tmp_path):
    path = tmp_path / "rows.csv"
    rows = [("a", 1, 2.5), ("b", 2, None)]
    flow = sluice.Dataflow("tuples-to-csv")
    flow.source("rows", rows).write_csv("out", path)
    flow.run()
    assert path.read_text() == "a,1,2.5\nb,2,\n"
    assert run_collecting(lambda flow: flow.read_csv("back", path, header=False)) == [
        ("a", 1, 2.5),
        ("b", 2, ""),
    ]
    flow = sluice.Dataflow("dict-to-csv")
    flow.source("rows", [{"name": "a"}]).write_csv("out", path)
    with pytest.raises(sluice.SluiceError, match="operator 'out' failed: .*maps is not supported"):
        flow.run()


def test_a_missing_file_fails_the_job_naming_it(tmp_path):
    flow = sluice.Dataflow("missing")
    flow.read_csv("rows", tmp_path / "absent.csv").collect("out")
    with pytest.raises(sluice.SluiceError, match="absent.csv"):
        flow.run()


def serve_lines(lines):
    """A server on a free loopback port sending `lines` to its first client, then closing;
    its address and its thread."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(60)  # watchdog: a job that never connects fails the test

    def send():
        with server:
            client, _ = server.accept()
            with client:
                client.sendall("".join(f"{line}\n" for line in lines).encode())

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return "127.0.0.1:%d" % server.getsockname()[1], thread


def test_a_socket_source_reads_the_lines_of_its_connection():
    address, server = serve_lines(["a b", "b"])
    def build(flow):
        return flow.read_socket("lines", address).flat_map("split", str.split)

    assert run_collecting(build) == ["a", "b", "b"]
    server.join(60)


def test_a_listening_socket_source_ends_after_its_connections():
    probe = socket.create_server(("127.0.0.1", 0))
    address = "127.0.0.1:%d" % probe.getsockname()[1]
    probe.close()
    flow = sluice.Dataflow("listen")
    lines = flow.read_socket("lines", address, listen=True, connections=1).collect("out")

    def send():
        for _ in range(600):  # until the job listens, at most 60 s
            try:
                with socket.create_connection(("127.0.0.1", int(address.split(":")[1])), 1) as c:
                    c.sendall(b"x\ny\n")
                    return
            except OSError:
                threading.Event().wait(0.1)

    client = threading.Thread(target=send, daemon=True)
    client.start()
    flow.run()
    client.join(60)
    assert lines.items() == ["x", "y"]


def test_an_address_that_is_none_is_refused():
    with pytest.raises(ValueError, match="'nowhere' is no address"):
        sluice.Dataflow("bad").read_socket("lines", "nowhere")


def test_csv_records_and_dicts_cross_processes(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text("name,n\na,1\nb,2\n")
    script = tmp_path / "job.py"
    script.write_text(
        "import json, sluice\n"
        "flow = sluice.Dataflow('records')\n"
        f"rows = flow.read_csv('rows', {str(path)!r})\n"
        "out = rows.map('tag', lambda r: {**r, 'tagged': (r['n'], b'x')}).collect('out')\n"
        "flow.run('processes')\n"
        "print(repr(out.items()))\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == repr(
        [{"name": "a", "n": 1, "tagged": (1, b"x")}, {"name": "b", "n": 2, "tagged": (2, b"x")}]
    )
