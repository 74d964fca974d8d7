"""Which selection rule picks the candidate that is best on windows never seen (issue 54).

    nice python benchmarks/selection.py                     # ISL and CWRU subsets, 5 seeds (about an hour)
    nice python benchmarks/selection.py --data isl --reps 15 --seeds 0   # one cell

On the few windows a person records, a search ranks its candidates on the split's validation side: for 4 classes at
15 repetitions, 4 windows. This measures, on real data cut to onboarding size, how well each rule's ranking follows
the truth, and what the chosen model is worth:

- Data: ISL June sessions (`../shared/data/isl`): 4 letters (A, B, D, L), r recordings per letter drawn at random are
  the session, the other 27 - r are never seen. CWRU 0 hp (`../shared/data/cwru`): 4 states (normal, IR007, B007,
  OR007@6), each file cut into segments of 6 windows (0.26 s; the bearing4 plan records 0.5 s segments, but the
  normal file holds only 5.1 s): r segments per state are the session, the other segments are never seen (same
  recording day and file: a within-session figure).
- For every candidate of `fast`'s frontier on the service's default target (STM32C011F6P6, kernel 3), with fast's
  race recipe and no curve stop (every candidate fully scored): (a) the validation rule's score, its best
  validation loss on the service's split (by recording, seed 0); (b) the cross-validation rule's score, the mean of
  its fold losses over the training and validation windows (`tinynas.study.crossval`); (c) the truth, its accuracy
  on the unseen windows after training on all training and validation windows with the final recipe.
- Reported: Spearman's rank correlation of each rule's score (lower loss = better) with the truth, per run and its
  mean over seeds; the truth of the candidate each rule picks; the training seconds of each rule's scoring.

Results: benchmarks/results/selection.md and selection.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinynas.cost.estimate import estimate  # noqa: E402
from tinynas.cost.targets import resolve_target  # noqa: E402
from tinynas.data.preprocess import Preprocessing  # noqa: E402
from tinynas.data.spec import load_windows  # noqa: E402
from tinynas.data.splits import make_split  # noqa: E402
from tinynas.data.windows import Windows  # noqa: E402
from tinynas.search import SearchSpace  # noqa: E402
from tinynas.search.fast import FAST_RECIPE, FINAL_PATIENCE, FastStrategy  # noqa: E402
from tinynas.study.crossval import recording_folds  # noqa: E402
from tinynas.study.jobs import JobFactory  # noqa: E402
from tinynas.study.pool import WorkerPool  # noqa: E402
from tinynas.training.job import FinalJob  # noqa: E402
from tinynas.trial import Trial, TrialState  # noqa: E402
from tinynas.verdict import wilson  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
TARGET = "STM32C011F6P6"


def _subset(windows: Windows, indices, wanted: list[int], groups=None) -> Windows:
    indices = np.asarray(indices)
    order = {label: number for number, label in enumerate(wanted)}
    return Windows(windows.x[indices], np.array([order[int(v)] for v in windows.y[indices]]),
                   (windows.groups if groups is None else groups)[indices],
                   tuple(windows.class_names[i] for i in wanted), windows.sample_rate_hz, windows.channel_names,
                   {"source": "session"})


def isl_session(reps: int, seed: int) -> tuple[Windows, Windows]:
    windows = load_windows(f"isl:{SHARED / 'isl'}")
    wanted = [windows.class_names.index(c) for c in ("A", "B", "D", "L")]
    rng = np.random.default_rng(seed)
    session, unseen = [], []
    for label in wanted:
        members = np.flatnonzero(windows.y == label)
        chosen = set(rng.choice(members, size=reps, replace=False).tolist())
        session += sorted(chosen)
        unseen += [m for m in members if m not in chosen]
    return _subset(windows, session, wanted), _subset(windows, unseen, wanted)


SEGMENT = 6
"""CWRU windows per segment (0.26 s at 12 kHz in 512-sample windows): a recording. The 0 hp normal file holds 119
windows (5.1 s), 19 such segments: 15 of them recorded still leave 4 never seen."""


def cwru_session(reps: int, seed: int) -> tuple[Windows, Windows]:
    windows = load_windows(f"cwru:{SHARED / 'cwru'}?files=97,105,118,130")
    wanted = list(range(4))
    groups = np.array([f"{g}-{i // SEGMENT}" for g, i in zip(windows.groups, _position(windows.groups))])
    rng = np.random.default_rng(seed)
    session, unseen = [], []
    for label in wanted:
        members = np.flatnonzero(windows.y == label)
        names = sorted(set(groups[members]))
        chosen = set(rng.choice(names, size=reps, replace=False).tolist())
        session += [m for m in members if groups[m] in chosen]
        unseen += [m for m in members if groups[m] not in chosen]
    return _subset(windows, session, wanted, groups), _subset(windows, unseen, wanted, groups)


def _position(groups: np.ndarray) -> list[int]:
    """Each window's index within its file."""
    seen: dict[str, int] = {}
    out = []
    for group in groups:
        out.append(seen.get(group, 0))
        seen[group] = out[-1] + 1
    return out


def frontier(windows: Windows) -> list:
    target = resolve_target(TARGET)
    space = SearchSpace(windows.window_length, windows.channels, windows.classes)
    strategy = FastStrategy(space, seed=0, is_feasible=lambda a: estimate(a, runtime="c", core=target.core)
                            .fits(target), final_fidelity=FAST_RECIPE)
    found = []
    while (proposal := strategy.ask()) is not None:  # every frontier candidate, largest compute first
        found.append(proposal.architecture)
    return found


def spearman(a, b) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    if np.std(ra) == 0 or np.std(rb) == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def one_run(data: str, reps: int, seed: int, scratch: Path, pool: WorkerPool) -> dict:
    recorded, unseen = (isl_session if data == "isl" else cwru_session)(reps, seed)
    both = Windows(np.concatenate([recorded.x, unseen.x]), np.concatenate([recorded.y, unseen.y]),
                   np.concatenate([recorded.groups, unseen.groups]), recorded.class_names, recorded.sample_rate_hz,
                   recorded.channel_names, recorded.provenance)
    path = scratch / f"{data}-{reps}-{seed}.npz"
    both.save(path)
    split = make_split(recorded, "auto", seed=0)  # the service's
    pool_indices = np.concatenate([split.train, split.val])
    folds = recording_folds(recorded, pool_indices, seed)
    unseen_indices = tuple(range(len(recorded), len(both)))
    pre = Preprocessing.fit(recorded, split.train, "none").to_dict()
    race = replace(FAST_RECIPE, patience=FINAL_PATIENCE)  # fast's race, without its curve stop: every score whole
    candidates = frontier(recorded)
    plain = JobFactory(seed, path, split, pre, FAST_RECIPE)
    crossed = JobFactory(seed, path, split, pre, FAST_RECIPE, folds=folds)
    jobs, kinds = [], {}
    for number, arch in enumerate(candidates):
        trial = Trial(number, arch, race, TrialState.RUNNING)
        for kind, job in (("val", plain.train(trial)), ("cv", crossed.train(trial)),
                          ("truth", FinalJob(number, arch, FAST_RECIPE, seed, str(path),
                                             tuple(int(i) for i in pool_indices), (), unseen_indices,
                                             preprocessing=pre, health=False))):
            kinds[len(jobs)] = (number, kind)
            jobs.append(replace(job, job_id=len(jobs)))
    results: dict = {}
    pending = list(jobs)
    while pending or len(results) < len(jobs):
        while pending and pool.idle():
            pool.submit(pending.pop(0))
        for result in pool.wait(timeout=1.0):
            results[kinds[result.job_id]] = result
    rows = []
    for number, arch in enumerate(candidates):
        val, cv, truth = (results[(number, kind)] for kind in ("val", "cv", "truth"))
        rows.append({"name": arch.name(), "val_score": min(val.val_loss) if val.ok else None,
                     "val_accuracy": val.val_accuracy[int(np.argmin(val.val_loss))] if val.ok else None,
                     "cv_score": cv.cross_validation.get("score") if cv.ok else None,
                     "cv_hits": cv.cross_validation.get("hits"), "cv_windows": cv.cross_validation.get("windows"),
                     "truth": truth.float_test_accuracy, "val_seconds": round(val.seconds, 2),
                     "cv_seconds": round(cv.seconds, 2), "truth_seconds": round(truth.seconds, 2)})
    ok = [r for r in rows if None not in (r["val_score"], r["cv_score"], r["truth"])]
    truths = [r["truth"] for r in ok]
    picked = {rule: min(ok, key=lambda r: r[f"{rule}_score"]) for rule in ("val", "cv")}
    return {"data": data, "reps": reps, "seed": seed, "recorded": len(recorded), "unseen": len(unseen),
            "validation_windows": int(len(split.val)), "folds": folds.describe() if folds else None,
            "candidates": rows,
            "spearman_val": spearman([-r["val_score"] for r in ok], truths),
            "spearman_cv": spearman([-r["cv_score"] for r in ok], truths),
            "picked_val": picked["val"]["name"], "truth_val": picked["val"]["truth"],
            "picked_cv": picked["cv"]["name"], "truth_cv": picked["cv"]["truth"],
            "best_truth": max(truths), "val_seconds": sum(r["val_seconds"] for r in rows),
            "cv_seconds": sum(r["cv_seconds"] for r in rows)}


def render(runs: list[dict], args) -> str:
    lines = ["# Selection on the few windows a person records", "",
             f"Command: `python benchmarks/selection.py {shlex.join(sys.argv[1:])}`".rstrip(), "",
             __doc__.split("\n\n", 2)[2].split("\n\nResults:")[0].strip(), "",
             f"Machine: {platform.machine()}, 2 cores, 2 training workers; {args.shared}. Spearman's rho is over the "
             f"frontier's candidates of one run (9-10 of them: a rho of 0.6 is the usual 5 % significance line for "
             f"n = 9); the truth is measured on the unseen windows, whose count each row gives.", "",
             "| data | r | validation windows | folds (windows) | rho, validation rule (mean +- sd) | "
             "rho, cross-validation | unseen accuracy of the pick: validation | cross-validation | best candidate | "
             "scoring seconds: validation | cross-validation |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (data, reps) in sorted({(r["data"], r["reps"]) for r in runs}):
        rows = [r for r in runs if (r["data"], r["reps"]) == (data, reps)]

        def stat(key, rows=rows) -> str:
            values = [r[key] for r in rows if r[key] == r[key]]
            return f"{np.mean(values):.2f} +- {np.std(values):.2f}" if values else "-"
        unseen = sum(r["unseen"] for r in rows)
        picks = {rule: sum(r[f"truth_{rule}"] * r["unseen"] for r in rows) for rule in ("val", "cv")}
        ci = {rule: wilson(round(picks[rule]), unseen) for rule in picks}
        folds = rows[0]["folds"]
        lines.append(f"| {data} | {reps} | {rows[0]['validation_windows']} | "
                     f"{folds['folds']} ({folds['windows']})" if folds else f"| {data} | {reps} | - | -")
        lines[-1] += (f" | {stat('spearman_val')} | {stat('spearman_cv')} | "
                      f"{picks['val'] / unseen:.3f} ({ci['val'][0]:.3f}-{ci['val'][1]:.3f}) | "
                      f"{picks['cv'] / unseen:.3f} ({ci['cv'][0]:.3f}-{ci['cv'][1]:.3f}) | "
                      f"{np.mean([r['best_truth'] for r in rows]):.3f} | "
                      f"{np.mean([r['val_seconds'] for r in rows]):.0f} | "
                      f"{np.mean([r['cv_seconds'] for r in rows]):.0f} |")
    lines += ["", f"Seeds {args.seeds}; unseen accuracy pooled over seeds' unseen windows (95 % Wilson interval; the "
              "seeds redraw the same recordings, so the windows are not independent across seeds: read the per-run "
              "figures beside it).", "", "Per run:", "",
              "| data | r | seed | rho val | rho cv | pick (val) | unseen | pick (cv) | unseen | best |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r['data']} | {r['reps']} | {r['seed']} | {r['spearman_val']:.2f} | {r['spearman_cv']:.2f} | "
                     f"{r['picked_val']} | {r['truth_val']:.3f} | {r['picked_cv']} | {r['truth_cv']:.3f} | "
                     f"{r['best_truth']:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="isl,cwru")
    parser.add_argument("--reps", default="5,10,15")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--shared", default="nothing else ran", help="what shared the machine (for the results)")
    parser.add_argument("--merge", action="store_true", help="keep the runs already in results/selection.json")
    parser.add_argument("--rewrite", action="store_true", help="only re-render selection.md from selection.json")
    args = parser.parse_args()
    stored = RESULTS / "selection.json"
    if args.rewrite:
        (RESULTS / "selection.md").write_text(render(json.loads(stored.read_text()), args))
        return 0
    runs = json.loads(stored.read_text()) if args.merge and stored.exists() else []
    with tempfile.TemporaryDirectory() as scratch, WorkerPool(2, 1) as pool:
        for data in args.data.split(","):
            if not (SHARED / data).is_dir():
                print(f"skipped {data}: no data at {SHARED / data}")
                continue
            for reps in [int(r) for r in args.reps.split(",")]:
                for seed in [int(s) for s in args.seeds.split(",")]:
                    started = time.monotonic()
                    run = one_run(data, reps, seed, Path(scratch), pool)
                    run["seconds"] = round(time.monotonic() - started, 1)
                    runs = [r for r in runs if (r["data"], r["reps"], r["seed"]) != (data, reps, seed)] + [run]
                    stored.write_text(json.dumps(runs, indent=1) + "\n")
                    print(json.dumps({k: v for k, v in run.items() if k != "candidates"}), flush=True)
    (RESULTS / "selection.md").write_text(render(runs, args))
    print(render(runs, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
