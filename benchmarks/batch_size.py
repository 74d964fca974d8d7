"""Larger batches for `fast`'s race: same accuracy, and fewer seconds per epoch? (issue 18)

    python benchmarks/batch_size.py                 # ISL A(8,2) and CWRU A(2,4), 8 seeds, 4 recipes (~25 min)
    python benchmarks/batch_size.py --report-only   # the table again from the stored runs

Issue 18 lists "larger batches or fewer steps where accuracy is unchanged (measured, not assumed)". Each
candidate is trained with `fast`'s race recipe (100 epochs, Adam, patience 20, best-validation weights) at
batch 16 and lr 0.01 (the recipe), batch 32, batch 64, and batch 64 at lr 0.02, once per seed, without XLA
(as `fast`'s raced candidates on ISL train), on the method's split (`paper`), scored in float on its test
windows. Results: benchmarks/results/batch-size.md and batch-size.jsonl (one line per training).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"
RUNS = RESULTS / "batch-size.jsonl"
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SETS = {
    "isl": (f"isl:{DATA / 'isl'}", (8, 2)),
    "cwru": (f"cwru:{DATA / 'cwru'}?files=bearingnas10&channel=FE&windows_per_file=200&resample=0", (2, 4)),
}
RECIPES = ((16, 0.01), (64, 0.01), (64, 0.02), (32, 0.01))


def run(name: str, batch: int, learning_rate: float, seeds: int) -> None:
    """Train the set's candidate once per seed with one recipe, never under XLA; one JSON line per training."""
    import tinynas.training.epoch as epoch
    from tinynas.data.spec import load_windows
    from tinynas.data.splits import make_split
    from tinynas.space import Architecture, as_model_input
    from tinynas.training.train import fit
    from tinynas.trial import Fidelity

    spec, (k, c) = SETS[name]
    windows = load_windows(spec)
    split = make_split(windows, "paper", seed=0)
    x, y = windows.x.astype(np.float32), windows.y
    arch = Architecture(x.shape[1], x.shape[2], windows.classes, k, c)
    epoch.XLA_MIN_STEPS = 10**12  # never compile: the same program for every recipe
    for seed in range(seeds):
        started = time.perf_counter()
        result = fit(arch, x[split.train], y[split.train], x[split.val], y[split.val],
                     Fidelity(epochs=100, batch_size=batch, learning_rate=learning_rate, patience=20), seed=seed)
        accuracy = float((result.model.predict(as_model_input(x[split.test]), verbose=0).argmax(1)
                          == y[split.test]).mean())
        print(json.dumps({"data": name, "batch": batch, "lr": learning_rate, "seed": seed, "acc": accuracy,
                          "epochs": len(result.val_loss), "best_epoch": int(np.argmin(result.val_loss)),
                          "val": min(result.val_loss), "s": round(time.perf_counter() - started, 1)}), flush=True)


def report(rows: list[dict], machine: str) -> str:
    lines = ["# Larger batches for fast's race: test accuracy and seconds per epoch", "",
             f"Command: `python benchmarks/batch_size.py`; {machine}; one process per (data, recipe) with one "
             "thread, one at a time. Data and split: ISL June (702 windows, stratified "
             "70/10/20 by recording) and CWRU 0 hp bearingnas10 (FE, 200 windows per file, contiguous): the "
             "method's `paper` split. 100 epochs, Adam, patience 20, best-validation weights, no XLA; float "
             "accuracy on the test windows.", "",
             "| data | candidate | batch | lr | seeds | test accuracy (mean +- sd) | minus batch 16's, paired by seed "
             "| epochs run (mean) | seconds per epoch |", "|---|---|---|---|---|---|---|---|---|"]
    for name, (_, (k, c)) in SETS.items():
        base = {r["seed"]: r["acc"] for r in rows if r["data"] == name and (r["batch"], r["lr"]) == RECIPES[0]}
        for batch, rate in RECIPES:
            part = [r for r in rows if r["data"] == name and (r["batch"], r["lr"]) == (batch, rate)]
            if not part:
                continue
            accuracy = np.array([r["acc"] for r in part])
            difference = accuracy - np.array([base[r["seed"]] for r in part])
            spread = difference.std(ddof=1) / np.sqrt(len(part)) if len(part) > 1 else 0.0
            per_epoch = sum(r["s"] for r in part) / sum(r["epochs"] for r in part)
            lines.append(f"| {name} | A({k},{c}) | {batch} | {rate} | {len(part)} | {accuracy.mean():.4f} +- "
                         f"{accuracy.std(ddof=1):.4f} | {difference.mean():+.4f} +- {spread:.4f} | "
                         f"{np.mean([r['epochs'] for r in part]):.0f} | {per_epoch:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--one", nargs=3, metavar=("DATA", "BATCH", "LR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        run(args.one[0], int(args.one[1]), float(args.one[2]), args.seeds)
        return 0
    if not args.report_only:
        missing = [name for name in SETS if not (DATA / name).exists()]
        if missing:
            print(f"batch_size: data missing under {DATA}: {', '.join(missing)}", file=sys.stderr)
            return 2
        env = {**os.environ, "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", "OMP_NUM_THREADS": "1"}
        lines = []
        for name in SETS:
            for batch, rate in RECIPES:
                done = subprocess.run([sys.executable, __file__, "--seeds", str(args.seeds), "--one", name,
                                       str(batch), str(rate)], capture_output=True, text=True, env=env,
                                      timeout=7200, check=True)
                lines += [line for line in done.stdout.splitlines() if line.startswith("{")]
        RUNS.write_text("\n".join(lines) + "\n")
    rows = [json.loads(line) for line in RUNS.read_text().splitlines() if line.strip()]
    machine = f"{os.cpu_count()} cores {platform.machine()}, Python {platform.python_version()}"
    text = report(rows, machine)
    (RESULTS / "batch-size.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
