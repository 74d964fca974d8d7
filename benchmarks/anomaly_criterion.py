"""Which scorer family does the anomaly search's normal-only criterion favour, and is that what real faults say?
(issue 59)

    nice python benchmarks/anomaly_criterion.py --seeds 0,1,2     # -> results/anomaly-criterion.md (+ .jsonl)

The search ranks anomaly scorers by how well they tell held-out normal windows from synthetic anomalies made of
them (`tinynas.anomaly.perturb`: impulse trains, resonance bands, noise; severities from 0.05 to 1.5 x the window's
RMS). Issue 59 asks for the classical scorer (features + Gaussian, `tinynas.anomaly.classical`) to be a candidate
ranked by the same criterion. Here both families are trained alike on the same windows and measured three ways:

- **the criterion**: validation cross-entropy and AUROC, normal against synthetic windows of every family (the
  network trained against all three; the classical scorer's Gaussian fitted on normal windows only, its link on
  the training side's normal and synthetic windows);
- **an unseen kind of anomaly**: each family in turn left out of training and measured on it alone (AUROC), so a
  network that only learnt the kinds it was shown cannot win by that;
- **real faults** (never used to train or choose): worst-class AUROC against the held-out normal windows, and
  worst-class detection at each scorer's split-conformal threshold for 1 % false alarms.

Data (development copies only): CWRU 0 hp normal (file 97's first 70 %, drive end, 512-sample windows every 64; the
study's split), its faults at 0 hp and 1 hp (`cwru_1hp_dev`), as benchmarks/anomaly.py cuts them; and the synthetic
machine at sensor noise 1.0 (its own fault classes). The network is one fixed architecture per data set (stated in
the results: the `fast` winners of anomaly.py's STM32C011F6P6 searches), trained with the study's final recipe and
augmentation; the architecture search is not what is measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from anomaly import RATE, SHARED, cwru_sets, synthetic_sets

RESULTS = Path(__file__).parent / "results"
ARCHITECTURES = {"CWRU 0 hp": (4, 5), "synthetic machine, noise 1.0": (5, 3)}
"""(k, c) per data set: the `fast` winners of anomaly.py's 120 s STM32C011F6P6 searches (tflm, seed 0)."""


def _sets(name: str, seed: int):
    """(training normal windows, held-out normal windows, {fault set name: windows with classes})."""
    if name.startswith("CWRU"):
        train, held, _held128, faults0, faults1, _ = cwru_sets()
        return train, held, {"0 hp": faults0, "1 hp": faults1}
    train, long_run, faults = synthetic_sets(seed, 1.0)
    return train, long_run, {"faults": faults}


def run(name: str, seed: int) -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from tinynas.anomaly import classical
    from tinynas.anomaly.metrics import auroc
    from tinynas.anomaly.perturb import FAMILIES, perturb, shaft_hz
    from tinynas.anomaly.task import SPLIT_FRACTIONS, normal_only, score_of
    from tinynas.anomaly.threshold import conformal_threshold
    from tinynas.cost.targets import resolve_target
    from tinynas.data.splits import group_split, temporal_split
    from tinynas.space import Architecture
    from tinynas.study import Study
    from tinynas.training.train import fit

    train, held, faults = _sets(name, seed)
    normal = normal_only(train)
    split = (temporal_split(normal, SPLIT_FRACTIONS) if normal.time_index is not None
             else group_split(normal, SPLIT_FRACTIONS, seed=seed))
    with tempfile.TemporaryDirectory() as work:  # nothing is run: the study only resolves its recipe
        study = Study(Path(work) / "s", train, resolve_target("STM32C011F6P6"), strategy="fast", seed=seed,
                      task="anomaly", false_alarm_rate=RATE)
    pre, recipe, kernel = study.preprocessing, study.final_fidelity, study.space.kernel_size
    shaft = shaft_hz(normal.provenance)
    k, c = ARCHITECTURES[name]
    arch = Architecture(normal.window_length, normal.channels, 2, k=k, c=c, kernel_size=kernel)
    n_train, n_val, n_cal = normal.x[split.train], normal.x[split.val], normal.x[split.test]
    record: dict = {"data": name, "seed": seed, "architecture": arch.name(), "train_normal": len(n_train),
                    "val_normal": len(n_val), "calibration": len(n_cal)}
    started = time.monotonic()

    def trained_on(families: tuple[str, ...]):
        """Both scorers trained against `families`, the network's training, and the validation anomalies."""
        rng = np.random.default_rng([seed, 59])
        made, _ = perturb(n_train, normal.sample_rate_hz, rng, shaft, families=families)
        val_made, _ = perturb(n_val, normal.sample_rate_hz, rng, shaft, families=families)
        x = np.concatenate([n_train, made])
        y = np.concatenate([np.zeros(len(n_train)), np.ones(len(made))]).astype(int)
        xv = np.concatenate([n_val, val_made])
        yv = np.concatenate([np.zeros(len(n_val)), np.ones(len(val_made))]).astype(int)
        trained = fit(arch, pre.apply(x), y, pre.apply(xv), yv, recipe, seed=seed)

        def network(windows):
            inputs = np.asarray(pre.apply(windows)).reshape(len(windows), 1, normal.window_length, normal.channels)
            return score_of(trained.model.predict(inputs, verbose=0, batch_size=256))

        fitted = classical.fit(n_train, made)
        return {"network": network, "classical": fitted.score}, trained, fitted, val_made, rng

    everything, trained, fitted, val_made, _rng = trained_on(FAMILIES)
    anomalous = np.concatenate([np.zeros(len(n_val), bool), np.ones(len(val_made), bool)])
    val_p = fitted.probability(fitted.score(np.concatenate([n_val, val_made])))
    record["criterion"] = {"network": {"val_loss": trained.best_val_loss},
                           "classical": {"val_loss": classical.cross_entropy(val_p, anomalous)}}
    for family, score in everything.items():
        normal_scores = score(n_val)
        record["criterion"][family]["val_auroc"] = auroc(normal_scores, score(val_made))
        threshold = conformal_threshold(score(n_cal), RATE)
        held_scores = score(held.x)
        real = {}
        for set_name, windows in faults.items():
            scores = score(windows.x)
            classes = [i for i, label in enumerate(windows.class_names) if label != "normal"]
            real[set_name] = {
                "worst_auroc": min(auroc(held_scores, scores[windows.y == i]) for i in classes),
                "worst_detection": min(float(np.mean(scores[windows.y == i] > threshold)) for i in classes),
                "worst_class": windows.class_names[min(classes, key=lambda i: np.mean(
                    scores[windows.y == i] > threshold))]}
        record.setdefault("real", {})[family] = real
        record.setdefault("false_alarms", {})[family] = int(np.sum(held_scores > threshold))
    record["held_normal"] = len(held)
    for left_out in FAMILIES:
        shown = tuple(f for f in FAMILIES if f != left_out)
        families, _trained, _fitted, _val, rng = trained_on(shown)
        unseen, _ = perturb(n_val, normal.sample_rate_hz, rng, shaft, families=(left_out,))
        record.setdefault("unseen", {})[left_out] = {
            family: auroc(score(n_val), score(unseen)) for family, score in families.items()}
    record["seconds"] = round(time.monotonic() - started, 1)
    return record


def _mean_sd(values) -> str:
    values = [v for v in values if v is not None]
    return f"{np.mean(values):.3f} ± {np.std(values):.3f}" if values else "n/a"


def report(records: list[dict], command: str, shared: str) -> str:
    lines = ["# The anomaly criterion: which family it favours, and what real faults say", "",
             f"Command: `{command}`. Machine: 2-core x86_64 VM; what shared it: {shared or 'nothing noted'}.", "",
             __doc__.split("\n\n", 2)[2].strip(), "",
             "Architectures: " + "; ".join(f"{name}: A{kc}" for name, kc in ARCHITECTURES.items())
             + ". Figures: mean ± sd over seeds " + ", ".join(sorted({str(r["seed"]) for r in records})) + ".", ""]
    for name in dict.fromkeys(r["data"] for r in records):
        rows = [r for r in records if r["data"] == name]
        first = rows[0]
        lines += [f"## {name}", "",
                  f"{first['train_normal']} normal windows train, {first['val_normal']} validate (with as many "
                  f"synthetic), {first['calibration']} calibrate the threshold; {first['held_normal']} held-out "
                  "normal windows for the real-fault AUROC and false alarms.", "",
                  "| measure | network | classical |", "|---|---|---|"]

        def row(label, get, rows=rows, lines=lines):
            lines.append(f"| {label} | {_mean_sd([get(r, 'network') for r in rows])} | "
                         f"{_mean_sd([get(r, 'classical') for r in rows])} |")

        row("criterion: validation loss (lower is better)", lambda r, f: r["criterion"][f]["val_loss"])
        row("criterion: validation AUROC, normal vs synthetic", lambda r, f: r["criterion"][f]["val_auroc"])
        for left_out in first["unseen"]:
            row(f"unseen kind: AUROC on `{left_out}` when trained without it",
                lambda r, f, left_out=left_out: r["unseen"][left_out][f])
        for set_name in first["real"]["network"]:
            where = "real faults" + ("" if set_name == "faults" else f" at {set_name}")
            row(f"{where}: worst-class AUROC", lambda r, f, s=set_name: r["real"][f][s]["worst_auroc"])
            row(f"{where}: worst-class detection at the 1 % threshold",
                lambda r, f, s=set_name: r["real"][f][s]["worst_detection"])
        row("false alarms on the held-out normal windows (mean count)", lambda r, f: r["false_alarms"][f])
        worst = "; ".join(f"seed {r['seed']}: network {r['real']['network'][s]['worst_class']}, classical "
                          f"{r['real']['classical'][s]['worst_class']} ({s})"
                          for r in rows for s in r["real"]["network"])
        lines += ["", f"Worst-detected class: {worst}.", ""]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--shared", default="", help="what else ran on the machine (recorded in the results)")
    parser.add_argument("--render", action="store_true", help="only write the .md again from the .jsonl")
    args = parser.parse_args(argv)
    if args.render:
        records = [json.loads(line) for line in (RESULTS / "anomaly-criterion.jsonl").read_text().splitlines()]
        first = records[0]
        (RESULTS / "anomaly-criterion.md").write_text(report(records, first["command"], first["shared"]))
        return 0
    if not (SHARED / "cwru" / "97.mat").exists() or not (SHARED / "cwru_1hp_dev").is_dir():
        print(f"skipped: {SHARED}/cwru and cwru_1hp_dev are needed")
        return 0
    command = shlex.join(["python", "benchmarks/anomaly_criterion.py", *(argv if argv is not None else sys.argv[1:])])
    records = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for name in ARCHITECTURES:
            records.append({**run(name, seed), "command": command, "shared": args.shared})
            print(json.dumps(records[-1], default=float), flush=True)
            (RESULTS / "anomaly-criterion.jsonl").write_text(
                "".join(json.dumps(r, default=float) + "\n" for r in records))
            (RESULTS / "anomaly-criterion.md").write_text(report(records, command, args.shared))
    return 0


if __name__ == "__main__":
    sys.exit(main())
