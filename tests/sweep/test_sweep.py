"""`tinynas sweep`: every cell searched in its own folder, a failing cell recorded while the sweep goes on, a driver
killed outright resumed (only what was left searched again), one table. One sweep for all of it, its subject the
sweep's bookkeeping: the first cell is a real (tiny) search through the real command, the cell killed mid-search a
stand-in (`Sweep.command`, tests/support/stand_in_search.py) that leaves a copy of the first cell's finished folder,
so that resume and the table read a real search's files; the failing cells run the real search and fail as it does."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from devtools.machine_speed import slowdown

SUPPORT = Path(__file__).resolve().parents[1] / "support"

DATA = "synthetic:vibration?windows_per_class=8&length=64&windows_per_recording=2"
FIXED = ('[fixed]\nram = "2200"\nflash = "64k"\nmacs = "1M"\nstrategy = "fast"\nepochs = 2\nfinal_epochs = 2\n'
         'budget = "2h"\ncandidates = 3\nworkers = "1"\nkernels = "3"\nselection = "validation"\n')


def _sweep(*args, command=None):
    """`tinynas sweep ARGS`: the real command, or with `command` as its cells' program (support/sweep_driver.py)."""
    program = ["-m", "tinynas.cli"] if command is None else [str(SUPPORT / "sweep_driver.py"), json.dumps(command)]
    return subprocess.run([sys.executable, *program, "sweep", *args], capture_output=True, text=True,
                          timeout=600 * slowdown())


@pytest.mark.slow
def test_a_sweep_killed_outright_resumes_records_a_failing_cell_and_tables_every_cell(tmp_path):
    grid = tmp_path / "grid.toml"
    # The data as [[cells]] entries (options varied together; here one each), crossed with the seeds: the same four
    # cells as `data = [...]` in [grid], the data slowest.
    grid.write_text(f'[[cells]]\ndata = "{DATA}"\n[[cells]]\ndata = "npz:{tmp_path}/missing.npz"\n'
                    '[grid]\nseed = [0, 1]\n' + FIXED)
    out = tmp_path / "sweep"
    # Cell 2 (the data, seed 1) is the stand-in: a copy of cell 1's finished search, held until the driver is dead.
    hold = tmp_path / "hold"
    hold.touch()
    command = [sys.executable, str(SUPPORT / "stand_in_search.py"), "--source", str(out / "cell-001"),
               "--fake", f"data={DATA}", "--fake", "seed=1", "--hold", str(hold), "--"]
    driver = subprocess.Popen([sys.executable, str(SUPPORT / "sweep_driver.py"), json.dumps(command), "sweep",
                               str(grid), "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300 * slowdown()

    def statuses():
        try:
            return [cell["status"] for cell in json.loads((out / "sweep.json").read_text())["cells"]]
        except (OSError, ValueError):
            return []

    def holding():  # the first cell done, the second's search under way (its journal written)
        return statuses()[:2] == ["done", "running"] and (out / "cell-002" / "journal.sqlite").exists()

    while not holding():
        assert time.monotonic() < deadline and driver.poll() is None, statuses()
        time.sleep(0.2)
    first_card = (out / "cell-001" / "card.json").read_bytes()
    os.kill(driver.pid, signal.SIGKILL)  # no word to its cells: they die with it
    driver.wait(10)
    hold.unlink()  # a cell that outlived its driver would now finish: it must not (its folder is checked below)
    again = _sweep(str(grid), "--out", str(out))
    assert again.returncode == 2 and again.stderr.startswith("tinynas: error:") and "not empty" in again.stderr
    other = tmp_path / "other.toml"
    other.write_text(f'[grid]\ndata = ["{DATA}"]\nseed = [0, 2]\n' + FIXED)
    refused = _sweep(str(other), "--resume", "--out", str(out))
    assert refused.returncode == 2 and "a sweep of another grid" in refused.stderr

    assert not (out / "cell-002" / "card.json").exists()  # killed with the driver, mid-cell: never finished

    resumed = _sweep(str(grid), "--resume", "--out", str(out), command=command)
    assert resumed.returncode == 1, resumed.stderr  # two cells failed; the sweep went on past them
    assert (out / "cell-002" / "search.log").read_text().splitlines()[-2].endswith("--resume")  # from its journal
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


def test_a_sweep_s_cells_run_the_real_search_unless_given_another_command(tmp_path):
    """The seam's default is the real `tinynas search` (the stand-in above replaces it): a cell whose data is missing
    fails with the search's own one line, cheaply (nothing is trained)."""
    from tinynas.cli.sweeping import search_options
    from tinynas.modes import CellStatus
    from tinynas.sweep.grid import grid_from
    from tinynas.sweep.run import Sweep

    fixed = {"data": f"npz:{tmp_path}/missing.npz", "ram": "2200", "flash": "64k", "macs": "1M"}
    grid = grid_from({"grid": {"seed": [0]}, "fixed": fixed}, search_options()[1])
    sweep = Sweep(tmp_path / "real", grid)
    assert sweep.command is None
    sweep.run()
    assert sweep.cells[0].status == CellStatus.FAILED and "missing.npz" in sweep.cells[0].error
    stand_in = Sweep(tmp_path / "stand-in", grid, command=[sys.executable, "-c", "print('a stand-in ran')"])
    stand_in.run()
    assert stand_in.cells[0].status == CellStatus.DONE
    assert (tmp_path / "stand-in" / "cell-001" / "search.log").read_text() == "a stand-in ran\n"
