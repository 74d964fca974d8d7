"""A sweep on one and two Ray nodes, the local engine beside them, and what a node failure costs.

Question (issue 58): does `tinynas sweep --engine ray` spread a grid over nodes (goal: >= 1.8x faster on two nodes
of one core each than on one), and what does a node that dies mid-sweep cost?

- The grid: N cells (seeds 0..N-1) of a `fast` search on built-in synthetic vibration (small windows, 4 epochs per
  candidate, a generous budget): each search ends when it has raced its whole budget frontier, not at a deadline, so
  its wall time is its work and the ratios measure the engine, not the budget.
- Runs, one after the other on this machine (nothing else running): the local engine with `--parallel 1` and `2`;
  Ray on a one-node cluster of 1 CPU and on two nodes of 1 CPU each (`ray.cluster_utils.Cluster`: real raylets and
  workers, both on this machine, whose 2 cores are the two nodes); then two nodes with the second killed (no grace)
  once a cell on it has finished 2 trials. Every run's wall time is the driver's, cluster start excluded (reported).
- What the failure cost: the extra wall time against the two-node run, the trials the moved cell had finished (kept)
  and those running when its node died (trained again).

Run: `nice python benchmarks/sweep.py [--cells 6]` (about 12 minutes on 2 cores). Writes
benchmarks/results/sweep.md and .json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinynas.cli.sweeping import search_options  # noqa: E402
from tinynas.sweep.grid import grid_from  # noqa: E402
from tinynas.sweep.ray_engine import run_on_ray  # noqa: E402
from tinynas.sweep.run import Sweep  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
FIXED = {"data": "synthetic:vibration?windows_per_class=12&length=128&windows_per_recording=3", "ram": "4k",
         "flash": "64k", "macs": "2M", "strategy": "fast", "epochs": 4, "final_epochs": 4, "budget": "20m",
         "workers": "1", "kernels": "3", "selection": "validation"}


def _grid(cells: int):
    return grid_from({"grid": {"seed": list(range(cells))}, "fixed": FIXED}, search_options()[1])


def _trials(journal: Path) -> tuple[int, int]:
    """(finished, running) trials in a journal."""
    if not journal.exists():
        return 0, 0
    with contextlib.closing(sqlite3.connect(f"file:{journal}?mode=ro", uri=True, timeout=5)) as db:
        rows = db.execute("SELECT state FROM trials").fetchall()
    running = sum(state == "running" for (state,) in rows)
    return len(rows) - running, running


def _summary(sweep: Sweep, wall: float, **more) -> dict:
    return {"wall_seconds": round(wall, 1), "cells_done": sweep.counts()["done"],
            "cell_seconds": [cell.seconds for cell in sweep.cells],
            "attempts": [cell.attempts for cell in sweep.cells], **more}


def local(cells: int, parallel: int, scratch: Path) -> dict:
    sweep = Sweep(scratch / f"local-{parallel}", _grid(cells))
    started = time.monotonic()
    sweep.run(parallel=parallel, progress=lambda line: print(f"    {line}", file=sys.stderr, flush=True))
    return _summary(sweep, time.monotonic() - started, engine=f"local --parallel {parallel}")


def on_ray(cells: int, nodes: int, scratch: Path, kill: bool = False) -> dict:
    from ray.cluster_utils import Cluster

    began = time.monotonic()
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "_system_config": {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}})
    workers = [cluster.add_node(num_cpus=1) for _ in range(nodes - 1)]
    cluster_seconds = time.monotonic() - began
    name = f"ray-{nodes}" + ("-killed" if kill else "")
    sweep = Sweep(scratch / name, _grid(cells))
    failure: dict = {}

    def killer() -> None:  # once a cell on the second node has 2 finished trials, that node dies
        while not failure:
            for cell in sweep.cells:
                journal = sweep.out / f"cell-{cell.index:03d}" / "journal.sqlite"
                if cell.node == workers[0].node_id and cell.status == "running" and _trials(journal)[0] >= 2:
                    finished, running = _trials(journal)
                    failure.update(cell=cell.index, finished=finished, running=running,
                                   at_seconds=round(time.monotonic() - started, 1))
                    cluster.remove_node(workers[0], allow_graceful=False)
                    return
            time.sleep(0.2)

    try:
        started = time.monotonic()
        watcher = threading.Thread(target=killer, daemon=True) if kill else None
        if watcher:
            watcher.start()
        run_on_ray(sweep, cluster.address, progress=lambda line: print(f"    {line}", file=sys.stderr, flush=True))
        wall = time.monotonic() - started
    finally:
        failure.setdefault("cell", None)
        cluster.shutdown()
    more: dict = {"engine": f"ray, {nodes} node(s) of 1 CPU" + (", the second killed mid-sweep" if kill else ""),
                  "cluster_start_seconds": round(cluster_seconds, 1)}
    if kill and failure.get("cell"):
        journal = sweep.out / f"cell-{failure['cell']:03d}" / "journal.sqlite"
        more["failure"] = {**failure, "final_finished": _trials(journal)[0]}
    return _summary(sweep, wall, **more)


def write(runs: dict, args, machine: str) -> str:
    one, two = runs.get("ray-1"), runs.get("ray-2")
    lines = ["# Sweeps: one and two Ray nodes, the local engine beside them", "",
             f"`nice python benchmarks/sweep.py --cells {args.cells}` on {machine}; nothing else ran on the machine. "
             f"The grid: {args.cells} cells (seeds 0-{args.cells - 1}) of `tinynas search` with "
             + ", ".join(f"{k}={v}" for k, v in FIXED.items())
             + ": each search ends when it has raced its frontier (not at the budget), so wall time is work. "
             "Ray's nodes are `ray.cluster_utils.Cluster` nodes of 1 CPU each (real raylets and workers) on this "
             "machine's 2 cores; wall time is the driver's, from the sweep's start to its last cell, the cluster's "
             "start apart.", "",
             "| engine | wall | ratio to 1 Ray node | cells done | mean cell wall | cluster start |",
             "|---|---|---|---|---|---|"]
    for run in runs.values():
        ratio = f"{one['wall_seconds'] / run['wall_seconds']:.2f}x" if one else "-"
        cells = [s for s in run["cell_seconds"] if s]
        mean = sum(cells) / len(cells) if cells else 0
        start = f"{run['cluster_start_seconds']:.1f} s" if "cluster_start_seconds" in run else "-"
        lines.append(f"| {run['engine']} | {run['wall_seconds']:.0f} s | {ratio} | {run['cells_done']}/{args.cells} "
                     f"| {mean:.0f} s | {start} |")
    if one and two:
        speedup = one["wall_seconds"] / two["wall_seconds"]
        lines += ["", f"**Two nodes against one: {speedup:.2f}x** (goal >= 1.8x: "
                      f"{'met' if speedup >= 1.8 else 'not met'})."]
    killed = runs.get("ray-2-killed")
    if killed and two:
        failure = killed.get("failure") or {}
        lines += ["", "## A node killed mid-sweep", ""]
        if failure:
            lines.append(
                f"The second node was killed {failure['at_seconds']:.0f} s into the sweep, while cell "
                f"{failure['cell']} ran on it with {failure['finished']} trials finished and {failure['running']} "
                f"training. Ray ran the cell again on the head node from the journal the driver held: the "
                f"{failure['finished']} finished trials were kept, the {failure['running']} training were trained "
                f"again; the cell ended with {failure['final_finished']} finished trials. The sweep took "
                f"{killed['wall_seconds']:.0f} s against {two['wall_seconds']:.0f} s without the failure "
                f"({killed['wall_seconds'] - two['wall_seconds']:+.0f} s; after the kill the remaining cells had "
                f"one node). {killed['cells_done']}/{args.cells} cells done; attempts per cell: "
                f"{killed['attempts']}.")
        else:
            lines.append("No cell had finished 2 trials on the second node before the sweep ended: nothing to kill.")
    lines += ["", "Runs in the table's order; the first (`local --parallel 1`) starts from cold file caches, so "
                  "compare the Ray runs with each other. When a node dies, Ray's driver prints the dead raylet's last "
                  "log lines on the terminal (its own monitor; `log_to_driver=False` does not cover it)."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=6)
    args = parser.parse_args()
    try:
        import ray  # noqa: F401
    except ImportError:
        print("Ray is not installed (pip install 'tinynas[ray]'): nothing to benchmark")
        return 0
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    runs: dict = {}
    with tempfile.TemporaryDirectory(prefix="tinynas-bench-sweep-") as scratch_name:
        scratch = Path(scratch_name)
        for key, run in (("local-1", lambda: local(args.cells, 1, scratch)),
                         ("local-2", lambda: local(args.cells, 2, scratch)),
                         ("ray-1", lambda: on_ray(args.cells, 1, scratch)),
                         ("ray-2", lambda: on_ray(args.cells, 2, scratch)),
                         ("ray-2-killed", lambda: on_ray(args.cells, 2, scratch, kill=True))):
            print(f"[{time.strftime('%H:%M:%S')}] {key}", file=sys.stderr, flush=True)
            runs[key] = run()
            print(f"    {runs[key]['wall_seconds']:.0f} s", file=sys.stderr, flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sweep.json").write_text(json.dumps({"args": vars(args), "machine": machine, "fixed": FIXED,
                                                    "runs": runs}, indent=1) + "\n")
    text = write(runs, args, machine)
    (RESULTS / "sweep.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
