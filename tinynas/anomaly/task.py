"""The anomaly task's data: normal windows only, split, and the synthetic anomalies the scorer learns against.

`--task anomaly` searches the same A(k, c) family under the same budgets as classification, as a
scorer: each candidate is a two-output network trained to tell the user's normal windows from synthetic
anomalies made of them (`perturb.py`), and its score is the difference of its two logits. So the search,
the workers, int8 export, the cost model and the generated C runtime are the classifier's, unchanged;
what differs is which windows go in, how a candidate is ranked, and the threshold (`threshold.py`).

The normal windows are split first (temporal within each recording where times are known, so every
condition has windows on every side); each side's synthetic anomalies are made from that side's normal
windows only, so the validation loss that ranks candidates (the selection criterion) and the test side
that sets the threshold never see a window the scorer trained on. Real fault windows never enter:
data with other classes than the normal one is refused (give them with --test-data to evaluate).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import numpy as np

from tinynas.anomaly.perturb import FAMILIES, SEVERITY_RANGE, perturb, shaft_hz
from tinynas.anomaly.threshold import check_enough, check_rate
from tinynas.data.splits import Split, group_split, make_split, temporal_split
from tinynas.data.windows import DataError, Windows
from tinynas.errors import UsageError
from tinynas.modes import Task

TASKS = tuple(Task)
NORMAL = "normal"
SYNTHETIC = "synthetic"
CLASSES = (NORMAL, SYNTHETIC)
"""The scorer's outputs, in order: the score is logit[1] - logit[0]."""

SPLIT_FRACTIONS = (0.5, 0.2, 0.3)
"""The anomaly task's split when --split is auto: temporal within each recording (by recording where the
data has no times), so that every operating condition has normal windows to calibrate its threshold on
(leave-one-session-out would hold a whole condition out of training). Less trains than for a classifier
and more is held out: the threshold's rate is only as fine as the calibration windows are many."""


def check_task(task) -> str:
    """The --task option, checked."""
    if task not in TASKS:
        raise UsageError(f"unknown task {task!r}; choose classify (one class per state) or anomaly "
                        f"(learnt from normal running only)")
    return task


def normal_only(windows: Windows, what: str = "the training data") -> Windows:
    """`windows` as the normal class alone: the one class it holds, or its class named "normal" when it is the
    only one; any other class is refused (a fault recording must never train or tune the scorer)."""
    names = windows.class_names
    if len(names) == 1:
        label = names[0]
    elif NORMAL in names:
        others = [name for name in names if name != NORMAL]
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise DataError(f"{what} holds other classes than {NORMAL} ({shown}): anomaly detection learns from normal "
                        f"running only, so give only the normal windows to train on (e.g. files=97 for CWRU) and "
                        f"the others with --test-data to evaluate on")
    else:
        raise DataError(f"{what} holds {len(names)} classes ({', '.join(names[:5])}) and none is named {NORMAL}: "
                        f"give one class of normal running (or name it {NORMAL})")
    return Windows(windows.x, np.zeros(len(windows), dtype=np.int64), windows.groups, (label,),
                   windows.sample_rate_hz, windows.channel_names, windows.provenance, windows.sessions,
                   windows.time_index)


@dataclass(frozen=True)
class AnomalyData:
    """What a study of the anomaly task searches on."""

    windows: Windows
    """Normal windows (class 0) followed by synthetic anomalies made from them (class 1)."""
    split: Split
    """Indices into `windows`; each side's synthetic windows are made from that side's normal ones."""
    normal_count: int
    """The first `normal_count` of `windows` are the user's (the rest synthetic)."""
    calibration: np.ndarray
    """Indices into `windows` of the held-out normal windows that set the threshold (the normal test side)."""
    normal_split: Split
    """The split of the normal windows alone (the protocol text the card shows)."""
    families: dict[str, int]
    """How many synthetic windows of each family were made."""

    @property
    def train_normal(self) -> np.ndarray:
        """Indices of the normal training windows (what preprocessing is fitted on)."""
        return self.split.train[self.split.train < self.normal_count]

    def describe(self) -> dict:
        """The card's anomaly.training section."""
        return {"normal_windows": int(self.normal_count),
                "synthetic_windows": int(len(self.windows) - self.normal_count),
                "families": self.families, "severity_range": list(SEVERITY_RANGE),
                "normal_split": self.normal_split.describe(),
                "calibration_windows": int(len(self.calibration))}


def prepare(windows: Windows, protocol: str, seed: int, rate: float, what: str = "the training data") -> AnomalyData:
    """Split the normal windows, check there are enough held out for `rate`, and add the synthetic anomalies."""
    rate = check_rate(rate)
    normal = normal_only(windows, what)
    if protocol != "auto":
        split = make_split(normal, protocol, seed=seed)
    elif normal.time_index is not None:
        split = temporal_split(normal, SPLIT_FRACTIONS)
    else:
        split = group_split(normal, SPLIT_FRACTIONS, seed=seed)
    split, copies = _without_copies(normal, split)
    repeated = (f"; {copies} held-out windows were exact copies of training windows and do not count (a recording "
                f"that repeats itself, such as a short file played in a loop: record new running)" if copies else "")
    if not len(split.train) or not len(split.val):
        raise DataError(f"{what}: {len(normal)} normal windows leave none to train or validate on: record "
                        f"longer{repeated}")
    check_enough(len(split.test), rate, f"{what} ({len(normal)} normal windows; its test side of "
                 f"{len(split.test)} is held out to set the threshold{repeated})")
    rng = np.random.default_rng([seed, 0xA0])
    shaft = shaft_hz(normal.provenance)
    sides = [split.train, split.val, split.test]
    made, counts = [], dict.fromkeys(FAMILIES, 0)
    for side in sides:
        x, how = perturb(normal.x[side], normal.sample_rate_hz, rng, shaft)
        made.append(x)
        for item in how:
            counts[item.family] += 1
    n = len(normal)
    source = np.concatenate(sides)
    x = np.concatenate([normal.x, *made])
    y = np.concatenate([np.zeros(n, np.int64), np.ones(len(source), np.int64)])
    groups = np.concatenate([normal.groups, np.char.add(normal.groups[source].astype(str), "+synthetic")])
    sessions = None if normal.sessions is None else np.concatenate([normal.sessions, normal.sessions[source]])
    times = None if normal.time_index is None else np.concatenate([normal.time_index, normal.time_index[source]])
    provenance = {**normal.provenance, "task": "anomaly", "normal_class": normal.class_names[0]}
    derived = Windows(x, y, groups, CLASSES, normal.sample_rate_hz, normal.channel_names, provenance, sessions,
                      times)
    offsets = np.cumsum([n] + [len(side) for side in sides])
    synthetic = [np.arange(offsets[i], offsets[i + 1]) for i in range(3)]
    derived_split = Split(np.concatenate([split.train, synthetic[0]]), np.concatenate([split.val, synthetic[1]]),
                          np.concatenate([split.test, synthetic[2]]),
                          f"{split.protocol}; each side's synthetic anomalies made from its own normal windows",
                          split.held_out, split.held_out_reason)
    return AnomalyData(derived, derived_split, n, np.asarray(split.test), split, counts)


def _without_copies(normal: Windows, split: Split) -> tuple[Split, int]:
    """`split` without the validation and test windows that are exact copies of an earlier side's: a scorer
    remembers the windows it trained on, so a copy would set its threshold on what it has seen (a short
    recording played in a loop gives nothing but copies). The number dropped is said in the protocol."""
    keys = [hashlib.blake2b(window.tobytes(), digest_size=16).digest() for window in normal.x]
    seen = {keys[i] for i in split.train}
    sides = []
    for side in (split.val, split.test):
        kept = np.array([i for i in side if keys[i] not in seen], dtype=np.int64)
        seen |= {keys[i] for i in kept}
        sides.append(kept)
    copies = len(split.val) + len(split.test) - sum(len(side) for side in sides)
    if not copies:
        return split, 0
    return replace(split, val=sides[0], test=sides[1],
                   protocol=f"{split.protocol}; {copies} held-out windows that copied training windows dropped"), copies


def score_of(logits: np.ndarray) -> np.ndarray:
    """The anomaly score of a scorer's outputs (n, 2): logit[synthetic] - logit[normal]."""
    logits = np.asarray(logits, dtype=np.float64)
    return logits[:, 1] - logits[:, 0]
