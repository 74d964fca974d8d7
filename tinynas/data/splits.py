"""Train / validation / test splits that keep each recording group on one side."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinynas.data.windows import DataError, Windows


@dataclass(frozen=True)
class Split:
    """Indices into a `Windows` for each side, and the protocol that produced them."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    protocol: str

    def describe(self) -> dict:
        """JSON-ready summary (sizes and protocol) for cards and reports."""
        return {"protocol": self.protocol, "train": int(len(self.train)), "val": int(len(self.val)),
                "test": int(len(self.test))}


def _groups_for(cumulative: np.ndarray, wanted: float) -> int:
    """How many leading groups bring the window count closest to `wanted` (at least one)."""
    return int(np.argmin(np.abs(cumulative - wanted))) + 1


def group_split(windows: Windows, fractions: tuple[float, float, float] = (0.7, 0.1, 0.2),
                seed: int = 0) -> Split:
    """Split by recording group, stratified by class: every group lands wholly on one side.

    Groups are assigned to the class most of their windows carry; for each class its groups
    are shuffled and dealt so that validation and test each get at least one group and about
    `fractions` of the windows.
    """
    if len(fractions) != 3 or min(fractions) <= 0 or abs(sum(fractions) - 1) > 1e-6:
        raise DataError(f"split fractions must be three positive numbers summing to 1, got {fractions}")
    rng = np.random.default_rng(seed)
    names, inverse = np.unique(windows.groups, return_inverse=True)
    majority = np.array([np.bincount(windows.y[inverse == g]).argmax() for g in range(len(names))])
    sides: list[list[int]] = [[], [], []]
    for label in range(windows.classes):
        members = np.flatnonzero(majority == label)
        if len(members) == 0:
            continue
        if len(members) < 3:
            raise DataError(f"class {windows.class_names[label]!r} has {len(members)} recording group(s); "
                            f"a train/val/test split by recording needs at least 3")
        members = rng.permutation(members)
        sizes = np.array([np.sum(inverse == g) for g in members])
        total = sizes.sum()
        cumulative = np.cumsum(sizes)
        n_val = min(_groups_for(cumulative, fractions[1] * total), len(members) - 2)
        rest = cumulative[n_val:] - cumulative[n_val - 1]
        n_test = min(_groups_for(rest, fractions[2] * total), len(members) - n_val - 1)
        sides[1] += members[:n_val].tolist()
        sides[2] += members[n_val:n_val + n_test].tolist()
        sides[0] += members[n_val + n_test:].tolist()
    parts = [np.flatnonzero(np.isin(inverse, side)) for side in sides]
    for name, part in zip(("train", "validation", "test"), parts):
        if len(part) == 0:
            raise DataError(f"the {name} split is empty")
    return Split(parts[0], parts[1], parts[2],
                 f"by recording group, stratified by class, {fractions[0]:.0%}/{fractions[1]:.0%}/"
                 f"{fractions[2]:.0%} of windows, seed {seed}")


def temporal_split(windows: Windows, fractions: tuple[float, float, float] = (0.7, 0.1, 0.2)) -> Split:
    """Earlier windows train, later ones validate, the latest test, per class and session.

    Within each (class, session) sequence, windows are ordered by `time_index` and cut at the
    fraction boundaries. A window that overlaps (same recording, less than one window length
    apart) a window on an earlier side is dropped, so no window crosses a boundary.
    """
    if windows.time_index is None:
        raise DataError("a temporal split needs each window's time (time_index); this data has none")
    if len(fractions) != 3 or min(fractions) <= 0 or abs(sum(fractions) - 1) > 1e-6:
        raise DataError(f"split fractions must be three positive numbers summing to 1, got {fractions}")
    sessions = windows.sessions if windows.sessions is not None else windows.groups
    side = np.full(len(windows), -1)
    for label in range(windows.classes):
        for session in np.unique(sessions[windows.y == label]):
            members = np.flatnonzero((windows.y == label) & (sessions == session))
            members = members[np.argsort(windows.time_index[members], kind="stable")]
            if len(members) < 3:
                raise DataError(f"class {windows.class_names[label]!r} has {len(members)} window(s) in session "
                                f"{session!r}; a temporal split needs at least 3")
            cut_val = min(max(1, round(fractions[0] * len(members))), len(members) - 2)
            cut_test = min(max(cut_val + 1, round((fractions[0] + fractions[1]) * len(members))), len(members) - 1)
            side[members[:cut_val]] = 0
            side[members[cut_val:cut_test]] = 1
            side[members[cut_test:]] = 2
    length = windows.window_length
    for later in (1, 2):
        for index in np.flatnonzero(side == later):
            earlier = np.flatnonzero((side >= 0) & (side < later) & (windows.groups == windows.groups[index]))
            close = np.abs(windows.time_index[earlier] - windows.time_index[index]) < length
            if close.any():
                side[index] = -1
    dropped = int(np.sum(side == -1))
    protocol = (f"temporal per class and session: earliest {fractions[0]:.0%} train, next {fractions[1]:.0%} "
                f"validation, latest {fractions[2]:.0%} test" + (f"; {dropped} boundary-overlapping windows dropped"
                                                                  if dropped else ""))
    return Split(np.flatnonzero(side == 0), np.flatnonzero(side == 1), np.flatnonzero(side == 2), protocol)


PROTOCOLS = ("auto", "paper", "segment", "session", "group")


def make_split(windows: Windows, protocol: str = "auto", seed: int = 0) -> Split:
    """A named protocol for this data set; the protocol text says exactly what was done.

    - paper: the method's. CWRU: the first 80 % of each file's windows train (the last tenth of
      them validates, as Keras's validation_split does), the last 20 % test (160/40 with 200
      windows per file); contiguous blocks, not shuffled windows. ISL: stratified random 70/10/20
      by recording (each ISL recording is one window).
    - segment: temporal 70/10/20 within each recording (CWRU).
    - session: leave the last session out where every class has windows in two sessions or more;
      otherwise (ISL: each letter was recorded in one block on one day) temporal within each block.
    - group: by recording group, stratified by class, 70/10/20 (synthetic data, recorded sessions).
    - auto: segment for CWRU, session for ISL, group otherwise.
    """
    source = windows.provenance.get("source", "")
    if protocol not in PROTOCOLS:
        raise DataError(f"unknown split protocol {protocol!r}; choose one of: {', '.join(PROTOCOLS)}")
    if protocol == "auto":
        protocol = {"cwru": "segment", "isl": "session"}.get(source, "group")
    if protocol == "group":
        return group_split(windows, seed=seed)
    if protocol == "segment":
        split = temporal_split(windows, (0.7, 0.1, 0.2))
        return Split(split.train, split.val, split.test, "segment: " + split.protocol)
    if protocol == "paper":
        if source == "isl" or windows.time_index is None:
            split = group_split(windows, (0.7, 0.1, 0.2), seed=seed)
        else:
            split = temporal_split(windows, (0.72, 0.08, 0.2))
        return Split(split.train, split.val, split.test, "paper: " + split.protocol)
    return _session_split(windows)


def _session_split(windows: Windows) -> Split:
    if windows.sessions is None:
        raise DataError("a session split needs session labels; this data has none")
    names = np.unique(windows.sessions)
    shared = len(names) >= 2 and all(
        len(np.unique(windows.sessions[windows.y == label])) >= 2 for label in range(windows.classes))
    if not shared:
        split = temporal_split(windows, (0.7, 0.1, 0.2))
        return Split(split.train, split.val, split.test,
                     "session (no class spans two sessions, so temporal within each class's session): "
                     + split.protocol)
    held_out = names[-1]
    train, val = [], []
    times = windows.time_index if windows.time_index is not None else np.arange(len(windows))
    for label in range(windows.classes):
        members = np.flatnonzero((windows.sessions != held_out) & (windows.y == label))
        members = members[np.argsort(times[members], kind="stable")]
        cut = min(len(members) - 1, max(1, int(round(0.9 * len(members)))))
        train += members[:cut].tolist()
        val += members[cut:].tolist()
    return Split(np.sort(train), np.sort(val), np.flatnonzero(windows.sessions == held_out),
                 f"session: train on sessions {', '.join(names[:-1])} (latest tenth of each class validates), "
                 f"test on session {held_out}")
