"""`tinynas sweep --engine ray` on a real local Ray cluster of two nodes (`ray.cluster_utils.Cluster`: a head and a
worker node, their own raylets and worker processes): a node killed mid-search, its cell finished on the other node
from the journal the driver kept (the trials finished before the kill are not trained again), the driver killed and
`--resume`d, every journal whole, and the same grid through the local engine giving the same searches. One sweep for
all of it, its subject the engine's bookkeeping: the cell moved between nodes is a real search, the other a stand-in
(`Sweep.command`, tests/support/stand_in_search.py: a copy of one real finished search built once), run by the same
Ray tasks; the head starts alone, so that the stand-in takes its one CPU and the real cell the worker node's."""

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from devtools.machine_speed import slowdown
from tinynas.data.synthetic import vibration

SUPPORT = Path(__file__).resolve().parents[1] / "support"

ray_cluster = pytest.importorskip("ray.cluster_utils")  # in the test extra: CI installs it

GRID = ('[grid]\ndata = ["npz:{data}"]\nseed = [0, 1]\n'
        '[fixed]\nram = "2200"\nflash = "64k"\nmacs = "1M"\nstrategy = "fast"\nepochs = 2\nfinal_epochs = 2\n'
        'budget = "2h"\ncandidates = 4\nworkers = "1"\nkernels = "3"\nselection = "validation"\n')


FIXED = ["--ram", "2200", "--flash", "64k", "--macs", "1M", "--strategy", "fast", "--epochs", "2", "--final-epochs",
         "2", "--budget", "2h", "--workers", "1", "--kernels", "3", "--selection", "validation"]
DATA = "synthetic:vibration?windows_per_class=8&length=64&windows_per_recording=2"


@pytest.fixture(scope="module")
def finished_search(built_once):
    """A real finished search of one candidate, the grid's other options: what the stand-in cell copies."""
    def search(folder):
        subprocess.run([sys.executable, "-m", "tinynas.cli", "search", "--data", DATA, *FIXED, "--candidates", "1",
                        "--out", str(folder / "run")], check=True, capture_output=True, timeout=600 * slowdown())

    return built_once("sweep-stand-in-source", search) / "run"


def _state(out):
    try:
        return json.loads((out / "sweep.json").read_text())["cells"]
    except (OSError, ValueError, KeyError):
        return []


def _finished(journal):
    """The journal's finished trials as (number, architecture, score, updated): a trial trained again differs."""
    if not journal.exists():
        return []
    with contextlib.closing(sqlite3.connect(f"file:{journal}?mode=ro", uri=True)) as db:
        return db.execute("SELECT number, architecture, score, updated FROM trials "
                          "WHERE state IN ('complete', 'failed') ORDER BY number").fetchall()


def _finished_so_far(journal):
    """`_finished` of a journal a search may be creating this moment: its file exists before its tables do (a run
    here read it in between: "no such table: trials"), which is no finished trial yet."""
    try:
        return _finished(journal)
    except sqlite3.OperationalError:
        return []


def _whole(journal):
    with contextlib.closing(sqlite3.connect(f"file:{journal}?mode=ro", uri=True)) as db:
        return db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _settings(journal):
    with contextlib.closing(sqlite3.connect(f"file:{journal}?mode=ro", uri=True)) as db:
        return {key: value for key, value in db.execute("SELECT key, value FROM meta")
                if key in ("settings", "split", "preprocessing")}


def _spec(journal):
    with contextlib.closing(sqlite3.connect(f"file:{journal}?mode=ro", uri=True)) as db:
        return db.execute("SELECT value FROM meta WHERE key = 'data_spec'").fetchone()[0]


def _names(folder):
    """A folder's own files and folders, but SQLite's companions of an open journal (a reader here makes them);
    not the trials' weights, whose number follows the search."""
    return sorted(path.name for path in folder.iterdir() if "journal.sqlite-" not in path.name)


def _wait_for(condition, what, driver, deadline):
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        assert driver is None or driver.poll() is None, f"the driver ended while waiting for {what}"
        time.sleep(0.2)


@pytest.mark.slow
def test_a_node_and_the_driver_killed_mid_sweep_lose_only_running_candidates(tmp_path, finished_search):
    data = tmp_path / "windows.npz"
    vibration(windows_per_class=8, length=64, windows_per_recording=2).save(data)
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID.format(data=data))
    out = tmp_path / "ray"
    deadline = time.monotonic() + 600 * slowdown()
    # Node death is noticed within ~3 s (not Ray's default 30 s of missed health checks): the test's clock.
    cluster = ray_cluster.Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "_system_config": {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}})
    driver = local = None
    # The first cell started (on the head, its only CPU) is the stand-in, held until the other, real, cell runs on
    # the worker node added then; a later sweep of the grid (resumed, or the local engine) stands in for that seed.
    claim, hold = tmp_path / "stand-in.seed", tmp_path / "stand-in.hold"
    hold.touch()
    command = [sys.executable, str(SUPPORT / "stand_in_search.py"), "--source", str(finished_search),
               "--claim", str(claim), "--hold", str(hold), "--"]
    try:
        argv = [sys.executable, str(SUPPORT / "sweep_driver.py"), json.dumps(command), "sweep", str(grid), "--out",
                str(out), "--engine", "ray", "--address", cluster.address]
        driver = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _wait_for(claim.exists, "the stand-in cell started on the head node", driver, deadline)
        worker = cluster.add_node(num_cpus=1)

        def real_on_worker():
            return any(cell["node"] == worker.node_id and cell["status"] == "running" for cell in _state(out))

        _wait_for(real_on_worker, "the real cell started on the worker node", driver, deadline)
        hold.unlink()  # the stand-in finishes: the head's CPU is free for the cell the worker's death moves

        def on_worker():
            cells = [cell for cell in _state(out) if cell["node"] == worker.node_id and cell["status"] == "running"]
            return cells and _finished_so_far(out / f"cell-{cells[0]['index']:03d}" / "journal.sqlite") and cells[0]

        _wait_for(on_worker, "a cell on the worker node with a finished trial", driver, deadline)
        moved = on_worker()
        assert str(moved["values"]["seed"]) != claim.read_text()  # the real search is the one the node's death moves
        # The data leaves the driver's disk: the cell searched again on the head node must get it from Ray.
        shipped = data.read_bytes()
        data.unlink()
        journal = out / f"cell-{moved['index']:03d}" / "journal.sqlite"
        cluster.remove_node(worker, allow_graceful=False)  # a power cut: raylet and workers killed
        before_node = _finished(journal)  # the trials the driver held when the node died (none can come after)

        def resumed_and_trained():
            cell = _state(out)[moved["index"] - 1]
            return cell["attempts"] >= 2 and cell["status"] == "running" and len(_finished(journal)) > len(
                before_node)

        _wait_for(resumed_and_trained, "the cell resumed on the head node and a trial more", driver, deadline)
        assert _finished(journal)[:len(before_node)] == before_node  # the finished trials kept, none trained again
        before_driver = _finished(journal)
        os.kill(driver.pid, signal.SIGKILL)  # the driver killed outright: its tasks end with it
        driver.wait(30)
        data.write_bytes(shipped)  # a resumed driver ships the data again
        # The same grid through the local engine (compared below), beside the resumed driver: one core each.
        local = subprocess.Popen([sys.executable, str(SUPPORT / "sweep_driver.py"), json.dumps(command), "sweep",
                                  str(grid), "--out", str(tmp_path / "local"), "--parallel", "2"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        resumed = subprocess.run([*argv, "--resume"], capture_output=True, text=True, timeout=600 * slowdown())
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        _, local_errors = local.communicate(timeout=600 * slowdown())
    finally:
        for process in (driver, local):
            if process is not None and process.poll() is None:
                process.kill()
        cluster.shutdown()

    cells = _state(out)
    assert [cell["status"] for cell in cells] == ["done", "done"]
    assert cells[moved["index"] - 1]["attempts"] >= 3  # first node, the head after it, the resumed driver
    assert _finished(journal)[:len(before_driver)] == before_driver
    for cell in cells:
        folder = out / f"cell-{cell['index']:03d}"
        assert _whole(folder / "journal.sqlite") and (folder / "card.json").exists()
    log = (out / f"cell-{moved['index']:03d}" / "search.log").read_text()
    assert "--- attempt 1 on node" in log and "--- attempt 2 on node" in log
    assert "started on node" in resumed.stderr and "2 done, 0 failed" in resumed.stdout

    # The same grid through the local engine: the same searches (each journal's settings: the data's digest, target,
    # seed, recipe; its split and preprocessing) with the same outputs. The spec names the node's copy of the data.
    # The real cell is searched for real there too; the stand-in's seed stands in again (a copy on either side).
    assert local.returncode == 0, local_errors[-3000:]
    for cell in cells:
        name = f"cell-{cell['index']:03d}"
        assert _settings(out / name / "journal.sqlite") == _settings(tmp_path / "local" / name / "journal.sqlite")
        assert "/tinynas-shipped-" in _spec(out / name / "journal.sqlite")
        assert _names(out / name) == _names(tmp_path / "local" / name)
