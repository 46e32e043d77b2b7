"""A Ctrl-C (SIGINT) during `run` stops the job, which drains: `run` raises
KeyboardInterrupt once it ended, and what reached the sinks is readable."""

import signal
import subprocess
import sys
import threading


def test_ctrl_c_drains_a_job_and_raises_keyboard_interrupt(tmp_path):
    script = tmp_path / "endless.py"
    script.write_text(
        "import itertools, signal, sys, time\n"
        "import sluice\n"
        # A test runner may start this with SIGINT ignored; a terminal's Ctrl-C is not.
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "def endless():\n"
        "    for n in itertools.count():\n"
        "        if n == 1000:\n"
        "            print('running', flush=True)\n"
        "        time.sleep(0.0005)\n"
        "        yield n\n"
        "flow = sluice.Dataflow('endless')\n"
        "out = flow.source('numbers', endless()).map('same', lambda n: n).collect('out')\n"
        "try:\n"
        "    flow.run()\n"
        "except KeyboardInterrupt:\n"
        "    items = out.items()\n"
        "    print('interrupted', len(items), items == list(range(len(items))))\n"
    )
    job = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(60, job.kill)  # a job that never starts or never stops
    watchdog.start()
    try:
        assert job.stdout.readline().strip() == "running"
        job.send_signal(signal.SIGINT)
        out, err = job.communicate(timeout=60)
    finally:
        watchdog.cancel()
        if job.poll() is None:
            job.kill()
            job.communicate()
    assert job.returncode == 0, err
    interrupted, count, in_order = out.split()
    assert interrupted == "interrupted" and int(count) >= 1000 and in_order == "True"
