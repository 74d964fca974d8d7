"""The served path: what serving answers for one window, and how its answers are smoothed. One owner for both, so
that the stream's judge (`tinynas.deploy.stream`) scores exactly what a person sees live.

A window goes through the card's preprocessing and the int8 model (LiteRT); the best class and its softmax
confidence then meet the serving rules recorded in the deployed card (`card["serving"]`):

- **Still**: a window whose raw level (RMS over every channel about the rest's channel means, `rest_mean`: a raw
  ADC's offset is no movement) stays under `still_rms` (the guide's STILL_FACTOR x the rest heard during the
  collection) is the plan's rest class, or "unknown" when the plan has none: an idle arm is not a sign, whatever
  the network says about a window it never saw the like of.
- **Unsure**: below `unknown_below` (calibrated on held-out answers, `tinynas.service.idle`) the answer is
  "unknown".

Answers every hop are smoothed by agreement (`Smoothing`): a label is shown once `k` of the last `n` answers name
it, or at once when one answer is at least `sure` confident; otherwise the last shown label stays. Majority
smoothing lags at a sign's edges by half its length; agreement with confidence follows a clear sign at once and
holds against one stray answer (Edge Impulse's `ei_classifier_smooth` counts k of n the same way).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from firmware_bridge import onset
from tinynas.data.preprocess import Preprocessing
from tinynas.deploy.litert import Int8Model
from tinynas.folders import read_model_file

UNKNOWN = "unknown"


@dataclass(frozen=True)
class IdleRule:
    """The deployed model's rules for idle and unknown windows."""

    unknown_below: float = 0.0
    """Confidence under which the answer is "unknown" (0: never)."""
    still_rms: float = 0.0
    """Raw RMS under which a window is still (0: no still rule, e.g. a machine plan)."""
    still_label: str = UNKNOWN
    """The answer for a still window: the plan's rest class, else "unknown"."""
    calibrated_on: str = ""
    """Which windows set `unknown_below`, with their count."""
    smoothing: dict | None = None
    """The smoothing chosen with the rule (`Smoothing.to_dict`; None: the service's `smoothing` as a majority)."""
    rest_mean: tuple[float, ...] = ()
    """Each channel's mean at rest, the level is measured about (empty: 0, as sessions recorded before it kept)."""

    def to_dict(self) -> dict:
        """JSON-ready dict (the deployed card's "serving"; no smoothing key when none was chosen)."""
        data = asdict(self)
        if data["smoothing"] is None:
            del data["smoothing"]
        if not data["rest_mean"]:
            del data["rest_mean"]
        return data

    @classmethod
    def from_card(cls, card: dict) -> IdleRule:
        """The rule recorded in a deployed card; none (answer every window) for a card without one."""
        known = {key: value for key, value in (card.get("serving") or {}).items() if key in cls.__dataclass_fields__}
        if "rest_mean" in known:
            known["rest_mean"] = tuple(float(value) for value in known["rest_mean"] or ())
        return cls(**known)

    def level(self, window: np.ndarray) -> float:
        """A raw window's level: RMS over every sample and channel about the rest's channel means."""
        return onset.level(window, np.asarray(self.rest_mean or 0.0, dtype=np.float64))

    def is_still(self, window: np.ndarray) -> bool:
        """Whether a raw window is as still as the rest heard during the collection."""
        return self.still_rms > 0 and self.level(window) < self.still_rms

    def answer(self, window: np.ndarray, label: str, confidence: float) -> tuple[str, str]:
        """(the answer, why it is not the network's: "" / "still" / "unsure") for a raw window and the network's
        best label with its confidence."""
        if self.is_still(window):
            return self.still_label, "still"
        if confidence < self.unknown_below:
            return UNKNOWN, "unsure"
        return label, ""


@dataclass(frozen=True)
class Smoothing:
    """Agreement over the last answers: a label is shown when `k` of the last `n` name it, or at once when one
    answer is at least `sure` confident (above 1: never at once)."""

    k: int = 2
    n: int = 3
    sure: float = 2.0

    def __post_init__(self) -> None:
        if not 1 <= self.k <= self.n <= 100:
            raise ValueError(f"smoothing needs 1 <= k <= n <= 100, got k={self.k}, n={self.n}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def majority(cls, n: int) -> Smoothing:
        """The service's `smoothing = N` of a model whose card chose none: a label shown once most of N agree."""
        n = max(1, int(n))
        return cls(k=n // 2 + 1, n=n)

    @classmethod
    def from_card(cls, card: dict, fallback_n: int = 3) -> Smoothing:
        """The smoothing a deployed card chose (`serving.smoothing`), else majority over `fallback_n`."""
        chosen = (card.get("serving") or {}).get("smoothing")
        if isinstance(chosen, dict):
            try:
                return cls(int(chosen["k"]), int(chosen["n"]), float(chosen.get("sure", 2.0)))
            except (KeyError, TypeError, ValueError):
                pass  # a card written by hand: the service's own
        return cls.majority(fallback_n)

    def words(self) -> str:
        sure = f", or one answer {self.sure:.0%} sure" if self.sure <= 1 else ""
        return f"{self.k} of the last {self.n} answers agree{sure}"


class Smoother:
    """The shown label of a stream of answers, by `Smoothing`."""

    def __init__(self, smoothing: Smoothing) -> None:
        self.smoothing = smoothing
        self.recent: deque[str] = deque(maxlen=smoothing.n)
        self.shown = UNKNOWN

    def update(self, label: str, confidence: float) -> str:
        """The label shown after one more answer."""
        self.recent.append(label)
        if label != UNKNOWN and confidence >= self.smoothing.sure:
            self.shown = label
            return self.shown
        counts = Counter(self.recent)
        agreed = [name for name, count in counts.items() if count >= self.smoothing.k]
        if agreed:  # the most named; a tie goes to the newest of them
            best = max(counts[name] for name in agreed)
            self.shown = next(name for name in reversed(self.recent) if name in agreed and counts[name] == best)
        return self.shown


@dataclass(frozen=True)
class Answer:
    """What serving answers for one window before smoothing."""

    label: str
    confidence: float
    probabilities: tuple[float, ...]
    why: str
    """Why `label` is not the network's best class: "still" (an idle window) or "unsure" (low confidence)."""


class ServedPath:
    """A deployed model as serving runs it: preprocessing, the network (int8 through LiteRT; a float model's logits
    for a re-wear's fold models), softmax, the idle / unknown rule."""

    def __init__(self, model: Int8Model | None, card: dict, rule: IdleRule | None = None, *,
                 logits: Callable[[np.ndarray], np.ndarray] | None = None, length: int | None = None) -> None:
        if model is None and (logits is None or length is None):
            raise ValueError("a served path needs an int8 model, or logits and a window length")
        self.model = model
        self.logits = model.logits if model is not None else logits
        self.classes = list(card["classes"])
        self.preprocessing = Preprocessing.from_card(card)
        self.rule = IdleRule.from_card(card) if rule is None else rule
        self.length = model.window_shape[0] if model is not None else int(length or 0)

    @classmethod
    def from_folder(cls, model_path: str | Path, card: dict) -> ServedPath:
        """The served path of a model file in its folder (a regular file of the folder, no link) with its card."""
        path = Path(model_path)
        return cls(Int8Model(read_model_file(path.parent, path.name)), card)

    def answers(self, windows: np.ndarray) -> list[Answer]:
        """The answers for raw windows (n, T, C), as serving gives them one at a time."""
        windows = np.asarray(windows, dtype=np.float32)
        if not len(windows):
            return []
        assert self.logits is not None
        logits = np.asarray(self.logits(self.preprocessing.apply(windows)), dtype=np.float64)
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        probabilities = shifted / shifted.sum(axis=1, keepdims=True)
        out = []
        for window, row in zip(windows, probabilities):
            best = int(row.argmax())
            label, why = self.rule.answer(window, self.classes[best], float(row[best]))
            out.append(Answer(label, float(row[best]), tuple(round(float(p), 4) for p in row), why))
        return out
