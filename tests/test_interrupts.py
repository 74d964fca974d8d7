"""How tinynas's processes stop (`tinynas.interrupts`): a child started with `die_with_parent` dies when its parent
is killed with SIGKILL, as the search's workers and the service's re-wear child must (no orphan keeps writing)."""

import os
import signal
import subprocess
import sys
import time

PARENT = """
import subprocess, sys, time
from tinynas.interrupts import die_with_parent
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], preexec_fn=die_with_parent)
print(child.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"  # a zombie has died (its reaper is init)
    except OSError:
        return False


def test_a_child_dies_with_its_parent_even_on_sigkill():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        assert _alive(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(30)
        deadline = time.monotonic() + 30
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the child outlived its SIGKILLed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
