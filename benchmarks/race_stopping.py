"""How early may `fast`'s race stop its candidates? Replayed on recorded learning curves (issue 18).

    python benchmarks/race_stopping.py --collect --seeds 0,1,2,3   # train and record, then replay (~40 min)
    python benchmarks/race_stopping.py                              # replay the stored curves only (seconds)
    python benchmarks/race_stopping.py --recipe cosine50 --collect  # the same for fast's cosine recipe

`fast` trains every frontier candidate with the final recipe (100 epochs, Adam 0.01, batch 16) and stops one
after `patience` epochs without a better validation loss, or from its curve stop's first verdict on, once
its curve can no longer beat the best finished candidate. After issue 18's faster epochs, the epochs are
what is left: on ISL most candidates ran 20-25 epochs, stopped at the first verdict, and the leaders ran
until patience ran out. This measures what earlier verdicts and a shorter patience cost in accuracy. It chose
`fast`'s first verdict at epoch 10 of 100 (`tinynas.training.curve_stop.first_verdict`; it was 20 before):
the same winner on every setting and seed, 15-23 % fewer epochs; a shorter patience lost accuracy on ISL.

- Collect: for each setting (data, target) every candidate `FastStrategy` races, per seed, is trained to
  100 epochs with nothing stopping it, recording its validation loss and the float accuracy of its
  current weights on the split's test windows after every epoch (one process per setting, one thread).
  Data and split as `strategies.py` (ISL June; CWRU 0 hp bearingnas10, FE, 200 windows per file; split
  `paper`, no normalization, no augmentation). Stored in results/race-curves.jsonl.gz.
- Replay: the race as the study runs it: candidates in `FastStrategy`'s order on 2 workers, each stopped
  by patience or by `tinynas.training.curve_stop.CurveStop` against the best score of the candidates
  finished by then (the live incumbent), the time of an epoch being that candidate's measured mean. The
  winner is the lowest best validation loss; its test accuracy is that of its best epoch (the weights the
  study exports). Setting by setting, each stopping rule is compared with the first (first verdict 20,
  patience 20: `fast` before this benchmark), paired by seed.
The replay's wall time is a model (epochs times each candidate's mean epoch time, XLA compiled from the
first epoch): `strategies.py` measures the real one. Results: results/race-stopping.md and .json.

`--recipe cosine50` records and replays the curves of `fast`'s shorter recipe instead (50 epochs, the rate
falling from 0.01 along a cosine: `tinynas.trial.Fidelity.schedule`), with its own rules, the first being
the rule `fast` applies: results/race-curves-cosine50.jsonl.gz, race-stopping-cosine50.md and .json.
"""

from __future__ import annotations

import argparse
import gzip
import heapq
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DATA = {
    "cwru": f"cwru:{SHARED / 'cwru'}?files=bearingnas10&channel=FE&windows_per_file=200&resample=0",
    "isl": f"isl:{SHARED / 'isl'}",
}
SETTINGS = (("isl", "LSM6DSO16IS"), ("isl", "nRF52840"), ("cwru", "STM32F030F4P6"), ("cwru", "LSM6DSO16IS"))
RECIPES = {
    # name: (epochs, schedule, rules); a rule is (first verdict, patience, epochs), the rule compared with first
    "constant100": (100, "constant", (
        # the rule before this benchmark first, then earlier verdicts, shorter patience, fewer epochs
        (20, 20, 100), (15, 20, 100), (10, 20, 100), (5, 20, 100), (20, 15, 100), (20, 10, 100),
        (10, 15, 100), (10, 10, 100), (20, 20, 60), (10, 10, 60))),
    "cosine50": (50, "cosine", (
        # fast's rule first, then no patience, no curve stop at all, earlier or later verdicts, shorter patience
        (10, 20, 50), (10, 50, 50), (50, 50, 50), (5, 20, 50), (15, 20, 50), (20, 20, 50), (10, 10, 50))),
}
FAST_RULES = {"constant100": (10, 20, 100), "cosine50": (10, 20, 50)}
"""The rule `fast` applies with each recipe: (first verdict, patience, epochs)."""
WORKERS = 2


def files(recipe: str) -> tuple[Path, str]:
    """The recipe's recorded curves and the stem of its results files."""
    suffix = "" if recipe == "constant100" else f"-{recipe}"
    return RESULTS / f"race-curves{suffix}.jsonl.gz", f"race-stopping{suffix}"


def collect(data: str, target: str, seeds: list[int], recipe: str) -> None:
    """Train every raced candidate of one setting to the recipe's epochs per seed; one JSON line each on stdout."""
    from tinynas.cost.estimate import estimate
    from tinynas.cost.targets import get_target
    from tinynas.data.preprocess import Preprocessing
    from tinynas.data.spec import load_windows
    from tinynas.data.splits import make_split
    from tinynas.quiet import import_tensorflow
    from tinynas.search.base import SearchSpace
    from tinynas.search.fast import FastStrategy
    from tinynas.space import as_model_input
    from tinynas.training.train import fit
    from tinynas.trial import Fidelity

    epochs, schedule, _ = RECIPES[recipe]
    plan = Fidelity(epochs, 16, 0.01, schedule=schedule)
    tf = import_tensorflow()
    windows = load_windows(DATA[data])
    split = make_split(windows, "paper", seed=0)
    x = Preprocessing.fit(windows, split.train, "none").apply(windows.x)
    y = windows.y
    space = SearchSpace(windows.window_length, windows.channels, windows.classes)
    budget = get_target(target)
    strategy = FastStrategy(space, is_feasible=lambda arch: estimate(arch, accounting="arena").fits(budget),
                            final_fidelity=plan)
    x_test, y_test = tf.constant(as_model_input(x[split.test])), y[split.test]

    class TestAccuracy(tf.keras.callbacks.Callback):
        """Float accuracy of the current weights on the test windows, after every epoch (never seen by the race)."""

        def __init__(self) -> None:
            super().__init__()
            self.accuracy: list[float] = []

        def on_epoch_end(self, epoch, logs=None):
            predicted = self.model(x_test, training=False).numpy().argmax(1)
            self.accuracy.append(float((predicted == y_test).mean()))

    for seed in seeds:
        for proposal in iter(strategy.ask, None):
            arch = proposal.architecture
            probe = TestAccuracy()
            started = time.perf_counter()
            # The race's recipe with nothing stopping it (patience 0 = none, no curve stop).
            result = fit(arch, x[split.train], y[split.train], x[split.val], y[split.val],
                         plan, seed=seed, callbacks=[probe])
            print(json.dumps({"data": data, "target": target, "seed": seed, "candidate": arch.name(),
                              "val_loss": result.val_loss, "test_accuracy": probe.accuracy,
                              "seconds_per_epoch": (time.perf_counter() - started) / len(result.val_loss)}),
                  flush=True)
        strategy = FastStrategy(space, is_feasible=strategy.is_feasible, final_fidelity=plan)


def race(candidates: list[dict], first_verdict: int, patience: int, epochs: int) -> dict:
    """The race on recorded curves: epochs run, modelled wall time, the winner and its test accuracy."""
    from tinynas.training.curve_stop import CurveStop

    free = [(0.0, worker) for worker in range(WORKERS)]
    finished: list[tuple[float, float]] = []  # (time, best validation loss) of every finished candidate
    outcomes = []
    for candidate in candidates:
        start, worker = heapq.heappop(free)
        now, best, best_epoch, seen = start, math.inf, -1, []
        for number, value in enumerate(candidate["val_loss"][:epochs]):
            now += candidate["seconds_per_epoch"]
            seen.append(value)
            if value < best:
                best, best_epoch = value, number
            if number - best_epoch >= patience:
                break
            incumbent = min((score for end, score in finished if end <= now), default=math.inf)
            if CurveStop(incumbent, min_epochs=first_verdict).should_stop(seen, epochs):
                break
        finished.append((now, best))
        outcomes.append((best, candidate["test_accuracy"][best_epoch], candidate["candidate"], len(seen)))
        heapq.heappush(free, (now, worker))
    winner = min(outcomes)
    return {"epochs_run": sum(o[3] for o in outcomes), "wall_s": max(end for end, _ in finished),
            "winner": winner[2], "test_accuracy": winner[1]}


def replay(rows: list[dict], rules: tuple) -> list[dict]:
    """Every rule on every (setting, seed) of the recorded curves."""
    out = []
    for data, target in SETTINGS:
        seeds = sorted({r["seed"] for r in rows if (r["data"], r["target"]) == (data, target)})
        for seed in seeds:
            candidates = [r for r in rows if (r["data"], r["target"], r["seed"]) == (data, target, seed)]
            for first_verdict, patience, epochs in rules:
                out.append({"data": data, "target": target, "seed": seed, "first_verdict": first_verdict,
                            "patience": patience, "epochs": epochs,
                            **race(candidates, first_verdict, patience, epochs)})
    return out


def report(races: list[dict], command: str, machine: str, recipe: str) -> str:
    seeds = ",".join(str(seed) for seed in sorted({r["seed"] for r in races}))
    epochs, schedule, rules = RECIPES[recipe]
    option = "" if recipe == "constant100" else f" --recipe {recipe}"
    lines = ["# Stopping fast's race earlier: replayed on recorded learning curves", "",
             f"Command: `{command}`; curves recorded by `python benchmarks/race_stopping.py{option} --collect "
             f"--seeds {seeds}` on {machine} (nothing else running), one process per setting with one thread, "
             f"two settings at a time. Every frontier candidate `fast` races, trained to {epochs} epochs with the "
             f"recipe (Adam 0.01, {schedule} rate, batch 16) and nothing stopping it; data and split as "
             "`strategies.py` (`paper`: ISL June stratified by recording, CWRU 0 hp bearingnas10 contiguous). "
             "The race replayed on 2 workers with the live incumbent; the winner's float test accuracy is that "
             "of its best validation epoch. Wall time is modelled (each candidate's measured mean epoch time, "
             "compiled from the first epoch), not measured: `strategies.py` measures the real one.", "",
             "| setting | first verdict | patience | epochs | seeds | epochs run (mean) | modelled wall vs the first "
             "row | winner's test accuracy (mean) | minus the first row's, paired by seed | same winner as the first "
             "row |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for data, target in SETTINGS:
        part = [r for r in races if (r["data"], r["target"]) == (data, target)]
        if not part:
            continue
        base = {r["seed"]: r for r in part if (r["first_verdict"], r["patience"], r["epochs"]) == rules[0]}
        for rule in rules:
            rows = [r for r in part if (r["first_verdict"], r["patience"], r["epochs"]) == rule]
            accuracy = np.array([r["test_accuracy"] for r in rows])
            difference = accuracy - np.array([base[r["seed"]]["test_accuracy"] for r in rows])
            same = sum(r["winner"] == base[r["seed"]]["winner"] for r in rows)
            wall = np.mean([r["wall_s"] for r in rows]) / np.mean([base[r["seed"]]["wall_s"] for r in rows])
            spread = difference.std(ddof=1) / np.sqrt(len(rows)) if len(rows) > 1 else 0.0
            lines.append(f"| {data} / {target} | {rule[0]} | {rule[1]} | {rule[2]} | {len(rows)} | "
                         f"{np.mean([r['epochs_run'] for r in rows]):.0f} | {wall:.2f} | {accuracy.mean():.4f} | "
                         f"{difference.mean():+.4f} +- {spread:.4f} | {same}/{len(rows)} |")
    return "\n".join(lines) + "\n"


def versus(rows: list[dict], recipe: str) -> list[str]:
    """This recipe's races against the constant 100-epoch recipe's, each under `fast`'s rule, paired by seed.

    Both races are timed with the constant recipe's recorded epoch times (the same candidates; the two
    collections may have run on different days, on a VM whose speed changes), so the wall ratio compares
    the epochs each race runs, weighted by what each candidate's epoch costs."""
    constant_curves, _ = files("constant100")
    if recipe == "constant100" or not constant_curves.exists():
        return []
    with gzip.open(constant_curves, "rt", encoding="utf-8") as handle:
        constant = [json.loads(line) for line in handle if line.strip()]
    seconds = {(r["data"], r["target"], r["seed"], r["candidate"]): r["seconds_per_epoch"] for r in constant}
    timed = [{**r, "seconds_per_epoch": seconds[(r["data"], r["target"], r["seed"], r["candidate"])]}
             for r in rows if (r["data"], r["target"], r["seed"], r["candidate"]) in seconds]
    ours, theirs = replay(timed, (FAST_RULES[recipe],)), replay(constant, (FAST_RULES["constant100"],))
    lines = ["", f"## {recipe} against the constant rate over 100 epochs, each raced under fast's rule", "",
             f"Rules: first verdict, patience, epochs = {FAST_RULES['constant100']} and {FAST_RULES[recipe]}; "
             "both races timed with the constant recipe's recorded epoch times.", "",
             "| setting | seeds | winner's test accuracy, constant 100 | " + recipe + " | difference, paired by seed | "
             "epochs run, constant 100 | " + recipe + " | modelled wall, " + recipe + " / constant 100 | winners "
             f"(constant 100 / {recipe}) |", "|---|---|---|---|---|---|---|---|---|"]
    for data, target in SETTINGS:
        mine = {r["seed"]: r for r in ours if (r["data"], r["target"]) == (data, target)}
        other = {r["seed"]: r for r in theirs if (r["data"], r["target"]) == (data, target)}
        seeds = sorted(set(mine) & set(other))
        if not seeds:
            continue
        a, b = (np.array([side[s]["test_accuracy"] for s in seeds]) for side in (mine, other))
        spread = (a - b).std(ddof=1) / np.sqrt(len(seeds)) if len(seeds) > 1 else 0.0
        wall = np.mean([mine[s]["wall_s"] for s in seeds]) / np.mean([other[s]["wall_s"] for s in seeds])
        winners = ", ".join(f"{other[s]['winner']}/{mine[s]['winner']}" for s in seeds)
        run = [np.mean([side[s]["epochs_run"] for s in seeds]) for side in (other, mine)]
        lines.append(f"| {data} / {target} | {len(seeds)} | {b.mean():.4f} | {a.mean():.4f} | "
                     f"{(a - b).mean():+.4f} +- {spread:.4f} | {run[0]:.0f} | {run[1]:.0f} | {wall:.2f} | {winners} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collect", action="store_true", help="train and record the curves first")
    parser.add_argument("--seeds", default="0,1,2,3")
    parser.add_argument("--recipe", default="constant100", choices=list(RECIPES))
    parser.add_argument("--one", nargs=2, metavar=("DATA", "TARGET"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.one:
        collect(args.one[0], args.one[1], seeds, args.recipe)
        return 0
    machine = f"{os.cpu_count()} cores x86_64"
    curves, stem = files(args.recipe)
    if args.collect:
        missing = [name for name in DATA if not (SHARED / name).exists()]
        if missing:
            print(f"race_stopping: data missing under {SHARED}: {', '.join(missing)}", file=sys.stderr)
            return 2
        env = {**os.environ, "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", "OMP_NUM_THREADS": "1"}
        lines: list[str] = []
        for pair in (SETTINGS[0::2], SETTINGS[1::2]):  # two processes at a time, one per core
            running = [subprocess.Popen([sys.executable, __file__, "--seeds", args.seeds, "--recipe", args.recipe,
                                         "--one", *setting],
                                        stdout=subprocess.PIPE, text=True, env=env) for setting in pair]
            for process in running:
                out, _ = process.communicate()
                if process.returncode != 0:
                    print(f"race_stopping: collecting failed (exit {process.returncode})", file=sys.stderr)
                    return 1
                lines += [line for line in out.splitlines() if line.startswith("{")]
        with gzip.open(curves, "wt", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
    if not curves.exists():
        print(f"race_stopping: no recorded curves ({curves}); run with --collect first", file=sys.stderr)
        return 2
    with gzip.open(curves, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    rules = RECIPES[args.recipe][2]
    races = replay(rows, rules)
    command = " ".join(["python benchmarks/race_stopping.py", *sys.argv[1:]])
    (RESULTS / f"{stem}.json").write_text(json.dumps({"command": command, "rules": rules, "races": races},
                                                     indent=1) + "\n")
    text = report(races, command, machine, args.recipe) + "\n".join(versus(rows, args.recipe)) + "\n"
    (RESULTS / f"{stem}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
