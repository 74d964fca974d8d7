"""How a served anomaly scorer reads a window: the int8 network's score, the classical scorer's, or several
conditions' (one `Scorer` each, chosen from the card's checked section).

The score is computed from the int8 model's two outputs, in their integer steps: both outputs share one
scale and zero point, so logit[1] - logit[0] = scale * (q[1] - q[0]) exactly, and the threshold, one of
the calibration windows' scores, is a whole number of steps. TFLite Micro and the generated C runtime give
the same score and verdict bit for bit (`PREFIX_score` in model_compiled.h); LiteRT, which sets the threshold
and serves on the Pi, rounds some products otherwise in its optimized kernels: its score can differ by a step
or two (tests/anomaly/test_scorer.py).

A window that leaves the int8 input's range is scored above every window that does not (`SATURATION_STEP`):
the converter sets that range on the training windows, so a fault louder than normal running reaches the
network clipped to normal's range, and a small scorer may then not tell it from normal (issue 59: CWRU's
development data, the 4 KiB `fast` winners of seeds 0 and 2 detected OR007@3 in 58 % and OR021@12 in 22 % of
their windows with the clipped input alone, 100 % and 98 % with the rule; no calibration window reached the
range's edge, so no false alarm was added). The calibration windows are scored by the same rule, so the
threshold's guarantee is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from tinynas.anomaly.classical import ClassicalScorer
from tinynas.anomaly.conditions import LIVE, Condition, read_under
from tinynas.anomaly.section import AnomalySection
from tinynas.anomaly.task import score_of

SATURATION_STEP = 512
"""What each int8 input sample at the edge of the range (-128 or 127) adds to a window's score, in output steps:
more than logit[1] - logit[0] can span in int8 (2 x 255), so one such sample puts a window above every window
that has none. Recorded in the card (`anomaly.saturation_step`); a card without it (made before) scores without."""


def steps(logits: np.ndarray, scale: float) -> np.ndarray:
    """Scores in the int8 output's steps (whole numbers) from dequantized logits (the input's range not counted:
    a float model's, or one read before `SATURATION_STEP`)."""
    return np.round(score_of(logits) / scale).astype(np.int64)


def saturated(quantized: np.ndarray) -> np.ndarray:
    """Per int8 input window (n, T, C): how many of its samples sit at the edge of the range (-128 or 127)."""
    q = np.asarray(quantized)
    return np.sum((q == -128) | (q == 127), axis=tuple(range(1, q.ndim))).astype(np.int64)


def int8_scores(model, inputs: np.ndarray, saturation_step: int) -> np.ndarray:
    """Scores in output steps of preprocessed float windows `inputs` (n, T, C) by the int8 scorer `model`
    (`tinynas.deploy.litert.Int8Model`): output[1] - output[0], plus `saturation_step` per input sample at the
    range's edge: what the generated `PREFIX_score` computes."""
    quantized = model.quantize(inputs)
    outputs = model.int8_outputs(quantized).astype(np.int64)
    return outputs[:, 1] - outputs[:, 0] + int(saturation_step) * saturated(quantized)


class Scorer(Protocol):
    """What serving, `evaluate` and adaptation score raw windows with: scores, the threshold they are anomalous
    above, and the condition each window was read under (None: one condition is kept)."""

    def read(self, windows: np.ndarray, condition: str = LIVE) -> tuple[np.ndarray, float, list[str] | None]: ...


@dataclass(frozen=True)
class NetworkScorer:
    """The int8 network: output steps (`int8_scores`) of the preprocessed windows, over the threshold in steps."""

    section: AnomalySection
    model: object
    preprocessing: object

    def read(self, windows: np.ndarray, condition: str = LIVE) -> tuple[np.ndarray, float, list[str] | None]:
        return (int8_scores(self.model, self.preprocessing.apply(windows),  # type: ignore[attr-defined]
                            self.section.saturation_step), float(self.section.threshold_steps), None)


@dataclass(frozen=True)
class ClassicalServed:
    """The classical scorer the family rule chose: its float score of the raw windows, over its own threshold."""

    scorer: ClassicalScorer
    threshold: float

    def read(self, windows: np.ndarray, condition: str = LIVE) -> tuple[np.ndarray, float, list[str] | None]:
        return self.scorer.score(windows), self.threshold, None


@dataclass(frozen=True)
class ConditionsServed:
    """A classical scorer keeping several operating conditions: each window read under `condition` (the operator's,
    or the live signal's: `tinynas.anomaly.conditions`), its score there over that condition's threshold, times the
    served condition's threshold."""

    conditions: tuple[Condition, ...]
    threshold: float

    def read(self, windows: np.ndarray, condition: str = LIVE) -> tuple[np.ndarray, float, list[str] | None]:
        relative, index = read_under(list(self.conditions), windows, condition)
        return relative * self.threshold, self.threshold, [self.conditions[i].name for i in index]


def scorer_of(section: AnomalySection, model, preprocessing) -> Scorer:
    """The scorer the card serves: several conditions, the classical scorer, else the int8 network `model`."""
    if len(section.conditions) > 1 and section.classical_threshold is not None:
        return ConditionsServed(section.conditions, section.classical_threshold)
    if section.classical is not None and section.classical_threshold is not None:
        return ClassicalServed(section.classical, section.classical_threshold)
    return NetworkScorer(section, model, preprocessing)


def served_scores(section: AnomalySection, model, preprocessing, windows: np.ndarray,
                  condition: str = LIVE) -> tuple[np.ndarray, float]:
    """(scores, threshold) of raw `windows` (n, T, C) by the scorer the card serves (`scorer_of`). A window is
    anomalous when its score is above the threshold."""
    scores, threshold, _ = served_reading(section, model, preprocessing, windows, condition)
    return scores, threshold


def served_reading(section: AnomalySection, model, preprocessing, windows: np.ndarray,
                   condition: str = LIVE) -> tuple[np.ndarray, float, list[str] | None]:
    """`served_scores`, and the condition each window was read under (None: one condition is kept)."""
    return scorer_of(section, model, preprocessing).read(windows, condition)
