"""Does training without XLA change accuracy? The same candidates and seeds, plain vs XLA epochs (issue 18).

    python benchmarks/xla_accuracy.py                 # ISL A(8,2) and CWRU A(2,4), 8 seeds each
    python benchmarks/xla_accuracy.py --seeds 4

`tinynas.training.epoch.xla_from` trains short and raced candidates without XLA. Both programs compute the
same epoch (im2col + matrix product under XLA, TensorFlow's convolution outside it), so they differ only
in floating-point rounding; over 100 epochs at lr 0.01 that rounding sends a training down another path,
as another seed would. This measures whether that has a direction: each candidate is trained with `fast`'s
race recipe (100 epochs, Adam 0.01, batch 16, patience 20; no curve stop, so both train the same plan) once
per seed in each mode, on the method's split (`paper`), and scored in float on its test windows.
Results: benchmarks/results/xla-accuracy.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SETS = {
    "isl": (f"isl:{DATA / 'isl'}", (8, 2)),
    "cwru": (f"cwru:{DATA / 'cwru'}?files=bearingnas10&channel=FE&windows_per_file=200&resample=0", (2, 4)),
}


def run(name: str, mode: str, seeds: int) -> list[dict]:
    """Train the set's candidate once per seed with XLA forced on (`xla`) or off (`plain`)."""
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
    epoch.XLA_MIN_STEPS = 1 if mode == "xla" else 10**12  # the rule's threshold: always / never
    rows = []
    for seed in range(seeds):
        started = time.perf_counter()
        result = fit(arch, x[split.train], y[split.train], x[split.val], y[split.val],
                     Fidelity(epochs=100, batch_size=16, learning_rate=0.01, patience=20), seed=seed)
        logits = result.model.predict(as_model_input(x[split.test]), verbose=0)
        rows.append({"data": name, "candidate": arch.name(), "mode": mode, "seed": seed,
                     "test_accuracy": float((logits.argmax(1) == y[split.test]).mean()),
                     "best_val_loss": float(min(result.val_loss)), "epochs": len(result.val_loss),
                     "xla_epochs": result.timings["xla_epochs"], "seconds": time.perf_counter() - started})
        print(rows[-1], file=sys.stderr, flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--one", nargs=2, metavar=("DATA", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run(args.one[0], args.one[1], args.seeds)))
        return 0
    import subprocess

    missing = [name for name in SETS if not (DATA / name).exists()]
    if missing:
        print(f"xla_accuracy: data missing under {DATA}: {', '.join(missing)}", file=sys.stderr)
        return 2
    env = {**os.environ, "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", "OMP_NUM_THREADS": "1"}
    rows = []
    for name in SETS:
        for mode in ("xla", "plain"):  # one at a time, each in a fresh process with one thread (a worker)
            done = subprocess.run([sys.executable, __file__, "--seeds", str(args.seeds), "--one", name, mode],
                                  capture_output=True, text=True, env=env, timeout=7200, check=True)
            rows += json.loads(done.stdout.strip().splitlines()[-1])
    command = "python benchmarks/xla_accuracy.py " + " ".join(sys.argv[1:])
    machine = f"{os.cpu_count()} cores {platform.machine()}, Python {platform.python_version()}"
    (RESULTS / "xla-accuracy.json").write_text(json.dumps({"command": command, "machine": machine, "rows": rows},
                                                          indent=1) + "\n")
    lines = ["# Plain vs XLA epochs: test accuracy of the same candidates and seeds", "",
             f"Command: `{command}`; {machine}; one process per (data, mode) with one thread. Data and split: "
             "ISL June (`isl`, 702 windows, stratified 70/10/20 by recording) and CWRU 0 hp bearingnas10 (FE, "
             "200 windows per file, contiguous 80/20 with the last tenth of training validating): the "
             "method's `paper` split. Recipe: `fast`'s race (100 epochs, Adam 0.01, batch 16, patience 20, "
             "best-validation weights), float accuracy on the test windows.", "",
             "| data | candidate | mode | seeds | test accuracy (mean +- sd) | per seed | epochs run (mean) |"
             " seconds per training (mean) |", "|---|---|---|---|---|---|---|---|"]
    for name in SETS:
        for mode in ("xla", "plain"):
            part = [r for r in rows if r["data"] == name and r["mode"] == mode]
            accuracy = np.array([r["test_accuracy"] for r in part])
            lines.append(f"| {name} | {part[0]['candidate']} | {mode} | {len(part)} | {accuracy.mean():.4f} +- "
                         f"{accuracy.std(ddof=1):.4f} | {' '.join(f'{a:.3f}' for a in accuracy)} | "
                         f"{np.mean([r['epochs'] for r in part]):.0f} | {np.mean([r['seconds'] for r in part]):.1f} |")
        both = {mode: np.array([r["test_accuracy"] for r in rows if r["data"] == name and r["mode"] == mode])
                for mode in ("xla", "plain")}
        difference = both["plain"] - both["xla"]
        lines.append(f"| {name} | | plain - xla, paired by seed | | {difference.mean():+.4f} +- "
                     f"{difference.std(ddof=1) / np.sqrt(len(difference)):.4f} (standard error) | | | |")
    (RESULTS / "xla-accuracy.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
