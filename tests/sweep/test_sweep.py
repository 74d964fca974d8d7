"""`tinynas sweep` with real (tiny) searches: every cell searched in its own folder, a failing cell recorded while the
sweep goes on, a driver killed outright resumed (only what was left searched again), one table. One sweep for all of
it: each cell is a real search (a TensorFlow worker, its first epochs traced), the slow tier's most costly unit."""

import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from devtools.machine_speed import slowdown

DATA = "synthetic:vibration?windows_per_class=8&length=64&windows_per_recording=2"
FIXED = ('[fixed]\nram = "2200"\nflash = "64k"\nmacs = "1M"\nstrategy = "fast"\nepochs = 2\nfinal_epochs = 2\n'
         'budget = "2h"\ncandidates = 3\nworkers = "1"\nkernels = "3"\nselection = "validation"\n')


def _sweep(*args):
    return subprocess.run([sys.executable, "-m", "tinynas.cli", "sweep", *args], capture_output=True, text=True,
                          timeout=600 * slowdown())


@pytest.mark.slow
def test_a_sweep_killed_outright_resumes_records_a_failing_cell_and_tables_every_cell(tmp_path):
    grid = tmp_path / "grid.toml"
    # The data as [[cells]] entries (options varied together; here one each), crossed with the seeds: the same four
    # cells as `data = [...]` in [grid], the data slowest.
    grid.write_text(f'[[cells]]\ndata = "{DATA}"\n[[cells]]\ndata = "npz:{tmp_path}/missing.npz"\n'
                    '[grid]\nseed = [0, 1]\n' + FIXED)
    out = tmp_path / "sweep"
    driver = subprocess.Popen([sys.executable, "-m", "tinynas.cli", "sweep", str(grid), "--out", str(out)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300 * slowdown()

    def statuses():
        try:
            return [cell["status"] for cell in json.loads((out / "sweep.json").read_text())["cells"]]
        except (OSError, ValueError):
            return []

    while statuses()[:2] != ["done", "running"]:  # the first cell done, the second under way
        assert time.monotonic() < deadline and driver.poll() is None, statuses()
        time.sleep(0.2)
    first_card = (out / "cell-001" / "card.json").read_bytes()
    os.kill(driver.pid, signal.SIGKILL)  # no word to its cells: they die with it
    driver.wait(10)
    again = _sweep(str(grid), "--out", str(out))
    assert again.returncode == 2 and again.stderr.startswith("tinynas: error:") and "not empty" in again.stderr
    other = tmp_path / "other.toml"
    other.write_text(f'[grid]\ndata = ["{DATA}"]\nseed = [0, 2]\n' + FIXED)
    refused = _sweep(str(other), "--resume", "--out", str(out))
    assert refused.returncode == 2 and "a sweep of another grid" in refused.stderr

    resumed = _sweep(str(grid), "--resume", "--out", str(out))
    assert resumed.returncode == 1, resumed.stderr  # two cells failed; the sweep went on past them
    assert statuses() == ["done", "done", "failed", "failed"]
    state = json.loads((out / "sweep.json").read_text())
    assert all("missing.npz" in cell["error"] for cell in state["cells"][2:])
    assert (out / "cell-001" / "card.json").read_bytes() == first_card  # the finished cell was not searched again
    assert "cell 1/4 started" not in resumed.stderr and "cell 2/4 started" in resumed.stderr
    assert "cell 4/4 failed" in resumed.stderr and "2 done, 2 failed, 0 left" in resumed.stderr
    rows = list(csv.DictReader((out / "sweep.csv").open()))
    assert len(rows) == 4 and all(0 <= float(row["accuracy"]) <= 1 for row in rows[:2])
    assert all(int(row["ram_bytes"]) <= 2200 for row in rows[:2]) and rows[2]["accuracy"] == ""
    table = (out / "sweep.md").read_text()
    assert table == resumed.stdout and "## Over seeds" in table and "2 done, 2 failed" in table
    assert "| cell | data | seed |" in table and list(rows[0])[:2] == ["data", "seed"]
    assert "(sweep.png)" in table and (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
