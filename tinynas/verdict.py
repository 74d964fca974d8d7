"""Accuracy as a verdict, not a fact: the held-out count, a 95 % interval, per-class recall, and the deploy gate.

A service plan records few windows per class (gestures4: 5 repetitions, so 4 held-out windows in all); "100 %"
on 4 windows is an interval of 51-100 %, and 2 of 4 right is any model from 15 % to 85 %. Every accuracy the
user sees carries its count and its Wilson interval (it stays inside [0, 1] and is honest at 0 and n hits,
where the normal approximation is not), and the deploy gate decides on the interval, not on the point:

- deploy when the interval's lower bound reaches the minimum accuracy;
- refuse when even its upper bound stays below it (the model is wrong, more windows will not save it);
- otherwise the data cannot decide: say how many more windows per class to record for it to.

Windows cut with a hop from long recordings (a machine's blocks, a recording re-cut to fit a small target) overlap and
share their recording: 122 such windows from 2 recordings are 2 measurements, not 122. Such a count is over the
recordings (`held_out` with `groups`): a recording is right when more than half of its windows are, and the interval is
Wilson's over recordings ("2 of 2 held-out recordings, 113 of their 122 windows right; 95% interval 34%-100%").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

Z95 = 1.959963984540054
"""The normal quantile of a two-sided 95 % interval."""


def wilson(hits: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of `hits` successes in `n` trials ((0, 1) when n is 0)."""
    if n <= 0:
        return 0.0, 1.0
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # Exact at the ends (rounding leaves 1e-17 there, and "0 of 100" must read as a bound of 0, not above it).
    low = 0.0 if hits == 0 else max(0.0, centre - half)
    high = 1.0 if hits == n else min(1.0, centre + half)
    return low, high


RECORDINGS = "recordings"
"""The unit of a count over the recordings the windows were cut from (`HeldOut.unit`); else "windows"."""


@dataclass(frozen=True)
class HeldOut:
    """The hits of a model on held-out windows, and what they allow one to say."""

    hits: int
    windows: int
    """What was counted: windows, or with `unit` RECORDINGS the independent recordings the windows come from (the
    name stays: cards and states have always kept the count under "windows")."""
    unit: str = "windows"
    window_hits: int | None = None
    """With `unit` RECORDINGS: the windows right, of `window_count` windows cut from those recordings."""
    window_count: int | None = None

    @property
    def accuracy(self) -> float | None:
        return self.hits / self.windows if self.windows else None

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.hits, self.windows)

    def to_dict(self) -> dict:
        """JSON-ready: accuracy, hits, windows and the 95 % interval (rounded to 4 places)."""
        low, high = self.interval
        by_recording = ({"unit": RECORDINGS, "window_hits": self.window_hits, "window_count": self.window_count}
                        if self.unit == RECORDINGS else {})
        return {"accuracy": None if self.accuracy is None else round(self.accuracy, 4), "hits": self.hits,
                "windows": self.windows, "interval": [round(low, 4), round(high, 4)], **by_recording}

    @classmethod
    def from_dict(cls, section: dict) -> HeldOut | None:
        """The count a card or state keeps (`to_dict`), None when it holds none."""
        hits, windows = section.get("hits"), section.get("windows")
        if not isinstance(hits, int) or not isinstance(windows, int):
            return None
        if section.get("unit") != RECORDINGS:
            return cls(hits, windows)
        return cls(hits, windows, RECORDINGS, section.get("window_hits"), section.get("window_count"))

    def describe(self, what: str = "held-out windows") -> str:
        """E.g. '75% (3 of 4 held-out windows; 95% interval 30%-95%)'."""
        return describe(self.to_dict(), what)


def describe(held: dict, what: str = "held-out windows") -> str:
    """A `HeldOut.to_dict()` (as read back from a card or the state) in words; '-' when it holds no count."""
    try:
        hits, windows = int(held["hits"]), int(held["windows"])
        low, high = (float(v) for v in held["interval"])
    except (KeyError, TypeError, ValueError):
        return "-"
    if not windows:
        return f"not measured (no {what})"
    if held.get("unit") == RECORDINGS:
        # Counted over the recordings the windows were cut from: said so, with the windows they hold.
        what = what.replace("windows", RECORDINGS) if "windows" in what else f"{what} (recordings)"
        right, count = held.get("window_hits"), held.get("window_count")
        if isinstance(right, int) and isinstance(count, int):
            what += f", {right} of their {count} windows right"
    return f"{hits / windows:.0%} ({hits} of {windows} {what}; 95% interval {low:.0%}-{high:.0%})"


def served_accuracy(held: dict | None, accuracy: float | None = None) -> str:
    """A served model's accuracy in words, with what it was measured on: its deploy check's held-out windows ('int8
    accuracy 92% (11 of 12 held-out windows; ...)'), or, after a recalibration, the new windows it was checked on
    and how (`held["measure"]`: float figures cross-validated over the new repetitions are not int8 ones); the bare
    `accuracy` only for a record that kept no count."""
    measure = (held or {}).get("measure")
    stream = measure == "on the stream"  # the deploy gate's: held-out signs answered as serving answers them
    rewear_stream = bool(measure) and not stream and "stream" in str(measure)  # a re-wear's signs of today's wear
    words = describe(held or {}, "held-out signs, answered as live on the stream" if stream else
                     f"signs of today's wear, {measure}" if rewear_stream else
                     f"new windows, {measure}" if measure else "held-out windows")
    if words == "-":
        words = "not measured" if accuracy is None else f"{accuracy:.3f}"
    return ("signs recognised " if stream or rewear_stream else "accuracy " if measure else "int8 accuracy ") + words


def shared_recordings(groups) -> bool:
    """Whether some recording (`groups`: each window's) gave more than one of the windows: they are not independent."""
    return groups is not None and len(np.unique(np.asarray(groups))) < len(groups)


def by_recording(predictions, labels, groups) -> tuple[np.ndarray, np.ndarray]:
    """Each recording's (answer, label), recordings in order of first window: its label is the one most of its windows
    carry; its answer that label when more than half of its windows are right, else its most frequent wrong answer."""
    predictions, labels, groups = np.asarray(predictions, dtype=int), np.asarray(labels, dtype=int), np.asarray(groups)
    _, first, inverse = np.unique(groups, return_index=True, return_inverse=True)
    answers, truths = [], []
    for recording in np.argsort(first, kind="stable"):
        mine = inverse == recording
        said, truth = predictions[mine], int(np.bincount(labels[mine]).argmax())
        right = int(np.sum(said == truth))
        wrong = said[said != truth]
        answers.append(truth if 2 * right > len(said) else int(np.bincount(wrong).argmax()) if len(wrong) else truth)
        truths.append(truth)
    return np.asarray(answers, dtype=int), np.asarray(truths, dtype=int)


def held_out(predictions, labels, groups=None) -> HeldOut:
    """The hits of `predictions` against `labels`: over the windows, or, when `groups` (each window's recording) shows
    windows sharing a recording (cut with a hop: they overlap), over the recordings (`by_recording`)."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    windows = HeldOut(int(np.sum(predictions == labels)), int(len(labels)))
    if not shared_recordings(groups):
        return windows
    answers, truths = by_recording(predictions, labels, groups)
    return HeldOut(int(np.sum(answers == truths)), int(len(truths)), RECORDINGS, windows.hits, windows.windows)


def per_class(predictions, labels, classes: int, groups=None) -> dict:
    """Recall and support per class and the confusion matrix (rows: true class, columns: predicted), JSON-ready; over
    recordings (each by its windows, `by_recording`) when `groups` shows windows sharing one, as `held_out` counts.

    A class with no held-out window has recall None (not 0: nothing was measured)."""
    predictions, labels = np.asarray(predictions, dtype=int), np.asarray(labels, dtype=int)
    unit = {}
    if shared_recordings(groups):
        predictions, labels = by_recording(predictions, labels, groups)
        unit = {"unit": RECORDINGS}
    confusion = np.zeros((classes, classes), dtype=int)
    np.add.at(confusion, (labels, predictions), 1)
    support = confusion.sum(axis=1)
    recall = [round(float(confusion[c, c] / support[c]), 4) if support[c] else None for c in range(classes)]
    return {"recall": recall, "support": [int(s) for s in support], "confusion": confusion.tolist(), **unit}


@dataclass(frozen=True)
class GateVerdict:
    """What the deploy gate decided, and the words for the user."""

    decision: str
    """"deploy", "refuse" (the model is below the minimum whatever more data says) or "undecided"."""
    text: str
    more_per_class: int = 0
    """With "undecided": how many more recordings per class the held-out count alone would need to decide."""


RESOLUTION = 0.1
"""How far above the minimum a model is assumed to be when its observed accuracy is not: the count to record is then
the one that would show such a model clears the minimum."""


def windows_needed(accuracy: float, minimum: float, limit: int = 100_000) -> int | None:
    """The fewest held-out windows at which an observed `accuracy` would put the 95 % interval's lower bound at or
    above `minimum`; None when `accuracy` is not above `minimum` (no count would) or past `limit`."""
    if accuracy <= minimum:
        return None
    n = 1
    while n <= limit:
        if wilson(round(accuracy * n), n)[0] >= minimum:
            return n
        n = n + 1 if n < 64 else n + max(1, n // 16)
    return None


def deploy_gate(held: HeldOut, minimum: float, classes: int, test_share: float,
                what: str = "held-out windows") -> GateVerdict:
    """Deploy, refuse or ask for more data, from the held-out hits and the minimum accuracy.

    `test_share` is the part of each class's recorded windows that lands on the held-out side (the split's),
    so that "N more windows per class" is what the user records, not what the test side receives. `what` names the
    units counted (windows; the stream's signs).
    """
    if not held.windows:
        return GateVerdict("undecided", f"no {what} to check the model on", more_per_class=0)
    low, high = held.interval
    said = held.describe(what)
    if low >= minimum:
        return GateVerdict("deploy", f"{said}: at least {minimum:.0%} at 95% confidence")
    if high < minimum:
        return GateVerdict("refuse", f"{said}: below {minimum:.0%} even at the interval's top")
    # At or below the minimum on these few windows, the model may still be better: count what would show a
    # model RESOLUTION above the minimum that it is.
    observed = held.accuracy or 0.0
    needed = windows_needed(observed if observed > minimum else min(1.0, minimum + RESOLUTION), minimum)
    if needed is None:  # a minimum of 1.0 - RESOLUTION or above: no count shows it
        return GateVerdict("refuse", f"{said}: cannot show at least {minimum:.0%}")
    if needed <= held.windows:  # enough windows to have shown such a model: this one is not it
        return GateVerdict("refuse", f"{said}: not above {minimum:.0%}")
    more_test = max(1, needed - held.windows)
    more = max(1, math.ceil(more_test / max(classes, 1) / max(test_share, 1e-3)))
    # The words say what the count shows; what to record is the caller's to say (`tinynas.service.gate`: in
    # whole recordings, bounded by the plan, with the minutes it takes).
    return GateVerdict("undecided", f"{said}: too few to tell whether it reaches {minimum:.0%}",
                       more_per_class=more)


@dataclass(frozen=True)
class Paired:
    """Two models judged on the same windows: where the new one is right and the old wrong (`better`), the other
    way round (`worse`), out of `windows`. A decision on these is stable: the windows both get right or both get
    wrong say nothing about which is better, and one window more or less moves it by one, not by a verdict."""

    better: int
    worse: int
    windows: int
    unit: str = "windows"
    """What was counted: the windows the guide cut, or signs judged on the stream."""

    def __add__(self, other: Paired) -> Paired:
        unit = self.unit if self.unit == other.unit or not other.windows else \
            other.unit if not self.windows else "windows and signs"
        return Paired(self.better + other.better, self.worse + other.worse, self.windows + other.windows, unit)

    @property
    def p_worse(self) -> float:
        """One-sided sign test: the chance of at least `worse` of the differing windows going against the new model
        if both were equally good (small: it is worse, with that confidence)."""
        return _binomial_tail(self.worse, self.better + self.worse)

    @property
    def p_better(self) -> float:
        return _binomial_tail(self.better, self.better + self.worse)

    def describe(self, what: str) -> str:
        """E.g. 'today's wear: better on 5, worse on 1 of 16 windows'."""
        return f"{what}: better on {self.better}, worse on {self.worse} of {self.windows} {self.unit}"

    def to_dict(self) -> dict:
        return {"better": self.better, "worse": self.worse, "windows": self.windows, "unit": self.unit,
                "p_better": round(self.p_better, 4), "p_worse": round(self.p_worse, 4)}


def paired(before_right, after_right, unit: str = "windows") -> Paired:
    """The paired count of an old and a new model's answers (right or not) on the same windows (or signs)."""
    before, after = np.asarray(before_right, dtype=bool), np.asarray(after_right, dtype=bool)
    return Paired(int(np.sum(after & ~before)), int(np.sum(before & ~after)), int(len(before)), unit)


def _binomial_tail(k: int, n: int) -> float:
    """P(X >= k) for X ~ Binomial(n, 1/2), exactly."""
    if n <= 0 or k <= 0:
        return 1.0
    return float(sum(math.comb(n, i) for i in range(k, n + 1)) / 2 ** n)
