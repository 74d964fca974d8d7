"""A served anomaly section changed by adaptation (`tinynas.adaptation`): the network's threshold set again on a new
condition's normal windows, or the classical scorer fitted again (and the earlier conditions kept beside it)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from tinynas.anomaly.classical import ClassicalScorer, input_scale_of, refit
from tinynas.anomaly.conditions import FIRST, Condition
from tinynas.anomaly.scoring import int8_scores
from tinynas.anomaly.section import read_section
from tinynas.anomaly.threshold import calibrate
from tinynas.deploy.export import io_quantization
from tinynas.deploy.litert import Int8Model


def recalibrated_section(section: dict, tflite: bytes, held_out_inputs: np.ndarray, sessions: np.ndarray | None,
                         why: str) -> dict:
    """The anomaly section of a changed model (`adapt` on a new condition's normal windows): its threshold set
    again, for the same rate, on int8 scores of normal windows the change did not see; the old one is kept."""

    scale = float(io_quantization(tflite)["output"]["scale"])
    saturation = read_section({"anomaly": section}).saturation_step  # type: ignore[union-attr]
    scores = int8_scores(Int8Model(tflite), held_out_inputs, saturation)
    threshold = calibrate(scores, sessions, float(section["false_alarm_rate"]))
    previous = {key: section.get(key) for key in ("threshold", "threshold_steps", "score_scale", "calibration")}
    return {**section, "score_scale": scale, "threshold_steps": int(threshold.value),
            "threshold": float(threshold.value) * scale, "calibration": {**threshold.to_dict(), "why": why},
            "previous_threshold": previous}


def refitted_classical(section: dict, fit_windows: np.ndarray, calibration_windows: np.ndarray,
                       sessions: np.ndarray | None, why: str,
                       condition: str | None = None) -> tuple[dict, ClassicalScorer, float]:
    """The anomaly section of a folder serving the classical scorer, on a new condition's normal windows: its
    Gaussian (and input scale) fitted on `fit_windows`, its threshold set again for the same rate on the scores of
    `calibration_windows` (raw windows it did not see); the old scorer's threshold is kept. With a `condition` name
    the earlier conditions are kept beside it (`kept_conditions`, all on one int16 input scale: the largest any of
    them needs) and a condition of that name is replaced. Returns the section, the scorer and its threshold."""
    choice = section["family_choice"]
    held = choice["classical"]
    old = read_section({"anomaly": section})
    kept: list[Condition] = []
    if condition is not None:
        assert old is not None and old.classical is not None and old.classical_threshold is not None
        earlier = old.conditions or (Condition(str(held.get("condition") or FIRST), old.classical,
                                               old.classical_threshold),)
        kept = [c for c in earlier if c.name != condition]
    scale = max([input_scale_of(fit_windows)] + [c.scorer.input_scale for c in kept]) if kept else None
    scorer = refit(ClassicalScorer.from_dict(held["scorer"]), fit_windows, scale)
    threshold = calibrate(scorer.score(calibration_windows), sessions, float(section["false_alarm_rate"]))
    changed = {**held, "scorer": scorer.to_dict(), "threshold": threshold.value,
               "calibration": {**threshold.to_dict(), "why": why},
               "previous_threshold": {"threshold": held.get("threshold"), "calibration": held.get("calibration")}}
    changed.pop("kept_conditions", None)
    changed.pop("condition", None)  # unnamed: the new condition replaces every earlier one
    if condition is not None:
        changed["condition"] = condition
    if kept and scale is not None:
        # An earlier condition read on the common scale: its features move by far less than their spread (the
        # int16 step stays below 1e-4 of the loudest condition's peak), and the Python and C scores stay one.
        changed["kept_conditions"] = [{"name": c.name, "scorer": replace(c.scorer, input_scale=scale).to_dict(),
                                       "threshold": c.threshold} for c in kept]
    return {**section, "family_choice": {**choice, "classical": changed}}, scorer, threshold.value
