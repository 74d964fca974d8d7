"""Does the health monitor mistake `fast`'s cosine recipe for an unstable training? (issue 18)

    python benchmarks/health_on_cosine.py          # ISL and CWRU frontier candidates, 2 seeds (~10 min)

The shipped diagnoser (`tinynas/training/diagnoser.json`) was trained on traces of constant-rate trainings
(`benchmarks/faults.py`). `fast` now races with a rate falling along a cosine (`tinynas.search.fast.FAST_RECIPE`),
so its late epochs move the weights less, which a diagnoser could read as a stall. Every frontier candidate
`fast` races on ISL / LSM6DSO16IS and CWRU / STM32F030F4P6 (healthy data, the method's `paper` split) is
trained with the health monitor and nothing stopping it, once with the cosine recipe (50 epochs) and once with
the method's constant rate (100 epochs), lr 0.01 both; after every epoch from the third on, the diagnoser's
probability of instability is recorded as the search reads it. A search stops a candidate at 0.7
(`STOP_PROBABILITY`). Results: benchmarks/results/health-on-cosine.md and .jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"
RUNS = RESULTS / "health-on-cosine.jsonl"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
SETTINGS = {
    "isl": (f"isl:{SHARED / 'isl'}", "LSM6DSO16IS"),
    "cwru": (f"cwru:{SHARED / 'cwru'}?files=bearingnas10&channel=FE&windows_per_file=200&resample=0",
             "STM32F030F4P6"),
}
RECIPES = {"cosine 50": (50, "cosine"), "constant 100": (100, "constant")}


def run(name: str, seeds: list[int]) -> None:
    """Every raced candidate of one setting, both recipes, per seed; one JSON line per training on stdout."""
    from tinynas.cost.estimate import estimate
    from tinynas.cost.targets import get_target
    from tinynas.data.spec import load_windows
    from tinynas.data.splits import make_split
    from tinynas.search.base import SearchSpace
    from tinynas.search.fast import FastStrategy
    from tinynas.training.diagnose import MIN_DIAGNOSIS_EPOCHS, STOP_PROBABILITY, shipped_diagnoser
    from tinynas.training.train import fit
    from tinynas.trial import Fidelity

    spec, target = SETTINGS[name]
    windows = load_windows(spec)
    split = make_split(windows, "paper", seed=0)
    space = SearchSpace(windows.window_length, windows.channels, windows.classes)
    budget = get_target(target)
    train, val = list(split.train), list(split.val)
    diagnoser = shipped_diagnoser()
    for seed in seeds:
        for recipe, (epochs, schedule) in RECIPES.items():
            plan = Fidelity(epochs, 16, 0.01, schedule=schedule)
            strategy = FastStrategy(space, is_feasible=lambda arch: estimate(arch, accounting="arena").fits(budget),
                                    final_fidelity=plan)
            for proposal in iter(strategy.ask, None):
                seen: list[float] = []

                def record(trace, seen=seen, rate=plan.learning_rate) -> bool:
                    # As tinynas.training.diagnose.health_monitor judges, but never stops: every epoch is wanted.
                    if diagnoser is not None and len(trace) >= MIN_DIAGNOSIS_EPOCHS:
                        seen.append(diagnoser.instability(trace, rate)[1])
                    return False

                monitor = _with_judge(windows, train, seed, record)
                fit(proposal.architecture, windows.x[train], windows.y[train], windows.x[val], windows.y[val],
                    plan, seed=seed, callbacks=[monitor])
                print(json.dumps({"data": name, "recipe": recipe, "seed": seed,
                                  "candidate": proposal.architecture.name(), "max": max(seen, default=0.0),
                                  "last": seen[-1] if seen else 0.0,
                                  "stopped_at": next((i + MIN_DIAGNOSIS_EPOCHS for i, p in enumerate(seen)
                                                      if p >= STOP_PROBABILITY), None)}), flush=True)


def _with_judge(windows, train, seed, judge):
    from tinynas.space import as_model_input
    from tinynas.training.health import health_callback, probe_batch

    x_probe, y_probe = probe_batch(windows.x[train], windows.y[train], seed=seed)
    return health_callback(as_model_input(x_probe), y_probe, on_epoch=judge)


def report(rows: list[dict], machine: str) -> str:
    lines = ["# The health monitor on fast's cosine recipe: probability of instability on healthy trainings", "",
             f"Command: `python benchmarks/health_on_cosine.py`; {machine}, one process per data set, one thread. "
             "Every frontier candidate `fast` races (ISL June on LSM6DSO16IS; CWRU 0 hp bearingnas10 on "
             "STM32F030F4P6), split `paper`, lr 0.01, trained with the health monitor and nothing stopping it. "
             "Probability: the shipped diagnoser's, after every epoch from the third on, as the search reads "
             "it; a search stops a candidate at 0.7.", "",
             "| data | recipe | trainings | max probability over all epochs (median / max) | probability at the "
             "last epoch (median / max) | trainings a search would have stopped |", "|---|---|---|---|---|---|"]
    for name in SETTINGS:
        for recipe in RECIPES:
            part = [r for r in rows if r["data"] == name and r["recipe"] == recipe]
            if not part:
                continue
            peak, last = np.array([r["max"] for r in part]), np.array([r["last"] for r in part])
            stopped = [f"{r['candidate']} seed {r['seed']} at epoch {r['stopped_at']}" for r in part
                       if r["stopped_at"] is not None]
            lines.append(f"| {name} | {recipe} | {len(part)} | {np.median(peak):.2f} / {peak.max():.2f} | "
                         f"{np.median(last):.2f} / {last.max():.2f} | {len(stopped)}"
                         + (f": {', '.join(stopped)}" if stopped else "") + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--one", choices=list(SETTINGS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.one:
        run(args.one, seeds)
        return 0
    if not args.report_only:
        missing = [name for name in SETTINGS if not (SHARED / name).exists()]
        if missing:
            print(f"health_on_cosine: data missing under {SHARED}: {', '.join(missing)}", file=sys.stderr)
            return 2
        env = {**os.environ, "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", "OMP_NUM_THREADS": "1"}
        running = [subprocess.Popen([sys.executable, __file__, "--seeds", args.seeds, "--one", name],
                                    stdout=subprocess.PIPE, text=True, env=env) for name in SETTINGS]
        lines = []
        for process in running:
            out, _ = process.communicate()
            if process.returncode != 0:
                print(f"health_on_cosine: a run failed (exit {process.returncode})", file=sys.stderr)
                return 1
            lines += [line for line in out.splitlines() if line.startswith("{")]
        RUNS.write_text("\n".join(lines) + "\n")
    rows = [json.loads(line) for line in RUNS.read_text().splitlines() if line.strip()]
    text = report(rows, f"{os.cpu_count()} cores x86_64")
    (RESULTS / "health-on-cosine.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
