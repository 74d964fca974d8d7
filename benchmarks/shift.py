"""Models on the second day: same-block accuracy against a new session or condition, then after
`adapt` and `recalibrate`, for today's recipe and each measure of issue 15 alone and combined.

    python benchmarks/shift.py isl  --seeds 0,1,2     # -> results/shift-isl.md (+ .jsonl of every run)
    python benchmarks/shift.py cwru --seeds 0,1,2     # -> results/shift-cwru.md

Part A (recipes): every row trains the same architecture per target (today's winner there, so the
budget holds) with the final recipe (100 epochs, lr 0.01, batch 16, best validation weights) and
one training measure, then goes through the product's own steps: int8 export (LiteRT), the model
folder, `evaluate`, `adapt`, `recalibrate`. Rows differ only in the measure, so the table says
what each measure does; a kind of augmentation goes into a sensor's preset only if it helped here.
Part B (`--search`): the whole product, `fast` search with the preset, on the same data (the searches one sweep,
`tinynas.sweep`, `grid_runs.py`; `--work DIR` keeps and resumes them).

Data and splits (never a window of one recording on two sides):
- ISL: train on ../shared/data/isl (June, the session split: temporal within each letter's block,
  70/10/20; same-block test = its latest 20 %). New session = isl_session3_dev (re-worn armband):
  zero-shot on both repetitions (52 windows) and on the second (26); `adapt` on the first
  repetition's windows without labels; `recalibrate` on the first repetition (one window per
  letter) with labels; both tested on the second repetition.
- CWRU: 0 hp bearingnas10 classes, drive-end accelerometer (channel DE), 512-sample windows
  (the segment split: temporal within each file, 70/10/20). New condition = cwru_1hp_dev (1 hp,
  the same faults; no normal file): zero-shot on the later half of every 1 hp file; `adapt` on the
  earlier half without labels; `recalibrate` on the first 10 windows of every file with labels;
  both tested on the later half.
Figures are int8 (LiteRT) accuracy, mean +- sd over seeds; "worst class" is the lowest per-class
recall of the new-condition test, averaged over seeds (ISL: one test window per letter, so it is 0).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from grid_runs import searched

RESULTS = Path(__file__).parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"

SETTINGS = {
    "isl": {
        "train": f"isl:{SHARED / 'isl'}", "new": f"isl:{SHARED / 'isl_session3_dev'}", "split": "session",
        # Today's winners (benchmarks/results/isl-session.md).
        "targets": {"LSM6DSO16IS": dict(k=6, c=3), "nRF52840": dict(k=24, c=3)},
    },
    "cwru": {
        "train": f"cwru:{SHARED / 'cwru'}?files=bearingnas10&channel=DE",
        "new": f"cwru:{SHARED / 'cwru_1hp_dev'}?files=bearingnas10&channel=DE",
        "split": "segment",
        # Today's winners (benchmarks/results/cwru.md).
        "targets": {"STM32C011F6P6": dict(k=4, c=4), "STM32F030F4P6": dict(k=2, c=4)},
    },
}

ROWS = {
    "isl": {
        "today": {},
        "channel_gain": {"augmentation": {"channel_gain": 0.3}},
        "gain": {"augmentation": {"gain": 0.3}},
        "noise": {"augmentation": {"noise": 0.1}},
        "time_shift": {"augmentation": {"time_shift": 0.1}},
        "channel_shift": {"augmentation": {"channel_shift": 1}},
        "combined": {"augmentation": {"channel_gain": 0.3, "gain": 0.3, "noise": 0.1}},
        # What the armband preset holds: the kinds kept by the rule below.
        "preset": {"augmentation": {"channel_gain": 0.3, "noise": 0.1}},
    },
    "cwru": {
        "today": {},
        "gain": {"augmentation": {"gain": 0.3}},
        "speed": {"augmentation": {"speed": 0.04}},
        "noise": {"augmentation": {"noise": 0.1}},
        "time_shift": {"augmentation": {"time_shift": 0.5}},
        "kernel 9": {"kernel_size": 9},
        "combined": {"augmentation": {"gain": 0.3, "time_shift": 0.5}, "kernel_size": 9},
        # What the vibration preset holds: the kinds kept by the rule below, and kernel 9.
        "preset": {"augmentation": {"gain": 0.3, "noise": 0.1, "time_shift": 0.5}, "kernel_size": 9},
    },
}
FINAL = dict(epochs=100, batch_size=16, learning_rate=0.01)
SEARCH_ROW = "fast search, preset"


def _new_sides(setting: str, new):
    """Indices of the new session/condition: (adapt/recalibrate data, labelled recalibration data, test)."""
    order = np.argsort(new.time_index, kind="stable")
    first, later, few = [], [], []
    for label in range(new.classes):
        for group in np.unique(new.groups[new.y == label]):
            members = [i for i in order if new.y[i] == label and new.groups[i] == group]
            if setting == "isl":
                continue
            half = len(members) // 2
            first += members[:half]
            later += members[half:]
            few += members[:10]
        if setting == "isl":
            members = [i for i in order if new.y[i] == label]
            first.append(members[0])
            few.append(members[0])
            later += members[1:]
    return np.array(sorted(first)), np.array(sorted(few)), np.array(sorted(later))


def _model_dir(out: Path, arch, windows, split, result, target, recipe: dict) -> None:
    """A model folder as `tinynas search` writes it (card, int8, float weights, windows, split)."""
    from tinynas.data.preprocess import Preprocessing
    from tinynas.deploy.export import convert_int8, write_export
    from tinynas.folders import MODEL_WEIGHTS, SPLIT, WINDOWS, save_split, save_weights

    pre = Preprocessing.fit(windows, split.train)
    tflite = convert_int8(result.model, windows.x[split.train])
    out.mkdir(parents=True, exist_ok=True)
    save_weights(result.model, out / MODEL_WEIGHTS)
    windows.save(out / WINDOWS)
    save_split(out / SPLIT, split)
    write_export(out, arch, tflite, {"classes": list(windows.class_names), "target": target.to_dict(),
                                     "preprocessing": pre.to_dict(), "split": split.describe(),
                                     "training_recipe": recipe})


def run_one(setting: str, target_name: str, row: str, seed: int) -> dict:
    """Train, export, evaluate zero-shot, adapt, recalibrate: one row, one target, one seed."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from tinynas.augment import Augmentation
    from tinynas.cost.estimate import estimate
    from tinynas.cost.targets import get_target
    from tinynas.data.spec import load_windows
    from tinynas.data.splits import make_split
    from tinynas.deploy.evaluate import evaluate
    from tinynas.quiet import import_tensorflow
    from tinynas.space import Architecture
    from tinynas.training.train import fit
    from tinynas.trial import Fidelity

    tf = import_tensorflow()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    config, measure = SETTINGS[setting], ROWS[setting][row]
    windows, new = load_windows(config["train"]), load_windows(config["new"])
    split = make_split(windows, config["split"], seed=seed)
    target = get_target(target_name)
    arch = Architecture(windows.window_length, windows.channels, windows.classes,
                        kernel_size=measure.get("kernel_size", 3), **config["targets"][target_name])
    violations = list(estimate(arch, accounting="arena").violations(target))
    record = {"setting": setting, "target": target_name, "row": row, "seed": seed, "architecture": arch.name()}
    if violations:
        return {**record, "skipped": f"{arch.name()} exceeds the budget: {'; '.join(violations)}"}
    augmentation = Augmentation.from_dict(measure.get("augmentation"))
    started = time.perf_counter()
    result = fit(arch, windows.x[split.train], windows.y[split.train], windows.x[split.val], windows.y[split.val],
                 Fidelity(**FINAL, augmentation=augmentation), seed=seed)
    record["train_seconds"] = round(time.perf_counter() - started, 1)
    with tempfile.TemporaryDirectory(prefix="shift-") as folder:
        base = Path(folder) / "base"
        _model_dir(base, arch, windows, split, result, target, {"augmentation": augmentation.to_dict()})
        record["same_block"] = evaluate(base, windows.subset(split.test)).accuracy
        _evaluate_new(setting, base, new, record, seed, Path(folder))
    return record


def _evaluate_new(setting: str, base: Path, new, record: dict, seed: int, folder: Path) -> dict:
    """Zero-shot, adapt and recalibrate on the new session/condition, from model folder `base`."""
    from tinynas.adaptation.adapt import adapt
    from tinynas.adaptation.recalibrate import Recipe, recalibrate
    from tinynas.deploy.evaluate import evaluate

    first, few, later = _new_sides(setting, new)
    zero_all = evaluate(base, new)
    zero = evaluate(base, new.subset(later))
    record.update(zero_shot_all=zero_all.accuracy, zero_shot=zero.accuracy, zero_shot_recall=zero.per_class_recall)
    started = time.perf_counter()
    adapt(base, new.subset(first), folder / "adapted", spec="new session, first part")
    record["adapt_seconds"] = round(time.perf_counter() - started, 1)
    adapted = evaluate(folder / "adapted", new.subset(later))
    record.update(adapted=adapted.accuracy, adapted_recall=adapted.per_class_recall)
    started = time.perf_counter()
    # Always written here (max_forgetting 1): the table shows what recalibration does, and the
    # original test accuracy after it, whether or not the product would have accepted it.
    recal = recalibrate(base, new.subset(few), folder / "recalibrated", recipe=Recipe(max_forgetting=1.0),
                        seed=seed, allow_missing=True)
    record["recalibrate_seconds"] = round(time.perf_counter() - started, 1)
    recalibrated = evaluate(folder / "recalibrated", new.subset(later))
    record.update(recalibrated=recalibrated.accuracy, recalibrated_recall=recalibrated.per_class_recall,
                  recalibrated_same_block=recal.test_after)
    return record


SEARCH_BUDGET = "900s"


def search_table(setting: str, targets: list[str], seeds: list[int]) -> dict:
    """Part B's searches as one sweep: `fast` with the defaults (the sensor's preset), per seed and target."""
    config = SETTINGS[setting]
    return {"grid": {"seed": seeds, "target": targets},
            "fixed": {"data": config["train"], "split": config["split"], "strategy": "fast",
                      "budget": SEARCH_BUDGET, "workers": 1}}


def run_search(setting: str, target_name: str, seed: int, folder: Path, seconds: float) -> dict:
    """Part B: the whole product: the search in `folder` (a sweep's cell), then the same steps."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from tinynas.card import read_card
    from tinynas.data.spec import load_windows

    card = read_card(folder)
    new = load_windows(SETTINGS[setting]["new"])
    record = {"setting": setting, "target": target_name, "row": SEARCH_ROW, "seed": seed,
              "architecture": card.to_dict()["name"], "search_seconds": round(seconds, 1),
              "same_block": card.int8_test_accuracy, "recipe": card.training_recipe}
    with tempfile.TemporaryDirectory(prefix="shift-search-") as scratch:
        return _evaluate_new(setting, folder, new, record, seed, Path(scratch))


REWEAR_CONFIGS = {
    # The `fast` winners of issue 36's first measurement (June -> re-worn session, through the CLI).
    "LSM6DSO16IS tflm A(8,2)": ("LSM6DSO16IS", "tflm", dict(k=8, c=2)),
    "LSM6DSO16IS c A(17,3)": ("LSM6DSO16IS", "c", dict(k=17, c=3)),
    "nRF52840 tflm A(43,1)": ("nRF52840", "tflm", dict(k=43, c=1)),
}
CONFIDENT = 0.5
"""Self-training keeps the pseudo-labels the adapted model gives with at least this softmax probability."""
REWEAR_INPUTS = ("as recorded", "window-channel", "window-global")
INPUTS_TEXT = ("as recorded; `window-channel`: each window's channels standardised on their own (mean and "
               "deviation over the window); `window-global`: each window divided by its RMS over all channels "
               "(the channels' relative levels kept).")
REWEAR_METHODS = ("zero-shot", "adapt", "self-train", "info-max", "recal today", "recal new-stats", "recal head",
                  "pooled")
IM_STEPS, IM_LEARNING_RATE = 30, 1e-3
"""info-max: Adam steps on the batch-norm scales and shifts, full batch of the calibration repetition."""
METHODS_TEXT = ("`adapt` (AdaBN, `tinynas adapt`) on the calibration repetition, unlabelled; `self-train`: adapt, "
                "then fine-tune on its own confident predictions of those windows (pseudo-labels, softmax >= 0.5; "
                "statistics kept the new session's); `info-max`: adapt, then the batch-norm scales and shifts "
                f"trained ({IM_STEPS} full-batch Adam steps, lr {IM_LEARNING_RATE:g}, statistics frozen) to make each "
                "unlabelled prediction confident while the predictions stay spread over the classes (SHOT's "
                "information maximisation: mean entropy minus the entropy of the mean); `recal today`: "
                "`tinynas recalibrate`'s recipe before issue 36 "
                "(statistics follow the mixed new and replayed batches); `recal new-stats`: the same with batch norm "
                "kept at the new session's statistics; `recal head`: only the classifier fine-tuned; `pooled`: the "
                "second donning of onboarding: trained from scratch with the calibration repetition (labelled) "
                "added to June's training windows, the same recipe and June validation.")


def per_window(x: np.ndarray, how: str) -> np.ndarray:
    """The benchmark's per-window input normalisations (float32), applied before the model's own."""
    x = np.asarray(x, np.float64)
    if how == "window-channel":
        x = (x - x.mean(axis=1, keepdims=True)) / (x.std(axis=1, keepdims=True) + 1e-6)
    elif how == "window-global":
        x = x / (np.sqrt(np.mean(np.square(x), axis=(1, 2), keepdims=True)) + 1e-6)
    return x.astype(np.float32)


def _repetitions(new) -> list[np.ndarray]:
    """The new session's windows by repetition: the i-th recording (in time) of every class."""
    order = np.argsort(new.time_index, kind="stable")
    reps: dict[int, list[int]] = {}
    for label in range(new.classes):
        groups = []
        for i in order:
            if new.y[i] == label and new.groups[i] not in groups:
                groups.append(new.groups[i])
        for number, group in enumerate(groups):
            reps.setdefault(number, []).extend(np.flatnonzero((new.y == label) & (new.groups == group)).tolist())
    return [np.array(sorted(reps[n])) for n in sorted(reps)]


def _info_max(source_dir: Path, x_raw: np.ndarray, out: Path) -> dict:
    """The adapted model of `source_dir` with its batch-norm scales and shifts trained, unlabelled, on `x_raw` by
    information maximisation (Liang et al., SHOT, 2020); written to `out`. Returns the confidence calibration
    (expected calibration error, 10 bins) on the original test windows before and after: what a guard would read."""
    from tinynas.adaptation.batchnorm import batchnorm_layers
    from tinynas.adaptation.common import changed_card, export_within_budget, original_test
    from tinynas.deploy.modeldir import ModelDir, write_model_dir
    from tinynas.quiet import import_tensorflow
    from tinynas.space import as_model_input

    tf = import_tensorflow()
    source = ModelDir.open(source_dir)
    x = source.preprocessing.apply(x_raw)
    model = source.keras_model()
    x_old, y_old = original_test(source)

    def ece(m) -> float:
        logits = m(tf.constant(as_model_input(x_old)), training=False).numpy().astype(np.float64)
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        confidence, right = p.max(axis=1), p.argmax(axis=1) == y_old
        bins = np.minimum((confidence * 10).astype(int), 9)
        return float(sum(abs(right[bins == b].mean() - confidence[bins == b].mean()) * np.mean(bins == b)
                         for b in range(10) if np.any(bins == b)))

    before = ece(model)
    params = [v for layer in batchnorm_layers(model) for v in (layer.gamma, layer.beta)]
    optimizer = tf.keras.optimizers.Adam(IM_LEARNING_RATE)
    inputs = tf.constant(as_model_input(x))
    for _ in range(IM_STEPS):
        with tf.GradientTape() as tape:
            p = tf.nn.softmax(model(inputs, training=False))
            each = -tf.reduce_mean(tf.reduce_sum(p * tf.math.log(p + 1e-8), axis=1))
            mean = tf.reduce_mean(p, axis=0)
            loss = each + tf.reduce_sum(mean * tf.math.log(mean + 1e-8))
        optimizer.apply_gradients(zip(tape.gradient(loss, params), params))
    after = ece(model)
    tflite = export_within_budget(source, model, x)
    card = changed_card(source, tflite, source.preprocessing, {"kind": "info-max"}, None)
    write_model_dir(out, source, model, tflite, card)
    return {"ece_before": round(before, 4), "ece_after": round(after, 4)}


def run_rewear(config: str, inputs: str, seed: int, methods: tuple[str, ...] = REWEAR_METHODS) -> dict:
    """One architecture, input and seed: trained on June; every method of REWEAR_METHODS on the re-worn
    session, leave-one-repetition-out (calibrate on one repetition, test on the other; both folds pooled)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from dataclasses import replace

    from tinynas.adaptation.adapt import adapt
    from tinynas.adaptation.recalibrate import Recipe, recalibrate
    from tinynas.augment import Augmentation
    from tinynas.cost.estimate import estimate
    from tinynas.cost.targets import get_target
    from tinynas.data.spec import load_windows
    from tinynas.data.splits import make_split
    from tinynas.data.windows import Windows
    from tinynas.deploy.evaluate import evaluate
    from tinynas.deploy.measure import run_int8
    from tinynas.deploy.modeldir import ModelDir
    from tinynas.quiet import import_tensorflow
    from tinynas.space import Architecture
    from tinynas.training.train import fit
    from tinynas.trial import Fidelity

    tf = import_tensorflow()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    setting = SETTINGS["isl"]
    target_name, runtime, shape = REWEAR_CONFIGS[config]
    windows, new = load_windows(setting["train"]), load_windows(setting["new"])
    windows, new = (replace(w, x=per_window(w.x, inputs)) for w in (windows, new))
    split = make_split(windows, setting["split"], seed=seed)
    target = get_target(target_name)
    arch = Architecture(windows.window_length, windows.channels, windows.classes, **shape)
    record = {"config": config, "inputs": inputs, "seed": seed, "architecture": arch.name()}
    # TFLite Micro's code alone does not fit the LSM6DSO16IS's flash (issue 37): its rows are budgeted by the
    # arena alone, as the first measurement was; the C runtime's by the whole chip.
    accounting = "arena" if runtime == "tflm" else "chip"
    record["accounting"] = accounting
    violations = list(estimate(arch, runtime=runtime, accounting=accounting, core=target.core).violations(target))
    if violations:
        return {**record, "skipped": f"{arch.name()} exceeds the budget: {'; '.join(violations)}"}
    # The armband preset's augmentation (channel gain, noise), as a `fast` search's final model has it.
    augmentation = Augmentation(channel_gain=0.3, noise=0.1)
    started = time.perf_counter()
    result = fit(arch, windows.x[split.train], windows.y[split.train], windows.x[split.val], windows.y[split.val],
                 Fidelity(**FINAL, augmentation=augmentation), seed=seed)
    record["train_seconds"] = round(time.perf_counter() - started, 1)
    reps = _repetitions(new)
    hits = {method: 0 for method in REWEAR_METHODS}
    tested = 0
    forgetting = {method: [] for method in REWEAR_METHODS[2:]}
    with tempfile.TemporaryDirectory(prefix="rewear-") as folder:
        base = Path(folder) / "base"
        _model_dir(base, arch, windows, split, result, target, {"augmentation": augmentation.to_dict()})
        card = json.loads((base / "card.json").read_text())
        (base / "card.json").write_text(json.dumps({**card, "runtime": runtime, "accounting": accounting}))
        record["same_block"] = evaluate(base, windows.subset(split.test)).accuracy
        for fold, calibration in enumerate(reps):
            test = np.concatenate([r for i, r in enumerate(reps) if i != fold])
            tested += len(test)
            here = Path(folder) / f"fold{fold}"
            outs = {"zero-shot": base}
            adapt(base, new.subset(calibration), here / "adapt", spec="one repetition")
            outs["adapt"] = here / "adapt"
            adapted = ModelDir.open(here / "adapt")
            logits = run_int8((here / "adapt" / "model.tflite").read_bytes(),
                              adapted.preprocessing.apply(new.x[calibration])).logits
            z = np.asarray(logits, np.float64)
            z = np.exp(z - z.max(axis=1, keepdims=True))
            confidence = (z / z.sum(axis=1, keepdims=True)).max(axis=1)
            confident = calibration[confidence >= CONFIDENT]
            record.setdefault("self_train_windows", []).append(int(len(confident)))
            if "self-train" not in methods:
                pass
            elif len(confident):
                predicted = np.argmax(z[confidence >= CONFIDENT], axis=1)
                present = np.unique(predicted)  # a Windows holds no empty class: only the predicted ones
                pseudo = Windows(new.x[confident], np.searchsorted(present, predicted), new.groups[confident],
                                 tuple(adapted.preprocessing.class_names[i] for i in present), new.sample_rate_hz,
                                 new.channel_names, new.provenance,
                                 None if new.sessions is None else new.sessions[confident],
                                 None if new.time_index is None else new.time_index[confident])
                trained = recalibrate(here / "adapt", pseudo, here / "self-train", seed=seed, allow_missing=True,
                                      recipe=Recipe(statistics="new", max_forgetting=1.0))
                # Rejected (a class predicted for two recordings verifies, and lost): adapt's model stays.
                outs["self-train"] = trained.out_dir or here / "adapt"
            else:
                outs["self-train"] = here / "adapt"
            if "info-max" in methods:
                record.setdefault("info_max_ece", []).append(
                    _info_max(here / "adapt", new.x[calibration], here / "info-max"))
                outs["info-max"] = here / "info-max"
            for method, recipe in ((m, r) for m, r in (("recal today", Recipe(statistics="mixed", max_forgetting=1.0)),
                                   ("recal new-stats", Recipe(statistics="new", max_forgetting=1.0)),
                                   ("recal head", Recipe(statistics="new", layers="head", max_forgetting=1.0)))
                                   if m in methods):
                done = recalibrate(base, new.subset(calibration), here / method.replace(" ", "-"), seed=seed,
                                   allow_missing=True, recipe=recipe)
                outs[method] = done.out_dir
                forgetting[method].append(done.test_after)
            if "pooled" in methods:
                assert new.class_names == windows.class_names
                pooled = np.concatenate([split.train, len(windows.x) + calibration])
                x_all, y_all = np.concatenate([windows.x, new.x]), np.concatenate([windows.y, new.y])
                trained = fit(arch, x_all[pooled], y_all[pooled], windows.x[split.val], windows.y[split.val],
                              Fidelity(**FINAL, augmentation=augmentation), seed=seed)
                _model_dir(here / "pooled", arch, windows, split, trained, target,
                           {"augmentation": augmentation.to_dict()})
                card = json.loads((here / "pooled" / "card.json").read_text())
                (here / "pooled" / "card.json").write_text(json.dumps({**card, "runtime": runtime,
                                                                        "accounting": accounting}))
                outs["pooled"] = here / "pooled"
            for method, out in outs.items():
                hits[method] += int(round(evaluate(out, new.subset(test)).accuracy * len(test)))
    record.update(tested=tested, **{method: hits[method] / tested for method in REWEAR_METHODS if method in outs},
                  same_block_after={m: float(np.mean(v)) for m, v in forgetting.items() if v})
    return record


def rewear_report(records: list[dict], command: str) -> str:
    commands = list(dict.fromkeys(r.get("command", command) for r in records)) or [command]
    shared = list(dict.fromkeys(r["shared"] for r in records if r.get("shared")))
    lines = ["# Second day, re-worn armband: methods and inputs (issue 36)", "",
             "Commands (each adds the rows it lacks to `shift-isl-rewear.jsonl`): "
             + "; ".join(f"`{c}`" for c in commands), "",
             "Machine: 2-core x86_64 VM (not a Raspberry Pi), two runs at a time, one TensorFlow thread each; "
             "accuracy does not depend on what shared it. What did: " + ("; ".join(shared) or "nothing noted") + ".",
             "",
             "Trained on `../shared/data/isl` (June; the session split, same-block test = the latest 20 % of each "
             "letter's block) with the final recipe (100 epochs, lr 0.01, batch 16, best validation weights) and "
             "the armband preset's augmentation; int8 through LiteRT. New session: `isl_session3_dev` (re-worn "
             "armband, 2 repetitions x 26 letters), leave-one-repetition-out: each method calibrates on one "
             "repetition (26 windows, one per letter) and is tested on the other; both folds pooled, so every cell "
             "rests on 52 test windows per seed (zero-shot: the same 52 windows). Figures: mean +- sd over seeds; "
             "[95 % Wilson interval of all seeds' windows pooled].", "",
             "Methods: " + METHODS_TEXT, "", "Inputs: " + INPUTS_TEXT, "",
             "| architecture (runtime) | inputs | seeds | same-block | " + " | ".join(REWEAR_METHODS) + " |",
             "|---|---|---|---|" + "---|" * len(REWEAR_METHODS)]
    from tinynas.verdict import wilson

    for config in REWEAR_CONFIGS:
        for inputs in REWEAR_INPUTS:
            runs = [r for r in records if r["config"] == config and r["inputs"] == inputs and "skipped" not in r]
            if not runs:
                continue
            # One record per seed for the same-block column (the first); per method, the newest holding it.
            done = list({r["seed"]: r for r in reversed(runs)}.values())
            cells = []
            for method in REWEAR_METHODS:
                had = list({r["seed"]: r for r in runs if method in r}.values())
                if not had:
                    cells.append("-")
                    continue
                values = [r[method] for r in had]
                right = sum(int(round(r[method] * r["tested"])) for r in had)
                total = sum(r["tested"] for r in had)
                low, high = wilson(right, total)
                fewer = f" ({len(had)} seeds)" if len(had) != len(done) else ""
                cells.append(f"{np.mean(values):.3f} ± {np.std(values):.3f} [{low:.2f}, {high:.2f}]{fewer}")
            lines.append(f"| {config} | {inputs} | {len(done)} | {_mean_sd([r['same_block'] for r in done])} | "
                         + " | ".join(cells) + " |")
    failed = [r for r in records if "skipped" in r]
    if failed:
        lines += ["", "Not run: " + "; ".join(f"{r['config']}, {r['inputs']}, seed {r['seed']}: {r['skipped']}"
                                            for r in failed)]
    return "\n".join(lines) + "\n"


def _mean_sd(values) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return f"{np.mean(values):.3f} ± {np.std(values):.3f}"


def report(setting: str, records: list[dict], command: str) -> str:
    config = SETTINGS[setting]
    lines = [f"# Second day: {setting.upper()} (issue 15)", "", f"Command: `{command}`", "",
             *[paragraph.strip() + "\n" for paragraph in (__doc__ or "").split("\n\n")[2:4]],
             f"Training data: `{config['train']}`; new session/condition: `{config['new']}`; split: "
             f"{config['split']}. Machine: 2-core x86_64 VM (not a Raspberry Pi); two runs at a time, "
             f"one TensorFlow thread each.", ""]
    for target in config["targets"]:
        rows = [r for r in records if r["target"] == target]
        if not rows:
            continue
        fixed = next((r["architecture"] for r in rows if r["row"] != SEARCH_ROW and "architecture" in r), "-")
        lines += [f"## {target}: {fixed} (today's winner) in the recipe rows", "",
                  "| row | seeds | same-block test | new: zero-shot (all) | new: zero-shot | after adapt | "
                  "after recalibrate | worst class zero-shot / adapt / recal | same-block after recal | "
                  "adapt s | recal s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for row in [*ROWS[setting], SEARCH_ROW]:
            done = [r for r in rows if r["row"] == row and "skipped" not in r]
            skipped = [r for r in rows if r["row"] == row and "skipped" in r]
            if skipped and not done:
                lines.append(f"| {row} | - | {skipped[0]['skipped']} | | | | | | | | |")
                continue
            if not done:
                continue
            worst = " / ".join(f"{np.mean([min(r[key].values()) for r in done]):.2f}"
                               for key in ("zero_shot_recall", "adapted_recall", "recalibrated_recall"))
            label = row if row != SEARCH_ROW else f"{row} ({', '.join(sorted({r['architecture'] for r in done}))})"
            lines.append(f"| {label} | {len(done)} | {_mean_sd([r['same_block'] for r in done])} | "
                         f"{_mean_sd([r['zero_shot_all'] for r in done])} | "
                         f"{_mean_sd([r['zero_shot'] for r in done])} | "
                         f"{_mean_sd([r['adapted'] for r in done])} | {_mean_sd([r['recalibrated'] for r in done])} | "
                         f"{worst} | {_mean_sd([r['recalibrated_same_block'] for r in done])} | "
                         f"{np.mean([r['adapt_seconds'] for r in done]):.1f} | "
                         f"{np.mean([r['recalibrate_seconds'] for r in done]):.1f} |")
        lines.append("")
    lines += decision(setting, records)
    return "\n".join(lines) + "\n"


def decision(setting: str, records: list[dict]) -> list[str]:
    """Which single measures helped, by the rule the presets follow: on the primary target, the mean over
    seeds of the new-condition accuracy (zero-shot and after adapt, averaged) is higher than today's,
    and the same-block accuracy is not more than 1 point lower."""
    primary = next(iter(SETTINGS[setting]["targets"]))
    rows = [r for r in records if r["target"] == primary and "skipped" not in r]

    def mean(row, key):
        values = [r[key] for r in rows if r["row"] == row]
        return float(np.mean(values)) if values else None

    base_new = mean("today", "zero_shot_all")
    if base_new is None:
        return []
    base_adapt, base_same = mean("today", "adapted"), mean("today", "same_block")
    lines = [f"## What helped ({primary}; rule: mean of zero-shot (all) and after-adapt accuracy above today's, "
             f"same-block at most 1 point below today's)", "", "| measure | new: zero-shot + adapt (mean) | vs today | "
             "same-block vs today | kept |", "|---|---|---|---|---|"]
    for row in ROWS[setting]:
        if row in ("today", "combined", "preset") or mean(row, "zero_shot_all") is None:
            continue
        new = (mean(row, "zero_shot_all") + mean(row, "adapted")) / 2
        base = (base_new + base_adapt) / 2
        same = mean(row, "same_block") - base_same
        kept = new > base and same >= -0.01
        lines.append(f"| {row} | {new:.3f} | {new - base:+.3f} | {same:+.3f} | {'yes' if kept else 'no'} |")
    return lines + [""]


def _job(arguments):
    try:
        return run_one(*arguments)
    except Exception as exc:  # a benchmark row that fails is reported, not fatal to the others
        setting, target, row, seed = arguments
        return {"setting": setting, "target": target, "row": row, "seed": seed,
                "skipped": f"failed: {type(exc).__name__}: {exc}"[:300]}


def _rewear_job(arguments):
    try:
        return run_rewear(*arguments)
    except Exception as exc:  # reported, not fatal to the others
        config, inputs, seed, _ = arguments
        return {"config": config, "inputs": inputs, "seed": seed,
                "skipped": f"failed: {type(exc).__name__}: {exc}"[:300]}


def _main_rewear(args, seeds: list[int], command: str) -> int:
    configs = args.configs.split(";") if args.configs else list(REWEAR_CONFIGS)  # their names hold commas
    unknown = [config for config in configs if config not in REWEAR_CONFIGS]
    if unknown:
        raise SystemExit(f"--configs: no {unknown[0]!r}; choose from {'; '.join(REWEAR_CONFIGS)} (';'-separated)")
    inputs = args.inputs.split(",") if args.inputs else list(REWEAR_INPUTS)
    log = RESULTS / "shift-isl-rewear.jsonl"
    done = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    methods = tuple(args.methods.split(",")) if args.methods else REWEAR_METHODS
    # A row is done when a record of it holds every method asked for (a later run may add a method).
    finished = {(r["config"], r["inputs"], r["seed"]) for r in done
                if "skipped" not in r and all(m in r for m in methods)}
    jobs = [(config, row, seed, methods) for seed in seeds for row in inputs for config in configs
            if (config, row, seed) not in finished]
    context = multiprocessing.get_context("spawn")
    with context.Pool(args.processes, maxtasksperchild=1) as pool:
        for record in pool.imap_unordered(_rewear_job, jobs):
            record.update(command=command, shared=args.shared or "")
            with log.open("a") as handle:
                handle.write(json.dumps(record) + "\n")
            done.append(record)
            print(json.dumps(record), flush=True)
            (RESULTS / "shift-isl-rewear.md").write_text(rewear_report(done, command))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("setting", choices=[*SETTINGS, "isl-rewear"])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--rows", help="comma-separated rows (default: all)")
    parser.add_argument("--targets", help="comma-separated targets (default: both)")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--search", action="store_true",
                        help="part B: the whole product (fast search with the preset) instead of the recipe rows")
    parser.add_argument("--work", help="--search: keep the searches (a sweep) in this folder, and resume them there "
                                       "when run again with the same arguments (default: a temporary folder)")
    parser.add_argument("--inputs", help="isl-rewear: comma-separated inputs (default: all)")
    parser.add_argument("--configs", help="isl-rewear: semicolon-separated architectures (default: all)")
    parser.add_argument("--shared", help="isl-rewear: what else ran on the machine meanwhile (kept in the results)")
    parser.add_argument("--methods", help="isl-rewear: comma-separated methods (default: all; zero-shot and adapt "
                                          "always run)")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.setting == "isl-rewear":
        return _main_rewear(args, seeds, "python benchmarks/shift.py " + " ".join(sys.argv[1:] if argv is None
                                                                                   else argv))
    rows = [SEARCH_ROW] if args.search else args.rows.split(",") if args.rows else list(ROWS[args.setting])
    targets = args.targets.split(",") if args.targets else list(SETTINGS[args.setting]["targets"])
    log = RESULTS / f"shift-{args.setting}.jsonl"
    done = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    finished = {(r["target"], r["row"], r["seed"]) for r in done}
    # Seed-major order: every row gets its first seed before any gets a second (fair when stopped early).
    jobs = [(args.setting, target, row, seed) for seed in seeds for target in targets for row in rows
            if (target, row, seed) not in finished]
    command = "python benchmarks/shift.py " + " ".join(sys.argv[1:] if argv is None else argv)
    def finished_one(record: dict) -> None:
        with log.open("a") as handle:
            handle.write(json.dumps(record) + "\n")
        done.append(record)
        print(json.dumps({k: v for k, v in record.items() if not k.endswith("recall")}), flush=True)
        (RESULTS / f"shift-{args.setting}.md").write_text(report(args.setting, done, command))

    if args.search:  # the searches as one sweep (each a `tinynas search`), then each model to the new condition
        with contextlib.ExitStack() as stack:
            work = Path(args.work) if args.work else Path(stack.enter_context(tempfile.TemporaryDirectory()))
            wanted = sorted({seed for _setting, _target, _row, seed in jobs})
            table = search_table(args.setting, sorted({target for _s, target, _r, _seed in jobs}), wanted)
            found = {(cell.values["seed"], cell.values["target"]): (folder, cell.seconds) for cell, folder in
                     searched(work / "searches", table, progress=lambda line: print(line, flush=True))}
            for setting, target, _row, seed in jobs:
                try:
                    finished_one(run_search(setting, target, seed, *found[seed, target]))
                except Exception as exc:  # a benchmark row that fails is reported, not fatal to the others
                    finished_one({"setting": setting, "target": target, "row": SEARCH_ROW, "seed": seed,
                                  "skipped": f"failed: {type(exc).__name__}: {exc}"[:300]})
    else:
        context = multiprocessing.get_context("spawn")
        with context.Pool(args.processes, maxtasksperchild=1) as pool:
            for record in pool.imap_unordered(_job, jobs):
                finished_one(record)
    (RESULTS / f"shift-{args.setting}.md").write_text(report(args.setting, done, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
