"""A healthy machine is all the user has: anomaly scorers learnt from normal running only.

    nice python benchmarks/anomaly.py --seeds 0,1,2          # -> results/anomaly.md (+ anomaly.jsonl)

Data (../shared/data; skipped cleanly when absent), drive-end accelerometer (channel DE), 512-sample
windows at 12 kHz (the 48 kHz normal baseline resampled 1:4, as the loader does):
- Training: the first 70 % of CWRU file 97 (0 hp normal, ~5.1 s in all), windows every 64 samples;
  the study splits them in time 50/20/30 (train / validate and select / calibrate the threshold).
- Held-out normal: the last 30 % of file 97 (~1.5 s), never seen by the study: the measured false-alarm
  rate. Counted on non-overlapping windows (the honest count, and so the FPR resolution) and on windows
  every 128 samples (more, but correlated).
- Anomalies: every 0 hp fault file (15) and every 1 hp development file (15, a load the model never saw;
  the 1 hp folder has no normal file, so 1 hp is zero-shot and its false-alarm rate cannot be measured).
  Non-overlapping windows of each file.
- Synthetic vibration (tinynas.data.synthetic): 600 normal windows train, a long normal run of 6,000
  windows of other recordings measures the false-alarm rate, 600 windows per fault class the detection.
Scorer families side by side at the same threshold rule (split conformal, 1 % false alarms):
- network: `tinynas search --task anomaly` (the A(k, c) family, `fast`, int8 through LiteRT), per target
  (STM32F030F4P6, STM32C011F6P6, nRF52840) and runtime (tflm, c); the searches are the cells of two sweeps
  (`tinynas.sweep`, `grid_runs.py`; the training windows written as .npz), `--work DIR` keeps and resumes them;
- classical: band energies + kurtosis / crest / RMS / skewness and a Gaussian (tinynas.anomaly.baseline),
  fitted on the same training windows and calibrated on the same calibration windows.
Selection check (CWRU 0 hp, STM32C011F6P6): 8 feasible architectures trained alike; the criterion the
search ranks by (validation loss on normal and synthetic windows) against each one's real detection.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from grid_runs import npz_spec, searched
from md_blocks import write_owned

RESULTS = Path(__file__).parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
TARGETS = ("STM32F030F4P6", "STM32C011F6P6", "nRF52840")
RUNTIMES = ("tflm", "c")
RATE = 0.01
WINDOW = 512
FAULTS_0HP = (105, 118, 130, 144, 156, 169, 185, 197, 209, 222, 234, 246, 258, 3001, 3005)
FAULTS_1HP = (106, 119, 131, 145, 158, 170, 186, 198, 210, 223, 235, 247, 259, 3002, 3006)


def cwru_sets():
    """(training normal, held-out normal non-overlapping, held-out normal hop 128, 0 hp faults, 1 hp faults)."""
    from tinynas.anomaly.task import normal_only
    from tinynas.data.spec import load_windows

    normal = load_windows(f"cwru:{SHARED / 'cwru'}?files=97&channel=DE&window={WINDOW}&hop=64")
    total = int(normal.time_index.max()) + WINDOW
    cut = int(0.7 * total)
    train = normal.subset(np.flatnonzero(normal.time_index + WINDOW <= cut))
    held = {}
    for hop in (WINDOW, 128):
        every = load_windows(f"cwru:{SHARED / 'cwru'}?files=97&channel=DE&window={WINDOW}&hop={hop}")
        held[hop] = every.subset(np.flatnonzero(every.time_index >= cut))
    faults0 = load_windows(f"cwru:{SHARED / 'cwru'}?files={','.join(map(str, FAULTS_0HP))}&channel=DE"
                           f"&window={WINDOW}&hop={WINDOW}")
    faults1 = load_windows(f"cwru:{SHARED / 'cwru_1hp_dev'}?files={','.join(map(str, FAULTS_1HP))}&channel=DE"
                           f"&window={WINDOW}&hop={WINDOW}")
    return normal_only(train), held[WINDOW], held[128], faults0, faults1, {"samples": total, "cut": cut}


SYNTHETIC_NOISE = (0.5, 1.0)
"""The synthetic machine's sensor noise: the generator's default, and a noisier one where the faults are faint
(the classical baseline detects about a third of outer-race windows there)."""


def synthetic_sets(seed: int, noise: float):
    from tinynas.data.synthetic import vibration
    from tinynas.data.windows import Windows

    def only(data, label):
        keep = np.flatnonzero(data.y == label)
        return Windows(data.x[keep], np.zeros(len(keep), int), data.groups[keep], (data.class_names[label],),
                       data.sample_rate_hz, data.channel_names, data.provenance)

    train = only(vibration(windows_per_class=600, length=WINDOW, windows_per_recording=20, noise=noise,
                           seed=100 + seed), 0)
    long_run = only(vibration(windows_per_class=6000, length=WINDOW, windows_per_recording=50, noise=noise,
                              seed=200 + seed), 0)
    # Every class of another machine's recordings: its normal class is left out of the detection figures.
    faults = vibration(windows_per_class=600, length=WINDOW, windows_per_recording=20, noise=noise, seed=300 + seed)
    return train, long_run, faults


def scores_of(folder: Path, windows) -> np.ndarray:
    from tinynas.anomaly.scoring import int8_scores
    from tinynas.anomaly.section import read_section
    from tinynas.data.preprocess import Preprocessing
    from tinynas.deploy.litert import Int8Model

    card = json.loads((folder / "card.json").read_text())
    model = Int8Model((folder / "model.tflite").read_bytes())
    return int8_scores(model, Preprocessing.from_card(card).apply(windows.x), read_section(card).saturation_step)


def figures(normal_scores: dict[str, np.ndarray], faults: dict[str, tuple], threshold: float) -> dict:
    """False alarms per held-out normal set; per fault set and class: AUROC against the non-overlapping
    normal windows, detection at the threshold."""
    from tinynas.anomaly.metrics import above, auroc

    out: dict = {"false_alarms": {name: above(s, threshold) for name, s in normal_scores.items()}}
    reference = normal_scores["held_out"]
    for name, (scores, labels, classes) in faults.items():
        per = {}
        for index, label in enumerate(classes):
            if label == "normal":
                continue
            mine = scores[labels == index]
            per[label] = {"auroc": auroc(reference, mine), "detected": above(mine, threshold)}
        out[name] = per
    return out


ACCOUNTING = {"tflm": "arena", "c": "chip"}
"""As the committed results were budgeted (issue 37): TFLite Micro's arena alone, since its whole footprint does not
fit two of these three chips at all."""


def search_tables(train_spec: str, synthetic: dict[tuple[int, float], str], seeds: list[int], targets: list[str],
                  budget: float) -> dict[str, dict]:
    """The network searches as two sweeps: CWRU's (each runtime with its accounting, crossed with seeds and
    targets) and the synthetic machine's (one data set per seed and noise, searched with that seed, one target)."""
    fixed = {"task": "anomaly", "false_alarm_rate": RATE, "strategy": "fast", "budget": f"{budget:g}s",
             "workers": int(os.environ.get("WORKERS", "2"))}
    return {
        "cwru": {"cells": [{"runtime": runtime, "accounting": ACCOUNTING[runtime]} for runtime in RUNTIMES],
                 "grid": {"seed": seeds, "target": targets}, "fixed": {"data": train_spec, **fixed}},
        "synthetic": {"cells": [{"data": spec, "seed": seed} for (seed, _noise), spec in synthetic.items()],
                      "fixed": {"target": "STM32C011F6P6", "runtime": "tflm", "accounting": ACCOUNTING["tflm"],
                                **fixed}}}


def network_run(folder: Path, sets, target: str, runtime: str, seed: int, seconds: float) -> dict:
    """The scorer searched in `folder` (a sweep's cell) on the held-out normal and fault sets."""
    card = json.loads((folder / "card.json").read_text())
    anomaly = card["anomaly"]
    normal = {name: scores_of(folder, w) for name, w in sets["normal"].items()}
    faults = {name: (scores_of(folder, w), w.y, w.class_names) for name, w in sets["faults"].items()}
    return {"family": "network", "target": target, "runtime": runtime, "seed": seed,
            "architecture": card["name"], "ram": card["cost_estimate"]["peak_ram_bytes"],
            "flash": card["cost_estimate"]["flash_bytes"] if runtime == "c" else card["flash_bytes"],
            "calibration_windows": anomaly["calibration"]["calibration_windows"],
            "threshold_steps": anomaly["threshold_steps"], "seconds": round(seconds, 1),
            "synthetic_test_auroc": anomaly["synthetic_test"]["auroc"],
            **figures(normal, faults, anomaly["threshold_steps"])}


def baseline_run(train, sets, seed: int) -> dict:
    """The classical baseline on the study's own split of the training windows (same train / calibration)."""
    from tinynas.anomaly.baseline import GaussianBaseline
    from tinynas.anomaly.classical import cost
    from tinynas.anomaly.task import prepare
    from tinynas.anomaly.threshold import calibrate

    prepared = prepare(train, "auto", seed, RATE)
    split = prepared.normal_split
    model = GaussianBaseline.fit(train.x[split.train])
    threshold = calibrate(model.score(train.x[split.test]), None, RATE)
    normal = {name: model.score(w.x) for name, w in sets["normal"].items()}
    faults = {name: (model.score(w.x), w.y, w.class_names) for name, w in sets["faults"].items()}
    return {"family": "classical", "target": "any", "runtime": "float32", "seed": seed,
            "architecture": "features + Gaussian", "cost": cost(WINDOW, 1, "Cortex-M0"),
            "calibration_windows": len(split.test),
            **figures(normal, faults, threshold.value)}


def selection_check(train, sets, seed: int, count: int = 8) -> list[dict]:
    """Candidates of one target trained as the search trains them (the study's own split, preprocessing and
    final recipe, augmentation included): the search's criterion against each one's real detection."""
    from tinynas.anomaly.metrics import above, auroc
    from tinynas.anomaly.task import score_of
    from tinynas.anomaly.threshold import conformal_threshold
    from tinynas.cost.estimate import estimate
    from tinynas.cost.targets import resolve_target
    from tinynas.space import Architecture, max_cells
    from tinynas.study import Study
    from tinynas.training.train import fit

    target = resolve_target("STM32C011F6P6")
    with tempfile.TemporaryDirectory() as work:  # nothing is run: the study only resolves what it would train on
        study = Study(Path(work) / "s", train, target, strategy="fast", seed=seed, task="anomaly",
                      false_alarm_rate=RATE)
    windows, split, pre, recipe = study.windows, study.split, study.preprocessing, study.final_fidelity
    kernel = study.space.kernel_size
    feasible = [(k, c) for k in range(1, 33) for c in range(0, max_cells(WINDOW) + 1)
                if estimate(Architecture(WINDOW, 1, 2, k=k, c=c, kernel_size=kernel), accounting="arena").fits(target)]
    rng = np.random.default_rng(seed)
    chosen = [feasible[i] for i in sorted(rng.choice(len(feasible), min(count, len(feasible)), replace=False))]
    rows = []
    for k, c in chosen:
        arch = Architecture(WINDOW, 1, 2, k=k, c=c, kernel_size=kernel)
        trained = fit(arch, pre.apply(windows.x[split.train]), windows.y[split.train],
                      pre.apply(windows.x[split.val]), windows.y[split.val], recipe, seed=seed)

        def score(x, model=trained.model):
            return score_of(model.predict(pre.apply(x)[:, None], verbose=0, batch_size=256))

        threshold = conformal_threshold(score(windows.x[study.anomaly.calibration]), RATE)
        faults = sets["faults"]["0hp"]
        fault_scores = score(faults.x)
        held = score(sets["normal"]["held_out"].x)
        rows.append({"architecture": arch.name(), "criterion_val_loss": trained.best_val_loss,
                     "auroc_0hp": auroc(held, fault_scores),
                     "worst_class_auroc_0hp": min(auroc(held, fault_scores[faults.y == i])
                                                  for i in range(faults.classes)),
                     "detected_0hp": above(fault_scores, threshold)["rate"],
                     "worst_class_detected_0hp": min(above(fault_scores[faults.y == i], threshold)["rate"]
                                                     for i in range(faults.classes)),
                     "false_alarms_held_out": above(held, threshold)["flagged"]})
    return rows


def mean_sd(values) -> str:
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not values:
        return "n/a"
    return f"{np.mean(values):.3f} ± {np.std(values):.3f}" if len(values) > 1 else f"{values[0]:.3f}"


def write_results(runs: list[dict], synthetic: list[dict], selection: list[dict], info: dict, path: Path) -> None:
    lines = ["# Anomaly detection from normal running only", "",
             "**RAM accounting** (issue 37): the `tflm` rows are budgeted and reported by the `arena` accounting "
             "(TFLite Micro's 32-bit arena and the `.tflite` alone); the `c` rows are the C runtime's whole footprint "
             "(`chip`). The classical baseline's RAM is an estimate of its own.", "",
             "`nice python benchmarks/anomaly.py --seeds " + info["seeds"] + "` "
             f"({info['date']}, {info['machine']}; {info['shared']}). Budget per search {info['budget']:g} s, "
             f"`fast`, {info['workers']} workers. int8 scores through LiteRT. Threshold: split conformal for "
             f"{RATE:.0%} false alarms on the study's held-out normal windows.", "",
             "## Data and what the counts allow", "",
             f"- CWRU file 97 (0 hp normal): {info['samples']:,} samples at 12 kHz after resampling "
             f"({info['samples'] / 12000:.2f} s). The first 70 % ({info['cut']:,} samples) train the study: "
             f"{info['train_windows']} windows of {WINDOW} every 64 samples, split in time 50/20/30 "
             f"(calibration: {info['calibration']} windows, ≥ 99 needed for 1 %).",
             f"- Held out: the last 30 %: **{info['held_out']} non-overlapping windows** (the honest count: a "
             f"false-alarm rate is resolved to 1/{info['held_out']} = {1 / info['held_out']:.1%}, and 0 false "
             f"alarms still allow up to {info['held_out_upper']:.1%} at 95 %), and {info['held_out_128']} windows "
             "every 128 samples (overlapping, correlated: not more evidence than the first count).",
             f"- Faults: 15 files at 0 hp ({info['faults_0hp']} windows), 15 at 1 hp ({info['faults_1hp']} "
             "windows), non-overlapping. 1 hp has no normal file here: zero-shot, and its false-alarm rate "
             "cannot be measured.", ""]
    lines += ["## CWRU, per target and runtime (mean ± sd over seeds)", "",
              "| family | target | runtime | RAM / flash | worst-class AUROC 0 hp | detection 0 hp (all) | "
              "worst-class detection 0 hp | false alarms held-out (non-overlapping) | detection 1 hp (zero-shot) | "
              "worst-class detection 1 hp |", "|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict = {}
    for run in runs:
        groups.setdefault((run["family"], run["target"], run["runtime"]), []).append(run)
    for (family, target, runtime), members in groups.items():
        def worst(run, key, field):
            values = [entry[field] if field == "auroc" else entry["detected"]["rate"] for entry in run[key].values()]
            return min(values)

        def overall(run, key):
            flagged = sum(e["detected"]["flagged"] for e in run[key].values())
            return flagged / sum(e["detected"]["windows"] for e in run[key].values())
        alarms = [m["false_alarms"]["held_out"] for m in members]
        costed = members[0].get("cost") or {}
        ram = costed.get("peak_ram_bytes", costed.get("ram_bytes"))  # ram_bytes: the estimate before issue 59
        size = (f"{members[0]['ram'] / 1024:.1f} / {members[0]['flash'] / 1024:.1f} KiB" if family == "network"
                else f"{ram / 1024:.1f} / {costed['flash_bytes'] / 1024:.1f} KiB (est.)")
        roc = mean_sd([worst(m, '0hp', 'auroc') for m in members])
        lines.append(f"| {family} | {target} | {runtime} | {size} | {roc}"
                     f" | {mean_sd([overall(m, '0hp') for m in members])} | "
                     f"{mean_sd([worst(m, '0hp', 'detected') for m in members])} | "
                     f"{sum(a['flagged'] for a in alarms)} of {sum(a['windows'] for a in alarms)} "
                     f"({mean_sd([a['rate'] for a in alarms])}) | {mean_sd([overall(m, '1hp') for m in members])} | "
                     f"{mean_sd([worst(m, '1hp', 'detected') for m in members])} |")
    lines += ["", "Architectures chosen: " + "; ".join(
        f"{r['target']}/{r['runtime']}/seed {r['seed']}: {r['architecture']}"
        for r in runs if r["family"] == "network"),
        "", "## Synthetic vibration: the false-alarm rate on a long normal run", "",
        "| noise | family | seed | false alarms on 6,000 normal windows (95 % interval) | AUROC | detection |",
        "|---|---|---|---|---|---|"]
    for row in sorted(synthetic, key=lambda r: (r["noise"], r["family"], r["seed"])):
        alarm = row["false_alarms"]["long_run"]
        every = [e for e in row["faults"].values()]
        lines.append(f"| {row['noise']:g} | {row['family']} | {row['seed']} | {alarm['flagged']} of "
                     f"{alarm['windows']}: {alarm['rate']:.2%} "
                     f"({alarm['interval95'][0]:.2%}-{alarm['interval95'][1]:.2%}) | "
                     f"{min(e['auroc'] for e in every):.3f} (worst class) | "
                     f"{min(e['detected']['rate'] for e in every):.3f} (worst class) |")
    lines += ["", "## Does the criterion pick near the best candidate? (CWRU 0 hp, STM32C011F6P6, seed 0)", "",
              "Float models trained as the search trains them (the study's split, preprocessing and recipe); "
              "threshold from the study's calibration windows.", "",
              "| architecture | criterion: val loss (normal + synthetic) | worst-class AUROC 0 hp | detection 0 hp | "
              "worst-class detection | false alarms (of 35 held out) |", "|---|---|---|---|---|---|"]
    for row in sorted(selection, key=lambda r: r["criterion_val_loss"]):
        lines.append(f"| {row['architecture']} | {row['criterion_val_loss']:.4f} | "
                     f"{row['worst_class_auroc_0hp']:.4f} | {row['detected_0hp']:.3f} | "
                     f"{row['worst_class_detected_0hp']:.3f} | {row['false_alarms_held_out']} |")
    if selection:
        from scipy.stats import spearmanr

        picked = min(selection, key=lambda r: r["criterion_val_loss"])
        best = max(r["worst_class_detected_0hp"] for r in selection)
        quality = [r["worst_class_detected_0hp"] + r["worst_class_auroc_0hp"] for r in selection]
        rho = spearmanr([-r["criterion_val_loss"] for r in selection], quality) if len(set(quality)) > 1 else None
        lines += ["", f"The criterion's pick ({picked['architecture']}) reaches worst-class detection "
                  f"{picked['worst_class_detected_0hp']:.3f}; the best of the {len(selection)} reaches {best:.3f} "
                  f"(regret {best - picked['worst_class_detected_0hp']:.3f}); "
                  + (f"Spearman rho between lower criterion and worst-class detection + AUROC: {rho.statistic:.2f}."
                     if rho is not None else "every candidate reached the same worst-class figures: no ranking to "
                     "correlate with.")]
    lines += ["", info.get("notes", ""), ""]
    write_owned(path, "\n".join(lines))  # after it, the sections other benchmarks wrote (anomaly_family.py's)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--budget", type=float, default=240.0, help="seconds per search")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--selection", type=int, default=8, help="candidates of the selection check (0: none)")
    parser.add_argument("--out", default=str(RESULTS / "anomaly.md"))
    parser.add_argument("--work", help="keep the searches (two sweeps) in this folder, and resume them there when "
                                       "run again with the same arguments (default: a temporary folder)")
    parser.add_argument("--render", action="store_true", help="only write the .md again from the .jsonl")
    args = parser.parse_args()
    if not (SHARED / "cwru" / "97.mat").exists():
        print(f"skipped: {SHARED / 'cwru'} is not here")
        return 0
    seeds = [int(s) for s in args.seeds.split(",")]
    train, held, held128, faults0, faults1, sizes = cwru_sets()
    sets = {"normal": {"held_out": held, "held_out_hop128": held128}, "faults": {"0hp": faults0, "1hp": faults1}}
    from tinynas.anomaly.task import prepare
    from tinynas.anomaly.threshold import rate_interval

    prepared = prepare(train, "auto", 0, RATE)
    info = {"seeds": args.seeds, "date": time.strftime("%Y-%m-%d"), "budget": args.budget,
            "workers": os.environ.get("WORKERS", "2"),
            "machine": f"{os.cpu_count()} cores, nothing else running",
            "shared": "data from ../shared/data/cwru and cwru_1hp_dev", **sizes,
            "train_windows": len(train), "calibration": len(prepared.calibration), "held_out": len(held),
            "held_out_128": len(held128), "held_out_upper": rate_interval(0, len(held))[1],
            "faults_0hp": len(faults0), "faults_1hp": len(faults1)}
    log = Path(args.out).with_suffix(".jsonl")
    if args.render:
        rows = [json.loads(line) for line in log.read_text().splitlines()]
        recorded = next((r["info"] for r in rows if "info" in r), None)
        if recorded is None:  # a run before its facts were recorded: say whose they are, never pass them off as its
            info["date"] += " (rendered; the run's own date and budget were not recorded)"
        info = recorded or info
        rows = [r for r in rows if "info" not in r]
        selection = next((r["selection"] for r in rows if "selection" in r), [])
        runs = [r for r in rows if "selection" not in r and "noise" not in r]
        synthetic = [r for r in rows if "noise" in r]
        write_results(runs, synthetic, selection, info, Path(args.out))
        return 0
    runs, synthetic = [], []
    targets = args.targets.split(",")
    with contextlib.ExitStack() as stack, open(log, "w") as jsonl:
        jsonl.write(json.dumps({"info": info}, default=float) + "\n")  # what --render writes the header from
        work = Path(args.work) if args.work else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        # Synthetic: one data set per seed and noise, written for its search.
        drawn = {(seed, noise): synthetic_sets(seed, noise) for seed in seeds for noise in SYNTHETIC_NOISE}
        specs = {key: npz_spec(sets_[0], work / "data" / f"synthetic-s{key[0]}-noise{key[1]:g}.npz")
                 for key, sets_ in drawn.items()}
        tables = search_tables(npz_spec(train, work / "data" / "cwru-0hp-normal-train.npz"), specs, seeds, targets,
                               args.budget)
        searches = {part: searched(work / part, table, progress=lambda line: print(line, flush=True))
                    for part, table in tables.items()}
        found = {(cell.values["seed"], cell.values["target"], cell.values["runtime"]): (folder, cell.seconds)
                 for cell, folder in searches["cwru"]}
        for seed in seeds:
            runs.append(baseline_run(train, sets, seed))
            jsonl.write(json.dumps(runs[-1], default=float) + "\n")
            for target in targets:
                for runtime in RUNTIMES:
                    folder, seconds = found[seed, target, runtime]
                    runs.append(network_run(folder, sets, target, runtime, seed, seconds))
                    jsonl.write(json.dumps(runs[-1], default=float) + "\n")
                    jsonl.flush()
        for (seed, noise), (cell, folder) in zip(drawn, searches["synthetic"], strict=True):
            strain, long_run, sfaults = drawn[seed, noise]
            ssets = {"normal": {"held_out": long_run, "long_run": long_run}, "faults": {"faults": sfaults}}
            for row in (baseline_run(strain, ssets, seed),
                        network_run(folder, ssets, "STM32C011F6P6", "tflm", seed, cell.seconds)):
                synthetic.append({**row, "noise": noise})
                jsonl.write(json.dumps(synthetic[-1], default=float) + "\n")
                jsonl.flush()
        print("selection check", flush=True)
        selection = selection_check(train, sets, 0, args.selection) if args.selection else []
        jsonl.write(json.dumps({"selection": selection}, default=float) + "\n")
    write_results(runs, synthetic, selection, info, Path(args.out))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
