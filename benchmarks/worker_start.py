"""How long the search's workers take to start and to be replaced, this checkout against another.

    git worktree add /tmp/tinynas-base <commit>
    nice python benchmarks/worker_start.py --base /tmp/tinynas-base --runs 3

A worker imports TensorFlow before its first candidate, and is recycled every few candidates (XLA's compiled
programs are never freed), so a search pays the import again and again. Each checkout runs the same thing in a
fresh interpreter, alternating which goes first: a pool of `--workers` workers recycled after 2 candidates trains
`--jobs` one-epoch candidates on a small synthetic set, one at a time per worker. Reported per run: the wall
time from the pool's start to its last result, each worker's first-job wait, the TensorFlow import each worker
measured itself, and the CPU time of the whole process tree (the workers, and the launcher where there is one,
are reaped before it is read). Results: benchmarks/results/worker-start.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

from checkouts import run_child, short_commit

RESULTS = Path(__file__).parent / "results"
ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import json, resource, sys, time
from tinynas.space import Architecture
from tinynas.study import pool as pools
from tinynas.training.job import TrainJob
from tinynas.trial import Fidelity

def main():
    data, workers, jobs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    started = time.perf_counter()
    pool = pools.WorkerPool(workers, max_jobs=2).warm()
    waits, imports, private, done, number = [], [], [], 0, 0
    submitted = {}
    while done < jobs:
        while pool.idle() and number < jobs:
            arch = Architecture(64, 1, 4, k=1 + number % 3, c=1)
            pool.submit(TrainJob(number, arch, Fidelity(epochs=1, batch_size=8, learning_rate=0.01), number, data,
                                 tuple(range(0, 16, 2)), tuple(range(1, 16, 2))))
            submitted[number] = time.perf_counter()
            number += 1
        for result in pool.wait(0.5):
            assert result.ok, result.error
            done += 1
            if "tensorflow_import" in result.timings:
                imports.append(result.timings["tensorflow_import"])
                waits.append(time.perf_counter() - submitted[result.job_id])
                private.append(result.memory.get("private", 0) / 2**20)
    wall = time.perf_counter() - started
    pool.close()
    getattr(pools, "stop_launcher", lambda: None)()
    cpu = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
              for f in ("ru_utime", "ru_stime"))
    print(json.dumps({"wall": wall, "cpu": cpu, "first_job_waits": waits, "tensorflow_imports": imports,
                      "private_mib_after_first_job": private,
                      "workers_started": pool.spawned}))

if __name__ == "__main__":
    main()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="another checkout (a git worktree)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--shared", default="nothing else ran", help="what shared the machine, for the results file")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tinynas.data.synthetic import vibration

    checkouts = {"base": args.base.resolve(), "this": ROOT}
    commits = {name: short_commit(path) for name, path in checkouts.items()}
    runs = []
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch) / "windows.npz"
        vibration(windows_per_class=4, length=64, windows_per_recording=2, seed=0).save(data)
        for run in range(args.runs):
            order = ["base", "this"] if run % 2 == 0 else ["this", "base"]
            for name in order:
                figures = run_child(checkouts[name], _CHILD, str(data), str(args.workers), str(args.jobs),
                                    caller="worker_start.py")
                runs.append({"run": run, "checkout": name, **figures})
                print(f"run {run} {name}: {figures['wall']:.1f} s wall, {figures['cpu']:.1f} s CPU, "
                      f"{figures['workers_started']} workers started", flush=True)
    write(runs, commits, args)


def write(runs: list[dict], commits: dict, args: argparse.Namespace) -> None:
    RESULTS.mkdir(exist_ok=True)
    meta = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            "commits": commits, "workers": args.workers, "jobs": args.jobs, "runs": args.runs}
    (RESULTS / "worker-start.json").write_text(json.dumps({**meta, "results": runs}, indent=1) + "\n")
    lines = ["# Worker start: spawned workers against workers forked from the launcher", "",
             f"`python benchmarks/worker_start.py --base <worktree> --runs {args.runs}` on {meta['machine']}: "
             f"base {commits['base']}, this {commits['this']}. A pool of {args.workers} workers recycled after 2 "
             f"candidates trains {args.jobs} one-epoch candidates (synthetic vibration, 64 samples, 4 classes); "
             f"each checkout in a fresh interpreter, alternating which goes first. CPU: the whole process tree. "
             f"What shared the machine: {args.shared}.", "",
             "| checkout | median wall (s) | median CPU (s) | workers started | TensorFlow import per worker (s) | "
             "first-job wait per worker (s) | worker's private memory after its first job (MiB) |",
             "|---|---|---|---|---|---|---|"]
    for name in ("base", "this"):
        mine = [r for r in runs if r["checkout"] == name]
        imports = [value for r in mine for value in r["tensorflow_imports"]]
        waits = [value for r in mine for value in r["first_job_waits"]]
        private = [value for r in mine for value in r["private_mib_after_first_job"]]
        lines.append(f"| {name} ({commits[name]}) | {statistics.median([r['wall'] for r in mine]):.1f} | "
                     f"{statistics.median([r['cpu'] for r in mine]):.1f} | {mine[0]['workers_started']} | "
                     f"{min(imports):.2f}-{max(imports):.2f} | {min(waits):.1f}-{max(waits):.1f} | "
                     f"{min(private):.0f}-{max(private):.0f} |")
    lines += ["", "Per run:", "", "| run | checkout | wall (s) | CPU (s) |", "|---|---|---|---|"]
    lines += [f"| {r['run']} | {r['checkout']} | {r['wall']:.1f} | {r['cpu']:.1f} |" for r in runs]
    (RESULTS / "worker-start.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
