"""Does a second donning at onboarding choose networks that survive re-wearing the armband? (issue 36)

    nice python benchmarks/donning.py --seeds 0,1,2,3,4 --processes 2

A two-donning plan validates on the second donning (leave-one-session-out), so two things change at once: which
architecture wins, and how the final model is trained (all of the first donning, its best epoch chosen on the second
donning, instead of 70 % with the best epoch chosen on the latest part of each block). This separates them, 2 x 2, on
ISL: June is the first donning, the re-worn session (`isl_session3_dev`) the second, one of its two repetitions
validating and the other testing (both folds, so 52 test windows per seed):

- `june` search: `fast` on June alone (the session protocol: each letter's block cut in time, 70/10/20); its winner
  and model, tested on the re-worn repetition;
- `two donnings` search: `fast` on June + the re-worn session (leave-one-session-out: trains on June, validates on
  one repetition, tests on the other), as the two-donning plan does;
- each winner's architecture also trained the other way (`fit` with the winner's final recipe): June's winner with
  the second donning validating, the two-donning winner on June's 70/10/20;
- each search's own model after `adapt` (unlabelled) and `recalibrate` (labelled) on the validating repetition,
  tested on the other. For the two-donning model that repetition has already chosen its architecture and epoch:
  in the product, the day-2 repetition would be a third donning, so this row is an upper bound for it.

Both searches are cells of one sweep (`tinynas.sweep`, `grid_runs.py`: June's search once per seed, the two-donning
search per seed and fold, its data written as .npz), each a `tinynas search` with a budget of an hour that `fast`
never reaches (it ends when its race does; a search that reached it would stop the benchmark): what shares the
machine changes the time, not the result. `--work DIR` keeps the searches and resumes them. Results:
`benchmarks/results/donning.md` (and `.jsonl`, one record per seed and fold).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from grid_runs import npz_spec, searched

from tinynas.verdict import wilson

RESULTS = Path(__file__).parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
JUNE, REWORN = f"isl:{SHARED / 'isl'}", f"isl:{SHARED / 'isl_session3_dev'}"
TARGET, RUNTIME = "LSM6DSO16IS", "c"
ARMS = ("june arch, june training", "june arch, donning training", "donning arch, june training",
        "donning arch, donning training")
AFTER = ("june model + adapt", "june model + recalibrate", "donning model + adapt", "donning model + recalibrate")
"""Each search's own model brought to the re-worn session with the validating repetition (26 windows), tested on the
other: `adapt` without its labels, `recalibrate` (fine-tuning, new-session statistics) with them."""


def _combined(june, reworn, fold: int):
    """June + the re-worn session as one data set of two sessions; fold 1 reverses the re-worn session's time so
    that its second repetition validates and its first tests."""
    from tinynas.data.windows import Windows

    times = reworn.time_index.astype(np.int64)
    if fold == 1:
        times = 2 * times.max() - times  # the later repetition comes first: it validates
    return Windows(np.concatenate([june.x, reworn.x]), np.concatenate([june.y, reworn.y]),
                   np.concatenate([june.groups.astype(str), reworn.groups.astype(str)]), june.class_names,
                   june.sample_rate_hz, june.channel_names, {**june.provenance, "files": len(june) + len(reworn)},
                   np.concatenate([june.sessions.astype(str), reworn.sessions.astype(str)]),
                   np.concatenate([june.time_index.astype(np.int64), times]))


BUDGET = "1h"
"""Far above the race's end: the searches end when `fast`'s race does, whatever shares the machine."""


def search_table(seeds: list[int], folds: dict[int, str]) -> dict:
    """The sweep: June's search per seed (the session split), the two-donning search per seed and fold (`folds`: its
    data spec; leave-one-session-out, as the two-donning plan does)."""
    cells = [{"data": JUNE, "split": "session", "seed": seed} for seed in seeds]
    cells += [{"data": spec, "split": "auto", "seed": seed} for seed in seeds for spec in folds.values()]
    return {"cells": cells, "fixed": {"target": TARGET, "runtime": RUNTIME, "strategy": "fast", "budget": BUDGET,
                                      "workers": 1}}


def _searched_within_budget(folder: Path) -> None:
    from tinynas.card import read_card
    from tinynas.units import parse_duration

    seconds = read_card(folder).to_dict()["search"]["seconds"]
    if seconds >= 0.95 * parse_duration(BUDGET):
        raise SystemExit(f"{folder}: the search ran {seconds:.0f} s, its whole budget: its result depends on the "
                         f"machine's speed; raise BUDGET")


def _trained_as(folder: Path, windows, split, seed: int, out: Path) -> Path:
    """The winner of the search in `folder` trained again with its final recipe on `split` of `windows`, as a model
    folder."""
    from tinynas.card import read_card
    from tinynas.data.preprocess import Preprocessing
    from tinynas.deploy.export import convert_int8, write_export
    from tinynas.folders import MODEL_WEIGHTS, SPLIT, WINDOWS, save_split, save_weights
    from tinynas.space import Architecture
    from tinynas.training.train import fit
    from tinynas.trial import Fidelity

    card = read_card(folder)
    recipe = {key: value for key, value in card.final_training.items()
              if key in Fidelity.__dataclass_fields__}
    pre = Preprocessing.fit(windows, split.train, card.preprocessing.get("normalize", "none"))
    arch = Architecture.from_dict(card.architecture)
    trained = fit(arch, pre.apply(windows.x[split.train]), windows.y[split.train], pre.apply(windows.x[split.val]),
                  windows.y[split.val], Fidelity(**recipe), seed=seed)
    tflite = convert_int8(trained.model, pre.apply(windows.x[split.train]))
    out.mkdir(parents=True, exist_ok=True)
    save_weights(trained.model, out / MODEL_WEIGHTS)
    windows.save(out / WINDOWS)
    save_split(out / SPLIT, split)
    write_export(out, arch, tflite, {"classes": list(windows.class_names), "preprocessing": pre.to_dict(),
                                     "split": split.describe()})
    return out


def run_fold(seed: int, fold: int, june, reworn, june_search: Path, donning_search: Path, root: Path) -> dict:
    """One seed and fold, from its two searches' folders: the 2 x 2 of architecture and training, each tested on the
    re-worn repetition that did not validate; each search's model adapted and recalibrated."""
    from tinynas.adaptation.adapt import adapt
    from tinynas.adaptation.recalibrate import Recipe, recalibrate
    from tinynas.card import read_card
    from tinynas.data.splits import make_split
    from tinynas.deploy.evaluate import evaluate

    both = _combined(june, reworn, fold)
    donning_split = make_split(both, "auto", seed=seed)
    assert donning_split.held_out == "2020-07-09", donning_split.protocol
    tested = donning_split.test[donning_split.test >= len(june)]
    assert len(tested) == len(donning_split.test) == reworn.classes, "one re-worn repetition should test"
    test = both.subset(tested)
    june_split = make_split(june, "session", seed=seed)
    record = {"seed": seed, "fold": fold, "tested": len(test), "validated_on": len(donning_split.val)}
    started = time.perf_counter()
    june_card, donning_card = read_card(june_search).to_dict(), read_card(donning_search).to_dict()
    record.update(june_arch=june_card["name"], donning_arch=donning_card["name"],
                  june_same_block=june_card["int8_test_accuracy"],
                  search_seconds=[june_card["search"]["seconds"], donning_card["search"]["seconds"]])
    models = {
        ARMS[0]: june_search,
        ARMS[1]: _trained_as(june_search, both, donning_split, seed, root / "june-donning"),
        ARMS[2]: _trained_as(donning_search, june, june_split, seed, root / "donning-june"),
        ARMS[3]: donning_search,
    }
    for arm, model in models.items():
        record[arm] = evaluate(model, test).accuracy
    calibration = both.subset(np.setdiff1d(donning_split.val[donning_split.val >= len(june)], tested))
    for name, model in (("june model", june_search), ("donning model", donning_search)):
        adapted = adapt(model, calibration, root / f"{name}-adapt").out_dir
        record[f"{name} + adapt"] = evaluate(adapted, test).accuracy
        recal = recalibrate(model, calibration, root / f"{name}-recal", seed=seed,
                            recipe=Recipe(statistics="new", max_forgetting=1.0))
        record[f"{name} + recalibrate"] = evaluate(recal.out_dir or model, test).accuracy  # rejected: the old one
    record["calibrated_on"] = len(calibration)
    record["seconds"] = round(time.perf_counter() - started, 1)
    return record


def report(records: list[dict], command: str, shared: str) -> str:
    done = [r for r in records if "failed" not in r]
    seeds = sorted({r["seed"] for r in done})
    lines = ["# A second donning at onboarding: architecture selection or training? (issue 36)", "",
             f"Command: `{command}`. Machine: 2-core x86_64 VM; what shared it: {shared or 'nothing noted'} (the "
             "searches end when their race does, far within their budget, so it changed their time, not their "
             "result).", "",
             __doc__.split("\n\n", 2)[2].split("Both searches")[0].strip(), "",
             f"`fast` search, {TARGET} with the C runtime (`--runtime c`), int8 through LiteRT. Per arm: the mean "
             "+- sd over seeds of each seed's accuracy (both folds pooled: 52 test windows per seed), then "
             "[95 % Wilson interval of all seeds' windows pooled].", "",
             "| arm | seeds | re-worn accuracy |", "|---|---|---|"]
    for arm in ARMS + AFTER:
        per_seed, hits, total = [], 0, 0
        for seed in seeds:
            rows = [r for r in done if r["seed"] == seed and arm in r]
            if len(rows) < 2:
                continue  # a seed counts once both folds are in
            seed_hits = sum(round(r[arm] * r["tested"]) for r in rows)
            seed_total = sum(r["tested"] for r in rows)
            per_seed.append(seed_hits / seed_total)
            hits, total = hits + seed_hits, total + seed_total
        if not per_seed:
            continue
        low, high = wilson(hits, total)
        lines.append(f"| {arm} | {len(per_seed)} | {np.mean(per_seed):.3f} +- {np.std(per_seed):.3f} "
                     f"[{low:.2f}, {high:.2f}] |")
    lines += ["", "Winners (seed, fold: June search / two-donning search): " + "; ".join(
        f"{r['seed']},{r['fold']}: {r['june_arch']} / {r['donning_arch']}" for r in done)]
    failed = [r for r in records if "failed" in r]
    if failed:
        lines += ["", "Failed: " + "; ".join(f"seed {r['seed']} fold {r['fold']}: {r['failed']}" for r in failed)]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--processes", type=int, default=1, help="searches at once (the sweep's --parallel)")
    parser.add_argument("--work", help="keep the searches (a sweep) in this folder, and resume them there when "
                                       "run again with the same arguments (default: a temporary folder)")
    parser.add_argument("--shared", default="", help="what else ran on the machine (recorded in the results)")
    args = parser.parse_args(argv)
    if not (SHARED / "isl").is_dir() or not (SHARED / "isl_session3_dev").is_dir():
        print(f"skipped: {SHARED}/isl and isl_session3_dev are needed", file=sys.stderr)
        return 0
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from tinynas.data.spec import load_windows

    log = RESULTS / "donning.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    finished = {(r["seed"], r["fold"]) for r in records if all(arm in r for arm in ARMS + AFTER)}
    seeds = [int(seed) for seed in args.seeds.split(",")]
    jobs = [(seed, fold) for seed in seeds for fold in (0, 1) if (seed, fold) not in finished]
    if not jobs:
        return 0
    command = "python benchmarks/donning.py " + " ".join(argv if argv is not None else sys.argv[1:])
    june, reworn = load_windows(JUNE), load_windows(REWORN)
    with contextlib.ExitStack() as stack:
        work = Path(args.work) if args.work else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        folds = {fold: npz_spec(_combined(june, reworn, fold), work / "data" / f"two-donnings-fold{fold}.npz")
                 for fold in (0, 1)}
        mine = sorted({seed for seed, _fold in jobs})
        table = search_table(mine, folds)
        searches = {(cell.values["seed"], cell.values["data"]): folder for cell, folder in searched(
            work / "searches", table, parallel=args.processes, progress=lambda line: print(line, flush=True))}
        for folder in searches.values():
            _searched_within_budget(folder)
        for seed, fold in jobs:
            try:
                record = run_fold(seed, fold, june, reworn, searches[seed, JUNE], searches[seed, folds[fold]],
                                  work / "after" / f"seed{seed}-fold{fold}")
            except Exception as exc:  # reported, not fatal to the other folds
                record = {"seed": seed, "fold": fold, "failed": f"{type(exc).__name__}: {exc}"[:300]}
            records = [r for r in records if (r["seed"], r["fold"]) != (seed, fold)] + [record]
            log.write_text("".join(json.dumps(r) + "\n" for r in records))
            (RESULTS / "donning.md").write_text(report(records, command, args.shared))
            print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
