"""How many repetitions per class a plan should ask for: accuracy and the deploy gate's verdict against repetitions.

Question (issue 33): a service plan's `repetitions` was guessed (gestures4: 5). With the deploy gate deciding on the
95 % interval of the held-out windows (`tinynas.verdict`), too few repetitions leave it unable to decide even for
a good model, and the model itself is worse. Measured here on real sEMG, as the service would do it:

- Data: ISL (June sessions, `../shared/data/isl`, 27 repetitions per letter). A plan of C classes is C letters:
  `--classes A,B,D,L` (gestures4's size: the simulated person's fist/open/point are A/B/D) and all 26 (isl26).
- For each repetition count r and seed: r recordings per class drawn at random are "the session" (what the user
  records); the service's own pipeline runs on it: the `auto` split (by recording), a `fast` search on the service's
  default target and budget, the int8 model on the held-out side, the deploy gate at min_accuracy 0.5. The other
  27 - r recordings of those classes, never seen, say what the served model would really get. Each run is a cell
  of one sweep (`tinynas.sweep`, `grid_runs.py`): its session written as .npz and searched with its seed by a
  `tinynas search` of its own, as a user's would be.
- Reported per r: the held-out count, the share of seeds the gate deploys / asks for more / refuses, and the
  accuracy on the unseen recordings (mean over seeds, with the Wilson interval pooled over seeds' windows).

Run: `python benchmarks/repetitions.py [--work DIR]` (about 20-30 minutes on 2 cores; `--work` keeps the searches
and resumes them). Writes
benchmarks/results/repetitions.md and .json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import sys
import tempfile
from pathlib import Path

import numpy as np
from grid_runs import npz_spec, searched

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinynas.card import read_card  # noqa: E402
from tinynas.data.spec import load_windows  # noqa: E402
from tinynas.data.splits import make_split  # noqa: E402
from tinynas.data.windows import Windows  # noqa: E402
from tinynas.deploy.evaluate import evaluate  # noqa: E402
from tinynas.service.config import ServiceConfig  # noqa: E402
from tinynas.verdict import HeldOut, deploy_gate, wilson  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
SECONDS_PER_PROMPT = {4: 7.0, 26: 5.5}
"""countdown + window + rest of gestures4 (3 + 2 + 2 s) and isl26 (2 + 2 + 1.5 s), firmware_bridge.plan.PRESETS."""
ISL = Path(__file__).resolve().parents[2] / "shared" / "data" / "isl"


def _only(windows, indices, wanted: list[int], classes: list[str]):
    """The windows at `indices` as a data set of `classes` alone (labels renumbered in that order)."""
    indices = np.array(indices)
    order = {label: number for number, label in enumerate(wanted)}
    return Windows(windows.x[indices], np.array([order[int(label)] for label in windows.y[indices]]),
                   windows.groups[indices], tuple(classes), windows.sample_rate_hz, windows.channel_names,
                   windows.provenance, None if windows.sessions is None else windows.sessions[indices],
                   None if windows.time_index is None else windows.time_index[indices])


def draw(windows, classes: list[str], reps: int, seed: int):
    """The session of `reps` recordings per class drawn with `seed` (what the user records), and the windows of the
    other recordings of those classes (what the served model would really meet)."""
    rng = np.random.default_rng(seed)
    wanted = [windows.class_names.index(c) for c in classes]
    session, unseen = [], []
    for label in wanted:
        members = np.flatnonzero(windows.y == label)
        chosen = rng.choice(members, size=reps, replace=False)
        session += list(chosen)
        unseen += [m for m in members if m not in set(chosen)]
    return _only(windows, sorted(session), wanted, classes), _only(windows, sorted(unseen), wanted, classes)


def search_table(runs: list[tuple[list[str], int, int]], windows, config: ServiceConfig, budget: str,
                 work: Path) -> dict:
    """The sweep of every run: each session written as .npz and searched with its seed ([[cells]]), the service's
    recipe fixed."""
    cells = [{"data": npz_spec(draw(windows, classes, reps, seed)[0], work / "data" / f"c{len(classes)}-r{reps}-"
                               f"s{seed}.npz"), "seed": seed} for classes, reps, seed in runs]
    return {"cells": cells, "fixed": {
        "target": config.target, "strategy": config.strategy, "budget": budget, "epochs": config.epochs,
        "batch_size": config.batch_size, "learning_rate": config.learning_rate, "final_epochs": config.final_epochs,
        "workers": 2, "runtime": config.runtime, "split": "auto"}}


def one_run(windows, classes: list[str], reps: int, seed: int, config: ServiceConfig, folder: Path,
            seconds: float) -> dict:
    """The deploy gate's verdict on the search in `folder` (a sweep's cell) and its model's unseen accuracy."""
    recorded, unseen = draw(windows, classes, reps, seed)
    split = make_split(recorded, "auto", seed=0)
    card = read_card(folder).to_dict()
    held = card.get("int8_test") or {}
    verdict = deploy_gate(HeldOut(held.get("hits", 0), held.get("windows", 0)), config.min_accuracy, len(classes),
                          len(split.test) / len(recorded))
    truth = evaluate(folder, unseen)
    hits = int(round(truth.accuracy * len(unseen)))
    return {"reps": reps, "seed": seed, "classes": len(classes), "held_out_windows": held.get("windows"),
            "held_out_hits": held.get("hits"), "gate": verdict.decision, "more_per_class": verdict.more_per_class,
            "unseen_windows": len(unseen), "unseen_hits": hits, "unseen_accuracy": round(truth.accuracy, 4),
            "winner": card.get("name"), "seconds": round(seconds, 1)}


def render(runs: list[dict], args) -> str:
    lines = ["# How many repetitions per class a plan needs", "",
             f"Command: `python benchmarks/repetitions.py {' '.join(sys.argv[1:])}`".rstrip(), "",
             f"Data: ISL June sessions (`../shared/data/isl`), 27 recordings per letter. "
             f"Per repetition count r and seed: r "
             f"recordings per class drawn at random are the session; the service's pipeline runs on it (`auto` "
             f"split by recording, `{args.strategy}` on {args.target} with the service's recipe, budget {args.budget}, "
             f"runtime auto); the deploy gate at min_accuracy {args.min_accuracy} on the int8 model's held-out "
             f"windows; the other 27 - r recordings of those classes, never seen, are what the user would really "
             f"get. Seeds {args.seeds}. Machine: {platform.machine()}, 2 cores; {args.shared}.", "",
             "The pooled interval counts every unseen window of every seed; the seeds redraw the same 27 recordings "
             "per class, so the windows are not independent across seeds and the interval is narrower than the "
             "evidence: read the per-seed spread (per run, below) beside it.", "",
             "| classes | r | held-out windows | gate: deploy / more / refuse | unseen accuracy (mean over seeds) | "
             "unseen, pooled (95 % interval) | minutes of prompts (gestures4's / isl26's timing) |",
             "|---|---|---|---|---|---|---|"]
    for (classes, reps) in sorted({(r["classes"], r["reps"]) for r in runs}):
        rows = [r for r in runs if r["classes"] == classes and r["reps"] == reps]
        gate = {k: sum(r["gate"] == k for r in rows) for k in ("deploy", "undecided", "refuse")}
        hits, n = sum(r["unseen_hits"] for r in rows), sum(r["unseen_windows"] for r in rows)
        low, high = wilson(hits, n)
        lines.append(f"| {classes} | {reps} | {rows[0]['held_out_windows']} | {gate['deploy']} / {gate['undecided']} / "
                     f"{gate['refuse']} of {len(rows)} | {np.mean([r['unseen_accuracy'] for r in rows]):.3f} | "
                     f"{hits / n:.3f} ({low:.3f}-{high:.3f}, {n} windows) | "
                     f"{classes * reps * SECONDS_PER_PROMPT[classes] / 60:.1f} |")
    lines += ["", "Per run:", "", "| classes | r | seed | winner | held-out hits | gate (more per class) | "
              "unseen accuracy | s |", "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r['classes']} | {r['reps']} | {r['seed']} | {r['winner']} | {r['held_out_hits']} of "
                     f"{r['held_out_windows']} | {r['gate']}" + (f" ({r['more_per_class']})" if r["more_per_class"]
                                                                  else "")
                     + f" | {r['unseen_accuracy']:.3f} | {r['seconds']:.0f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", default="A,B,D,L", help="letters of the small plan (and all 26 with --isl26)")
    parser.add_argument("--reps", default="3,5,8,10,15", help="repetition counts of the small plan")
    parser.add_argument("--isl26-reps", default="5,10", help="repetition counts of the 26-letter plan ('' : none)")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--budget", default="90s", help="search budget per run (the service's default is 10m)")
    parser.add_argument("--shared", default="nothing else ran", help="what shared the machine (for the results)")
    parser.add_argument("--work", help="keep the searches (a sweep) in this folder, and resume them there when "
                                       "run again with the same arguments (default: a temporary folder)")
    parser.add_argument("--rewrite", action="store_true", help="only re-render repetitions.md from repetitions.json")
    parser.add_argument("--merge", action="store_true",
                        help="keep the runs already in results/repetitions.json (other plans or seeds)")
    args = parser.parse_args()
    if not ISL.is_dir():
        print(f"skipped: no ISL data at {ISL}")
        return 0
    config = ServiceConfig()
    args.strategy, args.target, args.min_accuracy = config.strategy, config.target, config.min_accuracy
    if args.rewrite:
        (RESULTS / "repetitions.md").write_text(render(json.loads((RESULTS / "repetitions.json").read_text()), args))
        return 0
    windows = load_windows(f"isl:{ISL}")
    seeds = [int(s) for s in args.seeds.split(",")]
    plans = [(args.classes.split(","), int(r)) for r in args.reps.split(",") if r]
    plans += [(list(windows.class_names), int(r)) for r in args.isl26_reps.split(",") if r]
    stored = RESULTS / "repetitions.json"
    runs = json.loads(stored.read_text()) if args.merge and stored.exists() else []
    RESULTS.mkdir(exist_ok=True)
    wanted = [(classes, reps, seed) for classes, reps in plans for seed in seeds]
    with contextlib.ExitStack() as stack:
        work = Path(args.work) if args.work else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        searches = searched(work / "searches", search_table(wanted, windows, config, args.budget, work),
                            progress=lambda line: print(line, flush=True))
        for (classes, reps, seed), (cell, folder) in zip(wanted, searches, strict=True):
            run = one_run(windows, classes, reps, seed, config, folder, cell.seconds)
            runs = [r for r in runs if (r["classes"], r["reps"], r["seed"]) != (len(classes), reps, seed)] + [run]
            stored.write_text(json.dumps(runs, indent=1) + "\n")
            print(json.dumps(run), flush=True)
    (RESULTS / "repetitions.md").write_text(render(runs, args))
    print(render(runs, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
