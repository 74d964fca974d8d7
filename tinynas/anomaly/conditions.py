"""Operating conditions of one machine (loads, speeds), each with its own normal running: a classical scorer fitted
on it and its threshold, kept side by side so that a machine going back to an earlier load raises no alarm.

Which condition a window is read under:
- **the operator's**: the condition named (the machine's controller knows its set point): the window is scored by
  that condition's scorer against its threshold, and the false-alarm rate is that condition's own;
- **the live signal's**: the condition the window looks most like, its score smallest relative to its threshold. A
  window is anomalous only if it is anomalous under every kept condition. A normal window of condition c is flagged
  only if c's own scorer flags it, so each condition's false-alarm rate stays at most its rate; the price is that a
  fault that looks like another condition's normal running is missed (measured: benchmarks/anomaly_conditions.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinynas.anomaly.baseline import features
from tinynas.anomaly.classical import ClassicalScorer, dead_windows, floored
from tinynas.errors import TinynasError

LIVE = "live"
"""The operator's choice that means: read each window under the condition it looks most like."""
FIRST = "as searched"
"""The name of the condition a search's scorer was fitted on, when it was not named."""


NAME_LENGTH = 40


class ConditionError(TinynasError, ValueError):
    """An unknown condition was asked for, or a name no condition can have."""


def check_condition_name(name: str) -> str:
    """`name` stripped, when a condition can be called so (printable, 1-40 characters, not `LIVE`)."""
    name = name.strip()
    if not name or len(name) > NAME_LENGTH or not name.isprintable() or name == LIVE:
        raise ConditionError(f"condition {name!r}: give a name of 1 to {NAME_LENGTH} printable characters other than "
                             f"{LIVE!r} (e.g. \"1 hp\" or \"high load\")")
    return name


@dataclass(frozen=True)
class Condition:
    name: str
    scorer: ClassicalScorer
    threshold: float


def relative_scores(conditions: list[Condition], x: np.ndarray) -> np.ndarray:
    """(n, K): each window's score under each condition over that condition's threshold (above 1: anomalous)."""
    first = conditions[0].scorer
    if any(c.scorer.input_scale != first.input_scale for c in conditions):  # fitted apart (a benchmark's)
        return np.stack([c.scorer.score(x) / c.threshold for c in conditions], axis=1)
    # Kept side by side (one int16 scale): the window's features are the same under every condition, made once.
    q = first.quantize(x)
    f, dead = features(first.dequantize(q)), dead_windows(q)
    return np.stack([floored(c.scorer.score_features(f), dead) / c.threshold for c in conditions], axis=1)


def read_under(conditions: list[Condition], x: np.ndarray, chosen: str = LIVE) -> tuple[np.ndarray, np.ndarray]:
    """(relative score, index of the condition read under) of each window of `x` (n, T, C): under the condition
    `chosen` names, or, with `LIVE`, the one it looks most like. A window is anomalous when its relative score is
    above 1."""
    if not conditions:
        raise ConditionError("no operating condition is kept")
    if chosen == LIVE:
        relative = relative_scores(conditions, x)
        index = np.argmin(relative, axis=1)
        return relative[np.arange(len(x)), index], index
    names = [c.name for c in conditions]
    if chosen not in names:
        raise ConditionError(f"condition {chosen!r} is not kept; kept: {', '.join(names)} (or {LIVE})")
    at = names.index(chosen)  # the operator's: only that condition is scored
    return relative_scores(conditions[at:at + 1], x)[:, 0], np.full(len(x), at)
