"""Memory and throughput of `tinynas search`: parent + worker RSS, and worker/thread layouts.

    python benchmarks/search_resources.py --data "synthetic:emg?classes=26&windows_per_class=20" \
        --target LSM6DSO16IS --epochs 3

Runs the same paper-strategy search three times, side by side in one process: one worker with
one TensorFlow thread, one worker with two threads, two workers with one thread each. A
sampler reads /proc every 0.2 s for the study process and its workers (RSS, private =
anonymous, file-backed). Writes benchmarks/results/search_resources.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from tinynas.cost.targets import get_target
from tinynas.data.spec import load_windows
from tinynas.process_memory import memory_bytes
from tinynas.progress import Progress
from tinynas.study import Study
from tinynas.trial import Fidelity

RESULTS = Path(__file__).parent / "results"
LAYOUTS = ((1, 1), (1, 2), (2, 1))  # (workers, threads per worker)


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


class Sampler(threading.Thread):
    """Peak memory of this process and of its child processes, sampled every 0.2 s."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.parent: dict[str, int] = {}
        self.worker: dict[str, int] = {}
        self.total_rss = 0
        self._halt = threading.Event()

    def run(self) -> None:
        me = os.getpid()
        while not self._halt.is_set():
            parent = memory_bytes()
            workers = [memory_bytes(pid) for pid in _children(me)]
            for key, value in parent.items():
                self.parent[key] = max(self.parent.get(key, 0), value)
            for memory in workers:
                for key, value in memory.items():
                    self.worker[key] = max(self.worker.get(key, 0), value)
            self.total_rss = max(self.total_rss, parent.get("rss", 0) + sum(m.get("rss", 0) for m in workers))
            time.sleep(0.2)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="synthetic:emg?classes=26&windows_per_class=20&seed=0")
    parser.add_argument("--target", default="LSM6DSO16IS")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--budget", type=float, default=900.0)
    args = parser.parse_args()
    windows = load_windows(args.data)
    target = get_target(args.target)
    rows = []
    for workers, threads in LAYOUTS:
        with tempfile.TemporaryDirectory() as out:
            sampler = Sampler()
            sampler.start()
            started = time.perf_counter()
            result = Study(out, windows, target, strategy="paper", budget_seconds=args.budget, seed=0,
                           fidelity=Fidelity(args.epochs, 16, 1e-3), final_fidelity=Fidelity(args.epochs, 16, 0.01),
                           workers=workers, threads_per_worker=threads, data_spec=args.data,
                           progress=Progress(interactive=False), augment="none", kernels="3").run()
            wall = time.perf_counter() - started
            sampler.stop()
        search = result.card.search
        rows.append({"workers": workers, "threads": threads, "search_seconds": search["seconds"],
                     "total_seconds": round(wall, 1), "trained": search["trained"],
                     "seconds_per_candidate": search["seconds"] / max(1, search["trained"]),
                     "winner": result.winner.architecture.name(),
                     "int8_test_accuracy": result.card.int8_test_accuracy,
                     "parent": sampler.parent, "worker": sampler.worker, "total_rss": sampler.total_rss})
        print(f"{workers} worker(s) x {threads} thread(s): {search['trained']} candidates in "
              f"{search['seconds']:.0f} s; parent RSS {sampler.parent.get('rss', 0) >> 20} MiB, "
              f"worker RSS {sampler.worker.get('rss', 0) >> 20} MiB "
              f"(private {sampler.worker.get('private', 0) >> 20} MiB)", file=sys.stderr)
    base = rows[0]["seconds_per_candidate"]
    mib = lambda value: f"{value / 2**20:.0f}"  # noqa: E731
    lines = [
        "# Search resources: memory and worker layout",
        "",
        f"Command: `python benchmarks/search_resources.py --data \"{args.data}\" --target {args.target} "
        f"--epochs {args.epochs}` on this machine ({os.cpu_count()} cores, x86_64, TensorFlow wheel for x86_64).",
        f"Same paper-strategy search ({windows.window_length}x{windows.channels}, {windows.classes} classes, "
        f"{len(windows)} windows, {args.epochs} epochs per candidate) under {target.name}, "
        "run three times side by side.",
        "",
        "| workers x threads | candidates | search s | s / candidate | speed vs 1x1 | parent RSS MiB | "
        "worker RSS MiB (private + file) | all processes RSS MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['workers']} x {row['threads']} | {row['trained']} | {row['search_seconds']:.0f} | "
            f"{row['seconds_per_candidate']:.2f} | {base / row['seconds_per_candidate']:.2f}x | "
            f"{mib(row['parent'].get('rss', 0))} | {mib(row['worker'].get('rss', 0))} "
            f"({mib(row['worker'].get('private', 0))} + {mib(row['worker'].get('file', 0))}) | "
            f"{mib(row['total_rss'])} |")
    lines += ["", "Private = anonymous memory (heap, TensorFlow's allocations); file = pages of shared libraries "
              "(mostly libtensorflow_cc), shared between workers and reclaimable by the kernel.",
              "Workers are recycled after 10 candidates or 400 MiB private memory."]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "search_resources.json").write_text(json.dumps({"command_args": vars(args), "rows": rows},
                                                              indent=2) + "\n")
    (RESULTS / "search_resources.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
