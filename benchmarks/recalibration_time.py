"""How long a recalibration takes, this checkout against another, on the same model folder and windows.

    git worktree add /tmp/tinynas-base <commit>
    nice python benchmarks/recalibration_time.py --base /tmp/tinynas-base --runs 3

A re-worn armband is brought back by `recalibrate` (the service's `onboard --recalibrate`): it cross-validates
three recipes over the new repetitions (fold by fold), then trains the one chosen on every new window. The user
waits for it. This makes one model folder (a `fast` search on synthetic sEMG, its clock frozen so the search is
the same however loaded the machine) and one new session of it (electrodes rotated and their gains changed, three
repetitions of each class, as the service records by default), then recalibrates it with each checkout in turn,
alternating which goes first, each in a fresh interpreter (TensorFlow's import counted, as the service's child
pays it). What it reports per run: the wall time of the process, the time `recalibrate` measures itself, and
what it decided (the cross-validated accuracies, the recipe chosen), which must not depend on the checkout.
Results: benchmarks/results/recalibration-time.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
ROOT = Path(__file__).resolve().parent.parent
DATA = "synthetic:emg?classes=4&windows_per_class=30&length=64&channels=4&windows_per_recording=3&seed=2"
NEW_SESSION = "synthetic:emg?classes=4&windows_per_class=9&length=64&channels=4&windows_per_recording=3&seed=9"
"""Three recordings (repetitions) of three windows per class: the service's default `rewear_repetitions`."""
EPOCHS = 20
"""The service's `rewear_epochs` default."""

_CHILD = """
import json, sys, time
started = time.perf_counter()
import numpy as np
from dataclasses import replace
from tinynas.adaptation.recalibrate import Recipe, recalibrate
from tinynas.data.spec import load_windows
model, spec, out, epochs = sys.argv[1:5]
new = load_windows(spec)
x = np.roll(new.x, 1, axis=2) * np.asarray((0.5, 1.6, 0.8, 1.3), np.float32)  # the armband put on again
result = recalibrate(model, replace(new, x=x.astype(np.float32)), out, recipe=Recipe(epochs=int(epochs)), seed=0)
print(json.dumps({"wall": time.perf_counter() - started, "seconds": result.seconds, "accepted": result.accepted,
                  "chosen": (result.selection or {}).get("chosen"),
                  "compared": (result.selection or {}).get("accuracy"),
                  "test": [result.test_before, result.test_after]}))
"""


def make_model(folder: Path) -> Path:
    from tinynas.cost.targets import resolve_target
    from tinynas.data.spec import load_windows
    from tinynas.study import Study
    from tinynas.trial import Fidelity

    Study(folder / "run", load_windows(DATA), resolve_target(ram="6k", flash="64k", macs="2M"), strategy="fast",
          budget_seconds=120, fidelity=Fidelity(epochs=3, batch_size=16, learning_rate=3e-3),
          final_fidelity=Fidelity(epochs=40, batch_size=16, learning_rate=3e-3), data_spec=DATA, split="group",
          augment="none", clock=lambda: 0.0).run()
    return folder / "run"


def recalibrate_with(checkout: Path, model: Path, out: Path, epochs: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    run = subprocess.run([sys.executable, "-c", _CHILD, str(model), NEW_SESSION, str(out), str(epochs)],
                         capture_output=True, text=True, env=env, cwd=checkout, check=False)
    if run.returncode != 0:
        raise SystemExit(f"recalibration with {checkout} failed:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def _commit(checkout: Path) -> str:
    return subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=False).stdout.strip() or "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="the other checkout (a git worktree)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--shared", default="nothing else", help="what shared the machine (said in the results)")
    args = parser.parse_args()
    checkouts = {"base": args.base.resolve(), "this": ROOT}
    commits = {name: _commit(path) for name, path in checkouts.items()}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        print("making the model folder (a fast search, frozen clock)...", flush=True)
        model = make_model(Path(tmp))
        for run in range(args.runs):
            order = ("base", "this") if run % 2 == 0 else ("this", "base")
            for name in order:
                result = recalibrate_with(checkouts[name], model, Path(tmp) / f"out-{name}-{run}", args.epochs)
                rows.append({"run": run, "checkout": name, "commit": commits[name], **result})
                print(f"run {run} {name} ({commits[name]}): {result['wall']:.1f} s wall, recalibrate "
                      f"{result['seconds']:.1f} s, chose {result['chosen']}", flush=True)
    median = {name: sorted(r["wall"] for r in rows if r["checkout"] == name)[args.runs // 2] for name in checkouts}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "recalibration-time.json").write_text(json.dumps(
        {"rows": rows, "commits": commits, "epochs": args.epochs, "data": DATA, "new_session": NEW_SESSION,
         "machine": f"{platform.machine()}, {os.cpu_count()} cores", "shared": args.shared}, indent=2) + "\n")
    lines = [
        "# Recalibration time: two checkouts, the same model folder and windows",
        "",
        f"`python benchmarks/recalibration_time.py --base <worktree at {commits['base']}> --runs {args.runs}` at "
        f"{commits['this']}, {time.strftime('%Y-%m-%d')}; {platform.machine()}, {os.cpu_count()} cores; "
        f"sharing the machine: {args.shared}.",
        "",
        f"Model: a `fast` search on `{DATA}` (frozen clock). New session: `{NEW_SESSION}` with the electrodes "
        f"rotated by one and gains (0.5, 1.6, 0.8, 1.3): 3 repetitions of 3 windows per class, 36 windows. "
        f"`recalibrate` with its default recipe at {args.epochs} epochs (the service's), seed 0, each in a fresh "
        f"interpreter (TensorFlow's import included in the wall time).",
        "",
        "| run | checkout | commit | process wall (s) | recalibrate's own (s) | chosen | cross-validated "
        "(old / adapt / fine-tune / mixed) | original test before / after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        compared = row["compared"] or {}
        lines.append(f"| {row['run']} | {row['checkout']} | {row['commit']} | {row['wall']:.1f} | "
                     f"{row['seconds']:.1f} | {row['chosen']} | "
                     + " / ".join(f"{value:.3f}" for value in compared.values())
                     + f" | {row['test'][0]} / {row['test'][1]} |")
    lines += ["", f"Median wall time: base {median['base']:.1f} s, this {median['this']:.1f} s: "
              f"**{median['base'] / median['this']:.2f}x** ({args.runs} runs each, alternating which goes first)."]
    (RESULTS / "recalibration-time.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
