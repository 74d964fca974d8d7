"""Training-fault corpus and diagnoser evaluation on held-out architectures and data sets.

    python benchmarks/faults.py [--archs 6 --epochs 20 --workers 2] [--save-model]

Injects faults into real training runs (TensorFlow, the search space's architectures, the ISL and
CWRU copies in ../shared/data when present, and two synthetic data sets), records the health
trace of every run (`tinynas.training.health`), and evaluates the linear diagnoser (`tinynas.training.diagnose`)
three ways, per feature set: within-architecture (random folds: the test runs' architectures
were seen in training), architecture-held-out (folds grouped by data set and architecture) and
data-set-held-out (leave one data set out). Balanced accuracy is reported for the full fault
type and for instability detection (diverging / non-finite / stalled vs healthy). `--save-model`
writes the diagnoser trained on the whole corpus (every feature, trace prefixes included, so it
can judge a run after a few epochs) to tinynas/diagnoser.json, which the search uses.
Writes benchmarks/results/faults.md and .json (the corpus, traces and labels: results/faults-corpus.json.gz;
`--corpus` re-evaluates it without training).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import shlex
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from tinynas.training.diagnose import (
    DIAGNOSED_FAULTS,
    FEATURE_SETS,
    INSTABILITIES,
    MODEL_PATH,
    Diagnoser,
    balanced_accuracy,
    shipped_diagnoser,
    trace_features,
)

RESULTS = Path(__file__).parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DATA = {
    "cwru": f"cwru:{SHARED / 'cwru'}?files=bearingnas10&channel=FE&windows_per_file=200&resample=0",
    "isl": f"isl:{SHARED / 'isl'}",
    "vibration": "synthetic:vibration?windows_per_class=80",
    "emg": "synthetic:emg?windows_per_class=60",
}
BASE_LR = 1e-2
"""The final recipe's learning rate (x100 thrashes, /1000 stalls; at 1e-3, x100 still trained well)."""
MAX_TRAIN = 480
MAX_VAL = 160
PREFIXES = (3, 5, 8, 12)
"""Trace lengths the shipped diagnoser also learns from, so that it can judge a run early."""


def _inject(fault: str, x, y, classes: int, rng):
    """Training windows, labels and learning rate with `fault` injected."""
    x, y, lr = x.copy(), y.copy(), BASE_LR
    if fault == "diverging":
        lr = BASE_LR * 100
    elif fault == "stalled":
        lr = BASE_LR / 1000
    elif fault == "nonfinite":
        bad = rng.choice(len(x), max(1, len(x) // 50), replace=False)
        x[bad, rng.integers(0, x.shape[1]), :] = np.where(rng.random() < 0.5, np.nan, np.inf)
    elif fault == "dead_channel":
        x[:, :, int(rng.integers(0, x.shape[2]))] = 0.0
    elif fault == "clipped_channel":
        channel = int(rng.integers(0, x.shape[2]))
        low, high = np.percentile(x[:, :, channel], [20, 80])
        x[:, :, channel] = np.clip(x[:, :, channel], low, high)
    elif fault == "label_noise":
        noisy = rng.choice(len(y), int(0.4 * len(y)), replace=False)
        y[noisy] = rng.permutation(y[noisy])
    elif fault == "missing_class":
        keep = y != int(rng.integers(0, classes))
        x, y = x[keep], y[keep]
    elif fault == "imbalance":
        major = int(rng.integers(0, classes))
        keep = np.array([label == major or rng.random() < 0.08 for label in y])
        x, y = x[keep], y[keep]
    return x, y, lr


def _run_group(task: dict) -> list[dict]:
    """Worker process: every fault for one (data set, architecture)."""
    from tinynas.data.spec import load_windows
    from tinynas.data.splits import make_split
    from tinynas.quiet import import_tensorflow
    from tinynas.space import Architecture, as_model_input
    from tinynas.training.health import health_callback, probe_batch
    from tinynas.training.train import fit
    from tinynas.trial import Fidelity

    tf = import_tensorflow()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    windows = load_windows(DATA[task["data"]])
    split = make_split(windows, "auto", seed=0)
    rng = np.random.default_rng(task["seed"])
    train = np.sort(rng.permutation(split.train)[:MAX_TRAIN])
    val = np.sort(rng.permutation(split.val)[:MAX_VAL])
    arch = Architecture.from_json(task["architecture"])
    rows = []
    for fault in task["faults"]:
        fault_rng = np.random.default_rng([task["seed"], DIAGNOSED_FAULTS.index(fault)])
        x, y, lr = _inject(fault, windows.x[train], windows.y[train], windows.classes, fault_rng)
        x_probe, y_probe = probe_batch(np.nan_to_num(x, posinf=0.0, neginf=0.0), y, seed=task["seed"])
        monitor = health_callback(as_model_input(x_probe), y_probe)
        started = time.perf_counter()
        try:
            fit(arch, x, y, windows.x[val], windows.y[val], Fidelity(task["epochs"], 16, lr), seed=task["seed"],
                callbacks=[monitor], allow_nonfinite=True)
            error = ""
        except Exception as exc:  # a fault may break training outright; the trace so far still counts
            error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        seconds = time.perf_counter() - started
        tf.keras.backend.clear_session()
        rows.append({"data": task["data"], "architecture": arch.name(), "fault": fault, "learning_rate": lr,
                     "trace": [{k: (v if not isinstance(v, float) or math.isfinite(v) else None)
                                for k, v in row.items()} for row in monitor.trace],
                     "seconds": seconds, "monitor_seconds": monitor.seconds, "error": error})
    return rows


def _tasks(args) -> list[dict]:
    from tinynas.data.spec import load_windows
    from tinynas.search.base import SearchSpace

    tasks = []
    for offset, name in enumerate(DATA):
        spec = DATA[name]
        if spec.startswith(("isl:", "cwru:")) and not Path(spec.partition(":")[2].partition("?")[0]).exists():
            print(f"{name}: not in ../shared/data, skipped", file=sys.stderr)
            continue
        windows = load_windows(spec)
        space = SearchSpace(windows.window_length, windows.channels, windows.classes)
        rng = np.random.default_rng(args.seed + offset)
        chosen: dict = {}
        while len(chosen) < args.archs:
            k, c = int(rng.integers(1, 13)), int(rng.integers(0, min(space.max_c, 5) + 1))
            chosen.setdefault((k, c), space.architecture(k, c))
        for number, arch in enumerate(chosen.values()):
            tasks.append({"data": name, "architecture": arch.to_json(), "faults": list(DIAGNOSED_FAULTS),
                          "epochs": args.epochs, "seed": args.seed * 1000 + offset * 100 + number})
    return tasks


def _folds(rows, how: str, folds: int, seed: int) -> list[np.ndarray]:
    """Test-index arrays per fold."""
    n = len(rows)
    rng = np.random.default_rng(seed)
    if how == "within":
        order = rng.permutation(n)
        return [order[i::folds] for i in range(folds)]
    key = (lambda r: r["data"]) if how == "data" else (lambda r: f"{r['data']}/{r['architecture']}")
    groups = sorted({key(r) for r in rows})
    if how == "data":
        return [np.array([i for i, r in enumerate(rows) if key(r) == g]) for g in groups]
    order = [groups[i] for i in rng.permutation(len(groups))]
    return [np.array([i for i, r in enumerate(rows) if key(r) in set(order[f::folds])]) for f in range(folds)]


def _instability_accuracy(labels: np.ndarray, predicted: np.ndarray) -> float:
    """Balanced accuracy of unstable (any instability) vs healthy, over the runs that are one of them."""
    stability = np.isin(labels, ("healthy", *INSTABILITIES))
    return balanced_accuracy(np.where(np.isin(labels[stability], INSTABILITIES), "unstable", "healthy"),
                             np.where(np.isin(predicted[stability], INSTABILITIES), "unstable", "healthy"))


def evaluate(rows: list[dict], folds: int, seed: int) -> list[dict]:
    """Balanced accuracies per split scheme and feature set (predictions pooled over folds)."""
    features = [trace_features(r["trace"], r["learning_rate"]) for r in rows]
    labels = np.array([r["fault"] for r in rows])
    results = []
    for scheme in ("within", "architecture", "data"):
        for set_name, names in FEATURE_SETS.items():
            predicted = np.empty(len(rows), dtype=object)
            for test in _folds(rows, scheme, folds, seed):
                train = np.setdiff1d(np.arange(len(rows)), test)
                if len(set(labels[train])) < 2:
                    continue
                model = Diagnoser.fit([features[i] for i in train], list(labels[train]), names)
                predicted[test] = model.predict([features[i] for i in test])
            fault_accuracy = balanced_accuracy(labels, predicted)
            results.append({"scheme": scheme, "features": set_name, "fault_balanced_accuracy": fault_accuracy,
                            "instability_balanced_accuracy": _instability_accuracy(labels, predicted),
                            "per_fault_recall": {f: float(np.mean(predicted[labels == f] == f))
                                                 for f in DIAGNOSED_FAULTS if (labels == f).any()}})
    return results


def train_shipped(rows: list[dict]) -> Diagnoser:
    """The diagnoser on every run, whole traces and early prefixes, every feature."""
    features, labels = [], []
    for r in rows:
        for length in (*PREFIXES, len(r["trace"])):
            if length <= len(r["trace"]) and length > 0:
                features.append(trace_features(r["trace"][:length], r["learning_rate"]))
                labels.append(r["fault"])
    return Diagnoser.fit(features, labels, FEATURE_SETS["all"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--archs", type=int, default=6, help="architectures per data set")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--corpus", help="reuse a corpus JSON instead of training (evaluation only)")
    parser.add_argument("--save-model", action="store_true", help=f"write the shipped diagnoser to {MODEL_PATH}")
    parser.add_argument("--fold-seeds", type=int, default=5,
                        help="also evaluate instability detection (arch-held-out) over this many fold seeds")
    parser.add_argument("--name", default="faults", help="results go to benchmarks/results/<name>.md and .json")
    parser.add_argument("--corpus-out", type=Path, default=RESULTS / "faults-corpus.json.gz",
                        help="where a newly built corpus is written (the shipped diagnoser's is the default)")
    args = parser.parse_args()
    command = "python " + " ".join(shlex.quote(a) for a in ["benchmarks/faults.py", *sys.argv[1:]])
    RESULTS.mkdir(exist_ok=True)
    corpus_path = args.corpus_out
    started = time.monotonic()
    if args.corpus:
        stored = json.loads(gzip.decompress(Path(args.corpus).read_bytes()))
        rows, built_by = stored["runs"], stored.get("command", "?")
    else:
        tasks = _tasks(args)
        rows = []
        # A fresh process per group (9 trainings): XLA keeps every compiled program and its ~500 memory maps
        # for the life of a process, and ~130 of them reach the kernel's map limit (a segfault).
        with ProcessPoolExecutor(args.workers, mp_context=get_context("spawn"), max_tasks_per_child=1) as pool:
            for done, group in enumerate(pool.map(_run_group, tasks), 1):
                rows.extend(group)
                print(f"[{done}/{len(tasks)}] {group[0]['data']} {group[0]['architecture']}", file=sys.stderr,
                      flush=True)
        built_by = command
        corpus_path.write_bytes(gzip.compress(json.dumps({"command": command, "runs": rows}).encode(), mtime=0))
    corpus_seconds = time.monotonic() - started
    results = evaluate(rows, args.folds, args.seed)
    # One fold assignment is one draw: with 24 runs per fault, one run moves the figure by ~0.014.
    spread = {name: [] for name in FEATURE_SETS}
    for fold_seed in range(args.seed, args.seed + args.fold_seeds):
        for r in evaluate(rows, args.folds, fold_seed):
            if r["scheme"] == "architecture":
                spread[r["features"]].append(r["instability_balanced_accuracy"])
    overhead = [r["monitor_seconds"] / max(1e-9, r["seconds"] - r["monitor_seconds"]) for r in rows
                if not r["error"] and r["trace"]]
    # The shipped diagnoser as it is, on this corpus's whole traces: how it transfers to runs it was not
    # trained on (e.g. a corpus trained by another code path). Read before --save-model replaces it.
    shipped, shipped_line = shipped_diagnoser(), ""
    if shipped is not None:
        guess = np.array(shipped.predict([trace_features(r["trace"], r["learning_rate"]) for r in rows]))
        shipped_accuracy = _instability_accuracy(np.array([r["fault"] for r in rows]), guess)
        shipped_line = (f"The shipped diagnoser ({MODEL_PATH.name} before this run, trained on its own corpus) on "
                        f"every run of this corpus: instability detection balanced accuracy {shipped_accuracy:.3f}.")
    if args.save_model:
        MODEL_PATH.write_text(train_shipped(rows).to_json() + "\n")
    counts = {f: sum(r["fault"] == f for r in rows) for f in DIAGNOSED_FAULTS}
    datasets = sorted({r["data"] for r in rows})
    lines = ["# Training-fault diagnosis", "", f"Command: `{command}`", "",
             f"Corpus: {len(rows)} real training runs ({args.epochs} epochs, Adam, batch 16, base lr {BASE_LR:g}, "
             f"at most {MAX_TRAIN} training windows), {args.archs} architectures per data set, data sets: "
             f"{', '.join(datasets)}; "
             + (f"read from `{args.corpus}` (built by `{built_by}`). " if args.corpus else
                f"built in {corpus_seconds / 60:.1f} min with {args.workers} processes on {os.cpu_count()} cores. ")
             + "Runs by injected fault: "
             + ", ".join(f"{f} {n}" for f, n in counts.items()) + ".", "",
             "Faults: diverging = lr x100, stalled = lr /1000, nonfinite = NaN/inf in 2 % of the training windows, "
             "dead_channel = a channel zeroed, clipped_channel = a channel clipped to its 20-80 % range, "
             "label_noise = 40 % of labels shuffled, missing_class = one class absent from training, "
             "imbalance = every class but one kept at 8 %.", "",
             f"Health monitor overhead (monitor time / training time): median {np.median(overhead):.1%}, "
             f"90th percentile {np.percentile(overhead, 90):.1%} over {len(overhead)} runs.", "",
             "Balanced accuracy of the linear diagnoser (multinomial logistic regression), predictions pooled over "
             f"{args.folds} folds (data-set-held-out: leave one data set out):", "",
             "| features | instability: within-arch | arch-held-out | data-set-held-out | gap (within - arch) "
             "| fault type: within-arch | arch-held-out | data-set-held-out |", "|---|---|---|---|---|---|---|---|"]
    table = {(r["scheme"], r["features"]): r for r in results}
    for set_name in FEATURE_SETS:
        w, a, d = (table[(s, set_name)] for s in ("within", "architecture", "data"))
        lines.append(f"| {set_name} | {w['instability_balanced_accuracy']:.3f} | "
                     f"**{a['instability_balanced_accuracy']:.3f}** "
                     f"| {d['instability_balanced_accuracy']:.3f} | "
                     f"{w['instability_balanced_accuracy'] - a['instability_balanced_accuracy']:+.3f} | "
                     f"{w['fault_balanced_accuracy']:.3f} | {a['fault_balanced_accuracy']:.3f} | "
                     f"{d['fault_balanced_accuracy']:.3f} |")
    lines += ["", "Instability detection, architecture-held-out, over fold seeds "
              f"{args.seed}..{args.seed + args.fold_seeds - 1} "
              "(the table above is the first): " + "; ".join(
                  f"{name} {np.mean(v):.3f} +- {np.std(v):.3f} (min {min(v):.3f}, max {max(v):.3f})"
                  for name, v in spread.items() if v) + ".",
              *(["", shipped_line] if shipped_line else []),
              "", "Recall per fault type, all features, architecture-held-out:", "",
              "| " + " | ".join(DIAGNOSED_FAULTS) + " |", "|" + "---|" * len(DIAGNOSED_FAULTS),
              "| " + " | ".join(f"{table[('architecture', 'all')]['per_fault_recall'].get(f, math.nan):.2f}"
                                for f in DIAGNOSED_FAULTS) + " |", "",
              "Data faults (dead or clipped channel, mixed-up labels, imbalance) barely show in a training trace; "
              "they are caught before any search by `tinynas.data.checks` instead (tests/data/test_checks.py).", ""]
    text = "\n".join(lines) + "\n"
    (RESULTS / f"{args.name}.md").write_text(text)
    (RESULTS / f"{args.name}.json").write_text(json.dumps({"command": command, "counts": counts, "results": results,
                                                           "fold_seed_spread": spread,
                                                           "overhead_median": float(np.median(overhead))}, indent=2)
                                               + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
