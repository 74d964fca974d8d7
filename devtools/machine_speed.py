"""How much slower than an idle development machine this one runs now: what tests scale wall-time budgets by.

A search budget is wall time, so on a loaded core (or a Pi) fewer candidates finish in it; a test that needs a few
to finish scales its budget with `slowdown()` instead of asserting on a fixed figure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

_WORK = """
import time
import numpy as np
a = np.random.default_rng(0).normal(size=(200, 200)).astype(np.float32)
started = time.perf_counter()
for _ in range(200):
    a = np.tanh(a @ a * 0.01)
total = 0
for i in range(300_000):
    total += i * i
print(time.perf_counter() - started)
"""
REFERENCE_SECONDS = 0.12  # _WORK on an idle two-core development machine, two at once
# One BLAS thread per process: otherwise the measure is of thread oversubscription, not of the machine.
_ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


REMEMBER_SECONDS = 30.0
"""A measure is reused this long: it takes 3 s, and helpers that wait (a read, a service's state) ask for it at every
call; the load it measures is that of the minutes around it (the search budgets it scales last 10-60 s)."""
_measured: dict[int, tuple[float, float]] = {}  # workers -> (when, slowdown)


def slowdown(workers: int = 2) -> float:
    """How much slower than an idle development machine this one runs now (>= 1): budgets scale with it.

    A search budget is wall time, so on a loaded core (or a Pi) fewer candidates finish in it. The
    workload runs in `workers` processes at once, as the search's workers do, so the measure sees the
    cores they will share (e.g. one core under `taskset -c 0` with another program busy on it).
    """
    remembered = _measured.get(workers)
    if remembered is not None and time.monotonic() - remembered[0] < REMEMBER_SECONDS:
        return remembered[1]
    seconds = []
    # Three samples a second apart, the fastest kept: the sustained load, not a moment's (two xdist workers starting
    # journeys at once measured 7-10x back to back, 3-4x over the minutes their searches ran, and each budget was
    # scaled by the moment's figure).
    for sample in range(3):
        if sample:
            time.sleep(1.0)
        runs = [subprocess.Popen([sys.executable, "-c", _WORK], stdout=subprocess.PIPE, text=True, env=_ONE_THREAD)
                for _ in range(workers)]
        seconds.append(max(float(run.communicate()[0]) for run in runs))
    value = max(1.0, min(seconds) / REFERENCE_SECONDS)
    _measured[workers] = (time.monotonic(), value)
    return value
