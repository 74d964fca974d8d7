"""Live inference on the incoming stream with LiteRT: sliding windows through the served path
(`tinynas.deploy.served`: confidence, the idle / unknown rule, smoothing by agreement).

Nothing here imports TensorFlow: the serving path stays small.
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from tinynas.anomaly.alarm import Alarm
from tinynas.anomaly.conditions import LIVE
from tinynas.anomaly.scoring import served_reading
from tinynas.anomaly.section import read_section, score_unit
from tinynas.data.windows import DataError
from tinynas.deploy.served import ServedPath, Smoother, Smoothing

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
    score: float | None = None
    """An anomaly scorer's score of the window (the card's threshold is in the same units); None: a classifier."""
    alarm: bool | None = None
    """An anomaly scorer's alarm after this window (k of the last n windows above the threshold)."""
    condition: str | None = None
    """A classical scorer keeping several operating conditions: the one the window was read under."""

    def to_dict(self) -> dict:
        """JSON-ready dict (a classifier's has no score or alarm keys)."""
        record = asdict(self)
        if self.score is None:
            del record["score"], record["alarm"]
        if self.condition is None:
            del record["condition"]
        return record


class LiveClassifier:
    """Classifies the newest window of a `SampleRing` every `hop` samples."""

    def __init__(self, model_path: str | Path, card: dict, ring, hop_samples: int, smoothing: int = 3) -> None:
        self.served = ServedPath.from_folder(model_path, card)
        self.model = self.served.model
        self.classes = self.served.classes
        self.preprocessing = self.served.preprocessing
        channels = ring.channels
        if self.preprocessing.channels != channels:  # a model restored or served for another sensor
            raise DataError(f"it reads {self.preprocessing.channels} channel(s) and the device sends {channels} (a "
                            f"model of another sensor: tinynas service models lists the others)")
        self.length = self.served.length
        self.ring = ring
        self.hop = max(1, hop_samples)
        self.next_end = max(ring.latest_sample, self.length)
        self.smoother = Smoother(Smoothing.from_card(card, smoothing))
        self.rule = self.served.rule

    def windows(self):
        """(end sample, window) for every hop that completed since the last call; a window with lost samples,
        or one the ring no longer holds, is skipped rather than classified as garbage."""
        while self.ring.latest_sample >= self.next_end:
            end = self.next_end
            self.next_end += self.hop
            window = self.ring.window(end - self.length, self.length)
            if window is not None:
                yield end, window

    def step(self) -> list[Prediction]:
        """Predictions for every hop that completed since the last call (skips gaps)."""
        out = []
        for end, window in self.windows():
            [answer] = self.served.answers(window[None])
            smoothed = self.smoother.update(answer.label, answer.confidence)
            out.append(Prediction(end, answer.label, answer.confidence, smoothed, answer.probabilities, answer.why))
        return out


ALARM, NORMAL_RUNNING = "ALARM", "normal"
"""What an anomaly scorer's predictions say (`smoothed`): the alarm is raised, or the machine runs normally."""


class LiveScorer(LiveClassifier):
    """An anomaly scorer on the stream: every hop, the window's score against the card's threshold, and the
    k-of-n alarm (tinynas.anomaly.alarm) over the verdicts."""

    def __init__(self, model_path: str | Path, card: dict, ring, hop_samples: int, k: int, n: int) -> None:
        super().__init__(model_path, card, ring, hop_samples, 1)
        section = read_section(card)
        assert section is not None  # the service serves a LiveScorer for an anomaly card only
        self.section = section
        self.unit = score_unit(section)
        self.alarm = Alarm(k, n)
        self.condition = LIVE
        """The operating condition windows are read under (the operator's), or LIVE: the one each looks most like."""

    def step(self) -> list[Prediction]:
        """Scores for every hop that completed since the last call (skips gaps, which do not count as normal)."""
        out = []
        for end, window in self.windows():
            scores, threshold, read_under = served_reading(self.section, self.model, self.preprocessing,
                                                           window[None], self.condition)
            steps = float(scores[0])
            anomalous = steps > threshold
            raised = self.alarm.update(anomalous)
            out.append(Prediction(end, "anomalous" if anomalous else NORMAL_RUNNING, 1.0,
                                  ALARM if raised else NORMAL_RUNNING, score=round(steps * self.unit, 4),
                                  alarm=raised, condition=read_under[0] if read_under else None))
        return out


class PredictionLog:
    """Appends predictions as JSON lines (flushed, not fsynced: they are cheap to lose)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None  # opened at the first prediction: a service that never serves writes none
        self.last: deque[dict] = deque(maxlen=20)
        self.times: deque[float] = deque(maxlen=5000)  # when each was made: predictions per minute
        self.scores: deque[tuple[float, float]] = deque(maxlen=240)  # an anomaly scorer's (time, score): the page
        self.alarm_since: float | None = None
        self._shown: str | None = None

    def write(self, predictions: list[Prediction]) -> None:
        """Log some predictions (the service log gets a line when the smoothed label changes)."""
        if not predictions:
            return
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")
        out = self._file
        for prediction in predictions:
            now = time.time()
            # Wall-clock time, epoch seconds and local ISO: a line matches the service log and the user's day.
            record = {"time": round(now, 3), "at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now)),
                      **prediction.to_dict()}
            out.write(json.dumps(record) + "\n")
            self.last.append(record)
            self.times.append(now)
            if prediction.score is not None:
                self.scores.append((now, prediction.score))
                if prediction.alarm and self.alarm_since is None:
                    self.alarm_since = now
                elif not prediction.alarm:
                    self.alarm_since = None
            if prediction.smoothed != self._shown:
                self._shown = prediction.smoothed
                if prediction.alarm is not None:
                    (log.warning if prediction.alarm else log.info)(
                        "anomaly alarm %s at sample %d (score %.3g)", "RAISED" if prediction.alarm else "cleared",
                        prediction.end_sample, prediction.score)
                else:
                    log.info("prediction: %s (%.0f%%) at sample %d", prediction.smoothed,
                             100 * prediction.confidence, prediction.end_sample)
        out.flush()

    def close(self) -> None:
        """Close the file (if one was opened)."""
        if self._file is not None:
            self._file.close()
            self._file = None
