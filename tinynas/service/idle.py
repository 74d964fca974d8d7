"""What serving answers when nothing it knows is performed: idle is an answer, and so is "unknown".

Two rules (`tinynas.deploy.served.IdleRule`, what serving applies), both set here when a model is deployed and
recorded in the deployed card (`card["serving"]`):

- **Still**: a gesture plan's window whose level (the guide's raw RMS over every channel) stays under
  `guide.STILL_FACTOR` times the rest level measured during the collection is the plan's rest class, or
  "unknown" when the plan has none (isl26): an idle arm is not a sign, whatever the network says about a
  window it never saw the like of.
- **Unsure**: below a confidence calibrated on held-out windows the answer is "unknown": the confidence
  under which only `MISSED_FRACTION` of the correctly classified held-out windows fall.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from firmware_bridge.guide import STILL_FACTOR
from tinynas.data.session import read_events
from tinynas.deploy.served import UNKNOWN, IdleRule, Smoother, Smoothing

__all__ = ["MAX_THRESHOLD", "MIN_CALIBRATION", "MISSED_FRACTION", "SMOOTHINGS", "UNKNOWN", "IdleRule",
           "confidence_threshold", "idle_rule", "session_rest", "softmax", "stream_rule"]
MISSED_FRACTION = 0.05
"""Correct held-out answers that the confidence threshold may turn into "unknown" (what it costs)."""
MAX_THRESHOLD = 0.9
"""Never ask for more confidence than this: a model sure of most windows must still answer the rest."""
MIN_CALIBRATION = 20
"""Correct held-out answers needed to set a threshold: a quantile of fewer (gestures4's 4 validation windows)
is noise, so such a model answers every window that is not still."""


def confidence_threshold(confidences: np.ndarray, correct: np.ndarray) -> float:
    """The confidence under which MISSED_FRACTION of the correct held-out answers fall (at most MAX_THRESHOLD);
    0 with fewer than MIN_CALIBRATION correct answers (nothing to calibrate on: no "unknown" rather than a
    guess)."""
    right = np.asarray(confidences, dtype=np.float64)[np.asarray(correct, dtype=bool)]
    if len(right) < MIN_CALIBRATION:
        return 0.0
    return float(min(MAX_THRESHOLD, np.quantile(right, MISSED_FRACTION)))


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax of int8 logits (as float64)."""
    shifted = np.asarray(logits, dtype=np.float64) - np.max(logits, axis=1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=1, keepdims=True)


def session_rest(session: str | Path) -> tuple[float | None, tuple[float, ...]]:
    """The median rest level the guide measured before the prompts of a session (events.jsonl's "rest_rms", RMS
    about the rest's channel means) and the median of those means ("rest_mean": a raw ADC's offset); (None, ())
    when the session has none (a machine plan, or one recorded before they were kept), () for means not kept
    (sessions recorded before: their levels are plain RMS, about 0)."""
    levels, means = [], []
    for event in read_events(Path(session)):
        level, mean = event.get("rest_rms"), event.get("rest_mean")
        if isinstance(level, (int, float)) and not isinstance(level, bool) and math.isfinite(level) and level > 0:
            levels.append(float(level))
            if isinstance(mean, list) and mean and all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in mean):
                means.append([float(v) for v in mean])
    if not levels:
        return None, ()
    # Means only when every level came with them, of one channel count: a level is measured about its means.
    same = len(means) == len(levels) and len({len(m) for m in means}) == 1
    return float(np.median(levels)), tuple(round(float(v), 4) for v in np.median(means, axis=0)) if same else ()


def idle_rule(plan, session: str | Path, confidences: np.ndarray, correct: np.ndarray, where: str) -> IdleRule:
    """The rule for a model deployed from `session` with `plan`, calibrated on held-out answers (`where` names
    them and their count)."""
    rest, means = session_rest(session) if plan.kind == "gesture" else (None, ())
    still_rms = STILL_FACTOR * rest if rest else 0.0
    threshold = confidence_threshold(confidences, correct)
    if not threshold:
        where += f" (under {MIN_CALIBRATION} correct: no threshold)"
    return IdleRule(threshold, still_rms, plan.rest_class or UNKNOWN, where, rest_mean=means)


SMOOTHINGS = tuple(Smoothing(k, n, sure) for n in range(1, 6) for k in range(1, n + 1)
                   for sure in (2.0, 0.95, 0.9, 0.8, 0.7))
"""What serving's smoothing is chosen among: k of the last n (n up to 5: a second and a quarter at the 0.25 s hop)
agree, or one answer this sure (2.0: never at once)."""


def stream_rule(plan, session: str | Path, stream: dict, windows, folds: int | None) -> IdleRule:
    """Serving's rules set on the out-of-fold answers along the held-out windows' streams (`stream`: the fold models'
    answers every hop across each window's context, `tinynas.training.job._stream_answers`): the still level as
    `idle_rule` sets it, each answer's window measured as serving measures it (`windows`: the session's, with the
    stream context the answers were taken along); the "unknown" threshold on the sign windows among them (every
    offset a person will be answered at, not only the onset cut); the smoothing that gets most sign and idle
    windows right on those sequences, the faster one on a tie."""
    rest_class = plan.rest_class or UNKNOWN
    rest, means = session_rest(session) if plan.kind == "gesture" else (None, ())
    still_rms = STILL_FACTOR * rest if rest else 0.0
    measure = IdleRule(rest_mean=means)
    truth = np.asarray(stream["truth"], dtype=np.int64)
    predicted = np.asarray(stream["predicted"], dtype=np.int64)
    confidence = np.asarray(stream["confidence"], dtype=np.float64)
    length, margin = windows.window_length, windows.margin
    level = np.array([measure.level(windows.context[w, margin + o:margin + o + length])
                      for w, o in zip(stream["window"], stream["offset"])], dtype=np.float64)
    still = (level < still_rms) if still_rms else np.zeros(len(level), dtype=bool)
    signs = (truth >= 0) & ~still
    threshold = confidence_threshold(confidence[signs], predicted[signs] == truth[signs])
    where = (f"{int(signs.sum())} out-of-fold answers along the held-out windows' streams (float models of the "
             f"{folds} folds)" + ("" if threshold else f" (under {MIN_CALIBRATION} correct: no threshold)"))
    names = [str(name) for name in windows.class_names]
    labels = [rest_class if is_still else UNKNOWN if sure < threshold else names[best]
              for is_still, sure, best in zip(still, confidence, predicted)]
    sequences: dict[int, list[int]] = {}
    for index, window in enumerate(stream["window"]):
        sequences.setdefault(int(window), []).append(index)
    idle_right = {rest_class, UNKNOWN}
    best_score: tuple[float, float] | None = None
    chosen = SMOOTHINGS[0]
    for smoothing in SMOOTHINGS:
        sign_right = sign_total = idle_ok = idle_total = 0
        delays: list[int] = []
        for indices in sequences.values():
            smoother = Smoother(smoothing)
            first_right = None
            for step, index in enumerate(sorted(indices, key=lambda i: stream["offset"][i])):
                shown = smoother.update(labels[index], float(confidence[index]))
                if truth[index] >= 0:
                    sign_total += 1
                    right = shown == names[truth[index]]
                    sign_right += right
                    if right and first_right is None:
                        first_right = step
                elif truth[index] == -2:
                    idle_total += 1
                    idle_ok += shown in idle_right
            if first_right is not None:
                delays.append(first_right)
        score = (0.5 * (sign_right / max(sign_total, 1) + idle_ok / max(idle_total, 1)),
                 -float(np.mean(delays)) if delays else -1e9)
        if best_score is None or score > best_score:
            best_score, chosen = score, smoothing
    return IdleRule(threshold, still_rms, rest_class, where, chosen.to_dict(), rest_mean=means)
