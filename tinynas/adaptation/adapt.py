"""`tinynas adapt`: make a model fit a new session or condition from unlabelled windows.

Re-estimates the batch-norm statistics (AdaBN, `batchnorm.py`) and, where the model standardises
its input per channel, that normalization, from windows of the new session; recalibrates the int8
ranges on them; re-exports with the same architecture (the budget is re-checked). Labels in the
data are not used; when present they are only scored, before and after, so the user sees the effect.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from tinynas.adaptation.batchnorm import batchnorm_layers, reestimate_batchnorm
from tinynas.adaptation.common import (
    AdaptationError,
    changed_card,
    check_new_data,
    check_shape,
    describe_data,
    export_within_budget,
    original_test,
    rounded_int8_accuracy,
)
from tinynas.anomaly.classical import cost
from tinynas.anomaly.classical_c import classical_c_card
from tinynas.anomaly.conditions import check_condition_name
from tinynas.anomaly.section import AnomalySection, read_section
from tinynas.anomaly.section_changes import recalibrated_section, refitted_classical
from tinynas.anomaly.task import NORMAL, normal_only
from tinynas.anomaly.threshold import check_enough, windows_needed
from tinynas.card import task_of
from tinynas.data.windows import Windows, windows_argument
from tinynas.deploy.modeldir import ModelDir, check_new_folder, write_model_dir
from tinynas.folders import MODEL, read_model_file
from tinynas.modes import Task

PARTS = ("batchnorm", "normalization")
MIN_WINDOWS = 8
"""Fewer windows than this give batch-norm statistics too noisy to trust."""


@dataclass(frozen=True)
class AdaptResult:
    """What `adapt` did and how the model scores before and after (None: not measurable)."""

    out_dir: Path
    adapted: tuple[str, ...]
    windows: int
    seconds: float
    new_data_before: float | None
    new_data_after: float | None
    test_before: float | None
    test_after: float | None
    card: dict

    def text(self) -> str:
        lines = [f"adapted {', '.join(self.adapted)} on {self.windows} unlabelled windows "
                 f"in {self.seconds:.1f} s -> {self.out_dir}"]
        section = read_section(self.card)
        if section is not None and section.classical is not None:
            # What the folder serves is the classical scorer; the network finalist's figures would read as its.
            before = (self.card.get("history") or [{}])[-1].get("threshold") or {}
            kept = section.conditions
            threshold = (f"kept conditions {', '.join(c.name for c in kept)}, the new one's threshold "
                         f"{section.threshold:.4g}" if kept else
                         f"threshold {before.get('before', 0):.4g} -> {section.threshold:.4g}")
            lines.append(f"  served: the classical scorer, {threshold} for {section.false_alarm_rate:.2%} false "
                         f"alarms, set on {section.calibration_windows} later windows it did not see; the network "
                         f"finalist in model.tflite was adapted too (its batch norm), not served")
            return "\n".join(lines)
        if self.new_data_before is not None:
            lines.append(f"  new data (its labels were only scored, not used): int8 accuracy "
                         f"{self.new_data_before:.3f} -> {self.new_data_after:.3f}")
        if self.test_before is not None:
            lines.append(f"  original test windows: int8 accuracy {self.test_before:.3f} -> {self.test_after:.3f}")
        return "\n".join(lines)


def _labels(model_dir: ModelDir, windows: Windows) -> np.ndarray | None:
    """The windows' labels in the model's classes, when they carry only classes the model knows."""
    known = set(model_dir.preprocessing.class_names)
    if not set(windows.class_names) <= known:
        return None
    return model_dir.preprocessing.labels_for(windows)


def _section(card: dict) -> AnomalySection:
    """A scorer's anomaly section, typed (`read_section`)."""
    section = read_section(card)
    if section is None:
        raise AdaptationError("card.json: not an anomaly scorer (no anomaly section)")
    return section


def _kept_within_budget(card: dict, section: dict) -> tuple:
    """The conditions the adapted classical scorer keeps (`section`'s), its cost updated in `section`; refused in
    one line when keeping them all no longer fits the target the search was given."""
    kept = read_section({"anomaly": section}).conditions  # type: ignore[union-attr]
    if not kept:
        return ()
    held = section["family_choice"]["classical"]
    target = card.get("target") or {}
    scorer = kept[-1].scorer
    held["cost"] = cost(scorer.length, scorer.channels, str(target.get("core") or ""), len(kept))
    for what, key, limit in (("RAM", "peak_ram_bytes", "ram_bytes"), ("flash", "flash_bytes", "flash_bytes")):
        have = target.get(limit)
        if isinstance(have, int) and held["cost"][key] > have:
            raise AdaptationError(f"keeping {len(kept)} conditions ({', '.join(c.name for c in kept)}) needs "
                                  f"{held['cost'][key]:,} bytes of {what}; the target has {have:,}: adapt without "
                                  f"--condition to replace them, or from a folder that keeps fewer")
    return kept


def _scorer_halves(source: ModelDir, windows: Windows) -> tuple[Windows, Windows]:
    """An anomaly scorer's new windows, taken as normal running (labels ignored, as adapt's are), except that
    data labelled with faults beside a normal class is refused: a fault window must never set the threshold.
    In time order, the earlier half re-estimates batch norm and the later half (never seen by it) sets the
    threshold again for the card's rate, so it must hold enough windows for that rate."""

    if NORMAL in windows.class_names and windows.classes > 1:
        normal_only(windows, "the new data")  # refuses, naming the fault classes
    # One class, normal running: the halves of an unlabelled recording (the service's) are not classes.
    windows = Windows(windows.x, np.zeros(len(windows), dtype=np.int64), windows.groups, (NORMAL,),
                      windows.sample_rate_hz, windows.channel_names, windows.provenance, windows.sessions,
                      windows.time_index)
    times = windows.time_index if windows.time_index is not None else np.arange(len(windows))
    order = np.argsort(times, kind="stable")
    half = len(order) // 2
    rate = _section(source.card).false_alarm_rate
    check_enough(len(order) - half, rate, f"the later half of the new data's {len(order)} windows (the earlier "
                 f"half re-estimates batch norm; {2 * windows_needed(rate)} windows in all are needed)")
    return windows.subset(order[:half]), windows.subset(order[half:])


def adapt(model_path: str | Path, windows: Windows, out_dir: str | Path, *, spec: str = "",
          parts: tuple[str, ...] = PARTS, progress=None, condition: str | None = None) -> AdaptResult:
    """Adapt the model in `model_path` to `windows` (labels ignored) and write it to `out_dir`. `condition`: a
    classical anomaly scorer keeps its earlier operating conditions beside this one, named so
    (`tinynas.anomaly.conditions`); without it the new condition replaces them."""

    windows_argument(windows)
    if condition is not None:
        condition = check_condition_name(condition)
    if isinstance(parts, str):  # "batchnorm" would otherwise read as its letters
        parts = tuple(part.strip() for part in parts.split(",") if part.strip())
    unknown = [part for part in parts if part not in PARTS]
    if unknown or not parts:
        asked = ",".join(unknown) if unknown else ""
        raise AdaptationError(f"--only {asked!r}: cannot adapt {', '.join(unknown) or 'nothing'}; choose from "
                              f"{', '.join(PARTS)} (or leave --only out for both)")
    source = ModelDir.open(model_path)
    out = check_new_folder(out_dir, source.path)
    check_shape(source, windows, "the new data")
    check_new_data(source, windows, "the new data")
    if len(windows) < MIN_WINDOWS:
        raise AdaptationError(f"the new data holds {len(windows)} window(s); adapting needs at least {MIN_WINDOWS} "
                              f"(record a few more seconds)")
    scorer = task_of(source.card) == Task.ANOMALY
    if condition is not None and (not scorer or _section(source.card).classical is None):
        raise AdaptationError(f"--condition {condition!r}: conditions are kept side by side for a classical anomaly "
                              f"scorer only; this model is "
                              + ("an int8 network scorer, adapted in place (its batch norm changes): leave "
                                 "--condition out" if scorer else "a classifier"))
    held_out = None
    if scorer:
        windows, held_out = _scorer_halves(source, windows)
    say = progress or (lambda text: None)
    started = time.perf_counter()
    before_pre = source.preprocessing
    pre = before_pre
    adapted = []
    if "normalization" in parts and before_pre.normalize == "channel":
        fitted = type(before_pre).fit(windows, np.arange(len(windows)), "channel")
        pre = replace(before_pre, offset=fitted.offset, scale=fitted.scale)
        adapted.append("input normalization")
    x_new = pre.apply(windows.x)
    model = source.keras_model()
    moved = []
    if "batchnorm" in parts:
        say(f"re-estimating batch-norm statistics on {len(windows)} windows")
        moved = reestimate_batchnorm(model, x_new)
        adapted.append("batch-norm statistics")
    if not adapted:
        has_bn = bool(batchnorm_layers(model))
        missing = [("batchnorm", "batch normalization", has_bn),
                   ("normalization", "per-channel input normalization", before_pre.normalize == "channel")]
        lacking = [f"no {what}" for part, what, present in missing if part in parts and not present]
        other = [part for part, _, present in missing if part not in parts and present]
        raise AdaptationError(f"nothing to adapt: the model has {' and '.join(lacking)}"
                              + (f" (it can adapt: --only {other[0]})" if other else ""))
    say("converting to int8 (calibrated on the new windows)")
    tflite = export_within_budget(source, model, x_new)
    old_tflite = read_model_file(source.path, MODEL)
    labels = None if scorer else _labels(source, windows)
    new_before = rounded_int8_accuracy(old_tflite, before_pre.apply(windows.x), labels) if labels is not None else None
    new_after = rounded_int8_accuracy(tflite, x_new, labels) if labels is not None else None
    x_old, y_old = original_test(source)
    test_before = rounded_int8_accuracy(old_tflite, x_old, y_old)
    # The original test windows come from the old condition: they go through the adapted model as
    # they are, in the new model's units, to show what the adaptation costs there.
    x_old_new, _ = original_test(source, pre)
    test_after = rounded_int8_accuracy(tflite, x_old_new, y_old)
    seconds = time.perf_counter() - started
    entry = {"kind": "adapt", "adapted": adapted, "data": describe_data(spec, windows), "seconds": round(seconds, 1),
             "batchnorm_shift": moved, "labels_used": False,
             "new_data_int8_accuracy": {"before": new_before, "after": new_after} if labels is not None else None,
             "original_test_int8_accuracy": {"before": test_before, "after": test_after}}
    card = changed_card(source, tflite, pre, entry, test_after)
    scorer_c = None
    if held_out is not None:
        say(f"setting the threshold again on {len(held_out)} later normal windows")
        section = recalibrated_section(
            _section(card).raw, tflite, pre.apply(held_out.x), None,
            f"adapt: batch norm re-estimated on the first {len(windows)} new windows, the threshold set on the "
            f"{len(held_out)} after them")
        if _section(source.card).classical is not None:  # the served classical scorer: its Gaussian fitted again
            say(f"fitting the classical scorer's Gaussian again on {len(windows)} new windows")
            section, classical, threshold = refitted_classical(
                section, windows.x, held_out.x, None,
                f"adapt: the Gaussian fitted on the first {len(windows)} new windows, the threshold set on the "
                f"{len(held_out)} after them", condition)
            kept = _kept_within_budget(source.card, section)
            prefix = (source.card.get("c_runtime") or {}).get("prefix", "tinynas")
            scorer_c = classical_c_card(classical, threshold, prefix, title="classical anomaly scorer, adapted",
                                        kept=kept)
            adapted.append("the classical scorer's Gaussian" + (
                f" (condition {condition!r}, {len(kept)} conditions kept)" if kept else ""))
        card["anomaly"] = section
        card["history"][-1]["threshold"] = {"before": _section(source.card).threshold,
                                            "after": _section(card).threshold}
    write_model_dir(out, source, model, tflite, card, scorer_c)
    return AdaptResult(out, tuple(adapted), len(windows), seconds, new_before, new_after, test_before, test_after,
                       card)
