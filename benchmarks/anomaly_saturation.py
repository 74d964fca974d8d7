"""Why the small network scorer missed faults the features catch, and what scoring the input's range changes
(issue 59)

    nice python benchmarks/anomaly_saturation.py --seeds 0,1,2 [--work DIR]   # -> results/anomaly-saturation.md

The int8 input's range is set by the converter on the training windows (normal running and the synthetic
anomalies made of it). A real fault far louder than that reaches the network clipped to the range. Here each
search's exported scorer is scored two ways on the same windows, each with its own split-conformal threshold for
1 % false alarms set on the study's own calibration windows (the normal test side):

- **clipped**: output[1] - output[0] of the int8 model (what was served before);
- **range scored**: plus `tinynas.anomaly.scoring.SATURATION_STEP` per input sample at the edge of the int8 range (what
  the product serves now, in Python and in the generated `tinynas_score`).

Beside them, the classical scorer (`tinynas.anomaly.classical`) fitted on the same study's training windows with
the same rule for its threshold. Data (development copies only): CWRU 0 hp normal (file 97's first 70 %) to search
on; its faults at 0 hp and 1 hp (`cwru_1hp_dev`) and file 97's last 30 % (windows every 128 samples, overlapping)
to measure on, as benchmarks/anomaly.py cuts them. Searches: `fast`, 300 s budget, tflm with the arena accounted,
on a 4 KiB and a 6 KiB chip, one per seed, through the sweep (`--work` keeps them: a second run searches nothing).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import tempfile
from pathlib import Path

import numpy as np
from anomaly import RATE, SHARED, cwru_sets
from grid_runs import npz_spec, searched

RESULTS = Path(__file__).parent / "results"
TARGETS = ("STM32F030F4P6", "STM32C011F6P6")


def measure(folder: Path, sets: dict) -> dict:
    """One search's scorer, clipped and range scored, and the classical scorer of the same study's windows."""
    from tinynas.anomaly import classical
    from tinynas.anomaly.metrics import above
    from tinynas.anomaly.scoring import SATURATION_STEP, int8_scores, saturated
    from tinynas.anomaly.threshold import calibrate
    from tinynas.data.preprocess import Preprocessing
    from tinynas.data.windows import Windows
    from tinynas.deploy.litert import Int8Model
    from tinynas.folders import load_split

    card = json.loads((folder / "card.json").read_text())
    model = Int8Model((folder / "model.tflite").read_bytes())
    prepare = Preprocessing.from_card(card).apply
    study = Windows.load(folder / "windows.npz")
    split = load_split(folder / "split.npz", len(study))
    train, test = split["train"], split["test"]
    calibration = test[study.y[test] == 0]
    synthetic = test[study.y[test] == 1]
    measured = {"calibration": study.x[calibration], "synthetic test": study.x[synthetic], **sets}
    clipped = {name: int8_scores(model, prepare(x), 0) for name, x in measured.items()}
    edge = {name: saturated(model.quantize(prepare(x))) for name, x in measured.items()}
    scorer = classical.fit(study.x[train[study.y[train] == 0]], study.x[train[study.y[train] == 1]])
    families = {"clipped": clipped,
                "range scored": {name: s + SATURATION_STEP * edge[name] for name, s in clipped.items()},
                "classical": {name: scorer.score(x) for name, x in measured.items()}}
    said = re.search(r"winner (A\([^)]*\))", (folder / "search.log").read_text())
    row = {"architecture": said.group(1) if said else "?", "ram": card["cost_estimate"]["peak_ram_bytes"],
           "calibration_at_edge": int(np.sum(edge["calibration"] > 0)), "calibration": len(calibration),
           "faults_at_edge": {name: float(np.mean(edge[name] > 0)) for name in sets if name != "normal later"}}
    for family, scores in families.items():
        threshold = calibrate(scores["calibration"], None, RATE).value
        row[family] = {name: above(s, threshold)["rate"] for name, s in scores.items() if name != "calibration"}
    return row


def fault_sets() -> dict:
    """Each fault class at each load, and file 97's later normal running, as raw windows."""
    _, _, held128, faults0, faults1, _ = cwru_sets()
    sets = {"normal later": held128.x}
    for load, faults in (("0 hp", faults0), ("1 hp", faults1)):
        for index, label in enumerate(faults.class_names):
            sets[f"{label} {load}"] = faults.x[faults.y == index]
    return sets


def cwru_searches(work: Path, seeds: list[int], targets) -> list:
    """One `fast` anomaly search (300 s, tflm with the arena accounted) per seed and target on CWRU 0 hp's training
    normal windows, run as a sweep in `work` (resumed there): each cell with its folder."""
    grid = {"cells": [{"runtime": "tflm", "accounting": "arena"}], "grid": {"seed": seeds, "target": list(targets)},
            "fixed": {"data": npz_spec(cwru_sets()[0], work / "data" / "train.npz"), "task": "anomaly",
                      "false_alarm_rate": RATE, "strategy": "fast", "budget": "300s"}}
    return searched(work / "sweep", grid, parallel=2)


def report(rows: list[dict], command: str, shared: str) -> str:
    faults = [name for name in rows[0]["clipped"] if name not in ("synthetic test", "normal later")]
    lines = ["# Scoring the int8 input's range: the small scorer's misses", "",
             f"Command: `{command}`. Machine: 2-core x86_64 VM; what shared it: {shared or 'nothing recorded'}.", "",
             "\n\n".join(__doc__.split("\n\n")[2:5]), "",
             "Per search (seed, chip): the detection rate at the 1 % threshold. `worst fault` is the lowest over "
             f"the {len(faults)} fault classes x loads; `false alarms` on file 97's later normal running "
             f"({rows[0]['normal_later']} windows, overlapping: not independent); `at edge`: calibration windows "
             "with a sample at the int8 range's edge, and the share of fault windows that have one.", "",
             "| seed | chip | winner (RAM) | at edge: calibration / faults | worst fault: clipped | range scored "
             "| classical | synthetic test: clipped / range scored / classical | false alarms: clipped / range "
             "scored / classical |", "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        worst = {family: min(row[family][name] for name in faults) for family in ("clipped", "range scored",
                                                                                  "classical")}
        name = {family: min(faults, key=lambda n, f=family: row[f][n]) for family in worst}
        at_edge = np.mean(list(row["faults_at_edge"].values()))
        lines.append(
            f"| {row['seed']} | {row['target']} | {row['architecture']} ({row['ram']:,} B) | "
            f"{row['calibration_at_edge']} of {row['calibration']} / {at_edge:.0%} | "
            f"{worst['clipped']:.3f} ({name['clipped']}) | "
            f"{worst['range scored']:.3f} ({name['range scored']}) | {worst['classical']:.3f} | "
            + " / ".join(f"{row[f]['synthetic test']:.3f}" for f in ("clipped", "range scored", "classical"))
            + " | " + " / ".join(f"{row[f]['normal later']:.3f}" for f in ("clipped", "range scored", "classical"))
            + " |")
    lines += ["", "Every class below 0.99 (clipped -> range scored; classical):", ""]
    for row in rows:
        low = [f"{n} {row['clipped'][n]:.3f} -> {row['range scored'][n]:.3f} ({row['classical'][n]:.3f})"
               for n in faults if min(row["clipped"][n], row["range scored"][n]) < 0.99]
        lines.append(f"- seed {row['seed']}, {row['target']}: " + ("; ".join(low) or "none"))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--work", default="", help="where the searches are kept (resumed there)")
    parser.add_argument("--shared", default="", help="what else ran on the machine (recorded in the results)")
    args = parser.parse_args(argv)
    if not (SHARED / "cwru" / "97.mat").exists():
        print(f"skipped: {SHARED / 'cwru'} is not here")
        return 0
    seeds = [int(s) for s in args.seeds.split(",")]
    work = Path(args.work or tempfile.mkdtemp(prefix="tinynas-saturation-"))
    sets = fault_sets()
    rows = []
    for cell, folder in cwru_searches(work, seeds, TARGETS):
        row = {"seed": cell.values["seed"], "target": cell.values["target"], "normal_later": len(sets["normal later"]),
               **measure(folder, sets)}
        rows.append(row)
        print(json.dumps({key: row[key] for key in ("seed", "target", "calibration_at_edge")}), flush=True)
    said = [f"benchmarks/{Path(__file__).name}", *(argv or sys.argv[1:])]
    command = "python " + " ".join(shlex.quote(a) for a in said)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "anomaly-saturation.md").write_text(report(rows, f"nice {command}", args.shared))
    print(f"wrote {RESULTS / 'anomaly-saturation.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
