"""What one status-page request costs the service in the two views it computes every time, this checkout against
another.

    git worktree add /tmp/tinynas-base <commit>
    nice python benchmarks/status_request.py --base /tmp/tinynas-base --runs 3

The page asks for `status.json` once a second and `tinynas simulate --follow` 20 times; each answer computes the
live signal trace while recording (`tinynas.service.status_views.trace`) and resolves the target while searching
(`tinynas.cost.targets.resolve_target`, for the RAM budget line). Each checkout runs the same thing in a fresh
interpreter, alternating which goes first: the trace of 8 channels at 200 Hz (the last 4 s: 800 samples, with a
link gap) as int8-like whole numbers and as float32, and `resolve_target("STM32F030F4P6")`, each timed over
`--calls` calls after one warm-up call. Results: benchmarks/results/status-request.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
from pathlib import Path

from checkouts import run_child, short_commit

RESULTS = Path(__file__).parent / "results"
ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import json, sys, time
import numpy as np
from firmware_bridge.protocol import Samples
from firmware_bridge.ring import SampleRing
from tinynas.cost.targets import resolve_target
from tinynas.service.status_views import trace

def timed(call, calls):
    call()
    started = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - started) / calls * 1000

def main():
    calls = int(sys.argv[1])
    rng = np.random.default_rng(0)
    figures = {}
    for kind in ("int8", "float32"):
        signal = rng.normal(0, 30, (2000, 8))
        signal = np.clip(np.round(signal), -128, 127) if kind == "int8" else signal
        ring = SampleRing(8, 4000)
        ring.add(Samples(0, signal[:1000].astype(np.float32)))
        ring.add(Samples(1010, signal[1000:].astype(np.float32)))  # ten samples lost on the link
        figures[f"trace_{kind}_ms"] = timed(lambda: trace(ring, 200.0, kind, rest=[5.0] * 8), calls)
    figures["resolve_target_ms"] = timed(lambda: resolve_target("STM32F030F4P6"), calls)
    print(json.dumps(figures))

if __name__ == "__main__":
    main()
"""

FIGURES = {"trace_int8_ms": "trace, 8 int8 channels (ms)", "trace_float32_ms": "trace, 8 float32 channels (ms)",
           "resolve_target_ms": "resolve_target (ms)"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="another checkout (a git worktree)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--shared", default="nothing else ran", help="what shared the machine, for the results file")
    args = parser.parse_args()
    checkouts = {"base": args.base.resolve(), "this": ROOT}
    commits = {name: short_commit(path) for name, path in checkouts.items()}
    runs = []
    for run in range(args.runs):
        for name in (["base", "this"] if run % 2 == 0 else ["this", "base"]):
            figures = run_child(checkouts[name], _CHILD, str(args.calls), caller="status_request.py")
            runs.append({"run": run, "checkout": name, **figures})
            print(f"run {run} {name}: " + ", ".join(f"{key} {value:.3f}" for key, value in figures.items()),
                  flush=True)
    write(runs, commits, args)


def write(runs: list[dict], commits: dict, args: argparse.Namespace) -> None:
    RESULTS.mkdir(exist_ok=True)
    meta = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            "commits": commits, "calls": args.calls, "runs": args.runs}
    (RESULTS / "status-request.json").write_text(json.dumps({**meta, "results": runs}, indent=1) + "\n")
    lines = ["# One status-page request: the live trace and the target, this checkout against another", "",
             f"`python benchmarks/status_request.py --base <worktree> --runs {args.runs}` on {meta['machine']}: "
             f"base {commits['base']}, this {commits['this']}. Each figure is the mean of {args.calls} calls after "
             f"a warm-up call, in a fresh interpreter per checkout and run, alternating which goes first; the "
             f"table gives the median over the runs. What shared the machine: {args.shared}.", "",
             "| checkout | " + " | ".join(FIGURES.values()) + " |", "|---|" + "---|" * len(FIGURES)]
    for name in ("base", "this"):
        mine = [r for r in runs if r["checkout"] == name]
        lines.append(f"| {name} ({commits[name]}) | " +
                     " | ".join(f"{statistics.median(r[key] for r in mine):.3f}" for key in FIGURES) + " |")
    (RESULTS / "status-request.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
