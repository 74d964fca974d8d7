"""Live inference on the incoming stream with LiteRT: sliding windows, confidence, majority smoothing.

Nothing here imports TensorFlow: the serving path stays small.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter, deque
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from tinynas.data.preprocess import Preprocessing
from tinynas.deploy.litert import Int8Model
from tinynas.service.idle import IdleRule

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prediction:
    """One classified window: its last sample, the raw and smoothed label, and confidence."""

    end_sample: int
    label: str
    confidence: float
    smoothed: str
    probabilities: tuple[float, ...] = ()
    """Per class, in the card's class order (the status page's confidence bars)."""
    why: str = ""
    """Why `label` is not the network's best class: "still" (an idle window) or "unsure" (low confidence)."""

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        return asdict(self)


class LiveClassifier:
    """Classifies the newest window of a `SampleRing` every `hop` samples."""

    def __init__(self, model_path: str | Path, card: dict, ring, hop_samples: int, smoothing: int = 3) -> None:
        self.model = Int8Model(Path(model_path).read_bytes())
        self.classes = list(card["classes"])
        self.preprocessing = Preprocessing.from_card(card)
        self.length = self.model.window_shape[0]
        self.ring = ring
        self.hop = max(1, hop_samples)
        self.next_end = max(ring.latest_sample, self.length)
        self.recent: deque[str] = deque(maxlen=max(1, smoothing))
        self.rule = IdleRule.from_card(card)

    def step(self) -> list[Prediction]:
        """Predictions for every hop that completed since the last call (skips gaps)."""
        out = []
        while self.ring.latest_sample >= self.next_end:
            end = self.next_end
            self.next_end += self.hop
            window = self.ring.window(end - self.length, self.length)
            if window is None:
                continue  # lost samples or fell behind: skip rather than classify garbage
            logits = self.model.logits(self.preprocessing.apply(window[None]))[0]
            probabilities = np.exp(logits - logits.max())
            probabilities /= probabilities.sum()
            best = int(probabilities.argmax())
            label, why = self.rule.answer(window, self.classes[best], float(probabilities[best]))
            self.recent.append(label)
            smoothed = Counter(self.recent).most_common(1)[0][0]
            out.append(Prediction(end, label, float(probabilities[best]), smoothed,
                                  tuple(round(float(p), 4) for p in probabilities), why))
        return out


class PredictionLog:
    """Appends predictions as JSON lines (flushed, not fsynced: they are cheap to lose)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "a", encoding="utf-8")
        self.last: deque[dict] = deque(maxlen=20)
        self.times: deque[float] = deque(maxlen=5000)  # when each was made: predictions per minute
        self._shown: str | None = None

    def write(self, predictions: list[Prediction]) -> None:
        """Log some predictions (the service log gets a line when the smoothed label changes)."""
        for prediction in predictions:
            record = prediction.to_dict()
            self._file.write(json.dumps(record) + "\n")
            self.last.append(record)
            self.times.append(time.time())
            if prediction.smoothed != self._shown:
                self._shown = prediction.smoothed
                log.info("prediction: %s (%.0f%%) at sample %d", prediction.smoothed, 100 * prediction.confidence,
                         prediction.end_sample)
        if predictions:
            self._file.flush()

    def close(self) -> None:
        """Close the file."""
        self._file.close()
