"""What the service's re-wear child is asked (`RewearJob`) and what it answers (`RewearOutcome`), and their JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

Pair = tuple[float | None, float | None]
"""A figure before and after the change (None: not measured)."""


@dataclass(frozen=True)
class RewearJob:
    """Change the model in `source` into `staging`: "labelled" recalibrates, "unlabelled" adapts."""

    mode: str
    source: str
    """The served model's folder."""
    staging: str
    """Where the new model is made (the service moves it to its final folder only if accepted)."""
    spec: str
    """The --data spec of the re-wear's recorded windows."""
    result: str = ""
    """The file the child writes its RewearOutcome to."""
    progress: str = ""
    """The file the child writes its latest step to, for the status (empty: none)."""
    epochs: int = 30
    learning_rate: float = 1e-3
    """The fine-tuning of a labelled job (adapt has none)."""
    condition: str = ""
    """An unlabelled job on a classical anomaly scorer: the new operating condition's name, kept beside the earlier
    ones (`adapt --condition`); empty: the new condition replaces them."""
    hop_seconds: float = 0.25
    smoothing: int = 3
    """Serving's hop and smoothing (the service's): a labelled job judges the models on the stream as they serve."""

    def to_dict(self) -> dict:
        return {"mode": self.mode, "source": self.source, "staging": self.staging, "spec": self.spec,
                "epochs": self.epochs, "learning_rate": self.learning_rate, "result": self.result,
                "progress": self.progress, "hop_seconds": self.hop_seconds, "smoothing": self.smoothing,
                **({"condition": self.condition} if self.condition else {})}

    @classmethod
    def from_dict(cls, data: dict) -> RewearJob:
        """The job of a job file's JSON (KeyError when it lacks a field the job needs)."""
        return cls(mode=data["mode"], source=data["source"], staging=data["staging"], spec=data["spec"],
                   result=data.get("result") or "", progress=data.get("progress") or "",
                   epochs=data.get("epochs", cls.epochs), learning_rate=data.get("learning_rate", cls.learning_rate),
                   condition=str(data.get("condition") or ""),
                   hop_seconds=float(data.get("hop_seconds", cls.hop_seconds)),
                   smoothing=int(data.get("smoothing", cls.smoothing)))


@dataclass(frozen=True)
class RewearOutcome:
    """The child's answer: the decision and its figures, or `error` (one line) when it could not decide.

    In the JSON a figure that was not measured is left out, except that a recalibration (`paired` set) always
    states `chosen` and `compared` (None: one repetition, nothing cross-validated).
    """

    accepted: bool = False
    reason: str = ""
    windows: int = 0
    seconds: float = 0.0
    test: Pair | None = None
    """Accuracy on the onboarding's test windows, old and new model."""
    verify: Pair | None = None
    """A recalibration's accuracy on today's wear (the new repetitions), old and new model."""
    verify_windows: int | None = None
    chosen: str | None = None
    """The recipe cross-validation over the repetitions chose."""
    compared: dict | None = None
    """What cross-validation compared: each recipe's accuracy."""
    paired: dict | None = None
    """What a recalibration's decision rests on: paired counts on today's wear and on the onboarding test."""
    stream: dict | None = None
    """A recalibration judged on the stream (`RecalibrateResult.stream`): each model's verdict on today's and the
    onboarding's streams, and the classes the old model fails today."""
    confidence: Pair | None = None
    """Adapt's mean confidence on the new windows, old and new model (no labels: not accuracy)."""
    old_threshold_flagged: float | None = None
    """An adapted scorer: the share of the new windows the old threshold flagged."""
    error: str | None = None

    def to_dict(self) -> dict:
        if self.error is not None:
            return {"error": self.error}
        data: dict = {"accepted": self.accepted, "reason": self.reason, "windows": self.windows}
        recalibrated = self.paired is not None
        for key, value in (("verify_windows", self.verify_windows), ("seconds", self.seconds),
                           ("verify", self.verify), ("confidence", self.confidence),
                           ("old_threshold_flagged", self.old_threshold_flagged), ("test", self.test),
                           ("chosen", self.chosen), ("compared", self.compared), ("paired", self.paired),
                           ("stream", self.stream)):
            if value is not None or (recalibrated and key in ("chosen", "compared")):
                data[key] = list(value) if isinstance(value, tuple) else value
        return data

    @classmethod
    def from_dict(cls, data: object) -> RewearOutcome:
        """The outcome of a result file's JSON (ValueError when it is not one: a damaged file)."""
        if not isinstance(data, dict):
            raise ValueError("a re-wear outcome is an object")
        if "error" in data:
            return cls(error=str(data["error"]))
        try:
            return cls(accepted=bool(data["accepted"]), reason=str(data["reason"]), windows=int(data["windows"]),
                       seconds=float(data["seconds"]), test=_pair(data.get("test")), verify=_pair(data.get("verify")),
                       verify_windows=data.get("verify_windows"), chosen=data.get("chosen"),
                       compared=data.get("compared"), paired=data.get("paired"), stream=data.get("stream"),
                       confidence=_pair(data.get("confidence")),
                       old_threshold_flagged=data.get("old_threshold_flagged"))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a re-wear outcome ({exc})") from None

    @classmethod
    def read(cls, path: Path) -> RewearOutcome | None:
        """The outcome in `path`; None when the file is missing or damaged (the child died before it answered)."""
        try:
            return cls.from_dict(json.loads(path.read_text()))
        except (OSError, ValueError):
            return None


def _pair(value: object) -> Pair | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ValueError(f"not a pair of figures: {value!r}")
    before, after = value
    return before, after
